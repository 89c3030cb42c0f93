/*
 * thread_leftover — rounds of threads that each allocate some garbage and
 * one small object that outlives them (kept in a global list), then exit.
 * The pages those threads allocated from are held by a few live objects:
 * an allocator that does not reuse exited threads' pages grows with every
 * round.
 *
 * slots=N garbage=0 is mimalloc-bench's mleak: each thread allocates only
 * the object it leaves, swaps it into a random one of N shared slots and
 * frees the object it displaced, which a thread that has exited allocated
 * (so nearly every free is of a dead thread's block, and a thread's whole
 * life is one allocation and one free).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "bench.h"

static struct bench_churn_slot *kept;
static long nkept, ngarbage, nslots;
static struct bench_churn_slot *_Atomic *swap; /* slots=N: N shared slots */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

struct worker {
	pthread_t tid;
	uint64_t seed, sum, errors;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct bench_churn_slot g[200];
	for (long i = 0; i < ngarbage; i++) {
		g[i].size = (uint32_t)bench_range(&w->seed, 16, 2000);
		g[i].tag = (uint32_t)bench_rand(&w->seed);
		g[i].p = bench_xmalloc(g[i].size);
		bench_churn_fill(g[i].p, g[i].size, g[i].tag);
	}
	struct bench_churn_slot k = { NULL, (uint32_t)bench_range(&w->seed, 16, 128), (uint32_t)bench_rand(&w->seed) };
	k.p = bench_xmalloc(k.size);
	bench_churn_fill(k.p, k.size, k.tag);
	pthread_mutex_lock(&kept_lock);
	struct bench_churn_slot *mine = &kept[nkept++];
	*mine = k;
	pthread_mutex_unlock(&kept_lock);
	if (nslots) {
		/* the checksum is of what each thread allocated: which slot
		 * holds what at the end depends on the threads' order */
		w->sum += bench_mix(((uint64_t)k.tag << 32) | k.size);
		struct bench_churn_slot *old =
		    atomic_exchange(&swap[bench_range(&w->seed, 0, (uint64_t)nslots - 1)], mine);
		if (old) {
			bench_churn_check(old, &w->errors);
			free(old->p);
			old->p = NULL;
		}
	}
	for (long i = 0; i < ngarbage; i++) {
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
		{ "garbage", 200, "short-lived objects per thread (0..200)" },
		{ "slots", 0, "N: kept objects displace each other in N shared slots" },
		{ "seed", 13, "random seed" },
	};
	bench_parse(argc, argv, "Threads that leave a small object behind.", o, BENCH_NOPTS(o));
	long rounds = o[0].value, per = o[1].value < 1 ? 1 : o[1].value > 256 ? 256 : o[1].value;
	ngarbage = o[2].value > 200 ? 200 : o[2].value;
	nslots = o[3].value;
	kept = calloc((size_t)(rounds * per), sizeof *kept);
	swap = calloc((size_t)(nslots ? nslots : 1), sizeof *swap);
	if (!kept || !swap)
		return 1;
	uint64_t sum = 0, errors = 0;
	struct worker w[256];
	for (long r = 0; r < rounds; r++) {
		for (long i = 0; i < per; i++) {
			w[i] = (struct worker){ 0, bench_seed((uint64_t)o[4].value, (uint64_t)(r * per + i)), 0, 0 };
			pthread_create(&w[i].tid, NULL, work, &w[i]);
		}
		for (long i = 0; i < per; i++) {
			pthread_join(w[i].tid, NULL);
			sum += w[i].sum;
			errors += w[i].errors;
		}
	}
	for (long i = 0; i < nkept; i++)
		if (kept[i].p) {
			uint64_t part = bench_churn_check(&kept[i], &errors);
			sum += nslots ? 0 : part;
			free(kept[i].p);
		}
	free(swap);
	return bench_finish("thread_leftover", sum, errors);
}
