/*
 * misc.c - unusual allocation contexts:
 *   - allocation in constructors, before main (and use/free of those blocks
 *     in main and at exit);
 *   - dlopen/dlclose of shared libraries (zlib, libm, libbz2, liblzma,
 *     libstdc++ with its dynamic TLS) in a loop from several threads, calling
 *     functions in them that allocate, while other threads allocate;
 *   - pthread key destructors that malloc/free during thread teardown
 *     (re-arming the key so destructors run several rounds);
 *   - a SIGALRM interval timer whose handler does not allocate, firing while
 *     threads loop on malloc/free;
 *   - allocation in atexit handlers and destructors, while background
 *     threads are still allocating during exit().
 * Exit status 0 iff all checks passed (an atexit-time failure uses _exit(1)).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../lib/check.h"
#include "../lib/testutil.h"

typedef struct {
	void *p;
	size_t size;
	uint64_t seed;
} blk_t;

static int blk_new(blk_t *b, size_t size, uint64_t tag)
{
	b->size = size;
	b->p = malloc(size);
	CHECK(b->p != NULL, "malloc(%zu) failed", size);
	if (!b->p)
		return 0;
	CHECK(malloc_usable_size(b->p) >= size, "usable %zu < %zu", malloc_usable_size(b->p), size);
	b->seed = hc_seed(b->p, size, tag);
	hc_fill(b->p, size, b->seed);
	return 1;
}

static int blk_ok(const blk_t *b)
{
	return hc_verify(b->p, b->size, b->seed) == (size_t)-1;
}

static void blk_del(blk_t *b, const char *when)
{
	if (!b->p)
		return;
	size_t bad = hc_verify(b->p, b->size, b->seed);
	CHECK(bad == (size_t)-1, "%s: block %p size %zu corrupted at offset %zu", when, b->p, b->size, bad);
	free(b->p);
	b->p = NULL;
}

/* ------------------------------------------------------------------ */
/* constructors / destructors / atexit                                  */

#define NCTOR 12
static blk_t ctor_blocks[NCTOR];
static int ctor_ran, ctor2_ran;
static blk_t exit_blocks[8]; /* allocated in main, freed in the atexit handler */
static blk_t dtor_block;     /* allocated in main, freed in a destructor */

__attribute__((constructor(101))) static void early_ctor(void)
{
	static const size_t sizes[NCTOR] = { 0, 1, 24, 100, 1000, 5000, 16384, 40000, 300000, 1 << 20, 3 << 20, 77 };
	for (int i = 0; i < NCTOR; i++)
		blk_new(&ctor_blocks[i], sizes[i], 1000 + (uint64_t)i);
	/* free-and-reallocate a few right away */
	void *c = calloc(1000, 8);
	CHECK(c != NULL && hc_find_nonzero(hc_launder(c), 8000) == (size_t)-1, "calloc in constructor");
	free(c);
	void *a = NULL;
	CHECK(posix_memalign(&a, 4096, 10000) == 0 && ((uintptr_t)a & 4095) == 0, "posix_memalign in constructor");
	free(a);
	ctor_ran = 1;
}

__attribute__((constructor)) static void late_ctor(void)
{
	/* realloc blocks allocated by the earlier constructor */
	for (int i = 0; i < NCTOR; i += 3) {
		blk_t *b = &ctor_blocks[i];
		if (!b->p)
			continue;
		CHECK(blk_ok(b), "constructor block %d corrupted before realloc", i);
		size_t ns = b->size * 2 + 10;
		void *q = realloc(b->p, ns);
		CHECK(q != NULL, "realloc in constructor failed");
		if (!q)
			continue;
		CHECK(hc_verify(q, b->size, b->seed) == (size_t)-1, "realloc in constructor lost contents");
		b->p = q;
		b->size = ns;
		b->seed = hc_seed(q, ns, 2000 + (uint64_t)i);
		hc_fill(q, ns, b->seed);
	}
	ctor2_ran = 1;
}

