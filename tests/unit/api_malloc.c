/*
 * tests/unit/api_malloc.c - malloc, free, calloc, realloc and reallocarray
 * at their edges: size 0 and NULL, huge sizes and overflowing products
 * (ENOMEM, nothing allocated), calloc's zeroes, errno left alone on success,
 * realloc keeping contents.
 * The parts every api_*.c shares, and how to run it on plain glibc:
 * tests/lib/api.h.
 */
#include "../lib/api.h"

static void test_malloc_zero_and_free_null(void)
{
	enum { N = 512 };
	void *ptrs[N];
	for (int i = 0; i < N; i++) {
		errno = 12345;
		ptrs[i] = v_malloc(0);
		CHECK(ptrs[i] != NULL, "malloc(0) returned NULL (iteration %d)", i);
		CHECK(errno == 12345, "malloc(0) changed errno to %d", errno);
		if (ptrs[i]) {
			size_t u = v_usable(ptrs[i]);
			if (u)
				memset(ptrs[i], 0xab, u);
		}
	}
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			CHECK(ptrs[i] == NULL || ptrs[i] != ptrs[j],
			    "malloc(0) returned the same pointer %p twice (%d, %d)", ptrs[i], i, j);
	for (int i = 0; i < N; i++)
		v_free(ptrs[i]);

	errno = 12345;
	v_free(NULL);
	CHECK(errno == 12345, "free(NULL) changed errno to %d", errno);
	CHECK(v_usable(NULL) == 0, "malloc_usable_size(NULL) = %zu, expected 0", v_usable(NULL));

	/* calloc with a zero count or size behaves like malloc(0) */
	static const size_t cz[][2] = { { 0, 0 }, { 0, 1 }, { 1, 0 }, { 0, SIZE_MAX }, { SIZE_MAX, 0 }, { 0, 4096 } };
	for (size_t i = 0; i < sizeof cz / sizeof cz[0]; i++) {
		void *p = v_calloc(cz[i][0], cz[i][1]);
		CHECK(p != NULL, "calloc(%zu, %zu) returned NULL", cz[i][0], cz[i][1]);
		v_free(p);
	}
}

static void test_realloc_null_and_zero(void)
{
	static const size_t sizes[] = { 0, 1, 15, 100, 4096, 5000, 70000, 1 << 20, 3 * (1 << 20) + 7 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];
		errno = 12345;
		void *p = v_realloc(NULL, n);
		CHECK(p != NULL, "realloc(NULL, %zu) returned NULL", n);
		CHECK(errno == 12345, "realloc(NULL, %zu) changed errno to %d", n, errno);
		if (!p)
			continue;
		size_t u = check_fresh("realloc(NULL,n)", p, n, n >= 16 ? 16 : 8);
		uint64_t seed = fill_block(p, u, NULL);
		check_block("realloc(NULL,n)", p, u, seed);
		v_free(p);
	}

	/* realloc(p, 0): frees p, returns NULL or a unique freeable pointer */
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		void *p = v_malloc(sizes[i] + 1);
		CHECK(p != NULL, "malloc(%zu) returned NULL", sizes[i] + 1);
		if (!p)
			continue;
		memset(p, 0x11, sizes[i] + 1);
		void *other = v_malloc(0);
		void *q = v_realloc(p, 0);
		if (q != NULL) {
			CHECK(q != other, "realloc(p,0) returned a pointer that is also live from malloc(0)");
			v_free(q);
		}
		v_free(other);
	}

	/* realloc(p, 0) must not leak */
	if (have_ctl) {
		CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
		size_t before = hc_stat("stats.allocated");
		for (int i = 0; i < 100000; i++) {
			size_t n = 64 + (size_t)(i % 4096);
			if (i % 1000 == 0)
				n = 200 * 1024;
			void *p = v_malloc(n);
			CHECK(p != NULL, "malloc(%zu) returned NULL", n);
			if (!p)
				continue;
			((volatile char *)p)[0] = 1;
			void *q = v_realloc(p, 0);
			if (q)
				v_free(q);
		}
		CHECK(hc_epoch_refresh() == 0, "epoch refresh failed");
		size_t after = hc_stat("stats.allocated");
		CHECK(after < before + 16 * HC_MiB,
		    "realloc(p,0) leaks: stats.allocated %zu -> %zu after 100000 realloc(p,0) calls", before, after);
	}
}

