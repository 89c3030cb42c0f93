/*
 * allocator/hc_lock.h - the library's locks, and the one order they are
 * taken in.
 *
 * Every lock of both layers has a rank.  A thread that holds a lock takes
 * only locks of a higher rank, or of the same rank when it is one of a
 * family taken in index order (the shared heaps, the arenas).  The agent
 * calls the allocator, never the reverse (the allocator's hooks run with
 * none of its locks held), so the agent's locks come first.  Outermost
 * first:
 *
 *   rank  lock                       file              what it guards
 *    1    init_lock                  lifecycle.c       start-up, once
 *    2    pause_lock                 agent/control.c   stopping the control thread
 *    3    unwind_fork_lock (rwlock)  agent/unwind.c    unwinding vs fork
 *    4    name_lock                  agent/dump.c      dump sequence numbers
 *    5    hw_lock                    agent/dump.c      high-water gate
 *    6    hc_prof_lock               agent/state.c     stack table, prof.prefix
 *    7    ev_lock                    agent/events.c    event ring writers, last dump
 *    8    snapshot_lock              agent/ctl.c       mallctl statistics snapshot
 *    9    shared[i].lock             heap.c            shared heaps (index order)
 *   10    purge_lock                 heap.c            a pass over other threads' heaps
 *   11    heaps_lock                 heap.c            heap registry and pool
 *   12    abandoned_lock             heap.c            abandoned chunks
 *   13    arenas[i].lock             large.c           large runs (index order)
 *   14    huge_lock                  huge.c            huge mappings and cache
 *   15    cache_purge_lock           chunk.c           a purge of the chunk cache
 *   16    cache_lock                 chunk.c           chunk cache
 *   17    map_lock                   chunk.c           fresh chunks, mapped in batches
 *   18    meta_lock                  meta.c            metadata memory
 *
 * Not in the table: each thread heap's slot lock (heap.c, slots_lock), a
 * futex word whose holder takes no other lock; a thread other than the
 * heap's takes it only with trylock, under purge_lock (10) and heaps_lock
 * (11), and lets go of heaps_lock while it holds it.
 *
 * Known nestings that fix it: pause_lock's holder waits for the control
 * thread to end, and that thread takes ranks 4 to 18; a dump's name (4)
 * reads prof.prefix (6); the high-water gate (5) snapshots the peak profile
 * (6); everything the agent
 * does under its locks may allocate (9 and up); a pass over the other
 * threads' heaps (10) picks each under the registry's lock (11); an arena
 * (13) or the huge list (14) takes chunks from the cache (16) or fresh ones
 * (17), and all of them metadata (18); a purge of the cache (15) takes the cache's lock
 * for each chunk it takes and gives back.
 *
 * fork: lifecycle.c's prepare handler takes every lock from rank 2 up in
 * this order, the parent releases them, the child reinitialises them; a
 * debug build checks that prepare follows the order like any other path,
 * and that it took every lock in use (tests/stress/fork runs on one in
 * make check: a lock left out of the protocol fails it at the first fork).
 * init_lock is not held across fork: it is taken once, before the fork
 * handlers exist.
 *
 * In a debug build (HC_DEBUG) each thread keeps the locks it holds, and
 * taking one of lower rank than a lock held ends the process with both
 * names; and fork's prepare handler ends it, naming the lock, if any lock
 * ever taken is not held then (a lock missing from the fork protocol).  Release builds pay nothing but the two words of
 * the name.
 */
#ifndef HC_LOCK_H
#define HC_LOCK_H

#include <pthread.h>
#include <stdint.h>

#ifndef HC_DEBUG
#define HC_DEBUG 0
#endif

enum {
	HC_RANK_INIT = 1,
	HC_RANK_PAUSE,
	HC_RANK_UNWIND,
	HC_RANK_DUMP_NAME,
	HC_RANK_HIGHWATER,
	HC_RANK_BUILD_ID, /* agent/dump.c's build id cache */
	HC_RANK_PROF,
	HC_RANK_EVENTS,
	HC_RANK_SNAPSHOT,
	HC_RANK_INJECT_SLOTS,
	HC_RANK_INJECT_TABLE, /* agent/inject/shim.c */
	HC_RANK_SHARED,
	HC_RANK_PURGE, /* heap.c's pass over the other threads' heaps */
	HC_RANK_HEAPS,
	HC_RANK_ABANDONED,
	HC_RANK_DEPOT,
	HC_RANK_ARENA,
	HC_RANK_HUGE,
	HC_RANK_CHUNK_PURGE, /* chunk.c's purge of the chunk cache */
	HC_RANK_CHUNK_CACHE,
	HC_RANK_CHUNK_MAP, /* chunk.c's batches of fresh chunks */
	HC_RANK_META,
};

