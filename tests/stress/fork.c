/*
 * fork.c - fork() while other threads are inside the allocator.
 *
 * NWORKERS threads allocate/free continuously (private blocks, plus a shared
 * lock-protected pool through which blocks are freed by other threads than
 * the ones that allocated them).  Meanwhile the main thread forks NFORKS
 * times (and worker 0 forks a few times too).  Each child:
 *   - verifies and frees blocks of the shared pool, i.e. blocks allocated
 *     by parent threads that do not exist in the child, and reallocs some;
 *   - allocates and frees a lot itself, over all size ranges;
 *   - creates a new thread that allocates/frees and frees blocks handed over
 *     by the child's main thread; sometimes forks a grandchild while that
 *     thread runs;
 *   - verifies every pattern and _exits 0 (1 on any failed check).
 * The parent waits for each child with a timeout (a hung child is killed and
 * fails the test instead of hanging it), checks the exit status, and keeps
 * working afterwards.  Another thread of the parent calls malloc_trim in a
 * loop, each time while a thread allocates, frees and exits: purges of
 * the other threads' heaps and of the chunk cache, which let go of the
 * registry's and the cache's locks across their madvise calls, run beside
 * forks and heaps being abandoned and recycled.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/check.h"
#include "../lib/testutil.h"

#define NWORKERS        3
#define NFORKS          200
#define WORKER_FORKS    10
#define POOL_CAP        512
#define WSLOTS          256
#define CHILD_TIMEOUT_S 8.0

typedef struct {
	void *p;
	size_t size;
	uint64_t seed;
} blk_t;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static blk_t pool[POOL_CAP];
static int pool_count;

static int stop_workers;
static int abort_forking;
static unsigned long worker_iters[NWORKERS];
static int worker_forks_done;

static size_t pick_size(hc_rng *r)
{
	uint64_t x = hc_rng_below(r, 10000);
	if (x < 7500)
		return (size_t)hc_rng_below(r, 256);
	if (x < 9700)
		return (size_t)hc_rng_range(r, 256, 4096);
	if (x < 9980)
		return hc_rng_logsize(r, 4097, 256 * HC_KiB);
	return (size_t)hc_rng_range(r, 256 * HC_KiB, 3 * HC_MiB);
}

static int blk_alloc(blk_t *b, hc_rng *r, uint64_t tag)
{
	b->size = pick_size(r);
	switch (hc_rng_below(r, 4)) {
	case 0:
		b->p = calloc(1, b->size);
		if (b->p) {
			size_t nz = hc_find_nonzero(hc_launder(b->p), b->size);
			CHECK(nz == (size_t)-1, "calloc(1, %zu) not zeroed at %zu (pid %d)", b->size, nz,
			    (int)getpid());
		}
		break;
	case 1: {
		size_t al = (size_t)1 << hc_rng_range(r, 4, 13);
		b->p = NULL;
		if (posix_memalign(&b->p, al, b->size) != 0)
			b->p = NULL;
		CHECK(b->p == NULL || ((uintptr_t)b->p & (al - 1)) == 0, "posix_memalign(%zu) misaligned", al);
		break;
	}
	default: b->p = malloc(b->size); break;
	}
	CHECK(b->p != NULL, "allocation of %zu bytes failed (pid %d)", b->size, (int)getpid());
	if (!b->p)
		return 0;
	size_t u = malloc_usable_size(b->p);
	CHECK(u >= b->size, "usable %zu < size %zu (pid %d)", u, b->size, (int)getpid());
	b->seed = hc_seed(b->p, b->size, tag);
	hc_fill(b->p, b->size, b->seed);
	return 1;
}

static void blk_verify(const blk_t *b, const char *when)
{
	size_t bad = hc_verify(b->p, b->size, b->seed);
	CHECK(bad == (size_t)-1, "%s: block %p size %zu corrupted at offset %zu (pid %d)", when, b->p, b->size, bad,
	    (int)getpid());
}

static void blk_free(blk_t *b, const char *when)
{
	blk_verify(b, when);
	free(b->p);
	b->p = NULL;
}

static void blk_realloc(blk_t *b, hc_rng *r, uint64_t tag, const char *when)
{
	blk_verify(b, when);
	size_t newsize = pick_size(r) + 1;
	void *q = realloc(b->p, newsize);
	CHECK(q != NULL, "%s: realloc(%zu -> %zu) failed (pid %d)", when, b->size, newsize, (int)getpid());
	if (!q)
		return;
	size_t keep = b->size < newsize ? b->size : newsize;
	size_t bad = hc_verify(q, keep, b->seed);
	CHECK(bad == (size_t)-1, "%s: realloc(%zu -> %zu) lost contents at %zu (pid %d)", when, b->size, newsize, bad,
	    (int)getpid());
	b->p = q;
	b->size = newsize;
	b->seed = hc_seed(q, newsize, tag);
	hc_fill(q, newsize, b->seed);
}

/* a bounded amount of private allocation work; frees everything at the end */
static void local_work(hc_rng *r, int ops, uint64_t tagbase)
{
	enum { S = 128 };
	blk_t slots[S];
	memset(slots, 0, sizeof slots);
	for (int i = 0; i < ops; i++) {
		blk_t *b = &slots[hc_rng_below(r, S)];
		if (!b->p)
			blk_alloc(b, r, tagbase + (uint64_t)i);
		else if (hc_rng_below(r, 3) == 0)
			blk_realloc(b, r, tagbase + (uint64_t)i, "local realloc");
		else
			blk_free(b, "local free");
	}
	for (int i = 0; i < S; i++)
		if (slots[i].p)
			blk_free(&slots[i], "local final free");
}

