/*
 * simple_batches — one thread, small blocks, allocated and freed in a tight
 * loop (the pattern of glibc's bench-malloc-simple, mimalloc-bench's
 * glibc-simple).
 *
 * For each size of 16, 32, 64 and 128 bytes and each batch of 25, 100, 400
 * and 1,600 blocks: `pairs` / batch times, allocate a batch of blocks and
 * write every byte of each, then free the first half in the order they were
 * allocated and the second half in reverse. The whole set runs three times:
 * on the main thread, on a second thread, and on the main thread again once
 * the process has had two threads (allocators that take a single-threaded
 * shortcut lose it then). Unlike fastpath's one block at a time, the free
 * lists here are walked both ways and every byte is written.
 */
#include <pthread.h>

#include "bench.h"

static const uint32_t sizes[] = { 16, 32, 64, 128 };
static const long batches[] = { 25, 100, 400, 1600 };
static long pairs;

struct part {
	uint64_t sum, errors;
};

/* The byte pattern of block i of a batch: checked word 0, last byte. */
static void fill(unsigned char *p, uint32_t size, uint32_t i)
{
	for (uint32_t g = 0; g < size; g++)
		p[g] = (unsigned char)(g + i);
}

static void release(unsigned char *p, uint32_t size, uint32_t i, struct part *r)
{
	r->errors += p[0] != (unsigned char)i || p[size - 1] != (unsigned char)(size - 1 + i);
	r->sum += p[size / 2];
	free(p);
}

static void *all_sizes(void *arg)
{
	struct part *r = arg;
	unsigned char **arr = bench_xmalloc(1600 * sizeof(*arr));

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
			long n = batches[b];
			for (long it = pairs / n; it > 0; it--) {
				for (long i = 0; i < n; i++) {
					arr[i] = bench_xmalloc(sizes[s]);
					fill(arr[i], sizes[s], (uint32_t)i);
				}
				for (long i = 0; i < n / 2; i++)
					release(arr[i], sizes[s], (uint32_t)i, r);
				for (long i = n - 1; i >= n / 2; i--)
					release(arr[i], sizes[s], (uint32_t)i, r);
			}
		}
	free(arr);
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "pairs", 200000, "malloc+free pairs per size and batch, per pass" },
	};
	bench_parse(argc, argv, "Small blocks in batches, one thread.", o, BENCH_NOPTS(o));
	pairs = o[0].value;

	struct part r = { 0, 0 };
	pthread_t t;
	all_sizes(&r);
	if (pthread_create(&t, NULL, all_sizes, &r)) {
		fprintf(stderr, "simple_batches: pthread_create failed\n");
		return 1;
	}
	pthread_join(t, NULL);
	all_sizes(&r);
	return bench_finish("simple_batches", bench_mix(r.sum), r.errors);
}
