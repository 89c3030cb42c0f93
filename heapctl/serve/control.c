/*
 * heapctl/serve/control.c - POST /control/{on,off,set,dump}?pid=N: `heapctl
 * on|off|dump|set PID [NAME=VALUE...]` run as a child of the daemon, every
 * query argument but pid a setting for set.  routes.c lets only the token,
 * or the peer's own processes on a Unix socket, get here.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "serve.h"

typedef struct set_args_s {
	char *argv[40];
	char store[32][HC_SHM_VALUE_MAX + 64];
	int n;
	bool bad;
} set_args_t;

/* Every query argument but pid is a setting: NAME=VALUE for heapctl set. */
static enum MHD_Result set_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	set_args_t *a = cls;
	if (strcmp(key, "pid") == 0)
		return MHD_YES;
	if (value == NULL || a->n >= 32 || strchr(key, '=') || key[0] == '-' ||
	    (size_t)snprintf(a->store[a->n], sizeof a->store[0], "%s=%s", key, value) >= sizeof a->store[0]) {
		a->bad = true;
		return MHD_NO;
	}
	a->n++;
	return MHD_YES;
}

enum MHD_Result control_serve(struct MHD_Connection *c, const char *what, serve_peer_t *peer)
{
	char why[1024];
	unsigned status;
	int pid = targets_request_pid(c, peer, &status, why, sizeof why);
	if (pid < 0)
		return respond_err(c, status, "%s", why);
	char pids[16], tmo[32], out[4096], err[1024];
	snprintf(pids, sizeof pids, "%d", pid);
	snprintf(tmo, sizeof tmo, "%.3f", (double)serve_conf.timeout_ns / 1e9);
	/* heapctl WHAT PID [NAME=VALUE...] --timeout T */
	set_args_t a = { .n = 0 };
	int n = 0;
	a.argv[n++] = (char *)what;
	a.argv[n++] = pids;
	if (strcmp(what, "set") == 0) {
		MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, set_arg, &a);
		if (a.bad || a.n == 0)
			return respond_err(c, MHD_HTTP_BAD_REQUEST,
			    "set takes NAME=VALUE query arguments (see heapctl help set)");
		for (int i = 0; i < a.n; i++)
			a.argv[n++] = a.store[i];
	}
	a.argv[n++] = "--timeout";
	a.argv[n++] = tmo;
	a.argv[n] = NULL;
	out[0] = 0;
	int rc = serve_run_self(a.argv, out, sizeof out, err, sizeof err, serve_conf.timeout_ns / 1000000 + 30000);
	if (rc != 0)
		return respond_child(c, rc, err, "a file of the daemon's", "heapctl failed");
	return respond_buf(c, MHD_HTTP_OK, "text/plain; charset=utf-8", out, strlen(out));
}
