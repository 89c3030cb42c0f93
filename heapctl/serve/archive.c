/*
 * heapctl/serve/archive.c - the daemon's dump archive (`heapctl serve
 * --archive DIR`): every dump a target announces in its event ring (manual,
 * high-water, threshold, peak, timer, interval, final) is copied into
 *
 *   DIR/GROUP/YYYYMMDDTHHMMSS.mmmZ.uUID.PID.KIND.heap   (GROUP: the systemd
 *   DIR/GROUP/YYYYMMDDTHHMMSS.mmmZ.uUID.PID.KIND.pb.gz   unit, else the command;
 *                                                        UID: the process's user)
 *
 * the second written beside it by `heapctl report -p PID --pprof` on a
 * worker thread, so that the archive outlives the processes and needs no
 * binaries to be read.  Retention (--keep per group, --max-age, and
 * --max-bytes for each user) removes the oldest first, and only after a new
 * dump is safely in place: a full disk loses the new dump, never an old one.
 * Each user (the UID in the name) has a share of its own: --keep counts a
 * group's dumps of one user and --max-bytes one user's bytes, so that a
 * user who floods the archive, or names her program after a unit, pushes
 * out only her own dumps.
 *
 * Nothing in the target's segment is trusted: its owner can write any path
 * into a "dump written" event.  The path must name a file in the directory
 * of the segment's prof.prefix, with no "." or ".." (others, as dumps
 * written elsewhere on request, are left alone and not logged).  A thread
 * that has taken the target's user's rights (setfsuid, setfsgid and its
 * groups, which are per thread on Linux) opens that directory, and the file
 * beneath it, not through a symlink, so that root never opens what she
 * could not open herself.  It must be a regular file of hers, of at most
 * --max-dump bytes by its apparent size (a sparse file counts what it
 * claims), be text (a NUL byte, which a hole reads as, is no dump) and
 * start as a heap profile; at most --max-dump bytes are copied whatever the
 * file does while it is read.
 *
 * Each archived dump carries who may read it: the uid that could read the
 * process's /proc/PID/maps when it was dumped (access_owner), in the
 * user.heapctl.owner extended attribute of its .heap, which only a writer
 * of the file (the daemon: the archive is its own) can set, and which
 * needs no capability (trusted.* would need CAP_SYS_ADMIN, which the unit
 * does not give).  A dump without it (a file system with no user extended
 * attributes, as tmpfs before Linux 6.6; an archive of an older daemon) is
 * root's alone.  /archive lists the dumps a requester may read and
 * /archive/GROUP/FILE serves one (the end of this file).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <grp.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/json.h"
#include "diagnose/proc.h"
#include "cli/outfile.h"
#include "serve.h"

#define OWNER_XATTR "user.heapctl.owner"

static struct {
	char dir[PATH_MAX];      /* "" when there is no archive                */
	char skip[PATH_MAX + 1]; /* dumps under this are the daemon's own     */
	unsigned keep;           /* per group, 0: no limit                     */
	uint64_t max_bytes;      /* per user, 0: no limit                      */
	uint64_t max_dump;       /* one dump's bytes at most                   */
	uint64_t max_age_s;      /* 0: no limit                                */
	pthread_mutex_t lock;    /* the queue below and retention              */
	pthread_cond_t cond;
	struct job {
		char heap[PATH_MAX + 400];
		int pid;
		unsigned uid;
	} queue[64];
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
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
	    ch == '_' || ch == '@' || ch == '-';
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

static int by_time(const void *a, const void *b)
{
	const arch_entry_t *x = a, *y = b;
	int c = strcmp(x->name, y->name); /* names begin with the UTC time */
	return c ? c : strcmp(x->group, y->group);
}

/* Each user's dumps together, oldest first within them. */
static int by_owner(const void *a, const void *b)
{
	const arch_entry_t *x = a, *y = b;
	return x->uid != y->uid ? (x->uid < y->uid ? -1 : 1) : by_time(a, b);
}

