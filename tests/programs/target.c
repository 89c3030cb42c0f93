/*
 * target - a small long-running service for the CLI tests, run with
 * LD_PRELOAD=libheapctl.so.  It allocates on a steady beat so there is
 * something to sample, and can keep memory growing, fork, or use many
 * distinct call stacks.
 *
 *   target [grow=BYTES_PER_TICK] [tick_ms=N] [fork=1|stop] [stacks=N] [seconds=N]
 *
 * It writes "ready PID" (and "child PID" after fork=1) on stdout, then runs
 * until killed or `seconds` pass (default 600), exiting 0.  With fork=stop
 * the parent writes "child PID" and the child stops itself (SIGSTOP) as
 * soon as fork returns, before anything else, and runs on when continued.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t quit;
/* volatile stores keep the compiler from eliding malloc/free pairs */
static void *volatile sink;
static void *volatile *stack_objs;
static void on_term(int sig)
{
	(void)sig;
	quit = 1;
}

/* Distinct call stacks: each bit of b picks deep_a or deep_b for one
 * level, so branch b of depth d has its own sequence of return addresses. */
static void *deep(unsigned b, unsigned d, size_t n);
static void *__attribute__((noinline)) deep_a(unsigned b, unsigned d, size_t n)
{
	void *p = deep(b, d, n);
	__asm__ volatile("" ::: "memory");
	return p;
}
static void *__attribute__((noinline)) deep_b(unsigned b, unsigned d, size_t n)
{
	void *p = deep(b, d, n + 16);
	__asm__ volatile("" ::: "memory");
	return p;
}
static void *__attribute__((noinline)) deep(unsigned b, unsigned d, size_t n)
{
	if (d == 0) {
		void *p = malloc(n);
		sink = p;
		return p;
	}
	void *p = (b & 1) ? deep_a(b >> 1, d - 1, n) : deep_b(b >> 1, d - 1, n);
	__asm__ volatile("" ::: "memory");
	return p;
}

int main(int argc, char **argv)
{
	long grow = 4096, tick_ms = 20, stacks = 0, seconds = 600;
	int do_fork = 0;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "grow=", 5))
			grow = atol(argv[i] + 5);
		else if (!strncmp(argv[i], "tick_ms=", 8))
			tick_ms = atol(argv[i] + 8);
		else if (!strncmp(argv[i], "stacks=", 7))
			stacks = atol(argv[i] + 7);
		else if (!strncmp(argv[i], "seconds=", 8))
			seconds = atol(argv[i] + 8);
		else if (!strcmp(argv[i], "fork=1"))
			do_fork = 1;
		else if (!strcmp(argv[i], "fork=stop"))
			do_fork = 2;
		else {
			fprintf(stderr, "target: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	/* stacks=N: N distinct live call stacks (branch bits choose the path) */
	if (stacks > 0)
		stack_objs = calloc((size_t)stacks, sizeof *stack_objs);
	for (long s = 0; stack_objs && s < stacks; s++)
		stack_objs[s] = deep((unsigned)s, 14, 64);
	pid_t child = 0;
	if (do_fork) {
		child = fork();
		if (child == 0 && do_fork == 2)
			raise(SIGSTOP);
		else if (child == 0) {
			printf("child %d\n", getpid());
			fflush(stdout);
		}
		if (child > 0 && do_fork == 2)
			printf("child %d\n", child);
	}
	if (child != 0 || !do_fork) {
		printf("ready %d\n", getpid());
		fflush(stdout);
	}
	char **keep = NULL;
	size_t nkeep = 0;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!quit) {
		/* churn plus steady growth */
		for (int i = 0; i < 64; i++) {
			sink = malloc((size_t)(16 + i * 24));
			free(sink);
		}
		if (grow > 0) {
			char **k = realloc(keep, (nkeep + 1) * sizeof *keep);
			if (k) {
				keep = k;
				keep[nkeep] = malloc((size_t)grow);
				if (keep[nkeep])
					memset(keep[nkeep], 1, (size_t)grow);
				nkeep++;
			}
		}
		struct timespec ts = { tick_ms / 1000, (tick_ms % 1000) * 1000000 };
		nanosleep(&ts, NULL);
		struct timespec t1;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec >= seconds)
			break;
	}
	if (child > 0) {
		kill(child, SIGTERM);
		waitpid(child, NULL, 0);
	}
	return 0;
}
