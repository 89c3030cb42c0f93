/*
 * heapctl/report/cmd_report.c - `heapctl report PROFILE`: read, symbolize, scale
 * and show a heap profile, the way `jeprof --text` does, plus folded
 * stacks, an SVG flame graph and a pprof file.
 *
 * Numbers follow jeprof so the two can be compared line by line: each
 * stack is scaled up for sampling with jeprof's formula, allocator frames
 * are cut from the top of each stack, the total is taken before --focus
 * and --ignore, rows are sorted by flat value then name, and a function
 * counts once per stack in "cum".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <grp.h>
#include <math.h>
#include <pwd.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "cli/json.h"
#include "report.h"
#include "rp_internal.h"

typedef struct ropts_s {
	const char *profile, *base;
	int type;                  /* RP_INUSE_SPACE, ... */
	long top;                  /* rows; 0: all */
	bool cum, lines, bytes, collapsed, text;
	bool has_thread;
	int64_t thread;
	regex_t focus, ignore;
	bool has_focus, has_ignore;
	const char *svg, *pprof, *root;
	bool symbolize;            /* --symbolize: write a symbolized profile */
	const char *out;           /* -o FILE, for it */
	bool keep_wrappers;        /* --keep-wrappers: zmalloc, palloc... are sites */
	regex_t drop[8];           /* --drop RE: more allocator frames */
	int ndrop;
	bool series;               /* --series: trends over several profiles */
	const char **files;        /* its profiles (or prefixes), as given */
	size_t nfiles;
	bool mapped;               /* --mapped: binaries as -p PID maps them */
	const char *as_user;       /* --as-user USER: files with USER's rights */
	const char *title;         /* --title NAME: the profile's name, not its file's */
	uint64_t older_ns;         /* --older-than: only live objects this old */
	bool lifetime;             /* --lifetime: the lifetimes view */
} ropts_t;

/* ---- from raw stacks to samples -------------------------------------- */

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
			continue;         /* objects of no bytes: nothing to scale by */
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
static const char *const skip_names[] = {
	"calloc", "cfree", "malloc", "newImpl", "void* newImpl", "free", "memalign",
	"posix_memalign", "aligned_alloc", "pvalloc", "valloc", "realloc", "reallocarray",
	"mallocx", "rallocx", "xallocx", "dallocx", "sdallocx", "sdallocx_noflags",
	"tc_calloc", "tc_cfree", "tc_malloc", "tc_free", "tc_memalign", "tc_posix_memalign",
	"tc_pvalloc", "tc_valloc", "tc_realloc", "tc_new", "tc_delete", "tc_newarray",
	"tc_deletearray", "tc_new_nothrow", "tc_newarray_nothrow", "do_malloc", "::do_malloc",
	"::do_malloc_or_cpp_alloc", "DoSampledAllocation", "simple_alloc::allocate",
	"__malloc_alloc_template::allocate", "__builtin_delete", "__builtin_new",
	"__builtin_vec_delete", "__builtin_vec_new", "operator new", "operator new[]",
	"malloc_zone_malloc", "malloc_zone_calloc", "malloc_zone_valloc", "malloc_zone_realloc",
	"malloc_zone_memalign", "malloc_zone_free", "__start_google_malloc",
	"__stop_google_malloc", "__start_malloc_hook", "__stop_malloc_hook",
};

/* Programs' own allocation functions, which only pass a request on to
 * malloc: the site is their caller.  Only names that are nothing else (a
 * program's "zmalloc" is redis's or a copy of it).  --keep-wrappers keeps
 * them as sites. */
