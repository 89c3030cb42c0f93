#!/usr/bin/env bash
# `heapctl trace` for `make bench`, side by side in one run:
#  - cost per malloc+free pair of a loop in a process started without the
#    library (64-71 byte blocks, timed by the program after a go file, so
#    attaching is not counted): untraced; under a bpftrace script of the
#    memleak shape (uprobe and uretprobe on malloc with a user stack, uprobe
#    on free); under `heapctl trace --malloc` (default rate, 2^19); under a
#    bare counting uprobe on malloc (the floor of one probe hit);
#  - slowdown of a program that grows steadily (writes 512 MiB in 64 KiB
#    mallocs, with 16,384 multiply-adds per new page: a few hundred MB/s,
#    faster than services grow) under `heapctl trace --faults` (default
#    rate, 2^16).  Page faults in this VM vary by tens of percent from run
#    to run: compare the medians.
# Runs interleaved, BENCH_REPS (5) of each, medians.  Needs root.  Prints
# Markdown.
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/bench/lib.sh"
reps=${BENCH_REPS:-5}
H="$root/$build/heapctl"
bench_tmp
if [ "$(id -u)" -ne 0 ] || ! command -v bpftrace >/dev/null; then
	echo "trace bench: needs root and bpftrace; skipped"
	exit 0
fi

# prog GOFILE loop N | grow: prints "ready", waits for GOFILE, runs, prints
# its own figure (ns per pair, or ms)
cat >"$tmp/prog.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static void loop(long n)
{
	for (long i = 0; i < n; i++) {
		void *p = malloc(64 + (i & 7));
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
}
static void grow(void)
{
	volatile unsigned long sink = 0;
	for (int i = 0; i < 8192; i++) {              /* 512 MiB */
		unsigned char *p = malloc(65536);
		for (int pg = 0; pg < 65536; pg += 4096) {
			unsigned long h = (unsigned long)i;
			for (int k = 0; k < 16384; k++)
				h = h * 6364136223846793005ul + k;
			p[pg] = (unsigned char)h;
			sink += h;
		}
	}
}
int main(int argc, char **argv)
{
	int is_loop = strcmp(argv[2], "loop") == 0;
	long n = is_loop ? atol(argv[3]) : 1;
	printf("ready\n");
	fflush(stdout);
	while (access(argv[1], F_OK) != 0)
		usleep(1000);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (is_loop)
		loop(n);
	else
		grow();
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	printf("%.1f\n", is_loop ? ns / n : ns / 1e6);
	return 0;
}
C
gcc -O2 -g -o "$tmp/prog" "$tmp/prog.c" || exit 1
libc=$(ldd "$tmp/prog" | awk '/libc.so/ { print $3 }')
cat >"$tmp/memleak.bt" <<BT
uprobe:$libc:malloc /pid == \$1/ { @size[tid] = arg0; @stack[tid] = ustack; }
uretprobe:$libc:malloc /pid == \$1/ { @live[retval] = (@size[tid], @stack[tid]); }
uprobe:$libc:free /pid == \$1/ { delete(@live[arg0]); }
BT
cat >"$tmp/count.bt" <<BT
uprobe:$libc:malloc /pid == \$1/ { @n = count(); }
BT

# one WHAT N MODE: the program's own figure for WHAT (loop, grow), with
# MODE attached first
one() {
	local what=$1 n=$2 mode=$3 tpid="" i
	rm -f "$tmp/go" "$tmp/out" "$tmp/err"
	"$tmp/prog" "$tmp/go" "$what" "$n" >"$tmp/out" &
	local pid=$!
	for i in $(seq 100); do grep -q ready "$tmp/out" && break; sleep 0.05; done
	case $mode in
	none) ;;
	heapctl-malloc) "$H" trace "$pid" --malloc -o "$tmp/t.heap" >/dev/null 2>"$tmp/err" & tpid=$! ;;
	heapctl-faults) "$H" trace "$pid" --faults -o "$tmp/t.heap" >/dev/null 2>"$tmp/err" & tpid=$! ;;
	bpftrace-*) bpftrace "$tmp/${mode#bpftrace-}.bt" "$pid" >/dev/null 2>"$tmp/err" & tpid=$! ;;
	esac
	if [ -n "$tpid" ]; then
		# heapctl says "tracing" once attached; bpftrace "Attaching"
		for i in $(seq 400); do grep -q -e tracing -e Attaching "$tmp/err" && break; sleep 0.05; done
		sleep 1
	fi
	touch "$tmp/go"
	wait "$pid"
	[ -n "$tpid" ] && { kill -INT "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null; }
	tail -1 "$tmp/out"
}

declare -A r
modes_loop="none bpftrace-memleak heapctl-malloc bpftrace-count"
for ((k = 0; k < reps; k++)); do
	for m in $modes_loop; do
		n=20000000
		[ "$m" != none ] && n=200000
		r[loop,$m]+="$(one loop $n "$m") "
	done
	for m in none heapctl-faults; do
		r[grow,$m]+="$(one grow 0 "$m") "
	done
done
med() { tr ' ' '\n' <<<"$1" | grep . | median; }

echo "### heapctl trace"
echo
machine_line
echo
echo "Cost per malloc+free pair of a loop in a process without the library (ns, median of $reps):"
echo
echo "| loop | ns/pair | vs bpftrace memleak-shaped script |"
echo "|---|---:|---:|"
bt=$(med "${r[loop,bpftrace-memleak]}")
for m in $modes_loop; do
	v=$(med "${r[loop,$m]}")
	printf '| %s | %s | %s |\n' "$m" "$v" "$(awk -v a="$v" -v b="$bt" 'BEGIN { printf "%.3f", a / b }')"
done
echo
echo "Goal: heapctl-malloc at most 0.15 of the bpftrace script."
echo
g0=$(med "${r[grow,none]}") g1=$(med "${r[grow,heapctl-faults]}")
echo "| grow 512 MiB steadily | ms | slowdown |"
echo "|---|---:|---:|"
printf '| untraced | %s | |\n' "$g0"
printf '| heapctl trace --faults | %s | %s%% |\n' "$g1" "$(awk -v a="$g1" -v b="$g0" 'BEGIN { printf "%.1f", (a / b - 1) * 100 }')"
echo
echo "Goal: under 5% slowdown."
