/*
 * heapctl/ptrace/seize.c - every thread of a process held with ptrace, for
 * `stacks` and `inject`, and where each one is (ptrace.h).
 *
 * Every thread is seized (PTRACE_SEIZE, which sends no signal) and
 * interrupted; a listing of /proc/PID/task after all stopped is taken
 * again, since a thread may start another before it stops.  A thread that
 * was already stopped (the process had a SIGSTOP) stays stopped; a signal
 * that arrived while it was held is delivered on detach.  Signals that
 * would end heapctl are held off by the caller (pt_hold_signals) until
 * every thread is let go, and if heapctl dies anyway the kernel detaches
 * what it had seized.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <libunwind-ptrace.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "ptrace/ptrace.h"
#include "report/rp_internal.h"

uint64_t pt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The process (or thread) that traces tid, or 0. */
static int tracer_of(int tid)
{
	char v[32];
	return cli_proc_status_field(tid, "TracerPid", v, sizeof v) ? atoi(v) : 0;
}

/* The thread's name and its state letter, as it was before we came. */
static void thread_info(int pid, pt_thr_t *t)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task/%d/comm", pid, t->tid);
	if (hc_shm_read_file(path, t->name, sizeof t->name) > 0)
		t->name[strcspn(t->name, "\n")] = 0;
	char st[64];
	t->state = '?';
	snprintf(t->state_name, sizeof t->state_name, "unknown");
	if (cli_proc_status_field(t->tid, "State", st, sizeof st) && st[0]) { /* "S (sleeping)" */
		t->state = st[0];
		char *o = strchr(st, '('), *c = o ? strchr(o, ')') : NULL;
		if (c)
			snprintf(t->state_name, sizeof t->state_name, "%.*s", (int)(c - o - 1), o + 1);
	}
}

/* Why PTRACE_SEIZE of pid was refused, and what to do: one line. */
static int refused(int pid, int err)
{
	if (err == ESRCH)
		return cli_err(HC_EXIT_NOPROC, "process %d has exited", pid);
	int tracer = tracer_of(pid);
	if (tracer > 0 && tracer != getpid())
		return cli_err(HC_EXIT_PERM, "cannot trace process %d: process %d (a debugger?) traces it already", pid,
		    tracer);
	char scope[16] = "";
	hc_shm_read_file("/proc/sys/kernel/yama/ptrace_scope", scope, sizeof scope);
	int sc = scope[0] ? atoi(scope) : 0;
	if (sc >= 3)
		return cli_err(HC_EXIT_PERM,
		    "cannot trace process %d: kernel.yama.ptrace_scope is 3 (no process may "
		    "be traced until reboot)",
		    pid);
	if (geteuid() != 0 && sc >= 1)
		return cli_err(HC_EXIT_PERM,
		    "cannot trace process %d: kernel.yama.ptrace_scope is %d; run it as root "
		    "(CAP_SYS_PTRACE)%s",
		    pid, sc, sc == 1 ? ", or set kernel.yama.ptrace_scope=0" : "");
	if (geteuid() == 0 || pid == 1)
		return cli_err(HC_EXIT_PERM,
		    "cannot trace process %d: the kernel refused (%s): init, kernel threads "
		    "and processes a security module protects (SELinux, AppArmor, lockdown) cannot be traced",
		    pid, strerror(err));
	return cli_err(HC_EXIT_PERM,
	    "cannot trace process %d: %s; run it as the process's user or as root "
	    "(CAP_SYS_PTRACE)",
	    pid, strerror(err));
}

/* Seize and interrupt every thread of pid not seized yet (*added: there
 * was one).  Returns 0, or the exit code after the one line (nothing
 * seized). */
