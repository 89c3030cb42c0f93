/*
 * heapctl/report/samples.c - from a profile as read to the samples a view
 * counts: the profile read and symbolized (load), each stack scaled up for
 * sampling the way jeprof's AdjustSamples does, allocator frames cut from
 * its top (jeprof's list, programs' own wrappers, --drop), --thread and
 * --older-than applied, and a --base profile subtracted (merge).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/command.h"

/* jeprof's AdjustSamples: undo sampling.  heap_v2 samples each byte with
 * probability 1/period (a Poisson process), so an allocation of average
 * size s is seen with probability 1 - exp(-s/period). */
static void unsample(const rp_raw_t *raw, double c[RP_NTYPES])
{
	double period = raw->adjust;
	if (raw->algorithm == 0 || period <= 0)
		return;
	for (int i = 0; i < RP_NTYPES; i += 2) {
		double *n = &c[i], *s = &c[i + 1];
		if (*n == 0 || *s == 0)
			continue; /* objects of no bytes: nothing to scale by */
		double ratio = (*s / *n) / period;
		if (raw->algorithm == 2) {
			double scale = 1 / (1 - exp(-ratio));
			*n *= scale;
			*s *= scale;
		} else if (ratio < 1) {
			*n /= ratio;
			*s /= ratio;
		}
	}
}

/* jeprof's list of allocator entry points (RemoveUninterestingFrames). */
static const char *const skip_names[] = { "calloc", "cfree", "malloc", "newImpl", "void* newImpl", "free", "memalign",
	"posix_memalign", "aligned_alloc", "pvalloc", "valloc", "realloc", "reallocarray", "mallocx", "rallocx",
	"xallocx", "dallocx", "sdallocx", "sdallocx_noflags", "tc_calloc", "tc_cfree", "tc_malloc", "tc_free",
	"tc_memalign", "tc_posix_memalign", "tc_pvalloc", "tc_valloc", "tc_realloc", "tc_new", "tc_delete",
	"tc_newarray", "tc_deletearray", "tc_new_nothrow", "tc_newarray_nothrow", "do_malloc", "::do_malloc",
	"::do_malloc_or_cpp_alloc", "DoSampledAllocation", "simple_alloc::allocate",
	"__malloc_alloc_template::allocate", "__builtin_delete", "__builtin_new", "__builtin_vec_delete",
	"__builtin_vec_new", "operator new", "operator new[]", "malloc_zone_malloc", "malloc_zone_calloc",
	"malloc_zone_valloc", "malloc_zone_realloc", "malloc_zone_memalign", "malloc_zone_free",
	"__start_google_malloc", "__stop_google_malloc", "__start_malloc_hook", "__stop_malloc_hook" };

/* Programs' own allocation functions, which only pass a request on to
 * malloc: the site is their caller.  Only names that are nothing else (a
 * program's "zmalloc" is redis's or a copy of it).  --keep-wrappers keeps
 * them as sites. */
