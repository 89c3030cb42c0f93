/*
 * allocator/internal.h - the allocator's own structures, shared by the files
 * of allocator/ and by nothing else (agent/ uses allocator/hc_alloc.h).
 *
 * Memory is carved from 4 MiB "chunks" aligned to 4 MiB, so the metadata of
 * any pointer is found in O(1) by masking its low bits.  Three kinds:
 *
 *   SMALL  owned by one thread heap; 64 slots of 64 KiB, slot 0 holds the
 *          header, every other slot is a "page" of one size class.
 *   LARGE  owned by an arena (a mutex); 8 MiB (two chunk slots, one
 *          mapping), 2048 runs of 4 KiB, the first pages hold the header;
 *          objects of 16 KiB..8 MiB are runs of whole 4 KiB pages that start
 *          in the first slot (so the mask finds the header) and may run on
 *          into the second.
 *   HUGE   one object per mapping, > 8 MiB (or aligned to more than 2 MiB);
 *          the header is the mapping's first page and the object follows it.
 *
 * Chunks are never unmapped: a chunk with nothing in it goes to a global
 * cache and its pages are purged (madvise) after the decay time.  This is what
 * makes lock-free cross-thread frees safe: a thread that pushes a block onto a
 * page's list can always touch the chunk header afterwards.
 */
#ifndef HC_ALLOCATOR_INTERNAL_H
#define HC_ALLOCATOR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>

#include "hc_alloc.h"
#include "hc_hooks.h"
#include "hc_lock.h"

#define HC_EXPORT   __attribute__((visibility("default")))
#define HC_NOINLINE __attribute__((noinline))
#define HC_COLD     __attribute__((noinline, cold))
#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Debug builds (make DEBUG=1): fresh blocks are filled with 0xa5, freed
 * ones with 0x5a past the link word, HC_ASSERT (hc_alloc.h) checks the
 * invariants written beside each structure, and the lock order is checked
 * (hc_lock.h). */
#define HC_JUNK_ALLOC 0xa5
#define HC_JUNK_FREE  0x5a

/* ---- geometry ---------------------------------------------------------- */

#define HC_CHUNK_SHIFT 22
#define HC_CHUNK_SIZE  ((size_t)1 << HC_CHUNK_SHIFT) /* 4 MiB */
#define HC_CHUNK_MASK  (HC_CHUNK_SIZE - 1)
#define HC_SLOT_SHIFT  16
#define HC_SLOT_SIZE   ((size_t)1 << HC_SLOT_SHIFT)   /* 64 KiB */
#define HC_NSLOTS      (HC_CHUNK_SIZE / HC_SLOT_SIZE) /* 64 */
#define HC_PAGE_SHIFT  12
#define HC_PAGE        ((size_t)1 << HC_PAGE_SHIFT) /* 4 KiB */
/* A LARGE chunk spans HC_LARGE_SLOTS chunk-sized slots (one mapping, one
 * header at its start), so runs of up to 8 MiB share pages with smaller ones
 * and reuse what they freed.  Runs start in the first slot only (run index
 * below HC_RUN_STARTS): every pointer handed out still masks to the header.
 * (large_churn, 2-core VM: 2 slots 194 MiB peak RSS; 3 or 4 slots 257 MiB,
 * since runs then spread over more pages.) */
#ifndef HC_LARGE_SLOTS
#define HC_LARGE_SLOTS 2
#endif
#define HC_LARGE_CHUNK (HC_LARGE_SLOTS * HC_CHUNK_SIZE) /* 8 MiB */
#define HC_NRUNS       (HC_LARGE_CHUNK / HC_PAGE)       /* 2048 */
#define HC_NRUNWORDS   (HC_NRUNS / 64)
#define HC_RUN_STARTS  (HC_CHUNK_SIZE / HC_PAGE) /* 1024 */

#define HC_SMALL_MAX 16384 /* largest size class in a small page */
/* Larger objects are huge: 8 MiB, or what a chunk's runs can hold. */
#ifndef HC_LARGE_WANT
#define HC_LARGE_WANT ((size_t)8 << 20)
#endif
#define HC_LARGE_ROOM      ((HC_NRUNS - HC_LARGE_HDR_RUNS) * HC_PAGE)
#define HC_LARGE_MAX       (HC_LARGE_ROOM < HC_LARGE_WANT ? HC_LARGE_ROOM : HC_LARGE_WANT)
#define HC_LARGE_ALIGN_MAX ((size_t)2 << 20) /* runs aligned beyond this are huge */
#define HC_NCLASSES        37
#define HC_MAX_REQUEST     ((size_t)PTRDIFF_MAX - 2 * HC_CHUNK_SIZE)

