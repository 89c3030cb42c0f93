/*
 * allocator/large.c - objects of 16 KiB to 2 MiB: runs of 4 KiB pages inside
 * LARGE chunks, one mutex per arena.
 *
 * Threads are spread over arenas round-robin, so two threads contend only if
 * they share an arena.  Within a chunk, a run is found first-fit on a bitmap
 * of 1024 pages; run_len[] at the run's first page makes free and
 * malloc_usable_size O(1).  Freed runs are dirty: reused as they are, or
 * purged by the two-generation decay in chunk.c.  run_nonzero tracks pages
 * that may hold data, so calloc of never-used or purged pages skips memset.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "internal.h"

static hc_arena_t arenas[HC_MAX_ARENAS];
static unsigned narenas;
static unsigned next_arena;
static pthread_once_t arenas_once = PTHREAD_ONCE_INIT;

static void arenas_init(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	if (ncpu < 1)
		ncpu = 1;
	narenas = (unsigned)(ncpu * 2 > HC_MAX_ARENAS ? HC_MAX_ARENAS : ncpu * 2);
	for (unsigned i = 0; i < narenas; i++) {
		pthread_mutex_init(&arenas[i].lock, NULL);
		arenas[i].index = i;
	}
}

hc_arena_t *hc_arena_pick(void)
{
	pthread_once(&arenas_once, arenas_init);
	unsigned i = __atomic_fetch_add(&next_arena, 1, __ATOMIC_RELAXED);
	return &arenas[i % narenas];
}

static inline bool bit_get(const uint64_t *m, size_t i) { return (m[i / 64] >> (i % 64)) & 1; }

static void bits_set(uint64_t *m, size_t i, size_t n)
{
	for (; n && (i % 64); i++, n--)
		m[i / 64] |= 1ULL << (i % 64);
	for (; n >= 64; i += 64, n -= 64)
		m[i / 64] = ~0ULL;
	for (; n; i++, n--)
		m[i / 64] |= 1ULL << (i % 64);
}

static void bits_clear(uint64_t *m, size_t i, size_t n)
{
	for (; n && (i % 64); i++, n--)
		m[i / 64] &= ~(1ULL << (i % 64));
	for (; n >= 64; i += 64, n -= 64)
		m[i / 64] = 0;
	for (; n; i++, n--)
		m[i / 64] &= ~(1ULL << (i % 64));
}

static bool bits_any(const uint64_t *m, size_t i, size_t n)
{
	for (; n; i++, n--)
		if (bit_get(m, i))
			return true;
	return false;
}

/* Index of the first bit at or after i equal to `want` (0 or 1), or
 * HC_NRUNS.  Word at a time: a free-run search costs O(runs + words). */
static size_t bit_next(const uint64_t *m, size_t i, int want)
{
	while (i < HC_NRUNS) {
		uint64_t w = want ? m[i / 64] : ~m[i / 64];
		w &= ~0ULL << (i % 64);
		if (w)
			return (i & ~(size_t)63) + (size_t)__builtin_ctzll(w);
		i = (i & ~(size_t)63) + 64;
	}
	return HC_NRUNS;
}

/* First free run of n pages whose address is a multiple of align, or -1. */
static long run_find(const hc_chunk_t *c, size_t n, size_t align)
{
	if (HC_NRUNS - HC_LARGE_HDR_RUNS - c->large_pages < n)
		return -1;
	size_t step = align > HC_PAGE ? align / HC_PAGE : 1;
	size_t i = HC_LARGE_HDR_RUNS;
	while (i < HC_NRUNS) {
		size_t start = bit_next(c->run_used, i, 0);
		if (start >= HC_NRUNS)
			break;
		size_t end = bit_next(c->run_used, start, 1);
		size_t a = (start + step - 1) / step * step;
		if (a + n <= end)
			return (long)a;
		i = end;
	}
	return -1;
}

static void *run_take(hc_chunk_t *c, size_t i, size_t n, bool zero)
{
	bits_set(c->run_used, i, n);
	bits_clear(c->run_dirty_new, i, n);
	bits_clear(c->run_dirty_old, i, n);
	bool dirty = bits_any(c->run_nonzero, i, n);
	bits_set(c->run_nonzero, i, n);
	c->run_len[i] = (uint16_t)n;
	c->nused++;
	c->large_allocated += n * HC_PAGE;
	c->large_pages += n;
	void *p = (char *)c + i * HC_PAGE;
	if (zero && dirty)
		memset(p, 0, n * HC_PAGE);
	return p;
}

