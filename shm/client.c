/*
 * shm/client.c - the client's half of the segment library: find the
 * segment of a PID (also across PID and mount namespaces), check that it is
 * what it claims to be, and post commands.  Linked into heapctl only.
 *
 * Where the segment is: the target names it after its own pid, which is the
 * last NSpid entry of /proc/PID/status; the file is in the target's /dev/shm,
 * reached through /proc/PID/root.  When /proc/PID/root is closed to us (no
 * ptrace access) and the target shares our PID namespace, /dev/shm is tried.
 *
 * What is checked before a byte is believed: the file's owner is the
 * process's uid; magic, ABI and size; the pid and start time recorded in it
 * match the process now running with that pid (else it is a stale segment
 * of an earlier process, and is removed); and, where /proc/PID/maps is
 * readable, that the process really has it mapped.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "heapctl_shm.h"

static int fail(char *err, size_t len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t len, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return code;
}

static bool read_text(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	return true;
}

/* NSpid's last entry and the real uid, from /proc/PID/status. */
static bool proc_status(int pid, int *nspid, unsigned *uid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	if (!read_text(path, buf, sizeof buf))
		return false;
	*nspid = pid;
	*uid = UINT_MAX;
	for (char *line = buf; line && *line; ) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (strncmp(line, "NSpid:", 6) == 0) {
			char *last = NULL, *save = NULL;
			for (char *tok = strtok_r(line + 6, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
				last = tok;
			if (last)
				*nspid = atoi(last);
		} else if (strncmp(line, "Uid:", 4) == 0) {
			*uid = (unsigned)strtoul(line + 4, NULL, 10);
		}
		line = next;
	}
	return *uid != UINT_MAX;
}

static const char *user_name(unsigned uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(buf, len, "%s (uid %u)", pw->pw_name, uid);
	else
		snprintf(buf, len, "uid %u", uid);
	return buf;
}

/* Opens the segment file; returns the fd, or -errno (EACCES wins over
 * ENOENT when both ways were tried). */
static int open_segment(int pid, int nspid, char *path, size_t len)
{
	char root[64];
	snprintf(root, sizeof root, "/proc/%d/root", pid);
	hc_shm_path(path, len, root, nspid);
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	int err = errno;
	if (nspid != pid)
		return -err;
	/* /proc/PID/root closed to us; the target shares our PID namespace */
	char direct[320];
	hc_shm_path(direct, sizeof direct, NULL, pid);
	fd = open(direct, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		snprintf(path, len, "%s", direct);
		return fd;
	}
	if (errno == EACCES || errno == EPERM) {
		snprintf(path, len, "%s", direct);
		return -errno;
	}
	return -err;
}

static bool maps_mention(int pid, const char *needle, bool *readable)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	*readable = f != NULL;
	if (f == NULL)
		return false;
	char line[4096];
	bool found = false;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

bool hc_shm_alive(const hc_shm_target_t *t)
{
	if (kill(t->pid, 0) != 0 && errno == ESRCH)
		return false;
	bool ended;
	uint64_t st = hc_shm_proc_start_time(t->pid, &ended);
	return !ended && st != 0 && st == t->start_time;
}

int hc_shm_open(int pid, hc_shm_target_t *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof *t);
	t->pid = pid;
	char who[96];
	if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH))
		return fail(err, errlen, HC_EXIT_NOPROC, "no process with PID %d", pid);
	if (!proc_status(pid, &t->nspid, &t->uid))
		return fail(err, errlen, HC_EXIT_NOPROC, "no process with PID %d", pid);
	bool ended;
	t->start_time = hc_shm_proc_start_time(pid, &ended);
	if (ended)
		return fail(err, errlen, HC_EXIT_NOPROC, "process %d has exited", pid);

	int fd = open_segment(pid, t->nspid, t->path, sizeof t->path);
	if (fd == -EACCES || fd == -EPERM)
		return fail(err, errlen, HC_EXIT_PERM,
		    "permission denied: process %d belongs to %s; run heapctl as that user or as root",
		    pid, user_name(t->uid, who, sizeof who));
	if (fd < 0) {
		if (kill(pid, 0) != 0 && errno == ESRCH)
			return fail(err, errlen, HC_EXIT_NOPROC, "no process with PID %d", pid);
		return fail(err, errlen, HC_EXIT_NOLIB,
		    "process %d is not running libheapctl.so (start it with LD_PRELOAD=/path/to/libheapctl.so)",
		    pid);
	}
	struct stat st;
	hc_shm_header_t first;
	int code = HC_EXIT_OK;
	if (fstat(fd, &st) != 0 || st.st_size < 16 || pread(fd, &first, 16, 0) != 16) {
		code = fail(err, errlen, HC_EXIT_ABI, "segment %s of process %d is truncated", t->path, pid);
	} else if (st.st_uid != t->uid && st.st_uid != 0) {
		code = fail(err, errlen, HC_EXIT_PERM,
		    "segment %s belongs to uid %u but process %d to %s: not trusted",
		    t->path, (unsigned)st.st_uid, pid, user_name(t->uid, who, sizeof who));
	} else if (first.magic != HC_SHM_MAGIC) {
		code = fail(err, errlen, HC_EXIT_ABI, "segment %s of process %d is corrupt (bad magic)",
		    t->path, pid);
	} else if (first.abi != HC_SHM_ABI) {
		code = fail(err, errlen, HC_EXIT_ABI,
		    "process %d runs a libheapctl.so with segment ABI %u; this heapctl speaks ABI %u (use the heapctl of the same release)",
		    pid, first.abi, HC_SHM_ABI);
	} else if (first.size != sizeof(hc_shm_t) || (uint64_t)st.st_size < first.size) {
		code = fail(err, errlen, HC_EXIT_ABI, "segment %s of process %d is corrupt (size %u, file %lld)",
		    t->path, pid, first.size, (long long)st.st_size);
	}
	if (code) {
		close(fd);
		return code;
	}
	void *m = mmap(NULL, sizeof(hc_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return fail(err, errlen, HC_EXIT_FAILED, "cannot map %s: %s", t->path, strerror(errno));
	t->seg = m;
	const hc_shm_header_t *h = &t->seg->hdr;
	for (int i = 0; i < 40 && !__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE); i++) {
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);      /* a process still starting */
	}
	if (__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) != 1) {
		hc_shm_close(t);
		return fail(err, errlen, HC_EXIT_ABI, "segment %s of process %d is corrupt (never ready)",
		    t->path, pid);
	}
	char name[48];
	snprintf(name, sizeof name, "/" HC_SHM_BASENAME "%d", t->nspid);
	bool readable = false;
	bool mapped = maps_mention(pid, name, &readable);
	if (h->pid != t->nspid || h->start_time != t->start_time || (readable && !mapped)) {
		/* an earlier process with this pid, or this one before an exec */
		bool removed = unlink(t->path) == 0;
		hc_shm_close(t);
		return fail(err, errlen, HC_EXIT_NOLIB,
		    "process %d is not running libheapctl.so (%s segment of an earlier process %d)",
		    pid, removed ? "removed the stale" : "found a stale", pid);
	}
	return HC_EXIT_OK;
}

