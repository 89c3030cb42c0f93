#!/usr/bin/env bats
# tests/cli/bench.bats - make bench's report (tests/bench/report.awk) reads
# its numbers right: fed a results.tsv made up here, the table against the
# best peer holds the ratios worked out by hand, the page-fault table its
# medians and ratios, leaves out a failed cell,
# and counts the rows and the worst ratio of each allocator; the table of
# dominated rows names each allocator that beats another by more than 1.1x
# on both measures, and no other.

setup() {
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	tsv=$BATS_TEST_TMPDIR/results.tsv
	# bench alloc rep wall_s rss_kib status checksum tight batch user sys faults
	# (the seventh argument, the minor faults, defaults to 10)
	row() { printf '%s\t%s\t%s\t%s\t%s\t%s\tc0ffee\t\t\t0.1\t0.1\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "${7:-10}"; }
	{
		# r1: jemalloc fastest, glibc smallest; heapctl 1.05x both (its
		# median of three: 1.0, 1.05, 9.0 s)
		row r1 glibc 1 2.0 1000 0
		row r1 jemalloc 1 1.0 3000 0
		row r1 heapctl 1 1.0 1050 0
		row r1 heapctl 2 9.0 1050 0
		row r1 heapctl 3 1.05 1050 0
		# r2: both peers best on both; heapctl 1.2x the time, 0.9x the RSS
		row r2 glibc 1 1.0 1000 0
		row r2 jemalloc 1 1.0 1000 0
		row r2 heapctl 1 1.2 900 0 15
		# r3: heapctl crashed (SIGSEGV): no ratio for it
		row r3 glibc 1 1.0 2000 0
		row r3 jemalloc 1 1.5 1000 0
		row r3 heapctl 1 0.5 500 139
		# r4: glibc beats heapctl 1.5x and 1.2x, and both beat jemalloc
		row r4 glibc 1 1.0 1000 0
		row r4 jemalloc 1 3.0 5000 0
		row r4 heapctl 1 1.5 1200 0
		# r5: glibc beats jemalloc on both, but by 5% only on time
		row r5 glibc 1 1.0 1000 0
		row r5 jemalloc 1 1.05 1500 0
		row r5 heapctl 1 1.0 1000 0
	} >"$tsv"
}

# has_lines LINE...: each LINE is in $output, whole or as part of a line
has_lines() {
	local l
	for l; do
		grep -qF -- "$l" <<<"$output" || { echo "no line with: $l"; return 1; }
	done
}

report() {
	awk -v allocs="glibc jemalloc heapctl" -v benches="r1 r2 r3 r4 r5" -v base=jemalloc \
	    -v header="test" -f "$root/tests/bench/report.awk" "$tsv" 2>/dev/null
}

@test "bench report: each allocator against the best peer, row by row" {
	run report
	[ "$status" -eq 0 ]
	has_lines \
	    '| r1 | 2.00, 1.00 | 1.00, 3.00 | **1.05, 1.05** |' \
	    '| r2 | **1.00, 1.00** | **1.00, 1.00** | 1.20, 0.90 |' \
	    '| r3 | 1.00, 2.00 | 1.50, 1.00 | - |' \
	    '| r4 | **1.00, 1.00** | 3.00, 5.00 | 1.50, 1.20 |' \
	    '| r5 | **1.00, 1.00** | 1.05, 1.50 | **1.00, 1.00** |'
}

@test "bench report: rows within 1.1x of the best peer on both, and the worst ratio" {
	run report
	[ "$status" -eq 0 ]
	has_lines \
	    '| **both <= 1.1** | 3 of 5 | 1 of 5 | 2 of 4 |' \
	    '| **worst** | 2.00 | 5.00 | 1.50 |'
}

@test "bench report: the allocators that beat another on both time and RSS" {
	run report
	[ "$status" -eq 0 ]
	# r1 and r2: one is faster, another smaller, or neither by 10%
	has_lines \
	    '| r1 | none | none | none |' \
	    '| r2 | none | none | none |' \
	    '| r3 | none | none | - |' \
	    '| r4 | none | glibc 3.00, 5.00; heapctl 2.00, 4.17 | glibc 1.50, 1.20 |' \
	    '| r5 | none | none | none |' \
	    '| **not dominated** | 5 of 5 | 4 of 5 | 3 of 4 |'
}

@test "bench report: median page faults and their ratio to the base" {
	run report
	[ "$status" -eq 0 ]
	has_lines \
	    'Page faults: median minor faults of a run (ratio to jemalloc)' \
	    '| r1 | 10 (1.00) | 10 (1.00) | 10 (1.00) |' \
	    '| r2 | 10 (1.00) | 10 (1.00) | 15 (1.50) |' \
	    '| r3 | 10 (1.00) | 10 (1.00) | - |'
}
