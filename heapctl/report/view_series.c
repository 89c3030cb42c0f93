/*
 * heapctl/report/view_series.c - `heapctl report --series`: the profiles of
 * a series (files, prefixes or a directory, in the order they were
 * written), each site's flat value in each, and how each site changed
 * (series.c ranks them) as text, JSON or a chart.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/json.h"
#include "report/command.h"

typedef struct sdump_s {
	const char *path;
	int64_t mtime;
	uint64_t pid, seq;
	size_t plen; /* the length of <prefix> */
	bool named;  /* <prefix>.<pid>.<seq>.<kind>... */
} sdump_t;

/* The pid and sequence number of a dump's name, as jemalloc and heapctl
 * write it: <prefix>.<pid>.<seq>.<kind>[<n>][.<time>].heap */
static bool dump_seq(const char *path, uint64_t *pid, uint64_t *seq, size_t *plen)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	bool found = false;
	for (const char *c = strchr(b, '.'); c; c = strchr(c + 1, '.')) {
		char *e1, *e2;
		if (c[1] < '0' || c[1] > '9')
			continue;
		unsigned long long p = strtoull(c + 1, &e1, 10);
		if (*e1 != '.' || e1[1] < '0' || e1[1] > '9')
			continue;
		unsigned long long q = strtoull(e1 + 1, &e2, 10);
		if (*e2 != '.' || !((e2[1] >= 'a' && e2[1] <= 'z') || (e2[1] >= 'A' && e2[1] <= 'Z')))
			continue;
		*pid = p, *seq = q, *plen = (size_t)(c - path), found = true;
	}
	return found;
}

static bool by_seq;

