/*
 * heapctl/ptrace/inject.c - `heapctl inject PID`: the profiler in a process
 * that was started without it.
 *
 * The process keeps its own malloc.  libheapctl-agent.so (agent/inject/) is
 * loaded into it by a call of its own dlopen, made with ptrace, and armed by
 * a second call (heapctl_inject_arm), which points the malloc family of
 * every loaded object at the agent's wrappers and publishes the control
 * segment: from then on the process is like one started with the library,
 * for every command.  `heapctl eject PID` (cmd_ctl.c) undoes the wrapping.
 *
 * Safety first:
 *   - Every thread is seized and stopped (seize.c), and unwound.  The
 *     calls are made only when no thread is inside the dynamic loader, the
 *     process's allocator (glibc's malloc family and its fork, dlopen and
 *     thread functions, or all of jemalloc, tcmalloc and mimalloc) or a
 *     signal handler: such a thread may hold a lock the calls take, and a
 *     held thread never lets go of it.  A thread at such a place runs on a
 *     moment while the others stay held, until all are at safe places at
 *     once.  Threads that allocate without pause rarely give that moment:
 *     after STRICT_NS one thread at a safe place makes the calls while the
 *     others run (a lock they hold is let go as they run; the agent is
 *     safe across their forks), and if none is, every thread is let go for
 *     20 ms and held afresh, up to --timeout.
 *   - The calls run on one thread (the main thread if it can), with every
 *     signal blocked, on its own stack below the red zone, returning to
 *     address 0: the fault that follows is the end of the call.  All its
 *     registers (the extended state too) and its signal mask are put back,
 *     and a system call it was in restarts as it would have.
 *   - Every thread is detached whatever happens; if heapctl dies, the
 *     kernel detaches them.
 *   - Refused, with the reason and a way out: a statically linked program,
 *     a libc other than glibc, a process that runs the library already, a
 *     seccomp filter that refuses a call the agent makes or that cannot be
 *     read to tell (seccomp.c: the filter is read and run for each), a
 *     container where the agent's file is not, a chroot without it, /dev/shm
 *     or /proc (its directory and the mounts it lacks named), ptrace_scope or missing
 *     CAP_SYS_PTRACE (seize.c says which).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind-ptrace.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "cli/json.h"
#include "diagnose/seccomp.h"
#include "elf/elf.h"
#include "ptrace/ptrace.h"
#include "report/rp_internal.h"

#define AGENT_LIB "libheapctl-agent.so"
/* how long every thread may be held waiting for all to be at safe places */
#define STRICT_NS 100000000u

__attribute__((visibility("default"))) int hc_inject_main(cli_args_t *a);
__attribute__((visibility("default"))) void hc_inject_help(FILE *f);

enum { I_LG = 256, I_OFF, I_CONF };

static const cli_opt_t inject_opts[] = {
	{ "lg-sample", I_LG, "N", "sample once per 2^N bytes on average (default 19, as jemalloc)" },
	{ "off", I_OFF, NULL, "load it with sampling off: start it later with heapctl on" },
	{ "conf", I_CONF, "CONF", "more settings for the agent, as in MALLOC_CONF (heapctl help conf)" },
	{ 0 },
};

void hc_inject_help(FILE *f)
{
	cli_opts_help(f, inject_opts);
}

/* ---- the process's objects --------------------------------------------- */

typedef struct range_s {
	uint64_t lo, hi;
	const char *what; /* "the dynamic loader", "malloc", ...        */
} range_t;

typedef struct proc_s {
	int pid;
	char root[64];   /* /proc/PID/root                             */
	char libc[4096]; /* its path in the process                    */
	uint64_t libc_base;
	char alloc_lib[4096]; /* jemalloc, tcmalloc or mimalloc, if one     */
	bool musl, preloaded, agent;
	range_t *unsafe;
	size_t nunsafe, capunsafe;
} proc_t;

static void add_unsafe(proc_t *p, uint64_t lo, uint64_t hi, const char *what)
{
	if (p->nunsafe == p->capunsafe) {
		p->capunsafe = p->capunsafe ? 2 * p->capunsafe : 64;
		p->unsafe = realloc(p->unsafe, p->capunsafe * sizeof *p->unsafe);
		if (p->unsafe == NULL)
			abort();
	}
	p->unsafe[p->nunsafe++] = (range_t){ lo, hi, what };
}

/* The load base of the object at path in the process (its mapping at file
 * offset 0), or 0. */
typedef struct base_of_s {
	const char *path;
	uint64_t base;
} base_of_t;

static bool find_base(const el_map_t *m, void *arg)
{
	base_of_t *b = arg;
	if (m->offset == 0 && strcmp(m->path, b->path) == 0)
		b->base = m->lo;
	return b->base == 0;
}

static uint64_t object_base(int pid, const char *path)
{
	base_of_t b = { path, 0 };
	el_maps_each(pid, find_base, &b);
	return b.base;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t a = strlen(s), b = strlen(tail);
	return a >= b && strcmp(s + a - b, tail) == 0;
}

static bool is_libc(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return strcmp(b, "libc.so.6") == 0 || (strncmp(b, "libc-2.", 7) == 0 && ends_with(b, ".so"));
}

