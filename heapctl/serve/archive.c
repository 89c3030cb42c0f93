/*
 * heapctl/serve/archive.c - the daemon's dump archive (`heapctl serve
 * --archive DIR`): every dump a target announces in its event ring (manual,
 * high-water, threshold, peak, timer, interval, final) is copied into
 *
 *   DIR/GROUP/YYYYMMDDTHHMMSS.mmmZ.PID.KIND.heap     (GROUP: the systemd
 *   DIR/GROUP/YYYYMMDDTHHMMSS.mmmZ.PID.KIND.pb.gz     unit, else the command)
 *
 * the second written beside it by `heapctl report -p PID --pprof` on a
 * worker thread, so that the archive outlives the processes and needs no
 * binaries to be read.  Retention (--keep per group, --max-age,
 * --max-bytes over all) removes the oldest first, and only after a new
 * dump is safely in place: a full disk loses the new dump, never an old one.
 *
 * A dump's path comes from the target's segment, which is not trusted: the
 * file is opened without following a final symlink or blocking, must be a
 * regular file of the target's user, and must start as a heap profile.
 *
 * Each archived dump carries who may read it: the uid that could read the
 * process's /proc/PID/maps when it was dumped (access_owner), in the
 * user.heapctl.owner extended attribute of its .heap, which only a writer
 * of the file (the daemon: the archive is its own) can set, and which
 * needs no capability (trusted.* would need CAP_SYS_ADMIN, which the unit
 * does not give).  A dump without it (a file system with no user extended
 * attributes, as tmpfs before Linux 6.6; an archive of an older daemon) is
 * root's alone.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../cli.h"
#include "../outfile.h"
#include "serve.h"

#define OWNER_XATTR "user.heapctl.owner"

static struct {
	char dir[PATH_MAX];        /* "" when there is no archive                */
	char skip[PATH_MAX + 1];   /* dumps under this are the daemon's own     */
	unsigned keep;             /* per group, 0: no limit                     */
	uint64_t max_bytes;        /* over all, 0: no limit                      */
	uint64_t max_age_s;        /* 0: no limit                                */
	pthread_mutex_t lock;      /* the queue below and retention              */
	pthread_cond_t cond;
	struct job { char heap[PATH_MAX + 400]; int pid; } queue[64];
	unsigned head, tail;       /* pprof jobs: tail - head of them            */
	uint64_t archived, failed; /* for the log and /metrics                   */
} A = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

bool arch_enabled(void)
{
	return A.dir[0] != 0;
}

const char *arch_dir(void)
{
	return A.dir;
}

static bool name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	    ch == '.' || ch == '_' || ch == '@' || ch == '-';
}

/* A file name part: letters, digits and ._@- kept, anything else '_', at
 * most len - 1 bytes; never empty, never starting with '.'. */
static void name_part(const char *in, char *out, size_t len)
{
	size_t n = 0;
	for (; *in && n + 1 < len; in++)
		out[n++] = name_char(*in) ? *in : '_';
	out[n] = 0;
	if (n == 0)
		snprintf(out, len, "unknown");
	else if (out[0] == '.')
		out[0] = '_';
}

bool arch_name_ok(const char *s)
{
	if (*s == 0 || *s == '.' || strlen(s) > 255)
		return false;
	for (; *s; s++)
		if (!name_char(*s))
			return false;
	return true;
}

/* The group of a target: its unit, else its container, else its
 * program's name. */
static void group_of(const serve_target_t *x, char *out, size_t len)
{
	if (x->unit[0]) {
		name_part(x->unit, out, len);
		return;
	}
	char prog[256];
	snprintf(prog, sizeof prog, "%s", x->command);
	prog[strcspn(prog, " ")] = 0;
	const char *base = strrchr(prog, '/');
	char b[512];
	snprintf(b, sizeof b, "%s%s%s", x->container[0] ? x->container : "", x->container[0] ? "-" : "",
	    base ? base + 1 : prog);
	name_part(b, out, len);
}

