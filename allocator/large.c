/*
 * allocator/large.c - objects of 16 KiB to 8 MiB: runs of 4 KiB pages inside
 * LARGE chunks (8 MiB, two slots), one mutex per arena.
 *
 * Threads are spread over arenas round-robin; a thread takes another
 * arena's lock only to borrow a spot of written pages from it (borrow_run).
 * A run starts in the chunk's first 4 MiB (so the mask finds the header)
 * and may reach into the second; run_len[] at the run's first page makes
 * free and malloc_usable_size O(1).  Freed runs are dirty: reused as they
 * are, or purged by the two-generation decay in chunk.c.
 * run_nonzero tracks pages that may hold data (written since the last
 * purge): placement picks the spot with the fewest other pages, which is
 * what both page faults and peak RSS count, and calloc zeroes only those.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "internal.h"

static hc_arena_t arenas[HC_MAX_ARENAS] HC_FORK_DATA; /* each starts with its lock */
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
		hc_mutex_init(&arenas[i].lock, HC_RANK_ARENA, "arena lock");
		arenas[i].index = i;
	}
}

hc_arena_t *hc_arena_pick(void)
{
	pthread_once(&arenas_once, arenas_init);
	unsigned i = __atomic_fetch_add(&next_arena, 1, __ATOMIC_RELAXED);
	return &arenas[i % narenas];
}

static inline bool bit_get(const uint64_t *m, size_t i)
{
	return (m[i / 64] >> (i % 64)) & 1;
}

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

/* Index of the first run an object of n pages aligned to align can start
 * at in an empty chunk (chunks are aligned to HC_CHUNK_SIZE >= align). */
static size_t first_start(size_t align)
{
	size_t step = align > HC_PAGE ? align / HC_PAGE : 1;
	return (HC_LARGE_HDR_RUNS + step - 1) / step * step;
}

/* Whether a run can hold n bytes aligned to align: then the request is
 * large, and an empty chunk always has room for it. */
unsigned hc_arena_count(void)
{
	return narenas;
}

bool hc_large_fits(size_t n, size_t align)
{
	if (n > HC_LARGE_MAX || align > HC_LARGE_ALIGN_MAX)
		return false;
	size_t pages = (n + HC_PAGE - 1) / HC_PAGE;
	return first_start(align) + pages <= HC_NRUNS;
}

/* Pages in [i, i + n) not written since the last purge: what placing a run
 * there would have to fault in. */
static size_t clean_pages(const hc_chunk_t *c, size_t i, size_t n)
{
	size_t clean = 0;
	while (n > 0) {
		size_t b = i % 64, k = 64 - b < n ? 64 - b : n;
		uint64_t w = ~c->run_nonzero[i / 64] >> b;
		if (k < 64)
			w &= (1ULL << k) - 1;
		clean += (size_t)__builtin_popcountll(w);
		i += k;
		n -= k;
	}
	return clean;
}

/* A place for a run: chunk, first page, and what it costs. */
typedef struct {
	hc_chunk_t *c;
	size_t i, clean, gap;
} run_spot_t;

/* Consider the free gaps of chunk c for a run of n pages aligned to step
 * pages that starts in the first slot.  Each gap offers its two ends (runs
 * freed together leave their written pages at one end or the other); the
 * spot kept is the one with the fewest clean pages (page faults now, resident
 * memory from now on), then the tightest gap (best fit keeps the wide ones
 * for big runs).  A growing block takes the first gap of the fewest clean
 * pages, at its start: realloc_grow then moves no more often than with
 * plain first fit (the widest gap moved less but touched 20% more pages). */
