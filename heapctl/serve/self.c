/*
 * heapctl/serve/self.c - the daemon itself, as every other file of it sees
 * it: where this heapctl is and the directories of its own (serve_conf, set
 * once at start), running itself as a child for a dump or a
 * report (a symbolizer that fails takes down one request, not the daemon),
 * its paths scrubbed from what a requester reads, its half-written files,
 * and the names of programs and users for titles and labels.  It calls no
 * other file of serve/: everything else may call it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "serve.h"

serve_conf_t serve_conf;

int serve_run_self(char **args, char *out, size_t outlen, char *err, size_t errlen, uint64_t timeout_ms)
{
	char *argv[48];
	int n = 0;
	argv[n++] = serve_conf.exe;
	for (; *args && n < 45; args++)
		argv[n++] = *args;
	if (serve_conf.symcache[0] && !strcmp(argv[1], "report")) {
		argv[n++] = "--symcache";
		argv[n++] = serve_conf.symcache;
	}
	argv[n] = NULL;
	char junk[256];
	err[0] = 0;
	int rc = cli_spawn(argv, NULL, out ? out : junk, out ? outlen : sizeof junk, err, errlen, (int)timeout_ms);
	if (rc < 0) {
		snprintf(err, errlen, "cannot run heapctl %s: %s", argv[1], strerror(errno));
		return HC_EXIT_FAILED;
	}
	char *nl = strchr(err, '\n');
	if (nl)
		*nl = 0;
	if (rc >= 128 && err[0] == 0)
		snprintf(err, errlen, "heapctl %s did not finish in %llu ms", argv[1], (unsigned long long)timeout_ms);
	return rc;
}

void serve_scrub(const char *s, const char *what, char *out, size_t len)
{
	const char *dirs[3] = { serve_conf.archive, serve_conf.symcache, serve_conf.work };
	size_t o = 0;
	while (*s && o + 1 < len) {
		size_t dl = 0;
		int k = -1;
		for (int i = 0; i < 3 && k < 0; i++)
			if ((dl = strlen(dirs[i])) > 0 && strncmp(s, dirs[i], dl) == 0 &&
			    (s[dl] == 0 || s[dl] == '/' || strchr(SCRUB_END, s[dl])))
				k = i;
		if (k < 0) {
			out[o++] = *s++;
			continue;
		}
		/* the path ends where a message goes on; the daemon's own names
		 * (req.N.XXXXXX, a.heap, an archived GROUP/NAME) have none of these */
		size_t end = dl + strcspn(s + dl, SCRUB_END);
		char rel[600];
		const char *name = what;
		if (k == 0 && end > dl + 1) {
			snprintf(rel, sizeof rel, "%.*s", (int)(end - dl - 1), s + dl + 1);
			name = rel;
		} else if (k == 0)
			name = "the archive";
		else if (k == 1)
			name = "the symbol cache";
		int n = snprintf(out + o, len - o, "%s", name);
		o = n < 0 ? o : (size_t)n >= len - o ? len - 1 : o + (size_t)n;
		s += end;
	}
	out[o] = 0;
}

bool serve_tmp_file(int dfd, const char *name, time_t age)
{
	size_t len = strlen(name);
	if (name[0] != '.' || len <= 4 || strcmp(name + len - 4, ".tmp") != 0)
		return false;
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    (age == 0 || st.st_mtim.tv_sec + age < time(NULL)))
		unlinkat(dfd, name, 0);
	return true;
}

void serve_program(const char *command, char *out, size_t len)
{
	char safe[1024];
	command = out_safe(command, safe, sizeof safe); /* valid UTF-8 in a title */
	size_t n = strcspn(command, " ");
	const char *slash = memrchr(command, '/', n);
	const char *p = slash ? slash + 1 : command;
	snprintf(out, len, "%.*s", (int)(command + n - p), p);
	if (out[0] == 0)
		snprintf(out, len, "process");
}

void serve_user(uid_t uid, char *out, size_t len)
{
	struct passwd pw, *r = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &r) == 0 && r && r->pw_name[0])
		snprintf(out, len, "%s", r->pw_name);
	else
		snprintf(out, len, "%u", (unsigned)uid);
}