static const char *const wrapper_names[] = {
	/* glibc */
	"strdup", "__strdup", "__GI___strdup", "strndup", "__strndup", "__GI___strndup", "__libc_malloc",
	"__libc_calloc", "__libc_realloc", "__libc_memalign", "__GI___libc_malloc", "__GI___libc_realloc",
	"__libc_reallocarray", "__posix_memalign",
	/* redis (zmalloc.c) */
	"zmalloc", "zcalloc", "zrealloc", "zstrdup", "ztrymalloc", "ztrycalloc", "ztryrealloc", "zmalloc_usable",
	"zcalloc_usable", "zrealloc_usable", "ztrymalloc_usable", "ztrycalloc_usable", "ztryrealloc_usable",
	"ztrymalloc_usable_internal", "ztrycalloc_usable_internal", "ztryrealloc_usable_internal", "zmalloc_no_tcache",
	"zcalloc_num", "zrealloc_usable_internal",
	/* PostgreSQL (mcxt.c, aset.c, generation.c, slab.c) */
	"palloc", "palloc0", "palloc_extended", "palloc_aligned", "repalloc", "repalloc0", "repalloc_extended",
	"repalloc_huge", "pstrdup", "pnstrdup", "MemoryContextAlloc", "MemoryContextAllocZero",
	"MemoryContextAllocZeroAligned", "MemoryContextAllocExtended", "MemoryContextAllocHuge",
	"MemoryContextAllocAligned", "MemoryContextStrdup", "AllocSetAlloc", "AllocSetAllocLarge",
	"AllocSetAllocFromNewBlock", "AllocSetRealloc", "GenerationAlloc", "GenerationAllocLarge",
	"GenerationAllocFromNewBlock", "SlabAlloc", "BumpAlloc",
	/* GLib */
	"g_malloc", "g_malloc0", "g_realloc", "g_try_malloc", "g_try_malloc0", "g_try_realloc", "g_malloc_n",
	"g_malloc0_n", "g_realloc_n", "g_try_malloc_n", "g_try_malloc0_n", "g_try_realloc_n", "g_strdup", "g_strndup",
	"g_memdup", "g_memdup2", "g_slice_alloc", "g_slice_alloc0", "g_aligned_alloc", "g_aligned_alloc0",
	/* gnulib, libiberty */
	"xmalloc", "xcalloc", "xrealloc", "xzalloc", "xstrdup", "xstrndup", "xmemdup", "xnmalloc", "xnrealloc",
	"xcharalloc", "x2realloc", "x2nrealloc", "ximalloc", "xirealloc", "xicalloc", "xreallocarray", "xireallocarray",
	/* CPython (obmalloc.c) */
	"PyMem_Malloc", "PyMem_Calloc", "PyMem_Realloc", "PyMem_RawMalloc", "PyMem_RawCalloc", "PyMem_RawRealloc",
	"_PyMem_RawMalloc", "_PyMem_RawCalloc", "_PyMem_RawRealloc", "PyObject_Malloc", "PyObject_Calloc",
	"PyObject_Realloc", "_PyObject_Malloc", "_PyObject_Calloc", "_PyObject_Realloc", "pymalloc_alloc",
	"pymalloc_realloc", "_PyMem_DebugRawAlloc", "_PyMem_DebugRawMalloc", "_PyMem_DebugRawCalloc",
	"_PyMem_DebugRawRealloc", "_PyMem_DebugMalloc", "_PyMem_DebugCalloc", "_PyMem_DebugRealloc",
	/* Perl */
	"Perl_safesysmalloc", "Perl_safesyscalloc", "Perl_safesysrealloc",
	/* libstdc++ */
	"__gnu_cxx::new_allocator::allocate", "std::__new_allocator::allocate", "std::allocator_traits::allocate",
	"std::allocator::allocate"
};

static bool in_list(const char *fn, const char *const *list, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (!strcmp(fn, list[k]))
			return true;
	return false;
}

/* An allocator frame: the allocator's entry points, the wrappers, and
 * what --drop names. */
static bool alloc_frame(const rp_frame_t *f, const ropts_t *o)
{
	const char *fn = f->func;
	if (!strncmp(fn, "tcmalloc::", 10) || strstr(fn, "TCMalloc") ||
	    in_list(fn, skip_names, sizeof skip_names / sizeof skip_names[0]))
		return true;
	if (!o->keep_wrappers && in_list(fn, wrapper_names, sizeof wrapper_names / sizeof wrapper_names[0]))
		return true;
	for (int i = 0; i < o->ndrop; i++)
		if (regexec(&o->drop[i], fn, 0, NULL, 0) == 0 ||
		    (f->full && regexec(&o->drop[i], f->full, 0, NULL, 0) == 0))
			return true;
	return false;
}

/* An allocation function inlined into its caller (a static inline
 * xmalloc, operator new in a constructor): the innermost frames of one
 * address are the allocator's and the rest are the program's.  Drop the
 * allocator's, so the address counts as the program's code. */
void rp_trim_inlined(rp_profile_t *p, const ropts_t *o)
{
	for (size_t i = 0; i < p->nlocs; i++) {
		rp_loc_t *l = &p->locs[i];
		int k = 0;
		while (k < l->nframes && alloc_frame(&l->frames[k], o))
			k++;
		if (k > 0 && k < l->nframes) {
			l->frames += k;
			l->nframes -= k;
		}
	}
}

bool rp_allocator_loc(const rp_profile_t *p, const rp_loc_t *l, const ropts_t *o)
{
	if (l->map >= 0 && p->maps[l->map].allocator)
		return true;
	for (int f = 0; f < l->nframes; f++)
		if (alloc_frame(&l->frames[f], o))
			return true;
	return false;
}

