/*
 * heapctl/cmd/ctl.c - the commands that ask the target to do something:
 * set, on, off, reset and eject (dump has its own file, dump.c).  Values
 * are checked here first, with the same table the target checks them with
 * again (shm/shm.c).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cmd/cmd.h"
#include "cli/json.h"

static int set_one(cli_args_t *a, hc_shm_target_t *t, const char *name, const char *value)
{
	hc_shm_req_t req = { .cmd = HC_CMD_SET };
	hc_shm_rep_t rep;
	hc_shm_strlcpy(req.name, name, sizeof req.name);
	hc_shm_strlcpy(req.text, value, sizeof req.text);
	return cli_call(a, t, &req, &rep);
}

static int check_setting(const char *arg, char *name, size_t namelen, const char **value)
{
	const char *eq = strchr(arg, '=');
	if (eq == NULL)
		return cli_err(HC_EXIT_USAGE, "set: '%s' is not NAME=VALUE (see 'heapctl help set')", arg);
	size_t n = (size_t)(eq - arg);
	if (n == 0 || n >= namelen)
		return cli_err(HC_EXIT_USAGE, "set: '%.*s' is not a setting (see 'heapctl help set')", (int)n, arg);
	memcpy(name, arg, n);
	name[n] = 0;
	*value = eq + 1;
	const hc_shm_setting_t *s = hc_shm_setting_find(name);
	if (s == NULL)
		return cli_err(HC_EXIT_USAGE, "set: unknown setting '%s' (see 'heapctl help set')", name);
	if (strlen(*value) >= HC_SHM_VALUE_MAX)
		return cli_err(HC_EXIT_USAGE, "set: %s: the value is too long", name);
	hc_shm_value_t v;
	char why[256];
	if (!hc_shm_setting_parse(s, *value, &v, why, sizeof why))
		return cli_err(HC_EXIT_USAGE, "set: %s: %s", name, why);
	return 0;
}

/* heapctl help set: the settings that can change at run time */
static void set_more(FILE *f)
{
	fprintf(f, "\nsettings (names as jemalloc's mallctls):\n");
	for (unsigned i = 0; i < HC_NSETTINGS; i++)
		if (hc_shm_settings[i].name)
			fprintf(f, "  %-24s %s\n", hc_shm_settings[i].name, hc_shm_settings[i].help);
	fprintf(f,
	    "\nbooleans: true/false (also on/off, 1/0); byte counts take K, M, G, T.\n"
	    "Start-up values: heapctl help conf.\n");
}

const cli_help_t cmd_help_set = {
	.usage = "[PID] NAME=VALUE...",
	.line = "change settings (see 'heapctl help set')",
	.more = set_more,
};

int cmd_set(cli_args_t *a)
{
	if (a->argc == 0)
		return cli_err(HC_EXIT_USAGE, "set: say what to set, as NAME=VALUE (see 'heapctl help set')");
	/* every pair is checked before anything is sent */
	char(*names)[HC_SHM_NAME_MAX] = calloc((size_t)a->argc, sizeof *names);
	const char **values = calloc((size_t)a->argc, sizeof *values);
	int code = names && values ? 0 : cli_err(HC_EXIT_FAILED, "out of memory");
	for (int i = 0; i < a->argc && code == 0; i++) {
		if (a->argv[i][0] == '-')
			code = cli_err(HC_EXIT_USAGE, "set: unknown option '%s'", a->argv[i]);
		else
			code = check_setting(a->argv[i], names[i], sizeof names[i], &values[i]);
	}
	hc_shm_target_t t = { 0 };
	if (code == 0)
		code = cli_target(a, &t);
	char prefix[HC_SHM_VALUE_MAX];
	for (int i = 0; i < a->argc && code == 0; i++) {
		/* a relative prefix means our directory, as for dump --prefix */
		if (!strcmp(names[i], "prof.prefix") && values[i][0] != '/') {
			if (!cli_same_view(&t)) {
				code = cli_err(HC_EXIT_USAGE,
				    "set: prof.prefix '%s' is relative, and process %d "
				    "sees another file system (a container or a sandboxed service): give an "
				    "absolute path as that process sees it",
				    values[i], t.pid);
				break;
			}
			if ((code = cli_absolute("set: prof.prefix", values[i], prefix, 1024)) != 0)
				break;
			values[i] = prefix;
		}
		code = set_one(a, &t, names[i], values[i]);
		if (code == 0 && !a->json)
			printf("%d: %s=%s\n", t.pid, names[i], values[i]);
	}
	if (code == 0 && a->json) {
		json_t j;
		json_begin(&j, stdout, JSON_LINE);
		json_obj(&j, NULL);
		json_i64(&j, "pid", t.pid);
		json_obj(&j, "set");
		for (int i = 0; i < a->argc; i++)
			json_str(&j, names[i], values[i]);
		json_end(&j);
		json_end(&j);
	}
	hc_shm_close(&t);
	free(names);
	free(values);
	return code;
}

