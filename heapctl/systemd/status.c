/*
 * heapctl/systemd/status.c - `heapctl systemd status`: the units with heapctl's
 * drop-in, and of their processes how many carry the library and answer.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/diagnose.h"
#include "diagnose/proc.h"
#include "systemd/internal.h"

/* ---- status ------------------------------------------------------------------------------- */

static void status_one(cli_args_t *a, bool user, const char *unit, const char *dumps, json_t *j)
{
	unit_t u = { .user = user };
	snprintf(u.name, sizeof u.name, "%.255s", unit);
	size_t nl = strlen(unit);
	u.tmpl = nl > 9 && unit[nl - 9] == '@';
	char out[65536], names[64][300];
	int nn = 0;
	if (u.tmpl) {
		char pat[300];
		snprintf(pat, sizeof pat, "%.*s@*.service", (int)(nl - 9), unit);
		if (unit_systemctl(&u, out, sizeof out, "list-units", "--state=active", "--plain", pat) == 0)
			for (char *l = out; l && *l && nn < 64; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
				if (sscanf(l, "%299s", names[nn]) == 1 && strstr(names[nn], "@") &&
				    strstr(names[nn], ".service"))
					nn++;
	} else {
		snprintf(names[nn++], sizeof names[0], "%s", unit);
	}
	if (nn == 0 && !a->json)
		printf("%-32s %-9s %8s  %-26s %s\n", unit, "-", "-", "no instance running", dumps);
	for (int i = 0; i < nn; i++) {
		char v[64], active[32] = "?";
		int main_pid = 0;
		if (unit_systemctl(&u, out, sizeof out, "show", names[i], "-p", "ActiveState,MainPID") == 0) {
			unit_prop_nth(out, "ActiveState", 0, active, sizeof active);
			main_pid = atoi(unit_prop_nth(out, "MainPID", 0, v, sizeof v) ? v : "0");
		}
		/* per process: a worker that runs the library but whose control
		 * thread could not start (haproxy's, under RLIMIT_NPROC 0) is not
		 * "loaded" as far as heapctl goes, and is named */
		int pids[256], np = unit_procs(&u, names[i], main_pid, pids, 256), with = 0, answering = 0;
		bool readable, main_has = false;
		struct proc_row {
			int pid;
			bool loaded, answers;
			char who[64], cmd[256], why[512];
		} * rows;
		rows = calloc((size_t)np + 1, sizeof *rows);
		cli_diag_t *d = malloc(sizeof *d);
		if (rows == NULL || d == NULL) {
			free(rows);
			free(d);
			cli_err(HC_EXIT_FAILED, "out of memory");
			return;
		}
		for (int k = 0; k < np; k++) {
			struct proc_row *r = &rows[k];
			r->pid = pids[k];
			r->loaded = cli_proc_maps_library(pids[k], NULL, 0, &readable);
			cli_proc_who(pids[k], r->who, sizeof r->who, r->cmd, sizeof r->cmd);
			if (!r->loaded)
				continue;
			with++;
			main_has = main_has || pids[k] == main_pid;
			cli_diagnose(pids[k], a->timeout_ns, d);
			r->answers = cli_diag_answers(d);
			answering += r->answers;
			if (!r->answers)
				snprintf(r->why, sizeof r->why, "%s", cli_diag_why(d));
		}
		free(d);
		char lib[96];
		if (!main_pid)
			snprintf(lib, sizeof lib, "-");
		else if (!main_has)
			snprintf(lib, sizeof lib, "NOT loaded: doctor %d", main_pid);
		else if (answering == with)
			snprintf(lib, sizeof lib, "loaded (%d of %d)", with, np);
		else
			snprintf(lib, sizeof lib, "loaded (%d of %d), %d not answering", with, np, with - answering);
		if (a->json) {
			json_obj(j, NULL);
			json_str(j, "unit", names[i]);
			json_str(j, "active", active);
			json_i64(j, "main_pid", main_pid);
			json_bool(j, "main_loaded", main_has);
			json_i64(j, "processes", np);
			json_i64(j, "loaded", with);
			json_i64(j, "answering", answering);
			json_str(j, "dumps", dumps);
			json_arr(j, "each");
			for (int k = 0; k < np; k++) {
				json_obj(j, NULL);
				json_i64(j, "pid", rows[k].pid);
				json_str(j, "user", rows[k].who);
				json_str(j, "command", rows[k].cmd);
				json_bool(j, "loaded", rows[k].loaded);
				json_bool(j, "answers", rows[k].answers);
				json_str(j, "why", rows[k].loaded && !rows[k].answers ? rows[k].why : NULL);
				json_end(j);
			}
			json_end(j);
			json_end(j);
		} else {
			printf("%-32s %-9s %8d  %-26s %s\n", names[i], active, main_pid, lib, dumps);
			for (int k = 0; k < np; k++)
				if (rows[k].loaded && !rows[k].answers)
					printf("  process %d (%s): %s: not answering: %s\n", rows[k].pid, rows[k].who,
					    rows[k].cmd, rows[k].why);
		}
		free(rows);
	}
}

int sd_status(cli_args_t *a, bool user)
{
	unit_t u = { .user = user };
	char dir[PATH_MAX], file[PATH_MAX + 32], base[PATH_MAX];
	snprintf(u.name, sizeof u.name, "x.service");
	int code = unit_dropin_path(&u, dir, sizeof dir, file, sizeof file);
	if (code)
		return code;
	*strrchr(dir, '/') = 0; /* the directory of drop-in dirs */
	snprintf(base, sizeof base, "%s", dir);
	DIR *d = opendir(base);
	json_t j;
	json_begin(&j, stdout, JSON_PRETTY);
	if (a->json)
		json_arr(&j, NULL);
	else
		printf("%-32s %-9s %8s  %-26s %s\n", "UNIT", "ACTIVE", "MAIN-PID", "LIBRARY", "DUMPS");
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);
		if (l < 11 || strcmp(e->d_name + l - 10, ".service.d") != 0)
			continue;
		char text[16384], unit[300], dumps[PATH_MAX] = "", path[2 * PATH_MAX];
		snprintf(path, sizeof path, "%s/%s/" DROPIN, base, e->d_name);
		if (hc_shm_read_file(path, text, sizeof text) < 0 || strncmp(text, MARK, strlen(MARK)) != 0)
			continue;
		for (char *t = text; t && *t; t = strchr(t, '\n') ? strchr(t, '\n') + 1 : NULL) {
			if (sscanf(t, "# heapctl-dumps: %4095[^\n]", dumps) == 1) {
				char *c = strstr(dumps, " (created)");
				if (c)
					*c = 0;
			}
		}
		snprintf(unit, sizeof unit, "%.*s", (int)(l - 2), e->d_name);
		status_one(a, user, unit, dumps, &j);
	}
	if (d)
		closedir(d);
	if (a->json)
		json_end(&j);
	return 0;
}
