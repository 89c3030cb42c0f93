/*
 * xthread_random — threads allocate and free objects of random sizes and
 * hand them to each other through a shared array of slots (as larson and
 * xmalloc-test do): most frees are of another thread's objects.
 */
#include <pthread.h>

#include "bench.h"

static struct bench_churn_slot *slots;
static pthread_mutex_t *locks;
static long nslots, ops;
#define NLOCKS 64

struct worker {
	pthread_t tid;
	uint64_t seed, sum, errors;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	for (long k = 0; k < ops; k++) {
		long i = (long)bench_range(&w->seed, 0, (uint64_t)nslots - 1);
		struct bench_churn_slot fresh;
		fresh.size = (uint32_t)(bench_range(&w->seed, 0, 15) ? bench_range(&w->seed, 8, 1000)
		                                                     : bench_range(&w->seed, 1000, 20000));
		fresh.tag = (uint32_t)bench_rand(&w->seed);
		fresh.p = bench_xmalloc(fresh.size);
		bench_churn_fill(fresh.p, fresh.size, fresh.tag);
		w->sum += bench_mix(((uint64_t)fresh.tag << 32) | fresh.size);
		pthread_mutex_t *l = &locks[i % NLOCKS];
		pthread_mutex_lock(l);
		struct bench_churn_slot old = slots[i];
		slots[i] = fresh;
		pthread_mutex_unlock(l);
		if (old.p) {
			bench_churn_check(&old, &w->errors);
			free(old.p);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 4, "threads" },
		{ "ops", 1000000, "allocations per thread" },
		{ "slots", 20000, "shared slots (objects alive)" },
		{ "seed", 17, "random seed" },
	};
	bench_parse(argc, argv, "Random sizes passed between threads.", o, BENCH_NOPTS(o));
	long nt = o[0].value < 1 ? 1 : o[0].value > 64 ? 64 : o[0].value;
	ops = o[1].value;
	nslots = o[2].value < 1 ? 1 : o[2].value;
	slots = calloc((size_t)nslots, sizeof *slots);
	locks = calloc(NLOCKS, sizeof *locks);
	if (!slots || !locks)
		return 1;
	for (int i = 0; i < NLOCKS; i++)
		pthread_mutex_init(&locks[i], NULL);
	struct worker w[64];
	for (long t = 0; t < nt; t++) {
		w[t] = (struct worker){ 0, bench_seed((uint64_t)o[3].value, (uint64_t)t), 0, 0 };
		pthread_create(&w[t].tid, NULL, work, &w[t]);
	}
	uint64_t sum = 0, errors = 0;
	for (long t = 0; t < nt; t++) {
		pthread_join(w[t].tid, NULL);
		sum += w[t].sum;
		errors += w[t].errors;
	}
	/* which thread frees which object depends on timing: the checksum is
	 * of what each thread allocated, contents are checked at every free */
	for (long i = 0; i < nslots; i++)
		if (slots[i].p) {
			bench_churn_check(&slots[i], &errors);
			free(slots[i].p);
		}
	return bench_finish("xthread_random", sum, errors);
}
