/*
 * heapctl/serve/fleet.c - the daemon as one host of a fleet: /sd, the
 * targets a Prometheus, Parca or Grafana Alloy finds by HTTP service
 * discovery (Prometheus's http_sd format: a JSON array of {"targets":
 * [...], "labels": {...}}, 200 and [] when there are none).
 *
 * One target group per process the requester may profile, each with one
 * target, the daemon itself as the request named it (its Host header),
 * and labels that make a scrape of that target fetch that process alone:
 * __metrics_path__ "/metrics" and __param_pid N, which a collector turns
 * into the query parameter pid=N (so /metrics?pid=N for Prometheus, and
 * /debug/pprof/heap?pid=N where Parca's or Alloy's profiling config puts
 * the path).  The labels a user reads: pid, user, unit, container and
 * command (the program: argv[0]'s base name).
 *
 * Which processes: those access.c lets the requester profile, fewer than
 * /targets lists (every one, as /proc/PID/stat does): a collector given a
 * process it may not profile would only collect 403s.  The token, which a
 * collector sends with its `authorization`, grants every one.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/json.h"
#include "serve.h"

/* s into out, cut to len - 1 bytes */
static void copy_cut(char *out, size_t len, const char *s, size_t n)
{
	if (n > len - 1)
		n = len - 1;
	memcpy(out, s, n);
	out[n] = 0;
}

/* The program of pid: the base name of its argv[0], else its comm, else
 * the first word of the command line the daemon keeps. */
static void program(int pid, const char *command, char *out, size_t len)
{
	char path[64], buf[PATH_MAX];
	snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
	ssize_t n = hc_shm_read_file(path, buf, sizeof buf);
	if (n > 0 && buf[0]) {
		buf[sizeof buf - 1] = 0; /* argv[0] ends at its NUL */
		const char *b = strrchr(buf, '/');
		b = b && b[1] ? b + 1 : buf;
		copy_cut(out, len, b, strlen(b));
		return;
	}
	snprintf(path, sizeof path, "/proc/%d/comm", pid);
	n = hc_shm_read_file(path, buf, sizeof buf);
	if (n > 0) {
		buf[strcspn(buf, "\n")] = 0;
		if (buf[0]) {
			copy_cut(out, len, buf, strlen(buf));
			return;
		}
	}
	copy_cut(out, len, command, strcspn(command, " "));
}

/* The Host a request named, as a target's address: a name or IPv4
 * address of letters, digits, '.', '-' and '_', or [IPv6], then at most
 * a :port of 1-65535.  Anything else is no address a collector could
 * scrape (and would be a label value chosen by the sender). */
static bool host_addr(const char *h)
{
	if (h == NULL || *h == 0 || strlen(h) > 255)
		return false;
	const char *p = h;
	if (*p == '[') {
		size_t n = strspn(p + 1, "0123456789abcdefABCDEF:.");
		if (n == 0 || p[1 + n] != ']')
			return false;
		p += n + 2;
	} else {
		size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_");
		if (n == 0)
			return false;
		p += n;
	}
	if (*p == 0)
		return true;
	if (*p != ':' || p[1] == 0 || strlen(p + 1) > 5 || strspn(p + 1, "0123456789") != strlen(p + 1))
		return false;
	long port = strtol(p + 1, NULL, 10);
	return port >= 1 && port <= 65535;
}

/* ---- the parameters ------------------------------------------------------- */

/* What narrows the list: each given one must match exactly ("" matches a
 * process without that label). */
typedef struct sd_filter_s {
	const char *user, *unit, *container, *command;
	long pid;      /* -1: any */
	char bad[160]; /* the first bad parameter, for the 400 */
} sd_filter_t;