/* on/off and reset's answer as JSON: {"pid": N, "KEY": true|false} */
static void json_pid_flag(int pid, const char *key, bool v)
{
	json_t j;
	json_begin(&j, stdout, JSON_LINE);
	json_obj(&j, NULL);
	json_i64(&j, "pid", pid);
	json_bool(&j, key, v);
	json_end(&j);
}

static int on_off(cli_args_t *a, bool on)
{
	if (a->argc)
		return cli_err(HC_EXIT_USAGE, "%s: unexpected argument '%s'", on ? "on" : "off", a->argv[0]);
	hc_shm_target_t t;
	int code = cli_target(a, &t);
	if (code)
		return code;
	code = set_one(a, &t, "prof.active", on ? "true" : "false");
	if (code == 0 && a->json)
		json_pid_flag(t.pid, "prof.active", on);
	else if (code == 0)
		printf("%d: profiling %s\n", t.pid, on ? "on" : "off");
	hc_shm_close(&t);
	return code;
}

const cli_help_t cmd_help_on = {
	.usage = "[PID]",
	.line = "start sampling (prof.active=true)",
};
const cli_help_t cmd_help_off = {
	.usage = "[PID]",
	.line = "stop sampling (prof.active=false)",
};

int cmd_on(cli_args_t *a)
{
	return on_off(a, true);
}
int cmd_off(cli_args_t *a)
{
	return on_off(a, false);
}

/* heapctl eject: an injected agent (heapctl inject) puts the process's own
 * malloc back, forgets its samples and removes its segment. */
const cli_help_t cmd_help_eject = {
	.usage = "[PID]",
	.line = "put an injected process's own malloc back; the agent goes inert",
};

int cmd_eject(cli_args_t *a)
{
	if (a->argc > 0)
		return cli_err(HC_EXIT_USAGE, "eject: unexpected argument '%s'", a->argv[0]);
	hc_shm_target_t t;
	int code = cli_target(a, &t);
	if (code)
		return code;
	hc_shm_req_t req = { .cmd = HC_CMD_EJECT };
	hc_shm_rep_t rep;
	code = cli_call(a, &t, &req, &rep);
	if (code == 0) {
		/* the agent removes its segment right after it answers: done
		 * when it is gone (a new inject may follow at once) */
		for (int i = 0; i < 2000 && access(t.path, F_OK) == 0; i++)
			usleep(1000);
		if (a->json)
			json_pid_flag(t.pid, "ejected", true);
		else
			printf("ejected from process %d: its own malloc is called directly again; the agent stays "
			       "loaded, inert (heapctl inject %d arms it again)\n",
			    t.pid, t.pid);
	}
	return code;
}

static const cli_opt_t reset_opts[] = {
	{ "lg-sample", 256, "N", "and sample every 2^N bytes on average from now on" },
	{ 0 },
};

const cli_help_t cmd_help_reset = {
	.usage = "[PID] [--lg-sample N]",
	.line = "forget all samples (optionally change the rate)",
	.opts = reset_opts,
};

int cmd_reset(cli_args_t *a)
{
	hc_shm_req_t req = { .cmd = HC_CMD_RESET, .arg = -1 };
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "reset", reset_opts, false);
	const char *v;
	for (int id; code == 0 && (id = cli_scan_next(&sc, &v)) != 0;) {
		hc_shm_value_t val;
		char why[256];
		if (id == CLI_OPERAND)
			code = cli_err(HC_EXIT_USAGE, "reset: unexpected argument '%s'", v);
		else if (id < 0)
			code = -id;
		else if (!hc_shm_setting_parse(hc_shm_setting_find("prof.lg_sample"), v, &val, why, sizeof why))
			code = cli_err(HC_EXIT_USAGE, "reset: --lg-sample: %s", why);
		else
			req.arg = (int)val.u;
	}
	cli_scan_end(&sc);
	if (code)
		return code;
	hc_shm_target_t t;
	code = cli_target(a, &t);
	if (code)
		return code;
	hc_shm_rep_t rep;
	code = cli_call(a, &t, &req, &rep);
	if (code == 0) {
		if (a->json)
			json_pid_flag(t.pid, "reset", true);
		else if (req.arg >= 0)
			printf("%d: profile reset, prof.lg_sample=%d\n", t.pid, req.arg);
		else
			printf("%d: profile reset\n", t.pid);
	}
	hc_shm_close(&t);
	return code;
}