/* The process's objects: libc, the loader (unsafe), another allocator
 * (unsafe, whole), the library or the agent if there.  Returns 0 or an exit
 * code after one line. */
static bool add_object(const el_map_t *m, void *arg)
{
	proc_t *p = arg;
	const char *path = m->path;
	if (path[0] != '/')
		return true;
	const char *b = strrchr(path, '/') + 1;
	if (strstr(path, "musl")) /* ld-musl-*.so.1, .../x86_64-linux-musl/libc.so */
		p->musl = true;
	if (strncmp(b, "libheapctl-agent.so", 19) == 0) {
		p->agent = true;
		if (m->perms[2] == 'x') /* a thread in it may hold its locks */
			add_unsafe(p, m->lo, m->hi, "the agent (of an earlier inject)");
	} else if (cli_is_library(path)) {
		p->preloaded = true;
	}
	if (is_libc(path) && p->libc[0] == 0 && m->offset == 0) {
		snprintf(p->libc, sizeof p->libc, "%s", path);
		p->libc_base = m->lo;
	}
	if (m->perms[2] != 'x')
		return true;
	if (strncmp(b, "ld-linux", 8) == 0)
		add_unsafe(p, m->lo, m->hi, "the dynamic loader");
	else if (strstr(b, "jemalloc") || strstr(b, "tcmalloc") || strstr(b, "mimalloc")) {
		add_unsafe(p, m->lo, m->hi, "its allocator");
		if (p->alloc_lib[0] == 0)
			snprintf(p->alloc_lib, sizeof p->alloc_lib, "%s", b);
	}
	return true;
}

static int read_objects(proc_t *p)
{
	if (el_maps_each(p->pid, add_object, p) == 0)
		return 0;
	return errno == ENOENT ? cli_err(HC_EXIT_NOPROC, "no process %d", p->pid)
	                       : cli_err(HC_EXIT_PERM,
	                             "cannot inject into process %d: %s reading its maps; run heapctl as its "
	                             "user or as root (CAP_SYS_PTRACE)",
	                             p->pid, strerror(errno));
}

/* Symbols of the ELF file at path (pid > 0: a file that process maps, as
 * its maps show it; else one of this side): for each name, its value and
 * size from .dynsym; 0 where absent.  False if the file cannot be read. */
static bool elf_symbols(int pid, const char *path, const char *const *names, size_t n, uint64_t *value, uint64_t *size)
{
	char full[4200];
	if (pid > 0)
		cli_proc_object_path(pid, path, full, sizeof full);
	else
		snprintf(full, sizeof full, "%s", path);
	el_file_t f;
	if (!el_file_map(full, &f))
		return false;
	bool ok = el_symbols(f.p, f.size, SHT_DYNSYM, names, n, value, size);
	el_file_unmap(&f);
	return ok;
}

/* glibc's functions that hold a lock the calls take (the allocator's, the
 * loader's, the thread stacks'), or that are on the way out. */
static const char *const glibc_unsafe[] = { "malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc",
	"memalign", "valloc", "pvalloc", "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc",
	"__libc_memalign", "__libc_valloc", "__libc_pvalloc", "malloc_trim", "malloc_usable_size", "mallinfo",
	"mallinfo2", "malloc_stats", "malloc_info", "mallopt",
#define NMALLOC 23 /* the names above: malloc.c's */
	"reallocarray", "fork", "_Fork", "__libc_fork", "dlopen", "dlclose", "dlsym", "dlvsym", "dladdr", "dladdr1",
	"dlinfo", "dlmopen", "dl_iterate_phdr", "__libc_dlopen_mode", "__libc_dlsym", "__libc_dlclose",
	"pthread_create", "pthread_exit", "pthread_join", "pthread_detach", "exit", "_exit", "backtrace" };
#define NUNSAFE (sizeof glibc_unsafe / sizeof glibc_unsafe[0])

/* ---- the remote call ---------------------------------------------------- */

typedef struct call_s {
	int tid, mem; /* the thread; /proc/PID/mem                  */
	struct user_regs_struct regs;
	unsigned char xstate[16384];
	size_t xlen;
	uint64_t sigmask;
	int pending;      /* a signal that came during a call           */
	uint64_t scratch; /* strings, below the red zone                */
} call_t;

static bool put_mem(call_t *c, uint64_t at, const void *buf, size_t n)
{
	return pwrite(c->mem, buf, n, (off_t)at) == (ssize_t)n;
}

static bool save_thread(call_t *c)
{
	struct iovec iov = { c->xstate, sizeof c->xstate };
	if (ptrace(PTRACE_GETREGS, c->tid, 0, &c->regs) != 0)
		return false;
	if (ptrace(PTRACE_GETREGSET, c->tid, (void *)NT_X86_XSTATE, &iov) == 0)
		c->xlen = iov.iov_len;
	if (ptrace(PTRACE_GETSIGMASK, c->tid, (void *)sizeof c->sigmask, &c->sigmask) != 0)
		return false;
	uint64_t all = ~0ull;
	if (ptrace(PTRACE_SETSIGMASK, c->tid, (void *)sizeof all, &all) != 0)
		return false;
	/* 128 bytes of red zone, then 4 KiB of strings */
	c->scratch = ((c->regs.rsp - 128 - 4096) & ~15ull);
	return true;
}