static const size_t huge_sizes[] = {
	SIZE_MAX,
	SIZE_MAX - 1,
	SIZE_MAX - 15,
	SIZE_MAX - 4095,
	SIZE_MAX - (1 << 20),
	SIZE_MAX - ((size_t)64 << 20),
	SIZE_MAX / 2 + 1, /* PTRDIFF_MAX + 1 */
	PTRDIFF_MAX,
	SIZE_MAX / 2 - 4095,
	(size_t)1 << 62,
	(size_t)1 << 48,
	(size_t)1 << 47,
};
#define N_HUGE (sizeof huge_sizes / sizeof huge_sizes[0])

static void expect_enomem_ptr(const char *call, void *p, int err)
{
	CHECK(p == NULL, "%s returned non-NULL %p for an impossible size", call, p);
	CHECK(err == ENOMEM, "%s: errno %d, expected ENOMEM (%d)", call, err, ENOMEM);
}

/* calloc multiplication overflow (several of these wrap to small values) */
static const size_t cpairs[][2] = {
	{ SIZE_MAX / 2, 3 }, { (size_t)1 << 40, (size_t)1 << 40 },
	{ (size_t)1 << 32, (size_t)1 << 32 },             /* wraps to 0 */
	{ (size_t)1 << 33, ((size_t)1 << 31) + 1 },       /* wraps to 8 GiB */
	{ ((size_t)1 << 32) + 1, ((size_t)1 << 32) - 1 }, /* = SIZE_MAX */
	{ SIZE_MAX / 2 + 1, 2 },                          /* wraps to 0 */
	{ SIZE_MAX / 2 + 1, 3 },                          /* wraps to 2^63 */
	{ SIZE_MAX, SIZE_MAX }, { 65537, ((size_t)1 << 48) + 1 },
	{ PTRDIFF_MAX / 2 + 1, 2 },           /* PTRDIFF_MAX + 1, no wrap */
	{ (size_t)1 << 24, (size_t)1 << 40 }, /* 2^64 exactly: wraps to 0 */
	{ 3, SIZE_MAX / 3 + 1 },              /* wraps to 2 */
};

/* every allocation call refuses a size no one can have, with ENOMEM */
static void test_huge_sizes(void)
{
	char what[160];
	for (size_t i = 0; i < N_HUGE; i++) {
		size_t n = huge_sizes[i];
		void *p;
		int e;

		errno = 0;
		p = v_malloc(n);
		e = errno;
		snprintf(what, sizeof what, "malloc(%zu)", n);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);

		errno = 0;
		p = v_realloc(NULL, n);
		e = errno;
		snprintf(what, sizeof what, "realloc(NULL, %zu)", n);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);

		errno = 0;
		p = v_calloc(1, n);
		e = errno;
		snprintf(what, sizeof what, "calloc(1, %zu)", n);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);

		errno = 0;
		p = v_calloc(n, 1);
		e = errno;
		snprintf(what, sizeof what, "calloc(%zu, 1)", n);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);

		static const size_t aligns[] = { 8, 16, 64, 4096, 1 << 20, (size_t)64 << 20 };
		for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
			void *q = SENTINEL;
			int r = v_posix_memalign(&q, aligns[a], n);
			CHECK(r == ENOMEM, "posix_memalign(&p, %zu, %zu) returned %d, expected ENOMEM", aligns[a], n,
			    r);
			CHECK(q == SENTINEL, "posix_memalign(&p, %zu, %zu) failed but modified *memptr (%p)", aligns[a],
			    n, q);
			if (r == 0 && q != SENTINEL)
				v_free(q);

			errno = 0;
			p = v_aligned_alloc(aligns[a], n);
			e = errno;
			snprintf(what, sizeof what, "aligned_alloc(%zu, %zu)", aligns[a], n);
			expect_enomem_ptr(what, p, e);
			if (p)
				v_free(p);

			errno = 0;
			p = v_memalign(aligns[a], n);
			e = errno;
			snprintf(what, sizeof what, "memalign(%zu, %zu)", aligns[a], n);
			expect_enomem_ptr(what, p, e);
			if (p)
				v_free(p);
		}

		errno = 0;
		p = v_valloc(n);
		e = errno;
		snprintf(what, sizeof what, "valloc(%zu)", n);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);

		errno = 0;
		p = v_pvalloc(n);
		e = errno;
		snprintf(what, sizeof what, "pvalloc(%zu)", n);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);
	}


	/* pvalloc rounding up to a page must not wrap around */
	for (size_t k = 1; k <= page_size; k *= 2) {
		errno = 0;
		void *p = v_pvalloc(SIZE_MAX - (k - 1));
		int e = errno;
		snprintf(what, sizeof what, "pvalloc(SIZE_MAX - %zu)", k - 1);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);
	}
}

