/*
 * tests/programs/systemd_service.c - the service tests/systemd/hardened.sh runs in a
 * hardened systemd unit with libheapctl.so preloaded.
 *
 * Built on the host and copied into the container, so the test can read
 * its symbols with the host's jeprof and heapctl report.  Two threads
 * allocate through functions with names no other program has, so a
 * profile of it can be checked for them:
 *
 *   svc_keep   (main thread)  keeps `grow` bytes per tick: live, growing
 *   svc_churn  (main thread)  allocates and frees at once
 *   svc_worker (a thread)     keeps a ring of blocks it replaces
 *
 *   service [grow=BYTES_PER_TICK] [tick_ms=N] [seconds=N]
 *
 * It writes "ready PID" on stdout, and exits 0 on SIGTERM or after
 * `seconds` (default 600).  The kept memory is capped at 64 MiB.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t quit;
static void *volatile sink;
static long tick_ms = 20;

static void on_term(int sig)
{
	(void)sig;
	quit = 1;
}

static void nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

static void *__attribute__((noinline)) svc_keep(size_t n)
{
	char *p = malloc(n);
	if (p)
		memset(p, 1, n);
	return p;
}

static void __attribute__((noinline)) svc_churn(void)
{
	for (int i = 0; i < 64; i++) {
		sink = malloc((size_t)(16 + i * 24));
		free(sink);
	}
}

static void *__attribute__((noinline)) svc_worker(void *arg)
{
	enum { RING = 256 };
	static void *ring[RING];
	(void)arg;
	for (unsigned i = 0; !quit; i++) {
		free(ring[i % RING]);
		ring[i % RING] = malloc(1024 + (i % 7) * 512);
		nap(tick_ms / 4 + 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long grow = 4096, seconds = 600;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "grow=", 5))
			grow = atol(argv[i] + 5);
		else if (!strncmp(argv[i], "tick_ms=", 8))
			tick_ms = atol(argv[i] + 8);
		else if (!strncmp(argv[i], "seconds=", 8))
			seconds = atol(argv[i] + 8);
		else {
			fprintf(stderr, "service: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	pthread_t worker;
	if (pthread_create(&worker, NULL, svc_worker, NULL) != 0) {
		fprintf(stderr, "service: cannot start the worker thread\n");
		return 1;
	}
	printf("ready %d\n", getpid());
	fflush(stdout);

	size_t cap = (64u << 20) / (grow > 0 ? (size_t)grow : 1), nkeep = 0;
	void **keep = calloc(cap + 1, sizeof *keep);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!quit) {
		svc_churn();
		if (grow > 0 && keep && nkeep < cap)
			keep[nkeep++] = svc_keep((size_t)grow);
		nap(tick_ms);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec >= seconds)
			break;
	}
	quit = 1;
	pthread_join(worker, NULL);
	printf("exiting\n");
	return 0;
}
