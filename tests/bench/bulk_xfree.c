/*
 * bulk_xfree — one thread allocates objects in bulk (batches of `batch`),
 * another frees each batch whole: every free is remote, and the freed
 * memory must find its way back to the allocating thread.
 */
#include <pthread.h>

#include "bench.h"

static long nbatches, batch;
static struct bench_churn_slot **queue;
static long qhead, qtail, qcap = 8;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static uint64_t free_sum, free_errors;

static void *freer(void *arg)
{
	(void)arg;
	for (long b = 0; b < nbatches; b++) {
		pthread_mutex_lock(&qlock);
		while (qtail == qhead)
			pthread_cond_wait(&qcond, &qlock);
		struct bench_churn_slot *s = queue[qhead % qcap];
		qhead++;
		pthread_cond_broadcast(&qcond);
		pthread_mutex_unlock(&qlock);
		for (long i = 0; i < batch; i++) {
			free_sum += bench_churn_check(&s[i], &free_errors);
			free(s[i].p);
		}
		free(s);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "batches", 2000, "batches" },
		{ "batch", 2000, "objects per batch" },
		{ "seed", 19, "random seed" },
	};
	bench_parse(argc, argv, "Bulk allocation, freed by another thread.", o, BENCH_NOPTS(o));
	nbatches = o[0].value;
	batch = o[1].value < 1 ? 1 : o[1].value;
	queue = calloc((size_t)qcap, sizeof *queue);
	uint64_t seed = (uint64_t)o[2].value;
	pthread_t t;
	pthread_create(&t, NULL, freer, NULL);
	for (long b = 0; b < nbatches; b++) {
		struct bench_churn_slot *s = bench_xmalloc((size_t)batch * sizeof *s);
		for (long i = 0; i < batch; i++) {
			s[i].size = (uint32_t)bench_range(&seed, 8, 512);
			s[i].tag = (uint32_t)bench_rand(&seed);
			s[i].p = bench_xmalloc(s[i].size);
			bench_churn_fill(s[i].p, s[i].size, s[i].tag);
		}
		pthread_mutex_lock(&qlock);
		while (qtail - qhead == qcap)
			pthread_cond_wait(&qcond, &qlock);
		queue[qtail % qcap] = s;
		qtail++;
		pthread_cond_broadcast(&qcond);
		pthread_mutex_unlock(&qlock);
	}
	pthread_join(t, NULL);
	return bench_finish("bulk_xfree", free_sum, free_errors);
}
