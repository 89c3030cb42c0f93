/*
 * heapctl/systemd/pg.c - pg_ctlcluster (postgresql@.service) gives postgres the
 * environment of /etc/postgresql/VERSION/CLUSTER/environment only: enable
 * puts the two variables there, and disable takes exactly them out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "systemd/internal.h"

/* ---- pg_ctlcluster: /etc/postgresql/VERSION/CLUSTER/environment ------------------------ */

/* The clusters an instance or the template stands for. */
int sd_pg_clusters(const unit_t *u, glob_t *g)
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

/* The settings go after PG_MARK at the end of the cluster's environment
 * file.  Enabled again: the same lines are left as they are (the file not
 * rewritten), other ones (a new --conf) replace them. */
int sd_pg_write_env(const unit_t *u, const plan_t *pl, const char *file, char *record, size_t reclen)
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
		return cli_err(HC_EXIT_USAGE,
		    "systemd enable %s: a quote in a path or --conf cannot go into "
		    "%s",
		    u->name, file);
	snprintf(block, sizeof block,
	    "%s\nLD_PRELOAD = '%s'\nHEAPCTL_CONF = 'prof:true,prof_active:%s,"
	    "prof_prefix:%s/postgres%s%s'\n",
	    PG_MARK, pl->lib, pl->off ? "false" : "true", dir, pl->conf[0] ? "," : "", pl->conf);
	ssize_t n = hc_shm_read_file(file, text, sizeof text);
	if (n < 0)
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot read %s: %s", u->name, file, strerror(errno));
	bool same = strstr(text, block) != NULL;
	int e = 0;
	if (!same && strstr(text, PG_MARK) &&
	    ((e = sd_pg_unwrite_env(file)) != 0 || hc_shm_read_file(file, text, sizeof text) < 0))
		return cli_err(HC_EXIT_FAILED,
		    "systemd enable %s: cannot take the earlier settings out of "
		    "%s: %s",
		    u->name, file, strerror(e ? e : errno));
	for (char *l = text; !same && l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *t = l + strspn(l, " \t");
		if (!strncmp(t, "LD_PRELOAD", 10) || !strncmp(t, "HEAPCTL_CONF", 12))
			return cli_err(HC_EXIT_FAILED,
			    "systemd enable %s: %s already sets %.*s; add %s to it "
			    "yourself",
			    u->name, file, (int)strcspn(t, " ="), t, pl->lib);
	}
	bool existed = access(dir, F_OK) == 0;
	e = sd_mkdirs(dir, 0750);
	if (e == 0 && !existed && chown(dir, st.st_uid, st.st_gid) != 0)
		e = errno;
	if (e)
		return cli_err(HC_EXIT_FAILED, "systemd enable %s: cannot make %s for the cluster's owner: %s", u->name,
		    dir, strerror(e));
	if (!same) {
		size_t len = strlen(text);
		snprintf(text + len, sizeof text - len, "%s%s", len && text[len - 1] != '\n' ? "\n" : "", block);
		if ((e = sd_write_atomic(file, text, 0644)) != 0)
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
int sd_pg_unwrite_env(const char *file)
{
	char text[65536], out[65536];
	if (hc_shm_read_file(file, text, sizeof text) < 0)
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
	int e = sd_write_atomic(file, out, st.st_mode & 07777);
	if (e == 0)
		(void)chown(file, st.st_uid, st.st_gid);
	return e;
}
