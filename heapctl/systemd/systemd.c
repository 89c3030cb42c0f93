/*
 * heapctl/systemd/systemd.c - `heapctl systemd enable|disable|status`: run a
 * service under libheapctl.so with one command, whatever its hardening.
 *
 * enable reads the unit's effective settings (`systemctl show`) and writes
 * one drop-in, UNIT.d/50-heapctl.conf, that
 *   - puts the library first in LD_PRELOAD, keeping a preload the unit has
 *     (the first malloc in the search order is the one the process uses);
 *   - switches sampling on from the start (--off: not), with the caller's
 *     --conf after, in HEAPCTL_CONF (it wins over a MALLOC_CONF the unit
 *     may set for a jemalloc it links);
 *   - gives dumps a directory that survives the unit and that its user can
 *     write under any sandbox: StateDirectory=heapctl/%N by default (created
 *     by systemd with the service's owner, also for DynamicUser=, writable
 *     under ProtectSystem=strict, never a PrivateTmp= directory);
 *   - adds the library's directory to ExecPaths= where the unit forbids
 *     executing from it (redis-server.service: NoExecPaths=/).
 * It refuses, with the reason and the fix, where the preload cannot work:
 * a statically linked or secure-execution ExecStart, the library hidden
 * from the unit (InaccessiblePaths=, ProtectHome=, RootDirectory=), an
 * EnvironmentFile= or UnsetEnvironment= that would undo LD_PRELOAD, or a
 * program that rebuilds the environment of what it starts.  pg_ctlcluster
 * (postgresql@.service) is one of those: for it the two variables go into
 * /etc/postgresql/VERSION/CLUSTER/environment, which it reads.
 *
 * Every file enable writes or changes is recorded in the drop-in itself
 * (# heapctl-... comment lines), so disable removes exactly that.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <pwd.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/json.h"

#define DROPIN "50-heapctl.conf"
#define MARK   "# Written by `heapctl systemd enable"

typedef struct {
	bool user;                  /* --user: the caller's service manager    */
	char name[256];             /* foo.service, foo@.service, foo@x.service */
	char probe[300];            /* a name systemctl show accepts            */
	bool tmpl;                  /* foo@.service                             */
	char *show;                 /* systemctl show output                    */
} unit_t;

/* ---- systemctl ------------------------------------------------------------------ */

static int systemctl(const unit_t *u, char *out, size_t outlen, const char *a1, const char *a2,
    const char *a3, const char *a4)
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
		return cli_err(HC_EXIT_FAILED, "systemctl%s %s%s%s failed: %s", u->user ? " --user" : "",
		    a1, a2 ? " " : "", a2 ? a2 : "", err[0] ? err : "(no message)");
	}
	return 0;
}

/* The value of one "Key=value" line (the n-th with that key), or NULL. */
static const char *prop_nth(const char *show, const char *key, int n, char *out, size_t len)
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

static const char *prop(const unit_t *u, const char *key, char *out, size_t len)
{
	if (!prop_nth(u->show, key, 0, out, len) && len)
		out[0] = 0;
	return out;
}

static int unit_load(unit_t *u, const char *arg, bool user)
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
	int code = systemctl(u, u->show, 1 << 16, "show", u->probe, "--timestamp=unix", NULL);
	if (code)
		return code;
	char v[64];
	if (strcmp(prop(u, "LoadState", v, sizeof v), "loaded") != 0)
		return cli_err(HC_EXIT_FAILED, "systemd: no unit %s (%s)", u->name, v[0] ? v : "not found");
	return 0;
}

/* Drop-in directory and file: /etc/systemd/system/UNIT.d/50-heapctl.conf,
 * or the user manager's configuration directory with --user. */
static int dropin_path(const unit_t *u, char *dir, size_t dlen, char *file, size_t flen)
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

/* ---- paths ------------------------------------------------------------------------- */

/* Does one of the space-separated paths of a list setting hold path?
 * Entries may carry systemd's "-" and "+" prefixes. */
static const char *list_covers(const char *list, const char *path, char *hit, size_t len)
{
	char copy[4096], *save = NULL;
	snprintf(copy, sizeof copy, "%s", list);
	for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		while (*t == '-' || *t == '+')
			t++;
		size_t l = strlen(t);
		while (l > 1 && t[l - 1] == '/')
			t[--l] = 0;
		if (!strcmp(t, "/") || (strncmp(path, t, l) == 0 && (path[l] == '/' || path[l] == 0))) {
			snprintf(hit, len, "%s", t);
			return hit;
		}
	}
	return NULL;
}

static bool under(const char *path, const char *dir)
{
	size_t l = strlen(dir);
	return strncmp(path, dir, l) == 0 && (path[l] == '/' || path[l] == 0);
}

/* Systemd expands %-specifiers in Environment= and directory settings: a
 * literal % from the caller is written %%. */
static void escape_pct(const char *in, char *out, size_t len)
{
	size_t o = 0;
	for (; *in && o + 3 < len; in++) {
		if (*in == '%')
			out[o++] = '%';
		out[o++] = *in;
	}
	out[o] = 0;
}

/* Write a whole file atomically: a temporary name in its directory, then
 * rename.  mode as given; the owner is ours. */
static int write_atomic(const char *path, const char *text, mode_t mode)
{
	char tmp[PATH_MAX + 32];
	snprintf(tmp, sizeof tmp, "%s.heapctl.%ld.tmp", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return errno;
	size_t n = strlen(text);
	int e = write(fd, text, n) == (ssize_t)n ? 0 : (errno ? errno : EIO);
	if (fsync(fd) != 0 && !e)
		e = errno;
	if (fchmod(fd, mode) != 0 && !e)
		e = errno;
	close(fd);
	if (!e && rename(tmp, path) != 0)
		e = errno;
	if (e)
		unlink(tmp);
	return e;
}

static int mkdirs(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			return errno;
		*s = '/';
	}
	if (mkdir(p, mode) != 0 && errno != EEXIST)
		return errno;
	return 0;
}

/* ---- what stops a preload ------------------------------------------------------------ */

