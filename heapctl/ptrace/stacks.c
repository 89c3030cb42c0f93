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
 * seized (PTRACE_SEIZE, which sends no signal; seize.c), interrupted,
 * unwound and detached, and the time from the first interrupt to the last
 * detach is printed.  A thread that does not stop within --timeout (one in
 * uninterruptible sleep) is shown without a stack.  A thread that was
 * already stopped (the process had a SIGSTOP) stays stopped; a signal that
 * arrived while it was held is delivered on detach.  Signals that would end
 * heapctl are held off until every thread is detached, and if heapctl dies
 * anyway the kernel detaches what it had seized.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libunwind-ptrace.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "cli/json.h"
#include "elf/elf.h"
#include "elf/unwind.h"
#include "ptrace/ptrace.h"
#include "report/rp_internal.h"

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

/* What read_maps carries from line to line. */
typedef struct maps_read_s {
	rp_profile_t *p;
	int memfd;
	size_t cap, ehcap;
	uint64_t base;         /* the last mapping at file offset 0 ... */
	const char *base_path; /* ... and its file, interned           */
} maps_read_t;

static bool add_map(const el_map_t *em, void *arg)
{
	maps_read_t *r = arg;
	rp_profile_t *p = r->p;
	if (em->path[0] == '/' && em->offset == 0) {
		r->base = em->lo;
		r->base_path = rp_intern(em->path);
	}
	rp_map_t m;
	if (!rp_map_from(em, &m))
		return true;
	p->maps = rp_grow(p->maps, &r->cap, p->nmaps + 1, sizeof *p->maps);
	p->maps[p->nmaps++] = m;
	/* the object's headers are in its first page: the mapping at
	 * offset 0 of the same file before this one */
	eh_map_t e = { .lo = m.start, .hi = m.limit };
	if (r->memfd < 0 || m.path != r->base_path || !cli_proc_eh_table(r->memfd, r->base, &e.t) || e.t.nfde == 0)
		return true;
	EH.m = rp_grow(EH.m, &r->ehcap, EH.n + 1, sizeof *EH.m);
	EH.m[EH.n++] = e;
	return true;
}

/* The process's executable mappings, into p, and their unwind tables
 * (memfd: its /proc/PID/mem; -1 leaves libunwind to the files). */
static void read_maps(int pid, int memfd, rp_profile_t *p)
{
	maps_read_t r = { .p = p, .memfd = memfd };
	if (el_maps_each(pid, add_map, &r) != 0)
		return;
	if (rp_maps_sort(p) != 0)
		p->nmaps = 0; /* /proc never overlaps; if it did, no names */
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
static uint64_t loc_key(const pt_thr_t *t, int i)
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

static void print_text(int pid, const char *cmd, const pt_thr_t *th, size_t nth, const rp_profile_t *p,
    double stopped_ms)
{
	size_t ok = 0;
	for (size_t i = 0; i < nth; i++)
		ok += th[i].n > 0;
	printf("process %d: %s\n%zu thread%s, %zu stack%s read; the process was stopped for %.2f ms\n", pid, cmd, nth,
	    nth == 1 ? "" : "s", ok, ok == 1 ? "" : "s", stopped_ms);
	char safe[1024];
	for (size_t i = 0; i < nth; i++) {
		const pt_thr_t *t = &th[i];
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

static void print_json(int pid, const char *cmd, const pt_thr_t *th, size_t nth, const rp_profile_t *p,
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
		const pt_thr_t *t = &th[i];
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
	pt_thr_t *th = calloc(PT_MAX_THREADS, sizeof *th);
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
	pt_hold_signals(&old);
	size_t nth = 0;
	uint64_t t0 = 0;
	int code = pt_seize_all(pid, th, &nth, &t0, pt_now_ns() + (a->timeout_ns ? a->timeout_ns : 5000000000u));
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
				pt_unwind_thread(as, &th[i]);
		pt_release_all(th, nth);
		t1 = pt_now_ns();
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
		root[0] = 0; /* exited since: the paths as they are */
	if (rp_symbolize(&prof, root[0] ? root : NULL, err, sizeof err) != 0)
		fprintf(stderr, "%s: %s; addresses only\n", cli_prog, err);
	if (a->json)
		print_json(pid, cmd, th, nth, &prof, t1 - t0);
	else
		print_text(pid, cmd, th, nth, &prof, (double)(t1 - t0) / 1e6);
	free(th);
	return fflush(stdout) == 0 ? 0 : cli_err(HC_EXIT_FAILED, "cannot write the output: %s", strerror(errno));
}
