/*
 * heapctl/diagnose/unit.h - a systemd unit as heapctl reads it (unit.c):
 * what `heapctl doctor UNIT` and `heapctl systemd` share.
 */
#ifndef HC_DIAGNOSE_UNIT_H
#define HC_DIAGNOSE_UNIT_H

#include "cli/cli.h"

/* The drop-in heapctl systemd enable writes, and its first line's start,
 * by which heapctl knows the file is its own. */
#define DROPIN "50-heapctl.conf"
#define MARK   "# Written by `heapctl systemd enable"

typedef struct {
	bool user;       /* --user: the caller's service manager    */
	char name[256];  /* foo.service, foo@.service, foo@x.service */
	char probe[300]; /* a name systemctl show accepts            */
	bool tmpl;       /* foo@.service                             */
	char *show;      /* systemctl show output                    */
} unit_t;

/* systemctl [--user] a1 a2 a3 a4 (NULLs left out), its output in out;
 * 0, or the failure printed and its exit code. */
int unit_systemctl(const unit_t *u, char *out, size_t outlen, const char *a1, const char *a2, const char *a3,
    const char *a4);
/* The value of one "Key=value" line of show (the n-th with that key), or NULL. */
const char *unit_prop_nth(const char *show, const char *key, int n, char *out, size_t len);
/* The unit's setting key ("" when it has none): out. */
const char *unit_prop(const unit_t *u, const char *key, char *out, size_t len);
/* The unit named arg (".service" may be left out; a template is read
 * through an instance), with its settings in u->show (the caller frees
 * it, also on failure).  0, or the failure printed and its exit code. */
int unit_load(unit_t *u, const char *arg, bool user);
/* Its drop-in's directory and file: /etc/systemd/system/UNIT.d/DROPIN, or
 * the user manager's configuration directory with --user. */
int unit_dropin_path(const unit_t *u, char *dir, size_t dlen, char *file, size_t flen);
/* The processes of unit name (its control group), at most max; how many. */
int unit_pids(const unit_t *u, const char *name, int *pids, int max);
/* The same, its main process first (main_pid, 0: none). */
int unit_procs(const unit_t *u, const char *name, int main_pid, int *pids, int max);

#endif
