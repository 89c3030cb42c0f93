/*
 * heapctl/diagnose/seccomp.c - would a process's seccomp filter let `heapctl inject`
 * load the agent and the agent run?
 *
 * Containers run under a filter by default (podman's and Docker's
 * profiles), and systemd units often do.  Refusing every one of them
 * refuses nearly every container, yet podman's default profile allows all
 * the agent needs (Docker's answers clone3 with ENOSYS, and glibc falls
 * back to clone); a strict one can kill the process for one call.  So the
 * filter itself is read and run:
 *
 *   - PTRACE_SECCOMP_GET_FILTER hands a tracer the classic BPF program of
 *     each filter stacked on a thread (CAP_SYS_ADMIN, a tracer under no
 *     filter of its own, a tracee in a ptrace stop).  The main thread is
 *     seized and interrupted for the moment that takes, then detached: the
 *     calls of inject run on it, and the agent's control thread, which it
 *     starts, inherits its filters.  Threads whose Seccomp_filters count
 *     differs from it could run under another filter: not judged.
 *   - every filter is run (cli_bpf_run, the instruction subset seccomp
 *     accepts) over the seccomp_data of each row of calls[] below, with
 *     the architecture and number of this machine and the arguments the
 *     agent passes where a filter may look at them (clone's flags, mmap's
 *     protection, openat's flags...); the kernel's rule picks the result
 *     across stacked filters (the lowest action value wins).
 *   - ALLOW and LOG pass.  An error (ERRNO, or TRACE with no tracer, which
 *     fails with ENOSYS) passes only for the calls whose failure the agent
 *     and glibc cope with (need: TOLERATED; clone3 only with ENOSYS, the one
 *     errno glibc falls back to clone on).  KILL, TRAP (SIGSYS), a user
 *     notification (a supervisor decides) or an unknown action refuse.
 *
 * calls[] was taken from strace of a process that loads the agent and arms
 * it as inject does (its remote calls make no system call of their own,
 * but the interrupted call restarts), then allocates (samples, libunwind's
 * load and checks) and serves `heapctl dump`, `off` and `eject`: glibc
 * 2.36's dlopen, the agent's arming, the control thread (its start, sweep
 * of leftover segments, statm polls, dumps) and its exit.
 * tests/ptrace/inject_seccomp.bats does that again and fails on a call the
 * table lacks.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "diagnose/seccomp.h"

#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000U
#endif
#ifndef SECCOMP_RET_USER_NOTIF
#define SECCOMP_RET_USER_NOTIF 0x7fc00000U
#endif
#ifndef SECCOMP_RET_LOG
#define SECCOMP_RET_LOG 0x7ffc0000U
#endif
#ifndef SECCOMP_RET_ACTION_FULL
#define SECCOMP_RET_ACTION_FULL 0xffff0000U
#endif
#define MAX_FILTERS 64

enum { REQUIRED, TOLERATED, ENOSYS_ONLY };

typedef struct sc_call_s {
	const char *name;
	int nr;
	int need;
	const char *by; /* who makes it, when                         */
	uint64_t arg[6];
} sc_call_t;

#if defined(__x86_64__)
#define ARCH   AUDIT_ARCH_X86_64
#define P      0x7f0000001000ull /* a pointer argument                     */
#define FD     3ull
#define CWD    ((uint64_t)(int64_t)AT_FDCWD)
#define RO     (O_RDONLY | O_CLOEXEC)
#define NEW    (O_CREAT | O_EXCL | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
#define SETTID (CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)
/* glibc's pthread_create (clone_internal): clone3, and clone on ENOSYS */
#define THREAD \
	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS | SETTID)
static const char LOAD[] = "dlopen, loading the agent", ARM[] = "the agent's start",
                  CTL[] = "the agent's control thread", DUMP[] = "a dump", END[] = "eject and the thread's exit",
                  SAMPLE[] = "sampling in the program's threads";

