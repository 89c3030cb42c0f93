/*
 * allocator/chunk.c - 4 MiB chunks: mapping, the registry, the cache of empty
 * chunks, and the time-based purge of dirty memory inside chunks.
 *
 * A chunk is mapped once and never unmapped (see internal.h for why).  Every
 * chunk ever mapped is on an append-only registry that statistics walk
 * without locks.  Empty chunks wait in a LIFO cache (warm ones are reused
 * first); once a chunk has sat there for a decay epoch its pages are purged,
 * with the cache's lock let go, and its bytes count as "retained".
 */
#define _GNU_SOURCE
#include <string.h>

#include "internal.h"

/* One purge of the cache at a time, held across its madvise calls, which
 * cache_lock is not (cache_purge_pass); fork's prepare takes it first. */
static hc_mutex_t cache_purge_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_CHUNK_PURGE, "cache_purge_lock");
static hc_mutex_t cache_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_CHUNK_CACHE, "cache_lock");
/* [0]: small chunks (one slot), [1]: large chunks (HC_LARGE_SLOTS slots);
 * a chunk keeps its size for life, so it only ever returns to its list. */
static hc_chunk_t *cache_head[2]; /* under cache_lock */
static size_t cache_count;        /* under cache_lock */
static uint64_t cache_epoch;      /* under cache_lock */
static hc_chunk_t *cache_purging; /* off its list while purged, under cache_lock */
static hc_chunk_t *registry;      /* atomic, append-only */

/* The size of a chunk of list 0 (small) or 1 (large). */
static size_t list_size(unsigned list)
{
	return list ? HC_LARGE_CHUNK : HC_CHUNK_SIZE;
}

/*
 * Fresh chunks are mapped a batch at a time and handed out one by one: as
 * many as are mapped already (one, then one, two, four...), up to
 * MAP_BATCH_MAX bytes, so a heap of N chunks took about log2(N) mmap calls
 * and no more than 64 MiB of each kind waits unused.  Each batch is a
 * VMA of its own (os.c leaves a gap between mappings, where a chunk mapped
 * right next to the last grew the heap's VMA under the kernel's write lock,
 * and every thread faulting in pages of the heap waited for that mmap), and
 * the batches keep the VMAs few.  rptest's first burst had each worker map
 * three to four chunks, one at a time, while the other faulted: both slept,
 * and the kernel woke the waiting one onto its waker's CPU, where the two
 * took turns for tens of milliseconds.  What waits in the reserve
 * was never touched: it counts as retained, not mapped.  map_lock is held
 * across the mmap, so one thread maps while the others that need a fresh
 * chunk wait for the batch, not each for a mmap of its own; threads that
 * take chunks from the cache never take it.
 */
enum { MAP_BATCH_MAX = 64 << 20 };
static hc_mutex_t map_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_CHUNK_MAP, "map_lock");
static char *reserve_at[2];          /* under map_lock: the next fresh chunk */
static size_t reserve_left[2];       /* atomic, written under map_lock: chunks */
static size_t fresh_bytes;           /* under map_lock: mapped since start */
static size_t mapped_now, mapped_hw; /* atomic */
int hc_highwater_pending;            /* atomic */

/* Chunks leave and enter the cache, huge mappings come and go: keep the
 * total and flag each new high-water mark for the agent (checked by the
 * allocation slow path once its locks are released). */
