/*
 * heapctl/cmd/attach.c - a console for one process.  On a terminal it
 * prompts and keeps going after errors; from a pipe or file it reads one
 * command per line (blank lines and # comments skipped) and exits with the
 * code of the first command that failed, so
 *
 *     printf 'on\ndump --prefix /tmp/x\n' | heapctl attach PID
 *
 * works in scripts.  Words are split as a shell would for simple cases:
 * spaces separate, '...' and "..." quote, backslash escapes.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cmd/cmd.h"

#define MAX_WORDS 64

/* Splits line in place; returns the word count or -1 on an open quote. */
static int split(char *line, char **words, int max)
{
	int n = 0;
	char *r = line, *w = line;
	while (*r) {
		while (*r == ' ' || *r == '\t' || *r == '\n' || *r == '\r')
			r++;
		if (*r == 0 || *r == '#')
			break;
		if (n == max)
			return -1;
		words[n++] = w;
		char quote = 0;
		for (; *r; r++) {
			if (quote) {
				if (*r == quote)
					quote = 0;
				else if (*r == '\\' && quote == '"' && r[1])
					*w++ = *++r;
				else
					*w++ = *r;
			} else if (*r == '\'' || *r == '"') {
				quote = *r;
			} else if (*r == '\\' && r[1]) {
				*w++ = *++r;
			} else if (*r == ' ' || *r == '\t' || *r == '\n' || *r == '\r') {
				break;
			} else {
				*w++ = *r;
			}
		}
		if (quote)
			return -1;
		if (*r)
			r++;
		*w++ = 0;
	}
	return n;
}

const cli_help_t cmd_help_attach = {
	.usage = "PID",
	.line = "a console for one process; commands from a terminal or stdin",
};

int cmd_attach(cli_args_t *a)
{
	if (a->argc)
		return cli_err(HC_EXIT_USAGE, "attach: unexpected argument '%s'", a->argv[0]);
	if (a->pid == 0)
		return cli_err(HC_EXIT_USAGE, "attach: which process? usage: heapctl attach PID");
	hc_shm_target_t t;
	int code = cli_target(a, &t);
	if (code)
		return code;
	char cmd[128];
	out_cmdline(t.pid, t.seg, cmd, sizeof cmd);
	hc_shm_close(&t);

	bool tty = isatty(STDIN_FILENO);
	if (tty)
		printf("attached to process %d (%s)\n"
		       "commands: status, set NAME=VALUE, on, off, dump, reset, watch, list, help; quit to leave\n",
		    a->pid, cmd);
	int first_failure = 0;
	char *line = NULL;
	size_t cap = 0;
	char pidbuf[16], tobuf[32];
	snprintf(pidbuf, sizeof pidbuf, "%d", a->pid);
	snprintf(tobuf, sizeof tobuf, "%.3f", (double)a->timeout_ns / 1e9);
	for (;;) {
		if (tty) {
			printf("heapctl %d> ", a->pid);
			fflush(stdout);
		}
		if (getline(&line, &cap, stdin) < 0)
			break;
		char *words[MAX_WORDS + 4];
		int n = split(line, words, MAX_WORDS);
		if (n < 0) {
			code = cli_err(HC_EXIT_USAGE, "attach: cannot read '%s' (open quote or too many words)",
			    strtok(line, "\n"));
		} else if (n == 0) {
			continue;
		} else if (!strcmp(words[0], "quit") || !strcmp(words[0], "exit")) {
			break;
		} else {
			/* the console's --timeout carries over unless the line has one */
			bool has_timeout = false;
			for (int i = 1; i < n; i++)
				has_timeout |= !strncmp(words[i], "--timeout", 9);
			if (!has_timeout) {
				words[n++] = (char *)"--timeout";
				words[n++] = tobuf;
			}
			code = a->dispatch(n, words, a->pid);
		}
		fflush(stdout);
		if (code && !first_failure)
			first_failure = code;
		if (code == HC_EXIT_NOPROC)
			break; /* the process is gone: nothing more to do */
	}
	free(line);
	if (tty)
		printf("\n");
	return tty ? (code == HC_EXIT_NOPROC ? code : 0) : first_failure;
}