static void restore_thread(call_t *c)
{
	ptrace(PTRACE_SETREGS, c->tid, 0, &c->regs);
	if (c->xlen) {
		struct iovec iov = { c->xstate, c->xlen };
		ptrace(PTRACE_SETREGSET, c->tid, (void *)NT_X86_XSTATE, &iov);
	}
	ptrace(PTRACE_SETSIGMASK, c->tid, (void *)sizeof c->sigmask, &c->sigmask);
}

/* Called once when a call has not returned in its time: the threads held
 * besides the caller are let go (one of them may hold what it waits for),
 * and it gets as long again. */
static void (*call_slow)(void *arg);
static void *call_slow_arg;

/* fn(a0, a1) in the thread; its result in *ret.  Returns 0, or an errno
 * (ETIMEDOUT: still running at the deadline; EFAULT: it faulted; ESRCH:
 * the process is gone) with why filled in. */
static int remote_call(call_t *c, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t deadline, uint64_t *ret, char *why,
    size_t wlen)
{
	struct user_regs_struct r = c->regs;
	uint64_t sp = c->scratch - 8; /* 16-aligned minus the return address */
	uint64_t zero = 0;
	if (!put_mem(c, sp, &zero, sizeof zero)) {
		snprintf(why, wlen, "cannot write to its stack: %s", strerror(errno));
		return EIO;
	}
	r.rsp = sp;
	r.rip = fn;
	r.rdi = a0;
	r.rsi = a1;
	r.rax = 0;
	r.orig_rax = (uint64_t)-1; /* no system call to restart in the call */
	r.eflags &= ~0x400ull;     /* the direction flag clear, as the ABI says */
	if (ptrace(PTRACE_SETREGS, c->tid, 0, &r) != 0 || ptrace(PTRACE_CONT, c->tid, 0, 0) != 0) {
		snprintf(why, wlen, "cannot start the call: %s", strerror(errno));
		return EIO;
	}
	for (;;) {
		int st;
		pid_t w = waitpid(c->tid, &st, __WALL | WNOHANG);
		if (w == c->tid && WIFSTOPPED(st)) {
			int sig = WSTOPSIG(st);
			if (sig == SIGSEGV && (st >> 16) == 0) {
				struct user_regs_struct now;
				ptrace(PTRACE_GETREGS, c->tid, 0, &now);
				if (now.rip == 0) {
					*ret = now.rax;
					return 0;
				}
				snprintf(why, wlen, "the call faulted at %#llx", (unsigned long long)now.rip);
				return EFAULT;
			}
			/* a stop of the group, or a signal every block lets through:
			 * held for the detach, and the call goes on */
			if ((st >> 16) == 0 && sig != SIGSTOP && sig != SIGTRAP)
				c->pending = sig;
			ptrace(PTRACE_CONT, c->tid, 0, 0);
			continue;
		}
		if (w == c->tid || (w < 0 && errno == ECHILD)) {
			snprintf(why, wlen, "the process ended during the call");
			return ESRCH;
		}
		if (pt_now_ns() >= deadline && call_slow != NULL) {
			call_slow(call_slow_arg);
			call_slow = NULL;
			deadline = pt_now_ns() + 20000000000u;
		} else if (pt_now_ns() >= deadline) {
			snprintf(why, wlen, "the call did not return in time");
			return ETIMEDOUT;
		}
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
}

/* A string of the process, at addr. */
static void get_string(call_t *c, uint64_t addr, char *out, size_t len)
{
	ssize_t n = addr ? pread(c->mem, out, len - 1, (off_t)addr) : -1;
	out[n > 0 ? n : 0] = 0;
	out[strcspn(out, "\n")] = 0;
}

/* ---- the checks --------------------------------------------------------- */

/* Why tid is not at a safe point, or NULL. */
static const char *unsafe_at(const proc_t *p, const pt_thr_t *t)
{
	if (!t->stopped)
		return t->why ? t->why : "it did not stop";
	if (t->signal_frame)
		return "it is in a signal handler";
	for (int i = 0; i < t->n; i++)
		for (size_t k = 0; k < p->nunsafe; k++)
			if (t->ip[i] - (t->exact[i] ? 0 : 1) >= p->unsafe[k].lo &&
			    t->ip[i] - (t->exact[i] ? 0 : 1) < p->unsafe[k].hi)
				return p->unsafe[k].what;
	return NULL;
}

static int refuse_before(proc_t *p)
{
	int pid = p->pid;
	if (p->preloaded && !p->agent)
		return cli_err(HC_EXIT_FAILED, "process %d runs libheapctl.so already: heapctl on %d, heapctl dump %d",
		    pid, pid, pid);
	if (p->musl)
		return cli_err(HC_EXIT_FAILED,
		    "process %d uses musl libc: heapctl inject needs glibc; use heapctl trace "
		    "%d --malloc (eBPF)",
		    pid, pid);
	if (p->libc[0] == 0) {
		char exe[64], path[4096];
		snprintf(exe, sizeof exe, "/proc/%d/exe", pid);
		ssize_t n = readlink(exe, path, sizeof path - 1);
		path[n > 0 ? n : 0] = 0;
		return cli_err(HC_EXIT_FAILED,
		    "process %d (%s) is statically linked: nothing can be loaded into it; use "
		    "heapctl trace %d --malloc or --faults (eBPF)",
		    pid, path, pid);
	}
	char v[64];
	if (cli_proc_status_field(pid, "State", v, sizeof v) && v[0] == 'T')
		return cli_err(HC_EXIT_FAILED,
		    "process %d is stopped (SIGSTOP): its control thread could not answer; "
		    "continue it first (kill -CONT %d)",
		    pid, pid);
	/* the filter is read and run for every call the agent makes; one
	 * that cannot be read could kill the process for one of them */
	cli_seccomp_t sc;
	cli_seccomp_check(pid, &sc);
	char fix[512];
	cli_seccomp_fix(&sc, fix, sizeof fix);
	if (sc.verdict == CLI_SC_REFUSED)
		return cli_err(HC_EXIT_FAILED,
		    "process %d runs under a seccomp filter that %s, which %s makes: %s, "
		    "or start it with the library (LD_PRELOAD), or use heapctl trace %d --malloc",
		    pid, sc.what, sc.by, fix, pid);
	if (sc.verdict == CLI_SC_UNKNOWN)
		return cli_err(HC_EXIT_FAILED,
		    "process %d runs under a seccomp filter, which could kill it for a call "
		    "the agent makes, and which heapctl could not check: %s; %s, or start it with the library "
		    "(LD_PRELOAD), or use heapctl trace %d --malloc",
		    pid, sc.why, fix, pid);
	return 0;
}

/* The agent's file, and the same file as the process sees it: a process
 * opens it from its own root, which differs from heapctl's in a container
 * (another mount namespace) or a chroot (the same one, another root
 * directory).  The two are told apart because their ways out differ: a
 * chroot's directory is on this side, and what is mounted into it here is
 * seen there.  A chroot also needs a /dev/shm for the segment and a /proc:
 * the agent reads /proc/self to publish it, and without one it is loaded
 * and publishes nothing. */
static int agent_path(proc_t *p, char *path, size_t len)
{
	if (cli_find_installed(AGENT_LIB, path, len, false) != 0)
		return HC_EXIT_FAILED;
	char there[4200], shm[128], proc[128];
	snprintf(there, sizeof there, "%s%s", p->root, path);
	snprintf(shm, sizeof shm, "%s/dev/shm/.", p->root);
	snprintf(proc, sizeof proc, "%s/proc/self/stat", p->root);
	bool agent = cli_same_file(path, there);
	char jail[4096];
	ssize_t n = readlink(p->root, jail, sizeof jail - 1);
	jail[n > 0 ? n : 0] = 0;
	if (cli_proc_same_mntns(p->pid) != 1 || n <= 0 || strcmp(jail, "/") == 0) {
		if (agent)
			return 0;
		return cli_err(HC_EXIT_FAILED,
		    "process %d runs in another mount namespace (a container) where %s is "
		    "not: put it there at the same path, or use heapctl trace %d --malloc",
		    p->pid, path, p->pid);
	}
	bool has_shm = access(shm, W_OK) == 0, has_proc = access(proc, R_OK) == 0;
	if (agent && has_shm && has_proc)
		return 0;
	char dir[4096], what[4200] = "", how[16384] = "";
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir)
		*slash = 0;
	size_t w = 0, h = 0;
	if (!agent) {
		w += (size_t)snprintf(what + w, sizeof what - w, "%s", path);
		h += (size_t)snprintf(how + h, sizeof how - h, "mount --bind %s %s%s", dir, jail, dir);
	}
	if (!has_shm) {
		w += (size_t)snprintf(what + w, sizeof what - w, "%s/dev/shm", w ? ", " : "");
		h += (size_t)snprintf(how + h, sizeof how - h, "%smount --bind /dev/shm %s/dev/shm", h ? "; " : "",
		    jail);
	}
	if (!has_proc) {
		snprintf(what + w, sizeof what - w, "%s/proc", w ? ", " : "");
		snprintf(how + h, sizeof how - h, "%smount -t proc proc %s/proc", h ? "; " : "", jail);
	}
	return cli_err(HC_EXIT_FAILED,
	    "process %d is in a chroot (its root directory is %s), which has no %s: "
	    "%s, or use heapctl trace %d --malloc",
	    p->pid, jail, what, how, p->pid);
}

