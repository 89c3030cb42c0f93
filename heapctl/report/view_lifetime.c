/*
 * heapctl/report/view_lifetime.c - `heapctl report --lifetime`: per site,
 * how long its sampled objects lived (the dump's "l:" histograms) and how
 * old those still live are (its "a:" lines), as text or JSON.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/json.h"
#include "report/command.h"

typedef struct lsite_s {
	const char *name;
	rp_life_t life;
	uint64_t live;                /* sampled objects live at the dump */
	double live_objs, live_bytes; /* what they stand for */
	uint64_t oldest_ns;
} lsite_t;

/* Bucket i of a lifetime histogram holds [lo, hi) ns (agent/profile.c's
 * hc_life_bucket). */
static void life_bucket_range(int i, double *lo, double *hi)
{
	if (i < 4) {
		*lo = i;
		*hi = i + 1;
		return;
	}
	int b = i / 4 + 2, m = i % 4 + 4; /* i = 4 (b - 3) + m */
	*lo = ldexp(m, b - 3);
	*hi = ldexp(m + 1, b - 3);
}

/* The q-quantile of a lifetime histogram, linear inside its bucket (a
 * quarter of an octave wide); -1 if it is empty. */
static double life_quantile(const rp_life_t *l, double q)
{
	if (l->frees == 0)
		return -1;
	double want = q * (double)l->frees, seen = 0, lo = 0, hi = 0;
	for (int b = 0; b < RP_LIFE_BUCKETS; b++) {
		double n = (double)l->hist[b];
		if (n == 0)
			continue;
		life_bucket_range(b, &lo, &hi);
		if (seen + n >= want)
			return lo + (hi - lo) * (want - seen) / n;
		seen += n;
	}
	return hi;
}

static const char *dur(double ns, char *buf, size_t len)
{
	if (ns < 0)
		snprintf(buf, len, "-");
	else if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.3g us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.3g ms", ns / 1e6);
	else if (ns < 60e9)
		snprintf(buf, len, "%.3g s", ns / 1e9);
	else if (ns < 3600e9)
		snprintf(buf, len, "%.3g min", ns / 60e9);
	else
		snprintf(buf, len, "%.3g h", ns / 3600e9);
	return buf;
}

