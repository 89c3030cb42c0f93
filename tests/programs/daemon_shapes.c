/*
 * tests/programs/daemon_shapes.c - the shapes of classic C daemons, for
 * tests/systemd/daemons.sh to run as systemd units with libheapctl.so
 * preloaded by `heapctl systemd enable` (issue 36).
 *
 * Built on the host and copied into the container (bookworm's glibc is the
 * host's), so heapctl report on the host reads its symbols.  Every mode
 * first keeps 64 blocks of 4 KiB from shapes_keep, a name no other program
 * has, so that each process's dump has samples a report can name; after
 * its fork(s) an idle process only sleeps in pause(), never allocating, so
 * that it is reachable only through the control thread the library starts
 * in its fork handler.
 *
 *   shapes double PIDFILE   Type=forking: fork, the parent waits for the
 *                           child and exits; the child calls setsid, forks,
 *                           writes the grandchild's pid to PIDFILE (before
 *                           the original parent exits, as systemd wants)
 *                           and exits; the grandchild sleeps.
 *   shapes prefork N EMPTY  a master that stays root and forks N workers,
 *                           each switching to nobody and sleeping; the
 *                           last one first chroots into EMPTY and, as
 *                           nobody, sets RLIMIT_NPROC to 0 (haproxy's
 *                           worker does both).  The master sleeps.
 *   shapes busy             allocates and frees 1000 bytes every 2 ms, for
 *                           a unit whose LimitNPROC= leaves the library no
 *                           control thread: commands are served then.
 *
 * Workers are named (comm) "shapes-worker" and "shapes-chroot", so that the
 * test tells them apart in /proc.  A failure says what failed on stderr
 * (the journal) and exits 3.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *kept[64];
static void *volatile sink;

static void *__attribute__((noinline)) shapes_keep(size_t n)
{
	char *p = malloc(n);
	if (p)
		memset(p, 7, n);
	return p;
}

static void die(const char *what)
{
	perror(what);
	_exit(3);
}

static void __attribute__((noreturn)) idle(void)
{
	for (;;)
		pause();
}

static void become_nobody(void)
{
	if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
		die("shapes: switching to nobody");
}

/* write "PID\n" to PATH without stdio (which would allocate) */
static void write_pidfile(const char *path, pid_t pid)
{
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%d\n", (int)pid);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd))
		die("shapes: writing the pid file");
}

static int run_double(const char *pidfile)
{
	pid_t c = fork();
	if (c < 0)
		die("shapes: fork");
	if (c > 0) {
		int st;
		/* the pid file exists when systemd sees the main process exit */
		if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
			return 3;
		return 0;
	}
	setsid();
	if (chdir("/"))
		die("shapes: chdir /");
	pid_t g = fork();
	if (g < 0)
		die("shapes: fork");
	if (g > 0) {
		write_pidfile(pidfile, g);
		_exit(0);
	}
	idle();
}

static int run_prefork(int n, const char *empty)
{
	for (int i = 0; i < n; i++) {
		pid_t c = fork();
		if (c < 0)
			die("shapes: fork");
		if (c > 0)
			continue;
		if (i < n - 1) {
			prctl(PR_SET_NAME, "shapes-worker");
			become_nobody();
			idle();
		}
		prctl(PR_SET_NAME, "shapes-chroot");
		if (chroot(empty) || chdir("/"))
			die("shapes: chroot");
		become_nobody();
		struct rlimit none = { 0, 0 };
		if (setrlimit(RLIMIT_NPROC, &none))
			die("shapes: setrlimit RLIMIT_NPROC 0");
		idle();
	}
	idle();
}

static void __attribute__((noreturn)) run_busy(void)
{
	for (;;) {
		sink = shapes_keep(1000);
		free(sink);
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
}

int main(int argc, char **argv)
{
	for (int i = 0; i < 64; i++)
		kept[i] = shapes_keep(4096);
	if (argc == 3 && !strcmp(argv[1], "double"))
		return run_double(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "prefork") && atoi(argv[2]) > 0)
		return run_prefork(atoi(argv[2]), argv[3]);
	if (argc == 2 && !strcmp(argv[1], "busy"))
		run_busy();
	fprintf(stderr, "usage: shapes double PIDFILE | prefork N EMPTY | busy\n");
	return 2;
}
