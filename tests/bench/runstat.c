/*
 * runstat — run one command, report its wall time and peak RSS.
 *
 *   runstat [-p LIB] [-t SECONDS] [-o OUT] [-e ERR] -- PROG [ARG...]
 *
 * Forks, sets LD_PRELOAD=LIB in the child only (without -p, LD_PRELOAD is
 * removed, so "no preload" really means none), redirects the child's stdout
 * and stderr to OUT and ERR, execs PROG, and waits with wait4(). Prints one
 * line on its own stdout:
 *
 *   <wall seconds> <peak RSS KiB> <status> <user s> <sys s> <minor faults>
 *
 * wall is CLOCK_MONOTONIC from before fork to after wait4; peak RSS is the
 * child's ru_maxrss; status is the exit code, 128+N if killed by signal N,
 * 124 if it ran past the timeout (then it is killed), 127 if exec failed.
 * runstat itself is never preloaded, so a broken allocator cannot skew or
 * break the measurement.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out;

static void on_alarm(int sig)
{
	(void)sig;
	timed_out = 1;
}

static void redirect(const char *path, int fd)
{
	int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f < 0 || dup2(f, fd) < 0) {
		fprintf(stderr, "runstat: %s: %s\n", path, strerror(errno));
		_exit(127);
	}
}

int main(int argc, char **argv)
{
	const char *lib = NULL, *out = NULL, *err = NULL;
	unsigned timeout = 0;
	int c;

	while ((c = getopt(argc, argv, "+p:t:o:e:")) != -1) {
		switch (c) {
		case 'p': lib = optarg; break;
		case 't': timeout = (unsigned)atoi(optarg); break;
		case 'o': out = optarg; break;
		case 'e': err = optarg; break;
		default: goto usage;
		}
	}
	if (optind >= argc)
		goto usage;

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid < 0) {
		perror("runstat: fork");
		return 1;
	}
	if (pid == 0) {
		if (out)
			redirect(out, 1);
		if (err)
			redirect(err, 2);
		if (lib && *lib)
			setenv("LD_PRELOAD", lib, 1);
		else
			unsetenv("LD_PRELOAD");
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "runstat: %s: %s\n", argv[optind], strerror(errno));
		_exit(127);
	}

	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL); /* no SA_RESTART: wait4 gets EINTR */
	alarm(timeout);

	int st;
	struct rusage ru;
	while (wait4(pid, &st, 0, &ru) < 0) {
		if (errno != EINTR) {
			perror("runstat: wait4");
			return 1;
		}
		if (timed_out)
			kill(pid, SIGKILL);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);

	int status = timed_out ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	printf("%.3f %ld %d %.3f %.3f %ld\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9, ru.ru_maxrss,
	    status, ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6,
	    ru.ru_minflt);
	return 0;

usage:
	fprintf(stderr,
	    "usage: runstat [-p LIB] [-t SECONDS] [-o OUT] "
	    "[-e ERR] -- PROG [ARG...]\n");
	return 2;
}
