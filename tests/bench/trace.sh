#!/usr/bin/env bash
# `heapctl trace` for `make bench`, side by side in one run:
#  - cost per malloc+free pair of a loop in a process started without the
#    library (64-71 byte blocks, timed by the program after a go file, so
#    attaching is not counted): untraced; under a bpftrace script of the
#    memleak shape (uprobe and uretprobe on malloc with a user stack, uprobe
#    on free); under `heapctl trace --malloc` (default rate, 2^19, every
#    call probed: --budget 0); under a
#    bare counting uprobe on malloc (the floor of one probe hit);
#  - requests a second of Debian's redis-server (jemalloc) under
#    redis-benchmark (SET and GET, 50 clients, pipelines of 16): untraced;
#    under `heapctl trace --malloc` with the default budget (5% of a CPU),
#    the benchmark started as soon as heapctl says "tracing", so that its
#    first window and the detaching of its probes fall in the run; with
#    --budget 0 (every call probed); under the bpftrace memleak-shaped
#    script on jemalloc's malloc and free.  The fully probed runs make
#    REDIS_SLOW_N requests (30,000) and the others REDIS_N (1,000,000), as
#    at 2% of the speed a million requests take minutes;
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
	heapctl-malloc) "$H" trace "$pid" --malloc --budget 0 -o "$tmp/t.heap" >/dev/null 2>"$tmp/err" & tpid=$! ;;
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

# redis MODE: "SET GET" requests a second of redis-benchmark against a
# fresh redis-server, with MODE attached first
redis_n=${REDIS_N:-1000000} redis_slow_n=${REDIS_SLOW_N:-30000}
redis_port=$((20000 + $$ % 20000))
redis() {
	local mode=$1 n=$redis_n tpid="" pid i
	rm -f "$tmp/rerr"
	env -u LD_PRELOAD redis-server --port "$redis_port" --save "" --appendonly no >/dev/null 2>&1 &
	pid=$!
	for i in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
	case $mode in
	none) ;;
	heapctl-budget) "$H" trace "$pid" --malloc -o "$tmp/r.heap" >/dev/null 2>"$tmp/rerr" & tpid=$! ;;
	heapctl-nobudget) "$H" trace "$pid" --malloc --budget 0 -o "$tmp/r.heap" >/dev/null 2>"$tmp/rerr" & tpid=$!
		n=$redis_slow_n ;;
	bpftrace-memleak) bpftrace "$tmp/memleak-je.bt" "$pid" >/dev/null 2>"$tmp/rerr" & tpid=$!
		n=$redis_slow_n ;;
	esac
	if [ -n "$tpid" ]; then
		for i in $(seq 400); do grep -q -e tracing -e Attaching "$tmp/rerr" && break; sleep 0.05; done
		# bpftrace says Attaching before its probes are in
		[ "$mode" = bpftrace-memleak ] && sleep 1
	fi
	redis-benchmark -p "$redis_port" -t set,get -n "$n" -P 16 -q 2>/dev/null | tr '\r' '\n' |
	    awk '/^(SET|GET): [0-9.]+ requests per second/ { v[$1] = $2 } END { printf "%s %s\n", v["SET:"], v["GET:"] }'
	[ -n "$tpid" ] && { kill -INT "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null; }
	[ "$mode" = heapctl-budget ] && grep -q 'over the budget' "$tmp/rerr" && echo detached >>"$tmp/rdetached"
	redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1
	wait "$pid" 2>/dev/null
}
have_redis=false
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
	have_redis=true
	jemalloc=$(ldd "$(command -v redis-server)" | awk '/libjemalloc/ { print $3 }')
	cat >"$tmp/memleak-je.bt" <<BT
uprobe:$jemalloc:malloc /pid == \$1/ { @size[tid] = arg0; @stack[tid] = ustack; }
uretprobe:$jemalloc:malloc /pid == \$1/ { @live[retval] = (@size[tid], @stack[tid]); }
uprobe:$jemalloc:free /pid == \$1/ { delete(@live[arg0]); }
BT
fi
modes_redis="none heapctl-budget heapctl-nobudget bpftrace-memleak"

declare -A r
modes_loop="none bpftrace-memleak heapctl-malloc bpftrace-count"
for ((k = 0; k < reps; k++)); do
	if $have_redis; then
		for m in $modes_redis; do
			read -r set get <<<"$(redis "$m")"
			r[set,$m]+="$set " r[get,$m]+="$get "
		done
	fi
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
if $have_redis; then
	echo "Debian's redis-server under redis-benchmark (-t set,get -P 16, 50 clients; requests a second,"
	echo "median of $reps; $redis_n requests untraced and with the budget, $redis_slow_n fully probed):"
	echo
	echo "| redis-server | SET/s | vs untraced | GET/s | vs untraced |"
	echo "|---|---:|---:|---:|---:|"
	s0=$(med "${r[set,none]}") g0=$(med "${r[get,none]}")
	for m in $modes_redis; do
		s1=$(med "${r[set,$m]}") g1=$(med "${r[get,$m]}")
		printf '| %s | %s | %s | %s | %s |\n' "$m" "$s1" "$(awk -v a="$s1" -v b="$s0" 'BEGIN { printf "%.3f", a / b }')" \
		    "$g1" "$(awk -v a="$g1" -v b="$g0" 'BEGIN { printf "%.3f", a / b }')"
	done
	echo
	echo "heapctl-budget: the probes were detached for the budget in $(cat "$tmp/rdetached" 2>/dev/null | wc -l) of $reps runs."
	echo "Goal: with the default budget, within 0.9 of untraced."
	echo
fi
g0=$(med "${r[grow,none]}") g1=$(med "${r[grow,heapctl-faults]}")
echo "| grow 512 MiB steadily | ms | slowdown |"
echo "|---|---:|---:|"
printf '| untraced | %s | |\n' "$g0"
printf '| heapctl trace --faults | %s | %s%% |\n' "$g1" "$(awk -v a="$g1" -v b="$g0" 'BEGIN { printf "%.1f", (a / b - 1) * 100 }')"
echo
echo "Goal: under 5% slowdown."
