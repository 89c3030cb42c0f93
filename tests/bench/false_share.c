/*
 * false_share — does the allocator make threads share cache lines?
 *
 * Each of `threads` threads owns `objs` small objects (8–64 B, sizes fixed
 * per thread by its seed) and, in each of `rounds` rounds, allocates them,
 * hammers `writes` increments into each one, reads them back and frees them.
 * No object is ever touched by two threads, so any slowdown comes from the
 * allocator placing objects of different threads in one cache line:
 *
 *  - active false sharing: threads allocating at the same time get
 *    neighbouring blocks from a shared region;
 *  - passive false sharing: before round 0 the main thread allocates every
 *    thread's first set of objects interleaved (thread 0, 1, 0, 1, ...) and
 *    hands them over; each thread frees them and allocates its own. An
 *    allocator that recycles a remotely freed block to the freeing thread
 *    gives each thread blocks that sit next to another thread's.
 *
 * The best case is about one increment per cycle per thread; a shared line
 * costs a cache-to-cache transfer per write. Meaningful with threads <= cores.
 */
#include <pthread.h>

#include "bench.h"

struct worker {
	pthread_t tid;
	uint64_t sum, errors;
	double t0, t1, cpu;  /* wall span and CPU time of the rounds */
	unsigned char **obj; /* first set allocated by main if passive */
	uint32_t *size;
};

static long nobjs, rounds, nwrites, minsz, maxsz, passive;
static pthread_barrier_t start;

static void *run(void *arg)
{
	struct worker *w = arg;
	unsigned char **obj = w->obj;

	pthread_barrier_wait(&start);
	for (long i = 0; passive && i < nobjs; i++)
		free(obj[i]); /* remote free of main's interleaved blocks */
	struct timespec c0, c1;
	w->t0 = bench_now();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	for (long r = 0; r < rounds; r++) {
		for (long i = 0; i < nobjs; i++) {
			obj[i] = bench_xmalloc(w->size[i]);
			memset(obj[i], 0, w->size[i]);
		}
		for (long k = 0; k < nwrites; k++)
			for (long i = 0; i < nobjs; i++)
				(*(volatile uint64_t *)obj[i])++;
		for (long i = 0; i < nobjs; i++) {
			uint64_t v;
			memcpy(&v, obj[i], 8);
			w->errors += v != (uint64_t)nwrites;
			w->sum += bench_mix(v + w->size[i] + (uint64_t)r);
			free(obj[i]);
		}
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	w->t1 = bench_now();
	w->cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 2, "threads (false sharing needs them on separate cores)" },
		{ "objs", 8, "objects per thread" },
		{ "rounds", 3000, "allocate/hammer/free rounds" },
		{ "writes", 4000, "increments per object per round" },
		{ "minsz", 8, "smallest object size (bytes, >= 8)" },
		{ "maxsz", 64, "largest object size (bytes)" },
		{ "passive", 1, "1: main allocates each thread's first set, interleaved" },
		{ "seed", 1, "random seed" },
	};
	bench_parse(argc, argv, "false sharing between threads' objects", o, BENCH_NOPTS(o));
	long nt = o[0].value;
	nobjs = o[1].value;
	rounds = o[2].value;
	nwrites = o[3].value;
	minsz = o[4].value;
	maxsz = o[5].value;
	passive = o[6].value;
	if (nt < 1 || nobjs < 1 || minsz < 8 || maxsz < minsz) {
		fprintf(stderr, "false_share: need threads,objs>=1, 8<=minsz<=maxsz\n");
		return 2;
	}

	struct worker *w = calloc(nt, sizeof(*w));
	if (!w)
		return 1;
	for (long t = 0; t < nt; t++) {
		uint64_t rng = bench_seed(o[7].value, t);
		w[t].obj = bench_xmalloc(nobjs * sizeof(*w[t].obj));
		w[t].size = bench_xmalloc(nobjs * sizeof(*w[t].size));
		for (long i = 0; i < nobjs; i++)
			w[t].size[i] = (uint32_t)bench_range(&rng, minsz, maxsz);
	}
	/* Interleaved allocation on the main thread, for passive sharing. */
	for (long i = 0; passive && i < nobjs; i++)
		for (long t = 0; t < nt; t++)
			w[t].obj[i] = bench_xmalloc(w[t].size[i]);

	pthread_barrier_init(&start, NULL, nt);
	for (long t = 0; t < nt; t++) {
		if (pthread_create(&w[t].tid, NULL, run, &w[t])) {
			fprintf(stderr, "false_share: pthread_create failed\n");
			return 1;
		}
	}
	uint64_t sum = 0, errors = 0;
	double first = 0, last = 0, cpu = 0;
	for (long t = 0; t < nt; t++) {
		pthread_join(w[t].tid, NULL);
		sum += w[t].sum;
		errors += w[t].errors;
		if (!t || w[t].t0 < first)
			first = w[t].t0;
		if (w[t].t1 > last)
			last = w[t].t1;
		cpu += w[t].cpu;
		free(w[t].obj);
		free(w[t].size);
	}
	/* Sharing a line only costs anything if the threads really ran at the
	 * same time; on a busy machine they may have taken turns on one core. */
	double conc = last > first ? cpu / (last - first) : 0;
	fprintf(stderr, "false_share: %.2f threads running at once on average%s\n", conc,
	    nt > 1 && conc < 1.5 ? " (low: the machine is busy, "
	                           "false sharing is under-measured)"
	                         : "");
	free(w);
	return bench_finish("false_share", sum, errors);
}
