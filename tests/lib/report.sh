# tests/lib/report.sh - helpers shared by the `heapctl report` tests (sourced).
#
# A test script does:
#     source "$(dirname "$0")/../lib/report.sh"
#     hr_setup <test-name> "$@"        # BUILD, LIB, HEAPCTL, WORK (removed at exit)
#     ... checks, each calling fail "..." on a mismatch ...
#     finish                           # exit 1 if anything failed
#
# Built on tests/lib/prof.sh (hc_setup, fail, finish, compile, run, jp,
# jp_total, check_*): every mismatch is reported as "FAIL <name>: <what>" on
# stderr and counted, so one run shows all of them.

source "$(dirname "${BASH_SOURCE[0]}")/prof.sh"

JEMALLOC_SO=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
TCMALLOC_SO=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4

hr_setup() {
	hc_setup "$@"
	HEAPCTL=$BUILD/heapctl
	if [ ! -x "$HEAPCTL" ]; then
		echo "FAIL $TEST_NAME: $HEAPCTL missing (run make)" >&2
		exit 1
	fi
}

# hr_need <command>...: the tools a test cannot do without.
hr_need() {
	local c
	for c in "$@"; do
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "FAIL $TEST_NAME: $c not installed" >&2
			exit 1
		fi
	done
}

# hr_free_port: a TCP port on 127.0.0.1 that nobody listens on now.
hr_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# hr_debuginfod <dir> <build id> <executable|debuginfo>: Debian's debuginfod
# serving the ELF files under <dir> (HR_DFD_URL its address, HR_DFD_PID its
# pid, its log $WORK/server.log).  Returns 1, with a failure reported, when
# it does not serve that build id's file within 30 s.
hr_debuginfod() {
	local port
	port=$(hr_free_port)
	debuginfod -F "$1" -p "$port" -d "$WORK/db.sqlite" -t 0 -g 0 >"$WORK/server.log" 2>&1 &
	HR_DFD_PID=$!
	HR_DFD_URL=http://127.0.0.1:$port
	for _ in $(seq 150); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$HR_DFD_URL/buildid/$2/$3")" != 200 ] || return 0
		sleep 0.2
	done
	fail "debuginfod did not serve $2 within 30 s: $(tail -5 "$WORK/server.log")"
	return 1
}

# hr <tag> <args...>: `heapctl report args...` run in $WORK; stdout in
# $WORK/<tag>.out, stderr in $WORK/<tag>.err, the exit status in RC.
hr() {
	local tag=$1
	shift
	run "$tag" "$WORK" "$HEAPCTL" report "$@"
}

# hr_ok <tag> <args...>: as hr, and a failure reported unless it exits 0.
# Returns 1 when it did not.
hr_ok() {
	local tag=$1
	hr "$@"
	if [ "$RC" -ne 0 ]; then
		shift
		fail "$tag: heapctl report $* exited $RC: $(head -3 "$WORK/$tag.err")"
		return 1
	fi
	return 0
}

# hr_err <tag> <status> <args...>: heapctl report must exit with exactly
# <status>, print exactly one line "heapctl: ..." on stderr and nothing on
# stdout.
hr_err() {
	local tag=$1 want=$2
	shift 2
	hr "$tag" "$@"
	if [ "$RC" -ne "$want" ]; then
		fail "$tag: heapctl report $* exited $RC, expected $want (stderr: $(head -2 "$WORK/$tag.err"))"
	fi
	local lines
	lines=$(wc -l <"$WORK/$tag.err")
	if [ "$lines" -ne 1 ] || [ "$(wc -c <"$WORK/$tag.err")" -le 1 ]; then
		fail "$tag: heapctl report $*: expected one line on stderr, got $lines: $(head -c 300 "$WORK/$tag.err")"
	elif ! grep -q '^heapctl: ' "$WORK/$tag.err"; then
		fail "$tag: heapctl report $*: stderr does not start with 'heapctl: ': $(cat "$WORK/$tag.err")"
	fi
	if [ -s "$WORK/$tag.out" ]; then
		fail "$tag: heapctl report $*: expected nothing on stdout, got: $(head -c 200 "$WORK/$tag.out")"
	fi
	return 0
}