enum { HC_KIND_SMALL = 1, HC_KIND_LARGE = 2, HC_KIND_HUGE = 3 };
#define HC_MAGIC 0x68656170636b6e6bULL /* "heapckn k": chunk header check */

/* Thread identity: the thread pointer is unique among live threads and costs
 * one instruction.  0 marks "no owner" (abandoned chunk, arena, huge), 1 the
 * fallback heap, so neither can equal a live thread. */
static inline uintptr_t hc_thread_id(void)
{
	return (uintptr_t)__builtin_thread_pointer();
}
#define HC_TID_NONE     ((uintptr_t)0)
#define HC_TID_FALLBACK ((uintptr_t)1)
/* hc_tls_free_id (heap.c) of a thread that has the cache's lists, and of
 * one that has no heap: no chunk's owner */
#define HC_TID_CACHED ((uintptr_t)2)
#define HC_TID_NOHEAP ((uintptr_t)3)

/* ---- size classes ------------------------------------------------------ */

extern const uint32_t hc_class_size[HC_NCLASSES];
/* The class of every small size, by (n+7)>>3: one table (2 KiB) for all of
 * them, so that malloc's fast path takes every small size.  With a second
 * table for sizes above 1 KiB (by (n+127)>>7), the fast path took only the
 * first, and a program whose sizes fall on both sides of 1 KiB at random
 * (rptest: 8 B to 16 KiB) mispredicted the test on about every other
 * malloc, and sent every other one through the slow path. */
extern uint8_t hc_class_small[HC_SMALL_MAX / 8 + 1];

/* n <= HC_SMALL_MAX */
static inline unsigned hc_size_class(size_t n)
{
	return hc_class_small[(n + 7) >> 3];
}

/* ---- small pages ------------------------------------------------------- */

typedef struct hc_block_s {
	struct hc_block_s *next;
} hc_block_t;
typedef struct hc_heap_s hc_heap_t;
typedef struct hc_chunk_s hc_chunk_t;

/* Page flags (owner-written; FULL is also read by remote freers). */
#define HC_PG_FULL   0x01 /* on the heap's full list: a free must requeue it */
#define HC_PG_PINNED 0x02 /* direct page, alone in its class queue (pin_sync) */

/* A page's live count is its used blocks, plus one while it is PINNED, minus
 * HC_LIVE_FULL while it is FULL.  The local free fast path decrements it and
 * takes its slow branch exactly when the result is <= 0: the page emptied
 * (and is not a page to keep), or it sits on the full list.  So a
 * malloc/free ping-pong on a class's only page never leaves the fast path,
 * and one test stands for two. */
#define HC_LIVE_FULL ((int32_t)1 << 30)

/*
 * A page: one 64 KiB slot of a small chunk holding blocks of one class.
 * Invariants (owner = the thread whose id is chunk->owner):
 *  - free, live, flags, capacity and the queue links are touched by the
 *    owner only;
 *  - every block is in exactly one of: handed out (counted in live),
 *    pg->free, the page's remote list (hc_xpage_t's xfree), a thread's
 *    cache or the depot (heap.c; all three still counted in live), or the
 *    uncarved tail
 *    [capacity, reserved);
 *  - the remote list is pushed by any thread and emptied only by the owner;
 *  - flags & FULL <=> the page is on heap->full, not on a class queue;
 *  - flags & PINNED <=> heap->pinned[cls] == the page, which is then
 *    the only page of the class queue and heap->direct[cls] (or that
 *    is the head of the thread's cache of the class, hc_xhead_t).
 */
typedef struct hc_page_s {
	hc_block_t *free; /* owner's free list; malloc pops here      */
	int32_t live;     /* used blocks, biased: see HC_LIVE_FULL    */
	uint8_t flags;    /* HC_PG_*                                  */
	uint8_t cls;
	uint8_t in_use; /* slot holds a live page                   */
	uint8_t queued; /* on chunk->xpages (atomic)               */
	uint32_t block_size;
	uint32_t capacity;             /* blocks carved so far                     */
	uint32_t reserved;             /* blocks that fit in the slot              */
	uint32_t key;                  /* random: free-list links are encoded with
	                                  it (hc_link), set when the page is made  */
	uint64_t spare;                /* keeps a page to one cache line of its own */
	struct hc_page_s *next, *prev; /* class queue or full list             */
	struct hc_page_s *xnext;       /* link on chunk->xpages                    */
} hc_page_t;
_Static_assert(sizeof(hc_page_t) == 64, "a page is one cache line");

