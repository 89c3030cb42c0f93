/*
 * heapctl/ptrace/stacks.c - `heapctl stacks PID`: the stack of every thread
 * of a process, read with ptrace and libunwind-ptrace, and symbolized as
 * the report symbolizes (symbolize.c, with the process's own files: under
 * /proc/PID/root for a container, as its maps name them for a chroot, see
 * cli_proc_maps_root).  The process need not run the library.
 *
 * libunwind's ptrace accessors find an address's unwind info in the file
 * the maps name, which they open under /proc/PID/root: no file for a
 * chrooted process, whose maps name its files as heapctl sees them, and
 * the stack ended at its first frame.  So the tables are read from the
 * process's memory first (.eh_frame_hdr, as `trace` reads them), and the
 * file is only a fallback.
 *
 * The process is stopped only while its stacks are read: every thread is
 * seized (PTRACE_SEIZE, which sends no signal), interrupted, unwound and
 * detached, and the time from the first interrupt to the last detach is
 * printed.  A thread that does not stop within --timeout (one in
 * uninterruptible sleep) is shown without a stack.  A thread that was
 * already stopped (the process had a SIGSTOP) stays stopped; a signal that
 * arrived while it was held is delivered on detach.  Signals that would end
 * heapctl are held off until every thread is detached, and if heapctl dies
 * anyway the kernel detaches what it had seized.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "cli/json.h"
#include "elf/unwind.h"
#include "report/rp_internal.h"

uint64_t rp_now_ns(void)
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
static void thread_info(int pid, rp_thr_t *t)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task/%d/comm", pid, t->tid);
	if (cli_read_file(path, t->name, sizeof t->name) > 0)
		t->name[strcspn(t->name, "\n")] = 0;
	char st[64];
	t->state = '?';
	snprintf(t->state_name, sizeof t->state_name, "unknown");
	if (cli_proc_status_field(t->tid, "State", st, sizeof st) && st[0]) {   /* "S (sleeping)" */
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
	cli_read_file("/proc/sys/kernel/yama/ptrace_scope", scope, sizeof scope);
	int sc = scope[0] ? atoi(scope) : 0;
	if (sc >= 3)
		return cli_err(HC_EXIT_PERM, "cannot trace process %d: kernel.yama.ptrace_scope is 3 (no process may "
		    "be traced until reboot)", pid);
	if (geteuid() != 0 && sc >= 1)
		return cli_err(HC_EXIT_PERM, "cannot trace process %d: kernel.yama.ptrace_scope is %d; run it as root "
		    "(CAP_SYS_PTRACE)%s", pid, sc, sc == 1 ? ", or set kernel.yama.ptrace_scope=0" : "");
	if (geteuid() == 0 || pid == 1)
		return cli_err(HC_EXIT_PERM, "cannot trace process %d: the kernel refused (%s): init, kernel threads "
		    "and processes a security module protects (SELinux, AppArmor, lockdown) cannot be traced", pid,
		    strerror(err));
	return cli_err(HC_EXIT_PERM, "cannot trace process %d: %s; run it as the process's user or as root "
	    "(CAP_SYS_PTRACE)", pid, strerror(err));
}

/* Seize and interrupt every thread of pid not seized yet (*added: there
 * was one).  Returns 0, or the exit code after the one line (nothing
 * seized). */