static int cmp_lsite(const void *a, const void *b)
{
	const lsite_t *x = a, *y = b;
	if (x->life.frees != y->life.frees)
		return x->life.frees < y->life.frees ? 1 : -1;
	if (x->live != y->live)
		return x->live < y->live ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* Per site (the first frame that is not the allocator's, as in the
 * flat view), the lifetimes of its sampled objects that were freed and
 * the ages of those still live. */
int rp_print_lifetime(const rp_raw_t *raw, const ropts_t *o, bool json)
{
	const rp_profile_t *p = &raw->prof;
	lnames_t *ln = rp_loc_names(p, o);
	lsite_t *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t frees = 0;
	bool any_life = false;
	for (size_t i = 0; i < raw->nstacks; i++) {
		const rp_rawstack_t *st = &raw->stacks[i];
		if (st->life == NULL && st->nages == 0)
			continue;
		const char *name = NULL;
		for (uint32_t k = 0; k < st->n; k++) {
			const rp_loc_t *l = &p->locs[st->loc[k]];
			if (rp_allocator_loc(p, l, o)) {
				name = NULL;
				continue;
			}
			if (name == NULL && l->addr <= 0x7fffffffffffffffull)
				name = ln[st->loc[k]].name[0];
		}
		if (name == NULL)
			name = "(allocator)";
		size_t j = 0;
		while (j < n && v[j].name != name)
			j++;
		if (j == n) {
			v = rp_grow(v, &cap, n + 1, sizeof *v);
			memset(&v[n], 0, sizeof v[n]);
			v[n++].name = name;
		}
		lsite_t *x = &v[j];
		if (st->life) {
			any_life = true;
			x->life.frees += st->life->frees;
			x->life.lt_1ms += st->life->lt_1ms;
			x->life.lt_1s += st->life->lt_1s;
			x->life.lt_1min += st->life->lt_1min;
			for (int b = 0; b < RP_LIFE_BUCKETS; b++)
				x->life.hist[b] += st->life->hist[b];
			frees += st->life->frees;
		}
		for (uint32_t k = 0; k < st->nages; k++) {
			const rp_age_t *g = &st->ages[k];
			if (o->has_thread && g->thread != o->thread)
				continue;
			x->live++;
			x->live_objs += g->weight;
			x->live_bytes += g->weight * (double)g->size;
			if (g->ns > x->oldest_ns)
				x->oldest_ns = g->ns;
		}
	}
	if (!raw->has_ages && !any_life)
		return cli_err(HC_EXIT_USAGE,
		    "%s has no lifetimes: it was written by jemalloc or an older heapctl, "
		    "or is a peak dump",
		    o->profile);
	qsort(v, n, sizeof *v, cmp_lsite);
	size_t rows = o->top > 0 && (size_t)o->top < n ? (size_t)o->top : n;
	if (json) {
		json_t j;
		json_begin(&j, stdout, JSON_PRETTY);
		json_obj(&j, NULL);
		json_u64(&j, "frees", frees);
		json_arr(&j, "sites");
		for (size_t i = 0; i < rows; i++) {
			const lsite_t *x = &v[i];
			json_obj(&j, NULL);
			json_str(&j, "site", x->name);
			json_u64(&j, "frees", x->life.frees);
			if (x->life.frees) {
				json_int(&j, "median_ns", life_quantile(&x->life, 0.5));
				json_int(&j, "p99_ns", life_quantile(&x->life, 0.99));
				json_u64(&j, "within_1ms", x->life.lt_1ms);
				json_u64(&j, "within_1s", x->life.lt_1s);
				json_u64(&j, "within_1min", x->life.lt_1min);
			}
			json_u64(&j, "live", x->live);
			json_int(&j, "live_bytes", x->live_bytes);
			json_u64(&j, "oldest_ns", x->oldest_ns);
			json_end(&j);
		}
		json_end(&j);
		json_end(&j);
		return 0;
	}
	printf("lifetimes of sampled objects by site: %llu freed, median and p99 of their lifetimes, the share freed\n"
	       "within 1 ms, 1 s and 1 min; then those still live at the dump and the oldest of them\n",
	    (unsigned long long)frees);
	printf("%-40s %9s %9s %9s %6s %6s %6s %8s %10s %9s\n", "site", "frees", "median", "p99", "<1ms", "<1s", "<1min",
	    "live", "live MB", "oldest");
	for (size_t i = 0; i < rows; i++) {
		const lsite_t *x = &v[i];
		char m[32], q[32], old[32], a[16] = "-", b[16] = "-", c[16] = "-", safe[256];
		if (x->life.frees) {
			double f = (double)x->life.frees;
			snprintf(a, sizeof a, "%.0f%%", 100.0 * (double)x->life.lt_1ms / f);
			snprintf(b, sizeof b, "%.0f%%", 100.0 * (double)x->life.lt_1s / f);
			snprintf(c, sizeof c, "%.0f%%", 100.0 * (double)x->life.lt_1min / f);
		}
		printf("%-40.40s %9llu %9s %9s %6s %6s %6s %8llu %10.1f %9s\n", out_safe(x->name, safe, sizeof safe),
		    (unsigned long long)x->life.frees, dur(life_quantile(&x->life, 0.5), m, sizeof m),
		    dur(life_quantile(&x->life, 0.99), q, sizeof q), a, b, c, (unsigned long long)x->live,
		    x->live_bytes / 1048576.0, x->live ? dur((double)x->oldest_ns, old, sizeof old) : "-");
	}
	if (rows < n)
		printf("(%zu more sites: --top 0 shows all)\n", n - rows);
	return 0;
}