/* calloc and reallocarray refuse a product that overflows */
static void test_calloc_overflow(void)
{
	char what[160];
	for (size_t i = 0; i < sizeof cpairs / sizeof cpairs[0]; i++) {
		errno = 0;
		void *p = v_calloc(cpairs[i][0], cpairs[i][1]);
		int e = errno;
		snprintf(what, sizeof what, "calloc(%zu, %zu)", cpairs[i][0], cpairs[i][1]);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);

		errno = 0;
		p = v_reallocarray(NULL, cpairs[i][0], cpairs[i][1]);
		e = errno;
		snprintf(what, sizeof what, "reallocarray(NULL, %zu, %zu)", cpairs[i][0], cpairs[i][1]);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);
	}
}

/* a failed realloc or reallocarray leaves the block as it was */
static void test_failed_realloc_keeps(void)
{
	char what[160];
	/* failed realloc / reallocarray keeps the original block intact */
	static const size_t keep_sizes[] = { 1, 16, 100, 3000, 20000, 50000, 300000, 2 << 20, 9 << 20 };
	for (size_t i = 0; i < sizeof keep_sizes / sizeof keep_sizes[0]; i++) {
		size_t n = keep_sizes[i];
		void *p = v_malloc(n);
		CHECK(p != NULL, "malloc(%zu) returned NULL", n);
		if (!p)
			continue;
		uint64_t seed = hc_seed(p, n, 77);
		hc_fill(p, n, seed);
		for (size_t j = 0; j < N_HUGE; j++) {
			errno = 0;
			void *q = v_realloc(p, huge_sizes[j]);
			int e = errno;
			snprintf(what, sizeof what, "realloc(<%zu-byte block>, %zu)", n, huge_sizes[j]);
			expect_enomem_ptr(what, q, e);
			if (q) {
				p = q; /* contents were supposedly moved; cannot continue meaningfully */
				break;
			}
			snprintf(what, sizeof what, "block after failed realloc(p, %zu)", huge_sizes[j]);
			check_block(what, p, n, seed);
			CHECK(v_usable(p) >= n, "usable size of %zu-byte block shrank to %zu after failed realloc", n,
			    v_usable(p));
		}
		for (size_t j = 0; j < sizeof cpairs / sizeof cpairs[0]; j++) {
			errno = 0;
			void *q = v_reallocarray(p, cpairs[j][0], cpairs[j][1]);
			int e = errno;
			snprintf(what, sizeof what, "reallocarray(<%zu-byte block>, %zu, %zu)", n, cpairs[j][0],
			    cpairs[j][1]);
			expect_enomem_ptr(what, q, e);
			if (q) {
				p = q;
				break;
			}
			check_block("block after failed reallocarray", p, n, seed);
		}
		v_free(p);
	}
}

