/*
 * churn.c - thread churn: thousands of short-lived threads.
 *
 * WAVES waves; each wave runs JOINED_PER_WAVE joinable threads (BATCH at a
 * time) plus DETACHED_PER_WAVE detached threads.  Every thread allocates a
 * mix of sizes (small, large, a few huge; malloc/calloc/realloc/
 * posix_memalign), verifies and frees about half, frees blocks that threads
 * of the previous wave left behind (cross-thread frees of blocks whose
 * owning thread has exited), and leaves some of its own blocks behind for
 * the next wave or for the main thread.  All blocks carry a verified pattern.
 *
 * Memory-reuse check (not a timing check): after waves 2 and 10 the main
 * thread frees all leftovers and reads stats.active and stats.resident; the
 * wave-10 values must be < 2x + 16 MiB of the wave-2 values, i.e. memory
 * cached by exited threads must be reused, not accumulated.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../lib/check.h"
#include "../lib/testutil.h"

#define WAVES             10
#define JOINED_PER_WAVE   320
#define DETACHED_PER_WAVE 32
#define BATCH             16
#define PER_THREAD        160
#define LEAVE_PER_THREAD  20
#define TAKE_PER_THREAD   15
#define LEFT_CAP          16384

typedef struct {
	void *p;
	size_t size;
	uint64_t seed;
	int wave;
} blk_t;

static pthread_mutex_t left_mu = PTHREAD_MUTEX_INITIALIZER;
static blk_t leftovers[LEFT_CAP];
static int left_count;

static int detached_done;
static unsigned long total_allocs, total_cross_frees;

typedef struct {
	int wave;
	int idx;
} targ_t;

static size_t pick_size(hc_rng *r)
{
	uint64_t x = hc_rng_below(r, 1000);
	if (x < 750)
		return (size_t)hc_rng_below(r, 512);
	if (x < 960)
		return (size_t)hc_rng_range(r, 512, 16383);
	if (x < 999)
		return hc_rng_logsize(r, 16384, 512 * HC_KiB);
	return (size_t)hc_rng_range(r, HC_MiB, 2 * HC_MiB);
}

static void verify_free(blk_t *b, const char *when)
{
	size_t bad = hc_verify(b->p, b->size, b->seed);
	CHECK(bad == (size_t)-1, "%s: block %p size %zu (wave %d) corrupted at offset %zu", when, b->p, b->size,
	    b->wave, bad);
	free(b->p);
	b->p = NULL;
}

static void thread_work(int wave, int idx)
{
	hc_rng r;
	hc_rng_init(&r, (uint64_t)wave * 100000 + (uint64_t)idx);
	blk_t blk[PER_THREAD];
	unsigned long allocs = 0, cross = 0;
	for (int i = 0; i < PER_THREAD; i++) {
		blk_t *b = &blk[i];
		b->size = pick_size(&r);
		b->wave = wave;
		switch (hc_rng_below(&r, 5)) {
		case 0:
			b->p = calloc(1, b->size);
			if (b->p) {
				size_t nz = hc_find_nonzero(hc_launder(b->p), b->size);
				CHECK(nz == (size_t)-1, "calloc(1, %zu) not zeroed at offset %zu", b->size, nz);
			}
			break;
		case 1:
			if (posix_memalign(&b->p, 64, b->size) != 0)
				b->p = NULL;
			break;
		case 2: {
			/* grow through realloc */
			size_t first = b->size / 3 + 1;
			void *p = malloc(first);
			CHECK(p != NULL, "malloc(%zu) failed", first);
			if (!p) {
				b->p = NULL;
				break;
			}
			memset(p, 0x3d, first);
			b->p = realloc(p, b->size + 1);
			if (b->p) {
				unsigned char *c = b->p;
				for (size_t k = 0; k < first; k++)
					if (c[k] != 0x3d) {
						CHECK(0, "realloc(%zu -> %zu) lost contents at offset %zu", first,
						    b->size + 1, k);
						break;
					}
				b->size += 1;
			} else {
				free(p);
			}
			break;
		}
		default: b->p = malloc(b->size); break;
		}
		CHECK(b->p != NULL, "allocation of %zu bytes failed in wave %d thread %d", b->size, wave, idx);
		if (!b->p)
			continue;
		allocs++;
		CHECK(malloc_usable_size(b->p) >= b->size, "usable size %zu < %zu", malloc_usable_size(b->p), b->size);
		b->seed = hc_seed(b->p, b->size, ((uint64_t)wave << 32) | ((uint64_t)idx << 12) | (uint64_t)i);
		hc_fill(b->p, b->size, b->seed);
	}
	/* free about half of our own blocks */
	for (int i = 0; i < PER_THREAD; i++)
		if (blk[i].p && hc_rng_below(&r, 2) == 0)
			verify_free(&blk[i], "own free");

	/* free blocks left by threads that have exited (earlier wave/threads) */
	blk_t taken[TAKE_PER_THREAD];
	int ntaken = 0;
	pthread_mutex_lock(&left_mu);
	while (ntaken < TAKE_PER_THREAD && left_count > 0) {
		int i = (int)hc_rng_below(&r, (uint64_t)left_count);
		taken[ntaken++] = leftovers[i];
		leftovers[i] = leftovers[--left_count];
	}
	pthread_mutex_unlock(&left_mu);
	for (int i = 0; i < ntaken; i++) {
		verify_free(&taken[i], "cross-thread free of leftover block");
		cross++;
	}

	/* leave some of ours behind, free the rest */
	int left = 0;
	for (int i = 0; i < PER_THREAD; i++) {
		if (!blk[i].p)
			continue;
		if (left < LEAVE_PER_THREAD) {
			pthread_mutex_lock(&left_mu);
			int ok = left_count < LEFT_CAP;
			if (ok)
				leftovers[left_count++] = blk[i];
			pthread_mutex_unlock(&left_mu);
			if (ok) {
				left++;
				continue;
			}
		}
		verify_free(&blk[i], "own free (end)");
	}
	__atomic_add_fetch(&total_allocs, allocs, __ATOMIC_RELAXED);
	__atomic_add_fetch(&total_cross_frees, cross, __ATOMIC_RELAXED);
}

