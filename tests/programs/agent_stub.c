/*
 * tests/programs/agent_stub.c - the hooks of allocator/hc_hooks.h without the
 * agent: linked with allocator/ alone into libheapctl-alone.so, on which
 * make check runs the allocator's tests.  A failure there is the
 * allocator's own, whatever the profiler does.
 *
 * The stub still samples, often (a countdown of 64 KiB), so the promoted
 * path (sampled small objects in page runs, their sizes, realloc and free)
 * is exercised without the profiler: every record it hands out is checked
 * when it comes back, and a record freed twice or never handed out aborts.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../allocator/hc_hooks.h"

#define STUB_COUNTDOWN (64 << 10)
#define STUB_MAGIC     0x5354554252454331ull /* "STUBREC1" */

/* A record lives in a fixed pool: the hooks may not allocate. */
typedef struct {
	uint64_t magic;
	size_t usize;
} stub_rec_t;

#define NRECS 65536
static stub_rec_t recs[NRECS];
static unsigned next_rec; /* atomic */

static void die(const char *msg)
{
	ssize_t r = write(STDERR_FILENO, msg, __builtin_strlen(msg));
	(void)r;
	abort();
}

static stub_rec_t *check(void *rec, const char *hook)
{
	stub_rec_t *r = rec;
	if (r < recs || r >= recs + NRECS || r->magic != STUB_MAGIC)
		die(hook[0] == 'u' ? "agent_stub: unsample of a record never handed out, or twice\n"
		                   : "agent_stub: resize of a record never handed out, or freed\n");
	return r;
}

void hc_agent_init(void) {}
void hc_agent_start(void) {}

int64_t hc_agent_event(uint64_t consumed, size_t usize, bool *sample)
{
	(void)consumed;
	(void)usize;
	*sample = true;
	return STUB_COUNTDOWN;
}

void *hc_agent_sample(void *p, size_t usize, size_t charged)
{
	(void)p;
	(void)charged;
	/* records are not reused: when the pool is used up, the rest of the
	 * run's samples go unrecorded, as the agent's do when it has no memory */
	unsigned i = __atomic_fetch_add(&next_rec, 1, __ATOMIC_RELAXED);
	if (i >= NRECS)
		return NULL;
	recs[i].magic = STUB_MAGIC;
	recs[i].usize = usize;
	return &recs[i];
}

void hc_agent_resize(void *rec, size_t usize, size_t charged)
{
	(void)charged;
	check(rec, "resize")->usize = usize;
}

void hc_agent_unsample(void *rec)
{
	check(rec, "unsample")->magic = 0;
}

bool hc_agent_highwater(size_t mapped)
{
	(void)mapped;
	return true;
}

void hc_agent_thread_exit(void) {}
void hc_agent_fork_prepare(void) {}
void hc_agent_fork_parent(void) {}
void hc_agent_fork_child(void) {}