/* ---- the command -------------------------------------------------------- */

static int parse_opts(cli_args_t *a, int *lg, bool *off, const char **conf)
{
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "inject", inject_opts, false);
	const char *v;
	char *end;
	for (int id; code == 0 && (id = cli_scan_next(&sc, &v)) != 0;) {
		switch (id) {
		case I_LG:
			errno = 0;
			*lg = (int)strtol(v, &end, 10);
			if (errno || *end || end == v || *lg < 0 || *lg > 62)
				code = cli_err(HC_EXIT_USAGE, "inject: --lg-sample takes 0 to 62, not '%s'", v);
			break;
		case I_OFF: *off = true; break;
		case I_CONF:
			if (strchr(v, '\'') || strlen(v) > 1024)
				code =
				    cli_err(HC_EXIT_USAGE, "inject: --conf takes NAME:VALUE,... (at most 1024 bytes)");
			*conf = v;
			break;
		case CLI_OPERAND:
			/* the PID is the dispatcher's (cli_parse_pid): anything
			 * left is not one */
			code = cli_err(HC_EXIT_USAGE, "inject: unexpected argument '%s'", v);
			break;
		default: code = -id;
		}
	}
	cli_scan_end(&sc);
	if (code)
		return code < 0 ? -code : code;
	if (a->pid <= 0)
		return cli_err(HC_EXIT_USAGE, "inject: say which process: heapctl inject PID");
	if (a->pid == getpid())
		return cli_err(HC_EXIT_USAGE, "inject: process %d is heapctl itself", a->pid);
	return 0;
}

