/*
 * allocator/api.c - the exported malloc family.
 *
 * The two fast paths live here and are kept to what one request needs:
 *
 *   malloc (n <= 16 KiB; in fastpath.h, which operator new shares): one
 *     TLS load, one table lookup, pop the free list of the class's current
 *     page (or of the thread's cache of the class, while that holds
 *     blocks: internal.h, hc_xhead_t), one subtraction of the page's
 *     block size and sign test on the per-thread byte countdown (the
 *     profiler's sampling trigger), clear the block's remote-free mark
 *     (hc_block_unmark, no branch), bump the page's live count.
 *   free (block of a chunk this thread owns, by a thread without the
 *     cache's lists): mask to the chunk header, compare its owner with the
 *     thread's free id (heap.c, hc_tls_free_id), push, decrement the page's
 *     live count and test it (<= 0: the page is on the full list, or it
 *     emptied and is not the kept only page of its class; see HC_LIVE_FULL).
 *     A thread with the lists pushes any small block onto its list of the
 *     class instead (free_cached).
 *
 * 27 and 20 instructions counting the return, no atomics (the count of
 * live blocks is one instruction on memory, hc_live_inc and hc_live_dec,
 * where a relaxed atomic store was three and four).
 * tests/bench/fastpath times the pair against the machine's floor
 * (tests/bench/RESULTS.md).  Everything else goes to the noinline slow
 * paths.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "fastpath.h"

static inline size_t page_size(void)
{
	return HC_PAGE;
}

/* ---- generic paths ----------------------------------------------------- */

static void junk_free(const hc_page_t *pg, void *p)
{
	if (!pg->in_use || hc_page_used(pg) <= 0)
		hc_fatal_ptr("free(): block of an empty page (double free?):", p);
	memset((char *)p + sizeof(hc_block_t), HC_JUNK_FREE, pg->block_size - sizeof(hc_block_t));
}

/* The size the countdown is charged for a request: its class, or whole
 * pages.  (Exactness does not matter; it has to be cheap and monotonic.) */
static size_t charge_for(size_t n, size_t align)
{
	size_t m = n > align ? n : align;
	if (m <= HC_SMALL_MAX)
		return hc_class_size[hc_size_class(m)];
	return m > SIZE_MAX - HC_PAGE ? m : (m + HC_PAGE - 1) & ~(HC_PAGE - 1);
}

static HC_NOINLINE void highwater_notify(void)
{
	if (__atomic_exchange_n(&hc_highwater_pending, 0, __ATOMIC_ACQ_REL) &&
	    !hc_agent_highwater(hc_mapped_highwater()))
		__atomic_store_n(&hc_highwater_pending, 1, __ATOMIC_RELEASE); /* later */
}

/* The small-object path never looks at the flag (it must stay a few
 * instructions), so a program that grows by small objects alone would
 * hold its news until its next large or sampled allocation; the control
 * thread polls for it instead. */
void hc_highwater_poll(void)
{
	if (__atomic_load_n(&hc_highwater_pending, __ATOMIC_RELAXED))
		highwater_notify();
}

/* Whole pages: a large run, or a huge mapping.  Every large and huge
 * request lands here, and so does every sampled one, whatever its size
 * ("promoted"): only this free path looks for a sample record, so small
 * frees never have to.  growing: realloc is moving a block that outgrew
 * its place, so it gets room to grow in place next time. */
static void *promoted_alloc(size_t n, size_t align, bool zero, hc_place_t place)
{
	void *p;
	if (hc_large_fits(n, align))
		p = hc_large_alloc(hc_tls_heap, n, align, zero, place);
	else
		p = hc_huge_alloc(n, align, zero);
	if (p == NULL)
		errno = ENOMEM;
	return p;
}

/*
 * The usable size of a promoted object: the size class the request would
 * have had unsampled (as jemalloc reports for its promoted objects), so that
 * a program counting with malloc_usable_size sees the same total whether
 * or not profiling samples it; otherwise its pages.  The profile counts
 * this size too, as jemalloc's counts usable bytes.
 */
