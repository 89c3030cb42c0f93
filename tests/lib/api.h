/*
 * tests/lib/api.h - what the tests of the malloc API exported by libheapctl.so
 * (tests/unit/api_*.c, one program each, so that every one starts in a
 * fresh process) share: the calls through volatile pointers, the block fill
 * and its checks, whether malloc is libheapctl's and mallctl usable, the
 * buffer malloc_stats_print writes into, the chunk a block lies in, and RUN.
 *
 * Each program is single-threaded unless a test starts threads, and runs in
 * a few seconds.  Exit status 0 iff every check passed; each failed check
 * prints "FAIL <file>:<line>: <what>" to stderr.
 *
 * When run against plain glibc (built without -lheapctl) set
 * HC_TEST_ALLOW_NO_MALLCTL=1: mallctl checks and the few checks where glibc
 * 2.36 is known to differ from the libheapctl contract (aligned_alloc with a
 * non-power-of-two alignment) are skipped.
 */
#ifndef HC_TESTS_API_H
#define HC_TESTS_API_H

#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

/*
 * All calls whose failure/side effects we examine go through volatile function
 * pointers: gcc knows the semantics of the malloc family and could otherwise
 * fold checks (e.g. assume free() leaves errno alone), elide allocations, or
 * warn about deliberately absurd sizes.
 */
static HC_UNUSED void *(*volatile v_malloc)(size_t) = malloc;
static HC_UNUSED void (*volatile v_free)(void *) = free;
static HC_UNUSED void *(*volatile v_calloc)(size_t, size_t) = calloc;
static HC_UNUSED void *(*volatile v_realloc)(void *, size_t) = realloc;
static HC_UNUSED void *(*volatile v_reallocarray)(void *, size_t, size_t) = reallocarray;
static HC_UNUSED int (*volatile v_posix_memalign)(void **, size_t, size_t) = posix_memalign;
static HC_UNUSED void *(*volatile v_aligned_alloc)(size_t, size_t) = aligned_alloc;
static HC_UNUSED void *(*volatile v_memalign)(size_t, size_t) = memalign;
static HC_UNUSED void *(*volatile v_valloc)(size_t) = valloc;
static HC_UNUSED void *(*volatile v_pvalloc)(size_t) = pvalloc;
static HC_UNUSED size_t (*volatile v_usable)(void *) = malloc_usable_size;
static HC_UNUSED int (*volatile v_malloc_trim)(size_t) = malloc_trim;

static HC_UNUSED size_t page_size;
static HC_UNUSED int have_ctl;      /* mallctl API usable */
static HC_UNUSED int under_heapctl; /* malloc resolves to libheapctl */
static HC_UNUSED uint64_t tag_counter = 1;

#define SENTINEL ((void *)(uintptr_t)0x5eed5eed0ull)

/* Fill the whole usable size of p and return the seed used. */
static HC_UNUSED uint64_t fill_block(void *p, size_t usable, uint64_t *tagp)
{
	uint64_t tag = tag_counter++;
	if (tagp)
		*tagp = tag;
	uint64_t seed = hc_seed(p, usable, tag);
	hc_fill(p, usable, seed);
	return seed;
}

static HC_UNUSED void check_block(const char *what, void *p, size_t n, uint64_t seed)
{
	size_t bad = hc_verify(p, n, seed);
	CHECK(bad == (size_t)-1, "%s: block %p size %zu corrupted at offset %zu", what, p, n, bad);
}

/* basic checks on a fresh allocation of `size` bytes; returns usable size */
static HC_UNUSED size_t check_fresh(const char *what, void *p, size_t size, size_t align)
{
	if (p == NULL)
		return 0;
	size_t u = v_usable(p);
	CHECK(u >= size, "%s: malloc_usable_size(%p)=%zu < requested %zu", what, p, u, size);
	if (align)
		CHECK(((uintptr_t)p & (align - 1)) == 0, "%s: %p (size %zu) not aligned to %zu", what, p, size, align);
	return u;
}

/* ------------------------------------------------------------------ */

static HC_UNUSED void test_symbol_resolution(void)
{
	under_heapctl = hc_malloc_is_heapctl();
	if (!under_heapctl) {
		if (hc_allow_no_mallctl())
			fprintf(stderr, "note: malloc is not from libheapctl (glibc mode)\n");
		else
			CHECK(under_heapctl, "malloc does not resolve to libheapctl (not linked/preloaded?)");
	}
}

static HC_UNUSED char stats_buf[1 << 20];
static HC_UNUSED size_t stats_len;
static HC_UNUSED int stats_calls;

static HC_UNUSED void stats_cb(void *opaque, const char *s)
{
	int *magic = opaque;
	CHECK(magic != NULL && *magic == 0x5eed, "malloc_stats_print passed wrong cbopaque %p", opaque);
	stats_calls++;
	size_t n = strlen(s);
	if (stats_len + n >= sizeof stats_buf)
		n = sizeof stats_buf - 1 - stats_len;
	memcpy(stats_buf + stats_len, s, n);
	stats_len += n;
	stats_buf[stats_len] = '\0';
}

/* The 4 MiB chunk a block lies in (one heap's, or one shared heap's). */
static HC_UNUSED uintptr_t chunk_number(const void *p)
{
	return (uintptr_t)p >> 22;
}

/* Two blocks in one chunk. */
static HC_UNUSED bool same_chunk(const void *a, const void *b)
{
	return chunk_number(a) == chunk_number(b);
}

/* heapctl's allocator with sampling off, for the tests of where blocks
 * land: a sampled block is a page run, elsewhere. */
static HC_UNUSED bool unsampled_heapctl(void)
{
	bool active = true;
	size_t len = sizeof active;
	return under_heapctl && have_ctl && hc_mallctl("prof.active", &active, &len, NULL, 0) == 0 && !active;
}

static HC_UNUSED int verbose;

#define RUN(fn)                                                                  \
	do {                                                                     \
		double t_ = hc_now();                                            \
		fn();                                                            \
		if (verbose)                                                     \
			fprintf(stderr, "  %-32s %.2f s\n", #fn, hc_now() - t_); \
	} while (0)

/* qsort order of elements by their first uintptr_t (a block's address,
 * a chunk's number) */
static HC_UNUSED int cmp_first_word(const void *a, const void *b)
{
	const uintptr_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* fn(arg) on a thread of its own, waited for; false (a failed check) if
 * the thread could not be made. */
static HC_UNUSED bool in_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	if (pthread_create(&t, NULL, fn, arg) != 0) {
		CHECK(0, "pthread_create failed");
		return false;
	}
	pthread_join(t, NULL);
	return true;
}

/* Gives the calling thread its heap: a thread keeps other threads' blocks
 * that it frees (the remote cache) only once it has allocated; one that
 * only frees would only keep them from their owners. */
static HC_UNUSED void own_heap(void)
{
	v_free(v_malloc(16));
}

/* The start of every api_*.c program: whether malloc is libheapctl's and
 * mallctl usable; the time it started. */
static HC_UNUSED double api_start(void)
{
	verbose = getenv("HC_TEST_VERBOSE") != NULL;
	double t0 = hc_now();
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	test_symbol_resolution();
	have_ctl = hc_ctl_init();
	return t0;
}

/* The end: its time and the exit status (0 iff every check passed). */
static HC_UNUSED int api_finish(const char *name, double t0)
{
	fprintf(stderr, "%s: %.2f s\n", name, hc_now() - t0);
	return hc_check_finish(name);
}

#endif
