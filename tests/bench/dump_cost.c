/*
 * dump_cost - time one prof.dump of a profile with N distinct stacks
 * (default 10000), each holding live sampled objects.  Stacks differ by
 * the return addresses of a recursion of varying depth and branch.
 */
#include <dlfcn.h>
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

static void *volatile sink[1 << 16]; /* volatile: the mallocs must stay */
static unsigned nsink;

__attribute__((noinline)) static void leafA(void)
{
	sink[nsink++ % (1 << 16)] = malloc(64);
}
__attribute__((noinline)) static void leafB(void)
{
	sink[nsink++ % (1 << 16)] = malloc(64);
}

/* Each (bits, depth) pair takes a different path: 2^depth distinct stacks
 * per depth. */
__attribute__((noinline)) static void walk(unsigned bits, unsigned depth)
{
	if (depth == 0) {
		if (bits & 1)
			leafA();
		else
			leafB();
		return;
	}
	if (bits & 1)
		walk(bits >> 1, depth - 1);
	else
		walk(bits >> 1, depth - 1);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	unsigned want = argc > 1 ? (unsigned)atoi(argv[1]) : 10000;
	unsigned made = 0;
	for (unsigned depth = 1; made < want; depth++)
		for (unsigned b = 0; b < (1u << depth) && made < want; b++, made++)
			walk(b, depth);
	int (*ctl)(const char *, void *, size_t *, void *, size_t) =
	    (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
	if (!ctl) {
		fprintf(stderr, "mallctl not found\n");
		return 1;
	}
	const char *path = argc > 2 ? argv[2] : "/tmp/dump_cost.heap";
	double t = now();
	int r = ctl("prof.dump", NULL, NULL, &path, sizeof path);
	double d = now() - t;
	printf("stacks=%u dump_ms=%.1f rc=%d\n", made, d * 1e3, r);
	return r;
}
