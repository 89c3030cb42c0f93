/*
 * heapctl/cli/target.c - choosing the target process and one command round
 * trip.  The output helpers the commands share are in out.c.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"

#define MAX_CANDIDATES 4096

int cli_target(cli_args_t *a, hc_shm_target_t *t)
{
	char err[512];
	if (a->pid) {
		int code = hc_shm_open(a->pid, t, err, sizeof err), parent;
		bool readable;
		/* a fork child that is younger than its grace period: a moment */
		for (int i = 0; i < 20 && code == HC_EXIT_NOLIB && cli_proc_fork_pending(a->pid, &parent) &&
		     cli_proc_state(a->pid) != 'T';
		     i++) {
			struct timespec ts = { 0, 10000000 };
			nanosleep(&ts, NULL);
			code = hc_shm_open(a->pid, t, err, sizeof err);
		}
		/* "not running libheapctl.so" is wrong for a process that maps it
		 * and has no segment: say what is known, doctor says the rest */
		if (code == HC_EXIT_NOLIB && cli_proc_fork_pending(a->pid, &parent))
			cli_err(code,
			    "process %d, a child of fork (of %d), has published no segment: its "
			    "control thread does so 20 ms after the fork%s; 'heapctl doctor %d' says more",
			    a->pid, parent, cli_proc_state(a->pid) == 'T' ? ", and the process is stopped" : "",
			    a->pid);
		else if (code == HC_EXIT_NOLIB && cli_proc_maps_library(a->pid, NULL, 0, &readable)) {
			char when[64];
			if (cli_proc_agent_inert(a->pid, when, sizeof when) == CLI_AGENT_EJECTED)
				cli_err(code,
				    "process %d has heapctl inject's agent loaded but inert: it was ejected "
				    "at %s; 'heapctl inject %d' arms it again",
				    a->pid, when, a->pid);
			else if (cli_proc_conf_has(a->pid, "control:false"))
				cli_err(code,
				    "process %d runs libheapctl.so with control:false: it publishes "
				    "no control segment, so heapctl cannot reach it",
				    a->pid);
			else
				cli_err(code,
				    "process %d runs libheapctl.so, but heapctl finds no control "
				    "segment of it; 'heapctl doctor %d' says why",
				    a->pid, a->pid);
		} else if (code)
			cli_err(code, "%s", err);
		return code;
	}
	int *pids = malloc(MAX_CANDIDATES * sizeof *pids);
	if (pids == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	int n = hc_shm_scan(pids, MAX_CANDIDATES);
	int found = 0;
	char list[1024] = "";
	size_t used = 0;
	for (int i = 0; i < n; i++) {
		if (pids[i] == getpid())
			continue;
		hc_shm_target_t c;
		if (hc_shm_open(pids[i], &c, err, sizeof err) != HC_EXIT_OK)
			continue;
		char cmd[64];
		out_cmdline(c.pid, c.seg, cmd, sizeof cmd);
		if (found++ == 0)
			*t = c; /* kept open: the answer if it stays the only one */
		else
			hc_shm_close(&c);
		if (used + 80 < sizeof list)
			used += (size_t)snprintf(list + used, sizeof list - used, "%s%d (%s)", used ? ", " : "",
			    pids[i], cmd);
	}
	free(pids);
	if (found == 0)
		return cli_err(HC_EXIT_PICK,
		    "no process running libheapctl.so is visible; start one with LD_PRELOAD=/path/to/libheapctl.so");
	if (found > 1) {
		hc_shm_close(t);
		return cli_err(HC_EXIT_PICK, "%d processes run libheapctl.so: %s; say which with a PID", found, list);
	}
	a->pid = t->pid;
	return 0;
}

/* The round trip alone: 0 when the process answered, whatever it said. */
int cli_call_raw(cli_args_t *a, hc_shm_target_t *t, const hc_shm_req_t *req, hc_shm_rep_t *rep)
{
	char err[512];
	int code = hc_shm_call(t, req, rep, a->timeout_ns, err, sizeof err);
	/* a process that runs but does not answer: where are its threads? */
	char state = code == HC_EXIT_TIMEOUT ? cli_proc_state(t->pid) : 0;
	if (state && state != 'T' && state != 't')
		return cli_err(code, "%s; " CLI_STACKS_HINT, err, t->pid);
	if (code)
		return cli_err(code, "%s", err);
	return 0;
}

/* What the process answered, as an exit code and a message. */
int cli_reply(const hc_shm_target_t *t, const hc_shm_rep_t *rep)
{
	char text[4 * HC_SHM_PATH_MAX];
	out_safe(rep->text, text, sizeof text);
	switch (rep->code) {
	case HC_REP_OK: return 0;
	case HC_REP_INVALID: return cli_err(HC_EXIT_USAGE, "process %d: %s", t->pid, text);
	case HC_REP_NOPROF:
		return cli_err(HC_EXIT_FAILED, "process %d: nothing to dump: %s (run 'heapctl on %d' first)", t->pid,
		    text, t->pid);
	case HC_REP_BADREQ: return cli_err(HC_EXIT_ABI, "process %d did not understand the request: %s", t->pid, text);
	default: return cli_err(HC_EXIT_FAILED, "process %d: %s", t->pid, text);
	}
}

int cli_call(cli_args_t *a, hc_shm_target_t *t, const hc_shm_req_t *req, hc_shm_rep_t *rep)
{
	int code = cli_call_raw(a, t, req, rep);
	return code ? code : cli_reply(t, rep);
}

bool cli_same_view(const hc_shm_target_t *t)
{
	char root[64];
	snprintf(root, sizeof root, "/proc/%d/root/", t->pid);
	return cli_proc_same_mntns(t->pid) == 1 && cli_same_file("/", root);
}

/* A path that names the same file on our side as the target's path does
 * on its side outlives the process (a StateDirectory= of a sandboxed
 * service is the host's /var/lib/...); /proc/PID/root does not. */
void cli_path_under(const char *root, const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s%s", root, path);
	if (cli_same_file(out, path))
		snprintf(out, len, "%s", path);
}

void cli_local_path(const hc_shm_target_t *t, const char *path, char *out, size_t len)
{
	if (path[0] != '/' || cli_same_view(t)) {
		snprintf(out, len, "%s", path);
		return;
	}
	char root[64];
	snprintf(root, sizeof root, "/proc/%d/root", t->pid);
	cli_path_under(root, path, out, len);
}

int cli_absolute(const char *what, const char *in, char *out, size_t len)
{
	if (in[0] == 0)
		return cli_err(HC_EXIT_USAGE, "%s is empty", what);
	if (in[0] == '/') {
		if (strlen(in) >= len)
			return cli_err(HC_EXIT_USAGE, "%s is too long", what);
		strcpy(out, in);
		return 0;
	}
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof cwd) == NULL)
		return cli_err(HC_EXIT_FAILED, "%s: cannot tell the current directory", what);
	if ((size_t)snprintf(out, len, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", in) >= len)
		return cli_err(HC_EXIT_USAGE, "%s is too long", what);
	return 0;
}