static enum MHD_Result sd_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	sd_filter_t *f = cls;
	if (f->bad[0])
		return MHD_NO;
	static const char *const names[] = { "user", "unit", "container", "command", "pid" };
	size_t i = 0;
	while (i < sizeof names / sizeof names[0] && strcmp(key, names[i]) != 0)
		i++;
	if (i == sizeof names / sizeof names[0]) {
		char safe[64];
		snprintf(f->bad, sizeof f->bad,
		    "unknown parameter '%s': /sd takes user, unit, container, command "
		    "and pid",
		    out_safe(key, safe, sizeof safe));
		return MHD_NO;
	}
	if (value == NULL || strlen(value) > 255) {
		snprintf(f->bad, sizeof f->bad, "%s needs a value of at most 255 bytes (%s=VALUE)", key, key);
		return MHD_NO;
	}
	const char **slot[] = { &f->user, &f->unit, &f->container, &f->command };
	if (i < 4) {
		if (*slot[i] && strcmp(*slot[i], value) != 0) {
			snprintf(f->bad, sizeof f->bad, "%s is given twice: one value each", key);
			return MHD_NO;
		}
		*slot[i] = value;
		return MHD_YES;
	}
	if (*value == 0 || strlen(value) > 9 || strspn(value, "0123456789") != strlen(value) ||
	    strtol(value, NULL, 10) == 0) {
		snprintf(f->bad, sizeof f->bad, "pid must be a process id");
		return MHD_NO;
	}
	f->pid = strtol(value, NULL, 10);
	return MHD_YES;
}

/* user= is the name or the uid */
static bool user_matches(const char *want, const char *name, uid_t uid)
{
	if (strcmp(want, name) == 0)
		return true;
	char num[16];
	snprintf(num, sizeof num, "%u", (unsigned)uid);
	return strcmp(want, num) == 0;
}

/* ---- /sd ----------------------------------------------------------------------- */

/* The HTTP status, and in *body (malloc'd) the JSON or, for a 400, its one
 * line without the newline; *body NULL when memory ran out. */
static unsigned fleet_sd(struct MHD_Connection *c, serve_peer_t *peer, char **body, size_t *len)
{
	*body = NULL;
	*len = 0;
	sd_filter_t f = { .pid = -1 };
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, sd_arg, &f);
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	if (f.bad[0] == 0 && !host_addr(host)) {
		char safe[64];
		snprintf(f.bad, sizeof f.bad,
		    host ? "the Host '%s' is no HOST:PORT to scrape"
		         : "a Host header is needed: it is the targets' address",
		    host ? out_safe(host, safe, 40) : "");
	}
	if (f.bad[0]) {
		*body = strdup(f.bad);
		*len = *body ? strlen(*body) : 0;
		return MHD_HTTP_BAD_REQUEST;
	}
	FILE *out = open_memstream(body, len);
	if (out == NULL)
		return MHD_HTTP_INTERNAL_SERVER_ERROR;
	size_t n;
	serve_row_t *rows = serve_rows(&n);
	json_t j;
	json_begin(&j, out, JSON_PRETTY);
	json_arr(&j, NULL);
	for (size_t i = 0; i < n; i++) {
		const serve_row_t *r = &rows[i];
		char prog[256], pid[16];
		if (!access_owner_ok(peer, r->owner) || (f.pid > 0 && r->pid != f.pid) ||
		    (f.user && !user_matches(f.user, r->user, r->uid)) || (f.unit && strcmp(f.unit, r->unit) != 0) ||
		    (f.container && strcmp(f.container, r->container) != 0))
			continue;
		program(r->pid, r->command, prog, sizeof prog);
		if (f.command && strcmp(f.command, prog) != 0)
			continue;
		snprintf(pid, sizeof pid, "%d", r->pid);
		json_obj(&j, NULL);
		json_arr(&j, "targets");
		json_str(&j, NULL, host);
		json_end(&j);
		json_obj(&j, "labels");
		json_str(&j, "__metrics_path__", "/metrics");
		json_str(&j, "__param_pid", pid);
		json_str(&j, "pid", pid);
		json_str(&j, "user", r->user);
		/* an empty label is no label to Prometheus: left out */
		if (r->unit[0])
			json_str(&j, "unit", r->unit);
		if (r->container[0])
			json_str(&j, "container", r->container);
		json_str(&j, "command", prog);
		json_end(&j);
		json_end(&j);
	}
	json_end(&j);
	free(rows);
	if (fclose(out) != 0 || *body == NULL) {
		free(*body);
		*body = NULL;
		return MHD_HTTP_INTERNAL_SERVER_ERROR;
	}
	return MHD_HTTP_OK;
}

enum MHD_Result fleet_serve(struct MHD_Connection *c, serve_peer_t *peer)
{
	char *body;
	size_t len;
	unsigned status = fleet_sd(c, peer, &body, &len);
	if (body == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	enum MHD_Result ok = status == MHD_HTTP_OK ? respond_buf(c, status, "application/json", body, len)
	                                           : respond_err(c, status, "%s", body);
	free(body);
	return ok;
}
