/*
 * lock_order.c - the lock order check of debug builds (allocator/hc_lock.h,
 * allocator/lock.c), compiled here with HC_DEBUG=1 whatever the build:
 * locks taken in the order pass; a lower rank taken under a higher one, or
 * a lock taken twice, ends the process with one line naming both locks;
 * and fork's check names a lock in use that prepare did not take.
 * (The whole suites run on the DEBUG=1 library in make check, where every
 * real path, fork's prepare handler included, goes through the check.)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../allocator/hc_lock.h"
#include "../lib/check.h"

static hc_mutex_t outer = HC_MUTEX_INIT(HC_RANK_PROF, "outer_lock");
static hc_mutex_t inner = HC_MUTEX_INIT(HC_RANK_META, "inner_lock");
static hc_mutex_t fam[2] = { HC_MUTEX_INIT(HC_RANK_ARENA, "arena 0"), HC_MUTEX_INIT(HC_RANK_ARENA, "arena 1") };

/* Run f in a child; its exit signal and its stderr. */
static int in_child(void (*f)(void), char *err, size_t len)
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		f();
		_exit(0);
	}
	close(p[1]);
	ssize_t n = read(p[0], err, len - 1);
	err[n > 0 ? n : 0] = 0;
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void in_order(void)
{
	hc_mutex_lock(&outer);
	hc_mutex_lock(&fam[0]);
	hc_mutex_lock(&fam[1]); /* a family, in index order */
	hc_mutex_lock(&inner);
	hc_mutex_unlock(&fam[0]); /* released out of order */
	hc_mutex_unlock(&inner);
	hc_mutex_unlock(&fam[1]);
	hc_mutex_unlock(&outer);
	hc_mutex_lock(&inner); /* nothing held: any lock */
	hc_mutex_unlock(&inner);
	hc_mutex_lock(&inner);
	if (hc_mutex_trylock(&outer) == 0) /* trylock never waits: allowed */
		hc_mutex_unlock(&outer);
	hc_mutex_unlock(&inner);
	hc_mutex_lock(&inner);
	hc_mutex_reinit(&inner); /* as a fork child does: no longer held */
	hc_mutex_lock(&outer);
	hc_mutex_unlock(&outer);
}

static void reversed(void)
{
	hc_mutex_lock(&inner);
	hc_mutex_lock(&outer);
}

/* fork's check: every lock ever taken is held at the end of prepare */
static void fork_all_held(void)
{
	hc_mutex_lock(&outer);
	hc_mutex_lock(&inner);
	hc_lock_check_fork();
	hc_mutex_unlock(&inner);
	hc_mutex_unlock(&outer);
}

static void fork_one_missing(void)
{
	hc_mutex_lock(&inner);
	hc_mutex_unlock(&inner);
	hc_mutex_lock(&outer); /* inner, used before, is not taken */
	hc_lock_check_fork();
}

static void twice(void)
{
	hc_mutex_lock(&outer);
	hc_mutex_lock(&outer);
}

int main(void)
{
	char err[512];
	int sig = in_child(in_order, err, sizeof err);
	CHECK(sig == 0 && err[0] == 0, "locks in order: signal %d, stderr '%s'", sig, err);

	sig = in_child(reversed, err, sizeof err);
	CHECK(sig == SIGABRT, "a lower rank under a higher one: signal %d", sig);
	char want[256];
	snprintf(want, sizeof want,
	    "<heapctl>: lock order broken: taking outer_lock (rank %d) while holding "
	    "inner_lock (rank %d)\n",
	    HC_RANK_PROF, HC_RANK_META);
	CHECK(strcmp(err, want) == 0, "message: '%s'", err);

	sig = in_child(twice, err, sizeof err);
	CHECK(sig == SIGABRT, "a lock taken twice: signal %d", sig);
	snprintf(want, sizeof want, "taking outer_lock (rank %d) while holding outer_lock (rank %d)", HC_RANK_PROF,
	    HC_RANK_PROF);
	CHECK(strstr(err, want) != NULL, "message: '%s'", err);

	sig = in_child(fork_all_held, err, sizeof err);
	CHECK(sig == 0 && err[0] == 0, "fork check with every lock held: signal %d, '%s'", sig, err);
	sig = in_child(fork_one_missing, err, sizeof err);
	CHECK(sig == SIGABRT, "fork check with a lock missing: signal %d", sig);
	CHECK(strcmp(err, "<heapctl>: fork: inner_lock is not held across fork (allocator/hc_lock.h)\n") == 0,
	    "message: '%s'", err);
	return hc_check_finish("lock_order");
}
