/*
 * heapctl/diagnose/unit.c - a systemd unit as heapctl reads it: its
 * settings (`systemctl show`), its heapctl drop-in and its processes.
 * `heapctl doctor UNIT` (command.c) and heapctl systemd (enable, disable,
 * status) build on this; nothing here calls either.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "diagnose/unit.h"

/* ---- systemctl ------------------------------------------------------------------ */

int unit_systemctl(const unit_t *u, char *out, size_t outlen, const char *a1, const char *a2, const char *a3,
    const char *a4)
{
	char err[2048];
	char *argv[8];
	int n = 0;
	argv[n++] = (char *)"systemctl";
	if (u->user)
		argv[n++] = (char *)"--user";
	const char *rest[] = { a1, a2, a3, a4 };
	for (int i = 0; i < 4; i++)
		if (rest[i])
			argv[n++] = (char *)rest[i];
	argv[n] = NULL;
	int st = cli_spawn(argv, NULL, out, outlen, err, sizeof err, 120000);
	if (st < 0)
		return cli_err(HC_EXIT_FAILED, "cannot run systemctl: %s", strerror(errno));
	if (st != 0) {
		err[strcspn(err, "\n")] = 0;
		return cli_err(HC_EXIT_FAILED, "systemctl%s %s%s%s failed: %s", u->user ? " --user" : "", a1,
		    a2 ? " " : "", a2 ? a2 : "", err[0] ? err : "(no message)");
	}
	return 0;
}

const char *unit_prop_nth(const char *show, const char *key, int n, char *out, size_t len)
{
	size_t kl = strlen(key);
	for (const char *l = show; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, key, kl) == 0 && l[kl] == '=' && n-- == 0) {
			size_t vl = strcspn(l + kl + 1, "\n");
			snprintf(out, len, "%.*s", (int)vl, l + kl + 1);
			return out;
		}
	}
	return NULL;
}

const char *unit_prop(const unit_t *u, const char *key, char *out, size_t len)
{
	if (!unit_prop_nth(u->show, key, 0, out, len) && len)
		out[0] = 0;
	return out;
}

int unit_load(unit_t *u, const char *arg, bool user)
{
	memset(u, 0, sizeof *u);
	u->user = user;
	if (!*arg || strlen(arg) > 200 || strchr(arg, '/') || arg[0] == '-')
		return cli_err(HC_EXIT_USAGE, "systemd: '%s' is not a unit name", arg);
	const char *dot = strrchr(arg, '.');
	if (dot && strcmp(dot, ".service") != 0 && strchr(arg, '@') == NULL)
		return cli_err(HC_EXIT_USAGE, "systemd: %s: only services run programs to preload into", arg);
	snprintf(u->name, sizeof u->name, "%s%s", arg, dot && !strcmp(dot, ".service") ? "" : ".service");
	size_t nl = strlen(u->name);
	u->tmpl = nl > 9 && u->name[nl - 9] == '@';
	/* systemctl show refuses a template: read it through an instance */
	if (u->tmpl)
		snprintf(u->probe, sizeof u->probe, "%.*s@heapctl-probe.service", (int)(nl - 9), u->name);
	else
		snprintf(u->probe, sizeof u->probe, "%s", u->name);
	u->show = malloc(1 << 16);
	if (u->show == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	int code = unit_systemctl(u, u->show, 1 << 16, "show", u->probe, "--timestamp=unix", NULL);
	if (code)
		return code;
	char v[64];
	if (strcmp(unit_prop(u, "LoadState", v, sizeof v), "loaded") != 0)
		return cli_err(HC_EXIT_FAILED, "systemd: no unit %s (%s)", u->name, v[0] ? v : "not found");
	return 0;
}

int unit_dropin_path(const unit_t *u, char *dir, size_t dlen, char *file, size_t flen)
{
	if (u->user) {
		const char *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
		if ((x == NULL || *x != '/') && (h == NULL || *h != '/'))
			return cli_err(HC_EXIT_FAILED, "systemd --user: neither XDG_CONFIG_HOME nor HOME is set");
		if (x && *x == '/')
			snprintf(dir, dlen, "%s/systemd/user/%s.d", x, u->name);
		else
			snprintf(dir, dlen, "%s/.config/systemd/user/%s.d", h, u->name);
	} else {
		snprintf(dir, dlen, "/etc/systemd/system/%s.d", u->name);
	}
	snprintf(file, flen, "%s/" DROPIN, dir);
	return 0;
}

/* ---- the processes of a unit --------------------------------------------------------- */

int unit_pids(const unit_t *u, const char *name, int *pids, int max)
{
	char out[4096], cg[PATH_MAX], path[PATH_MAX + 64];
	unit_t tmp = *u;
	snprintf(tmp.probe, sizeof tmp.probe, "%s", name);
	if (unit_systemctl(&tmp, out, sizeof out, "show", name, "-p", "ControlGroup") != 0)
		return 0;
	if (!unit_prop_nth(out, "ControlGroup", 0, cg, sizeof cg) || !cg[0])
		return 0;
	/* the unified hierarchy, or under a hybrid layout its own mount or the
	 * name=systemd one */
	static const char *const roots[] = { "", "/unified", "/systemd" };
	char text[65536];
	ssize_t got = -1;
	for (unsigned i = 0; i < 3 && got <= 0; i++) {
		snprintf(path, sizeof path, "/sys/fs/cgroup%s%s/cgroup.procs", roots[i], cg);
		got = hc_shm_read_file(path, text, sizeof text);
	}
	if (got <= 0)
		return 0;
	int n = 0;
	for (char *l = text; l && *l && n < max; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (atoi(l) > 0)
			pids[n++] = atoi(l);
	return n;
}

/* The unit's processes, its main one first: nginx's and haproxy's workers
 * are other processes of the unit (running as another user after setuid,
 * haproxy's in a chroot), and what is wrong with one is not seen in the
 * main one.  n: how many. */
int unit_procs(const unit_t *u, const char *name, int main_pid, int *pids, int max)
{
	int got[256], n = unit_pids(u, name, got, 256), k = 0;
	if (main_pid && k < max)
		pids[k++] = main_pid;
	for (int i = 0; i < n && k < max; i++)
		if (got[i] != main_pid)
			pids[k++] = got[i];
	return k;
}