static const sc_call_t calls[] = {
	/* a system call the stopped thread was in restarts after the calls */
	{ "restart_syscall", SYS_restart_syscall, REQUIRED, "the interrupted call's restart", { 0 } },
	{ "openat", SYS_openat, REQUIRED, LOAD, { CWD, P, RO } },
	{ "read", SYS_read, REQUIRED, LOAD, { FD, P, 832 } },
	{ "newfstatat", SYS_newfstatat, REQUIRED, LOAD, { FD, P, P, AT_EMPTY_PATH } },
	{ "mmap", SYS_mmap, REQUIRED, LOAD, { 0, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_DENYWRITE, FD, 0 } },
	{ "mmap", SYS_mmap, REQUIRED, LOAD,
	    { P, 1 << 16, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED | MAP_DENYWRITE, FD, 1 << 14 } },
	{ "mmap", SYS_mmap, REQUIRED, LOAD,
	    { P, 1 << 14, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_DENYWRITE, FD, 1 << 16 } },
	{ "mmap", SYS_mmap, REQUIRED, LOAD,
	    { P, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, (uint64_t)-1, 0 } },
	{ "close", SYS_close, REQUIRED, LOAD, { FD } },
	{ "mprotect", SYS_mprotect, REQUIRED, LOAD, { P, 8192, PROT_READ } },
	{ "mprotect", SYS_mprotect, REQUIRED, LOAD, { P, 4096, PROT_READ | PROT_WRITE } },
	{ "brk", SYS_brk, REQUIRED, LOAD, { P } },
	/* malloc's tcache key: glibc falls back to another source */
	{ "getrandom", SYS_getrandom, TOLERATED, LOAD, { P, 8, GRND_NONBLOCK } },
	{ "getpid", SYS_getpid, REQUIRED, ARM, { 0 } },
	{ "getuid", SYS_getuid, REQUIRED, ARM, { 0 } },
	{ "openat", SYS_openat, REQUIRED, ARM, { CWD, P, O_RDONLY | O_NONBLOCK | O_CLOEXEC } },
	{ "newfstatat", SYS_newfstatat, REQUIRED, ARM, { CWD, P, P, 0 } },
	{ "openat", SYS_openat, REQUIRED, ARM, { CWD, P, RO | O_DIRECTORY } },
	{ "openat", SYS_openat, REQUIRED, ARM, { FD, P, O_RDWR | NEW, 0600 } },
	{ "fchmod", SYS_fchmod, REQUIRED, ARM, { FD + 1, 0600 } },
	{ "ftruncate", SYS_ftruncate, REQUIRED, ARM, { FD + 1, 226048 } },
	{ "mmap", SYS_mmap, REQUIRED, ARM, { 0, 226048, PROT_READ | PROT_WRITE, MAP_SHARED, FD + 1, 0 } },
	{ "futex", SYS_futex, REQUIRED, ARM, { P, FUTEX_WAKE, INT32_MAX } },
	{ "futex", SYS_futex, REQUIRED, ARM, { P, FUTEX_WAKE_PRIVATE, 1 } },
	{ "rt_sigprocmask", SYS_rt_sigprocmask, REQUIRED, ARM, { SIG_SETMASK, P, P, 8 } },
	{ "rt_sigprocmask", SYS_rt_sigprocmask, REQUIRED, ARM, { SIG_BLOCK, P, P, 8 } },
	{ "rt_sigprocmask", SYS_rt_sigprocmask, REQUIRED, ARM, { SIG_UNBLOCK, P, 0, 8 } },
	{ "rt_sigaction", SYS_rt_sigaction, REQUIRED, ARM, { 33, P, 0, 8 } },
	{ "mmap", SYS_mmap, REQUIRED, ARM,
	    { 0, 266240, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, (uint64_t)-1, 0 } },
	{ "clone3", SYS_clone3, ENOSYS_ONLY, ARM, { P, 88 } },
	{ "clone", SYS_clone, REQUIRED, ARM, { THREAD, P, P, P, P } },
	/* the new thread: glibc registers these and goes on without them */
	{ "rseq", SYS_rseq, TOLERATED, CTL, { P, 0x20, 0, 0x53053053 } },
	{ "set_robust_list", SYS_set_robust_list, TOLERATED, CTL, { P, 24 } },
	{ "prctl", SYS_prctl, TOLERATED, CTL, { PR_SET_NAME, P } },
	/* its own descriptor table, and a pidfd and copies of it at 0 to 2:
	 * refused, it works in the program's (agent/control.c).  Its messages
	 * borrow the program's standard error with pidfd_getfd only where
	 * /proc/self/status shows no filter: not a call to judge here. */
	{ "close_range", SYS_close_range, TOLERATED, CTL, { 0, UINT32_MAX, CLOSE_RANGE_UNSHARE } },
	{ "pidfd_open", SYS_pidfd_open, TOLERATED, CTL, { 1000, 0 } },
	{ "dup2", SYS_dup2, TOLERATED, CTL, { 0, 1 } },
	{ "futex", SYS_futex, REQUIRED, CTL, { P, FUTEX_WAIT, 0, P } },
	{ "futex", SYS_futex, REQUIRED, CTL, { P, FUTEX_WAIT_PRIVATE, 0, P } },
	{ "getdents64", SYS_getdents64, REQUIRED, CTL, { FD, P, 4096 } },
	/* kill(pid, 0) finds the segments of processes that are gone */
	{ "kill", SYS_kill, TOLERATED, CTL, { 1, 0 } },
	{ "pread64", SYS_pread64, REQUIRED, CTL, { FD + 1, P, 192, 0 } },
	{ "geteuid", SYS_geteuid, REQUIRED, CTL, { 0 } },
	/* a sleeping process's stale segment (its pid reused) is replaced;
	 * the control thread removes stale segments and temporary dumps */
	{ "unlinkat", SYS_unlinkat, REQUIRED, CTL, { FD, P, 0 } },
	/* a sample's record names its thread; libunwind is loaded at the first
	 * one (openat, mmap above) and checks addresses with msync and a pipe
	 * (unwind.c keeps it from mincore): without them stacks end early */
	{ "gettid", SYS_gettid, REQUIRED, SAMPLE, { 0 } },
	{ "pipe2", SYS_pipe2, REQUIRED, SAMPLE, { P, O_NONBLOCK | O_CLOEXEC } },
	{ "msync", SYS_msync, REQUIRED, SAMPLE, { P, 4096, MS_ASYNC } },
	{ "mmap", SYS_mmap, REQUIRED, DUMP,
	    { 0, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0 } },
	{ "mremap", SYS_mremap, REQUIRED, DUMP, { P, 65536, 131072, MREMAP_MAYMOVE } },
	{ "openat", SYS_openat, REQUIRED, DUMP, { CWD, P, O_WRONLY | NEW, 0644 } },
	{ "write", SYS_write, REQUIRED, DUMP, { FD, P, 4096 } },
	{ "rename", SYS_rename, REQUIRED, DUMP, { P, P } },
	{ "munmap", SYS_munmap, REQUIRED, DUMP, { P, 131072 } },
	{ "unlink", SYS_unlink, REQUIRED, END, { P } },
	{ "madvise", SYS_madvise, TOLERATED, END, { P, 241664, MADV_DONTNEED } },
	{ "exit", SYS_exit, REQUIRED, END, { 0 } },
};
#define NCALLS (sizeof calls / sizeof calls[0])
#else
#define ARCH   0
static const sc_call_t calls[1];
#define NCALLS 0
#endif