static void atexit_handler(void)
{
	/* allocate and free while exiting; background threads are still running */
	for (int i = 0; i < 2000; i++) {
		blk_t b;
		if (blk_new(&b, (size_t)(i * 37) % 20000 + (i % 500 == 0 ? (1 << 20) : 0), 5000 + (uint64_t)i))
			blk_del(&b, "atexit allocation");
	}
	for (int i = 0; i < 8; i++)
		blk_del(&exit_blocks[i], "atexit free of block allocated in main");
	char *s = strdup("allocated in an atexit handler");
	CHECK(s != NULL, "strdup in atexit handler failed");
	s = realloc(s, 100000);
	CHECK(s != NULL && strcmp(s, "allocated in an atexit handler") == 0, "realloc in atexit handler");
	free(s);
	if (hc_check_failures() != 0) {
		static const char msg[] = "misc: failure during exit\n";
		(void)!write(2, msg, sizeof msg - 1);
		_exit(1);
	}
}

__attribute__((destructor)) static void dtor(void)
{
	blk_del(&dtor_block, "destructor free of block allocated in main");
	void *p = malloc(12345);
	CHECK(p != NULL, "malloc in destructor failed");
	free(p);
	if (hc_check_failures() != 0)
		_exit(1);
}

/* ------------------------------------------------------------------ */
/* dlopen / dlclose                                                     */

static unsigned long dl_calls, dl_opens, alloc_ops;

static void *sym(void *h, const char *name)
{
	dlerror();
	void *s = dlsym(h, name);
	return s;
}

/* returns 1 if the library was opened and exercised */
static int exercise_lib(int which, hc_rng *r)
{
	static const char *const libs[] = { "libz.so.1", "libm.so.6", "libbz2.so.1.0", "liblzma.so.5",
		"libstdc++.so.6" };
	const char *name = libs[which];
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		(void)dlerror();
		return 0;
	}
	unsigned char src[32768], dst[40000], back[32768];
	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (unsigned char)((i * 7) ^ (i >> 5) ^ (unsigned)hc_rng_below(r, 4));
	int ok = 1;
	if (which == 0) {
		typedef int (*compress2_t)(unsigned char *, unsigned long *, const unsigned char *, unsigned long, int);
		typedef int (*uncompress_t)(unsigned char *, unsigned long *, const unsigned char *, unsigned long);
		compress2_t c2;
		uncompress_t un;
		void *a = sym(h, "compress2"), *b = sym(h, "uncompress");
		memcpy(&c2, &a, sizeof a);
		memcpy(&un, &b, sizeof b);
		if (a && b) {
			unsigned long dl = sizeof dst, bl = sizeof back;
			ok = c2(dst, &dl, src, sizeof src, 6) == 0 && un(back, &bl, dst, dl) == 0 && bl == sizeof src &&
			    memcmp(back, src, sizeof src) == 0;
			CHECK(ok, "zlib round trip through dlopen'ed libz failed");
		}
	} else if (which == 1) {
		typedef double (*fn_t)(double);
		fn_t f;
		void *a = sym(h, "cos");
		memcpy(&f, &a, sizeof a);
		if (a) {
			double v = f(0.0);
			CHECK(v == 1.0, "cos(0) = %g via dlopen'ed libm", v);
		}
	} else if (which == 2) {
		typedef int (*bzc_t)(char *, unsigned *, char *, unsigned, int, int, int);
		typedef int (*bzd_t)(char *, unsigned *, char *, unsigned, int, int);
		bzc_t c;
		bzd_t d;
		void *a = sym(h, "BZ2_bzBuffToBuffCompress"), *b = sym(h, "BZ2_bzBuffToBuffDecompress");
		memcpy(&c, &a, sizeof a);
		memcpy(&d, &b, sizeof b);
		if (a && b) {
			unsigned dl = sizeof dst, bl = sizeof back;
			ok = c((char *)dst, &dl, (char *)src, sizeof src, 1, 0, 0) == 0 &&
			    d((char *)back, &bl, (char *)dst, dl, 0, 0) == 0 && bl == sizeof src &&
			    memcmp(back, src, sizeof src) == 0;
			CHECK(ok, "bzip2 round trip through dlopen'ed libbz2 failed");
		}
	} else if (which == 3) {
		typedef int (*enc_t)(uint32_t, int, const void *, const uint8_t *, size_t, uint8_t *, size_t *, size_t);
		typedef int (*dec_t)(uint64_t *, uint32_t, const void *, const uint8_t *, size_t *, size_t, uint8_t *,
		    size_t *, size_t);
		enc_t e;
		dec_t d;
		void *a = sym(h, "lzma_easy_buffer_encode"), *b = sym(h, "lzma_stream_buffer_decode");
		memcpy(&e, &a, sizeof a);
		memcpy(&d, &b, sizeof b);
		if (a && b) {
			size_t opos = 0, ipos = 0, bpos = 0;
			uint64_t memlimit = UINT64_MAX;
			ok = e(1, 0 /* LZMA_CHECK_NONE */, NULL, src, sizeof src, dst, &opos, sizeof dst) == 0 &&
			    d(&memlimit, 0, NULL, dst, &ipos, opos, back, &bpos, sizeof back) == 0 &&
			    bpos == sizeof src && memcmp(back, src, sizeof src) == 0;
			CHECK(ok, "lzma round trip through dlopen'ed liblzma failed");
		}
	} else {
		/* __cxa_get_globals touches libstdc++'s thread-local storage, which
		 * for a dlopen'ed library is allocated with malloc on first use */
		typedef void *(*g_t)(void);
		g_t g;
		void *a = sym(h, "__cxa_get_globals");
		memcpy(&g, &a, sizeof a);
		if (a) {
			void *globals = g();
			CHECK(globals != NULL, "__cxa_get_globals returned NULL");
		}
	}
	CHECK(dlclose(h) == 0, "dlclose(%s) failed: %s", name, dlerror());
	return 1;
}

