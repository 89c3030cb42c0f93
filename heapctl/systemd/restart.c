/*
 * heapctl/systemd/restart.c - enable --restart: restart the unit and check its new
 * processes carry the library; a unit that does not come up is told apart
 * (its own reasons, or the library's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/diagnose.h"
#include "diagnose/proc.h"
#include "systemd/internal.h"

/* ---- the processes of a unit --------------------------------------------------------- */

/* How many of the unit's processes map the library; *n: of how many. */
int sd_unit_loaded(const unit_t *u, const char *name, int *n)
{
	int pids[256], with = 0;
	bool readable;
	*n = unit_pids(u, name, pids, 256);
	for (int i = 0; i < *n; i++)
		with += cli_proc_maps_library(pids[i], NULL, 0, &readable);
	return with;
}


int sd_unit_state(const unit_t *u, const char *name, unit_state_t *s)
{
	char out[4096], v[64];
	memset(s, 0, sizeof *s);
	int code = unit_systemctl(u, out, sizeof out, "show", name, "-p",
	    "MainPID,ConditionResult,ConditionTimestampMonotonic,ActiveState,SubState,Result,ExecMainStatus");
	if (code)
		return code;
	s->main_pid = atoi(unit_prop_nth(out, "MainPID", 0, v, sizeof v) ? v : "0");
	unit_prop_nth(out, "ActiveState", 0, s->active, sizeof s->active);
	unit_prop_nth(out, "SubState", 0, s->sub, sizeof s->sub);
	unit_prop_nth(out, "Result", 0, s->result, sizeof s->result);
	unit_prop_nth(out, "ConditionResult", 0, s->cond, sizeof s->cond);
	unit_prop_nth(out, "ExecMainStatus", 0, s->status, sizeof s->status);
	/* an inactive unit nothing refers to is unloaded; loaded again to
	 * answer, it has ConditionResult=no and no time it was checked */
	s->cond_checked =
	    strtoull(unit_prop_nth(out, "ConditionTimestampMonotonic", 0, v, sizeof v) ? v : "0", NULL, 10) != 0;
	return 0;
}

/* Wait (10 s at most) until the unit has a main process, or is plainly
 * down: inactive or failed (a Condition= not met leaves it inactive at
 * once), waiting to be restarted after a crash (Restart=), or a oneshot
 * that has exited.  true: it is up, s->main_pid is its process. */
static bool wait_up(const unit_t *u, const char *name, unit_state_t *s)
{
	for (int i = 0; i < 100; i++) {
		if (sd_unit_state(u, name, s) != 0)
			return false;
		if (s->main_pid)
			return true;
		if (!strcmp(s->active, "inactive") || !strcmp(s->active, "failed") || !strcmp(s->sub, "auto-restart") ||
		    !strcmp(s->sub, "exited"))
			return false;
		usleep(100000);
	}
	return false;
}

/* Up, and still up with the same main process half a second later: a
 * Type=simple unit is "running" as soon as it has forked, and a program
 * that exits at once (a bad configuration, or the library) is down only
 * a moment after.  Half a second is not every failure; it is the ones
 * that happen at start, which are what a preload causes. */
static bool stays_up(const unit_t *u, const char *name, unit_state_t *s)
{
	if (!wait_up(u, name, s))
		return false;
	int pid = s->main_pid;
	usleep(500000);
	if (sd_unit_state(u, name, s) != 0)
		return false;
	return s->main_pid == pid && kill(pid, 0) == 0;
}

/* After a restart: does the new main process carry the library?  *down:
 * it did not come up at all (its state in s), which the caller tells
 * apart (not_started). */
