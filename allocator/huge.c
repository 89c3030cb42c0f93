/*
 * allocator/huge.c - objects over 8 MiB (or aligned to more than 2 MiB),
 * one mapping each.
 *
 * A mapping starts on a chunk boundary with a one-page header (a chunk
 * header of kind HUGE), and the object follows at huge_offset (the page size,
 * or the alignment asked for).  For alignments of 4 MiB and more the object
 * itself would sit on a chunk boundary, so its header is the page just
 * before it instead; free() recognises such pointers by their alignment.
 *
 * Freed mappings are kept in a small cache for reuse (address space and, for
 * a decay epoch, their resident pages), then unmapped; in the dense mode
 * they are cut and joined to fit (pieces_join).  realloc moves pages with mremap
 * instead of copying, but for a mapping joined from pieces, which it can
 * only grow in place.
 *
 * hc_alloc_set_thp is here too, since it reaches every mapping: the huge
 * ones, then the chunks of chunk.c's registry (chunk.c calls nothing here).
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <errno.h>

#include "internal.h"

#define CACHE_MAX 64
static hc_mutex_t huge_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_HUGE, "huge_lock");
static struct {
	hc_chunk_t *hdr;
	uint64_t epoch;
} cache[CACHE_MAX]; /* under huge_lock */
static unsigned cache_n;
static size_t cache_bytes;
static size_t live_count, live_mapped, live_usable; /* under huge_lock */
static size_t live_usable_peak;                     /* under huge_lock */
static hc_chunk_t *live_list;                       /* under huge_lock */

static void live_add(hc_chunk_t *h)
{
	hc_mapped_add((intptr_t)h->map_size);
	live_count++;
	live_mapped += h->map_size;
	live_usable += h->huge_usable;
	if (live_usable > live_usable_peak)
		live_usable_peak = live_usable;
	h->prev = NULL;
	h->next = live_list;
	if (live_list)
		live_list->prev = h;
	live_list = h;
}

static void live_remove(hc_chunk_t *h)
{
	hc_mapped_add(-(intptr_t)h->map_size);
	live_count--;
	live_mapped -= h->map_size;
	live_usable -= h->huge_usable;
	if (h->prev)
		h->prev->next = h->next;
	else
		live_list = h->next;
	if (h->next)
		h->next->prev = h->prev;
}

#define HUGE_PAGE ((size_t)2 << 20) /* a transparent huge page */

