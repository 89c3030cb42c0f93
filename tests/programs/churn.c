/*
 * tests/programs/churn.c - a program for heapctl inject's stress test, built
 * without the library.
 *
 *   churn ENDFILE    8 threads allocate, fill, check and free without a
 *                    pause (every function of the malloc family, objects
 *                    handed between threads), and the main thread forks a
 *                    child every 20 ms that does the same briefly and
 *                    exits; until ENDFILE exists.  Prints "ready" at the
 *                    start and "churn ok" at the end, or a FAIL line for
 *                    each corrupt object, failed child or hung child.
 *
 * Its output is the same whether or not heapctl injects and ejects the
 * agent any number of times meanwhile.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 8
#define SLOTS    512

static volatile int stop;
static int failures;            /* atomic */
static void *handoff[NTHREADS]; /* atomic exchange between threads */

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* An object's first and last bytes carry its size. */
static void *fill(void *p, size_t n)
{
	if (p != NULL && n >= 16) {
		memcpy(p, &n, sizeof n);
		memcpy((char *)p + n - sizeof n, &n, sizeof n);
	}
	return p;
}

static void check(void *p, size_t n, const char *what)
{
	size_t a, b;
	if (p == NULL || n < 16)
		return;
	memcpy(&a, p, sizeof a);
	memcpy(&b, (char *)p + n - sizeof b, sizeof b);
	if (a != n || b != n) {
		__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
		fprintf(stderr, "FAIL %s: object %p of %zu bytes corrupt\n", what, p, n);
	}
}

static void *alloc(uint64_t *s, size_t *n)
{
	*n = 16 + rng(s) % (rng(s) % 16 == 0 ? 200000 : 2000);
	void *p = NULL;
	switch (rng(s) % 5) {
	case 0: p = malloc(*n); break;
	case 1: p = calloc(1, *n); break;
	case 2:
		if (posix_memalign(&p, 64, *n) != 0)
			p = NULL;
		break;
	case 3:
		p = aligned_alloc(32, (*n + 31) & ~(size_t)31);
		*n = (*n + 31) & ~(size_t)31;
		break;
	default: p = realloc(NULL, *n); break;
	}
	return fill(p, *n);
}

static void work(uint64_t seed, int id, long rounds)
{
	void *slot[SLOTS] = { 0 };
	size_t size[SLOTS] = { 0 };
	uint64_t s = seed | 1;
	for (long r = 0; rounds < 0 ? !stop : r < rounds; r++) {
		unsigned i = (unsigned)(rng(&s) % SLOTS);
		if (slot[i] == NULL) {
			slot[i] = alloc(&s, &size[i]);
		} else if (rng(&s) % 4 == 0) {
			check(slot[i], size[i], "before realloc");
			size_t n = 16 + rng(&s) % 5000;
			void *q = realloc(slot[i], n);
			if (q != NULL) {
				size_t keep = n < size[i] ? n : size[i];
				if (keep >= 16) {
					size_t a;
					memcpy(&a, q, sizeof a);
					if (a != size[i]) {
						__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
						fprintf(stderr, "FAIL realloc lost the contents\n");
					}
				}
				slot[i] = fill(q, n);
				size[i] = n;
			}
		} else if (id >= 0 && rng(&s) % 8 == 0) {
			/* to another thread, which frees it */
			check(slot[i], size[i], "before handoff");
			void *old = __atomic_exchange_n(&handoff[(id + 1) % NTHREADS], slot[i], __ATOMIC_ACQ_REL);
			free(old);
			slot[i] = NULL;
		} else {
			check(slot[i], size[i], "before free");
			free(slot[i]);
			slot[i] = NULL;
		}
	}
	for (unsigned i = 0; i < SLOTS; i++) {
		check(slot[i], size[i], "at the end");
		free(slot[i]);
	}
}

static void *thread_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	work(0x9E3779B97F4A7C15ull * (uint64_t)(id + 1), id, -1);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: churn ENDFILE\n");
		return 2;
	}
	pthread_t t[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)i);
	printf("ready\n");
	fflush(stdout);
	int forks = 0;
	while (access(argv[1], F_OK) != 0) {
		pid_t c = fork();
		if (c == 0) {
			work((uint64_t)getpid() * 7919, -1, 3000);
			_exit(failures ? 1 : 0);
		}
		forks++;
		int st = 0;
		struct timespec t0, now;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			pid_t w = waitpid(c, &st, WNOHANG);
			if (w == c)
				break;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - t0.tv_sec > 20) {
				kill(c, SIGKILL);
				waitpid(c, &st, 0);
				__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
				fprintf(stderr, "FAIL child %d hung (deadlock after fork?)\n", (int)c);
				break;
			}
			usleep(1000);
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
			fprintf(stderr, "FAIL child %d: status %#x\n", (int)c, st);
		}
		usleep(20000);
	}
	stop = 1;
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < NTHREADS; i++)
		free(handoff[i]);
	fprintf(stderr, "churn: %d forks\n", forks);
	if (failures)
		return 1;
	printf("churn ok\n");
	return 0;
}