static int cmp_sdump(const void *a, const void *b)
{
	const sdump_t *x = a, *y = b;
	if (by_seq && x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
	return strcmp(x->path, y->path);
}

/* The profiles of the series: each argument a file, or a prefix that
 * files "<prefix>*.heap" start with; ordered by sequence number when they
 * are one process's dumps, else by time written. */
static int series_files(const ropts_t *o, sdump_t **out, size_t *n)
{
	sdump_t *v = NULL;
	size_t cap = 0, k = 0;
	for (size_t i = 0; i < o->nfiles; i++) {
		const char *arg = o->files[i];
		struct stat st;
		glob_t g = { 0 };
		size_t ng = 1;
		if (stat(arg, &st) != 0 || S_ISDIR(st.st_mode)) {
			/* a prefix (a directory: the dumps in it) */
			const char *pat = rp_strcat3(arg, S_ISDIR(st.st_mode) && errno != ENOENT ? "/" : "", "*.heap");
			int gr = glob(pat, 0, NULL, &g);
			if (gr != 0 || g.gl_pathc == 0) {
				globfree(&g);
				return cli_err(HC_EXIT_USAGE, "--series: '%s' is not a file, and no file matches %s",
				    arg, pat);
			}
			ng = g.gl_pathc;
		}
		for (size_t j = 0; j < ng; j++) {
			const char *path = g.gl_pathc ? rp_intern(g.gl_pathv[j]) : arg;
			if (stat(path, &st) != 0) {
				globfree(&g);
				return cli_err(HC_EXIT_USAGE, "cannot open %s: %s", path, strerror(errno));
			}
			v = rp_grow(v, &cap, k + 1, sizeof *v);
			v[k] = (sdump_t){ .path = path,
				.mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec };
			v[k].named = dump_seq(path, &v[k].pid, &v[k].seq, &v[k].plen);
			k++;
		}
		globfree(&g);
	}
	by_seq = k > 0;
	for (size_t i = 0; i < k; i++)
		by_seq &= v[i].named && v[i].pid == v[0].pid;
	qsort(v, k, sizeof *v, cmp_sdump);
	/* several processes' dumps: one after the other (a service that was
	 * restarted) is a series; side by side is two */
	for (size_t i = 0; i < k && !by_seq; i++)
		for (size_t j = i + 1; j < k; j++) {
			if (!v[i].named || !v[j].named || v[j].pid == v[i].pid)
				continue;
			size_t later = j + 1;
			while (later < k && v[later].pid != v[i].pid)
				later++;
			if (later < k)
				return cli_err(HC_EXIT_USAGE,
				    "--series: the dumps of pids %llu and %llu were written at the same "
				    "time; give one process's dumps (for example %.*s.%llu.)",
				    (unsigned long long)v[i].pid, (unsigned long long)v[j].pid, (int)v[j].plen,
				    v[j].path, (unsigned long long)v[j].pid);
			break;
		}
	/* one file named twice (a file and a prefix that matches it) once */
	size_t w = 0;
	for (size_t i = 0; i < k; i++) {
		bool dup = false;
		for (size_t j = 0; j < w && !dup; j++)
			dup = !strcmp(v[j].path, v[i].path);
		if (!dup)
			v[w++] = v[i];
	}
	if (w < 2)
		return cli_err(HC_EXIT_USAGE, "--series needs two profiles or more (found %zu)", w);
	*out = v;
	*n = w;
	return 0;
}

static const char *time_of(int64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	if (localtime_r(&t, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(buf, len, "?");
	return buf;
}

static const char *signed_val(const ropts_t *o, double v, char *buf, size_t len)
{
	char b[48];
	rp_unparse(o, fabs(v), b, sizeof b);
	snprintf(buf, len, "%s%s", v < 0 ? "-" : v > 0 ? "+" : "", b);
	return buf;
}

static int series_text(const rp_series_t *se, const rp_trend_t *t, size_t nt, const ropts_t *o, bool json)
{
	size_t nd = se->ndumps, limit = o->top > 0 && (size_t)o->top < nt ? (size_t)o->top : nt;
	char b1[64], b2[64], b3[64];
	if (json) {
		json_t j;
		json_begin(&j, stdout, JSON_LINE);
		json_obj(&j, NULL);
		json_str(&j, "type", rp_type_name[o->type]);
		json_str(&j, "unit", rp_type_unit[o->type]);
		json_arr(&j, "dumps");
		for (size_t d = 0; d < nd; d++) {
			json_obj(&j, NULL);
			json_str(&j, "path", se->path[d]);
			json_i64(&j, "time_ns", se->time_ns[d]);
			json_int(&j, "total", se->total[d]);
			json_end(&j);
		}
		json_end(&j);
		json_arr(&j, "sites");
		for (size_t i = 0; i < limit; i++) {
			const rp_trend_t *r = &t[i];
			json_obj(&j, NULL);
			json_str(&j, "name", se->site[r->site]);
			json_int(&j, "first", r->first);
			json_int(&j, "last", r->last);
			json_int(&j, "growth", r->growth);
			json_int(&j, "peak", r->peak);
			json_u64(&j, "grew", r->grew);
			json_u64(&j, "shrank", r->shrank);
			json_u64(&j, "intervals", nd - 1);
			json_bool(&j, "only_grew", r->only_grew);
			json_arr(&j, "values");
			for (size_t d = 0; d < nd; d++)
				json_int(&j, NULL, se->v[r->site * nd + d]);
			json_end(&j);
			json_end(&j);
		}
		json_end(&j);
		json_end(&j);
		return ferror(stdout) ? cli_err(HC_EXIT_FAILED, "cannot write the report: %s", strerror(errno)) : 0;
	}
	char safe[4096];
	double secs = (double)(se->time_ns[nd - 1] - se->time_ns[0]) / 1e9;
	printf("Series: %zu dumps of %s over %.0f s, %s to %s\n", nd, rp_type_name[o->type], secs,
	    time_of(se->time_ns[0], b1, sizeof b1), time_of(se->time_ns[nd - 1], b2, sizeof b2));
	printf("  first: %s\n", out_safe(se->path[0], safe, sizeof safe));
	printf("  last:  %s\n", out_safe(se->path[nd - 1], safe, sizeof safe));
	printf("Total: %s %s -> %s %s (%s %s)\n", rp_unparse(o, se->total[0], b1, sizeof b1), rp_units(o),
	    rp_unparse(o, se->total[nd - 1], b2, sizeof b2), rp_units(o),
	    signed_val(o, se->total[nd - 1] - se->total[0], b3, sizeof b3), rp_units(o));
	printf("%9s %9s %10s %6s %6s  %s\n", "first", "last", "growth", "grew", "shrank",
	    "site (* only grew: a leak suspect)");
	for (size_t i = 0; i < limit; i++) {
		const rp_trend_t *r = &t[i];
		char g[32], sh[32];
		snprintf(g, sizeof g, "%u/%zu", r->grew, nd - 1);
		snprintf(sh, sizeof sh, "%u", r->shrank);
		printf("%9s %9s %10s %6s %6s  %s%s\n", rp_unparse(o, r->first, b1, sizeof b1),
		    rp_unparse(o, r->last, b2, sizeof b2), signed_val(o, r->growth, b3, sizeof b3), g, sh,
		    r->only_grew ? "* " : "  ", out_safe(se->site[r->site], safe, sizeof safe));
	}
	if (nt > limit && isatty(1))
		fprintf(stderr, "heapctl: %zu more sites (--top 0 shows all)\n", nt - limit);
	return ferror(stdout) ? cli_err(HC_EXIT_FAILED, "cannot write the report: %s", strerror(errno)) : 0;
}

typedef struct chart_job_s {
	const rp_series_t *se;
	const rp_trend_t *t;
	size_t n, top;
	const char *title;
	bool bytes;
} chart_job_t;

static int chart_to(FILE *f, const void *arg)
{
	const chart_job_t *j = arg;
	return rp_series_svg(f, j->se, j->t, j->n, j->top, j->title, j->bytes);
}

/* The flat values of every site in each of nd profiles, oldest first. */
int rp_series_load(const char *const *paths, size_t nd, const ropts_t *o, rp_series_t *se)
{
	memset(se, 0, sizeof *se);
	se->ndumps = nd;
	se->path = rp_alloc(sizeof *se->path * nd);
	se->time_ns = rp_alloc(sizeof *se->time_ns * nd);
	se->total = rp_alloc(sizeof *se->total * nd);
	rows_t sites = { 0 };
	double *v = NULL; /* v[site * nd + dump], grown with the sites */
	size_t vcap = 0;
	for (size_t d = 0; d < nd; d++) {
		rp_raw_t raw;
		int rc = rp_load(paths[d], o, &raw);
		if (rc != 0)
			return rc;
		rp_trim_inlined(&raw.prof, o);
		sbuild_t sa = { 0 };
		rp_build(&raw, o, false, 1, &sa);
		rp_profile_t p = rp_merge(&raw, &sa, NULL, NULL);
		lnames_t *ln = rp_loc_names(&p, o);
		se->path[d] = paths[d];
		se->time_ns[d] = raw.prof.time_ns;
		rp_filter(&p, ln, o);
		for (size_t i = 0; i < p.nsamples; i++) {
			const rp_sample_t *s = &p.samples[i];
			se->total[d] += s->v[o->type];
			if (s->nloc == 0)
				continue;
			row_t *row = rp_row_of(&sites, ln[s->loc[0]].name[0]);
			size_t idx = (size_t)(row - sites.v);
			if ((idx + 1) * nd > vcap) {
				size_t old = vcap;
				v = rp_grow(v, &vcap, (idx + 1) * nd, sizeof *v);
				memset(v + old, 0, (vcap - old) * sizeof *v);
			}
			v[idx * nd + d] += s->v[o->type];
		}
	}
	rp_index_free(&sites.ix);
	se->nsites = sites.n;
	se->site = rp_alloc(sizeof *se->site * (sites.n + 1));
	for (size_t i = 0; i < sites.n; i++)
		se->site[i] = sites.v[i].name;
	se->v = v;
	return 0;
}

int rp_cmd_series(const cli_args_t *a, ropts_t *o)
{
	sdump_t *dumps = NULL;
	size_t nd = 0;
	int rc = series_files(o, &dumps, &nd);
	if (rc)
		return rc;
	const char **paths = rp_alloc(sizeof *paths * (nd + 1));
	for (size_t d = 0; d < nd; d++)
		paths[d] = dumps[d].path;
	rp_series_t se;
	if ((rc = rp_series_load(paths, nd, o, &se)) != 0)
		return rc;
	size_t nt;
	rp_trend_t *t = rp_series_rank(&se, &nt);
	bool show_text = o->text || !o->svg;
	if (show_text && (rc = series_text(&se, t, nt, o, a->json)) != 0)
		return rc;
	if (o->svg) {
		char title[4200], err[512];
		const char *b = strrchr(se.path[0], '/');
		snprintf(title, sizeof title, "%s over %zu dumps: %s ...", rp_type_name[o->type], nd,
		    b ? b + 1 : se.path[0]);
		bool bytes = o->type == RP_INUSE_SPACE || o->type == RP_ALLOC_SPACE;
		chart_job_t j = { &se, t, nt, o->top > 0 && o->top < 10 ? (size_t)o->top : 10, title, bytes };
		if (rp_out_stream(o->svg, chart_to, &j, err, sizeof err) != 0)
			return cli_err(HC_EXIT_FAILED, "%s", err);
		if (!show_text && strcmp(o->svg, "-"))
			printf("wrote chart %s\n", o->svg);
	}
	return 0;
}
