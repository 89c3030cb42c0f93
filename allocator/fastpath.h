/*
 * allocator/fastpath.h - malloc's fast path, for the two entry points that
 * share it: malloc (api.c) and C++'s operator new and new[] (cxx.c).
 *
 * It is inlined into each, so that operator new costs what malloc costs
 * (the same 27 instructions, api.c) instead of a call to malloc through
 * the PLT from libstdc++'s operator new.  Only the slow path differs:
 * malloc's returns NULL on failure, operator new's calls the new_handler
 * and throws.  slow is a constant at every call site, so each entry point
 * ends in a tail jump to its own.
 */
#ifndef HC_ALLOCATOR_FASTPATH_H
#define HC_ALLOCATOR_FASTPATH_H

#include <string.h>

#include "internal.h"

/* api.c: the slow path of malloc (any size, NULL on failure), the corrupt
 * free list report, and free for the library's own callers. */
HC_NOINLINE void *hc_malloc_slow(size_t n);
HC_COLD void *hc_malloc_bad_link(hc_block_t *b);
void hc_free(void *p);

static inline __attribute__((always_inline)) void *hc_malloc_fast(size_t n, void *(*slow)(size_t))
{
	hc_heap_t *h = hc_tls_heap;
	if (likely(n <= HC_SMALL_MAX)) {
		/* the class's page, or the head of the thread cache's list of
		 * the class while that holds blocks (internal.h, hc_xhead_t) */
		hc_page_t *pg = h->direct[hc_size_class(n)];
		hc_block_t *b = pg->free;
		/* the page's copy of the class size: on the line just read,
		 * where hc_class_size[cls] costs its address too */
		uint32_t bs = pg->block_size;
		int64_t left = h->countdown - (int64_t)bs;
		if (likely(b != NULL && left >= 0)) {
			hc_block_t *next = hc_link(pg, b, b->next);
			if (unlikely(!hc_link_ok(b, next)))
				return hc_malloc_bad_link(b);
			h->countdown = left;
			pg->free = next;
			hc_block_unmark(b, bs);
			hc_live_inc(pg);
			if (HC_DEBUG)
				memset(b, HC_JUNK_ALLOC, pg->block_size);
			return b;
		}
	}
	return slow(n);
}

#endif
