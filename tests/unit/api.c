/*
 * api.c - edge cases and contract of the malloc API exported by libheapctl.so
 * (malloc free calloc realloc reallocarray posix_memalign aligned_alloc
 * memalign valloc pvalloc malloc_usable_size) and of the jemalloc-style
 * control API (mallctl, mallctlnametomib, mallctlbymib, malloc_stats_print).
 *
 * Single-threaded; runs in a few seconds.  Exit status 0 iff every check
 * passed; each failed check prints "FAIL <file>:<line>: <what>" to stderr.
 *
 * When run against plain glibc (built without -lheapctl) set
 * HC_TEST_ALLOW_NO_MALLCTL=1: mallctl checks and the few checks where glibc
 * 2.36 is known to differ from the libheapctl contract (aligned_alloc with a
 * non-power-of-two alignment) are skipped.
 */
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
static void *(*volatile v_malloc)(size_t) = malloc;
static void (*volatile v_free)(void *) = free;
static void *(*volatile v_calloc)(size_t, size_t) = calloc;
static void *(*volatile v_realloc)(void *, size_t) = realloc;
static void *(*volatile v_reallocarray)(void *, size_t, size_t) = reallocarray;
static int (*volatile v_posix_memalign)(void **, size_t, size_t) = posix_memalign;
static void *(*volatile v_aligned_alloc)(size_t, size_t) = aligned_alloc;
static void *(*volatile v_memalign)(size_t, size_t) = memalign;
static void *(*volatile v_valloc)(size_t) = valloc;
static void *(*volatile v_pvalloc)(size_t) = pvalloc;
static size_t (*volatile v_usable)(void *) = malloc_usable_size;
static int (*volatile v_malloc_trim)(size_t) = malloc_trim;

static size_t page_size;
static int have_ctl;       /* mallctl API usable */
static int under_heapctl;  /* malloc resolves to libheapctl */
static uint64_t tag_counter = 1;

#define SENTINEL ((void *)(uintptr_t)0x5eed5eed0ull)

/* ------------------------------------------------------------------ */

/* Fill the whole usable size of p and return the seed used. */
static uint64_t fill_block(void *p, size_t usable, uint64_t *tagp)
{
    uint64_t tag = tag_counter++;
    if (tagp)
        *tagp = tag;
    uint64_t seed = hc_seed(p, usable, tag);
    hc_fill(p, usable, seed);
    return seed;
}

static void check_block(const char *what, void *p, size_t n, uint64_t seed)
{
    size_t bad = hc_verify(p, n, seed);
    CHECK(bad == (size_t)-1, "%s: block %p size %zu corrupted at offset %zu", what, p, n, bad);
}

/* basic checks on a fresh allocation of `size` bytes; returns usable size */
static size_t check_fresh(const char *what, void *p, size_t size, size_t align)
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

static void test_symbol_resolution(void)
{
    under_heapctl = hc_malloc_is_heapctl();
    if (!under_heapctl) {
        if (hc_allow_no_mallctl())
            fprintf(stderr, "note: malloc is not from libheapctl (glibc mode)\n");
        else
            CHECK(under_heapctl, "malloc does not resolve to libheapctl (not linked/preloaded?)");
    }
}

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
            CHECK(ptrs[i] == NULL || ptrs[i] != ptrs[j], "malloc(0) returned the same pointer %p twice (%d, %d)",
                  ptrs[i], i, j);
    for (int i = 0; i < N; i++)
        v_free(ptrs[i]);

    errno = 12345;
    v_free(NULL);
    CHECK(errno == 12345, "free(NULL) changed errno to %d", errno);
    CHECK(v_usable(NULL) == 0, "malloc_usable_size(NULL) = %zu, expected 0", v_usable(NULL));

    /* calloc with a zero count or size behaves like malloc(0) */
    static const size_t cz[][2] = {{0, 0}, {0, 1}, {1, 0}, {0, SIZE_MAX}, {SIZE_MAX, 0}, {0, 4096}};
    for (size_t i = 0; i < sizeof cz / sizeof cz[0]; i++) {
        void *p = v_calloc(cz[i][0], cz[i][1]);
        CHECK(p != NULL, "calloc(%zu, %zu) returned NULL", cz[i][0], cz[i][1]);
        v_free(p);
    }
}

