/*
 * size_mix — threads that each replace a random block of their own working
 * set at every step, with sizes spread over three orders of magnitude and
 * half of them tiny, writing every byte of each new block (the pattern of
 * glibc's bench-malloc-thread, mimalloc-bench's glibc-thread).
 *
 * Each thread has `slots` slots and a table of 8192 sizes drawn from an
 * inverse-square density between 4 and `maxsize` bytes: half of them are
 * 4-8 bytes, about one in 260 is above 1 KiB.  A step frees the block of a random
 * slot (after checking its first and last byte) and puts a block of the next
 * size from the table there, every byte written.  The steps are so short
 * that what the allocator costs shows, and so are branches that depend on
 * the size: consecutive requests fall in unrelated size classes.
 */
#include <pthread.h>

#include "bench.h"

#define NSIZES 8192

static long steps, nslots, maxsize;

struct worker {
	pthread_t tid;
	uint64_t seed, sum, errors;
};

/* A size of density proportional to 1/x^2 on [4, maxsize]: the inverse of
 * its distribution function at u uniform in [0, 1). */
static uint32_t draw_size(uint64_t *rng)
{
	double u = (double)(bench_rand(rng) >> 11) / (double)(1ull << 53);
	double lo = 1.0 / 4, hi = 1.0 / (double)maxsize;
	return (uint32_t)(1.0 / (lo - u * (lo - hi)));
}

/* Every byte of the block set to tag, eight at a time (as a compiler's
 * vectorised loop would) and then the rest one by one. */
static void fill(unsigned char *p, uint32_t size, unsigned char tag)
{
	uint64_t w = tag * 0x0101010101010101ull;
	uint32_t i = 0;
	for (; i + 8 <= size; i += 8)
		memcpy(p + i, &w, 8);
	for (; i < size; i++)
		p[i] = tag;
}

/* The thread's state stays in locals until the end: two workers' structs
 * share a cache line. */
static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t rng = w->seed, sum = 0, errors = 0;
	uint32_t *size = bench_xmalloc(NSIZES * sizeof(*size));
	struct bench_churn_slot *slot = calloc((size_t)nslots, sizeof(*slot));
	if (!slot) {
		fprintf(stderr, "size_mix: out of memory for %ld slots\n", nslots);
		exit(1);
	}
	for (int i = 0; i < NSIZES; i++)
		size[i] = draw_size(&rng);
	for (long k = 0; k < steps; k++) {
		struct bench_churn_slot *s = &slot[bench_range(&rng, 0, (uint64_t)nslots - 1)];
		if (s->p) {
			errors += s->p[0] != (unsigned char)s->tag || s->p[s->size - 1] != (unsigned char)s->tag;
			sum += bench_mix(((uint64_t)s->tag << 32) | s->size);
			free(s->p);
		}
		s->size = size[k & (NSIZES - 1)];
		s->tag = (uint32_t)k;
		s->p = bench_xmalloc(s->size);
		fill(s->p, s->size, (unsigned char)s->tag);
	}
	for (long i = 0; i < nslots; i++)
		if (slot[i].p) {
			sum += bench_mix(((uint64_t)slot[i].tag << 32) | slot[i].size);
			free(slot[i].p);
		}
	free(slot);
	free(size);
	w->sum = sum;
	w->errors = errors;
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 2, "threads, each with a working set of its own" },
		{ "steps", 20000000, "frees and allocations per thread" },
		{ "slots", 1024, "blocks in a thread's working set" },
		{ "maxsize", 32768, "largest size (bytes, at least 8)" },
		{ "seed", 88, "random seed" },
	};
	bench_parse(argc, argv, "Random sizes, mostly tiny, replaced at random by each thread.", o, BENCH_NOPTS(o));
	long nthreads = o[0].value;
	steps = o[1].value, nslots = o[2].value, maxsize = o[3].value;
	if (nthreads < 1 || nthreads > 1024 || steps < 0 || nslots < 1 || maxsize < 8 || maxsize > (1l << 30)) {
		fprintf(stderr, "size_mix: need 1<=threads<=1024, steps>=0, slots>=1, 8<=maxsize<=2^30\n");
		return 2;
	}
	struct worker *w = calloc((size_t)nthreads, sizeof(*w));
	if (!w)
		return 1;
	for (long t = 0; t < nthreads; t++) {
		w[t].seed = bench_seed((uint64_t)o[4].value, (uint64_t)t);
		if (pthread_create(&w[t].tid, NULL, work, &w[t])) {
			fprintf(stderr, "size_mix: pthread_create failed\n");
			return 1;
		}
	}
	uint64_t sum = 0, errors = 0;
	for (long t = 0; t < nthreads; t++) {
		pthread_join(w[t].tid, NULL);
		sum += w[t].sum;
		errors += w[t].errors;
	}
	free(w);
	return bench_finish("size_mix", sum, errors);
}