/* reallocarray that succeeds keeps the contents */
static void test_reallocarray_grows(void)
{
	/* reallocarray success path preserves contents */
	{
		errno = 12345;
		unsigned *a = v_reallocarray(NULL, 10, sizeof(unsigned));
		CHECK(a != NULL && errno == 12345, "reallocarray(NULL, 10, 4) failed (errno %d)", errno);
		if (a) {
			for (unsigned i = 0; i < 10; i++)
				a[i] = i * 2654435761u;
			for (size_t cnt = 100; cnt <= 4000000; cnt *= 7) {
				unsigned *b = v_reallocarray(a, cnt, sizeof(unsigned));
				CHECK(b != NULL, "reallocarray(p, %zu, 4) returned NULL", cnt);
				if (!b)
					break;
				a = b;
				bool ok = true;
				for (unsigned i = 0; i < 10; i++)
					ok &= a[i] == i * 2654435761u;
				CHECK(ok, "reallocarray(p, %zu, 4) lost contents", cnt);
				memset(a + 10, 0x77, (cnt - 10) * sizeof(unsigned));
			}
			v_free(a);
		}
	}
}

/* alignments no block can have, with a small size */
static void test_absurd_alignments(void)
{
	char what[160];
	/* absurd alignments with small sizes */
	static const size_t big_aligns[] = { (size_t)1 << 62, SIZE_MAX / 2 + 1 };
	for (size_t i = 0; i < 2; i++) {
		void *q = SENTINEL;
		int r = v_posix_memalign(&q, big_aligns[i], 16);
		CHECK(r == ENOMEM, "posix_memalign(&p, %zu, 16) returned %d, expected ENOMEM", big_aligns[i], r);
		CHECK(q == SENTINEL, "failed posix_memalign(&p, %zu, 16) modified *memptr", big_aligns[i]);
		if (r == 0 && q != SENTINEL)
			v_free(q);
		errno = 0;
		void *p = v_aligned_alloc(big_aligns[i], 16);
		int e = errno;
		snprintf(what, sizeof what, "aligned_alloc(%zu, 16)", big_aligns[i]);
		expect_enomem_ptr(what, p, e);
		if (p)
			v_free(p);
	}
}

static void test_huge_and_overflow(void)
{
	test_huge_sizes();
	/* again with a freed mapping in the huge cache, where a request is
	 * served first (its size must not overflow on the way) */
	v_free(v_malloc((size_t)9 << 20));
	test_huge_sizes();
	test_calloc_overflow();
	test_failed_realloc_keeps();
	test_reallocarray_grows();
	test_absurd_alignments();
}

static void check_zero(const char *what, const void *p, size_t n)
{
	size_t bad = hc_find_nonzero(p, n);
	CHECK(bad == (size_t)-1, "%s: %zu-byte calloc block %p has non-zero byte at offset %zu", what, n, p, bad);
}

