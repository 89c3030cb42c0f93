/*
 * pareto_churn — one thread, mixed sizes, random lifetimes (the pattern of
 * mimalloc-bench's alloc-test1).
 *
 * A table of `slots` slots, about half of them filled first. Each step picks
 * a slot with an 80/20 skew applied `levels` times (80% of the picks go to
 * the first 20% of the range, and so on inside it) and toggles it: a full
 * slot is checked and freed, an empty one gets a block whose size is
 * 2^e + a random part, e uniform in [3, maxexp-1] (so as many blocks of 8-16
 * bytes as of 512-1024). Hot slots turn over every few steps, cold ones
 * live through the run, so short- and long-lived blocks of every size are
 * interleaved in memory, unlike st_churn's uniform picks and sizes.
 */
#include "bench.h"

static long pick(uint64_t *rng, long n, long levels)
{
	long lo = 0;

	for (long l = 0; l < levels && n >= 5; l++) {
		if (bench_range(rng, 0, 9) < 8) {
			n /= 5; /* the hot fifth */
		} else {
			lo += n / 5;
			n -= n / 5;
			break; /* the cold part: uniform in it */
		}
	}
	return lo + (long)bench_range(rng, 0, (uint64_t)n - 1);
}

static void put(struct bench_churn_slot *s, uint64_t *rng, long maxexp, uint64_t *sum)
{
	uint32_t e = (uint32_t)bench_range(rng, 3, (uint64_t)maxexp - 1);
	s->size = (1u << e) + (uint32_t)bench_range(rng, 0, (1u << e) - 1);
	s->tag = (uint32_t)bench_rand(rng);
	s->p = bench_xmalloc(s->size);
	bench_churn_fill(s->p, s->size, s->tag);
	*sum += bench_mix(((uint64_t)s->tag << 32) | s->size);
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "slots", 1 << 16, "table size (about half live)" },
		{ "ops", 5000000, "frees plus allocations" },
		{ "levels", 3, "times the 80/20 skew is applied" },
		{ "maxexp", 11, "sizes below 2^maxexp bytes (4..24)" },
		{ "seed", 23, "random seed" },
	};
	bench_parse(argc, argv, "Mixed sizes, skewed random lifetimes.", o, BENCH_NOPTS(o));
	long n = o[0].value, ops = o[1].value, levels = o[2].value, maxexp = o[3].value;
	if (n < 1 || maxexp < 4 || maxexp > 24) {
		fprintf(stderr, "pareto_churn: need slots>=1, 4<=maxexp<=24\n");
		return 2;
	}
	struct bench_churn_slot *slot = calloc((size_t)n, sizeof(*slot));
	uint64_t rng = bench_seed((uint64_t)o[4].value, 0), sum = 0, errors = 0;
	if (!slot)
		return 1;
	for (long i = 0; i < n; i++)
		if (bench_rand(&rng) & 1)
			put(&slot[i], &rng, maxexp, &sum);
	for (long k = 0; k < ops; k++) {
		struct bench_churn_slot *s = &slot[pick(&rng, n, levels)];
		if (s->p) {
			sum += bench_churn_check(s, &errors);
			free(s->p);
			s->p = NULL;
		} else {
			put(s, &rng, maxexp, &sum);
		}
	}
	for (long i = 0; i < n; i++)
		if (slot[i].p) {
			sum += bench_churn_check(&slot[i], &errors);
			free(slot[i].p);
		}
	free(slot);
	return bench_finish("pareto_churn", sum, errors);
}
