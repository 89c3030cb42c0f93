/*
 * shm/client.c - the client's half of the segment library: find the
 * segment of a PID (also across PID and mount namespaces), check that it is
 * what it claims to be, and post commands.  Linked into heapctl only.
 *
 * Where the segment is: the target names it after its own pid, which is the
 * last NSpid entry of /proc/PID/status (heapctl.<pid>, or heapctl.<pid>.<hex>
 * where that name was taken); the exact name is in /proc/PID/maps, and
 * where that cannot be read, the target's /dev/shm is searched for both
 * forms.  The directory is reached through /proc/PID/root; when that is
 * closed to us (no ptrace access) and the target shares our PID namespace,
 * /dev/shm is tried.
 *
 * What is checked before a byte is believed: the file is a regular file
 * (opened with O_NOFOLLOW and O_NONBLOCK: a FIFO planted in /dev/shm cannot
 * hang us) owned by the process's uid or root; magic, ABI and size; the pid
 * and start time recorded in it match the process now running with that
 * pid; and, where /proc/PID/maps is readable, that the process really has
 * it mapped.  A segment that fails is removed only when it is provably a
 * dead one of that process's PID namespace: its header names that
 * namespace and that pid, and the process with the pid is a later one (or
 * this one after an exec).  Anything else is left alone.
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

static int fail(char *err, size_t len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

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

/* NSpid's last entry and the real and effective uids, from /proc/PID/status. */
static bool proc_status(int pid, int *nspid, unsigned *uid, unsigned *euid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	if (!read_text(path, buf, sizeof buf))
		return false;
	*nspid = pid;
	*uid = UINT_MAX;
	for (char *line = buf; line && *line;) {
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
			char *end;
			*uid = (unsigned)strtoul(line + 4, &end, 10);
			*euid = (unsigned)strtoul(end, NULL, 10);
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

/* The segment name the process has mapped, from /proc/PID/maps: true and
 * name set if found; *readable tells whether maps could be read.  The
 * maps show a chroot's /dev/shm under the chroot's directory
 * (/srv/root/dev/shm/heapctl.N): any path ending so counts. */
static bool maps_segment(int pid, int nspid, char *name, size_t len, bool *readable)
{
	char path[64], line[4096];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	*readable = f != NULL;
	if (f == NULL)
		return false;
	bool found = false;
	while (!found && fgets(line, sizeof line, f)) {
		char *p = strstr(line, HC_SHM_DIR "/" HC_SHM_BASENAME);
		if (p == NULL)
			continue;
		p += sizeof HC_SHM_DIR;
		p[strcspn(p, " \n")] = 0;
		if (hc_shm_name_pid(p) == nspid && strlen(p) < len) {
			strcpy(name, p);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Open name in dir for a client: never through a symlink, never blocking
 * on a FIFO, regular files only.  fd, or -errno. */
static int open_in(const char *dir, const char *name, char *path, size_t len)
{
	if ((size_t)snprintf(path, len, "%.200s/%.63s", dir, name) >= len)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EPROTOTYPE;
	}
	return fd;
}

/* Whether processes p and q (0: this one) share a mount namespace. */
static bool same_mntns(int p, int q)
{
	char a[48], b[48];
	struct stat x, y;
	snprintf(a, sizeof a, "/proc/%d/ns/mnt", p);
	if (q)
		snprintf(b, sizeof b, "/proc/%d/ns/mnt", q);
	else
		snprintf(b, sizeof b, "/proc/self/ns/mnt");
	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_ino == y.st_ino && x.st_dev == y.st_dev;
}

/* The parent of pid, from field 4 of /proc/PID/stat; 0 if unknown. */
static int parent_of(int pid)
{
	char path[48], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if (hc_shm_read_file(path, buf, sizeof buf) <= 0)
		return 0;
	const char *r = strrchr(buf, ')');
	int ppid = 0;
	return r && sscanf(r + 1, " %*c %d", &ppid) == 1 ? ppid : 0;
}

/* The root under which a process's files are found: /proc/PID/root, or
 * for a process that chrooted after its fork (haproxy's workers: its root
 * has no /dev/shm) the root of its nearest ancestor in the same mount
 * namespace whose root has one (its master).  0, or -1 if there is none. */
int hc_shm_proc_root(int pid, char *out, size_t len)
{
	struct stat st;
	snprintf(out, len, "/proc/%d/root", pid);
	char shm[96];
	snprintf(shm, sizeof shm, "/proc/%d/root" HC_SHM_DIR, pid);
	if (stat(shm, &st) == 0 || errno != ENOENT)
		return 0;
	for (int q = pid, i = 0; i < 8; i++) {
		q = parent_of(q);
		if (q <= 0 || !same_mntns(pid, q))
			break;
		snprintf(shm, sizeof shm, "/proc/%d/root" HC_SHM_DIR, q);
		if (stat(shm, &st) == 0 && S_ISDIR(st.st_mode)) {
			snprintf(out, len, "/proc/%d/root", q);
			return 0;
		}
	}
	return -1;
}

/* The directory holding the process's segments: through /proc/PID/root,
 * or our /dev/shm when that is closed to us and the PID namespace is ours.
 * A process that chrooted after its fork made its segment (haproxy's
 * workers) has no /dev/shm in its root: its segment is in the /dev/shm of
 * its mount namespace, which we see when the namespace is ours, and else
 * through an ancestor in that namespace (hc_shm_proc_root).  Returns 0 or
 * -errno of the first way. */
static int segment_dir(int pid, int nspid, char *dir, size_t len)
{
	struct stat st;
	snprintf(dir, len, "/proc/%d/root" HC_SHM_DIR, pid);
	if (stat(dir, &st) == 0)
		return 0;
	int err = errno;
	if (err == ENOENT && nspid == pid && same_mntns(pid, 0)) {
		snprintf(dir, len, HC_SHM_DIR);
		return 0;
	}
	char root[64];
	if (err == ENOENT && hc_shm_proc_root(pid, root, sizeof root) == 0 &&
	    (size_t)snprintf(dir, len, "%s" HC_SHM_DIR, root) < len && stat(dir, &st) == 0)
		return 0;
	snprintf(dir, len, "/proc/%d/root" HC_SHM_DIR, pid);
	if (nspid != pid || (err != EACCES && err != EPERM))
		return -err;
	snprintf(dir, len, HC_SHM_DIR);
	return 0;
}

/* Names in dir that may be the segment of nspid, best first: the maps name
 * if known, else heapctl.<nspid> and every heapctl.<nspid>.<hex>. */
static int candidates(const char *dir, int nspid, const char *mapped, char (*out)[64], int max)
{
	int n = 0;
	if (mapped) {
		snprintf(out[n++], 64, "%s", mapped);
		return n;
	}
	snprintf(out[n++], 64, HC_SHM_BASENAME "%d", nspid);
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL && n < max)
		if (hc_shm_name_pid(e->d_name) == nspid && strcmp(e->d_name, out[0]) != 0)
			snprintf(out[n++], 64, "%.63s", e->d_name);
	if (d)
		closedir(d);
	return n;
}

bool hc_shm_alive(const hc_shm_target_t *t)
{
	if (kill(t->pid, 0) != 0 && errno == ESRCH)
		return false;
	bool ended;
	uint64_t st = hc_shm_proc_start_time(t->pid, &ended);
	return !ended && st != 0 && st == t->start_time;
}

/* The PID namespace of a process, by inode; 0 if it cannot be read. */
static uint64_t pidns_of(int pid)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%d/ns/pid", pid);
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* One of the 40 waits (200 ms in all) given a process still making its
 * segment, at each of two steps. */
static void pause_starting(void)
{
	struct timespec ts = { 0, 5000000 };
	nanosleep(&ts, NULL);
}

/* The segment's first 16 bytes (magic, abi, size): 1, or 0 while the file
 * is shorter, or -1 when fstat fails. */
static int read_start(int fd, struct stat *st, hc_shm_header_t *first)
{
	if (fstat(fd, st) != 0)
		return -1;
	return st->st_size >= 16 && pread(fd, first, 16, 0) == 16;
}

/* Open, check and map one candidate.  HC_EXIT_OK with t->seg set; NOLIB
 * when it is not this process's segment (why says so when there is more to
 * say; a file we may not open is named in denied, and its owner in
 * *denied_uid, -1 unknown); other codes are final. */
static int try_segment(hc_shm_target_t *t, const char *dir, const char *name, bool readable, bool in_maps, char *why,
    size_t whylen, char (*denied)[320], int64_t *denied_uid)
{
	int pid = t->pid;
	char who[96];
	int fd = open_in(dir, name, t->path, sizeof t->path);
	struct stat st;
	if (fd == -EACCES || fd == -EPERM) {
		snprintf(*denied, sizeof *denied, "%s", t->path);
		*denied_uid = lstat(t->path, &st) == 0 ? (int64_t)st.st_uid : -1;
	}
	if (fd < 0)
		return HC_EXIT_NOLIB;
	hc_shm_header_t first;
	int code = HC_EXIT_OK;
	int got = read_start(fd, &st, &first);
	/* A process creates its segment, then sizes it, then writes the
	 * header: caught in between, the file is short or its magic still 0.
	 * Give it the time the ready flag gets below. */
	/* the process makes its segment with its effective uid: another than
	 * the real one in a set-user-ID program */
	bool owner_ok = st.st_uid == t->uid || st.st_uid == t->euid || st.st_uid == 0;
	for (int i = 0; i < 40 && got >= 0 && (got == 0 || first.magic == 0) && owner_ok; i++) {
		pause_starting();
		got = read_start(fd, &st, &first);
	}
	if (got <= 0) {
		code = fail(why, whylen, HC_EXIT_ABI, "segment %s of process %d is truncated", t->path, pid);
	} else if (!owner_ok) {
		code = fail(why, whylen, HC_EXIT_PERM, "segment %s belongs to uid %u but process %d to %s: not trusted",
		    t->path, (unsigned)st.st_uid, pid, user_name(t->uid, who, sizeof who));
	} else if (first.magic != HC_SHM_MAGIC) {
		code = fail(why, whylen, HC_EXIT_ABI, "segment %s of process %d is corrupt (bad magic)", t->path, pid);
	} else if (first.abi != HC_SHM_ABI) {
		code = fail(why, whylen, HC_EXIT_ABI,
		    "process %d runs a libheapctl.so with segment ABI %u; this heapctl speaks ABI %u (use the heapctl of the same release)",
		    pid, first.abi, HC_SHM_ABI);
	} else if (first.size != sizeof(hc_shm_t) || (uint64_t)st.st_size < first.size) {
		code = fail(why, whylen, HC_EXIT_ABI, "segment %s of process %d is corrupt (size %u, file %lld)",
		    t->path, pid, first.size, (long long)st.st_size);
	}
	if (code) {
		close(fd);
		/* mapped by the process, it is its segment, damaged; otherwise it may
		 * be anything planted under the name, and is passed over */
		return in_maps || !readable ? code : HC_EXIT_NOLIB;
	}
	void *m = mmap(NULL, sizeof(hc_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return fail(why, whylen, HC_EXIT_FAILED, "cannot map %s: %s", t->path, strerror(errno));
	t->seg = m;
	const hc_shm_header_t *h = &t->seg->hdr;
	for (int i = 0; i < 40 && !__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE); i++)
		pause_starting();
	if (__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) != 1) {
		hc_shm_close(t);
		if (!in_maps)
			return HC_EXIT_NOLIB;
		return fail(why, whylen, HC_EXIT_ABI, "segment %s of process %d is corrupt (never ready)", t->path,
		    pid);
	}
	if (h->pid == t->nspid && h->start_time == t->start_time) {
		if (in_maps || !readable)
			return HC_EXIT_OK;
		/* the maps were read before the segment was ready: a process that
		 * was creating it then (a fork child publishing its own, one that
		 * is starting) has mapped it by now.  Read them again before
		 * calling it stale: a daemon that looks every half second would
		 * otherwise delete the segment of every new process it catches in
		 * that moment. */
		char now[64];
		bool again;
		if (maps_segment(pid, t->nspid, now, sizeof now, &again) && strcmp(now, name) == 0)
			return HC_EXIT_OK;
	}
	/* not this process's: an earlier process with this pid, this one before
	 * an exec, a copy claiming another pid, or a process of another PID
	 * namespace sharing /dev/shm.  Removed only when it claims this
	 * process's own PID namespace, where no live process publishes under
	 * another pid's name and this pid is now this process's. */
	uint64_t ns = pidns_of(pid);
	bool stale = ns != 0 && h->pidns == ns &&
	    (h->pid != t->nspid || h->start_time != t->start_time || (readable && !in_maps));
	bool removed = stale && unlink(t->path) == 0;
	hc_shm_close(t);
	if (stale)
		fail(why, whylen, HC_EXIT_NOLIB,
		    "process %d is not running libheapctl.so (%s segment of an earlier process %d)", pid,
		    removed ? "removed the stale" : "found a stale", pid);
	return HC_EXIT_NOLIB;
}

int hc_shm_open(int pid, hc_shm_target_t *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof *t);
	t->pid = pid;
	char who[96];
	if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH))
		return fail(err, errlen, HC_EXIT_NOPROC, "no process with PID %d", pid);
	if (!proc_status(pid, &t->nspid, &t->uid, &t->euid))
		return fail(err, errlen, HC_EXIT_NOPROC, "no process with PID %d", pid);
	bool ended;
	t->start_time = hc_shm_proc_start_time(pid, &ended);
	if (ended)
		return fail(err, errlen, HC_EXIT_NOPROC, "process %d has exited", pid);

	char dir[96];
	int dirr = segment_dir(pid, t->nspid, dir, sizeof dir);
	if (dirr == -EACCES || dirr == -EPERM)
		return fail(err, errlen, HC_EXIT_PERM,
		    "permission denied: process %d belongs to %s; run heapctl as that user or as root", pid,
		    user_name(t->uid, who, sizeof who));
	if (dirr < 0) {
		if (kill(pid, 0) != 0 && errno == ESRCH)
			return fail(err, errlen, HC_EXIT_NOPROC, "no process with PID %d", pid);
		return fail(err, errlen, HC_EXIT_NOLIB,
		    "process %d is not running libheapctl.so (start it with LD_PRELOAD=/path/to/libheapctl.so)", pid);
	}
	char mapped[64], names[16][64];
	bool readable = false;
	bool in_maps = maps_segment(pid, t->nspid, mapped, sizeof mapped, &readable);
	int nc = candidates(dir, t->nspid, in_maps ? mapped : NULL, names, 16);
	int code = HC_EXIT_NOLIB;
	char denied[320] = "";
	int64_t denied_uid = -1;
	char why[512] = "";
	for (int i = 0; i < nc; i++) {
		code = try_segment(t, dir, names[i], readable, in_maps, why, sizeof why, &denied, &denied_uid);
		if (code == HC_EXIT_OK)
			return HC_EXIT_OK;
		if (code != HC_EXIT_NOLIB)
			break; /* corrupt, another ABI, not trusted: say so */
	}
	/* a segment of the process's effective user (a set-user-ID program,
	 * injected) that its real user may not open: it does run the library */
	if (code == HC_EXIT_NOLIB && denied[0] && denied_uid == t->euid && t->euid != t->uid)
		return fail(err, errlen, HC_EXIT_PERM,
		    "permission denied: process %d runs libheapctl.so, but its segment %s belongs to %s, its "
		    "effective user (a set-user-ID program); run heapctl as that user or as root",
		    pid, denied, user_name(t->euid, who, sizeof who));
	if (code == HC_EXIT_NOLIB && denied[0] && t->uid != geteuid())
		return fail(err, errlen, HC_EXIT_PERM,
		    "permission denied: process %d belongs to %s; run heapctl as that user or as root", pid,
		    user_name(t->uid, who, sizeof who));
	if (code == HC_EXIT_NOLIB && why[0] == 0 && kill(pid, 0) != 0 && errno == ESRCH)
		return fail(err, errlen, HC_EXIT_NOPROC, "no process with PID %d", pid);
	if (code == HC_EXIT_NOLIB && why[0] == 0)
		return fail(err, errlen, HC_EXIT_NOLIB,
		    "process %d is not running libheapctl.so (start it with LD_PRELOAD=/path/to/libheapctl.so)", pid);
	return fail(err, errlen, code, "%s", why);
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

int hc_shm_call(hc_shm_target_t *t, const hc_shm_req_t *req, hc_shm_rep_t *rep, uint64_t timeout_ns, char *err,
    size_t errlen)
{
	hc_shm_mailbox_t *box = &t->seg->box;
	uint64_t deadline = hc_shm_mono_ns() + timeout_ns;
	double secs = (double)timeout_ns / 1e9;
	/* without its thread (control_err says why pthread_create failed) a
	 * process serves the mailbox from its allocations */
	int nothread = __atomic_load_n(&t->seg->hdr.control_err, __ATOMIC_RELAXED);
	if (!__atomic_load_n(&t->seg->hdr.control, __ATOMIC_ACQUIRE) && nothread == 0)
		return fail(err, errlen, HC_EXIT_NOLIB,
		    "process %d has no control thread (it is exiting, or was ejected)", t->pid);
	if (__atomic_load_n(&t->seg->hdr.control, __ATOMIC_ACQUIRE))
		nothread = 0;

	/* claim a slot: {FREE, g} -> {CLAIMED, g + 1} in one CAS */
	hc_shm_slot_t *sl = NULL;
	uint32_t gen = 0;
	while (sl == NULL) {
		for (unsigned i = 0; i < HC_SHM_SLOTS && sl == NULL; i++) {
			uint64_t w = hc_shm_slot_load(&box->slot[i]);
			uint32_t g = (uint32_t)(w >> 32);
			if ((uint32_t)w == HC_SLOT_FREE &&
			    hc_shm_slot_cas(&box->slot[i], HC_SLOT_FREE, g, HC_SLOT_CLAIMED, g + 1)) {
				sl = &box->slot[i];
				gen = g + 1;
			}
		}
		if (sl)
			break;
		if (!hc_shm_alive(t))
			return fail(err, errlen, HC_EXIT_NOPROC, "process %d exited", t->pid);
		if (hc_shm_mono_ns() > deadline)
			return fail(err, errlen, HC_EXIT_TIMEOUT,
			    "process %d did not answer within %g s (all %d command slots busy)", t->pid, secs,
			    HC_SHM_SLOTS);
		/* the target looks at its slots (and frees those of clients
		 * that died) when the doorbell moves */
		__atomic_add_fetch(&box->doorbell, 1, __ATOMIC_RELEASE);
		hc_shm_futex_wake(&box->doorbell, 1);
		sleep_ns(1000000);
	}
	__atomic_store_n(&sl->stamp_ns, hc_shm_mono_ns(), __ATOMIC_RELAXED);
	sl->client_pid = getpid();
	memcpy(&sl->req, req, sizeof *req);
	if (!hc_shm_slot_cas(sl, HC_SLOT_CLAIMED, gen, HC_SLOT_POSTED, gen))
		return fail(err, errlen, HC_EXIT_TIMEOUT,
		    "process %d took the command slot back before the command was posted (heapctl was "
		    "stopped for more than %g s?)",
		    t->pid, (double)HC_SHM_LEASE_NS / 1e9);
	__atomic_add_fetch(&box->doorbell, 1, __ATOMIC_RELEASE);
	hc_shm_futex_wake(&box->doorbell, 1);

	/* wait for the reply, watching the target and the clock */
	for (;;) {
		uint64_t w = hc_shm_slot_load(sl);
		uint32_t st = (uint32_t)w;
		if ((uint32_t)(w >> 32) != gen)
			return fail(err, errlen, HC_EXIT_ABI,
			    "the command slot of process %d was taken away (is something else writing %s?)", t->pid,
			    t->path);
		if (st == HC_SLOT_DONE) {
			memcpy(rep, &sl->rep, sizeof *rep);
			/* the reply is ours only if the slot was still ours after the copy */
			if (!hc_shm_slot_cas(sl, HC_SLOT_DONE, gen, HC_SLOT_FREE, gen))
				return fail(err, errlen, HC_EXIT_ABI,
				    "the reply of process %d was overwritten (is something else writing %s?)", t->pid,
				    t->path);
			rep->text[sizeof rep->text - 1] = 0;
			if (rep->code > HC_REP_NOPROF)
				return fail(err, errlen, HC_EXIT_ABI,
				    "process %d sent a reply heapctl does not know (code %u)", t->pid, rep->code);
			return HC_EXIT_OK;
		}
		if (st != HC_SLOT_POSTED && st != HC_SLOT_BUSY)
			return fail(err, errlen, HC_EXIT_ABI,
			    "the command slot of process %d was taken away (state %u; is something else writing %s?)",
			    t->pid, st, t->path);
		uint64_t now = hc_shm_mono_ns();
		if (now >= deadline) {
			hc_shm_slot_cas(sl, HC_SLOT_POSTED, gen, HC_SLOT_FREE, gen);
			if (nothread)
				return fail(err, errlen, HC_EXIT_TIMEOUT,
				    "process %d did not answer within %g s: it could not start its control thread "
				    "(%s%s), so it answers only while it allocates; raise its limit, or ask again "
				    "when it is busy",
				    t->pid, secs, strerror(nothread),
				    nothread == EAGAIN
				        ? ": a thread limit, RLIMIT_NPROC (ulimit -u, LimitNPROC=) or the cgroup's pids.max"
				        : "");
			return fail(err, errlen, HC_EXIT_TIMEOUT, "process %d did not answer within %g s", t->pid,
			    secs);
		}
		uint64_t slice = deadline - now < 50000000ull ? deadline - now : 50000000ull;
		if (hc_shm_futex_wait(&sl->state, st, slice) == ETIMEDOUT && !hc_shm_alive(t))
			return fail(err, errlen, HC_EXIT_NOPROC, "process %d exited before answering", t->pid);
	}
}

/* The pids that have a segment name in one /dev/shm, listed once per
 * directory (the processes of one container share theirs). */
typedef struct {
	dev_t dev;
	ino_t ino;
	int *pids, n;
} shmdir_t;

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static const shmdir_t *dir_index(const char *dir, shmdir_t *cache, int *ncache, int max)
{
	struct stat st;
	if (stat(dir, &st) != 0)
		return NULL;
	for (int i = 0; i < *ncache; i++)
		if (cache[i].dev == st.st_dev && cache[i].ino == st.st_ino)
			return &cache[i];
	if (*ncache >= max)
		return NULL;
	shmdir_t *c = &cache[(*ncache)++];
	*c = (shmdir_t){ .dev = st.st_dev, .ino = st.st_ino };
	DIR *d = opendir(dir);
	struct dirent *e;
	int cap = 0;
	while (d && (e = readdir(d)) != NULL) {
		int p = hc_shm_name_pid(e->d_name);
		if (p <= 0)
			continue;
		if (c->n == cap) {
			int *np = realloc(c->pids, (size_t)(cap = cap ? cap * 2 : 64) * sizeof *np);
			if (np == NULL)
				break;
			c->pids = np;
		}
		c->pids[c->n++] = p;
	}
	if (d)
		closedir(d);
	if (c->n)
		qsort(c->pids, (size_t)c->n, sizeof *c->pids, cmp_int);
	return c;
}

int hc_shm_scan(int *pids, int max)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return -1;
	enum { NDIRS = 256 };
	shmdir_t *cache = calloc(NDIRS, sizeof *cache);
	int ncache = 0, n = 0;
	struct dirent *e;
	while (cache && (e = readdir(d)) != NULL && n < max) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		int nspid;
		unsigned uid, euid;
		if (!proc_status((int)pid, &nspid, &uid, &euid))
			continue;
		char dir[96];
		if (segment_dir((int)pid, nspid, dir, sizeof dir) != 0)
			continue;
		const shmdir_t *sd = dir_index(dir, cache, &ncache, NDIRS);
		if (sd && sd->n && bsearch(&nspid, sd->pids, (size_t)sd->n, sizeof nspid, cmp_int))
			pids[n++] = (int)pid;
	}
	closedir(d);
	for (int i = 0; cache && i < ncache; i++)
		free(cache[i].pids);
	free(cache);
	return n;
}
