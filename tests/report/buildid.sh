#!/usr/bin/env bash
# buildid: a dump records the build id of each loaded object, and report
# never names frames with a file of another build (issue 38).  A program is
# built twice at one path with different code (-DVARIANT=1, 2: different
# functions, different build ids); variant 1 runs preloaded and is dumped,
# then the path is given variant 2:
#  * the dump has variant 1's build id before its executable mapping, and
#    jeprof --text reads it exactly as the dump without the id lines;
#    go tool pprof (which reads the maps of a "heap profile:" text, not
#    heap_v2; the same stacks are put in that form) gives the same -top,
#    and its -raw mappings carry the build ids of the program and libc;
#  * report without -p: one line on stderr names the program, both build
#    ids and the ways out (once with --base of the same dump); no variant 2
#    name is printed, and the program's frames stay addresses; --json
#    lists it under "unnamed" with the same words; --pprof carries variant
#    1's build id;
#  * report -p PID while it runs: variant 1's names (its mapping, the path
#    holds variant 2);
#  * --sysroot DIR holding variant 1 at the path: variant 1's names, and
#    nothing said of the program;
#  * --symcache DIR, kept by that --sysroot report: variant 1's names
#    from the cache by build id, nothing said;
#  * a debuginfod server serving variant 1: variant 1's names by build id;
#  * a library dlopen'ed between two dumps has its build id in the second,
#    and not in a third after dlclose (the agent's table is made again);
#  * the dump without build ids: read as before (variant 2's names, as
#    without this check, and no line on stderr).
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup report_buildid "$@"
hr_need go readelf debuginfod curl python3

mkdir -p "$WORK/bin" "$WORK/srv" "$WORK/root$WORK/bin"
cat >"$WORK/v.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
void *keep[4000];
#if VARIANT == 1
__attribute__((noinline)) void variant_one_alloc(int n)
{
	for (int i = 0; i < n; i++)
		memset(keep[i] = malloc(4096), 1, 4096);
}
__attribute__((noinline)) void variant_one_caller(void) { variant_one_alloc(2000); }
#define CALL variant_one_caller
#else
__attribute__((noinline)) void variant_two_pad(void) { __asm__ volatile("nop; nop; nop; nop; nop; nop"); }
__attribute__((noinline)) void variant_two_alloc(int n)
{
	for (int i = 0; i < n; i++)
		memset(keep[i] = malloc(128), 2, 128);
	variant_two_pad();
}
__attribute__((noinline)) void variant_two_caller(void) { variant_two_alloc(10); }
#define CALL variant_two_caller
#endif
int main(void)
{
	CALL();
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	pause();
	return 0;
}
EOF
gcc -O1 -g -fno-omit-frame-pointer -Wl,--build-id -DVARIANT=1 -o "$WORK/v1" "$WORK/v.c"
gcc -O1 -g -fno-omit-frame-pointer -Wl,--build-id -DVARIANT=2 -o "$WORK/v2" "$WORK/v.c"
id1=$(readelf -n "$WORK/v1" | awk '/Build ID/ { print $3 }')
id2=$(readelf -n "$WORK/v2" | awk '/Build ID/ { print $3 }')
[ -n "$id1" ] && [ -n "$id2" ] && [ "$id1" != "$id2" ] || fail "the variants need two build ids: '$id1' '$id2'"
libc=$(ldd "$WORK/v1" | awk '/libc.so/ { print $3 }')
idc=$(readelf -n "$(readlink -f "$libc")" | awk '/Build ID/ { print $3 }')
prog=$WORK/bin/prog
cp "$WORK/v1" "$prog"

