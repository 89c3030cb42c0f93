/*
 * agent/namespaces.c - unshare(2) and setns(2) with the control thread
 * stepped aside.
 *
 * The kernel refuses, with EINVAL, to move a process that has more than one
 * thread into a new user namespace (unshare(CLONE_NEWUSER), which implies
 * CLONE_THREAD and CLONE_FS, or setns into one), into another mount
 * namespace with setns (the filesystem context must not be shared), or to
 * unshare CLONE_THREAD, CLONE_SIGHAND or CLONE_VM.  The library's control
 * thread would make every process fail those calls, so sandboxing programs
 * (unshare --user, bwrap, container runtimes, browsers) broke under the
 * preload.  These wrappers stop the control thread, make the call, and
 * start the thread again: a program that is single-threaded but for us
 * succeeds, one that really has other threads gets the kernel's EINVAL as
 * it would without the library.
 *
 * pthread_join returns when the thread's exit has cleared its tid, which
 * is a little before the kernel takes it out of the thread group and drops
 * its share of the filesystem context; so an EINVAL right after the join
 * is retried for a few milliseconds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define SOLO_UNSHARE (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM)
#define SOLO_SETNS   (CLONE_NEWUSER | CLONE_NEWNS)

/* The system call, retried while the stopped thread is still leaving. */
static long solo_call(long nr, long a, long b)
{
	long r = syscall(nr, a, b);
	for (unsigned us = 50; r < 0 && errno == EINVAL && us <= 6400; us *= 2) {
		struct timespec ts = { 0, (long)us * 1000 };
		nanosleep(&ts, NULL);
		r = syscall(nr, a, b);
	}
	return r;
}

static int stepped_aside(long nr, long a, long b)
{
	int saved = errno;
	bool was = hc_control_pause();
	errno = saved;
	long r = was ? solo_call(nr, a, b) : syscall(nr, a, b);
	saved = errno;
	hc_control_resume(was);
	errno = saved;
	return (int)r;
}

HC_EXPORT int unshare(int flags)
{
	if (!(flags & SOLO_UNSHARE))
		return (int)syscall(SYS_unshare, flags);
	return stepped_aside(SYS_unshare, flags, 0);
}

/* nstype 0 accepts any kind of namespace, so it may be a user or mount
 * namespace; a pidfd's nstype is a set of CLONE_NEW* flags. */
HC_EXPORT int setns(int fd, int nstype)
{
	if (nstype != 0 && !(nstype & SOLO_SETNS))
		return (int)syscall(SYS_setns, fd, nstype);
	return stepped_aside(SYS_setns, fd, nstype);
}
