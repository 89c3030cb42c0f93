/*
 * heapctl/ptrace/ptrace.h - every thread of a process held with ptrace
 * (seize.c), for `stacks` (stacks.c) and `inject` (inject.c).
 */
#ifndef HC_PTRACE_H
#define HC_PTRACE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_MAX_THREADS 4096
#define PT_MAX_FRAMES  256

/* One thread of the process: seized means ours until pt_release_all();
 * stopped means it is in a ptrace stop now, so its registers may be read. */
typedef struct pt_thr_s {
	int tid;
	char name[64];
	char state;          /* from /proc/TID/status, before we came      */
	char state_name[24]; /* the kernel's name for it                   */
	bool seized, stopped, gone;
	int deliver; /* a signal to pass on at detach              */
	uint64_t ip[PT_MAX_FRAMES];
	bool exact[PT_MAX_FRAMES]; /* ip is where it is, not a return address    */
	bool signal_frame;         /* a frame of it is a signal handler's        */
	int n;
	const char *why; /* no stack: why                              */
} pt_thr_t;

uint64_t pt_now_ns(void); /* CLOCK_MONOTONIC */
/* Signals that would end heapctl held (old: the mask before). */
void pt_hold_signals(sigset_t *old);
/* Seize and stop every thread of pid into th (at most PT_MAX_THREADS),
 * *t_first: when the first was interrupted.  Returns 0, or an exit code
 * after one line (nothing held). */
int pt_seize_all(int pid, pt_thr_t *th, size_t *nth, uint64_t *t_first, uint64_t deadline);
/* Let every held thread go, with the signal each had pending. */
void pt_release_all(pt_thr_t *th, size_t nth);
/* Wait until every seized thread stops (or exits), up to the deadline. */
void pt_wait_stopped(pt_thr_t *th, size_t nth, uint64_t deadline);
/* A stopped thread's stack into t->ip (libunwind, with the accessors of as). */
struct unw_addr_space;
void pt_unwind_thread(struct unw_addr_space *as, pt_thr_t *t);

#endif
