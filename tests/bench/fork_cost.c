/*
 * fork_cost — fork, child exits, parent waits: what a forking server (a
 * backend or worker per connection, system(), a snapshot child) pays.
 *
 * The parent first builds a heap of `objects` objects (16 B to 1 KiB) with
 * two threads, so the allocator has chunks, pages and a second thread's
 * heap to deal with at fork.  Then `forks` times: fork; the child allocates
 * and frees a few objects, checks one of the parent's and _exits with a
 * status derived from it; the parent waits and checks the status.  Wall
 * time is the measure.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

static struct bench_churn_slot *heap;
static long nobjects;

static void *build(void *arg)
{
	uint64_t seed = *(uint64_t *)arg;
	for (long i = (long)(seed & 1); i < nobjects; i += 2) {
		heap[i].size = (uint32_t)bench_range(&seed, 16, 1024);
		heap[i].tag = (uint32_t)i * 2654435761u;
		heap[i].p = bench_xmalloc(heap[i].size);
		bench_churn_fill(heap[i].p, heap[i].size, heap[i].tag);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "forks", 500, "fork + exit + wait rounds" },
		{ "objects", 200000, "objects in the parent's heap" },
	};
	bench_parse(argc, argv, "fork, child exits, parent waits.", o, BENCH_NOPTS(o));
	nobjects = o[1].value;
	heap = calloc((size_t)nobjects, sizeof *heap);
	if (!heap)
		return 1;
	uint64_t s0 = 2, s1 = 3; /* the low bit picks even or odd slots */
	pthread_t t;
	pthread_create(&t, NULL, build, &s1);
	build(&s0);
	pthread_join(t, NULL);
	uint64_t sum = 0, errors = 0;
	for (long k = 0; k < o[0].value; k++) {
		long i = (k * 7919) % nobjects;
		pid_t c = fork();
		if (c < 0) {
			perror("fork_cost: fork");
			return 1;
		}
		if (c == 0) {
			uint64_t e = 0, v = bench_churn_check(&heap[i], &e);
			for (int j = 0; j < 8; j++)
				free(bench_xmalloc(32 + (size_t)j * 100));
			_exit(e ? 99 : (int)(v & 63));
		}
		int st;
		if (waitpid(c, &st, 0) != c || !WIFEXITED(st)) {
			fprintf(stderr, "fork_cost: child %ld did not exit\n", k);
			return 1;
		}
		uint64_t e = 0, v = bench_churn_check(&heap[i], &e);
		errors += e + (WEXITSTATUS(st) != (int)(v & 63));
		sum += bench_mix(v);
	}
	return bench_finish("fork_cost", sum, errors);
}