pids=()
HR_DFD_PID=
stop() { for p in "${pids[@]}" $HR_DFD_PID; do kill "$p" 2>/dev/null || true; done; }
trap 'stop; [ -n "${HC_KEEP:-}" ] || rm -rf "$WORK"' EXIT
(cd "$WORK" && exec env LD_PRELOAD="$LIB" HEAPCTL_CONF=prof:true,lg_prof_sample:0 "$prog") >"$WORK/prog.out" 2>"$WORK/prog.err" &
pids+=($!)
pid=
for _ in $(seq 250); do
	pid=$(pid_of prog)
	[ -n "$pid" ] && break
	sleep 0.02
done
[ -n "$pid" ] || { fail "the program did not start: $(head -3 "$WORK/prog.err")"; finish; }
run dump "$WORK" "$HEAPCTL" dump -p "$pid" -o "$WORK/p.heap"
check_eq "heapctl dump" "$RC" 0
D=$WORK/p.heap

# ---- the dump ----------------------------------------------------------------
start=$(awk -v p="$prog" '$2 ~ /x/ && $6 == p { split($1, r, "-"); print r[1]; exit }' "$D")
off=$(awk -v p="$prog" '$2 ~ /x/ && $6 == p { sub(/^0+/, "", $3); print ($3 == "" ? "0" : $3); exit }' "$D")
check_eq "the program's build id line" "$(grep -c -x "$start-$start r-xp $prog (@$off) $id1" "$D")" 1
check_eq "its line is just before its mapping" \
	"$(grep -A1 -x "$start-$start r-xp $prog (@$off) $id1" "$D" | tail -1 | awk '{ print $1 }' | cut -d- -f1)" "$start"
check_eq "libc's build id" "$(grep -c " r-xp $(readlink -f "$libc") (@[0-9a-f]*) $idc\$" "$D")" 1
grep -v ' (@[0-9a-f]*) [0-9a-f]*$' "$D" >"$WORK/noid.heap"
check_eq "lines without the build ids" "$(( $(wc -l <"$D") - $(wc -l <"$WORK/noid.heap") ))" \
	"$(grep -c ' (@[0-9a-f]*) [0-9a-f]*$' "$D")"

# jeprof: the same report with and without them (variant 1 is at the path)
if jp "$WORK/id.jp" "$prog" "$D" && jp "$WORK/noid.jp" "$prog" "$WORK/noid.heap"; then
	check_eq "jeprof --text with and without build ids" "$(diff "$WORK/id.jp" "$WORK/noid.jp" && echo same)" same
	grep -q variant_one_alloc "$WORK/id.jp" || fail "jeprof does not name variant_one_alloc: $(head -5 "$WORK/id.jp")"
fi
# go tool pprof: the stacks as a "heap profile:" text, the same maps section
to_gperf() {
	awk '/^heap_v2\// { period = substr($1, 9); next }
	!maps && /^  t\*:/ { gsub(/[\[\]:]/, " ")
		if (!hdr) { printf "heap profile: %s: %s [%s: %s] @ heap_v2/%s\n", $2, $3, $4, $5, period; hdr = 1 }
		else printf "%s: %s [%s: %s] @%s\n", $2, $3, $4, $5, stack; next }
	!maps && /^@/ { stack = substr($0, 2); next }
	/^MAPPED_LIBRARIES:/ { maps = 1; print ""; print; next }
	maps { print }' "$1" >"$2"
}
to_gperf "$D" "$WORK/id.gp"
to_gperf "$WORK/noid.heap" "$WORK/noid.gp"
for t in id noid; do
	(cd "$WORK" && HOME=$WORK timeout 50 go tool pprof -top -nodecount=20 "$prog" "$WORK/$t.gp") \
		>"$WORK/$t.top" 2>"$WORK/$t.top.err" </dev/null || fail "go tool pprof -top $t: $(head -3 "$WORK/$t.top.err")"
	(cd "$WORK" && HOME=$WORK timeout 50 go tool pprof -raw "$WORK/$t.gp") \
		>"$WORK/$t.raw" 2>"$WORK/$t.raw.err" </dev/null || fail "go tool pprof -raw $t: $(head -3 "$WORK/$t.raw.err")"