/* Load and arm the agent in the held process.  Returns 0 or an exit code
 * after one line. */
static int load_agent(proc_t *p, call_t *c, const char *agent, const char *conf, uint64_t deadline)
{
	static const char *const libc_fns[] = { "dlopen", "dlerror" };
	uint64_t at[2];
	if (!elf_symbols(p->pid, p->libc, libc_fns, 2, at, NULL) || at[0] == 0)
		return cli_err(HC_EXIT_FAILED,
		    "%s has no dlopen (glibc before 2.34?): heapctl inject needs glibc 2.34 or "
		    "later",
		    p->libc);
	size_t la = strlen(agent) + 1, lc = strlen(conf) + 1;
	if (la + lc > 4096)
		return cli_err(HC_EXIT_USAGE, "inject: the agent's path and the settings are too long");
	uint64_t s_agent = c->scratch, s_conf = c->scratch + la;
	if (!put_mem(c, s_agent, agent, la) || !put_mem(c, s_conf, conf, lc))
		return cli_err(HC_EXIT_FAILED, "cannot write to process %d: %s", p->pid, strerror(errno));
	char why[512];
	uint64_t h = 0;
	int e = remote_call(c, p->libc_base + at[0], s_agent, RTLD_NOW | RTLD_LOCAL, deadline, &h, why, sizeof why);
	if (e != 0)
		return cli_err(HC_EXIT_FAILED, "inject: dlopen in process %d: %s", p->pid, why);
	if (h == 0) {
		uint64_t msg = 0;
		char text[512] = "no reason given";
		if (at[1] && remote_call(c, p->libc_base + at[1], 0, 0, deadline, &msg, why, sizeof why) == 0 && msg)
			get_string(c, msg, text, sizeof text);
		return cli_err(HC_EXIT_FAILED, "inject: process %d could not load %s: %s", p->pid, agent, text);
	}
	/* where it was loaded: glibc's handle is its link_map, whose first
	 * field is the load bias (the maps show the file under another path
	 * in a chroot or another mount namespace); else the maps' line */
	static const char *const arm_fn[] = { "heapctl_inject_arm" };
	uint64_t arm = 0, base = 0;
	if (pread(c->mem, &base, sizeof base, (off_t)h) != (ssize_t)sizeof base || base == 0)
		base = object_base(p->pid, agent);
	if (base == 0 || !elf_symbols(0, agent, arm_fn, 1, &arm, NULL) || arm == 0)
		return cli_err(HC_EXIT_FAILED, "inject: %s is loaded in process %d but its entry was not found", agent,
		    p->pid);
	uint64_t r = 0;
	e = remote_call(c, base + arm, s_conf, 0, deadline, &r, why, sizeof why);
	if (e != 0)
		return cli_err(HC_EXIT_FAILED, "inject: arming the agent in process %d: %s", p->pid, why);
	switch ((int)r) {
	case 0: return 0;
	case 1:
		return cli_err(HC_EXIT_FAILED, "process %d has the agent armed already: heapctl status %d", p->pid,
		    p->pid);
	case 2: return cli_err(HC_EXIT_FAILED, "inject: the agent found no malloc family in process %d", p->pid);
	default:
		return cli_err(HC_EXIT_FAILED,
		    "inject: the agent in process %d could not publish its control "
		    "segment (see the process's stderr)",
		    p->pid);
	}
}

typedef struct release_s {
	pt_thr_t *th;
	size_t nth, keep;
} release_t;

/* Every held thread let go but one. */
static void release_others(void *arg)
{
	release_t *r = arg;
	pt_thr_t keep = r->th[r->keep];
	r->th[r->keep].seized = false;
	pt_release_all(r->th, r->nth);
	r->th[r->keep] = keep;
}

/* What one inject carries from step to step: the process, what goes into
 * it, and the hold on its threads. */
typedef struct inject_s {
	int lg;
	bool off;
	const char *more; /* --conf, checked                            */
	proc_t p;
	char agent[4096]; /* the agent's file, on this side             */
	char conf[1200];  /* what heapctl_inject_arm is given           */
	pt_thr_t *th;
	size_t nth;
	unw_addr_space_t as;
	bool *safe;        /* per thread: held at a safe place          */
	uint64_t *last_pc; /* per thread: where it was the last round   */
	unsigned *stuck;   /* per thread: rounds it got nowhere         */
	uint64_t t_start, deadline, strict_until;
	uint64_t t0; /* the first interrupt; 0: none held          */
	uint64_t rounds;
	uint64_t all_ns;  /* every thread held                          */
	uint64_t held_ns; /* the thread that made the calls held        */
	bool strict;      /* every thread held during the calls        */
	bool json;        /* --json                                     */
	char last_why[256];
} inject_t;