static void run_consider(hc_chunk_t *c, size_t n, size_t step, hc_place_t place, run_spot_t *best)
{
	bool growing = place == HC_PLACE_GROW;
	if (HC_NRUNS - HC_LARGE_HDR_RUNS - c->large_pages < n)
		return;
	size_t i = HC_LARGE_HDR_RUNS;
	while (i < HC_RUN_STARTS) {
		size_t start = bit_next(c->run_used, i, 0);
		if (start >= HC_RUN_STARTS)
			break;
		size_t end = bit_next(c->run_used, start, 1);
		i = end;
		size_t lo = (start + step - 1) / step * step;
		if (lo >= HC_RUN_STARTS || lo + n > end)
			continue;
		size_t hi = end - n < HC_RUN_STARTS - 1 ? end - n : HC_RUN_STARTS - 1;
		hi = hi / step * step;
		size_t gap = end - start;
		size_t at[2] = { lo, hi };
		/* a growing run takes the gap's start, a run set aside its end */
		unsigned k0 = place == HC_PLACE_ASIDE ? 1 : 0;
		unsigned k1 = hi > lo && !growing ? 2 : 1;
		for (unsigned k = k0 < k1 ? k0 : 0; k < k1; k++) {
			size_t clean = clean_pages(c, at[k], n);
			if (best->c == NULL || clean < best->clean ||
			    (clean == best->clean && !growing && gap < best->gap)) {
				best->c = c;
				best->i = at[k];
				best->clean = clean;
				best->gap = gap;
			}
		}
	}
}

/* Zero the pages of [i, i + n) that may hold data; the others are still
 * zero from the OS, and writing them would only fault them in. */
static void zero_written(hc_chunk_t *c, size_t i, size_t n)
{
	size_t end = i + n;
	while (i < end) {
		size_t a = bit_next(c->run_nonzero, i, 1);
		if (a >= end)
			break;
		size_t b = bit_next(c->run_nonzero, a, 0);
		if (b > end)
			b = end;
		memset((char *)c + a * HC_PAGE, 0, (b - a) * HC_PAGE);
		i = b;
	}
}

/* A large chunk's runs (debug builds): the header pages are used; each run
 * starts below HC_RUN_STARTS, has its length at its start and its pages
 * used, and nothing else is; nused, large_pages and large_allocated count
 * them.  Under the arena's lock. */
static void runs_check(const hc_chunk_t *c)
{
	if (!HC_DEBUG)
		return;
	HC_ASSERT(c->magic == HC_MAGIC && c->kind == HC_KIND_LARGE);
	for (size_t i = 0; i < HC_LARGE_HDR_RUNS; i++)
		HC_ASSERT(bit_get(c->run_used, i) && c->run_len[i] == 0);
	size_t runs = 0, pages = 0;
	for (size_t i = HC_LARGE_HDR_RUNS; i < HC_NRUNS;) {
		size_t n = c->run_len[i];
		if (n == 0) {
			HC_ASSERT(!bit_get(c->run_used, i));
			i++;
			continue;
		}
		HC_ASSERT(i < HC_RUN_STARTS && i + n <= HC_NRUNS);
		for (size_t k = 0; k < n; k++)
			HC_ASSERT(bit_get(c->run_used, i + k) && (k == 0 || c->run_len[i + k] == 0));
		runs++;
		pages += n;
		i += n;
	}
	HC_ASSERT(runs == c->nused && pages == c->large_pages);
	HC_ASSERT(c->large_allocated == pages * HC_PAGE);
}

static void *run_take(hc_chunk_t *c, size_t i, size_t n, bool zero)
{
	HC_ASSERT(i >= HC_LARGE_HDR_RUNS && i < HC_RUN_STARTS && n > 0 && i + n <= HC_NRUNS);
	HC_ASSERT(!bits_any(c->run_used, i, n));
	bits_set(c->run_used, i, n);
	bits_clear(c->run_dirty_new, i, n);
	bits_clear(c->run_dirty_old, i, n);
	if (zero)
		zero_written(c, i, n);
	bits_set(c->run_nonzero, i, n);
	c->run_len[i] = (uint16_t)n;
	c->nused++;
	c->large_allocated += n * HC_PAGE;
	c->large_pages += n;
	runs_check(c);
	return (char *)c + i * HC_PAGE;
}

static void arena_decay(hc_arena_t *a, uint64_t epoch)
{
	a->decay_epoch = epoch;
	for (hc_chunk_t *c = a->chunks; c; c = c->next)
		hc_bits_purge(c, c->run_used, c->run_dirty_new, c->run_dirty_old, c->run_nonzero, HC_NRUNWORDS, HC_PAGE,
		    epoch);
}

/* The cheapest spot for a run of n pages in arena a (locked), but not
 * through every chunk of a big arena: stop at a spot of written pages that
 * fits exactly, or a few chunks after the first that fits at all. */
