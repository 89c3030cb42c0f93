/*
 * agent/log.c - the agent's one diagnostic writer: a line on standard
 * error with the "<heapctl>: " prefix, put together on the stack and
 * written with one write(2) (hc_stderr), so it works inside malloc, in a
 * fork child, in the control thread and on error paths (no allocation, no
 * stdio, errno kept); and the agent's threads' descriptors kept out of the
 * program's way (hc_fd_high, hc_fd_table_own).
 *
 * It calls nothing else in agent/: every file of the agent may use it,
 * whatever it is in the middle of.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

void hc_say(const char *first, ...)
{
	char line[1024];
	size_t len = 0;
	va_list ap;
	va_start(ap, first);
	for (const char *s = first; s; s = va_arg(ap, const char *)) {
		size_t n = strlen(s);
		if (n > sizeof line - 2 - len - 11)
			n = sizeof line - 2 - len - 11;
		memcpy(line + len, s, n);
		len += n;
	}
	va_end(ap);
	char out[1040];
	memcpy(out, "<heapctl>: ", 11);
	memcpy(out + 11, line, len);
	out[11 + len] = '\n';
	hc_stderr(out, 12 + len);
}

int hc_fd_high(int fd)
{
	if (fd < 0 || fd >= HC_FD_HIGH)
		return fd;
	int saved = errno, high = fcntl(fd, F_DUPFD_CLOEXEC, HC_FD_HIGH);
	if (high < 0) {
		errno = saved;
		return fd;
	}
	close(fd);
	return high;
}

bool hc_fd_table_own(void)
{
	int none = -1;
	return hc_fd_table_own_keeping(&none);
}

bool hc_fd_table_own_keeping(int *keep)
{
	if (*keep < HC_FD_HIGH)
		*keep = -1;
	/* the copy is made and cut above keep in one call, then below it */
	if (close_range((unsigned)(*keep + 1), ~0U, CLOSE_RANGE_UNSHARE) != 0)
		return false;
	if (*keep > 0)
		close_range(0, (unsigned)*keep - 1, 0);
	hc_fd_own = true;
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (fd < 0)
		fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd == 0) {
		dup2(0, 1);
		dup2(0, 2);
	}
	return true;
}