/* wait for pid with a timeout; returns 1 if it exited with status 0 */
static int wait_child(pid_t pid, const char *who)
{
	double deadline = hc_now() + CHILD_TIMEOUT_S;
	for (;;) {
		int st = 0;
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			if (WIFEXITED(st)) {
				CHECK(WEXITSTATUS(st) == 0, "%s %d exited with status %d", who, (int)pid,
				    WEXITSTATUS(st));
				return WEXITSTATUS(st) == 0;
			}
			CHECK(0, "%s %d killed by signal %d (%s)", who, (int)pid, WTERMSIG(st),
			    strsignal(WTERMSIG(st)));
			return 0;
		}
		if (w < 0 && errno != EINTR) {
			CHECK(0, "waitpid(%d) failed: %s", (int)pid, strerror(errno));
			return 0;
		}
		if (hc_now() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			CHECK(0, "%s %d did not finish within %.0f s (deadlock after fork?); killed", who, (int)pid,
			    CHILD_TIMEOUT_S);
			__atomic_store_n(&abort_forking, 1, __ATOMIC_RELAXED);
			return 0;
		}
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
}

/* ---------------- child side ---------------- */

typedef struct {
	blk_t *handed; /* blocks allocated by the child's main thread */
	int nhanded;
	blk_t *pool_part; /* blocks allocated by parent threads */
	int npool_part;
	uint64_t seed;
} child_thread_arg;

static void *child_thread(void *argp)
{
	child_thread_arg *a = argp;
	hc_rng r;
	hc_rng_init(&r, a->seed);
	for (int i = 0; i < a->nhanded; i++)
		blk_free(&a->handed[i], "child thread: free of block from child main thread");
	for (int i = 0; i < a->npool_part; i++)
		if (a->pool_part[i].p)
			blk_free(&a->pool_part[i], "child thread: free of parent-thread block");
	local_work(&r, 600, 0xc000000);
	return NULL;
}

/* The agent's locks in the fork protocol: with sampling on, a thread
 * refreshes mallctl's statistics snapshot (its lock) without pause and
 * writes a profile every few milliseconds (the stack table's, the dump
 * names' and the event ring's locks) while the main thread forks, and every
 * child does both, and frees sampled blocks of the parent's threads.  A
 * lock left held across fork hangs the child (wait_child fails it); a
 * debug build also checks that fork takes them all in the lock order. */
static int have_ctl;
static char dump_dir[64];