static void arena_decay(hc_arena_t *a, uint64_t epoch)
{
	a->decay_epoch = epoch;
	for (hc_chunk_t *c = a->chunks; c; c = c->next)
		hc_bits_purge(c, c->run_used, c->run_dirty_new, c->run_dirty_old,
		    c->run_nonzero, HC_NRUNWORDS, HC_PAGE, epoch);
}

void *hc_large_alloc(hc_heap_t *h, size_t size, size_t align, bool zero)
{
	hc_arena_t *a = h->arena ? h->arena : hc_arena_pick();
	size_t n = (size + HC_PAGE - 1) / HC_PAGE;
	if (n == 0)
		n = 1;       /* aligned zero-size requests land here */
	if (align < HC_PAGE)
		align = HC_PAGE;
	pthread_mutex_lock(&a->lock);
	uint64_t epoch = hc_decay_epoch();
	if (epoch != a->decay_epoch)
		arena_decay(a, epoch);
	void *p = NULL;
	for (hc_chunk_t *c = a->chunks; c; c = c->next) {
		long i = run_find(c, n, align);
		if (i >= 0) {
			p = run_take(c, (size_t)i, n, zero);
			break;
		}
	}
	if (p == NULL) {
		size_t meta;
		hc_chunk_t *c = hc_chunk_get(HC_KIND_LARGE, &meta);
		if (c != NULL) {
			if (meta)
				hc_stats_add_metadata((intptr_t)meta);
			c->arena = a;
			c->owner = HC_TID_NONE;
			c->prev = NULL;
			c->next = a->chunks;
			if (a->chunks)
				a->chunks->prev = c;
			a->chunks = c;
			long i = run_find(c, n, align);
			if (i >= 0)
				p = run_take(c, (size_t)i, n, zero);
		}
	}
	pthread_mutex_unlock(&a->lock);
	return p;
}

size_t hc_large_usable(const hc_chunk_t *c, const void *p)
{
	size_t i = (size_t)((const char *)p - (const char *)c) / HC_PAGE;
	return (size_t)c->run_len[i] * HC_PAGE;
}

static size_t run_index_checked(hc_chunk_t *c, void *p)
{
	size_t off = (size_t)((char *)p - (char *)c);
	size_t i = off / HC_PAGE;
	if ((off % HC_PAGE) != 0 || i < HC_LARGE_HDR_RUNS || c->run_len[i] == 0 ||
	    !bit_get(c->run_used, i))
		hc_fatal_ptr("free(): invalid pointer (double free?):", p);
	return i;
}

void hc_large_free(hc_chunk_t *c, void *p)
{
	hc_arena_t *a = c->arena;
	void *rec = NULL;
	pthread_mutex_lock(&a->lock);
	size_t i = run_index_checked(c, p);
	size_t n = c->run_len[i];
	if (c->run_prof && c->run_prof[i]) {
		rec = c->run_prof[i];
		c->run_prof[i] = NULL;
	}
	c->run_len[i] = 0;
	bits_clear(c->run_used, i, n);
	bits_set(c->run_dirty_new, i, n);
	c->large_allocated -= n * HC_PAGE;
	c->large_pages -= n;
	/* An empty chunk goes back to the cache unless it is the arena's last. */
	if (--c->nused == 0 && (a->chunks != c || c->next != NULL)) {
		if (c->prev) c->prev->next = c->next; else a->chunks = c->next;
		if (c->next) c->next->prev = c->prev;
		hc_chunk_put(c);
	}
	pthread_mutex_unlock(&a->lock);
	if (rec)
		hc_agent_unsample(rec);
}

/* Attach a sample record to the run at p (just allocated by the caller). */
void hc_large_set_prof(hc_chunk_t *c, void *p, void *rec)
{
	hc_arena_t *a = c->arena;
	size_t i = (size_t)((char *)p - (char *)c) / HC_PAGE;
	pthread_mutex_lock(&a->lock);
	if (c->run_prof == NULL)
		c->run_prof = hc_meta_alloc(HC_NRUNS * sizeof(void *));
	if (c->run_prof)
		c->run_prof[i] = rec;
	pthread_mutex_unlock(&a->lock);
	if (c->run_prof == NULL)
		hc_agent_unsample(rec);
}

/* The run's sample record, or NULL, without detaching it.  No lock: slot i
 * is written only by operations on the object at run i, which the caller
 * owns; the array pointer is published once. */
