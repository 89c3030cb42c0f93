/*
 * lifetimes - three allocation sites with known lifetimes, for heapctl
 * report --lifetime and --older-than:
 *
 *   site_churn  freed at once (well under a millisecond)
 *   site_hold   freed hold_ms later (default 2000)
 *   site_leak   never freed
 *
 *   lifetimes [rounds=N] [hold_ms=MS]
 *
 * Each round allocates and frees 100 blocks of 4 KiB at site_churn, and
 * one of 8 KiB at site_hold and one of 16 KiB at site_leak; the held
 * blocks are freed hold_ms after the last round.  Then "ready PID", and
 * it sleeps until killed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

/* the empty asm after the call keeps it from being a tail call, which
 * would leave no frame of the site on the stack (clang-format would split
 * its ":::") */
/* clang-format off */
#define SITE(name, size) \
	__attribute__((noinline)) static void *name(void) \
	{ \
		void *p = malloc(size); \
		__asm__ volatile("" ::: "memory"); \
		return p; \
	}
/* clang-format on */
SITE(site_churn, 4096)
SITE(site_hold, 8192)
SITE(site_leak, 16384)

int main(int argc, char **argv)
{
	long rounds = 2000, hold_ms = 2000;
	for (int i = 1; i < argc; i++)
		if (sscanf(argv[i], "rounds=%ld", &rounds) != 1 && sscanf(argv[i], "hold_ms=%ld", &hold_ms) != 1) {
			fprintf(stderr, "lifetimes: bad argument %s\n", argv[i]);
			return 2;
		}
	void **held = malloc((size_t)rounds * sizeof *held);
	for (long r = 0; r < rounds; r++) {
		for (int k = 0; k < 100; k++) {
			void *p = site_churn();
			memset(p, 1, 64);
			sink = p;
			free(p);
		}
		held[r] = site_hold();
		sink = site_leak();
	}
	usleep((useconds_t)hold_ms * 1000);
	for (long r = 0; r < rounds; r++)
		free(held[r]);
	printf("ready %d\n", getpid());
	fflush(stdout);
	for (;;)
		pause();
}
