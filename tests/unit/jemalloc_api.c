/*
 * tests/unit/jemalloc_api.c - jemalloc's *allocx API and arena mallctls,
 * with jemalloc 5's meaning, linked against libheapctl.so.
 *
 * nallocx must predict malloc_usable_size(mallocx()) exactly at every size
 * and alignment; mallocx honours alignment and MALLOCX_ZERO; rallocx keeps
 * contents and alignment and zeroes growth on request; xallocx only ever
 * resizes in place; arena.<i>.purge and arena.<i>.decay answer for every
 * arena, for MALLCTL_ARENAS_ALL and for arenas.narenas (redis's spelling),
 * by name and by mib, and refuse an arena that does not exist.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <heapctl.h>
#include "../lib/check.h"

#define LG_ALIGN(la) (la)
#define ZERO         0x40
#define TCACHE_NONE  (1 << 8)
#define ARENA(a)     (((a) + 1) << 20)

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

static void test_nallocx_exact(void)
{
	static const unsigned aligns[] = { 0, 3, 4, 6, 9, 12, 14, 16, 21, 22 };
	for (unsigned a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
		int flags = LG_ALIGN(aligns[a]);
		for (size_t n = 1; n < ((size_t)40 << 20); n += n < 20000 ? 7 : n / 5) {
			size_t want = nallocx(n, flags);
			void *p = mallocx(n, flags);
			CHECK(p != NULL, "mallocx(%zu, lg align %u) failed", n, aligns[a]);
			if (p == NULL)
				continue;
			CHECK(want >= n, "nallocx(%zu, lg align %u) = %zu, smaller than asked", n, aligns[a], want);
			CHECK(malloc_usable_size(p) == want && sallocx(p, 0) == want,
			    "nallocx(%zu, lg align %u) = %zu, but the object's usable size is %zu", n, aligns[a], want,
			    malloc_usable_size(p));
			CHECK(((uintptr_t)p & (((uintptr_t)1 << aligns[a]) - 1)) == 0,
			    "mallocx(%zu, lg align %u) = %p is not aligned", n, aligns[a], p);
			((char *)p)[n - 1] = 1;
			if (n % 2)
				dallocx(p, 0);
			else
				sdallocx(p, n, 0);
		}
	}
	CHECK(nallocx(SIZE_MAX - 10, 0) == 0, "nallocx of an impossible size is not 0");
	CHECK(mallocx(SIZE_MAX - 10, 0) == NULL, "mallocx of an impossible size did not fail");
}

static void test_zero_and_tcache(void)
{
	for (size_t n = 8; n < ((size_t)16 << 20); n *= 3) {
		unsigned char *p = mallocx(n, ZERO | TCACHE_NONE);
		CHECK(p != NULL && all_zero(p, n), "mallocx(%zu, MALLOCX_ZERO) is not zeroed", n);
		if (p == NULL)
			continue;
		memset(p, 0xa5, n);
		dallocx(p, TCACHE_NONE);
		/* the same memory again, zeroed this time */
		p = mallocx(n, ZERO);
		CHECK(p != NULL && all_zero(p, n), "mallocx(%zu, MALLOCX_ZERO) of reused memory is not zeroed", n);
		free(p);
	}
}

static void test_rallocx(void)
{
	for (size_t n = 16; n < ((size_t)20 << 20); n = n * 5 / 2) {
		unsigned char *p = mallocx(n, 0);
		memset(p, 0x5a, n);
		size_t old = sallocx(p, 0);
		size_t m = n * 3 + 100;
		unsigned char *q = rallocx(p, m, ZERO | LG_ALIGN(12));
		CHECK(q != NULL, "rallocx(%zu -> %zu) failed", n, m);
		if (q == NULL)
			continue;
		CHECK(((uintptr_t)q & 4095) == 0, "rallocx(..., lg align 12) = %p is not aligned", (void *)q);
		size_t i = 0;
		while (i < n && q[i] == 0x5a)
			i++;
		CHECK(i == n, "rallocx(%zu -> %zu) lost the contents at byte %zu", n, m, i);
		size_t keep = old < n ? old : n;
		CHECK(all_zero(q + (old > n ? old : n), sallocx(q, 0) - (old > n ? old : n)),
		    "rallocx(%zu -> %zu, MALLOCX_ZERO) did not zero the growth", n, m);
		(void)keep;
		q = rallocx(q, n / 2 + 1, 0);
		CHECK(q != NULL && q[0] == 0x5a && q[n / 2] == 0x5a, "rallocx shrinking to %zu lost the contents",
		    n / 2 + 1);
		dallocx(q, 0);
	}
}

