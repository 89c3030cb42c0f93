/*
 * heapctl/cli/main.c - the command table, the options every command shares,
 * and the dispatcher (used by main and by `heapctl attach`).
 *
 *   heapctl COMMAND [PID] [OPTIONS]        (-p PID also accepted)
 *
 * Every failure is one line on stderr and an exit code from the table in
 * shm/heapctl_shm.h (HC_EXIT_*), documented in heapctl(1).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#ifndef HEAPCTL_VERSION
#define HEAPCTL_VERSION "0.1.0"
#endif

static int cmd_help(cli_args_t *a);

/* Each command and its options' table (cli_opt_t, next to the command;
 * report's is in the engine): the parser's and the help's. */
static const struct {
	cli_cmd_t c;
	const cli_opt_t *opts;
} commands[] = {
	{ { "list", cmd_list, "[--json]", "list the processes running libheapctl.so", true }, NULL },
	{ { "status", cmd_status, "[PID] [--json]", "show one process's settings and counters", true }, NULL },
	{ { "set", cmd_set, "[PID] NAME=VALUE...", "change settings (see 'heapctl help set')", true }, NULL },
	{ { "on", cmd_on, "[PID]", "start sampling (prof.active=true)", true }, NULL },
	{ { "off", cmd_off, "[PID]", "stop sampling (prof.active=false)", true }, NULL },
	{ { "dump", cmd_dump, "[PID] [--prefix P | -o FILE | --fetch] [--peak] [--json]",
	    "write a heap profile now and print a path you can open", true }, dump_opts },
	{ { "reset", cmd_reset, "[PID] [--lg-sample N]", "forget all samples (optionally change the rate)", true },
	  reset_opts },
	{ { "watch", cmd_watch, "[PID] [--json] [--count N] | PID --leaks [--every SECS] [--intervals N]",
	    "print events (high-water, dumps, settings) as they happen", true }, watch_opts },
	{ { "attach", cmd_attach, "PID", "a console for one process; commands from a terminal or stdin", false }, NULL },
	{ { "report", cmd_report,
	    "PROFILE [--base PROFILE] [OPTIONS] | --series PROFILE...|PREFIX [OPTIONS]",
	    "symbolized top, flame graph or pprof file of a heap profile; trends over a series", false }, NULL },
	{ { "run", cmd_run, "[--conf CONF] [--off] [--secure] -- CMD [ARGS...]",
	    "start a program under libheapctl.so, sampling from the start", false }, run_opts },
	{ { "systemd", cmd_systemd, "enable|disable UNIT [OPTIONS] | status",
	    "run a service under the library: one drop-in that fits its hardening", false }, systemd_opts },
	{ { "serve", cmd_serve, "[--listen ADDR] [--token-file FILE] [--archive DIR]",
	    "the daemon: /metrics, /targets and /debug/pprof/heap over HTTP for every process", false }, NULL },
	{ { "stacks", cmd_stacks, "PID [--json]",
	    "every thread's stack, symbolized (ptrace; stopped only while they are read)", false }, NULL },
	{ { "inject", cmd_inject, "PID [--lg-sample N] [--off] [--conf CONF]",
	    "load the profiler into a process started without it (ptrace; glibc, x86-64)", false }, NULL },
	{ { "eject", cmd_eject, "[PID]", "put an injected process's own malloc back; the agent goes inert", true },
	  NULL },
	{ { "trace", cmd_trace, "PID --malloc|--faults [OPTIONS]",
	    "a heap profile of any process from eBPF, without touching it (root)", false }, NULL },
	{ { "explain", cmd_explain, "PID [--classes N] [--json]",
	    "where its resident memory goes: heap (live, fragmented, free), stacks, files", true }, explain_opts },
	{ { "purge", cmd_purge, "[PID] [--json]", "return the allocator's free pages to the OS now", true }, NULL },
	{ { "doctor", cmd_doctor, "PID|UNIT [--json]",
	    "why a process is not in 'list' or refuses commands, and the fix", false }, NULL },
	{ { "help", cmd_help, "[COMMAND | conf]", "this text, one command's, or the configuration options", true }, NULL },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
	fprintf(f, "usage: heapctl COMMAND [PID] [OPTIONS]\n\n"
	    "Control and watch a running process that has libheapctl.so preloaded,\n"
	    "and report on heap profiles (heapctl help report).\n"
	    "PID may be left out when exactly one such process is visible; -p PID works too.\n\n"
	    "commands:\n");
	for (unsigned i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-8s %-46s %s\n", commands[i].c.name, commands[i].c.usage, commands[i].c.help);
	fprintf(f, "\noptions for every command:\n"
	    "  -p, --pid PID     the target process\n"
	    "  --timeout SECS    how long to wait for the target to answer (default 5)\n"
	    "  --json            machine-readable output where data is printed\n"
	    "  -h, --help        help for the command\n\n"
	    "exit status: 0 ok, 1 failed in the target, 2 usage, 3 no such process,\n"
	    "4 no segment (the library not loaded, or control:false), 5 permission denied,\n"
	    "6 incompatible or corrupt segment, 7 no answer in time, 8 no PID given and\n"
	    "not exactly one candidate.\n"
	    "See heapctl(1).\n");
}

/* A library of heapctl's loaded on first use (the report engine, the
 * daemon); NULL (after one line saying why, unless quiet) when it cannot
 * be. */
static void *engine(const char *lib, bool quiet)
{
	static struct { const char *lib; void *h; } loaded[3];
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

static void *engine_symbol(const char *lib, const char *name)
{
	void *h = engine(lib, true);
	return h ? dlsym(h, name) : NULL;
}

/* Run a command whose code is in lib (cli.h). */
static int engine_run(const char *lib, const char *entry, cli_args_t *a)
{
	void *h = engine(lib, false);
	if (h == NULL)
		return HC_EXIT_FAILED;
	hc_report_main_fn *run = (hc_report_main_fn *)dlsym(h, entry);
	if (run == NULL)
		return cli_err(HC_EXIT_FAILED, "%s has no %s: %s", lib, entry, dlerror());
	return run(a);
}

/* `heapctl report` and `heapctl serve`: their libraries are loaded for
 * them alone (cli.h). */
int cmd_report(cli_args_t *a)
{
	return engine_run(HC_REPORT_LIB, HC_REPORT_ENTRY, a);
}

int cmd_serve(cli_args_t *a)
{
	return engine_run(HC_SERVE_LIB, HC_SERVE_ENTRY, a);
}

int cmd_trace(cli_args_t *a)
{
	return engine_run(HC_TRACE_LIB, HC_TRACE_ENTRY, a);
}

/* heapctl watch PID --leaks: reading the dumps needs the report engine */
int cmd_watch_leaks(cli_args_t *a)
{
	return engine_run(HC_REPORT_LIB, "hc_leaks_main", a);
}

int cmd_stacks(cli_args_t *a)
{
	return engine_run(HC_REPORT_LIB, HC_STACKS_ENTRY, a);
}

int cmd_inject(cli_args_t *a)
{
	return engine_run(HC_REPORT_LIB, HC_INJECT_ENTRY, a);
}

static void usage_of(FILE *f, const cli_cmd_t *c)
{
	fprintf(f, "usage: heapctl %s %s\n  %s\n", c->name, c->usage, c->help);
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (commands[i].c.run == c->run && commands[i].opts) {
			fputs("\noptions:\n", f);
			cli_opts_help(f, commands[i].opts);
		}
	if (strcmp(c->name, "set") == 0) {
		fprintf(f, "\nsettings (names as jemalloc's mallctls):\n");
		for (unsigned i = 0; i < HC_NSETTINGS; i++)
			if (hc_shm_settings[i].name)
				fprintf(f, "  %-24s %s\n", hc_shm_settings[i].name, hc_shm_settings[i].help);
		fprintf(f, "\nbooleans: true/false (also on/off, 1/0); byte counts take K, M, G, T.\n"
		    "Start-up values: heapctl help conf.\n");
	}
	if (strcmp(c->name, "systemd") == 0)
		fputs("\n  enable UNIT [--conf CONF] [--dump-dir DIR] [--off] [--secure] [--user] [--restart [--keep]]\n"
		    "      write UNIT.d/50-heapctl.conf: LD_PRELOAD (libheapctl.so first), sampling on\n"
		    "      from the start, CONF (MALLOC_CONF syntax) in HEAPCTL_CONF, dumps in\n"
		    "      /var/lib/heapctl/UNIT (StateDirectory=) or DIR, ExecPaths= where the unit\n"
		    "      forbids executing the library; refuses, with the fix, where the preload\n"
		    "      cannot work (also a unit that runs no program of its own, /bin/true:\n"
		    "      it names the units that do); \"already loaded\", exit 0, where the unit's\n"
		    "      processes run the library from that drop-in.  A unit that does not come\n"
		    "      up after --restart: says whether for its own reasons (a Condition= not\n"
		    "      met, it fails without the library too) or the library's, and removes the\n"
		    "      drop-in (--keep: not)\n"
		    "  disable UNIT [--user] [--restart]\n"
		    "      remove exactly what enable wrote\n"
		    "  status [--user] [--json]\n"
		    "      units with the drop-in: of their processes, how many carry the library\n"
		    "      and answer; each one that carries it and does not answer, and why\n"
		    "UNIT may be a template (foo@.service: every instance) or an instance.\n", f);
	if (strcmp(c->name, "run") == 0)
		fputs("\nLD_PRELOAD gets libheapctl.so first (a preload you have is kept after it);\n"
		    "HEAPCTL_CONF gets prof:true,prof_active:true (--off: false) and then CONF, checked\n"
		    "by the library before CMD starts.  --secure: libheapctl-secure.so, with the\n"
		    "allocator's misuse checks.  Exit status: CMD's own (it is exec'd), or 126/127\n"
		    "when it cannot be run.\n", f);
	if (strcmp(c->name, "report") == 0) {
		fputs("\nPROFILE is a heap_v2 dump (heapctl's or jemalloc's) or a gperftools heap profile;\n"
		    "its MAPPED_LIBRARIES section says which binaries to read symbols from, unless it\n"
		    "is a symbolized profile (--symbolize), which carries its own.\n\n", f);
		/* the options and their help are the engine's (one table) */
		void (*help)(FILE *) = (void (*)(FILE *))engine_symbol(HC_REPORT_LIB, HC_REPORT_HELP);
		if (help)
			help(f);
		else
			fputs("(its options: the report engine " HC_REPORT_LIB " is not installed)\n", f);
	}
	if (strcmp(c->name, "inject") == 0) {
		void (*help)(FILE *) = (void (*)(FILE *))engine_symbol(HC_REPORT_LIB, HC_INJECT_HELP);
		fputs("\noptions:\n", f);
		if (help)
			help(f);
		else
			fputs("(its options: the report engine " HC_REPORT_LIB " is not installed)\n", f);
	}
	if (strcmp(c->name, "trace") == 0) {
		void (*help)(FILE *) = (void (*)(FILE *))engine_symbol(HC_TRACE_LIB, HC_TRACE_HELP);
		fputs("\noptions:\n", f);
		if (help)
			help(f);
		else
			fputs("(its options: " HC_TRACE_LIB " is not installed)\n", f);
	}
	if (strcmp(c->name, "serve") == 0) {
		void (*help)(FILE *) = (void (*)(FILE *))engine_symbol(HC_SERVE_LIB, HC_SERVE_HELP);
		if (help)
			help(f);
		else
			fputs("(its options: the daemon's library " HC_SERVE_LIB " is not installed)\n", f);
	}
}

/* ---- the settings list (shm/hc_settings.def) as help and as man page text ---- */

/* The range of a setting in words, "" where the type says it all. */
static const char *range_text(const hc_shm_setting_t *s, char *buf, size_t len)
{
	switch (s->type) {
	case HC_SET_UINT: case HC_SET_LG: case HC_SET_SSIZE: case HC_SET_POW2:
		snprintf(buf, len, "%lld to %lld", (long long)s->min, (long long)s->max);
		return buf;
	case HC_SET_BYTES:
		return "bytes";
	case HC_SET_STR:
		snprintf(buf, len, "up to %lld bytes", (long long)s->max);
		return buf;
	default:
		return "";
	}
}

static void help_conf(FILE *f)
{
	fprintf(f, "configuration: MALLOC_CONF, then HEAPCTL_CONF (which wins), as name:value,name:value\n\n"
	    "  %-24s %-10s %-16s %s\n", "option", "default", "range", "meaning");
	for (unsigned i = 0; i < HC_NSETTINGS; i++) {
		const hc_shm_setting_t *s = &hc_shm_settings[i];
		char r[48];
		fprintf(f, "  %-24s %-10s %-16s %s", s->option, s->def, range_text(s, r, sizeof r), s->help);
		if (s->name)
			fprintf(f, " [run time: %s]", s->name);
		fputc('\n', f);
	}
	fprintf(f, "\nEach is also read back by mallctl as opt.<option>.  See libheapctl(3).\n");
}

/* Text for a roff page: backslashes and hyphens escaped. */
static void roff(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", f);
		else if (*s == '-')
			fputs("\\-", f);
		else
			fputc(*s, f);
	}
}

/* The options table of libheapctl(3) (conf) or the settings of heapctl(1)
 * set (set), as `make man-settings` writes them into the pages. */
static void help_roff(FILE *f, bool conf)
{
	for (unsigned i = 0; i < HC_NSETTINGS; i++) {
		const hc_shm_setting_t *s = &hc_shm_settings[i];
		char r[48];
		if (!conf && s->name == NULL)
			continue;
		fputs(".TP\n", f);
		if (conf) {
			fputs(".BR ", f);
			roff(f, s->option);
			fputs(" \" (", f);
			roff(f, s->def);
			const char *range = range_text(s, r, sizeof r);
			if (*range) {
				fputs("; ", f);
				roff(f, range);
			}
			fputs(")\"\n", f);
		} else {
			fputs(".B ", f);
			roff(f, s->name);
			fputc('\n', f);
		}
		roff(f, s->help);
		fputs(".\n", f);
		if (conf && s->name) {
			fputs("At run time:\n.BR ", f);
			roff(f, s->name);
			fputs(" .\n", f);
		} else if (!conf && s->type != HC_SET_POW2 && s->type != HC_SET_BYTES &&
		    *range_text(s, r, sizeof r)) {   /* those two: the help says */
			fputs("(", f);
			roff(f, range_text(s, r, sizeof r));
			fputs(")\n", f);
		}
	}
}

static int cmd_help(cli_args_t *a)
{
	if (a->argc == 0) {
		usage(stdout);
		return 0;
	}
	if (a->argc > 1)
		return cli_err(HC_EXIT_USAGE, "help: one command at a time, not '%s'", a->argv[1]);
	if (strcmp(a->argv[0], "conf") == 0) {
		help_conf(stdout);
		return 0;
	}
	if (strcmp(a->argv[0], "conf.roff") == 0 || strcmp(a->argv[0], "set.roff") == 0) {
		help_roff(stdout, a->argv[0][0] == 'c');
		return 0;
	}
	for (unsigned i = 0; i < NCOMMANDS; i++) {
		if (strcmp(commands[i].c.name, a->argv[0]) == 0) {
			usage_of(stdout, &commands[i].c);
			return 0;
		}
	}
	return cli_err(HC_EXIT_USAGE, "unknown command '%s' (try 'heapctl help')", a->argv[0]);
}

static bool all_digits(const char *s)
{
	if (*s == 0)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

int cli_parse_pid(const char *s, int *pid)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!all_digits(s) || errno || v <= 0 || v > 0x3fffffff)
		return cli_err(HC_EXIT_USAGE, "'%s' is not a PID", s);
	*pid = (int)v;
	return 0;
}

