/*
 * allocator/heap.c - thread heaps and small objects (up to 16 KiB).
 *
 * Each thread owns a heap, and the heap owns small chunks whose 64 KiB pages
 * each hold one size class.  The owner allocates and frees without atomics
 * (api.c has those fast paths); this file is everything slower:
 *
 *  - finding a page with free blocks when the current one runs dry, carving
 *    fresh blocks lazily so untouched memory stays untouched;
 *  - frees from other threads: kept by the freeing thread for its own next
 *    allocations of the class (the thread cache, which then takes its own
 *    frees too; the depot, for blocks it gives up), and in time pushed onto
 *    the page's atomic xfree list (a count and a head in one word, kept
 *    apart from the page's descriptor: hc_xpage_t) and taken whole by the
 *    owner; if the page sits on the owner's full list, the page is also
 *    pushed (once) onto its chunk's xpages list so the owner finds it again
 *    without scanning full pages;
 *  - retiring empty pages and releasing empty chunks to the cache;
 *  - thread exit: the heap's chunks are abandoned to a global list and adopted
 *    by the next heap that needs a chunk, so a churn of short-lived threads
 *    reuses memory instead of growing;
 *  - fork: locks held across fork, and in the child the heaps of threads that
 *    no longer exist are disowned (their blocks stay freeable);
 *  - shared heaps, used under a lock: a thread's first blocks of each class
 *    (see HC_STARTER_BLOCKS), and the fallback for threads whose heap is gone
 *    (allocation inside TLS destructors) or not yet made.
 */
#define _GNU_SOURCE
#include <string.h>

#include <sys/random.h>

#include "fastpath.h"
#include "internal.h"

/* ---- size classes ------------------------------------------------------ */

/* laid out in rows, each ending at a power of two */
/* clang-format off */
const uint32_t hc_class_size[HC_NCLASSES] = {
	8, 16, 32, 48, 64, 80, 96, 112, 128,
	160, 192, 224, 256, 320, 384, 448, 512,
	640, 768, 896, 1024, 1280, 1536, 1792, 2048,
	2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192,
	10240, 12288, 14336, 16384,
};
/* clang-format on */
/* Filled by hc_init_slow before any heap exists; until then every lookup
 * gives class 0 and the empty heap sends the request to the slow path. */
uint8_t hc_class_small[HC_SMALL_MAX / 8 + 1];

uint32_t hc_class_recip[HC_NCLASSES];
uint16_t hc_class_off[HC_NCLASSES], hc_class_wrap[HC_NCLASSES];

/* Blocks a page of class cls holds: those from its offset to the slot's
 * end, then those below the offset (internal.h, hc_class_off). */
static uint32_t class_reserved(unsigned cls)
{
	return hc_class_wrap[cls] + hc_class_off[cls] / hc_class_size[cls];
}

/* A key for each new page: a per-process secret stirred with a counter
 * (splitmix64), so no two pages share one and none can be guessed from
 * another's. */
static uint64_t key_secret, key_count;

/* free's mark (internal.h, hc_block_mark) */
uintptr_t hc_free_mark;

static uint32_t page_key(void)
{
	uint64_t z = key_secret + __atomic_add_fetch(&key_count, 1, __ATOMIC_RELAXED) * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(z ^ (z >> 31)) | 1;
}

void hc_bad_link(const void *at)
{
	hc_fatal_ptr("malloc(): corrupted free list (a write into a freed block?) at", at);
}

/* The thread cache's largest bound per class (xcache_overflow):
 * HC_XCACHE_BLOCKS blocks of a class up to HC_XCACHE_SMALL bytes, and
 * HC_XCACHE_BYTES of a larger one.  The small classes' lists are long
 * because a list holds a random walk of frees and mallocs of its class,
 * which meets a bound of b about every b*b steps: at 32 a class ran dry or
 * gave half its list back every few hundred steps, and larsonN-sized ran
 * at 0.86 of the speed it has at 255 (DESIGN.md). */
#ifndef HC_XCACHE_BYTES
#define HC_XCACHE_BYTES (32 * 1024)
#endif
#ifndef HC_XCACHE_BLOCKS
#define HC_XCACHE_BLOCKS 255 /* hc_xhead_t.limit is a byte */
#endif
#ifndef HC_XCACHE_SMALL
#define HC_XCACHE_SMALL 1024
#endif
/* tcache_max, the largest block size the thread cache keeps (every small
 * class unless the configuration says less: the trade is in DESIGN.md),
 * less 8, or 0: a block of bs bytes is kept when bs - 9 < this, which also
 * leaves out the 8-byte blocks, whose double free nothing would catch
 * there. */
static uint32_t xcache_range = HC_SMALL_MAX - 8;

/* Each class's largest list (xcache_overflow): HC_XCACHE_BLOCKS blocks up
 * to HC_XCACHE_SMALL bytes, else HC_XCACHE_BYTES, at least 2 (2.0 MiB in
 * all for a thread whose every list is full); none for a class the cache
 * does not keep (8 bytes, above tcache_max), so that free's test of the
 * list's room is the only test it makes of the class (api.c,
 * free_cached).  Set before any thread has lists: at start, and by the
 * configuration after it. */
static uint8_t xcache_max[HC_NCLASSES];
_Static_assert(HC_XCACHE_BLOCKS <= 255 && HC_XCACHE_BLOCKS >= 4, "a list's bound is a byte (hc_xhead_t.limit)");

static void xcache_limits(void)
{
	uint32_t range = __atomic_load_n(&xcache_range, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < HC_NCLASSES; i++) {
		uint32_t bs = hc_class_size[i], most = bs <= HC_XCACHE_SMALL ? HC_XCACHE_BLOCKS : HC_XCACHE_BYTES / bs;
		most = most > HC_XCACHE_BLOCKS ? HC_XCACHE_BLOCKS : most < 2 ? 2 : most;
		xcache_max[i] = (uint8_t)(bs - 9u < range ? most : 0);
	}
}

void hc_alloc_set_tcache_max(size_t bytes)
{
	uint32_t most = bytes < HC_SMALL_MAX ? (uint32_t)bytes : HC_SMALL_MAX;
	__atomic_store_n(&xcache_range, most > 8 ? most - 8 : 0, __ATOMIC_RELAXED);
	xcache_limits();
}

static void classes_init(void)
{
	for (unsigned i = 0; i < HC_NCLASSES; i++) {
		uint32_t bs = hc_class_size[i], pow2 = bs & -bs;
		hc_class_recip[i] = (uint32_t)((((uint64_t)1 << 32) + bs - 1) / bs);
		/* the page layout: internal.h, hc_class_off */
		uint32_t off = ((i * 7) & 15) << 7;
		if (bs > 1024 && off > HC_SLOT_SIZE % bs)
			off = (uint32_t)(HC_SLOT_SIZE % bs);
		off = pow2 >= HC_PAGE ? 0 : off & ~(pow2 - 1);
		hc_class_off[i] = (uint16_t)off;
		hc_class_wrap[i] = (uint16_t)((HC_SLOT_SIZE - off) / bs);
	}
	xcache_limits();
	unsigned char rnd[8];
	if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) == (ssize_t)sizeof rnd)
		memcpy(&key_secret, rnd, sizeof key_secret);
	else /* no entropy yet (early boot): the clock and an address */
		key_secret = hc_os_now_ms() * 0x2545f4914f6cdd1dull ^ (uint64_t)(uintptr_t)&rnd;
	hc_free_mark = (uintptr_t)(key_secret * 0x9e3779b97f4a7c15ull) | 1;
	unsigned c = 0;
	for (unsigned i = 0; i <= HC_SMALL_MAX / 8; i++) {
		while (hc_class_size[c] < i * 8)
			c++;
		hc_class_small[i] = (uint8_t)c;
	}
}

/* ---- heaps ------------------------------------------------------------- */

static hc_page_t page_empty; /* free == NULL: every pop goes slow */

/* a braced initializer as a macro body, which clang-format 14 takes for a block */
/* clang-format off */
#define EMPTY_DIRECT { [0 ... HC_NCLASSES - 1] = &page_empty }
/* clang-format on */

static hc_heap_t heap_empty = { .direct = EMPTY_DIRECT, .state = HC_HEAP_EMPTY };
static hc_heap_t heap_dead = { .direct = EMPTY_DIRECT, .state = HC_HEAP_DEAD };
/*
 * Shared heaps, each used under its own lock.  A thread takes its first
 * HC_STARTER_BLOCKS blocks of each class from one of them (heap 0 until it
 * finds it busy: shared_lock) before it carves a page of its own (all but
 * the first thread to allocate: heap_get): a thread that allocates
 * a few objects of a class costs their size, not an OS page per class, and a
 * thread that leaves a few objects behind when it exits leaves them in pages
 * that other threads fill.  Shared heap 0 is also the fallback, for threads
 * whose heap is gone (allocation in TLS destructors) or not yet made.  Their
 * chunks' owner is HC_TID_FALLBACK, so every free into them is a remote
 * push, collected under the lock when the heap's page runs dry.
 */
#ifndef HC_NSHARED
#define HC_NSHARED 4
#endif
/* A thread's starter blocks: at most HC_STARTER_BLOCKS of each class, and
 * once they add up to HC_STARTER_BYTES, no more of any (DESIGN.md). */
#ifndef HC_STARTER_BLOCKS
#define HC_STARTER_BLOCKS 16
#endif
#ifndef HC_STARTER_BYTES
#define HC_STARTER_BYTES (256 * 1024)
#endif
typedef struct {
	hc_heap_t heap;
} __attribute__((aligned(64))) hc_shared_t;

/* a braced initializer as a macro body, which clang-format 14 takes for a block */
/* clang-format off */
#define SHARED_INIT { .heap = { .direct = EMPTY_DIRECT, .tid = HC_TID_FALLBACK, \
	.state = HC_HEAP_LIVE, .countdown = INT64_MAX / 2, .period = INT64_MAX / 2 } }
/* clang-format on */
static hc_shared_t shared[HC_NSHARED] = { [0 ... HC_NSHARED - 1] = SHARED_INIT };
/* shared[i]'s lock, with the other locks fork takes (hc_lock.h); a cache
 * line each, as they had inside their heaps: threads on different shared
 * heaps take them at the same moment */
typedef struct {
	hc_mutex_t m;
} __attribute__((aligned(64))) hc_shared_lock_t;
static hc_shared_lock_t shared_locks[HC_NSHARED] HC_FORK_DATA = {
	[0 ... HC_NSHARED - 1] = { HC_MUTEX_INIT(HC_RANK_SHARED, "shared heap lock") }
};
#define shared_mutex(sh) (&shared_locks[(sh)-shared].m)
#define heap_fallback    (shared[0].heap)

__thread hc_heap_t *hc_tls_heap __attribute__((tls_model("initial-exec"))) = &heap_empty;
/* What free compares a chunk's owner with (api.c): the thread's id while
 * it frees its own blocks into their pages, HC_TID_CACHED once it has the
 * cache's lists (every small free then takes one path), HC_TID_NOHEAP
 * before it has a heap and after its exit. */
__thread uintptr_t hc_tls_free_id __attribute__((tls_model("initial-exec"))) = HC_TID_NOHEAP;
static __thread int tls_in_init __attribute__((tls_model("initial-exec")));

/* One pass over the other threads' heaps at a time (heaps_others_decay),
 * held across its madvise calls, which heaps_lock is not. */
