/*
 * leaky - a leak and a cache, for heapctl watch --leaks: every 100 ms,
 * leaky_site allocates 16 blocks of 64 KiB and never frees them, and
 * cache_site fills a cache of 64 such blocks in one round and empties it
 * in the next.  The cache has two levels, so dumps taken at any moments
 * never see it grow twice in a row (with every allocation sampled: a
 * cache of four levels, one more each round, grew in both of watch's
 * intervals in make check).  Writes "ready PID".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

__attribute__((noinline)) static void *leaky_site(void)
{
	void *p = malloc(65536);
	memset(p, 1, 64);
	__asm__ volatile("" ::: "memory"); /* no tail call */
	return p;
}

__attribute__((noinline)) static void *cache_site(void)
{
	void *p = malloc(65536);
	__asm__ volatile("" ::: "memory");
	return p;
}

int main(void)
{
	void *cache[64] = { 0 };
	int full = 0;
	printf("ready %d\n", getpid());
	fflush(stdout);
	for (;;) {
		for (int i = 0; i < 16; i++)
			sink = leaky_site();
		for (int i = 0; i < 64; i++) {
			free(cache[i]);
			cache[i] = full ? NULL : cache_site();
		}
		full = !full;
		usleep(100000);
	}
}