/* --conf checked as the library checks it, before the process is touched.
 * Returns 0 or an exit code after one line. */
static int check_more(const char *more)
{
	char lib[4096];
	int code;
	if ((code = cli_find_installed("libheapctl.so", lib, sizeof lib, false)) != 0 ||
	    (code = cli_check_conf(lib, more)) != 0)
		return code;
	/* thp acts on libheapctl.so's heap; this process keeps its malloc
	 * (the check above leaves default, always and never) */
	static const char *const thp[] = { "thp:always", "thp:never" };
	for (unsigned i = 0; i < sizeof thp / sizeof thp[0]; i++)
		if (cli_opt_has(more, thp[i]))
			return cli_err(HC_EXIT_USAGE,
			    "inject: --conf %s: the process keeps its own "
			    "malloc, whose memory thp does not reach (it is an option of libheapctl.so's heap)",
			    thp[i]);
	return 0;
}

/* The process, its objects and the agent's file: 0, or an exit code after
 * one line when it cannot take the agent. */
static int check_process(inject_t *in)
{
	proc_t *p = &in->p;
	snprintf(p->root, sizeof p->root, "/proc/%d/root", p->pid);
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d", p->pid);
	if (access(dir, F_OK) != 0)
		return cli_err(HC_EXIT_NOPROC, "no process %d", p->pid);
	int code;
	if ((code = read_objects(p)) != 0 || (code = refuse_before(p)) != 0)
		return code;
	char shm[64];
	snprintf(shm, sizeof shm, "/dev/shm/heapctl.%d", p->pid);
	if (p->agent && access(shm, F_OK) == 0)
		return cli_err(HC_EXIT_FAILED,
		    "process %d has the agent already: heapctl status %d (heapctl eject %d "
		    "takes it out)",
		    p->pid, p->pid, p->pid);
	return agent_path(p, in->agent, sizeof in->agent);
}

/* The unsafe ranges of glibc's functions (read_objects added whole other
 * allocators and the loader). */
static void add_glibc_unsafe(proc_t *p)
{
	uint64_t val[NUNSAFE], size[NUNSAFE];
	if (!elf_symbols(p->pid, p->libc, glibc_unsafe, NUNSAFE, val, size))
		return;
	/* malloc.c is one unit: its static functions (_int_malloc,
	 * _mid_memalign, which aligned_alloc reaches with a jump and
	 * leaves no frame of its own) lie among the exported ones */
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < NMALLOC; i++)
		if (val[i] && size[i]) {
			lo = val[i] < lo ? val[i] : lo;
			hi = val[i] + size[i] > hi ? val[i] + size[i] : hi;
		}
	if (hi > lo && hi - lo < (1u << 20))
		add_unsafe(p, p->libc_base + lo, p->libc_base + hi, "glibc's malloc");
	for (size_t i = 0; i < NUNSAFE; i++)
		if (val[i] && size[i])
			add_unsafe(p, p->libc_base + val[i], p->libc_base + val[i] + size[i],
			    i < NMALLOC ? "glibc's malloc"
			        : strncmp(glibc_unsafe[i], "dl", 2) == 0 || strstr(glibc_unsafe[i], "_dl")
			        ? "the dynamic loader"
			        : "glibc's fork, thread or exit functions");
}

/* One round's look at the held threads: each stopped one not yet at a
 * safe place is unwound again.  Returns how many are at unsafe places
 * (the last one's reason in last_why). */
static size_t look_at_threads(inject_t *in)
{
	size_t unsafe = 0;
	for (size_t i = 0; i < in->nth; i++) {
		pt_thr_t *t = &in->th[i];
		if (t->gone || !t->seized || in->safe[i])
			continue;
		const char *why = NULL;
		if (t->stopped) {
			t->n = 0;
			t->signal_frame = false;
			pt_unwind_thread(in->as, t);
		}
		if ((why = unsafe_at(&in->p, t)) == NULL) {
			in->safe[i] = true;
			continue;
		}
		unsafe++;
		snprintf(in->last_why, sizeof in->last_why, "thread %d is in %s", t->tid, why);
	}
	return unsafe;
}

/* Every thread let go a moment (one may be in a fork, which holds the
 * allocator's locks and which each interrupt starts over), to be held
 * again, afresh. */
static void start_afresh(inject_t *in)
{
	pt_release_all(in->th, in->nth);
	in->nth = 0;
	in->t0 = 0;
	memset(in->safe, 0, PT_MAX_THREADS * sizeof *in->safe);
	memset(in->stuck, 0, PT_MAX_THREADS * sizeof *in->stuck);
	memset(in->last_pc, 0, PT_MAX_THREADS * sizeof *in->last_pc);
	struct timespec ts = { 0, 20000000 };
	nanosleep(&ts, NULL);
}

/* The threads at unsafe places run on a little, then stop again.  One
 * found where it was the last time got nowhere: no CPU for it in time on a
 * busy machine, or a fork, which an interrupt restarts from the beginning
 * (while it holds every malloc lock): each time, the moment doubles, up to
 * 50 ms. */
