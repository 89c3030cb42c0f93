/*
 * tests/unit/api_mallctl.c - the jemalloc-style control API (mallctl,
 * mallctlnametomib, mallctlbymib, malloc_stats_print) and stats.allocated
 * exact through a page's states.
 * The parts every api_*.c shares, and how to run it on plain glibc:
 * tests/lib/api.h.
 */
#include "../lib/api.h"

/* ------------------------------------------------------------------ */
/* mallctl & stats                                                      */

static void test_mallctl_basic(void)
{
	int r;
	size_t len;

	const char *version = NULL;
	len = sizeof version;
	r = hc_mallctl("version", &version, &len, NULL, 0);
	CHECK(r == 0, "mallctl(\"version\") returned %d", r);
	CHECK(len == sizeof(const char *), "mallctl(\"version\") oldlen %zu", len);
	CHECK(r != 0 || (version != NULL && version[0] != '\0'), "version string is NULL or empty");

	static const char *const bools[] = { "config.debug", "config.prof", "config.stats" };
	for (int i = 0; i < 3; i++) {
		bool b = false;
		len = sizeof b;
		r = hc_mallctl(bools[i], &b, &len, NULL, 0);
		CHECK(r == 0, "mallctl(\"%s\") returned %d", bools[i], r);
		CHECK(len == sizeof(bool), "mallctl(\"%s\") oldlen %zu", bools[i], len);
		if (i == 2)
			CHECK(b, "config.stats is false, but stats.* are part of the API");
		/* wrong length */
		size_t wrong = sizeof(int);
		int dummy = 0;
		r = hc_mallctl(bools[i], &dummy, &wrong, NULL, 0);
		CHECK(r == EINVAL, "mallctl(\"%s\") with oldlen 4 returned %d, expected EINVAL", bools[i], r);
		/* read-only */
		bool nb = true;
		r = hc_mallctl(bools[i], NULL, NULL, &nb, sizeof nb);
		CHECK(r == EPERM, "writing \"%s\" returned %d, expected EPERM", bools[i], r);
	}

	size_t page = 0;
	len = sizeof page;
	r = hc_mallctl("arenas.page", &page, &len, NULL, 0);
	CHECK(r == 0 && len == sizeof(size_t), "mallctl(\"arenas.page\") returned %d len %zu", r, len);
	CHECK(page >= page_size && (page & (page - 1)) == 0, "arenas.page = %zu (system page %zu)", page, page_size);
	r = hc_mallctl("arenas.page", NULL, NULL, &page, sizeof page);
	CHECK(r == EPERM, "writing arenas.page returned %d, expected EPERM", r);

	/* epoch: read, write, read+write */
	uint64_t e0 = 0, e1 = 0, e2 = 0, one = 1;
	len = sizeof e0;
	r = hc_mallctl("epoch", &e0, &len, NULL, 0);
	CHECK(r == 0 && len == sizeof(uint64_t), "read epoch returned %d len %zu", r, len);
	r = hc_mallctl("epoch", NULL, NULL, &one, sizeof one);
	CHECK(r == 0, "write epoch returned %d", r);
	len = sizeof e1;
	r = hc_mallctl("epoch", &e1, &len, &one, sizeof one);
	CHECK(r == 0 && len == sizeof(uint64_t), "read+write epoch returned %d len %zu", r, len);
	len = sizeof e2;
	r = hc_mallctl("epoch", &e2, &len, NULL, 0);
	CHECK(r == 0, "read epoch returned %d", r);
	CHECK(e1 >= e0 && e2 >= e1, "epoch went backwards: %llu %llu %llu", (unsigned long long)e0,
	    (unsigned long long)e1, (unsigned long long)e2);
	uint32_t small = 1;
	r = hc_mallctl("epoch", NULL, NULL, &small, sizeof small);
	CHECK(r == EINVAL, "write epoch with newlen 4 returned %d, expected EINVAL", r);
	len = sizeof small;
	r = hc_mallctl("epoch", &small, &len, NULL, 0);
	CHECK(r == EINVAL, "read epoch with oldlen 4 returned %d, expected EINVAL", r);

	static const char *const stats[] = { "stats.allocated", "stats.active", "stats.metadata", "stats.resident",
		"stats.mapped", "stats.retained" };
	for (int i = 0; i < 6; i++) {
		size_t v = 0;
		len = sizeof v;
		r = hc_mallctl(stats[i], &v, &len, NULL, 0);
		CHECK(r == 0 && len == sizeof(size_t), "mallctl(\"%s\") returned %d len %zu", stats[i], r, len);
		/* wrong sizes */
		uint32_t v4 = 0;
		len = sizeof v4;
		r = hc_mallctl(stats[i], &v4, &len, NULL, 0);
		CHECK(r == EINVAL, "mallctl(\"%s\") with oldlen 4 returned %d, expected EINVAL", stats[i], r);
		unsigned char v16[16];
		len = sizeof v16;
		r = hc_mallctl(stats[i], v16, &len, NULL, 0);
		CHECK(r == EINVAL, "mallctl(\"%s\") with oldlen 16 returned %d, expected EINVAL", stats[i], r);
		/* read-only */
		v = 1;
		r = hc_mallctl(stats[i], NULL, NULL, &v, sizeof v);
		CHECK(r == EPERM, "writing \"%s\" returned %d, expected EPERM", stats[i], r);
		/* no old and no new: a no-op that succeeds */
		r = hc_mallctl(stats[i], NULL, NULL, NULL, 0);
		CHECK(r == 0, "mallctl(\"%s\", NULL, NULL, NULL, 0) returned %d", stats[i], r);
	}
	const char *nv = "x";
	r = hc_mallctl("version", NULL, NULL, &nv, sizeof nv);
	CHECK(r == EPERM, "writing \"version\" returned %d, expected EPERM", r);

	/* unknown names */
	static const char *const bogus[] = { "no.such.name", "stats.allocatedx", "stats.allocated.foo", "stats.bogus",
		"epochs", "config.nonexistent", "xyz", "stats..allocated", "arenas.pagex" };
	for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
		size_t v = 0;
		len = sizeof v;
		r = hc_mallctl(bogus[i], &v, &len, NULL, 0);
		CHECK(r == ENOENT, "mallctl(\"%s\") returned %d, expected ENOENT", bogus[i], r);
		size_t mib[8];
		size_t miblen = 8;
		r = hc_mallctlnametomib(bogus[i], mib, &miblen);
		CHECK(r == ENOENT, "mallctlnametomib(\"%s\") returned %d, expected ENOENT", bogus[i], r);
	}
	{
		size_t v = 0;
		len = sizeof v;
		r = hc_mallctl("", &v, &len, NULL, 0);
		CHECK(r != 0, "mallctl(\"\") succeeded");
		len = sizeof v;
		r = hc_mallctl("stats", &v, &len, NULL, 0);
		CHECK(r != 0, "mallctl(\"stats\") (an interior node) succeeded");
	}
}

