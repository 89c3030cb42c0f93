/*
 * heapctl/systemd/enable.c - `heapctl systemd enable UNIT`: the drop-in, written
 * once (the same one again is left as it is), and what it did.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cmd/cmd.h"
#include "diagnose/proc.h"
#include "systemd/internal.h"

/* enable --json: the line's object, opened, with what every answer has. */
static void enable_json(json_t *j, const unit_t *u, const char *file, const plan_t *pl)
{
	json_begin(j, stdout, JSON_LINE);
	json_obj(j, NULL);
	json_str(j, "unit", u->name);
	json_str(j, "dropin", file);
	json_str(j, "library", pl->lib);
}

/* Does the unit already run the library from the drop-in at file, whose
 * text is what this enable would write?  Its main process started after
 * the file was written and maps the library this enable names.  Then there
 * is nothing to write and nothing to restart: says so (or its JSON). */
static bool already_loaded(cli_args_t *a, const unit_t *u, const plan_t *pl, const char *file)
{
	unit_state_t s;
	struct stat st;
	char lib[PATH_MAX];
	bool readable;
	if (u->tmpl || sd_unit_state(u, u->name, &s) != 0 || s.main_pid == 0 || stat(file, &st) != 0 ||
	    !cli_proc_maps_library(s.main_pid, lib, sizeof lib, &readable) || strcmp(lib, pl->lib) != 0)
		return false;
	int64_t written = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
	        started = cli_proc_started_ns(s.main_pid);
	/* the start time is in clock ticks: 10 ms either way */
	if (started == 0 || started + 10000000 < written)
		return false;
	int n, with = sd_unit_loaded(u, u->name, &n);
	if (a->json) {
		json_t j;
		enable_json(&j, u, file, pl);
		json_bool(&j, "already_loaded", true);
		json_i64(&j, "main_pid", s.main_pid);
		json_i64(&j, "processes", n);
		json_i64(&j, "loaded", with);
		json_bool(&j, "restarted", false);
		json_end(&j);
	} else {
		printf("%s: already loaded: main process %d started with %s, and runs %s (%d of the unit's "
		       "%d processes); nothing written, nothing to restart\n",
		    u->name, s.main_pid, file, pl->lib, with, n);
	}
	return true;
}

/* Two drop-ins say the same, but for "(created)" after a directory in its
 * records: a directory enable made the first time exists the next. */
static bool same_dropin(const char *a, const char *b)
{
	static const char created[] = " (created)";
	const size_t cl = sizeof created - 1;
	while (*a || *b) {
		if (!strncmp(a, created, cl) && (a[cl] == '\n' || !a[cl]))
			a += cl;
		if (!strncmp(b, created, cl) && (b[cl] == '\n' || !b[cl]))
			b += cl;
		if (*a != *b)
			return false;
		if (*a)
			a++, b++;
	}
	return true;
}

/* Can the unit run the library at all?  Finds the library (pl->lib,
 * pl->libdir), checks --conf and --dump-dir, and what stops a preload
 * (checks.c).  0, or the refusal printed and its exit code. */
static int enable_check(unit_t *u, plan_t *pl)
{
	int code;
	if ((code = cli_find_library(pl->secure ? "libheapctl-secure.so" : "libheapctl.so", pl->lib, sizeof pl->lib)) !=
	    0)
		return code;
	snprintf(pl->libdir, sizeof pl->libdir, "%s", pl->lib);
	*strrchr(pl->libdir, '/') = 0;
	/* every user must be able to read it: the service's may be a dynamic one */
	struct stat st;
	if (stat(pl->lib, &st) != 0 || !(st.st_mode & S_IROTH))
		return cli_err(HC_EXIT_FAILED,
		    "systemd enable %s: %s is not readable by every user, so "
		    "the service's user could not load it (chmod a+r)",
		    u->name, pl->lib);
	if (strstr(pl->conf, "prof_prefix"))
		return cli_err(HC_EXIT_USAGE,
		    "systemd enable: give the dump directory with --dump-dir, "
		    "not prof_prefix in --conf");
	if (pl->dump_dir[0] && pl->dump_dir[0] != '/')
		return cli_err(HC_EXIT_USAGE, "systemd enable: --dump-dir must be an absolute path");
	if (pl->conf[0] && (code = cli_check_conf(pl->lib, pl->conf)) != 0)
		return code;
	if ((code = sd_check_umbrella(u)) != 0 || (code = sd_check_exec(u, pl)) != 0 ||
	    (code = sd_check_hardening(u, pl)) != 0)
		return code;
	return 0;
}

