/*
 * tests/programs/prog.c - a program with known allocation sites for
 * tests/trace/trace.bats and tests/bench/trace.sh, built without the
 * library (dynamically, statically, and against jemalloc).
 *
 *   prog GOFILE [ENDFILE]
 *                    print "ready", wait until GOFILE exists, then allocate
 *                    and print "done"; then wait until ENDFILE exists, if
 *                    given, with every kept object live (heapctl inject)
 *
 * site_a (thread 1): 8192 x 4096 bytes, kept and written (32 MiB)
 * site_b (thread 2):  8192 x 1024 bytes, kept and written (8 MiB)
 * site_c (thread 2): 1M x 64 bytes, each freed at once (64 MiB allocated);
 *                    PROG_SITE_C=N in the environment makes it N calls (a
 *                    test that asserts nothing of site_c and traces every
 *                    call with uprobes spares itself seconds of CPU)
 * site_d (main):     2048 x calloc(1, 2048), kept (4 MiB)
 * site_e (main):     64 x posix_memalign(4096, 32768), kept (2 MiB)
 * site_early (main): 1024 x 4096 bytes before "ready", freed before "done"
 *                    (what heapctl inject must not count, and must free)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *keep[8192 * 2 + 2048 + 64];
static size_t nkeep;
static long site_c_calls = 1 << 20;

__attribute__((noinline)) static void *site_a(void)
{
	void *p = malloc(4096);
	memset(p, 'a', 4096);
	return p;
}

__attribute__((noinline)) static void *site_b(void)
{
	void *p = malloc(1024);
	memset(p, 'b', 1024);
	return p;
}

__attribute__((noinline)) static void site_c(void)
{
	void *p = malloc(64);
	__asm__ volatile("" : : "r"(p) : "memory");
	free(p);
}

__attribute__((noinline)) static void *site_d(void)
{
	return calloc(1, 2048);
}

__attribute__((noinline)) static void *site_e(void)
{
	void *p = NULL;
	return posix_memalign(&p, 4096, 32768) == 0 ? p : NULL;
}

__attribute__((noinline)) static void *site_early(void)
{
	void *p = malloc(4096);
	memset(p, 'e', 4096);
	return p;
}

static void *thread_a(void *arg)
{
	void **out = arg;
	for (int i = 0; i < 8192; i++)
		out[i] = site_a();
	return NULL;
}

static void *thread_b(void *arg)
{
	void **out = arg;
	for (int i = 0; i < 8192; i++)
		out[i] = site_b();
	for (long i = 0; i < site_c_calls; i++)
		site_c();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: prog GOFILE [ENDFILE]\n");
		return 2;
	}
	const char *n = getenv("PROG_SITE_C");
	if (n != NULL)
		site_c_calls = strtol(n, NULL, 10);
	static void *early[1024];
	for (int i = 0; i < 1024; i++)
		early[i] = site_early();
	printf("ready\n");
	fflush(stdout);
	while (access(argv[1], F_OK) != 0)
		usleep(10000);
	pthread_t a, b;
	pthread_create(&a, NULL, thread_a, keep);
	pthread_create(&b, NULL, thread_b, keep + 8192);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	nkeep = 8192 * 2;
	for (int i = 0; i < 2048; i++)
		keep[nkeep++] = site_d();
	for (int i = 0; i < 64; i++)
		keep[nkeep++] = site_e();
	for (int i = 0; i < 1024; i++) /* after the sites: none reuses them */
		free(early[i]);
	printf("done %zu\n", nkeep);
	fflush(stdout);
	while (argc == 3 && access(argv[2], F_OK) != 0)
		usleep(10000);
	return 0;
}
