/*
 * allocator/hc_hooks.h - the boundary in the other direction: every call
 * the allocator makes out of its own layer.
 *
 * agent/ is the one implementation; tests/programs/agent_stub.c is another,
 * which links the allocator alone for its tests (make check runs the
 * allocator's tests on it).  Nothing else in allocator/ knows agent/
 * exists.  The order in which the hooks run at start-up, fork and exit is
 * written in lifecycle.c.
 */
#ifndef HC_HOOKS_H
#define HC_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Hooks agent/ implements; the allocator calls them from slow paths only,
 * with none of its locks held.
 *
 * hc_agent_init: once, from the first malloc; reads configuration.  Must
 *   not allocate.
 * hc_agent_start: once, from the library's constructor after init; may
 *   allocate and start threads (the control thread).
 * hc_agent_event: a thread's byte countdown ran out.  consumed is the bytes
 *   allocated since the countdown was last set, this allocation (usize
 *   bytes) included.  Returns the next countdown; sets *sample when this
 *   allocation is to be sampled.  In a fork child it may start the
 *   child's control thread (pthread_create, which allocates).
 * hc_agent_sample: p (promoted to whole pages so its free can find the
 *   record; usize bytes usable, what malloc_usable_size reports for it) is
 *   the sampled allocation; the countdown was charged `charged` bytes for
 *   it (its size class), which is what its probability of being sampled
 *   depends on.  Returns the record to keep with it, or NULL.
 * hc_agent_resize: a sampled object was resized by realloc to usize usable
 *   bytes; charged is the most the countdown has been charged for it.
 * hc_agent_unsample: a sampled object is being freed.
 * hc_agent_highwater: mapped memory reached a new high-water mark; false
 *   if the agent cannot take it now (it is asked again later).
 * hc_agent_thread_exit: the calling thread is exiting (from its heap's
 *   destructor; it may still allocate afterwards, from no heap of its own).
 * hc_agent_fork_*: around fork(), like the allocator's own handlers.
 */
void hc_agent_init(void);
void hc_agent_start(void);
int64_t hc_agent_event(uint64_t consumed, size_t usize, bool *sample);
void *hc_agent_sample(void *p, size_t usize, size_t charged);
void hc_agent_resize(void *rec, size_t usize, size_t charged);
void hc_agent_unsample(void *rec);
bool hc_agent_highwater(size_t mapped);
void hc_agent_thread_exit(void);
void hc_agent_fork_prepare(void);
void hc_agent_fork_parent(void);
void hc_agent_fork_child(void);

#endif
