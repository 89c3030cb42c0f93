/*
 * heapctl/cli.h - what the files of the heapctl command share: the parsed
 * command line, target selection, and output helpers.  The target is seen
 * only through shm/heapctl_shm.h.
 */
#ifndef HC_CLI_H
#define HC_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../shm/heapctl_shm.h"

/* One command's arguments after the common options were taken out. */
typedef struct cli_args_s {
	int pid;                   /* 0: not given                               */
	bool json;
	uint64_t timeout_ns;       /* --timeout, default 5 s                     */
	int argc;                  /* what is left, in order                     */
	char **argv;
	bool in_attach;            /* inside `heapctl attach PID`                */
} cli_args_t;

typedef struct cli_cmd_s {
	const char *name;
	int (*run)(cli_args_t *a);
	const char *usage;         /* after "heapctl NAME "                      */
	const char *help;          /* one line                                   */
	bool attach;               /* usable inside attach                       */
} cli_cmd_t;

extern const char *cli_prog;

/* Errors: one line on stderr, "heapctl: ...". Returns code. */
int cli_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Open the target named by a->pid, or the only candidate when none is
 * given.  Prints the error and returns its exit code on failure. */
int cli_target(cli_args_t *a, hc_shm_target_t *t);
/* One round trip; prints transport errors and the target's refusals. */
int cli_call(cli_args_t *a, hc_shm_target_t *t, const hc_shm_req_t *req, hc_shm_rep_t *rep);

/* Does the target see the file system as we do (same mount namespace and
 * root directory)?  false when that cannot be told. */
bool cli_same_view(const hc_shm_target_t *t);
/* A path the target names (its own view), as we can open it: itself, or
 * through /proc/PID/root. */
void cli_local_path(const hc_shm_target_t *t, const char *path, char *out, size_t len);
/* in made absolute against our directory (what says which option, for
 * the error).  Returns 0 or prints the error and returns its exit code. */
int cli_absolute(const char *what, const char *in, char *out, size_t len);

/* Dispatch argv[0] as a command (used by main and attach). */
int cli_dispatch(int argc, char **argv, int attach_pid);

/* Output helpers */
void out_json_str(FILE *f, const char *s);
const char *out_bytes(uint64_t v, char *buf, size_t len);    /* "12.3 MiB" */
const char *out_time(uint64_t ns, char *buf, size_t len);    /* ISO 8601 UTC, ms */
void out_cmdline(int pid, const hc_shm_t *seg, char *buf, size_t len);

/* Commands */
int cmd_list(cli_args_t *a);
int cmd_status(cli_args_t *a);
int cmd_set(cli_args_t *a);
int cmd_on(cli_args_t *a);
int cmd_off(cli_args_t *a);
int cmd_dump(cli_args_t *a);
int cmd_reset(cli_args_t *a);
int cmd_watch(cli_args_t *a);
int cmd_attach(cli_args_t *a);
int cmd_report(cli_args_t *a);

#endif