bool arch_name_parse(const char *name, long long *uid, int *pid, char *kind, size_t klen)
{
	/* TIME is YYYYMMDDTHHMMSS.mmmZ: two parts; an archive made before the
	 * user was named has no uUID (its owner is -1, a share of its own) */
	const char *p = strchr(name, '.');
	p = p ? strchr(p + 1, '.') : NULL;
	if (p == NULL)
		return false;
	char *end;
	*uid = -1;
	if (p[1] == 'u') {
		*uid = strtoll(p + 2, &end, 10);
		if (end == p + 2 || *end != '.')
			return false;
		p = end;
	}
	long v = strtol(p + 1, &end, 10);
	if (end == p + 1 || *end != '.' || end[1] == 0 || v <= 0 || v > INT32_MAX)
		return false;
	*pid = (int)v;
	snprintf(kind, klen, "%s", end + 1);
	return true;
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
			int pid;
			char kind[32];
			if (!arch_name_parse(e->name, &e->uid, &pid, kind, sizeof kind))
				e->uid = -1;
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

/* Apply --keep, --max-age and --max-bytes to one user's dumps v[0..n),
 * oldest first: marked in gone. */
static void retention_owner(const arch_entry_t *v, size_t n, bool *gone, time_t now)
{
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (A.max_age_s && v[i].time_s + (int64_t)A.max_age_s < now)
			gone[i] = true;
		if (A.keep && !gone[i]) {
			/* newer dumps of its group: drop it when keep or more */
			unsigned newer = 0;
			for (size_t k = i + 1; k < n && newer < A.keep; k++)
				newer += strcmp(v[k].group, v[i].group) == 0;
			gone[i] = newer >= A.keep;
		}
		if (!gone[i])
			total += v[i].bytes;
	}
	for (size_t i = 0; A.max_bytes && total > A.max_bytes && i + 1 < n; i++)
		if (!gone[i]) { /* the user's newest dump always stays */
			gone[i] = true;
			total -= v[i].bytes;
		}
}

/* Apply --keep, --max-age and --max-bytes, oldest first, to each user's
 * dumps apart. */
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
	qsort(v, n, sizeof *v, by_owner);
	time_t now = time(NULL);
	for (size_t i = 0, k; i < n; i = k) {
		for (k = i + 1; k < n && v[k].uid == v[i].uid; k++)
			;
		retention_owner(v + i, k - i, gone + i, now);
	}
	for (size_t i = 0; i < n; i++)
		if (gone[i])
			remove_entry(&v[i]);
	free(gone);
	free(v);
}

/* ---- copying a dump in ------------------------------------------------------ */

/* A path a target announced is one of its dumps only where the segment's
 * prof.prefix puts them: DIR/BASE.*.heap for a prefix DIR/BASE (a relative
 * prefix: in some directory ending in its DIR), with no "." or ".."
 * component. */
static bool where_told(const char *prefix, const char *path)
{
	size_t len = strlen(path);
	if (prefix[0] == 0 || path[0] != '/' || strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../") ||
	    len < 6 || strcmp(path + len - 5, ".heap") != 0)
		return false;
	const char *base = strrchr(path, '/') + 1, *pbase = strrchr(prefix, '/');
	size_t dlen = (size_t)(base - 1 - path), plen = pbase ? (size_t)(pbase - prefix) : 0;
	pbase = pbase ? pbase + 1 : prefix;
	bool dir_ok = prefix[0] == '/' ? dlen == plen && memcmp(path, prefix, dlen) == 0
	                               : plen == 0 ||
	        (dlen > plen && path[dlen - plen - 1] == '/' && memcmp(path + dlen - plen, prefix, plen) == 0);
	return dir_ok && strncmp(base, pbase, strlen(pbase)) == 0 && base[strlen(pbase)] == '.';
}

/* Opening a target's file with its user's rights, on a thread of its own. */
typedef struct opener_s {
	const serve_target_t *x;
	const char *path; /* as the target names it                    */
	unsigned uid, gid;
	gid_t groups[64];
	int ngroups;
	int fd, err; /* the file, or -1 and an errno             */
	const char *why;
} opener_t;

/* The target's real gid and groups from /proc while it lives, else its
 * user's primary group (a final dump), else the overflow group. */
