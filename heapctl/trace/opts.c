/*
 * heapctl/trace/opts.c - the options of `heapctl trace` (its --help comes
 * from the table here), and T, the run's state every file of trace/ reads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tr_internal.h"

__attribute__((visibility("default"))) void hc_trace_help(FILE *f);

tr_state_t T;

static const cli_opt_t trace_opts[] = {
	{ "malloc", T_MALLOC, NULL, "sampled allocations: uprobes on the allocator the process uses" },
	{ "faults", T_FAULTS, NULL, "page faults that bring in new pages: where resident memory grows" },
	{ "lg-sample", T_LG, "N",
	    "sample once per 2^N bytes on average (default 19 for --malloc, "
	    "16 for --faults)" },
	{ "duration", T_DURATION, "SECS", "stop after SECS (default: until Ctrl-C or the process ends)" },
	{ "interval", T_INTERVAL, "SECS", "also write a dump every SECS" },
	{ "prefix", T_PREFIX, "P", "write dumps as P.<pid>.<seq>.<kind><n>.heap (default: jeprof, here)" },
	{ "output", 'o', "FILE", "write the final dump to FILE" },
	{ "symbols", T_SYMBOLS, "LIST",
	    "the allocator's functions as ROLE=NAME,... (roles: malloc calloc "
	    "realloc free memalign posix_memalign), for one heapctl does not know" },
	{ "limit", T_LIMIT, "N", "at most N samples a second per CPU (default 10000; 0: no limit)" },
	{ "budget", T_BUDGET, "PCT",
	    "--malloc: the share of one CPU, in percent, the probes may take from the "
	    "process (default 5; 0: none); past it they are detached for periods and the totals are estimates" },
	{ 0 },
};

void hc_trace_help(FILE *f)
{
	cli_opts_help(f, trace_opts);
}

int tr_parse_opts(cli_args_t *a, opts_t *o)
{
	*o = (opts_t){ .lg = -1, .prefix = "jeprof", .limit = 10000, .budget = -1 };
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "trace", trace_opts, false);
	const char *v;
	char *end;
	for (int id; code == 0 && (id = cli_scan_next(&sc, &v)) != 0;) {
		switch (id) {
		case T_MALLOC:
		case T_FAULTS:
			if (o->mode && o->mode != id)
				code = cli_err(HC_EXIT_USAGE, "trace: --malloc and --faults are two runs, not one");
			o->mode = id;
			break;
		case T_LG:
			errno = 0;
			o->lg = (int)strtol(v, &end, 10);
			if (errno || *end || end == v || o->lg < 0 || o->lg > 40)
				code = cli_err(HC_EXIT_USAGE, "trace: --lg-sample takes 0 to 40, not '%s'", v);
			break;
		case T_DURATION:
		case T_INTERVAL: {
			double d = strtod(v, &end);
			if (*end || end == v || !(d > 0) || d > 1e9)
				code = cli_err(HC_EXIT_USAGE, "trace: --%s takes seconds (> 0), not '%s'",
				    id == T_DURATION ? "duration" : "interval", v);
			*(id == T_DURATION ? &o->duration : &o->interval) = d;
			break;
		}
		case T_LIMIT:
			errno = 0;
			o->limit = strtoull(v, &end, 10);
			if (errno || *end || end == v || v[0] == '-')
				code = cli_err(HC_EXIT_USAGE, "trace: --limit takes a count, not '%s'", v);
			break;
		case T_BUDGET: {
			double d = strtod(v, &end);
			if (end != v && *end == '%')
				end++;
			if (*end || end == v || !(d >= 0) || d > 100)
				code = cli_err(HC_EXIT_USAGE,
				    "trace: --budget takes a percent of one CPU, 0 (none) "
				    "to 100, not '%s'",
				    v);
			o->budget = d;
			break;
		}
		case T_PREFIX: o->prefix = v; break;
		case 'o': o->output = v; break;
		case T_SYMBOLS: o->symbols = v; break;
		case CLI_OPERAND:
			/* a PID the dispatcher left (after --) is read as every
			 * command's is; anything else is no operand of trace's */
			if (a->pid == 0 && v[0] && v[strspn(v, "0123456789")] == 0)
				code = cli_parse_pid(v, &a->pid);
			else
				code = cli_err(HC_EXIT_USAGE, "trace: unexpected argument '%s'", v);
			break;
		default: code = -id;
		}
	}
	cli_scan_end(&sc);
	if (code)
		return code < 0 ? -code : code;
	if (o->mode == 0)
		return cli_err(HC_EXIT_USAGE, "trace: say what to trace: --malloc or --faults");
	if (o->symbols && o->mode != T_MALLOC)
		return cli_err(HC_EXIT_USAGE, "trace: --symbols is for --malloc");
	if (o->budget >= 0 && o->mode != T_MALLOC)
		return cli_err(HC_EXIT_USAGE,
		    "trace: --budget is for --malloc (a page fault's program "
		    "costs the process nothing per malloc)");
	if (o->budget < 0)
		o->budget = o->mode == T_MALLOC ? TB_DEFAULT_PCT : 0;
	if (o->lg < 0)
		o->lg = o->mode == T_MALLOC ? 19 : 16;
	if (o->prefix[0] == 0)
		return cli_err(HC_EXIT_USAGE, "trace: --prefix is empty");
	return 0;
}
