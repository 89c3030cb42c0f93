/*
 * heapctl/symbolize/symfile.c - symbolized profiles: a heap profile that carries the
 * names of its addresses, so that it is read on a machine without the
 * program.  The format is jeprof's (what its --raw writes for a remote
 * profile, and what it reads back without a binary):
 *
 *   --- symbol
 *   binary=/usr/bin/prog
 *   0x55d0c2a011c8 main
 *   0x7f31c1a2b4ef outer_function--inlined_function
 *   #lines 0x7f31c1a2b4ef	src/a.c:12	src/a.h:40
 *   ---
 *   --- heap
 *   heap_v2/524288
 *   ... the profile, as it was written ...
 *
 * An address line's key is the address as jeprof looks it up: a stack's
 * first address as written, a caller's less one (FixCallerAddresses).  Its
 * names are the function first and the calls inlined into it after, split
 * by "--".  The "#lines" line is heapctl's: jeprof skips lines it does not
 * know, and heapctl keeps file:line for --lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "report/rp_internal.h"

static const rp_embsym_t *sym_at(const rp_raw_t *raw, uint64_t key)
{
	size_t lo = 0, hi = raw->nsyms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (raw->syms[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the last of equal keys, as jeprof's hash keeps the last */
	const rp_embsym_t *e = NULL;
	for (; lo < raw->nsyms && raw->syms[lo].key == key; lo++)
		e = &raw->syms[lo];
	return e;
}

/* The n-th (from 0) of sep-separated fields of s, in out; false past the end. */
static bool field(const char *s, const char *sep, int n, char *out, size_t len)
{
	size_t sl = strlen(sep);
	for (; n > 0; n--) {
		const char *e = strstr(s, sep);
		if (e == NULL)
			return false;
		s = e + sl;
	}
	const char *e = strstr(s, sep);
	size_t k = e ? (size_t)(e - s) : strlen(s);
	if (k >= len)
		k = len - 1;
	memcpy(out, s, k);
	out[k] = 0;
	return true;
}

static int count_fields(const char *s, const char *sep)
{
	int n = 1;
	for (const char *e; (e = strstr(s, sep)) != NULL; s = e + strlen(sep))
		n++;
	return n;
}

void rp_symbols_apply(rp_raw_t *raw)
{
	rp_profile_t *p = &raw->prof;
	for (size_t i = 0; i < p->nlocs; i++) {
		rp_loc_t *loc = &p->locs[i];
		loc->map = rp_map_of(p, loc->addr);
		const rp_embsym_t *e = loc->addr ? sym_at(raw, loc->addr - 1) : NULL;
		if (e == NULL)
			e = sym_at(raw, loc->addr);
		if (e == NULL)
			continue;
		int n = count_fields(e->names, "--");
		if (n > 64)
			n = 64;
		loc->frames = rp_alloc(sizeof(rp_frame_t) * (size_t)n);
		loc->nframes = n;
		for (int k = 0; k < n; k++) {
			/* the file has the function first; a location, innermost */
			rp_frame_t *f = &loc->frames[n - 1 - k];
			char buf[4096];
			field(e->names, "--", k, buf, sizeof buf);
			rp_name_frame(f, buf[0] ? buf : "?");
			if (e->lines && field(e->lines, "\t", k, buf, sizeof buf)) {
				char *colon = strrchr(buf, ':');
				long line = colon ? strtol(colon + 1, NULL, 10) : 0;
				if (colon && line > 0 && line <= 0x7fffffff && colon > buf) {
					*colon = 0;
					f->file = rp_intern(buf);
					f->line = (int)line;
				}
			}
		}
		if (loc->map >= 0) {
			p->maps[loc->map].has_functions = true;
			p->maps[loc->map].has_lines |= e->lines != NULL;
			p->maps[loc->map].has_inlines |= n > 1;
		}
	}
}

/* A name as one field of a line: no line breaks, tabs or control bytes
 * (names come from the binaries a dump names, which anyone may write). */
static void put_clean(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

static void put_entry(FILE *f, uint64_t key, const rp_loc_t *l)
{
	fprintf(f, "0x%016llx ", (unsigned long long)key);
	for (int k = l->nframes - 1; k >= 0; k--) {
		put_clean(f, l->frames[k].full ? l->frames[k].full : l->frames[k].func);
		if (k)
			fputs("--", f);
	}
	fputc('\n', f);
	bool any = false;
	for (int k = 0; k < l->nframes; k++)
		any |= l->frames[k].file != NULL && l->frames[k].line > 0;
	if (!any)
		return;
	fprintf(f, "#lines 0x%016llx", (unsigned long long)key);
	for (int k = l->nframes - 1; k >= 0; k--) {
		fputc('\t', f);
		if (l->frames[k].file && l->frames[k].line > 0) {
			put_clean(f, l->frames[k].file);
			fprintf(f, ":%d", l->frames[k].line);
		}
	}
	fputc('\n', f);
}

int rp_symbols_write(const rp_raw_t *raw, FILE *f)
{
	const rp_profile_t *p = &raw->prof;
	/* how each address is used: first in a stack (looked up as it is) or
	 * a caller (looked up less one) */
	unsigned char *use = rp_alloc(p->nlocs + 1);
	for (size_t i = 0; i < raw->nstacks; i++)
		for (uint32_t k = 0; k < raw->stacks[i].n; k++)
			use[raw->stacks[i].loc[k]] |= k == 0 ? 1 : 2;
	fputs("--- symbol\n", f);
	const char *bin = raw->binary ? raw->binary : p->nmaps ? p->maps[0].path : NULL;
	if (bin) {
		fputs("binary=", f);
		put_clean(f, bin);
		fputc('\n', f);
	}
	for (size_t i = 0; i < p->nlocs; i++) {
		const rp_loc_t *l = &p->locs[i];
		if (l->nframes == 0)
			continue;
		if (use[i] & 1)
			put_entry(f, l->addr, l);
		if ((use[i] & 2) && l->addr)
			put_entry(f, l->addr - 1, l);
	}
	rp_free(use);
	fputs("---\n--- heap\n", f);
	if (raw->textlen)
		fwrite(raw->text, 1, raw->textlen, f);
	fflush(f);
	return ferror(f) ? -1 : 0;
}
