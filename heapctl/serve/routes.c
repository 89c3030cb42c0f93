/*
 * heapctl/serve/routes.c - the URL table: which file answers which path,
 * and what a request must be before it gets there (a loopback Host, GET or
 * HEAD, POST for /control with the token or on a Unix socket, the token
 * for reads beyond loopback).  The requester is looked up (access.c) only
 * for the paths whose answer carries an address, a path or a profile.
 * index_text is what / lists in text and `heapctl help serve` prints.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <string.h>

#include "cli/cli.h"
#include "serve.h"

static const char index_text[] =
    "heapctl serve\n\n"
    "/                           the web page: processes, plots, profiles, buttons, the archive\n"
    "/?pid=N                     one process's page: its user, unit, counters, plot, downloads,\n"
    "                            buttons, archived dumps and recent events\n"
    "/metrics                    counters of every process (Prometheus text or OpenMetrics);\n"
    "                            ?pid=N: that process's alone\n"
    "/targets                    the processes, as JSON\n"
    "/sd                         Prometheus HTTP service discovery (http_sd_configs): a target\n"
    "                            of each process you may profile, with pid, user, unit,\n"
    "                            container and command labels and __param_pid; narrowed by\n"
    "                            ?user=, unit=, container=, command=, pid= (exact match)\n"
    "/debug/pprof/heap?pid=N     a heap profile taken now (gzipped profile.proto);\n"
    "                            &seconds=S: the growth over S seconds; &debug=1: text\n"
    "/debug/pprof/allocs?pid=N   the same, alloc_space first (404 and why without prof_accum:true)\n"
    "/flame?pid=N                its flame graph (SVG); /flame?file=GROUP/NAME.heap: an archived one's\n"
    "/top?file=GROUP/NAME.heap   an archived dump's text top; &base=GROUP/NAME.heap: the difference\n"
    "/plot?pid=N                 allocated, resident and high-water over the last hour (SVG);\n"
    "                            &parts=1: where its resident memory goes, stacked (heapctl explain)\n"
    "/archive                    the archived dumps (--archive), newest first, as JSON\n"
    "/archive/GROUP/FILE         one of them, or the pprof beside it\n"
    "/events                     the processes' events as heapctl watch --json prints them\n"
    "                            (text/event-stream when asked; ?since=0: the last 1024 too)\n"
    "POST /control/on?pid=N      sampling on; also off, dump (to its prof.prefix, so\n"
    "                            archived), set?pid=N&NAME=VALUE; with the token, or on\n"
    "                            a Unix socket for the requester's own processes\n"
    "\nWithout the token a local requester sees the profiles, events and archived dumps\n"
    "of the processes whose /proc/PID/maps she could read (/sd lists those); /metrics and\n"
    "/targets list all.\n";

/* 405: text (a constant), and the methods the path allows */
static enum MHD_Result not_allowed(struct MHD_Connection *c, const char *text, const char *allow)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
	MHD_destroy_response(r);
	return ok;
}

enum MHD_Result routes_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **state)
{
	(void)cls;
	(void)version;
	(void)upload;
	lim_request(c);
	if (!listen_host_ok(c))
		return respond_err(c, MHD_HTTP_FORBIDDEN,
		    "this daemon answers to a loopback Host only (127.0.0.1, "
		    "localhost, [::1])");
	bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
	bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
	const char *control = strncmp(url, "/control/", 9) == 0 ? url + 9 : NULL;
	if (control &&
	    (strcmp(control, "on") == 0 || strcmp(control, "off") == 0 || strcmp(control, "set") == 0 ||
	        strcmp(control, "dump") == 0) &&
	    post) {
		if (*upload_size) { /* a body is not read: arguments are in the query */
			*upload_size = 0;
			return MHD_YES;
		}
		if (*state == NULL) {
			*state = (void *)1;
			return MHD_YES;
		}
		/* the peer's own processes on the Unix socket, which no web
		 * page can reach; over TCP a page the user visits could post
		 * here in her name, and only the token says it is her */
		serve_peer_t peer;
		listen_peer(c, &peer);
		if (!listen_control_ok(&peer)) {
			if (!listen_has_token())
				return respond_err(c, MHD_HTTP_FORBIDDEN,
				    "control over HTTP needs serve --token-file FILE");
			return listen_unauthorized(c);
		}
		return control_serve(c, control, &peer);
	}
	if (control)
		return not_allowed(c, "control is POST only\n", "POST");
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && !head) {
		if (*upload_size) { /* take the body; answer at its end */
			*upload_size = 0;
			return MHD_YES;
		}
		return not_allowed(c, "only GET\n", "GET, HEAD");
	}
	if (*state == NULL) { /* headers only so far */
		*state = (void *)1;
		return MHD_YES;
	}
	if (!listen_may_read(c))
		return listen_unauthorized(c);
	/* counters, as visible as /proc/PID/stat: to anyone who gets here */
	if (strcmp(url, "/metrics") == 0) {
		long pid = query_num(c, "pid", INT_MAX);
		if (pid == -2 || pid == 0)
			return respond_err(c, MHD_HTTP_BAD_REQUEST, "pid must be a process id");
		return metrics_serve(c, pid);
	}
	if (strcmp(url, "/targets") == 0)
		return metrics_targets(c);
	if (strcmp(url, "/plot") == 0)
		return page_serve_plot(c);
	if (strcmp(url, "/debug/pprof/") == 0)
		return respond_buf(c, MHD_HTTP_OK, "text/plain; charset=utf-8", index_text, sizeof index_text - 1);
	/* what carries an address, a path or a profile: the requester's own
	 * (looked up for these only: a bad path costs no look-up) */
	static const char *const own[] = { "/events", "/debug/pprof/heap", "/debug/pprof/allocs", "/flame", "/top", "/",
		"/archive", "/sd" };
	bool routed = strncmp(url, "/archive/", 9) == 0;
	for (size_t i = 0; !routed && i < sizeof own / sizeof own[0]; i++)
		routed = strcmp(url, own[i]) == 0;
	if (!routed)
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such endpoint: see /");
	serve_peer_t peer;
	listen_peer(c, &peer);
	if (strcmp(url, "/events") == 0)
		return events_serve(c, &peer);
	if (strcmp(url, "/debug/pprof/heap") == 0)
		return profiles_live(c, false, false, &peer);
	if (strcmp(url, "/debug/pprof/allocs") == 0)
		return profiles_live(c, true, false, &peer);
	if (strcmp(url, "/flame") == 0)
		return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "file")
		    ? profiles_archived(c, true, &peer)
		    : profiles_live(c, false, true, &peer);
	if (strcmp(url, "/top") == 0)
		return profiles_archived(c, false, &peer);
	if (strcmp(url, "/") == 0)
		return page_serve(c, &peer);
	if (strcmp(url, "/archive") == 0)
		return arch_serve_list(c, &peer);
	if (strcmp(url, "/sd") == 0)
		return fleet_serve(c, &peer);
	return arch_serve_file(c, url + 9, &peer);
}

const char *routes_index(void)
{
	return index_text;
}