static int parse_timeout(const char *s, uint64_t *ns)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !(v > 0) || v > 86400)
		return cli_err(HC_EXIT_USAGE, "--timeout '%s' is not a number of seconds (like 5 or 0.5)", s);
	*ns = (uint64_t)(v * 1e9);
	return 0;
}


int cli_dispatch(int argc, char **argv, int attach_pid)
{
	if (argc < 1) {
		usage(stderr);
		return HC_EXIT_USAGE;
	}
	const char *name = argv[0];
	unsigned ci;
	for (ci = 0; ci < NCOMMANDS; ci++)
		if (strcmp(commands[ci].c.name, name) == 0)
			break;
	if (ci == NCOMMANDS)
		return cli_err(HC_EXIT_USAGE, "unknown command '%s' (try 'heapctl help')", name);
	const cli_cmd_t *c = &commands[ci].c;
	if (attach_pid && !c->attach)
		return cli_err(HC_EXIT_USAGE, "'%s' cannot be used inside attach", name);

	cli_args_t a = { .timeout_ns = 5000000000ull, .in_attach = attach_pid != 0 };
	char **rest = calloc((size_t)argc + 1, sizeof *rest);
	if (rest == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	a.argv = rest;
	bool positional_seen = false, after_dashdash = false;
	int code = 0;
	for (int i = 1; i < argc && code == 0; i++) {
		const char *s = argv[i];
		const char *val = NULL;
		if (!after_dashdash && s[0] == '-') {
			if (!strcmp(s, "--")) {
				after_dashdash = true;
				continue;
			}
			if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
				usage_of(stdout, c);
				free(rest);
				return 0;
			}
			if (!strcmp(s, "--json")) {
				a.json = true;
				continue;
			}
			if (!strcmp(s, "-p") || !strcmp(s, "--pid") || !strcmp(s, "--timeout")) {
				if (i + 1 >= argc) {
					code = cli_err(HC_EXIT_USAGE, "%s needs a value", s);
					break;
				}
				val = argv[++i];
			} else if (!strncmp(s, "--pid=", 6)) {
				val = s + 6;
			} else if (!strncmp(s, "--timeout=", 10)) {
				val = s + 10;
			}
			if (val) {
				if (!strcmp(s, "-p") || !strncmp(s, "--pid", 5))
					code = cli_parse_pid(val, &a.pid);
				else
					code = parse_timeout(val, &a.timeout_ns);
				continue;
			}
			/* the command's own option; keep its value with it (a
			 * value is not the PID) */
			rest[a.argc++] = argv[i];
			if (commands[ci].opts && cli_opts_takes_value(commands[ci].opts, s) && i + 1 < argc)
				rest[a.argc++] = argv[++i];
			continue;
		}
		/* serve's options are in its engine, not here: a number after
		 * one (--keep 5) is its value, and serve takes no PID */
		if (!positional_seen && all_digits(s) && a.pid == 0 && strcmp(name, "help") &&
		    strcmp(name, "report") && strcmp(name, "run") && strcmp(name, "systemd") && strcmp(name, "serve")) {
			positional_seen = true;
			code = cli_parse_pid(s, &a.pid);
			continue;
		}
		positional_seen = true;
		rest[a.argc++] = argv[i];
	}
	if (code == 0) {
		if (attach_pid && a.pid == 0)
			a.pid = attach_pid;
		code = c->run(&a);
	}
	free(rest);
	return code;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		usage(stderr);
		return HC_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("heapctl %s (segment ABI %u)\n", HEAPCTL_VERSION, HC_SHM_ABI);
		return 0;
	}
	/* heapctl -p PID COMMAND ... */
	if ((!strcmp(argv[1], "-p") || !strcmp(argv[1], "--pid")) && argc < 4)
		return cli_err(HC_EXIT_USAGE, "a command is needed after %s PID (try 'heapctl help')", argv[1]);
	if ((!strcmp(argv[1], "-p") || !strcmp(argv[1], "--pid")) && argc >= 4) {
		char *pid = argv[2], *cmd = argv[3];
		argv[1] = cmd;
		argv[2] = (char *)"-p";
		argv[3] = pid;
		return cli_dispatch(argc - 1, argv + 1, 0);
	}
	return cli_dispatch(argc - 1, argv + 1, 0);
}
