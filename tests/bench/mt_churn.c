/*
 * mt_churn — multi-thread small-object churn.
 *
 * `threads` threads (default 4) each run st_churn's loop independently, on
 * their own window and random stream: no object crosses threads. Measures
 * how well per-thread caches scale and what contention remains on shared
 * structures when all threads allocate at once.
 */
#include <pthread.h>

#include "bench.h"

struct worker {
	pthread_t tid;
	uint64_t seed, sum, errors;
	long ops, window, minsz, maxsz;
};

static pthread_barrier_t start;

static void *run(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(&start);
	w->sum = bench_churn(w->seed, w->ops, w->window, w->minsz, w->maxsz, &w->errors);
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 4, "worker threads" },
		{ "ops", 4000000, "malloc+free operations per thread" },
		{ "window", 20000, "live objects per thread" },
		{ "minsz", 8, "smallest object size (bytes)" },
		{ "maxsz", 512, "largest object size (bytes)" },
		{ "seed", 1, "random seed" },
	};
	bench_parse(argc, argv, "multi-thread small-object churn", o, BENCH_NOPTS(o));
	long nt = o[0].value;
	if (nt < 1 || o[2].value < 1 || o[3].value < 8 || o[4].value < o[3].value) {
		fprintf(stderr, "mt_churn: need threads>=1, window>=1, 8<=minsz<=maxsz\n");
		return 2;
	}

	struct worker *w = calloc(nt, sizeof(*w));
	if (!w)
		return 1;
	pthread_barrier_init(&start, NULL, nt);
	for (long i = 0; i < nt; i++) {
		w[i].seed = bench_seed(o[5].value, i);
		w[i].ops = o[1].value;
		w[i].window = o[2].value;
		w[i].minsz = o[3].value;
		w[i].maxsz = o[4].value;
		if (pthread_create(&w[i].tid, NULL, run, &w[i])) {
			fprintf(stderr, "mt_churn: pthread_create failed\n");
			return 1;
		}
	}
	uint64_t sum = 0, errors = 0;
	for (long i = 0; i < nt; i++) {
		pthread_join(w[i].tid, NULL);
		sum += w[i].sum;
		errors += w[i].errors;
	}
	free(w);
	return bench_finish("mt_churn", sum, errors);
}