static void add_sample(sbuild_t *b, const rp_sample_t *s)
{
	b->v = rp_grow(b->v, &b->cap, b->n + 1, sizeof *b->v);
	b->v[b->n++] = *s;
}

/* Samples of one profile.  by_thread: one sample per thread line (for
 * pprof's thread label), shares of the stack's scaled t* values, so the
 * whole still adds up to what jeprof shows. */
void rp_build(const rp_raw_t *raw, const ropts_t *o, bool by_thread, double sign, sbuild_t *out)
{
	const rp_profile_t *p = &raw->prof;
	bool *alloc_loc = rp_alloc(p->nlocs + 1);
	for (size_t i = 0; i < p->nlocs; i++)
		alloc_loc[i] = rp_allocator_loc(p, &p->locs[i], o);
	for (size_t i = 0; i < raw->nstacks; i++) {
		const rp_rawstack_t *st = &raw->stacks[i];
		/* cut everything up to the last allocator frame, and the fake
		 * kernel-half addresses jeprof also drops */
		uint32_t n = 0;
		uint32_t *loc = rp_alloc(st->n * sizeof *loc);
		for (uint32_t k = 0; k < st->n; k++) {
			if (alloc_loc[st->loc[k]]) {
				n = 0;
				continue;
			}
			if (p->locs[st->loc[k]].addr > 0x7fffffffffffffffull)
				continue;
			loc[n++] = st->loc[k];
		}
		rp_sample_t s = { .nloc = n, .loc = loc, .thread = -1 };
		if (o->older_ns) {
			/* the live objects that are old enough, by their own weights
			 * (already unbiased); nothing allocated is counted */
			for (uint32_t k = 0; k < st->nages; k++) {
				const rp_age_t *g = &st->ages[k];
				if (g->ns < o->older_ns || (o->has_thread && g->thread != o->thread))
					continue;
				s.v[RP_INUSE_OBJECTS] += sign * g->weight;
				s.v[RP_INUSE_SPACE] += sign * g->weight * (double)g->size;
			}
			if (s.v[RP_INUSE_OBJECTS] != 0)
				add_sample(out, &s);
			continue;
		}
		if (st->all.c[0] == 0 && st->all.c[1] == 0 && st->all.c[2] == 0 && st->all.c[3] == 0)
			continue; /* a stack with only lifetimes */
		if (o->has_thread) {
			for (uint32_t t = 0; t < st->nthr; t++) {
				if (st->thr[t].thread != o->thread)
					continue;
				memcpy(s.v, st->thr[t].c, sizeof s.v);
				unsample(raw, s.v);
				s.thread = o->thread;
				for (int k = 0; k < RP_NTYPES; k++)
					s.v[k] *= sign;
				add_sample(out, &s);
			}
			continue;
		}
		double all[RP_NTYPES];
		memcpy(all, st->all.c, sizeof all);
		unsample(raw, all);
		if (!by_thread || st->nthr == 0) {
			for (int k = 0; k < RP_NTYPES; k++)
				s.v[k] = sign * all[k];
			add_sample(out, &s);
			continue;
		}
		double left[RP_NTYPES];
		memcpy(left, st->all.c, sizeof left);
		for (uint32_t t = 0; t < st->nthr; t++) {
			s.thread = st->thr[t].thread;
			for (int k = 0; k < RP_NTYPES; k++) {
				double raw_all = st->all.c[k];
				s.v[k] = raw_all > 0 ? sign * all[k] * st->thr[t].c[k] / raw_all : 0;
				left[k] -= st->thr[t].c[k];
			}
			add_sample(out, &s);
		}
		/* counts that no thread line claims (threads gone, or a file
		 * whose lines do not add up) stay, without a thread */
		bool any = false;
		for (int k = 0; k < RP_NTYPES; k++)
			any |= left[k] > 0;
		if (any) {
			s.thread = -1;
			for (int k = 0; k < RP_NTYPES; k++) {
				double raw_all = st->all.c[k];
				s.v[k] = raw_all > 0 && left[k] > 0 ? sign * all[k] * left[k] / raw_all : 0;
			}
			add_sample(out, &s);
		}
	}
	rp_free(alloc_loc);
}

