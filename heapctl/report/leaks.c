/*
 * heapctl/report/leaks.c - `heapctl watch PID --leaks`: a series of dumps
 * of a live process taken every few seconds, and the sites that grew in
 * each interval of the last few printed once as leak suspects.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/json.h"
#include "diagnose/proc.h"
#include "report/command.h"

static volatile sig_atomic_t leaks_stop;
static void leaks_signal(int sig)
{
	(void)sig;
	leaks_stop = 1;
}

static const cli_opt_t leaks_opts[] = {
	{ "leaks", 'L', NULL, NULL },
	{ "every", 'e', "SECS", NULL },
	{ "intervals", 'n', "N", NULL },
	{ "count", 'c', "N", NULL },
	{ NULL, 0, NULL, NULL },
};

/* heapctl watch PID --leaks: a dump of the process every SECS seconds into
 * a private directory; once N + 1 are there, the sites whose in-use bytes
 * went up in each of the last N intervals are leak suspects (what a leak
 * holds only grows; a cache or a pool gives some back), each printed once,
 * when it first qualifies.  The process pays one dump per interval. */
__attribute__((visibility("default"))) int hc_leaks_main(cli_args_t *a);

int hc_leaks_main(cli_args_t *a)
{
	long every = 60, n = 5, rounds = 0;
	cli_scan_t sc;
	int rc = cli_scan_begin(&sc, a, "watch", leaks_opts, false);
	const char *v;
	for (int id; rc == 0 && (id = cli_scan_next(&sc, &v)) != 0;) {
		if (id < 0)
			rc = -id;
		else if (id == 'e')
			rc = rp_parse_long("--every", v, 1, 86400, &every);
		else if (id == 'n')
			rc = rp_parse_long("--intervals", v, 2, 1000, &n);
		else if (id == 'c')
			rc = rp_parse_long("--count", v, 1, 1000000, &rounds);
		else if (id == CLI_OPERAND)
			rc = cli_err(HC_EXIT_USAGE, "watch: unexpected argument '%s'", v);
	}
	cli_scan_end(&sc);
	if (rc)
		return rc;
	if (a->pid <= 0)
		return cli_err(HC_EXIT_USAGE, "watch --leaks: which process? (heapctl watch PID --leaks)");
	char exe[PATH_MAX], dir[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len <= 0)
		return cli_err(HC_EXIT_FAILED, "cannot find heapctl itself: %s", strerror(errno));
	exe[len] = 0;
	const char *rt = getenv("XDG_RUNTIME_DIR");
	snprintf(dir, sizeof dir, "%s/heapctl-leaks.XXXXXX", rt && *rt == '/' ? rt : "/tmp");
	if (mkdtemp(dir) == NULL)
		return cli_err(HC_EXIT_FAILED, "cannot make a directory for the dumps, %s: %s", dir, strerror(errno));
	signal(SIGINT, leaks_signal);
	signal(SIGTERM, leaks_signal);
	ropts_t o;
	memset(&o, 0, sizeof o);
	o.type = RP_INUSE_SPACE;
	size_t keep = (size_t)n + 1, have = 0;
	char **paths = rp_alloc(sizeof *paths * keep);
	const char **told = NULL; /* suspects printed so far */
	size_t ntold = 0, toldcap = 0;
	if (!a->json)
		printf("watching process %d: a dump every %ld s; a site whose in-use bytes grow in each of %ld "
		       "intervals in a row is a leak suspect (the first after %ld s)\n",
		    (int)a->pid, every, n, every * n);
	fflush(stdout);
	rc = 0;
	for (long round = 0; !leaks_stop && (rounds == 0 || round < rounds); round++) {
		if (round > 0)
			for (long s = 0; s < every * 10 && !leaks_stop; s++)
				usleep(100000);
		if (leaks_stop)
			break;
		char path[PATH_MAX + 32], pid[24], out[256], err[1024];
		snprintf(path, sizeof path, "%s/%06ld.heap", dir, round);
		snprintf(pid, sizeof pid, "%d", (int)a->pid);
		char *argv[] = { exe, "dump", pid, "-o", path, NULL };
		int st = cli_spawn(argv, NULL, out, sizeof out, err, sizeof err, (int)(a->timeout_ns / 1000000) + 5000);
		if (st != 0) {
			err[strcspn(err, "\n")] = 0;
			rc = cli_err(st == HC_EXIT_NOPROC ? HC_EXIT_NOPROC : HC_EXIT_FAILED, "watch --leaks: %s",
			    *err ? (strncmp(err, "heapctl: ", 9) ? err : err + 9) : "the dump failed");
			break;
		}
		if (have == keep) {
			unlink(paths[0]);
			memmove(paths, paths + 1, sizeof *paths * (keep - 1));
			have--;
		}
		paths[have++] = (char *)rp_intern(path);
		if (have < keep)
			continue;
		rp_series_t se;
		if ((rc = rp_series_load((const char *const *)paths, have, &o, &se)) != 0)
			break;
		size_t nt;
		rp_trend_t *t = rp_series_rank(&se, &nt);
		double hours = (double)(every * n) / 3600.0;
		for (size_t i = 0; i < nt; i++) {
			if (!t[i].only_grew)
				continue;
			const char *site = se.site[t[i].site];
			size_t k = 0;
			while (k < ntold && told[k] != site)
				k++;
			if (k < ntold)
				continue;
			told = rp_grow(told, &toldcap, ntold + 1, sizeof *told);
			told[ntold++] = site;
			char safe[1024];
			if (a->json) {
				json_t j;
				json_begin(&j, stdout, JSON_LINE);
				json_obj(&j, NULL);
				json_i64(&j, "pid", a->pid);
				json_str(&j, "site", site);
				json_int(&j, "bytes", t[i].last);
				json_int(&j, "growth_bytes", t[i].growth);
				json_int(&j, "growth_per_hour", t[i].growth / hours);
				json_i64(&j, "intervals", n);
				json_i64(&j, "every_s", every);
				json_end(&j);
			} else {
				printf(
				    "leak suspect in %d: %s grew in each of the last %ld intervals: +%.1f MB (%.1f MB/h), "
				    "now %.1f MB\n",
				    (int)a->pid, out_safe(site, safe, sizeof safe), n, t[i].growth / 1048576.0,
				    t[i].growth / 1048576.0 / hours, t[i].last / 1048576.0);
			}
			fflush(stdout);
		}
	}
	for (size_t i = 0; i < have; i++)
		unlink(paths[i]);
	rmdir(dir);
	return rc;
}
