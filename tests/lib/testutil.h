/*
 * testutil.h - helpers shared by the heapctl test programs (C and C++).
 *
 *  - block patterns: hc_fill()/hc_verify() write/check a pattern derived from
 *    a 64-bit seed (hc_seed(address, size, tag)), so a block that overlaps
 *    another block, or contents that were moved to the wrong offset, are
 *    detected;
 *  - a small per-thread PRNG (hc_rng_*);
 *  - compiler barriers (hc_opaque_size, hc_launder) so gcc cannot fold or
 *    elide allocator calls whose behaviour we want to observe;
 *  - access to the jemalloc-style control API of libheapctl through
 *    dlsym(RTLD_DEFAULT, ...), so the tests also build and run against plain
 *    glibc.  If mallctl is missing, tests fail unless the environment variable
 *    HC_TEST_ALLOW_NO_MALLCTL=1 is set, in which case mallctl checks are
 *    skipped;
 *  - hc_run_child: a misuse run in a child, its stderr kept for the checks.
 *
 * Include after defining _GNU_SOURCE (C files do that on their first line).
 */
#ifndef HC_TESTS_TESTUTIL_H
#define HC_TESTS_TESTUTIL_H

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#ifdef __cplusplus
#define HC_UNUSED __attribute__((unused))
#else
#define HC_UNUSED __attribute__((unused))
#endif

#define HC_KiB ((size_t)1024)
#define HC_MiB ((size_t)1024 * 1024)

/* ------------------------------------------------------------------ */
/* compiler barriers                                                    */

static inline size_t hc_opaque_size(size_t x)
{
	__asm__ volatile("" : "+r"(x));
	return x;
}

static inline void *hc_launder(void *p)
{
	__asm__ volatile("" : "+r"(p) : : "memory");
	return p;
}

/* ------------------------------------------------------------------ */
/* hashing / PRNG                                                       */

static inline uint64_t hc_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static inline uint64_t hc_seed(const void *p, size_t size, uint64_t tag)
{
	return hc_mix64((uint64_t)(uintptr_t)p ^ hc_mix64((uint64_t)size ^ hc_mix64(tag + 0x1234567ull)));
}

typedef struct {
	uint64_t s;
} hc_rng;

static inline void hc_rng_init(hc_rng *r, uint64_t seed)
{
	r->s = hc_mix64(seed + 0x9e3779b97f4a7c15ull) | 1;
}

static inline uint64_t hc_rng_next(hc_rng *r)
{
	/* xorshift64* */
	uint64_t x = r->s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* uniform in [0, n) (n > 0) */
static inline uint64_t hc_rng_below(hc_rng *r, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)hc_rng_next(r) * n) >> 64);
}

/* uniform in [lo, hi] */
static inline uint64_t hc_rng_range(hc_rng *r, uint64_t lo, uint64_t hi)
{
	return lo + hc_rng_below(r, hi - lo + 1);
}

/* log-uniform in [lo, hi] (lo >= 1) */
static inline size_t hc_rng_logsize(hc_rng *r, size_t lo, size_t hi)
{
	int lg_lo = 63 - __builtin_clzll(lo);
	int lg_hi = 63 - __builtin_clzll(hi);
	int lg = (int)hc_rng_range(r, (uint64_t)lg_lo, (uint64_t)lg_hi);
	size_t a = (size_t)1 << lg;
	size_t b = (a << 1) - 1;
	if (a < lo)
		a = lo;
	if (b > hi)
		b = hi;
	return (size_t)hc_rng_range(r, a, b);
}

/* ------------------------------------------------------------------ */
/* block patterns                                                       */

#define HC_PAT_STEP 0x9e3779b97f4a7c15ull

/* Fill n bytes at p: 64-bit word i holds seed + i*STEP (little endian);
 * a partial last word holds the low bytes of the next value. */
static HC_UNUSED void hc_fill(void *p, size_t n, uint64_t seed)
{
	unsigned char *b = (unsigned char *)p;
	size_t words = n / 8;
	for (size_t i = 0; i < words; i++) {
		uint64_t v = seed + (uint64_t)i * HC_PAT_STEP;
		memcpy(b + 8 * i, &v, 8);
	}
	if (n % 8) {
		uint64_t v = seed + (uint64_t)words * HC_PAT_STEP;
		memcpy(b + 8 * words, &v, n % 8);
	}
}

/* Returns (size_t)-1 if the n bytes at p hold the pattern for seed,
 * otherwise the offset of the first wrong byte. */
static HC_UNUSED size_t hc_verify(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *b = (const unsigned char *)p;
	size_t words = n / 8;
	size_t i = 0;
	while (i < words) {
		size_t end = i + 512 < words ? i + 512 : words;
		uint64_t diff = 0;
		for (size_t j = i; j < end; j++) {
			uint64_t w;
			memcpy(&w, b + 8 * j, 8);
			diff |= w ^ (seed + (uint64_t)j * HC_PAT_STEP);
		}
		if (diff) {
			for (size_t j = i; j < end; j++) {
				uint64_t w, v = seed + (uint64_t)j * HC_PAT_STEP;
				memcpy(&w, b + 8 * j, 8);
				if (w != v) {
					for (size_t k = 0; k < 8; k++)
						if (((w >> (8 * k)) & 0xff) != ((v >> (8 * k)) & 0xff))
							return 8 * j + k;
				}
			}
		}
		i = end;
	}
	if (n % 8) {
		uint64_t v = seed + (uint64_t)words * HC_PAT_STEP;
		for (size_t k = 0; k < n % 8; k++)
			if (b[8 * words + k] != (unsigned char)(v >> (8 * k)))
				return 8 * words + k;
	}
	return (size_t)-1;
}