/* pl->preload: the library first, then a preload the unit sets (not ours:
 * a drop-in written earlier is replaced). */
static int enable_preload(unit_t *u, plan_t *pl)
{
	char env[4096], old[4096] = "";
	unit_prop(u, "Environment", env, sizeof env);
	const char *p = strstr(env, "LD_PRELOAD=");
	if (p && (p == env || p[-1] == ' ' || p[-1] == '"')) {
		p += 11;
		snprintf(old, sizeof old, "%.*s", (int)strcspn(p, " \""), p);
	}
	char *pre = cli_preload_with(pl->lib, old[0] ? old : NULL);
	if (pre == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	snprintf(pl->preload, sizeof pl->preload, "%s", pre);
	free(pre);
	return 0;
}

/* The [Service] settings of the drop-in, appended at lines + *n; what
 * else enable wrote or made is appended to record (# heapctl-... lines). */
static int enable_settings(const unit_t *u, const plan_t *pl, char *lines, size_t len, size_t *n, char *record,
    size_t reclen)
{
	int code;
	if (pl->pg) {
		/* pg_ctlcluster starts postgres with the cluster's environment file only */
		glob_t g;
		if ((code = sd_pg_clusters(u, &g)) != 0)
			return code;
		for (size_t i = 0; i < g.gl_pathc && code == 0; i++)
			code = sd_pg_write_env(u, pl, g.gl_pathv[i], record, reclen);
		globfree(&g);
		if (code)
			return code;
		*n += (size_t)snprintf(lines + *n, len - *n,
		    "# ExecStart is pg_ctlcluster, which "
		    "gives postgres the environment of\n# /etc/postgresql/VERSION/CLUSTER/environment "
		    "only: LD_PRELOAD and HEAPCTL_CONF are there.\n");
		return 0;
	}
	dumpdir_t dd = { 0 };
	if ((code = sd_plan_dump_dir(u, pl, &dd)) != 0)
		return code;
	char conf[2 * PMAX + 256], esc_pre[8192], esc_conf[8192];
	snprintf(conf, sizeof conf, "prof:true,prof_active:%s,prof_prefix:%s", pl->off ? "false" : "true", dd.prefix);
	sd_escape_pct(pl->preload, esc_pre, sizeof esc_pre);
	sd_escape_pct(pl->conf, esc_conf, sizeof esc_conf);
	*n += (size_t)snprintf(lines + *n, len - *n,
	    "# libheapctl.so first: the first malloc in LD_PRELOAD is the one used.\n"
	    "Environment=\"LD_PRELOAD=%s\"\n"
	    "# Sampling from the start: what is allocated before profiling is\n"
	    "# switched on is in no profile.  heapctl off PID stops it.\n"
	    "Environment=\"HEAPCTL_CONF=%s%s%s\"\n",
	    esc_pre, conf, esc_conf[0] ? "," : "", esc_conf);
	if (dd.setting[0])
		*n += (size_t)snprintf(lines + *n, len - *n,
		    "# Dumps: a directory that "
		    "survives the unit, writable under its sandbox.\n%s\n",
		    dd.setting);
	if (pl->add_execpaths) {
		char esc[PATH_MAX * 2];
		sd_escape_pct(pl->libdir, esc, sizeof esc);
		*n += (size_t)snprintf(lines + *n, len - *n,
		    "# The unit's NoExecPaths= covers "
		    "the library's directory.\nExecPaths=%s\n",
		    esc);
	}
	snprintf(record + strlen(record), reclen - strlen(record), "# heapctl-dumps: %s%s\n", dd.shown,
	    dd.created[0] ? " (created)" : "");
	return 0;
}

/* What enable did: the drop-in (written, or the same already), where dumps
 * go (the one directory, or each cluster's, from record), and what next. */
static void enable_print(cli_args_t *a, const unit_t *u, const plan_t *pl, const char *file, const char *record,
    bool same, bool restart_it)
{
	char shown[8192] = "";
	for (const char *l = record; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char d[PATH_MAX];
		if (sscanf(l, "# heapctl-dumps: %4095[^\n]", d) != 1)
			continue;
		char *c = strstr(d, " (created)");
		if (c)
			*c = 0;
		size_t sl = strlen(shown);
		snprintf(shown + sl, sizeof shown - sl, "%s%s", sl ? ", " : "", d);
	}
	if (a->json) {
		json_t j;
		enable_json(&j, u, file, pl);
		json_str(&j, "dumps", shown);
		json_bool(&j, "exec_paths_added", pl->add_execpaths);
		json_bool(&j, "written", !same);
		json_bool(&j, "already_loaded", false);
		json_bool(&j, "restarted", restart_it);
		json_end(&j);
		return;
	}
	printf(same ? "%s is already this, unchanged\n" : "wrote %s\n", file);
	if (pl->pg)
		printf("and LD_PRELOAD, HEAPCTL_CONF in the cluster's environment file (pg_ctlcluster "
		       "resets the environment)\n");
	printf("dumps go to %s\n", shown);
	if (pl->add_execpaths)
		printf("added ExecPaths=%s (the unit's NoExecPaths= covers it)\n", pl->libdir);
	if (!restart_it)
		printf("restart the service to load the library: systemctl%s restart %s\n", u->user ? " --user" : "",
		    u->tmpl ? "INSTANCE" : u->name);
}

int sd_enable(cli_args_t *a, unit_t *u, plan_t *pl, bool restart_it, bool keep)
{
	int code;
	char dir[PATH_MAX], file[PATH_MAX + 32];
	if ((code = enable_check(u, pl)) != 0)
		return code;
	if ((code = unit_dropin_path(u, dir, sizeof dir, file, sizeof file)) != 0)
		return code;
	if ((code = enable_preload(u, pl)) != 0)
		return code;

	char lines[32768], record[8192] = "";
	size_t n = 0;
	n += (size_t)snprintf(lines + n, sizeof lines - n,
	    MARK " %s` (heapctl %s);\n"
	         "# `heapctl systemd disable %s` removes it and what it lists below.\n[Service]\n",
	    u->name, HEAPCTL_VERSION, u->name);
	if ((code = enable_settings(u, pl, lines, sizeof lines, &n, record, sizeof record)) != 0)
		return code;
	n += (size_t)snprintf(lines + n, sizeof lines - n, "%s", record);
	/* the same drop-in again: left as it is, so that its time still tells
	 * whether the processes started with it */
	char *before = malloc(sizeof lines);
	if (before == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	bool same = hc_shm_read_file(file, before, sizeof lines) >= 0 && same_dropin(before, lines);
	free(before);
	if (same && already_loaded(a, u, pl, file))
		return 0;
	if (!same) {
		int e = sd_mkdirs(dir, 0755);
		if (e == 0)
			e = sd_write_atomic(file, lines, 0644);
		if (e)
			return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot write %s: %s", u->name, file,
			    strerror(e));
		if ((code = unit_systemctl(u, NULL, 0, "daemon-reload", NULL, NULL, NULL)) != 0)
			return code;
	}
	enable_print(a, u, pl, file, record, same, restart_it);
	if (!restart_it)
		return 0;
	char downed[300];
	unit_state_t s;
	code = sd_restart(a, u, downed, sizeof downed, &s);
	return downed[0] ? sd_not_started(u, dir, file, downed, &s, keep) : code;
}
