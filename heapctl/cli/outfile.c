/*
 * heapctl/cli/outfile.c - every file heapctl writes (report --svg/--pprof,
 * dump -o/--prefix when heapctl fetches the profile) goes through here, so
 * that root running heapctl in a world-writable directory cannot be made to
 * replace or hang on something it did not mean to write.
 *
 * The last component of the name is the only one looked at with care: the
 * directories above it are the caller's choice.  See report.h for the rules;
 * the rename happens inside one directory descriptor, so nothing can swap
 * the directory between the checks and the rename.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/outfile.h"

static int out_fail(rp_out_t *o, char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "cannot write %s: %s", o->path, why);
	if (o->dirfd >= 0)
		close(o->dirfd);
	o->dirfd = -1;
	free(o->base);
	o->base = NULL;
	return -1;
}

/* Split path into its directory (opened) and last component. */
static int open_dir(rp_out_t *o, const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	if (slash == NULL) {
		strcpy(dir, ".");
	} else if (slash == path) {
		strcpy(dir, "/");
	} else {
		if ((size_t)(slash - path) >= sizeof dir)
			return ENAMETOOLONG;
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = 0;
	}
	const char *base = slash ? slash + 1 : path;
	if (*base == 0 || !strcmp(base, ".") || !strcmp(base, ".."))
		return EISDIR;
	o->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dirfd < 0)
		return errno;
	o->base = strdup(base);
	return o->base ? 0 : ENOMEM;
}

/* The kernel's protected_symlinks rule, for our own following. */
static bool may_follow(int dirfd, const struct stat *link)
{
	struct stat d;
	if (fstat(dirfd, &d) != 0)
		return false;
	bool shared = (d.st_mode & S_ISVTX) && (d.st_mode & S_IWOTH);
	return !shared || link->st_uid == geteuid() || link->st_uid == d.st_uid;
}

int rp_out_open(rp_out_t *o, const char *path, char *err, size_t errlen)
{
	*o = (rp_out_t){ .fd = -1, .path = path, .dirfd = -1 };
	if (!strcmp(path, "-")) {
		o->fd = dup(1);
		if (o->fd < 0) {
			snprintf(err, errlen, "cannot write to standard output: %s", strerror(errno));
			return -1;
		}
		return 0;
	}
	int e = open_dir(o, path);
	if (e)
		return out_fail(o, err, errlen, strerror(e));
	struct stat st;
	if (fstatat(o->dirfd, o->base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
		if (!may_follow(o->dirfd, &st))
			return out_fail(o, err, errlen,
			    "a symlink owned by another user in a "
			    "world-writable sticky directory (not followed)");
		/* follow it once, then treat what it names with no more following;
		 * a link to a file not made yet names the file to make */
		char *real = realpath(path, NULL);
		if (real == NULL && errno == ENOENT) {
			char link[PATH_MAX], full[2 * PATH_MAX + 2];
			ssize_t n = readlinkat(o->dirfd, o->base, link, sizeof link - 1);
			if (n > 0) {
				link[n] = 0;
				const char *slash = strrchr(path, '/');
				if (link[0] == '/' || slash == NULL)
					snprintf(full, sizeof full, "%s", link);
				else
					snprintf(full, sizeof full, "%.*s/%s", (int)(slash - path), path, link);
				real = strdup(full);
			}
		}
		if (real == NULL)
			return out_fail(o, err, errlen, strerror(errno));
		close(o->dirfd);
		free(o->base);
		o->dirfd = -1;
		o->base = NULL;
		e = open_dir(o, real);
		free(real);
		if (e)
			return out_fail(o, err, errlen, strerror(e));
	}
	if (fstatat(o->dirfd, o->base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode))
			return out_fail(o, err, errlen, "Is a directory");
		if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
			o->fd = openat(o->dirfd, o->base, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
			if (o->fd < 0)
				return out_fail(o, err, errlen,
				    errno == ENXIO ? "a FIFO that nobody reads" : strerror(errno));
			int fl = fcntl(o->fd, F_GETFL);
			if (fl >= 0)
				fcntl(o->fd, F_SETFL, fl & ~O_NONBLOCK);
			close(o->dirfd);
			o->dirfd = -1;
			return 0;
		}
		if (!S_ISREG(st.st_mode))
			return out_fail(o, err, errlen, "not a regular file (not replaced)");
	}
	/* A name of its own in that directory, so that the rename is atomic
	 * and a failure leaves whatever was there untouched. */
	size_t tlen = strlen(o->base) + 48;
	o->tmp = malloc(tlen);
	if (o->tmp == NULL)
		return out_fail(o, err, errlen, strerror(ENOMEM));
	for (int i = 0; o->fd < 0 && i < 100; i++) {
		snprintf(o->tmp, tlen, ".%s.%ld.%d.tmp", o->base, (long)getpid(), i);
		o->fd = openat(o->dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (o->fd < 0 && errno != EEXIST)
			break;
	}
	if (o->fd < 0) {
		e = errno;
		free(o->tmp);
		o->tmp = NULL;
		return out_fail(o, err, errlen, strerror(e));
	}
	return 0;
}

int rp_out_finish(rp_out_t *o, int error, const char *why, char *err, size_t errlen)
{
	if (!error && o->tmp && renameat(o->dirfd, o->tmp, o->dirfd, o->base) != 0)
		error = errno;
	if (error) {
		if (o->tmp)
			unlinkat(o->dirfd, o->tmp, 0);
		snprintf(err, errlen, "cannot write %s: %s", o->path, why ? why : strerror(error));
	}
	if (o->dirfd >= 0)
		close(o->dirfd);
	o->dirfd = -1;
	free(o->tmp);
	free(o->base);
	o->tmp = o->base = NULL;
	return error ? -1 : 0;
}

int rp_out_place_new(rp_out_t *o, const char *base)
{
	if (o->tmp == NULL)
		return 0;
	if (renameat2(o->dirfd, o->tmp, o->dirfd, base, RENAME_NOREPLACE) != 0) {
		if (errno != EINVAL && errno != ENOSYS)
			return errno;
		/* a file system without it (before 6.x: some FUSE ones) */
		if (linkat(o->dirfd, o->tmp, o->dirfd, base, 0) != 0)
			return errno;
		unlinkat(o->dirfd, o->tmp, 0);
	}
	free(o->tmp);
	o->tmp = NULL;
	return 0;
}

int rp_out_stream(const char *path, int (*write)(FILE *f, const void *arg), const void *arg, char *err, size_t errlen)
{
	rp_out_t out;
	if (rp_out_open(&out, path, err, errlen) != 0)
		return -1;
	FILE *f = fdopen(out.fd, "w");
	if (f == NULL) {
		int e = errno;
		close(out.fd);
		rp_out_finish(&out, e, NULL, err, errlen);
		return -1;
	}
	errno = 0;
	int e = write(f, arg) ? (errno ? errno : EIO) : 0;
	if (fclose(f) != 0 && e == 0)
		e = errno;
	return rp_out_finish(&out, e, NULL, err, errlen);
}

int rp_write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int rp_copy_fd(int in, int out)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : 0;
		int e = rp_write_all(out, buf, (size_t)n);
		if (e)
			return e;
	}
}
