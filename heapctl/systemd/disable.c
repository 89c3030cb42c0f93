/*
 * heapctl/systemd/disable.c - `heapctl systemd disable UNIT`: removes exactly what
 * enable wrote, as its drop-in records it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "systemd/internal.h"

/* Remove the drop-in enable wrote and what it lists (lines in a cluster's
 * environment file), and reload systemd; where dumps went in dumps. */
int sd_dropin_remove(const unit_t *u, const char *verb, const char *dir, const char *file, char *dumps, size_t dlen)
{
	char text[16384];
	if (hc_shm_read_file(file, text, sizeof text) < 0 || strncmp(text, MARK, strlen(MARK)) != 0)
		return cli_err(HC_EXIT_FAILED, "systemd %s %s: not enabled (no %s written by heapctl)", verb, u->name,
		    file);
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char path[PATH_MAX];
		if (sscanf(l, "# heapctl-envfile: %4095[^\n]", path) == 1) {
			int e = sd_pg_unwrite_env(path);
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
	rmdir(dir); /* only if nothing else is in it */
	return unit_systemctl(u, NULL, 0, "daemon-reload", NULL, NULL, NULL);
}

/* ---- disable ------------------------------------------------------------------------------ */

int sd_disable(cli_args_t *a, unit_t *u, bool restart_it)
{
	char dir[PATH_MAX], file[PATH_MAX + 32], dumps[PATH_MAX] = "";
	int code = unit_dropin_path(u, dir, sizeof dir, file, sizeof file);
	if (code || (code = sd_dropin_remove(u, "disable", dir, file, dumps, sizeof dumps)) != 0)
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
	return unit_systemctl(u, out, sizeof out, "restart", u->name, NULL, NULL);
}
