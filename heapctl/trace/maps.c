/*
 * heapctl/trace/maps.c - what `heapctl trace` reads of the process's
 * mappings: its /proc/PID/maps (copied once a second and for each dump),
 * the unwind table of each object in it, the build ids the dumps carry,
 * and the executable objects where its allocator is looked for.  Every
 * line is parsed, and every file read, by heapctl/elf/'s readers
 * (el_map_parse, el_section and el_eh_fdes, el_build_id): this file keeps
 * only what trace makes of them.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf/elf.h"
#include "tr_internal.h"

static uint64_t made_next = MADE_BASE; /* the next table eh_make makes */
static uint64_t maps_gen = 1;          /* counts tr_read_maps' copies of the maps */

static struct {
	eh_obj_t *o;
	size_t n;
	uint64_t gen; /* the copy of the maps they came from      */
} EH;

/* /proc/PID/maps, and the build ids of its objects while they can be read
 * (the last dump is written after the process ended). */
void tr_read_maps(void)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", T.pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size_t cap = 65536, len = 0;
	char *b = malloc(cap);
	for (ssize_t r; b; len += (size_t)r) {
		if (len == cap) {
			char *nb = realloc(b, cap *= 2);
			if (nb == NULL) {
				free(b);
				b = NULL;
				break;
			}
			b = nb;
		}
		r = read(fd, b + len, cap - len);
		if (r <= 0)
			break;
	}
	close(fd);
	if (b && len > 0) {
		free(T.maps);
		T.maps = b;
		T.maps_len = len;
		maps_gen++;
		tr_put_maps(NULL);
	} else {
		free(b);
	}
}

/* Each line of the copy of the maps, raw (n bytes, without its newline)
 * and as elf/'s one reader parses it (m NULL: a line it refuses, or one
 * too long for a path). */
typedef void line_fn(const char *raw, size_t n, const el_map_t *m, void *arg);

static void maps_lines(line_fn *fn, void *arg)
{
	for (const char *l = T.maps, *end = T.maps + T.maps_len; l < end;) {
		const char *nl = memchr(l, '\n', (size_t)(end - l));
		size_t n = nl ? (size_t)(nl - l) : (size_t)(end - l);
		char line[PATH_MAX + 256];
		el_map_t m;
		bool ok = false;
		if (n < sizeof line) {
			memcpy(line, l, n);
			line[n] = 0;
			ok = el_map_parse(line, &m);
		}
		fn(l, n, ok ? &m : NULL, arg);
		l += n + (nl != NULL);
	}
}

/* ---- the unwind tables --------------------------------------------------
 * The unwind tables, read from the process's memory: each object's ELF
 * header and program headers are mapped with its first page, and its
 * .eh_frame_hdr (PT_GNU_EH_FRAME) with its text, so a binary search table
 * for every loaded object is found without opening a file.  That is what
 * makes a process in a container unwind (its files are at other paths on
 * this side, under /proc/PID/root), and a file deleted since.  An object
 * without that segment (gcc -static) gets a table made here from the FDEs
 * of its file's .eh_frame (eh_make).  One with an unusual table encoding
 * goes to the ptrace accessors' ELF reader, which opens the file the maps
 * name.
 */

static int by_pc(const void *a, const void *b)
{
	const int32_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The table eh_make builds: pairs of (start, FDE), both relative to the
 * section, as .eh_frame_hdr has them. */
typedef struct made_s {
	int32_t *t;
	size_t n, cap;
	uint64_t addr; /* the section's address in the file          */
	bool failed;
} made_t;

static void made_add(uint64_t start, uint64_t len, uint64_t off, void *arg)
{
	made_t *m = arg;
	int64_t rel = (int64_t)(start - m->addr);
	if (m->failed || rel < INT32_MIN || rel > INT32_MAX || off > INT32_MAX)
		return; /* not in the table's form */
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 1024;
		int32_t *nt = realloc(m->t, cap * 2 * sizeof *nt);
		if (nt == NULL) {
			m->failed = true; /* keep what was read, as a short table */
			return;
		}
		m->t = nt;
		m->cap = cap;
	}
	m->t[2 * m->n] = (int32_t)rel;
	m->t[2 * m->n + 1] = (int32_t)off;
	m->n++;
}

/* An object without .eh_frame_hdr (gcc -static): its table, made from the
 * FDEs of its file's .eh_frame (elf/'s reader), sorted, relative to the
 * section, which is at bias in the process.  Every FDE elf/ reads is in
 * it, whatever its CIE's augmentation ("zPLR" of code with cleanups, "zRS"
 * of the signal trampoline too): the entries a linker puts in
 * .eh_frame_hdr, as many as libc's has.  The file is opened here
 * (O_NONBLOCK) rather than by el_file_map: its path is the process's to
 * choose, and a FIFO put there must not block the tracer. */