static int seize_new(int pid, rp_thr_t *th, size_t *nth, uint64_t *t_first, bool *added)
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
		if (i < *nth || *nth == RP_MAX_THREADS)
			continue;
		rp_thr_t *t = &th[(*nth)++];
		memset(t, 0, sizeof *t);
		t->tid = tid;
		thread_info(pid, t);
		*added = true;
		if (t->state == 'Z' || t->state == 'X') {
			t->why = "it has exited";
			continue;
		}
		if (*t_first == 0)
			*t_first = rp_now_ns();
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
void rp_wait_stopped(rp_thr_t *th, size_t nth, uint64_t deadline)
{
	for (;;) {
		size_t left = 0;
		for (size_t i = 0; i < nth; i++) {
			rp_thr_t *t = &th[i];
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
		if (left == 0 || rp_now_ns() >= deadline)
			break;
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	for (size_t i = 0; i < nth; i++)
		if (th[i].seized && !th[i].stopped && !th[i].gone)
			th[i].why = "it did not stop in time (uninterruptible sleep?); it is let go when heapctl exits";
}

void rp_unwind_thread(struct unw_addr_space *as, rp_thr_t *t)
{
	void *ui = _UPT_create(t->tid);
	unw_cursor_t c;
	if (ui == NULL || unw_init_remote(&c, as, ui) != 0) {
		t->why = "libunwind could not read its registers";
		if (ui)
			_UPT_destroy(ui);
		return;
	}
	bool exact = true;              /* the innermost frame's pc */
	do {
		unw_word_t ip = 0;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0)
			break;
		t->ip[t->n] = ip;
		t->exact[t->n++] = exact;
		exact = unw_is_signal_frame(&c) > 0;   /* the next one was interrupted */
		t->signal_frame |= exact;
	} while (t->n < RP_MAX_FRAMES && unw_step(&c) > 0);
	_UPT_destroy(ui);
}

/* Signals that would end heapctl are held while threads are held. */
void rp_hold_signals(sigset_t *old)
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
int rp_seize_all(int pid, rp_thr_t *th, size_t *nth, uint64_t *t_first, uint64_t deadline)
{
	int code = 0;
	bool added = true;
	for (int round = 0; code == 0 && added && round < 16; round++) {
		code = seize_new(pid, th, nth, t_first, &added);
		if (code == 0 && added)
			rp_wait_stopped(th, *nth, deadline);
	}
	return code;
}

/* Let every held thread go, with the signal each had pending. */
void rp_release_all(rp_thr_t *th, size_t nth)
{
	for (size_t i = 0; i < nth; i++) {
		if (th[i].seized && !th[i].gone)
			ptrace(PTRACE_DETACH, th[i].tid, 0, (void *)(intptr_t)th[i].deliver);
		th[i].seized = th[i].stopped = false;
	}
}

/* Each executable mapping of a file, with the unwind table of its object
 * as the process has it in memory. */
typedef struct eh_map_s {
	uint64_t lo, hi;
	cli_eh_table_t t;
} eh_map_t;

static struct {
	eh_map_t *m;
	size_t n;
} EH;

/* The process's executable mappings, into p, and their unwind tables
 * (memfd: its /proc/PID/mem; -1 leaves libunwind to the files). */
static void read_maps(int pid, int memfd, rp_profile_t *p)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return;
	char *line = NULL;
	size_t len = 0, cap = 0, ehcap = 0;
	uint64_t base = 0;            /* the last mapping at file offset 0 ... */
	const char *base_path = NULL; /* ... and its file, interned           */
	while (getline(&line, &len, f) > 0) {
		line[strcspn(line, "\n")] = 0;
		unsigned long long lo, off;
		int pos = 0;
		if (sscanf(line, "%llx-%*x %*s %llx %*s %*s %n", &lo, &off, &pos) == 2 && pos && line[pos] == '/' &&
		    off == 0) {
			base = lo;
			base_path = rp_intern(line + pos);
		}
		rp_map_t m;
		if (rp_map_line(line, &m) != 1)
			continue;
		p->maps = rp_grow(p->maps, &cap, p->nmaps + 1, sizeof *p->maps);
		p->maps[p->nmaps++] = m;
		/* the object's headers are in its first page: the mapping at
		 * offset 0 of the same file before this one */
		eh_map_t e = { .lo = m.start, .hi = m.limit };
		if (memfd < 0 || m.path != base_path || !cli_proc_eh_table(memfd, base, &e.t) || e.t.nfde == 0)
			continue;
		EH.m = rp_grow(EH.m, &ehcap, EH.n + 1, sizeof *EH.m);
		EH.m[EH.n++] = e;
	}
	free(line);
	fclose(f);
	if (rp_maps_sort(p) != 0)
		p->nmaps = 0;            /* /proc never overlaps; if it did, no names */
}

/* find_proc_info: the table in memory, else libunwind's file reader. */
static int find_in_memory(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need, void *arg)
{
	for (size_t i = 0; i < EH.n; i++) {
		const eh_map_t *e = &EH.m[i];
		if (ip >= e->lo && ip < e->hi) {
			if (cli_unw_search(as, ip, e->lo, e->hi, e->t.hdr, e->t.table, e->t.nfde, pi, need, arg) == 0)
				return 0;
			break;
		}
	}
	return _UPT_find_proc_info(as, ip, pi, need, arg);
}

