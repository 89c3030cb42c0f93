/*
 * heapctl/symbolize/symcache.c - what symbolizing found, kept on disk per
 * build id (`heapctl report --symcache DIR`, which `heapctl serve` gives
 * every report it runs).
 *
 * A module's file DIR/<build id>.sym holds, for each address a report
 * has asked about (as an offset into the module: the same in every
 * process that maps it), the frames that address came to: names as in
 * the ELF file, source files and lines, innermost first.  A later report
 * of a module whose addresses are all there reads no symbol table, DWARF
 * or debug file of it at all; one with new addresses opens the module as
 * usual, and the file is written again with them added.
 *
 * What the frames came from is part of the key: the heapctl version, and
 * the debug file that was found for the module (by build id, by
 * .gnu_debuglink, or in debuginfod's client cache) with its size and
 * modification time.  A debug file installed or replaced since makes the
 * cached frames stale, and they are dropped.  A module without a build id
 * is never cached, nor one that has no debug file yet while a debuginfod
 * server may still send one.
 *
 * The directory must belong to the user and be writable by nobody else,
 * and only files of that user are read: the names in a cache file are
 * what a report shows.  Files are read whole, bounds-checked, and ignored
 * (then replaced) when anything in them does not add up.  A file is
 * written beside its final name and renamed over it, so two reports that
 * write one at once lose at most the other's additions.
 *
 * File layout (little-endian):
 *   "HCSYMC\0\1"  u32 header bytes that follow  header (the key, text)
 *   u32 entry count, then entries, each:
 *     u64 offset  u8 flags (RP_SC_*)  u8 frames, each frame:
 *       u16 name bytes, name  u16 file bytes (0: none), file  i32 line
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "report/rp_internal.h"

#define SC_MAGIC      "HCSYMC\0\1"
#define SC_MAX_FILE   (32u << 20) /* a module's file stops growing here */
#define SC_MAX_FRAMES 64
/* Bump when symbolize.c changes the frames an address comes to. */
#define SC_RULES "2"

struct rp_symcache_s {
	char name[160];           /* <build id>.sym                     */
	const char *key;          /* what the frames came from          */
	const unsigned char *buf; /* the file as read (valid entries)   */
	size_t len;               /* bytes of buf that are entries      */
	uint32_t nold;
	uint64_t *okey; /* sorted, with the offsets into buf  */
	uint32_t *ooff;
	unsigned char *add; /* new entries, encoded               */
	size_t nadd_bytes, add_cap;
	uint32_t nadd;
};

static int cache_dfd = -1;

bool rp_symcache_on(void)
{
	return cache_dfd >= 0;
}

int rp_symcache_use(const char *dir, char *err, size_t errlen)
{
	char why[256];
	int fd = cli_private_dir(dir, why, sizeof why);
	if (fd < 0) {
		snprintf(err, errlen, "--symcache %s: %s%s", dir, why,
		    fd == -2 ? " (its names would be shown as the program's)" : "");
		return -1;
	}
	if (cache_dfd >= 0)
		close(cache_dfd);
	cache_dfd = fd;
	return 0;
}