# ---- profiles -----------------------------------------------------------

# the_file <glob-pattern> <what>: FOUND= the one file matching; a failure
# reported (and false) when there is not exactly one.
the_file() {
	local pat=$1 what=$2
	local files=()
	FOUND=
	# shellcheck disable=SC2206
	files=($pat)
	if [ "${#files[@]}" -ne 1 ] || [ ! -f "${files[0]}" ]; then
		fail "$what: expected one file $pat, found: $(ls -d $pat 2>/dev/null | tr '\n' ' ')"
		return 1
	fi
	FOUND=${files[0]}
}

# The prof_* functions run a program (in its own directory) under a
# profiling allocator and set DUMP to the profile it wrote at exit; on
# failure DUMP is empty, a failure is reported and they return 1.  They set
# variables, so call them directly, not in $(...).

# prof_with <tag> <prog> <what> <glob> VAR=VALUE...: run prog with that
# environment; the profile it leaves must be the one file matching glob.
prof_with() {
	local tag=$1 prog=$2 what=$3 glob=$4
	shift 4
	DUMP=
	run "$tag" "$(dirname "$prog")" "$@" "$prog"
	if [ "$RC" -ne 0 ]; then
		fail "$tag: $(basename "$prog") under $what exited $RC: $(head -3 "$WORK/$tag.err")"
		return 1
	fi
	the_file "$glob" "$tag: $what profile" || return 1
	DUMP=$FOUND
}

# prof_heapctl <tag> <prog> <conf>: libheapctl.so with prof:true,
# prof_final:true and the given HEAPCTL_CONF settings; the dump is
# $WORK/<tag>.PID.0.f.heap.  prof_jemalloc: the same with MALLOC_CONF.
prof_heapctl() {
	prof_with "$1" "$2" libheapctl.so "$WORK/$1.*.f.heap" LD_PRELOAD="$LIB" \
		HEAPCTL_CONF="prof:true,prof_final:true,prof_prefix:$WORK/$1${3:+,$3}"
}
prof_jemalloc() {
	prof_with "$1" "$2" libjemalloc "$WORK/$1.*.f.heap" LD_PRELOAD="$JEMALLOC_SO" \
		MALLOC_CONF="prof:true,prof_final:true,prof_prefix:$WORK/$1${3:+,$3}"
}

# prof_tcmalloc <tag> <prog>: gperftools' heap profiler (HEAPPROFILE); the
# profile written at exit is $WORK/<tag>.0001.heap.
prof_tcmalloc() {
	prof_with "$1" "$2" libtcmalloc "$WORK/$1.0001.heap" LD_PRELOAD="$TCMALLOC_SO" HEAPPROFILE="$WORK/$1"
}

# write_inline_prog <file.c>: a program whose only allocation site is an
# always_inline function ("inner", line MARK_INNER) inlined into "outer"
# (line MARK_OUTER); build it with -O2 -g.
write_inline_prog() {
	cat >"$1" <<'EOF'
#include <stdio.h>
#include <stdlib.h>

void *keep[1000];

static inline __attribute__((always_inline)) void *inner(size_t n)
{
	return malloc(n); /* MARK_INNER */
}

__attribute__((noinline)) void outer(void)
{
	for (int i = 0; i < 1000; i++)
		keep[i] = inner(1000 + (size_t)i); /* MARK_OUTER */
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	outer();
	printf("%p\n", keep[5]);
	return 0;
}
EOF
}