static int verify(cli_args_t *a, const unit_t *u, const char *name, bool *down, unit_state_t *s)
{
	*down = false;
	int main_pid = 0;
	bool readable = false, mapped = false;
	for (int i = 0; i < 50 && !mapped; i++) {
		if (main_pid == 0 || kill(main_pid, 0) != 0) {
			if (!stays_up(u, name, s)) {
				*down = true;
				return HC_EXIT_FAILED;
			}
			main_pid = s->main_pid;
		}
		mapped = cli_proc_maps_library(main_pid, NULL, 0, &readable);
		if (!mapped)
			usleep(100000);
	}
	if (mapped) {
		int n, with = sd_unit_loaded(u, name, &n);
		printf("%s: main process %d runs with libheapctl.so (%d of the unit's %d processes)\n", name, main_pid,
		    with, n);
		return 0;
	}
	cli_diag_t *d = malloc(sizeof *d);
	if (d == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	cli_diagnose(main_pid, a->timeout_ns, d);
	printf("%s: main process %d does not run with libheapctl.so:\n", name, main_pid);
	cli_diag_print(d, false, "  ");
	free(d);
	return cli_err(HC_EXIT_NOLIB, "systemd: %s restarted without the library (see above)", name);
}

/* systemctl restart NAME, its failure not printed: a start that fails
 * (Type=notify, forking) fails the command, and what systemd says of the
 * unit afterwards tells why (not_started). */
static time_t restarted_at; /* the last restart_quiet's, for the journal */

static void restart_quiet(const unit_t *u, const char *name)
{
	restarted_at = time(NULL);
	char out[1024], err[1024];
	char *argv[] = { "systemctl", u->user ? "--user" : "--system", "restart", (char *)name, NULL };
	(void)cli_spawn(argv, NULL, out, sizeof out, err, sizeof err, 120000);
}

/* Restart the unit (a template: each running instance) and verify it.
 * An instance that did not come up is named in downed, its state in s. */
int sd_restart(cli_args_t *a, const unit_t *u, char *downed, size_t dlen, unit_state_t *s)
{
	char out[65536], pat[300];
	bool down = false;
	downed[0] = 0;
	if (!u->tmpl) {
		restart_quiet(u, u->name);
		int code = verify(a, u, u->name, &down, s);
		if (down)
			snprintf(downed, dlen, "%s", u->name);
		return code;
	}
	/* a template: every running instance */
	snprintf(pat, sizeof pat, "%.*s@*.service", (int)(strlen(u->name) - 9), u->name);
	int code = unit_systemctl(u, out, sizeof out, "list-units", "--state=active", "--plain", pat);
	if (code)
		return code;
	int restarted = 0;
	for (char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char name[300];
		if (sscanf(l, "%299s", name) != 1 || strncmp(name, pat, strlen(pat) - 9) != 0)
			continue;
		restart_quiet(u, name);
		if ((code = verify(a, u, name, &down, s)) != 0) {
			if (down)
				snprintf(downed, dlen, "%s", name);
			return code;
		}
		restarted++;
	}
	if (restarted == 0)
		printf("no instance of %s runs: each starts with the library\n", u->name);
	return 0;
}

/* The Condition= that kept a unit from starting: systemd names it in the
 * journal ("skipped because of an unmet condition check (X=Y)"); where
 * the journal cannot tell, the unit's Condition lines.  false: none did
 * (ConditionResult=no of a unit unloaded once inactive, never checked). */
static bool unmet_condition(const unit_t *u, const char *name, const unit_state_t *s, char *out, size_t len)
{
	char *text = malloc(1 << 16), err[256], since[32];
	snprintf(out, len, "a Condition= of the unit");
	if (text == NULL)
		return s->cond_checked;
	/* since the restart (the second it began in): an older skip is not this one */
	snprintf(since, sizeof since, "@%lld", (long long)restarted_at);
	char *jargv[] = { "journalctl", u->user ? "--user-unit" : "--unit", (char *)name, "-o", "cat", "--since", since,
		"--no-pager", NULL };
	if (cli_spawn(jargv, NULL, text, 1 << 16, err, sizeof err, 10000) == 0) {
		const char *key = "unmet condition check (", *hit = NULL;
		for (const char *p = strstr(text, key); p; p = strstr(p + 1, key))
			hit = p;
		if (hit) {
			hit += strlen(key);
			snprintf(out, len, "%.*s", (int)strcspn(hit, ")\n"), hit);
			free(text);
			return true;
		}
	}
	if (!s->cond_checked) {
		free(text);
		return false;
	}
	char *cargv[] = { "systemctl", u->user ? "--user" : "--system", "cat", (char *)name, NULL };
	if (cli_spawn(cargv, NULL, text, 1 << 16, err, sizeof err, 10000) == 0) {
		size_t o = 0;
		for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
			if (!strncmp(l, "Condition", 9) && o + 8 < len)
				o += (size_t)snprintf(out + o, len - o, "%s%.*s", o ? " or " : "one of ",
				    (int)strcspn(l, "\n"), l);
	}
	free(text);
	return true;
}

/* --restart, and NAME did not come up.  A unit that did not start for
 * reasons of its own must not read as one the library broke: a Condition=
 * not met (systemd skipped it: ConditionResult=no), or an exit that
 * happens without the library too, which heapctl finds out by removing
 * the drop-in and starting it again.  The drop-in goes in every case,
 * with a reload (--keep: it stays, and nothing is tried without it). */
int sd_not_started(const unit_t *u, const char *dir, const char *file, const char *name, const unit_state_t *s,
    bool keep)
{
	char why[1536], cond[1024], dumps[PATH_MAX] = "", left[PATH_MAX + 128];
	if (!strcmp(s->cond, "no") && unmet_condition(u, name, s, cond, sizeof cond)) {
		snprintf(why, sizeof why,
		    "%s did not start for a reason of its own, not the library: its "
		    "condition %s is not met (ConditionResult=no; it is %s, without a process)",
		    name, cond, s->active);
	} else if (!strcmp(s->result, "success") && strcmp(s->active, "active") != 0) {
		snprintf(why, sizeof why,
		    "%s did not stay up, for a reason of its own: it is %s (%s), its "
		    "main process exited with status %s and Result=success, so nothing is left to carry the "
		    "library",
		    name, s->active, s->sub, s->status[0] ? s->status : "?");
	} else if (keep) {
		snprintf(why, sizeof why,
		    "%s did not come back after the restart: it is %s (%s), "
		    "Result=%s, exit status %s (journalctl -u %s)",
		    name, s->active, s->sub, s->result, s->status[0] ? s->status : "?", name);
	} else {
		/* was it the library?  the same start without it tells */
		unit_state_t w;
		int code = sd_dropin_remove(u, "enable", dir, file, dumps, sizeof dumps);
		if (code)
			return code;
		restart_quiet(u, name);
		if (stays_up(u, name, &w))
			return cli_err(HC_EXIT_NOLIB,
			    "systemd enable %s: %s failed with the library (it was %s, "
			    "Result=%s, exit status %s) and runs without it (main process %d): removed %s, and "
			    "it is restarted without the library; journalctl -u %s says why",
			    u->name, name, s->sub, s->result, s->status[0] ? s->status : "?", w.main_pid, file, name);
		return cli_err(HC_EXIT_FAILED,
		    "systemd enable %s: %s did not start for a reason of its own, "
		    "not the library: it fails without it too (Result=%s, exit status %s; with the library "
		    "Result=%s, status %s); removed %s (journalctl -u %s)",
		    u->name, name, w.result, w.status[0] ? w.status : "?", s->result, s->status[0] ? s->status : "?",
		    file, name);
	}
	if (keep)
		snprintf(left, sizeof left, "kept %s (--keep)", file);
	else {
		int code = sd_dropin_remove(u, "enable", dir, file, dumps, sizeof dumps);
		if (code)
			return code;
		snprintf(left, sizeof left, "removed %s and reloaded systemd (--keep keeps it)", file);
	}
	return cli_err(HC_EXIT_FAILED, "systemd enable %s: %s; %s", u->name, why, left);
}
