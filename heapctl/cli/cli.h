/*
 * heapctl/cli/cli.h - what the files of the heapctl command share: the parsed
 * command line, target selection, and output helpers.  The target is seen
 * only through shm/heapctl_shm.h.
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

/* diagnose/proc.c: processes, programs and helpers (see there) */
ssize_t cli_read_file(const char *path, char *buf, size_t len);
int cli_private_dir(const char *dir, char *why, size_t len);   /* fd; -1, -2 (diagnose/proc.c) */
/* libheapctl.so or libheapctl-secure.so (HEAPCTL_LIB wins): 0 or exit code, printed */
int cli_find_library(const char *name, char *out, size_t len);
bool cli_is_library(const char *path);               /* .../libheapctl*.so*    */
bool cli_proc_maps_library(int pid, char *path, size_t len, bool *readable);
/* A child of fork (of *ppid, same executable) that maps the library and
 * has no segment: its control thread makes it 20 ms after the fork. */
bool cli_proc_fork_pending(int pid, int *ppid);
/* The soft limit of /proc/PID/limits' line NAME ("Max processes"). */
bool cli_proc_limit(int pid, const char *name, char *out, size_t len);
int cli_proc_getenv(int pid, const char *name, char *out, size_t len);
/* The process's HEAPCTL_CONF or MALLOC_CONF sets option:value as in pair
 * (HEAPCTL_CONF wins, and the last of one string), as the library reads them. */
bool cli_proc_conf_has(int pid, const char *pair);
bool cli_proc_status_field(int pid, const char *key, char *out, size_t len);
char cli_proc_state(int pid);              /* its State letter, 0 if unknown */
/* What to run when a process that is not stopped does not answer (%d: pid). */
#define CLI_STACKS_HINT "see where its threads are: heapctl stacks %d"
int cli_proc_secure(int pid);
bool cli_proc_mount_opts(int pid, const char *path, char *opts, size_t len);
bool cli_same_file(const char *a, const char *b);   /* same device and inode */
int cli_proc_same_mntns(int pid);          /* 1 yes, 0 no, -1 unknown */
void cli_proc_maps_root(int pid, char *out, size_t len);   /* its maps' paths: "" or /proc/PID/root */
void cli_proc_object_path(int pid, const char *path, char *out, size_t len);   /* a file it maps */
/* An object's unwind table as the process has it in memory. */
typedef struct cli_eh_table_s {
	uint64_t bias;             /* its load bias                              */
	uint64_t hdr;              /* its .eh_frame_hdr; 0: it has none          */
	uint64_t table;            /* the search table: nfde (start, FDE) pairs
	                              of 4-byte offsets from hdr              */
	uint64_t nfde;             /* 0: no table that can be used               */
} cli_eh_table_t;
bool cli_proc_eh_table(int memfd, uint64_t base, cli_eh_table_t *t);
bool cli_proc_inject_mark(int pid, hc_inject_mark_t *mark);   /* an injected agent's state */
enum { CLI_AGENT_EJECTED = 1, CLI_AGENT_UNARMED = 2 };
int cli_proc_agent_inert(int pid, char *when, size_t len);
bool cli_opt_has(const char *opts, const char *opt);
int cli_elf_static(const char *path);
const char *cli_program_secure(const char *path);
int cli_spawn(char *const argv[], char *const envp[], char *out, size_t outlen, char *err,
    size_t errlen, int timeout_ms);
int cli_check_conf(const char *lib, const char *conf);

/* cmd/run.c: LD_PRELOAD with lib first, other entries kept (malloc()
 * resolves to the first preloaded definition). */
char *cli_preload_with(const char *lib, const char *old);

/* diagnose/doctor.c: why a process is or is not reachable, as findings. */
enum { CLI_OK, CLI_NOTE, CLI_PROBLEM };
#define CLI_DIAG_MAX 16
typedef struct cli_finding_s {
	int level;                 /* CLI_OK, CLI_NOTE, CLI_PROBLEM             */
	int code;                  /* HC_EXIT_* of a problem                    */
	char topic[16];            /* process, library, segment, control, ...   */
	char text[1024];
	char fix[1024];
} cli_finding_t;
typedef struct cli_diag_s {
	int pid;
	int code;                  /* the first problem's, 0 if none            */
	int n;
	cli_finding_t f[CLI_DIAG_MAX];
} cli_diag_t;
void cli_diagnose(int pid, uint64_t timeout_ns, cli_diag_t *d);
void cli_diag_print(const cli_diag_t *d, bool json, const char *indent);
struct json_s;
void cli_diag_json(struct json_s *j, const cli_diag_t *d);    /* pid, ok, exit, findings */
void cli_diag_json_findings(struct json_s *j, const cli_diag_t *d);
bool cli_diag_answers(const cli_diag_t *d);         /* its control thread answered */
const char *cli_diag_why(const cli_diag_t *d);      /* the first problem (or note) */
void cli_proc_who(int pid, char *user, size_t ulen, char *cmd, size_t clen);
/* systemd/systemd.c: doctor for every process of a unit */
int cli_doctor_unit(cli_args_t *a, const char *unit);

/* cmd/watch.c: one event as `heapctl watch --json` prints it, a line on f
 * (same: the target sees our files at our paths). */
void cli_event_json(FILE *f, const hc_shm_target_t *t, bool same, const hc_shm_event_t *e);