/* ---- the interpreter ------------------------------------------------------------------ */

bool cli_bpf_run(const struct sock_filter *f, unsigned n, const struct seccomp_data *d, uint32_t *ret, char *why,
    size_t wlen)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
	const unsigned char *data = (const unsigned char *)d;
	for (unsigned pc = 0; pc < n; pc++) {
		const struct sock_filter *i = &f[pc];
		uint32_t k = i->k, src = BPF_SRC(i->code) == BPF_X ? x : k;
		switch (BPF_CLASS(i->code)) {
		case BPF_LD:
		case BPF_LDX: {
			uint32_t v;
			if (i->code == (BPF_LD | BPF_W | BPF_ABS)) {
				/* seccomp loads aligned 32-bit words of seccomp_data */
				if (k >= sizeof *d || (k & 3)) {
					snprintf(why, wlen, "instruction %u loads offset %u, outside seccomp_data", pc,
					    k);
					return false;
				}
				memcpy(&v, data + k, 4);
			} else if (BPF_MODE(i->code) == BPF_LEN && BPF_SIZE(i->code) == BPF_W) {
				v = sizeof *d;
			} else if (BPF_MODE(i->code) == BPF_IMM) {
				v = k;
			} else if (BPF_MODE(i->code) == BPF_MEM && k < BPF_MEMWORDS) {
				v = mem[k];
			} else {
				snprintf(why, wlen, "instruction %u (code %#x) is no load seccomp allows", pc, i->code);
				return false;
			}
			if (BPF_CLASS(i->code) == BPF_LD)
				a = v;
			else
				x = v;
			break;
		}
		case BPF_ST:
		case BPF_STX:
			if (k >= BPF_MEMWORDS) {
				snprintf(why, wlen, "instruction %u stores to M[%u]", pc, k);
				return false;
			}
			mem[k] = BPF_CLASS(i->code) == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			switch (BPF_OP(i->code)) {
			case BPF_ADD: a += src; break;
			case BPF_SUB: a -= src; break;
			case BPF_MUL: a *= src; break;
			case BPF_DIV:
				if (src == 0) { /* the kernel returns 0: kill */
					*ret = 0;
					return true;
				}
				a /= src;
				break;
			case BPF_OR: a |= src; break;
			case BPF_AND: a &= src; break;
			case BPF_XOR: a ^= src; break;
			case BPF_LSH: a = src >= 32 ? 0 : a << src; break;
			case BPF_RSH: a = src >= 32 ? 0 : a >> src; break;
			case BPF_NEG: a = -a; break;
			default: /* BPF_MOD among them: seccomp refuses it */
				snprintf(why, wlen, "instruction %u (code %#x) is no ALU operation seccomp allows", pc,
				    i->code);
				return false;
			}
			break;
		case BPF_JMP: {
			unsigned to;
			if (BPF_OP(i->code) == BPF_JA) {
				to = pc + 1 + k;
			} else {
				bool t;
				switch (BPF_OP(i->code)) {
				case BPF_JEQ: t = a == src; break;
				case BPF_JGT: t = a > src; break;
				case BPF_JGE: t = a >= src; break;
				case BPF_JSET: t = (a & src) != 0; break;
				default:
					snprintf(why, wlen, "instruction %u (code %#x) is no jump", pc, i->code);
					return false;
				}
				to = pc + 1 + (t ? i->jt : i->jf);
			}
			if (to >= n) {
				snprintf(why, wlen, "instruction %u jumps out of the program", pc);
				return false;
			}
			pc = to - 1;
			break;
		}
		case BPF_RET:
			if (BPF_RVAL(i->code) == BPF_X) {
				snprintf(why, wlen, "instruction %u returns X, which seccomp refuses", pc);
				return false;
			}
			*ret = BPF_RVAL(i->code) == BPF_A ? a : k;
			return true;
		case BPF_MISC:
			if (BPF_MISCOP(i->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		default:
			snprintf(why, wlen, "instruction %u (code %#x) is of no class seccomp allows", pc, i->code);
			return false;
		}
	}
	snprintf(why, wlen, "the program ends without a return");
	return false;
}

/* ---- reading the filters -------------------------------------------------------------- */

typedef struct filters_s {
	struct sock_filter *prog[MAX_FILTERS];
	unsigned len[MAX_FILTERS];
	int n;
} filters_t;

/* Waits (at most 1 s) for the seized tid's stop; its signal, if the stop
 * was a signal's, in *sig (to be delivered at the detach). */
static bool wait_stop(int tid, int *sig)
{
	*sig = 0;
	for (int i = 0; i < 10000; i++) {
		int st;
		pid_t w = waitpid(tid, &st, __WALL | WNOHANG);
		if (w == tid && WIFSTOPPED(st)) {
			if ((st >> 16) == 0 && WSTOPSIG(st) != SIGTRAP)
				*sig = WSTOPSIG(st);
			return true;
		}
		if (w == tid || (w < 0 && errno != EINTR))
			return false;
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	return false;
}

static bool read_filters(int pid, filters_t *fl, char *why, size_t wlen)
{
	if (ptrace(PTRACE_SEIZE, pid, 0, 0) != 0) {
		snprintf(why, wlen, "it cannot be traced to read it (ptrace: %s%s)", strerror(errno),
		    errno == EPERM ? ": traced already, or ptrace_scope" : "");
		return false;
	}
	int sig = 0;
	bool ok = false;
	if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) != 0 || !wait_stop(pid, &sig)) {
		snprintf(why, wlen, "its main thread did not stop to have it read");
		goto out;
	}
	for (fl->n = 0; fl->n < MAX_FILTERS; fl->n++) {
		long len = ptrace(PTRACE_SECCOMP_GET_FILTER, pid, (void *)(long)fl->n, NULL);
		if (len < 0 && errno == ENOENT)
			break;
		if (len <= 0 || len > BPF_MAXINSNS) {
			if (errno == EACCES)
				snprintf(why, wlen,
				    "reading it needs CAP_SYS_ADMIN, and heapctl under no seccomp "
				    "filter of its own");
			else if (errno == EMEDIUMTYPE)
				snprintf(why, wlen, "filter %d is not classic BPF", fl->n);
			else
				snprintf(why, wlen, "PTRACE_SECCOMP_GET_FILTER: %s%s", strerror(errno),
				    errno == EINVAL || errno == EIO ? " (a kernel without CONFIG_CHECKPOINT_RESTORE?)"
				                                    : "");
			goto out;
		}
		fl->prog[fl->n] = calloc((size_t)len, sizeof *fl->prog[0]);
		if (fl->prog[fl->n] == NULL) {
			snprintf(why, wlen, "out of memory");
			goto out;
		}
		fl->len[fl->n] = (unsigned)len;
		if (ptrace(PTRACE_SECCOMP_GET_FILTER, pid, (void *)(long)fl->n, fl->prog[fl->n]) != len) {
			fl->n++;
			snprintf(why, wlen, "PTRACE_SECCOMP_GET_FILTER: %s", strerror(errno));
			goto out;
		}
	}
	ok = fl->n > 0;
	if (!ok)
		snprintf(why, wlen, "the kernel handed over no filter");
out:
	ptrace(PTRACE_DETACH, pid, 0, (void *)(long)sig);
	return ok;
}