/* The owner counts a block handed out of pg (hc_live_inc) or freed into it
 * (hc_live_dec: true when the count is now <= 0, see HC_LIVE_FULL).  Other
 * threads read live with relaxed atomic loads, and only the owner writes
 * it: the store must be whole, the increment need not be atomic.  On
 * x86-64 each is one instruction on memory (an aligned 4-byte store is
 * seen whole); written in C, a relaxed store of live + 1 is a load, an add
 * and a store, and the sign test one more. */
static inline void hc_live_inc(hc_page_t *pg)
{
#if defined(__x86_64__)
	__asm__("addl $1, %0" : "+m"(pg->live));
#else
	/* unsigned: a thread cache's head counts its takes here, and may
	 * wrap (hc_xhead_t) */
	__atomic_store_n(&pg->live, (int32_t)((uint32_t)pg->live + 1), __ATOMIC_RELAXED);
#endif
}

static inline bool hc_live_dec(hc_page_t *pg)
{
#if defined(__x86_64__)
	bool le;
	__asm__("subl $1, %0" : "+m"(pg->live), "=@ccle"(le));
	return le;
#else
	int32_t live = pg->live - 1;
	__atomic_store_n(&pg->live, live, __ATOMIC_RELAXED);
	return live <= 0;
#endif
}

/*
 * What a thread that frees another thread's block reads and writes of its
 * page, apart from the page itself (chunk->xpage[slot]): the owner writes
 * its page's line on every malloc (free, live), and a consumer that read
 * or wrote that same line on every free (in_use, block_size, flags, the
 * remote list) took it from the owner each time.  block_size, cls and
 * in_use are the owner's copies of the page's, written when they change
 * (rarely: a page made or retired); xfree is
 * pushed by any thread and emptied only by the owner; it also carries the
 * owner's FULL flag, which the push that finds it takes (heap.c, xlist).
 */
typedef struct {
	uint64_t xfree;      /* other threads' frees (atomic): a count
	                        and the head's offset (heap.c, xlist) */
	uint32_t block_size; /* pg->block_size                           */
	uint8_t cls;         /* pg->cls                                  */
	uint8_t in_use;      /* pg->in_use (atomic)                      */
	uint8_t spare[2];
} hc_xpage_t;

/* ---- misuse checks ------------------------------------------------------
 *
 * HC_CHECKS selects the checks built in: none in libheapctl.so, all in
 * libheapctl-secure.so (tests/bench/fastpath measures them; the numbers and
 * why the default has none are in tests/bench/RESULTS.md and DESIGN.md):
 *   HC_CHECK_LINKS  a free block's link is stored encoded with the block's
 *                   address and its page's random key, and a decoded link
 *                   must point into the same 64 KiB page (or be NULL):
 *                   a stray write into a freed block cannot make malloc
 *                   return an arbitrary address, and is reported;
 *   HC_CHECK_START  a small block freed must start a carved block of its
 *                   page (free(p + 16) is refused, not queued for reuse);
 *   HC_CHECK_OURS   free, realloc and malloc_usable_size look a pointer's
 *                   4 MiB chunk up in a bitmap before they read any header,
 *                   so a static array or a random address is refused with a
 *                   message instead of faulting.
 * A failed check ends the process with one line, as glibc's do. */
#define HC_CHECK_LINKS 1
#define HC_CHECK_START 2
#define HC_CHECK_OURS  4
#define HC_CHECK_ALL   (HC_CHECK_LINKS | HC_CHECK_START | HC_CHECK_OURS)
#ifndef HC_CHECKS
#define HC_CHECKS 0
#endif
/* The thread cache (heap.c) links blocks of many pages in one list, which
 * the link check would refuse: the checked build frees every block back to
 * its page. */
#define HC_XCACHE (!(HC_CHECKS & HC_CHECK_LINKS))

/* Encode or decode (the same operation) the link stored in block at. */
static inline hc_block_t *hc_link(const hc_page_t *pg, const void *at, const hc_block_t *v)
{
	if (!(HC_CHECKS & HC_CHECK_LINKS))
		return (hc_block_t *)v;
	return (hc_block_t *)((uintptr_t)v ^ (uintptr_t)at ^ ((uintptr_t)pg->key << HC_SLOT_SHIFT));
}

/* A decoded link is NULL or a block of the same page as at. */
static inline bool hc_link_ok(const void *at, const hc_block_t *next)
{
	if (!(HC_CHECKS & HC_CHECK_LINKS))
		return true;
	return (((uintptr_t)next ^ (uintptr_t)at) >> HC_SLOT_SHIFT) == 0 || next == NULL;
}

HC_COLD __attribute__((noreturn)) void hc_bad_link(const void *at);

/* Reciprocals of the small classes: off * m >> 32 == off / size exactly for
 * every offset in a 64 KiB page (off * size < 2^32). */