static run_spot_t best_spot(hc_arena_t *a, size_t n, size_t step, hc_place_t place)
{
	bool growing = place == HC_PLACE_GROW;
	run_spot_t best = { NULL, 0, 0, 0 };
	unsigned after = 0;
	for (hc_chunk_t *c = a->chunks; c; c = c->next) {
		run_consider(c, n, step, place, &best);
		if (best.c != NULL && ((best.clean == 0 && best.gap == n && !growing) || ++after > 8))
			break;
	}
	return best;
}

/* Take a spot in arena b (locked) if it has one with fewer pages never
 * written than own, the best spot of the thread's own arena. */
static void *borrow_from(hc_arena_t *b, const run_spot_t *own, size_t n, size_t step, bool zero, hc_place_t place)
{
	run_spot_t best = best_spot(b, n, step, place);
	if (best.c != NULL && (own->c == NULL || best.clean < own->clean))
		return run_take(best.c, best.i, n, zero);
	return NULL;
}

_Static_assert(HC_MAX_ARENAS <= 32, "borrow_run's busy mask has a bit per arena");

/* When the arena's best spot would touch pages never written (or there
 * is none), take a spot with fewer such pages in another arena's chunks:
 * otherwise two threads that take turns with big blocks each fault in
 * memory the other has lying free, and peak RSS pays for both.  The run
 * stays in its chunk's arena, whose lock its free takes.  With the own
 * arena's lock held, the others are only tried (the order of two locks
 * could deadlock); those found busy are set in *busy. */
static void *borrow_run(hc_arena_t *self, const run_spot_t *own, size_t n, size_t step, bool zero, hc_place_t place,
    uint32_t *busy)
{
	for (unsigned k = 1; k < narenas; k++) {
		hc_arena_t *b = &arenas[(self->index + k) % narenas];
		if (__atomic_load_n(&b->chunks, __ATOMIC_RELAXED) == NULL)
			continue;
		if (hc_mutex_trylock(&b->lock) != 0) {
			*busy |= 1u << b->index;
			continue;
		}
		void *p = borrow_from(b, own, n, step, zero, place);
		hc_mutex_unlock(&b->lock);
		if (p != NULL)
			return p;
	}
	return NULL;
}

/* The arenas borrow_run found busy, with no arena's lock held: the first
 * after the thread's own (as borrow_run goes) waited for, the others tried
 * again.  Two threads that allocate big blocks at once each hold their own
 * arena's lock while they try the other's, so each finds the other busy:
 * without this wait both then wrote pages never written, or mapped a
 * chunk, while the other's written pages lay free (mimalloc-bench's
 * mstress, two threads: peak RSS 11.5-17.6 MiB by the run, where a third
 * large chunk was mapped; RESULTS.md).  Only one wait: an arena's lock
 * can be held across its decay's madvise or a calloc's zeroing. */
static void *borrow_wait(const hc_arena_t *self, uint32_t busy, const run_spot_t *own, size_t n, size_t step, bool zero,
    hc_place_t place)
{
	bool waited = false;
	for (unsigned k = 1; k < narenas; k++) {
		hc_arena_t *b = &arenas[(self->index + k) % narenas];
		if (!(busy & (1u << b->index)))
			continue;
		if (!waited)
			hc_mutex_lock(&b->lock);
		else if (hc_mutex_trylock(&b->lock) != 0)
			continue;
		waited = true;
		void *p = borrow_from(b, own, n, step, zero, place);
		hc_mutex_unlock(&b->lock);
		if (p != NULL)
			return p;
	}
	return NULL;
}