static uid_t owner_at(int dfd, const char *heap)
{
	char v[16];
	int fd = openat(dfd, heap, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ssize_t n = fd >= 0 ? fgetxattr(fd, OWNER_XATTR, v, sizeof v - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return ACCESS_NOBODY;
	v[n] = 0;
	char *end;
	unsigned long u = strtoul(v, &end, 10);
	return *end || end == v || u >= ACCESS_NOBODY ? ACCESS_NOBODY : (uid_t)u;
}

uid_t arch_owner(const char *group, const char *name)
{
	char p[PATH_MAX + 600];
	size_t n = strlen(name);
	if (n > 6 && strcmp(name + n - 6, ".pb.gz") == 0)
		n -= 6;
	else if (n > 5 && strcmp(name + n - 5, ".heap") == 0)
		n -= 5;
	snprintf(p, sizeof p, "%s/%s/%.*s.heap", A.dir, group, (int)n, name);
	return owner_at(AT_FDCWD, p);
}

/* ---- retention ------------------------------------------------------------ */

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

static int by_time(const void *a, const void *b)
{
	const arch_entry_t *x = a, *y = b;
	int c = strcmp(x->name, y->name);   /* names begin with the UTC time */
	return c ? c : strcmp(x->group, y->group);
}

static void remove_entry(const arch_entry_t *e)
{
	char p[PATH_MAX + 600];
	snprintf(p, sizeof p, "%s/%s/%s.heap", A.dir, e->group, e->name);
	unlink(p);
	snprintf(p, sizeof p, "%s/%s/%s.pb.gz", A.dir, e->group, e->name);
	unlink(p);
}

arch_entry_t *arch_scan(size_t *n)
{
	*n = 0;
	size_t cap = 0;
	arch_entry_t *v = NULL;
	DIR *top = opendir(A.dir);
	if (top == NULL)
		return NULL;
	struct dirent *g;
	while ((g = readdir(top))) {
		if (!arch_name_ok(g->d_name))
			continue;
		int gfd = openat(dirfd(top), g->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *gd = gfd >= 0 ? fdopendir(gfd) : NULL;
		if (gd == NULL) {
			if (gfd >= 0)
				close(gfd);
			continue;
		}
		struct dirent *f;
		while ((f = readdir(gd))) {
			size_t len = strlen(f->d_name);
			struct stat st;
			/* a copy the daemon was making when it was stopped */
			if (serve_tmp_file(dirfd(gd), f->d_name, 60))
				continue;
			if (!arch_name_ok(f->d_name) || len < 6 || strcmp(f->d_name + len - 5, ".heap") ||
			    len - 5 >= sizeof v->name || fstatat(dirfd(gd), f->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
			    !S_ISREG(st.st_mode))
				continue;
			if (*n == cap) {
				arch_entry_t *nv = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof *v);
				if (nv == NULL)
					break;
				v = nv;
			}
			arch_entry_t *e = &v[(*n)++];
			snprintf(e->group, sizeof e->group, "%s", g->d_name);
			memcpy(e->name, f->d_name, len - 5);
			e->name[len - 5] = 0;
			e->bytes = (uint64_t)st.st_size;
			e->time_s = st.st_mtim.tv_sec;
			e->owner = owner_at(dirfd(gd), f->d_name);
			char pb[300];
			snprintf(pb, sizeof pb, "%s.pb.gz", e->name);
			if (fstatat(dirfd(gd), pb, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
				e->bytes += (uint64_t)st.st_size;
		}
		closedir(gd);
	}
	closedir(top);
	if (*n)
		qsort(v, *n, sizeof *v, by_time);
	return v;
}

/* Apply --keep, --max-age and --max-bytes, oldest first. */
static void retention(void)
{
	size_t n;
	arch_entry_t *v = arch_scan(&n);
	if (v == NULL)
		return;
	bool *gone = calloc(n, sizeof *gone);
	if (gone == NULL) {
		free(v);
		return;
	}
	time_t now = time(NULL);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += v[i].bytes;
	for (size_t i = 0; i < n; i++) {
		if (A.max_age_s && v[i].time_s + (int64_t)A.max_age_s < now)
			gone[i] = true;
		if (A.keep && !gone[i]) {
			/* newer dumps of its group: drop it when keep or more */
			unsigned newer = 0;
			for (size_t k = i + 1; k < n; k++)
				newer += strcmp(v[k].group, v[i].group) == 0;
			gone[i] = newer >= A.keep;
		}
		if (gone[i])
			total -= v[i].bytes;
	}
	for (size_t i = 0; A.max_bytes && total > A.max_bytes && i + 1 < n; i++)
		if (!gone[i]) {       /* the newest dump always stays */
			gone[i] = true;
			total -= v[i].bytes;
		}
	for (size_t i = 0; i < n; i++)
		if (gone[i])
			remove_entry(&v[i]);
	free(gone);
	free(v);
}

/* ---- copying a dump in ------------------------------------------------------ */

/* Copy the target's file at path (its own view) to dest.  0 or an errno,
 * with why set for a file that is not what it claims. */
static int copy_in(const serve_target_t *x, const char *path, const char *dest, const char **why)
{
	char local[PATH_MAX + 64];
	if (x->same_view)          /* also after it exited (its final dump) */
		snprintf(local, sizeof local, "%s", path);
	else
		cli_local_path(&x->t, path, local, sizeof local);
	int in = open(local, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	/* gone, with its /proc/PID/root: its final dump may be where a
	 * directory it shared with us (a StateDirectory=, a daemon in a mount
	 * namespace of its own) has it on our side; checked as any other */
	if (in < 0 && errno == ENOENT && !x->same_view && strcmp(local, path) != 0 && !hc_shm_alive(&x->t))
		in = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return errno;
	struct stat st;
	char head[8];
	*why = NULL;
	if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != x->t.uid)
		*why = "not a regular file of the process's user: not trusted";
	else if (pread(in, head, sizeof head, 0) != (ssize_t)sizeof head || memcmp(head, "heap_v2/", 8) != 0)
		*why = "not a heap profile";
	if (*why) {
		close(in);
		return EINVAL;
	}
	rp_out_t out;
	char err[PATH_MAX + 128];
	if (rp_out_open(&out, dest, err, sizeof err) != 0) {
		int e = errno ? errno : EIO;
		close(in);
		return e;
	}
	int e = rp_copy_fd(in, out.fd);
	close(in);
	if (close(out.fd) != 0 && e == 0)
		e = errno;
	if (rp_out_finish(&out, e, NULL, err, sizeof err) != 0 && e == 0)
		e = EIO;
	return e;
}

void arch_skip(const char *dir)
{
	snprintf(A.skip, sizeof A.skip, "%s/", dir);
}

void arch_dump(const serve_target_t *x, const hc_shm_event_t *ev)
{
	if (!arch_enabled())
		return;
	/* the daemon's own dumps for /debug/pprof (in its work directory, or
	 * staged by heapctl dump -o and already gone): a scrape is not kept */
	char group[128], dir[PATH_MAX + 160], dest[PATH_MAX + 400], path[sizeof ev->path + 1];
	memcpy(path, ev->path, sizeof ev->path);
	path[sizeof ev->path] = 0;   /* the segment's bytes are not trusted */
	if ((A.skip[0] && strncmp(path, A.skip, strlen(A.skip)) == 0) || hc_shm_staged_path(path))
		return;
	group_of(x, group, sizeof group);
	snprintf(dir, sizeof dir, "%s/%s", A.dir, group);
	if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
		fprintf(stderr, "heapctl serve: archive: cannot make %s: %s; %s not archived\n", dir, strerror(errno),
		    path);
		A.failed++;
		return;
	}
	struct tm tm;
	time_t s = (time_t)(ev->time_ns / 1000000000);
	gmtime_r(&s, &tm);
	const char *kind = hc_shm_dump_kind_name(ev->kind);
	snprintf(dest, sizeof dest, "%s/%04d%02d%02dT%02d%02d%02d.%03dZ.%d.%s.heap", dir, tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	    (int)(ev->time_ns / 1000000 % 1000), x->t.pid, kind ? kind : "dump");
	const char *why = NULL;
	int e = copy_in(x, path, dest, &why);
	if (e) {
		fprintf(stderr, "heapctl serve: archive: %s of process %d not archived: %s\n", path, x->t.pid,
		    why ? why : strerror(e));
		A.failed++;
		return;
	}
	char owner[16];
	snprintf(owner, sizeof owner, "%u", (unsigned)x->owner);
	static bool said;          /* a file system without them: said once */
	if (x->owner != ACCESS_NOBODY && setxattr(dest, OWNER_XATTR, owner, strlen(owner), 0) != 0 && !said) {
		said = true;
		fprintf(stderr, "heapctl serve: archive: %s and the dumps after it are root's alone: cannot record "
		    "their owner (%s): %s\n", dest, OWNER_XATTR, strerror(errno));
	}
	pthread_mutex_lock(&A.lock);
	A.archived++;
	if (A.tail - A.head < sizeof A.queue / sizeof A.queue[0]) {
		struct job *j = &A.queue[A.tail++ % (sizeof A.queue / sizeof A.queue[0])];
		snprintf(j->heap, sizeof j->heap, "%s", dest);
		j->pid = x->t.pid;
		pthread_cond_signal(&A.cond);
	}
	retention();
	pthread_mutex_unlock(&A.lock);
}

void arch_counts(uint64_t *archived, uint64_t *failed)
{
	*archived = A.archived;
	*failed = A.failed;
}

/* The worker: a symbolized pprof beside every archived dump, made while
 * the process (and its /proc/PID/root) may still be there. */
static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&A.lock);
		while (A.head == A.tail)
			pthread_cond_wait(&A.cond, &A.lock);
		struct job j = A.queue[A.head++ % (sizeof A.queue / sizeof A.queue[0])];
		pthread_mutex_unlock(&A.lock);
		char pb[PATH_MAX + 420], pid[16], err[512];
		size_t len = strlen(j.heap);
		snprintf(pb, sizeof pb, "%.*s.pb.gz", (int)(len - 5), j.heap);
		snprintf(pid, sizeof pid, "%d", j.pid);
		if (access(j.heap, F_OK) != 0)
			continue;          /* already gone to retention */
		char procdir[32];
		snprintf(procdir, sizeof procdir, "/proc/%d", j.pid);
		char *with_pid[] = { "report", j.heap, "-p", pid, "--pprof", pb, NULL };
		char *without[] = { "report", j.heap, "--pprof", pb, NULL };
		int rc = access(procdir, F_OK) == 0 ? serve_run_self(with_pid, NULL, 0, err, sizeof err, 300000) : -1;
		if (rc != 0)
			rc = serve_run_self(without, NULL, 0, err, sizeof err, 300000);
		if (rc != 0)
			fprintf(stderr, "heapctl serve: archive: no pprof beside %s: %s\n", j.heap, err);
	}
	return NULL;
}

int arch_init(const char *dir, unsigned keep, uint64_t max_bytes, uint64_t max_age_s)
{
	char abs[PATH_MAX];
	int code = cli_absolute("serve --archive", dir, abs, sizeof abs);
	if (code)
		return code;
	if (mkdir(abs, 0750) != 0 && errno != EEXIST)
		return cli_err(HC_EXIT_FAILED, "serve: cannot make the archive %s: %s", abs, strerror(errno));
	struct stat st;
	if (lstat(abs, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022))
		return cli_err(HC_EXIT_USAGE, "serve: the archive %s must be a directory of ours that nobody else "
		    "can write", abs);
	snprintf(A.dir, sizeof A.dir, "%s", abs);
	A.keep = keep;
	A.max_bytes = max_bytes;
	A.max_age_s = max_age_s;
	pthread_mutex_lock(&A.lock);
	retention();
	pthread_mutex_unlock(&A.lock);
	pthread_t th;
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return cli_err(HC_EXIT_FAILED, "serve: cannot start a thread");
	pthread_detach(th);
	return 0;
}