static void test_calloc_zeroed(void)
{
	/* size sweep 1 byte .. 64 MiB; each block is dirtied before free so that
	 * later callocs are likely to get recycled dirty memory */
	size_t n = 1;
	while (n <= 64 * HC_MiB) {
		for (int form = 0; form < 2; form++) {
			void *p;
			if (form == 0)
				p = v_calloc(1, n);
			else
				p = (n % 8 == 0) ? v_calloc(n / 8, 8) : v_calloc(n, 1);
			CHECK(p != NULL, "calloc of %zu bytes returned NULL", n);
			if (!p)
				continue;
			check_zero("calloc sweep", hc_launder(p), n);
			size_t u = v_usable(p);
			CHECK(u >= n, "calloc(%zu): usable %zu < size", n, u);
			memset(p, 0xc5, u);
			v_free(p);
		}
		if (n < 2048)
			n += 1;
		else if (n < 65536)
			n += 333;
		else
			n = n * 5 / 4 + 4093;
	}
	for (int lg = 12; lg <= 26; lg++) {
		size_t sz = (size_t)1 << lg;
		void *p = v_calloc(sz, 1);
		CHECK(p != NULL, "calloc(%zu, 1) returned NULL", sz);
		if (p) {
			check_zero("calloc pow2", hc_launder(p), sz);
			memset(p, 0x3c, sz);
			v_free(p);
		}
	}

	/* reuse of freed dirty memory: free a memset block, calloc the same size */
	static const size_t sizes[] = { 1, 8, 24, 100, 1000, 4000, 4096, 16384, 20000, 65536, 100000, 1 << 20, 3 << 20,
		8 << 20, 64 << 20 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t sz = sizes[i];
		int reps = sz <= 100000 ? 200 : sz <= (8 << 20) ? 20 : 4;
		for (int r = 0; r < reps; r++) {
			void *p = v_malloc(sz);
			CHECK(p != NULL, "malloc(%zu) returned NULL", sz);
			if (!p)
				continue;
			memset(p, 0xa5, v_usable(p));
			v_free(hc_launder(p));
			void *q = v_calloc(1, sz);
			CHECK(q != NULL, "calloc(1, %zu) returned NULL", sz);
			if (!q)
				continue;
			check_zero("calloc after free of dirty block", hc_launder(q), sz);
			memset(q, 0x5a, v_usable(q));
			v_free(q);
		}
		/* batch: many dirty blocks freed, then callocs of the same size */
		if (sz <= 100000) {
			enum { B = 300 };
			void *ps[B];
			for (int b = 0; b < B; b++) {
				ps[b] = v_malloc(sz);
				CHECK(ps[b] != NULL, "malloc(%zu) returned NULL", sz);
				if (ps[b])
					memset(ps[b], 0xee, v_usable(ps[b]));
			}
			for (int b = 0; b < B; b++)
				v_free(ps[b]);
			for (int b = 0; b < B; b++) {
				ps[b] = v_calloc(sz, 1);
				CHECK(ps[b] != NULL, "calloc(%zu, 1) returned NULL", sz);
				if (ps[b])
					check_zero("batched calloc after dirty frees", hc_launder(ps[b]), sz);
			}
			for (int b = 0; b < B; b++)
				v_free(ps[b]);
		}
	}

	/* calloc after realloc-shrink + free (dirty tail) */
	for (int r = 0; r < 50; r++) {
		size_t sz = 4096 + (size_t)r * 3000;
		void *p = v_malloc(sz * 2);
		if (!p)
			continue;
		memset(p, 0xff, sz * 2);
		void *q = v_realloc(p, sz);
		CHECK(q != NULL, "realloc shrink failed");
		if (!q) {
			v_free(p);
			continue;
		}
		v_free(q);
		void *c = v_calloc(2, sz);
		CHECK(c != NULL, "calloc(2, %zu) failed", sz);
		if (c) {
			check_zero("calloc after realloc-shrink", hc_launder(c), sz * 2);
			v_free(c);
		}
	}
}

