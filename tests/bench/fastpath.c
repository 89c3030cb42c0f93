/*
 * fastpath — the floor cost of a malloc+free pair (via=1: calloc(1, size)
 * and free, via=2: memalign(16, size) and free).
 *
 * tight:   p = malloc(size); escape(p); free(p);           `pairs` times
 * batched: allocate `batch` blocks, then free them in allocation order,
 *          repeated until `pairs` pairs are done
 *
 * The escape is an empty asm that claims to read p and clobber memory, so
 * the compiler can neither drop the pair nor fold it into nothing; no byte
 * of the block is touched. After a warm-up, each variant is timed with
 * CLOCK_MONOTONIC and reported in ns per pair on stderr and on stdout:
 *   checksum=<hex> ns_per_pair=<tight> batch_ns_per_pair=<batched>
 * (run.sh compares only the checksum field across allocators).
 */
#include "bench.h"

#include <malloc.h>

/* The loops, once per entry point (via=): each its own function, so that
 * malloc's loop is the same code it always was. */
#define PAIR_LOOPS(name, ALLOC)                                                                                       \
	static void __attribute__((noinline)) tight_##name(long n, size_t size, uint64_t *ok)                         \
	{                                                                                                             \
		for (long i = 0; i < n; i++) {                                                                        \
			void *p = ALLOC;                                                                              \
			bench_escape(p);                                                                              \
			*ok += p != NULL;                                                                             \
			free(p);                                                                                      \
		}                                                                                                     \
	}                                                                                                             \
	static void __attribute__((noinline)) batched_##name(long n, long batch, size_t size, void **v, uint64_t *ok) \
	{                                                                                                             \
		for (long i = 0; i < n; i += batch) {                                                                 \
			for (long k = 0; k < batch; k++) {                                                            \
				v[k] = ALLOC;                                                                         \
				bench_escape(v[k]);                                                                   \
			}                                                                                             \
			for (long k = 0; k < batch; k++) {                                                            \
				*ok += v[k] != NULL;                                                                  \
				free(v[k]);                                                                           \
			}                                                                                             \
		}                                                                                                     \
	}
PAIR_LOOPS(malloc, malloc(size))
PAIR_LOOPS(calloc, calloc(1, size))
PAIR_LOOPS(memalign, memalign(16, size))

static void tight(int via, long n, size_t size, uint64_t *ok)
{
	if (via == 0)
		tight_malloc(n, size, ok);
	else if (via == 1)
		tight_calloc(n, size, ok);
	else
		tight_memalign(n, size, ok);
}

static void batched(int via, long n, long batch, size_t size, void **v, uint64_t *ok)
{
	if (via == 0)
		batched_malloc(n, batch, size, v, ok);
	else if (via == 1)
		batched_calloc(n, batch, size, v, ok);
	else
		batched_memalign(n, batch, size, v, ok);
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "pairs", 40000000, "malloc+free pairs per variant" },
		{ "size", 32, "block size (bytes)" },
		{ "batch", 100, "blocks per batch in the batched variant" },
		{ "via", 0, "0 malloc, 1 calloc(1, size), 2 memalign(16, size)" },
	};
	bench_parse(argc, argv, "malloc+free fast-path cost", o, BENCH_NOPTS(o));
	long n = o[0].value, batch = o[2].value;
	size_t size = o[1].value;
	int via = (int)o[3].value;
	if (batch < 1 || n < batch || via < 0 || via > 2) {
		fprintf(stderr, "fastpath: need pairs>=batch>=1 and via 0, 1 or 2\n");
		return 2;
	}
	n -= n % batch;

	void **v = bench_xmalloc(batch * sizeof(*v));
	uint64_t ok = 0, warm = 0;
	tight(via, n / 20, size, &warm);
	batched(via, n / 20, batch, size, v, &warm);

	double t0 = bench_now();
	tight(via, n, size, &ok);
	double t1 = bench_now();
	batched(via, n, batch, size, v, &ok);
	double t2 = bench_now();
	free(v);

	double ns_tight = (t1 - t0) * 1e9 / n, ns_batch = (t2 - t1) * 1e9 / n;
	fprintf(stderr,
	    "fastpath: %.2f ns per pair (tight), %.2f ns per pair "
	    "(batch of %ld)\n",
	    ns_tight, ns_batch, batch);

	bench_check_preload();
	uint64_t errors = ok != 2 * (uint64_t)n;
	printf("checksum=%016" PRIx64 " ns_per_pair=%.2f batch_ns_per_pair=%.2f\n", bench_mix(ok ^ errors), ns_tight,
	    ns_batch);
	return errors ? 3 : 0;
}