static void eh_make(eh_obj_t *o, const char *path, uint64_t bias)
{
	char open_path[PATH_MAX + 64];
	cli_proc_object_path(T.pid, path, open_path, sizeof open_path);
	int fd = open(open_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	el_file_t f = { 0 };
	el_section_t sec;
	made_t m = { 0 };
	if (fd >= 0 && el_fd_map(fd, &f) && el_section(f.p, f.size, ".eh_frame", &sec) &&
	    sec.sh.sh_type == SHT_PROGBITS && sec.data) {
		m.addr = sec.sh.sh_addr;
		el_eh_fdes(sec.data, sec.sh.sh_size, sec.sh.sh_addr, made_add, &m);
	}
	el_file_unmap(&f);
	if (fd >= 0)
		close(fd);
	if (m.n == 0) {
		free(m.t);
		return;
	}
	qsort(m.t, m.n, 2 * sizeof *m.t, by_pc);
	o->made = m.t;
	o->hdr = m.addr + bias; /* the entries are relative to it */
	o->table = made_next;
	o->nfde = m.n;
	made_next += (m.n * 8 + 4095) & ~4095ull;
}

/* The object whose first mapping (file offset 0) starts at base. */
static void eh_add(uint64_t base, uint64_t lo, uint64_t hi, const char *path)
{
	eh_obj_t o = { .lo = lo, .hi = hi };
	cli_eh_table_t t;
	if (cli_proc_eh_table(T.memfd, base, &t)) {
		if (t.nfde) {
			o.hdr = t.hdr;
			o.table = t.table;
			o.nfde = t.nfde;
		} else if (t.hdr == 0) {
			eh_make(&o, path, t.bias);
		}
	}
	EH.o[EH.n++] = o;
}

/* The objects of the current copy of the maps. */
static void eh_free(void)
{
	for (size_t i = 0; i < EH.n; i++)
		free(EH.o[i].made);
	free(EH.o);
	made_next = MADE_BASE;
}

/* An object: the run of mappings of one path that begins at offset 0. */
typedef struct run_s {
	char path[PATH_MAX]; /* "" while no first page of it is seen       */
	uint64_t base, lo, hi;
} run_t;

static void run_line(const char *raw, size_t n, const el_map_t *m, void *arg)
{
	run_t *r = arg;
	if (m == NULL || m->path[0] != '/')
		return;
	if (m->offset == 0 || strcmp(m->path, r->path) != 0) {
		if (r->path[0] && r->lo < r->hi)
			eh_add(r->base, r->lo, r->hi, r->path);
		snprintf(r->path, sizeof r->path, "%s", m->path);
		r->base = r->lo = m->lo;
		r->hi = m->hi;
		if (m->offset != 0) /* no first page of it here */
			r->path[0] = 0;
	} else {
		r->hi = m->hi;
	}
}

static void eh_build(void)
{
	eh_free();
	EH.o = NULL;
	EH.n = 0;
	EH.gen = maps_gen;
	size_t lines = 1;
	for (size_t i = 0; i < T.maps_len; i++)
		lines += T.maps[i] == '\n';
	EH.o = calloc(lines, sizeof *EH.o);
	if (EH.o == NULL)
		return;
	run_t r = { .path = "" };
	maps_lines(run_line, &r);
	if (r.path[0] && r.lo < r.hi)
		eh_add(r.base, r.lo, r.hi, r.path);
}

/* The object of the current maps that holds ip, its table built first
 * when the maps changed. */
const eh_obj_t *tr_eh_object(uint64_t ip)
{
	if (EH.gen != maps_gen)
		eh_build();
	for (size_t i = 0; i < EH.n; i++)
		if (ip >= EH.o[i].lo && ip < EH.o[i].hi)
			return &EH.o[i];
	return NULL;
}

/* A word of a table made here (eh_make), at addr above MADE_BASE. */
bool tr_eh_made_read(uint64_t addr, uint64_t *val)
{
	for (size_t i = 0; i < EH.n; i++) {
		const eh_obj_t *o = &EH.o[i];
		if (o->made && addr >= o->table && addr + sizeof *val <= o->table + o->nfde * 8) {
			memcpy(val, (const char *)o->made + (addr - o->table), sizeof *val);
			return true;
		}
	}
	return false;
}

void tr_maps_close(void)
{
	eh_free();
	EH.o = NULL;
	EH.n = 0;
	EH.gen = 0;
}

/* ---- build ids ------------------------------------------------------------
 * Each executable mapping of a file gets, before it, the file's build id in
 * the line agent/dump.c writes ("start-start r-xp path (@offset) id"; it
 * says why that form), read through /proc/PID/map_files: the file the
 * process maps, whatever is at its path now.  Kept per device and inode. */

typedef struct {
	unsigned long long dev_ino[3]; /* major, minor, inode */
	char hex[129];                 /* "" when it has none */
} bid_t;

static bid_t *bids;
static size_t nbids, bidcap;

/* The GNU build id of the ELF file fd, as lowercase hex; false when none. */
static bool file_build_id(int fd, char *hex)
{
	el_file_t f;
	if (!el_fd_map(fd, &f))
		return false;
	bool ok = el_build_id(f.p, f.size, hex);
	el_file_unmap(&f);
	return ok;
}

/* The build id of what the maps line m maps; NULL when it is not an
 * executable mapping of a file (whose path has no blank: not one
 * " (deleted)") or has none. */
static const char *line_build_id(const el_map_t *m)
{
	if (m == NULL || !m->has_ino || !el_map_exec_file(m) || strpbrk(m->path, " \t"))
		return NULL;
	for (size_t i = 0; i < nbids; i++)
		if (bids[i].dev_ino[0] == m->dev_major && bids[i].dev_ino[1] == m->dev_minor &&
		    bids[i].dev_ino[2] == m->ino)
			return bids[i].hex[0] ? bids[i].hex : NULL;
	char mf[96];
	snprintf(mf, sizeof mf, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, T.pid, m->lo, m->hi);
	int fd = open(mf, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return NULL; /* not kept: the next dump may read it */
	if (nbids == bidcap) {
		size_t cap = bidcap ? 2 * bidcap : 32;
		bid_t *nb = realloc(bids, cap * sizeof *bids);
		if (nb == NULL) {
			close(fd);
			return NULL;
		}
		bids = nb;
		bidcap = cap;
	}
	bid_t *b = &bids[nbids++];
	*b = (bid_t){ { m->dev_major, m->dev_minor, m->ino }, "" };
	if (!file_build_id(fd, b->hex))
		b->hex[0] = 0;
	close(fd);
	return b->hex[0] ? b->hex : NULL;
}

/* One line into f (NULL: the build id read only), after the build id line
 * of what it maps. */
static void put_line(const char *raw, size_t n, const el_map_t *m, void *arg)
{
	FILE *f = arg;
	const char *id = line_build_id(m);
	if (id && f)
		fprintf(f, "%" PRIx64 "-%" PRIx64 " r-xp %s (@%" PRIx64 ") %s\n", m->lo, m->lo, m->path, m->offset, id);
	if (f) {
		fwrite(raw, 1, n, f);
		if (raw + n < T.maps + T.maps_len)
			fputc('\n', f); /* the newline it had */
	}
}

/* T.maps into f, each executable mapping with its build id line; with f
 * NULL, the build ids read only. */
void tr_put_maps(FILE *f)
{
	maps_lines(put_line, f);
}

/* ---- the executable objects ----------------------------------------------- */

/* The process's executable objects (from the copy of its maps), its
 * program first, then its libraries with libc last (a library that defines malloc beside libc is
 * the allocator the process uses: jemalloc, tcmalloc, mimalloc). */
typedef struct objs_s {
	char (*out)[PATH_MAX];
	size_t n, max, libc;
} objs_t;

static void object_line(const char *raw, size_t len, const el_map_t *m, void *arg)
{
	objs_t *o = arg;
	if (m == NULL || !el_map_exec_file(m) || strstr(m->path, " (deleted)"))
		return;
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->out[i], m->path) == 0)
			return;
	if (o->n < o->max) {
		const char *b = strrchr(m->path, '/') + 1;
		if (strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-", 5) == 0)
			o->libc = o->n;
		snprintf(o->out[o->n++], PATH_MAX, "%s", m->path);
	}
}

size_t tr_mapped_objects(int pid, char (*out)[PATH_MAX], size_t max)
{
	char path[64], exe[PATH_MAX];
	snprintf(path, sizeof path, "/proc/%d/exe", pid);
	ssize_t el = readlink(path, exe, sizeof exe - 1);
	exe[el > 0 ? el : 0] = 0;
	objs_t o = { out, 0, max, SIZE_MAX };
	if (exe[0] && o.n < max)
		snprintf(out[o.n++], PATH_MAX, "%s", exe);
	maps_lines(object_line, &o);
	size_t n = o.n, libc = o.libc;
	if (libc != SIZE_MAX && libc + 1 < n) {
		char tmp[PATH_MAX];
		memcpy(tmp, out[libc], PATH_MAX);
		memmove(out[libc], out[libc + 1], (n - libc - 1) * PATH_MAX);
		memcpy(out[n - 1], tmp, PATH_MAX);
	}
	return n;
}