static void test_errno_preserved(void)
{
	static const size_t sizes[] = { 0, 1, 16, 100, 1000, 4096, 10000, 16384, 20000, 100000, 1 << 20, (1 << 20) + 1,
		3 << 20, 8 << 20, 32 << 20 };
	for (int round = 0; round < 4; round++) {
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
			size_t n = sizes[i];
			errno = 12345;
			void *p = v_malloc(n);
			CHECK(p != NULL, "malloc(%zu) failed", n);
			CHECK(errno == 12345, "malloc(%zu) changed errno to %d", n, errno);
			if (!p)
				continue;
			memset(p, 1, n);
			errno = 12345;
			size_t u = v_usable(p);
			CHECK(errno == 12345 && u >= n,
			    "malloc_usable_size changed errno (%d) or too small (%zu < %zu)", errno, u, n);
			errno = 12345;
			void *q = v_realloc(p, n * 2 + 1);
			CHECK(q != NULL, "realloc grow to %zu failed", n * 2 + 1);
			CHECK(errno == 12345, "realloc(%zu -> %zu) changed errno to %d", n, n * 2 + 1, errno);
			if (q)
				p = q;
			errno = 12345;
			q = v_realloc(p, n / 2 + 1);
			CHECK(q != NULL, "realloc shrink to %zu failed", n / 2 + 1);
			CHECK(errno == 12345, "realloc(-> %zu) shrink changed errno to %d", n / 2 + 1, errno);
			if (q)
				p = q;
			errno = 12345;
			v_free(p);
			CHECK(errno == 12345, "free of %zu-byte block changed errno to %d", n / 2 + 1, errno);

			errno = 12345;
			p = v_calloc(1, n);
			CHECK(p != NULL && errno == 12345, "calloc(1, %zu): %p errno %d", n, p, errno);
			errno = 12345;
			v_free(p);
			CHECK(errno == 12345, "free of calloc(1, %zu) block changed errno to %d", n, errno);

			static const size_t al[] = { 16, 64, 4096, 1 << 16, 1 << 21 };
			size_t a = al[(i + (size_t)round) % 5];
			errno = 12345;
			p = NULL;
			int r = v_posix_memalign(&p, a, n);
			CHECK(r == 0 && p != NULL, "posix_memalign(%zu, %zu) failed: %d", a, n, r);
			CHECK(errno == 12345, "posix_memalign(%zu, %zu) changed errno to %d", a, n, errno);
			errno = 12345;
			v_free(p);
			CHECK(errno == 12345, "free of posix_memalign(%zu, %zu) block changed errno to %d", a, n,
			    errno);

			errno = 12345;
			p = v_aligned_alloc(a, n);
			CHECK(p != NULL && errno == 12345, "aligned_alloc(%zu, %zu): %p errno %d", a, n, p, errno);
			errno = 12345;
			v_free(p);
			CHECK(errno == 12345, "free of aligned_alloc block changed errno to %d", errno);

			errno = 12345;
			p = v_valloc(n);
			CHECK(p != NULL && errno == 12345, "valloc(%zu): %p errno %d", n, p, errno);
			errno = 12345;
			v_free(p);
			CHECK(errno == 12345, "free of valloc block changed errno to %d", errno);
		}
	}
}

/* realloc from p(old seed) to new size: verify prefix, refill */
static void *realloc_checked(const char *what, void *p, size_t *np, uint64_t *seedp, size_t newn)
{
	size_t oldn = *np;
	uint64_t oldseed = *seedp;
	void *q = v_realloc(p, newn);
	CHECK(q != NULL, "%s: realloc(%zu -> %zu) returned NULL", what, oldn, newn);
	if (!q) {
		check_block("block after failed realloc", p, oldn, oldseed);
		return p;
	}
	size_t keep = oldn < newn ? oldn : newn;
	size_t bad = hc_verify(q, keep, oldseed);
	CHECK(bad == (size_t)-1, "%s: realloc(%p, %zu -> %zu) = %p lost contents at offset %zu", what, p, oldn, newn, q,
	    bad);
	size_t u = v_usable(q);
	CHECK(u >= newn, "%s: realloc(%zu -> %zu): usable %zu", what, oldn, newn, u);
	CHECK(((uintptr_t)q & 7) == 0, "%s: realloc result %p misaligned", what, q);
	*seedp = hc_seed(q, u, tag_counter++);
	hc_fill(q, u, *seedp);
	*np = u;
	return q;
}

