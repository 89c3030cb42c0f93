/*
 * heapctl/systemd/checks.c - what stops a preload: enable refuses, with the reason
 * and the fix, a unit whose program or hardening the library cannot work
 * under, and notes where the drop-in must add ExecPaths=.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "systemd/internal.h"

/* ---- what stops a preload ------------------------------------------------------------ */

/* The paths of the unit's ExecStart= commands, one per call (n-th). */
static bool exec_start(const unit_t *u, int n, char *path, size_t plen, char *argv, size_t alen)
{
	char v[8192];
	if (!unit_prop_nth(u->show, "ExecStart", n, v, sizeof v))
		return false;
	const char *p = strstr(v, "path="), *a = strstr(v, "argv[]=");
	if (p == NULL)
		return false;
	p += 5;
	snprintf(path, plen, "%.*s", (int)strcspn(p, " ;"), p);
	argv[0] = 0;
	if (a) {
		a += 7;
		const char *end = strstr(a, " ; ");
		snprintf(argv, alen, "%.*s", (int)(end ? end - a : (long)strlen(a)), a);
	}
	return true;
}


int sd_refuse(const unit_t *u, const char *why, const char *fix)
{
	return cli_err(HC_EXIT_FAILED, "systemd enable %s: %s; %s", u->name, why, fix);
}

int sd_check_exec(const unit_t *u, plan_t *pl)
{
	char path[PATH_MAX], argv[4096], root[PATH_MAX], full[PATH_MAX * 2], why[2 * PATH_MAX + 256];
	unit_prop(u, "RootDirectory", root, sizeof root);
	bool as_user = false;
	char user[128], dyn[16];
	unit_prop(u, "User", user, sizeof user);
	unit_prop(u, "DynamicUser", dyn, sizeof dyn);
	as_user = (user[0] && strcmp(user, "root") && strcmp(user, "0")) || !strcmp(dyn, "yes");
	for (int i = 0; exec_start(u, i, path, sizeof path, argv, sizeof argv); i++) {
		snprintf(full, sizeof full, "%s%s", root, path);
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		if (!strcmp(base, "pg_ctlcluster")) {
			pl->pg = true;
			continue;
		}
		if (cli_elf_static(full) == 1) {
			snprintf(why, sizeof why,
			    "ExecStart %s is statically linked: no dynamic loader runs, "
			    "so nothing is preloaded",
			    path);
			return sd_refuse(u, why, "a static program cannot be profiled with the library");
		}
		const char *sec = cli_program_secure(full);
		if (sec && as_user) {
			snprintf(why, sizeof why,
			    "ExecStart %s is %s and the unit runs it as another user: "
			    "the dynamic loader ignores LD_PRELOAD in secure execution",
			    path, sec);
			return sd_refuse(u, why, "run it without that privilege, or as its owner");
		}
		/* programs that start their child with an environment of their own */
		char first[256] = "";
		sscanf(argv, "%255s", first);
		if ((!strcmp(base, "env") &&
		        (strstr(argv, " -i") || strstr(argv, " --ignore-environment") || strstr(argv, " - "))) ||
		    !strcmp(base, "sudo") || !strcmp(base, "su") ||
		    (!strcmp(base, "runuser") &&
		        (strstr(argv, " -l") || strstr(argv, " --login") || strstr(argv, " - ")))) {
			snprintf(why, sizeof why,
			    "ExecStart (%s) starts the service with an environment of "
			    "its own, so LD_PRELOAD would not reach it",
			    argv);
			return sd_refuse(u, why,
			    "set LD_PRELOAD and HEAPCTL_CONF in the command line itself "
			    "(for env -i: env -i LD_PRELOAD=... HEAPCTL_CONF=... PROGRAM), or run the program "
			    "directly from ExecStart=");
		}
	}
	return 0;
}

/* A unit whose ExecStart runs no program of its own (none, or true(1)):
 * Debian's postgresql.service is a oneshot /bin/true that stays "active
 * (exited)" so that starting and stopping it reaches the clusters' units.
 * A preload there loads into nothing, so it is refused, naming the
 * services it groups (ConsistsOf=: theirs PartOf= it; Wants=, Requires=),
 * which run the programs. */
