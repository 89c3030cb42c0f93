/*
 * heapctl/diagnose/proc.h - the process facts of diagnose/proc.c: what
 * target selection, run, systemd, doctor and the engines need to know about
 * processes and programs (their maps, environment, limits, mounts, whether
 * a program can be preloaded), and running a helper with its output
 * captured.  Everything read from another process is untrusted.
 */
#ifndef HC_DIAGNOSE_PROC_H
#define HC_DIAGNOSE_PROC_H

#include "cli/cli.h"

int cli_private_dir(const char *dir, char *why, size_t len); /* fd; -1, -2 (see proc.c) */
bool cli_is_library(const char *path);                       /* .../libheapctl*.so*    */
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
char cli_proc_state(int pid); /* its State letter, 0 if unknown */
/* What to run when a process that is not stopped does not answer (%d: pid). */
#define CLI_STACKS_HINT "see where its threads are: heapctl stacks %d"
int cli_proc_secure(int pid);
bool cli_proc_mount_opts(int pid, const char *path, char *opts, size_t len);
bool cli_same_file(const char *a, const char *b);                            /* same device and inode */
int cli_proc_same_mntns(int pid);                                            /* 1 yes, 0 no, -1 unknown */
void cli_proc_maps_root(int pid, char *out, size_t len);                     /* its maps' paths: "" or /proc/PID/root */
void cli_proc_object_path(int pid, const char *path, char *out, size_t len); /* a file it maps */
/* An object's unwind table as the process has it in memory. */
typedef struct cli_eh_table_s {
	uint64_t bias;  /* its load bias                              */
	uint64_t hdr;   /* its .eh_frame_hdr; 0: it has none          */
	uint64_t table; /* the search table: nfde (start, FDE) pairs
	                   of 4-byte offsets from hdr              */
	uint64_t nfde;  /* 0: no table that can be used               */
} cli_eh_table_t;
bool cli_proc_eh_table(int memfd, uint64_t base, cli_eh_table_t *t);
bool cli_proc_inject_mark(int pid, hc_inject_mark_t *mark); /* an injected agent's state */
enum { CLI_AGENT_EJECTED = 1, CLI_AGENT_UNARMED = 2 };
int cli_proc_agent_inert(int pid, char *when, size_t len);
bool cli_opt_has(const char *opts, const char *opt);
int cli_elf_static(const char *path);
const char *cli_program_secure(const char *path);
int cli_spawn(char *const argv[], char *const envp[], char *out, size_t outlen, char *err, size_t errlen,
    int timeout_ms);
int cli_check_conf(const char *lib, const char *conf);
/* When a process started, in ns of CLOCK_REALTIME (0: unknown), 10 ms precise. */
int64_t cli_proc_started_ns(int pid);
/* The n-th number of a status line such as "Uid:\t0\t0\t0\t0"; -1 if none. */
long cli_proc_status_num(int pid, const char *key, int n);
/* Who a process is: its user's name (the uid where it has none) and its
 * command line as it set it, made safe for a terminal. */
void cli_proc_who(int pid, char *user, size_t ulen, char *cmd, size_t clen);

#endif
