/*
 * stress.c - multi-threaded allocation stress with full corruption checking.
 *
 * NTHREADS threads each run a bounded number of random operations on a
 * private array of slots (live blocks):
 *   malloc, calloc (verified zero), realloc(NULL, n), posix_memalign,
 *   aligned_alloc and memalign (random power-of-two alignment up to 64 KiB,
 *   verified), realloc growth/shrink chains (prefix verified), free, and
 *   hand-off of blocks to other threads through per-thread lock-protected
 *   inboxes (the receiver verifies, then frees or adopts/reallocs them).
 * Sizes are skewed: mostly < 1 KiB, some up to 16 KiB, ~2% 16 KiB-1 MiB and
 * a few 1-4 MiB.  Every block's whole usable size is filled with a pattern
 * derived from (address, usable size, per-block tag) and verified completely
 * before it is freed or realloc'ed, so overlapping blocks or corrupted
 * contents are detected.  malloc_usable_size >= requested size is checked for
 * every allocation.
 *
 * Environment: HC_STRESS_SCALE=<float> scales the operation count (default 1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/check.h"
#include "../lib/testutil.h"

#define NTHREADS    8
#define NSLOTS      1024
#define DEFAULT_OPS 250000
#define INBOX_CAP   512

typedef struct {
	void *p;
	size_t size;   /* requested size */
	size_t usable; /* malloc_usable_size at allocation time */
	uint64_t tag;
	uint32_t owner; /* allocating thread */
} blk_t;

typedef struct {
	pthread_mutex_t mu;
	blk_t items[INBOX_CAP];
	unsigned head, count;
} inbox_t;

enum {
	OP_MALLOC,
	OP_CALLOC,
	OP_REALLOC_NULL,
	OP_POSIX_MEMALIGN,
	OP_ALIGNED_ALLOC,
	OP_MEMALIGN,
	OP_FREE,
	OP_REALLOC,
	OP_HANDOFF,
	OP_RECV_FREE,
	OP_RECV_ADOPT,
	OP_COUNT
};
static const char *const op_names[OP_COUNT] = { "malloc", "calloc", "realloc(NULL)", "posix_memalign", "aligned_alloc",
	"memalign", "free", "realloc", "handoff", "recv+free", "recv+adopt" };

typedef struct {
	int id;
	hc_rng rng;
	blk_t slots[NSLOTS];
	uint64_t next_tag;
	unsigned long ops[OP_COUNT];
	unsigned long long bytes;
	size_t max_size;
} thread_state_t;

static inbox_t inboxes[NTHREADS];
static thread_state_t *states[NTHREADS];
static pthread_barrier_t done_barrier;
static long ops_per_thread;

static size_t pick_size(hc_rng *r)
{
	uint64_t x = hc_rng_below(r, 10000);
	if (x < 5500)
		return (size_t)hc_rng_below(r, 129); /* 0..128 */
	if (x < 8500)
		return (size_t)hc_rng_range(r, 129, 1024);
	if (x < 9800)
		return hc_rng_logsize(r, 1025, 16383);
	if (x < 9995)
		return hc_rng_logsize(r, 16384, HC_MiB);
	return (size_t)hc_rng_range(r, HC_MiB + 1, 4 * HC_MiB);
}

static void fill_blk(thread_state_t *ts, blk_t *b)
{
	b->tag = ((uint64_t)ts->id << 48) ^ ts->next_tag++;
	hc_fill(b->p, b->usable, hc_seed(b->p, b->usable, b->tag));
}

static int verify_blk(const blk_t *b, const char *when)
{
	size_t u = malloc_usable_size(b->p);
	CHECK(u == b->usable, "%s: usable size of live block %p (size %zu) changed %zu -> %zu", when, b->p, b->size,
	    b->usable, u);
	size_t bad = hc_verify(b->p, b->usable, hc_seed(b->p, b->usable, b->tag));
	CHECK(bad == (size_t)-1,
	    "%s: block %p size %zu usable %zu tag %#llx (allocated by thread %u) corrupted at offset %zu", when, b->p,
	    b->size, b->usable, (unsigned long long)b->tag, b->owner, bad);
	return bad == (size_t)-1;
}

static int check_new(thread_state_t *ts, blk_t *b, const char *what, size_t align)
{
	CHECK(b->p != NULL, "%s(%zu) returned NULL (errno %d)", what, b->size, errno);
	if (b->p == NULL)
		return 0;
	b->usable = malloc_usable_size(b->p);
	b->owner = (uint32_t)ts->id;
	CHECK(b->usable >= b->size, "%s(%zu): malloc_usable_size %zu < size", what, b->size, b->usable);
	if (b->usable < b->size)
		b->usable = b->size; /* keep going; the block is suspect anyway */
	if (align == 0)
		align = b->size >= 16 ? 16 : 8;
	CHECK(((uintptr_t)b->p & (align - 1)) == 0, "%s(%zu) = %p not aligned to %zu", what, b->size, b->p, align);
	ts->bytes += b->size;
	if (b->size > ts->max_size)
		ts->max_size = b->size;
	return 1;
}

