/*
 * heapctl/systemd/dumpdir.c - where a unit's dumps go: a directory that survives
 * the unit and that its user can write under any sandbox.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "systemd/internal.h"

/* ---- the dump directory -------------------------------------------------------------- */


int sd_plan_dump_dir(const unit_t *u, const plan_t *pl, dumpdir_t *dd)
{
	memset(dd, 0, sizeof *dd);
	char ptmp[16], dyn[16], user[128], group[128], why[PMAX + 256];
	unit_prop(u, "PrivateTmp", ptmp, sizeof ptmp);
	unit_prop(u, "DynamicUser", dyn, sizeof dyn);
	unit_prop(u, "User", user, sizeof user);
	unit_prop(u, "Group", group, sizeof group);
	if (u->user) {
		/* a user's manager: the caller is the service's user, so heapctl makes
		 * the directory (%S is ~/.config or ~/.local/state, by systemd version) */
		char d[PMAX];
		const char *x = getenv("XDG_STATE_HOME"), *h = getenv("HOME");
		if (pl->dump_dir[0])
			snprintf(d, sizeof d, "%s", pl->dump_dir);
		else if (x && *x == '/')
			snprintf(d, sizeof d, "%.900s/heapctl", x);
		else
			snprintf(d, sizeof d, "%.900s/.local/state/heapctl", h ? h : "");
		if (d[0] != '/')
			return cli_err(HC_EXIT_FAILED, "systemd enable --user: neither XDG_STATE_HOME nor HOME is set");
		bool existed = access(d, F_OK) == 0;
		int e = sd_mkdirs(d, 0700);
		if (e)
			return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot create %s: %s", u->name, d,
			    strerror(e));
		if (!existed)
			snprintf(dd->created, sizeof dd->created, "%s", d);
		char esc[2 * PMAX];
		sd_escape_pct(d, esc, sizeof esc);
		snprintf(dd->prefix, sizeof dd->prefix, "%s/%%N", esc);
		snprintf(dd->shown, sizeof dd->shown, "%s", d);
		return 0;
	}
	if (pl->dump_dir[0] == 0) {
		snprintf(dd->setting, sizeof dd->setting, "StateDirectory=heapctl/%%N");
		snprintf(dd->prefix, sizeof dd->prefix, "%%S/heapctl/%%N/%%N");
		snprintf(dd->shown, sizeof dd->shown, "/var/lib/heapctl/%s", u->tmpl ? "INSTANCE" : u->name);
		if (!u->tmpl) {
			char *dot = strrchr(dd->shown, '.');
			if (dot && !strcmp(dot, ".service"))
				*dot = 0;
		}
		return 0;
	}
	const char *d = pl->dump_dir;
	char esc[2 * PMAX];
	sd_escape_pct(d, esc, sizeof esc);
	snprintf(dd->prefix, sizeof dd->prefix, "%s/%%N", esc);
	snprintf(dd->shown, sizeof dd->shown, "%s", d);
	if (!strcmp(ptmp, "yes") && (sd_under(d, "/tmp") || sd_under(d, "/var/tmp"))) {
		snprintf(why, sizeof why,
		    "--dump-dir %s is in the unit's PrivateTmp=, which the host cannot "
		    "see at that path and which systemd deletes when the unit stops, final dumps with it",
		    d);
		return sd_refuse(u, why, "choose a directory under /var/lib (or leave --dump-dir out)");
	}
	/* systemd creates these, with the service's owner, also for a dynamic user */
	static const struct {
		const char *base, *setting;
	} managed[] = {
		{ "/var/lib/", "StateDirectory" },
		{ "/var/cache/", "CacheDirectory" },
		{ "/var/log/", "LogsDirectory" },
	};
	for (unsigned i = 0; i < 3; i++) {
		if (strncmp(d, managed[i].base, strlen(managed[i].base)) == 0 && d[strlen(managed[i].base)]) {
			sd_escape_pct(d + strlen(managed[i].base), esc, sizeof esc);
			snprintf(dd->setting, sizeof dd->setting, "%s=%s", managed[i].setting, esc);
			return 0;
		}
	}
	if (!strcmp(dyn, "yes")) {
		snprintf(why, sizeof why,
		    "it runs as a dynamic user (DynamicUser=yes), which cannot own "
		    "%s",
		    d);
		return sd_refuse(u, why,
		    "choose a directory under /var/lib, /var/cache or /var/log: systemd "
		    "creates those for the dynamic user");
	}
	/* an ordinary directory: made for the service's user, and writable under
	 * ProtectSystem= (the "-": a directory removed later does not stop the unit) */
	struct passwd *pw = user[0] ? getpwnam(user) : NULL;
	if (user[0] && pw == NULL && !(user[0] >= '0' && user[0] <= '9'))
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: its User=%s does not exist", u->name, user);
	uid_t uid = pw ? pw->pw_uid : user[0] ? (uid_t)strtoul(user, NULL, 10) : 0;
	gid_t gid = pw ? pw->pw_gid : 0;
	struct group *gr = group[0] ? getgrnam(group) : NULL;
	if (gr)
		gid = gr->gr_gid;
	struct stat st;
	bool existed = stat(d, &st) == 0;
	int e = sd_mkdirs(d, 0750);
	if (e)
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot create %s: %s", u->name, d, strerror(e));
	if (!existed) {
		if (chown(d, uid, gid) != 0)
			return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot give %s to %s: %s", u->name, d,
			    user[0] ? user : "root", strerror(errno));
		snprintf(dd->created, sizeof dd->created, "%s", d);
	}
	sd_escape_pct(d, esc, sizeof esc);
	snprintf(dd->setting, sizeof dd->setting, "ReadWritePaths=-%s", esc);
	return 0;
}