static int seize_new(int pid, pt_thr_t *th, size_t *nth, uint64_t *t_first, bool *added)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	*added = false;
	DIR *d = opendir(path);
	if (d == NULL)
		return *nth ? 0 : cli_err(HC_EXIT_NOPROC, "process %d has exited", pid);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int tid = atoi(e->d_name);
		if (tid <= 0)
			continue;
		size_t i = 0;
		while (i < *nth && th[i].tid != tid)
			i++;
		if (i < *nth || *nth == PT_MAX_THREADS)
			continue;
		pt_thr_t *t = &th[(*nth)++];
		memset(t, 0, sizeof *t);
		t->tid = tid;
		thread_info(pid, t);
		*added = true;
		if (t->state == 'Z' || t->state == 'X') {
			t->why = "it has exited";
			continue;
		}
		if (*t_first == 0)
			*t_first = pt_now_ns();
		if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
			int err = errno;
			if (err == ESRCH) {
				t->why = "it exited";
				continue;
			}
			/* refused before any was held: the whole command is */
			size_t held = 0;
			for (size_t k = 0; k < *nth; k++)
				held += th[k].seized;
			if (held == 0) {
				closedir(d);
				return refused(pid, err);
			}
			t->why = strerror(err);
			int tracer = err == EPERM ? tracer_of(tid) : 0;
			if (tracer > 0) {
				char why[64];
				snprintf(why, sizeof why, "process %d (a debugger?) traces it", tracer);
				t->why = rp_intern(why);
			}
			continue;
		}
		t->seized = true;
		if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0)
			t->why = "it could not be interrupted";
	}
	closedir(d);
	return 0;
}

/* Wait until every seized thread stops (or exits), up to the deadline. */
void pt_wait_stopped(pt_thr_t *th, size_t nth, uint64_t deadline)
{
	for (;;) {
		size_t left = 0;
		for (size_t i = 0; i < nth; i++) {
			pt_thr_t *t = &th[i];
			if (!t->seized || t->stopped || t->gone)
				continue;
			int st;
			pid_t r = waitpid(t->tid, &st, __WALL | WNOHANG);
			if (r == t->tid && WIFSTOPPED(st)) {
				t->stopped = true;
				/* a signal-delivery stop (not the interrupt's or a
				 * group stop, which are event stops): the signal goes
				 * on at detach */
				if (st >> 16 == 0)
					t->deliver = WSTOPSIG(st);
			} else if (r == t->tid || (r < 0 && errno == ECHILD)) {
				t->gone = true;
				t->why = "it exited";
			} else {
				left++;
			}
		}
		if (left == 0 || pt_now_ns() >= deadline)
			break;
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	for (size_t i = 0; i < nth; i++)
		if (th[i].seized && !th[i].stopped && !th[i].gone)
			th[i].why = "it did not stop in time (uninterruptible sleep?); it is let go when heapctl exits";
}

void pt_unwind_thread(struct unw_addr_space *as, pt_thr_t *t)
{
	void *ui = _UPT_create(t->tid);
	unw_cursor_t c;
	if (ui == NULL || unw_init_remote(&c, as, ui) != 0) {
		t->why = "libunwind could not read its registers";
		if (ui)
			_UPT_destroy(ui);
		return;
	}
	bool exact = true; /* the innermost frame's pc */
	do {
		unw_word_t ip = 0;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0)
			break;
		t->ip[t->n] = ip;
		t->exact[t->n++] = exact;
		exact = unw_is_signal_frame(&c) > 0; /* the next one was interrupted */
		t->signal_frame |= exact;
	} while (t->n < PT_MAX_FRAMES && unw_step(&c) > 0);
	_UPT_destroy(ui);
}

/* Signals that would end heapctl are held while threads are held. */
void pt_hold_signals(sigset_t *old)
{
	sigset_t hold;
	sigemptyset(&hold);
	sigaddset(&hold, SIGINT);
	sigaddset(&hold, SIGTERM);
	sigaddset(&hold, SIGHUP);
	sigaddset(&hold, SIGQUIT);
	sigaddset(&hold, SIGTSTP);
	sigaddset(&hold, SIGPIPE);
	sigprocmask(SIG_BLOCK, &hold, old);
}

/* Seize and stop every thread of pid, until a listing after every thread
 * stopped finds no new one (a thread may start another before it stops).
 * Returns 0, or an exit code after one line (nothing held). */
int pt_seize_all(int pid, pt_thr_t *th, size_t *nth, uint64_t *t_first, uint64_t deadline)
{
	int code = 0;
	bool added = true;
	for (int round = 0; code == 0 && added && round < 16; round++) {
		code = seize_new(pid, th, nth, t_first, &added);
		if (code == 0 && added)
			pt_wait_stopped(th, *nth, deadline);
	}
	return code;
}

/* Let every held thread go, with the signal each had pending. */
void pt_release_all(pt_thr_t *th, size_t nth)
{
	for (size_t i = 0; i < nth; i++) {
		if (th[i].seized && !th[i].gone)
			ptrace(PTRACE_DETACH, th[i].tid, 0, (void *)(intptr_t)th[i].deliver);
		th[i].seized = th[i].stopped = false;
	}
}