/* realloc up a chain to 40 MiB and back down, contents kept */
static void test_realloc_chain(void)
{
	/* growth chain 1 byte -> 40 MiB, then shrink chain back */
	size_t n = 1;
	void *p = v_malloc(n);
	CHECK(p != NULL, "malloc(1) failed");
	if (!p)
		return;
	uint64_t seed = hc_seed(p, 1, 1);
	hc_fill(p, 1, seed);
	while (n < 40 * HC_MiB) {
		size_t next = n + n / 3 + 1;
		p = realloc_checked("growth chain", p, &n, &seed, next);
	}
	size_t want = n;
	while (want > 1) {
		want = want - want / 3 - 1;
		if (want == 0)
			want = 1;
		p = realloc_checked("shrink chain", p, &n, &seed, want);
	}
	v_free(p);
}

/* realloc by small steps around the size classes' boundaries */
static void test_realloc_boundaries(void)
{
	size_t n;
	void *p;
	uint64_t seed;
	/* +-1 byte steps around every size in small/large/huge boundaries */
	static const size_t bases[] = { 8, 16, 128, 512, 1024, 4096, 8192, 14336, 16384, 32768, 65536, 262144, 1 << 20,
		2 << 20, (1 << 20) * 3, 4 << 20 };
	for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
		n = bases[i];
		p = v_malloc(n);
		CHECK(p != NULL, "malloc(%zu) failed", n);
		if (!p)
			continue;
		seed = hc_seed(p, n, 2);
		hc_fill(p, n, seed);
		size_t b = bases[i];
		static const long deltas[] = { 1, -1, -2, 2, 100, -100, 4096, -4096, 0 };
		for (size_t d = 0; d < sizeof deltas / sizeof deltas[0]; d++) {
			long t = (long)b + deltas[d];
			if (t <= 0)
				continue;
			p = realloc_checked("boundary step", p, &n, &seed, (size_t)t);
		}
		/* realloc to exactly the same usable size */
		p = realloc_checked("same size", p, &n, &seed, n);
		v_free(p);
	}
}

/* realloc at random across every range, neighbours changing */
static void test_realloc_walk(void)
{
	/* random walk across all ranges with interleaved allocations that change
	 * which neighbours are free (exercises in-place and moving paths) */
	enum { L = 24 };
	void *live[L] = { 0 };
	size_t live_n[L] = { 0 };
	uint64_t live_seed[L] = { 0 };
	void *junk[L] = { 0 };
	hc_rng rng;
	hc_rng_init(&rng, 99);
	for (int step = 0; step < 6000; step++) {
		int i = (int)hc_rng_below(&rng, L);
		uint64_t r = hc_rng_below(&rng, 100);
		size_t newn;
		if (r < 60)
			newn = hc_rng_range(&rng, 1, 16383);
		else if (r < 95)
			newn = hc_rng_range(&rng, 16384, HC_MiB);
		else
			newn = hc_rng_range(&rng, HC_MiB + 1, 6 * HC_MiB);
		if (hc_rng_below(&rng, 4) == 0 && live[i]) {
			/* small relative change: likely in place */
			size_t cur = live_n[i];
			long delta = (long)hc_rng_range(&rng, 0, 2 * (cur / 8 + 1)) - (long)(cur / 8 + 1);
			long t = (long)cur + delta;
			newn = t <= 0 ? 1 : (size_t)t;
		}
		if (!live[i]) {
			live[i] = v_malloc(newn);
			CHECK(live[i] != NULL, "malloc(%zu) failed", newn);
			if (!live[i])
				continue;
			live_n[i] = v_usable(live[i]);
			live_seed[i] = hc_seed(live[i], live_n[i], (uint64_t)step);
			hc_fill(live[i], live_n[i], live_seed[i]);
		} else {
			live[i] = realloc_checked("random walk", live[i], &live_n[i], &live_seed[i], newn);
		}
		/* shuffle neighbours */
		int j = (int)hc_rng_below(&rng, L);
		if (junk[j]) {
			v_free(junk[j]);
			junk[j] = NULL;
		} else {
			size_t jn = hc_rng_below(&rng, 4) == 0 ? hc_rng_range(&rng, 16384, 600000)
			                                       : hc_rng_range(&rng, 1, 8000);
			junk[j] = v_malloc(jn);
			if (junk[j])
				memset(junk[j], 0x99, jn);
		}
		if (hc_rng_below(&rng, 50) == 0) {
			check_block("random walk", live[i], live_n[i], live_seed[i]);
			v_free(live[i]);
			live[i] = NULL;
		}
	}
	for (int i = 0; i < L; i++) {
		if (live[i]) {
			check_block("random walk final", live[i], live_n[i], live_seed[i]);
			v_free(live[i]);
		}
		v_free(junk[i]);
	}
}