int rp_load(const char *path, const ropts_t *o, rp_raw_t *raw)
{
	char err[512];
	/* file:line only for the views that show or match it */
	rp_symbolize_lines(o->lines || o->has_focus || o->has_ignore || o->pprof || o->symbolize);
	if (rp_read(path, raw, o->symbolize ? RP_READ_TEXT : 0, err, sizeof err) != 0)
		return cli_err(HC_EXIT_USAGE, "%s", err);
	if (raw->symbolized)
		rp_symbols_apply(raw); /* its own names; no binaries read */
	else if (rp_symbolize(&raw->prof, o->root, err, sizeof err) != 0)
		return cli_err(HC_EXIT_FAILED, "%s", err);
	if (raw->prof.note) {
		char safe[4096];
		fprintf(stderr, "%s: %s\n", cli_prog, out_safe(raw->prof.note, safe, sizeof safe));
	}
	/* each module once, also when the base profile has it too */
	static const char *said = "";
	for (const char *l = raw->prof.unnamed, *nl; l && (nl = strchr(l, '\n')) != NULL; l = nl + 1) {
		char safe[4096];
		const char *line = rp_intern_n(l, (size_t)(nl - l + 1));
		if (strstr(said, line))
			continue;
		said = rp_strcat3(said, line, "");
		fprintf(stderr, "%s: report: %s\n", cli_prog,
		    out_safe(rp_intern_n(l, (size_t)(nl - l)), safe, sizeof safe));
	}
	return 0;
}

/* --symbolize -o FILE: the profile as it was, with the names of its
 * addresses in front (symfile.c) */
static int symbols_to(FILE *f, const void *raw)
{
	return rp_symbols_write(raw, f);
}

int rp_write_symbolized(const rp_raw_t *raw, const ropts_t *o)
{
	char err[512];
	if (rp_out_stream(o->out, symbols_to, raw, err, sizeof err) != 0)
		return cli_err(HC_EXIT_FAILED, "%s", err);
	return 0;
}

/* The profile, less the base: the base's samples come in negated, each
 * with its own locations and mappings (two processes place libraries at
 * different addresses, so they meet by name, not by address). */
/* memcpy, which must not be given NULL even for nothing (a profile with no
 * mappings or no samples has NULL arrays) */
static void copy_n(void *dst, const void *src, size_t n)
{
	if (n)
		memcpy(dst, src, n);
}

rp_profile_t rp_merge(const rp_raw_t *a, sbuild_t *sa, const rp_raw_t *b, sbuild_t *sb)
{
	rp_profile_t p = a->prof;
	p.samples = sa->v;
	p.nsamples = sa->n;
	if (b == NULL)
		return p;
	size_t nl = a->prof.nlocs, nm = a->prof.nmaps;
	p.nlocs = nl + b->prof.nlocs;
	p.nmaps = nm + b->prof.nmaps;
	p.locs = rp_alloc(sizeof *p.locs * (p.nlocs + 1));
	p.maps = rp_alloc(sizeof *p.maps * (p.nmaps + 1));
	copy_n(p.locs, a->prof.locs, sizeof *p.locs * nl);
	copy_n(p.locs + nl, b->prof.locs, sizeof *p.locs * b->prof.nlocs);
	copy_n(p.maps, a->prof.maps, sizeof *p.maps * nm);
	copy_n(p.maps + nm, b->prof.maps, sizeof *p.maps * b->prof.nmaps);
	for (size_t i = nl; i < p.nlocs; i++)
		if (p.locs[i].map >= 0)
			p.locs[i].map += (int)nm;
	p.samples = rp_alloc(sizeof *p.samples * (sa->n + sb->n + 1));
	copy_n(p.samples, sa->v, sizeof *p.samples * sa->n);
	for (size_t i = 0; i < sb->n; i++) {
		rp_sample_t s = sb->v[i];
		uint32_t *loc = rp_alloc(sizeof *loc * (s.nloc + 1));
		for (uint32_t k = 0; k < s.nloc; k++)
			loc[k] = s.loc[k] + (uint32_t)nl;
		s.loc = loc;
		p.samples[sa->n + i] = s;
	}
	p.nsamples = sa->n + sb->n;
	return p;
}
