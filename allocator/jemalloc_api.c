/*
 * allocator/jemalloc_api.c - jemalloc's non-standard allocation API.
 *
 * A program linked with jemalloc (Debian's redis) that runs under the
 * preload gets malloc and free from here; if nallocx, sallocx or sdallocx
 * still came from jemalloc it would ask one allocator about the other's
 * pointers.  So the whole *allocx family is exported, with jemalloc 5's
 * meaning, on top of the same paths as the standard functions (so their
 * allocations are sampled and profiled like any other):
 *
 *   flags  bits 0-5   MALLOCX_LG_ALIGN(la): alignment 1 << la (0: none)
 *          bit 6      MALLOCX_ZERO
 *          bits 8-19  MALLOCX_TCACHE(tc) / MALLOCX_TCACHE_NONE: ignored
 *                     (the one thread cache, of other threads' blocks,
 *                     has no explicit instances to choose)
 *          bits 20-31 MALLOCX_ARENA(a) = (a + 1) << 20: accepted for an
 *                     arena that exists (heapctl picks arenas itself), and
 *                     the allocation fails for one that does not, as in
 *                     jemalloc
 *
 * nallocx(n, flags) is exactly malloc_usable_size(mallocx(n, flags)).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "heapctl.h" /* the public declarations */

#define LG_ALIGN_MASK 0x3f
#define FLAG_ZERO     0x40
#define ARENA_SHIFT   20

static size_t flag_align(int flags)
{
	unsigned la = (unsigned)flags & LG_ALIGN_MASK;
	return la ? (size_t)1 << la : 0;
}

static bool flag_arena_ok(int flags)
{
	unsigned a = (unsigned)flags >> ARENA_SHIFT;
	return a == 0 || a - 1 < hc_arena_count();
}

/* The usable size an allocation of n bytes aligned to align gets; 0 if it
 * cannot be made. */
size_t hc_nalloc(size_t n, size_t align)
{
	hc_init();
	if (n > HC_MAX_REQUEST || align > HC_MAX_REQUEST)
		return 0;
	if (n <= HC_SMALL_MAX && align <= HC_SMALL_MAX) {
		size_t u = hc_small_usize(n, align > 8 ? align : 0);
		if (u)
			return u;
	}
	if (hc_large_fits(n, align))
		return n <= HC_PAGE ? HC_PAGE : (n + HC_PAGE - 1) & ~(HC_PAGE - 1);
	return hc_huge_usable_for(n, align);
}

HC_EXPORT void *mallocx(size_t n, int flags)
{
	if (!flag_arena_ok(flags)) {
		errno = ENOMEM;
		return NULL;
	}
	return hc_alloc_aligned(flag_align(flags), n, flags & FLAG_ZERO);
}

HC_EXPORT size_t nallocx(size_t n, int flags)
{
	return flag_arena_ok(flags) ? hc_nalloc(n, flag_align(flags)) : 0;
}

HC_EXPORT size_t sallocx(const void *p, int flags)
{
	(void)flags;
	return hc_usable_size(p);
}

HC_EXPORT void dallocx(void *p, int flags)
{
	(void)flags;
	free(p);
}

/* The size is a hint jemalloc uses to skip a lookup; one that is not this
 * object's is a bug in the caller, which jemalloc's safety checks catch
 * with an abort. */
HC_EXPORT void sdallocx(void *p, size_t n, int flags)
{
	if (p != NULL && HC_DEBUG && hc_usable_size(p) < n)
		hc_fatal_ptr("sdallocx(): size larger than the object's:", p);
	(void)flags;
	free(p);
}

/* Like realloc, with an alignment kept and the growth zeroed on request.
 * NULL (p untouched) on failure. */
HC_EXPORT void *rallocx(void *p, size_t n, int flags)
{
	size_t align = flag_align(flags);
	if (p == NULL || !flag_arena_ok(flags)) {
		errno = ENOMEM;
		return NULL;
	}
	size_t old = hc_usable_size(p);
	void *q = NULL;
	if (align == 0 || ((uintptr_t)p & (align - 1)) == 0) {
		q = realloc(p, n ? n : 1);
		if (q != NULL && align != 0 && ((uintptr_t)q & (align - 1)) != 0) {
			p = q; /* moved to a place not aligned enough */
			old = n < old ? n : old;
			q = NULL;
		}
	}
	if (q == NULL) {
		q = hc_alloc_aligned(align, n, false);
		if (q == NULL)
			return NULL;
		memcpy(q, p, old < n ? old : n);
		free(p);
	}
	size_t now = hc_usable_size(q);
	if ((flags & FLAG_ZERO) && now > old)
		memset((char *)q + old, 0, now - old);
	return q;
}

/* Resize in place to at least n and at most n + extra bytes, as far as
 * that can be done; returns the usable size, which is the old one if
 * nothing could be done (only whole-page runs grow or shrink in place). */
HC_EXPORT size_t xallocx(void *p, size_t n, size_t extra, int flags)
{
	size_t align = flag_align(flags);
	size_t old = hc_usable_size(p);
	if (align != 0 && ((uintptr_t)p & (align - 1)) != 0)
		return old;
	size_t most = extra > HC_MAX_REQUEST - n ? HC_MAX_REQUEST : n + extra;
	if (n <= old && old <= most)
		return old; /* already in range */
	size_t now = hc_resize_in_place(p, n, most);
	if (now > old && (flags & FLAG_ZERO))
		memset((char *)p + old, 0, now - old);
	return now;
}
