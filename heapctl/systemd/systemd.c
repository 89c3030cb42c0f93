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
 *
 * The parts: checks.c (what stops a preload), dumpdir.c, pg.c, enable.c,
 * restart.c (--restart), disable.c, status.c, paths.c; the unit itself is
 * read through diagnose/unit.h, which doctor UNIT shares.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "systemd/internal.h"
#include "systemd/systemd.h"

/* ---- the command ------------------------------------------------------------------------------ */

enum { SD_OFF = 256, SD_SECURE, SD_CONF, SD_DUMP_DIR, SD_USER, SD_RESTART, SD_KEEP };
static const cli_opt_t systemd_opts[] = {
	{ "conf", SD_CONF, "CONF",
	    "enable: settings for the library (HEAPCTL_CONF), checked before "
	    "anything is written" },
	{ "dump-dir", SD_DUMP_DIR, "DIR", "enable: where dumps go (made writable for the unit)" },
	{ "off", SD_OFF, NULL, "enable: profiling compiled in but off (heapctl on PID later)" },
	{ "secure", SD_SECURE, NULL, "enable: libheapctl-secure.so, with the allocator's misuse checks" },
	{ "user", SD_USER, NULL, "a user unit (systemctl --user)" },
	{ "restart", SD_RESTART, NULL, "restart the unit, and check the new process carries the library" },
	{ "keep", SD_KEEP, NULL,
	    "enable --restart: keep the drop-in when the unit does not come up "
	    "(it is removed otherwise)" },
	{ 0 },
};

/* heapctl help systemd: each action, after the options */
static void systemd_more(FILE *f)
{
	fputs("\n  enable UNIT [--conf CONF] [--dump-dir DIR] [--off] [--secure] [--user] [--restart [--keep]]\n"
	      "      write UNIT.d/50-heapctl.conf: LD_PRELOAD (libheapctl.so first), sampling on\n"
	      "      from the start, CONF (MALLOC_CONF syntax) in HEAPCTL_CONF, dumps in\n"
	      "      /var/lib/heapctl/UNIT (StateDirectory=) or DIR, ExecPaths= where the unit\n"
	      "      forbids executing the library; refuses, with the fix, where the preload\n"
	      "      cannot work (also a unit that runs no program of its own, /bin/true:\n"
	      "      it names the units that do); \"already loaded\", exit 0, where the unit's\n"
	      "      processes run the library from that drop-in.  A unit that does not come\n"
	      "      up after --restart: says whether for its own reasons (a Condition= not\n"
	      "      met, it fails without the library too) or the library's, and removes the\n"
	      "      drop-in (--keep: not)\n"
	      "  disable UNIT [--user] [--restart]\n"
	      "      remove exactly what enable wrote\n"
	      "  status [--user] [--json]\n"
	      "      units with the drop-in: of their processes, how many carry the library\n"
	      "      and answer; each one that carries it and does not answer, and why\n"
	      "UNIT may be a template (foo@.service: every instance) or an instance.\n",
	    f);
}

const cli_help_t cmd_help_systemd = {
	.usage = "enable|disable UNIT [OPTIONS] | status",
	.line = "run a service under the library: one drop-in that fits its hardening",
	.opts = systemd_opts,
	.more = systemd_more,
};

int cmd_systemd(cli_args_t *a)
{
	if (a->argc == 0)
		return cli_err(HC_EXIT_USAGE,
		    "systemd: enable UNIT, disable UNIT or status (see 'heapctl help systemd')");
	const char *verb = a->argv[0];
	plan_t pl = { 0 };
	bool user = false, restart_it = false, keep = false;
	const char *unit = NULL;
	cli_args_t rest = *a; /* after the verb */
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
		default: code = -id;
		}
	}
	cli_scan_end(&sc);
	if (code)
		return code;
	bool is_enable = !strcmp(verb, "enable"), is_disable = !strcmp(verb, "disable");
	if (!strcmp(verb, "status")) {
		if (unit)
			return cli_err(HC_EXIT_USAGE, "systemd status: lists every unit; for one, heapctl doctor UNIT");
		return sd_status(a, user);
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
		code = is_enable ? sd_enable(a, &u, &pl, restart_it, keep) : sd_disable(a, &u, restart_it);
	free(u.show);
	return code;
}