static void user_groups(opener_t *o)
{
	char v[1024];
	o->gid = 65534;
	o->ngroups = 0;
	if (hc_shm_alive(&o->x->t) && cli_proc_status_field(o->x->t.pid, "Gid", v, sizeof v)) {
		o->gid = (unsigned)strtoul(v, NULL, 10);
		if (cli_proc_status_field(o->x->t.pid, "Groups", v, sizeof v))
			for (char *t = strtok(v, " \t"); t && o->ngroups < 64; t = strtok(NULL, " \t"))
				o->groups[o->ngroups++] = (gid_t)strtoul(t, NULL, 10);
		if (hc_shm_alive(&o->x->t))
			return; /* still the process that was read */
		o->gid = 65534;
		o->ngroups = 0;
	}
	struct passwd pw, *r = NULL;
	char buf[4096];
	if (getpwuid_r(o->uid, &pw, buf, sizeof buf, &r) == 0 && r)
		o->gid = pw.pw_gid;
}

static void *open_as_user(void *arg)
{
	opener_t *o = arg;
	o->fd = -1;
	if (geteuid() == 0) {
		/* the raw system calls: glibc's setgroups changes every thread's,
		 * and the thread ends with these rights */
		bool grouped = syscall(SYS_setgroups, (size_t)o->ngroups, o->groups) == 0;
		setfsgid(o->gid);
		setfsuid(o->uid);
		if (!grouped || (unsigned)setfsuid((uid_t)-1) != o->uid || (unsigned)setfsgid((gid_t)-1) != o->gid) {
			o->err = EPERM;
			o->why = "cannot take its user's rights (no CAP_SETUID, CAP_SETGID?)";
			return NULL;
		}
	} else if (o->uid != geteuid()) {
		o->err = EPERM;
		o->why = "another user's, and the daemon is not root";
		return NULL;
	}
	char local[PATH_MAX + 64];
	if (o->x->same_view) /* also after it exited (its final dump) */
		snprintf(local, sizeof local, "%s", o->path);
	else
		cli_local_path(&o->x->t, o->path, local, sizeof local);
	char *slash = strrchr(local, '/');
	*slash = 0;
	int dfd = open(local[0] ? local : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	/* gone, with its /proc/PID/root: its final dump may be where a
	 * directory it shared with us (a StateDirectory=, a daemon in a mount
	 * namespace of its own) has it on our side; checked as any other */
	if (dfd < 0 && errno == ENOENT && !o->x->same_view && strncmp(local, "/proc/", 6) == 0 &&
	    !hc_shm_alive(&o->x->t)) {
		snprintf(local, sizeof local, "%s", o->path);
		*strrchr(local, '/') = 0;
		dfd = open(local[0] ? local : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	if (dfd < 0) {
		o->err = errno;
		return NULL;
	}
	/* the file itself, beneath that directory: never through a symlink */
	struct open_how how = { .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	const char *base = strrchr(o->path, '/') + 1;
	o->fd = (int)syscall(SYS_openat2, dfd, base, &how, sizeof how);
	if (o->fd < 0 && errno == ENOSYS)
		o->fd = openat(dfd, base, (int)how.flags);
	o->err = o->fd < 0 ? errno : 0;
	close(dfd);
	return NULL;
}

/* Copy in to out: at most cap bytes, none of them NUL.  0 or an errno,
 * with why set for a file that is not what it claims. */
static int copy_text(int in, int out, uint64_t cap, const char **why)
{
	static char buf[1 << 16]; /* the scan thread's alone */
	uint64_t total = 0;
	for (;;) {
		ssize_t r = read(in, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? errno : 0;
		if ((total += (uint64_t)r) > cap) {
			*why = "grew over --max-dump while read: not trusted";
			return EFBIG;
		}
		if (memchr(buf, 0, (size_t)r)) {
			*why = "holds a NUL byte (a hole?): not a heap profile";
			return EINVAL;
		}
		int e = rp_write_all(out, buf, (size_t)r);
		if (e)
			return e;
	}
}

/* An archived dump's name: DIR/TIME.uUID.PID.KIND.heap, TIME in UTC to the
 * millisecond, PID as the daemon sees the process (a container's by its
 * pid here, not its 1), and later_ms milliseconds added: a name that is
 * taken (two dumps of one kind of one process in one millisecond) gives
 * its place to the next millisecond's, never replaced. */
typedef struct {
	const char *dir, *kind;
	uint64_t time_ns;
	unsigned uid;
	int pid;
} arch_name_t;

static void arch_dest(const arch_name_t *n, unsigned later_ms, char *out, size_t len)
{
	uint64_t ns = n->time_ns + (uint64_t)later_ms * 1000000;
	struct tm tm;
	time_t s = (time_t)(ns / 1000000000);
	gmtime_r(&s, &tm);
	snprintf(out, len, "%s/%04d%02d%02dT%02d%02d%02d.%03dZ.u%u.%d.%s.heap", n->dir, tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ns / 1000000 % 1000), n->uid, n->pid,
	    n->kind);
}

/* Copy the target's file at path (its own view), where its prof.prefix
 * puts dumps, to a name of n's (arch_dest) that no file has, in dest.  0
 * or an errno, with why set for a file that is not what it claims. */
static int copy_in(const serve_target_t *x, const char *path, const arch_name_t *n, char *dest, size_t len,
    const char **why)
{
	static char size_why[128];
	opener_t o = { .x = x, .path = path, .uid = x->t.uid, .fd = -1 };
	user_groups(&o);
	pthread_t th;
	int e = pthread_create(&th, NULL, open_as_user, &o);
	if (e)
		return e;
	pthread_join(th, NULL);
	if (o.fd < 0) {
		*why = o.why;
		return o.err ? o.err : EIO;
	}
	int in = o.fd;
	struct stat st;
	char head[8];
	if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != x->t.uid)
		*why = "not a regular file of the process's user: not trusted";
	else if ((uint64_t)st.st_size > A.max_dump) {
		snprintf(size_why, sizeof size_why, "%llu bytes by its size, over --max-dump (%llu)",
		    (unsigned long long)st.st_size, (unsigned long long)A.max_dump);
		*why = size_why;
	} else if (pread(in, head, sizeof head, 0) != (ssize_t)sizeof head || memcmp(head, "heap_v2/", 8) != 0)
		*why = "not a heap profile";
	if (*why) {
		close(in);
		return EINVAL;
	}
	rp_out_t out;
	char err[PATH_MAX + 128];
	arch_dest(n, 0, dest, len);
	if (rp_out_open(&out, dest, err, sizeof err) != 0) {
		e = errno ? errno : EIO;
		close(in);
		return e;
	}
	e = copy_text(in, out.fd, A.max_dump, why);
	close(in);
	/* the dump's user owns it here too: its report reads binaries with
	 * that user's rights (profiles.c, respond_report); a daemon not root
	 * reads with its own */
	if (e == 0 && geteuid() == 0 && fchown(out.fd, x->t.uid, (gid_t)-1) != 0)
		e = errno;
	if (close(out.fd) != 0 && e == 0)
		e = errno;
	for (unsigned later = 0; e == 0; later++) {
		const char *base = strrchr(dest, '/');
		e = rp_out_place_new(&out, base ? base + 1 : dest);
		if (e != EEXIST || later == 1000)
			break;
		e = 0;
		arch_dest(n, later + 1, dest, len);
	}
	if (rp_out_finish(&out, e, NULL, err, sizeof err) != 0 && e == 0)
		e = EIO;
	return e;
}

void arch_skip(const char *dir)
{
	snprintf(A.skip, sizeof A.skip, "%s/", dir);
}

void arch_dump(const serve_target_t *x, const hc_shm_event_t *ev, const char *prefix)
{
	if (!arch_enabled())
		return;
	/* the daemon's own dumps for /debug/pprof (in its work directory, or
	 * staged by heapctl dump -o and already gone): a scrape is not kept */
	char group[128], dir[PATH_MAX + 160], dest[PATH_MAX + 400], path[sizeof ev->path + 1];
	memcpy(path, ev->path, sizeof ev->path);
	path[sizeof ev->path] = 0; /* the segment's bytes are not trusted */
	if ((A.skip[0] && strncmp(path, A.skip, strlen(A.skip)) == 0) || hc_shm_staged_path(path))
		return;
	/* nor is one written elsewhere on request (dump -o, --prefix): not
	 * logged, as anyone may ask for those, and what the event names is
	 * never touched */
	if (!where_told(prefix, path))
		return;
	group_of(x, group, sizeof group);
	snprintf(dir, sizeof dir, "%s/%s", A.dir, group);
	if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
		fprintf(stderr, "heapctl serve: archive: cannot make %s: %s; %s not archived\n", dir, strerror(errno),
		    path);
		A.failed++;
		return;
	}
	const char *kind = hc_shm_dump_kind_name(ev->kind);
	arch_name_t an = { .dir = dir,
		.kind = kind ? kind : "dump",
		.time_ns = ev->time_ns,
		.uid = x->t.uid,
		.pid = x->t.pid };
	const char *why = NULL;
	int e = copy_in(x, path, &an, dest, sizeof dest, &why);
	if (e) {
		fprintf(stderr, "heapctl serve: archive: %s of process %d not archived: %s\n", path, x->t.pid,
		    why ? why : strerror(e));
		A.failed++;
		return;
	}
	char owner[16];
	snprintf(owner, sizeof owner, "%u", (unsigned)x->owner);
	static bool said; /* a file system without them: said once */
	if (x->owner != ACCESS_NOBODY && setxattr(dest, OWNER_XATTR, owner, strlen(owner), 0) != 0 && !said) {
		said = true;
		fprintf(stderr,
		    "heapctl serve: archive: %s and the dumps after it are root's alone: cannot record "
		    "their owner (%s): %s\n",
		    dest, OWNER_XATTR, strerror(errno));
	}
	pthread_mutex_lock(&A.lock);
	A.archived++;
	if (A.tail - A.head < sizeof A.queue / sizeof A.queue[0]) {
		struct job *j = &A.queue[A.tail++ % (sizeof A.queue / sizeof A.queue[0])];
		snprintf(j->heap, sizeof j->heap, "%s", dest);
		j->pid = x->t.pid;
		j->uid = (unsigned)x->t.uid;
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
		char pb[PATH_MAX + 420], pid[16], uid[16], err[512];
		size_t len = strlen(j.heap);
		snprintf(pb, sizeof pb, "%.*s.pb.gz", (int)(len - 5), j.heap);
		snprintf(pid, sizeof pid, "%d", j.pid);
		snprintf(uid, sizeof uid, "%u", j.uid);
		if (access(j.heap, F_OK) != 0)
			continue; /* already gone to retention */
		char procdir[32];
		snprintf(procdir, sizeof procdir, "/proc/%d", j.pid);
		/* never the dump's paths with our rights (profiles.c, respond_report);
		 * the pprof's comment names it as /archive does, not by our path */
		size_t dl = strlen(A.dir);
		char *title = strncmp(j.heap, A.dir, dl) == 0 && j.heap[dl] == '/' ? j.heap + dl + 1 : "archived dump";
		char *with_pid[] = { "report", j.heap, "-p", pid, "--mapped", "--as-user", uid, "--title", title,
			"--pprof", pb, NULL };
		char *without[] = { "report", j.heap, "--as-user", uid, "--title", title, "--pprof", pb, NULL };
		int rc = access(procdir, F_OK) == 0 ? serve_run_self(with_pid, NULL, 0, err, sizeof err, 300000) : -1;
		if (rc != 0)
			rc = serve_run_self(without, NULL, 0, err, sizeof err, 300000);
		if (rc != 0)
			fprintf(stderr, "heapctl serve: archive: no pprof beside %s: %s\n", j.heap, err);
	}
	return NULL;
}

int arch_init(const char *dir, unsigned keep, uint64_t max_bytes, uint64_t max_age_s, uint64_t max_dump)
{
	char abs[PATH_MAX];
	int code = cli_absolute("serve --archive", dir, abs, sizeof abs);
	if (code)
		return code;
	if (mkdir(abs, 0750) != 0 && errno != EEXIST)
		return cli_err(HC_EXIT_FAILED, "serve: cannot make the archive %s: %s", abs, strerror(errno));
	struct stat st;
	if (lstat(abs, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022))
		return cli_err(HC_EXIT_USAGE,
		    "serve: the archive %s must be a directory of ours that nobody else "
		    "can write",
		    abs);
	snprintf(A.dir, sizeof A.dir, "%s", abs);
	A.keep = keep;
	A.max_bytes = max_bytes;
	A.max_age_s = max_age_s;
	A.max_dump = max_dump;
	pthread_mutex_lock(&A.lock);
	retention();
	pthread_mutex_unlock(&A.lock);
	pthread_t th;
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return cli_err(HC_EXIT_FAILED, "serve: cannot start a thread");
	pthread_detach(th);
	return 0;
}

/* ---- /archive and /archive/GROUP/FILE ------------------------------------- */

/* /archive: every archived dump the requester may read, newest first */
enum MHD_Result arch_serve_list(struct MHD_Connection *c, serve_peer_t *peer)
{
	if (!arch_enabled())
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no archive: start serve with --archive DIR");
	size_t n;
	arch_entry_t *v = arch_scan(&n);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL) {
		free(v);
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	}
	json_t j;
	json_begin(&j, f, JSON_PRETTY);
	json_arr(&j, NULL);
	for (size_t i = n; i-- > 0;) { /* newest first */
		const arch_entry_t *e = &v[i];
		if (!access_owner_ok(peer, e->owner))
			continue;
		char path[600], pb[620], kind[32] = "";
		int pid = 0;
		long long uid;
		arch_name_parse(e->name, &uid, &pid, kind, sizeof kind);
		snprintf(path, sizeof path, "%s/%s.heap", e->group, e->name);
		snprintf(pb, sizeof pb, "%s/%s/%s.pb.gz", arch_dir(), e->group, e->name);
		json_obj(&j, NULL);
		json_str(&j, "group", e->group);
		json_str(&j, "file", path);
		json_i64(&j, "pid", pid);
		if (e->uid >= 0)
			json_i64(&j, "uid", e->uid);
		else
			json_null(&j, "uid");
		json_str(&j, "kind", kind);
		json_u64(&j, "bytes", e->bytes);
		if (access(pb, R_OK) == 0) {
			snprintf(pb, sizeof pb, "%s/%s.pb.gz", e->group, e->name);
			json_str(&j, "pprof", pb);
		} else
			json_null(&j, "pprof");
		json_end(&j);
	}
	json_end(&j);
	free(v);
	return respond_stream(c, "application/json", f, &buf, &len);
}

/* /archive/GROUP/FILE: one archived dump or its pprof. */
enum MHD_Result arch_serve_file(struct MHD_Connection *c, const char *rel, serve_peer_t *peer)
{
	char group[256], name[256];
	const char *slash = strchr(rel, '/');
	size_t glen = slash ? (size_t)(slash - rel) : 0;
	if (!arch_enabled() || slash == NULL || glen == 0 || glen >= sizeof group || strlen(slash + 1) >= sizeof name)
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such archived file");
	memcpy(group, rel, glen);
	group[glen] = 0;
	strcpy(name, slash + 1);
	size_t nl = strlen(name);
	bool heap = nl > 5 && strcmp(name + nl - 5, ".heap") == 0;
	bool pb = nl > 6 && strcmp(name + nl - 6, ".pb.gz") == 0;
	if (!arch_name_ok(group) || !arch_name_ok(name) || (!heap && !pb))
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such archived file");
	if (!access_owner_ok(peer, arch_owner(group, name)))
		return respond_err(c, MHD_HTTP_FORBIDDEN, "archived %s/%s: a dump of a process you may not read", group,
		    name);
	char path[PATH_MAX + 600];
	snprintf(path, sizeof path, "%s/%s/%s", arch_dir(), group, name);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such archived file");
	}
	struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)sb.st_size, fd);
	if (r == NULL) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	    heap ? "text/plain; charset=utf-8" : "application/octet-stream");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ok;
}
