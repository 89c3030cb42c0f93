/*
 * heapctl/report/command.c - `heapctl report PROFILE`: read, symbolize, scale
 * and show a heap profile, the way `jeprof --text` does, plus folded
 * stacks, an SVG flame graph and a pprof file.  This file holds the
 * options (one table makes the parser and the help), their checks, and
 * hc_report_main, which runs the steps of command.h's files for one view.
 *
 * Numbers follow jeprof so the two can be compared line by line: each
 * stack is scaled up for sampling with jeprof's formula, allocator frames
 * are cut from the top of each stack, the total is taken before --focus
 * and --ignore, rows are sorted by flat value then name, and a function
 * counts once per stack in "cum".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diagnose/proc.h"
#include "report/command.h"

int rp_parse_long(const char *opt, const char *s, long lo, long hi, long *v)
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
	double unit = !strcmp(e, "") || !strcmp(e, "s") ? 1e9
	    : !strcmp(e, "ms")                          ? 1e6
	    : !strcmp(e, "m")                           ? 60e9
	    : !strcmp(e, "h")                           ? 3600e9
	    : !strcmp(e, "d")                           ? 86400e9
	                                                : 0;
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
	O_INUSE_SPACE = 256,
	O_INUSE_OBJECTS,
	O_ALLOC_SPACE,
	O_ALLOC_OBJECTS,
	O_BASE,
	O_THREAD,
	O_FOCUS,
	O_IGNORE,
	O_DROP,
	O_KEEP,
	O_SERIES,
	O_TOP,
	O_CUM,
	O_LINES,
	O_BYTES,
	O_COLLAPSED,
	O_SVG,
	O_PPROF,
	O_SYMBOLIZE,
	O_OUT = 'o',
	O_TEXT = 300,
	O_SYSROOT,
	O_SYMCACHE,
	O_MAPPED,
	O_AS_USER,
	O_TITLE,
	O_OLDER,
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
	{ "older-than", O_OLDER, "AGE",
	    "only objects live for at least AGE (30s, 10m, 2h): leak suspects in a "
	    "running process" },
	{ "focus", O_FOCUS, "RE", "only stacks through a function, file:line matching RE" },
	{ "ignore", O_IGNORE, "RE", "leave out stacks through a match" },
	{ "drop", O_DROP, "RE",
	    "frames whose function matches RE are allocator frames: the site is "
	    "their caller (pprof's -drop_frames; also --drop_frames)" },
	{ "drop_frames", O_DROP, "RE", NULL },
	{ "keep-wrappers", O_KEEP, NULL,
	    "show the common allocation wrappers as sites (by default zmalloc, "
	    "palloc, g_malloc, xmalloc, PyMem_Malloc, strdup and their kin count as the allocator)" },
	{ "series", O_SERIES, NULL,
	    "PROFILE... (or a PREFIX of their names, or a directory): how each "
	    "site changed from dump to dump: first, last, growth, intervals it grew and shrank; sites that "
	    "only grew (leak suspects) first, marked *; --svg FILE draws the top 10 over time" },
	{ NULL, 0, NULL, "output (text top by default):" },
	{ "top", O_TOP, "N", "rows of the text view (default 50, 0: all)" },
	{ "lifetime", O_LIFETIME, NULL,
	    "per site, how long its sampled objects lived: frees, median, p99, "
	    "share freed within 1 ms, 1 s, 1 min, and those still live" },
	{ "cum", O_CUM, NULL, "sort by cumulative instead of flat" },
	{ "lines", O_LINES, NULL, "one row per function and file:line" },
	{ "bytes", O_BYTES, NULL, "bytes instead of MB (also --show_bytes)" },
	{ "show_bytes", O_BYTES, NULL, NULL },
	{ "collapsed", O_COLLAPSED, NULL, "folded stacks (flamegraph.pl, speedscope, inferno)" },
	{ "svg", O_SVG, "FILE", "write a flame graph a browser opens" },
	{ "pprof", O_PPROF, "FILE", "write a gzipped pprof profile (go tool pprof, Pyroscope)" },
	{ "symbolize", O_SYMBOLIZE, NULL,
	    "with -o FILE: write PROFILE with its function names in it "
	    "(jeprof's '--- symbol' format): jeprof and heapctl read FILE on a machine without the binaries" },
	{ "output", O_OUT, "FILE", "the file --symbolize writes" },
	{ "text", O_TEXT, NULL, "the text view as well as --svg/--pprof/--symbolize" },
	{ "title", O_TITLE, "NAME",
	    "call the profile NAME (in the flame graph's title, the pprof's comment "
	    "and the messages) instead of by its file's path" },
	{ NULL, 0, NULL, "binaries:" },
	{ "sysroot", O_SYSROOT, "DIR", "look binaries and debug files up under DIR" },
	{ "symcache", O_SYMCACHE, "DIR",
	    "keep what each module's addresses came to in DIR, per build id, "
	    "and read it from there the next time (made if missing; yours, writable by you alone)" },
	{ "mapped", O_MAPPED, NULL,
	    "with -p PID: read each binary as the process maps it now "
	    "(/proc/PID/map_files, else its path if still that file), never by the dump's paths, and every "
	    "other file with the rights of the process's user; addresses it does not map get no names" },
	{ "as-user", O_AS_USER, "USER",
	    "open binaries and debug files with USER's rights (name or uid; "
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
	      "  each module left unnamed is said on stderr.\n",
	    f);
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
		gid = pw ? pw->pw_gid : (gid_t)x; /* a uid of no user (a container's): its own group */
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

