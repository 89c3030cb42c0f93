/*
 * thread_churn — threads that come and go, one after another.
 *
 * `threads` threads (default 20000) are created and joined in turn; each
 * allocates and frees `objects` objects of 16 B to 2 KiB.  Nothing lives
 * on, so whatever the RSS keeps growing by is per-thread state that is
 * never given back (the peak RSS column; kib_growth on stderr is the RSS
 * after the last thread minus the RSS after the first tenth).  Run also with
 * profiling on (row thread_churn_prof: MALLOC_CONF, which jemalloc reads
 * too).
 */
#include <pthread.h>

#include "bench.h"

static long nobj;

struct worker {
	uint64_t seed, sum, errors;
};

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * 4;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct bench_churn_slot s[64];
	for (long i = 0; i < nobj; i++) {
		s[i].size = (uint32_t)bench_range(&w->seed, 16, 2048);
		s[i].tag = (uint32_t)bench_rand(&w->seed);
		s[i].p = bench_xmalloc(s[i].size);
		bench_churn_fill(s[i].p, s[i].size, s[i].tag);
	}
	for (long i = 0; i < nobj; i++) {
		w->sum += bench_churn_check(&s[i], &w->errors);
		free(s[i].p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 20000, "threads, one after another" },
		{ "objects", 32, "objects each allocates and frees (<= 64)" },
		{ "seed", 11, "random seed" },
	};
	bench_parse(argc, argv, "Threads that come and go.", o, BENCH_NOPTS(o));
	long n = o[0].value;
	nobj = o[1].value < 1 ? 1 : o[1].value > 64 ? 64 : o[1].value;
	uint64_t sum = 0, errors = 0;
	long early = 0;
	for (long i = 0; i < n; i++) {
		struct worker w = { bench_seed((uint64_t)o[2].value, (uint64_t)i), 0, 0 };
		pthread_t t;
		if (pthread_create(&t, NULL, work, &w) != 0 || pthread_join(t, NULL) != 0) {
			fprintf(stderr, "thread_churn: thread %ld failed\n", i);
			return 1;
		}
		sum += w.sum;
		errors += w.errors;
		if (i == n / 10)
			early = rss_kib();
	}
	fprintf(stderr, "kib_growth=%ld\n", rss_kib() - early);
	return bench_finish("thread_churn", sum, errors);
}