/* Every distinct address is a location; an exact pc is keyed one past
 * itself, as a return address after it would be, which symbolize.c takes
 * one back. */
static uint64_t loc_key(const rp_thr_t *t, int i)
{
	return t->exact[i] ? t->ip[i] + 1 : t->ip[i];
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static rp_loc_t *find_loc(const rp_profile_t *p, uint64_t key)
{
	size_t lo = 0, hi = p->nlocs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (p->locs[mid].addr < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < p->nlocs && p->locs[lo].addr == key ? &p->locs[lo] : NULL;
}

static const char *module_of(const rp_profile_t *p, const rp_loc_t *l)
{
	if (l == NULL || l->map < 0)
		return NULL;
	const char *b = strrchr(p->maps[l->map].path, '/');
	return b ? b + 1 : p->maps[l->map].path;
}

static void print_text(int pid, const char *cmd, const rp_thr_t *th, size_t nth, const rp_profile_t *p,
    double stopped_ms)
{
	size_t ok = 0;
	for (size_t i = 0; i < nth; i++)
		ok += th[i].n > 0;
	printf("process %d: %s\n%zu thread%s, %zu stack%s read; the process was stopped for %.2f ms\n", pid, cmd,
	    nth, nth == 1 ? "" : "s", ok, ok == 1 ? "" : "s", stopped_ms);
	char safe[1024];
	for (size_t i = 0; i < nth; i++) {
		const rp_thr_t *t = &th[i];
		char sname[sizeof t->state_name * 4];
		printf("\nthread %d \"%s\", %s (%c)", t->tid, out_safe(t->name, safe, sizeof safe),
		    out_safe(t->state_name, sname, sizeof sname), t->state);
		if (t->n == 0) {
			printf(": no stack: %s\n", t->why ? t->why : "libunwind found no frame");
			continue;
		}
		printf(":\n");
		int k = 0;
		for (int f = 0; f < t->n; f++) {
			const rp_loc_t *l = find_loc(p, loc_key(t, f));
			const char *mod = module_of(p, l);
			if (l == NULL || l->nframes == 0) {
				printf("  #%-2d 0x%016llx in ??%s%s%s\n", k++, (unsigned long long)t->ip[f],
				    mod ? " (" : "", mod ? out_safe(mod, safe, sizeof safe) : "", mod ? ")" : "");
				continue;
			}
			for (int j = 0; j < l->nframes; j++) {
				const rp_frame_t *fr = &l->frames[j];
				printf("  #%-2d 0x%016llx in %s%s", k++, (unsigned long long)t->ip[f],
				    out_safe(fr->func, safe, sizeof safe), j + 1 < l->nframes ? " (inline)" : "");
				if (fr->file)
					printf(" at %s:%d", out_safe(fr->file, safe, sizeof safe), fr->line);
				if (mod)
					printf(" (%s)", out_safe(mod, safe, sizeof safe));
				putchar('\n');
			}
		}
	}
}

static void print_json(int pid, const char *cmd, const rp_thr_t *th, size_t nth, const rp_profile_t *p,
    uint64_t stopped_ns)
{
	json_t j;
	json_begin(&j, stdout, JSON_PRETTY);
	json_obj(&j, NULL);
	json_int(&j, "pid", pid);
	json_str(&j, "command", cmd);
	json_u64(&j, "stopped_ns", stopped_ns);
	json_arr(&j, "threads");
	char hex[32];
	for (size_t i = 0; i < nth; i++) {
		const rp_thr_t *t = &th[i];
		char st[2] = { t->state, 0 };
		json_obj(&j, NULL);
		json_int(&j, "tid", t->tid);
		json_str(&j, "name", t->name);
		json_str(&j, "state", st);
		if (t->n == 0)
			json_str(&j, "error", t->why ? t->why : "libunwind found no frame");
		json_arr(&j, "frames");
		for (int f = 0; f < t->n; f++) {
			const rp_loc_t *l = find_loc(p, loc_key(t, f));
			const char *mod = module_of(p, l);
			snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)t->ip[f]);
			int nf = l && l->nframes ? l->nframes : 1;
			for (int k = 0; k < nf; k++) {
				const rp_frame_t *fr = l && l->nframes ? &l->frames[k] : NULL;
				json_obj(&j, NULL);
				json_str(&j, "address", hex);
				json_str(&j, "function", fr ? fr->func : NULL);
				json_str(&j, "symbol", fr ? fr->full : NULL);
				json_str(&j, "file", fr ? fr->file : NULL);
				if (fr && fr->line)
					json_int(&j, "line", fr->line);
				else
					json_null(&j, "line");
				json_str(&j, "module", mod);
				json_bool(&j, "inline", k + 1 < nf);
				json_end(&j);
			}
		}
		json_end(&j);
		json_end(&j);
	}
	json_end(&j);
	json_end(&j);
}

