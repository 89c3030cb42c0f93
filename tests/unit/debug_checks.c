/*
 * debug_checks - the debug build's invariant checks (HC_ASSERT) catch what
 * the release build lets through.  A double free of a block whose page
 * still holds another live block drops the page's count to zero: the
 * release build retires the page with the other block still in it; the
 * debug build checks the page as it retires it, finds its free list looping
 * through the block freed twice, and aborts with "assertion failed" and
 * where.  Blocks of 8 bytes: larger ones carry free's mark, which every
 * build checks at the second free (tests/unit/api_misuse.c).
 *
 * Meaningful on a debug build only (config.debug, make check's debug pass);
 * on another it says so and passes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/check.h"

static void *(*volatile v_malloc)(size_t) = malloc;
static void (*volatile v_free)(void *) = free;

enum { N = 20000, SZ = 8, PER_PAGE = 65536 / SZ };
static void *blk[N];

/* In a thread of its own (a heap of its own): fill pages of class 8, pick
 * a full page that is not the last, free all of it but a and b, then free
 * a twice. */
static void *double_free(void *arg)
{
	(void)arg;
	for (int i = 0; i < N; i++)
		blk[i] = v_malloc(SZ);
	uintptr_t page = 0, seen = 0;
	for (int i = 0; i < N && page == 0; i++) {
		uintptr_t pg = (uintptr_t)blk[i] & ~(uintptr_t)0xffff;
		if (pg == seen) /* counted already (blocks come page by page) */
			continue;
		seen = pg;
		int n = 0;
		bool later = false;
		for (int k = 0; k < N; k++) {
			n += ((uintptr_t)blk[k] & ~(uintptr_t)0xffff) == pg;
			later |= k > i && ((uintptr_t)blk[k] & ~(uintptr_t)0xffff) > pg + 0xffff;
		}
		if (n == PER_PAGE && later)
			page = pg;
	}
	if (page == 0) {
		fprintf(stderr, "no full page found\n");
		_exit(3);
	}
	void *a = NULL, *b = NULL;
	for (int i = 0; i < N; i++) {
		if (((uintptr_t)blk[i] & ~(uintptr_t)0xffff) != page)
			continue;
		if (a == NULL)
			a = blk[i];
		else if (b == NULL)
			b = blk[i];
		else
			v_free(blk[i]);
	}
	v_free(a);
	v_free(a); /* the page's count reaches 0 with b still live */
	_exit(0);
}

static void child(void)
{
	pthread_t t;
	pthread_create(&t, NULL, double_free, NULL);
	pthread_join(t, NULL);
	_exit(0);
}

int main(void)
{
	int (*ctl)(const char *, void *, size_t *, void *, size_t) =
	    (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
	bool debug = false;
	size_t len = sizeof debug;
	if (ctl == NULL || ctl("config.debug", &debug, &len, NULL, 0) != 0 || !debug) {
		printf("debug_checks: not a debug build (make DEBUG=1): nothing to check\n");
		return 0;
	}
	int p[2];
	CHECK(pipe(p) == 0, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		child();
	}
	close(p[1]);
	char err[512];
	ssize_t n = read(p[0], err, sizeof err - 1);
	err[n > 0 ? n : 0] = 0;
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "the double free was not caught: status %#x, stderr '%s'", st,
	    err);
	CHECK(strncmp(err, "<heapctl>: assertion failed: ", 29) == 0 && strstr(err, "allocator/heap.c:") != NULL,
	    "message: '%s'", err);
	printf("debug_checks: %s", err);
	return hc_check_finish("debug_checks");
}
