#!/usr/bin/env bash
# `heapctl stacks` for `make bench`: how long a process is stopped while the
# stacks of all its threads are read (the command's own stopped_ns, from
# the first interrupt to the last detach), and the command's wall time with
# symbolizing, for a program of 50 threads (each asleep 6 calls deep, built
# -O2 -g without frame pointers, so libunwind reads the CFI) and for
# Debian's python3 (one thread, a deep interpreter stack).  Neither runs
# the library.  Prints Markdown.
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/$build/bench"
mkdir -p "$out"
reps=${BENCH_REPS:-5}
H="$root/$build/heapctl"
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

cat >"$tmp/threads.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#define N 50
__attribute__((noinline)) static void f6(void) { for (;;) sleep(1); }
__attribute__((noinline)) static void f5(void) { f6(); __asm__ volatile(""); }
__attribute__((noinline)) static void f4(void) { f5(); __asm__ volatile(""); }
__attribute__((noinline)) static void f3(void) { f4(); __asm__ volatile(""); }
__attribute__((noinline)) static void f2(void) { f3(); __asm__ volatile(""); }
__attribute__((noinline)) static void f1(void) { f2(); __asm__ volatile(""); }
static void *run(void *a) { (void)a; f1(); return NULL; }
int main(void)
{
	pthread_t t;
	for (int i = 1; i < N; i++)
		pthread_create(&t, NULL, run, NULL);
	printf("ready\n");
	fflush(stdout);
	f1();
}
EOF
gcc -O2 -g -fomit-frame-pointer -pthread -o "$tmp/threads" "$tmp/threads.c" || exit 1

source "$root/tests/bench/lib.sh"

# measure PID WHAT: the rows for one process
measure() {
	local p=$1 what=$2 i
	: >"$tmp/stopped" >"$tmp/wall"
	for ((i = 0; i < reps; i++)); do
		t0=$(date +%s%N)
		"$H" stacks "$p" --json >"$tmp/s.json" || { echo "| $what | failed | |"; return; }
		echo "$(( $(date +%s%N) - t0 ))" >>"$tmp/wall"
		python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["stopped_ns"])' "$tmp/s.json" >>"$tmp/stopped"
	done
	local nthr nfr
	nthr=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["threads"]))' "$tmp/s.json")
	nfr=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(sum(len(t["frames"]) for t in d["threads"]))' "$tmp/s.json")
	printf '| %s: %s threads, %s frames: the process stopped for | %s ms | |\n' "$what" "$nthr" "$nfr" \
	    "$(median <"$tmp/stopped" | awk '{printf "%.2f", $1/1e6}')"
	printf '| %s: heapctl stacks, wall time with symbolizing | %s ms | |\n' "$what" \
	    "$(median <"$tmp/wall" | awk '{printf "%.1f", $1/1e6}')"
}

machine_line
echo
echo "| measure | median of $reps | note |"
echo "| --- | ---: | --- |"
"$tmp/threads" >"$tmp/threads.out" 2>&1 &
pids+=($!)
tp=$!
for _ in $(seq 100); do grep -q ready "$tmp/threads.out" && break; sleep 0.05; done
sleep 0.3
measure "$tp" "50 sleeping threads, -O2 without frame pointers"
python3 -c '
import sys, time
def deep(n):
    if n == 0:
        print("ready", flush=True)
        while True:
            time.sleep(1)
    return deep(n - 1)
deep(40)' >"$tmp/py.out" 2>&1 &
pids+=($!)
pp=$!
for _ in $(seq 100); do grep -q ready "$tmp/py.out" && break; sleep 0.05; done
measure "$pp" "python3, 40 Python calls deep"