/* The filter count of every thread, as the main thread's; false if one
 * differs (it could run under another filter). */
static bool threads_alike(int pid, int filters, int *odd)
{
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/task", pid);
	DIR *dp = opendir(dir);
	if (dp == NULL)
		return true;
	bool same = true;
	for (struct dirent *e; same && (e = readdir(dp)) != NULL;) {
		int tid = atoi(e->d_name);
		char v[32];
		if (tid <= 0 || tid == pid)
			continue;
		if (cli_proc_status_field(tid, "Seccomp_filters", v, sizeof v) && atoi(v) != filters) {
			same = false;
			*odd = tid;
		}
	}
	closedir(dp);
	return same;
}

/* ---- the verdict ---------------------------------------------------------------------- */

/* What the filter's answer ret does to call, as "would ..." */
static void describe(uint32_t ret, const char *call, char *out, size_t len)
{
	uint32_t act = ret & SECCOMP_RET_ACTION_FULL;
	const char *e = strerrorname_np((int)(ret & SECCOMP_RET_DATA));
	switch (act) {
	case SECCOMP_RET_KILL_PROCESS: snprintf(out, len, "would kill the process at %s (KILL_PROCESS)", call); break;
	case SECCOMP_RET_KILL_THREAD: snprintf(out, len, "would kill the thread at %s (KILL_THREAD)", call); break;
	case SECCOMP_RET_TRAP: snprintf(out, len, "would send SIGSYS at %s (TRAP)", call); break;
	case SECCOMP_RET_ERRNO: snprintf(out, len, "would fail %s with %s", call, e ? e : "an unknown errno"); break;
	case SECCOMP_RET_USER_NOTIF: snprintf(out, len, "leaves %s to a supervisor process (USER_NOTIF)", call); break;
	case SECCOMP_RET_TRACE: snprintf(out, len, "would fail %s with ENOSYS (TRACE, no tracer)", call); break;
	default: snprintf(out, len, "answers %s with an unknown action %#x, which kills the process", call, act); break;
	}
}