void hc_shm_close(hc_shm_target_t *t)
{
	if (t->seg)
		munmap(t->seg, sizeof(hc_shm_t));
	t->seg = NULL;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	nanosleep(&ts, NULL);
}

int hc_shm_call(hc_shm_target_t *t, const hc_shm_req_t *req, hc_shm_rep_t *rep,
    uint64_t timeout_ns, char *err, size_t errlen)
{
	hc_shm_mailbox_t *box = &t->seg->box;
	uint64_t deadline = hc_shm_mono_ns() + timeout_ns;
	double secs = (double)timeout_ns / 1e9;
	if (!__atomic_load_n(&t->seg->hdr.control, __ATOMIC_ACQUIRE))
		return fail(err, errlen, HC_EXIT_NOLIB,
		    "process %d has no control thread (it is exiting, or could not start one)", t->pid);

	/* claim a slot */
	hc_shm_slot_t *sl = NULL;
	while (sl == NULL) {
		for (unsigned i = 0; i < HC_SHM_SLOTS && sl == NULL; i++) {
			uint32_t expect = HC_SLOT_FREE;
			if (__atomic_compare_exchange_n(&box->slot[i].state, &expect, HC_SLOT_CLAIMED,
			    false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				sl = &box->slot[i];
		}
		if (sl)
			break;
		if (!hc_shm_alive(t))
			return fail(err, errlen, HC_EXIT_NOPROC, "process %d exited", t->pid);
		if (hc_shm_mono_ns() > deadline)
			return fail(err, errlen, HC_EXIT_TIMEOUT,
			    "process %d did not answer within %g s (all %d command slots busy)",
			    t->pid, secs, HC_SHM_SLOTS);
		sleep_ns(1000000);
	}
	uint32_t gen = __atomic_add_fetch(&sl->gen, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->stamp_ns, hc_shm_mono_ns(), __ATOMIC_RELAXED);
	sl->client_pid = getpid();
	memcpy(&sl->req, req, sizeof *req);
	__atomic_store_n(&sl->state, HC_SLOT_POSTED, __ATOMIC_RELEASE);
	__atomic_add_fetch(&box->doorbell, 1, __ATOMIC_RELEASE);
	hc_shm_futex_wake(&box->doorbell, 1);

	/* wait for the reply, watching the target and the clock */
	for (;;) {
		uint32_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
		if (st == HC_SLOT_DONE) {
			memcpy(rep, &sl->rep, sizeof *rep);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			bool mine = __atomic_load_n(&sl->gen, __ATOMIC_RELAXED) == gen;
			uint32_t done = HC_SLOT_DONE;
			__atomic_compare_exchange_n(&sl->state, &done, HC_SLOT_FREE, false,
			    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
			if (!mine)
				return fail(err, errlen, HC_EXIT_ABI,
				    "the reply of process %d was overwritten (is something else writing %s?)",
				    t->pid, t->path);
			rep->text[sizeof rep->text - 1] = 0;
			if (rep->code > HC_REP_NOPROF)
				return fail(err, errlen, HC_EXIT_ABI, "process %d sent a reply heapctl does not know (code %u)",
				    t->pid, rep->code);
			return HC_EXIT_OK;
		}
		if (st != HC_SLOT_POSTED && st != HC_SLOT_BUSY)
			return fail(err, errlen, HC_EXIT_ABI,
			    "the command slot of process %d was taken away (state %u; is something else writing %s?)",
			    t->pid, st, t->path);
		uint64_t now = hc_shm_mono_ns();
		if (now >= deadline) {
			uint32_t posted = HC_SLOT_POSTED;
			__atomic_compare_exchange_n(&sl->state, &posted, HC_SLOT_FREE, false,
			    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
			return fail(err, errlen, HC_EXIT_TIMEOUT,
			    "process %d did not answer within %g s", t->pid, secs);
		}
		uint64_t slice = deadline - now < 50000000ull ? deadline - now : 50000000ull;
		if (hc_shm_futex_wait(&sl->state, st, slice) == ETIMEDOUT && !hc_shm_alive(t))
			return fail(err, errlen, HC_EXIT_NOPROC, "process %d exited before answering", t->pid);
	}
}

int hc_shm_scan(int *pids, int max)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		int nspid;
		unsigned uid;
		if (!proc_status((int)pid, &nspid, &uid))
			continue;
		char path[320], root[64];
		struct stat st;
		snprintf(root, sizeof root, "/proc/%ld/root", pid);
		hc_shm_path(path, sizeof path, root, nspid);
		bool found = stat(path, &st) == 0;
		if (!found && (errno == EACCES || errno == EPERM) && nspid == pid) {
			hc_shm_path(path, sizeof path, NULL, (int)pid);
			found = stat(path, &st) == 0;
		}
		if (found)
			pids[n++] = (int)pid;
	}
	closedir(d);
	return n;
}