static size_t small_class(size_t n, size_t align)
{
	return n <= HC_SMALL_MAX && align <= HC_SMALL_MAX ? hc_small_usize(n, align > 8 ? align : 0) : 0;
}

static size_t promoted_usize(const void *p, size_t cls)
{
	return cls ? cls : hc_usable_size(p);
}

/* Keep rec with the promoted object p, which reports usize. */
static void attach_prof(void *p, void *rec, size_t usize)
{
	hc_chunk_t *c = hc_chunk_of(p);
	if ((void *)c == p)
		hc_huge_header(p)->huge_prof = rec;
	else if (c->kind == HC_KIND_HUGE)
		c->huge_prof = rec;
	else
		hc_large_set_prof(c, p, rec, usize < hc_large_usable(c, p) ? usize : 0);
}

/* Detach the sample record of a promoted object, or NULL if it has none. */
static void *take_prof(hc_chunk_t *c, void *p)
{
	if (c->kind == HC_KIND_LARGE)
		return hc_large_take_prof(c, p);
	if (c->kind == HC_KIND_HUGE) {
		void *rec = c->huge_prof;
		c->huge_prof = NULL;
		return rec;
	}
	return NULL;
}

static HC_NOINLINE void *sampled_alloc(size_t n, size_t align, bool zero, size_t charged, bool growing)
{
	/* pages enough for its size class: an aligned class can be bigger
	 * than the pages the request alone would need */
	size_t cls = small_class(n, align);
	void *p = promoted_alloc(cls > n ? cls : n, align, zero,
	    growing   ? HC_PLACE_GROW
	        : cls ? HC_PLACE_ASIDE
	              : HC_PLACE_FIT);
	if (p == NULL)
		return NULL;
	size_t usize = promoted_usize(p, cls);
	void *rec = hc_agent_sample(p, usize, charged);
	if (rec != NULL)
		attach_prof(p, rec, usize);
	return p;
}

/* The allocation itself, already counted against the countdown. */
static void *alloc_body(size_t align, size_t n, bool zero, bool growing)
{
	void *p;
	/* Every power of two up to 16 KiB divides some class >= n, so this
	 * path fails only when memory is exhausted.  Alignments up to 8 are
	 * what every class already has. */
	if (n <= HC_SMALL_MAX && align <= HC_SMALL_MAX) {
		p = hc_small_alloc_slow(n, align > 8 ? align : 0);
		if (p == NULL)
			errno = ENOMEM;
		else if (zero)
			memset(p, 0, n);
		else if (HC_DEBUG)
			memset(p, HC_JUNK_ALLOC, n);
	} else {
		p = promoted_alloc(n, align, zero, growing ? HC_PLACE_GROW : HC_PLACE_FIT);
	}
	if (unlikely(__atomic_load_n(&hc_highwater_pending, __ATOMIC_RELAXED)))
		highwater_notify();
	return p;
}

/* Any size, any alignment (a power of two), optionally zeroed. */
HC_NOINLINE void *hc_alloc_aligned(size_t align, size_t n, bool zero)
{
	if (n > HC_MAX_REQUEST || align > HC_MAX_REQUEST) {
		errno = ENOMEM;
		return NULL;
	}
	size_t charged = charge_for(n, align);
	if (unlikely(hc_heap_count(charged))) {
		void *p = sampled_alloc(n, align, zero, charged, false);
		if (unlikely(__atomic_load_n(&hc_highwater_pending, __ATOMIC_RELAXED)))
			highwater_notify();
		return p;
	}
	return alloc_body(align, n, zero, false);
}

/* As free_foreign: reached with a tail jump, so malloc stays a leaf
 * (noipa: GCC would otherwise see it never returns and call it). */
HC_COLD __attribute__((noipa)) void *hc_malloc_bad_link(hc_block_t *b)
{
	hc_bad_link(b);
	return NULL;
}

