/*
 * leaky - a leak and a cache, for heapctl watch --leaks: every 100 ms,
 * leaky_site allocates 16 blocks of 64 KiB and never frees them, and
 * cache_site replaces 16 of 64 cached blocks, emptying the whole cache
 * every fourth round (it grows and shrinks).  Writes "ready PID".
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
	int k = 0;
	printf("ready %d\n", getpid());
	fflush(stdout);
	for (;;) {
		for (int i = 0; i < 16; i++)
			sink = leaky_site();
		for (int i = 0; i < 16; i++) {
			free(cache[k]);
			cache[k] = cache_site();
			k = (k + 1) % 64;
		}
		if (k == 0)
			for (int i = 0; i < 64; i++) {
				free(cache[i]);
				cache[i] = NULL;
			}
		usleep(100000);
	}
}