__attribute__((visibility("default"))) int hc_stacks_main(cli_args_t *a);

int hc_stacks_main(cli_args_t *a)
{
	if (a->argc > 0)
		return cli_err(HC_EXIT_USAGE, "stacks: unexpected argument '%s'", a->argv[0]);
	int pid = a->pid;
	if (pid <= 0)
		return cli_err(HC_EXIT_USAGE, "stacks: say which process: heapctl stacks PID");
	if (pid == getpid())
		return cli_err(HC_EXIT_USAGE, "stacks: process %d is heapctl itself", pid);
	char path[64], cmd[4096];
	snprintf(path, sizeof path, "/proc/%d", pid);
	if (access(path, F_OK) != 0)
		return cli_err(HC_EXIT_NOPROC, "no process %d", pid);
	out_cmdline(pid, NULL, cmd, sizeof cmd);
	rp_thr_t *th = calloc(RP_MAX_THREADS, sizeof *th);
	if (th == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	unw_accessors_t acc = _UPT_accessors;
	acc.find_proc_info = find_in_memory;
	unw_addr_space_t as = unw_create_addr_space(&acc, 0);
	if (as == NULL) {
		free(th);
		return cli_err(HC_EXIT_FAILED, "libunwind: cannot make an address space");
	}
	unw_set_caching_policy(as, UNW_CACHE_GLOBAL);

	sigset_t old;
	rp_hold_signals(&old);
	size_t nth = 0;
	uint64_t t0 = 0;
	int code = rp_seize_all(pid, th, &nth, &t0, rp_now_ns() + (a->timeout_ns ? a->timeout_ns : 5000000000u));
	rp_profile_t prof = { 0 };
	uint64_t t1 = t0;
	if (code == 0) {
		/* its memory may be read now that it is held (we trace it) */
		snprintf(path, sizeof path, "/proc/%d/mem", pid);
		int memfd = open(path, O_RDONLY | O_CLOEXEC);
		read_maps(pid, memfd, &prof);
		if (memfd >= 0)
			close(memfd);
		for (size_t i = 0; i < nth; i++)
			if (th[i].stopped)
				rp_unwind_thread(as, &th[i]);
		rp_release_all(th, nth);
		t1 = rp_now_ns();
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	unw_destroy_addr_space(as);
	if (code != 0) {
		free(th);
		return code;
	}

	/* the addresses, once each, named as the report names them */
	size_t total = 0;
	for (size_t i = 0; i < nth; i++)
		total += (size_t)th[i].n;
	uint64_t *keys = rp_alloc(sizeof *keys * (total + 1));
	size_t k = 0;
	for (size_t i = 0; i < nth; i++)
		for (int f = 0; f < th[i].n; f++)
			keys[k++] = loc_key(&th[i], f);
	qsort(keys, k, sizeof *keys, cmp_u64);
	prof.locs = rp_alloc(sizeof *prof.locs * (k + 1));
	for (size_t i = 0; i < k; i++)
		if (i == 0 || keys[i] != keys[i - 1])
			prof.locs[prof.nlocs++] = (rp_loc_t){ .addr = keys[i], .map = -1 };
	char root[64], err[512];
	cli_proc_maps_root(pid, root, sizeof root);
	if (root[0] && access(root, X_OK) != 0)
		root[0] = 0;               /* exited since: the paths as they are */
	if (rp_symbolize(&prof, root[0] ? root : NULL, err, sizeof err) != 0)
		fprintf(stderr, "%s: %s; addresses only\n", cli_prog, err);
	if (a->json)
		print_json(pid, cmd, th, nth, &prof, t1 - t0);
	else
		print_text(pid, cmd, th, nth, &prof, (double)(t1 - t0) / 1e6);
	free(th);
	return fflush(stdout) == 0 ? 0 : cli_err(HC_EXIT_FAILED, "cannot write the output: %s", strerror(errno));
}
