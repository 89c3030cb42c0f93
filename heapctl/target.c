/*
 * heapctl/target.c - choosing the target process, one command round trip,
 * and the output helpers the commands share.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_CANDIDATES 4096

int cli_target(cli_args_t *a, hc_shm_target_t *t)
{
	char err[512];
	if (a->pid) {
		int code = hc_shm_open(a->pid, t, err, sizeof err);
		if (code)
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
			*t = c;           /* kept open: the answer if it stays the only one */
		else
			hc_shm_close(&c);
		if (used + 80 < sizeof list)
			used += (size_t)snprintf(list + used, sizeof list - used, "%s%d (%s)",
			    used ? ", " : "", pids[i], cmd);
	}
	free(pids);
	if (found == 0)
		return cli_err(HC_EXIT_PICK,
		    "no process running libheapctl.so is visible; start one with LD_PRELOAD=/path/to/libheapctl.so");
	if (found > 1) {
		hc_shm_close(t);
		return cli_err(HC_EXIT_PICK, "%d processes run libheapctl.so: %s; say which with a PID",
		    found, list);
	}
	a->pid = t->pid;
	return 0;
}

int cli_call(cli_args_t *a, hc_shm_target_t *t, const hc_shm_req_t *req, hc_shm_rep_t *rep)
{
	char err[512];
	int code = hc_shm_call(t, req, rep, a->timeout_ns, err, sizeof err);
	if (code)
		return cli_err(code, "%s", err);
	char text[4 * HC_SHM_PATH_MAX];
	out_safe(rep->text, text, sizeof text);
	switch (rep->code) {
	case HC_REP_OK:
		return 0;
	case HC_REP_INVALID:
		return cli_err(HC_EXIT_USAGE, "process %d: %s", t->pid, text);
	case HC_REP_NOPROF:
		return cli_err(HC_EXIT_FAILED, "process %d: nothing to dump: %s (run 'heapctl on %d' first)",
		    t->pid, text, t->pid);
	case HC_REP_BADREQ:
		return cli_err(HC_EXIT_ABI, "process %d did not understand the request: %s", t->pid, text);
	default:
		return cli_err(HC_EXIT_FAILED, "process %d: %s", t->pid, text);
	}
}

static bool same_file(const char *a, const char *b)
{
	struct stat x, y;
	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

bool cli_same_view(const hc_shm_target_t *t)
{
	char ns[64], root[64];
	snprintf(ns, sizeof ns, "/proc/%d/ns/mnt", t->pid);
	snprintf(root, sizeof root, "/proc/%d/root/", t->pid);
	return same_file("/proc/self/ns/mnt", ns) && same_file("/", root);
}

/* A path that names the same file on our side as the target's path does
 * on its side outlives the process (a StateDirectory= of a sandboxed
 * service is the host's /var/lib/...); /proc/PID/root does not. */
void cli_local_path(const hc_shm_target_t *t, const char *path, char *out, size_t len)
{
	if (path[0] != '/' || cli_same_view(t)) {
		snprintf(out, len, "%s", path);
		return;
	}
	snprintf(out, len, "/proc/%d/root%s", t->pid, path);
	struct stat a, b;
	if (stat(out, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		snprintf(out, len, "%s", path);
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

/* ---- output helpers ----------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (1-4), or 0: overlong forms,
 * surrogates and code points past U+10FFFF are not valid. */
static int utf8_len(const unsigned char *p)
{
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
	    (c == 0xf4 && p[1] > 0x8f))
		return 0;
	return n;
}

/* JSON strings: escapes as JSON needs, and valid UTF-8 only (a byte that
 * is not part of valid UTF-8, as a target may put in a prefix, becomes
 * U+FFFD). */
void out_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		switch (*p) {
		case '"': fputs("\\\"", f); p++; continue;
		case '\\': fputs("\\\\", f); p++; continue;
		case '\n': fputs("\\n", f); p++; continue;
		case '\t': fputs("\\t", f); p++; continue;
		case '\r': fputs("\\r", f); p++; continue;
		}
		if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p++);
			continue;
		}
		int n = utf8_len(p);
		if (n == 0) {
			fputs("\\ufffd", f);
			p++;
			continue;
		}
		fwrite(p, 1, (size_t)n, f);
		p += n;
	}
	fputc('"', f);
}

/* Text that came from a target (or a file) made safe for a terminal:
 * control characters and bytes that are not valid UTF-8 become \xNN, so
 * no escape sequence, bell or line break of someone else's reaches it. */
const char *out_safe(const char *s, char *buf, size_t len)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < len;) {
		int n = *p < 0x20 || *p == 0x7f ? 0 : utf8_len(p);
		if (n == 0) {
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", *p++);
			continue;
		}
		if (o + (size_t)n >= len)
			break;
		memcpy(buf + o, p, (size_t)n);
		o += (size_t)n;
		p += n;
	}
	buf[o] = 0;
	return buf;
}

const char *out_bytes_f(double v, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	unsigned u = 0;
	/* step up before rounding would print "1024.0 KiB" */
	while (u < 5 && v >= (u ? 1023.95 : 1023.5)) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

const char *out_bytes(uint64_t v, char *buf, size_t len)
{
	return out_bytes_f((double)v, buf, len);
}

const char *out_time(uint64_t ns, char *buf, size_t len)
{
	time_t s = (time_t)(ns / 1000000000ull);
	struct tm tm;
	gmtime_r(&s, &tm);
	char day[32];
	strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%03uZ", day, (unsigned)(ns / 1000000ull % 1000));
	return buf;
}

/* The command line from /proc (as heapctl sees it), else the segment's. */
void out_cmdline(int pid, const hc_shm_t *seg, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
	FILE *f = fopen(path, "re");
	size_t n = 0;
	if (f) {
		n = fread(buf, 1, len - 1, f);
		fclose(f);
	}
	if (n == 0) {
		snprintf(buf, len, "%.*s", (int)sizeof seg->hdr.comm, seg->hdr.comm);
		return;
	}
	buf[n] = 0;
	for (size_t i = 0; i < n; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = 0;
}