static void test_xallocx(void)
{
	/* a small block: its class, never moved */
	char *p = mallocx(100, 0);
	size_t u = sallocx(p, 0);
	CHECK(xallocx(p, 50, 0, 0) == u, "xallocx of a small block to less did not keep its size %zu", u);
	CHECK(xallocx(p, 10000, 0, 0) == u, "xallocx of a small block to more than its class changed it");
	CHECK(sallocx(p, 0) == u, "xallocx changed a small block's size");
	dallocx(p, 0);
	/* a run of pages grows into the free pages after it, and shrinks */
	p = mallocx(64 << 10, 0);
	char *fence = mallocx(1 << 20, 0); /* something after it, maybe */
	memset(p, 7, 64 << 10);
	size_t got = xallocx(p, 96 << 10, 32 << 10, ZERO);
	CHECK(got == (64 << 10) || (got >= (96 << 10) && got <= (128 << 10)),
	    "xallocx(64 KiB -> 96..128 KiB) returned %zu", got);
	CHECK(sallocx(p, 0) == got, "xallocx returned %zu, the object now has %zu", got, sallocx(p, 0));
	if (got > (64 << 10))
		CHECK(all_zero((unsigned char *)p + (64 << 10), got - (64 << 10)),
		    "xallocx(..., MALLOCX_ZERO) did not zero the growth");
	CHECK(p[0] == 7 && p[(64 << 10) - 1] == 7, "xallocx lost the contents");
	got = xallocx(p, 20 << 10, 0, 0);
	CHECK(got == (20 << 10), "xallocx shrinking a run to 20 KiB returned %zu", got);
	dallocx(p, 0);
	dallocx(fence, 0);
}

static int purge_by_name(size_t i, const char *what)
{
	char name[64];
	snprintf(name, sizeof name, "arena.%zu.%s", i, what);
	return mallctl(name, NULL, NULL, NULL, 0);
}

/* stats.resident now (after an epoch refresh), and the process's VmRSS */
static size_t resident_now(void)
{
	uint64_t epoch = 1;
	size_t v = 0, len = sizeof v;
	mallctl("epoch", NULL, NULL, &epoch, sizeof epoch);
	mallctl("stats.resident", &v, &len, NULL, 0);
	return v;
}

static long vm_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static void test_arena_mallctls(void)
{
	unsigned narenas = 0;
	size_t len = sizeof narenas;
	CHECK(mallctl("arenas.narenas", &narenas, &len, NULL, 0) == 0 && narenas > 0, "arenas.narenas");
	const char *what[] = { "purge", "decay" };
	for (int w = 0; w < 2; w++) {
		for (size_t i = 0; i < narenas; i++)
			CHECK(purge_by_name(i, what[w]) == 0, "arena.%zu.%s failed", i, what[w]);
		CHECK(purge_by_name(narenas, what[w]) == 0, "arena.<narenas>.%s (redis's 'all') failed", what[w]);
		CHECK(purge_by_name(4096, what[w]) == 0, "arena.4096.%s (MALLCTL_ARENAS_ALL) failed", what[w]);
		CHECK(purge_by_name(narenas + 1, what[w]) == ENOENT, "arena.<narenas + 1>.%s is not ENOENT", what[w]);
		size_t mib[3], miblen = 3;
		char name[32];
		snprintf(name, sizeof name, "arena.0.%s", what[w]);
		CHECK(mallctlnametomib(name, mib, &miblen) == 0 && miblen == 3, "mallctlnametomib(%s)", name);
		for (size_t i = 0; i < narenas; i++) {
			mib[1] = i;
			CHECK(mallctlbymib(mib, miblen, NULL, NULL, NULL, 0) == 0, "%s by mib, arena %zu", what[w], i);
		}
		mib[1] = 4096;
		CHECK(mallctlbymib(mib, miblen, NULL, NULL, NULL, 0) == 0, "%s by mib, MALLCTL_ARENAS_ALL", what[w]);
		mib[1] = 100000;
		CHECK(mallctlbymib(mib, miblen, NULL, NULL, NULL, 0) == ENOENT, "%s by mib, arena 100000 not ENOENT",
		    what[w]);
	}
	CHECK(mallctl("arena.x.purge", NULL, NULL, NULL, 0) == ENOENT, "arena.x.purge is not ENOENT");
	CHECK(mallctl("arena.0.nothing", NULL, NULL, NULL, 0) == ENOENT, "arena.0.nothing is not ENOENT");
	CHECK(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) == 0, "thread.tcache.flush");
	/* purging gives memory back: 64 MiB freed, then purged */
	void *big[64];
	for (int i = 0; i < 64; i++) {
		big[i] = malloc(1 << 20);
		memset(big[i], 1, 1 << 20);
	}
	for (int i = 0; i < 64; i++)
		free(big[i]);
	size_t before = resident_now();
	long rss_before = vm_rss_kib();
	CHECK(purge_by_name(4096, "purge") == 0, "purge after freeing");
	size_t after = resident_now();
	long rss_after = vm_rss_kib();
	/* at once, not after the decay time: jemalloc's purge, redis's MEMORY PURGE */
	CHECK(before >= after + (48u << 20), "purge: stats.resident %zu -> %zu, not 48 MiB less", before, after);
	CHECK(rss_before >= rss_after + 48 * 1024, "purge: VmRSS %ld -> %ld KiB, not 48 MiB less", rss_before,
	    rss_after);
	/* an arena that does not exist fails the allocation, as in jemalloc */
	CHECK(mallocx(100, ARENA(0)) != NULL, "mallocx with MALLOCX_ARENA(0) failed");
	CHECK(mallocx(100, ARENA(narenas + 5)) == NULL, "mallocx with a missing arena did not fail");
	CHECK(nallocx(100, ARENA(narenas + 5)) == 0, "nallocx with a missing arena is not 0");
}

int main(void)
{
	test_nallocx_exact();
	test_zero_and_tcache();
	test_rallocx();
	test_xallocx();
	test_arena_mallctls();
	return hc_check_finish("jemalloc_api");
}