# fill_prog_dump: $WORK/p.c (fill_a and fill_b allocate through an inlined
# grab()), built with -O2 -g and a build id as $WORK/bin/p (a copy in
# $WORK/p.full) and run under the library with every allocation sampled;
# DUMP= its final dump.
fill_prog_dump() {
	cat >"$WORK/p.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
void *keep[5000];
int nkeep;
static inline __attribute__((always_inline)) void *grab(size_t n)
{
	void *p = malloc(n);
	memset(p, 1, n);
	return p;
}
__attribute__((noinline)) void fill_a(int n) { for (int i = 0; i < n; i++) keep[nkeep++] = grab(1024); }
__attribute__((noinline)) void fill_b(int n) { for (int i = 0; i < n; i++) keep[nkeep++] = grab(4096); }
int main(void)
{
	fill_a(1000);
	fill_b(300);
	return 0;
}
EOF
	mkdir -p "$WORK/bin" "$WORK/d"
	gcc -O2 -g -fno-omit-frame-pointer -Wl,--build-id -o "$WORK/bin/p" "$WORK/p.c"
	cp "$WORK/bin/p" "$WORK/p.full"
	run prog "$WORK" LD_PRELOAD="$BUILD/libheapctl.so" \
		HEAPCTL_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:"$WORK/d/p" "$WORK/bin/p"
	check_eq "program exit" "$RC" 0
	DUMP=$(ls "$WORK"/d/p.*.f.heap | head -1)
}

# ---- the text view ------------------------------------------------------
# Rows are "flat flat% sum% cum cum% NAME", NAME possibly with spaces
# ("inner (inline)", "f /a/b.c:12"), the same columns as jeprof --text.

# row_field <file> <name> <column 1..5>: that column of the row, or "absent".
row_field() {
	awk -v f="$2" -v c="$3" '
	    /^Total/ { next }
	    NF >= 6 && $1 ~ /^-?[0-9.]+$/ {
		n = $0
		sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ /, "", n)
		if (n == f) { print $c; found = 1; exit }
	    }
	    END { if (!found) print "absent" }' "$1"
}
row_flat() { row_field "$1" "$2" 1; }
row_cum() { row_field "$1" "$2" 4; }

# row_names <file>: every row's name, one a line.
row_names() {
	awk '/^Total/ { next }
	    NF >= 6 && $1 ~ /^-?[0-9.]+$/ {
		n = $0
		sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ /, "", n)
		print n
	    }' "$1"
}

# row_line <file> <name>: the whole row (flat and cum and name, no
# percentages), or "absent".
row_line() {
	local fl cu
	fl=$(row_flat "$1" "$2")
	cu=$(row_cum "$1" "$2")
	if [ "$fl" = absent ]; then
		echo absent
	else
		echo "$fl $cu $2"
	fi
}

# ---- go tool pprof ------------------------------------------------------

# gopp <out> <pprof args...>: `go tool pprof args` into <out> (stderr in
# <out>.err); false, with a failure reported, when it fails.  HOME is the
# work dir, so nothing of the caller's pprof settings is used or written.
gopp() {
	local out=$1
	shift
	if ! (cd "$WORK" && HOME=$WORK timeout 50 go tool pprof -symbolize=none "$@") >"$out" 2>"$out.err" </dev/null; then
		fail "go tool pprof $* failed: $(head -3 "$out.err")"
		return 1
	fi
	return 0
}

# pp_total <pprof -top output>: the "of N total" of the header, in plain
# units (bytes or count): pprof may write 1.5MB, 12.3kB, 512B or 1234.
pp_total() {
	awk '/^Showing nodes accounting for / {
		for (i = 1; i <= NF; i++) if ($(i + 1) == "total") { v = $i; break }
		m = 1
		if (v ~ /TB$/) { m = 1024 ^ 4; sub(/TB$/, "", v) }
		else if (v ~ /GB$/) { m = 1024 ^ 3; sub(/GB$/, "", v) }
		else if (v ~ /MB$/) { m = 1024 ^ 2; sub(/MB$/, "", v) }
		else if (v ~ /kB$/) { m = 1024; sub(/kB$/, "", v) }
		else if (v ~ /B$/) { sub(/B$/, "", v) }
		printf "%.0f\n", v * m; found = 1; exit
	    }
	    END { if (!found) print "absent" }' "$1"
}

# pp_flat <pprof -top -unit=B output> <function>: its flat value (plain
# number, the unit letter removed), or "absent".
pp_flat() {
	awk -v f="$2" '$6 == f && NF == 6 { v = $1; sub(/[A-Za-z]+$/, "", v); print v; found = 1; exit }
	    END { if (!found) print "absent" }' "$1"
}
