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
 * Blocks freed by another thread and not yet back in their page (on its
 * remote list, or in the freeing thread's remote cache: heap.c) count as
 * allocated, as jemalloc counts blocks sitting in its thread caches.
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