extern uint32_t hc_class_recip[];

/*
 * Where a page's blocks start.  Were every page's first block at its 64 KiB
 * boundary, a thread's first objects of each class (the ones a program
 * keeps hottest) would share their low 12 address bits, and the CPU's
 * store-to-load check, which compares only those, stalls loads of one
 * behind stores to another (4K aliasing: a loop of increments over eight
 * such objects ran 25% slower than over glibc's or mimalloc's).  So block
 * 0 of class c sits at hc_class_off[c], one of 16 offsets 128 bytes apart
 * within the first 2 KiB (one for each of the 16 classes up to 448 bytes,
 * and again for the larger ones), rounded down to the class size's largest
 * power-of-two divisor, so that blocks stay as aligned as the class size
 * (memalign relies on it; 4 KiB and larger powers of two start at 0).
 * Blocks are carved from there to the slot's end, hc_class_wrap[c] of
 * them, then from 0 up to the offset (block i >= wrap is at
 * (i - wrap) * size).  A page then holds as many blocks as before, or one
 * fewer; classes of more than 1 KiB, where one block is a larger share,
 * keep the offset within what the slot leaves over and lose none
 * (heap.c, classes_init).
 */
extern uint16_t hc_class_off[HC_NCLASSES], hc_class_wrap[HC_NCLASSES];

/* The carve index of the block that starts at offset o of its slot, or
 * UINT32_MAX if no block of the page's layout starts there. */
static inline uint32_t hc_block_index(const hc_page_t *pg, uint32_t o)
{
	unsigned cls = pg->cls;
	uint32_t bs = pg->block_size, off = hc_class_off[cls];
	uint32_t d = o >= off ? o - off : o;
	uint32_t i = (uint32_t)(((uint64_t)d * hc_class_recip[cls]) >> 32);
	if (i * bs != d)
		return UINT32_MAX;
	if (o >= off)
		return i < hc_class_wrap[cls] ? i : UINT32_MAX;
	return o + bs <= off ? hc_class_wrap[cls] + i : UINT32_MAX;
}

/* p starts a carved block of its page. */
static inline bool hc_block_start(const hc_page_t *pg, const void *p)
{
	if (!(HC_CHECKS & HC_CHECK_START))
		return true;
	return hc_block_index(pg, (uint32_t)((uintptr_t)p & (HC_SLOT_SIZE - 1))) < pg->capacity;
}

/* One bit per 4 MiB of the address space below 2^47: set while that chunk
 * is a small or large chunk (for the life of the process: they are never
 * unmapped) or holds a live huge object (the chunk of its address). */
#define HC_ADDR_BITS 47
extern uint64_t hc_chunk_bits[];
void hc_chunk_init(void); /* once, before any chunk is mapped */

static inline bool hc_chunk_known(const void *c)
{
	if (!(HC_CHECKS & HC_CHECK_OURS))
		return true;
	uintptr_t i = (uintptr_t)c >> HC_CHUNK_SHIFT;
	return i < ((uintptr_t)1 << (HC_ADDR_BITS - HC_CHUNK_SHIFT)) &&
	    ((__atomic_load_n(&hc_chunk_bits[i >> 6], __ATOMIC_RELAXED) >> (i & 63)) & 1);
}

void hc_chunk_mark(const void *c, bool on);

/* Blocks handed out (or freed remotely and not yet collected), unbiased.
 * Exact for the owner; other threads may see a torn pair and must clamp. */
static inline int32_t hc_page_used(const hc_page_t *pg)
{
	uint8_t f = __atomic_load_n(&pg->flags, __ATOMIC_RELAXED);
	int32_t v = __atomic_load_n(&pg->live, __ATOMIC_RELAXED);
	return v - !!(f & HC_PG_PINNED) + ((f & HC_PG_FULL) ? HC_LIVE_FULL : 0);
}

/* ---- chunks ------------------------------------------------------------ */

/*
 * Header at the start of every chunk (and of every huge mapping).  The first
 * two words are all the free fast path reads.
 * Invariants: magic == HC_MAGIC; kind never changes while the chunk is out of
 * the cache; for SMALL, used_slots bit i <=> pages[i].in_use (bit 0 = header).
 */
/* A sampled object in a large run: its record, and the usable size it
 * reports if that is not the run's pages (a small request "promoted" to a
 * run so its free finds the record reports its size class, as jemalloc's
 * promoted objects do; 0 = the run's pages). */
typedef struct hc_run_prof_s {
	void *rec;
	size_t usize;
} hc_run_prof_t;