done
grep -q variant_one_alloc "$WORK/id.top" || fail "pprof -top does not name variant_one_alloc: $(head -8 "$WORK/id.top")"
# pprof prints the main binary's build id in its header when it has one
check_eq "pprof -top with and without build ids" \
	"$(diff <(grep -v -e '^Build ID:' -e '^Time:' "$WORK/id.top") <(grep -v '^Time:' "$WORK/noid.top") && echo same)" same
check_eq "pprof -top header" "$(grep '^Build ID:' "$WORK/id.top")" "Build ID: $id1"
check_eq "pprof mapping of the program" "$(grep -c " $prog $id1 " "$WORK/id.raw")" 1
check_eq "pprof mapping of libc" "$(grep -c " $(readlink -f "$libc") $idc " "$WORK/id.raw")" 1
check_eq "pprof mappings without build ids" "$(grep -c -e " $id1 " -e " $idc " "$WORK/noid.raw" || true)" 0

# ---- objects loaded and unloaded between dumps ----------------------------------
# the agent's table is made again when the loader's counts change: a
# library dlopen'ed after a dump has its id in the next one, and none once
# dlclose'd
cat >"$WORK/lib.c" <<'EOF'
int buildid_lib_fn(int x) { return x * 3; }
EOF
cat >"$WORK/dl.c" <<'EOF'
#include <dlfcn.h>
#include <stddef.h>
typedef int ctl_fn(const char *, void *, size_t *, void *, size_t);
int main(int argc, char **argv)
{
	ctl_fn *ctl = (ctl_fn *)dlsym(RTLD_DEFAULT, "mallctl");
	const char *d[3] = { argv[1], argv[2], argv[3] };
	if (argc < 5 || ctl == NULL || ctl("prof.dump", NULL, NULL, &d[0], sizeof d[0]) != 0)
		return 1;
	void *h = dlopen(argv[4], RTLD_NOW);
	if (h == NULL || ctl("prof.dump", NULL, NULL, &d[1], sizeof d[1]) != 0 || dlclose(h) != 0)
		return 2;
	return ctl("prof.dump", NULL, NULL, &d[2], sizeof d[2]) != 0 ? 3 : 0;
}
EOF
gcc -O1 -shared -fPIC -Wl,--build-id -o "$WORK/libbid.so" "$WORK/lib.c"
gcc -O1 -o "$WORK/dl" "$WORK/dl.c" -ldl
idl=$(readelf -n "$WORK/libbid.so" | awk '/Build ID/ { print $3 }')
run dl "$WORK" LD_PRELOAD="$LIB" HEAPCTL_CONF=prof:true "$WORK/dl" "$WORK/dl0.heap" "$WORK/dl1.heap" "$WORK/dl2.heap" \
	"$WORK/libbid.so"
check_eq "dlopen program" "$RC" 0
n=()
for k in 0 1 2; do
	n[k]=$(grep -c " r-xp $WORK/libbid.so (@[0-9a-f]*) $idl\$" "$WORK/dl$k.heap" || true)
done
check_eq "the library's build id before dlopen, after, after dlclose" "${n[*]}" "0 1 0"

# ---- the path now holds variant 2 ------------------------------------------------
cp "$WORK/v2" "$prog.new"
mv "$prog.new" "$prog"
cp "$WORK/v1" "$WORK/root$prog"

