# tests/lib/prof.sh - helpers shared by the heap profiler tests (sourced).
#
# A test script does:
#     source "$(dirname "$0")/../lib/prof.sh"
#     hc_setup <test-name> "$@"        # BUILD, LIB, WORK (removed at exit)
#     ... checks, each calling fail "..." on a mismatch ...
#     finish                           # exit 1 if anything failed
#
# Failures are reported as "FAIL <name>: <what>" on stderr and counted, so
# one run shows every mismatch, not only the first.

hc_setup() {
	TEST_NAME=$1
	local build=${2:-}
	if [ -z "$build" ]; then
		echo "usage: $0 /abs/path/to/build" >&2
		exit 2
	fi
	BUILD=$(cd "$build" && pwd)
	LIB=$BUILD/libheapctl.so
	FAILS=0
	if [ ! -f "$LIB" ] || [ ! -f "$BUILD/include/heapctl.h" ]; then
		echo "FAIL $TEST_NAME: $LIB or $BUILD/include/heapctl.h missing (run make)" >&2
		exit 1
	fi
	if ! command -v jeprof >/dev/null 2>&1; then
		echo "FAIL $TEST_NAME: jeprof not installed (Debian libjemalloc-dev)" >&2
		exit 1
	fi
	# nothing from the caller's environment may configure the runs
	unset MALLOC_CONF HEAPCTL_CONF LD_PRELOAD
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/hcprof-$TEST_NAME.XXXXXX")
	if [ -n "${HC_KEEP:-}" ]; then      # debugging: keep the work dir
		echo "$TEST_NAME: work dir $WORK" >&2
	else
		trap 'rm -rf "$WORK"' EXIT
	fi
	CFLAGS_T=(-O1 -g -fno-omit-frame-pointer -fno-inline -I"$BUILD/include")
}

fail() {
	echo "FAIL $TEST_NAME: $*" >&2
	FAILS=$((FAILS + 1))
}

finish() {
	if [ "$FAILS" -gt 0 ]; then
		exit 1
	fi
	exit 0
}

# compile <out> <src> [gcc args...]: a program run with LD_PRELOAD.
compile() {
	local out=$1 src=$2
	shift 2
	if ! gcc "${CFLAGS_T[@]}" -o "$out" "$src" "$@" -pthread -ldl 2>"$out.cc.log"; then
		echo "FAIL $TEST_NAME: cannot compile $(basename "$src"):" >&2
		sed 's/^/    /' "$out.cc.log" >&2
		exit 1
	fi
}

# compile_linked <out> <src> [gcc args...]: a program that calls mallctl.
compile_linked() {
	local out=$1 src=$2
	shift 2
	compile "$out" "$src" "$@" -L"$BUILD" -lheapctl -Wl,-rpath,"$BUILD"
}

# run <tag> <dir> [VAR=value...] <command> [args...]
# Runs in <dir> with a 50 s limit; stdout to $WORK/<tag>.out, stderr to
# $WORK/<tag>.err, the exit status in RC.
run() {
	local tag=$1 dir=$2
	shift 2
	set +e
	(cd "$dir" && exec timeout 50 env "$@") >"$WORK/$tag.out" 2>"$WORK/$tag.err"
	RC=$?
	set -e
	if [ "$RC" -eq 124 ]; then
		fail "$tag: timed out after 50 s (hang or deadlock?)"
	fi
}

# The pid a test program printed as "pid <n>" on stdout.
pid_of() {
	sed -n 's/^pid \([0-9][0-9]*\)$/\1/p' "$WORK/$1.out" | head -1
}

# jp <outfile> <jeprof args...>: jeprof --text --show_bytes; false (and a
# failure reported) when jeprof fails or prints no "Total:" line.
jp() {
	local out=$1
	shift
	if ! jeprof --text --show_bytes "$@" >"$out" 2>"$out.err" </dev/null; then
		fail "jeprof --text --show_bytes $* failed: $(grep -v '^Using local file' "$out.err" | head -3)"
		return 1
	fi
	if ! grep -qE '^Total( \(t[0-9]+\))?: ' "$out"; then
		fail "jeprof $* printed no Total line: $(head -3 "$out" "$out.err")"
		return 1
	fi
	return 0
}

# Columns of a jeprof --text line: flat flat% sum% cum cum% function.
# jp_flat <jeprof output> <function>: the flat bytes, or "absent".
jp_flat() {
	awk -v f="$2" '$6 == f && $1 ~ /^-?[0-9]+$/ { print $1; found = 1; exit }
	    END { if (!found) print "absent" }' "$1"
}

jp_cum() {
	awk -v f="$2" '$6 == f && $4 ~ /^-?[0-9]+$/ { print $4; found = 1; exit }
	    END { if (!found) print "absent" }' "$1"
}

# "Total: N B" (or "Total (tN): N B" with --thread) -> N
jp_total() {
	awk '/^Total( \(t[0-9]+\))?: / { print $(NF - 1); found = 1; exit }
	    END { if (!found) print "absent" }' "$1"
}

# The check_* functions report a mismatch and return 0, so that under set -e
# one failed check does not hide the others.

# check_eq <what> <actual> <expected>
check_eq() {
	if [ "$2" != "$3" ]; then
		fail "$1: got '$2', expected '$3'"
	fi
	return 0
}

# check_pct <what> <actual> <expected> <percent>: |actual-expected| <= pct% of expected
check_pct() {
	local what=$1 act=$2 exp=$3 pct=$4
	if ! [[ "$act" =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; then
		fail "$what: got '$act', expected $exp +-$pct%"
		return 0
	fi
	if ! awk -v a="$act" -v e="$exp" -v p="$pct" 'BEGIN { d = a - e; if (d < 0) d = -d; exit !(d <= e * p / 100) }'; then
		fail "$what: got $act, expected $exp +-$pct% ($(awk -v a="$act" -v e="$exp" 'BEGIN { printf "%+.1f%%", (a - e) * 100 / e }'))"
	fi
	return 0
}

# check_range <what> <actual> <lo> <hi> (inclusive, integers)
check_range() {
	local what=$1 act=$2 lo=$3 hi=$4
	if ! [[ "$act" =~ ^-?[0-9]+$ ]] || [ "$act" -lt "$lo" ] || [ "$act" -gt "$hi" ]; then
		fail "$what: got '$act', expected $lo..$hi"
	fi
	return 0
}

# check_no_tmp <dir>...: no half-written dump left behind.
check_no_tmp() {
	local left
	left=$(find "$@" -name '*.tmp*' 2>/dev/null | head -5)
	if [ -n "$left" ]; then
		fail "temporary dump files left behind: $(echo $left)"
	fi
}

# check_stderr_empty <tag>: the run wrote nothing on stderr.
check_stderr_empty() {
	if [ -s "$WORK/$1.err" ]; then
		fail "$1: unexpected stderr: $(head -3 "$WORK/$1.err")"
	fi
}

# heap_files <dir>: the names of the .heap files in dir, sorted.
heap_files() {
	(cd "$1" && ls -1 | grep '\.heap$' | sort) || true
}