HC_NOINLINE void *hc_malloc_slow(size_t n)
{
	if (HC_XCACHE && n <= HC_SMALL_MAX) {
		void *p = hc_small_cached(n);
		if (p != NULL)
			return p;
	}
	return hc_alloc_aligned(0, n, false);
}

/* What free's fast path and its test for another thread's small block
 * leave: a large or huge object, or a header that is not a chunk's. */
static HC_NOINLINE void free_generic(hc_chunk_t *c, void *p)
{
	if (unlikely(c->magic != HC_MAGIC))
		hc_fatal_ptr("free(): invalid pointer:", p);
	switch (c->kind) {
	case HC_KIND_LARGE: hc_large_free(c, p); return;
	case HC_KIND_HUGE:
		if ((char *)c + c->huge_offset != (char *)p)
			hc_fatal_ptr("free(): invalid pointer:", p);
		hc_huge_free(c);
		return;
	default: hc_fatal_ptr("free(): invalid pointer:", p);
	}
}

/* Pointers that were never ours: refused before anything is read.  Not
 * noreturn, and noipa so that GCC cannot find out they never return:
 * free() then reaches them with a tail jump and stays a leaf function (no
 * frame to set up on its fast path). */
static HC_COLD __attribute__((noipa)) void free_foreign(void *p)
{
	hc_fatal_ptr("free(): invalid pointer (not from this allocator):", p);
}

static HC_COLD __attribute__((noipa)) void free_not_start(void *p)
{
	hc_fatal_ptr("free(): invalid pointer (not the start of a block):", p);
}

/* A chunk-aligned pointer is NULL or an over-aligned huge object. */
static HC_NOINLINE void free_chunk_aligned(void *p)
{
	if (p == NULL)
		return;
	if (!hc_chunk_known(p)) {
		free_foreign(p);
		return;
	}
	hc_chunk_t *h = hc_huge_header(p);
	if (h->magic != HC_MAGIC || h->kind != HC_KIND_HUGE)
		hc_fatal_ptr("free(): invalid pointer:", p);
	hc_huge_free(h);
}

/* Header of the chunk or huge mapping that holds p, checked. */
static hc_chunk_t *lookup(const void *p)
{
	hc_chunk_t *c = hc_chunk_of(p);
	if (!hc_chunk_known(c))
		hc_fatal_ptr("invalid pointer (not from this allocator):", p);
	if ((const void *)c == p)
		c = hc_huge_header(p);
	if (c->magic != HC_MAGIC)
		hc_fatal_ptr("invalid pointer:", p);
	if (c->kind == HC_KIND_SMALL) {
		const hc_page_t *pg = &c->pages[((uintptr_t)p >> HC_SLOT_SHIFT) & (HC_NSLOTS - 1)];
		if (!pg->in_use || !hc_block_start(pg, p))
			hc_fatal_ptr("invalid pointer (not the start of a block):", p);
	}
	return c;
}

size_t hc_usable_size(const void *p)
{
	if (p == NULL)
		return 0;
	hc_chunk_t *c = lookup(p);
	switch (c->kind) {
	case HC_KIND_SMALL: return c->pages[((uintptr_t)p >> HC_SLOT_SHIFT) & (HC_NSLOTS - 1)].block_size;
	case HC_KIND_LARGE: return hc_large_usable(c, p);
	default: return c->huge_usable;
	}
}

/* Grow or shrink p in place to between n and most bytes, as far as that
 * can be done (xallocx); returns its usable size after.  Only whole-page
 * runs change size in place: a small block keeps its class, and a huge
 * mapping would move. */
size_t hc_resize_in_place(void *p, size_t n, size_t most)
{
	hc_chunk_t *c = lookup(p);
	if (c->kind != HC_KIND_LARGE)
		return hc_usable_size(p);
	size_t old = hc_large_usable(c, p);
	if (n <= HC_SMALL_MAX || n > HC_LARGE_MAX)
		return old;
	size_t top = most < HC_LARGE_MAX ? most : HC_LARGE_MAX;
	if (!hc_large_resize(c, p, top, 0) && !(top > n && hc_large_resize(c, p, n, 0)))
		return old;
	size_t now = hc_large_usable(c, p);
	void *rec = hc_large_peek_prof(c, p);
	if (rec != NULL)
		hc_agent_resize(rec, now, 0);
	return now;
}