static void *dl_thread(void *arg)
{
	int id = (int)(intptr_t)arg;
	hc_rng r;
	hc_rng_init(&r, 777 + (uint64_t)id);
	unsigned long calls = 0, opens = 0;
	for (int i = 0; i < 120; i++) {
		int which = (int)((i + id) % 5);
		if (exercise_lib(which, &r))
			opens++;
		calls++;
	}
	__atomic_add_fetch(&dl_calls, calls, __ATOMIC_RELAXED);
	__atomic_add_fetch(&dl_opens, opens, __ATOMIC_RELAXED);
	return NULL;
}

/* generic allocating thread, runs until *stop */
typedef struct {
	int *stop;
	uint64_t seed;
	int max_iters; /* 0 = unlimited */
} alloc_arg;

static void *alloc_thread(void *argp)
{
	alloc_arg *a = argp;
	hc_rng r;
	hc_rng_init(&r, a->seed);
	enum { S = 64 };
	blk_t slots[S];
	memset(slots, 0, sizeof slots);
	unsigned long ops = 0;
	while (
	    !__atomic_load_n(a->stop, __ATOMIC_RELAXED) && (a->max_iters == 0 || ops < (unsigned long)a->max_iters)) {
		blk_t *b = &slots[hc_rng_below(&r, S)];
		if (b->p) {
			blk_del(b, "alloc thread free");
		} else {
			size_t n = hc_rng_below(&r, 100) < 97 ? (size_t)hc_rng_below(&r, 2000)
			                                      : hc_rng_logsize(&r, 16384, 2 * HC_MiB);
			blk_new(b, n, ops);
		}
		ops++;
	}
	for (int i = 0; i < S; i++)
		blk_del(&slots[i], "alloc thread final free");
	__atomic_add_fetch(&alloc_ops, ops, __ATOMIC_RELAXED);
	return NULL;
}