struct hc_chunk_s {
	uintptr_t owner; /* owning thread id, or HC_TID_*            */
	uint32_t kind;
	uint32_t nused; /* small: pages in use; large: runs in use  */
	uint64_t magic;
	hc_heap_t *heap;          /* small: owning heap (NULL if abandoned)   */
	struct hc_arena_s *arena; /* large: owning arena                      */
	hc_chunk_t *next, *prev;  /* heap's, arena's, cache, abandoned, orphans */
	hc_chunk_t *all_next;     /* registry of every chunk ever mapped      */
	uint64_t decay_epoch;     /* last decay epoch applied                 */
	uint32_t cached;          /* in the chunk cache (atomic)              */
	uint32_t purged;          /* cached and its pages returned to the OS  */
	size_t map_size;          /* whole mapping, header included: a chunk's
	                             size, or a huge object's mapping        */
	/* huge only (within the first page: the object may follow it) */
	size_t huge_offset; /* object = (char *)chunk + huge_offset     */
	size_t huge_usable;
	void *huge_prof;     /* sample record, if sampled                */
	uint32_t huge_pool;  /* in huge.c's pool of the dense mode: bits */
	uint32_t huge_fresh; /* its first object since it was mapped      */
	/* small only */
	hc_page_t *xpages; /* pages of FULL status that got xfrees     */
	uint64_t used_slots, dirty_new, dirty_old;
	/* large only (the scalars) */
	hc_run_prof_t *run_prof; /* sample record per run start, lazily made */
	size_t large_allocated;  /* bytes in live runs                       */
	size_t large_pages;      /* pages in live runs (header excluded)     */
	/* small only: here, before the large-only arrays, so that what a small
	 * chunk writes of its header lies in two OS pages, not three (4 KiB
	 * less resident per small chunk) */
	hc_page_t pages[HC_NSLOTS] __attribute__((aligned(64)));
	hc_xpage_t xpage[HC_NSLOTS] __attribute__((aligned(64)));
	/* large only (the maps) */
	uint64_t run_used[HC_NRUNWORDS], run_dirty_new[HC_NRUNWORDS], run_dirty_old[HC_NRUNWORDS],
	    run_nonzero[HC_NRUNWORDS];
	uint16_t run_len[HC_NRUNS]; /* pages in the run that starts here        */
};

#define HC_LARGE_HDR_RUNS ((sizeof(hc_chunk_t) + HC_PAGE - 1) / HC_PAGE)
/* The header pages a small chunk writes: none of the run lengths. */
#define HC_SMALL_HDR_BYTES ((offsetof(hc_chunk_t, run_len) + HC_PAGE - 1) & ~(size_t)(HC_PAGE - 1))
_Static_assert(HC_SMALL_HDR_BYTES <= 2 * HC_PAGE, "a small chunk's header spans two OS pages");

static inline hc_chunk_t *hc_chunk_of(const void *p)
{
	return (hc_chunk_t *)((uintptr_t)p & ~(uintptr_t)HC_CHUNK_MASK);
}

/* A block handed out loses the mark that its free left in its second word
 * (hc_free_mark, below), if it has one.  Without a branch:
 * a block of 8 bytes has no second word and has its first cleared instead,
 * which the caller has read the next link from.  A program that mixes
 * 8-byte blocks with larger ones at random (glibc's bench-malloc-thread:
 * half its sizes are 4-8 bytes) mispredicted a branch here on every other
 * malloc. */
static inline void hc_block_unmark(hc_block_t *b, uint32_t bs)
{
	((uintptr_t *)b)[bs > sizeof *b] = 0;
}

/* The second word of a freed block that is not on its page's own free
 * list: in a thread's cache (heap.c), the depot, or its page's remote list
 * (blocks of 16 bytes and more).  Set by the free; cleared when the block
 * is handed out again, or when a cache gives it back to its own thread's
 * page (a block taken back from the remote list keeps it until handed
 * out).  A free of a block that carries it is a double free, by the same
 * thread or by another.  Drawn from the per-process secret (heap.c), so no
 * program writes it by chance. */
extern uintptr_t hc_free_mark;

static inline void hc_block_mark(hc_block_t *b, uint32_t bs)
{
	if (bs > sizeof *b)
		((uintptr_t *)b)[1] = hc_free_mark;
}

static inline bool hc_block_marked(const void *p, uint32_t bs)
{
	return bs > sizeof(hc_block_t) && ((const uintptr_t *)p)[1] == hc_free_mark;
}

/* The part of a page that other threads' frees touch. */
static inline hc_xpage_t *hc_xpage(hc_page_t *pg)
{
	hc_chunk_t *c = hc_chunk_of(pg);
	return &c->xpage[pg - c->pages];
}