/* realloc of blocks from every allocation function */
static void test_realloc_kinds(void)
{
	size_t n;
	uint64_t seed;
	/* realloc of blocks from every allocation function */
	for (int kind = 0; kind < 6; kind++) {
		static const size_t szs[] = { 24, 5000, 40000, 2 << 20 };
		for (size_t s = 0; s < 4; s++) {
			size_t sz = szs[s];
			void *q = NULL;
			switch (kind) {
			case 0: q = v_calloc(1, sz); break;
			case 1:
				if (v_posix_memalign(&q, 4096, sz))
					q = NULL;
				break;
			case 2: q = v_aligned_alloc(256, sz); break;
			case 3: q = v_memalign(1 << 16, sz); break;
			case 4: q = v_valloc(sz); break;
			default: q = v_pvalloc(sz); break;
			}
			CHECK(q != NULL, "allocation kind %d size %zu failed", kind, sz);
			if (!q)
				continue;
			n = v_usable(q);
			seed = hc_seed(q, n, 5);
			hc_fill(q, n, seed);
			q = realloc_checked("realloc of aligned/calloc block (grow)", q, &n, &seed, sz * 3);
			q = realloc_checked("realloc of aligned/calloc block (shrink)", q, &n, &seed, sz / 2 + 1);
			v_free(q);
		}
	}
}

static void test_realloc_contents(void)
{
	test_realloc_chain();
	test_realloc_boundaries();
	test_realloc_walk();
	test_realloc_kinds();
}

/* operator new (allocator/cxx.c) in a process with no C++ runtime, as
 * this C program: a failure cannot throw std::bad_alloc, so the throwing
 * form ends the process with one line; the nothrow form returns NULL. */
static void new_impossible(void)
{
	void *(*op_new)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
	printf("%p\n", op_new(hc_opaque_size((size_t)1 << 62)));
}

static void test_new_without_cxx_runtime(void)
{
	void *(*op_new)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
	void *(*op_new_nothrow)(size_t, const void *) =
	    (void *(*)(size_t, const void *))dlsym(RTLD_DEFAULT, "_ZnwmRKSt9nothrow_t");
	if (op_new == NULL || op_new_nothrow == NULL || dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv") != NULL) {
		CHECK(hc_allow_no_mallctl(), "no operator new exported, or a C++ runtime loaded into this C program");
		return;
	}
	void *p = op_new(100);
	CHECK(p != NULL && malloc_usable_size(p) >= 100, "operator new(100) = %p", p);
	v_free(p);
	p = op_new_nothrow(hc_opaque_size((size_t)1 << 62), NULL);
	CHECK(p == NULL, "operator new(2^62, nothrow) = %p", p);
	char err[512];
	int st = hc_run_child(new_impossible, err, sizeof err);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
	    "operator new(2^62) without a C++ runtime: status %#x", st);
	CHECK(strstr(err, "no C++ runtime to throw std::bad_alloc") != NULL &&
	        strchr(err, '\n') == err + strlen(err) - 1,
	    "operator new(2^62) without a C++ runtime: stderr \"%s\"", err);
}

int main(void)
{
	double t0 = api_start();
	RUN(test_new_without_cxx_runtime);
	RUN(test_malloc_zero_and_free_null);
	RUN(test_realloc_null_and_zero);
	RUN(test_huge_and_overflow);
	RUN(test_calloc_zeroed);
	RUN(test_errno_preserved);
	RUN(test_realloc_contents);
	return api_finish("api_malloc", t0);
}
