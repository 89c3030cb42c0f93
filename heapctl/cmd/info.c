/*
 * heapctl/cmd/info.c - list and status: what the segments say, read through
 * the seqlock, with no round trip to the target.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "cmd/cmd.h"
#include "cli/json.h"

static int snapshot(const hc_shm_target_t *t, hc_shm_state_t *st)
{
	if (!hc_shm_state_read(&t->seg->state, st))
		return cli_err(HC_EXIT_ABI, "process %d: the counters in %s never held still (corrupt segment?)",
		    t->pid, t->path);
	return 0;
}

/* A setting's value for people: byte counts with units, 0 as "off" where
 * it means off, and the sampling rate spelt out. */
static const char *setting_human(const hc_shm_setting_t *s, const hc_shm_value_t *v, char *buf, size_t len)
{
	char b[32];
	switch (s->type) {
	case HC_SET_LG:
		snprintf(buf, len, "%llu (a sample every %s on average)", (unsigned long long)v->u,
		    out_bytes(v->u < 63 ? (uint64_t)1 << v->u : 0, b, sizeof b));
		return buf;
	case HC_SET_POW2: return v->u >= 63 ? "off" : out_bytes((uint64_t)1 << v->u, buf, len);
	case HC_SET_BYTES: return v->u == 0 ? "off" : out_bytes(v->u, buf, len);
	default: hc_shm_setting_text(s, v, buf, len); return buf;
	}
}

/* Every run-time setting of the list: as JSON members, or as lines. */
static void print_settings(const hc_shm_state_t *st, json_t *j)
{
	for (unsigned i = 0; i < HC_NSETTINGS; i++) {
		const hc_shm_setting_t *s = &hc_shm_settings[i];
		if (s->name == NULL)
			continue;
		hc_shm_value_t v;
		char text[HC_SHM_VALUE_MAX + 64], safe[4 * HC_SHM_VALUE_MAX + 256];
		hc_shm_setting_get(s, st, &v);
		if (j == NULL) {
			printf("%-24s %s\n", s->name,
			    out_safe(setting_human(s, &v, text, sizeof text), safe, sizeof safe));
			continue;
		}
		hc_shm_setting_text(s, &v, text, sizeof text);
		if (s->type == HC_SET_STR || hc_shm_words(s->type) != NULL)
			json_str(j, s->name, text);
		else
			json_raw(j, s->name, text); /* a number or true/false */
	}
}

/* ---- list -------------------------------------------------------------- */

const cli_help_t cmd_help_list = {
	.usage = "[--json]",
	.line = "list the processes running libheapctl.so",
};