/* A lock's identity for the order check. */
typedef struct hc_lockid_s {
	const char *name;
	unsigned rank;
	int seen; /* debug: in the registry of locks in use */
} hc_lockid_t;

typedef struct hc_mutex_s {
	pthread_mutex_t m;
	hc_lockid_t id;
} hc_mutex_t;

/* a braced initializer as a macro body, which clang-format 14 takes for a block */
/* clang-format off */
#define HC_MUTEX_INIT(rank, name) { PTHREAD_MUTEX_INITIALIZER, { name, rank, 0 } }
/* clang-format on */

/* What the fork handlers write: every lock they take and the state a
 * child resets.  A page written after fork is a copy-on-write fault, in the
 * parent for an unlock and in the child for a reinit, at every fork; spread
 * over the files' data these were seven pages of the child's and four of
 * the parent's.  Marked with this, they share one section, which the
 * library's link starts on a page of its own (allocator/fork_data.ld). */
#define HC_FORK_DATA __attribute__((section("hc_fork_data")))

/* The order check (lock.c): before taking id, after taking it, and when
 * releasing or reinitialising it.  Debug builds only. */
void hc_lock_check(const hc_lockid_t *id);
void hc_lock_held(hc_lockid_t *id);
void hc_lock_released(const hc_lockid_t *id);
/* fork's prepare handler, at its end: every lock ever taken (but
 * init_lock) is held by this thread, or the process ends naming the one
 * that is missing from the fork protocol. */
void hc_lock_check_fork(void);

static inline void hc_mutex_init(hc_mutex_t *l, unsigned rank, const char *name)
{
	pthread_mutex_init(&l->m, NULL);
	l->id.name = name;
	l->id.rank = rank;
	l->id.seen = 0;
}

/* A busy-wait's pause: on x86 the instruction that says so to the core. */
static inline void hc_cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/*
 * A lock that is taken spins a while before it sleeps.  The locks threads
 * share most are held for a few stores (the depot, the chunk cache), and a
 * thread that went to sleep on one is woken by the holder's unlock, which
 * the kernel treats as a hand-off: it put the woken thread on the waker's
 * CPU, behind the waker, though the other CPU stood idle, and the two took
 * turns of 4 ms there for up to 30 ms (rptest's two workers, one of which
 * then stopped taking the blocks the other handed it: 10-17 MiB live in
 * place of 4.5).  HC_MUTEX_SPIN tries, each after HC_MUTEX_PAUSES pauses
 * (3 to 50 microseconds in all, by the CPU), and then the kernel's wait.
 */
enum { HC_MUTEX_SPIN = 64, HC_MUTEX_PAUSES = 16 };

void hc_mutex_lock_slow(hc_mutex_t *l);

static inline void hc_mutex_lock(hc_mutex_t *l)
{
	if (HC_DEBUG)
		hc_lock_check(&l->id);
	if (pthread_mutex_trylock(&l->m) != 0)
		hc_mutex_lock_slow(l);
	if (HC_DEBUG)
		hc_lock_held(&l->id);
}

/* 0 if taken.  Never waits, so it cannot break the order; it is recorded
 * as held all the same. */
static inline int hc_mutex_trylock(hc_mutex_t *l)
{
	int r = pthread_mutex_trylock(&l->m);
	if (HC_DEBUG && r == 0)
		hc_lock_held(&l->id);
	return r;
}

static inline void hc_mutex_unlock(hc_mutex_t *l)
{
	if (HC_DEBUG)
		hc_lock_released(&l->id);
	pthread_mutex_unlock(&l->m);
}

/* In a fork child: the lock as new, and no longer held by this thread. */
static inline void hc_mutex_reinit(hc_mutex_t *l)
{
	if (HC_DEBUG)
		hc_lock_released(&l->id);
	pthread_mutex_init(&l->m, NULL);
}

#endif
