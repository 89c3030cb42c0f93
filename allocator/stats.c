/*
 * allocator/stats.c - statistics with jemalloc's meanings (printed by
 * agent/stats_print.c, read through mallctl).
 *
 * Statistics are computed on demand (a write to the "epoch" mallctl), not
 * maintained on the fast paths: small objects are counted from the pages'
 * use counts, large and huge ones from their arenas and lists.  "resident"
 * is jemalloc's maximum: metadata, pages backing live objects and dirty
 * pages, all of which the allocator knows it has written.  No system call
 * is needed (mincore(2), which would measure it, is outside the seccomp
 * filters that hardened services run under: systemd's @system-service).
 * heapctl explain measures it instead, from outside: the ranges below are
 * where to look in /proc/PID/smaps.
 * Blocks freed and not yet back on their page's free list (in a thread's
 * cache, the depot or the page's remote list: heap.c) do not count as
 * allocated: "allocated" is what the program holds.  They count as active,
 * as the pages they keep do.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "internal.h"

void hc_stats_refresh(hc_stats_t *st)
{
	memset(st, 0, sizeof *st);
	hc_heap_stats(st);
	hc_large_stats(st);
	hc_huge_stats(st);
	st->allocated = st->small_allocated + st->large_allocated + st->huge_allocated;
	size_t ncached, dirty;
	st->retained = hc_chunk_cached(&ncached, &dirty);
	st->nchunks_cached = ncached;
	st->dirty += dirty;
	st->resident = st->metadata + st->active + st->dirty;
}

unsigned hc_alloc_kind(void)
{
	return HC_ALLOC_HEAPCTL;
}

void hc_alloc_ranges(bool (*fn)(void *arg, uintptr_t start, uintptr_t end, unsigned kind), void *arg)
{
	/* chunks are never unmapped, so the registry only grows; neighbours
	 * (the chunks of one batch, chunk.c) come out as one range */
	uintptr_t lo = 0, hi = 0;
	for (hc_chunk_t *c = hc_chunk_registry(); c; c = c->all_next) {
		uintptr_t s = (uintptr_t)c, e = s + c->map_size;
		if (s == hi || e == lo) {
			lo = s < lo ? s : lo;
			hi = e > hi ? e : hi;
			continue;
		}
		if (hi != 0 && !fn(arg, lo, hi, HC_RANGE_CHUNKS))
			return;
		lo = s;
		hi = e;
	}
	if (hi != 0 && !fn(arg, lo, hi, HC_RANGE_CHUNKS))
		return;
	hc_huge_ranges(fn, arg);
	hc_meta_ranges(fn, arg);
}