static void test_realloc_null_and_zero(void)
{
    static const size_t sizes[] = {0, 1, 15, 100, 4096, 5000, 70000, 1 << 20, 3 * (1 << 20) + 7};
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

static void test_huge_and_overflow(void)
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

        static const size_t aligns[] = {8, 16, 64, 4096, 1 << 20, (size_t)64 << 20};
        for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
            void *q = SENTINEL;
            int r = v_posix_memalign(&q, aligns[a], n);
            CHECK(r == ENOMEM, "posix_memalign(&p, %zu, %zu) returned %d, expected ENOMEM", aligns[a], n, r);
            CHECK(q == SENTINEL, "posix_memalign(&p, %zu, %zu) failed but modified *memptr (%p)", aligns[a], n, q);
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

    /* calloc multiplication overflow (several of these wrap to small values) */
    static const size_t cpairs[][2] = {
        {SIZE_MAX / 2, 3},
        {(size_t)1 << 40, (size_t)1 << 40},
        {(size_t)1 << 32, (size_t)1 << 32},         /* wraps to 0 */
        {(size_t)1 << 33, ((size_t)1 << 31) + 1},   /* wraps to 8 GiB */
        {((size_t)1 << 32) + 1, ((size_t)1 << 32) - 1}, /* = SIZE_MAX */
        {SIZE_MAX / 2 + 1, 2},                      /* wraps to 0 */
        {SIZE_MAX / 2 + 1, 3},                      /* wraps to 2^63 */
        {SIZE_MAX, SIZE_MAX},
        {65537, ((size_t)1 << 48) + 1},
        {PTRDIFF_MAX / 2 + 1, 2},                   /* PTRDIFF_MAX + 1, no wrap */
        {(size_t)1 << 24, (size_t)1 << 40},         /* 2^64 exactly: wraps to 0 */
        {3, SIZE_MAX / 3 + 1},                      /* wraps to 2 */
    };
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

    /* failed realloc / reallocarray keeps the original block intact */
    static const size_t keep_sizes[] = {1, 16, 100, 3000, 20000, 50000, 300000, 2 << 20, 9 << 20};
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

    /* absurd alignments with small sizes */
    static const size_t big_aligns[] = {(size_t)1 << 62, SIZE_MAX / 2 + 1};
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

static void test_bad_alignments(void)
{
    static const size_t bad[] = {0, 1, 2, 4, 3, 5, 6, 7, 12, 24, 48, 100, 4097, 65535, (1 << 20) + 8,
                                 SIZE_MAX, SIZE_MAX / 2, SIZE_MAX - 7, ((size_t)1 << 40) + 4096};
    static const size_t sizes[] = {0, 16, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            void *q = SENTINEL;
            int r = v_posix_memalign(&q, bad[i], sizes[s]);
            CHECK(r == EINVAL, "posix_memalign(&p, %zu, %zu) returned %d, expected EINVAL", bad[i], sizes[s], r);
            CHECK(q == SENTINEL, "posix_memalign(&p, %zu, %zu) failed but modified *memptr", bad[i], sizes[s]);
            if (r == 0 && q != SENTINEL)
                v_free(q);
        }
    }
    /* aligned_alloc: alignment must be a power of two (glibc 2.36 does not check) */
    static const size_t bad_aa[] = {0, 3, 6, 12, 24, 48, 100, 4097, 65535, (1 << 20) + 8, SIZE_MAX};
    if (under_heapctl) {
        for (size_t i = 0; i < sizeof bad_aa / sizeof bad_aa[0]; i++) {
            errno = 0;
            void *p = v_aligned_alloc(bad_aa[i], 64);
            int e = errno;
            CHECK(p == NULL, "aligned_alloc(%zu, 64) with non-power-of-two alignment returned %p", bad_aa[i], p);
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
    static const size_t sizes[] = {0,     1,     7,     8,          15,             16,
                                   100,   1000,  4095,  4096,       4097,           65536,
                                   65537, 99999, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 5};
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
    static const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 8191, 65537, (1 << 20) + 3, 5 << 20};
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
    void *ring[RING] = {0};
    size_t ring_u[RING] = {0};
    size_t ring_n[RING] = {0};
    uint64_t ring_seed[RING] = {0};
    unsigned slot = 0;

    size_t n = 0;
    while (n <= 70000) {
        void *p = v_malloc(n);
        CHECK(p != NULL, "malloc(%zu) returned NULL", n);
        if (p) {
            size_t align = n >= 16 ? 16 : 8;
            size_t u = check_fresh("malloc sweep", p, n, align);
            if (ring[slot]) {
                check_block("malloc sweep (older live block)", ring[slot], ring_u[slot], ring_seed[slot]);
                CHECK(v_usable(ring[slot]) == ring_u[slot], "usable size of live %zu-byte block changed %zu -> %zu",
                      ring_n[slot], ring_u[slot], v_usable(ring[slot]));
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

/* qsort order of elements by their first uintptr_t (a block's address,
 * a chunk's number) */
static int cmp_first_word(const void *a, const void *b)
{
    const uintptr_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
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
        case 0:
            p = v_calloc(1, n);
            break;
        case 1:
            if (v_posix_memalign(&p, (size_t)1 << (3 + i % 10), n) != 0)
                p = NULL;
            break;
        default:
            p = v_malloc(n);
            break;
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
            CHECK(overlaps > 5, "live blocks overlap: [%#lx,+%lu) and [%#lx,+%lu)", (unsigned long)blk[i][0],
                  (unsigned long)blk[i][1], (unsigned long)blk[i + 1][0], (unsigned long)blk[i + 1][1]);
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
    static const size_t sizes[] = {1,     8,     24,     100,     1000,     4000,     4096,   16384,
                                   20000, 65536, 100000, 1 << 20, 3 << 20, 8 << 20, 64 << 20};
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
    static const size_t sizes[] = {0,       1,           16,      100,     1000,    4096,     10000, 16384,
                                   20000,   100000,      1 << 20, (1 << 20) + 1, 3 << 20, 8 << 20, 32 << 20};
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
            CHECK(errno == 12345 && u >= n, "malloc_usable_size changed errno (%d) or too small (%zu < %zu)", errno,
                  u, n);
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

            static const size_t al[] = {16, 64, 4096, 1 << 16, 1 << 21};
            size_t a = al[(i + (size_t)round) % 5];
            errno = 12345;
            p = NULL;
            int r = v_posix_memalign(&p, a, n);
            CHECK(r == 0 && p != NULL, "posix_memalign(%zu, %zu) failed: %d", a, n, r);
            CHECK(errno == 12345, "posix_memalign(%zu, %zu) changed errno to %d", a, n, errno);
            errno = 12345;
            v_free(p);
            CHECK(errno == 12345, "free of posix_memalign(%zu, %zu) block changed errno to %d", a, n, errno);

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
    CHECK(bad == (size_t)-1, "%s: realloc(%p, %zu -> %zu) = %p lost contents at offset %zu", what, p, oldn, newn,
          q, bad);
    size_t u = v_usable(q);
    CHECK(u >= newn, "%s: realloc(%zu -> %zu): usable %zu", what, oldn, newn, u);
    CHECK(((uintptr_t)q & 7) == 0, "%s: realloc result %p misaligned", what, q);
    *seedp = hc_seed(q, u, tag_counter++);
    hc_fill(q, u, *seedp);
    *np = u;
    return q;
}

static void test_realloc_contents(void)
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

    /* +-1 byte steps around every size in small/large/huge boundaries */
    static const size_t bases[] = {8,     16,    128,    512,    1024,    4096,    8192,        14336,
                                   16384, 32768, 65536,  262144, 1 << 20, 2 << 20, (1 << 20) * 3, 4 << 20};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        n = bases[i];
        p = v_malloc(n);
        CHECK(p != NULL, "malloc(%zu) failed", n);
        if (!p)
            continue;
        seed = hc_seed(p, n, 2);
        hc_fill(p, n, seed);
        size_t b = bases[i];
        static const long deltas[] = {1, -1, -2, 2, 100, -100, 4096, -4096, 0};
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

    /* random walk across all ranges with interleaved allocations that change
     * which neighbours are free (exercises in-place and moving paths) */
    enum { L = 24 };
    void *live[L] = {0};
    size_t live_n[L] = {0};
    uint64_t live_seed[L] = {0};
    void *junk[L] = {0};
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
            size_t jn = hc_rng_below(&rng, 4) == 0 ? hc_rng_range(&rng, 16384, 600000) : hc_rng_range(&rng, 1, 8000);
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

    /* realloc of blocks from every allocation function */
    for (int kind = 0; kind < 6; kind++) {
        static const size_t szs[] = {24, 5000, 40000, 2 << 20};
        for (size_t s = 0; s < 4; s++) {
            size_t sz = szs[s];
            void *q = NULL;
            switch (kind) {
            case 0:
                q = v_calloc(1, sz);
                break;
            case 1:
                if (v_posix_memalign(&q, 4096, sz))
                    q = NULL;
                break;
            case 2:
                q = v_aligned_alloc(256, sz);
                break;
            case 3:
                q = v_memalign(1 << 16, sz);
                break;
            case 4:
                q = v_valloc(sz);
                break;
            default:
                q = v_pvalloc(sz);
                break;
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

    static const char *const bools[] = {"config.debug", "config.prof", "config.stats"};
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

    static const char *const stats[] = {"stats.allocated", "stats.active",   "stats.metadata",
                                        "stats.resident",  "stats.mapped",   "stats.retained"};
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
    static const char *const bogus[] = {"no.such.name", "stats.allocatedx", "stats.allocated.foo",
                                        "stats.bogus",  "epochs",           "config.nonexistent",
                                        "xyz",          "stats..allocated", "arenas.pagex"};
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
    CHECK(r == 0 && emiblen >= 1 && emiblen <= 8, "mallctlnametomib(\"epoch\") returned %d miblen %zu", r,
          emiblen);

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

    static const char *const names[] = {"stats.active", "stats.mapped", "stats.resident", "stats.metadata",
                                        "stats.retained", "arenas.page"};
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

static char stats_buf[1 << 20];
static size_t stats_len;
static int stats_calls;

static void stats_cb(void *opaque, const char *s)
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
        CHECK(p[i] != p[i - 1] && *(unsigned char *)p[i] == (i & 0xff), "block %d overlaps or was clobbered", i);

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

/* Run fn in a child whose stderr is captured into err; its wait status. */
static int run_child_stderr(void (*fn)(void), char *err, size_t cap)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        fn();
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd[0], err + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    err[n] = '\0';
    close(fd[0]);
    int st = -1;
    waitpid(pid, &st, 0);
    return st;
}

/* fn(arg) on a thread of its own, waited for; false (a failed check) if
 * the thread could not be made. */
static bool in_thread(void *(*fn)(void *), void *arg)
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
static void own_heap(void)
{
    v_free(v_malloc(16));
}

/* A new thread's first blocks of a class come from a shared heap (a free
 * of one is a remote push); after 16 it has a page of its own. */
static void *double_free_shared_thread(void *arg)
{
    void *x = v_malloc(200);    /* a new thread's heap: a shared page's block */
    v_free(x);
    v_free(x);
    return arg;
}

static void *double_free_own_thread(void *arg __attribute__((unused)))
{
    void *keep[16];
    for (int i = 0; i < 16; i++)
        keep[i] = v_malloc(200);
    void *x = v_malloc(200);    /* the only block of the thread's own page */
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
    void *p[2] = {v_malloc(200), v_malloc(200)};
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
    void *keep[2] = {v_malloc(200)}, *x = v_malloc(200);
    keep[1] = v_malloc(200);    /* x's page stays in use */
    (void)keep;
    for (int i = 0; i < 2; i++)    /* two threads, one after the other */
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
    void *p[2] = {v_malloc(200), v_malloc(200)};
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
    void *p[2] = {v_malloc(8), v_malloc(8)};
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
    void *q[3] = {v_malloc(8), v_malloc(8), v_malloc(8)};
    if (q[0] == q[2] || q[0] == q[1] || q[1] == q[2])
        _exit(3);    /* a block handed out twice */
    return NULL;
}

static void double_free_child_tiny_cached(void)
{
    tiny_aca_then_drain(free_aca_alloc_thread);
}

/* A second free of the only block of a page is caught, not absorbed: in a
 * page of the thread's own and in a shared one; so are a double free of
 * another thread's block with a free between, one by two threads, and one
 * of a block that the owner took back from its page's remote list.  A
 * loop of 8-byte blocks is caught as a corrupted list when the owner takes
 * it back. */
static void test_double_free_caught(void)
{
    if (!under_heapctl)
        return;
    void (*child[])(void) = { double_free_child_own, double_free_child_shared, double_free_child_apart,
                              double_free_child_threads, double_free_child_collected };
    for (int i = 0; i < 5; i++) {
        char err[512];
        int st = run_child_stderr(child[i], err, sizeof err);
        CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "double free %d: child status %#x", i, st);
        CHECK(strstr(err, "double free") != NULL, "double free %d: stderr was \"%s\"", i, err);
    }
    void (*tiny[])(void) = { double_free_child_tiny, double_free_child_tiny_cached };
    for (int i = 0; i < 2; i++) {
        char err[512];
        int st = run_child_stderr(tiny[i], err, sizeof err);
        CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "8-byte double free %d: child status %#x", i,
              st);
        CHECK(strstr(err, "corrupted free list") != NULL, "8-byte double free %d: stderr was \"%s\"", i, err);
    }
}

/* ---- a thread's first blocks come from shared pages --------------------- */

static long small_chunks(void)
{
    int magic = 0x5eed;
    stats_len = 0;
    hc_malloc_stats_print(stats_cb, &magic, NULL);
    const char *at = strstr(stats_buf, "Small chunks: ");
    return at ? strtol(at + strlen("Small chunks: "), NULL, 10) : -1;
}

static pthread_barrier_t starter_up, starter_done;
static int starter_blocks;

static void *starter_thread(void *arg)
{
    static const size_t sizes[] = { 24, 100, 300, 1000 };
    void **keep = arg;
    int k = 0;
    for (unsigned s = 0; s < 4; s++)
        for (int i = 0; i < starter_blocks; i++) {
            keep[k] = v_malloc(sizes[s]);
            memset(keep[k], 0x33, sizes[s]);
            k++;
        }
    pthread_barrier_wait(&starter_up);
    pthread_barrier_wait(&starter_done);
    for (int i = 0; i < k; i++)
        v_free(keep[i]);
    return NULL;
}

enum { STARTER_MAXT = 200 };
static void *starter_keep[STARTER_MAXT][4 * 20];

/* The 4 MiB chunk a block lies in (one heap's, or one shared heap's). */
static uintptr_t chunk_number(const void *p)
{
    return (uintptr_t)p >> 22;
}

/* How many 4 MiB chunks the threads' blocks number `index` of class 24
 * lie in, after starter_chunks: one each if every thread has a heap chunk
 * of its own, new or adopted from a thread gone before. */
static int starter_block_chunks(int nthreads, int index)
{
    uintptr_t ids[STARTER_MAXT];
    for (int t = 0; t < nthreads; t++)
        ids[t] = chunk_number(starter_keep[t][index]);
    qsort(ids, (size_t)nthreads, sizeof ids[0], cmp_first_word);
    int n = 0;
    for (int t = 0; t < nthreads; t++)
        n += t == 0 || ids[t] != ids[t - 1];
    return n;
}

/* Threads alive at once, each holding `blocks` blocks of four classes: how
 * many small chunks the live threads added. */
static long starter_chunks(int nthreads, int blocks)
{
    pthread_t t[STARTER_MAXT];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    starter_blocks = blocks;
    pthread_barrier_init(&starter_up, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&starter_done, NULL, (unsigned)nthreads + 1);
    long before = small_chunks();
    int made = 0;
    for (; made < nthreads; made++)
        if (pthread_create(&t[made], &attr, starter_thread, starter_keep[made]) != 0)
            break;
    CHECK(made == nthreads, "starter: made %d of %d threads", made, nthreads);
    if (made < nthreads)
        _exit(1);       /* the barriers would never open */
    pthread_barrier_wait(&starter_up);
    long during = small_chunks();
    CHECK(before >= 0 && during >= 0, "starter: no \"Small chunks\" in malloc_stats_print (%ld, %ld)", before, during);
    pthread_barrier_wait(&starter_done);
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&starter_up);
    pthread_barrier_destroy(&starter_done);
    pthread_attr_destroy(&attr);
    return during - before;
}

/* 200 threads that hold 16 blocks each of four classes get no chunk of
 * their own (the four shared heaps may add one each); with 17 they do.
 * That is read from the blocks' addresses, not the count of chunks: a
 * thread may adopt the chunk of one that exited earlier in this program
 * (holding blocks it left), which adds none. */
static void test_thread_starter_blocks(void)
{
    if (!under_heapctl)
        return;
    long shared = starter_chunks(200, 16);
    CHECK(shared <= 4, "200 threads with 16 blocks a class added %ld small chunks, want <= 4", shared);
    int lastshared = starter_block_chunks(200, 15);
    CHECK(lastshared <= 8, "200 threads' 16th blocks of 24 bytes lie in %d chunks, want <= 8", lastshared);
    starter_chunks(200, 17);
    int first = starter_block_chunks(200, 0), own17 = starter_block_chunks(200, 16);
    CHECK(first <= 8, "200 threads' first blocks of 24 bytes lie in %d chunks, want <= 8", first);
    CHECK(own17 == 200, "200 threads' 17th blocks of 24 bytes lie in %d chunks, want 200 (one each)", own17);
}

/* Two blocks in one chunk. */
static bool same_chunk(const void *a, const void *b)
{
    return chunk_number(a) == chunk_number(b);
}

/* heapctl's allocator with sampling off, for the tests of where blocks
 * land: a sampled block is a page run, elsewhere. */
static bool unsampled_heapctl(void)
{
    bool active = true;
    size_t len = sizeof active;
    return under_heapctl && have_ctl && hc_mallctl("prof.active", &active, &len, NULL, 0) == 0 && !active;
}

/* Threads that allocate one after another take their first blocks from
 * one shared heap (they used to be dealt out over one per CPU, each keeping
 * pages for them): eight threads in turn, each keeping one 200-byte block,
 * leave them in one chunk.  One may have found the heap busy (the control
 * thread allocating at that moment) and moved. */
static void *sequential_thread(void *arg)
{
    *(void **)arg = v_malloc(200);
    return NULL;
}

static void test_sequential_threads_share(void)
{
    if (!under_heapctl)
        return;
    enum { N = 8 };
    void *p[N] = {0};
    for (int i = 0; i < N; i++)
        if (!in_thread(sequential_thread, &p[i]))
            return;
    int best = 0;
    for (int i = 0; i < N; i++) {
        int same = 0;
        for (int j = 0; j < N; j++)
            same += same_chunk(p[i], p[j]);
        best = same > best ? same : best;
    }
    CHECK(best >= N - 1, "%d threads one after another left their blocks in several chunks, at most %d in one", N,
          best);
    for (int i = 0; i < N; i++)
        v_free(p[i]);
}

/* A thread holding 100 blocks of 1792 bytes (16 from a shared heap, then
 * pages of its own: 36, 36 and a third that is partly carved) frees 30 in
 * its full pages, then allocates 30 again.  Those must come from the
 * carved blocks and the holes: no page is carved further while another of
 * the class has free blocks, so stats.active does not move. */
static void *holes_thread(void *arg)
{
    enum { N = 100, HOLES = 30, SZ = 1700, USZ = 1792 };
    void *a[N], *b[HOLES];
    size_t *grew = arg;
    for (int i = 0; i < N; i++) {
        a[i] = v_malloc(SZ);
        if (a[i] == NULL || v_usable(a[i]) != USZ) {
            *grew = (size_t)-1;
            return NULL;
        }
    }
    for (int i = 20; i < 20 + HOLES; i++)
        v_free(a[i]);
    hc_epoch_refresh();
    size_t act0 = hc_stat("stats.active");
    for (int i = 0; i < HOLES; i++)
        b[i] = v_malloc(SZ);
    hc_epoch_refresh();
    *grew = hc_stat("stats.active") - act0;
    for (int i = 0; i < HOLES; i++)
        v_free(b[i]);
    for (int i = 0; i < N; i++)
        if (i < 20 || i >= 20 + HOLES)
            v_free(a[i]);
    return NULL;
}

static void test_holes_before_carving(void)
{
    if (!unsampled_heapctl())    /* a sampled block is a page run: active grows */
        return;
    size_t grew = 0;
    /* another thread carving a page between the two reads would show as
     * growth: one clean try of three is enough */
    for (int try = 0; try < 3; try++) {
        if (!in_thread(holes_thread, &grew))
            return;
        if (grew == 0)
            break;
    }
    CHECK(grew != (size_t)-1, "malloc(1700) failed or is not of usable size 1792");
    CHECK(grew == 0, "refilling 30 freed blocks carved %zu more bytes", grew);
}

/* The main thread (the first to allocate) takes no starter blocks from a
 * shared heap: its 1st and 17th blocks of a class it has not used come from
 * one chunk, its own (the 1st was a shared heap's before).  First in main,
 * while its chunk has room; with sampling off. */
static void test_main_no_starters(void)
{
    if (!unsampled_heapctl())
        return;
    void *p[17];
    for (int i = 0; i < 17; i++)
        p[i] = v_malloc(7000);    /* class 7168, used by nothing before */
    CHECK(p[0] && p[16] && same_chunk(p[0], p[16]),
          "the main thread's 1st and 17th blocks of 7168 bytes are in different chunks: %p, %p", p[0], p[16]);
    for (int i = 0; i < 17; i++)
        v_free(p[i]);
}

/* A new thread's first block of its own page in each of the 16 classes up
 * to 448 bytes: no two share their low 12 address bits (were all at their
 * page's start, a loop over them stalls on 4K aliasing).  Run before any
 * thread has exited, so the pages are new, not adopted; and with sampling
 * off, so that none of the blocks is a sampled one (those are page runs). */
static void *offsets_thread(void *arg)
{
    static const size_t sizes[16] = {8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448};
    void *keep[16][17];
    uintptr_t *low = arg;
    for (int c = 0; c < 16; c++) {
        for (int i = 0; i < 17; i++)    /* 16 from a shared heap, then its own page */
            keep[c][i] = v_malloc(sizes[c]);
        low[c] = (uintptr_t)keep[c][16] & 4095;
    }
    for (int c = 0; c < 16; c++)
        for (int i = 0; i < 17; i++)
            v_free(keep[c][i]);
    return NULL;
}

static void test_page_offsets(void)
{
    if (!unsampled_heapctl())
        return;
    uintptr_t low[16];
    if (!in_thread(offsets_thread, low))
        return;
    int same = 0, sa = 0, sb = 0;
    for (int a = 0; a < 16; a++)
        for (int b = a + 1; b < 16; b++)
            if (low[a] == low[b] && same++ == 0)
                sa = a, sb = b;
    CHECK(same == 0, "%d pairs of classes share the low 12 bits of their first own block (classes %d and %d: 0x%03lx)",
          same, sa, sb, (unsigned long)low[sa]);
}

/* The remote cache is in the default build only (the checked build frees
 * every block back to its page). */
static bool remote_cache_built(void)
{
    const char *pre = getenv("LD_PRELOAD");
    return unsampled_heapctl() && !(pre && strstr(pre, "heapctl-secure"));
}

/* A thread that frees another thread's blocks gets them back at its next
 * allocation of their class (the newest first), by malloc, by a size above
 * 1 KiB and by memalign; before, they went back to the owner's page and the
 * thread's own allocations came from elsewhere.  thread.tcache.flush and
 * the thread's exit give them back to their pages. */
static void *xcache_thread(void *arg)
{
    void **p = arg;
    own_heap();
    v_free(p[0]);
    v_free(p[1]);
    v_free(p[2]);
    v_free(p[3]);
    p[4] = v_malloc(3000);
    p[5] = v_malloc(200);
    p[6] = v_memalign(64, 192);
    p[7] = v_malloc(200);
    for (int i = 4; i < 8; i++)
        v_free(p[i]);
    return NULL;
}

/* thread.tcache.flush gives them back: the next allocation is another
 * block. */
static void *xcache_flush_thread(void *arg)
{
    void **p = arg;
    own_heap();
    v_free(p[0]);
    p[1] = (void *)(intptr_t)hc_mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    p[2] = v_malloc(200);
    v_free(p[2]);
    return NULL;
}

/* A thread's cached blocks go back to their pages when it exits: the
 * owner's page then empties and is retired (stats.active falls back). */
static void *xcache_exit_thread(void *arg)
{
    void **p = arg;
    own_heap();
    for (int i = 0; i < 5; i++)
        v_free(p[i]);
    return NULL;
}

static void test_remote_cache(void)
{
    if (!remote_cache_built())
        return;
    void *p[8] = {v_malloc(200), v_malloc(200), v_malloc(3000), v_memalign(64, 192)};
    void *want[4] = {p[2], p[1], p[3], p[0]};
    if (!in_thread(xcache_thread, p))
        return;
    static const char *what[4] = {"malloc(3000)", "malloc(200)", "memalign(64, 192)", "a second malloc(200)"};
    for (int i = 0; i < 4; i++)
        CHECK(p[4 + i] == want[i], "%s after freeing another thread's block got %p, not that block (%p)", what[i],
              p[4 + i], want[i]);

    void *f[3] = {v_malloc(200)};
    if (!in_thread(xcache_flush_thread, f))
        return;
    CHECK(f[1] == NULL, "thread.tcache.flush failed: %d", (int)(intptr_t)f[1]);
    CHECK(f[2] != f[0], "after thread.tcache.flush malloc(200) still got the block freed before it (%p)", f[0]);

    size_t grew = 1;
    for (int try = 0; try < 3 && grew != 0; try++) {
        v_malloc_trim(0);
        hc_epoch_refresh();
        size_t act0 = hc_stat("stats.active");
        void *q[5];
        for (int i = 0; i < 5; i++)    /* class 12288: a page holds 5 */
            q[i] = v_malloc(12000);
        if (!in_thread(xcache_exit_thread, q))
            return;
        v_malloc_trim(0);
        hc_epoch_refresh();
        size_t act1 = hc_stat("stats.active");
        grew = act1 > act0 ? act1 - act0 : 0;
    }
    CHECK(grew == 0, "a page whose blocks an exited thread freed is still held: stats.active grew by %zu", grew);
}

/* A new page takes a slot that is already resident (a retired page's)
 * wherever the thread has one, before a never-touched slot: a thread fills
 * one chunk with 8 KiB blocks and spills into a second, empties a page of
 * the first, then starts a class: its page goes into the first chunk (the
 * second, which the thread looked at first, was chosen before). */
static void *dirty_first_thread(void *arg)
{
    enum { MAX = 1200 };
    void **b = malloc(MAX * sizeof *b);
    void **out = arg;
    out[0] = out[1] = NULL;
    if (b == NULL)
        return NULL;
    int n = 0, spill = -1;
    for (; n < MAX && spill < 0; n++) {
        b[n] = v_malloc(8192);
        if (b[n] == NULL)
            break;
        if (n > 16 && !same_chunk(b[n], b[16]))
            spill = n;    /* the first block of the second chunk */
    }
    if (spill > 0) {
        /* the 8 blocks of the page that holds b[40] */
        void *first = b[16];
        uintptr_t page = (uintptr_t)b[40] >> 16;
        for (int i = 16; i < n; i++)
            if (b[i] && ((uintptr_t)b[i] >> 16) == page) {
                v_free(b[i]);
                b[i] = NULL;
            }
        void *c[17];
        for (int i = 0; i < 17; i++)    /* 16 from a shared heap, then a page */
            c[i] = v_malloc(6000);
        out[0] = first;
        out[1] = c[16];
        out[2] = b[spill];
        for (int i = 0; i < 17; i++)
            v_free(c[i]);
    }
    for (int i = 0; i < n; i++)
        v_free(b[i]);
    free(b);
    return NULL;
}

static void test_dirty_slots_first(void)
{
    if (!unsampled_heapctl())
        return;
    void *out[3] = {0};    /* the first chunk, the new page, the second chunk */
    if (!in_thread(dirty_first_thread, out))
        return;
    CHECK(out[0] != NULL, "8 KiB blocks did not spill into a second chunk");
    if (out[0] != NULL)
        CHECK(same_chunk(out[0], out[1]),
              "a new page went to the untouched chunk %p (the retired slot is in %p)", out[1], out[0]);
}

/* The 64 KiB slot (a small page) that p lies in. */
static uintptr_t slot_of(const void *p)
{
    return (uintptr_t)p & ~(uintptr_t)0xffff;
}

/* OS pages of the 64 KiB slot at slot that are resident (mincore). */
static int slot_resident(const void *slot)
{
    unsigned char vec[16];
    if (mincore((void *)slot_of(slot), 1 << 16, vec) != 0)
        return -1;
    int n = 0;
    for (int i = 0; i < 16; i++)
        n += vec[i] & 1;
    return n;
}

/* The 64 KiB slots that blocks[0..n) lie in, each once, into slots[]. */
static int slots_of(void *const *blocks, int n, uintptr_t *slots, int cap)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        uintptr_t s = slot_of(blocks[i]);
        bool seen = false;
        for (int j = 0; j < k && !seen; j++)
            seen = slots[j] == s;
        if (!seen && k < cap)
            slots[k++] = s;
    }
    return k;
}

/* malloc_trim (and arena.<i>.purge, the same call) gives back the calling
 * thread's free slots at once, as jemalloc's purge does: it used to leave
 * those retired in the current and the last decay epoch (all of them, in a
 * program that freed and trimmed within a second). */
enum { TRIM_N = 1500 };

static void *trim_thread(void *arg)
{
    int *out = arg;
    void **b = malloc(TRIM_N * sizeof *b);
    out[0] = out[1] = 0;
    if (b == NULL)
        return NULL;
    for (int i = 0; i < TRIM_N; i++) {
        b[i] = v_malloc(1000);
        if (b[i] != NULL)
            memset(b[i], 0x5a, 1000);
    }
    uintptr_t slots[64];
    /* the first 16 are starter blocks, in a shared heap */
    int k = slots_of(b + 16, TRIM_N - 16, slots, 64);
    for (int i = 0; i < TRIM_N; i++)
        v_free(b[i]);
    free(b);
    v_malloc_trim(0);
    out[0] = k;
    for (int j = 0; j < k; j++)
        out[1] += slot_resident((void *)slots[j]) > 0;
    return NULL;
}

static void test_trim_purges_own_slots(void)
{
    if (!unsampled_heapctl())
        return;
    int out[2];
    if (!in_thread(trim_thread, out))
        return;
    CHECK(out[0] >= 20, "1,500 blocks of 1000 bytes took %d slots", out[0]);
    /* one page may stay: a class's last page is kept for the next malloc */
    CHECK(out[1] <= 1, "after malloc_trim(0) %d of the %d slots the thread freed are still resident", out[1],
          out[0]);
}

/* A chunk that comes back from the cache before its decay still has the
 * slots its last heap wrote resident.  They stay known as dirty: the new
 * heap's pages take them first, and what it leaves is purged (they were
 * forgotten, and stayed resident for the chunk's whole next life).  A thread
 * writes 10 slots and exits; the next thread's heap takes the chunk, uses one
 * page, and trims. */
static void *cache_writer_thread(void *arg)
{
    void **b = arg;
    for (int i = 0; i < 600; i++) {    /* 16 starters, then about 9 pages */
        b[i] = v_malloc(1000);
        if (b[i] != NULL)
            memset(b[i], 0x5a, 1000);
    }
    for (int i = 0; i < 600; i++)
        v_free(b[i]);
    return NULL;
}

static void *cache_reuser_thread(void *arg)
{
    void **b = arg;
    void *c[17];
    for (int i = 0; i < 17; i++)
        c[i] = v_malloc(1000);
    b[0] = c[16];
    for (int i = 0; i < 17; i++)
        v_free(c[i]);
    v_malloc_trim(0);
    return NULL;
}

static void test_cached_chunk_dirty(void)
{
    if (!unsampled_heapctl())
        return;
    void **b = calloc(600, sizeof *b);
    void *reused[1] = {NULL};
    if (b == NULL || !in_thread(cache_writer_thread, b)) {
        free(b);
        return;
    }
    uintptr_t slots[64];
    int k = slots_of(b + 16, 584, slots, 64);
    CHECK(k >= 8, "600 blocks of 1000 bytes took %d slots", k);
    /* the cache purges a chunk that waits there a whole decay epoch (half
     * a second): on a machine that stalled that long there is nothing to
     * test */
    for (int j = 0; j < k; j++)
        if (slot_resident((void *)slots[j]) <= 0) {
            free(b);
            return;
        }
    if (!in_thread(cache_reuser_thread, reused)) {
        free(b);
        return;
    }
    if (!same_chunk(reused[0], b[599])) {
        CHECK(0, "the second thread's page %p is not in the first thread's chunk (%p)", reused[0], b[599]);
        free(b);
        return;
    }
    int left = 0, others = 0;
    bool in_old = false;
    for (int j = 0; j < k; j++) {
        if (slots[j] == slot_of(reused[0])) {
            in_old = true;
            continue;
        }
        others++;
        left += slot_resident((void *)slots[j]) > 0;
    }
    CHECK(left == 0, "%d of the %d slots an exited thread wrote are still resident after the next thread "
                     "took its chunk and trimmed", left, others);
    CHECK(in_old, "the new page %p went to a slot the first thread never wrote", reused[0]);
    free(b);
}

/* A large object grown or shrunk within the pages it has stays where it
 * is, with its contents and usable size (realloc answers it without the
 * arena's lock); one more byte than its pages moves it or grows the run. */
static void test_realloc_large_same_pages(void)
{
    if (!under_heapctl)
        return;
    char *p = v_malloc(20000);
    if (p == NULL)
        return;
    size_t u = v_usable(p);
    CHECK(u == 20480, "malloc(20000): usable %zu, not its 5 pages", u);
    memset(p, 0x33, 20000);
    static const size_t sizes[] = {20001, 20480, 16385, 20400};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        char *q = v_realloc(p, sizes[k]);
        CHECK(q == p, "realloc to %zu within its pages moved it (%p -> %p)", sizes[k], (void *)p, (void *)q);
        if (q == NULL)
            return;
        p = q;
        CHECK(v_usable(p) == 20480, "realloc to %zu: usable %zu", sizes[k], v_usable(p));
    }
    for (size_t i = 0; i < 16385; i++)
        if (p[i] != 0x33) {
            CHECK(0, "byte %zu changed by realloc within the pages", i);
            break;
        }
    char *q = v_realloc(p, 20481);
    CHECK(q != NULL && v_usable(q) == 24576, "realloc to 20481: usable %zu", q ? v_usable(q) : 0);
    if (q != NULL) {
        for (size_t i = 0; i < 16385; i++)
            if (q[i] != 0x33) {
                CHECK(0, "byte %zu lost when realloc went past the pages", i);
                break;
            }
        p = q;
    }
    v_free(p);
}

/* Chunks mapped one after another are mapped next to each other, so the
 * kernel merges them: 256 objects of 1 MiB (32 LARGE chunks of 8 MiB) sit
 * in a few VMAs, not one each.  With a VMA per chunk (and a hole between
 * any two), a fork copies every one of them, and a heap of 256 GiB meets
 * vm.max_map_count. */
static void test_chunks_merge(void)
{
    if (!under_heapctl)
        return;
    enum { N = 256 };
    static void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = v_malloc(1 << 20);
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL, "cannot read /proc/self/maps");
    int vmas = 0, held = 0;
    char line[512];
    while (f != NULL && fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) != 2)
            continue;
        int in = 0;
        for (int i = 0; i < N; i++)
            in += p[i] != NULL && (uintptr_t)p[i] >= lo && (uintptr_t)p[i] < hi;
        vmas += in > 0;
        held += in;
    }
    if (f != NULL)
        fclose(f);
    CHECK(held == N, "%d of %d objects of 1 MiB found in /proc/self/maps", held, N);
    CHECK(vmas <= 4, "%d objects of 1 MiB are spread over %d VMAs (chunks not merged)", N, vmas);
    for (int i = 0; i < N; i++)
        v_free(p[i]);
}

