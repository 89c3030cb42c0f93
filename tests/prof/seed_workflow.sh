#!/usr/bin/env bash
# seed_workflow: the documented leak-hunting workflow, end to end.
#
#   MALLOC_CONF=prof_leak:true,lg_prof_sample:0,prof_final:true \
#       LD_PRELOAD=libheapctl.so ./prog
#   jeprof --show_bytes --text ./prog jeprof.<pid>.0.f.heap
#
# The program leaks 1000 x 100 bytes from leak_small and 500 x 4000 bytes
# from leak_big and frees everything else; every allocation is sampled, so
# jeprof must show those two functions with exactly their usable bytes,
# 1000 x 112 = 112000 and 500 x 4096 = 2048000 bytes, as jemalloc counts,
# and the leak summary on stderr must agree with the dump.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup seed_workflow "$@"

cat >"$WORK/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *keep[1500];            /* global: the allocations cannot be optimised away */
void *volatile sink;

__attribute__((noinline)) void leak_small(void)
{
	for (int i = 0; i < 1000; i++) {
		keep[i] = malloc(100);
		memset(keep[i], 1, 100);
	}
}

__attribute__((noinline)) void leak_big(void)
{
	for (int i = 0; i < 500; i++) {
		keep[1000 + i] = malloc(4000);
		memset(keep[1000 + i], 2, 4000);
	}
}

/* allocated and freed again: must not show up as a leak */
__attribute__((noinline)) void churn(void)
{
	for (int i = 0; i < 3000; i++) {
		char *p = malloc(50 + (i % 7) * 300);
		sink = p;
		free(p);
	}
	void *q[200];
	for (int i = 0; i < 200; i++)
		sink = q[i] = calloc(1, 5000);
	for (int i = 0; i < 200; i++)
		free(q[i]);
}

int main(int argc, char **argv)
{
	/* no stdio before the leak-free exit: its buffer would stay allocated */
	char line[32];
	int n = snprintf(line, sizeof line, "pid %d\n", (int)getpid());
	if (write(1, line, (size_t)n) != n)
		return 2;
	churn();
	if (argc > 1 && strcmp(argv[1], "noleak") == 0)
		return 0;
	leak_small();
	leak_big();
	churn();
	printf("done\n");
	return 0;
}
EOF
compile "$WORK/prog" "$WORK/prog.c"
mkdir -p "$WORK/run"

# ---- the workflow --------------------------------------------------------
run seed "$WORK/run" MALLOC_CONF=prof_leak:true,lg_prof_sample:0,prof_final:true \
    LD_PRELOAD="$LIB" "$WORK/prog"
check_eq "exit status" "$RC" 0
check_eq "program output" "$(tail -1 "$WORK/seed.out")" "done"
pid=$(pid_of seed)
file=jeprof.$pid.0.f.heap
check_eq "dump files written" "$(heap_files "$WORK/run" | tr '\n' ' ')" "$file "

summary_re='^<heapctl>: Leak approximation summary: ~([0-9]+) bytes?, ~([0-9]+) objects?, >= ([0-9]+) contexts?$'
sline=$(grep -E '^<heapctl>: Leak approximation summary' "$WORK/seed.err" || true)
if [[ "$sline" =~ $summary_re ]]; then
	leak_bytes=${BASH_REMATCH[1]}
	leak_objs=${BASH_REMATCH[2]}
	leak_ctx=${BASH_REMATCH[3]}
	# 2160000 usable bytes in 1500 objects from (at least) two stacks, plus
	# whatever libc keeps (stdout's buffer)
	check_range "leak summary bytes" "$leak_bytes" 2100000 2200000
	check_range "leak summary objects" "$leak_objs" 1500 1600
	check_range "leak summary contexts" "$leak_ctx" 2 20
else
	fail "no leak summary line matching /$summary_re/ on stderr; stderr was: $(head -5 "$WORK/seed.err")"
	leak_bytes=
fi
check_eq "jeprof hint line" \
    "$(grep '^<heapctl>: Run jeprof' "$WORK/seed.err" || true)" \
    "<heapctl>: Run jeprof on \"$file\" for leak detail"
# nothing else on stderr: no error exit notice without prof_leak_error
other=$(grep -v -e '^<heapctl>: Leak approximation summary' -e '^<heapctl>: Run jeprof' "$WORK/seed.err" || true)
[ -z "$other" ] || fail "unexpected stderr lines: $other"