/* n bytes of mapping in whole huge pages (the dense mode, below) */
static inline size_t huge_pages_round(size_t n)
{
	return (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

static bool dense; /* under huge_lock (read unlocked as a hint): below */

static size_t cache_limit(void)
{
	/* In the dense mode (below) every cached byte is resident, in huge
	 * pages: the cache holds what keeps the huge mappings, live and cached,
	 * within 1/32 above the most the program has had live at once, so that
	 * it never sets the process's peak.  malloc-large (20 buffers of 5-25
	 * MiB, written whole) peaked at 558 MiB with the rule below and 473
	 * with this one (jemalloc 436), and ran in 0.6 of the time: what is
	 * cached is used again, and what is not cached comes back in huge
	 * pages (RESULTS.md). */
	if (dense) {
		size_t top = live_usable_peak + live_usable_peak / 32;
		return top > live_mapped ? top - live_mapped : 0;
	}
	/* Else at most half of what is live, and at least 64 MiB: a quarter
	 * let malloc-large in small pages evict a mapping every 24
	 * replacements and fault it in again: 480,000 page faults and 1.25x
	 * tcmalloc's time, against 196,000 and 1.01x with half, at the same
	 * peak RSS.  The decay (hc_huge_decay) unmaps what stays cached two
	 * epochs anyway. */
	size_t lim = live_mapped / 2;
	return lim < ((size_t)64 << 20) ? ((size_t)64 << 20) : lim;
}

/* Take entry i out of the cache (under huge_lock); the caller unmaps it
 * after unlocking, so no thread waits on another's munmap. */
static hc_chunk_t *cache_take(unsigned i)
{
	hc_chunk_t *h = cache[i].hdr;
	cache_bytes -= h->map_size;
	cache[i] = cache[--cache_n];
	return h;
}

static size_t cache_limit(void);

/* Put h in the cache as of epoch (under huge_lock), the oldest entries out
 * to make room; what has to go (h itself, if it is over the limit alone)
 * is added to victims, for the caller to unmap after unlocking. */
static void cache_put(hc_chunk_t *h, uint64_t epoch, hc_chunk_t **victims, unsigned *nv)
{
	if (h->map_size > cache_limit()) {
		victims[(*nv)++] = h;
		return;
	}
	while (cache_n > 0 && (cache_n == CACHE_MAX || cache_bytes + h->map_size > cache_limit())) {
		unsigned old = 0;
		for (unsigned i = 1; i < cache_n; i++)
			if (cache[i].epoch < cache[old].epoch)
				old = i;
		victims[(*nv)++] = cache_take(old);
	}
	cache[cache_n].hdr = h;
	cache[cache_n].epoch = epoch;
	cache_n++;
	cache_bytes += h->map_size;
}

static void unmap_all(hc_chunk_t **v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		hc_os_unmap(v[i], v[i]->map_size);
}

/*
 * The dense mode, for a program that writes its huge objects whole
 * (thp:default, where the system's setting is madvise: hc_os_thp_adaptive).
 * A fresh mapping starts in small pages; when it is freed, /proc/self/pagemap
 * tells whether its first object was written whole (hc_os_written_whole).
 * Two such in a row and the mode is on: fresh mappings are whole huge
 * pages' worth and go into a pool (below) where they are cut and joined to
 * fit.  They get MADV_HUGEPAGE before their first touch where a fresh small
 * page is dear (small_cheap), and then a mapping in small pages freed
 * meanwhile is unmapped, not cached, so that huge ones replace it, and
 * every 32nd fresh mapping stays in small pages as a probe: one found
 * written in part ends the mode.  (Every eighth made malloc-large 1.2 times
 * as slow, its probes' small pages faulted one by one; a program that turns
 * to sparse writes is found out that much later.)  Where a small page is
 * cheap they stay in small pages, every one is measured as a probe, and a
 * mapping in small pages freed meanwhile joins the pool.
 *
 * mimalloc-bench's malloc-large (buffers of 5-25 MiB zeroed whole) took
 * 2.6x tcmalloc's time in small pages on a VM where a small page's first
 * touch cost 18-23 us and rewriting resident ones was slow, and 1.2x in
 * huge pages (RESULTS.md).  On a VM where it cost 1.3-1.7 us, but a fresh
 * huge page 1.4-2 ms per MiB (the host backs again what the guest freed,
 * in blocks of 8 MiB: a huge page comes from those), huge pages took
 * 1.3x and small ones in the pool 1.03x.  Buffers written every 64 KiB
 * (big_buffers) would hold 122 MiB in huge pages against 9.7 in small
 * ones, so a program has to show first that it writes them whole.
 */
#define POOL_IN   1u /* h->huge_pool: in the pool, whole huge pages' worth */
#define POOL_HUGE 2u /* and MADV_HUGEPAGE asked */

static unsigned dense_run;   /* under huge_lock: whole first objects in a row */
static unsigned dense_fresh; /* under huge_lock: fresh mappings in the mode */

/* The least time a fresh small page's first touch took (ns; 0: not
 * measured yet): the first write to a fresh mapping in small pages, its
 * header's, is timed (atomic, relaxed: a lost update loses a sample).
 * The least, since a sample can only be too long (preempted, interrupted). */
static uint64_t small_fault_ns;
#define SMALL_CHEAP_NS 5000

static bool small_cheap(void)
{
	uint64_t v = __atomic_load_n(&small_fault_ns, __ATOMIC_RELAXED);
	return v != 0 && v <= SMALL_CHEAP_NS;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The first write to h, a fresh mapping in small pages, timed. */
static void first_touch_timed(hc_chunk_t *h)
{
	uint64_t t0 = now_ns();
	*(volatile __typeof__(h->magic) *)&h->magic = 0;
	uint64_t t = now_ns() - t0, v = __atomic_load_n(&small_fault_ns, __ATOMIC_RELAXED);
	if (t != 0 && (v == 0 || t < v))
		__atomic_store_n(&small_fault_ns, t, __ATOMIC_RELAXED);
}

/* The mode is on (under huge_lock, or read as a hint). */
static bool dense_on(void)
{
	return __atomic_load_n(&dense, __ATOMIC_RELAXED) && hc_os_thp_adaptive();
}

const char *hc_alloc_thp_dense(void)
{
	if (!dense_on())
		return "off";
	return small_cheap() ? "small" : "huge";
}

/* The pool bits a fresh mapping gets (under huge_lock). */
static unsigned dense_take(void)
{
	if (!dense_on())
		return 0;
	if (small_cheap())
		return POOL_IN;
	return ++dense_fresh % 32 != 0 ? POOL_IN | POOL_HUGE : 0;
}

/* What a free tells of the mode (under huge_lock); whole: the freed
 * mapping's first object was written whole (-1: not measured).  True if
 * the mode is on: mappings in small pages then go, or join the pool,
 * rather than into the cache as they are.  (Those in the cache when the
 * mode starts stay there: unmapping them at once made malloc-large slower,
 * 4.7-7.1 s against 3.5-3.9.) */
static bool dense_learn(int whole)
{
	if (whole >= 0) {
		dense_run = whole ? dense_run + 1 : 0;
		__atomic_store_n(&dense, dense_run >= 2, __ATOMIC_RELAXED);
	}
	return dense_on();
}

/*
 * In the dense mode the cache is a pool of resident pages, in whole huge
 * pages' worth, cut and joined without a page fault.  A cached mapping
 * bigger than a request is cut at the huge page past it, and the rest goes
 * back to the cache as a mapping of its own (piece_split); a request bigger
 * than every cached mapping gets the largest, with others moved in behind
 * it (pieces_join).
 * mremap moves page tables, not bytes, and a piece is moved to a chunk
 * boundary before an object goes in it.  Before, the rest was unmapped and
 * the next bigger request grew a mapping by fresh pages: malloc-large
 * (buffers of 5-25 MiB, each written whole) ran 715 munmap and 546 growing
 * mremap calls, and faulted 2,020 huge pages in a run (4 GiB, zeroed by the
 * kernel), against 432 this way (RESULTS.md).  What the cache holds is
 * bounded as before (cache_limit), so the pool holds no more than the
 * tails it replaced did.  Mappings of the pool only: their sizes are
 * whole huge pages, so every cut and move is of whole ones (a cut inside
 * one would split it into small pages; in small pages, the kernel moves a
 * whole page table at a time).
 */

/* Take cached mappings of the pool, the largest first, until they and
 * have bytes (under huge_lock); their count, in out. */
static unsigned pieces_gather(size_t have, size_t need, hc_chunk_t **out)
{
	unsigned n = 0;
	while (have < need) {
		int best = -1;
		for (unsigned i = 0; i < cache_n; i++)
			if ((cache[i].hdr->huge_pool & POOL_IN) &&
			    (best < 0 || cache[i].hdr->map_size > cache[best].hdr->map_size))
				best = (int)i;
		if (best < 0)
			break;
		out[n] = cache_take((unsigned)best);
		have += out[n++]->map_size;
	}
	return n;
}

/* Move the pages of size bytes at src to dst, over a mapping of ours.
 * mremap takes one mapping of the kernel's at a time, and a joined one is
 * several (cut on huge page boundaries, unless realloc cut it): whole if
 * it can, else a huge page at a time.  What does not move is unmapped, and
 * dst keeps fresh pages there: for cached mappings only, whose bytes do
 * not matter. */
static void pages_move(void *src, size_t size, char *dst)
{
	if (mremap(src, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, dst) != MAP_FAILED)
		return;
	for (size_t at = 0; at < size; at += HUGE_PAGE) {
		size_t step = size - at < HUGE_PAGE ? size - at : HUGE_PAGE;
		if (mremap((char *)src + at, step, step, MREMAP_MAYMOVE | MREMAP_FIXED, dst + at) == MAP_FAILED)
			hc_os_unmap((char *)src + at, step);
	}
}

/* One mapping of at least want bytes on a chunk boundary: h, then the n
 * pieces moved in behind it, then fresh pages.  If no new place can be
 * had, the pieces are unmapped and h is returned as it was (the caller
 * grows it), or unmapped and NULL returned if it is not on a chunk
 * boundary. */
static hc_chunk_t *pieces_join(hc_chunk_t *h, hc_chunk_t **more, unsigned n, size_t want)
{
	int saved = errno;
	size_t first = h->map_size, total = first;
	uint32_t pool = h->huge_pool;
	for (unsigned i = 0; i < n; i++)
		total += more[i]->map_size;
	size_t size = total > want ? total : want;
	char *dst = hc_chunk_map_aligned(size);
	if (dst == NULL) {
		unmap_all(more, n);
		errno = saved;
		if (((uintptr_t)h & HC_CHUNK_MASK) == 0)
			return h;
		hc_os_unmap(h, first); /* no object can start in it */
		return NULL;
	}
	if (pool & POOL_HUGE)
		hc_os_hugepage(dst, size); /* the fresh part, if any */
	pages_move(h, first, dst);
	size_t at = first;
	for (unsigned i = 0; i < n; i++) {
		size_t ps = more[i]->map_size; /* its header moves with it */
		pages_move(more[i], ps, dst + at);
		at += ps;
	}
	errno = saved;
	h = (hc_chunk_t *)dst;
	h->map_size = size;
	h->huge_pool = pool; /* its header page may be a fresh one */
	return h;
}

/* Cut h (of the pool, over want bytes, a whole number of huge pages) to
 * want; the rest is returned as a mapping of its own, for the cache.  It
 * starts on a huge page boundary but maybe not on a chunk's, where an
 * object's header has to be: pieces_join moves it to one before use. */
static hc_chunk_t *piece_split(hc_chunk_t *h, size_t want)
{
	hc_chunk_t *rest = (hc_chunk_t *)((char *)h + want);
	rest->map_size = h->map_size - want;
	rest->huge_pool = h->huge_pool;
	rest->huge_fresh = 0;
	rest->magic = 0;
	h->map_size = want;
	return rest;
}

/* offset of the object for a given alignment (< chunk size) */
static size_t huge_offset_for(size_t align)
{
	return align > HC_PAGE ? align : HC_PAGE;
}

static void *huge_finish(hc_chunk_t *h, size_t off, size_t n, bool zero, bool fresh)
{
	h->kind = HC_KIND_HUGE;
	h->owner = HC_TID_NONE;
	h->magic = HC_MAGIC;
	h->huge_offset = off;
	/* what was asked for in whole pages, not the mapping, which may be a
	 * bigger one reused: usable sizes do not depend on the cache (nallocx) */
	h->huge_usable = ((off + n + HC_PAGE - 1) & ~(HC_PAGE - 1)) - off;
	h->huge_prof = NULL;
	void *p = (char *)h + off;
	hc_chunk_mark(hc_chunk_of(p), true);
	if (zero && !fresh)
		memset(p, 0, n);
	return p;
}

/* Grow h from old to need bytes in place with a mapping of its own behind
 * it, if that address space is free.  For a mapping joined from pieces
 * (below), which is several of the kernel's: mremap grows only one. */
static bool grow_beside(hc_chunk_t *h, size_t old, size_t need)
{
	char *tail = (char *)h + old;
	size_t more = need - old;
	void *t = mmap(tail, more, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (t == tail) {
		if (h->huge_pool & POOL_HUGE)
			hc_os_hugepage(tail, more);
		(void)hc_os_thp(tail, more);
		return true;
	}
	if (t != MAP_FAILED) /* a kernel before 4.17 took the address as a hint */
		hc_os_unmap(t, more);
	return false;
}

/* Grow a chunk-aligned mapping to need bytes without copying: in place if
 * the address space after it is free, else by moving its pages with mremap
 * into a fresh chunk-aligned reservation.  NULL (mapping untouched) on
 * failure; on success the header's map_size is updated. */
static hc_chunk_t *huge_grow(hc_chunk_t *h, size_t need)
{
	int saved = errno;
	size_t old = h->map_size;
	if (mremap(h, old, need, 0) == MAP_FAILED && !grow_beside(h, old, need)) {
		char *dst = hc_chunk_map_aligned(need);
		if (dst == NULL) {
			errno = saved;
			return NULL;
		}
		if (mremap(h, old, need, MREMAP_MAYMOVE | MREMAP_FIXED, dst) == MAP_FAILED) {
			hc_os_unmap(dst, need);
			errno = saved;
			return NULL;
		}
		h = (hc_chunk_t *)dst;
	}
	errno = saved;
	h->map_size = need;
	return h;
}

/* Overaligned case: the object is chunk-aligned and its header sits in the
 * page before it. */
static void *huge_alloc_overaligned(size_t n, size_t align, bool zero)
{
	size_t body = (n + HC_PAGE - 1) & ~(HC_PAGE - 1);
	if (body > SIZE_MAX - align - HC_PAGE)
		return NULL;
	char *raw = hc_os_map(body + align + HC_PAGE);
	if (raw == NULL)
		return NULL;
	char *obj = (char *)(((uintptr_t)raw + HC_PAGE + align - 1) & ~(uintptr_t)(align - 1));
	char *hdr = obj - HC_PAGE;
	if (hdr > raw)
		hc_os_unmap(raw, (size_t)(hdr - raw));
	char *end = raw + body + align + HC_PAGE;
	if (end > obj + body)
		hc_os_unmap(obj + body, (size_t)(end - (obj + body)));
	(void)hc_os_thp(hdr, body + HC_PAGE); /* before the first touch */
	hc_chunk_t *h = (hc_chunk_t *)hdr;
	h->map_size = body + HC_PAGE;
	void *p = huge_finish(h, HC_PAGE, n, zero, true);
	hc_mutex_lock(&huge_lock);
	(void)hc_os_thp(h, h->map_size); /* a mode set since (huge_thp_all) */
	live_add(h);
	hc_mutex_unlock(&huge_lock);
	return p;
}

void *hc_huge_alloc(size_t n, size_t align, bool zero)
{
	if (n > HC_MAX_REQUEST) {
		errno = ENOMEM;
		return NULL;
	}
	if (align >= HC_CHUNK_SIZE) {
		void *p = huge_alloc_overaligned(n, align, zero);
		if (p == NULL)
			errno = ENOMEM;
		return p;
	}
	size_t off = huge_offset_for(align);
	size_t need = (off + n + HC_PAGE - 1) & ~(HC_PAGE - 1);
	hc_chunk_t *h = NULL;
	bool fresh = false;
	hc_mutex_lock(&huge_lock);
	/* Reuse before mapping: the smallest cached mapping that fits, else the
	 * largest one that does not (grown below), so dirty pages are recycled
	 * whatever the size mix. */
	int fit = -1, grow = -1;
	for (unsigned i = 0; i < cache_n; i++) {
		size_t sz = cache[i].hdr->map_size;
		if (sz >= need) {
			if (fit < 0 || sz < cache[fit].hdr->map_size)
				fit = (int)i;
		} else if (grow < 0 || sz > cache[grow].hdr->map_size) {
			grow = (int)i;
		}
	}
	int take = fit >= 0 ? fit : grow;
	hc_chunk_t *more[CACHE_MAX];
	unsigned nmore = 0;
	uint64_t epoch = 0;
	if (take >= 0) {
		epoch = cache[take].epoch;
		h = cache_take((unsigned)take);
		if (fit < 0 && (h->huge_pool & POOL_IN))
			nmore = pieces_gather(h->map_size, huge_pages_round(need), more);
	}
	hc_mutex_unlock(&huge_lock);
	/* Keep up to eight times what is needed: trimming now and growing
	 * again on the next bigger request costs a page fault per page each
	 * time (buffers of 5-25 MiB in a loop: twice as fast as trimming at
	 * 2x, for 3% more peak RSS).  The tail past the object keeps what an
	 * earlier object wrote there until this one is freed and the mapping
	 * decays in the cache.  (map_size / 8: 8 * need wraps for a request
	 * over 2^61 bytes, which then trimmed the mapping to nothing and
	 * returned it.) */
	size_t want = need, keep = 8;
	hc_chunk_t *rest = NULL;
	if (h != NULL && (h->huge_pool & POOL_IN)) {
		/* whole huge pages' worth, and no more than needed: see
		 * cache_limit (a cut inside one splits it into small pages);
		 * the rest goes back to the cache (pieces_join, above) */
		want = huge_pages_round(need);
		keep = 1;
		if (nmore > 0 || h->map_size < want || ((uintptr_t)h & HC_CHUNK_MASK) != 0)
			h = pieces_join(h, more, nmore, want);
		if (h != NULL && h->map_size > want && h->map_size % HUGE_PAGE == 0)
			rest = piece_split(h, want);
	}
	if (h != NULL && h->map_size / keep > want) {
		hc_os_unmap((char *)h + want, h->map_size - want);
		h->map_size = want;
	} else if (h != NULL && h->map_size < need) {
		hc_chunk_t *g = huge_grow(h, want);
		if (g == NULL) {
			hc_os_unmap(h, h->map_size);
			h = NULL;
		} else {
			h = g;
		}
	}
	unsigned pool = 0;
	if (h == NULL) {
		if (__atomic_load_n(&dense, __ATOMIC_RELAXED)) {
			hc_mutex_lock(&huge_lock);
			pool = dense_take();
			hc_mutex_unlock(&huge_lock);
		}
		if (pool) /* whole huge pages: the last one in small pages faulted
		           * up to 511 times */
			need = huge_pages_round(need);
		h = hc_chunk_map_aligned(need);
		if (h == NULL) {
			errno = ENOMEM;
			return NULL;
		}
		if (pool & POOL_HUGE) /* before the header's write faults in a small page */
			hc_os_hugepage(h, need);
		else if (hc_os_thp_adaptive())
			first_touch_timed(h);
		h->map_size = need;
		fresh = true;
	}
	void *p = huge_finish(h, off, n, zero, fresh);
	if (fresh)
		h->huge_pool = pool;
	h->huge_fresh = fresh;
	hc_chunk_t *victims[CACHE_MAX];
	unsigned nv = 0;
	hc_mutex_lock(&huge_lock);
	if (fresh) /* a mode set since the mapping (huge_thp_all) */
		(void)hc_os_thp(h, h->map_size);
	live_add(h);
	if (rest != NULL)
		cache_put(rest, epoch, victims, &nv);
	hc_mutex_unlock(&huge_lock);
	unmap_all(victims, nv);
	return p;
}

hc_chunk_t *hc_huge_header(const void *p)
{
	return (hc_chunk_t *)((uintptr_t)p - HC_PAGE);
}

/* h's mapping cut to its first keep bytes (of its map_size); the rest, at
 * *at, is the caller's to unmap: its size is returned. */
static size_t map_cut(hc_chunk_t *h, size_t keep, char **at)
{
	size_t cut = h->map_size - keep;
	*at = (char *)h + keep;
	h->map_size = keep;
	return cut;
}

void hc_huge_free(hc_chunk_t *h)
{
	if (h->huge_prof != NULL) {
		void *rec = h->huge_prof;
		h->huge_prof = NULL;
		hc_agent_unsample(rec);
	}
	bool overaligned = ((uintptr_t)h & HC_CHUNK_MASK) != 0;
	hc_chunk_mark(hc_chunk_of((char *)h + h->huge_offset), false);
	/* a fresh mapping in small pages: was its object written whole? */
	int whole = -1;
	if (!overaligned && h->huge_fresh && !(h->huge_pool & POOL_HUGE) && hc_os_thp_adaptive())
		whole = hc_os_written_whole((char *)h + h->huge_offset, h->huge_usable);
	hc_mutex_lock(&huge_lock);
	live_remove(h);
	h->magic = 0; /* a second free of this pointer is caught */
	size_t cut = 0, lim = cache_limit();
	char *cut_at = NULL;
	if ((h->huge_pool & POOL_IN) && h->map_size > lim && h->map_size % HUGE_PAGE == 0) {
		/* of the pool and over the bound: the part that fits stays */
		size_t keep = lim & ~(HUGE_PAGE - 1);
		if (keep != 0)
			cut = map_cut(h, keep, &cut_at);
	}
	bool go = overaligned || h->map_size > lim;
	if (dense_learn(whole) && !go && !(h->huge_pool & POOL_IN)) {
		/* in small pages, in the mode: into the pool, in whole huge
		 * pages' worth, or out where huge ones take its place */
		size_t whole_pages = h->map_size & ~(HUGE_PAGE - 1);
		if (small_cheap() && whole_pages != 0) {
			cut = map_cut(h, whole_pages, &cut_at);
			h->huge_pool = POOL_IN;
		} else {
			go = true;
		}
	}
	if (go) {
		hc_mutex_unlock(&huge_lock);
		hc_os_unmap(h, h->map_size + cut); /* the cut part is the rest of it */
		return;
	}
	hc_chunk_t *victims[CACHE_MAX];
	unsigned nv = 0;
	cache_put(h, hc_decay_epoch(), victims, &nv);
	hc_mutex_unlock(&huge_lock);
	if (cut != 0) /* ours until unmapped: a thread that takes h sees it end before */
		hc_os_unmap(cut_at, cut);
	unmap_all(victims, nv);
}

/* Resize a huge object; NULL if the caller must allocate and copy.  Shrinks
 * unmap the tail; growth tries in place, then moves the pages with mremap to
 * a fresh chunk-aligned reservation. */
void *hc_huge_realloc(hc_chunk_t *h, size_t n)
{
	if (((uintptr_t)h & HC_CHUNK_MASK) != 0 || n > HC_MAX_REQUEST)
		return NULL;
	size_t need = (h->huge_offset + n + HC_PAGE - 1) & ~(HC_PAGE - 1);
	size_t old = h->map_size;
	void *obj = (char *)h + h->huge_offset;
	if (need == old) {
		hc_mutex_lock(&huge_lock);
		live_remove(h);
		h->huge_usable = need - h->huge_offset;
		live_add(h);
		hc_mutex_unlock(&huge_lock);
		return obj;
	}
	int saved = errno;
	hc_mutex_lock(&huge_lock);
	live_remove(h);
	hc_mutex_unlock(&huge_lock);
	if (need < old) {
		if (need < old / 2)
			goto keep; /* much smaller: a copy frees the big mapping */
		hc_os_unmap((char *)h + need, old - need);
	} else {
		hc_chunk_t *g = huge_grow(h, need);
		if (g == NULL)
			goto keep;
		if (g != h) { /* moved: the object's chunk changed */
			hc_chunk_mark(h, false);
			hc_chunk_mark(g, true);
		}
		h = g;
	}
	h->map_size = need;
	h->huge_usable = need - h->huge_offset;
	obj = (char *)h + h->huge_offset;
keep:
	errno = saved;
	hc_mutex_lock(&huge_lock);
	live_add(h);
	hc_mutex_unlock(&huge_lock);
	return h->map_size == need ? obj : NULL;
}

/* The usable size hc_huge_alloc(n, align) gives. */
size_t hc_huge_usable_for(size_t n, size_t align)
{
	size_t off = align >= HC_CHUNK_SIZE ? HC_PAGE : huge_offset_for(align);
	return ((off + n + HC_PAGE - 1) & ~(HC_PAGE - 1)) - off;
}

void hc_huge_decay(void)
{
	if (__atomic_load_n(&cache_n, __ATOMIC_RELAXED) == 0)
		return;
	if (hc_mutex_trylock(&huge_lock) != 0)
		return;
	uint64_t epoch = hc_decay_epoch();
	hc_chunk_t *victims[CACHE_MAX];
	unsigned nv = 0;
	for (unsigned i = 0; i < cache_n;) {
		if (epoch - cache[i].epoch >= 2)
			victims[nv++] = cache_take(i);
		else
			i++;
	}
	hc_mutex_unlock(&huge_lock);
	unmap_all(victims, nv);
}

void hc_huge_purge_now(void)
{
	hc_chunk_t *victims[CACHE_MAX];
	unsigned nv = 0;
	hc_mutex_lock(&huge_lock);
	while (cache_n)
		victims[nv++] = cache_take(0);
	hc_mutex_unlock(&huge_lock);
	unmap_all(victims, nv);
}

/* hc_os_thp on every huge mapping; 0 or an errno value */
static int huge_thp_all(void)
{
	int err = 0;
	hc_mutex_lock(&huge_lock);
	for (hc_chunk_t *h = live_list; h != NULL; h = h->next) {
		int e = hc_os_thp(h, h->map_size);
		err = err ? err : e;
	}
	for (unsigned i = 0; i < cache_n; i++) {
		int e = hc_os_thp(cache[i].hdr, cache[i].hdr->map_size);
		err = err ? err : e;
	}
	hc_mutex_unlock(&huge_lock);
	return err;
}

int hc_alloc_set_thp(unsigned mode)
{
	hc_os_thp_mode(mode);
	(void)hc_chunk_reserve_drop(); /* mapped with the old mode */
	if (mode == HC_THP_DEFAULT)    /* nothing to do, nor to undo */
		return 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	int err = huge_thp_all();
	for (hc_chunk_t *c = hc_chunk_registry(); c != NULL; c = c->all_next) {
		int e = hc_os_thp(c, c->map_size);
		err = err ? err : e;
	}
	return err;
}

void hc_huge_stats(hc_stats_t *st)
{
	hc_mutex_lock(&huge_lock);
	st->nhuge = live_count;
	st->nhuge_cached = cache_n;
	st->huge_allocated = live_usable;
	st->active += live_mapped - live_count * HC_PAGE;
	st->mapped += live_mapped;
	st->metadata += live_count * HC_PAGE;
	st->dirty += cache_bytes;
	hc_mutex_unlock(&huge_lock);
}

void hc_huge_fork_prepare(void)
{
	hc_mutex_lock(&huge_lock);
}
void hc_huge_fork_parent(void)
{
	hc_mutex_unlock(&huge_lock);
}
void hc_huge_fork_child(void)
{
	hc_mutex_reinit(&huge_lock);
}

void hc_huge_ranges(bool (*fn)(void *arg, uintptr_t start, uintptr_t end, unsigned kind), void *arg)
{
	hc_mutex_lock(&huge_lock);
	bool more = true;
	for (hc_chunk_t *h = live_list; h && more; h = h->next)
		more = fn(arg, (uintptr_t)h, (uintptr_t)h + h->map_size, HC_RANGE_HUGE);
	for (unsigned i = 0; i < cache_n && more; i++)
		more =
		    fn(arg, (uintptr_t)cache[i].hdr, (uintptr_t)cache[i].hdr + cache[i].hdr->map_size, HC_RANGE_HUGE);
	hc_mutex_unlock(&huge_lock);
}
