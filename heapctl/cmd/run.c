/*
 * heapctl/cmd/run.c - `heapctl run [--conf CONF] [--off] -- CMD ARGS...`:
 * start a program under libheapctl.so.
 *
 * The library goes first in LD_PRELOAD (a preload the caller already has
 * is kept after it: the first malloc in the search order is the one the
 * program uses, so heapctl's must come first to see any allocation).
 * Sampling is active from the start unless --off: what is allocated before
 * profiling is switched on is in no profile, and sampling at the default
 * rate costs about 1% (tests/bench/RESULTS.md).  The configuration goes in
 * HEAPCTL_CONF, after any the caller has, so --conf wins; it is checked
 * with the library's own parser before the program is started.  --secure
 * takes libheapctl-secure.so, the library with the allocator's misuse
 * checks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cmd/cmd.h"
#include "diagnose/proc.h"

/* LD_PRELOAD with lib first and any other entry kept after it. */
char *cli_preload_with(const char *lib, const char *old)
{
	size_t cap = strlen(lib) + (old ? strlen(old) : 0) + 2;
	char *v = malloc(cap);
	if (v == NULL)
		return NULL;
	strcpy(v, lib);
	if (old == NULL)
		return v;
	char *copy = strdup(old);
	char *save = NULL;
	for (char *t = copy ? strtok_r(copy, ": ", &save) : NULL; t; t = strtok_r(NULL, ": ", &save)) {
		if (cli_is_library(t))
			continue; /* ours, perhaps another build: replaced */
		strcat(v, ":");
		strcat(v, t);
	}
	free(copy);
	return v;
}

enum { R_OFF = 256, R_SECURE, R_CONF };
static const cli_opt_t run_opts[] = {
	{ "conf", R_CONF, "CONF", "settings added to HEAPCTL_CONF, checked by the library before CMD starts" },
	{ "off", R_OFF, NULL, "profiling compiled in but off (heapctl on PID later)" },
	{ "secure", R_SECURE, NULL, "libheapctl-secure.so, with the allocator's misuse checks" },
	{ 0 },
};

static void run_more(FILE *f)
{
	fputs("\nLD_PRELOAD gets libheapctl.so first (a preload you have is kept after it);\n"
	      "HEAPCTL_CONF gets prof:true,prof_active:true (--off: false) and then CONF, checked\n"
	      "by the library before CMD starts.  --secure: libheapctl-secure.so, with the\n"
	      "allocator's misuse checks.  Exit status: CMD's own (it is exec'd), or 126/127\n"
	      "when it cannot be run.\n",
	    f);
}

const cli_help_t cmd_help_run = {
	.usage = "[--conf CONF] [--off] [--secure] -- CMD [ARGS...]",
	.line = "start a program under libheapctl.so, sampling from the start",
	.opts = run_opts,
	.more = run_more,
};

int cmd_run(cli_args_t *a)
{
	const char *conf = NULL;
	bool off = false, secure = false;
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "run", run_opts, true);
	const char *v;
	for (int id; code == 0 && (id = cli_scan_next(&sc, &v)) != 0;) {
		switch (id) {
		case R_OFF: off = true; break;
		case R_SECURE: secure = true; break;
		case R_CONF: conf = v; break;
		default: code = -id;
		}
	}
	int ncmd = 0;
	char **cmd = code ? NULL : cli_scan_rest(&sc, &ncmd);
	if (code == 0 && ncmd == 0)
		code =
		    cli_err(HC_EXIT_USAGE, "run: say which program to run: heapctl run [--conf CONF] -- CMD [ARGS...]");
	if (code == 0 && a->pid)
		code = cli_err(HC_EXIT_USAGE, "run: starts a program; it takes no PID (put the command after --)");
	/* the command stays in a's arguments; the scan's copy goes */
	if (cmd)
		cmd = a->argv + (a->argc - ncmd);
	cli_scan_end(&sc);
	if (code)
		return code;
	char lib[PATH_MAX];
	code = cli_find_library(secure ? "libheapctl-secure.so" : "libheapctl.so", lib, sizeof lib);
	if (code)
		return code;

	char *hc = NULL;
	const char *old_hc = getenv("HEAPCTL_CONF");
	if (asprintf(&hc, "prof:true,prof_active:%s%s%s%s%s", off ? "false" : "true", old_hc && *old_hc ? "," : "",
	        old_hc ? old_hc : "", conf && *conf ? "," : "", conf ? conf : "") < 0)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	if ((code = cli_check_conf(lib, hc)) != 0) {
		free(hc);
		return code;
	}
	/* a program the loader will not preload into is refused, not run unprofiled */
	char path[PATH_MAX];
	const char *prog = cmd[0];
	if (strchr(prog, '/') == NULL) {
		const char *pathenv = getenv("PATH");
		char *dirs = strdup(pathenv ? pathenv : "/usr/local/bin:/usr/bin:/bin");
		char *save = NULL;
		path[0] = 0;
		for (char *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
			snprintf(path, sizeof path, "%s/%s", d, prog);
			if (access(path, X_OK) == 0)
				break;
			path[0] = 0;
		}
		free(dirs);
		prog = path[0] ? path : prog;
	}
	if (cli_elf_static(prog) == 1) {
		free(hc);
		return cli_err(HC_EXIT_FAILED,
		    "run: %s is statically linked: no dynamic loader runs, so "
		    "nothing can be preloaded into it",
		    prog);
	}
	const char *why = cli_program_secure(prog);
	if (why && geteuid() != 0) {
		free(hc);
		return cli_err(HC_EXIT_FAILED,
		    "run: %s is %s: the dynamic loader ignores LD_PRELOAD for it "
		    "(secure execution)",
		    prog, why);
	}
	char *pre = cli_preload_with(lib, getenv("LD_PRELOAD"));
	if (pre == NULL || setenv("LD_PRELOAD", pre, 1) != 0 || setenv("HEAPCTL_CONF", hc, 1) != 0)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	free(pre);
	free(hc);
	fflush(stdout);
	execvp(cmd[0], cmd);
	int e = errno;
	cli_err(e == ENOENT ? 127 : 126, "run: cannot execute %s: %s", cmd[0], strerror(e));
	return e == ENOENT ? 127 : 126;
}
