/*
 * heapctl/cli/opts.c - each command's options: one table (cli_opt_t, next to
 * the command) gives getopt_long its options and `heapctl help COMMAND`
 * its option list.  A name with "_" is taken with "-" too (and the other
 * way round), and "--name
 * value", "--name=value" and unambiguous abbreviations work, as getopt_long
 * has them.  Errors are one line: "CMD: unknown option 'X' (try 'heapctl
 * help CMD')", "CMD: --name needs a value".
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static size_t count(const cli_opt_t *opts)
{
	size_t n = 0;
	while (opts && (opts[n].name || opts[n].help))
		n++;
	return n;
}

int cli_scan_begin(cli_scan_t *s, const cli_args_t *a, const char *cmd, const cli_opt_t *opts, bool in_order)
{
	size_t n = count(opts);
	*s = (cli_scan_t){ .cmd = cmd };
	s->lo = calloc(2 * n + 1, sizeof *s->lo);
	s->names = calloc(n + 1, sizeof *s->names);
	s->argv = calloc((size_t)a->argc + 2, sizeof *s->argv);
	if (s->lo == NULL || s->names == NULL || s->argv == NULL) {
		cli_scan_end(s);
		return cli_err(HC_EXIT_FAILED, "out of memory");
	}
	/* "+": options, then the rest as it is (run's command); "-": options
	 * and operands in any order, operands returned in turn */
	char *sh = s->shorts;
	*sh++ = in_order ? '+' : '-';
	*sh++ = ':';
	size_t nl = 0;
	for (size_t i = 0; i < n; i++) {
		const cli_opt_t *o = &opts[i];
		if (o->name == NULL)
			continue;
		int has = o->arg ? required_argument : no_argument;
		s->lo[nl++] = (struct option){ o->name, has, NULL, o->id };
		/* the other spelling: "_" for "-", "-" for "_" */
		if (strpbrk(o->name, "_-") && strlen(o->name) < sizeof s->names[0]) {
			strcpy(s->names[i], o->name);
			for (char *c = s->names[i]; *c; c++)
				if (*c == '_' || *c == '-')
					*c = *c == '_' ? '-' : '_';
			s->lo[nl++] = (struct option){ s->names[i], has, NULL, o->id };
		}
		if (o->id > ' ' && o->id < 127 && sh < s->shorts + sizeof s->shorts - 3) {
			*sh++ = (char)o->id;
			if (o->arg)
				*sh++ = ':';
		}
	}
	*sh = 0;
	s->argv[0] = (char *)cmd;
	memcpy(s->argv + 1, a->argv, sizeof(char *) * (size_t)a->argc);
	s->argc = a->argc + 1;
	optind = 0; /* a fresh scan (attach runs many) */
	opterr = 0;
	return 0;
}

int cli_scan_next(cli_scan_t *s, const char **val)
{
	int c = getopt_long(s->argc, s->argv, s->shorts, s->lo, NULL);
	*val = optarg;
	if (c == -1)
		return 0;
	if (c == 1)
		return CLI_OPERAND;
	const char *arg = optind > 0 && optind <= s->argc ? s->argv[optind - 1] : "?";
	if (c == ':') {
		/* the option as named, without a "=value" it did not have */
		return -cli_err(HC_EXIT_USAGE, "%s: %s needs a value", s->cmd, arg);
	}
	if (c == '?') {
		char shortopt[3] = { '-', (char)optopt, 0 };
		return -cli_err(HC_EXIT_USAGE, "%s: unknown option '%s' (try 'heapctl help %s')", s->cmd,
		    optopt && arg[0] == '-' && arg[1] != '-' ? shortopt : arg, s->cmd);
	}
	return c;
}

char **cli_scan_rest(cli_scan_t *s, int *n)
{
	*n = s->argc - optind;
	return s->argv + optind;
}

void cli_scan_end(cli_scan_t *s)
{
	free(s->lo);
	free(s->names);
	free(s->argv);
	s->lo = NULL;
	s->names = NULL;
	s->argv = NULL;
}

bool cli_opts_takes_value(const cli_opt_t *opts, const char *arg)
{
	if (arg[0] != '-' || strchr(arg, '='))
		return false;
	for (size_t i = 0, n = count(opts); i < n; i++) {
		const cli_opt_t *o = &opts[i];
		if (o->name == NULL || o->arg == NULL)
			continue;
		if (arg[1] != '-') {
			if (arg[1] == o->id && arg[2] == 0)
				return true;
			continue;
		}
		const char *a = arg + 2, *b = o->name;
		for (; *a && *b; a++, b++)
			if (*a != *b && !((*a == '-' || *a == '_') && (*b == '-' || *b == '_')))
				break;
		if (*a == 0 && *b == 0)
			return true;
	}
	return false;
}

void cli_opts_help(FILE *f, const cli_opt_t *opts)
{
	for (size_t i = 0, n = count(opts); i < n; i++) {
		const cli_opt_t *o = &opts[i];
		if (o->name == NULL) {
			fprintf(f, "\n%s\n", o->help);
			continue;
		}
		if (o->help == NULL)
			continue; /* another name of the one above */
		char head[64];
		if (o->id > ' ' && o->id < 127)
			snprintf(head, sizeof head, "-%c, --%s%s%s", o->id, o->name, o->arg ? " " : "",
			    o->arg ? o->arg : "");
		else
			snprintf(head, sizeof head, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		/* the text wrapped at 78 columns, under a 20-column head */
		fprintf(f, "  %-18s", head);
		int col = 20;
		if (strlen(head) > 17)
			fprintf(f, "\n%20s", "");
		for (const char *w = o->help; *w;) {
			size_t len = strcspn(w, " ");
			if (col > 20 && col + 1 + (int)len > 78) {
				fprintf(f, "\n%20s", "");
				col = 20;
			} else if (col > 20) {
				fputc(' ', f);
				col++;
			}
			fwrite(w, 1, len, f);
			col += (int)len;
			w += len;
			while (*w == ' ')
				w++;
		}
		fputc('\n', f);
	}
}