void *hc_large_alloc(hc_heap_t *h, size_t size, size_t align, bool zero, hc_place_t place)
{
	bool growing = place == HC_PLACE_GROW;
	hc_arena_t *a = h->arena ? h->arena : hc_arena_pick();
	size_t n = (size + HC_PAGE - 1) / HC_PAGE;
	if (n == 0)
		n = 1; /* aligned zero-size requests land here */
	if (align < HC_PAGE)
		align = HC_PAGE;
	size_t step = align / HC_PAGE;
	hc_mutex_lock(&a->lock);
	uint64_t epoch = hc_decay_epoch();
	if (epoch != a->decay_epoch)
		arena_decay(a, epoch);
	run_spot_t best = best_spot(a, n, step, place);
	void *p = NULL;
	/* a spot that would touch pages never written costs page faults and
	 * resident memory: first see whether another arena has written ones */
	if ((best.c == NULL || best.clean > 0) && !growing) {
		uint32_t busy = 0;
		p = borrow_run(a, &best, n, step, zero, place, &busy);
		/* worth a wait where the thread would map a chunk, or fault in
		 * a quarter of the run or more */
		if (p == NULL && busy != 0 && (best.c == NULL || best.clean * 4 >= n)) {
			/* best's chunk is not touched unlocked: only its count is read */
			hc_mutex_unlock(&a->lock);
			p = borrow_wait(a, busy, &best, n, step, zero, place);
			if (p != NULL)
				return p;
			hc_mutex_lock(&a->lock);
			best = best_spot(a, n, step, place);
		}
	}
	if (p == NULL && best.c != NULL)
		p = run_take(best.c, best.i, n, zero);
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
			best.c = NULL;
			run_consider(c, n, step, place, &best);
			if (best.c != NULL)
				p = run_take(c, best.i, n, zero);
		}
	}
	hc_mutex_unlock(&a->lock);
	return p;
}

/* No lock: a slot is written only by operations on its own object, which
 * the caller owns; the array pointer is published once. */
static const hc_run_prof_t *prof_slot(const hc_chunk_t *c, const void *p)
{
	const hc_run_prof_t *slots = __atomic_load_n(&c->run_prof, __ATOMIC_ACQUIRE);
	if (slots == NULL)
		return NULL;
	return &slots[(size_t)((const char *)p - (const char *)c) / HC_PAGE];
}

size_t hc_large_usable(const hc_chunk_t *c, const void *p)
{
	const hc_run_prof_t *s = prof_slot(c, p);
	if (s != NULL && __atomic_load_n(&s->usize, __ATOMIC_RELAXED) != 0)
		return s->usize;
	size_t i = (size_t)((const char *)p - (const char *)c) / HC_PAGE;
	return (size_t)c->run_len[i] * HC_PAGE;
}

static size_t run_index_checked(hc_chunk_t *c, void *p)
{
	size_t off = (size_t)((char *)p - (char *)c);
	size_t i = off / HC_PAGE;
	if ((off % HC_PAGE) != 0 || i < HC_LARGE_HDR_RUNS || c->run_len[i] == 0 || !bit_get(c->run_used, i))
		hc_fatal_ptr("free(): invalid pointer (double free?):", p);
	return i;
}

/* The run's arena; a chunk in the cache has none (every run in it was
 * freed, and p is one of them). */
static hc_arena_t *arena_of(const hc_chunk_t *c, const void *p)
{
	hc_arena_t *a = __atomic_load_n(&c->arena, __ATOMIC_ACQUIRE);
	if (unlikely(a == NULL))
		hc_fatal_ptr("free(): invalid pointer (double free?):", p);
	return a;
}

void hc_large_free(hc_chunk_t *c, void *p)
{
	hc_arena_t *a = arena_of(c, p);
	void *rec = NULL;
	hc_mutex_lock(&a->lock);
	size_t i = run_index_checked(c, p);
	size_t n = c->run_len[i];
	if (c->run_prof && c->run_prof[i].rec) {
		rec = c->run_prof[i].rec;
		c->run_prof[i] = (hc_run_prof_t){ NULL, 0 };
	}
	c->run_len[i] = 0;
	bits_clear(c->run_used, i, n);
	bits_set(c->run_dirty_new, i, n);
	c->large_allocated -= n * HC_PAGE;
	c->large_pages -= n;
	c->nused--;
	runs_check(c);
	/* An empty chunk goes back to the cache unless it is the arena's last. */
	if (c->nused == 0 && (a->chunks != c || c->next != NULL)) {
		if (c->prev)
			c->prev->next = c->next;
		else
			a->chunks = c->next;
		if (c->next)
			c->next->prev = c->prev;
		hc_chunk_put(c);
	}
	hc_mutex_unlock(&a->lock);
	if (rec)
		hc_agent_unsample(rec);
}

/* Attach a sample record to the run at p (just allocated by the caller);
 * usize as in hc_run_prof_t. */