static inline void *hc_page_start(const hc_chunk_t *c, const hc_page_t *pg)
{
	return (char *)c + ((size_t)(pg - c->pages) << HC_SLOT_SHIFT);
}

/* ---- thread heaps ------------------------------------------------------ */

typedef struct hc_pq_s {
	hc_page_t *first, *last;
} hc_pq_t;

/*
 * The thread cache's list of one class (heap.c), laid out as the start of a
 * page, so that direct[cls] can point at it while it holds blocks: malloc's
 * fast path then takes them as it takes a page's, with no test of its own
 * for the cache (a mix of the thread's blocks and others' made that test
 * go either way at random: DESIGN.md).  The fast path reads free and
 * block_size and counts in live; nothing else of a page is read through
 * direct[cls] (heap.c keeps it so).  may_alias: the same bytes are read
 * and written as a page's and as this.
 */
typedef struct __attribute__((may_alias)) {
	hc_block_t *free; /* the list; hc_page_t.free                 */
	uint32_t taken;   /* blocks taken since the last flush
	                     (hc_page_t.live: malloc counts it)      */
	uint8_t limit;    /* its bound now (xcache_overflow)           */
	uint8_t pad[3];
	uint32_t block_size; /* hc_page_t.block_size                     */
	uint32_t pushed;     /* blocks put since the last flush         */
} hc_xhead_t;
_Static_assert(offsetof(hc_xhead_t, free) == offsetof(hc_page_t, free) &&
        offsetof(hc_xhead_t, taken) == offsetof(hc_page_t, live) &&
        offsetof(hc_xhead_t, block_size) == offsetof(hc_page_t, block_size),
    "the thread cache's head reads as a page's");

/* The number of blocks in the list: what was put less what was taken. */
static inline uint32_t hc_xhead_count(const hc_xhead_t *x)
{
	return x->pushed - x->taken;
}

static inline hc_page_t *hc_xhead_page(hc_xhead_t *x)
{
	return (hc_page_t *)(void *)x;
}

/*
 * A thread's heap.  direct[c] is never NULL: it is the first page of class
 * queue c (or a page just found full), the shared empty page, or while the
 * thread's cache of the class holds blocks, its head (hc_xhead_t),
 * so the malloc fast path needs no check.
 * Touched only by its thread (a shared heap: under its lock; see heap.c),
 * but for its chunks' slot maps and list, which other threads decay under
 * the heap's slot lock: the control thread while the thread makes no
 * pages, malloc_trim at once (heap.c, slots_lock).
 */
struct hc_heap_s {
	hc_page_t *direct[HC_NCLASSES];
	int64_t countdown; /* bytes until the next allocation event   */
	uintptr_t tid;
	hc_pq_t queue[HC_NCLASSES];     /* pages with (possibly) free blocks        */
	hc_page_t *pinned[HC_NCLASSES]; /* page holding the pin, or NULL       */
	hc_pq_t full;                   /* pages found full                        */
	hc_chunk_t *chunks;             /* small chunks owned                       */
	struct hc_arena_s *arena;       /* arena for large requests                */
	hc_heap_t *all_next;            /* registry                                */
	hc_heap_t *pool_next;           /* recycled heap structs                   */
	uint64_t decay_epoch;           /* last decay pass over its chunks (atomic) */
	uint64_t page_epoch;            /* decay epoch of its last new page (atomic) */
	int64_t period;                 /* countdown refill                        */
	uint32_t state;                 /* HC_HEAP_*                               */
	uint32_t slot_lock;             /* its chunks' slot maps and list (heap.c,
	                                   slots_lock): a futex word */
	uint32_t starter_bytes;         /* bytes of the starter blocks taken       */
	bool retired;                   /* a page was retired since page_new last
	                                   found no retired slot                   */
	uint8_t shared_index;           /* shared heap for starter blocks          */
	uint8_t starter[HC_NCLASSES];   /* blocks taken from it, per class     */
	/* blocks this thread freed, kept for its own next allocations of
	 * their class (heap.c, "the thread cache"): a list per class, made
	 * when the thread first keeps another thread's block (most threads
	 * never free one) or takes the depot's, and kept with the heap */
	hc_xhead_t *xhead;
};

enum { HC_HEAP_EMPTY = 0, HC_HEAP_LIVE = 1, HC_HEAP_DEAD = 2 };

/* A block of class cls from the thread's cache (heap.c), whose list
 * the caller saw not empty (not just a count: a list cut short by a write
 * after free must not be followed past its end), taken as malloc's fast
 * path takes it: for the slow path, when the countdown sent malloc there
 * (hc_small_cached) and for the sizes the fast path leaves. */
