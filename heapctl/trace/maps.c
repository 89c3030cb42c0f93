/*
 * heapctl/trace/maps.c - what `heapctl trace` reads of the process's
 * mappings: its /proc/PID/maps (copied once a second and for each dump),
 * the unwind table of each object in it, the build ids the dumps carry,
 * and the executable objects where its allocator is looked for.  The
 * heapctl/elf/ readers are to replace this file: its code is trace.c's,
 * moved as it was.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tr_internal.h"

static uint64_t made_next = MADE_BASE;   /* the next table eh_make makes */
static uint64_t maps_gen = 1;  /* counts tr_read_maps' copies of the maps */

static struct {
	eh_obj_t *o;
	size_t n;
	uint64_t gen;              /* the copy of the maps they came from      */
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

/* An object without .eh_frame_hdr (gcc -static): its table, made from the
 * FDEs of its .eh_frame (the file's section, at bias in the process), in
 * the form .eh_frame_hdr has: pairs of (start, FDE) relative to the
 * section, sorted.  Only the usual encoding of a start (pc-relative,
 * signed 4 bytes) is read. */
static void eh_make(eh_obj_t *o, const char *path, uint64_t bias)
{
	char open_path[PATH_MAX + 64];
	cli_proc_object_path(T.pid, path, open_path, sizeof open_path);
	int fd = open(open_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	Elf *e = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
	size_t shstr;
	const unsigned char *d = NULL;
	uint64_t addr = 0, size = 0;
	if (e && elf_getshdrstrndx(e, &shstr) == 0) {
		for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn)) != NULL;) {
			GElf_Shdr sh;
			const char *nm;
			if (gelf_getshdr(scn, &sh) == NULL || (nm = elf_strptr(e, shstr, sh.sh_name)) == NULL ||
			    strcmp(nm, ".eh_frame") != 0 || sh.sh_type != SHT_PROGBITS)
				continue;
			Elf_Data *data = elf_rawdata(scn, NULL);
			if (data && data->d_size == sh.sh_size) {
				d = data->d_buf;
				addr = sh.sh_addr + bias;
				size = sh.sh_size;
			}
			break;
		}
	}
	int32_t *t = NULL;
	size_t n = 0, cap = 0;
	for (uint64_t off = 0; d && off + 8 <= size;) {
		uint32_t len;
		memcpy(&len, d + off, 4);
		if (len == 0 || len == 0xffffffffu || off + 4 + len > size)
			break;                     /* the terminator, or 64-bit: stop */
		uint32_t id;
		memcpy(&id, d + off + 4, 4);
		if (id != 0) {
			/* an FDE: its CIE says how pc_begin is written */
			uint64_t cie = off + 4 - id;
			bool pcrel4 = false;
			uint32_t clen;
			if (cie + 9 < size && (memcpy(&clen, d + cie, 4), clen) && cie + 4 + clen <= size) {
				const char *aug = (const char *)d + cie + 9;
				size_t alen = strnlen(aug, (size_t)(size - cie - 9));
				/* "zR" with the encoding in the augmentation data: after
				 * code and data alignment and the return register */
				if (alen == 2 && aug[0] == 'z' && aug[1] == 'R') {
					const unsigned char *q = (const unsigned char *)aug + 3, *qend = d + cie + 4 + clen;
					for (int k = 0; k < 4 && q < qend; k++)      /* 3 LEB128s, then the data's length */
						while (q < qend && (*q++ & 0x80))
							;
					pcrel4 = q < qend && *q == 0x1b;
				}
			}
			if (pcrel4) {
				int32_t rel;
				memcpy(&rel, d + off + 8, 4);
				uint64_t pc = addr + off + 8 + (int64_t)rel;
				if (n == cap) {
					cap = cap ? 2 * cap : 1024;
					int32_t *nt = realloc(t, cap * 2 * sizeof *t);
					if (nt == NULL)
						break;
					t = nt;
				}
				t[2 * n] = (int32_t)(int64_t)(pc - addr);
				t[2 * n + 1] = (int32_t)off;
				n++;
			}
		}
		off += 4 + (uint64_t)len;
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	if (n == 0) {
		free(t);
		return;
	}
	qsort(t, n, 2 * sizeof *t, by_pc);
	o->made = t;
	o->hdr = addr;                       /* the entries are relative to it */
	o->table = made_next;
	o->nfde = n;
	made_next += (n * 8 + 4095) & ~4095ull;
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
	/* an object: the run of mappings of one path that begins at offset 0 */
	char cur[4096] = "";
	uint64_t base = 0, lo = 0, hi = 0;
	for (char *l = T.maps, *end = T.maps + T.maps_len; l && l < end;) {
		char *nl = memchr(l, '\n', (size_t)(end - l));
		size_t len = nl ? (size_t)(nl - l) : (size_t)(end - l);
		char line[4200];
		snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
		l = nl ? nl + 1 : NULL;
		unsigned long long a, b, off;
		int pos = 0;
		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s%n", &a, &b, &off, &pos) < 3 || pos == 0)
			continue;
		const char *path = line + pos;
		while (*path == ' ')
			path++;
		if (path[0] != '/')
			continue;
		if (off == 0 || strcmp(path, cur) != 0) {
			if (cur[0] && lo < hi)
				eh_add(base, lo, hi, cur);
			snprintf(cur, sizeof cur, "%s", path);
			base = lo = a;
			hi = b;
			if (off != 0)             /* no first page of it here */
				cur[0] = 0;
		} else {
			hi = b;
		}
	}
	if (cur[0] && lo < hi)
		eh_add(base, lo, hi, cur);
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
	unsigned long long dev_ino[3];    /* major, minor, inode */
	char hex[129];                    /* "" when it has none */
} bid_t;