void hc_large_set_prof(hc_chunk_t *c, void *p, void *rec, size_t usize)
{
	hc_arena_t *a = c->arena;
	size_t i = (size_t)((char *)p - (char *)c) / HC_PAGE;
	hc_mutex_lock(&a->lock);
	if (c->run_prof == NULL) /* read without the lock (prof_slot) */
		__atomic_store_n(&c->run_prof, hc_meta_alloc(HC_NRUNS * sizeof *c->run_prof), __ATOMIC_RELEASE);
	if (c->run_prof)
		c->run_prof[i] = (hc_run_prof_t){ rec, usize };
	hc_mutex_unlock(&a->lock);
	if (c->run_prof == NULL)
		hc_agent_unsample(rec);
}

/* The run's sample record, or NULL, without detaching it. */
void *hc_large_peek_prof(hc_chunk_t *c, const void *p)
{
	const hc_run_prof_t *s = prof_slot(c, p);
	return s ? __atomic_load_n(&s->rec, __ATOMIC_RELAXED) : NULL;
}

/* Detach and return the run's sample record, or NULL. */
void *hc_large_take_prof(hc_chunk_t *c, const void *p)
{
	if (hc_large_peek_prof(c, p) == NULL)
		return NULL;
	size_t i = (size_t)((const char *)p - (const char *)c) / HC_PAGE;
	hc_arena_t *a = arena_of(c, p);
	hc_mutex_lock(&a->lock);
	void *rec = c->run_prof[i].rec;
	c->run_prof[i] = (hc_run_prof_t){ NULL, 0 };
	hc_mutex_unlock(&a->lock);
	return rec;
}

/* Grow or shrink a run in place to hold size bytes; growth needs the
 * pages after it free.  usize is what it reports from then on (a promoted
 * small object's size class), 0 for its pages. */
bool hc_large_resize(hc_chunk_t *c, void *p, size_t size, size_t usize)
{
	hc_arena_t *a = arena_of(c, p);
	size_t n = (size + HC_PAGE - 1) / HC_PAGE;
	bool ok = false;
	hc_mutex_lock(&a->lock);
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
	if (ok && c->run_prof != NULL)
		c->run_prof[i].usize = usize;
	runs_check(c);
	hc_mutex_unlock(&a->lock);
	return ok;
}

void hc_large_decay_all(void)
{
	uint64_t epoch = hc_decay_epoch();
	for (unsigned i = 0; i < narenas; i++) {
		hc_arena_t *a = &arenas[i];
		if (__atomic_load_n(&a->decay_epoch, __ATOMIC_RELAXED) == epoch)
			continue;
		if (hc_mutex_trylock(&a->lock) != 0)
			continue;
		if (a->decay_epoch != epoch)
			arena_decay(a, epoch);
		hc_mutex_unlock(&a->lock);
	}
}

void hc_large_purge_now(void)
{
	for (unsigned i = 0; i < narenas; i++) {
		hc_arena_t *a = &arenas[i];
		hc_mutex_lock(&a->lock);
		for (hc_chunk_t *c = a->chunks; c; c = c->next)
			hc_bits_purge_now(c, c->run_used, c->run_dirty_new, c->run_dirty_old, c->run_nonzero,
			    HC_NRUNWORDS, HC_PAGE);
		hc_mutex_unlock(&a->lock);
	}
}

void hc_large_stats(hc_stats_t *st)
{
	st->narenas = narenas;
	for (unsigned i = 0; i < narenas; i++) {
		hc_arena_t *a = &arenas[i];
		hc_mutex_lock(&a->lock);
		for (hc_chunk_t *c = a->chunks; c; c = c->next) {
			st->nchunks_large++;
			st->mapped += c->map_size;
			st->large_allocated += c->large_allocated;
			st->active += c->large_allocated;
			for (unsigned w = 0; w < HC_NRUNWORDS; w++)
				st->dirty += (size_t)__builtin_popcountll(
				                 (c->run_dirty_new[w] | c->run_dirty_old[w]) & ~c->run_used[w]) *
				    HC_PAGE;
		}
		hc_mutex_unlock(&a->lock);
	}
}

void hc_large_fork_prepare(void)
{
	for (unsigned i = 0; i < narenas; i++)
		hc_mutex_lock(&arenas[i].lock);
}

void hc_large_fork_parent(void)
{
	for (unsigned i = 0; i < narenas; i++)
		hc_mutex_unlock(&arenas[i].lock);
}

void hc_large_fork_child(void)
{
	for (unsigned i = 0; i < narenas; i++)
		hc_mutex_reinit(&arenas[i].lock);
}