static hc_mutex_t purge_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_PURGE, "purge_lock");
static hc_mutex_t heaps_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_HEAPS, "heaps_lock");
static hc_heap_t *heaps_all;  /* registry, under heaps_lock */
static hc_heap_t *heaps_pool; /* recycled, under heaps_lock */
static size_t heaps_count;

static hc_mutex_t abandoned_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_ABANDONED, "abandoned_lock");
static hc_chunk_t *abandoned; /* under abandoned_lock */
static size_t abandoned_count;
/* A fork child's chunks of the parent's other threads whose slot maps were
 * whole at the fork (hc_heap_fork_child): never adopted, only decayed with
 * the abandoned ones, under abandoned_lock.  With the fork handlers' data,
 * which the child writes anyway. */
static hc_chunk_t *orphans HC_FORK_DATA;

/*
 * The depot: blocks of other threads' pages that a thread's cache gave up,
 * the older half of a full list (xcache_overflow) or the whole cache at the
 * thread's exit, kept by class for the next thread whose list of the class
 * runs dry, before that one takes a block of its own pages or makes a
 * page.  Without it they went back to their pages, where an owner that
 * does not allocate (larson's main thread, which fills the slots and
 * waits) never takes them again, and the threads that do allocate made as
 * much again (DESIGN.md).  Its blocks are as a cache's: marked, plainly
 * linked, and still counted in their pages' live counts.  Batches as they
 * were given, so that a put and a take are a few stores under one of
 * DEPOT_LOCKS locks, up to DEPOT_BATCHES and DEPOT_BYTES a class; what no
 * thread took from since the control thread's last pass goes back to the
 * pages (hc_alloc_idle_decay).
 */
#define DEPOT_BATCHES 64
#define DEPOT_BYTES   (1u << 20)
typedef struct {
	hc_block_t *first, *last;
	uint32_t n;
} hc_batch_t;
typedef struct {
	uint32_t nbatch; /* read without the lock to skip an empty depot */
	uint32_t blocks;
	bool used; /* taken from since the control thread's last pass */
	hc_batch_t batch[DEPOT_BATCHES];
} hc_depot_t;
static hc_depot_t depot[HC_NCLASSES];
/* a lock for every eighth class: the fork handlers' data stays in a page
 * (hc_lock.h, HC_FORK_DATA) */
#define DEPOT_LOCKS 8
static struct {
	hc_mutex_t m;
} __attribute__((aligned(64)))
depot_locks[DEPOT_LOCKS] HC_FORK_DATA = { [0 ... DEPOT_LOCKS - 1] = { HC_MUTEX_INIT(HC_RANK_DEPOT, "depot lock") } };
static bool depot_pop(unsigned cls, hc_batch_t *got);
static bool xcache_refill(hc_heap_t *h, unsigned cls);
static void xcache_splice(hc_heap_t *h, unsigned cls, hc_batch_t got);
static void xcache_release(hc_block_t *b, unsigned n);
static bool xhead_make(hc_heap_t *h);

static pthread_key_t heap_key;


/* Heap structs come from their own mappings, a page-multiple at a time. */
static hc_heap_t *heap_struct_new(void)
{
	static char *bump, *bump_end; /* under heaps_lock */
	hc_heap_t *h;
	hc_mutex_lock(&heaps_lock);
	if ((h = heaps_pool) != NULL) {
		heaps_pool = h->pool_next;
	} else {
		size_t sz = (sizeof(hc_heap_t) + 63) & ~(size_t)63;
		if (bump == NULL || (size_t)(bump_end - bump) < sz) {
			size_t span = 64 * 1024;
			bump = hc_meta_alloc(span); /* a mapping of its own */
			if (bump == NULL) {
				hc_mutex_unlock(&heaps_lock);
				return NULL;
			}
			bump_end = bump + span;
		}
		h = (hc_heap_t *)bump;
		bump += sz;
		h->all_next = heaps_all;
		heaps_all = h;
		heaps_count++;
	}
	hc_mutex_unlock(&heaps_lock);
	return h;
}

static bool shared_tidy(hc_heap_t *h, bool now);

/* As many shared heaps as CPUs (up to HC_NSHARED): each costs at least a
 * page per class it serves, and more than one per CPU buys nothing. */
static unsigned shared_count(void)
{
	unsigned n = hc_arena_count() / 2; /* arenas: two per CPU */
	return n < 1 ? 1 : n > HC_NSHARED ? HC_NSHARED : n;
}

/* The thread cache's lists, a page's view of the last of which (64 bytes,
 * internal.h) stays inside the allocation. */
#define XHEAD_BYTES (HC_NCLASSES * sizeof(hc_xhead_t) - sizeof(hc_xhead_t) + sizeof(hc_page_t))

static void xhead_init(hc_xhead_t *x)
{
	memset(x, 0, XHEAD_BYTES);
	for (unsigned i = 0; i < HC_NCLASSES; i++) {
		x[i].limit = xcache_max[i];
		x[i].block_size = hc_class_size[i];
	}
}

static void heap_reset(hc_heap_t *h, uintptr_t tid)
{
	hc_xhead_t *xhead = h->xhead; /* a recycled heap keeps its lists */
	/* all but the registry's link, which the control thread may be
	 * following (heaps_others_decay) */
	size_t at = offsetof(hc_heap_t, all_next), past = at + sizeof h->all_next;
	memset(h, 0, at);
	memset((char *)h + past, 0, sizeof *h - past);
	for (unsigned i = 0; i < HC_NCLASSES; i++)
		h->direct[i] = &page_empty;
	h->tid = tid;
	if (xhead != NULL)
		xhead_init(xhead);
	h->xhead = xhead;
	h->period = 0; /* the first allocation asks the agent for a countdown */
	h->countdown = 0;
	h->arena = hc_arena_pick();
	h->decay_epoch = h->page_epoch = hc_decay_epoch();
	/* last: the control thread looks at a heap once it reads LIVE
	 * (heaps_others_decay; a recycled one may be read while this runs) */
	__atomic_store_n(&h->state, HC_HEAP_LIVE, __ATOMIC_RELEASE);
	/* shared_index 0: a thread starts on shared heap 0 and moves only when
	 * it finds it busy (shared_lock) */
}

static void heap_abandon(hc_heap_t *h);
static void xcache_flush_all(hc_heap_t *h, bool to_depot);

static void heap_thread_exit(void *arg)
{
	hc_heap_t *h = arg;
	hc_agent_thread_exit();
	/* the free id first: a free in between (a signal handler's) must not
	 * take the lists' path with the dead heap's none */
	hc_tls_free_id = HC_TID_NOHEAP;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	hc_tls_heap = &heap_dead;  /* from here its frees go to the pages */
	xcache_flush_all(h, true); /* other threads' blocks for the next thread */
	heap_abandon(h);
	hc_mutex_lock(&heaps_lock);
	h->state = HC_HEAP_DEAD;
	h->pool_next = heaps_pool;
	heaps_pool = h;
	hc_mutex_unlock(&heaps_lock);
}

/* Start-up of this layer (lifecycle.c calls it once, under its lock):
 * the size classes, and the key whose destructor abandons a thread's heap.
 * Allocations made in between (the agent's, pthread_atfork's) go to the
 * fallback heap. */
void hc_heap_init_begin(void)
{
	classes_init();
	tls_in_init = 1;
}

void hc_heap_init_end(void)
{
	pthread_key_create(&heap_key, heap_thread_exit);
	tls_in_init = 0;
}

/* The heap this thread allocates from, made on first use.  Returns the
 * fallback heap (caller must lock) when no heap of our own is possible. */
static hc_heap_t *heap_get(void)
{
	hc_heap_t *h = hc_tls_heap;
	if (likely(h->state == HC_HEAP_LIVE))
		return h;
	if (h->state == HC_HEAP_DEAD || tls_in_init)
		return &heap_fallback;
	if (!__atomic_load_n(&hc_inited, __ATOMIC_ACQUIRE)) {
		hc_init_slow();
		if (tls_in_init)
			return &heap_fallback;
	}
	h = heap_struct_new();
	if (h == NULL)
		return &heap_fallback;
	heap_reset(h, hc_thread_id());
	/* The first thread to allocate (the main thread, but for programs that
	 * start a thread before their first malloc) takes no starter blocks:
	 * they are for the many threads that allocate a little, and a
	 * single-threaded program would only hold a page of each class it uses
	 * twice, in a shared heap and in its own (st_churn: 250 KiB). */
	static bool first_made;
	if (!__atomic_exchange_n(&first_made, true, __ATOMIC_RELAXED))
		memset(h->starter, HC_STARTER_BLOCKS, sizeof h->starter);
	hc_tls_heap = h;
	/* the page path until the thread keeps another thread's block, even
	 * where a recycled heap came with lists (xcache_put) */
	hc_tls_free_id = h->tid;
	pthread_setspecific(heap_key, h);
	return h;
}

/* ---- page queues ------------------------------------------------------- */

static void pq_remove(hc_pq_t *q, hc_page_t *pg)
{
	if (pg->prev)
		pg->prev->next = pg->next;
	else
		q->first = pg->next;
	if (pg->next)
		pg->next->prev = pg->prev;
	else
		q->last = pg->prev;
	pg->next = pg->prev = NULL;
}

static void pq_push_front(hc_pq_t *q, hc_page_t *pg)
{
	pg->prev = NULL;
	pg->next = q->first;
	if (q->first)
		q->first->prev = pg;
	else
		q->last = pg;
	q->first = pg;
}

static void pq_push_back(hc_pq_t *q, hc_page_t *pg)
{
	pg->next = NULL;
	pg->prev = q->last;
	if (q->last)
		q->last->next = pg;
	else
		q->first = pg;
	q->last = pg;
}

/* direct[cls] is the head of the thread cache's list of the class. */
static bool direct_is_xhead(const hc_heap_t *h, unsigned cls)
{
	return h->xhead != NULL && h->direct[cls] == (const hc_page_t *)(const void *)&h->xhead[cls];
}

/*
 * The pin (see HC_LIVE_FULL) goes to the direct page of class cls when it is
 * the only page in the class queue: that page is kept when it empties (a
 * malloc/free ping-pong would otherwise retire and rebuild it), and pinning
 * keeps the frees that empty it on the fast path.  An empty page with
 * others beside it is retired, so new blocks fill the others' holes.
 * Called after every change to the queue's members or to direct[cls], but
 * the thread cache's push (hc_xcache_push).
 */
static HC_NOINLINE void pin_move(hc_heap_t *h, unsigned cls)
{
	hc_pq_t *q = &h->queue[cls];
	hc_page_t *want =
	    q->first != NULL && q->first == q->last && (h->direct[cls] == q->first || direct_is_xhead(h, cls))
	    ? q->first
	    : NULL;
	hc_page_t *old = h->pinned[cls];
	if (old == want)
		return;
	if (old != NULL) {
		__atomic_store_n(&old->flags, old->flags & ~HC_PG_PINNED, __ATOMIC_RELAXED);
		(void)hc_live_dec(old);
	}
	if (want != NULL) {
		hc_live_inc(want);
		__atomic_store_n(&want->flags, want->flags | HC_PG_PINNED, __ATOMIC_RELAXED);
	}
	h->pinned[cls] = want;
}

/* Inline: with several pages in the queue and no pin to drop (the common
 * case when a class has many pages) there is nothing to do. */