hr_ok plain "$D" --top 20
want="heapctl: report: $prog: build id $id1 in the dump, $id2 on this host: not used for names (use -p PID, --sysroot or a debuginfod server)"
check_eq "report: the line on stderr" "$(cat "$WORK/plain.err")" "$want"
check_eq "report: no name of variant 2" "$(grep -c variant_two "$WORK/plain.out" || true)" 0
check_eq "report: no name of variant 1 either" "$(grep -c variant_one "$WORK/plain.out" || true)" 0
grep -q "prog+0x" "$WORK/plain.out" || fail "report: the program's frames are not addresses: $(head -5 "$WORK/plain.out")"
hr based "$D" --base "$D"
check_eq "report --base of the same dump: the module said once" "$(grep -c 'not used for names' "$WORK/based.err")" 1
hr_ok plainjson "$D" --top 20 --json
check_eq "report --json: the unnamed module" "$(python3 -c '
import json, sys
u = json.load(open(sys.argv[1]))["unnamed"]
print(len(u), u[0]["module"], u[0]["why"])' "$WORK/plainjson.out")" \
	"1 $prog build id $id1 in the dump, $id2 on this host: not used for names (use -p PID, --sysroot or a debuginfod server)"
hr_ok plainpb "$D" --pprof "$WORK/plain.pb.gz"
(cd "$WORK" && HOME=$WORK timeout 50 go tool pprof -raw "$WORK/plain.pb.gz") >"$WORK/plain.raw" 2>&1 </dev/null ||
	fail "go tool pprof -raw plain.pb.gz: $(head -3 "$WORK/plain.raw")"
check_eq "report --pprof: the program's mapping has the dump's build id" "$(grep -c " $prog $id1" "$WORK/plain.raw")" 1

hr_ok live -p "$pid" "$D" --top 20
grep -q variant_one_alloc "$WORK/live.out" || fail "report -p: no variant_one_alloc: $(head -5 "$WORK/live.out") $(cat "$WORK/live.err")"
check_eq "report -p: no name of variant 2" "$(grep -c variant_two "$WORK/live.out" || true)" 0
check_eq "report -p: stderr" "$(cat "$WORK/live.err")" ""

hr_ok sysroot --sysroot "$WORK/root" "$D" --top 20 --symcache "$WORK/sc"
grep -q variant_one_alloc "$WORK/sysroot.out" || fail "report --sysroot: no variant_one_alloc: $(head -5 "$WORK/sysroot.out")"
[ -s "$WORK/sc/$id1.sym" ] || fail "report --sysroot --symcache: no $id1.sym: $(ls "$WORK/sc")"
hr_ok cached "$D" --top 20 --symcache "$WORK/sc"
grep -q variant_one_alloc "$WORK/cached.out" || fail "report --symcache: no variant_one_alloc: $(head -5 "$WORK/cached.out") $(cat "$WORK/cached.err")"
check_eq "report --symcache: no name of variant 2" "$(grep -c variant_two "$WORK/cached.out" || true)" 0
check_eq "report --symcache: stderr" "$(cat "$WORK/cached.err")" ""
# (libc is not in that tree: said, but not of the program)
check_eq "report --sysroot: no line on the program" "$(grep -c "$prog" "$WORK/sysroot.err" || true)" 0

hr_ok old "$WORK/noid.heap" --top 20
grep -q variant_two "$WORK/old.out" || fail "report of a dump without build ids: not read as before: $(head -5 "$WORK/old.out")"
check_eq "report of a dump without build ids: stderr" "$(cat "$WORK/old.err")" ""

# ---- debuginfod ---------------------------------------------------------------
cp "$WORK/v1" "$WORK/srv/v1"
if hr_debuginfod "$WORK/srv" "$id1" executable; then
	run dfd "$WORK" DEBUGINFOD_URLS="$HR_DFD_URL" DEBUGINFOD_CACHE_PATH="$WORK/dcache" \
		"$HEAPCTL" report "$D" --top 20
	check_eq "report with debuginfod: exit" "$RC" 0
	grep -q variant_one_alloc "$WORK/dfd.out" || fail "report with debuginfod: no variant_one_alloc: $(head -5 "$WORK/dfd.out") $(cat "$WORK/dfd.err")"
	check_eq "report with debuginfod: no name of variant 2" "$(grep -c variant_two "$WORK/dfd.out" || true)" 0
	check_eq "report with debuginfod: stderr" "$(cat "$WORK/dfd.err")" ""
fi
finish
