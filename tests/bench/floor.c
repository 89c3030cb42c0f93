/*
 * floor - the machine's floor for a malloc+free pair: fastpath's tight loop
 * over floor_lib.so's one-list allocator instead of malloc and free.  What
 * a real allocator adds on top (size class, sampling countdown, page
 * lookup on free) is the distance to this number.
 *   ns_per_pair=<tight>
 */
#include "bench.h"

void *floor_alloc(size_t n);
void floor_free(void *p);

static void __attribute__((noinline)) tight(long n, size_t size, uint64_t *ok)
{
	for (long i = 0; i < n; i++) {
		void *p = floor_alloc(size);
		bench_escape(p);
		*ok += p != NULL;
		floor_free(p);
	}
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "pairs", 40000000, "alloc+free pairs" },
		{ "size", 32, "block size (bytes)" },
	};
	bench_parse(argc, argv, "the floor of an alloc+free pair", o, BENCH_NOPTS(o));
	long n = o[0].value;
	uint64_t ok = 0, warm = 0;
	tight(n / 20, (size_t)o[1].value, &warm);
	double t0 = bench_now();
	tight(n, (size_t)o[1].value, &ok);
	double t1 = bench_now();
	printf("ns_per_pair=%.2f\n", (t1 - t0) * 1e9 / n);
	return ok == (uint64_t)n ? 0 : 3;
}
