/*
 * heapctl/cli/cli.h - the command-line core every command is built on: the
 * parsed command line, the command table's types, errors, target
 * selection, options, output helpers and the engines heapctl loads.  The
 * target is seen only through shm/heapctl_shm.h.  What the commands
 * export is in cmd/cmd.h, diagnose/proc.h, diagnose/diagnose.h and
 * systemd/systemd.h.
 */
#ifndef HC_CLI_H
#define HC_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../../shm/heapctl_shm.h"

/* One command's arguments after the common options were taken out. */
typedef struct cli_args_s {
	int pid; /* 0: not given                               */
	bool json;
	uint64_t timeout_ns; /* --timeout, default 5 s                     */
	int argc;            /* what is left, in order                     */
	char **argv;
	bool in_attach; /* inside `heapctl attach PID`                */
	/* the dispatcher (main.c's cli_dispatch), for a command that runs
	 * others (attach): passed in so that the commands depend on the table
	 * and never the table on them both ways */
	int (*dispatch)(int argc, char **argv, int attach_pid);
} cli_args_t;

extern const char *cli_prog;

/* Errors: one line on stderr, "heapctl: ...". Returns code. */
int cli_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Open the target named by a->pid, or the only candidate when none is
 * given.  Prints the error and returns its exit code on failure. */
int cli_target(cli_args_t *a, hc_shm_target_t *t);
/* One round trip; prints transport errors and the target's refusals. */
int cli_call(cli_args_t *a, hc_shm_target_t *t, const hc_shm_req_t *req, hc_shm_rep_t *rep);
/* cli_call in two steps: the round trip (0 when an answer came, whatever
 * it says), and the answer as an exit code and a message */
int cli_call_raw(cli_args_t *a, hc_shm_target_t *t, const hc_shm_req_t *req, hc_shm_rep_t *rep);
int cli_reply(const hc_shm_target_t *t, const hc_shm_rep_t *rep);

/* Does the target see the file system as we do (same mount namespace and
 * root directory)?  false when that cannot be told. */
bool cli_same_view(const hc_shm_target_t *t);
/* A path the target names (its own view), as we can open it: itself, or
 * through /proc/PID/root. */
/* path (absolute, as a process under root sees it) as we reach it: under
 * root, or path itself where that names the same file. */
void cli_path_under(const char *root, const char *path, char *out, size_t len);
void cli_local_path(const hc_shm_target_t *t, const char *path, char *out, size_t len);
/* in made absolute against our directory (what says which option, for
 * the error).  Returns 0 or prints the error and returns its exit code. */
int cli_absolute(const char *what, const char *in, char *out, size_t len);

/* Dispatch argv[0] as a command (main, and attach through a->dispatch). */
int cli_dispatch(int argc, char **argv, int attach_pid);
/* A PID operand or --pid value: digits only, 1..0x3fffffff (the kernel's
 * PID_MAX_LIMIT); 0, or the usage error already printed.  Every command
 * that takes a PID parses it here. */
int cli_parse_pid(const char *s, int *pid);

/* Output helpers */
void out_json_str(FILE *f, const char *s);                  /* valid UTF-8 always */
const char *out_safe(const char *s, char *buf, size_t len); /* for a terminal */
const char *out_bytes(uint64_t v, char *buf, size_t len);   /* "12.3 MiB" */
const char *out_bytes_f(double v, char *buf, size_t len);   /* the same, for estimates */
const char *out_time(uint64_t ns, char *buf, size_t len);   /* ISO 8601 UTC, ms */
void out_cmdline(int pid, const hc_shm_t *seg, char *buf, size_t len);

/* opts.c: a command's options, one table for the parser and the help.
 * The table ends with an entry of all NULLs; an entry with no name but a
 * help is a heading; one with no help another name of the one before. */
typedef struct cli_opt_s {
	const char *name; /* the long name, without "--"              */
	int id;           /* what the scan returns (> 1); a printable
	                   * character is the short option as well    */
	const char *arg;  /* the value's name, NULL: takes none        */
	const char *help;
} cli_opt_t;

enum { CLI_OPERAND = 1 };
typedef struct cli_scan_s {
	const char *cmd;
	int argc;
	char **argv;
	struct option *lo;
	char (*names)[48];
	char shorts[96];
} cli_scan_t;

/* getopt_long over a's arguments and the table.  in_order: options first,
 * the rest (cli_scan_rest) left as it is.  cli_scan_next gives an option's
 * id (its value in *val), CLI_OPERAND (in *val), 0 at the end, or -code
 * after one line on stderr.  Returns 0 or an exit code. */
