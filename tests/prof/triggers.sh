#!/usr/bin/env bash
# triggers: every way a dump gets written, and the file names each gives.
#
#   <prefix>.<pid>.<seq>.<kind><n>.heap   seq: per process, across kinds
#   <prefix>.<pid>.<seq>.f.heap           the final dump
#   ...<kind><n>.YYYYmmddTHHMMSS.mmmZ.heap with prof_time_names
#
# final (f), interval (i), manual (m, and an explicit path used as is),
# high-water (u), timer (t), threshold (s), peak (p), the last three also
# switched on at run time (prof.gdump, prof.timer_s, prof.threshold);
# prof_time_names;
# prof_prefix in another directory and prof.prefix at run time; a prefix
# in a directory that does not exist.  No "*.tmp*" file may remain.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup triggers "$@"

cat >"$WORK/prog.c" <<'EOF'
#include <errno.h>
#include <heapctl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
void *keep[1024];            /* global: the allocations cannot be optimised away */
void *volatile sink;

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int dump_null(void)           /* no value: automatic name */
{
	return mallctl("prof.dump", NULL, NULL, NULL, 0);
}

static int dump_nullptr(void)        /* a NULL value: automatic name */
{
	const char *p = NULL;
	return mallctl("prof.dump", NULL, NULL, &p, sizeof p);
}

static int dump_path(const char *path)
{
	return mallctl("prof.dump", NULL, NULL, &path, sizeof path);
}

static uint64_t read_u64(const char *name)
{
	uint64_t v = 0;
	size_t len = sizeof v;
	if (mallctl(name, &v, &len, NULL, 0) != 0)
		return (uint64_t)-1;
	return v;
}

__attribute__((noinline)) void small_work(void)
{
	for (int i = 0; i < 10; i++)
		keep[i] = malloc(1000);
}

__attribute__((noinline)) void churn_interval(void)   /* 8 MiB in 1 KiB pieces */
{
	for (int i = 0; i < 8192; i++) {
		void *p = malloc(1024);
		sink = p;
		free(p);
	}
}

