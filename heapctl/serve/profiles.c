/*
 * heapctl/serve/profiles.c - the profiles: /debug/pprof/heap and allocs (a
 * profile taken now, or its growth over ?seconds=, as gzipped
 * profile.proto or text with ?debug=1: Go's net/http/pprof conventions),
 * /flame?pid=N (its flame graph), and /top and /flame?file= of archived
 * dumps (or the difference of two).  A profile is `heapctl dump PID -o
 * FILE` and `heapctl report FILE -p PID` run as children of the daemon in
 * a work directory of the request's own: the target writes the dump on its
 * control thread (it is never stopped), and a symbolizer that fails or runs
 * out of memory takes down one request, not the daemon.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "serve.h"

#define MAX_SECONDS 600 /* ?seconds= at most, as a delta          */

static unsigned requests; /* for unique work directory names        */

static void remove_work(const char *dir)
{
	static const char *const names[] = { "a.heap", "b.heap", "out.pb.gz", "out.svg" };
	char p[PATH_MAX + 96];
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

enum { OUT_PPROF, OUT_TEXT, OUT_SVG };

/* A profile's start: one of its peer's LIM_PROFILE (limits.c), and a work
 * directory of this request's own under the daemon's; false after the
 * error response was queued (in *res). */
static bool work_dir(struct MHD_Connection *c, char *dir, size_t len, enum MHD_Result *res)
{
	if (!lim_take(c, LIM_PROFILE)) {
		*res = lim_refuse(c, LIM_PROFILE);
		return false;
	}
	snprintf(dir, len, "%s/req.%u.XXXXXX", serve_conf.work, __atomic_add_fetch(&requests, 1, __ATOMIC_RELAXED));
	if (mkdtemp(dir) != NULL)
		return true;
	*res = respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot make a work directory for the request: %s",
	    strerror(errno));
	return false;
}

/* Report on file (less base if not NULL) into the response: pprof, text or
 * SVG.  The dump's paths are its writer's: with pid > 0 the binaries are
 * read as the live process maps them (report --mapped), else (an archived
 * dump) by those paths; every file with the rights of the process's user,
 * who owns an archived dump (--as-user).  title names it in the
 * requester's terms (the flame graph's title, the pprof's comment, every
 * message), never by the daemon's paths.  dir is the request's work
 * directory, removed here. */
static enum MHD_Result respond_report(struct MHD_Connection *c, const char *dir, const char *file, const char *base,
    int pid, int out_kind, bool allocs, const char *title)
{
	char out[PATH_MAX + 96], pids[16], err[1024], uid[16];
	snprintf(out, sizeof out, "%s/%s", dir, out_kind == OUT_SVG ? "out.svg" : "out.pb.gz");
	snprintf(pids, sizeof pids, "%d", pid);
	struct stat fs;
	unsigned owner = lstat(file, &fs) == 0 ? (unsigned)fs.st_uid : 65534u;
	if (pid > 0) /* its user's process, not one that has its pid since */
		owner = targets_uid(pid);
	snprintf(uid, sizeof uid, "%u", owner);
	char *rep[20];
	int n = 0, rc;
	enum MHD_Result res;
	rep[n++] = "report";
	rep[n++] = (char *)file;
	if (base) {
		rep[n++] = "--base";
		rep[n++] = (char *)base;
	}
	if (pid > 0) {
		rep[n++] = "-p";
		rep[n++] = pids;
		rep[n++] = "--mapped";
	}
	rep[n++] = "--as-user";
	rep[n++] = uid;
	rep[n++] = "--title";
	rep[n++] = (char *)title;
	if (allocs)
		rep[n++] = "--alloc_space";
	if (out_kind == OUT_TEXT) {
		rep[n] = NULL;
		enum { TEXT_MAX = 1 << 20 };
		char *text = malloc(TEXT_MAX);
		if (text == NULL) {
			remove_work(dir);
			return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		}
		text[0] = 0;
		rc = serve_run_self(rep, text, TEXT_MAX, err, sizeof err, 300000);
		/* an empty profile is a profile: 200, with report's "nothing
		 * to show: ..." (said on its stderr) as its text */
		if (rc == 0 && text[0] == 0)
			serve_scrub(err, title, text, TEXT_MAX);
		if (rc == 0 && text[0] && text[strlen(text) - 1] != '\n' && strlen(text) + 1 < TEXT_MAX)
			strcat(text, "\n");
		res = rc == 0 ? respond_buf(c, MHD_HTTP_OK, "text/plain; charset=utf-8", text, strlen(text))
		              : respond_child(c, rc, err, title, "heapctl report failed");
		free(text);
		remove_work(dir);
		return res;
	}
	rep[n++] = out_kind == OUT_SVG ? "--svg" : "--pprof";
	rep[n++] = out;
	rep[n] = NULL;
	if ((rc = serve_run_self(rep, NULL, 0, err, sizeof err, 300000)) != 0) {
		remove_work(dir);
		return respond_child(c, rc, err, title, "heapctl report failed");
	}
	int fd = open(out, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0) {
		snprintf(err, sizeof err, "cannot read the profile: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		remove_work(dir);
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s", err);
	}
	remove_work(dir); /* the open fd keeps the file */
	struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)sb.st_size, fd);
	if (r == NULL) {
		close(fd);
		return MHD_NO;
	}
	if (out_kind == OUT_SVG) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "image/svg+xml");
		/* the flame graph's own script, and nothing from elsewhere */
		MHD_add_response_header(r, "Content-Security-Policy",
		    "default-src 'none'; script-src 'unsafe-inline'; "
		    "style-src 'unsafe-inline'");
	} else {
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
		MHD_add_response_header(r, "Content-Disposition",
		    allocs ? "attachment; filename=\"allocs\"" : "attachment; filename=\"heap\"");
	}
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	res = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return res;
}