static void test_dlopen(void)
{
	int stop = 0;
	pthread_t dl[3], al[2];
	alloc_arg aa[2] = { { &stop, 1, 0 }, { &stop, 2, 0 } };
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&al[i], NULL, alloc_thread, &aa[i]) == 0, "pthread_create failed");
	for (int i = 0; i < 3; i++)
		CHECK(pthread_create(&dl[i], NULL, dl_thread, (void *)(intptr_t)i) == 0, "pthread_create failed");
	for (int i = 0; i < 3; i++)
		pthread_join(dl[i], NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(al[i], NULL);
	CHECK(dl_opens > 0, "no library could be dlopen'ed (tried libz, libm, libbz2, liblzma, libstdc++)");
	printf("misc: dlopen/dlclose: %lu iterations, %lu libraries opened\n", dl_calls, dl_opens);
}

/* ------------------------------------------------------------------ */
/* pthread key destructors that allocate                                */

#define NKEYS      4
#define KEY_ROUNDS 3 /* each key's destructor re-arms the key this many times */
static pthread_key_t keys[NKEYS];
static int dtor_calls, dtor_bad;

typedef struct {
	int round;
	int key;
	size_t size;
	uint64_t seed;
	/* payload follows */
} key_hdr;

static void *key_block(int key, int round, uint64_t tag)
{
	size_t size =
	    sizeof(key_hdr) + 64 + (size_t)key * 1000 + (size_t)round * 30000 + (tag % 7 == 0 ? (1 << 20) : 0);
	key_hdr *h = malloc(size);
	CHECK(h != NULL, "malloc(%zu) for a key value failed", size);
	if (!h)
		return NULL;
	h->round = round;
	h->key = key;
	h->size = size - sizeof(key_hdr);
	h->seed = hc_seed(h, h->size, tag);
	hc_fill(h + 1, h->size, h->seed);
	return h;
}

static void key_dtor(void *v)
{
	key_hdr *h = v;
	__atomic_add_fetch(&dtor_calls, 1, __ATOMIC_RELAXED);
	size_t bad = hc_verify(h + 1, h->size, h->seed);
	if (bad != (size_t)-1) {
		__atomic_add_fetch(&dtor_bad, 1, __ATOMIC_RELAXED);
		CHECK(0, "key %d value (round %d) corrupted at offset %zu during thread exit", h->key, h->round, bad);
	}
	int key = h->key, round = h->round;
	uint64_t next_tag = h->seed;
	/* allocate and free a few things while the thread is being torn down */
	void *tmp[8];
	for (int i = 0; i < 8; i++) {
		tmp[i] = (i & 1) ? calloc(1, 100 + (size_t)i * 5000) : malloc(64 + (size_t)i * 300);
		CHECK(tmp[i] != NULL, "allocation in key destructor failed");
	}
	tmp[3] = realloc(tmp[3], 70000);
	CHECK(tmp[3] != NULL, "realloc in key destructor failed");
	for (int i = 0; i < 8; i++)
		free(tmp[i]);
	free(h);
	if (round + 1 < KEY_ROUNDS) {
		void *n = key_block(key, round + 1, next_tag);
		if (n)
			CHECK(pthread_setspecific(keys[key], n) == 0, "pthread_setspecific in destructor failed");
	}
}

static void *key_thread(void *arg)
{
	int id = (int)(intptr_t)arg;
	for (int k = 0; k < NKEYS; k++) {
		void *v = key_block(k, 0, (uint64_t)id * 16 + (uint64_t)k);
		if (v)
			CHECK(pthread_setspecific(keys[k], v) == 0, "pthread_setspecific failed");
	}
	/* some ordinary work */
	blk_t b[16];
	for (int i = 0; i < 16; i++)
		blk_new(&b[i], (size_t)(i * 1000 + id), (uint64_t)i);
	for (int i = 0; i < 16; i += 2)
		blk_del(&b[i], "key thread free");
	for (int i = 1; i < 16; i += 2)
		blk_del(&b[i], "key thread free");
	if (id % 2)
		pthread_exit(NULL);
	return NULL;
}