/* Returns (size_t)-1 if all n bytes are zero, else offset of first non-zero. */
static HC_UNUSED size_t hc_find_nonzero(const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;
	size_t i = 0;
	for (; i + 4096 <= n; i += 4096) {
		uint64_t acc = 0;
		for (size_t j = 0; j < 4096; j += 8) {
			uint64_t w;
			memcpy(&w, b + i + j, 8);
			acc |= w;
		}
		if (acc)
			break;
	}
	for (; i < n; i++)
		if (b[i])
			return i;
	return (size_t)-1;
}

/* ------------------------------------------------------------------ */
/* environment                                                          */

static HC_UNUSED int hc_allow_no_mallctl(void)
{
	const char *e = getenv("HC_TEST_ALLOW_NO_MALLCTL");
	return e != NULL && strcmp(e, "1") == 0;
}

/* Is malloc (as the dynamic linker resolves it) provided by libheapctl? */
static HC_UNUSED int hc_malloc_is_heapctl(void)
{
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	Dl_info info;
	memset(&info, 0, sizeof info);
	if (m == NULL || dladdr(m, &info) == 0 || info.dli_fname == NULL)
		return 0;
	return strstr(info.dli_fname, "heapctl") != NULL;
}

/* ------------------------------------------------------------------ */
/* jemalloc-style control API, resolved at run time                     */

typedef int (*hc_mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef int (*hc_nametomib_fn)(const char *, size_t *, size_t *);
typedef int (*hc_bymib_fn)(const size_t *, size_t, void *, size_t *, void *, size_t);
typedef void (*hc_stats_print_fn)(void (*)(void *, const char *), void *, const char *);

static hc_mallctl_fn hc_mallctl HC_UNUSED;
static hc_nametomib_fn hc_mallctlnametomib HC_UNUSED;
static hc_bymib_fn hc_mallctlbymib HC_UNUSED;
static hc_stats_print_fn hc_malloc_stats_print HC_UNUSED;

static HC_UNUSED void *hc_sym(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

/*
 * Resolve the control API.  Returns 1 if mallctl & co are usable.
 * Returns 0 if they are missing and HC_TEST_ALLOW_NO_MALLCTL=1 (checks that
 * need them should then be skipped).  If they are missing and skipping is not
 * allowed, records a failure and returns 0.
 */
static HC_UNUSED int hc_ctl_init(void)
{
	void *a = hc_sym("mallctl");
	void *b = hc_sym("mallctlnametomib");
	void *c = hc_sym("mallctlbymib");
	void *d = hc_sym("malloc_stats_print");
	memcpy(&hc_mallctl, &a, sizeof a);
	memcpy(&hc_mallctlnametomib, &b, sizeof b);
	memcpy(&hc_mallctlbymib, &c, sizeof c);
	memcpy(&hc_malloc_stats_print, &d, sizeof d);
	if (a != NULL && b != NULL && c != NULL && d != NULL)
		return 1;
	if (hc_allow_no_mallctl()) {
		static const char msg[] =
		    "note: mallctl API not found, HC_TEST_ALLOW_NO_MALLCTL=1: skipping mallctl checks\n";
		(void)!write(2, msg, sizeof msg - 1);
		return 0;
	}
	CHECK(a != NULL, "symbol mallctl not found (set HC_TEST_ALLOW_NO_MALLCTL=1 to skip)");
	CHECK(b != NULL, "symbol mallctlnametomib not found");
	CHECK(c != NULL, "symbol mallctlbymib not found");
	CHECK(d != NULL, "symbol malloc_stats_print not found");
	return 0;
}

/* Refresh the stats epoch; returns 0 on success. */
static HC_UNUSED int hc_epoch_refresh(void)
{
	uint64_t e = 1;
	return hc_mallctl("epoch", NULL, NULL, &e, sizeof e);
}

/* Read a size_t stat (after the caller refreshed the epoch).  Records a
 * failure and returns 0 if the read fails. */
static HC_UNUSED size_t hc_stat(const char *name)
{
	size_t v = 0, len = sizeof v;
	int r = hc_mallctl(name, &v, &len, NULL, 0);
	CHECK(r == 0, "mallctl(\"%s\") read failed: %d", name, r);
	CHECK(len == sizeof v, "mallctl(\"%s\") oldlen %zu != %zu", name, len, sizeof v);
	return r == 0 ? v : 0;
}

/* monotonic time in seconds (for reporting only, never for assertions) */
static HC_UNUSED double hc_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run fn in a child (10 s at most) with its stderr captured into err (cap
 * bytes with the terminating NUL); the child's wait status, -1 if none. */
static HC_UNUSED int hc_run_child(void (*fn)(void), char *err, size_t cap)
{
	int fd[2];
	err[0] = '\0';
	if (pipe(fd) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 2);
		close(fd[0]);
		alarm(10);
		fn();
		_exit(0); /* not caught: the caller says so */
	}
	close(fd[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < cap && (r = read(fd[0], err + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	err[n] = '\0';
	close(fd[0]);
	int st = -1;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return st;
}

#endif /* HC_TESTS_TESTUTIL_H */
