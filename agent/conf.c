/*
 * agent/conf.c - configuration from MALLOC_CONF and HEAPCTL_CONF.
 *
 * jemalloc's syntax ("name:value,name:value") and jemalloc's option names
 * and defaults; heapctl's own options follow the same style.  MALLOC_CONF
 * is read first and HEAPCTL_CONF second, so a name set in both takes
 * HEAPCTL_CONF's value; neither is read in a secure-execution process.  A malformed or unknown pair is reported on stderr
 * with the reason and ignored, as jemalloc does.
 *
 * This runs inside the first malloc: no allocation, no stdio.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "agent.h"

hc_opts_t hc_opt = {
	.prof = false,
	.prof_active = true,
	.prof_prefix = "jeprof",
	.lg_prof_sample = 19,
	.lg_prof_interval = -1,
	.prof_thread_active_init = true,
	.prof_unwind = HC_UNWIND_LIBUNWIND,
	.prof_gdump_pct = 10,
	.prof_gdump_min_ms = 1000,
	.dirty_decay_ms = 1000,
	.control = true,
	.control_refresh_ms = 1000,
};

void hc_say(const char *first, ...)
{
	char line[1024];
	size_t len = 0;
	va_list ap;
	va_start(ap, first);
	for (const char *s = first; s; s = va_arg(ap, const char *)) {
		size_t n = strlen(s);
		if (n > sizeof line - 2 - len - 11)
			n = sizeof line - 2 - len - 11;
		memcpy(line + len, s, n);
		len += n;
	}
	va_end(ap);
	char out[1040];
	memcpy(out, "<heapctl>: ", 11);
	memcpy(out + 11, line, len);
	out[11 + len] = '\n';
	int saved = errno;
	ssize_t r = write(STDERR_FILENO, out, 12 + len);
	(void)r;
	errno = saved;
}

static const char *const unwinder_names[] = {
	[HC_UNWIND_FP] = "fp", [HC_UNWIND_LIBUNWIND] = "libunwind",
	[HC_UNWIND_LIBGCC] = "libgcc",
};

const char *hc_unwinder_name(hc_unwinder_t u) { return unwinder_names[u]; }

bool hc_conf_parse_unwinder(const char *s, hc_unwinder_t *out)
{
	for (unsigned i = 0; i < sizeof unwinder_names / sizeof unwinder_names[0]; i++) {
		if (strcmp(s, unwinder_names[i]) == 0) {
			*out = (hc_unwinder_t)i;
			return true;
		}
	}
	return false;
}

typedef enum { K_BOOL, K_INT, K_UINT64, K_STR, K_UNWIND } kind_t;

typedef struct {
	const char *name;
	kind_t kind;
	void *dst;
	long long min, max;           /* K_INT range */
	size_t cap;                   /* K_STR capacity */
} opt_def_t;

static unsigned opt_u_lg_sample, opt_u_gdump_pct, opt_u_gdump_ms, opt_u_timer, opt_u_refresh;
static long long opt_ll_lg_interval, opt_ll_decay;