static void *joined_thread(void *p)
{
	targ_t *a = p;
	thread_work(a->wave, a->idx);
	return NULL;
}

static targ_t detached_args[WAVES][DETACHED_PER_WAVE];

static void *detached_thread(void *p)
{
	targ_t *a = p;
	thread_work(a->wave, a->idx);
	__atomic_add_fetch(&detached_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* main thread frees leftovers from waves older than `keep_wave` */
static void main_free_old(int keep_wave)
{
	pthread_mutex_lock(&left_mu);
	int i = 0;
	while (i < left_count) {
		if (leftovers[i].wave < keep_wave) {
			blk_t b = leftovers[i];
			leftovers[i] = leftovers[--left_count];
			verify_free(&b, "main thread free of leftover block");
			total_cross_frees++;
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&left_mu);
}

int main(void)
{
	double t0 = hc_now();
	int have_ctl = hc_ctl_init();
	if (!hc_malloc_is_heapctl() && !hc_allow_no_mallctl())
		CHECK(0, "malloc does not resolve to libheapctl (set HC_TEST_ALLOW_NO_MALLCTL=1 to run against glibc)");

	size_t active2 = 0, resident2 = 0, active10 = 0, resident10 = 0;
	int threads = 0;
	pthread_attr_t det;
	pthread_attr_init(&det);
	pthread_attr_setdetachstate(&det, PTHREAD_CREATE_DETACHED);

	for (int wave = 1; wave <= WAVES; wave++) {
		/* detached threads of this wave run alongside the joined batches */
		int det_started = 0;
		int det_target = __atomic_load_n(&detached_done, __ATOMIC_SEQ_CST);
		for (int i = 0; i < DETACHED_PER_WAVE; i++) {
			detached_args[wave - 1][i].wave = wave;
			detached_args[wave - 1][i].idx = JOINED_PER_WAVE + i;
			pthread_t t;
			int e = pthread_create(&t, &det, detached_thread, &detached_args[wave - 1][i]);
			CHECK(e == 0, "pthread_create (detached) failed: %d", e);
			if (e == 0)
				det_started++;
			if (i % 4 == 3) {
				/* interleave with joined batches */
				pthread_t th[BATCH];
				targ_t args[BATCH];
				int n = 0;
				for (int k = 0; k < BATCH; k++) {
					args[k].wave = wave;
					args[k].idx = (i / 4) * BATCH + k;
					if (pthread_create(&th[n], NULL, joined_thread, &args[k]) == 0)
						n++;
					else
						CHECK(0, "pthread_create failed");
				}
				for (int k = 0; k < n; k++)
					pthread_join(th[k], NULL);
				threads += n;
			}
		}
		det_target += det_started;
		/* remaining joined threads of the wave */
		int done_joined = (DETACHED_PER_WAVE / 4) * BATCH;
		while (done_joined < JOINED_PER_WAVE) {
			pthread_t th[BATCH];
			targ_t args[BATCH];
			int n = 0;
			for (int k = 0; k < BATCH && done_joined + k < JOINED_PER_WAVE; k++) {
				args[k].wave = wave;
				args[k].idx = done_joined + k;
				if (pthread_create(&th[n], NULL, joined_thread, &args[k]) == 0)
					n++;
				else
					CHECK(0, "pthread_create failed");
			}
			for (int k = 0; k < n; k++)
				pthread_join(th[k], NULL);
			done_joined += BATCH;
			threads += n;
		}
		/* wait for the detached threads (hang guard, not a timing check) */
		double deadline = hc_now() + 15.0;
		while (__atomic_load_n(&detached_done, __ATOMIC_SEQ_CST) < det_target) {
			if (hc_now() > deadline) {
				CHECK(0, "detached threads of wave %d did not finish (hang?)", wave);
				return hc_check_finish("churn");
			}
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
		threads += det_started;
		/* give exiting detached threads a moment to finish their teardown */
		struct timespec ts = { 0, 20000000 };
		nanosleep(&ts, NULL);

		/* the main thread frees what the previous wave left behind; before
		 * a measurement it frees everything, so that the live set is the
		 * same (empty) at both measurement points */
		int measure = have_ctl && (wave == 2 || wave == WAVES);
		main_free_old(measure ? wave + 1 : wave);

		if (measure) {
			/* free pages go back to the system first, as after their
			 * decay time: resident then counts what is held, not how far
			 * decay has got (which made this check depend on timing) */
			CHECK(hc_mallctl("arena.4096.purge", NULL, NULL, NULL, 0) == 0, "arena.4096.purge failed");
			CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
			size_t act = hc_stat("stats.active");
			size_t res = hc_stat("stats.resident");
			size_t alloc = hc_stat("stats.allocated");
			printf("churn: after wave %d: allocated %zu active %zu resident %zu\n", wave, alloc, act, res);
			if (wave == 2) {
				active2 = act;
				resident2 = res;
			} else {
				active10 = act;
				resident10 = res;
			}
		}
	}
	pthread_attr_destroy(&det);

	if (have_ctl) {
		CHECK(active10 < 2 * active2 + 16 * HC_MiB,
		    "stats.active grew from %zu after wave 2 to %zu after wave %d (memory of exited threads not reused?)",
		    active2, active10, WAVES);
		CHECK(resident10 < 2 * resident2 + 16 * HC_MiB,
		    "stats.resident grew from %zu after wave 2 to %zu after wave %d (memory of exited threads not reused?)",
		    resident2, resident10, WAVES);
	}
	main_free_old(WAVES + 1);
	CHECK(left_count == 0, "leftovers remain: %d", left_count);

	printf("churn: %d threads in %d waves, %lu allocations, %lu cross-thread frees, %.2f s\n", threads, WAVES,
	    total_allocs, total_cross_frees, hc_now() - t0);
	return hc_check_finish("churn");
}
