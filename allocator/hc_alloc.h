/*
 * allocator/hc_alloc.h - the one interface allocator/ offers to agent/.
 *
 * agent/ (configuration, profiling, mallctl) sees the allocator only through
 * these functions; it never reaches into chunks, pages or heaps.
 */
#ifndef HC_ALLOC_H
#define HC_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#define HC_VERSION "0.1.0"

/* Allocator statistics with jemalloc's meanings (see man/heapctl-conf.5). */
typedef struct hc_stats_s {
	size_t allocated;   /* bytes in live objects, by usable size             */
	size_t active;      /* bytes of pages backing live objects               */
	size_t metadata;    /* bytes of allocator (and profiler) bookkeeping     */
	size_t resident;    /* bytes of the allocator's mappings in physical RAM */
	size_t mapped;      /* bytes of chunks and huge mappings in use          */
	size_t retained;    /* bytes of address space kept for reuse, purged     */
	size_t dirty;       /* bytes free but not yet returned to the OS         */
	/* breakdown */
	size_t small_allocated, large_allocated, huge_allocated;
	size_t nchunks_small, nchunks_large, nchunks_cached, nhuge, nhuge_cached;
	size_t nheaps, narenas;
} hc_stats_t;

/* Recompute all statistics (walks every chunk; called on "epoch" writes). */
void hc_stats_refresh(hc_stats_t *st);

/* Bytes the profiler's own structures use, added to stats.metadata. */
void hc_stats_add_metadata(intptr_t delta);

/* Return dirty memory of every arena and the caches to the OS now. */
void hc_purge_all(void);

size_t hc_usable_size(const void *p);

#endif