int sd_check_umbrella(const unit_t *u)
{
	char path[PATH_MAX], argv[4096], ran[PATH_MAX] = "";
	for (int i = 0; exec_start(u, i, path, sizeof path, argv, sizeof argv); i++) {
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		if (strcmp(base, "true") != 0)
			return 0;
		snprintf(ran, sizeof ran, "%s", path);
	}
	char members[1024] = "", v[4096], type[32], remain[16], why[PATH_MAX + 256], fix[1536];
	static const char *const rel[] = { "ConsistsOf", "Wants", "Requires", "BindsTo" };
	for (unsigned r = 0; r < sizeof rel / sizeof rel[0]; r++) {
		char *save = NULL;
		unit_prop(u, rel[r], v, sizeof v);
		for (char *t = strtok_r(v, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
			size_t l = strlen(t), ml = strlen(members);
			if (l < 9 || strcmp(t + l - 8, ".service") != 0 || !strcmp(t, u->name))
				continue;
			char padded[300];
			snprintf(padded, sizeof padded, " %s,", t);
			char have[1100];
			snprintf(have, sizeof have, " %s,", members);
			if (strstr(have, padded) == NULL && ml + l + 3 < sizeof members)
				snprintf(members + ml, sizeof members - ml, "%s%s", ml ? ", " : "", t);
		}
	}
	unit_prop(u, "Type", type, sizeof type);
	unit_prop(u, "RemainAfterExit", remain, sizeof remain);
	if (ran[0])
		snprintf(why, sizeof why,
		    "its ExecStart runs %s, no program of its own (Type=%s, "
		    "RemainAfterExit=%s): a preload there would load into nothing",
		    ran, type, remain);
	else
		snprintf(why, sizeof why, "it has no ExecStart, so no program of its own to preload into");
	if (members[0]) {
		char first[300];
		snprintf(first, sizeof first, "%.*s", (int)strcspn(members, ","), members);
		snprintf(fix, sizeof fix, "the work is done by %s: heapctl systemd enable %s", members, first);
	} else {
		snprintf(fix, sizeof fix, "enable the unit that runs the service's program");
	}
	return sd_refuse(u, why, fix);
}

int sd_check_hardening(const unit_t *u, plan_t *pl)
{
	char v[4096], hit[PATH_MAX], why[4 * PATH_MAX], fix[3 * PATH_MAX];
	if (sd_list_covers(unit_prop(u, "InaccessiblePaths", v, sizeof v), pl->lib, hit, sizeof hit)) {
		snprintf(why, sizeof why, "InaccessiblePaths=%s hides %s from it", hit, pl->lib);
		snprintf(fix, sizeof fix,
		    "install the library outside %s (make install PREFIX=...) and "
		    "give it with HEAPCTL_LIB",
		    hit);
		return sd_refuse(u, why, fix);
	}
	if (sd_list_covers(unit_prop(u, "TemporaryFileSystem", v, sizeof v), pl->lib, hit, sizeof hit)) {
		snprintf(why, sizeof why, "TemporaryFileSystem=%s hides %s from it", hit, pl->lib);
		return sd_refuse(u, why, "install the library elsewhere and give it with HEAPCTL_LIB");
	}
	unit_prop(u, "ProtectHome", v, sizeof v);
	if ((!strcmp(v, "yes") || !strcmp(v, "tmpfs")) &&
	    (sd_under(pl->lib, "/home") || sd_under(pl->lib, "/root") || sd_under(pl->lib, "/run/user"))) {
		snprintf(why, sizeof why, "ProtectHome=%s hides %s from it", v, pl->lib);
		return sd_refuse(u, why,
		    "install the library outside /home and /root (make install) and "
		    "give it with HEAPCTL_LIB");
	}
	char root[PATH_MAX], img[PATH_MAX];
	unit_prop(u, "RootImage", img, sizeof img);
	if (img[0])
		return sd_refuse(u, "it runs from RootImage=, which heapctl cannot look into",
		    "install the library into the image and give its path with HEAPCTL_LIB");
	unit_prop(u, "RootDirectory", root, sizeof root);
	if (root[0]) {
		struct stat st;
		char inside[2 * PATH_MAX];
		snprintf(inside, sizeof inside, "%s%s", root, pl->lib);
		if (stat(inside, &st) != 0) {
			snprintf(why, sizeof why, "it runs in RootDirectory=%s, where %s does not exist", root,
			    pl->lib);
			snprintf(fix, sizeof fix, "install it there too: make install DESTDIR=%s", root);
			return sd_refuse(u, why, fix);
		}
	}
	if (sd_list_covers(unit_prop(u, "NoExecPaths", v, sizeof v), pl->libdir, hit, sizeof hit) &&
	    !sd_list_covers(unit_prop(u, "ExecPaths", v, sizeof v), pl->lib, hit, sizeof hit))
		pl->add_execpaths = true;
	unit_prop(u, "UnsetEnvironment", v, sizeof v);
	if (strstr(v, "LD_PRELOAD") || strstr(v, "HEAPCTL_CONF"))
		return sd_refuse(u, "its UnsetEnvironment= removes LD_PRELOAD or HEAPCTL_CONF",
		    "take them out of UnsetEnvironment=");
	/* EnvironmentFile= is read after Environment= and wins */
	unit_prop(u, "EnvironmentFiles", v, sizeof v);
	char *save = NULL;
	for (char *f = strtok_r(v, " ", &save); f; f = strtok_r(NULL, " ", &save)) {
		if (f[0] != '/')
			continue;
		char text[65536];
		if (hc_shm_read_file(f, text, sizeof text) <= 0)
			continue;
		for (char *l = text; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			l += strspn(l, " \t");
			if (!strncmp(l, "export ", 7))
				l += 7;
			if (!strncmp(l, "LD_PRELOAD=", 11) || !strncmp(l, "HEAPCTL_CONF=", 13)) {
				snprintf(why, sizeof why,
				    "its EnvironmentFile %s sets %.*s, which would override "
				    "the drop-in",
				    f, (int)strcspn(l, "="), l);
				snprintf(fix, sizeof fix, "add %s to the LD_PRELOAD in %s yourself", pl->lib, f);
				return sd_refuse(u, why, fix);
			}
		}
	}
	return 0;
}
