/*
 * tests/unit/api_align.c - the aligned allocators (posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc): bad alignments refused, every
 * alignment and size kept, and blocks of every size that never overlap.
 * The parts every api_*.c shares, and how to run it on plain glibc:
 * tests/lib/api.h.
 */
#include "../lib/api.h"

static void test_bad_alignments(void)
{
	static const size_t bad[] = { 0, 1, 2, 4, 3, 5, 6, 7, 12, 24, 48, 100, 4097, 65535, (1 << 20) + 8, SIZE_MAX,
		SIZE_MAX / 2, SIZE_MAX - 7, ((size_t)1 << 40) + 4096 };
	static const size_t sizes[] = { 0, 16, 1000, 1 << 20 };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
			void *q = SENTINEL;
			int r = v_posix_memalign(&q, bad[i], sizes[s]);
			CHECK(r == EINVAL, "posix_memalign(&p, %zu, %zu) returned %d, expected EINVAL", bad[i],
			    sizes[s], r);
			CHECK(q == SENTINEL, "posix_memalign(&p, %zu, %zu) failed but modified *memptr", bad[i],
			    sizes[s]);
			if (r == 0 && q != SENTINEL)
				v_free(q);
		}
	}
	/* aligned_alloc: alignment must be a power of two (glibc 2.36 does not check) */
	static const size_t bad_aa[] = { 0, 3, 6, 12, 24, 48, 100, 4097, 65535, (1 << 20) + 8, SIZE_MAX };
	if (under_heapctl) {
		for (size_t i = 0; i < sizeof bad_aa / sizeof bad_aa[0]; i++) {
			errno = 0;
			void *p = v_aligned_alloc(bad_aa[i], 64);
			int e = errno;
			CHECK(p == NULL, "aligned_alloc(%zu, 64) with non-power-of-two alignment returned %p",
			    bad_aa[i], p);
			CHECK(e == EINVAL, "aligned_alloc(%zu, 64): errno %d, expected EINVAL", bad_aa[i], e);
			if (p)
				v_free(p);
		}
	}
	/* small power-of-two alignments are valid for aligned_alloc and memalign */
	for (size_t a = 1; a <= 8; a *= 2) {
		errno = 12345;
		void *p = v_aligned_alloc(a, 40);
		CHECK(p != NULL && errno == 12345, "aligned_alloc(%zu, 40) failed (errno %d)", a, errno);
		check_fresh("aligned_alloc small alignment", p, 40, a);
		if (p)
			memset(p, 1, 40);
		v_free(p);
		p = v_memalign(a, 40);
		CHECK(p != NULL, "memalign(%zu, 40) failed", a);
		check_fresh("memalign small alignment", p, 40, a);
		if (p)
			memset(p, 1, 40);
		v_free(p);
	}
}

static void test_alignment_matrix(void)
{
	static const size_t sizes[] = { 0, 1, 7, 8, 15, 16, 100, 1000, 4095, 4096, 4097, 65536, 65537, 99999, 1 << 20,
		(1 << 20) + 1, 3 * (1 << 20) + 5 };
	enum { NS = sizeof sizes / sizeof sizes[0] };
	for (int lg = 3; lg <= 26; lg++) {
		size_t align = (size_t)1 << lg;
		for (int api = 0; api < 3; api++) {
			void *ptrs[NS];
			size_t us[NS];
			uint64_t seeds[NS];
			const char *name = api == 0 ? "posix_memalign" : api == 1 ? "aligned_alloc" : "memalign";
			for (int s = 0; s < NS; s++) {
				void *p = NULL;
				errno = 12345;
				if (api == 0) {
					int r = v_posix_memalign(&p, align, sizes[s]);
					CHECK(r == 0, "posix_memalign(&p, %zu, %zu) returned %d", align, sizes[s], r);
					if (r)
						p = NULL;
				} else if (api == 1) {
					p = v_aligned_alloc(align, sizes[s]);
				} else {
					p = v_memalign(align, sizes[s]);
				}
				CHECK(p != NULL, "%s(%zu, %zu) failed", name, align, sizes[s]);
				CHECK(errno == 12345, "%s(%zu, %zu) changed errno to %d", name, align, sizes[s], errno);
				ptrs[s] = p;
				us[s] = 0;
				seeds[s] = 0;
				if (!p)
					continue;
				char what[96];
				snprintf(what, sizeof what, "%s(%zu, %zu)", name, align, sizes[s]);
				us[s] = check_fresh(what, p, sizes[s], align);
				seeds[s] = fill_block(p, us[s], NULL);
			}
			for (int s = 0; s < NS; s++) {
				if (!ptrs[s])
					continue;
				char what[96];
				snprintf(what, sizeof what, "%s(%zu, %zu) block", name, align, sizes[s]);
				check_block(what, ptrs[s], us[s], seeds[s]);
				CHECK(v_usable(ptrs[s]) == us[s], "%s: usable size changed %zu -> %zu", what, us[s],
				    v_usable(ptrs[s]));
				v_free(ptrs[s]);
			}
		}
	}
}

