#!/usr/bin/env bash
# base_diff: two manual dumps (mallctl "prof.dump" with no path) around a
# phase of growth; "jeprof --base=first prog second" shows only the growth,
# exactly, at lg_prof_sample:0.  Bytes are usable bytes, as in jemalloc's
# profiles: 1000 -> 1024, 400 -> 448, 3000 -> 3072.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup base_diff "$@"

cat >"$WORK/prog.c" <<'EOF'
#include <errno.h>
#include <heapctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *base[100], *grown[250], *temp[300];   /* global: nothing optimised away */

__attribute__((noinline)) void site_base(void)       /* 100 x 1000, stays */
{
	for (int i = 0; i < 100; i++) {
		base[i] = malloc(1000);
		memset(base[i], 1, 1000);
	}
}

__attribute__((noinline)) void site_growth(void)     /* 250 x 400 (448) = 112000 */
{
	for (int i = 0; i < 250; i++) {
		grown[i] = malloc(400);
		memset(grown[i], 2, 400);
	}
}

__attribute__((noinline)) void site_temp(void)       /* allocated, then freed */
{
	for (int i = 0; i < 300; i++)
		temp[i] = malloc(3000);
}

__attribute__((noinline)) void drop_temp(void)
{
	for (int i = 0; i < 300; i++)
		free(temp[i]);
}

int main(void)
{
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	site_base();
	site_temp();
	int e1 = mallctl("prof.dump", NULL, NULL, NULL, 0);
	site_growth();
	int e2 = mallctl("prof.dump", NULL, NULL, NULL, 0);
	drop_temp();
	int e3 = mallctl("prof.dump", NULL, NULL, NULL, 0);
	printf("dumps %d %d %d\n", e1, e2, e3);
	return 0;
}
EOF
compile_linked "$WORK/prog" "$WORK/prog.c"
mkdir -p "$WORK/run"
run base "$WORK/run" MALLOC_CONF=prof:true,lg_prof_sample:0 "$WORK/prog"
check_eq "exit status" "$RC" 0
check_stderr_empty base
check_eq "mallctl prof.dump results" "$(grep '^dumps ' "$WORK/base.out")" "dumps 0 0 0"
pid=$(pid_of base)
first=jeprof.$pid.0.m0.heap
second=jeprof.$pid.1.m1.heap
third=jeprof.$pid.2.m2.heap
check_eq "dump files" "$(heap_files "$WORK/run" | tr '\n' ' ')" "$first $second $third "

if [ -f "$WORK/run/$first" ] && [ -f "$WORK/run/$second" ]; then
	# each dump on its own
	if jp "$WORK/first.txt" "$WORK/prog" "$WORK/run/$first"; then
		check_eq "first dump: site_base" "$(jp_flat "$WORK/first.txt" site_base)" 102400
		check_eq "first dump: site_temp" "$(jp_flat "$WORK/first.txt" site_temp)" 921600
		check_eq "first dump: site_growth" "$(jp_flat "$WORK/first.txt" site_growth)" absent
	fi
	if jp "$WORK/second.txt" "$WORK/prog" "$WORK/run/$second"; then
		check_eq "second dump: site_base" "$(jp_flat "$WORK/second.txt" site_base)" 102400
		check_eq "second dump: site_temp" "$(jp_flat "$WORK/second.txt" site_temp)" 921600
		check_eq "second dump: site_growth" "$(jp_flat "$WORK/second.txt" site_growth)" 112000
	fi
	# the growth between the first two dumps, and nothing else
	if jp "$WORK/diff.txt" --base="$WORK/run/$first" "$WORK/prog" "$WORK/run/$second"; then
		check_eq "diff first->second: Total" "$(jp_total "$WORK/diff.txt")" 112000
		check_eq "diff first->second: site_growth" "$(jp_flat "$WORK/diff.txt" site_growth)" 112000
		nz=$(awk '$1 ~ /^-?[0-9]+$/ && $1 != 0 { print $6 }' "$WORK/diff.txt" | tr '\n' ' ')
		check_eq "diff first->second: functions with nonzero flat bytes" "$nz" "site_growth "
	fi
fi
if [ -f "$WORK/run/$second" ] && [ -f "$WORK/run/$third" ]; then
	# freeing shows as negative growth
	if jp "$WORK/diff2.txt" --base="$WORK/run/$second" "$WORK/prog" "$WORK/run/$third"; then
		check_eq "diff second->third: Total" "$(jp_total "$WORK/diff2.txt")" -921600
		check_eq "diff second->third: site_temp" "$(jp_flat "$WORK/diff2.txt" site_temp)" -921600
		nz=$(awk '$1 ~ /^-?[0-9]+$/ && $1 != 0 { print $6 }' "$WORK/diff2.txt" | tr '\n' ' ')
		check_eq "diff second->third: functions with nonzero flat bytes" "$nz" "site_temp "
	fi
fi
check_no_tmp "$WORK"
finish