/* free of a small block by a thread that has the cache's lists (heap.c,
 * "the thread cache"): into its list of the class, whoever's block it is,
 * while the list has room.  Everything else (a full list, a block the
 * cache does not keep, and what free must report) is hc_small_free_slow's. */
static inline __attribute__((always_inline)) void free_cached(hc_chunk_t *c, void *p)
{
	hc_heap_t *h = hc_tls_heap;
	unsigned slot = ((uintptr_t)p >> HC_SLOT_SHIFT) & (HC_NSLOTS - 1);
	const hc_xpage_t *xp = &c->xpage[slot];
	uint32_t bs = xp->block_size;
	unsigned cls = xp->cls;
	hc_xhead_t *x = &h->xhead[cls];
	hc_block_t *b = p;
	/* a class the cache does not keep has a list with no room (heap.c,
	 * xcache_limits), so this block has the mark's word */
	if (likely(hc_xhead_count(x) < x->limit && c->owner != HC_TID_FALLBACK &&
	        __atomic_load_n(&xp->in_use, __ATOMIC_ACQUIRE) && hc_block_start(&c->pages[slot], p) &&
	        ((uintptr_t *)b)[1] != hc_free_mark)) {
		hc_xcache_push(h, cls, bs, b);
		return;
	}
	hc_small_free_slow(c, p);
}

/* ---- exported API ------------------------------------------------------ */

/* The fast path is fastpath.h's, which operator new shares (cxx.c). */
HC_EXPORT void *malloc(size_t n)
{
	return hc_malloc_fast(n, hc_malloc_slow);
}

HC_EXPORT void free(void *p)
{
	hc_chunk_t *c = hc_chunk_of(p);
	if (unlikely((void *)c == p)) {
		free_chunk_aligned(p);
		return;
	}
	if (unlikely(!hc_chunk_known(c))) {
		free_foreign(p);
		return;
	}
	/* The owner frees into the page, unless it has the cache's lists:
	 * hc_tls_free_id is then no chunk's owner (heap.c), and every small
	 * free takes the one path below, with no owner test to go either way
	 * where the thread's frees are a mix of its blocks and others'. */
	if (likely(c->owner == hc_tls_free_id)) {
		hc_page_t *pg = &c->pages[((uintptr_t)p >> HC_SLOT_SHIFT) & (HC_NSLOTS - 1)];
		/* pg in one register: otherwise GCC reaches pg->free from
		 * the chunk's address and computes pg again for pg->live
		 * (3 instructions) */
		__asm__("" : "+r"(pg));
		hc_block_t *b = p;
		if (unlikely(!hc_block_start(pg, p))) {
			free_not_start(p);
			return;
		}
		if (HC_DEBUG)
			junk_free(pg, p);
		b->next = hc_link(pg, b, pg->free);
		pg->free = b;
		if (unlikely(hc_live_dec(pg)))
			hc_small_free_settle(c, pg, p);
		return;
	}
	/* another thread's small block (or a shared heap's, or none's), or
	 * any by a thread with the cache's lists (heap.c, "the thread cache") */
	if (likely(c->magic == HC_MAGIC && c->kind == HC_KIND_SMALL)) {
		if (HC_XCACHE && hc_tls_free_id == HC_TID_CACHED)
			free_cached(c, p);
		else
			hc_small_free_slow(c, p);
		return;
	}
	free_generic(c, p);
}

/* free for the library's own callers (operator delete, cxx.c): a direct
 * jump that no preloaded malloc can take over. */
extern __typeof(free) hc_free __attribute__((alias("free"), copy(free), visibility("hidden")));