static void ctl_read(void)
{
	if (!have_ctl)
		return;
	uint64_t epoch = 1;
	size_t allocated = 0, sz = sizeof allocated;
	hc_mallctl("epoch", NULL, NULL, &epoch, sizeof epoch);
	hc_mallctl("stats.allocated", &allocated, &sz, NULL, 0);
}

static void ctl_dump(const char *who)
{
	if (!have_ctl || !dump_dir[0])
		return;
	int r = hc_mallctl("prof.dump", NULL, NULL, NULL, 0);
	CHECK(r == 0, "%s: prof.dump returned %d", who, r);
}

static void *ctl_worker(void *arg)
{
	(void)arg;
	for (unsigned i = 0; !__atomic_load_n(&stop_workers, __ATOMIC_RELAXED); i++) {
		ctl_read();
		if (i % 64 == 0)
			ctl_dump("parent");
	}
	return NULL;
}

/* Sampling on, dumps into a directory of our own (removed at the end). */
static void ctl_start_sampling(void)
{
	strcpy(dump_dir, "/tmp/hc-fork-XXXXXX");
	if (mkdtemp(dump_dir) == NULL) {
		dump_dir[0] = 0;
		return;
	}
	char prefix[96];
	snprintf(prefix, sizeof prefix, "%s/f", dump_dir);
	const char *pp = prefix;
	bool on = true;
	CHECK(hc_mallctl("prof.prefix", NULL, NULL, &pp, sizeof pp) == 0, "prof.prefix");
	CHECK(hc_mallctl("prof.active", NULL, NULL, &on, sizeof on) == 0, "prof.active");
}