static void run_unsafe_moment(inject_t *in, uint64_t round_end)
{
	unsigned longest = 0;
	for (size_t i = 0; i < in->nth; i++) {
		pt_thr_t *t = &in->th[i];
		if (in->safe[i] || t->gone || !t->seized || !t->stopped)
			continue;
		uint64_t pc = t->n > 0 ? t->ip[0] : 0;
		in->stuck[i] = pc == in->last_pc[i] ? in->stuck[i] + 1 : 0;
		in->last_pc[i] = pc;
		longest = in->stuck[i] > longest ? in->stuck[i] : longest;
		if (ptrace(PTRACE_CONT, t->tid, 0, (void *)(intptr_t)t->deliver) == 0) {
			t->deliver = 0;
			t->stopped = false;
		}
	}
	uint64_t run_ns = 200000ull << (longest < 8 ? longest : 8);
	struct timespec ts = { 0, (long)run_ns };
	nanosleep(&ts, NULL);
	for (size_t i = 0; i < in->nth; i++) {
		pt_thr_t *t = &in->th[i];
		if (!in->safe[i] && t->seized && !t->gone && !t->stopped) {
			t->why = NULL;
			ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
		}
	}
	pt_wait_stopped(in->th, in->nth, round_end < in->deadline ? round_end : in->deadline);
}

/*
 * Every thread held; each one at an unsafe place is let run a moment and
 * stopped again, while the others stay held, until all are at safe places
 * at once (a thread spends only part of its time in malloc), or the
 * deadline.  New threads are seized as they appear.  Returns 0 with the
 * threads held (in->strict false: one at a safe place is enough, see
 * there), or an exit code after one line.
 */
static int hold_safe(inject_t *in)
{
	for (;;) {
		in->rounds++;
		uint64_t round_end = pt_now_ns() + 1000000000u;
		int code = pt_seize_all(in->p.pid, in->th, &in->nth, &in->t0,
		    round_end < in->deadline ? round_end : in->deadline);
		if (code)
			return code;
		size_t unsafe = look_at_threads(in), held = 0;
		for (size_t i = 0; i < in->nth; i++)
			held += in->th[i].stopped;
		if (unsafe == 0 && held > 0)
			return 0;
		/* Busy allocating threads are rarely all outside malloc at once:
		 * after a while one thread at a safe place is enough, and the
		 * others run while it makes the calls (a lock they hold is let go
		 * as they run; the agent is safe across their forks) */
		if (pt_now_ns() >= in->strict_until) {
			size_t k = 0;
			while (k < in->nth && !(in->safe[k] && in->th[k].stopped && !in->th[k].gone))
				k++;
			if (k < in->nth) {
				in->strict = false;
				return 0;
			}
			if (pt_now_ns() < in->deadline) {
				start_afresh(in); /* none: all held again, afresh */
				continue;
			}
		}
		if (pt_now_ns() >= in->deadline)
			return cli_err(HC_EXIT_TIMEOUT,
			    "inject: no safe moment in %.1f s (%llu rounds; last: %s); "
			    "nothing was changed, try again or raise --timeout",
			    (double)(pt_now_ns() - in->t_start) / 1e9, (unsigned long long)in->rounds,
			    unsafe ? in->last_why : "no thread could be stopped");
		run_unsafe_moment(in, round_end);
	}
}

/* The calls, on one held thread at a safe place (the main thread if it
 * is one, else the first): the others let go first unless strict, else
 * only when a call is slow.  Returns 0 or an exit code after one line. */
static int make_calls(inject_t *in)
{
	size_t pick = in->nth;
	for (size_t i = 0; i < in->nth; i++)
		if (in->safe[i] && in->th[i].stopped && !in->th[i].gone &&
		    (pick == in->nth || in->th[i].tid == in->p.pid))
			pick = i;
	release_t others = { in->th, in->nth, pick };
	if (!in->strict)
		release_others(&others);
	else {
		call_slow = release_others;
		call_slow_arg = &others;
	}
	in->all_ns = pt_now_ns() - in->t0;
	call_t *c = calloc(1, sizeof *c);
	char mem[64];
	snprintf(mem, sizeof mem, "/proc/%d/mem", in->p.pid);
	if (c != NULL) {
		c->tid = in->th[pick].tid;
		c->mem = open(mem, O_RDWR | O_CLOEXEC);
	}
	int code;
	if (c == NULL || c->mem < 0 || !save_thread(c)) {
		code = cli_err(HC_EXIT_FAILED, "inject: cannot take hold of thread %d of process %d: %s",
		    c ? c->tid : 0, in->p.pid, strerror(errno));
	} else {
		code = load_agent(&in->p, c, in->agent, in->conf, pt_now_ns() + 10000000000u);
		call_slow = NULL;
		restore_thread(c);
	}
	if (c && c->pending)
		in->th[pick].deliver = c->pending;
	if (c) {
		if (c->mem >= 0)
			close(c->mem);
		free(c);
	}
	return code;
}

/* The process held, the agent loaded and armed, every thread let go,
 * with signals that would end heapctl held off all the while.  Returns 0
 * or an exit code after one line. */