/* Does a dump carry allocation counts?  Its totals line "  t*: N: B
 * [AN: AB]" has AN 0 while N is not when the process runs without
 * prof_accum (jemalloc's shape too); a dump of nothing at all has them,
 * as far as anyone can tell, and is an empty profile. */
static bool has_alloc_counts(const char *file)
{
	char head[512];
	unsigned long long n, b, an, ab;
	ssize_t got = hc_shm_read_file(file, head, sizeof head);
	const char *t = got > 0 ? strstr(head, "\n  t*: ") : NULL;
	if (t == NULL || sscanf(t, "\n  t*: %llu: %llu [%llu: %llu]", &n, &b, &an, &ab) != 4)
		return true; /* not ours to judge: report says what it finds */
	return !(n > 0 && an == 0);
}

/* /debug/pprof/heap and allocs (pprof, or text with debug), /flame?pid=N */
enum MHD_Result profiles_live(struct MHD_Connection *c, bool allocs, bool svg, serve_peer_t *peer)
{
	char why[1024];
	unsigned status;
	int pid = targets_request_pid(c, peer, &status, why, sizeof why);
	if (pid < 0)
		return respond_err(c, status, "%s", why);
	long seconds = query_num(c, "seconds", MAX_SECONDS);
	long debug = query_num(c, "debug", 9);
	if (seconds == -2)
		return respond_err(c, MHD_HTTP_BAD_REQUEST, "seconds must be a whole number from 0 to %d", MAX_SECONDS);
	if (debug == -2)
		return respond_err(c, MHD_HTTP_BAD_REQUEST, "debug must be a small number");
	char dir[PATH_MAX + 64];
	enum MHD_Result res;
	if (!work_dir(c, dir, sizeof dir, &res))
		return res;
	char a[PATH_MAX + 96], b[PATH_MAX + 96], pids[16], tmo[32], err[1024], title[400];
	targets_title(pid, title, sizeof title);
	snprintf(a, sizeof a, "%s/a.heap", dir);
	snprintf(b, sizeof b, "%s/b.heap", dir);
	snprintf(pids, sizeof pids, "%d", pid);
	snprintf(tmo, sizeof tmo, "%.3f", (double)serve_conf.timeout_ns / 1e9);
	uint64_t dump_ms = serve_conf.timeout_ns / 1000000 + 30000;
	int rc = 0;
	/* with seconds, the first dump is the base and the profile the delta */
	if (seconds > 0) {
		char *d1[] = { "dump", pids, "-o", a, "--timeout", tmo, NULL };
		if ((rc = serve_run_self(d1, NULL, 0, err, sizeof err, dump_ms)) != 0)
			goto failed;
		int why_not = lim_wait(c, seconds);
		if (why_not) { /* no one to answer, or no time to */
			remove_work(dir);
			return why_not == 1 ? MHD_NO
			                    : respond_err(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the daemon is stopping");
		}
	}
	char *d2[] = { "dump", pids, "-o", b, "--timeout", tmo, NULL };
	if ((rc = serve_run_self(d2, NULL, 0, err, sizeof err, dump_ms)) != 0)
		goto failed;
	if (allocs && !has_alloc_counts(b)) {
		remove_work(dir);
		return respond_err(c, MHD_HTTP_NOT_FOUND,
		    "%s keeps no allocation counts (allocs): it was started without "
		    "prof_accum:true, which cannot be turned on while it runs; start it with HEAPCTL_CONF=prof_accum:true "
		    "(heapctl run --conf prof_accum:true, heapctl enable UNIT --conf prof_accum:true, heapctl inject "
		    "--conf prof_accum:true); /debug/pprof/heap?pid=%d has what it holds now",
		    title, pid);
	}
	if (seconds > 0)
		snprintf(title + strlen(title), sizeof title - strlen(title), ", growth over %ld s", seconds);
	return respond_report(c, dir, b, seconds > 0 ? a : NULL, pid,
	    svg             ? OUT_SVG
	        : debug > 0 ? OUT_TEXT
	                    : OUT_PPROF,
	    allocs, title);
failed:
	remove_work(dir);
	return respond_child(c, rc, err, title, "heapctl failed");
}

/* An archived file named by query argument arg ("GROUP/NAME.heap") as a
 * path; false if absent (*given false), not one, or not one the requester
 * may read (*refused). */
static bool archived_arg(struct MHD_Connection *c, const char *arg, char *path, size_t len, bool *given,
    serve_peer_t *peer, bool *refused)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, arg);
	*given = v != NULL;
	*refused = false;
	if (v == NULL || !arch_enabled())
		return false;
	const char *slash = strchr(v, '/');
	char group[256], name[256];
	size_t gl = slash ? (size_t)(slash - v) : 0, nl = slash ? strlen(slash + 1) : 0;
	if (!slash || gl == 0 || gl >= sizeof group || nl < 6 || nl >= sizeof name)
		return false;
	memcpy(group, v, gl);
	group[gl] = 0;
	strcpy(name, slash + 1);
	if (!arch_name_ok(group) || !arch_name_ok(name) || strcmp(name + nl - 5, ".heap") != 0)
		return false;
	snprintf(path, len, "%s/%s/%s", arch_dir(), group, name);
	struct stat st;
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	*refused = !access_owner_ok(peer, arch_owner(group, name));
	return !*refused;
}

