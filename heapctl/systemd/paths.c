/*
 * heapctl/systemd/paths.c - the file work of enable and disable: paths in list
 * settings, %-escaping for systemd, atomic writes, directories.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "systemd/internal.h"

/* ---- paths ------------------------------------------------------------------------- */

/* Does one of the space-separated paths of a list setting hold path?
 * Entries may carry systemd's "-" and "+" prefixes. */
const char *sd_list_covers(const char *list, const char *path, char *hit, size_t len)
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

bool sd_under(const char *path, const char *dir)
{
	size_t l = strlen(dir);
	return strncmp(path, dir, l) == 0 && (path[l] == '/' || path[l] == 0);
}

/* Systemd expands %-specifiers in Environment= and directory settings: a
 * literal % from the caller is written %%. */
void sd_escape_pct(const char *in, char *out, size_t len)
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
int sd_write_atomic(const char *path, const char *text, mode_t mode)
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

int sd_mkdirs(const char *path, mode_t mode)
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
