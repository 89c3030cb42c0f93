/*
 * heapctl/cmd/watch.c - stream the target's events: high-water marks
 * (gdump), dumps written or failed, settings changed, and its exit.
 *
 * Events are read from the ring by sequence number, so a watcher that falls
 * more than a ring behind (or reads a slot while it is being rewritten)
 * knows exactly how many it missed and says so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cmd/cmd.h"
#include "cli/json.h"

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* A dump's path as the caller can open it (the event has the target's). */
static void local_path(const hc_shm_target_t *t, bool same, const char *in, char *out, size_t len)
{
	if (same || in[0] != '/')
		snprintf(out, len, "%s", in);
	else
		cli_local_path(t, in, out, len);
}

/* JSON: "path" as the caller opens it, and "target_path" where it differs. */
static void json_path(json_t *j, const char *local, const char *raw)
{
	json_str(j, "path", local);
	if (strcmp(local, raw) != 0)
		json_str(j, "target_path", raw);
}

void cli_event_json(FILE *f, const hc_shm_target_t *t, bool same, const hc_shm_event_t *e)
{
	char when[40], path[HC_SHM_PATH_MAX + 64];
	local_path(t, same, e->path, path, sizeof path);
	const char *type = hc_shm_event_name(e->type);
	const char *kind = hc_shm_dump_kind_name(e->kind);
	out_time(e->time_ns, when, sizeof when);
	json_t j;
	json_begin(&j, f, JSON_LINE);
	json_obj(&j, NULL);
	json_str(&j, "type", type ? type : "unknown");
	json_str(&j, "time", when);
	json_i64(&j, "pid", t->pid);
	switch (e->type) {
	case HC_EV_GDUMP:
		/* the mark, the figure list and status call highwater; not
		 * "mapped", which is what is mapped now and may be lower */
		json_u64(&j, "highwater", e->value);
		json_u64(&j, "previous", e->value2);
		if (e->path[0])
			json_path(&j, path, e->path);
		else
			json_null(&j, "path");
		break;
	case HC_EV_DUMP:
		json_str(&j, "kind", kind ? kind : "unknown");
		json_path(&j, path, e->path);
		json_u64(&j, "bytes", e->value);
		break;
	case HC_EV_DUMP_FAILED:
		json_str(&j, "kind", kind ? kind : "unknown");
		json_path(&j, path, e->path);
		json_str(&j, "error", e->text);
		break;
	case HC_EV_CONFIG:
		json_str(&j, "name", e->name);
		json_str(&j, "value", e->path);
		json_str(&j, "previous", e->text);
		break;
	case HC_EV_START: json_u64(&j, "parent", e->value); break;
	}
	json_end(&j);
}

static void print_event(const cli_args_t *a, const hc_shm_target_t *t, bool same, const hc_shm_event_t *e)
{
	if (a->json) {
		cli_event_json(stdout, t, same, e);
		return;
	}
	char when[40], b1[32], b2[32], path[HC_SHM_PATH_MAX + 64];
	local_path(t, same, e->path, path, sizeof path);
	const char *kind = hc_shm_dump_kind_name(e->kind);
	out_time(e->time_ns, when, sizeof when);
	if (kind == NULL)
		kind = "unknown";
	/* everything in an event is the target's: safe for a terminal */
	char name[4 * HC_SHM_NAME_MAX], value[4 * HC_SHM_PATH_MAX], text[4 * 128];
	out_safe(path, value, sizeof value);
	memcpy(path, value, strlen(value) + 1 < sizeof path ? strlen(value) + 1 : sizeof path - 1);
	path[sizeof path - 1] = 0;
	out_safe(e->name, name, sizeof name);
	out_safe(e->text, text, sizeof text);
	out_safe(e->path, value, sizeof value);
	switch (e->type) {
	case HC_EV_GDUMP:
		printf("%s gdump high-water %s (was %s)%s%s\n", when, out_bytes(e->value, b1, sizeof b1),
		    out_bytes(e->value2, b2, sizeof b2), e->path[0] ? ", dumped " : "", path);
		break;
	case HC_EV_DUMP: printf("%s dump %s %s (%s)\n", when, kind, path, out_bytes(e->value, b1, sizeof b1)); break;
	case HC_EV_DUMP_FAILED: printf("%s dump_failed %s %s: %s\n", when, kind, path, text); break;
	case HC_EV_CONFIG: printf("%s config %s=%s (was %s)\n", when, name, value, text); break;
	case HC_EV_EXIT: printf("%s exit\n", when); break;
	case HC_EV_START: printf("%s start\n", when); break;
	default: printf("%s unknown event type %u\n", when, e->type);
	}
}