static int ctl_remove_dumps(void)
{
	if (!dump_dir[0])
		return 0;
	char cmd[128];
	int n = 0;
	snprintf(cmd, sizeof cmd, "ls %s | wc -l", dump_dir);
	FILE *f = popen(cmd, "r");
	if (f != NULL) {
		if (fscanf(f, "%d", &n) != 1)
			n = 0;
		pclose(f);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dump_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fork: could not remove %s\n", dump_dir);
	return n;
}

static void child_main(int from_pool, uint64_t seed, int depth)
{
	hc_check_failed_count = 0; /* the parent's failures are not the child's */
	hc_rng r;
	hc_rng_init(&r, seed);
	ctl_read();
	ctl_dump("child");

	/* blocks allocated by parent threads before the fork */
	blk_t *mine = NULL;
	int nmine = 0;
	if (from_pool) {
		/* pool_mu was held across fork() by this thread: state is consistent */
		nmine = pool_count;
		mine = malloc(sizeof(blk_t) * (size_t)(nmine + 1));
		CHECK(mine != NULL, "child: malloc of pool copy failed");
		if (!mine)
			_exit(1);
		memcpy(mine, pool, sizeof(blk_t) * (size_t)nmine);
		pool_count = 0;
		pthread_mutex_unlock(&pool_mu);
		/* realloc a few, free half here, give the rest to the new thread */
		for (int i = 0; i < nmine; i++) {
			if (i % 5 == 0)
				blk_realloc(&mine[i], &r, 0xa000000 + (uint64_t)i,
				    "child: realloc of parent-thread block");
			if (i % 2 == 0)
				blk_free(&mine[i], "child: free of parent-thread block");
		}
	}

	local_work(&r, 600, 0xb000000);

	enum { H = 100 };
	blk_t *handed = calloc(H, sizeof(blk_t));
	CHECK(handed != NULL, "child: calloc failed");
	if (!handed)
		_exit(1);
	for (int i = 0; i < H; i++)
		blk_alloc(&handed[i], &r, 0xd000000 + (uint64_t)i);

	child_thread_arg arg = { handed, H, mine, nmine, seed ^ 0x55 };
	pthread_t th;
	int e = pthread_create(&th, NULL, child_thread, &arg);
	CHECK(e == 0, "child: pthread_create failed: %d", e);
	if (e == 0) {
		if (depth == 0 && seed % 10 == 0) {
			/* fork a grandchild while the child's thread is allocating */
			pid_t g = fork();
			if (g == 0) {
				hc_check_failed_count = 0;
				hc_rng gr;
				hc_rng_init(&gr, seed + 1);
				local_work(&gr, 300, 0xe000000);
				_exit(hc_check_failures() ? 1 : 0);
			}
			CHECK(g > 0, "child: fork of grandchild failed: %s", strerror(errno));
			if (g > 0)
				wait_child(g, "grandchild");
		}
		local_work(&r, 300, 0xf000000);
		pthread_join(th, NULL);
	} else {
		for (int i = 0; i < H; i++)
			free(handed[i].p);
	}
	free(handed);
	free(mine);
	_exit(hc_check_failures() ? 1 : 0);
}

/* ---------------- parent side ---------------- */

/* A thread that writes 256 KiB of blocks and frees them, for the trimmer. */
static void *short_lived(void *argp)
{
	uint64_t seed = (uint64_t)(uintptr_t)argp;
	void *p[64];
	for (int i = 0; i < 64; i++) {
		p[i] = malloc(4096);
		CHECK(p[i] != NULL, "short-lived thread: malloc failed");
		if (p[i])
			memset(p[i], (int)(seed + (uint64_t)i) & 0xff, 4096);
	}
	for (int i = 0; i < 64; i++) {
		const unsigned char *b = p[i];
		CHECK(b == NULL || (b[0] == ((seed + (uint64_t)i) & 0xff) && b[4095] == b[0]),
		    "short-lived thread: block %d changed under a purge", i);
		free(p[i]);
	}
	return NULL;
}

static void *trimmer(void *argp)
{
	(void)argp;
	for (uint64_t n = 0; !__atomic_load_n(&stop_workers, __ATOMIC_RELAXED); n++) {
		/* the trim while the thread writes, frees and exits: the pass
		 * may hold its heap's slot lock as it abandons its chunks */
		pthread_t t;
		int made = pthread_create(&t, NULL, short_lived, (void *)(uintptr_t)n) == 0;
		malloc_trim(0);
		if (made)
			pthread_join(t, NULL);
		struct timespec ts = { 0, 2 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *worker(void *argp)
{
	int id = (int)(intptr_t)argp;
	hc_rng r;
	hc_rng_init(&r, 1000 + (uint64_t)id);
	blk_t slots[WSLOTS];
	memset(slots, 0, sizeof slots);
	uint64_t tag = (uint64_t)id << 40;
	unsigned long it = 0;
	while (!__atomic_load_n(&stop_workers, __ATOMIC_RELAXED)) {
		it++;
		uint64_t x = hc_rng_below(&r, 100);
		if (x < 45) {
			blk_t *b = &slots[hc_rng_below(&r, WSLOTS)];
			if (!b->p)
				blk_alloc(b, &r, tag++);
			else if (x < 10)
				blk_realloc(b, &r, tag++, "worker realloc");
			else
				blk_free(b, "worker free");
		} else if (x < 73) {
			blk_t b;
			if (!blk_alloc(&b, &r, tag++))
				continue;
			pthread_mutex_lock(&pool_mu);
			int ok = pool_count < POOL_CAP;
			if (ok)
				pool[pool_count++] = b;
			pthread_mutex_unlock(&pool_mu);
			if (!ok)
				blk_free(&b, "worker free (pool full)");
		} else {
			blk_t b = { NULL, 0, 0 };
			pthread_mutex_lock(&pool_mu);
			if (pool_count > 0) {
				int i = (int)hc_rng_below(&r, (uint64_t)pool_count);
				b = pool[i];
				pool[i] = pool[--pool_count];
			}
			pthread_mutex_unlock(&pool_mu);
			if (b.p)
				blk_free(&b, "worker free of pool block (cross-thread)");
		}
		if (id == 0 && (it % 8000) == 0 && worker_forks_done < WORKER_FORKS &&
		    !__atomic_load_n(&abort_forking, __ATOMIC_RELAXED)) {
			worker_forks_done++;
			pid_t pid = fork();
			if (pid == 0)
				child_main(0, 0x77700 + (uint64_t)worker_forks_done * 10 + 1, 0);
			CHECK(pid > 0, "fork from worker failed: %s", strerror(errno));
			if (pid > 0)
				wait_child(pid, "child of worker");
		}
	}
	worker_iters[id] = it;
	for (int i = 0; i < WSLOTS; i++)
		if (slots[i].p)
			blk_free(&slots[i], "worker final free");
	return NULL;
}

int main(void)
{
	double t0 = hc_now();
	if (!hc_malloc_is_heapctl() && !hc_allow_no_mallctl())
		CHECK(0, "malloc does not resolve to libheapctl (set HC_TEST_ALLOW_NO_MALLCTL=1 to run against glibc)");

	have_ctl = hc_ctl_init();
	if (have_ctl)
		ctl_start_sampling();
	pthread_t ctl_th;
	int ctl_started = have_ctl && pthread_create(&ctl_th, NULL, ctl_worker, NULL) == 0;
	pthread_t trim_th;
	int trim_started = pthread_create(&trim_th, NULL, trimmer, NULL) == 0;
	CHECK(trim_started, "pthread_create of the trimmer failed");
	pthread_t th[NWORKERS];
	for (int i = 0; i < NWORKERS; i++) {
		int e = pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
		CHECK(e == 0, "pthread_create failed: %d", e);
		if (e)
			return 1;
	}

	hc_rng r;
	hc_rng_init(&r, 31337);
	int forks = 0, ok_children = 0;
	int nforks = NFORKS;
	if (getenv("HC_FORK_N"))
		nforks = atoi(getenv("HC_FORK_N"));
	for (int i = 0; i < nforks && !__atomic_load_n(&abort_forking, __ATOMIC_RELAXED); i++) {
		/* the parent's main thread also allocates between forks */
		local_work(&r, 200, 0x1000000 + (uint64_t)i * 1000);
		pthread_mutex_lock(&pool_mu);
		pid_t pid = fork();
		if (pid == 0)
			child_main(1, (uint64_t)i * 10, 0); /* does not return */
		pthread_mutex_unlock(&pool_mu);
		CHECK(pid > 0, "fork failed: %s", strerror(errno));
		if (pid < 0)
			break;
		forks++;
		ok_children += wait_child(pid, "child");
	}

	__atomic_store_n(&stop_workers, 1, __ATOMIC_SEQ_CST);
	unsigned long iters = 0;
	if (ctl_started)
		pthread_join(ctl_th, NULL);
	if (trim_started)
		pthread_join(trim_th, NULL);
	for (int i = 0; i < NWORKERS; i++) {
		pthread_join(th[i], NULL);
		iters += worker_iters[i];
	}
	for (int i = 0; i < pool_count; i++)
		blk_free(&pool[i], "parent final free of pool block");
	pool_count = 0;

	/* the parent keeps working normally afterwards, including new threads */
	local_work(&r, 20000, 0x2000000);
	__atomic_store_n(&stop_workers, 0, __ATOMIC_SEQ_CST);
	pthread_t th2[2];
	int started[2];
	for (int i = 0; i < 2; i++) {
		started[i] = pthread_create(&th2[i], NULL, worker, (void *)(intptr_t)(i + 1)) == 0;
		CHECK(started[i], "pthread_create after forking failed");
	}
	local_work(&r, 20000, 0x3000000);
	__atomic_store_n(&stop_workers, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 2; i++)
		if (started[i])
			pthread_join(th2[i], NULL);
	for (int i = 0; i < pool_count; i++)
		blk_free(&pool[i], "parent final free of pool block");

	int dumps = ctl_remove_dumps();
	CHECK(!have_ctl || dumps > forks, "%d profiles written by the parent and %d children", dumps, forks);
	printf(
	    "fork: %d forks from main (%d children ok), %d from a worker, %lu worker iterations, %d profiles, %.2f s\n",
	    forks, ok_children, worker_forks_done, iters, dumps, hc_now() - t0);
	return hc_check_finish("fork");
}
