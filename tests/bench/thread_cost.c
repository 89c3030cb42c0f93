/*
 * thread_cost — what a live thread costs in memory.
 *
 * `threads` threads (default 2000, 64 KiB stacks so stacks do not dominate)
 * each do what a connection thread does at start: allocate a few dozen
 * objects of 16 B to 4 KiB, fill them, free most and keep four.  All then
 * wait on a barrier while alive, and the main thread reads its RSS: the
 * increase over the RSS before the threads, divided by the thread count, is
 * printed as kib_per_thread (the peak RSS column shows the same cost).
 */
#include <pthread.h>

#include "bench.h"

static pthread_barrier_t all_up, may_exit;
static long nobj = 32;

struct worker {
	pthread_t tid;
	uint64_t seed, sum, errors;
	void *kept[4];
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
		s[i].size = (uint32_t)(16u << bench_range(&w->seed, 0, 8));
		s[i].tag = (uint32_t)bench_rand(&w->seed);
		s[i].p = bench_xmalloc(s[i].size);
		bench_churn_fill(s[i].p, s[i].size, s[i].tag);
	}
	for (long i = 0; i < nobj; i++) {
		w->sum += bench_churn_check(&s[i], &w->errors);
		if (i < nobj - 4)
			free(s[i].p);
		else
			w->kept[i - (nobj - 4)] = s[i].p;
	}
	pthread_barrier_wait(&all_up);
	pthread_barrier_wait(&may_exit);
	for (int i = 0; i < 4; i++)
		free(w->kept[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 2000, "threads alive at once" },
		{ "objects", 32, "objects each allocates (<= 64)" },
		{ "seed", 7, "random seed" },
	};
	bench_parse(argc, argv, "Memory per live thread.", o, BENCH_NOPTS(o));
	long n = o[0].value;
	nobj = o[1].value < 4 ? 4 : o[1].value > 64 ? 64 : o[1].value;
	struct worker *w = calloc((size_t)n, sizeof *w);
	if (!w)
		return 1;
	pthread_barrier_init(&all_up, NULL, (unsigned)n + 1);
	pthread_barrier_init(&may_exit, NULL, (unsigned)n + 1);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	long before = rss_kib();
	for (long i = 0; i < n; i++) {
		w[i].seed = bench_seed((uint64_t)o[2].value, (uint64_t)i);
		if (pthread_create(&w[i].tid, &attr, work, &w[i]) != 0) {
			fprintf(stderr, "thread_cost: pthread_create failed at %ld\n", i);
			return 1;
		}
	}
	pthread_barrier_wait(&all_up);
	long during = rss_kib();
	pthread_barrier_wait(&may_exit);
	uint64_t sum = 0, errors = 0;
	for (long i = 0; i < n; i++) {
		pthread_join(w[i].tid, NULL);
		sum += w[i].sum;
		errors += w[i].errors;
	}
	fprintf(stderr, "kib_per_thread=%.1f\n", (double)(during - before) / (double)n);
	return bench_finish("thread_cost", sum, errors);
}