/* Dispatch argv[0] as a command (used by main and attach). */
int cli_dispatch(int argc, char **argv, int attach_pid);
/* A PID operand or --pid value: digits only, 1..0x3fffffff (the kernel's
 * PID_MAX_LIMIT); 0, or the usage error already printed.  Every command
 * that takes a PID parses it here. */
int cli_parse_pid(const char *s, int *pid);

/* Output helpers */
void out_json_str(FILE *f, const char *s);                   /* valid UTF-8 always */
const char *out_safe(const char *s, char *buf, size_t len);  /* for a terminal */
const char *out_bytes(uint64_t v, char *buf, size_t len);    /* "12.3 MiB" */
const char *out_bytes_f(double v, char *buf, size_t len);    /* the same, for estimates */
const char *out_time(uint64_t ns, char *buf, size_t len);    /* ISO 8601 UTC, ms */
void out_cmdline(int pid, const hc_shm_t *seg, char *buf, size_t len);

/* cmd/dump.c: a dump the target cannot write where heapctl reads (-o,
 * --fetch) is staged in its /dev/shm under this name, copied out and
 * removed: transient, never archived (hc_shm_staged_path). */
#define CLI_STAGE_BASE HC_SHM_STAGE_BASE

/* Commands */
int cmd_list(cli_args_t *a);
int cmd_status(cli_args_t *a);
int cmd_set(cli_args_t *a);
int cmd_on(cli_args_t *a);
int cmd_off(cli_args_t *a);
int cmd_dump(cli_args_t *a);
int cmd_reset(cli_args_t *a);
int cmd_watch(cli_args_t *a);
int cmd_watch_leaks(cli_args_t *a);       /* main.c: the engine's hc_leaks_main */
int cmd_attach(cli_args_t *a);
int cmd_report(cli_args_t *a);            /* loads the report engine (below) */

/* opts.c: a command's options, one table for the parser and the help.
 * The table ends with an entry of all NULLs; an entry with no name but a
 * help is a heading; one with no help another name of the one before. */
typedef struct cli_opt_s {
	const char *name;          /* the long name, without "--"              */
	int id;                    /* what the scan returns (> 1); a printable
	                            * character is the short option as well    */
	const char *arg;           /* the value's name, NULL: takes none        */
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
bool cli_opts_takes_value(const cli_opt_t *opts, const char *arg);   /* "--name" or "-c" */
extern const cli_opt_t dump_opts[], reset_opts[], watch_opts[], run_opts[], systemd_opts[], explain_opts[];

/* The report engine (heapctl/report/) is libheapctl-report.so, loaded by
 * `heapctl report` alone, so that the control commands need neither libdw
 * nor libelf, zlib or libstdc++: next to heapctl, or in ../lib.  Its entry
 * point, run with the arguments left after the global options: */
#define HC_REPORT_LIB   "libheapctl-report.so"
#define HC_REPORT_ENTRY "hc_report_main"
#define HC_STACKS_ENTRY "hc_stacks_main"       /* heapctl stacks, in the engine */
#define HC_REPORT_HELP  "hc_report_help"      /* void (FILE *): its options' help */
typedef int hc_report_main_fn(cli_args_t *a);
/* The daemon (heapctl/serve/) is libheapctl-serve.so, loaded by `heapctl
 * serve` alone (libmicrohttpd), the same way, with an entry of that type. */
#define HC_SERVE_LIB   "libheapctl-serve.so"
#define HC_SERVE_ENTRY "hc_serve_main"
#define HC_SERVE_HELP  "hc_serve_help"       /* void (FILE *) */
int cmd_serve(cli_args_t *a);
/* heapctl trace (heapctl/trace/) is libheapctl-trace.so (libbpf), loaded
 * the same way. */
#define HC_TRACE_LIB   "libheapctl-trace.so"
#define HC_TRACE_ENTRY "hc_trace_main"
#define HC_TRACE_HELP  "hc_trace_help"       /* void (FILE *) */
int cmd_trace(cli_args_t *a);
int cmd_stacks(cli_args_t *a);             /* in the report engine too */
#define HC_INJECT_ENTRY "hc_inject_main"      /* heapctl inject, in the engine */
#define HC_INJECT_HELP  "hc_inject_help"
int cmd_inject(cli_args_t *a);
int cmd_eject(cli_args_t *a);              /* cmd/ctl.c */
/* A file installed with heapctl: next to it (the build tree) or in
 * ../lib; 0 with its real path in out, or an exit code (after one line
 * unless quiet). */
int cli_find_installed(const char *name, char *out, size_t len, bool quiet);
int cmd_run(cli_args_t *a);
int cmd_systemd(cli_args_t *a);
int cmd_doctor(cli_args_t *a);
int cmd_explain(cli_args_t *a);           /* cmd/explain.c */
/* A process's resident memory in parts (what heapctl explain prints):
 * heap + anonymous + stacks + files + shared + kernel = sum, VmRSS within
 * 2%; the heap's own parts (heapctl true: the library answered, not an
 * injected agent) from the allocator's count.  0, or an HC_EXIT_* code
 * with the reason in why. */
typedef struct cli_explain_s {
	uint64_t vm_rss, sum;
	bool heapctl;
	uint64_t heap, anonymous, stacks, files, shared, kernel;
	uint64_t live_attributed, live_other, sampling, fragmentation, free, metadata;
} cli_explain_t;
int cli_explain(int pid, uint64_t timeout_ns, cli_explain_t *x, char *why, size_t len);
int cmd_purge(cli_args_t *a);

#endif
