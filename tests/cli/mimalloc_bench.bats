#!/usr/bin/env bats
# tests/cli/mimalloc_bench.bats - issue 41's instruments: the benchmark
# programs of mimalloc-bench's patterns (tests/bench) print the same
# checksum under glibc and under libheapctl.so, larson_sized frees
# through heapctl's sdallocx and cxx_new_delete news through heapctl's
# operator new; mimalloc_bench.awk turns a results.tsv made up
# here into the ratios to the best peer worked out by hand (a throughput
# inverted into a time), the rows that a peer dominates, and a failed or
# silent run into a problem on stderr; mimalloc_bench.sh refuses a
# directory that is not a mimalloc-bench checkout.

bats_require_minimum_version 1.5.0

setup() {
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	: "${HEAPCTL_BUILD:=$root/build}"
	lib=$HEAPCTL_BUILD/libheapctl.so
	T=$BATS_TEST_TMPDIR
}

# build NAME: tests/bench/NAME.c into $T/NAME
build() {
	gcc -O2 -pthread -o "$T/$1" "$root/tests/bench/$1.c" -lm
}

# same_sum PROGRAM ARGS...: exit 0 and one checksum under both allocators
same_sum() {
	local plain preloaded
	plain=$(env -u LD_PRELOAD "$@" 2>"$T/plain.err") || { cat "$T/plain.err"; return 1; }
	preloaded=$(LD_PRELOAD=$lib "$@" 2>"$T/preloaded.err") || { cat "$T/preloaded.err"; return 1; }
	echo "glibc: $plain; heapctl: $preloaded"
	[[ $plain == checksum=* ]] && [ "$plain" = "$preloaded" ]
}

@test "issue 41's benchmark programs print one checksum under glibc and heapctl" {
	[ -e "$lib" ] || skip "$lib not built"
	for p in larson_sized xthread_batches simple_batches pareto_churn big_buffers thread_leftover false_share size_mix pool_shift; do
		build "$p"
	done
	same_sum "$T/larson_sized" chunks=500 rounds=4 gens=3
	same_sum "$T/larson_sized" chunks=500 rounds=4 gens=3 sized=0
	same_sum "$T/larson_sized" chunks=500 rounds=4 gens=3 sized=0 relay=1 touch=1
	same_sum "$T/xthread_batches" loops=300
	same_sum "$T/simple_batches" pairs=3200
	same_sum "$T/pareto_churn" slots=4096 ops=200000
	same_sum "$T/big_buffers" live=3 pick=1 zero=1 rounds=6
	same_sum "$T/thread_leftover" garbage=0 slots=50 threads=10 rounds=20
	same_sum "$T/false_share" threads=1 passive=0 rounds=50 writes=100
	same_sum "$T/size_mix" steps=200000
	same_sum "$T/pool_shift" threads=3 mib=4 pause_ms=10
	same_sum "$T/pool_shift" threads=1 mib=4 pause_ms=10 fork=1
}

@test "larson_sized frees with the size: sdallocx under heapctl, free under glibc 2.36" {
	[ -e "$lib" ] || skip "$lib not built"
	build larson_sized
	run -0 env LD_PRELOAD="$lib" "$T/larson_sized" chunks=100 rounds=1 gens=1
	[[ $output == *"free call sdallocx"* ]]
	# glibc has free_sized from 2.39 on; the test machine's Debian 12 has 2.36
	if ! env -u LD_PRELOAD "$T/larson_sized" chunks=1 rounds=1 gens=1 2>&1 | grep -q 'free call free_sized'; then
		run -0 env -u LD_PRELOAD "$T/larson_sized" chunks=100 rounds=1 gens=1
		[[ $output == *"free call free,"* ]]
	fi
}

@test "cxx_new_delete (C++) prints one checksum under glibc and heapctl, whose operator new it calls" {
	[ -e "$lib" ] || skip "$lib not built"
	g++ -O2 -pthread -o "$T/cxx_new_delete" "$root/tests/bench/cxx_new_delete.cc"
	plain=$(env -u LD_PRELOAD "$T/cxx_new_delete" ops=200000 window=300)
	preloaded=$(LD_PRELOAD=$lib "$T/cxx_new_delete" ops=200000 window=300)
	echo "glibc: $plain; heapctl: $preloaded"
	[[ $plain == checksum=*" ns_per_pair="*" sized_ns_per_pair="* ]]
	[ "${plain%% *}" = "${preloaded%% *}" ]
	# the program's operator new is heapctl's (allocator/cxx.c)
	run -0 env LD_PRELOAD="$lib" LD_DEBUG=bindings "$T/cxx_new_delete" ops=1000
	grep -F "binding file $T/cxx_new_delete [0] to $lib [0]: normal symbol \`_Znwm'" <<<"$output"
}

