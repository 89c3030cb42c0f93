/*
 * heapctl/report/view_folded.c - folded stacks (one line per distinct
 * stack, root first, for flamegraph.pl, speedscope and inferno) and the
 * SVG flame graph made from the same stacks (svg.c draws it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/command.h"

static int cmp_folded(const void *a, const void *b)
{
	const folded_t *x = a, *y = b;
	for (uint32_t i = 0; i < x->n && i < y->n; i++)
		if (x->names[i] != y->names[i])
			return strcmp(x->names[i], y->names[i]);
	return x->n < y->n ? -1 : x->n > y->n;
}

/* Stacks root first, identical ones merged, sorted. */
folded_t *rp_fold(const rp_profile_t *p, const lnames_t *ln, const ropts_t *o, size_t *count)
{
	folded_t *v = rp_alloc(sizeof *v * (p->nsamples + 1));
	size_t n = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		const rp_sample_t *s = &p->samples[i];
		uint32_t depth = 0;
		for (uint32_t k = 0; k < s->nloc; k++)
			depth += (uint32_t)ln[s->loc[k]].n;
		if (depth == 0)
			continue;
		folded_t *f = &v[n++];
		f->names = rp_alloc(sizeof(char *) * depth);
		f->n = depth;
		f->value = s->v[o->type];
		uint32_t d = depth;
		for (uint32_t k = 0; k < s->nloc; k++) {
			const lnames_t *l = &ln[s->loc[k]];
			for (int x = 0; x < l->n; x++)
				f->names[--d] = l->name[x];
		}
	}
	if (n)
		qsort(v, n, sizeof *v, cmp_folded);
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (w && cmp_folded(&v[w - 1], &v[i]) == 0)
			v[w - 1].value += v[i].value;
		else
			v[w++] = v[i];
	}
	*count = w;
	return v;
}

int rp_print_collapsed(const folded_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double val = round(v[i].value);
		if (!(val > 0))
			continue; /* flame graph tools take no negatives */
		for (uint32_t k = 0; k < v[i].n; k++) {
			if (k)
				putchar(';');
			/* names of a profile's paths may hold anything: one line per
			 * stack, and nothing a terminal would act on */
			char safe[4096];
			for (const char *c = out_safe(v[i].names[k], safe, sizeof safe); *c; c++)
				putchar(*c == ';' ? ':' : *c);
		}
		printf(" %.0f\n", val);
	}
	return ferror(stdout) ? cli_err(HC_EXIT_FAILED, "cannot write the report: %s", strerror(errno)) : 0;
}

typedef struct svg_job_s {
	const rp_stack_t *st;
	size_t n;
	const char *title, *unit;
} svg_job_t;

static int svg_to(FILE *f, const void *arg)
{
	const svg_job_t *j = arg;
	return rp_svg_write(f, j->st, j->n, j->title, j->unit);
}

int rp_write_svg(const folded_t *v, size_t n, const rp_profile_t *p, const ropts_t *o)
{
	rp_stack_t *st = rp_alloc(sizeof *st * (n + 1));
	for (size_t i = 0; i < n; i++)
		st[i] = (rp_stack_t){ .n = v[i].n, .names = v[i].names, .value = v[i].value };
	char title[4200], err[512];
	const char *b = strrchr(p->path, '/');
	static const char *const said[RP_NTYPES] = { "in-use objects", "in-use space", "allocated objects",
		"allocated space" };
	if (o->title) /* the caller's name for it, in words */
		snprintf(title, sizeof title, "%s: %s", o->title, said[o->type]);
	else
		snprintf(title, sizeof title, "%s: %s%s%s", rp_type_name[o->type], b ? b + 1 : p->path,
		    o->base ? " - " : "", o->base ? o->base : "");
	bool objects = o->type == RP_INUSE_OBJECTS || o->type == RP_ALLOC_OBJECTS;
	svg_job_t j = { st, n, title, objects ? "objects" : "bytes" };
	if (rp_out_stream(o->svg, svg_to, &j, err, sizeof err) != 0)
		return cli_err(HC_EXIT_FAILED, "%s", err);
	return 0;
}