static const opt_def_t defs[] = {
	{ "prof", K_BOOL, &hc_opt.prof, 0, 0, 0 },
	{ "prof_active", K_BOOL, &hc_opt.prof_active, 0, 0, 0 },
	{ "prof_prefix", K_STR, hc_opt.prof_prefix, 0, 0, HC_PREFIX_MAX },
	{ "lg_prof_sample", K_INT, &opt_u_lg_sample, 0, 62, 0 },
	{ "lg_prof_interval", K_INT, &opt_ll_lg_interval, -1, 62, 0 },
	{ "prof_gdump", K_BOOL, &hc_opt.prof_gdump, 0, 0, 0 },
	{ "prof_final", K_BOOL, &hc_opt.prof_final, 0, 0, 0 },
	{ "prof_leak", K_BOOL, &hc_opt.prof_leak, 0, 0, 0 },
	{ "prof_leak_error", K_BOOL, &hc_opt.prof_leak_error, 0, 0, 0 },
	{ "prof_accum", K_BOOL, &hc_opt.prof_accum, 0, 0, 0 },
	{ "prof_thread_active_init", K_BOOL, &hc_opt.prof_thread_active_init, 0, 0, 0 },
	{ "prof_unwind", K_UNWIND, &hc_opt.prof_unwind, 0, 0, 0 },
	{ "prof_gdump_pct", K_INT, &opt_u_gdump_pct, 0, 100000, 0 },
	{ "prof_gdump_min_ms", K_INT, &opt_u_gdump_ms, 0, 86400000, 0 },
	{ "prof_timer_s", K_INT, &opt_u_timer, 0, 86400 * 365, 0 },
	{ "prof_threshold", K_UINT64, &hc_opt.prof_threshold, 0, 0, 0 },
	{ "prof_time_names", K_BOOL, &hc_opt.prof_time_names, 0, 0, 0 },
	{ "prof_peak", K_BOOL, &hc_opt.prof_peak, 0, 0, 0 },
	{ "prof_thread_names", K_BOOL, &hc_opt.prof_thread_names, 0, 0, 0 },
	{ "dirty_decay_ms", K_INT, &opt_ll_decay, 0, 3600000, 0 },
	{ "control", K_BOOL, &hc_opt.control, 0, 0, 0 },
	{ "control_refresh_ms", K_INT, &opt_u_refresh, 10, 3600000, 0 },
};

/* Integers: decimal, optional sign; K_UINT64 also takes a k/M/G suffix
 * (powers of 1024).  false if malformed or out of range. */
static bool parse_int(const char *v, size_t len, long long *out)
{
	char buf[32];
	if (len == 0 || len >= sizeof buf)
		return false;
	memcpy(buf, v, len);
	buf[len] = 0;
	char *end;
	errno = 0;
	long long x = strtoll(buf, &end, 10);
	if (errno || *end || end == buf)
		return false;
	*out = x;
	return true;
}

static bool parse_size(const char *v, size_t len, uint64_t *out)
{
	uint64_t mult = 1;
	if (len > 0) {
		switch (v[len - 1]) {
		case 'k': case 'K': mult = 1ULL << 10; len--; break;
		case 'm': case 'M': mult = 1ULL << 20; len--; break;
		case 'g': case 'G': mult = 1ULL << 30; len--; break;
		}
	}
	long long x;
	if (!parse_int(v, len, &x) || x < 0 || (uint64_t)x > UINT64_MAX / mult)
		return false;
	*out = (uint64_t)x * mult;
	return true;
}

static void bad(const char *src, const char *k, size_t klen, const char *v,
    size_t vlen, const char *why)
{
	char pair[256];
	size_t n = 0;
	for (size_t i = 0; i < klen && n < 200; i++)
		pair[n++] = k[i];
	if (v) {
		pair[n++] = ':';
		for (size_t i = 0; i < vlen && n < 250; i++)
			pair[n++] = v[i];
	}
	pair[n] = 0;
	hc_say(src, ": ignoring \"", pair, "\": ", why, NULL);
}