if [ -f "$WORK/run/$file" ]; then
	check_eq "dump header" "$(head -1 "$WORK/run/$file")" "heap_v2/1"
	check_eq "dump has MAPPED_LIBRARIES" "$(grep -c '^MAPPED_LIBRARIES:$' "$WORK/run/$file")" 1
	# heap_v2 layout: header, per-thread lines, stacks with their lines
	# (the 't' lines jeprof reads, the ages and lifetimes it skips), one
	# blank line, MAPPED_LIBRARIES: and /proc/self/maps lines, with a
	# build id line ("S-S r-xp PATH (@OFF) ID") before executable ones
	bad=$(awk '
	    BEGIN { cnt = "[0-9]+: [0-9]+ \\[[0-9]+: [0-9]+\\]" }
	    NR == 1 { next }
	    NR == 2 { if ($0 !~ "^  t\\*: " cnt "$") { print NR ": " $0; exit } next }
	    state == 0 && /^$/ { state = 1; next }
	    state == 0 && /^@( 0x[0-9a-f]+)+$/ { stacks++; next }
	    state == 0 && $0 ~ "^  t(\\*|[0-9]+): " cnt "( [^ ]+)?$" { next }
	    state == 0 && /^  a: [0-9]+ [0-9]+ [0-9]+ [0-9]+$/ { next }
	    state == 0 && /^  l: [0-9]+ [0-9]+ [0-9]+ [0-9]+( [0-9]+:[0-9]+)+$/ { next }
	    state == 0 { print NR ": " $0; exit }
	    state == 1 { if ($0 != "MAPPED_LIBRARIES:") { print NR ": " $0; exit } state = 2; next }
	    state == 2 && /^[0-9a-f]+-[0-9a-f]+ r-xp \/[^ ]+ \(@[0-9a-f]+\) [0-9a-f]+$/ { ids++; next }
	    state == 2 && !/^[0-9a-f]+-[0-9a-f]+ [-r][-w][-x][ps] [0-9a-f]+ / { print NR ": " $0; exit }
	    END { if (state != 2) print "no blank line + MAPPED_LIBRARIES: section"; if (stacks < 2) print "fewer than 2 stacks"
	          if (ids < 2) print "fewer than 2 build ids (the program, libc)" }' \
	    "$WORK/run/$file")
	[ -z "$bad" ] || fail "dump format: unexpected line $bad"
	grep -q " $WORK/prog$" "$WORK/run/$file" || fail "dump format: the program is not in the maps copy"
	grep -q "/libheapctl.so$" "$WORK/run/$file" || fail "dump format: libheapctl.so is not in the maps copy"
	if jp "$WORK/seed.txt" "$WORK/prog" "$WORK/run/$file"; then
		check_eq "jeprof bytes for leak_small" "$(jp_flat "$WORK/seed.txt" leak_small)" 112000
		check_eq "jeprof bytes for leak_big" "$(jp_flat "$WORK/seed.txt" leak_big)" 2048000
		c=$(jp_flat "$WORK/seed.txt" churn)
		[ "$c" = absent ] || [ "$c" = 0 ] || fail "freed allocations of churn reported as live: $c bytes"
		check_eq "jeprof bytes for main (cumulative)" \
		    "$(awk -v t="$(jp_cum "$WORK/seed.txt" main)" 'BEGIN { print (t >= 2100000) }')" 1
		[ -z "$leak_bytes" ] || check_eq "leak summary bytes = jeprof Total" \
		    "$leak_bytes" "$(jp_total "$WORK/seed.txt")"
	fi
fi
check_no_tmp "$WORK"

# ---- prof_leak_error: leaks make the exit status 1 ------------------------
mkdir -p "$WORK/err"
run leakerr "$WORK/err" MALLOC_CONF=prof_leak:true,prof_leak_error:true,lg_prof_sample:0 \
    LD_PRELOAD="$LIB" "$WORK/prog"
check_eq "prof_leak_error: exit status with leaks" "$RC" 1
# (stdout's buffered "done" is not checked: the error exit is an _exit from
# the exit path, as in jemalloc, which may come before stdio is flushed)
grep -qE "$summary_re" "$WORK/leakerr.err" ||
	fail "prof_leak_error: no leak summary; stderr: $(head -3 "$WORK/leakerr.err")"
grep -qx '<heapctl>: Exiting with error code because memory leaks were detected' "$WORK/leakerr.err" ||
	fail "prof_leak_error: no 'Exiting with error code' line; stderr: $(head -5 "$WORK/leakerr.err")"
pid=$(pid_of leakerr)
check_eq "prof_leak_error: dump files" "$(heap_files "$WORK/err" | tr '\n' ' ')" "jeprof.$pid.0.f.heap "
# the error exit must not lose what the program had buffered on stdout
check_eq "prof_leak_error: program output kept" "$(grep -c '^done$' "$WORK/leakerr.out" || true)" 1

# ---- prof_leak_error without leaks: normal exit, no error notice ----------
mkdir -p "$WORK/noleak"
run noleak "$WORK/noleak" MALLOC_CONF=prof_leak:true,prof_leak_error:true,lg_prof_sample:0 \
    LD_PRELOAD="$LIB" "$WORK/prog" noleak
check_eq "prof_leak_error without leaks: exit status" "$RC" 0
check_stderr_empty noleak

check_no_tmp "$WORK"
finish