static void do_alloc(thread_state_t *ts, blk_t *b)
{
	hc_rng *r = &ts->rng;
	b->size = pick_size(r);
	uint64_t x = hc_rng_below(r, 100);
	size_t align = 0;
	int op;
	if (x < 55) {
		op = OP_MALLOC;
		b->p = malloc(b->size);
	} else if (x < 70) {
		op = OP_CALLOC;
		size_t nmemb = 1, sz = b->size;
		if (sz % 16 == 0 && sz) {
			nmemb = sz / 16;
			sz = 16;
		}
		b->p = calloc(nmemb, sz);
		if (b->p) {
			size_t nz = hc_find_nonzero(hc_launder(b->p), b->size);
			CHECK(nz == (size_t)-1, "calloc(%zu, %zu) = %p not zeroed at offset %zu", nmemb, sz, b->p, nz);
		}
	} else if (x < 78) {
		op = OP_REALLOC_NULL;
		b->p = realloc(NULL, b->size);
	} else if (x < 88) {
		op = OP_POSIX_MEMALIGN;
		align = (size_t)1 << hc_rng_range(r, 3, 16);
		void *p = NULL;
		int e = posix_memalign(&p, align, b->size);
		CHECK(e == 0, "posix_memalign(%zu, %zu) returned %d", align, b->size, e);
		b->p = e == 0 ? p : NULL;
	} else if (x < 95) {
		op = OP_ALIGNED_ALLOC;
		align = (size_t)1 << hc_rng_range(r, 0, 16);
		b->p = aligned_alloc(align, b->size);
	} else {
		op = OP_MEMALIGN;
		align = (size_t)1 << hc_rng_range(r, 3, 16);
		b->p = memalign(align, b->size);
	}
	ts->ops[op]++;
	if (!check_new(ts, b, op_names[op], align)) {
		b->p = NULL;
		return;
	}
	fill_blk(ts, b);
}

static void do_realloc(thread_state_t *ts, blk_t *b, const char *when)
{
	hc_rng *r = &ts->rng;
	int steps = 1 + (int)hc_rng_below(r, 4);
	for (int s = 0; s < steps; s++) {
		verify_blk(b, when);
		size_t newsize;
		uint64_t x = hc_rng_below(r, 10);
		if (x < 4) /* grow */
			newsize = b->size + 1 + hc_rng_below(r, b->size / 2 + 64);
		else if (x < 8) /* shrink */
			newsize = b->size ? (size_t)hc_rng_below(r, b->size) : 0;
		else
			newsize = pick_size(r);
		if (newsize > 6 * HC_MiB)
			newsize = pick_size(r);
		uint64_t oldseed = hc_seed(b->p, b->usable, b->tag);
		size_t oldsize = b->size;
		uintptr_t oldp = (uintptr_t)b->p;
		void *q = realloc(b->p, newsize);
		ts->ops[OP_REALLOC]++;
		if (q == NULL) {
			if (newsize == 0) {
				/* realloc(p, 0) freed p (glibc behaviour) */
				b->p = NULL;
				return;
			}
			CHECK(q != NULL, "realloc(%#lx, %zu -> %zu) returned NULL", (unsigned long)oldp, oldsize,
			    newsize);
			return; /* b still holds the old (intact) block */
		}
		size_t keep = oldsize < newsize ? oldsize : newsize;
		size_t bad = hc_verify(q, keep, oldseed);
		CHECK(bad == (size_t)-1, "realloc(%#lx, %zu -> %zu) = %p: contents lost at offset %zu (tag %#llx)",
		    (unsigned long)oldp, oldsize, newsize, q, bad, (unsigned long long)b->tag);
		b->p = q;
		b->size = newsize;
		if (!check_new(ts, b, "realloc", 0)) {
			b->p = NULL;
			return;
		}
		fill_blk(ts, b);
	}
}

static void free_blk(blk_t *b, const char *when)
{
	verify_blk(b, when);
	free(b->p);
	b->p = NULL;
}