/* One option of report's table into o; 0 or the exit code of the message
 * printed.  *ntypes counts the choices of what to count. */
static int parse_opt(ropts_t *o, int c, const char *v, int *ntypes)
{
	long n;
	int rc = 0;
	switch (c) {
	case O_INUSE_SPACE: o->type = RP_INUSE_SPACE, (*ntypes)++; break;
	case O_INUSE_OBJECTS: o->type = RP_INUSE_OBJECTS, (*ntypes)++; break;
	case O_ALLOC_SPACE: o->type = RP_ALLOC_SPACE, (*ntypes)++; break;
	case O_ALLOC_OBJECTS: o->type = RP_ALLOC_OBJECTS, (*ntypes)++; break;
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
		if (!(rc = rp_parse_long("--top", v, 0, 1000000000, &n)))
			o->top = n;
		break;
	case O_THREAD:
		if (!(rc = rp_parse_long("--thread", v, 0, 0x7fffffffffffffffL, &n)))
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
	default: rc = -c;
	}
	return rc;
}

/* The profile operands: one, or with --series the files of the series. */
static int parse_operands(ropts_t *o, const char **pos, size_t npos)
{
	size_t fcap = 0;
	if (o->series) {
		for (size_t i = 0; i < npos; i++) {
			o->files = rp_grow(o->files, &fcap, o->nfiles + 1, sizeof *o->files);
			o->files[o->nfiles++] = pos[i];
		}
	} else if (npos > 1) {
		return cli_err(HC_EXIT_USAGE,
		    "one profile at a time ('%s' and '%s'); use --base for a "
		    "difference, --series for a trend",
		    pos[0], pos[1]);
	} else if (npos == 1) {
		o->profile = pos[0];
	}
	if (o->series) {
		if (o->nfiles == 0)
			return cli_err(HC_EXIT_USAGE, "--series needs profiles, or a prefix they start with");
		if (o->base || o->pprof || o->collapsed || o->symbolize)
			return cli_err(HC_EXIT_USAGE,
			    "--series shows text, --json or --svg FILE; not --base, --pprof, "
			    "--collapsed or --symbolize");
		o->profile = o->files[0];
	}
	if (o->profile == NULL)
		return cli_err(HC_EXIT_USAGE, "report needs a profile file (heapctl report FILE)");
	return 0;
}

/* The outputs asked for: each named, at most one on standard output. */
static int check_outputs(const ropts_t *o)
{
	if (o->svg && !*o->svg)
		return cli_err(HC_EXIT_USAGE, "--svg needs a file name");
	if (o->pprof && !*o->pprof)
		return cli_err(HC_EXIT_USAGE, "--pprof needs a file name");
	int to_stdout =
	    (o->svg && !strcmp(o->svg, "-")) + (o->pprof && !strcmp(o->pprof, "-")) + o->collapsed + o->text;
	if (to_stdout > 1)
		return cli_err(HC_EXIT_USAGE,
		    "only one of --text, --collapsed, --svg - and --pprof - can write to standard output");
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
	return 0;
}

/* Where the binaries are read: --sysroot, or -p PID's root; and whose
 * rights they are read with (confine). */