static inline void pin_sync(hc_heap_t *h, unsigned cls)
{
	hc_pq_t *q = &h->queue[cls];
	if (h->pinned[cls] != NULL || (q->first != NULL && q->first == q->last))
		pin_move(h, cls);
}

/* Make pg (or the empty page, for NULL) the page class cls allocates from,
 * once the thread cache's list of the class is empty: until then, that. */
static void direct_set(hc_heap_t *h, unsigned cls, hc_page_t *pg)
{
	if (HC_XCACHE && h->xhead != NULL && h->xhead[cls].free != NULL)
		pg = hc_xhead_page(&h->xhead[cls]);
	h->direct[cls] = pg ? pg : &page_empty;
	pin_sync(h, cls);
}

static void direct_update(hc_heap_t *h, unsigned cls)
{
	direct_set(h, cls, h->queue[cls].first);
}

/* The thread cache's list of class cls ran dry under malloc's fast path,
 * whose direct[cls] still points at it: the class's page again (h has the
 * lists).  True if it did so. */
static bool xhead_dry(hc_heap_t *h, unsigned cls)
{
	hc_xhead_t *x = &h->xhead[cls];
	if (x->free != NULL || h->direct[cls] != hc_xhead_page(x))
		return false;
	direct_update(h, cls);
	return true;
}

/* ---- invariants (debug builds) ------------------------------------------ */

/* A small chunk's slot map: bit 0 is the header, bit i says pages[i] is in
 * use, and nused counts the pages in use. */
static void chunk_check(const hc_chunk_t *c)
{
	if (!HC_DEBUG)
		return;
	HC_ASSERT(c->magic == HC_MAGIC && c->kind == HC_KIND_SMALL);
	HC_ASSERT(c->used_slots & 1);
	for (unsigned i = 1; i < HC_NSLOTS; i++)
		HC_ASSERT(!!((c->used_slots >> i) & 1) == !!c->pages[i].in_use);
	HC_ASSERT((uint32_t)__builtin_popcountll(c->used_slots) == c->nused + 1);
}

/* A page, by its owner (internal.h): every carved block is handed out
 * (counted in live, as are remote frees not yet collected) or on the free
 * list; the free list holds block starts of this page, without a loop; the
 * pin and the FULL flag agree with the heap's lists. */
static void page_check(const hc_heap_t *h, const hc_chunk_t *c, const hc_page_t *pg)
{
	if (!HC_DEBUG)
		return;
	unsigned cls = pg->cls;
	HC_ASSERT(pg->in_use && hc_chunk_of(pg) == c);
	HC_ASSERT((c->used_slots >> (pg - c->pages)) & 1);
	HC_ASSERT(cls < HC_NCLASSES && pg->block_size == hc_class_size[cls]);
	HC_ASSERT(pg->reserved == class_reserved(cls) && pg->capacity <= pg->reserved);
	uint32_t nfree = 0;
	const char *start = hc_page_start(c, pg);
	for (const hc_block_t *b = pg->free; b != NULL; b = hc_link(pg, b, b->next)) {
		size_t o = (size_t)((const char *)b - start);
		HC_ASSERT(o < HC_SLOT_SIZE && hc_block_index(pg, (uint32_t)o) < pg->capacity);
		HC_ASSERT(++nfree <= pg->capacity);
	}
	int32_t used = hc_page_used(pg);
	HC_ASSERT(used >= 0 && (uint32_t)used + nfree == pg->capacity);
	bool pinned = pg->flags & HC_PG_PINNED, full = pg->flags & HC_PG_FULL;
	HC_ASSERT(!(pinned && full));
	HC_ASSERT(pinned == (h->pinned[cls] == pg));
	if (pinned)
		HC_ASSERT((h->direct[cls] == pg || direct_is_xhead(h, cls)) && h->queue[cls].first == pg &&
		    h->queue[cls].last == pg);
	if (full) /* a page goes on the full list only once carved whole */
		HC_ASSERT(h->full.first != NULL && pg->capacity == pg->reserved);
}

/* ---- pages ------------------------------------------------------------- */

/* A page's remote list is one word, so that a push and a take each are
 * one atomic operation and the owner learns how many blocks it took without
 * walking them (a miss per block, on lines another thread wrote: prodcons
 * spent 10% of its time there): the number of blocks in the high half, the
 * head's offset in its chunk (never 0: that is the header) in the low.
 * XLIST_FULL, above the offset, is the owner's word that the page is on its
 * full list; it is set only on an empty list (page_to_full) and the push
 * that finds it takes it off, so the word holds blocks or the flag, never
 * both, and the one push that took it tells the owner (page_push_remote).
 * Flag and list in one word need no fence: a free and the owner's move of
 * the page to its full list are each one atomic operation on it, and the
 * second sees the first. */
#define XLIST_OFF  ((uint64_t)HC_CHUNK_MASK)
#define XLIST_FULL ((uint64_t)1 << 31)
_Static_assert((XLIST_OFF & XLIST_FULL) == 0, "the FULL flag lies above a block's offset in its chunk");

static inline hc_block_t *xlist_head(hc_chunk_t *c, uint64_t w)
{
	return (w & XLIST_OFF) ? (hc_block_t *)((char *)c + (w & XLIST_OFF)) : NULL;
}

/* Move other threads' frees onto the owner's list.  Returns blocks gained.
 * Their blocks keep free's mark until they are handed out (malloc and
 * small_alloc clear it): a remote free of one before then is a double
 * free, and is caught. */
static uint32_t page_collect(hc_page_t *pg)
{
	hc_chunk_t *c = hc_chunk_of(pg);
	hc_xpage_t *xp = &c->xpage[pg - c->pages];
	/* nothing, or only the flag, which no other thread sets */
	if ((__atomic_load_n(&xp->xfree, __ATOMIC_RELAXED) & XLIST_OFF) == 0)
		return 0;
	uint64_t w = __atomic_exchange_n(&xp->xfree, 0, __ATOMIC_ACQUIRE);
	hc_block_t *list = xlist_head(c, w);
	uint32_t n = (uint32_t)(w >> 32);
	if (list == NULL)
		return 0;
	if (unlikely(n == 0 || n > pg->capacity))
		hc_bad_link(list);
	if ((HC_CHECKS & HC_CHECK_LINKS) || pg->free != NULL || pg->block_size <= sizeof *list) {
		/* Follow every link, and so catch a corrupted one or a loop
		 * (a block freed twice), where that matters or is needed: in
		 * the checked build; for 8-byte blocks, which have no room
		 * for the mark that catches a double free at the free (a
		 * thread without a heap of its own freeing a, c, a pushes a
		 * loop); and to splice a list in front of blocks already free,
		 * by its tail.  (Two threads freeing one block at the same
		 * moment can also loop a list of another class; as in
		 * jemalloc, that goes unseen.) */
		hc_block_t *tail = list;
		if (!hc_link_ok(list, list) || !hc_block_start(pg, list))
			hc_bad_link(list);
		for (uint32_t i = 1;; i++) {
			hc_block_t *next = hc_link(pg, tail, tail->next);
			if (unlikely(!hc_link_ok(tail, next) || (next == NULL) != (i == n)))
				hc_bad_link(tail);
			if (next == NULL)
				break;
			tail = next;
		}
		tail->next = hc_link(pg, tail, pg->free);
	}
	pg->free = list;
	__atomic_store_n(&pg->live, pg->live - (int32_t)n, __ATOMIC_RELAXED);
	return n;
}

/* Link more of the page's blocks into its free list: to the end of the
 * first OS page the first time, 4 KiB after, at least one block (from the
 * page's offset to the slot's end, then from 0 to the offset:
 * hc_class_off).  A thread touches a page of memory per size class it uses,
 * not four: threads that allocate a little each (a thread per connection)
 * cost that much less.  Carving 16 KiB at a time left up to 16 KiB written
 * beyond what a page held, in every page, and in a slot that pages of other
 * classes reuse after it, the most any of them carved: peak RSS of
 * thread_leftover 4.5 -> 4.0 MiB, mt_churn 27.2 -> 26.7, xthread_random 52.8
 * -> 50.9, prodcons 7.8 -> 7.5 (medians of 7 interleaved runs; times
 * unchanged within their noise). */
#ifndef HC_CARVE_STEP
#define HC_CARVE_STEP 4096
#endif
static void page_extend(hc_chunk_t *c, hc_page_t *pg)
{
	uint32_t bs = pg->block_size;
	uint32_t off = hc_class_off[pg->cls], wrap = hc_class_wrap[pg->cls];
	uint32_t n = (pg->capacity == 0 ? (uint32_t)HC_PAGE - off : HC_CARVE_STEP) / bs;
	if (n == 0)
		n = 1;
	if (n > pg->reserved - pg->capacity)
		n = pg->reserved - pg->capacity;
	char *start = hc_page_start(c, pg);
	hc_block_t *first = NULL, *prev = NULL;
	for (uint32_t i = pg->capacity; i < pg->capacity + n; i++) {
		hc_block_t *b = (hc_block_t *)(start + (i < wrap ? off + (size_t)i * bs : (size_t)(i - wrap) * bs));
		if (prev)
			prev->next = hc_link(pg, prev, b);
		else
			first = b;
		prev = b;
	}
	prev->next = hc_link(pg, prev, pg->free);
	pg->free = first;
	__atomic_store_n(&pg->capacity, pg->capacity + n, __ATOMIC_RELAXED);
}

/* The owner takes XLIST_FULL off the page's remote list word, if it is
 * still there (a push may take it first, and then tells the owner). */