/* /top?file=GROUP/NAME.heap[&base=...] (text), /flame?file=... (SVG):
 * an archived dump, or the difference of two. */
enum MHD_Result profiles_archived(struct MHD_Connection *c, bool svg, serve_peer_t *peer)
{
	char file[PATH_MAX + 600], base[PATH_MAX + 600];
	bool given, base_given, refused, base_refused;
	if (!archived_arg(c, "file", file, sizeof file, &given, peer, &refused))
		return respond_err(c,
		    refused     ? MHD_HTTP_FORBIDDEN
		        : given ? MHD_HTTP_NOT_FOUND
		                : MHD_HTTP_BAD_REQUEST,
		    refused     ? "archived dump: of a process you may not read"
		        : given ? "no such archived dump"
		                : "file=GROUP/NAME.heap (see /archive)");
	bool has_base = archived_arg(c, "base", base, sizeof base, &base_given, peer, &base_refused);
	if (base_refused)
		return respond_err(c, MHD_HTTP_FORBIDDEN, "archived dump (base): of a process you may not read");
	if (base_given && !has_base)
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such archived dump (base)");
	char dir[PATH_MAX + 64];
	enum MHD_Result res;
	if (!work_dir(c, dir, sizeof dir, &res))
		return res;
	/* its name in the archive ("GROUP/NAME.heap", checked above), the
	 * difference's "FILE - BASE" */
	char title[1200];
	snprintf(title, sizeof title, "%s%s%s", MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "file"),
	    has_base ? " - " : "", has_base ? MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "base") : "");
	return respond_report(c, dir, file, has_base ? base : NULL, 0, svg ? OUT_SVG : OUT_TEXT, false, title);
}