void hc_mapped_add(intptr_t delta)
{
	size_t v = __atomic_add_fetch(&mapped_now, (size_t)delta, __ATOMIC_RELAXED);
	if (delta <= 0)
		return;
	size_t hw = __atomic_load_n(&mapped_hw, __ATOMIC_RELAXED);
	while (v > hw) {
		if (__atomic_compare_exchange_n(&mapped_hw, &hw, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			__atomic_store_n(&hc_highwater_pending, 1, __ATOMIC_RELEASE);
			break;
		}
	}
}

size_t hc_mapped_now(void)
{
	return __atomic_load_n(&mapped_now, __ATOMIC_RELAXED);
}
size_t hc_mapped_highwater(void)
{
	return __atomic_load_n(&mapped_hw, __ATOMIC_RELAXED);
}

hc_chunk_t *hc_chunk_registry(void)
{
	return __atomic_load_n(&registry, __ATOMIC_ACQUIRE);
}

/* 4 MiB of zeroes that stay virtual but for the few pages the chunks in use
 * fall in (one 4 KiB page covers 128 GiB of address space). */
uint64_t hc_chunk_bits[(size_t)1 << (HC_ADDR_BITS - HC_CHUNK_SHIFT - 6)];

/* Before the first mark: the bitmap is sparse, and under a system THP
 * setting of "always" its first touched page would fault in a 2 MiB huge
 * page (a program that allocates a little paid 2 MiB of RSS for a few
 * bits).  A failure leaves it as it was. */
void hc_chunk_init(void)
{
	uintptr_t lo = ((uintptr_t)hc_chunk_bits + HC_PAGE - 1) & ~(uintptr_t)(HC_PAGE - 1);
	uintptr_t hi = ((uintptr_t)hc_chunk_bits + sizeof hc_chunk_bits) & ~(uintptr_t)(HC_PAGE - 1);
	hc_os_nohuge((void *)lo, hi - lo);
}

void hc_chunk_mark(const void *c, bool on)
{
	uintptr_t i = (uintptr_t)c >> HC_CHUNK_SHIFT;
	if (i >= ((uintptr_t)1 << (HC_ADDR_BITS - HC_CHUNK_SHIFT)))
		return;
	uint64_t bit = (uint64_t)1 << (i & 63);
	if (on)
		__atomic_fetch_or(&hc_chunk_bits[i >> 6], bit, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&hc_chunk_bits[i >> 6], ~bit, __ATOMIC_RELEASE);
}

static void registry_add(hc_chunk_t *c)
{
	hc_chunk_mark(c, true);
	hc_chunk_t *head = __atomic_load_n(&registry, __ATOMIC_RELAXED);
	do {
		c->all_next = head;
	} while (!__atomic_compare_exchange_n(&registry, &head, c, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	/* hc_os_map_aligned gave c the thp mode; one set since is given here
	 * (with hc_alloc_set_thp's fence, in huge.c: it sees c on the
	 * registry, or this sees its mode, or both) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	(void)hc_os_thp(c, c->map_size);
}

/* Empty a chunk's xpages list without acting on it: each page's link is
 * read before its queued flag is cleared, so a concurrent push can never
 * put a page on the list twice. */
void hc_chunk_drop_xpages(hc_chunk_t *c)
{
	hc_page_t *stale = __atomic_exchange_n(&c->xpages, NULL, __ATOMIC_ACQ_REL);
	while (stale) {
		hc_page_t *next = stale->xnext;
		__atomic_store_n(&stale->queued, 0, __ATOMIC_SEQ_CST);
		stale = next;
	}
}

/* Reset the header for a new life as a chunk of the given kind.  The xpages
 * list of a small chunk may hold stale pushes from its last life.  The dirty
 * maps are kept: a chunk that comes back from the cache unpurged still has
 * its freed units resident, and they must stay on the maps so that new
 * pages and runs take them first and the decay purges those left over (they
 * were cleared here once, and such units then stayed resident, uncounted,
 * for the chunk's whole next life).  A purged or fresh chunk has none. */
static void chunk_prepare(hc_chunk_t *c, unsigned kind)
{
	hc_chunk_drop_xpages(c);
	c->kind = kind;
	c->magic = HC_MAGIC;
	c->nused = 0;
	c->heap = NULL;
	c->arena = NULL;
	c->next = c->prev = NULL;
	c->decay_epoch = hc_decay_epoch();
	c->used_slots = 1; /* slot 0: header */
	memset(c->run_used, 0, sizeof c->run_used);
	for (unsigned i = 0; i < HC_LARGE_HDR_RUNS; i++)
		c->run_used[i / 64] |= 1ULL << (i % 64);
	c->large_allocated = 0;
	c->large_pages = 0;
	for (unsigned i = 0; i < HC_NSLOTS; i++) {
		hc_page_t *pg = &c->pages[i];
		pg->in_use = 0;
		pg->flags = 0;
		pg->live = 0;
		pg->free = NULL;
		c->xpage[i] = (hc_xpage_t){ 0 };
	}
}

/* Unmap what waits in the reserves; true if anything did.  Under
 * map_lock. */
static bool reserve_drop_locked(void)
{
	bool any = false;
	for (unsigned list = 0; list < 2; list++) {
		size_t left = reserve_left[list];
		if (left == 0)
			continue;
		hc_os_unmap(reserve_at[list], left * list_size(list));
		__atomic_store_n(&reserve_left[list], 0, __ATOMIC_RELAXED);
		any = true;
	}
	return any;
}

/* The reserves go back to the OS: at malloc_trim, when a mapping failed
 * (the address space they hold counts against RLIMIT_AS, and under
 * vm.overcommit_memory=2 against the commit limit, MAP_NORESERVE or not),
 * and when the thp mode changes (they were mapped with the old one). */
bool hc_chunk_reserve_drop(void)
{
	hc_mutex_lock(&map_lock);
	bool any = reserve_drop_locked();
	hc_mutex_unlock(&map_lock);
	return any;
}

/* size bytes on a chunk boundary for a huge mapping; if none can be had,
 * the reserves go back and it is tried once more. */
void *hc_chunk_map_aligned(size_t size)
{
	void *p = hc_os_map_aligned(size, HC_CHUNK_SIZE);
	if (p == NULL && hc_chunk_reserve_drop())
		p = hc_os_map_aligned(size, HC_CHUNK_SIZE);
	return p;
}

/* A chunk never used: the reserve's next, else the first of a new batch
 * (one chunk if the batch cannot be mapped, and the reserves given back
 * if not even that). */
static hc_chunk_t *chunk_fresh(unsigned list, size_t size)
{
	hc_mutex_lock(&map_lock);
	char *p = NULL;
	if (reserve_left[list] == 0) {
		size_t n = fresh_bytes / size;
		n = n < 1 ? 1 : n > MAP_BATCH_MAX / size ? MAP_BATCH_MAX / size : n;
		while ((p = hc_os_map_aligned(n * size, HC_CHUNK_SIZE)) == NULL && n > 1)
			n = 1;
		if (p == NULL && reserve_drop_locked())
			p = hc_os_map_aligned(size, HC_CHUNK_SIZE);
		if (p != NULL) {
			fresh_bytes += n * size;
			reserve_at[list] = p;
			__atomic_store_n(&reserve_left[list], n, __ATOMIC_RELAXED);
		}
	}
	if (reserve_left[list] != 0) {
		p = reserve_at[list];
		reserve_at[list] += size;
		__atomic_store_n(&reserve_left[list], reserve_left[list] - 1, __ATOMIC_RELAXED);
	}
	hc_mutex_unlock(&map_lock);
	return (hc_chunk_t *)p;
}

/* Take a chunk from the cache or map a new one.  *metadata_out gets the
 * header bytes when the chunk is new (0 otherwise). */
hc_chunk_t *hc_chunk_get(unsigned kind, size_t *metadata_out)
{
	hc_chunk_t *c = NULL;
	unsigned list = kind == HC_KIND_LARGE;
	size_t size = list_size(list);
	*metadata_out = 0;
	if (__atomic_load_n(&cache_head[list], __ATOMIC_RELAXED) != NULL) {
		hc_mutex_lock(&cache_lock);
		c = cache_head[list];
		if (c) {
			cache_head[list] = c->next;
			cache_count--;
		}
		hc_mutex_unlock(&cache_lock);
	}
	if (c) {
		/* A purged chunk is all zeros again: nothing to remember.  An
		 * unpurged one keeps its nonzero map, exact since it was last
		 * purged (the list is the kind's, so it was a large chunk in its
		 * last life too): calloc zeroes what it must, and new runs go
		 * to the written pages first. */
		if (c->purged)
			memset(c->run_nonzero, 0, sizeof c->run_nonzero);
		chunk_prepare(c, kind);
		c->purged = 0;
		__atomic_store_n(&c->cached, 0, __ATOMIC_RELEASE);
		hc_mapped_add((intptr_t)size);
		return c;
	}
	c = chunk_fresh(list, size);
	if (c == NULL)
		return NULL;
	/* fresh mapping: all zero, so the nonzero and dirty maps are empty */
	chunk_prepare(c, kind);
	c->map_size = size;
	/* what of the header is ever written: a small chunk's ends before
	 * the large-only run lengths (internal.h) */
	*metadata_out = kind == HC_KIND_LARGE ? HC_LARGE_HDR_RUNS * HC_PAGE : HC_SMALL_HDR_BYTES;
	registry_add(c);
	hc_mapped_add((intptr_t)size);
	return c;
}

void hc_chunk_put(hc_chunk_t *c)
{
	unsigned list = c->kind == HC_KIND_LARGE; /* as hc_chunk_get's */
	hc_mapped_add(-(intptr_t)c->map_size);
	c->owner = HC_TID_NONE;
	c->heap = NULL;
	c->arena = NULL;
	hc_mutex_lock(&cache_lock);
	c->decay_epoch = hc_decay_epoch();
	__atomic_store_n(&c->cached, 1, __ATOMIC_RELEASE);
	c->next = cache_head[list];
	cache_head[list] = c;
	cache_count++;
	hc_mutex_unlock(&cache_lock);
}

static void cache_purge(hc_chunk_t *c)
{
	size_t hdr = (sizeof(hc_chunk_t) + HC_PAGE - 1) & ~(HC_PAGE - 1);
	hc_os_purge((char *)c + hdr, c->map_size - hdr);
	c->purged = 1;
	c->dirty_new = c->dirty_old = 0;
	memset(c->run_dirty_new, 0, sizeof c->run_dirty_new);
	memset(c->run_dirty_old, 0, sizeof c->run_dirty_old);
}

/* Take the first unpurged cached chunk that has been empty for at least one
 * whole epoch (any, with HC_PURGE_ALL) off its list, under cache_lock. */
static hc_chunk_t *cache_take_unpurged(uint64_t epoch)
{
	for (unsigned list = 0; list < 2; list++) {
		for (hc_chunk_t **at = &cache_head[list]; *at; at = &(*at)->next) {
			hc_chunk_t *c = *at;
			if (!c->purged && (epoch == HC_PURGE_ALL || epoch - c->decay_epoch >= 2)) {
				*at = c->next;
				return c;
			}
		}
	}
	return NULL;
}

/*
 * Purge cached chunks, one at a time, under cache_purge_lock: each is taken
 * off its list, purged with cache_lock let go, and put back at the list's
 * end (hc_chunk_get takes the warm ones first).  A thread that takes or
 * gives back a chunk meanwhile waits for no madvise: when the lock was held
 * for the whole pass, 8 threads' bursts of 64 MiB freed made a thread's
 * start wait 44 ms for malloc_trim (DESIGN.md), and as long for the control
 * thread's decay two epochs later.  The one chunk in flight is counted as
 * purged (hc_chunk_cached).  At most as many chunks as were cached at the
 * start, so a thread that cycles chunks through the cache cannot keep it
 * going.
 */
static void cache_purge_pass(uint64_t epoch)
{
	hc_mutex_lock(&cache_lock);
	size_t budget = cache_count;
	if (epoch != HC_PURGE_ALL)
		cache_epoch = epoch;
	hc_mutex_unlock(&cache_lock);
	while (budget-- > 0) {
		hc_mutex_lock(&cache_lock);
		hc_chunk_t *c = cache_take_unpurged(epoch);
		cache_purging = c;
		hc_mutex_unlock(&cache_lock);
		if (c == NULL)
			return;
		cache_purge(c);
		c->next = NULL;
		hc_mutex_lock(&cache_lock);
		hc_chunk_t **at = &cache_head[c->kind == HC_KIND_LARGE];
		while (*at)
			at = &(*at)->next;
		*at = c;
		cache_purging = NULL;
		hc_mutex_unlock(&cache_lock);
	}
}

/* Purge every cached chunk now, however recently it emptied (arena.<i>.purge,
 * malloc_trim: jemalloc's purge does not wait for the decay time). */
void hc_chunk_cache_purge_now(void)
{
	hc_mutex_lock(&cache_purge_lock);
	cache_purge_pass(HC_PURGE_ALL);
	hc_mutex_unlock(&cache_purge_lock);
	(void)hc_chunk_reserve_drop();
}

/* Purge cached chunks that have been empty for at least one whole epoch;
 * never waits for another purge. */
void hc_chunk_cache_decay(void)
{
	uint64_t epoch = hc_decay_epoch();
	if (__atomic_load_n(&cache_epoch, __ATOMIC_RELAXED) == epoch ||
	    (__atomic_load_n(&cache_head[0], __ATOMIC_RELAXED) == NULL &&
	        __atomic_load_n(&cache_head[1], __ATOMIC_RELAXED) == NULL))
		return;
	if (hc_mutex_trylock(&cache_purge_lock) != 0)
		return;
	cache_purge_pass(epoch);
	hc_mutex_unlock(&cache_purge_lock);
}

/* Units of a cached chunk written and not purged since: its dirty bitmaps
 * are left as they were when it emptied, and the header is metadata. */
static size_t cached_dirty(const hc_chunk_t *c)
{
	size_t n = 0;
	if (c->map_size == HC_CHUNK_SIZE)
		return (size_t)__builtin_popcountll((c->dirty_new | c->dirty_old) & ~1ULL) * HC_SLOT_SIZE;
	for (unsigned w = 0; w < HC_NRUNWORDS; w++)
		n += (size_t)__builtin_popcountll(c->run_dirty_new[w] | c->run_dirty_old[w]);
	return n * HC_PAGE;
}

/* Bytes of cached chunks whose pages went back to the OS and of the fresh
 * chunks in reserve (retained); *count gets the number of cached chunks,
 * *dirty the written bytes of the others. */
size_t hc_chunk_cached(size_t *count, size_t *dirty)
{
	size_t retained = 0;
	*dirty = 0;
	hc_mutex_lock(&cache_lock);
	for (unsigned list = 0; list < 2; list++) {
		for (hc_chunk_t *c = cache_head[list]; c; c = c->next) {
			if (c->purged)
				retained += c->map_size;
			else
				*dirty += cached_dirty(c);
		}
	}
	if (cache_purging != NULL)
		retained += cache_purging->map_size;
	*count = cache_count;
	hc_mutex_unlock(&cache_lock);
	for (unsigned list = 0; list < 2; list++)
		retained += __atomic_load_n(&reserve_left[list], __ATOMIC_RELAXED) * list_size(list);
	return retained;
}

/*
 * Two-generation decay over a bitmap of units (64 KiB slots of a small chunk,
 * 4 KiB runs of a large one).  A unit freed since the last pass is in dnew;
 * the next pass in a later epoch moves it to dold; the pass after that
 * purges it if still free.  Passes run when the owner asks for memory (or
 * for a small chunk's heap, from the control thread once its thread has
 * asked for none in two epochs), so
 * after a gap of several epochs dnew holds units freed at any time since
 * the last pass, some a moment ago: a gap purged everything free at once,
 * and a thread that slept, freed and allocated again (rptest's rounds;
 * a daemon's requests after a quiet second) purged what it had just freed
 * and faulted it back in (rptestN: 6,663 page faults against 4,772, median
 * of 7 runs).  Only hc_bits_purge_now (malloc_trim, arena purges) takes
 * both generations at once.
 */
void hc_bits_purge(hc_chunk_t *c, uint64_t *used, uint64_t *dnew, uint64_t *dold, uint64_t *nonzero, unsigned nwords,
    size_t unit, uint64_t epoch)
{
	if (epoch == c->decay_epoch)
		return;
	bool all = epoch == HC_PURGE_ALL;
	c->decay_epoch = epoch;
	size_t run_start = 0, run_len = 0;
	for (unsigned w = 0; w < nwords; w++) {
		uint64_t purge = (all ? (dold[w] | dnew[w]) : dold[w]) & ~used[w];
		dold[w] = all ? 0 : dnew[w] & ~used[w];
		dnew[w] = 0;
		if (nonzero)
			nonzero[w] &= ~purge;
		for (unsigned b = 0; b < 64; b++) {
			size_t idx = (size_t)w * 64 + b;
			if (purge & (1ULL << b)) {
				if (run_len == 0)
					run_start = idx;
				run_len++;
			} else if (run_len) {
				hc_os_purge((char *)c + run_start * unit, run_len * unit);
				run_len = 0;
			}
		}
	}
	if (run_len)
		hc_os_purge((char *)c + run_start * unit, run_len * unit);
}

/* Purge every free unit on the maps now, whatever epoch it was freed in
 * (malloc_trim, arena.<i>.purge: jemalloc's purge does not wait for the
 * decay time); the chunk's decay starts again from the current epoch. */
void hc_bits_purge_now(hc_chunk_t *c, uint64_t *used, uint64_t *dnew, uint64_t *dold, uint64_t *nonzero,
    unsigned nwords, size_t unit)
{
	c->decay_epoch = 0;
	hc_bits_purge(c, used, dnew, dold, nonzero, nwords, unit, HC_PURGE_ALL);
	c->decay_epoch = hc_decay_epoch();
}

void hc_chunk_fork_prepare(void)
{
	hc_mutex_lock(&cache_purge_lock);
	hc_mutex_lock(&cache_lock);
	hc_mutex_lock(&map_lock);
}
void hc_chunk_fork_parent(void)
{
	hc_mutex_unlock(&map_lock);
	hc_mutex_unlock(&cache_lock);
	hc_mutex_unlock(&cache_purge_lock);
}
void hc_chunk_fork_child(void)
{
	hc_mutex_reinit(&map_lock);
	hc_mutex_reinit(&cache_lock);
	hc_mutex_reinit(&cache_purge_lock);
}