static void print_missed(const cli_args_t *a, int pid, uint64_t n)
{
	if (a->json) {
		json_t j;
		json_begin(&j, stdout, JSON_LINE);
		json_obj(&j, NULL);
		json_str(&j, "type", "missed");
		json_i64(&j, "pid", pid);
		json_u64(&j, "count", n);
		json_end(&j);
	} else
		printf("missed %llu event%s\n", (unsigned long long)n, n == 1 ? "" : "s");
}

static const cli_opt_t watch_opts[] = {
	{ "count", 256, "N", "stop after N events (with --leaks: after N dumps)" },
	{ NULL, 0, NULL, "leak suspects, live (the report engine does it):" },
	{ "leaks", 257, NULL,
	    "dump the process every --every seconds and print each site whose in-use bytes "
	    "grew in each of the last --intervals intervals, once" },
	{ "every", 258, "SECS", "seconds between those dumps (default 60)" },
	{ "intervals", 259, "N", "intervals a site must grow in, in a row (default 5)" },
	{ 0 },
};

const cli_help_t cmd_help_watch = {
	.usage = "[PID] [--json] [--count N] | PID --leaks [--every SECS] [--intervals N]",
	.line = "print events (high-water, dumps, settings) as they happen",
	.opts = watch_opts,
};

int cmd_watch(cli_args_t *a)
{
	for (int i = 0; i < a->argc; i++)
		if (strcmp(a->argv[i], "--leaks") == 0)
			return cli_engine_run(&cli_engine_leaks, a);
	long count = 0;
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "watch", watch_opts, false);
	const char *v;
	for (int id; code == 0 && (id = cli_scan_next(&sc, &v)) != 0;) {
		char *end;
		if (id == CLI_OPERAND) {
			code = cli_err(HC_EXIT_USAGE, "watch: unexpected argument '%s'", v);
		} else if (id < 0) {
			code = -id;
		} else if (id != 256) {
			code = cli_err(HC_EXIT_USAGE, "watch: --every and --intervals go with --leaks");
		} else {
			count = strtol(v, &end, 10);
			if (*v == 0 || *end || count <= 0)
				code = cli_err(HC_EXIT_USAGE, "watch: --count '%s' is not a positive number", v);
		}
	}
	cli_scan_end(&sc);
	if (code)
		return code;
	hc_shm_target_t t;
	code = cli_target(a, &t);
	if (code)
		return code;
	struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	stop = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	bool same = cli_same_view(&t);
	hc_shm_ring_t *ring = &t.seg->ring;
	uint64_t next = __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE), missed = 0;
	long printed = 0;
	bool done = false;
	if (!a->json && !a->in_attach)
		fprintf(stderr, "%s: watching process %d (Ctrl-C to stop)\n", cli_prog, t.pid);
	while (!done && !stop) {
		uint32_t fut = __atomic_load_n(&ring->futex, __ATOMIC_ACQUIRE);
		uint64_t head = __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE);
		if (head < next)
			next = head; /* the counter went back: garbage; resync */
		if (head - next > HC_SHM_EVENTS) {
			missed += head - HC_SHM_EVENTS - next;
			next = head - HC_SHM_EVENTS;
		}
		while (next < head && !done) {
			hc_shm_event_t e;
			int r = hc_shm_event_read(ring, next, &e);
			if (r == 0)
				break; /* being written; the futex will tell */
			next++;
			if (r < 0) {
				missed++;
				continue;
			}
			if (missed) {
				print_missed(a, t.pid, missed);
				missed = 0;
			}
			print_event(a, &t, same, &e);
			if (e.type == HC_EV_EXIT || (count && ++printed >= count))
				done = true;
		}
		if (missed) {
			print_missed(a, t.pid, missed);
			missed = 0;
		}
		fflush(stdout);
		if (done)
			break;
		if (!hc_shm_alive(&t)) {
			if (a->json) {
				json_t j;
				json_begin(&j, stdout, JSON_LINE);
				json_obj(&j, NULL);
				json_str(&j, "type", "gone");
				json_i64(&j, "pid", t.pid);
				json_end(&j);
			} else {
				printf("process %d exited\n", t.pid);
			}
			break;
		}
		hc_shm_futex_wait(&ring->futex, fut, 250000000ull);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	hc_shm_close(&t);
	return 0;
}
