/*
 * heapctl/cmd/cmd.h - the control commands (attach, ctl, dump, info, watch,
 * explain, run): their entry points and help for the table in cli/main.c,
 * and what the daemon and systemd use of them.
 */
#ifndef HC_CMD_H
#define HC_CMD_H

#include "cli/cli.h"

int cmd_list(cli_args_t *a); /* info.c */
int cmd_status(cli_args_t *a);
int cmd_set(cli_args_t *a); /* ctl.c */
int cmd_on(cli_args_t *a);
int cmd_off(cli_args_t *a);
int cmd_reset(cli_args_t *a);
int cmd_eject(cli_args_t *a);
int cmd_dump(cli_args_t *a);    /* dump.c */
int cmd_watch(cli_args_t *a);   /* watch.c */
int cmd_attach(cli_args_t *a);  /* attach.c */
int cmd_run(cli_args_t *a);     /* run.c */
int cmd_explain(cli_args_t *a); /* explain.c */
int cmd_purge(cli_args_t *a);
extern const cli_help_t cmd_help_list, cmd_help_status, cmd_help_set, cmd_help_on, cmd_help_off, cmd_help_reset,
    cmd_help_eject, cmd_help_dump, cmd_help_watch, cmd_help_attach, cmd_help_run, cmd_help_explain, cmd_help_purge;

/* dump.c: a dump the target cannot write where heapctl reads (-o,
 * --fetch) is staged in its /dev/shm under this name, copied out and
 * removed: transient, never archived (hc_shm_staged_path). */
#define CLI_STAGE_BASE HC_SHM_STAGE_BASE

/* run.c: LD_PRELOAD with lib first, other entries kept (malloc()
 * resolves to the first preloaded definition). */
char *cli_preload_with(const char *lib, const char *old);

/* watch.c: one event as `heapctl watch --json` prints it, a line on f
 * (same: the target sees our files at our paths). */
void cli_event_json(FILE *f, const hc_shm_target_t *t, bool same, const hc_shm_event_t *e);

/* explain.c: a process's resident memory in parts (what heapctl explain
 * prints): heap + anonymous + stacks + files + shared + kernel = sum, VmRSS
 * within 2%; the heap's own parts (heapctl true: the library answered, not
 * an injected agent) from the allocator's count.  0, or an HC_EXIT_* code
 * with the reason in why. */
typedef struct cli_explain_s {
	uint64_t vm_rss, sum;
	bool heapctl;
	uint64_t heap, anonymous, stacks, files, shared, kernel;
	uint64_t live_attributed, live_other, sampling, fragmentation, free, metadata;
} cli_explain_t;
int cli_explain(int pid, uint64_t timeout_ns, cli_explain_t *x, char *why, size_t len);

#endif