static void test_valloc_pvalloc(void)
{
	static const size_t sizes[] = { 0, 1, 100, 4095, 4096, 4097, 8191, 65537, (1 << 20) + 3, 5 << 20 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];
		errno = 12345;
		void *p = v_valloc(n);
		CHECK(p != NULL, "valloc(%zu) returned NULL", n);
		CHECK(errno == 12345, "valloc(%zu) changed errno to %d", n, errno);
		if (p) {
			size_t u = check_fresh("valloc", p, n, page_size);
			uint64_t seed = fill_block(p, u, NULL);
			check_block("valloc", p, u, seed);
			v_free(p);
		}

		errno = 12345;
		p = v_pvalloc(n);
		CHECK(p != NULL, "pvalloc(%zu) returned NULL", n);
		CHECK(errno == 12345, "pvalloc(%zu) changed errno to %d", n, errno);
		if (p) {
			size_t want = (n + page_size - 1) / page_size * page_size;
			if (n == 0 && under_heapctl) /* glibc 2.36 pvalloc(0) returns a minimal chunk */
				want = page_size;
			size_t u = check_fresh("pvalloc", p, want, page_size);
			CHECK(u >= want, "pvalloc(%zu): usable size %zu < page-rounded size %zu", n, u, want);
			uint64_t seed = fill_block(p, u, NULL);
			check_block("pvalloc", p, u, seed);
			v_free(p);
		}
	}
}

/* malloc/usable/fill/verify/free over a dense sweep of sizes, with a ring of
 * live blocks so that overlapping allocations are detected. */
static void test_size_sweep(void)
{
	enum { RING = 64 };
	void *ring[RING] = { 0 };
	size_t ring_u[RING] = { 0 };
	size_t ring_n[RING] = { 0 };
	uint64_t ring_seed[RING] = { 0 };
	unsigned slot = 0;

	size_t n = 0;
	while (n <= 70000) {
		void *p = v_malloc(n);
		CHECK(p != NULL, "malloc(%zu) returned NULL", n);
		if (p) {
			size_t align = n >= 16 ? 16 : 8;
			size_t u = check_fresh("malloc sweep", p, n, align);
			if (ring[slot]) {
				check_block("malloc sweep (older live block)", ring[slot], ring_u[slot],
				    ring_seed[slot]);
				CHECK(v_usable(ring[slot]) == ring_u[slot],
				    "usable size of live %zu-byte block changed %zu -> %zu", ring_n[slot], ring_u[slot],
				    v_usable(ring[slot]));
				v_free(ring[slot]);
			}
			ring[slot] = p;
			ring_u[slot] = u;
			ring_n[slot] = n;
			ring_seed[slot] = fill_block(p, u, NULL);
			slot = (slot + 1) % RING;
		}
		if (n < 4096)
			n += 1;
		else if (n < 20000)
			n += 7;
		else
			n += 13;
	}
	for (int i = 0; i < RING; i++) {
		if (ring[i]) {
			check_block("malloc sweep (final)", ring[i], ring_u[i], ring_seed[i]);
			v_free(ring[i]);
		}
	}

	/* powers of two up to 256 MiB, and their neighbours */
	for (int lg = 0; lg <= 28; lg++) {
		for (int d = -1; d <= 1; d++) {
			size_t sz = ((size_t)1 << lg) + (size_t)(ssize_t)d;
			void *p = v_malloc(sz);
			CHECK(p != NULL, "malloc(%zu) returned NULL", sz);
			if (!p)
				continue;
			size_t u = check_fresh("malloc pow2", p, sz, sz >= 16 ? 16 : 8);
			uint64_t seed = fill_block(p, u, NULL);
			check_block("malloc pow2", p, u, seed);
			v_free(p);
		}
	}
}

/* many live blocks of mixed sizes must not overlap */
static void test_no_overlap(void)
{
	enum { N = 20000 };
	static uintptr_t blk[N][4]; /* addr, usable, seed, requested */
	hc_rng rng;
	hc_rng_init(&rng, 4242);
	for (int i = 0; i < N; i++) {
		size_t n;
		uint64_t r = hc_rng_below(&rng, 1000);
		if (r < 900)
			n = hc_rng_below(&rng, 1024);
		else if (r < 990)
			n = hc_rng_logsize(&rng, 1024, 200000);
		else
			n = hc_rng_logsize(&rng, 1 << 20, 3 << 20);
		void *p;
		switch (i % 5) {
		case 0: p = v_calloc(1, n); break;
		case 1:
			if (v_posix_memalign(&p, (size_t)1 << (3 + i % 10), n) != 0)
				p = NULL;
			break;
		default: p = v_malloc(n); break;
		}
		CHECK(p != NULL, "allocation of %zu bytes returned NULL", n);
		if (!p) {
			blk[i][0] = 0;
			continue;
		}
		size_t u = check_fresh("overlap test", p, n, 0);
		blk[i][0] = (uintptr_t)p;
		blk[i][1] = u;
		blk[i][2] = hc_seed(p, u, (uint64_t)i);
		blk[i][3] = n;
		hc_fill(p, u, blk[i][2]);
	}
	qsort(blk, N, sizeof blk[0], cmp_first_word);
	int overlaps = 0;
	for (int i = 0; i + 1 < N; i++) {
		if (blk[i][0] == 0)
			continue;
		if (blk[i][0] + blk[i][1] > blk[i + 1][0]) {
			overlaps++;
			CHECK(overlaps > 5, "live blocks overlap: [%#lx,+%lu) and [%#lx,+%lu)",
			    (unsigned long)blk[i][0], (unsigned long)blk[i][1], (unsigned long)blk[i + 1][0],
			    (unsigned long)blk[i + 1][1]);
		}
	}
	CHECK(overlaps == 0, "%d overlapping pairs of live blocks", overlaps);
	for (int i = 0; i < N; i++) {
		if (blk[i][0] == 0)
			continue;
		check_block("overlap test", (void *)blk[i][0], blk[i][1], blk[i][2]);
		v_free((void *)blk[i][0]);
	}
}

int main(void)
{
	double t0 = api_start();
	RUN(test_bad_alignments);
	RUN(test_alignment_matrix);
	RUN(test_valloc_pvalloc);
	RUN(test_size_sweep);
	RUN(test_no_overlap);
	return api_finish("api_align", t0);
}