int cmd_list(cli_args_t *a)
{
	if (a->argc)
		return cli_err(HC_EXIT_USAGE, "list: unexpected argument '%s'", a->argv[0]);
	enum { MAX = 4096 };
	int *pids = malloc(MAX * sizeof *pids);
	if (pids == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	int stale = hc_shm_clean_stale(true);
	if (stale)
		fprintf(stderr, "%s: removed %d stale segment%s of processes that are gone\n", cli_prog, stale,
		    stale == 1 ? "" : "s");
	int n = hc_shm_scan(pids, MAX);
	if (n < 0) {
		free(pids);
		return cli_err(HC_EXIT_FAILED, "cannot read /proc");
	}
	json_t j;
	json_begin(&j, stdout, JSON_PRETTY);
	if (a->json)
		json_arr(&j, NULL);
	else
		printf("%-8s %-6s %-5s %-8s %11s %11s %11s %6s  %s\n", "PID", "NSPID", "PROF", "SAMPLE", "ALLOCATED",
		    "MAPPED", "HIGH-WATER", "DUMPS", "COMMAND");
	int shown = 0, denied = 0;
	for (int i = 0; i < n; i++) {
		if (pids[i] == getpid())
			continue;
		hc_shm_target_t t;
		char err[512];
		int code = hc_shm_open(pids[i], &t, err, sizeof err);
		if (code == HC_EXIT_PERM) {
			denied++;
			continue;
		}
		if (code)
			continue; /* gone, stale (now removed) or not ours */
		hc_shm_state_t st;
		if (!hc_shm_state_read(&t.seg->state, &st)) {
			hc_shm_close(&t);
			continue;
		}
		char cmd[256], b1[32], b2[32], b3[32], rate[32];
		out_cmdline(t.pid, t.seg, cmd, sizeof cmd);
		if (a->json) {
			json_obj(&j, NULL);
			json_i64(&j, "pid", t.pid);
			json_i64(&j, "nspid", t.nspid);
			json_str(&j, "command", cmd);
			json_bool(&j, "prof_active", st.active);
			json_u64(&j, "lg_sample", st.lg_sample);
			json_u64(&j, "allocated", st.allocated);
			json_u64(&j, "mapped", st.mapped);
			json_u64(&j, "highwater", st.highwater);
			json_u64(&j, "dumps", st.dumps);
			json_end(&j);
		} else {
			snprintf(rate, sizeof rate, "2^%u", st.lg_sample);
			char nspid[16] = "-";
			if (t.nspid != t.pid)
				snprintf(nspid, sizeof nspid, "%d", t.nspid);
			char safe[1024];
			printf("%-8d %-6s %-5s %-8s %11s %11s %11s %6llu  %s\n", t.pid, nspid, st.active ? "on" : "off",
			    rate, out_bytes(st.allocated, b1, sizeof b1), out_bytes(st.mapped, b2, sizeof b2),
			    out_bytes(st.highwater, b3, sizeof b3), (unsigned long long)st.dumps,
			    out_safe(cmd, safe, sizeof safe));
		}
		shown++;
		hc_shm_close(&t);
	}
	free(pids);
	if (a->json)
		json_end(&j);
	if (denied)
		fprintf(stderr, "%s: %d more process%s of other users not shown (permission denied)\n", cli_prog,
		    denied, denied == 1 ? "" : "es");
	return 0;
}

/* ---- status ------------------------------------------------------------ */

/* Does the control thread answer (which also refreshes the counters),
 * within a second at most?  If not, why in words.  0, or the process is
 * gone: the error printed and its code. */
static int ping(cli_args_t *a, hc_shm_target_t *t, bool *answers, char *why, size_t len)
{
	hc_shm_req_t req = { .cmd = HC_CMD_PING };
	hc_shm_rep_t rep;
	char err[512];
	uint64_t tmo = a->timeout_ns < 1000000000u ? a->timeout_ns : 1000000000u;
	int rc = hc_shm_call(t, &req, &rep, tmo, err, sizeof err);
	*answers = rc == 0;
	if (rc == HC_EXIT_NOPROC)
		return cli_err(rc, "%s", err);
	char state = *answers ? 0 : cli_proc_state(t->pid);
	if (state == 'T')
		snprintf(why, len, "the process is stopped: kill -CONT %d", t->pid);
	else if (state == 't')
		snprintf(why, len, "a debugger holds the process");
	else if (rc == HC_EXIT_TIMEOUT)
		snprintf(why, len, "nothing within %.1f s; " CLI_STACKS_HINT, (double)tmo / 1e9, t->pid);
	else if (rc != 0)
		snprintf(why, len, "%s", err);
	return 0;
}

const cli_help_t cmd_help_status = {
	.usage = "[PID] [--json]",
	.line = "show one process's settings and counters",
};

int cmd_status(cli_args_t *a)
{
	if (a->argc)
		return cli_err(HC_EXIT_USAGE, "status: unexpected argument '%s'", a->argv[0]);
	hc_shm_target_t t;
	int code = cli_target(a, &t);
	if (code)
		return code;
	int terr = __atomic_load_n(&t.seg->hdr.control_err, __ATOMIC_RELAXED);
	bool control = __atomic_load_n(&t.seg->hdr.control, __ATOMIC_ACQUIRE) == 1 || terr, answers = false;
	char why[600] = "";
	if (control && (code = ping(a, &t, &answers, why, sizeof why)) != 0) {
		hc_shm_close(&t);
		return code;
	}
	hc_shm_state_t st;
	if ((code = snapshot(&t, &st)) != 0) {
		hc_shm_close(&t);
		return code;
	}
	const hc_shm_header_t *h = &t.seg->hdr;
	char cmd[512], version[17], when[40], upd[40];
	out_cmdline(t.pid, t.seg, cmd, sizeof cmd);
	snprintf(version, sizeof version, "%.*s", (int)sizeof h->version, h->version);
	uint64_t events = __atomic_load_n(&t.seg->ring.head, __ATOMIC_ACQUIRE);
	uint64_t now = hc_shm_now_ns();
	double age = st.updated_ns && now > st.updated_ns ? (double)(now - st.updated_ns) / 1e9 : 0;
	if (a->json) {
		json_t j;
		json_begin(&j, stdout, JSON_PRETTY);
		json_obj(&j, NULL);
		json_i64(&j, "pid", t.pid);
		json_i64(&j, "nspid", t.nspid);
		json_u64(&j, "uid", t.uid);
		json_str(&j, "command", cmd);
		json_str(&j, "version", version);
		json_u64(&j, "abi", HC_SHM_ABI);
		json_str(&j, "segment", t.path);
		json_str(&j, "created", out_time(h->created_ns, when, sizeof when));
		uint64_t since = __atomic_load_n(&h->counts_since_ns, __ATOMIC_RELAXED);
		json_bool(&j, "injected", since != 0);
		if (since)
			json_str(&j, "counts_since", out_time(since, when, sizeof when));
		json_str(&j, "updated", out_time(st.updated_ns, upd, sizeof upd));
		json_bool(&j, "control", control);
		json_bool(&j, "answers", answers);
		if (terr && !__atomic_load_n(&t.seg->hdr.control, __ATOMIC_ACQUIRE))
			json_str(&j, "control_error", strerror(terr));
		if (why[0])
			json_str(&j, "not_answering", why);
		json_bool(&j, "opt.prof", st.prof);
		print_settings(&st, &j);
		const struct {
			const char *k;
			uint64_t v;
		} counters[] = {
			{ "allocated", st.allocated },
			{ "active", st.active_bytes },
			{ "metadata", st.metadata },
			{ "resident", st.resident },
			{ "mapped", st.mapped },
			{ "retained", st.retained },
			{ "highwater", st.highwater },
			{ "samples", st.samples },
			{ "dumps", st.dumps },
			{ "threads", st.threads },
			{ "commands", st.commands },
			{ "events", events },
		};
		for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
			json_u64(&j, counters[i].k, counters[i].v);
		char last[HC_SHM_PATH_MAX + 64];
		cli_local_path(&t, st.last_dump, last, sizeof last);
		json_str(&j, "last_dump", last);
		json_bool(&j, "same_view", cli_same_view(&t));
		json_end(&j);
	} else {
		char b[32], safe[4 * HC_SHM_PATH_MAX + 256];
		printf("process        %d", t.pid);
		if (t.nspid != t.pid)
			printf(" (PID %d in its namespace)", t.nspid);
		printf("\ncommand        %s\n", out_safe(cmd, safe, sizeof safe));
		printf("library        heapctl %s, segment ABI %u, ", out_safe(version, safe, sizeof safe), HC_SHM_ABI);
		printf("%s\n", out_safe(t.path, safe, sizeof safe));
		printf("since          %s\n", out_time(h->created_ns, when, sizeof when));
		uint64_t since = __atomic_load_n(&h->counts_since_ns, __ATOMIC_RELAXED);
		if (since)
			printf("injected       heapctl inject, its own malloc wrapped: the profile counts what was "
			       "allocated from %s on\n",
			    out_time(since, when, sizeof when));
		if (terr && !__atomic_load_n(&h->control, __ATOMIC_ACQUIRE))
			printf("control        no thread (pthread_create: %s): served while the program "
			       "allocates%s%s, %llu commands served\n",
			    strerror(terr),
			    answers ? "" : "; not answering: ", answers ? "" : out_safe(why, safe, sizeof safe),
			    (unsigned long long)st.commands);
		else if (control && !answers)
			printf("control        not answering: %s\n", out_safe(why, safe, sizeof safe));
		else
			printf("control        %s, %llu commands served\n", control ? "running" : "not running",
			    (unsigned long long)st.commands);
		printf("updated        %.1f s ago\n", age);
		printf("profiling      %s%s\n", st.active ? "on" : "off", st.prof ? "" : " (started with prof:false)");
		print_settings(&st, NULL);
		printf("allocated      %s\n", out_bytes(st.allocated, b, sizeof b));
		printf("active         %s\n", out_bytes(st.active_bytes, b, sizeof b));
		printf("metadata       %s\n", out_bytes(st.metadata, b, sizeof b));
		printf("resident       %s\n", out_bytes(st.resident, b, sizeof b));
		printf("mapped         %s\n", out_bytes(st.mapped, b, sizeof b));
		printf("retained       %s\n", out_bytes(st.retained, b, sizeof b));
		printf("high-water     %s\n", out_bytes(st.highwater, b, sizeof b));
		printf("samples        %llu\n", (unsigned long long)st.samples);
		char last[HC_SHM_PATH_MAX + 64];
		cli_local_path(&t, st.last_dump, last, sizeof last);
		printf("dumps          %llu%s%s%s\n", (unsigned long long)st.dumps, st.last_dump[0] ? " (last: " : "",
		    out_safe(last, safe, sizeof safe), st.last_dump[0] ? ")" : "");
		printf("threads        %llu\n", (unsigned long long)st.threads);
		printf("events         %llu\n", (unsigned long long)events);
	}
	hc_shm_close(&t);
	return 0;
}
