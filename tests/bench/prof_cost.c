/*
 * prof_cost - the profiler's cost per allocation: a churn of 16..271-byte
 * objects through a three-deep call chain (so every sample unwinds real
 * frames), run under the MALLOC_CONF being measured.  Prints ns per
 * malloc+free and a checksum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void *f3(size_t n)
{
	return malloc(n);
}
__attribute__((noinline)) static void *f2(size_t n)
{
	return f3(n);
}
__attribute__((noinline)) static void *f1(size_t n)
{
	return f2(n);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000000;
	void *w[256] = { 0 };
	unsigned s = 1;
	uintptr_t sum = 0;
	double t = now();
	for (long i = 0; i < n; i++) {
		s = s * 1103515245u + 12345u;
		unsigned k = (s >> 8) & 255;
		free(w[k]);
		w[k] = f1(16 + ((s >> 16) & 255));
		sum += (uintptr_t)w[k] & 0xff0;
	}
	double d = now() - t;
	for (int k = 0; k < 256; k++)
		free(w[k]);
	fprintf(stderr, "%.1f ns/op\n", d / (double)n * 1e9);
	printf("ns_per_op=%.1f checksum=%lu\n", d / (double)n * 1e9, (unsigned long)(sum & 1));
	return 0;
}