static void test_mallctl_mib(void)
{
	size_t mib[8];
	size_t miblen = 8;
	int r = hc_mallctlnametomib("stats.allocated", mib, &miblen);
	CHECK(r == 0, "mallctlnametomib(\"stats.allocated\") returned %d", r);
	CHECK(miblen >= 1 && miblen <= 8, "mallctlnametomib(\"stats.allocated\") miblen %zu", miblen);
	if (r != 0)
		return;

	size_t emib[8];
	size_t emiblen = 8;
	r = hc_mallctlnametomib("epoch", emib, &emiblen);
	CHECK(r == 0 && emiblen >= 1 && emiblen <= 8, "mallctlnametomib(\"epoch\") returned %d miblen %zu", r, emiblen);

	/* keep some memory allocated so the number is non-trivial */
	void *hold = v_malloc(3 * HC_MiB);
	if (hold)
		memset(hold, 1, 3 * HC_MiB);

	for (int round = 0; round < 3; round++) {
		uint64_t one = 1;
		if (emiblen >= 1 && emiblen <= 8) {
			r = hc_mallctlbymib(emib, emiblen, NULL, NULL, &one, sizeof one);
			CHECK(r == 0, "mallctlbymib(epoch) write returned %d", r);
		}
		size_t a = 0, b = 0, la = sizeof a, lb = sizeof b;
		int ra = hc_mallctl("stats.allocated", &a, &la, NULL, 0);
		int rb = hc_mallctlbymib(mib, miblen, &b, &lb, NULL, 0);
		CHECK(ra == 0 && rb == 0, "stats.allocated: mallctl %d, bymib %d", ra, rb);
		CHECK(lb == sizeof(size_t), "mallctlbymib oldlen %zu", lb);
		CHECK(a == b, "stats.allocated by name (%zu) != by mib (%zu)", a, b);
		CHECK(a >= 3 * HC_MiB, "stats.allocated %zu while 3 MiB is live", a);
		/* wrong size via mib */
		uint32_t v4;
		size_t l4 = sizeof v4;
		r = hc_mallctlbymib(mib, miblen, &v4, &l4, NULL, 0);
		CHECK(r == EINVAL, "mallctlbymib(stats.allocated) with oldlen 4 returned %d, expected EINVAL", r);
		r = hc_mallctlbymib(mib, miblen, NULL, NULL, &a, sizeof a);
		CHECK(r == EPERM, "mallctlbymib(stats.allocated) write returned %d, expected EPERM", r);
		void *tmp = v_malloc(HC_MiB);
		if (tmp)
			memset(tmp, 2, HC_MiB);
		v_free(tmp);
	}
	v_free(hold);

	static const char *const names[] = { "stats.active", "stats.mapped", "stats.resident", "stats.metadata",
		"stats.retained", "arenas.page" };
	uint64_t one = 1;
	CHECK(hc_mallctl("epoch", NULL, NULL, &one, sizeof one) == 0, "epoch refresh failed");
	for (int i = 0; i < 6; i++) {
		size_t m[8], ml = 8;
		r = hc_mallctlnametomib(names[i], m, &ml);
		CHECK(r == 0, "mallctlnametomib(\"%s\") returned %d", names[i], r);
		if (r)
			continue;
		size_t a = 0, b = 0, la = sizeof a, lb = sizeof b;
		int ra = hc_mallctl(names[i], &a, &la, NULL, 0);
		int rb = hc_mallctlbymib(m, ml, &b, &lb, NULL, 0);
		CHECK(ra == 0 && rb == 0 && a == b, "%s: mallctl %d (%zu) vs bymib %d (%zu)", names[i], ra, a, rb, b);
	}
	{
		size_t m[8], ml = 8;
		r = hc_mallctlnametomib("version", m, &ml);
		CHECK(r == 0, "mallctlnametomib(\"version\") returned %d", r);
		if (r == 0) {
			const char *v = NULL;
			size_t lv = sizeof v;
			r = hc_mallctlbymib(m, ml, &v, &lv, NULL, 0);
			CHECK(r == 0 && v != NULL && v[0], "mallctlbymib(version) returned %d", r);
		}
	}
}