static const char *const wrapper_names[] = {
	/* glibc */
	"strdup", "__strdup", "__GI___strdup", "strndup", "__strndup", "__GI___strndup",
	"__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign", "__GI___libc_malloc",
	"__GI___libc_realloc", "__libc_reallocarray", "__posix_memalign",
	/* redis (zmalloc.c) */
	"zmalloc", "zcalloc", "zrealloc", "zstrdup", "ztrymalloc", "ztrycalloc", "ztryrealloc",
	"zmalloc_usable", "zcalloc_usable", "zrealloc_usable", "ztrymalloc_usable", "ztrycalloc_usable",
	"ztryrealloc_usable", "ztrymalloc_usable_internal", "ztrycalloc_usable_internal",
	"ztryrealloc_usable_internal", "zmalloc_no_tcache", "zcalloc_num", "zrealloc_usable_internal",
	/* PostgreSQL (mcxt.c, aset.c, generation.c, slab.c) */
	"palloc", "palloc0", "palloc_extended", "palloc_aligned", "repalloc", "repalloc0",
	"repalloc_extended", "repalloc_huge", "pstrdup", "pnstrdup", "MemoryContextAlloc",
	"MemoryContextAllocZero", "MemoryContextAllocZeroAligned", "MemoryContextAllocExtended",
	"MemoryContextAllocHuge", "MemoryContextAllocAligned", "MemoryContextStrdup",
	"AllocSetAlloc", "AllocSetAllocLarge", "AllocSetAllocFromNewBlock", "AllocSetRealloc",
	"GenerationAlloc", "GenerationAllocLarge", "GenerationAllocFromNewBlock", "SlabAlloc",
	"BumpAlloc",
	/* GLib */
	"g_malloc", "g_malloc0", "g_realloc", "g_try_malloc", "g_try_malloc0", "g_try_realloc",
	"g_malloc_n", "g_malloc0_n", "g_realloc_n", "g_try_malloc_n", "g_try_malloc0_n",
	"g_try_realloc_n", "g_strdup", "g_strndup", "g_memdup", "g_memdup2", "g_slice_alloc",
	"g_slice_alloc0", "g_aligned_alloc", "g_aligned_alloc0",
	/* gnulib, libiberty */
	"xmalloc", "xcalloc", "xrealloc", "xzalloc", "xstrdup", "xstrndup", "xmemdup", "xnmalloc",
	"xnrealloc", "xcharalloc", "x2realloc", "x2nrealloc", "ximalloc", "xirealloc", "xicalloc",
	"xreallocarray", "xireallocarray",
	/* CPython (obmalloc.c) */
	"PyMem_Malloc", "PyMem_Calloc", "PyMem_Realloc", "PyMem_RawMalloc", "PyMem_RawCalloc",
	"PyMem_RawRealloc", "_PyMem_RawMalloc", "_PyMem_RawCalloc", "_PyMem_RawRealloc",
	"PyObject_Malloc", "PyObject_Calloc", "PyObject_Realloc", "_PyObject_Malloc",
	"_PyObject_Calloc", "_PyObject_Realloc", "pymalloc_alloc", "pymalloc_realloc",
	"_PyMem_DebugRawAlloc", "_PyMem_DebugRawMalloc", "_PyMem_DebugRawCalloc",
	"_PyMem_DebugRawRealloc", "_PyMem_DebugMalloc", "_PyMem_DebugCalloc", "_PyMem_DebugRealloc",
	/* Perl */
	"Perl_safesysmalloc", "Perl_safesyscalloc", "Perl_safesysrealloc",
	/* libstdc++ */
	"__gnu_cxx::new_allocator::allocate", "std::__new_allocator::allocate",
	"std::allocator_traits::allocate", "std::allocator::allocate",
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
static void trim_inlined(rp_profile_t *p, const ropts_t *o)
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

static bool allocator_loc(const rp_profile_t *p, const rp_loc_t *l, const ropts_t *o)
{
	if (l->map >= 0 && p->maps[l->map].allocator)
		return true;
	for (int f = 0; f < l->nframes; f++)
		if (alloc_frame(&l->frames[f], o))
			return true;
	return false;
}

typedef struct sbuild_s {
	rp_sample_t *v;
	size_t n, cap;
} sbuild_t;

static void add_sample(sbuild_t *b, const rp_sample_t *s)
{
	b->v = rp_grow(b->v, &b->cap, b->n + 1, sizeof *b->v);
	b->v[b->n++] = *s;
}

/* Samples of one profile.  by_thread: one sample per thread line (for
 * pprof's thread label), shares of the stack's scaled t* values, so the
 * whole still adds up to what jeprof shows. */
static void build(const rp_raw_t *raw, const ropts_t *o, bool by_thread, double sign, sbuild_t *out)
{
	const rp_profile_t *p = &raw->prof;
	bool *alloc_loc = rp_alloc(p->nlocs + 1);
	for (size_t i = 0; i < p->nlocs; i++)
		alloc_loc[i] = allocator_loc(p, &p->locs[i], o);
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
			continue;           /* a stack with only lifetimes */
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

static int load(const char *path, const ropts_t *o, rp_raw_t *raw)
{
	char err[512];
	/* file:line only for the views that show or match it */
	rp_symbolize_lines(o->lines || o->has_focus || o->has_ignore || o->pprof || o->symbolize);
	if (rp_read(path, raw, o->symbolize ? RP_READ_TEXT : 0, err, sizeof err) != 0)
		return cli_err(HC_EXIT_USAGE, "%s", err);
	if (raw->symbolized)
		rp_symbols_apply(raw);          /* its own names; no binaries read */
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
		fprintf(stderr, "%s: report: %s\n", cli_prog, out_safe(rp_intern_n(l, (size_t)(nl - l)), safe, sizeof safe));
	}
	return 0;
}

/* --symbolize -o FILE: the profile as it was, with the names of its
 * addresses in front (symfile.c) */
static int symbols_to(FILE *f, const void *raw)
{
	return rp_symbols_write(raw, f);
}

static int write_symbolized(const rp_raw_t *raw, const ropts_t *o)
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

static rp_profile_t merge(const rp_raw_t *a, sbuild_t *sa, const rp_raw_t *b, sbuild_t *sb)
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

/* ---- names ----------------------------------------------------------- */

/* The names of one location as the text views show them, innermost
 * first: inlined callees marked "(inline)" like jeprof does, the file and
 * line added with --lines, an unknown address as itself. */
typedef struct lnames_s {
	int n;
	const char **name;
} lnames_t;

static lnames_t *names_of_locs(const rp_profile_t *p, const ropts_t *o)
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
				snprintf(buf + len, sizeof buf - (size_t)len, " %s:%d", fr->file ? fr->file : "??", fr->line);
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
static void filter(rp_profile_t *p, const lnames_t *ln, const ropts_t *o)
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

static void coalesce(rp_profile_t *p, const lnames_t *ln)
{
	if (p->nsamples < 2)
		return;
	cmp_ln = ln;
	qsort(p->samples, p->nsamples, sizeof *p->samples, cmp_by_names);
	size_t w = 0;
	double mag[RP_NTYPES] = { 0 };    /* sum of |terms| of the sample at w-1 */
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

/* ---- text ------------------------------------------------------------ */

typedef struct row_s {
	const char *name;
	double flat, cum;
	size_t stamp;
} row_t;

typedef struct rows_s {
	row_t *v;
	size_t n, cap;
	rp_index_t ix;           /* by the interned name's pointer */
} rows_t;

static bool same_row(const void *ctx, uint32_t id)
{
	const rows_t *r = ((const void *const *)ctx)[0];
	return r->v[id].name == ((const void *const *)ctx)[1];
}

static row_t *row_of(rows_t *r, const char *name)
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

static const char *unparse(const ropts_t *o, double v, char *buf, size_t len)
{
	if (o->type == RP_INUSE_OBJECTS || o->type == RP_ALLOC_OBJECTS || o->bytes)
		snprintf(buf, len, "%.0f", trunc(v) + 0.0);   /* Perl's %d truncates; +0.0: no "-0" */
	else
		snprintf(buf, len, "%.1f", v / 1048576.0);
	return buf;
}

static const char *percent(double v, double total, char *buf, size_t len)
{
	snprintf(buf, len, "%.1f%%", total != 0 ? v * 100.0 / total : 0.0);
	return buf;
}

static const char *units(const ropts_t *o)
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
static int print_text(const rp_profile_t *p, const lnames_t *ln, double total, const ropts_t *o, bool json)
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
				row_t *row = row_of(&r, l->name[f]);
				if (row->stamp == i)
					continue;      /* recursion: once per stack */
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
	rp_index_free(&r.ix);        /* the rows are in another order now */
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
		if (p->unnamed) {     /* also said on stderr: "path: build id ..." */
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
			printf("Total (t%lld): %s %s\n", (long long)o->thread, unparse(o, total, b1, sizeof b1), units(o));
		else
			printf("Total: %s %s\n", unparse(o, total, b1, sizeof b1), units(o));
		/* the columns pprof's -top names, over the rows' own widths */
		printf("%8s %6s %6s %8s %6s %s\n", "flat", "flat%", "sum%", "cum", "cum%", o->lines ?
		    "function file:line" : "function");
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
		printf("%8s %6s %6s %8s %6s %s\n", unparse(o, w->flat, b1, sizeof b1),
		       percent(w->flat, shown_total, b2, sizeof b2), percent(running, shown_total, b3, sizeof b3),
		       unparse(o, w->cum, b4, sizeof b4), percent(w->cum, shown_total, b5, sizeof b5),
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

/* ---- folded stacks --------------------------------------------------- */

typedef struct folded_s {
	const char **names;       /* root first */
	uint32_t n;
	double value;
} folded_t;

static int cmp_folded(const void *a, const void *b)
{
	const folded_t *x = a, *y = b;
	for (uint32_t i = 0; i < x->n && i < y->n; i++)
		if (x->names[i] != y->names[i])
			return strcmp(x->names[i], y->names[i]);
	return x->n < y->n ? -1 : x->n > y->n;
}

/* Stacks root first, identical ones merged, sorted. */
static folded_t *fold(const rp_profile_t *p, const lnames_t *ln, const ropts_t *o, size_t *count)
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

static int print_collapsed(const folded_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double val = round(v[i].value);
		if (!(val > 0))
			continue;              /* flame graph tools take no negatives */
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

static int write_svg(const folded_t *v, size_t n, const rp_profile_t *p, const ropts_t *o)
{
	rp_stack_t *st = rp_alloc(sizeof *st * (n + 1));
	for (size_t i = 0; i < n; i++)
		st[i] = (rp_stack_t){ .n = v[i].n, .names = v[i].names, .value = v[i].value };
	char title[4200], err[512];
	const char *b = strrchr(p->path, '/');
	static const char *const said[RP_NTYPES] = { "in-use objects", "in-use space", "allocated objects",
		"allocated space" };
	if (o->title)              /* the caller's name for it, in words */
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

/* ---- options --------------------------------------------------------- */

static int parse_long(const char *opt, const char *s, long lo, long hi, long *v)
{
	char *e;
	errno = 0;
	long x = strtol(s, &e, 10);
	if (e == s || *e || errno || x < lo || x > hi)
		return cli_err(HC_EXIT_USAGE, "%s '%s' is not a whole number from %ld to %ld", opt, s, lo, hi);
	*v = x;
	return 0;
}

/* "90", "90s", "10m", "2h", "1d", "500ms": nanoseconds, at least 1 */
static bool parse_age(const char *s, uint64_t *ns)
{
	char *e;
	errno = 0;
	double v = strtod(s, &e);
	if (errno || e == s || !(v > 0) || *s == '-' || *s == '+')
		return false;
	double unit = !strcmp(e, "") || !strcmp(e, "s") ? 1e9 : !strcmp(e, "ms") ? 1e6 : !strcmp(e, "m") ? 60e9
	    : !strcmp(e, "h") ? 3600e9 : !strcmp(e, "d") ? 86400e9 : 0;
	if (unit == 0 || v * unit > 1e19)
		return false;
	*ns = (uint64_t)(v * unit);
	return *ns > 0;
}

static int parse_re(const char *opt, const char *s, regex_t *re)
{
	int rc = regcomp(re, s, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		char msg[256];
		regerror(rc, re, msg, sizeof msg);
		return cli_err(HC_EXIT_USAGE, "%s '%s' is not a regular expression: %s", opt, s, msg);
	}
	return 0;
}

/* Every option of report, with its help: the parser (getopt_long) and
 * `heapctl help report` are both made from this table.  A name with "_"
 * is taken with "-" too (--inuse_space, --inuse-space), as jeprof's are. */
enum {
	O_INUSE_SPACE = 256, O_INUSE_OBJECTS, O_ALLOC_SPACE, O_ALLOC_OBJECTS, O_BASE, O_THREAD, O_FOCUS,
	O_IGNORE, O_DROP, O_KEEP, O_SERIES, O_TOP, O_CUM, O_LINES, O_BYTES, O_COLLAPSED, O_SVG, O_PPROF,
	O_SYMBOLIZE, O_OUT = 'o', O_TEXT = 300, O_SYSROOT, O_SYMCACHE, O_MAPPED, O_AS_USER, O_TITLE, O_OLDER,
	O_LIFETIME,
};

static const cli_opt_t report_opts[] = {
	{ NULL, 0, NULL, "what to count (one; default --inuse_space):" },
	{ "inuse_space", O_INUSE_SPACE, NULL, "bytes in use" },
	{ "inuse_objects", O_INUSE_OBJECTS, NULL, "objects in use" },
	{ "alloc_space", O_ALLOC_SPACE, NULL, "bytes allocated (needs prof_accum)" },
	{ "alloc_objects", O_ALLOC_OBJECTS, NULL, "objects allocated" },
	{ NULL, 0, NULL, "which stacks:" },
	{ "base", O_BASE, "PROFILE", "subtract this earlier profile (growth since then)" },
	{ "thread", O_THREAD, "N", "only thread N's allocations" },
	{ "older-than", O_OLDER, "AGE", "only objects live for at least AGE (30s, 10m, 2h): leak suspects in a "
	  "running process" },
	{ "focus", O_FOCUS, "RE", "only stacks through a function, file:line matching RE" },
	{ "ignore", O_IGNORE, "RE", "leave out stacks through a match" },
	{ "drop", O_DROP, "RE", "frames whose function matches RE are allocator frames: the site is "
	  "their caller (pprof's -drop_frames; also --drop_frames)" },
	{ "drop_frames", O_DROP, "RE", NULL },
	{ "keep-wrappers", O_KEEP, NULL, "show the common allocation wrappers as sites (by default zmalloc, "
	  "palloc, g_malloc, xmalloc, PyMem_Malloc, strdup and their kin count as the allocator)" },
	{ "series", O_SERIES, NULL, "PROFILE... (or a PREFIX of their names, or a directory): how each "
	  "site changed from dump to dump: first, last, growth, intervals it grew and shrank; sites that "
	  "only grew (leak suspects) first, marked *; --svg FILE draws the top 10 over time" },
	{ NULL, 0, NULL, "output (text top by default):" },
	{ "top", O_TOP, "N", "rows of the text view (default 50, 0: all)" },
	{ "lifetime", O_LIFETIME, NULL, "per site, how long its sampled objects lived: frees, median, p99, "
	  "share freed within 1 ms, 1 s, 1 min, and those still live" },
	{ "cum", O_CUM, NULL, "sort by cumulative instead of flat" },
	{ "lines", O_LINES, NULL, "one row per function and file:line" },
	{ "bytes", O_BYTES, NULL, "bytes instead of MB (also --show_bytes)" },
	{ "show_bytes", O_BYTES, NULL, NULL },
	{ "collapsed", O_COLLAPSED, NULL, "folded stacks (flamegraph.pl, speedscope, inferno)" },
	{ "svg", O_SVG, "FILE", "write a flame graph a browser opens" },
	{ "pprof", O_PPROF, "FILE", "write a gzipped pprof profile (go tool pprof, Pyroscope)" },
	{ "symbolize", O_SYMBOLIZE, NULL, "with -o FILE: write PROFILE with its function names in it "
	  "(jeprof's '--- symbol' format): jeprof and heapctl read FILE on a machine without the binaries" },
	{ "output", O_OUT, "FILE", "the file --symbolize writes" },
	{ "text", O_TEXT, NULL, "the text view as well as --svg/--pprof/--symbolize" },
	{ "title", O_TITLE, "NAME", "call the profile NAME (in the flame graph's title, the pprof's comment "
	  "and the messages) instead of by its file's path" },
	{ NULL, 0, NULL, "binaries:" },
	{ "sysroot", O_SYSROOT, "DIR", "look binaries and debug files up under DIR" },
	{ "symcache", O_SYMCACHE, "DIR", "keep what each module's addresses came to in DIR, per build id, "
	  "and read it from there the next time (made if missing; yours, writable by you alone)" },
	{ "mapped", O_MAPPED, NULL, "with -p PID: read each binary as the process maps it now "
	  "(/proc/PID/map_files, else its path if still that file), never by the dump's paths, and every "
	  "other file with the rights of the process's user; addresses it does not map get no names" },
	{ "as-user", O_AS_USER, "USER", "open binaries and debug files with USER's rights (name or uid; "
	  "as root: what a report made for USER may read); with --mapped the process must be USER's" },
	{ 0 },
};

/* `heapctl help report`'s option list (heapctl calls it through the engine). */
__attribute__((visibility("default"))) void hc_report_help(FILE *f);

void hc_report_help(FILE *f)
{
	cli_opts_help(f, report_opts);
	fputs("  -p PID            look binaries up under /proc/PID/root (a container's files), and one\n"
	    "                    whose build id is not the dump's in /proc/PID/map_files\n"
	    "  (FILE - is standard output)\n"
	    "  A file whose build id differs from the one the dump records is never used for names;\n"
	    "  each module left unnamed is said on stderr.\n", f);
}

/* The real ids of process pid and its groups, as the kernel has them. */
static bool proc_ids(int pid, uid_t *uid, gid_t *gid, gid_t *groups, int *n)
{
	char v[1024], *e;
	*n = 0;
	if (!cli_proc_status_field(pid, "Uid", v, sizeof v) || sscanf(v, "%u", uid) != 1 ||
	    !cli_proc_status_field(pid, "Gid", v, sizeof v) || sscanf(v, "%u", gid) != 1)
		return false;
	if (cli_proc_status_field(pid, "Groups", v, sizeof v))
		for (char *t = strtok_r(v, " \t", &e); t && *n < 256; t = strtok_r(NULL, " \t", &e))
			groups[(*n)++] = (gid_t)strtoul(t, NULL, 10);
	return true;
}

/* --as-user USER, or the user of process pid (--mapped): whose rights
 * symbolize.c opens files with, and the live process it reads. */
static int confine(const ropts_t *o, int pid)
{
	uid_t uid = 0, puid = 0;
	gid_t gid = 0, groups[256], pgid = 0, pgroups[256];
	int n = 0, pn = 0;
	if (o->mapped && !proc_ids(pid, &puid, &pgid, pgroups, &pn))
		return cli_err(HC_EXIT_NOPROC, "--mapped: cannot read the user of process %d", pid);
	if (o->as_user) {
		struct passwd *pw = getpwnam(o->as_user);
		char *e = NULL;
		errno = 0;
		unsigned long x = pw ? 0 : strtoul(o->as_user, &e, 10);
		if (pw == NULL && (*o->as_user == 0 || *e || errno || x >= (uid_t)-1))
			return cli_err(HC_EXIT_USAGE, "--as-user %s: no such user", o->as_user);
		if (pw == NULL)
			pw = getpwuid((uid_t)x);
		uid = pw ? pw->pw_uid : (uid_t)x;
		gid = pw ? pw->pw_gid : (gid_t)x;   /* a uid of no user (a container's): its own group */
		n = sizeof groups / sizeof groups[0];
		if (pw == NULL || getgrouplist(pw->pw_name, gid, groups, &n) < 0)
			groups[0] = gid, n = 1;
		/* the user's process, not another that has its pid since (with
		 * CAP_SYS_PTRACE the kernel would hand us anyone's mappings) */
		if (o->mapped && uid != 0 && puid != uid)
			return cli_err(HC_EXIT_PERM, "--mapped: process %d is not %s's", pid, o->as_user);
	}
	if (o->mapped && (!o->as_user || uid == puid)) {
		/* its own groups, which a container's user has in no /etc/group of ours */
		uid = puid, gid = pgid, n = pn;
		memcpy(groups, pgroups, sizeof(gid_t) * (size_t)pn);
	}
	char err[256];
	if (rp_symbolize_confine(o->mapped ? pid : 0, true, uid, gid, groups, n, err, sizeof err) != 0)
		return cli_err(HC_EXIT_FAILED, "%s", err);
	return 0;
}

static int parse_opts(cli_args_t *a, ropts_t *o)
{
	*o = (ropts_t){ .type = RP_INUSE_SPACE, .top = 50 };
	int ntypes = 0, rc = 0;
	size_t fcap = 0;
	const char **pos = rp_alloc(sizeof(char *) * ((size_t)a->argc + 1));
	size_t npos = 0;
	long n;
	cli_scan_t sc;
	rc = cli_scan_begin(&sc, a, "report", report_opts, false);
	const char *v;
	for (int c; rc == 0 && (c = cli_scan_next(&sc, &v)) != 0;) {
		switch (c) {
		case CLI_OPERAND: pos[npos++] = v; break;
		case O_INUSE_SPACE: o->type = RP_INUSE_SPACE, ntypes++; break;
		case O_INUSE_OBJECTS: o->type = RP_INUSE_OBJECTS, ntypes++; break;
		case O_ALLOC_SPACE: o->type = RP_ALLOC_SPACE, ntypes++; break;
		case O_ALLOC_OBJECTS: o->type = RP_ALLOC_OBJECTS, ntypes++; break;
		case O_CUM: o->cum = true; break;
		case O_LINES: o->lines = true; break;
		case O_BYTES: o->bytes = true; break;
		case O_COLLAPSED: o->collapsed = true; break;
		case O_TEXT: o->text = true; break;
		case O_BASE: o->base = v; break;
		case O_SVG: o->svg = v; break;
		case O_PPROF: o->pprof = v; break;
		case O_SYSROOT: o->root = v; break;
		case O_MAPPED: o->mapped = true; break;
		case O_LIFETIME: o->lifetime = true; break;
		case O_OLDER:
			if (!parse_age(v, &o->older_ns))
				rc = cli_err(HC_EXIT_USAGE, "--older-than '%s' is not an age such as 90s, 10m or 2h", v);
			break;
		case O_AS_USER: o->as_user = v; break;
		case O_TITLE: o->title = v; break;
		case O_SYMCACHE: {
			char err[4096 + 256];
			if (rp_symcache_use(v, err, sizeof err) != 0)
				rc = cli_err(HC_EXIT_USAGE, "%s", err);
			break;
		}
		case O_SERIES: o->series = true; break;
		case O_SYMBOLIZE: o->symbolize = true; break;
		case O_KEEP: o->keep_wrappers = true; break;
		case O_OUT: o->out = v; break;
		case O_TOP:
			if (!(rc = parse_long("--top", v, 0, 1000000000, &n)))
				o->top = n;
			break;
		case O_THREAD:
			if (!(rc = parse_long("--thread", v, 0, 0x7fffffffffffffffL, &n)))
				o->thread = n, o->has_thread = true;
			break;
		case O_FOCUS:
			if (!(rc = parse_re("--focus", v, &o->focus)))
				o->has_focus = true;
			break;
		case O_IGNORE:
			if (!(rc = parse_re("--ignore", v, &o->ignore)))
				o->has_ignore = true;
			break;
		case O_DROP:
			if (o->ndrop == 8)
				rc = cli_err(HC_EXIT_USAGE, "--drop: 8 at most (join them with |)");
			else if (!(rc = parse_re("--drop", v, &o->drop[o->ndrop])))
				o->ndrop++;
			break;
		default:
			rc = -c;
		}
	}
	cli_scan_end(&sc);
	if (rc)
		return rc;
	if (o->series) {
		for (size_t i = 0; i < npos; i++) {
			o->files = rp_grow(o->files, &fcap, o->nfiles + 1, sizeof *o->files);
			o->files[o->nfiles++] = pos[i];
		}
	} else if (npos > 1) {
		return cli_err(HC_EXIT_USAGE, "one profile at a time ('%s' and '%s'); use --base for a "
		               "difference, --series for a trend", pos[0], pos[1]);
	} else if (npos == 1) {
		o->profile = pos[0];
	}
	if (rc)
		return rc;
	if (o->series) {
		if (o->nfiles == 0)
			return cli_err(HC_EXIT_USAGE, "--series needs profiles, or a prefix they start with");
		if (o->base || o->pprof || o->collapsed || o->symbolize)
			return cli_err(HC_EXIT_USAGE, "--series shows text, --json or --svg FILE; not --base, --pprof, "
			               "--collapsed or --symbolize");
		o->profile = o->files[0];
	}
	if (o->profile == NULL)
		return cli_err(HC_EXIT_USAGE, "report needs a profile file (heapctl report FILE)");
	if (ntypes > 1)
		return cli_err(HC_EXIT_USAGE, "choose one of --inuse_space, --inuse_objects, --alloc_space, --alloc_objects");
	if (o->svg && !*o->svg)
		return cli_err(HC_EXIT_USAGE, "--svg needs a file name");
	if (o->pprof && !*o->pprof)
		return cli_err(HC_EXIT_USAGE, "--pprof needs a file name");
	int to_stdout = (o->svg && !strcmp(o->svg, "-")) + (o->pprof && !strcmp(o->pprof, "-")) + o->collapsed + o->text;
	if (to_stdout > 1)
		return cli_err(HC_EXIT_USAGE, "only one of --text, --collapsed, --svg - and --pprof - can write to standard output");
	if (o->symbolize && (o->out == NULL || !*o->out))
		return cli_err(HC_EXIT_USAGE, "--symbolize needs -o FILE, the symbolized profile to write");
	if (o->out && !o->symbolize)
		return cli_err(HC_EXIT_USAGE, "-o FILE is for --symbolize (the views take --svg FILE, --pprof FILE)");
	if (o->symbolize && o->base)
		return cli_err(HC_EXIT_USAGE, "--symbolize writes one profile; symbolize the base on its own");
	if (o->symbolize && !strcmp(o->out, "-"))
		to_stdout++;
	if (to_stdout > 1)
		return cli_err(HC_EXIT_USAGE, "only one output can go to standard output");
	if (a->pid && o->root)
		return cli_err(HC_EXIT_USAGE, "give --sysroot or a PID, not both");
	if (a->pid) {
		/* the target's own view of its files (containers), or its
		 * master's where it chrooted after the fork */
		char buf[64];
		hc_shm_proc_root(a->pid, buf, sizeof buf);
		if (access(buf, R_OK | X_OK) != 0)
			return cli_err(errno == ENOENT ? HC_EXIT_NOPROC : HC_EXIT_PERM, "cannot read %s: %s", buf, strerror(errno));
		o->root = rp_intern(buf);
		rp_symbolize_pid((int)a->pid);
	}
	if (o->root && access(o->root, X_OK) != 0)
		return cli_err(HC_EXIT_USAGE, "--sysroot %s: %s", o->root, strerror(errno));
	if (o->mapped && !a->pid)
		return cli_err(HC_EXIT_USAGE, "--mapped reads the binaries of a live process: give -p PID");
	return o->mapped || o->as_user ? confine(o, (int)a->pid) : 0;
}

/* ---- --lifetime ----------------------------------------------------- */

typedef struct lsite_s {
	const char *name;
	rp_life_t life;
	uint64_t live;             /* sampled objects live at the dump */
	double live_objs, live_bytes;   /* what they stand for */
	uint64_t oldest_ns;
} lsite_t;

/* Bucket i of a lifetime histogram holds [lo, hi) ns (agent/prof.c's
 * hc_life_bucket). */
static void life_bucket_range(int i, double *lo, double *hi)
{
	if (i < 4) {
		*lo = i;
		*hi = i + 1;
		return;
	}
	int b = i / 4 + 2, m = i % 4 + 4;     /* i = 4 (b - 3) + m */
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
static int print_lifetime(const rp_raw_t *raw, const ropts_t *o, bool json)
{
	const rp_profile_t *p = &raw->prof;
	lnames_t *ln = names_of_locs(p, o);
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
			if (allocator_loc(p, l, o)) {
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
		return cli_err(HC_EXIT_USAGE, "%s has no lifetimes: it was written by jemalloc or an older heapctl, "
		    "or is a peak dump", o->profile);
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
	printf("%-40s %9s %9s %9s %6s %6s %6s %8s %10s %9s\n", "site", "frees", "median", "p99", "<1ms", "<1s",
	    "<1min", "live", "live MB", "oldest");
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

/* ---- --series ------------------------------------------------------- */

typedef struct sdump_s {
	const char *path;
	int64_t mtime;
	uint64_t pid, seq;
	size_t plen;               /* the length of <prefix> */
	bool named;                /* <prefix>.<pid>.<seq>.<kind>... */
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
				return cli_err(HC_EXIT_USAGE, "--series: '%s' is not a file, and no file matches %s", arg, pat);
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
				return cli_err(HC_EXIT_USAGE, "--series: the dumps of pids %llu and %llu were written at the same "
				               "time; give one process's dumps (for example %.*s.%llu.)",
				               (unsigned long long)v[i].pid, (unsigned long long)v[j].pid,
				               (int)v[j].plen, v[j].path, (unsigned long long)v[j].pid);
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
	unparse(o, fabs(v), b, sizeof b);
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
	printf("Total: %s %s -> %s %s (%s %s)\n", unparse(o, se->total[0], b1, sizeof b1), units(o),
	       unparse(o, se->total[nd - 1], b2, sizeof b2), units(o),
	       signed_val(o, se->total[nd - 1] - se->total[0], b3, sizeof b3), units(o));
	printf("%9s %9s %10s %6s %6s  %s\n", "first", "last", "growth", "grew", "shrank",
	       "site (* only grew: a leak suspect)");
	for (size_t i = 0; i < limit; i++) {
		const rp_trend_t *r = &t[i];
		char g[32], sh[32];
		snprintf(g, sizeof g, "%u/%zu", r->grew, nd - 1);
		snprintf(sh, sizeof sh, "%u", r->shrank);
		printf("%9s %9s %10s %6s %6s  %s%s\n", unparse(o, r->first, b1, sizeof b1), unparse(o, r->last, b2, sizeof b2),
		       signed_val(o, r->growth, b3, sizeof b3), g, sh, r->only_grew ? "* " : "  ",
		       out_safe(se->site[r->site], safe, sizeof safe));
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
static int series_load(const char *const *paths, size_t nd, const ropts_t *o, rp_series_t *se)
{
	memset(se, 0, sizeof *se);
	se->ndumps = nd;
	se->path = rp_alloc(sizeof *se->path * nd);
	se->time_ns = rp_alloc(sizeof *se->time_ns * nd);
	se->total = rp_alloc(sizeof *se->total * nd);
	rows_t sites = { 0 };
	double *v = NULL;          /* v[site * nd + dump], grown with the sites */
	size_t vcap = 0;
	for (size_t d = 0; d < nd; d++) {
		rp_raw_t raw;
		int rc = load(paths[d], o, &raw);
		if (rc != 0)
			return rc;
		trim_inlined(&raw.prof, o);
		sbuild_t sa = { 0 };
		build(&raw, o, false, 1, &sa);
		rp_profile_t p = merge(&raw, &sa, NULL, NULL);
		lnames_t *ln = names_of_locs(&p, o);
		se->path[d] = paths[d];
		se->time_ns[d] = raw.prof.time_ns;
		filter(&p, ln, o);
		for (size_t i = 0; i < p.nsamples; i++) {
			const rp_sample_t *s = &p.samples[i];
			se->total[d] += s->v[o->type];
			if (s->nloc == 0)
				continue;
			row_t *row = row_of(&sites, ln[s->loc[0]].name[0]);
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

static int cmd_series(const cli_args_t *a, ropts_t *o)
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
	if ((rc = series_load(paths, nd, o, &se)) != 0)
		return rc;
	size_t nt;
	rp_trend_t *t = rp_series_rank(&se, &nt);
	bool show_text = o->text || !o->svg;
	if (show_text && (rc = series_text(&se, t, nt, o, a->json)) != 0)
		return rc;
	if (o->svg) {
		char title[4200], err[512];
		const char *b = strrchr(se.path[0], '/');
		snprintf(title, sizeof title, "%s over %zu dumps: %s ...", rp_type_name[o->type], nd, b ? b + 1 : se.path[0]);
		bool bytes = o->type == RP_INUSE_SPACE || o->type == RP_ALLOC_SPACE;
		chart_job_t j = { &se, t, nt, o->top > 0 && o->top < 10 ? (size_t)o->top : 10, title, bytes };
		if (rp_out_stream(o->svg, chart_to, &j, err, sizeof err) != 0)
			return cli_err(HC_EXIT_FAILED, "%s", err);
		if (!show_text && strcmp(o->svg, "-"))
			printf("wrote chart %s\n", o->svg);
	}
	return 0;
}

/* ---- heapctl watch --leaks ------------------------------------------------ */

static volatile sig_atomic_t leaks_stop;
static void leaks_signal(int sig) { (void)sig; leaks_stop = 1; }

static const cli_opt_t leaks_opts[] = {
	{ "leaks", 'L', NULL, NULL },
	{ "every", 'e', "SECS", NULL },
	{ "intervals", 'n', "N", NULL },
	{ "count", 'c', "N", NULL },
	{ NULL, 0, NULL, NULL },
};

/* heapctl watch PID --leaks: a dump of the process every SECS seconds into
 * a private directory; once N + 1 are there, the sites whose in-use bytes
 * went up in each of the last N intervals are leak suspects (what a leak
 * holds only grows; a cache or a pool gives some back), each printed once,
 * when it first qualifies.  The process pays one dump per interval. */
__attribute__((visibility("default"))) int hc_leaks_main(cli_args_t *a);

int hc_leaks_main(cli_args_t *a)
{
	long every = 60, n = 5, rounds = 0;
	cli_scan_t sc;
	int rc = cli_scan_begin(&sc, a, "watch", leaks_opts, false);
	const char *v;
	for (int id; rc == 0 && (id = cli_scan_next(&sc, &v)) != 0;) {
		if (id < 0)
			rc = -id;
		else if (id == 'e')
			rc = parse_long("--every", v, 1, 86400, &every);
		else if (id == 'n')
			rc = parse_long("--intervals", v, 2, 1000, &n);
		else if (id == 'c')
			rc = parse_long("--count", v, 1, 1000000, &rounds);
		else if (id == CLI_OPERAND)
			rc = cli_err(HC_EXIT_USAGE, "watch: unexpected argument '%s'", v);
	}
	cli_scan_end(&sc);
	if (rc)
		return rc;
	if (a->pid <= 0)
		return cli_err(HC_EXIT_USAGE, "watch --leaks: which process? (heapctl watch PID --leaks)");
	char exe[PATH_MAX], dir[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len <= 0)
		return cli_err(HC_EXIT_FAILED, "cannot find heapctl itself: %s", strerror(errno));
	exe[len] = 0;
	const char *rt = getenv("XDG_RUNTIME_DIR");
	snprintf(dir, sizeof dir, "%s/heapctl-leaks.XXXXXX", rt && *rt == '/' ? rt : "/tmp");
	if (mkdtemp(dir) == NULL)
		return cli_err(HC_EXIT_FAILED, "cannot make a directory for the dumps, %s: %s", dir, strerror(errno));
	signal(SIGINT, leaks_signal);
	signal(SIGTERM, leaks_signal);
	ropts_t o;
	memset(&o, 0, sizeof o);
	o.type = RP_INUSE_SPACE;
	size_t keep = (size_t)n + 1, have = 0;
	char **paths = rp_alloc(sizeof *paths * keep);
	const char **told = NULL;      /* suspects printed so far */
	size_t ntold = 0, toldcap = 0;
	if (!a->json)
		printf("watching process %d: a dump every %ld s; a site whose in-use bytes grow in each of %ld "
		    "intervals in a row is a leak suspect (the first after %ld s)\n", (int)a->pid, every, n, every * n);
	fflush(stdout);
	rc = 0;
	for (long round = 0; !leaks_stop && (rounds == 0 || round < rounds); round++) {
		if (round > 0)
			for (long s = 0; s < every * 10 && !leaks_stop; s++)
				usleep(100000);
		if (leaks_stop)
			break;
		char path[PATH_MAX + 32], pid[24], out[256], err[1024];
		snprintf(path, sizeof path, "%s/%06ld.heap", dir, round);
		snprintf(pid, sizeof pid, "%d", (int)a->pid);
		char *argv[] = { exe, "dump", pid, "-o", path, NULL };
		int st = cli_spawn(argv, NULL, out, sizeof out, err, sizeof err, (int)(a->timeout_ns / 1000000) + 5000);
		if (st != 0) {
			err[strcspn(err, "\n")] = 0;
			rc = cli_err(st == HC_EXIT_NOPROC ? HC_EXIT_NOPROC : HC_EXIT_FAILED, "watch --leaks: %s",
			    *err ? (strncmp(err, "heapctl: ", 9) ? err : err + 9) : "the dump failed");
			break;
		}
		if (have == keep) {
			unlink(paths[0]);
			memmove(paths, paths + 1, sizeof *paths * (keep - 1));
			have--;
		}
		paths[have++] = (char *)rp_intern(path);
		if (have < keep)
			continue;
		rp_series_t se;
		if ((rc = series_load((const char *const *)paths, have, &o, &se)) != 0)
			break;
		size_t nt;
		rp_trend_t *t = rp_series_rank(&se, &nt);
		double hours = (double)(every * n) / 3600.0;
		for (size_t i = 0; i < nt; i++) {
			if (t[i].grew != (unsigned)n || t[i].growth <= 0)
				continue;
			const char *site = se.site[t[i].site];
			size_t k = 0;
			while (k < ntold && told[k] != site)
				k++;
			if (k < ntold)
				continue;
			told = rp_grow(told, &toldcap, ntold + 1, sizeof *told);
			told[ntold++] = site;
			char safe[1024];
			if (a->json) {
				json_t j;
				json_begin(&j, stdout, JSON_LINE);
				json_obj(&j, NULL);
				json_i64(&j, "pid", a->pid);
				json_str(&j, "site", site);
				json_int(&j, "bytes", t[i].last);
				json_int(&j, "growth_bytes", t[i].growth);
				json_int(&j, "growth_per_hour", t[i].growth / hours);
				json_i64(&j, "intervals", n);
				json_i64(&j, "every_s", every);
				json_end(&j);
			} else {
				printf("leak suspect in %d: %s grew in each of the last %ld intervals: +%.1f MB (%.1f MB/h), "
				    "now %.1f MB\n", (int)a->pid, out_safe(site, safe, sizeof safe), n, t[i].growth / 1048576.0,
				    t[i].growth / 1048576.0 / hours, t[i].last / 1048576.0);
			}
			fflush(stdout);
		}
	}
	for (size_t i = 0; i < have; i++)
		unlink(paths[i]);
	rmdir(dir);
	return rc;
}

/* The engine's entry point (cli.h), loaded by heapctl's cmd_report. */
__attribute__((visibility("default"))) hc_report_main_fn hc_report_main;

int hc_report_main(cli_args_t *a)
{
	ropts_t o;
	int rc = parse_opts(a, &o);
	if (rc)
		return rc;
	if (o.series)
		return cmd_series(a, &o);
	rp_raw_t raw, braw;
	if ((rc = load(o.profile, &o, &raw)) != 0)
		return rc;
	if (o.lifetime)
		return print_lifetime(&raw, &o, a->json);
	if (o.older_ns && !raw.has_ages)
		return cli_err(HC_EXIT_USAGE, "%s has no ages of its live objects: it was written by jemalloc or an "
		    "older heapctl, or is a peak dump", o.profile);
	if (o.base && (rc = load(o.base, &o, &braw)) != 0)
		return rc;

	if (o.symbolize && (rc = write_symbolized(&raw, &o)) != 0)
		return rc;
	trim_inlined(&raw.prof, &o);
	if (o.base)
		trim_inlined(&braw.prof, &o);
	bool files = o.svg || o.pprof || o.symbolize;
	bool show_text = !o.collapsed && (o.text || !files);
	sbuild_t sa = { 0 }, sb = { 0 };
	build(&raw, &o, false, 1, &sa);
	if (o.base)
		build(&braw, &o, false, -1, &sb);
	rp_profile_t p = merge(&raw, &sa, o.base ? &braw : NULL, &sb);
	lnames_t *ln = names_of_locs(&p, &o);
	if (o.base)
		coalesce(&p, ln);
	double total = 0;
	for (size_t i = 0; i < p.nsamples; i++)
		total += p.samples[i].v[o.type];
	filter(&p, ln, &o);

	if (show_text && (rc = print_text(&p, ln, total, &o, a->json)) != 0)
		return rc;
	if (o.collapsed || o.svg) {
		size_t n;
		folded_t *v = fold(&p, ln, &o, &n);
		if (o.collapsed && (rc = print_collapsed(v, n)) != 0)
			return rc;
		if (o.svg && (rc = write_svg(v, n, &p, &o)) != 0)
			return rc;
		if (o.svg && !show_text && !o.collapsed && strcmp(o.svg, "-"))
			printf("wrote flame graph %s\n", o.svg);
	}
	if (o.pprof) {
		/* pprof gets a sample per thread, labelled, when there is no --thread */
		sbuild_t ta = { 0 }, tb = { 0 };
		build(&raw, &o, !o.has_thread, 1, &ta);
		if (o.base)
			build(&braw, &o, !o.has_thread, -1, &tb);
		rp_profile_t q = merge(&raw, &ta, o.base ? &braw : NULL, &tb);
		filter(&q, ln, &o);    /* merge lays out the locations the same way each time */
		if (o.title)
			q.path = o.title;  /* the comment names it so */
		char err[512];
		if (rp_pprof_write(&q, o.type, o.pprof, err, sizeof err) != 0)
			return cli_err(HC_EXIT_FAILED, "%s", err);
		if (!show_text && !o.collapsed && strcmp(o.pprof, "-"))
			printf("wrote pprof profile %s\n", o.pprof);
	}
	if (o.symbolize && !show_text && !o.collapsed && strcmp(o.out, "-"))
		printf("wrote symbolized profile %s (jeprof and heapctl read it without the program)\n", o.out);
	return 0;
}
