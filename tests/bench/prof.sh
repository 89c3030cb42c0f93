#!/usr/bin/env bash
# The profiler's numbers for `make bench`: sampling cost at several rates and
# unwinders, side by side with jemalloc under the same MALLOC_CONF, and the
# time to dump a profile of 10,000 stacks.  Prints a Markdown table.
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/$build/bench"
mkdir -p "$out"
lib="$root/$build/libheapctl.so"
je=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
reps=${BENCH_REPS:-5}
gcc -O2 -g -o "$out/prof_cost" "$root/tests/bench/prof_cost.c" || exit 1
gcc -O2 -g -fno-omit-frame-pointer -o "$out/prof_cost_fp" "$root/tests/bench/prof_cost.c" || exit 1
gcc -O1 -g -fno-omit-frame-pointer -fno-inline -o "$out/dump_cost" "$root/tests/bench/dump_cost.c" -ldl || exit 1

source "$root/tests/bench/lib.sh"
cost() {  # lib conf n binary -> median ns/op
	local l=$1 c=$2 n=$3 b=$4 i
	for ((i = 0; i < reps; i++)); do
		MALLOC_CONF=$c LD_PRELOAD=$l "$out/$b" "$n" 2>/dev/null | sed -n 's/.*ns_per_op=\([0-9.]*\).*/\1/p'
	done | median
}

machine_line
echo
echo "| MALLOC_CONF | heapctl ns/op | jemalloc ns/op | jemalloc / heapctl |"
echo "| --- | ---: | ---: | ---: |"
row() {   # label conf n [binary]
	local b=${4:-prof_cost}
	local h j
	h=$(cost "$lib" "$2" "$3" "$b")
	j=$(cost "$je" "$2" "$3" "$b")
	printf '| %s | %s | %s | %s |\n' "$1" "$h" "$j" "$(awk -v a="$j" -v b="$h" 'BEGIN{printf "%.2f", (b>0)?a/b:0}')"
}
row "(none: profiling off)" "" 10000000
row "prof:true,prof_active:false" "prof:true,prof_active:false" 10000000
row "prof:true (lg_prof_sample 19)" "prof:true" 10000000
row "prof:true,prof_lifetimes:false" "prof:true,prof_lifetimes:false" 10000000
row "prof:true,lg_prof_sample:12" "prof:true,lg_prof_sample:12" 2000000
row "prof:true,lg_prof_sample:12,prof_lifetimes:false" "prof:true,lg_prof_sample:12,prof_lifetimes:false" 2000000
row "prof:true,lg_prof_sample:0" "prof:true,lg_prof_sample:0" 200000
# jemalloc's prof_recent beside the same ring (agent/recent.c): the last
# 1000 sampled allocations with their stacks, and the freeing stack
row "prof:true,lg_prof_sample:12,prof_recent_alloc_max:1000" "prof:true,lg_prof_sample:12,prof_recent_alloc_max:1000" 2000000
echo
echo "Unwinders at lg_prof_sample:0 (heapctl only; ns per malloc+free, every allocation unwound):"
echo
echo "| prof_unwind | program without frame pointers | program with frame pointers |"
echo "| --- | ---: | ---: |"
for u in fp libunwind libgcc; do
	printf '| %s | %s | %s |\n' "$u" \
	    "$(cost "$lib" "prof:true,lg_prof_sample:0,prof_unwind:$u" 200000 prof_cost)" \
	    "$(cost "$lib" "prof:true,lg_prof_sample:0,prof_unwind:$u" 200000 prof_cost_fp)"
done
echo
echo "Profiling at the default rate on the allocation benchmarks (heapctl; median CPU seconds, user+sys; ratio to profiling off):"
echo
echo "| benchmark | off | prof:true,prof_active:false | prof:true (lg 19) |"
echo "| --- | ---: | ---: | ---: |"
wall() {  # conf program args... -> median CPU seconds (user+sys: steadier than wall here)
	local c=$1 i; shift
	for ((i = 0; i < reps; i++)); do
		MALLOC_CONF=$c "$out/runstat" -p "$lib" -o /dev/null -- "$@" 2>/dev/null | awk '{print $4 + $5}'
	done | median
}
if [ -x "$out/runstat" ] && [ -x "$out/st_churn" ]; then
	for b in st_churn mt_churn prodcons realloc_grow; do
		[ -x "$out/$b" ] || continue
		off=$(wall "" "$out/$b"); ina=$(wall "prof:true,prof_active:false" "$out/$b"); on=$(wall "prof:true" "$out/$b")
		printf '| %s | %s | %s (%s) | %s (%s) |\n' "$b" "$off" "$ina" \
		    "$(awk -v a="$ina" -v b="$off" 'BEGIN{printf "%.3f", a/b}')" "$on" \
		    "$(awk -v a="$on" -v b="$off" 'BEGIN{printf "%.3f", a/b}')"
	done
else
	echo "(run tests/bench/run.sh first: it builds the allocation benchmarks)"
fi
echo
# Instructions are counted exactly by callgrind, whatever else the machine
# is doing: the steady measure of what profiling adds.  Purging is time-based
# and changes where blocks land (and so how often realloc grows in place),
# which moved realloc_grow's count by 2% between identical runs; a one-hour
# decay keeps it out of these runs, so the counts repeat.
if command -v valgrind >/dev/null; then
	echo "Instructions executed (callgrind; exact and repeatable; every run with dirty_decay_ms:3600000), heapctl, ratio to profiling off:"
	echo
	echo "| benchmark | off | prof:true,prof_active:false | prof:true (lg 19) |"
	echo "| --- | ---: | ---: | ---: |"
	icount() {  # conf program args...
		local c=$1; shift
		MALLOC_CONF=${c:+$c,}dirty_decay_ms:3600000 LD_PRELOAD=$lib valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 |
		    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
	}
	for spec in "st_churn ops=2000000" "realloc_grow"; do
		set -- $spec
		[ -x "$out/$1" ] || continue
		b=$1; shift
		off=$(icount "" "$out/$b" "$@"); ina=$(icount "prof:true,prof_active:false" "$out/$b" "$@"); on=$(icount "prof:true" "$out/$b" "$@")
		printf '| %s | %s | %s (%s) | %s (%s) |\n' "$b" "$off" "$ina" \
		    "$(awk -v a="$ina" -v b="$off" 'BEGIN{printf "%.5f", a/b}')" "$on" \
		    "$(awk -v a="$on" -v b="$off" 'BEGIN{printf "%.4f", a/b}')"
	done
	echo
fi
tmp=$(mktemp -d)
ms=$(for ((i = 0; i < reps; i++)); do
	MALLOC_CONF=prof:true,lg_prof_sample:0 LD_PRELOAD=$lib "$out/dump_cost" 10000 "$tmp/d$i.heap" | sed -n 's/.*dump_ms=\([0-9.]*\).*/\1/p'
done | median)
echo "Dump of a profile with 10,000 stacks: median $ms ms ($(ls "$tmp" | wc -l) dumps, $(du -k "$tmp/d0.heap" | cut -f1) KiB each)"
rm -rf "$tmp"