static void drain_inbox(thread_state_t *ts)
{
	inbox_t *ib = &inboxes[ts->id];
	blk_t local[INBOX_CAP];
	unsigned n = 0;
	pthread_mutex_lock(&ib->mu);
	while (ib->count > 0) {
		local[n++] = ib->items[ib->head];
		ib->head = (ib->head + 1) % INBOX_CAP;
		ib->count--;
	}
	pthread_mutex_unlock(&ib->mu);
	for (unsigned i = 0; i < n; i++) {
		blk_t *b = &local[i];
		/* adopt into a free slot sometimes: later realloc/free of a foreign block */
		if (hc_rng_below(&ts->rng, 10) < 3) {
			unsigned s = (unsigned)hc_rng_below(&ts->rng, NSLOTS);
			if (ts->slots[s].p == NULL) {
				verify_blk(b, "adopt (cross-thread)");
				ts->slots[s] = *b;
				ts->ops[OP_RECV_ADOPT]++;
				if (hc_rng_below(&ts->rng, 2) == 0)
					do_realloc(ts, &ts->slots[s], "realloc of adopted block");
				continue;
			}
		}
		ts->ops[OP_RECV_FREE]++;
		free_blk(b, "free (cross-thread)");
	}
}

static void handoff(thread_state_t *ts, blk_t *b)
{
	int target = (int)hc_rng_below(&ts->rng, NTHREADS - 1);
	if (target >= ts->id)
		target++;
	inbox_t *ib = &inboxes[target];
	int sent = 0;
	pthread_mutex_lock(&ib->mu);
	if (ib->count < INBOX_CAP) {
		ib->items[(ib->head + ib->count) % INBOX_CAP] = *b;
		ib->count++;
		sent = 1;
	}
	pthread_mutex_unlock(&ib->mu);
	if (sent) {
		ts->ops[OP_HANDOFF]++;
		b->p = NULL;
	} else {
		ts->ops[OP_FREE]++;
		free_blk(b, "free (inbox full)");
	}
}

static void *thread_main(void *arg)
{
	thread_state_t *ts = arg;
	for (long op = 0; op < ops_per_thread; op++) {
		if ((op & 63) == 0)
			drain_inbox(ts);
		blk_t *b = &ts->slots[hc_rng_below(&ts->rng, NSLOTS)];
		if (b->p == NULL) {
			do_alloc(ts, b);
			continue;
		}
		uint64_t x = hc_rng_below(&ts->rng, 100);
		if (x < 50) {
			ts->ops[OP_FREE]++;
			free_blk(b, "free");
		} else if (x < 80) {
			do_realloc(ts, b, "realloc");
		} else {
			verify_blk(b, "handoff");
			handoff(ts, b);
		}
	}
	pthread_barrier_wait(&done_barrier); /* nobody sends after this */
	drain_inbox(ts);
	for (int i = 0; i < NSLOTS; i++)
		if (ts->slots[i].p)
			free_blk(&ts->slots[i], "final free");
	return NULL;
}

int main(void)
{
	double t0 = hc_now();
	double scale = 1.0;
	const char *sc = getenv("HC_STRESS_SCALE");
	if (sc && atof(sc) > 0)
		scale = atof(sc);
	ops_per_thread = (long)(DEFAULT_OPS * scale);
	if (ops_per_thread < 1000)
		ops_per_thread = 1000;

	if (!hc_malloc_is_heapctl() && !hc_allow_no_mallctl())
		CHECK(0, "malloc does not resolve to libheapctl (set HC_TEST_ALLOW_NO_MALLCTL=1 to run against glibc)");

	pthread_barrier_init(&done_barrier, NULL, NTHREADS);
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		pthread_mutex_init(&inboxes[i].mu, NULL);
		states[i] = calloc(1, sizeof(thread_state_t));
		CHECK(states[i] != NULL, "calloc of thread state failed");
		if (!states[i])
			return 1;
		states[i]->id = i;
		states[i]->next_tag = 1;
		hc_rng_init(&states[i]->rng, 0xabcdef00u + (uint64_t)i);
	}
	for (int i = 0; i < NTHREADS; i++) {
		int e = pthread_create(&th[i], NULL, thread_main, states[i]);
		CHECK(e == 0, "pthread_create failed: %d", e);
		if (e)
			return 1;
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);

	unsigned long tot[OP_COUNT] = { 0 };
	unsigned long long bytes = 0;
	size_t max_size = 0;
	for (int i = 0; i < NTHREADS; i++) {
		for (int o = 0; o < OP_COUNT; o++)
			tot[o] += states[i]->ops[o];
		bytes += states[i]->bytes;
		if (states[i]->max_size > max_size)
			max_size = states[i]->max_size;
		CHECK(inboxes[i].count == 0, "inbox %d not empty at exit", i);
		free(states[i]);
	}
	unsigned long all = 0;
	for (int o = 0; o < OP_COUNT; o++)
		all += tot[o];
	printf("stress: %d threads x %ld steps, %lu allocator ops, %.1f GiB requested, max block %zu bytes, %.2f s\n",
	    NTHREADS, ops_per_thread, all, (double)bytes / (1 << 30), max_size, hc_now() - t0);
	for (int o = 0; o < OP_COUNT; o++)
		printf("  %-15s %lu\n", op_names[o], tot[o]);
	return hc_check_finish("stress");
}
