/*
 * heapctl/diagnose/command.c - `heapctl doctor PID|UNIT`: the diagnosis of
 * one process (doctor.c), or of every process of a systemd unit (unit.c),
 * printed with the fix for each problem.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "diagnose/diagnose.h"
#include "diagnose/proc.h"
#include "diagnose/unit.h"

/* ---- doctor UNIT ----------------------------------------------------------------------------- */

/* heapctl doctor UNIT: the unit, then each of its processes diagnosed, with
 * what the unit adds (a drop-in newer than the process, or none). */
static int doctor_unit(cli_args_t *a, const char *name)
{
	unit_t u;
	bool user = false;
	int code = unit_load(&u, name, user);
	if (code) {
		free(u.show);
		return code;
	}
	if (u.tmpl) {
		free(u.show);
		return cli_err(HC_EXIT_USAGE, "doctor: %s is a template; name an instance (foo@INSTANCE)", u.name);
	}
	char v[256], active[64], dir[PATH_MAX], file[PATH_MAX + 32];
	int main_pid = atoi(unit_prop(&u, "MainPID", v, sizeof v));
	unit_prop(&u, "ActiveState", active, sizeof active);
	/* the unit's drop-in, or its template's */
	struct stat st;
	bool dropin = false;
	int64_t written = 0;
	for (int t = 0; t < 2 && !dropin; t++) {
		unit_t x = u;
		const char *at = strchr(u.name, '@');
		if (t == 1) {
			if (at == NULL)
				break;
			snprintf(x.name, sizeof x.name, "%.*s@.service", (int)(at - u.name), u.name);
		}
		if (unit_dropin_path(&x, dir, sizeof dir, file, sizeof file) == 0 && stat(file, &st) == 0) {
			dropin = true;
			written = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		}
	}
	int pids[256], np = unit_procs(&u, u.name, main_pid, pids, 256);
	cli_diag_t *d = calloc(1, sizeof *d), *unit_d = calloc(1, sizeof *unit_d);
	if (d == NULL || unit_d == NULL) {
		free(d);
		free(unit_d);
		free(u.show);
		return cli_err(HC_EXIT_FAILED, "out of memory");
	}
	if (np == 0) {
		unit_d->code = HC_EXIT_NOPROC;
		unit_d->n = 1;
		unit_d->f[0] = (cli_finding_t){ .level = CLI_PROBLEM, .code = HC_EXIT_NOPROC };
		snprintf(unit_d->f[0].topic, sizeof unit_d->f[0].topic, "unit");
		snprintf(unit_d->f[0].text, sizeof unit_d->f[0].text, "%s is %s: it has no process", u.name, active);
		snprintf(unit_d->f[0].fix, sizeof unit_d->f[0].fix, "systemctl start %s", u.name);
	}
	json_t j;
	if (a->json) {
		json_begin(&j, stdout, JSON_PRETTY);
		json_obj(&j, NULL);
		json_str(&j, "unit", u.name);
		json_str(&j, "active", active);
		json_i64(&j, "main_pid", main_pid);
	} else {
		printf("unit %s: %s, main process %d, %d process%s\n", u.name, active, main_pid, np,
		    np == 1 ? "" : "es");
		cli_diag_print(unit_d, false, "");
	}
	code = unit_d->code;
	if (a->json)
		json_arr(&j, "processes");
	for (int i = 0; i < np; i++) {
		cli_diagnose(pids[i], a->timeout_ns, d);
		int64_t started = cli_proc_started_ns(pids[i]);
		/* a drop-in newer than the process: it was never restarted */
		if (dropin && started && written > started + 10000000 && d->code == HC_EXIT_NOLIB) {
			cli_finding_t *f = &d->f[d->n < CLI_DIAG_MAX ? d->n++ : d->n - 1];
			*f = (cli_finding_t){ .level = CLI_PROBLEM, .code = HC_EXIT_NOLIB };
			snprintf(f->topic, sizeof f->topic, "unit");
			snprintf(f->text, sizeof f->text,
			    "the heapctl drop-in %.600s was written after the %s "
			    "started: the library loads at the next start",
			    file, pids[i] == main_pid ? "main process" : "process");
			snprintf(f->fix, sizeof f->fix, "systemctl restart %s", u.name);
		} else if (!dropin && d->code == HC_EXIT_NOLIB) {
			cli_finding_t *f = &d->f[d->n < CLI_DIAG_MAX ? d->n++ : d->n - 1];
			*f = (cli_finding_t){ .level = CLI_NOTE };
			snprintf(f->topic, sizeof f->topic, "unit");
			snprintf(f->text, sizeof f->text, "%s has no heapctl drop-in", u.name);
			snprintf(f->fix, sizeof f->fix, "heapctl systemd enable %s --restart", u.name);
		}
		char who[64], cmd[512];
		cli_proc_who(pids[i], who, sizeof who, cmd, sizeof cmd);
		if (a->json) {
			json_obj(&j, NULL);
			json_str(&j, "user", who);
			json_str(&j, "command", cmd);
			json_bool(&j, "main", pids[i] == main_pid);
			cli_diag_json(&j, d);
			json_end(&j);
		} else {
			printf("process %d (%s%s): %s\n", pids[i], who, pids[i] == main_pid ? ", main" : "", cmd);
			cli_diag_print(d, false, "  ");
		}
		if (code == 0)
			code = d->code;
	}
	if (a->json) {
		json_end(&j);
		json_bool(&j, "ok", code == 0);
		json_i64(&j, "exit", code);
		cli_diag_json_findings(&j, unit_d);
		json_end(&j);
	}
	free(d);
	free(unit_d);
	free(u.show);
	return code;
}

/* ---- the command ------------------------------------------------------------------------ */

const cli_help_t cmd_help_doctor = {
	.usage = "PID|UNIT [--json]",
	.line = "why a process is not in 'list' or refuses commands, and the fix",
};

int cmd_doctor(cli_args_t *a)
{
	if (a->argc > 1)
		return cli_err(HC_EXIT_USAGE, "doctor: one PID or UNIT, not '%s'", a->argv[1]);
	if (a->argc == 1 && a->pid)
		return cli_err(HC_EXIT_USAGE, "doctor: a PID or a UNIT, not both");
	if (a->argc == 1)
		return doctor_unit(a, a->argv[0]);
	if (a->pid == 0)
		return cli_err(HC_EXIT_USAGE, "doctor: say which process: heapctl doctor PID|UNIT");
	cli_diag_t *d = malloc(sizeof *d);
	if (d == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	cli_diagnose(a->pid, a->timeout_ns, d);
	cli_diag_print(d, a->json, "");
	int code = d->code;
	free(d);
	return code;
}