static inline hc_block_t *hc_xcache_take(hc_heap_t *h, unsigned cls)
{
	hc_xhead_t *x = &h->xhead[cls]; /* not NULL: the caller saw the list */
	hc_block_t *b = x->free;
	uint32_t bs = x->block_size;
	x->free = b->next;
	x->taken++;
	if (HC_DEBUG)
		memset(b, HC_JUNK_ALLOC, bs);
	else
		hc_block_unmark(b, bs);
	return b;
}

/* hc_xcache_take for an allocation, charged to the countdown; NULL, and
 * nothing taken, if the countdown is due (the slow path counts the
 * event and may sample the allocation). */
static inline hc_block_t *hc_xcache_charged(hc_heap_t *h, unsigned cls)
{
	int64_t left = h->countdown - (int64_t)hc_class_size[cls];
	if (left < 0)
		return NULL;
	h->countdown = left;
	return hc_xcache_take(h, cls);
}

/* b, a block of class cls (bs bytes, more than 8: the cache keeps no
 * smaller), into the calling thread's cache, marked as freed; malloc's
 * fast path takes from the list first (hc_xhead_t). */
static inline void hc_xcache_push(hc_heap_t *h, unsigned cls, uint32_t bs, hc_block_t *b)
{
	hc_xhead_t *x = &h->xhead[cls];
	if (HC_DEBUG && bs > sizeof *b)
		memset(b + 1, HC_JUNK_FREE, bs - sizeof *b);
	((uintptr_t *)b)[1] = hc_free_mark;
	b->next = x->free;
	x->free = b;
	x->pushed++;
	/* no pin_sync (heap.c): a test here of whether direct changes goes
	 * either way at random where the list often runs dry (larson_idle:
	 * 0.60 mispredicted branches a step against 0.36, 1.11 of the
	 * time), and what it would catch (direct was the empty page, or a
	 * page found full, beside a queue of one page, which would be
	 * pinned) waits for the queue's next change */
	h->direct[cls] = hc_xhead_page(x);
}

/* ---- arenas for large runs --------------------------------------------- */

typedef struct hc_arena_s {
	hc_mutex_t lock;
	hc_chunk_t *chunks; /* LARGE chunks of this arena              */
	uint64_t decay_epoch;
	unsigned index;
} hc_arena_t;

#define HC_MAX_ARENAS 16

/* ---- cross-file internals ---------------------------------------------- */

/* os.c */
void *hc_os_map(size_t size);                       /* NULL on failure */
void *hc_os_map_aligned(size_t size, size_t align); /* NULL on failure */
void hc_os_unmap(void *p, size_t size);
void hc_os_purge(void *p, size_t size);              /* MADV_DONTNEED   */
void hc_os_futex_wait(uint32_t *word, uint32_t val); /* private futex   */
void hc_os_futex_wake(uint32_t *word);               /* one waiter      */
void hc_os_thp_mode(unsigned mode);                  /* HC_THP_*        */
int hc_os_thp(void *p, size_t size);                 /* the mode's madvise; 0 or errno */
void hc_os_nohuge(void *p, size_t size);             /* MADV_NOHUGEPAGE */
void hc_os_hugepage(void *p, size_t size);           /* MADV_HUGEPAGE */
bool hc_os_thp_adaptive(void);                       /* thp:default, the system's madvise */
int hc_os_written_whole(const void *p, size_t size); /* 1, 0, -1: unknown */
uint64_t hc_os_now_ms(void);
void hc_diag(const char *msg); /* "<heapctl>: msg" */
void hc_diag_ptr(const char *msg, const void *p);
HC_COLD __attribute__((noreturn)) void hc_fatal_ptr(const char *msg, const void *p);
uint64_t hc_decay_epoch(void); /* now / half decay */

/* chunk.c */
hc_chunk_t *hc_chunk_get(unsigned kind, size_t *metadata_out); /* NULL on OOM */
void hc_chunk_put(hc_chunk_t *c);
void hc_chunk_drop_xpages(hc_chunk_t *c);
void hc_chunk_cache_decay(void);
void hc_chunk_cache_purge_now(void);     /* every cached chunk, now */
bool hc_chunk_reserve_drop(void);        /* unmap the fresh chunks in reserve */
void *hc_chunk_map_aligned(size_t size); /* chunk-aligned; the reserve given back if need be */
void hc_chunk_fork_prepare(void), hc_chunk_fork_parent(void), hc_chunk_fork_child(void);
hc_chunk_t *hc_chunk_registry(void);
size_t hc_chunk_cached(size_t *count, size_t *dirty); /* retained bytes */
/* epoch: hc_decay_epoch(), or HC_PURGE_ALL (hc_bits_purge_now's) */
#define HC_PURGE_ALL (~0ULL / 2)
void hc_bits_purge(hc_chunk_t *c, uint64_t *used, uint64_t *dnew, uint64_t *dold, uint64_t *nonzero, unsigned nwords,
    size_t unit, uint64_t epoch);