/* calloc of a small size, and an alignment that the class of the size
 * has anyway (class_for_aligned, heap.c, would pick that class: every class
 * is a multiple of 8, many of 16 and more), take malloc's own path: its fast
 * path, and the thread's cache of other threads' blocks that it freed,
 * which hc_alloc_aligned passes by.  A program that callocs or memaligns
 * what another thread frees (rptest) otherwise filled that cache only to
 * push it all back to the blocks' pages. */
HC_EXPORT void *calloc(size_t nmemb, size_t size)
{
	size_t n;
	if (unlikely(__builtin_mul_overflow(nmemb, size, &n))) {
		errno = ENOMEM;
		return NULL;
	}
	if (n <= HC_SMALL_MAX) {
		void *p = hc_malloc_fast(n, hc_malloc_slow);
		if (likely(p != NULL))
			memset(p, 0, n);
		return p;
	}
	return hc_alloc_aligned(0, n, true);
}

/* align: a power of two.  Up to 16 only: a sampled object that malloc's
 * path moves to pages of its own is aligned to 16, not to its class's size
 * (memalign(8192, 8192) came back on a 4 KiB boundary so). */
static void *alloc_aligned(size_t align, size_t n)
{
	if (align <= 16 && n <= HC_SMALL_MAX && n >= align && (hc_class_size[hc_size_class(n)] & (align - 1)) == 0)
		return hc_malloc_fast(n, hc_malloc_slow);
	return hc_alloc_aligned(align, n, false);
}

/*
 * realloc charges the countdown for growth only: a buffer grown a byte at a
 * time to 1 MiB is charged 1 MiB in all, so its chance of being sampled is
 * that of any 1 MiB object.  An object already sampled keeps its record
 * through resizes and moves (it stays in whole pages); one whose growth
 * trips the countdown is promoted into a sampled allocation.
 */
HC_EXPORT void *realloc(void *p, size_t n)
{
	if (p == NULL)
		return malloc(n);
	if (n == 0) {
		free(p);
		return NULL;
	}
	if (n > HC_MAX_REQUEST) {
		errno = ENOMEM;
		return NULL;
	}
	hc_chunk_t *c = lookup(p);
	size_t old = c->kind == HC_KIND_SMALL ? c->pages[((uintptr_t)p >> HC_SLOT_SHIFT) & (HC_NSLOTS - 1)].block_size
	    : c->kind == HC_KIND_LARGE        ? hc_large_usable(c, p)
	                                      : c->huge_usable;
	/* A large run that already has the pages n needs (a buffer grown a
	 * few bytes at a time, realloc_grow) and no sample record: nothing
	 * changes, so no lock.  Only the run's start, page-aligned, has a
	 * length, and only its owner (the caller) changes it; anything else
	 * (a freed run, a pointer inside one) takes the locked path below,
	 * which checks it.  The arena lock taken for such no-ops was 25% of
	 * realloc_grow's time (perf). */
	if (c->kind == HC_KIND_LARGE && n > HC_SMALL_MAX && ((uintptr_t)p & (HC_PAGE - 1)) == 0 &&
	    ((n + HC_PAGE - 1) & ~(size_t)(HC_PAGE - 1)) == old && hc_large_peek_prof(c, p) == NULL)
		return p;
	size_t co = charge_for(old, 0), cn = charge_for(n, 0);
	void *q;
	/* the common case for a sampled object: it stays in its pages, which
	 * grow or shrink in place, with its record; a promoted small object
	 * keeps reporting its size class.  Its counts change only when its
	 * usable size does (and its charge with it). */
	if (c->kind == HC_KIND_LARGE && n <= HC_LARGE_MAX) {
		void *kept = hc_large_peek_prof(c, p);
		size_t cls = kept != NULL ? small_class(n, 0) : 0;
		if (kept != NULL && hc_large_resize(c, p, cls ? cls : n, cls)) {
			size_t usize = cls ? cls : (n + HC_PAGE - 1) & ~(HC_PAGE - 1);
			if (usize != old)
				hc_agent_resize(kept, usize, cn);
			return p;
		}
	}
	void *rec = take_prof(c, p);
	if (rec == NULL && cn > co && unlikely(hc_heap_count(cn - co))) {
		/* already in whole pages: sample it where it is, no copy */
		if (c->kind == HC_KIND_LARGE && n > HC_SMALL_MAX && n <= HC_LARGE_MAX && hc_large_resize(c, p, n, 0))
			q = p;
		else if (c->kind == HC_KIND_HUGE && n > HC_LARGE_MAX)
			q = hc_huge_realloc(c, n);
		else
			q = NULL;
		if (q != NULL) {
			size_t usize = hc_usable_size(q);
			void *r = hc_agent_sample(q, usize, cn);
			if (r != NULL)
				attach_prof(q, r, usize);
			return q;
		}
		q = sampled_alloc(n, 0, false, cn, true);
		goto move;
	}
	if (rec != NULL) {
		/* stays promoted: resize in place, else move to new pages */
		if (c->kind == HC_KIND_HUGE && n > HC_LARGE_MAX && (q = hc_huge_realloc(c, n)) != NULL) {
			size_t usize = hc_usable_size(q);
			hc_agent_resize(rec, usize, cn); /* the pages moved with mremap */
			attach_prof(q, rec, usize);
			return q;
		}
		q = promoted_alloc(n, 0, false, HC_PLACE_GROW);
		if (q == NULL) {
			attach_prof(p, rec, old);
			return NULL;
		}
		size_t usize = promoted_usize(q, small_class(n, 0));
		hc_agent_resize(rec, usize, cn);
		attach_prof(q, rec, usize);
		goto move;
	}
	switch (c->kind) {
	case HC_KIND_SMALL:
		if (n <= HC_SMALL_MAX && hc_class_size[hc_size_class(n)] == old)
			return p;
		break;
	case HC_KIND_LARGE:
		if (n > HC_SMALL_MAX && n <= HC_LARGE_MAX && hc_large_resize(c, p, n, 0))
			return p;
		break;
	default:
		if (n > HC_LARGE_MAX && (q = hc_huge_realloc(c, n)) != NULL)
			return q;
		break;
	}
	q = alloc_body(0, n, false, true);
move:
	if (q == NULL)
		return NULL;
	memcpy(q, p, old < n ? old : n);
	free(p);
	return q;
}