# row alloc rep wall_s rss_kib status throughput
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@"; }

report() {
	awk -F'\t' -v allocs="glibc jemalloc heapctl" -v rows="cfrac larsonN rptestN mleak100" \
	    -f "$root/tests/bench/mimalloc_bench.awk" "$T/results.tsv"
}

@test "mimalloc_bench.awk: ratios to the best peer, throughput as 1/throughput, the dominated" {
	{
		# cfrac: jemalloc fastest, glibc smallest; heapctl's median of
		# three (1.0, 1.1, 9.0 s) is 1.1x jemalloc's time
		row cfrac glibc 1 2.0 1000 0 -
		row cfrac jemalloc 1 1.0 3000 0 -
		row cfrac heapctl 1 1.0 1050 0 -
		row cfrac heapctl 2 9.0 1050 0 -
		row cfrac heapctl 3 1.1 1050 0 -
		# larsonN runs 5 s whatever the allocator: throughput decides;
		# jemalloc does 2x glibc's and heapctl 0.8x jemalloc's
		row larsonN glibc 1 5.0 2048 0 1000000
		row larsonN jemalloc 1 5.0 4096 0 2000000
		row larsonN heapctl 1 5.0 4096 0 1600000
		# mleak100: glibc beats jemalloc 2x on time and 3x on RSS
		row mleak100 glibc 1 1.0 1000 0 -
		row mleak100 jemalloc 1 2.0 3000 0 -
		row mleak100 heapctl 1 1.05 1000 0 -
	} >"$T/results.tsv"
	run -0 report
	echo "$output"
	grep -qF '| cfrac | jemalloc 1 s, glibc 1.0 MiB | 2.00, 1.00 | 1.00, 3.00 | **1.10, 1.05** | none |' <<<"$output"
	grep -qF '| larsonN* | jemalloc 2e+06/s, glibc 2.0 MiB | 2.00, 1.00 | 1.00, 2.00 | 1.25, 2.00 | none |' <<<"$output"
	grep -qF '| mleak100 | glibc 1 s, glibc 1.0 MiB | **1.00, 1.00** | 2.00, 3.00 | **1.05, 1.00** | jemalloc by glibc (2.00, 3.00) and heapctl (1.90, 3.00) |' <<<"$output"
	grep -qF '| **both <= 1.1** | | 1 of 3 | 0 of 3 | 2 of 3 |' <<<"$output"
	grep -qF '| **not dominated** | | 3 of 3 | 2 of 3 | 3 of 3 |' <<<"$output"
	# a row nobody ran (rptestN here) reads "no peer ran"
	grep -qF '| rptestN | no peer ran |' <<<"$output"
}

@test "mimalloc_bench.awk: a failed run and a fixed-time run without throughput are problems" {
	{
		row cfrac glibc 1 2.0 1000 0 -
		row cfrac jemalloc 1 1.0 3000 0 -
		row cfrac heapctl 1 0.5 900 139 -
		row larsonN glibc 1 5.0 2048 0 1000000
		row larsonN jemalloc 1 5.0 4096 0 2000000
		row larsonN heapctl 1 5.0 4096 0 -
	} >"$T/results.tsv"
	run --separate-stderr -0 report
	grep -qF '| cfrac | jemalloc 1 s, glibc 1.0 MiB | 2.00, 1.00 | 1.00, 3.00 | FAILED | none |' <<<"$output"
	grep -qF '!!! cfrac under heapctl: exit status 139' <<<"$stderr"
	grep -qF '!!! larsonN under heapctl: 1 runs printed no throughput' <<<"$stderr"
}

@test "mimalloc_bench.sh: a directory that is not a mimalloc-bench checkout is refused" {
	run -2 "$root/tests/bench/mimalloc_bench.sh" "$T" "$T/build"
	[[ $output == *"$T: not a mimalloc-bench checkout (no bench/CMakeLists.txt)"* ]]
	run -2 "$root/tests/bench/mimalloc_bench.sh"
	[[ $output == *"usage:"* ]]
}