static int check_binaries(const cli_args_t *a, ropts_t *o)
{
	if (a->pid && o->root)
		return cli_err(HC_EXIT_USAGE, "give --sysroot or a PID, not both");
	if (a->pid) {
		/* the target's own view of its files (containers), or its
		 * master's where it chrooted after the fork */
		char buf[64];
		hc_shm_proc_root(a->pid, buf, sizeof buf);
		if (access(buf, R_OK | X_OK) != 0)
			return cli_err(errno == ENOENT ? HC_EXIT_NOPROC : HC_EXIT_PERM, "cannot read %s: %s", buf,
			    strerror(errno));
		o->root = rp_intern(buf);
		rp_symbolize_pid((int)a->pid);
	}
	if (o->root && access(o->root, X_OK) != 0)
		return cli_err(HC_EXIT_USAGE, "--sysroot %s: %s", o->root, strerror(errno));
	if (o->mapped && !a->pid)
		return cli_err(HC_EXIT_USAGE, "--mapped reads the binaries of a live process: give -p PID");
	return o->mapped || o->as_user ? confine(o, (int)a->pid) : 0;
}

static int parse_opts(cli_args_t *a, ropts_t *o)
{
	*o = (ropts_t){ .type = RP_INUSE_SPACE, .top = 50 };
	int ntypes = 0, rc = 0;
	const char **pos = rp_alloc(sizeof(char *) * ((size_t)a->argc + 1));
	size_t npos = 0;
	cli_scan_t sc;
	rc = cli_scan_begin(&sc, a, "report", report_opts, false);
	const char *v;
	for (int c; rc == 0 && (c = cli_scan_next(&sc, &v)) != 0;) {
		if (c == CLI_OPERAND)
			pos[npos++] = v;
		else
			rc = parse_opt(o, c, v, &ntypes);
	}
	cli_scan_end(&sc);
	if (rc)
		return rc;
	if ((rc = parse_operands(o, pos, npos)) != 0)
		return rc;
	if (ntypes > 1)
		return cli_err(HC_EXIT_USAGE,
		    "choose one of --inuse_space, --inuse_objects, --alloc_space, --alloc_objects");
	if ((rc = check_outputs(o)) != 0)
		return rc;
	return check_binaries(a, o);
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
		return rp_cmd_series(a, &o);
	rp_raw_t raw, braw;
	if ((rc = rp_load(o.profile, &o, &raw)) != 0)
		return rc;
	if (o.lifetime)
		return rp_print_lifetime(&raw, &o, a->json);
	if (o.older_ns && !raw.has_ages)
		return cli_err(HC_EXIT_USAGE,
		    "%s has no ages of its live objects: it was written by jemalloc or an "
		    "older heapctl, or is a peak dump",
		    o.profile);
	if (o.base && (rc = rp_load(o.base, &o, &braw)) != 0)
		return rc;

	if (o.symbolize && (rc = rp_write_symbolized(&raw, &o)) != 0)
		return rc;
	rp_trim_inlined(&raw.prof, &o);
	if (o.base)
		rp_trim_inlined(&braw.prof, &o);
	bool files = o.svg || o.pprof || o.symbolize;
	bool show_text = !o.collapsed && (o.text || !files);
	sbuild_t sa = { 0 }, sb = { 0 };
	rp_build(&raw, &o, false, 1, &sa);
	if (o.base)
		rp_build(&braw, &o, false, -1, &sb);
	rp_profile_t p = rp_merge(&raw, &sa, o.base ? &braw : NULL, &sb);
	lnames_t *ln = rp_loc_names(&p, &o);
	if (o.base)
		rp_coalesce(&p, ln);
	double total = 0;
	for (size_t i = 0; i < p.nsamples; i++)
		total += p.samples[i].v[o.type];
	rp_filter(&p, ln, &o);

	if (show_text && (rc = rp_print_text(&p, ln, total, &o, a->json)) != 0)
		return rc;
	if (o.collapsed || o.svg) {
		size_t n;
		folded_t *v = rp_fold(&p, ln, &o, &n);
		if (o.collapsed && (rc = rp_print_collapsed(v, n)) != 0)
			return rc;
		if (o.svg && (rc = rp_write_svg(v, n, &p, &o)) != 0)
			return rc;
		if (o.svg && !show_text && !o.collapsed && strcmp(o.svg, "-"))
			printf("wrote flame graph %s\n", o.svg);
	}
	if (o.pprof) {
		/* pprof gets a sample per thread, labelled, when there is no --thread */
		sbuild_t ta = { 0 }, tb = { 0 };
		rp_build(&raw, &o, !o.has_thread, 1, &ta);
		if (o.base)
			rp_build(&braw, &o, !o.has_thread, -1, &tb);
		rp_profile_t q = rp_merge(&raw, &ta, o.base ? &braw : NULL, &tb);
		rp_filter(&q, ln, &o); /* merge lays out the locations the same way each time */
		if (o.title)
			q.path = o.title; /* the comment names it so */
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
