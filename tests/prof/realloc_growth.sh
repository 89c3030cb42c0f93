#!/usr/bin/env bash
# realloc and sampling: a buffer grown by realloc in small steps is charged
# its growth, so at the default rate a profile of many such buffers is still
# unbiased; a sampled buffer keeps its record as it grows and moves; at
# lg_prof_sample:0 jeprof's bytes for realloc'd buffers are exact; and a
# sampled small object grows in its pages without moving, reporting each
# new size class (it used to move at every class).
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup realloc_growth "$@"

cat >"$WORK/prog.c" <<'EOF2'
#include <heapctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *keep[4096];

/* grow one buffer from 64 bytes to `target` in steps of 1..step bytes */
__attribute__((noinline)) void *grow_buffer(size_t target, size_t step, unsigned *seed)
{
	size_t n = 64;
	char *p = malloc(n);
	memset(p, 1, n);
	while (n < target) {
		*seed = *seed * 1103515245u + 12345u;
		size_t m = n + 1 + (*seed >> 8) % step;
		if (m > target)
			m = target;
		p = realloc(p, m);
		p[m - 1] = 2;
		n = m;
	}
	return p;
}

int main(int argc, char **argv)
{
	int count = atoi(argv[1]);
	size_t target = (size_t)atol(argv[2]);
	size_t step = (size_t)atol(argv[3]);
	unsigned seed = 7;
	int phases = argc > 4 ? 2 : 1;
	int base = 0;
	for (int ph = 0; ph < phases; ph++) {
		/* one call site for both phases: the same stack, the same counts */
		int n = ph == 0 ? count : atoi(argv[4]);
		for (int i = 0; i < n; i++)
			keep[base + i] = grow_buffer(target, step, &seed);
		base += n;
		if (ph == 0 && phases == 2) {
			/* forget everything, then shrink the forgotten buffers by less
			 * than 1/64 (the lock-free path); only phase 2 may count */
			mallctl("prof.reset", NULL, NULL, NULL, 0);
			for (int i = 0; i < count; i++)
				keep[i] = realloc(keep[i], target - target / 70);
		}
	}
	const char *path = "prof.heap";
	int r = mallctl("prof.dump", NULL, NULL, &path, sizeof path);
	printf("dump %d\n", r);
	return 0;
}
EOF2
compile_linked "$WORK/prog" "$WORK/prog.c"

# exact at lg 0: 40 buffers of exactly 300000 bytes each, grown in small steps
run exact "$WORK" MALLOC_CONF=prof:true,lg_prof_sample:0 "$WORK/prog" 40 300000 4000
check_eq "exact: dump" "$(cat "$WORK/exact.out")" "dump 0"
if jp "$WORK/exact.txt" "$WORK/prog" "$WORK/prof.heap"; then
	# usable bytes, as jemalloc's profiles count: 300000 is 74 pages
	check_eq "exact: grow_buffer bytes" "$(jp_flat "$WORK/exact.txt" grow_buffer)" $((40 * 74 * 4096))
fi

# a sampled small object (every one is, at lg 0) stays where it is while
# its size classes fit its pages, and malloc_usable_size and the profile
# follow the class
cat >"$WORK/inplace.c" <<'EOF2'
#include <heapctl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) char *grown(void)
{
	char *p = malloc(100), *first = p;
	size_t sizes[] = { 200, 1000, 3000, 4000, 1500 };
	int moved = 0;
	for (int i = 0; i < 5; i++) {
		p = realloc(p, sizes[i]);
		p[sizes[i] - 1] = 1;
		moved += p != first;
		printf("%zu:%zu ", sizes[i], malloc_usable_size(p));
	}
	printf("moved %d\n", moved);
	return p;
}

int main(void)
{
	char *p = grown();
	const char *path = "inplace.heap";
	printf("dump %d\n", mallctl("prof.dump", NULL, NULL, &path, sizeof path));
	free(p);
	return 0;
}
EOF2
compile_linked "$WORK/inplace" "$WORK/inplace.c"
run inplace "$WORK" MALLOC_CONF=prof:true,lg_prof_sample:0 "$WORK/inplace"
check_eq "inplace: sizes, and no move" "$(head -1 "$WORK/inplace.out")" \
    "200:224 1000:1024 3000:3072 4000:4096 1500:1536 moved 0"
if jp "$WORK/inplace.txt" "$WORK/inplace" "$WORK/inplace.heap"; then
	check_eq "inplace: grown bytes are its class" "$(jp_flat "$WORK/inplace.txt" grown)" 1536
fi

# default rate: 1200 buffers of 256 KiB (300 MiB live) grown 1..512 bytes at a time
rm -f "$WORK/prof.heap"
run sampled "$WORK" MALLOC_CONF=prof:true "$WORK/prog" 1200 262144 512
check_eq "sampled: dump" "$(cat "$WORK/sampled.out")" "dump 0"
if jp "$WORK/sampled.txt" "$WORK/prog" "$WORK/prof.heap"; then
	check_pct "sampled: grow_buffer bytes (1200 x 256 KiB)" \
	    "$(jp_flat "$WORK/sampled.txt" grow_buffer)" 314572800 15
fi
check_stderr_empty sampled

# prof.reset: pending resizes of forgotten buffers must not leak into the
# counts of new ones from the same site (lg 12: a 256 KiB buffer has weight 1)
rm -f "$WORK/prof.heap"
run reset "$WORK" MALLOC_CONF=prof:true,lg_prof_sample:12 "$WORK/prog" 200 262144 512 10
check_eq "reset: dump" "$(cat "$WORK/reset.out")" "dump 0"
if jp "$WORK/reset.txt" "$WORK/prog" "$WORK/prof.heap"; then
	check_eq "reset: grow_buffer bytes (10 new x 256 KiB)" "$(jp_flat "$WORK/reset.txt" grow_buffer)" 2621440
fi
finish
