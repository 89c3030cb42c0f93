#!/usr/bin/env bash
# `heapctl inject` for `make bench`:
#  - cost per malloc+free pair of a loop in a process started without the
#    library (64-71 byte blocks, timed by the program after a go file, so
#    injecting is not counted): not injected; injected with sampling off;
#    injected at the default rate (2^19); and, for scale, the same loop
#    under the preloaded library at the default rate;
#  - time from `heapctl inject` to the segment answering, and how long the
#    process was stopped, for an idle program with 9 threads and for one
#    whose 8 threads allocate without pause (tests/programs/churn.c), from
#    the command's --json.
# Runs interleaved, BENCH_REPS (5) of each, medians.  Needs root.  Prints
# Markdown.
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/bench/lib.sh"
reps=${BENCH_REPS:-5}
H="$root/$build/heapctl"
bench_tmp
if [ "$(id -u)" -ne 0 ]; then
	echo "inject bench: needs root; skipped"
	exit 0
fi

# loop GOFILE N: prints "ready", waits for GOFILE, prints ns per pair;
# idle: 8 threads asleep, prints "ready", waits for GOFILE
cat >"$tmp/prog.c" <<'C'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static void *sleeper(void *a) { for (;;) pause(); return a; }
int main(int argc, char **argv)
{
	int idle = strcmp(argv[2], "idle") == 0;
	pthread_t t;
	for (int i = 0; idle && i < 8; i++)
		pthread_create(&t, NULL, sleeper, NULL);
	printf("ready\n");
	fflush(stdout);
	while (access(argv[1], F_OK) != 0)
		usleep(1000);
	if (idle)
		return 0;
	long n = atol(argv[3]);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		void *p = malloc(64 + (i & 7));
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
C
gcc -O2 -g -pthread -o "$tmp/prog" "$tmp/prog.c" || exit 1
gcc -O2 -g -pthread -o "$tmp/churn" "$root/tests/programs/churn.c" || exit 1
N=50000000

# start GOFILE ARGS...: the program in the background; PID once ready
start() {
	local go=$1
	shift
	rm -f "$go" "$tmp/out"
	"$@" >"$tmp/out" 2>/dev/null &
	PID=$!
	for _ in $(seq 500); do grep -q ready "$tmp/out" 2>/dev/null && return 0; sleep 0.01; done
	return 1
}

# pair MODE: ns per pair of one run (plain, off, on, preload)
pair() {
	local go="$tmp/go"
	if [ "$1" = preload ]; then
		start "$go" env LD_PRELOAD="$root/$build/libheapctl.so" HEAPCTL_CONF=prof:true "$tmp/prog" "$go" loop $N
	else
		start "$go" "$tmp/prog" "$go" loop $N
	fi
	case $1 in
	off) "$H" inject "$PID" --off >/dev/null ;;
	on) "$H" inject "$PID" >/dev/null ;;
	esac
	touch "$go"
	wait "$PID"
	cat "$tmp/out" | tail -1
}

# attach KIND: "ms stopped_ms" of one inject into an idle or a churning program
attach() {
	local go="$tmp/go"
	if [ "$1" = idle ]; then
		start "$go" "$tmp/prog" "$go" idle
	else
		rm -f "$go"
		"$tmp/churn" "$go" >"$tmp/out" 2>/dev/null &
		PID=$!
		for _ in $(seq 500); do grep -q ready "$tmp/out" 2>/dev/null && break; sleep 0.01; done
	fi
	"$H" inject "$PID" --json --timeout 20 |
	    sed -n 's/.*"ms":\([0-9.]*\),"stopped_ms":\([0-9.]*\).*/\1 \2/p'
	touch "$go"
	wait "$PID"
}

declare -A v
for r in $(seq "$reps"); do
	for m in plain off on preload; do v[$m]+="$(pair $m) "; done
	for k in idle churn; do
		read -r ms st <<<"$(attach $k)"
		v[${k}_ms]+="$ms "
		v[${k}_st]+="$st "
	done
done
med() { tr ' ' '\n' <<<"${v[$1]}" | grep . | median; }

echo
echo "## heapctl inject"
echo
machine_line
echo
echo "Cost per malloc+free pair of a loop in a process started without the library, median of $reps:"
echo
echo "| | ns per pair | vs not injected |"
echo "|---|---:|---:|"
base=$(med plain)
for m in plain off on preload; do
	case $m in
	plain) name="not injected (glibc)" ;;
	off) name="injected, sampling off" ;;
	on) name="injected, default rate (2^19)" ;;
	preload) name="libheapctl.so preloaded, default rate" ;;
	esac
	x=$(med $m)
	echo "| $name | $x | $(awk -v a="$x" -v b="$base" 'BEGIN { printf "%+.1f ns", a - b }') |"
done
echo
echo "\`heapctl inject\` until the segment answers, and how long every thread was held (median of $reps):"
echo
echo "| program | inject to answering | process stopped |"
echo "|---|---:|---:|"
echo "| 9 threads, idle | $(med idle_ms) ms | $(med idle_st) ms |"
echo "| 8 threads allocating without pause, forking | $(med churn_ms) ms | $(med churn_st) ms |"
