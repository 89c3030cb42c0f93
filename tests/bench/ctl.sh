#!/usr/bin/env bash
# The control plane's numbers for `make bench`: the round trip of a `set`
# to an idle target (command posted to answer read), the same through the
# heapctl command (process start included), a dump of a profile with
# 10,000 stacks requested through the segment, and the sweep of /dev/shm
# for segments of processes that are gone.  Prints Markdown.
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/$build/bench"
mkdir -p "$out"
reps=${BENCH_REPS:-5}
gcc -O2 -g -o "$out/ctl_rtt" "$root/tests/bench/ctl_rtt.c" "$root/shm/shm.c" "$root/shm/client.c" || exit 1
target="$root/$build/tests/programs/target"
[ -x "$target" ] || make -C "$root" --no-print-directory "$build/tests/programs/target" >/dev/null || exit 1
tmp=$(mktemp -d)
pids=()
# (killed, the processes leave their segments: the sweep removes them)
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; "$out/ctl_rtt" 0 sweep 1 >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT

start() {  # conf args... -> sets $pid once the target is ready
	HEAPCTL_CONF=$1 "$target" "${@:2}" >"$tmp/out" 2>&1 &
	pids+=($!)
	pid=$!
	for _ in $(seq 200); do grep -q '^ready' "$tmp/out" 2>/dev/null && return 0; sleep 0.05; done
	echo "target did not start"; exit 1
}
source "$root/tests/bench/lib.sh"
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
# rtt_stats ROWS: the median of ctl_rtt's medians and p90s over the runs, and
# the worst of their worsts (in us)
rtt_stats() {
	echo "$(echo "$1" | field median_us | median) $(echo "$1" | field p90_us | median)" \
	    "$(echo "$1" | field max_us | sort -g | tail -1)"
}

machine_line
echo
# An idle target: no allocation beat to compete with (tick of 1 s).
start "" grow=0 tick_ms=1000
sleep 0.5
rows=$(for ((i = 0; i < reps; i++)); do "$out/ctl_rtt" "$pid" set 1000; sleep 0.2; done)
read -r set_med set_p90 set_max <<<"$(rtt_stats "$rows")"
cli=$(for ((i = 0; i < 50; i++)); do
	t0=$(date +%s%N); "$root/$build/heapctl" set "$pid" prof.lg_sample=19 >/dev/null; t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000))
done | median)
kill "$pid"
echo "| measure | median | p90 | worst |"
echo "| --- | ---: | ---: | ---: |"
printf '| set round trip through the segment, idle target (%d x 1000) | %s us | %s us | %s us |\n' "$reps" "$set_med" "$set_p90" "$set_max"
printf '| heapctl set command, process start to exit (50 runs) | %s us | | |\n' "$cli"

# 10,000 distinct live stacks, every allocation sampled.
start "prof:true,lg_prof_sample:0" grow=0 tick_ms=1000 stacks=10000
sleep 0.5
rows=$(for ((i = 0; i < reps; i++)); do "$out/ctl_rtt" "$pid" dump 5 "$tmp"; done)
read -r d_med d_p90 d_max <<<"$(rtt_stats "$rows")"
bytes=$(echo "$rows" | field bytes | tail -1)
nstk=$(grep -c '^@' "$tmp/rtt.0.heap")
printf '| dump of %s stacks (%s KiB file) requested through the segment (%d x 5) | %s ms | %s ms | %s ms |\n' \
    "$nstk" "$((bytes / 1024))" "$reps" \
    "$(awk -v u="$d_med" 'BEGIN{printf "%.1f", u/1000}')" "$(awk -v u="$d_p90" 'BEGIN{printf "%.1f", u/1000}')" \
    "$(awk -v u="$d_max" 'BEGIN{printf "%.1f", u/1000}')"

# The sweep for segments of processes that are gone, with 200 live
# processes running the library: as each process that starts makes it (one
# kill(2) for each segment) and as heapctl list does (a look at every
# segment and /proc/PID/stat, for pids taken since by another process).
for ((i = 0; i < 200; i++)); do
	LD_PRELOAD="$root/$build/libheapctl.so" sleep 60 &
	pids+=($!)
done
for _ in $(seq 100); do
	nseg=$(find /dev/shm -maxdepth 1 -name 'heapctl.*' | wc -l)
	[ "$nseg" -ge 200 ] && break
	sleep 0.05
done
for mode in sweep sweep-all; do
	rows=$(for ((i = 0; i < reps; i++)); do "$out/ctl_rtt" 0 "$mode" 20; done)
	read -r s_med s_p90 s_max <<<"$(rtt_stats "$rows")"
	what="a process that starts with the library"
	[ "$mode" = sweep-all ] && what="heapctl list"
	printf '| sweep of /dev/shm (%s segments of live processes) as %s makes it (%d x 20) | %s us | %s us | %s us |\n' \
	    "$nseg" "$what" "$reps" "$s_med" "$s_p90" "$s_max"
done
