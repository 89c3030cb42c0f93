/*
 * allocator/lifecycle.c - how the library starts, forks and stops: the one
 * place that says in what order each layer does so.
 *
 * Two layers: the allocator (allocator/) and the agent (agent/: settings,
 * profiler, mallctl, control segment), which the allocator reaches only
 * through the hooks of hc_hooks.h.  The agent calls the allocator (it
 * allocates, under its own locks), never the reverse, so the agent's locks
 * are outside the allocator's in the lock order (internal.h) and every
 * sequence below follows from that.
 *
 * Start (the first malloc, or the constructor if nothing allocates first):
 *   1. allocator: size classes; later allocations on this path go to the
 *      fallback heap (hc_heap_init_begin);
 *   2. agent: configuration (hc_agent_init; it must not allocate, and waits
 *      for the constructor if environ is not there yet);
 *   3. the fork handlers below, then the allocator's thread-exit key;
 *      from here on each thread gets its own heap;
 *   4. constructor: configuration again if 2 had to wait, then the agent's
 *      threads and segment (hc_agent_start, which may allocate).
 *
 * Fork: prepare takes the agent's locks, then the allocator's from the
 *   outermost in (heap, large, huge, chunk cache, metadata); the parent
 *   releases them in the reverse order, the child reinitialises them in
 *   the reverse order and then lets each layer repair what the other
 *   threads left (the allocator disowns their heaps first, since the agent
 *   may allocate in its child handler).
 *
 * Stop: a thread's exit runs the agent's hook, then abandons the thread's
 *   heap (heap.c's key destructor); process exit is the agent's (atexit:
 *   final dump, leak report); the allocator keeps working until the end,
 *   for destructors that free late.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "internal.h"

int hc_inited;

static void fork_prepare(void)
{
	hc_agent_fork_prepare();
	hc_heap_fork_prepare();
	hc_large_fork_prepare();
	hc_huge_fork_prepare();
	hc_chunk_fork_prepare();
	hc_meta_fork_prepare();
	if (HC_DEBUG)
		hc_lock_check_fork();
}

static void fork_parent(void)
{
	hc_meta_fork_parent();
	hc_chunk_fork_parent();
	hc_huge_fork_parent();
	hc_large_fork_parent();
	hc_heap_fork_parent();
	hc_agent_fork_parent();
}

static void fork_child(void)
{
	hc_meta_fork_child();
	hc_chunk_fork_child();
	hc_huge_fork_child();
	hc_large_fork_child();
	hc_heap_fork_child();
	hc_agent_fork_child();
}

void hc_init_slow(void)
{
	static hc_mutex_t init_lock = HC_MUTEX_INIT(HC_RANK_INIT, "init_lock");
	hc_mutex_lock(&init_lock);
	if (!__atomic_load_n(&hc_inited, __ATOMIC_ACQUIRE)) {
		hc_chunk_init();
		hc_heap_init_begin();
		hc_agent_init();
		pthread_atfork(fork_prepare, fork_parent, fork_child);
		hc_heap_init_end();
		__atomic_store_n(&hc_inited, 1, __ATOMIC_RELEASE);
	}
	hc_mutex_unlock(&init_lock);
}

void hc_init(void)
{
	if (!__atomic_load_n(&hc_inited, __ATOMIC_ACQUIRE))
		hc_init_slow();
}

/* Configuration is read when the library loads even if the program never
 * allocates before calling mallctl. */
__attribute__((constructor)) static void lifecycle_ctor(void)
{
	hc_init();
	hc_agent_init(); /* if the first malloc came before environ existed */
	hc_agent_start();
}
