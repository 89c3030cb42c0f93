/*
 * heapctl/systemd/internal.h - what the files of heapctl/systemd/ share
 * (systemd.c dispatches; see there).  Nothing outside the folder uses it.
 */
#ifndef HC_SYSTEMD_INTERNAL_H
#define HC_SYSTEMD_INTERNAL_H

#include <glob.h>
#include <limits.h>
#include <sys/types.h>

#include "cli/cli.h"
#include "cli/json.h"
#include "diagnose/unit.h"

/* Paths that go into a drop-in are bounded here (and checked), so that the
 * buffers below hold them whole with every % doubled. */
#define PMAX 1024

typedef struct {
	char lib[PATH_MAX], libdir[PATH_MAX];
	bool pg; /* pg_ctlcluster: env file           */
	bool add_execpaths;
	char conf[2048];     /* --conf                            */
	bool off, secure;    /* --off, --secure                  */
	char dump_dir[PMAX]; /* --dump-dir, or empty              */
	char preload[4096];  /* LD_PRELOAD for the drop-in        */
} plan_t;

typedef struct {
	char setting[2 * PMAX + 64]; /* a drop-in line, or empty          */
	char prefix[2 * PMAX + 64];  /* prof_prefix, with specifiers      */
	char created[PMAX];          /* a directory heapctl made, or empty */
	char shown[PMAX + 64];       /* where to say dumps go             */
} dumpdir_t;

/* What systemd says of a unit after a start: its main process, whether its
 * Condition= checks held, its state and how its main process last ended. */
typedef struct {
	int main_pid;
	char active[32], sub[32], result[32], cond[8], status[16];
	bool cond_checked; /* systemd has this unit's ConditionResult */
} unit_state_t;

/* paths.c */
const char *sd_list_covers(const char *list, const char *path, char *hit, size_t len);
bool sd_under(const char *path, const char *dir);
void sd_escape_pct(const char *in, char *out, size_t len);
int sd_write_atomic(const char *path, const char *text, mode_t mode);
int sd_mkdirs(const char *path, mode_t mode);

/* checks.c: 0, or the refusal printed and its exit code */
int sd_refuse(const unit_t *u, const char *why, const char *fix);
int sd_check_exec(const unit_t *u, plan_t *pl);
int sd_check_umbrella(const unit_t *u);
int sd_check_hardening(const unit_t *u, plan_t *pl);

/* dumpdir.c */
int sd_plan_dump_dir(const unit_t *u, const plan_t *pl, dumpdir_t *dd);

/* pg.c */
int sd_pg_clusters(const unit_t *u, glob_t *g);
int sd_pg_write_env(const unit_t *u, const plan_t *pl, const char *file, char *record, size_t reclen);
int sd_pg_unwrite_env(const char *file);

/* restart.c */
int sd_unit_loaded(const unit_t *u, const char *name, int *n);
int sd_unit_state(const unit_t *u, const char *name, unit_state_t *s);
int sd_restart(cli_args_t *a, const unit_t *u, char *downed, size_t dlen, unit_state_t *s);
int sd_not_started(const unit_t *u, const char *dir, const char *file, const char *name, const unit_state_t *s,
    bool keep);

/* enable.c, disable.c, status.c: the actions */
int sd_enable(cli_args_t *a, unit_t *u, plan_t *pl, bool restart_it, bool keep);
int sd_dropin_remove(const unit_t *u, const char *verb, const char *dir, const char *file, char *dumps, size_t dlen);
int sd_disable(cli_args_t *a, unit_t *u, bool restart_it);
int sd_status(cli_args_t *a, bool user);

#endif