void *hc_large_peek_prof(hc_chunk_t *c, const void *p)
{
	void **slots = __atomic_load_n(&c->run_prof, __ATOMIC_ACQUIRE);
	if (slots == NULL)
		return NULL;
	size_t i = (size_t)((const char *)p - (const char *)c) / HC_PAGE;
	return __atomic_load_n(&slots[i], __ATOMIC_RELAXED);
}

/* Detach and return the run's sample record, or NULL. */
void *hc_large_take_prof(hc_chunk_t *c, const void *p)
{
	if (hc_large_peek_prof(c, p) == NULL)
		return NULL;
	size_t i = (size_t)((const char *)p - (const char *)c) / HC_PAGE;
	pthread_mutex_lock(&c->arena->lock);
	void *rec = c->run_prof[i];
	c->run_prof[i] = NULL;
	pthread_mutex_unlock(&c->arena->lock);
	return rec;
}

/* Grow or shrink a run in place.  Growth needs the pages after it free. */
bool hc_large_resize(hc_chunk_t *c, void *p, size_t size)
{
	hc_arena_t *a = c->arena;
	size_t n = (size + HC_PAGE - 1) / HC_PAGE;
	bool ok = false;
	pthread_mutex_lock(&a->lock);
	size_t i = run_index_checked(c, p);
	size_t old = c->run_len[i];
	if (n == old) {
		ok = true;
	} else if (n < old) {
		bits_clear(c->run_used, i + n, old - n);
		bits_set(c->run_dirty_new, i + n, old - n);
		c->run_len[i] = (uint16_t)n;
		c->large_allocated -= (old - n) * HC_PAGE;
		c->large_pages -= old - n;
		ok = true;
	} else if (i + n <= HC_NRUNS && !bits_any(c->run_used, i + old, n - old)) {
		bits_set(c->run_used, i + old, n - old);
		bits_clear(c->run_dirty_new, i + old, n - old);
		bits_clear(c->run_dirty_old, i + old, n - old);
		bits_set(c->run_nonzero, i + old, n - old);
		c->run_len[i] = (uint16_t)n;
		c->large_allocated += (n - old) * HC_PAGE;
		c->large_pages += n - old;
		ok = true;
	}
	pthread_mutex_unlock(&a->lock);
	return ok;
}

void hc_large_decay_all(void)
{
	uint64_t epoch = hc_decay_epoch();
	for (unsigned i = 0; i < narenas; i++) {
		hc_arena_t *a = &arenas[i];
		if (__atomic_load_n(&a->decay_epoch, __ATOMIC_RELAXED) == epoch)
			continue;
		if (pthread_mutex_trylock(&a->lock) != 0)
			continue;
		if (a->decay_epoch != epoch)
			arena_decay(a, epoch);
		pthread_mutex_unlock(&a->lock);
	}
}

void hc_large_purge_now(void)
{
	for (unsigned i = 0; i < narenas; i++) {
		hc_arena_t *a = &arenas[i];
		pthread_mutex_lock(&a->lock);
		for (hc_chunk_t *c = a->chunks; c; c = c->next) {
			c->decay_epoch = 0;
			hc_bits_purge(c, c->run_used, c->run_dirty_new, c->run_dirty_old,
			    c->run_nonzero, HC_NRUNWORDS, HC_PAGE, ~0ULL / 2);
			c->decay_epoch = hc_decay_epoch();
		}
		pthread_mutex_unlock(&a->lock);
	}
}

void hc_large_stats(hc_stats_t *st)
{
	st->narenas = narenas;
	for (unsigned i = 0; i < narenas; i++) {
		hc_arena_t *a = &arenas[i];
		pthread_mutex_lock(&a->lock);
		for (hc_chunk_t *c = a->chunks; c; c = c->next) {
			st->nchunks_large++;
			st->mapped += HC_CHUNK_SIZE;
			st->large_allocated += c->large_allocated;
			st->active += c->large_allocated;
			for (unsigned w = 0; w < HC_NRUNWORDS; w++)
				st->dirty += (size_t)__builtin_popcountll(
				    (c->run_dirty_new[w] | c->run_dirty_old[w]) & ~c->run_used[w]) * HC_PAGE;
		}
		pthread_mutex_unlock(&a->lock);
	}
}

void hc_large_fork_prepare(void)
{
	for (unsigned i = 0; i < narenas; i++)
		pthread_mutex_lock(&arenas[i].lock);
}

void hc_large_fork_parent(void)
{
	for (unsigned i = 0; i < narenas; i++)
		pthread_mutex_unlock(&arenas[i].lock);
}

void hc_large_fork_child(void)
{
	for (unsigned i = 0; i < narenas; i++)
		pthread_mutex_init(&arenas[i].lock, NULL);
}