static int hold_and_call(inject_t *in, uint64_t timeout_ns)
{
	in->th = calloc(PT_MAX_THREADS, sizeof *in->th);
	in->as = unw_create_addr_space(&_UPT_accessors, 0);
	if (in->th == NULL || in->as == NULL) {
		free(in->th);
		return cli_err(HC_EXIT_FAILED, "inject: out of memory");
	}
	unw_set_caching_policy(in->as, UNW_CACHE_GLOBAL); /* a thread is unwound once a round */
	sigset_t old;
	pt_hold_signals(&old);
	in->t_start = pt_now_ns();
	in->deadline = in->t_start + (timeout_ns ? timeout_ns : 5000000000u);
	in->strict_until = in->t_start + (in->deadline - in->t_start) / 4 < in->t_start + STRICT_NS
	    ? in->t_start + (in->deadline - in->t_start) / 4
	    : in->t_start + STRICT_NS;
	in->strict = true;
	in->safe = calloc(PT_MAX_THREADS, sizeof *in->safe);
	in->last_pc = calloc(PT_MAX_THREADS, sizeof *in->last_pc);
	in->stuck = calloc(PT_MAX_THREADS, sizeof *in->stuck);
	int code = in->safe && in->last_pc && in->stuck ? 0 : cli_err(HC_EXIT_FAILED, "inject: out of memory");
	if (code == 0 && (code = hold_safe(in)) == 0)
		code = make_calls(in);
	pt_release_all(in->th, in->nth);
	in->held_ns = in->t0 ? pt_now_ns() - in->t0 : 0;
	if (in->strict || in->all_ns == 0)
		in->all_ns = in->held_ns;
	free(in->safe);
	free(in->last_pc);
	free(in->stuck);
	sigprocmask(SIG_SETMASK, &old, NULL);
	unw_destroy_addr_space(in->as);
	free(in->th);
	return code;
}

/* A time in ms as inject has always written it in its --json. */
static void json_ms(json_t *j, const char *key, double ms)
{
	char v[64];
	snprintf(v, sizeof v, "%.3f", ms);
	json_raw(j, key, v);
}

static void print_result(const inject_t *in)
{
	double total = (double)(pt_now_ns() - in->t_start) / 1e6;
	double all = (double)in->all_ns / 1e6, held = (double)in->held_ns / 1e6;
	if (in->json) {
		json_t j;
		json_begin(&j, stdout, JSON_COMPACT);
		json_obj(&j, NULL);
		json_int(&j, "pid", in->p.pid);
		json_bool(&j, "injected", true);
		json_bool(&j, "active", !in->off);
		json_int(&j, "lg_sample", in->lg);
		json_ms(&j, "ms", total);
		json_ms(&j, "stopped_ms", all);
		json_ms(&j, "thread_held_ms", held);
		json_bool(&j, "all_held_during_calls", in->strict);
		json_u64(&j, "rounds", in->rounds);
		json_end(&j);
		return;
	}
	time_t now = time(NULL);
	char when[32];
	strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
	printf("injected into process %d: sampling %s at lg_sample %d; stopped %.1f ms%s, answering after "
	       "%.1f ms\n",
	    in->p.pid, in->off ? "off (heapctl on to start)" : "on", in->lg, all,
	    in->strict ? "" : " (then one thread for the calls, while the others ran)", total);
	printf("the profile counts allocations from %s on, not those made before\n", when);
	if (in->p.alloc_lib[0])
		printf("its malloc is %s's: the agent wraps malloc/free; calls to prefixed functions (je_malloc, "
		       "mallocx...) are not seen\n",
		    in->p.alloc_lib);
}

int hc_inject_main(cli_args_t *a)
{
#if !defined(__x86_64__)
	return cli_err(HC_EXIT_FAILED, "inject: only x86-64 is supported; use heapctl trace");
#else
	inject_t *in = calloc(1, sizeof *in);
	if (in == NULL)
		return cli_err(HC_EXIT_FAILED, "inject: out of memory");
	in->lg = 19;
	int code = parse_opts(a, &in->lg, &in->off, &in->more);
	if (code == 0 && in->more)
		code = check_more(in->more);
	in->p.pid = a->pid;
	if (code == 0 && (code = check_process(in)) == 0) {
		add_glibc_unsafe(&in->p);
		snprintf(in->conf, sizeof in->conf, "prof:true,prof_active:%s,lg_prof_sample:%d%s%s",
		    in->off ? "false" : "true", in->lg, in->more ? "," : "", in->more ? in->more : "");
		code = hold_and_call(in, a->timeout_ns);
	}
	free(in->p.unsafe);
	/* the control segment answers */
	hc_shm_target_t t;
	hc_shm_req_t req = { .cmd = HC_CMD_PING };
	hc_shm_rep_t rep;
	if (code == 0 && (code = cli_target(a, &t)) == 0 && (code = cli_call(a, &t, &req, &rep)) == 0) {
		in->json = a->json;
		print_result(in);
		code =
		    fflush(stdout) == 0 ? 0 : cli_err(HC_EXIT_FAILED, "cannot write the output: %s", strerror(errno));
	}
	free(in);
	return code;
#endif
}
