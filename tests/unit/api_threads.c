/*
 * tests/unit/api_threads.c - where threads' first blocks land: the main
 * thread without starter pages, page offsets, a thread's first blocks from
 * shared pages, threads one after another sharing one heap, holes filled
 * before carving.
 * The parts every api_*.c shares, and how to run it on plain glibc:
 * tests/lib/api.h.
 */
#include "../lib/api.h"

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
/* each thread's sizes (0-terminated), starter_blocks blocks of each, in
 * this order: set by starter_chunks */
static int starter_blocks;
static const size_t *starter_sizes;
static const size_t starter_small[] = { 24, 100, 300, 1000, 0 }, starter_large[] = { 10000, 8000, 24, 0 };

static void *starter_thread(void *arg)
{
	void **keep = arg;
	int k = 0;
	for (const size_t *s = starter_sizes; *s; s++)
		for (int i = 0; i < starter_blocks; i++) {
			keep[k] = v_malloc(*s);
			memset(keep[k], 0x33, *s);
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


/* How many 4 MiB chunks the threads' blocks number `index` lie in, after
 * starter_chunks: one each if every thread has a heap chunk of its own,
 * new or adopted from a thread gone before. */
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

/* Threads alive at once, each holding `blocks` blocks of each of `sizes`:
 * how many small chunks the live threads added. */
static long starter_chunks(int nthreads, const size_t *sizes, int blocks)
{
	pthread_t t[STARTER_MAXT];
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	starter_sizes = sizes;
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
		_exit(1); /* the barriers would never open */
	pthread_barrier_wait(&starter_up);
	long during = small_chunks();
	CHECK(before >= 0 && during >= 0, "starter: no \"Small chunks\" in malloc_stats_print (%ld, %ld)", before,
	    during);
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
	long shared = starter_chunks(200, starter_small, 16);
	CHECK(shared <= 4, "200 threads with 16 blocks a class added %ld small chunks, want <= 4", shared);
	int lastshared = starter_block_chunks(200, 15);
	CHECK(lastshared <= 8, "200 threads' 16th blocks of 24 bytes lie in %d chunks, want <= 8", lastshared);
	starter_chunks(200, starter_small, 17);
	int first = starter_block_chunks(200, 0), own17 = starter_block_chunks(200, 16);
	CHECK(first <= 8, "200 threads' first blocks of 24 bytes lie in %d chunks, want <= 8", first);
	CHECK(own17 == 200, "200 threads' 17th blocks of 24 bytes lie in %d chunks, want 200 (one each)", own17);
}

/* A thread's starter blocks stop at 256 KiB in all: sixteen of 10000 bytes
 * (class 10240, 160 KiB), then twelve of 8000 (class 8192, 96 KiB); the
 * thirteenth of 8000 and the first of 24 bytes are in its own chunk. */
static void test_thread_starter_bytes(void)
{
	if (!under_heapctl)
		return;
	enum { N = 20 };
	starter_chunks(N, starter_large, 16);
	/* keep[t]: blocks 0-15 of 10000 bytes, 16-31 of 8000, 32-47 of 24 */
	static const struct {
		int index;
		bool shared;
		const char *what;
	} want[] = {
		{ 0, true, "1st block of 10000 bytes" },
		{ 15, true, "16th block of 10000 bytes" },
		{ 27, true, "12th block of 8000 bytes" },
		{ 28, false, "13th block of 8000 bytes" },
		{ 32, false, "1st block of 24 bytes" },
	};
	for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++) {
		int n = starter_block_chunks(N, want[i].index);
		if (want[i].shared)
			CHECK(n <= N / 2, "%d threads' %s lie in %d chunks, want <= %d (shared pages)", N, want[i].what,
			    n, N / 2);
		else
			CHECK(n == N, "%d threads' %s lie in %d chunks, want %d (one each)", N, want[i].what, n, N);
	}
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
	void *p[N] = { 0 };
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
	if (!unsampled_heapctl()) /* a sampled block is a page run: active grows */
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
		p[i] = v_malloc(7000); /* class 7168, used by nothing before */
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
	static const size_t sizes[16] = { 8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448 };
	void *keep[16][17];
	uintptr_t *low = arg;
	for (int c = 0; c < 16; c++) {
		for (int i = 0; i < 17; i++) /* 16 from a shared heap, then its own page */
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
	CHECK(same == 0,
	    "%d pairs of classes share the low 12 bits of their first own block (classes %d and %d: 0x%03lx)", same, sa,
	    sb, (unsigned long)low[sa]);
}

int main(void)
{
	double t0 = api_start();
	RUN(test_main_no_starters); /* first: the main thread's chunk has room */
	if (have_ctl) {
		RUN(test_page_offsets); /* first: no thread has exited yet */
		RUN(test_thread_starter_blocks);
		RUN(test_thread_starter_bytes);
		RUN(test_sequential_threads_share);
		RUN(test_holes_before_carving);
	}
	return api_finish("api_threads", t0);
}
