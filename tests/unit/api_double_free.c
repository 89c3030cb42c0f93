/*
 * tests/unit/api_double_free.c - double frees are caught (the process stops
 * with a message naming the cause) from the shared heap, a thread's own,
 * across threads and from the thread caches.
 * The parts every api_*.c shares, and how to run it on plain glibc:
 * tests/lib/api.h.
 */
#include "../lib/api.h"

static void past_starters(size_t size);

/* A new thread's first blocks of a class come from a shared heap (a free
 * of one is a remote push); after 16 it has a page of its own. */
static void *double_free_shared_thread(void *arg)
{
	void *x = v_malloc(200); /* a new thread's heap: a shared page's block */
	v_free(x);
	v_free(x);
	return arg;
}

static void *double_free_own_thread(void *arg __attribute__((unused)))
{
	void *keep[16];
	for (int i = 0; i < 16; i++)
		keep[i] = v_malloc(200);
	void *x = v_malloc(200); /* the only block of the thread's own page */
	v_free(x);
	v_free(x);
	return keep[0];
}

static void double_free_child_shared(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, double_free_shared_thread, NULL) == 0)
		pthread_join(t, NULL);
}

static void double_free_child_own(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, double_free_own_thread, NULL) == 0)
		pthread_join(t, NULL);
}

/* The thread's own blocks freed a, c, a, in a page that holds others, by
 * a thread that has freed another thread's block: every free of such a
 * thread goes through its cache (not in the checked build), whose mark
 * catches the second free of a. */
static void *double_free_own_apart_thread(void *arg)
{
	past_starters(200);
	v_free(arg); /* the main thread's: the thread keeps it */
	void *a = v_malloc(200), *c = v_malloc(200), *keep = v_malloc(200);
	v_free(a);
	v_free(c);
	v_free(a);
	return keep;
}

static void double_free_child_own_apart(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, double_free_own_apart_thread, v_malloc(200)) == 0)
		pthread_join(t, NULL);
}

/* Another thread's blocks freed a, c, a (the second free of a is not next
 * to the first), then a block that another thread freed before it exited:
 * both used to loop the page's remote list and be caught when the owner
 * walked it; the mark that a remote free leaves in a block catches them at
 * the free (blocks of 16 bytes and more; see double_free_child_tiny). */
static void *double_free_apart_thread(void *arg)
{
	void **p = arg;
	own_heap();
	v_free(p[0]);
	v_free(p[1]);
	v_free(p[0]);
	return NULL;
}

static void double_free_child_apart(void)
{
	void *p[2] = { v_malloc(200), v_malloc(200) };
	in_thread(double_free_apart_thread, p);
}

static void *double_free_first_thread(void *arg)
{
	own_heap();
	v_free(*(void **)arg);
	return NULL;
}

static void double_free_child_threads(void)
{
	void *keep[2] = { v_malloc(200) }, *x = v_malloc(200);
	keep[1] = v_malloc(200); /* x's page stays in use */
	(void)keep;
	for (int i = 0; i < 2; i++) /* two threads, one after the other */
		in_thread(double_free_first_thread, &x);
}

/* A thread that only frees pushes other threads' blocks straight onto their
 * pages' remote lists. */
static void *free_two_thread(void *arg)
{
	void **p = arg;
	v_free(p[0]);
	v_free(p[1]);
	return NULL;
}

/* Allocate (and keep) past a class's shared starter blocks: the thread's
 * next blocks of it come from a page of its own. */
static void past_starters(size_t size)
{
	for (int i = 0; i < 17; i++)
		if (v_malloc(size) == NULL)
			break;
}

/* Blocks that another thread freed go back to their page's free list when
 * the owner takes its remote list (whole, without reading them), still
 * marked as freed: a second free of one before malloc hands it out again is
 * caught.  Here a and b are freed remotely, the owner allocates until it
 * gets b back (the list is newest first), and a, now on its free list, is
 * freed again by another thread. */
static void double_free_child_collected(void)
{
	past_starters(200);
	void *p[2] = { v_malloc(200), v_malloc(200) };
	in_thread(free_two_thread, p);
	for (long i = 0; i < 100000 && v_malloc(200) != p[1]; i++)
		;
	in_thread(double_free_first_thread, &p[0]);
}

/* 8-byte blocks have no room for the mark: a, c, a freed by a thread that
 * only frees loops their page's remote list, and the owner, which takes
 * back lists of that class by walking them, stops there. */
static void *free_aca_thread(void *arg)
{
	void **p = arg;
	v_free(p[0]);
	v_free(p[1]);
	v_free(p[0]);
	return NULL;
}

/* Two 8-byte blocks of a page of the thread's own, freed a, c, a by the
 * thread freer runs in; then allocate until the page runs dry, which takes
 * its remote list back. */
static void tiny_aca_then_drain(void *(*freer)(void *))
{
	past_starters(8);
	void *p[2] = { v_malloc(8), v_malloc(8) };
	in_thread(freer, p);
	for (long i = 0; i < 100000; i++)
		if (v_malloc(8) == NULL)
			break;
}

static void double_free_child_tiny(void)
{
	tiny_aca_then_drain(free_aca_thread);
}

/* The same by a thread that has allocated, and then allocates three more:
 * a thread's cache of other threads' blocks must not take 8-byte ones (it
 * would hand a out twice); they go to their page, whose owner stops. */
static void *free_aca_alloc_thread(void *arg)
{
	own_heap();
	free_aca_thread(arg);
	void *q[3] = { v_malloc(8), v_malloc(8), v_malloc(8) };
	if (q[0] == q[2] || q[0] == q[1] || q[1] == q[2])
		_exit(3); /* a block handed out twice */
	return NULL;
}

static void double_free_child_tiny_cached(void)
{
	tiny_aca_then_drain(free_aca_alloc_thread);
}

/* A second free of the only block of a page is caught, not absorbed: in a
 * page of the thread's own and in a shared one; so are a double free of
 * another thread's block with a free between, one by two threads, one
 * of a block that the owner took back from its page's remote list, and
 * (by a thread with the cache) one of the thread's own with a free
 * between.  A
 * loop of 8-byte blocks is caught as a corrupted list when the owner takes
 * it back. */
static void test_double_free_caught(void)
{
	if (!under_heapctl)
		return;
	const char *pre = getenv("LD_PRELOAD");
	bool cache = !(pre && strstr(pre, "heapctl-secure"));
	void (*child[])(void) = { double_free_child_own, double_free_child_shared, double_free_child_apart,
		double_free_child_threads, double_free_child_collected, double_free_child_own_apart };
	for (int i = 0; i < 5 + cache; i++) {
		char err[512];
		int st = hc_run_child(child[i], err, sizeof err);
		CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "double free %d: child status %#x", i,
		    st);
		CHECK(strstr(err, "double free") != NULL, "double free %d: stderr was \"%s\"", i, err);
	}
	void (*tiny[])(void) = { double_free_child_tiny, double_free_child_tiny_cached };
	for (int i = 0; i < 2; i++) {
		char err[512];
		int st = hc_run_child(tiny[i], err, sizeof err);
		CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "8-byte double free %d: child status %#x",
		    i, st);
		CHECK(strstr(err, "corrupted free list") != NULL, "8-byte double free %d: stderr was \"%s\"", i, err);
	}
}

int main(void)
{
	double t0 = api_start();
	RUN(test_double_free_caught);
	return api_finish("api_double_free", t0);
}