void hc_bits_purge_now(hc_chunk_t *c, uint64_t *used, uint64_t *dnew, uint64_t *dold, uint64_t *nonzero,
    unsigned nwords, size_t unit);

/* meta.c */
void hc_meta_fork_prepare(void), hc_meta_fork_parent(void), hc_meta_fork_child(void);
size_t hc_meta_bytes(void); /* hc_stats_add_metadata's sum (stats.metadata) */

/* chunk.c: mapped-bytes accounting for high-water (gdump) events */
void hc_mapped_add(intptr_t delta);
extern int hc_highwater_pending;

/* heap.c */
bool hc_heap_count(size_t usize);
extern __thread hc_heap_t *hc_tls_heap __attribute__((tls_model("initial-exec")));
extern __thread uintptr_t hc_tls_free_id __attribute__((tls_model("initial-exec")));
size_t hc_small_usize(size_t n, size_t align);
size_t hc_nalloc(size_t n, size_t align);
size_t hc_huge_usable_for(size_t n, size_t align);
size_t hc_resize_in_place(void *p, size_t n, size_t most);
void *hc_small_alloc_slow(size_t n, size_t align);
void *hc_small_cached(size_t n);
void hc_small_free_settle(hc_chunk_t *c, hc_page_t *pg, void *p);
void hc_small_free_slow(hc_chunk_t *c, void *p);
void hc_small_free_remote(hc_chunk_t *c, hc_page_t *pg, void *p);
void hc_heap_fork_prepare(void), hc_heap_fork_parent(void), hc_heap_fork_child(void);
void hc_heap_stats(hc_stats_t *st);
/* Each mapping of metadata (meta.c), under meta_lock. */
void hc_meta_ranges(bool (*fn)(void *arg, uintptr_t start, uintptr_t end, unsigned kind), void *arg);
void hc_heap_collect_self(void);
void hc_heap_init_begin(void), hc_heap_init_end(void);

/* lifecycle.c: start-up, fork and stop of both layers, in order */
void hc_init_slow(void);
extern int hc_inited;

/* large.c */
bool hc_large_fits(size_t n, size_t align); /* a run can hold it */
unsigned hc_arena_count(void);
/* Where a new run goes (large.c, run_consider). */
typedef enum {
	HC_PLACE_FIT,   /* the fewest unwritten pages, then the tightest gap */
	HC_PLACE_GROW,  /* realloc moved it: first such gap, at its start   */
	HC_PLACE_ASIDE, /* a small object promoted for a sample: at the end
	                   of a gap, never where the run before it would grow */
} hc_place_t;
void *hc_large_alloc(hc_heap_t *h, size_t n, size_t align, bool zero, hc_place_t place);
void hc_large_free(hc_chunk_t *c, void *p);
size_t hc_large_usable(const hc_chunk_t *c, const void *p);
bool hc_large_resize(hc_chunk_t *c, void *p, size_t n, size_t usize); /* true: in place */
void hc_large_set_prof(hc_chunk_t *c, void *p, void *rec, size_t usize);
void *hc_large_take_prof(hc_chunk_t *c, const void *p);
void *hc_large_peek_prof(hc_chunk_t *c, const void *p);
hc_arena_t *hc_arena_pick(void);
void hc_large_fork_prepare(void), hc_large_fork_parent(void), hc_large_fork_child(void);
void hc_large_stats(hc_stats_t *st);
void hc_large_decay_all(void);
void hc_large_purge_now(void);

/* huge.c */
void *hc_huge_alloc(size_t n, size_t align, bool zero);
void hc_huge_free(hc_chunk_t *c);
void *hc_huge_realloc(hc_chunk_t *c, size_t n); /* NULL: caller copies */
hc_chunk_t *hc_huge_header(const void *p);      /* for chunk-aligned p */
void hc_huge_fork_prepare(void), hc_huge_fork_parent(void), hc_huge_fork_child(void);
void hc_huge_stats(hc_stats_t *st);
/* Each live or cached huge mapping's range, under huge_lock. */
void hc_huge_ranges(bool (*fn)(void *arg, uintptr_t start, uintptr_t end, unsigned kind), void *arg);
void hc_huge_decay(void);
void hc_huge_purge_now(void);

/* api.c */
void *hc_alloc_aligned(size_t align, size_t n, bool zero);

#endif