static int verbose;

#define RUN(fn)                                                                \
    do {                                                                       \
        double t_ = hc_now();                                                  \
        fn();                                                                  \
        if (verbose)                                                           \
            fprintf(stderr, "  %-32s %.2f s\n", #fn, hc_now() - t_);           \
    } while (0)

int main(void)
{
    verbose = getenv("HC_TEST_VERBOSE") != NULL;
    double t0 = hc_now();
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    test_symbol_resolution();
    have_ctl = hc_ctl_init();
    RUN(test_main_no_starters);    /* first: the main thread's chunk has room */
    if (have_ctl) {
        RUN(test_page_offsets);     /* first: no thread has exited yet */
        RUN(test_dirty_slots_first);    /* early: no chunk to adopt */
        RUN(test_cached_chunk_dirty);    /* early: no chunk to adopt */
        RUN(test_trim_purges_own_slots);
        RUN(test_remote_cache);
    }

    RUN(test_malloc_zero_and_free_null);
    RUN(test_realloc_null_and_zero);
    RUN(test_huge_and_overflow);
    RUN(test_bad_alignments);
    RUN(test_alignment_matrix);
    RUN(test_valloc_pvalloc);
    RUN(test_size_sweep);
    RUN(test_no_overlap);
    RUN(test_calloc_zeroed);
    RUN(test_errno_preserved);
    RUN(test_realloc_contents);
    RUN(test_realloc_large_same_pages);
    RUN(test_chunks_merge);
    RUN(test_double_free_caught);
    if (have_ctl) {
        RUN(test_page_states);     /* counts through stats.allocated */
        RUN(test_mallctl_basic);
        RUN(test_mallctl_mib);
        RUN(test_stats_print);
        RUN(test_stats_sanity);
        RUN(test_thread_starter_blocks);
        RUN(test_sequential_threads_share);
        RUN(test_holes_before_carving);
    }
    fprintf(stderr, "api: %.2f s\n", hc_now() - t0);
    return hc_check_finish("api");
}