void cli_seccomp_check(int pid, cli_seccomp_t *s)
{
	memset(s, 0, sizeof *s);
	char v[32];
	if (!cli_proc_status_field(pid, "Seccomp", v, sizeof v) || atoi(v) == 0) {
		s->verdict = CLI_SC_NONE;
		return;
	}
	s->verdict = CLI_SC_UNKNOWN;
	if (atoi(v) == 1) {
		snprintf(s->why, sizeof s->why,
		    "it runs in seccomp strict mode (read, write, exit and sigreturn "
		    "only)");
		return;
	}
	s->filters = cli_proc_status_field(pid, "Seccomp_filters", v, sizeof v) ? atoi(v) : -1;
	if (NCALLS == 0) {
		snprintf(s->why, sizeof s->why, "heapctl judges filters on x86-64 only");
		return;
	}
	int odd = 0;
	if (s->filters > 0 && !threads_alike(pid, s->filters, &odd)) {
		snprintf(s->why, sizeof s->why,
		    "its threads run under different filters (thread %d has "
		    "other than %d)",
		    odd, s->filters);
		return;
	}
	filters_t fl = { .n = 0 };
	if (!read_filters(pid, &fl, s->why, sizeof s->why))
		goto out;
	for (int f = 0; f < fl.n; f++)
		s->insns += fl.len[f];
	s->filters = fl.n;
	size_t tl = 0;
	for (size_t c = 0; c < NCALLS; c++) {
		struct seccomp_data d = { .nr = calls[c].nr, .arch = ARCH };
		memcpy(d.args, calls[c].arg, sizeof d.args);
		/* the kernel's rule across stacked filters: the lowest action
		 * (as a signed value) wins, the first filter's among equals */
		uint32_t ret = SECCOMP_RET_ALLOW;
		for (int f = 0; f < fl.n; f++) {
			uint32_t r;
			char why[160];
			if (!cli_bpf_run(fl.prog[f], fl.len[f], &d, &r, why, sizeof why)) {
				snprintf(s->why, sizeof s->why, "filter %d cannot be run: %s", f, why);
				goto out;
			}
			if ((int32_t)(r & SECCOMP_RET_ACTION_FULL) < (int32_t)(ret & SECCOMP_RET_ACTION_FULL))
				ret = r;
		}
		uint32_t act = ret & SECCOMP_RET_ACTION_FULL;
		if (act == SECCOMP_RET_ALLOW || act == SECCOMP_RET_LOG)
			continue;
		/* TRACE without a tracer (none after inject detaches) is ENOSYS */
		int err = act == SECCOMP_RET_ERRNO ? (int)(ret & SECCOMP_RET_DATA)
		    : act == SECCOMP_RET_TRACE     ? ENOSYS
		                                   : -1;
		bool ok = err >= 0 && (calls[c].need == TOLERATED || (calls[c].need == ENOSYS_ONLY && err == ENOSYS));
		if (ok) {
			if (!strstr(s->tolerated, calls[c].name) && tl < sizeof s->tolerated)
				tl += (size_t)snprintf(s->tolerated + tl, sizeof s->tolerated - tl, "%s%s (%s)",
				    tl ? ", " : "", calls[c].name, strerrorname_np(err) ? strerrorname_np(err) : "?");
			continue;
		}
		s->verdict = CLI_SC_REFUSED;
		s->call = calls[c].name;
		s->by = calls[c].by;
		describe(ret, calls[c].name, s->what, sizeof s->what);
		goto out;
	}
	s->verdict = CLI_SC_OK;
out:
	for (int f = 0; f < fl.n; f++)
		free(fl.prog[f]);
}

void cli_seccomp_fix(const cli_seccomp_t *s, char *out, size_t len)
{
	if (s->verdict == CLI_SC_REFUSED)
		snprintf(out, len,
		    "run it under a seccomp profile that allows %s (podman, docker: --security-opt "
		    "seccomp=PROFILE.json with it added, or seccomp=unconfined; systemd: add it to "
		    "SystemCallFilter=)",
		    s->call);
	else
		snprintf(out, len,
		    "run heapctl as root on the host (CAP_SYS_ADMIN, outside any filter) to have "
		    "the filter read, or run the process without one (podman, docker: --security-opt "
		    "seccomp=unconfined)");
}