static bid_t *bids;
static size_t nbids, bidcap;

/* The GNU build id of the ELF file fd, as lowercase hex; false when none. */
static bool file_build_id(int fd, char *hex)
{
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t n = 0;
	bool ok = false;
	if (e && elf_kind(e) == ELF_K_ELF && elf_getphdrnum(e, &n) == 0)
		for (size_t i = 0; i < n && !ok; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE)
				continue;
			Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
			GElf_Nhdr nh;
			size_t off = 0, name, desc;
			while (d && !ok && (off = gelf_getnote(d, off, &nh, &name, &desc)) > 0) {
				if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
				    memcmp((char *)d->d_buf + name, "GNU", 4) || nh.n_descsz < 2 || nh.n_descsz > 64)
					continue;
				const unsigned char *b = (const unsigned char *)d->d_buf + desc;
				for (size_t k = 0; k < nh.n_descsz; k++)
					sprintf(hex + 2 * k, "%02x", b[k]);
				ok = true;
			}
		}
	if (e)
		elf_end(e);
	return ok;
}

/* The build id of what the maps line "lo-hi perms off dev inode path"
 * maps; NULL when it is not an executable mapping of a file or has none. */
static const char *line_build_id(const char *line, uint64_t *start, uint64_t *offset, const char **path)
{
	unsigned long long lo, hi, off, maj, min, ino;
	char perms[8];
	int pos = -1;
	if (sscanf(line, "%llx-%llx %7s %llx %llx:%llx %llu %n", &lo, &hi, perms, &off, &maj, &min, &ino, &pos) < 7 ||
	    pos < 0 || line[pos] != '/' || strchr(perms, 'x') == NULL || strpbrk(line + pos, " \t"))
		return NULL;
	*start = lo;
	*offset = off;
	*path = line + pos;
	for (size_t i = 0; i < nbids; i++)
		if (bids[i].dev_ino[0] == maj && bids[i].dev_ino[1] == min && bids[i].dev_ino[2] == ino)
			return bids[i].hex[0] ? bids[i].hex : NULL;
	char mf[96];
	snprintf(mf, sizeof mf, "/proc/%d/map_files/%llx-%llx", T.pid, lo, hi);
	int fd = open(mf, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return NULL;          /* not kept: the next dump may read it */
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
	*b = (bid_t){ { maj, min, ino }, "" };
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !file_build_id(fd, b->hex))
		b->hex[0] = 0;
	close(fd);
	return b->hex[0] ? b->hex : NULL;
}

/* T.maps into f, each executable mapping with its build id line; with f
 * NULL, the build ids read only. */
void tr_put_maps(FILE *f)
{
	for (const char *l = T.maps, *end = T.maps + T.maps_len; l < end;) {
		const char *nl = memchr(l, '\n', (size_t)(end - l));
		size_t n = nl ? (size_t)(nl - l) : (size_t)(end - l);
		char line[4096 + 256];
		uint64_t start, off;
		const char *path, *id = NULL;
		if (n < sizeof line) {
			memcpy(line, l, n);
			line[n] = 0;
			id = line_build_id(line, &start, &off, &path);
		}
		if (id && f)
			fprintf(f, "%" PRIx64 "-%" PRIx64 " r-xp %s (@%" PRIx64 ") %s\n", start, start, path, off, id);
		if (f)
			fwrite(l, 1, n + (nl != NULL), f);
		l += n + (nl != NULL);
	}
}

/* ---- the executable objects ----------------------------------------------- */

/* The process's executable objects (from the copy of its maps), its
 * program first, then its libraries with libc last (a library that defines malloc beside libc is
 * the allocator the process uses: jemalloc, tcmalloc, mimalloc). */
size_t tr_mapped_objects(int pid, char (*out)[PATH_MAX], size_t max)
{
	char path[64], exe[PATH_MAX];
	snprintf(path, sizeof path, "/proc/%d/exe", pid);
	ssize_t el = readlink(path, exe, sizeof exe - 1);
	exe[el > 0 ? el : 0] = 0;
	size_t n = 0, libc = SIZE_MAX;
	if (exe[0] && n < max)
		snprintf(out[n++], PATH_MAX, "%s", exe);
	for (char *l = T.maps, *end = T.maps + T.maps_len; l && l < end;) {
		char *nl = memchr(l, '\n', (size_t)(end - l));
		if (nl == NULL)
			break;
		*nl = 0;
		char perms[8] = "";
		int name_at = 0;
		sscanf(l, "%*s %7s %*s %*s %*s%n", perms, &name_at);
		char *name = l + name_at;
		while (*name == ' ')
			name++;
		if (strchr(perms, 'x') && name[0] == '/' && !strstr(name, " (deleted)")) {
			bool seen = false;
			for (size_t i = 0; i < n; i++)
				seen |= strcmp(out[i], name) == 0;
			if (!seen && n < max) {
				const char *b = strrchr(name, '/') + 1;
				if (strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-", 5) == 0)
					libc = n;
				snprintf(out[n++], PATH_MAX, "%s", name);
			}
		}
		*nl = '\n';
		l = nl + 1;
	}
	if (libc != SIZE_MAX && libc + 1 < n) {
		char tmp[PATH_MAX];
		memcpy(tmp, out[libc], PATH_MAX);
		memmove(out[libc], out[libc + 1], (n - libc - 1) * PATH_MAX);
		memcpy(out[n - 1], tmp, PATH_MAX);
	}
	return n;
}
