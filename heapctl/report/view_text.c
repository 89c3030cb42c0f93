/*
 * heapctl/report/view_text.c - the text view, as `jeprof --text` prints it:
 * one row per function (flat: where the stack ends, cum: anywhere in it,
 * once per stack), sorted by flat value then name; or as JSON.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/json.h"
#include "report/command.h"

static bool same_row(const void *ctx, uint32_t id)
{
	const rows_t *r = ((const void *const *)ctx)[0];
	return r->v[id].name == ((const void *const *)ctx)[1];
}

row_t *rp_row_of(rows_t *r, const char *name)
{
	const void *k[2] = { r, name };
	bool added;
	int64_t id = rp_index_find(&r->ix, rp_hash_u64((uintptr_t)name), same_row, k, &added);
	if (id < 0) {
		fprintf(stderr, "%s: out of memory\n", cli_prog);
		exit(HC_EXIT_FAILED);
	}
	if (added) {
		r->v = rp_grow(r->v, &r->cap, r->n + 1, sizeof *r->v);
		r->v[r->n++] = (row_t){ .name = name, .stamp = (size_t)-1 };
	}
	return &r->v[id];
}

static bool sort_cum;

static int cmp_row(const void *a, const void *b)
{
	const row_t *x = a, *y = b;
	double vx = sort_cum ? x->cum : x->flat, vy = sort_cum ? y->cum : y->flat;
	if (vx != vy)
		return vx > vy ? -1 : 1;
	return strcmp(x->name, y->name);
}

const char *rp_unparse(const ropts_t *o, double v, char *buf, size_t len)
{
	if (o->type == RP_INUSE_OBJECTS || o->type == RP_ALLOC_OBJECTS || o->bytes)
		snprintf(buf, len, "%.0f", trunc(v) + 0.0); /* Perl's %d truncates; +0.0: no "-0" */
	else
		snprintf(buf, len, "%.1f", v / 1048576.0);
	return buf;
}

static const char *percent(double v, double total, char *buf, size_t len)
{
	snprintf(buf, len, "%.1f%%", total != 0 ? v * 100.0 / total : 0.0);
	return buf;
}

const char *rp_units(const ropts_t *o)
{
	if (o->type == RP_INUSE_OBJECTS || o->type == RP_ALLOC_OBJECTS)
		return "objects";
	return o->bytes ? "B" : "MB";
}

static bool any_nonzero(const rows_t *r)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].flat != 0 || r->v[i].cum != 0)
			return true;
	return false;
}

/* total: the whole profile's, for the Total line; percentages are of
 * what --focus and --ignore left, as in jeprof. */
int rp_print_text(const rp_profile_t *p, const lnames_t *ln, double total, const ropts_t *o, bool json)
{
	rows_t r = { 0 };
	double shown_total = 0;
	for (size_t i = 0; i < p->nsamples; i++)
		shown_total += p->samples[i].v[o->type];
	for (size_t i = 0; i < p->nsamples; i++) {
		const rp_sample_t *s = &p->samples[i];
		double v = s->v[o->type];
		bool first = true;
		for (uint32_t k = 0; k < s->nloc; k++) {
			const lnames_t *l = &ln[s->loc[k]];
			for (int f = 0; f < l->n; f++) {
				row_t *row = rp_row_of(&r, l->name[f]);
				if (row->stamp == i)
					continue; /* recursion: once per stack */
				row->stamp = i;
				row->cum += v;
				if (first)
					row->flat += v;
				first = false;
			}
		}
	}
	sort_cum = o->cum;
	if (r.n)
		qsort(r.v, r.n, sizeof *r.v, cmp_row);
	rp_index_free(&r.ix); /* the rows are in another order now */
	size_t shown = 0, limit = o->top > 0 ? (size_t)o->top : (size_t)-1;
	double running = 0;
	char b1[64], b2[32], b3[32], b4[64], b5[32];
	json_t j;
	json_begin(&j, stdout, JSON_LINE);
	if (json) {
		json_obj(&j, NULL);
		json_str(&j, "profile", p->path);
		json_str(&j, "type", rp_type_name[o->type]);
		json_str(&j, "unit", rp_type_unit[o->type]);
		json_int(&j, "total", total);
		if (p->unnamed) { /* also said on stderr: "path: build id ..." */
			json_arr(&j, "unnamed");
			for (const char *l = p->unnamed, *nl; (nl = strchr(l, '\n')) != NULL; l = nl + 1) {
				const char *why = strstr(l, ": build id ");
				if (why == NULL || why > nl)
					continue;
				json_obj(&j, NULL);
				json_str(&j, "module", rp_intern_n(l, (size_t)(why - l)));
				json_str(&j, "why", rp_intern_n(why + 2, (size_t)(nl - why - 2)));
				json_end(&j);
			}
			json_end(&j);
		}
		json_arr(&j, "rows");
	} else if (total == 0 && !any_nonzero(&r)) {
		/* nothing on standard output, as jeprof; but not a silent success */
		fprintf(stderr, "%s: %s: nothing to show: %s %s\n", cli_prog, o->title ? o->title : p->path,
		    o->base ? "no difference in" : "no", rp_type_name[o->type]);
	} else if (total != 0) {
		if (o->has_thread)
			printf("Total (t%lld): %s %s\n", (long long)o->thread, rp_unparse(o, total, b1, sizeof b1),
			    rp_units(o));
		else
			printf("Total: %s %s\n", rp_unparse(o, total, b1, sizeof b1), rp_units(o));
		/* the columns pprof's -top names, over the rows' own widths */
		printf("%8s %6s %6s %8s %6s %s\n", "flat", "flat%", "sum%", "cum", "cum%",
		    o->lines ? "function file:line" : "function");
	}
	for (size_t i = 0; i < r.n && shown < limit; i++) {
		const row_t *w = &r.v[i];
		running += w->flat;
		if (w->flat == 0 && w->cum == 0)
			continue;
		shown++;
		if (json) {
			json_obj(&j, NULL);
			json_str(&j, "name", w->name);
			json_int(&j, "flat", w->flat);
			json_int(&j, "cum", w->cum);
			json_end(&j);
			continue;
		}
		char safe[4096];
		printf("%8s %6s %6s %8s %6s %s\n", rp_unparse(o, w->flat, b1, sizeof b1),
		    percent(w->flat, shown_total, b2, sizeof b2), percent(running, shown_total, b3, sizeof b3),
		    rp_unparse(o, w->cum, b4, sizeof b4), percent(w->cum, shown_total, b5, sizeof b5),
		    out_safe(w->name, safe, sizeof safe));
	}
	if (json) {
		json_end(&j);
		json_end(&j);
	}
	size_t rest = 0;
	for (size_t i = shown; i < r.n; i++)
		rest += r.v[i].flat != 0 || r.v[i].cum != 0;
	if (!json && rest && isatty(1))
		fprintf(stderr, "heapctl: %zu more rows (--top 0 shows all)\n", rest);
	return ferror(stdout) ? cli_err(HC_EXIT_FAILED, "cannot write the report: %s", strerror(errno)) : 0;
}