static void test_stats_print(void)
{
	int magic = 0x5eed;
	void *hold = v_malloc(12345);
	stats_len = 0;
	stats_calls = 0;
	hc_malloc_stats_print(stats_cb, &magic, NULL);
	CHECK(stats_calls > 0 && stats_len > 0, "malloc_stats_print produced no output (%d calls)", stats_calls);
	CHECK(strstr(stats_buf, "allocated") != NULL, "malloc_stats_print output does not contain \"allocated\"");
	stats_len = 0;
	stats_calls = 0;
	hc_malloc_stats_print(stats_cb, &magic, "");
	CHECK(stats_len > 0, "malloc_stats_print(opts=\"\") produced no output");
	v_free(hold);
}

static void test_stats_sanity(void)
{
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t a0 = hc_stat("stats.allocated");
	size_t act0 = hc_stat("stats.active");
	size_t map0 = hc_stat("stats.mapped");
	size_t res0 = hc_stat("stats.resident");
	size_t meta0 = hc_stat("stats.metadata");
	(void)hc_stat("stats.retained");
	CHECK(act0 >= a0, "stats.active %zu < stats.allocated %zu", act0, a0);
	CHECK(map0 >= act0, "stats.mapped %zu < stats.active %zu", map0, act0);
	CHECK(res0 > 0, "stats.resident is 0");
	CHECK(meta0 > 0, "stats.metadata is 0");

	/* 64 MiB of live 1 KiB objects */
	enum { N = 65536 };
	static void *objs[N];
	for (int i = 0; i < N; i++) {
		objs[i] = v_malloc(1024);
		CHECK(objs[i] != NULL, "malloc(1024) failed");
		if (objs[i])
			memset(objs[i], i & 0xff, 1024);
	}
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t a1 = hc_stat("stats.allocated");
	size_t act1 = hc_stat("stats.active");
	size_t map1 = hc_stat("stats.mapped");
	size_t res1 = hc_stat("stats.resident");
	CHECK(a1 >= a0 + 64 * HC_MiB, "stats.allocated grew from %zu to %zu with 64 MiB live (expected +%zu)", a0, a1,
	    64 * HC_MiB);
	CHECK(act1 >= a1, "stats.active %zu < stats.allocated %zu", act1, a1);
	CHECK(map1 >= act1, "stats.mapped %zu < stats.active %zu", map1, act1);
	CHECK(res1 >= 64 * HC_MiB, "stats.resident %zu with 64 MiB of touched live objects", res1);
	/* jemalloc's meaning: a maximum over metadata, active and dirty pages */
	size_t meta1 = hc_stat("stats.metadata");
	CHECK(res1 >= act1 + meta1, "stats.resident %zu < active %zu + metadata %zu", res1, act1, meta1);

	/* a single huge object */
	void *big = v_malloc(100 * HC_MiB);
	CHECK(big != NULL, "malloc(100 MiB) failed");
	if (big)
		memset(big, 7, 100 * HC_MiB);
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t a2 = hc_stat("stats.allocated");
	size_t act2 = hc_stat("stats.active");
	size_t map2 = hc_stat("stats.mapped");
	CHECK(a2 >= a1 + 100 * HC_MiB, "stats.allocated %zu -> %zu after malloc(100 MiB)", a1, a2);
	CHECK(act2 >= a2 && map2 >= act2, "active %zu / allocated %zu / mapped %zu inconsistent", act2, a2, map2);
	v_free(big);
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t a3 = hc_stat("stats.allocated");
	CHECK(a3 + 96 * HC_MiB <= a2, "stats.allocated %zu -> %zu after freeing 100 MiB", a2, a3);

	for (int i = 0; i < N; i++)
		v_free(objs[i]);
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t a4 = hc_stat("stats.allocated");
	size_t act4 = hc_stat("stats.active");
	size_t map4 = hc_stat("stats.mapped");
	size_t res4 = hc_stat("stats.resident");
	size_t meta4 = hc_stat("stats.metadata");
	CHECK(a4 <= a0 + 4 * HC_MiB, "stats.allocated did not come back down: %zu before, %zu live, %zu after free", a0,
	    a1, a4);
	CHECK(act4 >= a4, "stats.active %zu < stats.allocated %zu", act4, a4);
	CHECK(map4 >= act4, "stats.mapped %zu < stats.active %zu", map4, act4);
	CHECK(res4 > 0 && meta4 > 0, "resident %zu metadata %zu", res4, meta4);

	/* stats.allocated counts usable sizes of live objects (at least requested) */
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t b0 = hc_stat("stats.allocated");
	void *ps[1000];
	size_t want = 0;
	for (int i = 0; i < 1000; i++) {
		ps[i] = v_malloc(20000 + (size_t)i * 37);
		want += 20000 + (size_t)i * 37;
	}
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t b1 = hc_stat("stats.allocated");
	CHECK(b1 >= b0 + want, "stats.allocated %zu -> %zu, expected growth >= %zu", b0, b1, want);
	for (int i = 0; i < 1000; i++)
		v_free(ps[i]);
}

