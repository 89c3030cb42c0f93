/*
 * agent/conf.c - configuration from MALLOC_CONF and HEAPCTL_CONF.
 *
 * jemalloc's syntax ("name:value,name:value") and jemalloc's option names
 * and defaults; heapctl's own options follow the same style.  MALLOC_CONF
 * is read first and HEAPCTL_CONF second, so a name set in both takes
 * HEAPCTL_CONF's value; neither is read in a secure-execution process.  A malformed or unknown pair is reported on
 * stderr with the reason and ignored, as jemalloc does.
 *
 * This runs inside the first malloc: no allocation, no stdio.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "agent.h"

static void bad(const char *src, const char *k, size_t klen, const char *v, size_t vlen, const char *why)
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

/* jemalloc's names for options that heapctl has under its own */
static const struct {
	const char *jemalloc, *ours;
} aliases[] = {
	{ "prof_sys_thread_name", "prof_thread_names" },
};

/* jemalloc 5.3's options that heapctl has nothing for: a MALLOC_CONF
 * written for jemalloc is told so, rather than "unknown" */
static const char *const jemalloc_only[] = { "abort", "abort_conf", "background_thread", "bin_shards",
	"cache_oblivious", "confirm_conf", "dss", "hpa", "junk", "lg_extent_max_active_fit", "lg_tcache_max",
	"max_background_threads", "metadata_thp", "muzzy_decay_ms", "mutex_max_spin", "narenas", "oversize_threshold",
	"percpu_arena", "prof_stats", "prof_time_resolution", "prof_unbias", "retain", "slab_sizes", "stats_interval",
	"stats_interval_opts", "stats_print", "stats_print_opts", "tcache", "trust_madvise", "utrace", "xmalloc",
	"zero", "zero_realloc" };

static bool is(const char *name, const char *k, size_t klen)
{
	return strlen(name) == klen && memcmp(name, k, klen) == 0;
}

static const hc_shm_setting_t *option_find(const char *k, size_t klen)
{
	const hc_shm_setting_t *d = hc_shm_option_find(k, klen);
	for (unsigned i = 0; d == NULL && i < sizeof aliases / sizeof aliases[0]; i++)
		if (is(aliases[i].jemalloc, k, klen))
			d = hc_shm_option_find(aliases[i].ours, strlen(aliases[i].ours));
	return d;
}

static void apply(const char *src, const char *k, size_t klen, const char *v, size_t vlen)
{
	const hc_shm_setting_t *d = option_find(k, klen);
	if (d == NULL) {
		bool theirs = false;
		for (unsigned i = 0; i < sizeof jemalloc_only / sizeof jemalloc_only[0]; i++)
			theirs = theirs || is(jemalloc_only[i], k, klen);
		bad(src, k, klen, v, vlen,
		    theirs ? "jemalloc's option, which heapctl does not have" : "unknown option");
		return;
	}
	char text[HC_SHM_VALUE_MAX], why[160];
	hc_shm_value_t x;
	if (vlen >= sizeof text) {
		bad(src, k, klen, v, vlen, "value too long");
		return;
	}
	memcpy(text, v, vlen);
	text[vlen] = 0;
	if (!hc_shm_option_parse(d, text, &x, why, sizeof why)) {
		bad(src, k, klen, v, vlen, why);
		return;
	}
	hc_setting_configure((unsigned)(d - hc_shm_settings), &x);
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
				apply(src, s, (size_t)(colon - s), colon + 1, len - (size_t)(colon - s) - 1);
		}
		s = end ? end + 1 : NULL;
	}
}

/* The defaults of shm/hc_settings.def, through the same parser. */
void hc_conf_defaults(void)
{
	for (unsigned i = 0; i < HC_NSETTINGS; i++) {
		hc_shm_value_t x;
		char why[8];
		if (hc_shm_option_parse(&hc_shm_settings[i], hc_shm_settings[i].def, &x, why, sizeof why))
			hc_setting_configure(i, &x);
	}
}

/* heapctl inject: settings given by the injector replace the
 * environment's (the process's MALLOC_CONF belongs to its own malloc);
 * read by the next hc_conf_init, during the call that gave them. */
static const char *given_src, *given;

void hc_conf_source(const char *src, const char *s)
{
	given_src = src;
	given = s;
}

void hc_conf_init(void)
{
	if (given_src != NULL) {
		parse(given_src, given);
		given_src = given = NULL;
		return;
	}
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
			       "MALLOC_CONF and HEAPCTL_CONF are ignored, and heapctl cannot attach",
			    NULL);
		return;
	}
	parse("MALLOC_CONF", secure_getenv("MALLOC_CONF"));
	parse("HEAPCTL_CONF", secure_getenv("HEAPCTL_CONF"));
}
