/*
 * misuse - the allocator's answers to programs that break the rules
 * (allocator/internal.h, HC_CHECKS): each misuse runs in a child, which
 * must end with SIGABRT and one line on stderr naming the fault, not a
 * SIGSEGV, a hang, or a later allocation that overlaps a live object or
 * lands at an address the program wrote.
 *
 *   free(p + 16) of a live block         "not the start of a block"
 *   ... freed by another thread          (the same, on the remote path)
 *   a write into a freed block's link    "corrupted free list"
 *   ... of a block freed remotely        (found when the owner collects)
 *   free() of a random address           "not from this allocator"
 *   free() of a static array             (the same)
 *   free() inside a huge object          (the same)
 *   realloc() and malloc_usable_size()
 *     of a static array                  "not from this allocator"
 *   malloc_usable_size(p + 8)            "not the start of a block"
 *
 * Linked with libheapctl-secure.so, the build with every check on; the
 * default libheapctl.so has none of them (tests/bench/RESULTS.md: why).
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/check.h"
#include "../lib/testutil.h"

/* the compiler must not see through these (it knows what free does) */
static void *(*volatile v_malloc)(size_t) = malloc;
static void (*volatile v_free)(void *) = free;
static void *(*volatile v_realloc)(void *, size_t) = realloc;
static size_t (*volatile v_usable)(void *) = malloc_usable_size;

static char static_array[256];

static void run(const char *name, void (*fn)(void), const char *want)
{
	char err[1024];
	int st = hc_run_child(fn, err, sizeof err);
	size_t n = strlen(err);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "%s: child %s %d, stderr \"%s\"", name,
	    WIFSIGNALED(st) ? "killed by signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), err);
	CHECK(strstr(err, want) != NULL && strchr(err, '\n') == err + n - 1,
	    "%s: stderr \"%s\", expected one line with \"%s\"", name, err, want);
}

static void interior_free(void)
{
	char *p = v_malloc(64);
	v_free(p + 16);
	/* without the check, this would hand out p + 16, inside p */
	char *q = v_malloc(64);
	printf("%p %p\n", (void *)p, (void *)q);
}

static void *remote_free_interior_thread(void *arg)
{
	v_free((char *)arg + 8);
	return NULL;
}

static void interior_free_remote(void)
{
	char *p = v_malloc(200);
	pthread_t t;
	pthread_create(&t, NULL, remote_free_interior_thread, p);
	pthread_join(t, NULL);
}

/* A thread's first 16 blocks of a class come from a shared heap; these
 * tests are about its own pages. */
static void own_page(size_t size)
{
	for (int i = 0; i < 16; i++)
		(void)v_malloc(size);
}

static void link_overwrite(void)
{
	own_page(64);
	void **p = v_malloc(64);
	void *keep = v_malloc(64); /* so p's page stays the direct one */
	v_free(p);
	*p = (void *)0x4141414141414141ull; /* a stray write after free */
	void *a = v_malloc(64);             /* pops p, whose link is garbage */
	void *b = v_malloc(64);
	printf("%p %p %p\n", keep, a, b);
}

static void *remote_free_thread(void *arg)
{
	v_free(arg);
	return NULL;
}

static void link_overwrite_remote(void)
{
	void *keep[512];
	for (int i = 0; i < 512; i++)
		keep[i] = v_malloc(48);
	void **victim = keep[100];
	pthread_t t;
	pthread_create(&t, NULL, remote_free_thread, victim);
	pthread_join(t, NULL);
	*victim = (void *)0x4242424242424242ull; /* into the remote list */
	/* the owner collects remote frees when its page runs out */
	for (int i = 0; i < 100000; i++)
		(void)v_malloc(48);
}

static void random_free(void)
{
	v_free((void *)(uintptr_t)0x123456789ab0ull);
}

static void static_free(void)
{
	v_free(static_array + 16);
}

static void huge_interior_free(void)
{
	char *p = v_malloc(64 << 20);
	v_free(p + (20 << 20));
}

static void static_realloc(void)
{
	(void)!v_realloc(static_array, 100);
}

/* realloc of a large run answers a size within its pages without the
 * arena's lock: a freed run, or a page inside a live one, must still be
 * caught */
static void large_realloc_freed(void)
{
	char *p = v_malloc(64 << 10);
	v_free(p);
	(void)!v_realloc(p, 65000);
}

static void large_realloc_interior(void)
{
	char *p = v_malloc(64 << 10);
	(void)!v_realloc(p + 8192, 50000);
}

/* a second free of a large object whose emptied chunk went back to the
 * cache (the arena keeps its other chunk): the chunk has no arena then */
static void large_free_cached(void)
{
	char *a = v_malloc(7 << 20), *b = v_malloc(7 << 20);
	v_free(b);
	v_free(b);
	printf("%p\n", (void *)a);
}

static void static_usable(void)
{
	printf("%zu\n", v_usable(static_array));
}

static void interior_usable(void)
{
	char *p = v_malloc(100);
	printf("%zu\n", v_usable(p + 8));
}

int main(void)
{
	run("free(p + 16)", interior_free, "free(): invalid pointer (not the start of a block)");
	run("free(p + 8) from another thread", interior_free_remote,
	    "free(): invalid pointer (not the start of a block)");
	run("write into a freed block's link", link_overwrite, "malloc(): corrupted free list");
	run("write into a block freed remotely", link_overwrite_remote, "malloc(): corrupted free list");
	run("free(random address)", random_free, "free(): invalid pointer (not from this allocator)");
	run("free(static array)", static_free, "free(): invalid pointer (not from this allocator)");
	run("free(inside a huge object)", huge_interior_free, "free(): invalid pointer (not from this allocator)");
	run("realloc(static array)", static_realloc, "invalid pointer (not from this allocator)");
	run("realloc(freed large object)", large_realloc_freed, "invalid pointer (double free?)");
	run("realloc(inside a large object)", large_realloc_interior, "invalid pointer (double free?)");
	run("free(large object) twice, its chunk cached", large_free_cached, "invalid pointer (double free?)");
	run("malloc_usable_size(static array)", static_usable, "invalid pointer (not from this allocator)");
	run("malloc_usable_size(p + 8)", interior_usable, "invalid pointer (not the start of a block)");

	/* correct programs are not disturbed: a churn through every class */
	void *v[4096];
	for (int round = 0; round < 50; round++) {
		for (int i = 0; i < 4096; i++) {
			v[i] = v_malloc((size_t)(i * 37 % 20000) + 1);
			memset(v[i], i, (size_t)(i * 37 % 20000) + 1);
		}
		for (int i = 0; i < 4096; i += 2)
			v_free(v[i]);
		for (int i = 0; i < 4096; i += 2)
			v[i] = v_realloc(v_malloc(10), (size_t)(i % 3000) + 1);
		for (int i = 0; i < 4096; i++)
			v_free(v[i]);
	}
	return hc_check_finish("misuse");
}