HC_EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, n);
}

static bool pow2(size_t a)
{
	return a != 0 && (a & (a - 1)) == 0;
}

HC_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (!pow2(align) || align < sizeof(void *))
		return EINVAL;
	int saved = errno;
	void *p = alloc_aligned(align, n);
	errno = saved;
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

HC_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!pow2(align)) {
		errno = EINVAL;
		return NULL;
	}
	return alloc_aligned(align, n);
}

/* glibc's memalign rounds a non-power-of-two alignment up. */
HC_EXPORT void *memalign(size_t align, size_t n)
{
	if (align > HC_MAX_REQUEST) {
		errno = EINVAL;
		return NULL;
	}
	if (!pow2(align)) {
		size_t a = 1;
		while (a < align)
			a <<= 1;
		align = a;
	}
	return alloc_aligned(align, n);
}

HC_EXPORT void *valloc(size_t n)
{
	return hc_alloc_aligned(page_size(), n, false);
}

HC_EXPORT void *pvalloc(size_t n)
{
	size_t ps = page_size();
	if (n > HC_MAX_REQUEST) {
		errno = ENOMEM;
		return NULL;
	}
	n = n ? (n + ps - 1) & ~(ps - 1) : ps;
	return hc_alloc_aligned(ps, n, false);
}

HC_EXPORT size_t malloc_usable_size(void *p)
{
	return hc_usable_size(p);
}

/* glibc extension: give memory back to the OS now.  Returns 1 if any could
 * have been released, as glibc does. */
HC_EXPORT int malloc_trim(size_t pad)
{
	(void)pad;
	hc_purge_all();
	return 1;
}

void hc_purge_all(void)
{
	hc_heap_collect_self();
	hc_large_purge_now();
	hc_huge_purge_now();
	hc_chunk_cache_purge_now();
}
