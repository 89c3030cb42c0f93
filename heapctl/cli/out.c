/*
 * heapctl/cli/out.c - what every command (and the report engine, which
 * heapctl loads) prints through: the one-line error, JSON strings, text
 * made safe for a terminal, byte counts, times and command lines (and the
 * bounded read of a /proc file they come from).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

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

const char *cli_prog = "heapctl";

int cli_err(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", cli_prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return code;
}

/* JSON strings: escapes as JSON needs, and valid UTF-8 only (a byte that
 * is not part of valid UTF-8, as a target may put in a prefix, becomes
 * U+FFFD). */
void out_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			p++;
			continue;
		case '\\':
			fputs("\\\\", f);
			p++;
			continue;
		case '\n':
			fputs("\\n", f);
			p++;
			continue;
		case '\t':
			fputs("\\t", f);
			p++;
			continue;
		case '\r':
			fputs("\\r", f);
			p++;
			continue;
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

/* The daemon's page has this in JavaScript (fmt, heapctl/serve/page.c) for
 * the cells it refreshes: change both. */
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

/* The command line from /proc (as heapctl sees it), else the segment's
 * (seg NULL: the process's name from /proc, or ""). */
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
	if (n == 0 && seg) {
		snprintf(buf, len, "%.*s", (int)sizeof seg->hdr.comm, seg->hdr.comm);
		return;
	}
	if (n == 0) { /* a kernel thread, or a zombie */
		snprintf(path, sizeof path, "/proc/%d/comm", pid);
		if (hc_shm_read_file(path, buf, len) < 0)
			buf[0] = 0;
		buf[strcspn(buf, "\n")] = 0;
		return;
	}
	buf[n] = 0;
	for (size_t i = 0; i < n; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = 0;
}