static void xlist_unflag(hc_xpage_t *xp)
{
	uint64_t w = __atomic_load_n(&xp->xfree, __ATOMIC_RELAXED);
	while ((w & XLIST_FULL) &&
	    !__atomic_compare_exchange_n(&xp->xfree, &w, w & ~XLIST_FULL, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Put a page on the full list.  Returns false, leaving it queued, if a
 * remote free came in: the flag goes only into an empty list word. */
static bool page_to_full(hc_heap_t *h, hc_page_t *pg)
{
	uint64_t empty = 0;
	if (!__atomic_compare_exchange_n(&hc_xpage(pg)->xfree, &empty, XLIST_FULL, false, __ATOMIC_RELAXED,
	        __ATOMIC_RELAXED))
		return false;
	__atomic_store_n(&pg->flags, pg->flags | HC_PG_FULL, __ATOMIC_RELAXED);
	__atomic_store_n(&pg->live, pg->live - HC_LIVE_FULL, __ATOMIC_RELAXED);
	pq_remove(&h->queue[pg->cls], pg);
	pq_push_back(&h->full, pg);
	pin_sync(h, pg->cls);
	page_check(h, hc_chunk_of(pg), pg);
	return true;
}

static void page_unfull(hc_heap_t *h, hc_page_t *pg)
{
	pq_remove(&h->full, pg);
	__atomic_store_n(&pg->live, pg->live + HC_LIVE_FULL, __ATOMIC_RELAXED);
	__atomic_store_n(&pg->flags, pg->flags & ~HC_PG_FULL, __ATOMIC_RELAXED);
	xlist_unflag(hc_xpage(pg));
	pq_push_back(&h->queue[pg->cls], pg);
	if (h->direct[pg->cls] == &page_empty)
		direct_update(h, pg->cls);
	else
		pin_sync(h, pg->cls);
	page_check(h, hc_chunk_of(pg), pg);
}

/*
 * The slot lock.  A thread's heap is its own, but for one thing: other
 * threads decay its free slots.  The control thread decays those of a heap
 * whose thread made no page in the epoch or the one before
 * (heaps_others_decay), which the thread would otherwise do only at its
 * next new page: a worker that had a burst and then waits for work, or for
 * ever, kept its freed slots resident for as long as it waited.  And
 * malloc_trim purges every heap's.  So a thread takes its heap's slot lock
 * while it changes its chunks' slot maps (used_slots, dirty_new,
 * dirty_old) or their list, and while it decays them; another thread only
 * tries it, under purge_lock (heaps_others_decay).  A futex word: 0 free,
 * 1 held, 2 held with a waiter.  Its holder takes no other lock and calls
 * nothing but madvise, so it has no rank in hc_lock.h's order.  It is not
 * an hc_mutex, one in every heap being too many for fork to take, and fork
 * need not: a thread holds another's only under purge_lock, which fork's
 * prepare takes, and in the child the heaps of the threads that are gone
 * are dead (hc_heap_fork_child).
 */
enum { SLOTS_SPIN = 1000 }; /* pauses: 3 to 50 microseconds, by the CPU */

static HC_NOINLINE void slots_lock_wait(hc_heap_t *h)
{
	/* 2 at once, which is also the owner's word to a pass over its heap
	 * to stop at the next chunk (heap_decay_chunks); a short spin before
	 * sleeping, as that takes one chunk's madvise calls: a thread that
	 * sleeps here is woken onto the CPU of the thread that let go */
	while (__atomic_exchange_n(&h->slot_lock, 2, __ATOMIC_ACQUIRE) != 0) {
		for (unsigned i = 0; i < SLOTS_SPIN && __atomic_load_n(&h->slot_lock, __ATOMIC_RELAXED) != 0; i++)
			hc_cpu_pause();
		if (__atomic_load_n(&h->slot_lock, __ATOMIC_RELAXED) != 0)
			hc_os_futex_wait(&h->slot_lock, 2);
	}
}

static inline void slots_lock(hc_heap_t *h)
{
	uint32_t free_word = 0;
	if (!__atomic_compare_exchange_n(&h->slot_lock, &free_word, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		slots_lock_wait(h);
}

static inline bool slots_trylock(hc_heap_t *h)
{
	uint32_t free_word = 0;
	return __atomic_compare_exchange_n(&h->slot_lock, &free_word, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void slots_unlock(hc_heap_t *h)
{
	if (__atomic_exchange_n(&h->slot_lock, 0, __ATOMIC_RELEASE) == 2)
		hc_os_futex_wake(&h->slot_lock);
}

/* Unlink a chunk from its heap's list, under the slot lock. */
static void chunk_unlink(hc_heap_t *h, hc_chunk_t *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		h->chunks = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

/* Give the page's slot back to its chunk; the chunk goes back to the cache
 * when empty, unless it is the heap's only chunk. */
static void page_retire(hc_heap_t *h, hc_chunk_t *c, hc_page_t *pg)
{
	HC_ASSERT(hc_page_used(pg) == 0);
	page_check(h, c, pg);
	if (pg->flags & HC_PG_FULL)
		pq_remove(&h->full, pg);
	else
		pq_remove(&h->queue[pg->cls], pg);
	if (h->direct[pg->cls] == pg)
		direct_update(h, pg->cls);
	else
		pin_sync(h, pg->cls);
	pg->free = NULL;
	__atomic_store_n(&pg->flags, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&pg->live, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&pg->in_use, 0, __ATOMIC_RELAXED);
	hc_xpage_t *xp = hc_xpage(pg);
	xlist_unflag(xp);
	__atomic_store_n(&xp->in_use, 0, __ATOMIC_RELAXED);
	uint64_t bit = 1ULL << (pg - c->pages);
	slots_lock(h);
	c->used_slots &= ~bit;
	h->retired = true;
	c->dirty_new |= bit;
	c->dirty_old &= ~bit;
	c->nused--;
	chunk_check(c);
	bool release = c->nused == 0 && (h->chunks != c || c->next != NULL);
	if (release)
		chunk_unlink(h, c);
	slots_unlock(h);
	if (release)
		hc_chunk_put(c);
}

/* A page just became empty: retire it unless pinned (see pin_sync). */
static void page_empty_maybe_retire(hc_heap_t *h, hc_chunk_t *c, hc_page_t *pg)
{
	if (!(pg->flags & HC_PG_PINNED))
		page_retire(h, c, pg);
}

static void page_init(hc_chunk_t *c, hc_page_t *pg, unsigned cls)
{
	pg->cls = (uint8_t)cls;
	pg->block_size = hc_class_size[cls];
	pg->reserved = class_reserved(cls);
	pg->capacity = 0;
	pg->live = 0;
	pg->free = NULL;
	pg->flags = 0;
	pg->next = pg->prev = NULL;
	pg->key = page_key();
	page_extend(c, pg);
	hc_xpage_t *xp = hc_xpage(pg);
	xp->block_size = pg->block_size;
	xp->cls = pg->cls;
	xlist_unflag(xp);
	__atomic_store_n(&pg->in_use, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&xp->in_use, 1, __ATOMIC_RELEASE);
}

/* ---- chunks of a heap -------------------------------------------------- */

static void heap_link_chunk(hc_heap_t *h, hc_chunk_t *c)
{
	c->prev = NULL;
	c->next = h->chunks;
	if (h->chunks)
		h->chunks->prev = c;
	h->chunks = c;
}

/* Unlink the chunk's xpages list; requeue the pages that got frees while on
 * the full list.  Returns true if any page came back. */
static bool chunk_drain_xpages(hc_heap_t *h, hc_chunk_t *c)
{
	if (__atomic_load_n(&c->xpages, __ATOMIC_RELAXED) == NULL)
		return false;
	hc_page_t *pg = __atomic_exchange_n(&c->xpages, NULL, __ATOMIC_ACQUIRE);
	bool gained = false;
	while (pg) {
		hc_page_t *next = pg->xnext;
		__atomic_store_n(&pg->queued, 0, __ATOMIC_SEQ_CST);
		if (pg->in_use && (pg->flags & HC_PG_FULL) && page_collect(pg)) {
			page_unfull(h, pg);
			gained = true;
			if (hc_page_used(pg) == 0)
				page_empty_maybe_retire(h, c, pg);
		}
		pg = next;
	}
	return gained;
}

static bool heap_drain_xpages(hc_heap_t *h)
{
	bool gained = false;
	for (hc_chunk_t *c = h->chunks, *next; c; c = next) {
		next = c->next; /* draining may release c */
		gained |= chunk_drain_xpages(h, c);
	}
	return gained;
}

/* Take ownership of an abandoned chunk and rebuild its page queues from the
 * pages themselves (the old heap's links mean nothing now). */
static bool heap_adopt(hc_heap_t *h)
{
	if (__atomic_load_n(&abandoned, __ATOMIC_RELAXED) == NULL)
		return false;
	hc_mutex_lock(&abandoned_lock);
	hc_chunk_t *c = abandoned;
	if (c) {
		abandoned = c->next;
		abandoned_count--;
	}
	hc_mutex_unlock(&abandoned_lock);
	if (c == NULL)
		return false;
	c->heap = h;
	__atomic_store_n(&c->owner, h->tid, __ATOMIC_RELEASE);
	slots_lock(h);
	heap_link_chunk(h, c);
	slots_unlock(h);
	h->retired = true;       /* its free slots may be dirty */
	hc_chunk_drop_xpages(c); /* the pages are rescanned below anyway */
	for (unsigned i = 1; i < HC_NSLOTS; i++) {
		hc_page_t *pg = &c->pages[i];
		if (!pg->in_use)
			continue;
		/* drop the old heap's pin and FULL bias */
		__atomic_store_n(&pg->live, hc_page_used(pg), __ATOMIC_RELAXED);
		__atomic_store_n(&pg->flags, 0, __ATOMIC_RELAXED);
		xlist_unflag(hc_xpage(pg));
		pg->next = pg->prev = NULL;
		page_collect(pg);
		pq_push_back(&h->queue[pg->cls], pg);
		if (pg->live == 0) {
			page_retire(h, c, pg);
			continue;
		}
		if (pg->free == NULL && pg->capacity == pg->reserved)
			page_to_full(h, pg);
	}
	for (unsigned cls = 0; cls < HC_NCLASSES; cls++)
		direct_update(h, cls);
	return true;
}

/*
 * Abandoned chunks decay too.  Their free slots are dirty with what the
 * exited thread wrote, and the chunk waits on the list until some thread
 * runs out of slots of its own, which may be never: under load, rptest's
 * second pair of workers ran beside 2.4-3.6 MiB of the first pair's freed
 * slots in half the runs (tests/bench/RESULTS.md).  Once per epoch the
 * first heap to decay purges them as their owner would have.  It only
 * tries the list's lock: a heap's decay pass never waits for a thread that
 * adopts or abandons a chunk (they may wait for its madvise calls, one
 * for each run of free slots, and each slot purged once).
 * HC_PURGE_ALL purges every free slot now (malloc_trim, arena purges).
 * A fork child's orphans (hc_heap_fork_child) decay with them.
 */
static uint64_t abandoned_epoch;

/* A small chunk's free slots: the epoch's pass, or every one of them now
 * (HC_PURGE_ALL). */
static void chunk_slots_decay(hc_chunk_t *c, uint64_t epoch)
{
	if (epoch == HC_PURGE_ALL)
		hc_bits_purge_now(c, &c->used_slots, &c->dirty_new, &c->dirty_old, NULL, 1, HC_SLOT_SIZE);
	else
		hc_bits_purge(c, &c->used_slots, &c->dirty_new, &c->dirty_old, NULL, 1, HC_SLOT_SIZE, epoch);
}

static void abandoned_decay(uint64_t epoch)
{
	uint64_t seen = __atomic_load_n(&abandoned_epoch, __ATOMIC_RELAXED);
	if (epoch != HC_PURGE_ALL && seen == epoch)
		return;
	if (__atomic_load_n(&abandoned, __ATOMIC_RELAXED) == NULL &&
	    __atomic_load_n(&orphans, __ATOMIC_RELAXED) == NULL)
		return;
	if (epoch != HC_PURGE_ALL &&
	    !__atomic_compare_exchange_n(&abandoned_epoch, &seen, epoch, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	if (hc_mutex_trylock(&abandoned_lock) != 0)
		return;
	for (unsigned list = 0; list < 2; list++)
		for (hc_chunk_t *c = list ? orphans : abandoned; c; c = c->next)
			chunk_slots_decay(c, epoch);
	hc_mutex_unlock(&abandoned_lock);
}

/* What no heap owns: each decays once per epoch, whoever comes first. */
static void decay_unowned(uint64_t epoch)
{
	abandoned_decay(epoch);
	hc_chunk_cache_decay();
	hc_large_decay_all();
	hc_huge_decay();
}

/* The epoch's pass over the heap's chunks, under the slot lock, by the
 * owner or another thread (heaps_others_decay).  Each took its epoch before
 * the lock, so the other may have run a later epoch's pass meanwhile: a
 * pass never goes back, which would age slots freed a moment ago twice.
 * HC_PURGE_ALL purges every free slot now, however recently it was
 * retired (a pass would leave the slots retired in this epoch and the last
 * one, and did, until this was written). */
static void heap_decay_chunks(hc_heap_t *h, uint64_t epoch, bool others)
{
	bool all = epoch == HC_PURGE_ALL;
	if (!all && (int64_t)(epoch - h->decay_epoch) <= 0)
		return;
	uint64_t was = h->decay_epoch;
	__atomic_store_n(&h->decay_epoch, all ? hc_decay_epoch() : epoch, __ATOMIC_RELAXED);
	for (hc_chunk_t *c = h->chunks; c; c = c->next) {
		/* another thread's pass stops once the owner waits for the
		 * lock (2, slots_lock_wait), and leaves the epoch's pass
		 * undone: the owner is busy again, and its next page runs it
		 * over the chunks left (each chunk passed already keeps its
		 * own epoch, and hc_bits_purge skips it) */
		if (others && __atomic_load_n(&h->slot_lock, __ATOMIC_RELAXED) == 2) {
			__atomic_store_n(&h->decay_epoch, was, __ATOMIC_RELAXED);
			break;
		}
		chunk_slots_decay(c, epoch);
	}
}

static void heap_decay_locked(hc_heap_t *h, uint64_t epoch)
{
	slots_lock(h);
	heap_decay_chunks(h, epoch, false);
	slots_unlock(h);
}

/* At each new page: the epoch's pass over the heap's slots, unless the
 * control thread ran it (heaps_others_decay), and over what no heap owns. */
static void heap_decay(hc_heap_t *h)
{
	uint64_t epoch = hc_decay_epoch();
	if (h->page_epoch != epoch)
		__atomic_store_n(&h->page_epoch, epoch, __ATOMIC_RELAXED);
	if (epoch == __atomic_load_n(&h->decay_epoch, __ATOMIC_RELAXED))
		return;
	heap_decay_locked(h, epoch);
	decay_unowned(epoch);
}

/* A fresh page for class cls: a free slot of an owned chunk (dirty slots
 * first: they are already resident), else an adopted chunk, else a new one. */
static hc_page_t *page_new(hc_heap_t *h, unsigned cls)
{
	heap_decay(h);
	for (;;) {
		/* a dirty slot of any chunk, else the first free one (all
		 * chunks are looked at only while some slot was retired since
		 * the last look found none) */
		hc_chunk_t *c, *cold = NULL;
		uint64_t take = 0;
		slots_lock(h);
		for (c = h->chunks; c; c = c->next) {
			uint64_t free_slots = ~c->used_slots;
			if (h->retired && (take = free_slots & (c->dirty_new | c->dirty_old)) != 0)
				break;
			if (free_slots != 0 && cold == NULL) {
				cold = c;
				if (!h->retired)
					break;
			}
		}
		if (c == NULL)
			h->retired = false;
		if (take == 0 && (c = cold) != NULL)
			take = ~c->used_slots;
		if (c != NULL) {
			unsigned i = (unsigned)__builtin_ctzll(take);
			uint64_t bit = 1ULL << i;
			c->used_slots |= bit;
			c->dirty_new &= ~bit;
			c->dirty_old &= ~bit;
			c->nused++;
			slots_unlock(h);
			hc_page_t *pg = &c->pages[i];
			page_init(c, pg, cls);
			pq_push_front(&h->queue[cls], pg);
			chunk_check(c);
			return pg;
		}
		slots_unlock(h);
		if (heap_adopt(h)) {
			hc_page_t *pg = h->queue[cls].first;
			if (pg && pg->free)
				return pg;
			continue;
		}
		size_t meta;
		c = hc_chunk_get(HC_KIND_SMALL, &meta);
		if (c == NULL)
			return NULL;
		if (meta)
			hc_stats_add_metadata((intptr_t)meta);
		c->heap = h;
		__atomic_store_n(&c->owner, h->tid, __ATOMIC_RELEASE);
		if (c->dirty_new | c->dirty_old)
			h->retired = true; /* back from the cache, still warm */
		slots_lock(h);
		heap_link_chunk(h, c);
		slots_unlock(h);
	}
}

/* A page of class cls with a block on its free list, made the queue head. */
static hc_page_t *page_find(hc_heap_t *h, unsigned cls)
{
	hc_pq_t *q = &h->queue[cls];
	hc_page_t *pg, *carve = NULL;
	for (int pass = 0; pass < 2; pass++) {
		for (pg = q->first; pg;) {
			hc_page_t *next = pg->next;
			if (pg->free || page_collect(pg))
				goto found;
			if (pg->capacity < pg->reserved) {
				if (carve == NULL)
					carve = pg;
			} else if (!page_to_full(h, pg) && page_collect(pg))
				goto found;
			pg = next;
		}
		if (pass == 0 && !heap_drain_xpages(h))
			break;
	}
	/* The depot's blocks before blocks carved or a page made (a thread
	 * heap's: it gets lists for them if it has none yet, and if there is
	 * no memory for those, they go back to their pages). */
	hc_batch_t got;
	if (HC_XCACHE && h->tid != HC_TID_FALLBACK && depot_pop(cls, &got)) {
		if (h->xhead != NULL || xhead_make(h)) {
			xcache_splice(h, cls, got);
			return hc_xhead_page(&h->xhead[cls]);
		}
		xcache_release(got.first, got.n);
	}
	/* Carve fresh blocks only when no page has a free one: the holes that
	 * frees left are filled first, so a class's pages hold as much as its
	 * live count ever reached, not that plus what carving added meanwhile.
	 * (A page is made only when none is partly carved, so there is one,
	 * unless adopted chunks brought more.) */
	if (carve) {
		pg = carve;
		page_extend(hc_chunk_of(pg), pg);
	} else if ((pg = page_new(h, cls)) == NULL)
		return NULL;
found:
	if (q->first != pg) {
		pq_remove(q, pg);
		pq_push_front(q, pg);
	}
	direct_set(h, cls, pg);
	page_check(h, hc_chunk_of(pg), pg);
	return pg;
}

static void *small_alloc(hc_heap_t *h, unsigned cls)
{
	hc_page_t *pg = h->direct[cls];
	if (unlikely(pg->free == NULL)) {
		pg = page_find(h, cls);
		if (pg == NULL)
			return NULL;
	}
	hc_block_t *b = pg->free;
	hc_block_t *next = hc_link(pg, b, b->next);
	if (unlikely(!hc_link_ok(b, next)))
		hc_bad_link(b);
	pg->free = next;
	hc_block_unmark(b, pg->block_size);
	hc_live_inc(pg);
	return b;
}

/* Smallest class whose size is >= n and a multiple of align (every page
 * starts 64 KiB-aligned and its blocks at a multiple of the size's
 * power-of-two divisor, so such blocks are aligned).  -1 if none. */
static int class_for_aligned(size_t n, size_t align)
{
	if (n < align)
		n = align;
	if (n > HC_SMALL_MAX)
		return -1;
	for (unsigned c = hc_size_class(n); c < HC_NCLASSES; c++)
		if ((hc_class_size[c] & (align - 1)) == 0)
			return (int)c;
	return -1;
}

/* A thread's countdown ran out: the agent decides whether this allocation
 * is sampled and when the next event is due. */
static HC_NOINLINE bool heap_event(hc_heap_t *h, size_t usize)
{
	uint64_t consumed = (uint64_t)(h->period - h->countdown) + usize;
	bool sample = false;
	int64_t next = hc_agent_event(consumed, usize, &sample);
	if (next < 1)
		next = 1;
	h->period = h->countdown = next;
	return sample;
}

/* Count usize bytes against the calling thread's countdown (the fast path
 * does the same inline).  True if this allocation is to be sampled. */
bool hc_heap_count(size_t usize)
{
	hc_heap_t *h = heap_get();
	if (unlikely(h == &heap_fallback))
		return false;
	int64_t left = h->countdown - (int64_t)usize;
	if (likely(left >= 0)) {
		h->countdown = left;
		return false;
	}
	return heap_event(h, usize);
}

/* Called from outside the owning threads: a relaxed store that an owner's
 * concurrent update may overwrite, which only delays the change until that
 * thread's next event. */
void hc_heap_reset_countdowns(void)
{
	hc_mutex_lock(&heaps_lock);
	for (hc_heap_t *h = heaps_all; h; h = h->all_next)
		if (h->state == HC_HEAP_LIVE)
			__atomic_store_n(&h->countdown, 0, __ATOMIC_RELAXED);
	hc_mutex_unlock(&heaps_lock);
}

/* Everything the small fast path could not do: first use of the heap, an
 * exhausted page, an aligned request, the fallback.  The caller counted
 * the bytes. */
/* The block size a small request gets (what malloc_usable_size reports),
 * or 0 if it is not small. */
size_t hc_small_usize(size_t n, size_t align)
{
	int cls = align ? class_for_aligned(n, align) : n <= HC_SMALL_MAX ? (int)hc_size_class(n) : -1;
	return cls < 0 ? 0 : hc_class_size[cls];
}

/* The thread's shared heap is busy: take another that is free and keep to
 * it from then on, or else wait for its own.  Threads that allocate one
 * after another share one heap (and its pages: two heaps held two sets of
 * pages for threads that alternated between them); threads that allocate at
 * the same moment spread over as many as there are CPUs, as glibc's
 * threads spread over arenas. */
static HC_NOINLINE hc_shared_t *shared_lock(hc_heap_t *h, hc_shared_t *sh)
{
	if (h != &heap_fallback) {
		unsigned n = shared_count();
		for (unsigned k = 1; k < n; k++) {
			unsigned j = (h->shared_index + k) % n;
			if (hc_mutex_trylock(&shared_locks[j].m) == 0) {
				h->shared_index = (uint8_t)j;
				return &shared[j];
			}
		}
	}
	hc_mutex_lock(shared_mutex(sh));
	return sh;
}

void *hc_small_alloc_slow(size_t n, size_t align)
{
	hc_heap_t *h = heap_get(); /* first: it fills the class tables */
	int cls = align ? class_for_aligned(n, align) : (int)hc_size_class(n);
	if (cls < 0)
		return NULL;
	if (HC_XCACHE && h->xhead != NULL) { /* never for the fallback */
		if (h->xhead[cls].free != NULL || xcache_refill(h, (unsigned)cls))
			return hc_xcache_take(h, (unsigned)cls);
		xhead_dry(h, (unsigned)cls);
	}
	hc_shared_t *sh = NULL;
	if (unlikely(h == &heap_fallback))
		sh = &shared[0];
	else if (h->starter[cls] < HC_STARTER_BLOCKS && h->starter_bytes < HC_STARTER_BYTES &&
	    h->direct[cls] == &page_empty && h->queue[cls].first == NULL) {
		h->starter[cls]++;
		h->starter_bytes += hc_class_size[cls];
		sh = &shared[h->shared_index];
	}
	if (sh != NULL) {
		if (hc_mutex_trylock(shared_mutex(sh)) != 0)
			sh = shared_lock(h, sh);
		if (shared_tidy(&sh->heap, false))
			decay_unowned(hc_decay_epoch());
		void *p = small_alloc(&sh->heap, (unsigned)cls);
		hc_mutex_unlock(shared_mutex(sh));
		return p;
	}
	return small_alloc(h, (unsigned)cls);
}

/* ---- frees ------------------------------------------------------------- */

/* Push the chain first..last, n blocks of pg linked in order and marked,
 * onto the page's remote list (the caller is not the chunk's owner).
 * Lock-free.  (No ABA: the owner only ever takes the whole list.) */
static void page_push_remote(hc_chunk_t *c, hc_page_t *pg, hc_block_t *first, hc_block_t *last, uint32_t n)
{
	hc_xpage_t *xp = &c->xpage[pg - c->pages];
	uint64_t w = __atomic_load_n(&xp->xfree, __ATOMIC_RELAXED), next;
	do {
		hc_block_t *head = xlist_head(c, w);
		if (unlikely(head == first)) /* the same block freed twice in a row */
			hc_fatal_ptr("free(): double free of", first);
		last->next = hc_link(pg, last, head);
		next = (((w >> 32) + n) << 32) | (uint64_t)((char *)first - (char *)c); /* XLIST_FULL off */
	} while (!__atomic_compare_exchange_n(&xp->xfree, &w, next, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	if (!(w & XLIST_FULL))
		return;
	/* The owner parked this page as full, and this push took the flag:
	 * tell it, unless the page is still on the list from an earlier time
	 * (the owner clears queued before it looks at the page's list). */
	if (__atomic_exchange_n(&pg->queued, 1, __ATOMIC_SEQ_CST))
		return;
	hc_page_t *top = __atomic_load_n(&c->xpages, __ATOMIC_RELAXED);
	do {
		pg->xnext = top;
	} while (!__atomic_compare_exchange_n(&c->xpages, &top, pg, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* A free from a thread that does not own the chunk.  Lock-free. */
void hc_small_free_remote(hc_chunk_t *c, hc_page_t *pg, void *p)
{
	hc_block_mark(p, c->xpage[pg - c->pages].block_size);
	page_push_remote(c, pg, p, p, 1);
}

/* The owner frees b into its page. */
static inline void free_local(hc_chunk_t *c, hc_page_t *pg, hc_block_t *b)
{
	b->next = hc_link(pg, b, pg->free);
	pg->free = b;
	if (hc_live_dec(pg))
		hc_small_free_settle(c, pg, b);
}

/* The owner's free of a block that its cache does not keep. */
static void free_own(hc_chunk_t *c, hc_page_t *pg, hc_block_t *b)
{
	if (HC_DEBUG && pg->block_size > sizeof *b)
		memset(b + 1, HC_JUNK_FREE, pg->block_size - sizeof *b);
	free_local(c, pg, b);
}

/*
 * The thread cache.  A thread that frees another thread's block keeps it,
 * up to its list's bound (hc_xhead_t.limit), and hands it out again to its
 * own next allocation of that class, newest first (malloc's fast path
 * takes from the list as from a page while it is not empty), instead
 * of pushing it back to its page at once.  Blocks passed between threads
 * (xthread_random; a request handled on one thread and freed on another)
 * are then reused by the thread that just read them, while they are in
 * its CPU's cache, and a free costs no atomic operation on a line the owner
 * writes.  From then on the thread's frees of its own blocks go into the
 * lists too (api.c, free): one path, where a mix of the two sent free's
 * owner test either way at random, and the block freed last is the one
 * handed out next, whichever page it is in.  A thread that never frees
 * another's block frees into its pages (hc_tls_free_id).  A cached block
 * stays counted in its page's live count, so the page cannot be retired
 * under it; it carries free's mark.  When a class's list is full, some or
 * all of it goes back (xcache_overflow): the thread's own blocks to their
 * pages, other threads' to the depot (above) if the thread also takes
 * from the list, else to their pages, one push per run of blocks of one
 * page; all of it at thread exit (other threads' to the depot),
 * thread.tcache.flush, malloc_trim and arena purges.  Only threads that
 * have allocated (have a heap) keep blocks, and only blocks of thread
 * heaps: a thread that only frees, and a shared heap, would only have them
 * kept from their next users.  Statistics do not count cached blocks as
 * allocated (stats.c).  Not in the checked build (HC_XCACHE): the list
 * crosses pages, which its link check refuses.
 */

static void depot_put(unsigned cls, hc_block_t *first, hc_block_t *last, unsigned n);

/* Give n blocks of a plainly linked list (any pages) back to their pages:
 * a push per run of one page, or the owner's free where this thread has
 * since come to own the chunk (it adopted it); with a class, other
 * threads' blocks (all of that class) go to the depot instead, in one
 * batch.  The list must end after exactly n: anything else is a loop that
 * a double free made, or a write into a cached block. */
static void xcache_release_to(hc_block_t *b, unsigned n, int depot_cls)
{
	hc_block_t *kept = NULL, *kept_last = NULL;
	unsigned nkept = 0;
	while (n != 0) {
		if (unlikely(b == NULL))
			hc_fatal_ptr("free(): a thread's cache of freed blocks is corrupt (write after free?) at", b);
		hc_block_t *first = b, *last = b;
		uint32_t run = 1;
		for (b = b->next, n--; n != 0 && b && (((uintptr_t)b ^ (uintptr_t)first) >> HC_SLOT_SHIFT) == 0;
		     b = b->next, n--, run++)
			last = b;
		if (unlikely(n == 0 && b != NULL))
			hc_fatal_ptr("free(): double free (a block twice in a thread's cache), at", b);
		hc_chunk_t *c = hc_chunk_of(first);
		hc_page_t *pg = &c->pages[((uintptr_t)first >> HC_SLOT_SHIFT) & (HC_NSLOTS - 1)];
		if (__atomic_load_n(&c->owner, __ATOMIC_ACQUIRE) != hc_thread_id()) {
			if (depot_cls < 0) {
				page_push_remote(c, pg, first, last, run);
				continue;
			}
			if (kept_last != NULL) /* its link was read above */
				kept_last->next = first;
			else
				kept = first;
			kept_last = last;
			nkept += run;
			continue;
		}
		for (hc_block_t *x = first, *next;; x = next) {
			next = x->next;
			hc_block_unmark(x, pg->block_size);
			free_local(c, pg, x);
			if (x == last)
				break;
		}
	}
	if (nkept != 0) {
		kept_last->next = NULL;
		depot_put((unsigned)depot_cls, kept, kept_last, nkept);
	}
}

static void xcache_release(hc_block_t *b, unsigned n)
{
	xcache_release_to(b, n, -1);
}

/* The batch first..last, n blocks of other threads' pages of class cls,
 * into the depot; back to their pages if it is full. */
static void depot_put(unsigned cls, hc_block_t *first, hc_block_t *last, unsigned n)
{
	hc_depot_t *d = &depot[cls];
	hc_mutex_lock(&depot_locks[cls % DEPOT_LOCKS].m);
	uint32_t nb = d->nbatch;
	bool room = nb < DEPOT_BATCHES && (d->blocks + n) * hc_class_size[cls] <= DEPOT_BYTES;
	if (room) {
		d->batch[nb] = (hc_batch_t){ first, last, n };
		__atomic_store_n(&d->blocks, d->blocks + n, __ATOMIC_RELAXED);
		__atomic_store_n(&d->nbatch, nb + 1, __ATOMIC_RELAXED);
	}
	hc_mutex_unlock(&depot_locks[cls % DEPOT_LOCKS].m);
	if (!room)
		xcache_release(first, n);
}

/* The depot's newest batch of class cls, if there is one and its lock is
 * free. */
static bool depot_pop(unsigned cls, hc_batch_t *got)
{
	hc_depot_t *d = &depot[cls];
	if (__atomic_load_n(&d->nbatch, __ATOMIC_RELAXED) == 0 ||
	    hc_mutex_trylock(&depot_locks[cls % DEPOT_LOCKS].m) != 0)
		return false;
	uint32_t nb = d->nbatch;
	if (nb != 0) {
		*got = d->batch[nb - 1];
		__atomic_store_n(&d->blocks, d->blocks - got->n, __ATOMIC_RELAXED);
		d->used = true;
		__atomic_store_n(&d->nbatch, nb - 1, __ATOMIC_RELAXED);
	}
	hc_mutex_unlock(&depot_locks[cls % DEPOT_LOCKS].m);
	return nb != 0;
}

/* A batch from the depot into h's list of class cls (h has lists). */
static void xcache_splice(hc_heap_t *h, unsigned cls, hc_batch_t got)
{
	hc_xhead_t *x = &h->xhead[cls];
	got.last->next = x->free;
	x->free = got.first;
	x->pushed += got.n;
	h->direct[cls] = hc_xhead_page(x);
}

/* The class's list ran dry: the depot's newest batch of the class into
 * it.  True if the list has blocks. */
static bool xcache_refill(hc_heap_t *h, unsigned cls)
{
	hc_batch_t got;
	if (!depot_pop(cls, &got))
		return false;
	xcache_splice(h, cls, got);
	return true;
}

/* Every batch of the depot back to its pages; with all false, only the
 * classes that no thread took from since the last pass (blocks that only
 * come in are not wanted). */
static void depot_drain(bool all)
{
	for (unsigned cls = 0; cls < HC_NCLASSES; cls++) {
		hc_depot_t *d = &depot[cls];
		if (__atomic_load_n(&d->nbatch, __ATOMIC_RELAXED) == 0)
			continue;
		hc_batch_t out[DEPOT_BATCHES];
		uint32_t nb = 0;
		hc_mutex_lock(&depot_locks[cls % DEPOT_LOCKS].m);
		if (all || !d->used) {
			nb = d->nbatch;
			memcpy(out, d->batch, nb * sizeof out[0]);
			__atomic_store_n(&d->blocks, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&d->nbatch, 0, __ATOMIC_RELAXED);
		}
		d->used = false;
		hc_mutex_unlock(&depot_locks[cls % DEPOT_LOCKS].m);
		for (uint32_t i = 0; i < nb; i++)
			xcache_release(out[i].first, out[i].n);
	}
}

/* Keep the newest keep blocks of class cls; give the rest back, other
 * threads' blocks to the depot if to_depot. */
static void xcache_flush_to(hc_heap_t *h, unsigned cls, unsigned keep, bool to_depot)
{
	hc_xhead_t *x = &h->xhead[cls];
	unsigned count = hc_xhead_count(x);
	if (keep > count)
		keep = count;
	hc_block_t **at = &x->free;
	for (unsigned i = 0; i < keep && *at != NULL; i++)
		at = &(*at)->next;
	hc_block_t *rest = *at;
	*at = NULL;
	x->pushed = keep;
	x->taken = 0;
	xhead_dry(h, cls);
	xcache_release_to(rest, count - keep, to_depot ? (int)cls : -1);
}

static void xcache_flush(hc_heap_t *h, unsigned cls, unsigned keep)
{
	xcache_flush_to(h, cls, keep, false);
}

static void xcache_flush_all(hc_heap_t *h, bool to_depot)
{
	if (h->xhead == NULL)
		return;
	for (unsigned cls = 0; cls < HC_NCLASSES; cls++)
		if (h->xhead[cls].free != NULL)
			xcache_flush_to(h, cls, 0, to_depot);
}

/* The list of class cls is full.  If the thread took blocks from it since
 * the last time, keep the newer half and let it hold more next time (up
 * to xcache_max); if not, the thread only frees other threads' blocks of
 * this class (a consumer of what producers make): give all of them back,
 * and hold fewer next time (down to 4), so that they are not kept from the
 * producers (prodcons: 0.8 MiB more with a fixed bound of 32). */
static HC_NOINLINE void xcache_overflow(hc_heap_t *h, unsigned cls)
{
	hc_xhead_t *x = &h->xhead[cls];
	unsigned limit = x->limit, most = xcache_max[cls], least = most < 4 ? most : 4;
	if (x->taken != 0) {
		xcache_flush_to(h, cls, hc_xhead_count(x) / 2u, true);
		limit = limit * 2 < most ? limit * 2 : most;
	} else {
		xcache_flush(h, cls, 0);
		limit = limit / 2 > least ? limit / 2 : least;
	}
	x->limit = (uint8_t)limit;
}

/* xcache_put when the list is full: room made for b, then b put. */
static HC_NOINLINE void xcache_put_full(hc_heap_t *h, const hc_xpage_t *xp, hc_block_t *b)
{
	xcache_overflow(h, xp->cls);
	hc_xcache_push(h, xp->cls, xp->block_size, b);
}

/* The thread cache's lists for h; false if there is no memory for them. */
static bool xhead_make(hc_heap_t *h)
{
	hc_xhead_t *x = hc_meta_alloc(XHEAD_BYTES);
	if (x == NULL)
		return false;
	xhead_init(x);
	h->xhead = x;
	return true;
}

/* The thread's first block to keep: its lists are made, or if there is no
 * memory for them, the block goes back to its page.  It pushes the block
 * itself (and so sets the free id as xcache_put does) so that xcache_put's
 * calls stay tail calls: a call that returned here made
 * hc_small_free_slow save five registers on every entry, not two. */
static HC_NOINLINE void xcache_first(hc_heap_t *h, hc_chunk_t *c, const hc_xpage_t *xp, hc_block_t *b)
{
	hc_page_t *pg = &c->pages[xp - c->xpage];
	if (xhead_make(h)) {
		hc_tls_free_id = HC_TID_CACHED;
		hc_xcache_push(h, xp->cls, xp->block_size, b);
	} else if (__atomic_load_n(&c->owner, __ATOMIC_RELAXED) == hc_thread_id())
		free_own(c, pg, b);
	else
		hc_small_free_remote(c, pg, b);
}

/* Its calls are tail calls, so the free of another thread's block that
 * ends here needs no stack frame of its own. */
static inline void xcache_put(hc_heap_t *h, hc_chunk_t *c, const hc_xpage_t *xp, hc_block_t *b)
{
	if (unlikely(h->xhead == NULL)) {
		xcache_first(h, c, xp, b);
		return;
	}
	/* from now on every small free of the thread comes to its lists
	 * (api.c); a recycled heap has them before its thread keeps a block */
	hc_tls_free_id = HC_TID_CACHED;
	hc_xhead_t *x = &h->xhead[xp->cls];
	if (unlikely(x->free == b)) /* the mark catches this first; kept as a guard */
		hc_fatal_ptr("free(): double free of", b);
	if (unlikely(hc_xhead_count(x) >= x->limit))
		xcache_put_full(h, xp, b);
	else
		hc_xcache_push(h, xp->cls, xp->block_size, b);
}

static void *slow_none(size_t n)
{
	return NULL;
}

/* malloc's first resort when its fast path fails: a block of n's class
 * from the thread cache (or the depot), if there is one and the countdown
 * allows it (a request that is due for an event, or one the cache cannot
 * serve, takes the whole slow path); else, if the class's list ran dry under the fast
 * path, direct[cls] back at the class's page and a block from that, as
 * the fast path would take it; else NULL. */
void *hc_small_cached(size_t n)
{
	hc_heap_t *h = hc_tls_heap;
	if (h->xhead == NULL) /* so until the thread keeps a block */
		return NULL;
	unsigned cls = hc_size_class(n);
	if (h->xhead[cls].free != NULL || xcache_refill(h, cls))
		return hc_xcache_charged(h, cls);
	/* the fast path's take from the class's page, here rather than by
	 * the whole slow path (a thread whose frees are half others' blocks
	 * empties its lists often) */
	if (!xhead_dry(h, cls))
		return NULL;
	return hc_malloc_fast(n, slow_none);
}

/* A free of a small block that free passed on: another thread's (or a
 * shared heap's, or none's) by a thread that has no lists yet, which
 * keeps it and so gets them; and from free_cached (api.c), a full list, a
 * block the cache does not keep (a shared heap's, 8 bytes, above
 * tcache_max) or one free must report.  In the checked build, which has
 * no cache, every free of a block of another thread's (or of none's).
 * Every call in it is a tail call. */
void hc_small_free_slow(hc_chunk_t *c, void *p)
{
	unsigned slot = ((uintptr_t)p >> HC_SLOT_SHIFT) & (HC_NSLOTS - 1);
	uintptr_t owner = __atomic_load_n(&c->owner, __ATOMIC_ACQUIRE);
	/* only the page's remote half (hc_xpage_t) is read, but where the
	 * checked build looks at where blocks start, and the owner's own
	 * free of a block the cache does not keep */
	hc_xpage_t *xp = &c->xpage[slot];
	if (unlikely(!__atomic_load_n(&xp->in_use, __ATOMIC_ACQUIRE)))
		hc_fatal_ptr("free(): pointer into an unused page (double free?):", p);
	if (unlikely(!hc_block_start(&c->pages[slot], p)))
		hc_fatal_ptr("free(): invalid pointer (not the start of a block):", p);
	if (unlikely(hc_block_marked(p, xp->block_size)))
		hc_fatal_ptr("free(): double free of", p);
	/* a shared heap's blocks go back at once: they are the starter
	 * blocks of threads to come (thread_cost: 2,000 idle threads kept the
	 * 28 blocks each had freed, 25 KiB a thread) */
	hc_heap_t *h = hc_tls_heap;
	/* 8-byte blocks have no room for the mark, so nothing would catch
	 * one freed twice into the cache before the cache handed it out
	 * twice; their page's list is walked when it is taken back.  Blocks
	 * above tcache_max go back to their page. */
	if (HC_XCACHE && h->state == HC_HEAP_LIVE && owner != HC_TID_FALLBACK &&
	    xp->block_size - 9u < __atomic_load_n(&xcache_range, __ATOMIC_RELAXED))
		xcache_put(h, c, xp, p);
	else if (owner == hc_thread_id())
		free_own(c, &c->pages[slot], p);
	else
		hc_small_free_remote(c, &c->pages[slot], p);
}

/* The owner freed p into pg and the live count dropped to <= 0: the page
 * was on the full list, or it is empty and not the direct page. */
void hc_small_free_settle(hc_chunk_t *c, hc_page_t *pg, void *p)
{
	if (unlikely(!pg->in_use))
		hc_fatal_ptr("free(): pointer into an unused page (double free?):", p);
	hc_heap_t *h = c->heap;
	if (pg->flags & HC_PG_FULL)
		page_unfull(h, pg);
	int32_t used = hc_page_used(pg);
	if (unlikely(used < 0))
		hc_fatal_ptr("free(): more frees than allocations in a page (double free?):", p);
	if (used == 0)
		page_empty_maybe_retire(h, c, pg);
}

/* ---- thread exit and fork ---------------------------------------------- */

/* Fold remote frees into every queued page; retire the pages left empty. */
static void heap_collect_queues(hc_heap_t *h)
{
	for (unsigned cls = 0; cls < HC_NCLASSES; cls++) {
		for (hc_page_t *pg = h->queue[cls].first, *next; pg; pg = next) {
			next = pg->next;
			page_collect(pg);
			if (hc_page_used(pg) == 0)
				page_retire(h, hc_chunk_of(pg), pg);
		}
	}
}

static void heap_abandon(hc_heap_t *h)
{
	heap_drain_xpages(h); /* which may release chunks: its loop knows */
	heap_collect_queues(h);
	for (hc_page_t *pg = h->full.first, *next; pg; pg = next) {
		next = pg->next;
		page_collect(pg);
		if (hc_page_used(pg) == 0)
			page_retire(h, hc_chunk_of(pg), pg);
	}
	/* the control thread may be decaying them; once the list is empty it
	 * lets go of the lock at once (heaps_others_decay) */
	slots_lock(h);
	hc_chunk_t *c = h->chunks;
	h->chunks = NULL;
	slots_unlock(h);
	while (c) {
		hc_chunk_t *next = c->next;
		if (c->nused == 0) {
			hc_chunk_put(c);
		} else {
			__atomic_store_n(&c->owner, HC_TID_NONE, __ATOMIC_RELEASE);
			c->heap = NULL;
			hc_mutex_lock(&abandoned_lock);
			c->next = abandoned;
			c->prev = NULL;
			abandoned = c;
			abandoned_count++;
			hc_mutex_unlock(&abandoned_lock);
		}
		c = next;
	}
}

/* A shared heap gets no frees of its own, only remote ones, so nothing
 * notices when its pages empty: once per decay epoch (or when asked), the
 * thread that holds its lock folds the remote frees back and retires the
 * empty pages, whose slots then decay like any other.  True if it was the
 * epoch's pass, after which the caller runs decay_unowned. */
static bool shared_tidy(hc_heap_t *h, bool now)
{
	uint64_t epoch = hc_decay_epoch();
	if (!now && epoch == h->decay_epoch)
		return false;
	heap_drain_xpages(h);
	heap_collect_queues(h);
	heap_decay_locked(h, now ? HC_PURGE_ALL : epoch);
	return !now;
}

/*
 * The other threads' heaps, from the control thread's pass: the epoch's
 * decay of the slots of each heap whose thread made no page in this epoch
 * or the last (heap_decay runs it at every new page).  Such a thread may
 * be busy in pages it has, or waiting for work, or asleep for good; its
 * freed slots go back to the OS as if it had asked for a page now and
 * then.  With now (malloc_trim, arena purges), every free slot of every
 * heap at once.  Under purge_lock, so that one pass runs at a time and
 * fork finds none mid-pass.  Each heap's slot lock is only tried, so that
 * the pass never waits for a thread (a thread waits at most for one
 * chunk's madvise calls: the pass stops once it does, heap_decay_chunks),
 * and a heap whose thread is changing its slots is left to it.
 * heaps_lock is held to pick a heap, not across its madvise calls, which
 * a thread's start and exit would wait for (tens of milliseconds for a few
 * threads' bursts).  What keeps the heap from being recycled meanwhile is
 * its slot lock: a heap the pass locked while it was live and still had
 * chunks has not been abandoned, and its thread's exit waits at the lock
 * (heap_abandon) until the pass lets go.  One that has none (abandoned, or
 * new) is let go at once, still under heaps_lock, without which it cannot
 * go back to the pool.  The registry only grows and a recycled heap keeps
 * its link, so the walk goes on from the heap's all_next.
 */
static void heaps_others_decay(const hc_heap_t *self, bool now)
{
	uint64_t epoch = hc_decay_epoch();
	hc_mutex_lock(&purge_lock);
	hc_mutex_lock(&heaps_lock);
	for (hc_heap_t *h = heaps_all; h; h = h->all_next) {
		if (h == self || __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != HC_HEAP_LIVE)
			continue;
		if (!now &&
		    ((int64_t)(epoch - __atomic_load_n(&h->page_epoch, __ATOMIC_RELAXED)) < 2 ||
		        __atomic_load_n(&h->decay_epoch, __ATOMIC_RELAXED) == epoch))
			continue;
		if (!slots_trylock(h))
			continue;
		if (h->chunks == NULL) {
			slots_unlock(h);
			continue;
		}
		hc_mutex_unlock(&heaps_lock);
		heap_decay_chunks(h, now ? HC_PURGE_ALL : epoch, true);
		slots_unlock(h);
		hc_mutex_lock(&heaps_lock);
	}
	hc_mutex_unlock(&heaps_lock);
	hc_mutex_unlock(&purge_lock);
}

void hc_alloc_idle_decay(void)
{
	/* the rest after the shared heaps, with no lock of theirs held (a
	 * thread's starter blocks wait for none of it) */
	for (unsigned i = 0; i < HC_NSHARED; i++) {
		if (hc_mutex_trylock(&shared_locks[i].m) != 0)
			continue;
		shared_tidy(&shared[i].heap, false);
		hc_mutex_unlock(&shared_locks[i].m);
	}
	depot_drain(false);
	uint64_t epoch = hc_decay_epoch();
	decay_unowned(epoch);
	/* the calling thread's own heap, which it owns, and the others' */
	hc_heap_t *self = hc_tls_heap;
	if (self->state == HC_HEAP_LIVE && self->decay_epoch != epoch)
		heap_decay_locked(self, epoch);
	heaps_others_decay(self, false);
}

void hc_thread_cache_flush(void)
{
	hc_heap_t *h = hc_tls_heap;
	if (h->state == HC_HEAP_LIVE)
		xcache_flush_all(h, false);
}

/* Called from the collect hook (malloc_trim, purge): fold remote frees of
 * the caller's heap and of the shared heaps back, retire what became empty
 * and purge their free slots, the abandoned chunks' and a fork child's
 * orphans' (abandoned_decay), then the other threads' free slots (those
 * the threads' frees already retired: their remote frees and caches are
 * theirs to fold). */
void hc_heap_collect_self(void)
{
	for (unsigned i = 0; i < HC_NSHARED; i++) {
		hc_mutex_lock(&shared_locks[i].m);
		shared_tidy(&shared[i].heap, true);
		hc_mutex_unlock(&shared_locks[i].m);
	}
	depot_drain(true);
	abandoned_decay(HC_PURGE_ALL);
	hc_heap_t *h = hc_tls_heap;
	if (h->state == HC_HEAP_LIVE) {
		xcache_flush_all(h, false);
		heap_drain_xpages(h);
		heap_collect_queues(h);
		heap_decay_locked(h, HC_PURGE_ALL);
	}
	heaps_others_decay(h, true);
}

/* fork (lifecycle.c): this layer's locks, the shared heaps' first. */
void hc_heap_fork_prepare(void)
{
	for (unsigned i = 0; i < HC_NSHARED; i++)
		hc_mutex_lock(&shared_locks[i].m);
	hc_mutex_lock(&purge_lock);
	hc_mutex_lock(&heaps_lock);
	hc_mutex_lock(&abandoned_lock);
	for (unsigned i = 0; i < DEPOT_LOCKS; i++)
		hc_mutex_lock(&depot_locks[i].m);
}

void hc_heap_fork_parent(void)
{
	for (unsigned i = 0; i < DEPOT_LOCKS; i++)
		hc_mutex_unlock(&depot_locks[i].m);
	hc_mutex_unlock(&abandoned_lock);
	hc_mutex_unlock(&heaps_lock);
	hc_mutex_unlock(&purge_lock);
	for (unsigned i = 0; i < HC_NSHARED; i++)
		hc_mutex_unlock(&shared_locks[i].m);
}

/* In the child only the forking thread exists.  The other threads' heaps
 * may have been mid-operation, so their pages are not trusted for reuse:
 * their chunks are disowned (owner none), which makes every free into them
 * a remote push, and the heap structs are never recycled.  Their free
 * slots were not decayed either, and a long-lived child (a pre-forked
 * worker) kept what the parent's threads had freed resident for its whole
 * life.  The slot maps alone are whole if the thread did not hold its
 * slot lock at the fork: such a heap's chunks go on the orphans list,
 * whose free slots decay with the abandoned chunks. */
void hc_heap_fork_child(void)
{
	for (unsigned i = 0; i < DEPOT_LOCKS; i++)
		hc_mutex_reinit(&depot_locks[i].m);
	hc_mutex_reinit(&abandoned_lock);
	hc_mutex_reinit(&heaps_lock);
	hc_mutex_reinit(&purge_lock);
	for (unsigned i = 0; i < HC_NSHARED; i++)
		hc_mutex_reinit(&shared_locks[i].m);
	hc_heap_t *self = hc_tls_heap;
	uintptr_t tid = hc_thread_id();
	for (hc_heap_t *h = heaps_all; h; h = h->all_next) {
		if (h == self || h->state != HC_HEAP_LIVE)
			continue;
		bool whole = h->slot_lock == 0;
		for (hc_chunk_t *c = h->chunks, *next; c; c = next) {
			next = c->next;
			__atomic_store_n(&c->owner, HC_TID_NONE, __ATOMIC_RELAXED);
			if (whole) {
				c->heap = NULL;
				c->prev = NULL;
				c->next = orphans;
				orphans = c;
			}
		}
		h->chunks = NULL;
		h->state = HC_HEAP_DEAD;
	}
	if (self->state == HC_HEAP_LIVE) {
		self->slot_lock = 0; /* no thread of the child holds it */
		self->tid = tid;
		if (hc_tls_free_id != HC_TID_CACHED)
			hc_tls_free_id = tid;
	}
}

/* ---- statistics -------------------------------------------------------- */

_Static_assert(HC_NCLASSES <= HC_NCLASSES_MAX, "hc_alloc.h's HC_NCLASSES_MAX is too small");

/* Blocks of each class that were freed but are still counted in their
 * pages' live counts: in the threads' caches and the depot (the remote
 * lists are counted page by page).  Read without the owners' order: a
 * statistic may be off by what changes meanwhile. */
static void cached_blocks(uint32_t out[HC_NCLASSES])
{
	for (unsigned k = 0; k < HC_NCLASSES; k++)
		out[k] = __atomic_load_n(&depot[k].blocks, __ATOMIC_RELAXED);
	hc_mutex_lock(&heaps_lock);
	for (hc_heap_t *h = heaps_all; h; h = h->all_next) {
		/* every heap's: a flushed list holds none, and a fork child's
		 * heaps of the parent's other threads keep theirs */
		hc_xhead_t *x = __atomic_load_n(&h->xhead, __ATOMIC_RELAXED);
		if (x == NULL)
			continue;
		for (unsigned k = 0; k < HC_NCLASSES; k++) {
			uint32_t n = __atomic_load_n(&x[k].pushed, __ATOMIC_RELAXED) -
			    __atomic_load_n(&x[k].taken, __ATOMIC_RELAXED);
			out[k] += n <= 255 ? n : 0; /* a torn pair */
		}
	}
	hc_mutex_unlock(&heaps_lock);
}

/* What a page counts as live, less its remote list, clamped: the owner
 * may be mid-update. */
static size_t page_used_now(hc_chunk_t *c, unsigned i)
{
	int32_t live = hc_page_used(&c->pages[i]);
	int64_t used = (int64_t)live - (int64_t)(__atomic_load_n(&c->xpage[i].xfree, __ATOMIC_RELAXED) >> 32);
	size_t cap = __atomic_load_n(&c->pages[i].capacity, __ATOMIC_RELAXED);
	return used < 0 ? 0 : (size_t)used > cap ? cap : (size_t)used;
}

unsigned hc_class_stats(hc_class_stats_t *out, unsigned n)
{
	if (n > HC_NCLASSES)
		n = HC_NCLASSES;
	memset(out, 0, n * sizeof *out);
	for (unsigned k = 0; k < n; k++)
		out[k].size = hc_class_size[k];
	for (hc_chunk_t *c = hc_chunk_registry(); c; c = c->all_next) {
		if (__atomic_load_n(&c->cached, __ATOMIC_ACQUIRE) || c->kind != HC_KIND_SMALL)
			continue;
		for (unsigned i = 1; i < HC_NSLOTS; i++) {
			hc_page_t *pg = &c->pages[i];
			if (!__atomic_load_n(&pg->in_use, __ATOMIC_ACQUIRE))
				continue;
			unsigned cls = __atomic_load_n(&pg->cls, __ATOMIC_RELAXED);
			if (cls >= n)
				continue;
			size_t bs = hc_class_size[cls];
			size_t cap = __atomic_load_n(&pg->capacity, __ATOMIC_RELAXED);
			size_t used = page_used_now(c, i);
			size_t wrap = hc_class_wrap[cls];
			size_t span = hc_class_off[cls] + (cap < wrap ? cap : wrap) * bs;
			size_t active = (span + HC_PAGE - 1) & ~(HC_PAGE - 1);
			hc_class_stats_t *o = &out[cls];
			o->pages++;
			o->carved += cap;
			o->used += used;
			o->active += active;
			if (used * 4 <= cap) {
				o->sparse_pages++;
				o->sparse_used += used;
				o->sparse_active += active;
			}
		}
	}
	uint32_t cached[HC_NCLASSES];
	cached_blocks(cached);
	for (unsigned k = 0; k < n; k++) {
		out[k].used -= cached[k] < out[k].used ? cached[k] : out[k].used;
		if (out[k].sparse_used > out[k].used) /* the cached ones may be there */
			out[k].sparse_used = out[k].used;
	}
	return n;
}

void hc_heap_stats(hc_stats_t *st)
{
	for (hc_chunk_t *c = hc_chunk_registry(); c; c = c->all_next) {
		if (__atomic_load_n(&c->cached, __ATOMIC_ACQUIRE) || c->kind != HC_KIND_SMALL)
			continue;
		st->nchunks_small++;
		st->mapped += HC_CHUNK_SIZE;
		/* bitmaps written under the heap's slot lock, not ours: a torn
		 * read only skews a statistic */
		uint64_t slots = __atomic_load_n(&c->used_slots, __ATOMIC_RELAXED);
		uint64_t dirty =
		    __atomic_load_n(&c->dirty_new, __ATOMIC_RELAXED) | __atomic_load_n(&c->dirty_old, __ATOMIC_RELAXED);
		st->dirty += (size_t)__builtin_popcountll(dirty & ~slots) * HC_SLOT_SIZE;
		for (unsigned i = 1; i < HC_NSLOTS; i++) {
			hc_page_t *pg = &c->pages[i];
			if (!__atomic_load_n(&pg->in_use, __ATOMIC_ACQUIRE))
				continue;
			unsigned cls = __atomic_load_n(&pg->cls, __ATOMIC_RELAXED);
			size_t bs = __atomic_load_n(&pg->block_size, __ATOMIC_RELAXED);
			size_t cap = __atomic_load_n(&pg->capacity, __ATOMIC_RELAXED);
			st->small_allocated += page_used_now(c, i) * bs;
			/* the carved blocks span the offset to its last one (those
			 * carved after the wrap lie in the first OS page) */
			size_t wrap = hc_class_wrap[cls];
			size_t span = hc_class_off[cls] + (cap < wrap ? cap : wrap) * bs;
			st->active += (span + HC_PAGE - 1) & ~(HC_PAGE - 1);
		}
	}
	uint32_t cached[HC_NCLASSES];
	cached_blocks(cached);
	size_t held = 0;
	for (unsigned k = 0; k < HC_NCLASSES; k++)
		held += (size_t)cached[k] * hc_class_size[k];
	st->small_allocated -= held < st->small_allocated ? held : st->small_allocated;
	hc_mutex_lock(&heaps_lock);
	st->nheaps = heaps_count;
	hc_mutex_unlock(&heaps_lock);
	st->metadata += hc_meta_bytes();
}