/* ---- reading ------------------------------------------------------------ */

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* The end of the entry at p (buf's end at e), or NULL when it runs past
 * e or says what no entry says. */
static const unsigned char *entry_end(const unsigned char *p, const unsigned char *e)
{
	if (e - p < 10)
		return NULL;
	unsigned nf = p[9];
	if (nf > SC_MAX_FRAMES)
		return NULL;
	p += 10;
	for (unsigned i = 0; i < nf; i++) {
		for (int s = 0; s < 2; s++) {
			if (e - p < 2)
				return NULL;
			unsigned n = (unsigned)p[0] | (unsigned)p[1] << 8;
			if (s == 0 && n == 0)
				return NULL; /* a frame has a name */
			if ((size_t)(e - p - 2) < n)
				return NULL;
			p += 2 + n;
		}
		if (e - p < 4)
			return NULL;
		p += 4;
	}
	return p;
}

typedef struct {
	uint64_t key;
	uint32_t off;
} pos_t;

static int pos_cmp(const void *a, const void *b)
{
	const pos_t *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* buf (n bytes: a file) parsed into c; false when it is not one. */
static bool parse(rp_symcache_t *c, unsigned char *buf, size_t n)
{
	if (n < 16 || memcmp(buf, SC_MAGIC, 8) != 0)
		return false;
	uint32_t hl = get32(buf + 8);
	size_t klen = strlen(c->key);
	if (hl != klen || n - 12 < (size_t)hl + 4 || memcmp(buf + 12, c->key, klen) != 0)
		return false; /* another version or debug file */
	const unsigned char *p = buf + 12 + hl, *e = buf + n;
	uint32_t count = get32(p);
	p += 4;
	if (count > (n / 10))
		return false;
	pos_t *pos = rp_alloc(sizeof *pos * ((size_t)count + 1));
	const unsigned char *first = p;
	for (uint32_t i = 0; i < count; i++) {
		const unsigned char *q = entry_end(p, e);
		if (q == NULL) {
			rp_free(pos);
			return false;
		}
		pos[i] = (pos_t){ get64(p), (uint32_t)(p - first) };
		p = q;
	}
	if (p != e) {
		rp_free(pos);
		return false;
	}
	qsort(pos, count, sizeof *pos, pos_cmp);
	c->okey = rp_alloc(sizeof *c->okey * ((size_t)count + 1));
	c->ooff = rp_alloc(sizeof *c->ooff * ((size_t)count + 1));
	for (uint32_t i = 0; i < count; i++) {
		c->okey[i] = pos[i].key;
		c->ooff[i] = pos[i].off;
	}
	rp_free(pos);
	c->buf = first; /* the entries, written back as they are */
	c->len = (size_t)(e - first);
	c->nold = count;
	return true;
}

/* DIR/<name> read whole into *buf (n bytes, rp_alloc'd); false when there
 * is no such file of ours to read. */
static bool read_cache(const char *name, unsigned char **buf, size_t *n)
{
	int fd = openat(cache_dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	bool ok = false;
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_size > 0 &&
	    (uint64_t)st.st_size <= SC_MAX_FILE + 4096) {
		size_t got = 0;
		*n = (size_t)st.st_size;
		*buf = rp_alloc(*n + 1);
		ssize_t r;
		while (got < *n && ((r = read(fd, *buf + got, *n - got)) > 0 || (r < 0 && errno == EINTR)))
			got += r > 0 ? (size_t)r : 0;
		ok = got == *n;
		if (!ok)
			rp_free(*buf);
	}
	close(fd);
	return ok;
}

static rp_symcache_t *new_cache(const char *build_id)
{
	size_t bl = strlen(build_id);
	if (cache_dfd < 0 || bl < 2 || bl > 128 || strspn(build_id, "0123456789abcdef") != bl)
		return NULL;
	rp_symcache_t *c = rp_alloc(sizeof *c);
	snprintf(c->name, sizeof c->name, "%s.sym", build_id);
	return c;
}

#define SC_KEY_HEAD "heapctl " HEAPCTL_VERSION " rules " SC_RULES "\n"

rp_symcache_t *rp_symcache_load(const char *build_id, const char *what)
{
	rp_symcache_t *c = build_id && what ? new_cache(build_id) : NULL;
	unsigned char *buf;
	size_t n;
	if (c == NULL)
		return NULL;
	c->key = rp_strcat3(SC_KEY_HEAD, what, "");
	if (read_cache(c->name, &buf, &n) && !parse(c, buf, n))
		rp_free(buf);
	return c;
}

rp_symcache_t *rp_symcache_find(const char *build_id, const char **what)
{
	rp_symcache_t *c = build_id ? new_cache(build_id) : NULL;
	unsigned char *buf;
	size_t n, head = strlen(SC_KEY_HEAD);
	if (c == NULL || !read_cache(c->name, &buf, &n))
		return NULL;
	uint32_t hl = n >= 12 ? get32(buf + 8) : 0;
	if (hl < head || n - 12 < hl || memcmp(buf + 12, SC_KEY_HEAD, head) != 0) {
		rp_free(buf);
		return NULL;
	}
	c->key = rp_intern_n((const char *)buf + 12, hl);
	if (!parse(c, buf, n)) {
		rp_free(buf);
		return NULL;
	}
	*what = c->key + head;
	return c;
}

/* The frames of the module offset key into loc, and the RP_SC_* flags
 * they were found with; false when the cache does not have them. */
bool rp_symcache_get(const rp_symcache_t *c, uint64_t key, rp_loc_t *loc, unsigned *flags)
{
	size_t lo = 0, hi = c->nold;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->okey[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == c->nold || c->okey[lo] != key)
		return false;
	const unsigned char *p = c->buf + c->ooff[lo];
	*flags = p[8];
	unsigned nf = p[9];
	p += 10;
	loc->nframes = (int)nf;
	loc->frames = nf ? rp_alloc(sizeof(rp_frame_t) * nf) : NULL;
	for (unsigned i = 0; i < nf; i++) {
		rp_frame_t *f = &loc->frames[i];
		unsigned n = (unsigned)p[0] | (unsigned)p[1] << 8;
		rp_name_frame(f, rp_intern_n((const char *)p + 2, n));
		p += 2 + n;
		n = (unsigned)p[0] | (unsigned)p[1] << 8;
		f->file = n ? rp_intern_n((const char *)p + 2, n) : NULL;
		p += 2 + n;
		int32_t line;
		memcpy(&line, p, 4);
		f->line = line;
		p += 4;
	}
	return true;
}

/* ---- writing ------------------------------------------------------------ */

static void put(rp_symcache_t *c, const void *p, size_t n)
{
	c->add = rp_grow(c->add, &c->add_cap, c->nadd_bytes + n, 1);
	memcpy(c->add + c->nadd_bytes, p, n);
	c->nadd_bytes += n;
}

static void put16(rp_symcache_t *c, size_t v)
{
	unsigned char b[2] = { (unsigned char)v, (unsigned char)(v >> 8) };
	put(c, b, 2);
}

void rp_symcache_put(rp_symcache_t *c, uint64_t key, const rp_loc_t *loc, unsigned flags)
{
	if (c == NULL || loc->nframes > SC_MAX_FRAMES || c->len + c->nadd_bytes > SC_MAX_FILE)
		return;
	for (int i = 0; i < loc->nframes; i++) {
		const rp_frame_t *f = &loc->frames[i];
		if (f->sys == NULL || !*f->sys || strlen(f->sys) > 65535 || (f->file && strlen(f->file) > 65535))
			return;
	}
	put(c, &key, 8);
	unsigned char fb[2] = { (unsigned char)flags, (unsigned char)loc->nframes };
	put(c, fb, 2);
	for (int i = 0; i < loc->nframes; i++) {
		const rp_frame_t *f = &loc->frames[i];
		size_t n = strlen(f->sys);
		put16(c, n);
		put(c, f->sys, n);
		n = f->file ? strlen(f->file) : 0;
		put16(c, n);
		if (n)
			put(c, f->file, n);
		int32_t line = f->line;
		put(c, &line, 4);
	}
	c->nadd++;
}

/* The file again with the entries put since it was read, if any.  A
 * failure leaves the cache as it was: it is only a cache. */
void rp_symcache_save(rp_symcache_t *c)
{
	if (c == NULL || c->nadd == 0 || cache_dfd < 0)
		return;
	char tmp[200];
	snprintf(tmp, sizeof tmp, ".%s.%d.tmp", c->name, (int)getpid());
	int fd = openat(cache_dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	uint32_t hl = (uint32_t)strlen(c->key), count = c->nold + c->nadd;
	bool ok = !rp_write_all(fd, SC_MAGIC, 8) && !rp_write_all(fd, &hl, 4) && !rp_write_all(fd, c->key, hl) &&
	    !rp_write_all(fd, &count, 4) && !rp_write_all(fd, c->buf, c->len) &&
	    !rp_write_all(fd, c->add, c->nadd_bytes);
	if (close(fd) != 0)
		ok = false;
	if (!ok || renameat(cache_dfd, tmp, cache_dfd, c->name) != 0)
		unlinkat(cache_dfd, tmp, 0);
}
