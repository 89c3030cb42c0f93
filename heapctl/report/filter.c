/*
 * heapctl/report/filter.c - the names a view shows for each location
 * (inlined callees marked, file:line with --lines, an unnamed address as
 * file+offset), --focus and --ignore over them (jeprof's FocusProfile and
 * IgnoreProfile), and after --base one sample per stack of the difference.
 */
#define _GNU_SOURCE
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/command.h"

lnames_t *rp_loc_names(const rp_profile_t *p, const ropts_t *o)
{
	lnames_t *ln = rp_alloc(sizeof *ln * (p->nlocs + 1));
	char buf[4096];
	for (size_t i = 0; i < p->nlocs; i++) {
		const rp_loc_t *l = &p->locs[i];
		if (l->nframes == 0) {
			/* unnamed: where it is in which file, which stays the same
			 * from run to run, unlike the address */
			if (l->map >= 0) {
				const rp_map_t *m = &p->maps[l->map];
				const char *b = strrchr(m->path, '/');
				snprintf(buf, sizeof buf, "%s+0x%llx", b ? b + 1 : m->path,
				    (unsigned long long)(l->addr - m->start + m->offset));
			} else {
				snprintf(buf, sizeof buf, "0x%016llx", (unsigned long long)l->addr);
			}
			ln[i].n = 1;
			ln[i].name = rp_alloc(sizeof(char *));
			ln[i].name[0] = rp_intern(buf);
			continue;
		}
		ln[i].n = l->nframes;
		ln[i].name = rp_alloc(sizeof(char *) * (size_t)l->nframes);
		for (int f = 0; f < l->nframes; f++) {
			const rp_frame_t *fr = &l->frames[f];
			int len = snprintf(buf, sizeof buf, "%s%s", fr->func, f < l->nframes - 1 ? " (inline)" : "");
			if (o->lines && len >= 0 && (size_t)len < sizeof buf)
				snprintf(buf + len, sizeof buf - (size_t)len, " %s:%d", fr->file ? fr->file : "??",
				    fr->line);
			ln[i].name[f] = rp_intern(buf);
		}
	}
	return ln;
}

static bool loc_matches(const rp_loc_t *l, const lnames_t *ln, const regex_t *re)
{
	for (int f = 0; f < ln->n; f++)
		if (regexec(re, ln->name[f], 0, NULL, 0) == 0)
			return true;
	for (int f = 0; f < l->nframes; f++) {
		const rp_frame_t *fr = &l->frames[f];
		if (regexec(re, fr->full, 0, NULL, 0) == 0)
			return true;
		if (fr->file) {
			char buf[4096];
			snprintf(buf, sizeof buf, "%s:%d", fr->file, fr->line);
			if (regexec(re, buf, 0, NULL, 0) == 0)
				return true;
		}
	}
	return false;
}

/* --focus keeps the stacks that pass through a match, --ignore drops
 * them (jeprof's FocusProfile and IgnoreProfile). */
void rp_filter(rp_profile_t *p, const lnames_t *ln, const ropts_t *o)
{
	if (!o->has_focus && !o->has_ignore)
		return;
	signed char *fm = rp_alloc(p->nlocs + 1), *im = rp_alloc(p->nlocs + 1);
	for (size_t i = 0; i < p->nlocs; i++) {
		fm[i] = o->has_focus && loc_matches(&p->locs[i], &ln[i], &o->focus);
		im[i] = o->has_ignore && loc_matches(&p->locs[i], &ln[i], &o->ignore);
	}
	size_t w = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		const rp_sample_t *s = &p->samples[i];
		bool f = !o->has_focus, ig = false;
		for (uint32_t k = 0; k < s->nloc; k++) {
			f |= fm[s->loc[k]];
			ig |= im[s->loc[k]];
		}
		if (f && !ig)
			p->samples[w++] = *s;
	}
	p->nsamples = w;
	rp_free(fm);
	rp_free(im);
}

/* After --base: a stack in both profiles is one sample of their
 * difference (jeprof's SubtractProfile), so what did not change comes
 * out exactly zero instead of as a sum of +x and -x in some order. */
static const lnames_t *cmp_ln;

static int cmp_by_names(const void *a, const void *b)
{
	const rp_sample_t *x = a, *y = b;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	for (uint32_t k = 0; k < x->nloc && k < y->nloc; k++) {
		const lnames_t *lx = &cmp_ln[x->loc[k]], *ly = &cmp_ln[y->loc[k]];
		for (int f = 0; f < lx->n && f < ly->n; f++)
			if (lx->name[f] != ly->name[f])
				return strcmp(lx->name[f], ly->name[f]);
		if (lx->n != ly->n)
			return lx->n < ly->n ? -1 : 1;
	}
	return x->nloc < y->nloc ? -1 : x->nloc > y->nloc;
}

void rp_coalesce(rp_profile_t *p, const lnames_t *ln)
{
	if (p->nsamples < 2)
		return;
	cmp_ln = ln;
	qsort(p->samples, p->nsamples, sizeof *p->samples, cmp_by_names);
	size_t w = 0;
	double mag[RP_NTYPES] = { 0 }; /* sum of |terms| of the sample at w-1 */
	for (size_t i = 0; i <= p->nsamples; i++) {
		if (i < p->nsamples && w && cmp_by_names(&p->samples[w - 1], &p->samples[i]) == 0) {
			for (int k = 0; k < RP_NTYPES; k++) {
				p->samples[w - 1].v[k] += p->samples[i].v[k];
				mag[k] += fabs(p->samples[i].v[k]);
			}
			continue;
		}
		/* terms that cancel leave rounding noise, not growth */
		for (int k = 0; w && k < RP_NTYPES; k++)
			if (fabs(p->samples[w - 1].v[k]) <= 1e-9 * mag[k])
				p->samples[w - 1].v[k] = 0;
		if (i == p->nsamples)
			break;
		p->samples[w] = p->samples[i];
		for (int k = 0; k < RP_NTYPES; k++)
			mag[k] = fabs(p->samples[w].v[k]);
		w++;
	}
	p->nsamples = w;
}