int cli_scan_begin(cli_scan_t *s, const cli_args_t *a, const char *cmd, const cli_opt_t *opts, bool in_order);
int cli_scan_next(cli_scan_t *s, const char **val);
char **cli_scan_rest(cli_scan_t *s, int *n);
void cli_scan_end(cli_scan_t *s);
void cli_opts_help(FILE *f, const cli_opt_t *opts);
bool cli_opts_takes_value(const cli_opt_t *opts, const char *arg); /* "--name" or "-c" */

/* ---- the command table (main.c) ----------------------------------------- */

/* A command's help, next to its code (as git's builtins keep their usage):
 * `heapctl help` lists usage and line; `heapctl help NAME` and NAME --help
 * print "usage: heapctl NAME usage", line, the options, then more. */
typedef struct cli_help_s {
	const char *usage;     /* after "heapctl NAME "                      */
	const char *line;      /* one line                                   */
	const cli_opt_t *opts; /* its options, the parser's table; or NULL:
	                        * a number after any option is an operand   */
	void (*more)(FILE *f); /* what its help says after them, or NULL     */
} cli_help_t;

/* A command whose code is in a library heapctl loads for it (engine.c). */
typedef struct cli_engine_s {
	const char *lib;   /* HC_REPORT_LIB, ...                         */
	const char *entry; /* its hc_report_main_fn                      */
	const char *help;  /* its void (FILE *) printing its options, or NULL */
	const char *what;  /* the library in words, when it is missing   */
} cli_engine_t;

/* What a command needs from the dispatcher (git's RUN_SETUP flags). */
enum {
	CLI_PID = 1 << 0,    /* a leading number is its PID (else an operand) */
	CLI_ATTACH = 1 << 1, /* usable inside attach                       */
};

typedef struct cli_cmd_s {
	const char *name;
	int (*run)(cli_args_t *a); /* NULL: engine's entry                       */
	unsigned flags;            /* CLI_PID, CLI_ATTACH                        */
	const cli_help_t *help;
	const cli_engine_t *engine;
} cli_cmd_t;

/* ---- engine.c: files installed with heapctl, and its engines ----------- */

/* A file installed with heapctl: next to it (the build tree) or in
 * ../lib; 0 with its real path in out, or an exit code (after one line
 * unless quiet). */
int cli_find_installed(const char *name, char *out, size_t len, bool quiet);
/* libheapctl.so or libheapctl-secure.so (HEAPCTL_LIB wins): 0 or exit code, printed */
int cli_find_library(const char *name, char *out, size_t len);
/* Load e's library (once) and run its entry with a; the library's
 * failure to load is one line and HC_EXIT_FAILED. */
int cli_engine_run(const cli_engine_t *e, cli_args_t *a);
/* e's options' help, or a line saying its library is not installed. */
void cli_engine_help(FILE *f, const cli_engine_t *e);
extern const cli_engine_t cli_engine_report, cli_engine_stacks, cli_engine_inject, cli_engine_leaks, cli_engine_serve,
    cli_engine_trace;
extern const cli_help_t cli_help_report, cli_help_serve, cli_help_stacks, cli_help_inject, cli_help_trace;

/* The report engine (heapctl/report/, symbolize/, ptrace/, elf/) is
 * libheapctl-report.so, loaded by `heapctl report`, stacks, inject and
 * watch --leaks alone, so that the control commands need neither libdw
 * nor libelf, zlib or libstdc++: next to heapctl, or in ../lib.  Its entry
 * points, run with the arguments left after the global options: */
#define HC_REPORT_LIB   "libheapctl-report.so"
#define HC_REPORT_ENTRY "hc_report_main"
#define HC_STACKS_ENTRY "hc_stacks_main" /* heapctl stacks, in the engine */
#define HC_INJECT_ENTRY "hc_inject_main" /* heapctl inject, in the engine */
#define HC_LEAKS_ENTRY  "hc_leaks_main"  /* heapctl watch PID --leaks */
#define HC_REPORT_HELP  "hc_report_help" /* void (FILE *): its options' help */
#define HC_INJECT_HELP  "hc_inject_help"
typedef int hc_report_main_fn(cli_args_t *a);
/* The daemon (heapctl/serve/) is libheapctl-serve.so, loaded by `heapctl
 * serve` alone (libmicrohttpd), the same way, with an entry of that type. */
#define HC_SERVE_LIB   "libheapctl-serve.so"
#define HC_SERVE_ENTRY "hc_serve_main"
#define HC_SERVE_HELP  "hc_serve_help" /* void (FILE *) */
/* heapctl trace (heapctl/trace/) is libheapctl-trace.so (libbpf), loaded
 * the same way. */
#define HC_TRACE_LIB   "libheapctl-trace.so"
#define HC_TRACE_ENTRY "hc_trace_main"
#define HC_TRACE_HELP  "hc_trace_help" /* void (FILE *) */

#endif