static void test_key_destructors(void)
{
	for (int k = 0; k < NKEYS; k++)
		CHECK(pthread_key_create(&keys[k], key_dtor) == 0, "pthread_key_create failed");
	int nthreads = 0;
	for (int wave = 0; wave < 20; wave++) {
		pthread_t th[10];
		int n = 0;
		for (int i = 0; i < 10; i++)
			if (pthread_create(&th[n], NULL, key_thread, (void *)(intptr_t)(wave * 10 + i)) == 0)
				n++;
		for (int i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		nthreads += n;
	}
	int expect = nthreads * NKEYS * KEY_ROUNDS;
	CHECK(dtor_calls == expect, "key destructors ran %d times, expected %d", dtor_calls, expect);
	CHECK(dtor_bad == 0, "%d corrupted key values", dtor_bad);
	printf("misc: key destructors: %d threads, %d destructor calls\n", nthreads, dtor_calls);
}

/* ------------------------------------------------------------------ */
/* signals                                                              */

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++; /* no allocation here */
}

static void test_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: interrupted syscalls see EINTR */
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction failed");
	struct itimerval it = { { 0, 300 }, { 0, 300 } };
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer failed");

	int stop = 0;
	pthread_t th[2];
	alloc_arg aa[2] = { { &stop, 11, 300000 }, { &stop, 12, 300000 } };
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&th[i], NULL, alloc_thread, &aa[i]) == 0, "pthread_create failed");

	hc_rng r;
	hc_rng_init(&r, 5);
	enum { S = 128 };
	blk_t slots[S];
	memset(slots, 0, sizeof slots);
	for (int i = 0; i < 400000; i++) {
		blk_t *b = &slots[hc_rng_below(&r, S)];
		if (b->p) {
			blk_del(b, "free with SIGALRM timer running");
		} else {
			size_t n = hc_rng_below(&r, 1000) < 995 ? (size_t)hc_rng_below(&r, 1024)
			                                        : hc_rng_logsize(&r, 65536, 4 * HC_MiB);
			int e = errno;
			blk_new(b, n, (uint64_t)i);
			CHECK(errno == e, "malloc(%zu) changed errno from %d to %d with signals", n, e, errno);
		}
	}
	for (int i = 0; i < S; i++)
		blk_del(&slots[i], "final free (signals)");
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);

	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
	printf("misc: signals: %d SIGALRMs delivered during malloc loops\n", (int)alarms);
}

/* ------------------------------------------------------------------ */

static int bg_stop;

int main(void)
{
	double t0 = hc_now();
	if (!hc_malloc_is_heapctl() && !hc_allow_no_mallctl())
		CHECK(0, "malloc does not resolve to libheapctl (set HC_TEST_ALLOW_NO_MALLCTL=1 to run against glibc)");

	CHECK(ctor_ran && ctor2_ran, "constructors did not run");
	for (int i = 0; i < NCTOR; i++)
		blk_del(&ctor_blocks[i], "main: free of block allocated in a constructor");

	test_dlopen();
	test_key_destructors();
	test_signals();

	/* state for exit-time checks */
	for (int i = 0; i < 8; i++)
		blk_new(&exit_blocks[i], (size_t)1 << (i * 3), 9000 + (uint64_t)i);
	blk_new(&dtor_block, 250000, 42);
	CHECK(atexit(atexit_handler) == 0, "atexit failed");

	/* background threads that keep allocating while the process exits */
	static alloc_arg bg[2] = { { &bg_stop, 21, 0 }, { &bg_stop, 22, 0 } };
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < 2; i++) {
		pthread_t t;
		CHECK(pthread_create(&t, &at, alloc_thread, &bg[i]) == 0, "pthread_create failed");
	}
	pthread_attr_destroy(&at);

	printf("misc: %.2f s\n", hc_now() - t0);
	fflush(stdout);
	return hc_check_finish("misc");
}