/* The paths of the unit's ExecStart= commands, one per call (n-th). */
static bool exec_start(const unit_t *u, int n, char *path, size_t plen, char *argv, size_t alen)
{
	char v[8192];
	if (!prop_nth(u->show, "ExecStart", n, v, sizeof v))
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

/* Paths that go into a drop-in are bounded here (and checked), so that the
 * buffers below hold them whole with every % doubled. */
#define PMAX 1024

typedef struct {
	char lib[PATH_MAX], libdir[PATH_MAX];
	bool pg;                            /* pg_ctlcluster: env file           */
	bool add_execpaths;
	char conf[2048];                    /* --conf                            */
	bool off, secure;                   /* --off, --secure                  */
	char dump_dir[PMAX];                /* --dump-dir, or empty              */
	char preload[4096];                 /* LD_PRELOAD for the drop-in        */
} plan_t;

static int refuse(const unit_t *u, const char *why, const char *fix)
{
	return cli_err(HC_EXIT_FAILED, "systemd enable %s: %s; %s", u->name, why, fix);
}

static int check_exec(const unit_t *u, plan_t *pl)
{
	char path[PATH_MAX], argv[4096], root[PATH_MAX], full[PATH_MAX * 2], why[2 * PATH_MAX + 256];
	prop(u, "RootDirectory", root, sizeof root);
	bool as_user = false;
	char user[128], dyn[16];
	prop(u, "User", user, sizeof user);
	prop(u, "DynamicUser", dyn, sizeof dyn);
	as_user = (user[0] && strcmp(user, "root") && strcmp(user, "0")) || !strcmp(dyn, "yes");
	for (int i = 0; exec_start(u, i, path, sizeof path, argv, sizeof argv); i++) {
		snprintf(full, sizeof full, "%s%s", root, path);
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		if (!strcmp(base, "pg_ctlcluster")) {
			pl->pg = true;
			continue;
		}
		if (cli_elf_static(full) == 1) {
			snprintf(why, sizeof why, "ExecStart %s is statically linked: no dynamic loader runs, "
			    "so nothing is preloaded", path);
			return refuse(u, why, "a static program cannot be profiled with the library");
		}
		const char *sec = cli_program_secure(full);
		if (sec && as_user) {
			snprintf(why, sizeof why, "ExecStart %s is %s and the unit runs it as another user: "
			    "the dynamic loader ignores LD_PRELOAD in secure execution", path, sec);
			return refuse(u, why, "run it without that privilege, or as its owner");
		}
		/* programs that start their child with an environment of their own */
		char first[256] = "";
		sscanf(argv, "%255s", first);
		if ((!strcmp(base, "env") && (strstr(argv, " -i") || strstr(argv, " --ignore-environment") ||
		    strstr(argv, " - "))) || !strcmp(base, "sudo") || !strcmp(base, "su") ||
		    (!strcmp(base, "runuser") && (strstr(argv, " -l") || strstr(argv, " --login") ||
		    strstr(argv, " - ")))) {
			snprintf(why, sizeof why, "ExecStart (%s) starts the service with an environment of "
			    "its own, so LD_PRELOAD would not reach it", argv);
			return refuse(u, why, "set LD_PRELOAD and HEAPCTL_CONF in the command line itself "
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
static int check_umbrella(const unit_t *u)
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
		prop(u, rel[r], v, sizeof v);
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
	prop(u, "Type", type, sizeof type);
	prop(u, "RemainAfterExit", remain, sizeof remain);
	if (ran[0])
		snprintf(why, sizeof why, "its ExecStart runs %s, no program of its own (Type=%s, "
		    "RemainAfterExit=%s): a preload there would load into nothing", ran, type, remain);
	else
		snprintf(why, sizeof why, "it has no ExecStart, so no program of its own to preload into");
	if (members[0]) {
		char first[300];
		snprintf(first, sizeof first, "%.*s", (int)strcspn(members, ","), members);
		snprintf(fix, sizeof fix, "the work is done by %s: heapctl systemd enable %s", members, first);
	} else {
		snprintf(fix, sizeof fix, "enable the unit that runs the service's program");
	}
	return refuse(u, why, fix);
}

static int check_hardening(const unit_t *u, plan_t *pl)
{
	char v[4096], hit[PATH_MAX], why[4 * PATH_MAX], fix[3 * PATH_MAX];
	if (list_covers(prop(u, "InaccessiblePaths", v, sizeof v), pl->lib, hit, sizeof hit)) {
		snprintf(why, sizeof why, "InaccessiblePaths=%s hides %s from it", hit, pl->lib);
		snprintf(fix, sizeof fix, "install the library outside %s (make install PREFIX=...) and "
		    "give it with HEAPCTL_LIB", hit);
		return refuse(u, why, fix);
	}
	if (list_covers(prop(u, "TemporaryFileSystem", v, sizeof v), pl->lib, hit, sizeof hit)) {
		snprintf(why, sizeof why, "TemporaryFileSystem=%s hides %s from it", hit, pl->lib);
		return refuse(u, why, "install the library elsewhere and give it with HEAPCTL_LIB");
	}
	prop(u, "ProtectHome", v, sizeof v);
	if ((!strcmp(v, "yes") || !strcmp(v, "tmpfs")) && (under(pl->lib, "/home") ||
	    under(pl->lib, "/root") || under(pl->lib, "/run/user"))) {
		snprintf(why, sizeof why, "ProtectHome=%s hides %s from it", v, pl->lib);
		return refuse(u, why, "install the library outside /home and /root (make install) and "
		    "give it with HEAPCTL_LIB");
	}
	char root[PATH_MAX], img[PATH_MAX];
	prop(u, "RootImage", img, sizeof img);
	if (img[0])
		return refuse(u, "it runs from RootImage=, which heapctl cannot look into",
		    "install the library into the image and give its path with HEAPCTL_LIB");
	prop(u, "RootDirectory", root, sizeof root);
	if (root[0]) {
		struct stat st;
		char inside[2 * PATH_MAX];
		snprintf(inside, sizeof inside, "%s%s", root, pl->lib);
		if (stat(inside, &st) != 0) {
			snprintf(why, sizeof why, "it runs in RootDirectory=%s, where %s does not exist", root,
			    pl->lib);
			snprintf(fix, sizeof fix, "install it there too: make install DESTDIR=%s", root);
			return refuse(u, why, fix);
		}
	}
	if (list_covers(prop(u, "NoExecPaths", v, sizeof v), pl->libdir, hit, sizeof hit) &&
	    !list_covers(prop(u, "ExecPaths", v, sizeof v), pl->lib, hit, sizeof hit))
		pl->add_execpaths = true;
	prop(u, "UnsetEnvironment", v, sizeof v);
	if (strstr(v, "LD_PRELOAD") || strstr(v, "HEAPCTL_CONF"))
		return refuse(u, "its UnsetEnvironment= removes LD_PRELOAD or HEAPCTL_CONF",
		    "take them out of UnsetEnvironment=");
	/* EnvironmentFile= is read after Environment= and wins */
	prop(u, "EnvironmentFiles", v, sizeof v);
	char *save = NULL;
	for (char *f = strtok_r(v, " ", &save); f; f = strtok_r(NULL, " ", &save)) {
		if (f[0] != '/')
			continue;
		char text[65536];
		if (cli_read_file(f, text, sizeof text) <= 0)
			continue;
		for (char *l = text; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			l += strspn(l, " \t");
			if (!strncmp(l, "export ", 7))
				l += 7;
			if (!strncmp(l, "LD_PRELOAD=", 11) || !strncmp(l, "HEAPCTL_CONF=", 13)) {
				snprintf(why, sizeof why, "its EnvironmentFile %s sets %.*s, which would override "
				    "the drop-in", f, (int)strcspn(l, "="), l);
				snprintf(fix, sizeof fix, "add %s to the LD_PRELOAD in %s yourself", pl->lib, f);
				return refuse(u, why, fix);
			}
		}
	}
	return 0;
}

/* ---- the dump directory -------------------------------------------------------------- */

typedef struct {
	char setting[2 * PMAX + 64];        /* a drop-in line, or empty          */
	char prefix[2 * PMAX + 64];         /* prof_prefix, with specifiers      */
	char created[PMAX];                 /* a directory heapctl made, or empty */
	char shown[PMAX + 64];              /* where to say dumps go             */
} dumpdir_t;

static int plan_dump_dir(const unit_t *u, const plan_t *pl, dumpdir_t *dd)
{
	memset(dd, 0, sizeof *dd);
	char ptmp[16], dyn[16], user[128], group[128], why[PMAX + 256];
	prop(u, "PrivateTmp", ptmp, sizeof ptmp);
	prop(u, "DynamicUser", dyn, sizeof dyn);
	prop(u, "User", user, sizeof user);
	prop(u, "Group", group, sizeof group);
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
		int e = mkdirs(d, 0700);
		if (e)
			return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot create %s: %s", u->name, d, strerror(e));
		if (!existed)
			snprintf(dd->created, sizeof dd->created, "%s", d);
		char esc[2 * PMAX];
		escape_pct(d, esc, sizeof esc);
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
	escape_pct(d, esc, sizeof esc);
	snprintf(dd->prefix, sizeof dd->prefix, "%s/%%N", esc);
	snprintf(dd->shown, sizeof dd->shown, "%s", d);
	if (!strcmp(ptmp, "yes") && (under(d, "/tmp") || under(d, "/var/tmp"))) {
		snprintf(why, sizeof why, "--dump-dir %s is in the unit's PrivateTmp=, which the host cannot "
		    "see at that path and which systemd deletes when the unit stops, final dumps with it", d);
		return refuse(u, why, "choose a directory under /var/lib (or leave --dump-dir out)");
	}
	/* systemd creates these, with the service's owner, also for a dynamic user */
	static const struct { const char *base, *setting; } managed[] = {
		{ "/var/lib/", "StateDirectory" }, { "/var/cache/", "CacheDirectory" },
		{ "/var/log/", "LogsDirectory" },
	};
	for (unsigned i = 0; i < 3; i++) {
		if (strncmp(d, managed[i].base, strlen(managed[i].base)) == 0 && d[strlen(managed[i].base)]) {
			escape_pct(d + strlen(managed[i].base), esc, sizeof esc);
			snprintf(dd->setting, sizeof dd->setting, "%s=%s", managed[i].setting, esc);
			return 0;
		}
	}
	if (!strcmp(dyn, "yes")) {
		snprintf(why, sizeof why, "it runs as a dynamic user (DynamicUser=yes), which cannot own "
		    "%s", d);
		return refuse(u, why, "choose a directory under /var/lib, /var/cache or /var/log: systemd "
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
	int e = mkdirs(d, 0750);
	if (e)
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot create %s: %s", u->name, d, strerror(e));
	if (!existed) {
		if (chown(d, uid, gid) != 0)
			return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot give %s to %s: %s", u->name, d,
			    user[0] ? user : "root", strerror(errno));
		snprintf(dd->created, sizeof dd->created, "%s", d);
	}
	escape_pct(d, esc, sizeof esc);
	snprintf(dd->setting, sizeof dd->setting, "ReadWritePaths=-%s", esc);
	return 0;
}

/* ---- pg_ctlcluster: /etc/postgresql/VERSION/CLUSTER/environment ------------------------ */

/* The clusters an instance or the template stands for. */
static int pg_clusters(const unit_t *u, glob_t *g)
{
	char pat[PATH_MAX];
	const char *at = strchr(u->name, '@');
	if (u->tmpl) {
		snprintf(pat, sizeof pat, "/etc/postgresql/*/*/environment");
	} else {
		/* instance "15-main": version 15, cluster main */
		char inst[256];
		snprintf(inst, sizeof inst, "%.*s", (int)(strlen(at + 1) - 8), at + 1);
		char *dash = strchr(inst, '-');
		if (dash == NULL)
			return cli_err(HC_EXIT_USAGE, "systemd enable %s: the instance is not VERSION-CLUSTER",
			    u->name);
		*dash = 0;
		snprintf(pat, sizeof pat, "/etc/postgresql/%s/%s/environment", inst, dash + 1);
	}
	if (glob(pat, 0, NULL, g) != 0)
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: no cluster environment file %s", u->name, pat);
	return 0;
}

#define PG_MARK "# heapctl systemd enable: the two lines below (heapctl systemd disable removes them)"

static int pg_unwrite_env(const char *file);

/* The settings go after PG_MARK at the end of the cluster's environment
 * file.  Enabled again: the same lines are left as they are (the file not
 * rewritten), other ones (a new --conf) replace them. */
static int pg_write_env(const unit_t *u, const plan_t *pl, const char *file, char *record,
    size_t reclen)
{
	char text[65536], dir[PMAX + 64], cl[PATH_MAX], data[PATH_MAX + 64], block[8192];
	/* the cluster's owner writes the dumps: its own directory, not a
	 * StateDirectory= (pg_ctlcluster runs as root and drops privileges) */
	snprintf(cl, sizeof cl, "%s", file);
	*strrchr(cl, '/') = 0;
	const char *cluster = strrchr(cl, '/') + 1;
	*strrchr(cl, '/') = 0;
	const char *version = strrchr(cl, '/') + 1;
	struct stat st;
	snprintf(data, sizeof data, "/etc/postgresql/%s/%s/postgresql.conf", version, cluster);
	if (stat(data, &st) != 0)
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: %s: %s", u->name, data, strerror(errno));
	if (pl->dump_dir[0])
		snprintf(dir, sizeof dir, "%s", pl->dump_dir);
	else
		snprintf(dir, sizeof dir, "/var/lib/heapctl/postgresql@%.200s-%.200s", version, cluster);
	if (strchr(pl->lib, '\'') || strchr(dir, '\'') || strchr(pl->conf, '\''))
		return cli_err(HC_EXIT_USAGE, "systemd enable %s: a quote in a path or --conf cannot go into "
		    "%s", u->name, file);
	snprintf(block, sizeof block, "%s\nLD_PRELOAD = '%s'\nHEAPCTL_CONF = 'prof:true,prof_active:%s,"
	    "prof_prefix:%s/postgres%s%s'\n", PG_MARK, pl->lib, pl->off ? "false" : "true", dir,
	    pl->conf[0] ? "," : "", pl->conf);
	ssize_t n = cli_read_file(file, text, sizeof text);
	if (n < 0)
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot read %s: %s", u->name, file, strerror(errno));
	bool same = strstr(text, block) != NULL;
	int e = 0;
	if (!same && strstr(text, PG_MARK) && ((e = pg_unwrite_env(file)) != 0 ||
	    cli_read_file(file, text, sizeof text) < 0))
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot take the earlier settings out of "
		    "%s: %s", u->name, file, strerror(e ? e : errno));
	for (char *l = text; !same && l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *t = l + strspn(l, " \t");
		if (!strncmp(t, "LD_PRELOAD", 10) || !strncmp(t, "HEAPCTL_CONF", 12))
			return cli_err(HC_EXIT_FAILED, "systemd enable %s: %s already sets %.*s; add %s to it "
			    "yourself", u->name, file, (int)strcspn(t, " ="), t, pl->lib);
	}
	bool existed = access(dir, F_OK) == 0;
	e = mkdirs(dir, 0750);
	if (e == 0 && !existed && chown(dir, st.st_uid, st.st_gid) != 0)
		e = errno;
	if (e)
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot make %s for the cluster's owner: %s",
		    u->name, dir, strerror(e));
	if (!same) {
		size_t len = strlen(text);
		snprintf(text + len, sizeof text - len, "%s%s", len && text[len - 1] != '\n' ? "\n" : "", block);
		if ((e = write_atomic(file, text, 0644)) != 0)
			return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot write %s: %s", u->name, file,
			    strerror(e));
		(void)chown(file, st.st_uid, st.st_gid);
	}
	size_t rl = strlen(record);
	snprintf(record + rl, reclen - rl, "# heapctl-envfile: %.1024s\n# heapctl-dumps: %s%s\n", file, dir,
	    existed ? "" : " (created)");
	return 0;
}

/* Remove exactly the marker and the two lines enable wrote after it. */
static int pg_unwrite_env(const char *file)
{
	char text[65536], out[65536];
	if (cli_read_file(file, text, sizeof text) < 0)
		return errno == ENOENT ? 0 : errno;
	char *m = strstr(text, PG_MARK);
	if (m == NULL)
		return 0;
	char *end = m;
	for (int i = 0; i < 3 && end; i++)
		end = strchr(end, '\n') ? strchr(end, '\n') + 1 : NULL;
	snprintf(out, sizeof out, "%.*s%s", (int)(m - text), text, end ? end : "");
	struct stat st;
	if (stat(file, &st) != 0)
		return errno;
	int e = write_atomic(file, out, st.st_mode & 07777);
	if (e == 0)
		(void)chown(file, st.st_uid, st.st_gid);
	return e;
}

/* Remove the drop-in enable wrote and what it lists (lines in a cluster's
 * environment file), and reload systemd; where dumps went in dumps. */
static int dropin_remove(const unit_t *u, const char *verb, const char *dir, const char *file,
    char *dumps, size_t dlen)
{
	char text[16384];
	if (cli_read_file(file, text, sizeof text) < 0 || strncmp(text, MARK, strlen(MARK)) != 0)
		return cli_err(HC_EXIT_FAILED, "systemd %s %s: not enabled (no %s written by heapctl)", verb,
		    u->name, file);
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char path[PATH_MAX];
		if (sscanf(l, "# heapctl-envfile: %4095[^\n]", path) == 1) {
			int e = pg_unwrite_env(path);
			if (e)
				return cli_err(HC_EXIT_FAILED, "systemd %s %s: cannot restore %s: %s", verb, u->name,
				    path, strerror(e));
		}
		if (sscanf(l, "# heapctl-dumps: %4095[^\n]", path) == 1)
			snprintf(dumps, dlen, "%s", path);
	}
	if (unlink(file) != 0)
		return cli_err(HC_EXIT_FAILED, "systemd %s %s: cannot remove %s: %s", verb, u->name, file,
		    strerror(errno));
	rmdir(dir);               /* only if nothing else is in it */
	return systemctl(u, NULL, 0, "daemon-reload", NULL, NULL, NULL);
}

/* ---- the processes of a unit --------------------------------------------------------- */

static int unit_pids(const unit_t *u, const char *name, int *pids, int max)
{
	char out[4096], cg[PATH_MAX], path[PATH_MAX + 64];
	unit_t tmp = *u;
	snprintf(tmp.probe, sizeof tmp.probe, "%s", name);
	if (systemctl(&tmp, out, sizeof out, "show", name, "-p", "ControlGroup") != 0)
		return 0;
	if (!prop_nth(out, "ControlGroup", 0, cg, sizeof cg) || !cg[0])
		return 0;
	/* the unified hierarchy, or under a hybrid layout its own mount or the
	 * name=systemd one */
	static const char *const roots[] = { "", "/unified", "/systemd" };
	char text[65536];
	ssize_t got = -1;
	for (unsigned i = 0; i < 3 && got <= 0; i++) {
		snprintf(path, sizeof path, "/sys/fs/cgroup%s%s/cgroup.procs", roots[i], cg);
		got = cli_read_file(path, text, sizeof text);
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
static int unit_procs(const unit_t *u, const char *name, int main_pid, int *pids, int max)
{
	int got[256], n = unit_pids(u, name, got, 256), k = 0;
	if (main_pid && k < max)
		pids[k++] = main_pid;
	for (int i = 0; i < n && k < max; i++)
		if (got[i] != main_pid)
			pids[k++] = got[i];
	return k;
}

/* How many of the unit's processes map the library; *n: of how many. */
static int unit_loaded(const unit_t *u, const char *name, int *n)
{
	int pids[256], with = 0;
	bool readable;
	*n = unit_pids(u, name, pids, 256);
	for (int i = 0; i < *n; i++)
		with += cli_proc_maps_library(pids[i], NULL, 0, &readable);
	return with;
}

/* When a process started, in ns of CLOCK_REALTIME (0: unknown): its start
 * in clock ticks since boot (/proc/PID/stat, field 22, CLOCK_BOOTTIME),
 * plus when the system booted.  10 ms precise, where /proc/stat's btime is
 * whole seconds: a drop-in written and the unit restarted within the same
 * second are told apart. */
static int64_t proc_started_ns(int pid)
{
	char line[1024], path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if (cli_read_file(path, line, sizeof line) <= 0)
		return 0;
	char *p = strrchr(line, ')');
	for (int f = 2; p && *p && f < 22; p++)
		if (*p == ' ')
			f++;
	if (p == NULL || *p == 0)
		return 0;
	unsigned long long ticks = strtoull(p, NULL, 10);
	struct timespec rt, bt;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_BOOTTIME, &bt);
	int64_t boot = ((int64_t)rt.tv_sec - bt.tv_sec) * 1000000000 + (rt.tv_nsec - bt.tv_nsec);
	return boot + (int64_t)(ticks * 1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
}

/* What systemd says of a unit after a start: its main process, whether its
 * Condition= checks held, its state and how its main process last ended. */
typedef struct {
	int main_pid;
	char active[32], sub[32], result[32], cond[8], status[16];
	bool cond_checked;          /* systemd has this unit's ConditionResult */
} unit_state_t;

static int unit_state(const unit_t *u, const char *name, unit_state_t *s)
{
	char out[4096], v[64];
	memset(s, 0, sizeof *s);
	int code = systemctl(u, out, sizeof out, "show", name, "-p",
	    "MainPID,ConditionResult,ConditionTimestampMonotonic,ActiveState,SubState,Result,ExecMainStatus");
	if (code)
		return code;
	s->main_pid = atoi(prop_nth(out, "MainPID", 0, v, sizeof v) ? v : "0");
	prop_nth(out, "ActiveState", 0, s->active, sizeof s->active);
	prop_nth(out, "SubState", 0, s->sub, sizeof s->sub);
	prop_nth(out, "Result", 0, s->result, sizeof s->result);
	prop_nth(out, "ConditionResult", 0, s->cond, sizeof s->cond);
	prop_nth(out, "ExecMainStatus", 0, s->status, sizeof s->status);
	/* an inactive unit nothing refers to is unloaded; loaded again to
	 * answer, it has ConditionResult=no and no time it was checked */
	s->cond_checked = strtoull(prop_nth(out, "ConditionTimestampMonotonic", 0, v, sizeof v) ? v : "0",
	    NULL, 10) != 0;
	return 0;
}

/* Wait (10 s at most) until the unit has a main process, or is plainly
 * down: inactive or failed (a Condition= not met leaves it inactive at
 * once), waiting to be restarted after a crash (Restart=), or a oneshot
 * that has exited.  true: it is up, s->main_pid is its process. */
static bool wait_up(const unit_t *u, const char *name, unit_state_t *s)
{
	for (int i = 0; i < 100; i++) {
		if (unit_state(u, name, s) != 0)
			return false;
		if (s->main_pid)
			return true;
		if (!strcmp(s->active, "inactive") || !strcmp(s->active, "failed") ||
		    !strcmp(s->sub, "auto-restart") || !strcmp(s->sub, "exited"))
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
	if (unit_state(u, name, s) != 0)
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
		int n, with = unit_loaded(u, name, &n);
		printf("%s: main process %d runs with libheapctl.so (%d of the unit's %d processes)\n",
		    name, main_pid, with, n);
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
static time_t restarted_at;        /* the last restart_quiet's, for the journal */

static void restart_quiet(const unit_t *u, const char *name)
{
	restarted_at = time(NULL);
	char out[1024], err[1024];
	char *argv[] = { "systemctl", u->user ? "--user" : "--system", "restart", (char *)name, NULL };
	(void)cli_spawn(argv, NULL, out, sizeof out, err, sizeof err, 120000);
}

/* Restart the unit (a template: each running instance) and verify it.
 * An instance that did not come up is named in downed, its state in s. */
static int restart(cli_args_t *a, const unit_t *u, char *downed, size_t dlen, unit_state_t *s)
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
	int code = systemctl(u, out, sizeof out, "list-units", "--state=active", "--plain", pat);
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
static bool unmet_condition(const unit_t *u, const char *name, const unit_state_t *s, char *out,
    size_t len)
{
	char *text = malloc(1 << 16), err[256], since[32];
	snprintf(out, len, "a Condition= of the unit");
	if (text == NULL)
		return s->cond_checked;
	/* since the restart (the second it began in): an older skip is not this one */
	snprintf(since, sizeof since, "@%lld", (long long)restarted_at);
	char *jargv[] = { "journalctl", u->user ? "--user-unit" : "--unit", (char *)name, "-o", "cat",
		"--since", since, "--no-pager", NULL };
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
static int not_started(const unit_t *u, const char *dir, const char *file, const char *name,
    const unit_state_t *s, bool keep)
{
	char why[1536], cond[1024], dumps[PATH_MAX] = "", left[PATH_MAX + 128];
	if (!strcmp(s->cond, "no") && unmet_condition(u, name, s, cond, sizeof cond)) {
		snprintf(why, sizeof why, "%s did not start for a reason of its own, not the library: its "
		    "condition %s is not met (ConditionResult=no; it is %s, without a process)", name, cond,
		    s->active);
	} else if (!strcmp(s->result, "success") && strcmp(s->active, "active") != 0) {
		snprintf(why, sizeof why, "%s did not stay up, for a reason of its own: it is %s (%s), its "
		    "main process exited with status %s and Result=success, so nothing is left to carry the "
		    "library", name, s->active, s->sub, s->status[0] ? s->status : "?");
	} else if (keep) {
		snprintf(why, sizeof why, "%s did not come back after the restart: it is %s (%s), "
		    "Result=%s, exit status %s (journalctl -u %s)", name, s->active, s->sub, s->result,
		    s->status[0] ? s->status : "?", name);
	} else {
		/* was it the library?  the same start without it tells */
		unit_state_t w;
		int code = dropin_remove(u, "enable", dir, file, dumps, sizeof dumps);
		if (code)
			return code;
		restart_quiet(u, name);
		if (stays_up(u, name, &w))
			return cli_err(HC_EXIT_NOLIB, "systemd enable %s: %s failed with the library (it was %s, "
			    "Result=%s, exit status %s) and runs without it (main process %d): removed %s, and "
			    "it is restarted without the library; journalctl -u %s says why", u->name, name,
			    s->sub, s->result, s->status[0] ? s->status : "?", w.main_pid, file, name);
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: %s did not start for a reason of its own, "
		    "not the library: it fails without it too (Result=%s, exit status %s; with the library "
		    "Result=%s, status %s); removed %s (journalctl -u %s)", u->name, name, w.result,
		    w.status[0] ? w.status : "?", s->result, s->status[0] ? s->status : "?", file, name);
	}
	if (keep)
		snprintf(left, sizeof left, "kept %s (--keep)", file);
	else {
		int code = dropin_remove(u, "enable", dir, file, dumps, sizeof dumps);
		if (code)
			return code;
		snprintf(left, sizeof left, "removed %s and reloaded systemd (--keep keeps it)", file);
	}
	return cli_err(HC_EXIT_FAILED, "systemd enable %s: %s; %s", u->name, why, left);
}

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
	if (u->tmpl || unit_state(u, u->name, &s) != 0 || s.main_pid == 0 || stat(file, &st) != 0 ||
	    !cli_proc_maps_library(s.main_pid, lib, sizeof lib, &readable) || strcmp(lib, pl->lib) != 0)
		return false;
	int64_t written = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
	    started = proc_started_ns(s.main_pid);
	/* the start time is in clock ticks: 10 ms either way */
	if (started == 0 || started + 10000000 < written)
		return false;
	int n, with = unit_loaded(u, u->name, &n);
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
		    "%d processes); nothing written, nothing to restart\n", u->name, s.main_pid, file, pl->lib,
		    with, n);
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

/* ---- enable ------------------------------------------------------------------------------ */

static int do_enable(cli_args_t *a, unit_t *u, plan_t *pl, bool restart_it, bool keep)
{
	int code;
	if ((code = cli_find_library(pl->secure ? "libheapctl-secure.so" : "libheapctl.so", pl->lib,
	    sizeof pl->lib)) != 0)
		return code;
	snprintf(pl->libdir, sizeof pl->libdir, "%s", pl->lib);
	*strrchr(pl->libdir, '/') = 0;
	/* every user must be able to read it: the service's may be a dynamic one */
	struct stat st;
	char dir[PATH_MAX], file[PATH_MAX + 32];
	if (stat(pl->lib, &st) != 0 || !(st.st_mode & S_IROTH))
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: %s is not readable by every user, so "
		    "the service's user could not load it (chmod a+r)", u->name, pl->lib);
	if (strstr(pl->conf, "prof_prefix"))
		return cli_err(HC_EXIT_USAGE, "systemd enable: give the dump directory with --dump-dir, "
		    "not prof_prefix in --conf");
	if (pl->dump_dir[0] && pl->dump_dir[0] != '/')
		return cli_err(HC_EXIT_USAGE, "systemd enable: --dump-dir must be an absolute path");
	if (pl->conf[0] && (code = cli_check_conf(pl->lib, pl->conf)) != 0)
		return code;
	if ((code = check_umbrella(u)) != 0 || (code = check_exec(u, pl)) != 0 ||
	    (code = check_hardening(u, pl)) != 0)
		return code;
	if ((code = dropin_path(u, dir, sizeof dir, file, sizeof file)) != 0)
		return code;

	char env[4096], old[4096] = "", lines[32768], record[8192] = "";
	prop(u, "Environment", env, sizeof env);
	/* a preload the unit sets (not ours: a drop-in written earlier is replaced) */
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

	dumpdir_t dd = { 0 };
	size_t n = 0;
	n += (size_t)snprintf(lines + n, sizeof lines - n, MARK " %s` (heapctl %s);\n"
	    "# `heapctl systemd disable %s` removes it and what it lists below.\n[Service]\n",
	    u->name, HEAPCTL_VERSION, u->name);
	if (pl->pg) {
		/* pg_ctlcluster starts postgres with the cluster's environment file only */
		glob_t g;
		if ((code = pg_clusters(u, &g)) != 0)
			return code;
		for (size_t i = 0; i < g.gl_pathc && code == 0; i++)
			code = pg_write_env(u, pl, g.gl_pathv[i], record, sizeof record);
		globfree(&g);
		if (code)
			return code;
		n += (size_t)snprintf(lines + n, sizeof lines - n, "# ExecStart is pg_ctlcluster, which "
		    "gives postgres the environment of\n# /etc/postgresql/VERSION/CLUSTER/environment "
		    "only: LD_PRELOAD and HEAPCTL_CONF are there.\n");
	} else {
		if ((code = plan_dump_dir(u, pl, &dd)) != 0)
			return code;
		char conf[2 * PMAX + 256], esc_pre[8192], esc_conf[8192];
		snprintf(conf, sizeof conf, "prof:true,prof_active:%s,prof_prefix:%s", pl->off ? "false" : "true",
		    dd.prefix);
		escape_pct(pl->preload, esc_pre, sizeof esc_pre);
		escape_pct(pl->conf, esc_conf, sizeof esc_conf);
		n += (size_t)snprintf(lines + n, sizeof lines - n,
		    "# libheapctl.so first: the first malloc in LD_PRELOAD is the one used.\n"
		    "Environment=\"LD_PRELOAD=%s\"\n"
		    "# Sampling from the start: what is allocated before profiling is\n"
		    "# switched on is in no profile.  heapctl off PID stops it.\n"
		    "Environment=\"HEAPCTL_CONF=%s%s%s\"\n", esc_pre, conf, esc_conf[0] ? "," : "", esc_conf);
		if (dd.setting[0])
			n += (size_t)snprintf(lines + n, sizeof lines - n, "# Dumps: a directory that "
			    "survives the unit, writable under its sandbox.\n%s\n", dd.setting);
		if (pl->add_execpaths) {
			char esc[PATH_MAX * 2];
			escape_pct(pl->libdir, esc, sizeof esc);
			n += (size_t)snprintf(lines + n, sizeof lines - n, "# The unit's NoExecPaths= covers "
			    "the library's directory.\nExecPaths=%s\n", esc);
		}
		snprintf(record + strlen(record), sizeof record - strlen(record), "# heapctl-dumps: %s%s\n",
		    dd.shown, dd.created[0] ? " (created)" : "");
	}
	n += (size_t)snprintf(lines + n, sizeof lines - n, "%s", record);
	/* the same drop-in again: left as it is, so that its time still tells
	 * whether the processes started with it */
	char *before = malloc(sizeof lines);
	if (before == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	bool same = cli_read_file(file, before, sizeof lines) >= 0 && same_dropin(before, lines);
	free(before);
	if (same && already_loaded(a, u, pl, file))
		return 0;
	if (!same) {
		int e = mkdirs(dir, 0755);
		if (e == 0)
			e = write_atomic(file, lines, 0644);
		if (e)
			return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot write %s: %s", u->name, file,
			    strerror(e));
		if ((code = systemctl(u, NULL, 0, "daemon-reload", NULL, NULL, NULL)) != 0)
			return code;
	}
	/* where dumps go: the one directory, or each cluster's */
	char shown[8192] = "";
	for (char *l = record; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
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
	} else {
		printf(same ? "%s is already this, unchanged\n" : "wrote %s\n", file);
		if (pl->pg)
			printf("and LD_PRELOAD, HEAPCTL_CONF in the cluster's environment file (pg_ctlcluster "
			    "resets the environment)\n");
		printf("dumps go to %s\n", shown);
		if (pl->add_execpaths)
			printf("added ExecPaths=%s (the unit's NoExecPaths= covers it)\n", pl->libdir);
		if (!restart_it)
			printf("restart the service to load the library: systemctl%s restart %s\n",
			    u->user ? " --user" : "", u->tmpl ? "INSTANCE" : u->name);
	}
	if (!restart_it)
		return 0;
	char downed[300];
	unit_state_t s;
	code = restart(a, u, downed, sizeof downed, &s);
	return downed[0] ? not_started(u, dir, file, downed, &s, keep) : code;
}

/* ---- disable ------------------------------------------------------------------------------ */

static int do_disable(cli_args_t *a, unit_t *u, bool restart_it)
{
	char dir[PATH_MAX], file[PATH_MAX + 32], dumps[PATH_MAX] = "";
	int code = dropin_path(u, dir, sizeof dir, file, sizeof file);
	if (code || (code = dropin_remove(u, "disable", dir, file, dumps, sizeof dumps)) != 0)
		return code;
	char *created = strstr(dumps, " (created)");
	if (created)
		*created = 0;
	if (a->json) {
		json_t j;
		json_begin(&j, stdout, JSON_LINE);
		json_obj(&j, NULL);
		json_str(&j, "unit", u->name);
		json_str(&j, "removed", file);
		json_str(&j, "dumps", dumps);
		json_end(&j);
	} else {
		printf("removed %s\n", file);
		if (dumps[0])
			printf("dumps written so far stay in %s\n", dumps);
		if (!restart_it)
			printf("restart the service to unload the library: systemctl%s restart %s\n",
			    u->user ? " --user" : "", u->tmpl ? "INSTANCE" : u->name);
	}
	if (!restart_it)
		return 0;
	char out[256];
	if (u->tmpl)
		return 0;
	return systemctl(u, out, sizeof out, "restart", u->name, NULL, NULL);
}

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
		if (systemctl(&u, out, sizeof out, "list-units", "--state=active", "--plain", pat) == 0)
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
		if (systemctl(&u, out, sizeof out, "show", names[i], "-p", "ActiveState,MainPID") == 0) {
			prop_nth(out, "ActiveState", 0, active, sizeof active);
			main_pid = atoi(prop_nth(out, "MainPID", 0, v, sizeof v) ? v : "0");
		}
		/* per process: a worker that runs the library but whose control
		 * thread could not start (haproxy's, under RLIMIT_NPROC 0) is not
		 * "loaded" as far as heapctl goes, and is named */
		int pids[256], np = unit_procs(&u, names[i], main_pid, pids, 256), with = 0, answering = 0;
		bool readable, main_has = false;
		struct proc_row { int pid; bool loaded, answers; char who[64], cmd[256], why[512]; } *rows;
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

static int do_status(cli_args_t *a, bool user)
{
	unit_t u = { .user = user };
	char dir[PATH_MAX], file[PATH_MAX + 32], base[PATH_MAX];
	snprintf(u.name, sizeof u.name, "x.service");
	int code = dropin_path(&u, dir, sizeof dir, file, sizeof file);
	if (code)
		return code;
	*strrchr(dir, '/') = 0;                 /* the directory of drop-in dirs */
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
		if (cli_read_file(path, text, sizeof text) < 0 || strncmp(text, MARK, strlen(MARK)) != 0)
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

/* ---- doctor UNIT ----------------------------------------------------------------------------- */

int cli_doctor_unit(cli_args_t *a, const char *name)
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
	int main_pid = atoi(prop(&u, "MainPID", v, sizeof v));
	prop(&u, "ActiveState", active, sizeof active);
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
		if (dropin_path(&x, dir, sizeof dir, file, sizeof file) == 0 && stat(file, &st) == 0) {
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
		snprintf(unit_d->f[0].text, sizeof unit_d->f[0].text, "%s is %s: it has no process", u.name,
		    active);
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
		int64_t started = proc_started_ns(pids[i]);
		/* a drop-in newer than the process: it was never restarted */
		if (dropin && started && written > started + 10000000 && d->code == HC_EXIT_NOLIB) {
			cli_finding_t *f = &d->f[d->n < CLI_DIAG_MAX ? d->n++ : d->n - 1];
			*f = (cli_finding_t){ .level = CLI_PROBLEM, .code = HC_EXIT_NOLIB };
			snprintf(f->topic, sizeof f->topic, "unit");
			snprintf(f->text, sizeof f->text, "the heapctl drop-in %.600s was written after the %s "
			    "started: the library loads at the next start", file,
			    pids[i] == main_pid ? "main process" : "process");
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

/* ---- the command ------------------------------------------------------------------------------ */

enum { SD_OFF = 256, SD_SECURE, SD_CONF, SD_DUMP_DIR, SD_USER, SD_RESTART, SD_KEEP };
const cli_opt_t systemd_opts[] = {
	{ "conf", SD_CONF, "CONF", "enable: settings for the library (HEAPCTL_CONF), checked before "
	  "anything is written" },
	{ "dump-dir", SD_DUMP_DIR, "DIR", "enable: where dumps go (made writable for the unit)" },
	{ "off", SD_OFF, NULL, "enable: profiling compiled in but off (heapctl on PID later)" },
	{ "secure", SD_SECURE, NULL, "enable: libheapctl-secure.so, with the allocator's misuse checks" },
	{ "user", SD_USER, NULL, "a user unit (systemctl --user)" },
	{ "restart", SD_RESTART, NULL, "restart the unit, and check the new process carries the library" },
	{ "keep", SD_KEEP, NULL, "enable --restart: keep the drop-in when the unit does not come up "
	  "(it is removed otherwise)" },
	{ 0 },
};

int cmd_systemd(cli_args_t *a)
{
	if (a->argc == 0)
		return cli_err(HC_EXIT_USAGE, "systemd: enable UNIT, disable UNIT or status (see 'heapctl help systemd')");
	const char *verb = a->argv[0];
	plan_t pl = { 0 };
	bool user = false, restart_it = false, keep = false;
	const char *unit = NULL;
	cli_args_t rest = *a;            /* after the verb */
	rest.argc--;
	rest.argv++;
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, &rest, "systemd", systemd_opts, false);
	const char *val;
	for (int id; code == 0 && (id = cli_scan_next(&sc, &val)) != 0;) {
		switch (id) {
		case SD_USER: user = true; break;
		case SD_RESTART: restart_it = true; break;
		case SD_KEEP: keep = true; break;
		case SD_OFF: pl.off = true; break;
		case SD_SECURE: pl.secure = true; break;
		case SD_CONF:
			if (strlen(val) >= sizeof pl.conf)
				code = cli_err(HC_EXIT_USAGE, "systemd: --conf is too long");
			else
				snprintf(pl.conf, sizeof pl.conf, "%s", val);
			break;
		case SD_DUMP_DIR:
			if (strlen(val) >= sizeof pl.dump_dir) {
				code = cli_err(HC_EXIT_USAGE, "systemd: --dump-dir is too long");
				break;
			}
			snprintf(pl.dump_dir, sizeof pl.dump_dir, "%s", val);
			for (size_t l = strlen(pl.dump_dir); l > 1 && pl.dump_dir[l - 1] == '/';)
				pl.dump_dir[--l] = 0;
			break;
		case CLI_OPERAND:
			if (unit == NULL)
				unit = val;
			else
				code = cli_err(HC_EXIT_USAGE, "systemd %s: one unit at a time ('%s')", verb, val);
			break;
		default:
			code = -id;
		}
	}
	cli_scan_end(&sc);
	if (code)
		return code;
	bool is_enable = !strcmp(verb, "enable"), is_disable = !strcmp(verb, "disable");
	if (!strcmp(verb, "status")) {
		if (unit)
			return cli_err(HC_EXIT_USAGE, "systemd status: lists every unit; for one, heapctl doctor UNIT");
		return do_status(a, user);
	}
	if (!is_enable && !is_disable)
		return cli_err(HC_EXIT_USAGE, "systemd: unknown action '%s' (enable, disable or status)", verb);
	if (unit == NULL)
		return cli_err(HC_EXIT_USAGE, "systemd %s: which unit?", verb);
	if (is_disable && (pl.conf[0] || pl.dump_dir[0] || pl.off || pl.secure || keep))
		return cli_err(HC_EXIT_USAGE, "systemd disable: takes only UNIT, --user and --restart");
	unit_t u;
	code = unit_load(&u, unit, user);
	if (code == 0)
		code = is_enable ? do_enable(a, &u, &pl, restart_it, keep) : do_disable(a, &u, restart_it);
	free(u.show);
	return code;
}
