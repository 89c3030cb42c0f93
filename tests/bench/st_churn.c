/*
 * st_churn — single-thread small-object churn.
 *
 * A window of live objects of random sizes (8–512 B by default); each step
 * frees a randomly chosen live object and allocates a new one in its place,
 * writing one word per cache line of it. Measures the size-class fast paths
 * under a random (not LIFO) free order, with a working set of a few MiB.
 */
#include "bench.h"

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "ops", 12000000, "malloc+free operations" },
		{ "window", 20000, "live objects" },
		{ "minsz", 8, "smallest object size (bytes)" },
		{ "maxsz", 512, "largest object size (bytes)" },
		{ "seed", 1, "random seed" },
	};
	bench_parse(argc, argv, "single-thread small-object churn", o, BENCH_NOPTS(o));
	if (o[1].value < 1 || o[2].value < 8 || o[3].value < o[2].value) {
		fprintf(stderr, "st_churn: need window>=1, 8<=minsz<=maxsz\n");
		return 2;
	}

	uint64_t errors = 0;
	uint64_t sum = bench_churn(bench_seed(o[4].value, 0), o[0].value, o[1].value, o[2].value, o[3].value, &errors);
	return bench_finish("st_churn", sum, errors);
}
