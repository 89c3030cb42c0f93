/*
 * heapctl/report/command.h - what the files of the `heapctl report` command
 * (and `heapctl watch --leaks`) share: the options, and the steps from a
 * profile read to a view, declared per file.
 *
 *   command.c        the options, their checks, hc_report_main: one view
 *   samples.c        a profile read and symbolized, its stacks scaled up
 *                    for sampling and cut at the allocator, --base merged
 *   filter.c         the names of each location, --focus/--ignore, and
 *                    the stacks of a difference made one
 *   view_text.c      the text view (jeprof --text), and its rows and numbers
 *   view_folded.c    folded stacks and the flame graph
 *   view_lifetime.c  --lifetime
 *   view_series.c    --series
 *   leaks.c          heapctl watch PID --leaks (a series taken live)
 */
#ifndef HC_RP_COMMAND_H
#define HC_RP_COMMAND_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli/cli.h"
#include "report/report.h"
#include "report/rp_internal.h"

typedef struct ropts_s {
	const char *profile, *base;
	int type; /* RP_INUSE_SPACE, ... */
	long top; /* rows; 0: all */
	bool cum, lines, bytes, collapsed, text;
	bool has_thread;
	int64_t thread;
	regex_t focus, ignore;
	bool has_focus, has_ignore;
	const char *svg, *pprof, *root;
	bool symbolize;     /* --symbolize: write a symbolized profile */
	const char *out;    /* -o FILE, for it */
	bool keep_wrappers; /* --keep-wrappers: zmalloc, palloc... are sites */
	regex_t drop[8];    /* --drop RE: more allocator frames */
	int ndrop;
	bool series;        /* --series: trends over several profiles */
	const char **files; /* its profiles (or prefixes), as given */
	size_t nfiles;
	bool mapped;         /* --mapped: binaries as -p PID maps them */
	const char *as_user; /* --as-user USER: files with USER's rights */
	const char *title;   /* --title NAME: the profile's name, not its file's */
	uint64_t older_ns;   /* --older-than: only live objects this old */
	bool lifetime;       /* --lifetime: the lifetimes view */
} ropts_t;

/* command.c: a whole number from lo to hi, or the usage error naming opt. */
int rp_parse_long(const char *opt, const char *s, long lo, long hi, long *v);

/* samples.c */
typedef struct sbuild_s {
	rp_sample_t *v;
	size_t n, cap;
} sbuild_t;
/* PATH read and symbolized as o asks (what is unnamed said on stderr);
 * 0 or the exit code of the message printed. */
int rp_load(const char *path, const ropts_t *o, rp_raw_t *raw);
int rp_write_symbolized(const rp_raw_t *raw, const ropts_t *o); /* --symbolize -o FILE */
/* Drop the allocator's frames inlined into a location of the program. */
void rp_trim_inlined(rp_profile_t *p, const ropts_t *o);
/* A location in the allocator (its mapping, or a frame of its functions). */
bool rp_allocator_loc(const rp_profile_t *p, const rp_loc_t *l, const ropts_t *o);
/* The samples of raw into out, scaled for sampling, cut at the allocator,
 * multiplied by sign; by_thread: one per thread line (pprof's label). */
void rp_build(const rp_raw_t *raw, const ropts_t *o, bool by_thread, double sign, sbuild_t *out);
/* The profile of a's samples less b's (NULL: a alone). */
rp_profile_t rp_merge(const rp_raw_t *a, sbuild_t *sa, const rp_raw_t *b, sbuild_t *sb);

/* filter.c: the names of one location as the text views show them,
 * innermost first: inlined callees marked "(inline)" like jeprof does, the
 * file and line added with --lines, an unknown address as where it is in
 * which file. */
typedef struct lnames_s {
	int n;
	const char **name;
} lnames_t;
lnames_t *rp_loc_names(const rp_profile_t *p, const ropts_t *o);       /* per location */
void rp_filter(rp_profile_t *p, const lnames_t *ln, const ropts_t *o); /* --focus, --ignore */
void rp_coalesce(rp_profile_t *p, const lnames_t *ln);                 /* after --base */

/* view_text.c: rows by interned name, and numbers in o's unit. */
typedef struct row_s {
	const char *name;
	double flat, cum;
	size_t stamp;
} row_t;
typedef struct rows_s {
	row_t *v;
	size_t n, cap;
	rp_index_t ix; /* by the interned name's pointer */
} rows_t;
row_t *rp_row_of(rows_t *r, const char *name);
const char *rp_unparse(const ropts_t *o, double v, char *buf, size_t len);
const char *rp_units(const ropts_t *o);
int rp_print_text(const rp_profile_t *p, const lnames_t *ln, double total, const ropts_t *o, bool json);

/* view_folded.c: stacks root first, identical ones merged, sorted. */
typedef struct folded_s {
	const char **names; /* root first */
	uint32_t n;
	double value;
} folded_t;
folded_t *rp_fold(const rp_profile_t *p, const lnames_t *ln, const ropts_t *o, size_t *count);
int rp_print_collapsed(const folded_t *v, size_t n);
int rp_write_svg(const folded_t *v, size_t n, const rp_profile_t *p, const ropts_t *o);

/* view_lifetime.c */
int rp_print_lifetime(const rp_raw_t *raw, const ropts_t *o, bool json);

/* view_series.c: the flat values of every site in each of nd profiles,
 * oldest first; and the --series command. */
int rp_series_load(const char *const *paths, size_t nd, const ropts_t *o, rp_series_t *se);
int rp_cmd_series(const cli_args_t *a, ropts_t *o);

#endif