/* grow by <steps> pieces of 1 MiB, kept live */
__attribute__((noinline)) void grow_gdump(int steps)
{
	for (int i = 0; i < steps; i++) {
		keep[i] = malloc(MiB);
		memset(keep[i], 1, 4096);
	}
}
__attribute__((noinline)) void grow_threshold(int steps)
{
	for (int i = 0; i < steps; i++) {
		keep[i] = malloc(MiB);
		memset(keep[i], 1, 4096);
	}
}
__attribute__((noinline)) void grow_peak(int steps)
{
	for (int i = 0; i < steps; i++) {
		keep[i] = malloc(MiB);
		memset(keep[i], 1, 4096);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argv[1];
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	if (strcmp(mode, "final") == 0) {
		small_work();
	} else if (strcmp(mode, "interval") == 0) {
		printf("interval %llu\n", (unsigned long long)read_u64("prof.interval"));
		churn_interval();
	} else if (strcmp(mode, "manual") == 0) {
		small_work();
		int a = dump_null();
		int b = dump_nullptr();
		int c = dump_path(argv[2]);
		int d = dump_path("/nonexistent/dir/x.heap");
		int e = dump_null();
		printf("rc %d %d %d %d %d\n", a, b, c, d, e);
		printf("dumps %llu\n", (unsigned long long)read_u64("prof.dumps"));
	} else if (strcmp(mode, "gdump") == 0) {
		grow_gdump(200);
	} else if (strcmp(mode, "gdump_rt") == 0) {
		bool on = true;
		int e = mallctl("prof.gdump", NULL, NULL, &on, sizeof on);
		bool back = false;
		size_t len = sizeof back;
		int e2 = mallctl("prof.gdump", &back, &len, NULL, 0);
		printf("gdump %d %d %d\n", e, e2, (int)back);
		grow_gdump(200);
	} else if (strcmp(mode, "timer") == 0) {
		small_work();
		sleep_ms(3500);
	} else if (strcmp(mode, "threshold") == 0) {
		grow_threshold(100);
		sleep_ms(1000);   /* the background thread looks every 100 ms */
	} else if (strcmp(mode, "timer_rt") == 0) {
		/* the timer switched on through mallctl */
		unsigned s = 1, back = 0;
		int e = mallctl("prof.timer_s", NULL, NULL, &s, sizeof s);
		size_t len = sizeof back;
		int e2 = mallctl("prof.timer_s", &back, &len, NULL, 0);
		printf("timer %d %d %u\n", e, e2, back);
		small_work();
		sleep_ms(3500);
	} else if (strcmp(mode, "threshold_rt") == 0) {
		uint64_t t = 20 * MiB, back = 0;
		int e = mallctl("prof.threshold", NULL, NULL, &t, sizeof t);
		size_t len = sizeof back;
		int e2 = mallctl("prof.threshold", &back, &len, NULL, 0);
		printf("threshold %d %d %llu\n", e, e2, (unsigned long long)back);
		grow_threshold(40);
		sleep_ms(1000);
	} else if (strcmp(mode, "peak") == 0) {
		grow_peak(100);
		for (int i = 0; i < 100; i++)
			free(keep[i]);
		int a = mallctl("prof.dump_peak", NULL, NULL, NULL, 0);
		int b = dump_null();
		printf("rc %d %d\n", a, b);
	} else if (strcmp(mode, "prefix") == 0) {
		small_work();
		int a = dump_null();
		const char *p = argv[2];
		int b = mallctl("prof.prefix", NULL, NULL, &p, sizeof p);
		int c = dump_null();
		const char *o = NULL;
		size_t len = sizeof o;
		mallctl("opt.prof_prefix", &o, &len, NULL, 0);
		printf("rc %d %d %d\nopt %s\n", a, b, c, o ? o : "(null)");
	} else if (strcmp(mode, "unwritable") == 0) {
		small_work();
		printf("rc %d\n", dump_null());
	}
	printf("ok\n");
	return 0;
}
EOF
compile_linked "$WORK/prog" "$WORK/prog.c"

# names <dir> <regex with groups (seq) (n)>: prints "seq n" per matching file
names() {
	heap_files "$1" | sed -nE "s/$2/\1 \2/p" | sort -n -k2
}

# contiguous <what> <file with "seq n" lines>: n runs 0..k-1, seq increases
contiguous() {
	local what=$1 list=$2 line
	while read -r line; do
		fail "$line"
	done < <(awk -v what="$what" '
	    { if ($2 != NR - 1) { printf "%s: numbers are not 0,1,2,...: %s\n", what, all; bad = 1; exit }
	      if (NR > 1 && $1 <= prev) { printf "%s: seq does not increase with n\n", what; bad = 1; exit }
	      prev = $1 }
	    { all = all $0 "; " }' "$list")
}

# ---- final ------------------------------------------------------------------
d=$WORK/final && mkdir -p "$d"
run final "$d" MALLOC_CONF=prof_final:true "$WORK/prog" final
check_eq "final: exit status" "$RC" 0
check_stderr_empty final
pid=$(pid_of final)
check_eq "final: files" "$(heap_files "$d" | tr '\n' ' ')" "jeprof.$pid.0.f.heap "

# ---- interval -----------------------------------------------------------------
d=$WORK/interval && mkdir -p "$d"
run interval "$d" MALLOC_CONF=lg_prof_interval:20,prof_final:true "$WORK/prog" interval
check_eq "interval: exit status" "$RC" 0
check_stderr_empty interval
check_eq "interval: prof.interval" "$(grep '^interval' "$WORK/interval.out" || true)" "interval 1048576"
pid=$(pid_of interval)
names "$d" "^jeprof\.$pid\.([0-9]+)\.i([0-9]+)\.heap$" >"$WORK/interval.list"
ni=$(wc -l <"$WORK/interval.list")
# 8 MiB allocated at one dump per MiB
check_range "interval: number of .i<n>.heap dumps for 8 MiB at lg_prof_interval:20" "$ni" 6 10
contiguous "interval" "$WORK/interval.list"
awk '$1 != $2 { exit 1 }' "$WORK/interval.list" ||
	fail "interval: seq differs from n although only interval dumps came first: $(tr '\n' ';' <"$WORK/interval.list")"
check_eq "interval: final dump after $ni interval dumps" \
    "$(heap_files "$d" | grep '\.f\.heap$' || true)" "jeprof.$pid.$ni.f.heap"
other=$(heap_files "$d" | grep -vE "^jeprof\.$pid\.[0-9]+\.(i[0-9]+|f)\.heap$" || true)
[ -z "$other" ] || fail "interval: unexpected files: $other"

# ---- manual -------------------------------------------------------------------
d=$WORK/manual && mkdir -p "$d" "$WORK/explicit"
run manual "$d" MALLOC_CONF=prof:true "$WORK/prog" manual "$WORK/explicit/my dump.heap"
check_eq "manual: exit status" "$RC" 0
check_eq "manual: mallctl results (null, NULL value, path, bad path, null)" \
    "$(grep '^rc' "$WORK/manual.out" || true)" "rc 0 0 0 14 0"
check_eq "manual: prof.dumps" "$(grep '^dumps' "$WORK/manual.out" || true)" "dumps 4"
pid=$(pid_of manual)
check_eq "manual: explicit path used as is" "$(heap_files "$WORK/explicit" | tr '\n' '|')" "my dump.heap|"
if [ -f "$WORK/explicit/my dump.heap" ]; then
	check_eq "manual: explicit dump header" "$(head -1 "$WORK/explicit/my dump.heap")" "heap_v2/524288"
fi
check_eq "manual: first two automatic names" \
    "$(heap_files "$d" | head -2 | tr '\n' ' ')" "jeprof.$pid.0.m0.heap jeprof.$pid.1.m1.heap "
third=$(heap_files "$d" | sed -n 3p)
[[ "$third" =~ ^jeprof\.$pid\.[23]\.m2\.heap$ ]] ||
	fail "manual: third automatic name: got '$third', expected jeprof.$pid.<2 or 3>.m2.heap"
check_eq "manual: number of automatic dumps" "$(heap_files "$d" | wc -l)" 3
grep -q 'nonexistent/dir/x.heap' "$WORK/manual.err" ||
	fail "manual: no message on stderr about the unwritable path"

# ---- gdump --------------------------------------------------------------------
for mode in gdump gdump_rt; do
	d=$WORK/$mode && mkdir -p "$d"
	if [ "$mode" = gdump ]; then
		run "$mode" "$d" MALLOC_CONF=prof_gdump:true,prof_gdump_min_ms:0 "$WORK/prog" gdump
	else
		run "$mode" "$d" MALLOC_CONF=prof:true,prof_gdump_min_ms:0 "$WORK/prog" gdump_rt
		check_eq "$mode: prof.gdump write/read" "$(grep '^gdump' "$WORK/$mode.out" || true)" "gdump 0 0 1"
	fi
	check_eq "$mode: exit status" "$RC" 0
	check_stderr_empty "$mode"
	pid=$(pid_of "$mode")
	names "$d" "^jeprof\.$pid\.([0-9]+)\.u([0-9]+)\.heap$" >"$WORK/$mode.list"
	nu=$(wc -l <"$WORK/$mode.list")
	# 200 steps of 1 MiB; a u dump needs 10% more mapped memory than the last
	check_range "$mode: number of .u<n>.heap dumps for 200 growth steps" "$nu" 1 100
	contiguous "$mode" "$WORK/$mode.list"
	other=$(heap_files "$d" | grep -vE "^jeprof\.$pid\.[0-9]+\.u[0-9]+\.heap$" || true)
	[ -z "$other" ] || fail "$mode: unexpected files: $other"
	if [ "$nu" -ge 1 ]; then
		last=$(heap_files "$d" | grep "\.u$((nu - 1))\.heap$" || true)
		if [ -n "$last" ] && jp "$WORK/$mode.txt" "$WORK/prog" "$d/$last"; then
			g=$(jp_flat "$WORK/$mode.txt" grow_gdump)
			[[ "$g" =~ ^[0-9]+$ ]] && [ "$g" -gt 0 ] ||
				fail "$mode: the last high-water dump $last does not show grow_gdump ($g)"
		fi
	fi
done

# ---- timer --------------------------------------------------------------------
d=$WORK/timer && mkdir -p "$d"
run timer "$d" MALLOC_CONF=prof_timer_s:1 "$WORK/prog" timer
check_eq "timer: exit status" "$RC" 0
check_stderr_empty timer
pid=$(pid_of timer)
names "$d" "^jeprof\.$pid\.([0-9]+)\.t([0-9]+)\.heap$" >"$WORK/timer.list"
nt=$(wc -l <"$WORK/timer.list")
[ "$nt" -ge 2 ] || fail "timer: $nt .t<n>.heap dumps in 3.5 s at prof_timer_s:1, expected at least 2 (files: $(heap_files "$d" | tr '\n' ' '))"
contiguous "timer" "$WORK/timer.list"
other=$(heap_files "$d" | grep -vE "^jeprof\.$pid\.[0-9]+\.t[0-9]+\.heap$" || true)
[ -z "$other" ] || fail "timer: unexpected files: $other"

# ---- threshold ----------------------------------------------------------------
d=$WORK/threshold && mkdir -p "$d"
run threshold "$d" MALLOC_CONF=prof_threshold:50M,lg_prof_sample:0 "$WORK/prog" threshold
check_eq "threshold: exit status" "$RC" 0
check_stderr_empty threshold
pid=$(pid_of threshold)
check_eq "threshold: files" "$(heap_files "$d" | tr '\n' ' ')" "jeprof.$pid.0.s0.heap "
if [ -f "$d/jeprof.$pid.0.s0.heap" ] && jp "$WORK/threshold.txt" "$WORK/prog" "$d/jeprof.$pid.0.s0.heap"; then
	# written once more than 50M were allocated: at least 50M - 1 MiB of
	# them from grow_threshold (every allocation sampled), at most all 100
	check_range "threshold: grow_threshold bytes in the dump" \
	    "$(jp_flat "$WORK/threshold.txt" grow_threshold)" $((50 * 1000 * 1000 - 1048576)) $((100 * 1048576))
fi

# ---- timer and threshold switched on through mallctl ------------------------------
d=$WORK/timer_rt && mkdir -p "$d"
run timer_rt "$d" MALLOC_CONF=prof:true "$WORK/prog" timer_rt
check_eq "prof.timer_s: exit status" "$RC" 0
check_stderr_empty timer_rt
check_eq "prof.timer_s: write/read" "$(grep '^timer' "$WORK/timer_rt.out" || true)" "timer 0 0 1"
pid=$(pid_of timer_rt)
names "$d" "^jeprof\.$pid\.([0-9]+)\.t([0-9]+)\.heap$" >"$WORK/timer_rt.list"
nt=$(wc -l <"$WORK/timer_rt.list")
[ "$nt" -ge 2 ] || fail "prof.timer_s: $nt .t<n>.heap dumps in 3.5 s after prof.timer_s=1, expected at least 2 (files: $(heap_files "$d" | tr '\n' ' '))"
contiguous "prof.timer_s" "$WORK/timer_rt.list"

d=$WORK/threshold_rt && mkdir -p "$d"
run threshold_rt "$d" MALLOC_CONF=prof:true,lg_prof_sample:0 "$WORK/prog" threshold_rt
check_eq "prof.threshold: exit status" "$RC" 0
check_stderr_empty threshold_rt
check_eq "prof.threshold: write/read" "$(grep '^threshold' "$WORK/threshold_rt.out" || true)" "threshold 0 0 20971520"
pid=$(pid_of threshold_rt)
check_eq "prof.threshold: files" "$(heap_files "$d" | tr '\n' ' ')" "jeprof.$pid.0.s0.heap "
if [ -f "$d/jeprof.$pid.0.s0.heap" ] && jp "$WORK/threshold_rt.txt" "$WORK/prog" "$d/jeprof.$pid.0.s0.heap"; then
	check_range "prof.threshold: grow_threshold bytes in the dump" \
	    "$(jp_flat "$WORK/threshold_rt.txt" grow_threshold)" $((19 * 1048576)) $((40 * 1048576))
fi

# ---- peak ---------------------------------------------------------------------
d=$WORK/peak && mkdir -p "$d"
run peak "$d" MALLOC_CONF=prof:true,prof_peak:true,lg_prof_sample:0 "$WORK/prog" peak
check_eq "peak: exit status" "$RC" 0
check_stderr_empty peak
check_eq "peak: mallctl results (dump_peak, dump)" "$(grep '^rc' "$WORK/peak.out" || true)" "rc 0 0"
pid=$(pid_of peak)
check_eq "peak: files" "$(heap_files "$d" | tr '\n' ' ')" "jeprof.$pid.0.p0.heap jeprof.$pid.1.m0.heap "
if [ -f "$d/jeprof.$pid.0.p0.heap" ] && jp "$WORK/peak_p.txt" "$WORK/prog" "$d/jeprof.$pid.0.p0.heap"; then
	check_pct "peak: grow_peak bytes in the peak dump (100 MiB were live)" \
	    "$(jp_flat "$WORK/peak_p.txt" grow_peak)" 104857600 15
fi
if [ -f "$d/jeprof.$pid.1.m0.heap" ] && jp "$WORK/peak_m.txt" "$WORK/prog" "$d/jeprof.$pid.1.m0.heap"; then
	g=$(jp_flat "$WORK/peak_m.txt" grow_peak)
	[ "$g" = absent ] || [ "$g" = 0 ] || fail "peak: grow_peak (all freed) in the ordinary dump: $g bytes"
	check_range "peak: Total of the ordinary dump after freeing" "$(jp_total "$WORK/peak_m.txt")" 0 1048576
fi

# ---- prof_time_names ------------------------------------------------------------
d=$WORK/timenames && mkdir -p "$d"
t0=$(date -u +%s)
# a local time zone 9 hours off UTC: the names must still be in UTC
run timenames "$d" MALLOC_CONF=prof_final:true,prof_time_names:true TZ=XYZ-9 "$WORK/prog" manual "$WORK/explicit/t.heap"
t1=$(date -u +%s)
check_eq "time names: exit status" "$RC" 0
pid=$(pid_of timenames)
ts_re='([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})\.[0-9]{3}Z'
mapfile -t tfiles < <(heap_files "$d")
check_eq "time names: number of dumps" "${#tfiles[@]}" 4
for f in "${tfiles[@]}"; do
	if [[ "$f" =~ ^jeprof\.$pid\.[0-9]+\.(m[0-9]+|f)\.$ts_re\.heap$ ]]; then
		m=("${BASH_REMATCH[@]}")
		ts=$(date -u -d "${m[2]}-${m[3]}-${m[4]} ${m[5]}:${m[6]}:${m[7]}" +%s 2>/dev/null || echo 0)
		if [ "$ts" -lt $((t0 - 2)) ] || [ "$ts" -gt $((t1 + 2)) ]; then
			fail "time names: $f: timestamp is not the UTC time of the run ($(date -u -d "@$t0" +%Y%m%dT%H%M%S)..$(date -u -d "@$t1" +%Y%m%dT%H%M%S))"
		fi
	else
		fail "time names: '$f' does not match jeprof.$pid.<seq>.<kind><n>.YYYYmmddTHHMMSS.mmmZ.heap"
	fi
done
heap_files "$d" | grep -qE "^jeprof\.$pid\.0\.m0\.$ts_re\.heap$" || fail "time names: no jeprof.$pid.0.m0.<time>.heap"
heap_files "$d" | grep -qE "^jeprof\.$pid\.[0-9]+\.f\.$ts_re\.heap$" || fail "time names: no jeprof.$pid.<seq>.f.<time>.heap"

# ---- prof_prefix in another directory; prof.prefix at run time -------------------
d=$WORK/cwd && mkdir -p "$d" "$WORK/other/sub" "$WORK/p1" "$WORK/p2"
run prefix_final "$d" MALLOC_CONF=prof_final:true,prof_prefix:"$WORK/other/sub/myprof" "$WORK/prog" final
check_eq "prefix: exit status" "$RC" 0
check_stderr_empty prefix_final
pid=$(pid_of prefix_final)
check_eq "prefix: files in the prefix directory" "$(heap_files "$WORK/other/sub" | tr '\n' ' ')" "myprof.$pid.0.f.heap "
check_eq "prefix: files in the working directory" "$(heap_files "$d" | tr '\n' ' ')" ""

run prefix_rt "$d" MALLOC_CONF=prof:true,prof_prefix:"$WORK/p1/a" "$WORK/prog" prefix "$WORK/p2/b"
check_eq "prof.prefix: exit status" "$RC" 0
check_stderr_empty prefix_rt
check_eq "prof.prefix: mallctl results" "$(grep '^rc' "$WORK/prefix_rt.out" || true)" "rc 0 0 0"
check_eq "prof.prefix: opt.prof_prefix keeps the configured value" \
    "$(grep '^opt' "$WORK/prefix_rt.out" || true)" "opt $WORK/p1/a"
pid=$(pid_of prefix_rt)
check_eq "prof.prefix: dump before the change" "$(heap_files "$WORK/p1" | tr '\n' ' ')" "a.$pid.0.m0.heap "
check_eq "prof.prefix: dump after the change" "$(heap_files "$WORK/p2" | tr '\n' ' ')" "b.$pid.1.m1.heap "
check_eq "prof.prefix: files in the working directory" "$(heap_files "$d" | tr '\n' ' ')" ""

# ---- a prefix in a directory that does not exist -------------------------------
d=$WORK/unwritable && mkdir -p "$d"
run unwritable "$d" MALLOC_CONF=prof_final:true,prof_prefix:/nonexistent/x "$WORK/prog" unwritable
check_eq "unwritable: exit status" "$RC" 0
check_eq "unwritable: program output" "$(tail -2 "$WORK/unwritable.out" | tr '\n' ' ')" "rc 14 ok "
grep -q '^<heapctl>: .*/nonexistent/x\.' "$WORK/unwritable.err" ||
	fail "unwritable: no <heapctl>: message naming /nonexistent/x.* on stderr (stderr: $(head -3 "$WORK/unwritable.err"))"
bad=$(grep -v '^<heapctl>: ' "$WORK/unwritable.err" || true)
[ -z "$bad" ] || fail "unwritable: unexpected stderr lines: $bad"
check_eq "unwritable: files in the working directory" "$(heap_files "$d" | tr '\n' ' ')" ""

check_no_tmp "$WORK"
finish
