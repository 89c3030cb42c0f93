/*
 * large_churn — churn of large blocks (16 KiB – 8 MiB) with every page used.
 *
 * A window of live blocks; each step frees a random one and allocates a new
 * block of a log-uniform random size in its place, then writes one byte in
 * every 4 KiB page of it (and its last byte), so the pages are really
 * faulted in and peak RSS reflects what the allocator keeps. Blocks are
 * checked (every page) before they are freed. Measures the large-allocation
 * path: mmap/munmap versus reuse, page-fault and zeroing cost, and how much
 * freed memory the allocator holds on to (the RSS column).
 *
 * threads=2 runs two such loops at once, each with its own window.
 */
#include <math.h>
#include <pthread.h>

#include "bench.h"

#define PAGE 4096

struct block {
	unsigned char *p;
	size_t size;
	uint32_t tag;
};

struct worker {
	pthread_t tid;
	uint64_t seed, sum, errors;
};

static long nops, window, minsz, maxsz;

static inline unsigned char page_byte(uint32_t tag, size_t off)
{
	return (unsigned char)(tag + (off >> 12) * 13);
}

static void touch(struct block *b)
{
	for (size_t off = 0; off < b->size; off += PAGE)
		b->p[off] = page_byte(b->tag, off);
	b->p[b->size - 1] = (unsigned char)~b->tag;
}

static uint64_t check(const struct block *b, uint64_t *errors)
{
	uint64_t h = 0;
	size_t off;

	for (off = 0; off < b->size - 1; off += PAGE) {
		*errors += b->p[off] != page_byte(b->tag, off);
		h += b->p[off];
	}
	*errors += b->p[b->size - 1] != (unsigned char)~b->tag;
	return bench_mix(h + b->size);
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct block *blk = calloc(window, sizeof(*blk));
	uint64_t rng = w->seed;
	double lmin = log((double)minsz), lmax = log((double)maxsz);

	if (!blk)
		exit(1);
	for (long i = 0; i < nops; i++) {
		struct block *b = &blk[bench_range(&rng, 0, window - 1)];
		if (b->p) {
			w->sum += check(b, &w->errors);
			free(b->p);
		}
		double u = (bench_rand(&rng) >> 11) * 0x1.0p-53;
		b->size = (size_t)exp(lmin + u * (lmax - lmin));
		if (b->size < (size_t)minsz)
			b->size = minsz;
		if (b->size > (size_t)maxsz)
			b->size = maxsz;
		b->tag = (uint32_t)i * 2654435761u + 1;
		b->p = bench_xmalloc(b->size);
		touch(b);
	}
	for (long k = 0; k < window; k++)
		if (blk[k].p) {
			w->sum += check(&blk[k], &w->errors);
			free(blk[k].p);
		}
	free(blk);
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 1, "threads, each with its own window (1 or 2)" },
		{ "ops", 10000, "malloc+free operations per thread" },
		{ "window", 64, "live blocks per thread" },
		{ "minsz", 16 << 10, "smallest block (bytes)" },
		{ "maxsz", 8 << 20, "largest block (bytes)" },
		{ "seed", 1, "random seed" },
	};
	bench_parse(argc, argv, "large-allocation churn, every page touched", o, BENCH_NOPTS(o));
	long nt = o[0].value;
	nops = o[1].value;
	window = o[2].value;
	minsz = o[3].value;
	maxsz = o[4].value;
	if (nt < 1 || window < 1 || minsz < 1 || maxsz < minsz) {
		fprintf(stderr,
		    "large_churn: need threads,window>=1, "
		    "1<=minsz<=maxsz\n");
		return 2;
	}

	struct worker *w = calloc(nt, sizeof(*w));
	if (!w)
		return 1;
	for (long t = 0; t < nt; t++) {
		/* Thread t follows the same stream whatever the thread count,
		 * so threads=1 and threads=2 differ only in the second loop. */
		w[t].seed = bench_seed(o[5].value, t);
		if (nt > 1 && pthread_create(&w[t].tid, NULL, run, &w[t])) {
			fprintf(stderr, "large_churn: pthread_create failed\n");
			return 1;
		}
	}
	if (nt == 1)
		run(&w[0]);
	uint64_t sum = 0, errors = 0;
	for (long t = 0; t < nt; t++) {
		if (nt > 1)
			pthread_join(w[t].tid, NULL);
		sum += w[t].sum;
		errors += w[t].errors;
	}
	free(w);
	return bench_finish("large_churn", sum, errors);
}