static void apply(const char *src, const char *k, size_t klen, const char *v, size_t vlen)
{
	const opt_def_t *d = NULL;
	for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
		if (strlen(defs[i].name) == klen && memcmp(defs[i].name, k, klen) == 0) {
			d = &defs[i];
			break;
		}
	}
	if (d == NULL) {
		bad(src, k, klen, v, vlen, "unknown option");
		return;
	}
	long long x;
	switch (d->kind) {
	case K_BOOL:
		if (vlen == 4 && memcmp(v, "true", 4) == 0)
			*(bool *)d->dst = true;
		else if (vlen == 5 && memcmp(v, "false", 5) == 0)
			*(bool *)d->dst = false;
		else
			bad(src, k, klen, v, vlen, "expected true or false");
		return;
	case K_INT:
		if (!parse_int(v, vlen, &x) || x < d->min || x > d->max) {
			char why[96] = "expected an integer from ";
			char *e = why + strlen(why);
			if (d->min < 0) {
				*e++ = '-';
				e = hc_fmt_u64(e, (uint64_t)-d->min);
			} else {
				e = hc_fmt_u64(e, (uint64_t)d->min);
			}
			memcpy(e, " to ", 4);
			hc_fmt_u64(e + 4, (uint64_t)d->max);
			bad(src, k, klen, v, vlen, why);
			return;
		}
		if (d->dst == &opt_ll_lg_interval || d->dst == &opt_ll_decay)
			*(long long *)d->dst = x;
		else
			*(unsigned *)d->dst = (unsigned)x;
		return;
	case K_UINT64:
		if (!parse_size(v, vlen, (uint64_t *)d->dst))
			bad(src, k, klen, v, vlen, "expected a byte count (suffix k, M or G allowed)");
		return;
	case K_STR:
		if (vlen == 0 || vlen >= d->cap) {
			bad(src, k, klen, v, vlen, vlen ? "value too long" : "empty value");
			return;
		}
		memcpy(d->dst, v, vlen);
		((char *)d->dst)[vlen] = 0;
		return;
	case K_UNWIND: {
		char buf[16];
		if (vlen >= sizeof buf) {
			bad(src, k, klen, v, vlen, "expected fp, libunwind or libgcc");
			return;
		}
		memcpy(buf, v, vlen);
		buf[vlen] = 0;
		if (!hc_conf_parse_unwinder(buf, (hc_unwinder_t *)d->dst))
			bad(src, k, klen, v, vlen, "expected fp, libunwind or libgcc");
		return;
	}
	}
}

static void parse(const char *src, const char *s)
{
	while (s && *s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		if (len > 0) {
			const char *colon = memchr(s, ':', len);
			if (colon == NULL)
				bad(src, s, len, NULL, 0, "expected name:value");
			else
				apply(src, s, (size_t)(colon - s), colon + 1,
				    len - (size_t)(colon - s) - 1);
		}
		s = end ? end + 1 : NULL;
	}
}

void hc_conf_init(void)
{
	opt_u_lg_sample = hc_opt.lg_prof_sample;
	opt_ll_lg_interval = hc_opt.lg_prof_interval;
	opt_u_gdump_pct = hc_opt.prof_gdump_pct;
	opt_u_gdump_ms = hc_opt.prof_gdump_min_ms;
	opt_u_timer = hc_opt.prof_timer_s;
	opt_ll_decay = hc_opt.dirty_decay_ms;
	opt_u_refresh = hc_opt.control_refresh_ms;
	/* A set-user-ID, set-group-ID or file-capability program runs for a
	 * user with less privilege than it has: nothing that user sets may
	 * make it write files or change how it exits (as jemalloc, which reads
	 * MALLOC_CONF with secure_getenv), and the control segment is not
	 * published, since its commands write files with the program's
	 * privileges.  The library's defaults are all that is left. */
	if (getauxval(AT_SECURE)) {
		hc_opt.control = false;
		if (getenv("MALLOC_CONF") || getenv("HEAPCTL_CONF"))
			hc_say("secure execution (set-user-ID, set-group-ID or file capabilities): "
			    "MALLOC_CONF and HEAPCTL_CONF are ignored, and heapctl cannot attach", NULL);
		return;
	}
	parse("MALLOC_CONF", secure_getenv("MALLOC_CONF"));
	parse("HEAPCTL_CONF", secure_getenv("HEAPCTL_CONF"));
	hc_opt.lg_prof_sample = opt_u_lg_sample;
	hc_opt.lg_prof_interval = (int)opt_ll_lg_interval;
	hc_opt.prof_gdump_pct = opt_u_gdump_pct;
	hc_opt.prof_gdump_min_ms = opt_u_gdump_ms;
	hc_opt.prof_timer_s = opt_u_timer;
	hc_opt.dirty_decay_ms = opt_ll_decay;
	hc_opt.control_refresh_ms = opt_u_refresh;
}
