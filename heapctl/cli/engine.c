/*
 * heapctl/cli/engine.c - the files installed with heapctl, and the commands
 * whose code is in a library heapctl loads for them alone (report, stacks
 * and inject in the report engine, serve in the daemon's, trace in
 * libbpf's): so that the control commands need none of libdw, libelf,
 * zlib, libstdc++, libmicrohttpd or libbpf.  Each such command's entry in
 * the table (main.c) names its engine here; its usage is here too, since
 * heapctl must print it when the engine is not installed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_find_installed(const char *name, char *out, size_t len, bool quiet)
{
	char exe[PATH_MAX], cand[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return quiet ? HC_EXIT_FAILED
		             : cli_err(HC_EXIT_FAILED, "cannot tell where heapctl is installed: %s", strerror(errno));
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	*slash = 0;
	/* next to the command (the build tree), or PREFIX/lib for PREFIX/bin */
	const char *dirs[] = { "/", "/../lib/" };
	for (unsigned i = 0; i < 2; i++) {
		snprintf(cand, sizeof cand, "%s%s%s", exe, dirs[i], name);
		char real[PATH_MAX];
		if (access(cand, R_OK) == 0 && realpath(cand, real) && strlen(real) < len) {
			strcpy(out, real);
			return 0;
		}
	}
	if (quiet)
		return HC_EXIT_FAILED;
	return cli_err(HC_EXIT_FAILED, "%s is neither next to %s/heapctl nor in %s/../lib%s", name, exe, exe,
	    strcmp(name, "libheapctl.so") ? "" : " (set HEAPCTL_LIB=/path/to/libheapctl.so)");
}

int cli_find_library(const char *name, char *out, size_t len)
{
	const char *env = getenv("HEAPCTL_LIB");
	if (env && *env) {
		if (realpath(env, out) == NULL || strlen(out) >= len)
			return cli_err(HC_EXIT_USAGE, "HEAPCTL_LIB=%s: %s", env, strerror(errno));
		return 0;
	}
	return cli_find_installed(name, out, len, false);
}

/* ---- the engines ----------------------------------------------------------- */

/* A library of heapctl's loaded on first use; NULL (after one line saying
 * why, unless quiet) when it cannot be. */
static void *engine(const char *lib, bool quiet)
{
	static struct {
		const char *lib;
		void *h;
	} loaded[3];
	unsigned i = 0;
	for (; i < 3 && loaded[i].lib; i++)
		if (strcmp(loaded[i].lib, lib) == 0)
			return loaded[i].h;
	char path[4096];
	if (cli_find_installed(lib, path, sizeof path, quiet) != 0)
		return NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL && !quiet)
		cli_err(HC_EXIT_FAILED, "cannot load %s: %s", path, dlerror());
	if (h && i < 3) {
		loaded[i].lib = lib;
		loaded[i].h = h;
	}
	return h;
}

int cli_engine_run(const cli_engine_t *e, cli_args_t *a)
{
	void *h = engine(e->lib, false);
	if (h == NULL)
		return HC_EXIT_FAILED;
	hc_report_main_fn *run = (hc_report_main_fn *)dlsym(h, e->entry);
	if (run == NULL)
		return cli_err(HC_EXIT_FAILED, "%s has no %s: %s", e->lib, e->entry, dlerror());
	return run(a);
}

void cli_engine_help(FILE *f, const cli_engine_t *e)
{
	if (e->help == NULL)
		return;
	void *h = engine(e->lib, true);
	void (*help)(FILE *) = h ? (void (*)(FILE *))dlsym(h, e->help) : NULL;
	if (help)
		help(f);
	else
		fprintf(f, "(its options: %s is not installed)\n", e->what);
}

#define REPORT_ENGINE "the report engine " HC_REPORT_LIB

const cli_engine_t cli_engine_report = { HC_REPORT_LIB, HC_REPORT_ENTRY, HC_REPORT_HELP, REPORT_ENGINE };
const cli_engine_t cli_engine_stacks = { HC_REPORT_LIB, HC_STACKS_ENTRY, NULL, REPORT_ENGINE };
const cli_engine_t cli_engine_inject = { HC_REPORT_LIB, HC_INJECT_ENTRY, HC_INJECT_HELP, REPORT_ENGINE };
/* heapctl watch PID --leaks: reading the dumps needs the report engine */
const cli_engine_t cli_engine_leaks = { HC_REPORT_LIB, HC_LEAKS_ENTRY, NULL, REPORT_ENGINE };
const cli_engine_t cli_engine_serve = { HC_SERVE_LIB, HC_SERVE_ENTRY, HC_SERVE_HELP,
	"the daemon's library " HC_SERVE_LIB };
const cli_engine_t cli_engine_trace = { HC_TRACE_LIB, HC_TRACE_ENTRY, HC_TRACE_HELP, HC_TRACE_LIB };

/* ---- their usage (the options are the engine's: one table, there) ---------- */

static void report_more(FILE *f)
{
	fputs("\nPROFILE is a heap_v2 dump (heapctl's or jemalloc's) or a gperftools heap profile;\n"
	      "its MAPPED_LIBRARIES section says which binaries to read symbols from, unless it\n"
	      "is a symbolized profile (--symbolize), which carries its own.\n\n",
	    f);
}

/* inject's and trace's engines print their options without a heading */
static void options_heading(FILE *f)
{
	fputs("\noptions:\n", f);
}

const cli_help_t cli_help_report = {
	.usage = "PROFILE [--base PROFILE] [OPTIONS] | --series PROFILE...|PREFIX [OPTIONS]",
	.line = "symbolized top, flame graph or pprof file of a heap profile; trends over a series",
	.more = report_more,
};
const cli_help_t cli_help_serve = {
	.usage = "[--listen ADDR] [--token-file FILE] [--archive DIR]",
	.line = "the daemon: /metrics, /targets and /debug/pprof/heap over HTTP for every process",
};
const cli_help_t cli_help_stacks = {
	.usage = "PID [--json]",
	.line = "every thread's stack, symbolized (ptrace; stopped only while they are read)",
};
const cli_help_t cli_help_inject = {
	.usage = "PID [--lg-sample N] [--off] [--conf CONF]",
	.line = "load the profiler into a process started without it (ptrace; glibc, x86-64)",
	.more = options_heading,
};
const cli_help_t cli_help_trace = {
	.usage = "PID --malloc|--faults [OPTIONS]",
	.line = "a heap profile of any process from eBPF, without touching it (root)",
	.more = options_heading,
};