/*
 * Page bookkeeping the free fast path relies on: a page's live count is
 * biased while it is pinned (the direct page, alone in its class) and while
 * it is on the full list, and stats.allocated must still be exact through
 * every transition.  Class 192
 * holds 341 blocks per 64 KiB page, so 1000 blocks make two full pages and
 * a direct one.
 */
static void test_page_states(void)
{
	enum { N = 1000, SZ = 184, USZ = 192 };
	static void *p[N];
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t a0 = hc_stat("stats.allocated");
	for (int i = 0; i < N; i++) {
		p[i] = v_malloc(SZ);
		CHECK(p[i] != NULL && v_usable(p[i]) == USZ, "malloc(%d): %p, usable %zu", SZ, p[i],
		    p[i] ? v_usable(p[i]) : 0);
		memset(p[i], i & 0xff, SZ);
	}
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t a1 = hc_stat("stats.allocated");
	CHECK(a1 - a0 == (size_t)N * USZ, "stats.allocated grew by %zu for %d blocks of %d", a1 - a0, N, USZ);

	/* every other block of the full pages, then refill them */
	for (int i = 0; i < 682; i += 2)
		v_free(p[i]);
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t a2 = hc_stat("stats.allocated");
	CHECK(a1 - a2 == (size_t)341 * USZ, "stats.allocated fell by %zu after 341 frees of %d", a1 - a2, USZ);
	for (int i = 0; i < 682; i += 2) {
		p[i] = v_malloc(SZ);
		CHECK(p[i] != NULL, "malloc(%d) failed", SZ);
		memset(p[i], i & 0xff, SZ);
	}
	for (int i = 1; i < N; i++)
		CHECK(p[i] != p[i - 1] && *(unsigned char *)p[i] == (i & 0xff), "block %d overlaps or was clobbered",
		    i);

	/* all of it, newest first: emptied pages are retired, the last kept */
	for (int i = N - 1; i >= 0; i--)
		v_free(p[i]);
	CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
	size_t a3 = hc_stat("stats.allocated");
	CHECK(a3 == a0, "stats.allocated %zu before, %zu after freeing everything", a0, a3);

	/* the kept page still works, and a ping-pong stays on one block */
	void *q = v_malloc(SZ), *r;
	v_free(q);
	r = v_malloc(SZ);
	CHECK(r == q, "malloc/free/malloc gave %p then %p", q, r);
	v_free(r);
}

int main(void)
{
	double t0 = api_start();
	if (have_ctl) {
		RUN(test_page_states); /* counts through stats.allocated */
		RUN(test_mallctl_basic);
		RUN(test_mallctl_mib);
		RUN(test_stats_print);
		RUN(test_stats_sanity);
	}
	return api_finish("api_mallctl", t0);
}
