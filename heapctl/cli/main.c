/*
 * heapctl/cli/main.c - the command table, the options every command shares,
 * and the dispatcher (used by main and, through cli_args_t's dispatch, by
 * `heapctl attach`).
 *
 * The table is the one place that says which commands exist, in which
 * order help lists them, and what each needs from the dispatcher (its
 * flags: CLI_PID, a leading number is its PID; CLI_ATTACH, usable inside
 * attach) or from an engine heapctl loads (engine.c).  Each command's
 * usage, one-line help, options table and further help are its own
 * cli_help_t, next to its code, as git's builtins keep their usage.
 *
 *   heapctl COMMAND [PID] [OPTIONS]        (-p PID also accepted)
 *
 * Every failure is one line on stderr and an exit code from the table in
 * shm/heapctl_shm.h (HC_EXIT_*), documented in heapctl(1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cmd/cmd.h"
#include "diagnose/diagnose.h"
#include "systemd/systemd.h"

#ifndef HEAPCTL_VERSION
#define HEAPCTL_VERSION "0.1.0"
#endif

static int cmd_help(cli_args_t *a);

static const cli_help_t help_help = {
	.usage = "[COMMAND | conf]",
	.line = "this text, one command's, or the configuration options",
};

/* The command table: each command's name, code and what it needs from the
 * dispatcher; its usage, help and options are next to its code (cli_help_t).
 * The order is `heapctl help`'s. */
static const cli_cmd_t commands[] = {
	{ "list", cmd_list, CLI_PID | CLI_ATTACH, &cmd_help_list, NULL },
	{ "status", cmd_status, CLI_PID | CLI_ATTACH, &cmd_help_status, NULL },
	{ "set", cmd_set, CLI_PID | CLI_ATTACH, &cmd_help_set, NULL },
	{ "on", cmd_on, CLI_PID | CLI_ATTACH, &cmd_help_on, NULL },
	{ "off", cmd_off, CLI_PID | CLI_ATTACH, &cmd_help_off, NULL },
	{ "dump", cmd_dump, CLI_PID | CLI_ATTACH, &cmd_help_dump, NULL },
	{ "reset", cmd_reset, CLI_PID | CLI_ATTACH, &cmd_help_reset, NULL },
	{ "watch", cmd_watch, CLI_PID | CLI_ATTACH, &cmd_help_watch, NULL },
	{ "attach", cmd_attach, CLI_PID, &cmd_help_attach, NULL },
	{ "report", NULL, 0, &cli_help_report, &cli_engine_report },
	{ "run", cmd_run, 0, &cmd_help_run, NULL },
	{ "systemd", cmd_systemd, 0, &cmd_help_systemd, NULL },
	/* serve's options are in its engine, not here: a number after one
	 * (--keep 5) is its value, and serve takes no PID */
	{ "serve", NULL, 0, &cli_help_serve, &cli_engine_serve },
	{ "stacks", NULL, CLI_PID, &cli_help_stacks, &cli_engine_stacks },
	{ "inject", NULL, CLI_PID, &cli_help_inject, &cli_engine_inject },
	{ "eject", cmd_eject, CLI_PID | CLI_ATTACH, &cmd_help_eject, NULL },
	{ "trace", NULL, CLI_PID, &cli_help_trace, &cli_engine_trace },
	{ "explain", cmd_explain, CLI_PID | CLI_ATTACH, &cmd_help_explain, NULL },
	{ "purge", cmd_purge, CLI_PID | CLI_ATTACH, &cmd_help_purge, NULL },
	{ "doctor", cmd_doctor, CLI_PID, &cmd_help_doctor, NULL },
	{ "help", cmd_help, CLI_ATTACH, &help_help, NULL },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const cli_cmd_t *command(const char *name)
{
	for (unsigned i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
	    "usage: heapctl COMMAND [PID] [OPTIONS]\n\n"
	    "Control and watch a running process that has libheapctl.so preloaded,\n"
	    "and report on heap profiles (heapctl help report).\n"
	    "PID may be left out when exactly one such process is visible; -p PID works too.\n\n"
	    "commands:\n");
	for (unsigned i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-8s %-46s %s\n", commands[i].name, commands[i].help->usage, commands[i].help->line);
	fprintf(f,
	    "\noptions for every command:\n"
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

static void usage_of(FILE *f, const cli_cmd_t *c)
{
	const cli_help_t *h = c->help;
	fprintf(f, "usage: heapctl %s %s\n  %s\n", c->name, h->usage, h->line);
	if (h->opts) {
		fputs("\noptions:\n", f);
		cli_opts_help(f, h->opts);
	}
	if (h->more)
		h->more(f);
	if (c->engine)
		cli_engine_help(f, c->engine);
}

/* ---- the settings list (shm/hc_settings.def) as help and as man page text ---- */

/* The range of a setting in words, "" where the type says it all. */
static const char *range_text(const hc_shm_setting_t *s, char *buf, size_t len)
{
	switch (s->type) {
	case HC_SET_UINT:
	case HC_SET_LG:
	case HC_SET_SSIZE:
	case HC_SET_POW2: snprintf(buf, len, "%lld to %lld", (long long)s->min, (long long)s->max); return buf;
	case HC_SET_BYTES: return "bytes";
	case HC_SET_STR: snprintf(buf, len, "up to %lld bytes", (long long)s->max); return buf;
	default: return "";
	}
}

static void help_conf(FILE *f)
{
	fprintf(f,
	    "configuration: MALLOC_CONF, then HEAPCTL_CONF (which wins), as name:value,name:value\n\n"
	    "  %-24s %-10s %-16s %s\n",
	    "option", "default", "range", "meaning");
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
		    *range_text(s, r, sizeof r)) { /* those two: the help says */
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
	const cli_cmd_t *c = command(a->argv[0]);
	if (c) {
		usage_of(stdout, c);
		return 0;
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
	const cli_cmd_t *c = command(name);
	if (c == NULL)
		return cli_err(HC_EXIT_USAGE, "unknown command '%s' (try 'heapctl help')", name);
	if (attach_pid && !(c->flags & CLI_ATTACH))
		return cli_err(HC_EXIT_USAGE, "'%s' cannot be used inside attach", name);

	cli_args_t a = { .timeout_ns = 5000000000ull, .in_attach = attach_pid != 0, .dispatch = cli_dispatch };
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
			if (c->help->opts && cli_opts_takes_value(c->help->opts, s) && i + 1 < argc)
				rest[a.argc++] = argv[++i];
			continue;
		}
		if (!positional_seen && all_digits(s) && a.pid == 0 && (c->flags & CLI_PID)) {
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
		code = c->run ? c->run(&a) : cli_engine_run(c->engine, &a);
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
