/*
 * thread_leftover — rounds of threads that each allocate some garbage and
 * one small object that outlives them (kept in a global list), then exit.
 * The pages those threads allocated from are held by a few live objects:
 * an allocator that does not reuse exited threads' pages grows with every
 * round.
 */
#include <pthread.h>

#include "bench.h"

static struct bench_churn_slot *kept;
static long nkept;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

struct worker {
	pthread_t tid;
	uint64_t seed, sum, errors;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct bench_churn_slot g[200];
	for (int i = 0; i < 200; i++) {
		g[i].size = (uint32_t)bench_range(&w->seed, 16, 2000);
		g[i].tag = (uint32_t)bench_rand(&w->seed);
		g[i].p = bench_xmalloc(g[i].size);
		bench_churn_fill(g[i].p, g[i].size, g[i].tag);
	}
	struct bench_churn_slot k = { NULL, (uint32_t)bench_range(&w->seed, 16, 128), (uint32_t)bench_rand(&w->seed) };
	k.p = bench_xmalloc(k.size);
	bench_churn_fill(k.p, k.size, k.tag);
	pthread_mutex_lock(&kept_lock);
	kept[nkept++] = k;
	pthread_mutex_unlock(&kept_lock);
	for (int i = 0; i < 200; i++) {
		w->sum += bench_churn_check(&g[i], &w->errors);
		free(g[i].p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "rounds", 300, "rounds of threads" },
		{ "threads", 16, "threads per round" },
		{ "seed", 13, "random seed" },
	};
	bench_parse(argc, argv, "Threads that leave a small object behind.", o, BENCH_NOPTS(o));
	long rounds = o[0].value, per = o[1].value < 1 ? 1 : o[1].value > 256 ? 256
	                                                                      : o[1].value;
	kept = calloc((size_t)(rounds * per), sizeof *kept);
	if (!kept)
		return 1;
	uint64_t sum = 0, errors = 0;
	struct worker w[256];
	for (long r = 0; r < rounds; r++) {
		for (long i = 0; i < per; i++) {
			w[i] = (struct worker){ 0, bench_seed((uint64_t)o[2].value, (uint64_t)(r * per + i)), 0, 0 };
			pthread_create(&w[i].tid, NULL, work, &w[i]);
		}
		for (long i = 0; i < per; i++) {
			pthread_join(w[i].tid, NULL);
			sum += w[i].sum;
			errors += w[i].errors;
		}
	}
	for (long i = 0; i < nkept; i++) {
		sum += bench_churn_check(&kept[i], &errors);
		free(kept[i].p);
	}
	return bench_finish("thread_leftover", sum, errors);
}
