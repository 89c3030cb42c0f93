/*
 * heapctl/symbolize/symbolize.c - addresses from a heap profile to functions, files
 * and lines, with libdwfl (elfutils).
 *
 * Each executable mapping in MAPPED_LIBRARIES becomes one libdwfl module,
 * placed at the load bias the mapping implies, so PIE executables and
 * shared libraries come out right.  libdwfl finds the symbols (.symtab,
 * else .dynsym) and the DWARF, including separate debug files by build-id
 * and .gnu_debuglink under the debug directories.  With a sysroot, every
 * file and debug directory is looked up under it.  Symbol tables are
 * sorted once per module and bisected (symtab_lookup).
 *
 * A return address points after its call; it is looked up one byte
 * earlier so it lands on the call, in the caller's function and line.
 *
 * A dump's paths are the writer's to choose.  For a report made on behalf
 * of someone else (heapctl serve, as root, for any local user) they are not
 * opened with the reporter's rights: rp_symbolize_confine() gives the user
 * whose rights every file is opened with (fsuid, fsgid and groups, for this
 * thread's opens only, so the symcache and the output stay the reporter's),
 * and a live process whose objects are read through its own mappings: the
 * kernel's handle /proc/PID/map_files/START-END is the file mapped there,
 * whatever path the dump gives (root can open it), else the path the kernel
 * lists in /proc/PID/maps, if it is still that file (dev and inode; the
 * inode on overlayfs).  A range the process does not map gets no names.
 *
 * A file whose build id is not the one the dump records is never used
 * for names (see "build ids" below).
 *
 * Beside it: debuginfod.c says where debug files are (and asks debuginfod
 * servers), names.c turns a symbol into a frame's names, inflate.c
 * inflates compressed debug sections, symcache.c keeps what was found.
 */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zlib.h>

#include "elf/elf.h"
#include "report/report.h"
#include "report/rp_internal.h"

/* A module's symbols, sorted by address once and searched by bisection
 * (libdwfl's dwfl_module_addrinfo scans the whole table for each address,
 * which is most of a report's time on a big binary without DWARF). */
typedef struct sym_s {
	GElf_Addr start, end; /* end == start: a symbol without a size */
	const char *name;
	int binding; /* GLOBAL 3, UNIQUE 2, WEAK 1, LOCAL 0 */
	int index;   /* in the module's table: first wins a tie */
} sym_t;

typedef struct symtab_s {
	sym_t *s;
	size_t n;
	GElf_Addr *max_end; /* the largest end of a sized symbol in s[0..i] */
	int *sizeless;      /* the last sizeless symbol in s[0..i], or -1 */
	bool built;
} symtab_t;

/* One distinct file among the mappings. */
typedef struct object_s {
	const char *path; /* as in the dump */
	Dwfl_Module *mod; /* NULL: not found or not ELF */
	int first_map;
	symtab_t syms;
	el_ehtab_t eh;    /* built when an address has no symbol */
	const char *file; /* the file opened for it */
	int pre_fd;       /* its debug file, found up front: the inflated
	                   * copy, or the file itself (or -1) */
	char *pre_name;
	bool pre_pending;     /* pre_fd is being made (prepare_finish) */
	bool late;            /* named after the others (pre_fd was made) */
	int fd;               /* the file, until libdwfl is given it */
	GElf_Addr bias;       /* where its addresses are (0 for ET_EXEC) */
	const char *build_id; /* read with --symcache, lowercase hex */
	rp_symcache_t *cache; /* --symcache: its frames kept on disk */
	const char *unnamed;  /* why no file is used for it (build ids) */
} object_t;

static char *debug_path;       /* libdwfl reads it through the callbacks */
static bool lines_off;         /* rp_symbolize_lines(false) */
static bool want_lines = true; /* this call's: file:line in the frames */

void rp_symbolize_lines(bool on)
{
	lines_off = !on;
}

/* ---- whose rights ------------------------------------------------------- */

typedef struct live_s {
	uint64_t start, end, offset;
	unsigned dev_major, dev_minor;
	uint64_t ino;
	char *path; /* as the kernel lists it, or NULL */
} live_t;

static struct {
	int pid;      /* > 0: objects only as PID maps them */
	bool as_user; /* files opened with these rights: */
	uid_t uid;
	gid_t gid;
	gid_t *groups, *own; /* its groups; ours, to go back to */
	int ngroups, nown;
	bool on;      /* the user's rights are in force */
	live_t *live; /* /proc/PID/maps, read for each report */
	size_t nlive;
} conf;

int rp_symbolize_confine(int pid, bool as_user, uid_t uid, gid_t gid, const gid_t *groups, int ngroups, char *err,
    size_t errlen)
{
	conf.pid = pid;
	conf.as_user = as_user && geteuid() == 0; /* else our own rights are no more */
	conf.uid = uid;
	conf.gid = gid;
	conf.ngroups = ngroups > 0 ? ngroups : 0;
	conf.groups = rp_alloc(sizeof(gid_t) * ((size_t)conf.ngroups + 1));
	if (conf.ngroups)
		memcpy(conf.groups, groups, sizeof(gid_t) * (size_t)conf.ngroups);
	int n = getgroups(0, NULL);
	conf.own = rp_alloc(sizeof(gid_t) * ((size_t)(n > 0 ? n : 0) + 1));
	conf.nown = n > 0 ? getgroups(n, conf.own) : 0;
	if (conf.nown < 0) {
		snprintf(err, errlen, "cannot read our groups: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Take on (or give back) the user's rights for opening files; false when
 * the kernel did not make the switch. */
static bool user_rights(bool on)
{
	if (!conf.as_user || conf.on == on)
		return true;
	bool ok;
	if (on) {
		ok = setgroups((size_t)conf.ngroups, conf.groups) == 0;
		setfsgid(conf.gid);
		setfsuid(conf.uid);
		/* each returns the old id: asked again, the new one or not */
		ok = ok && (gid_t)setfsgid((gid_t)-1) == conf.gid && (uid_t)setfsuid((uid_t)-1) == conf.uid;
	} else {
		setfsuid(geteuid());
		setfsgid(getegid());
		ok = setgroups((size_t)conf.nown, conf.own) == 0;
	}
	conf.on = on;
	return ok;
}

/* /proc/PID/maps as it is now, into conf.live (read with the user's rights:
 * what the kernel lets the user see of the process). */
static bool add_live(const el_map_t *m, void *cap)
{
	if (!m->has_ino)
		return true;
	live_t l = { .start = m->lo,
		.end = m->hi,
		.offset = m->offset,
		.dev_major = m->dev_major,
		.dev_minor = m->dev_minor,
		.ino = m->ino,
		.path = m->path[0] == '/' ? rp_strdup(m->path) : NULL };
	conf.live = rp_grow(conf.live, cap, conf.nlive + 1, sizeof *conf.live);
	conf.live[conf.nlive++] = l;
	return true;
}

static bool read_live(char *err, size_t errlen)
{
	size_t cap = 0;
	conf.nlive = 0;
	if (el_maps_each(conf.pid, add_live, &cap) == 0)
		return true;
	snprintf(err, errlen, "cannot read /proc/%d/maps: %s", conf.pid, strerror(errno));
	return false;
}

/* ---- debug files ---------------------------------------------------------
 * Found as libdwfl would find them (debuginfod.c says where), but opened
 * here so that they can be given to libdwfl inflated (inflate.c). */
static int open_object(const char *file);
static const char *under_root(const char *root, const char *path);
static const char *file_of(const char *path);
static void inflated(const int *fds, int *out, size_t n);
static void prepare_finish(void);

/* A build id's bits as lowercase hex, into hex (2 * len + 1 bytes). */
static void build_id_hex(const unsigned char *bits, int len, char *hex)
{
	for (int i = 0; i < len; i++) {
		hex[2 * i] = "0123456789abcdef"[bits[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[bits[i] & 15];
	}
	hex[2 * len] = 0;
}

/* DEBUG_ROOT/.build-id/xx/yyyy.debug, opened; -1 when there is none. */
static int by_build_id(Dwfl_Module *mod, char **name)
{
	const unsigned char *id;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &id, &vaddr);
	char hex[129], path[4096];
	if (len < 2 || len > 64)
		return -1;
	build_id_hex(id, len, hex);
	if (!rp_debug_build_id_path(hex, path, sizeof path))
		return -1;
	int fd = open_object(path);
	if (fd >= 0)
		*name = strdup(path);
	return fd;
}

/* The .gnu_debuglink file of file (rp_debug_link_path); it must have the CRC
 * the link gives.  -1 when there is none. */
static int by_debuglink(const char *file, const char *link, GElf_Word crc, char **name)
{
	char path[4096];
	for (int k = 0; k < 3; k++) {
		if (!rp_debug_link_path(file, link, k, path, sizeof path))
			continue;
		int fd = open_object(path);
		if (fd < 0)
			continue;
		/* the whole file's CRC-32, as the link records it */
		uLong c = crc32(0, NULL, 0);
		unsigned char buf[65536];
		ssize_t r;
		while ((r = read(fd, buf, sizeof buf)) > 0)
			c = crc32(c, buf, (uInt)r);
		if (r == 0 && (GElf_Word)c == crc && lseek(fd, 0, SEEK_SET) == 0) {
			*name = strdup(path);
			return fd;
		}
		close(fd);
	}
	return -1;
}

static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, const char *file,
    const char *debuglink, GElf_Word crc, char **name)
{
	bool asking = rp_debuginfod_asking();
	double t0 = rp_debuginfod_now();
	/* the debug file by build id, as libdwfl would find it first; but
	 * libdwfl opens what it finds that way itself, so it is looked up
	 * here to be given inflated (inflate.c) */
	bool alt = debuglink && crc == 0; /* a dwz file: libdwfl's lookup */
	object_t *o = userdata ? *userdata : NULL;
	if (!alt && o && o->pre_pending)
		prepare_finish();
	if (!alt && o && o->pre_fd >= 0) { /* found up front (prepare_debug) */
		int fd = o->pre_fd;
		o->pre_fd = -1;
		*name = o->pre_name;
		return fd;
	}
	int fd = alt ? -1 : by_build_id(mod, name);
	if (fd < 0 && !alt)
		fd = by_debuglink(file, debuglink, crc, name);
	/* libdwfl's own search loads libdebuginfod (and thirty libraries
	 * under it) even with no server to ask */
	if (fd < 0 && (alt || asking))
		fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file, debuglink, crc, name);
	if (fd >= 0) {
		int copy;
		inflated(&fd, &copy, 1);
		if (copy >= 0) {
			close(fd);
			fd = copy;
		}
	}
	if (fd >= 0 || !asking)
		return fd;
	rp_debuginfod_missed(mod, modname, t0);
	return fd;
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debug_path,
};

/* A regular file to read, or -1.  O_NONBLOCK: a FIFO or device named in a
 * hostile dump must not block the open; then only regular files pass. */
static int open_object(const char *file)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The file the live process maps at m's range, or -1 when it maps none
 * there now (the dump is older, or its MAPPED_LIBRARIES made up); *file
 * gets the path the kernel lists for it, under root. */
static int open_mapped(const rp_map_t *m, const char *root, const char **file)
{
	const live_t *l = NULL;
	for (size_t i = 0; i < conf.nlive && l == NULL; i++)
		if (conf.live[i].start == m->start && conf.live[i].end == m->limit &&
		    conf.live[i].offset == m->offset && conf.live[i].ino != 0)
			l = &conf.live[i];
	if (l == NULL)
		return -1;
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, conf.pid, l->start, l->end);
	*file = l->path ? under_root(root, file_of(l->path)) : rp_strdup(path);
	int fd = open_object(path);
	if (fd >= 0 || l->path == NULL)
		return fd;
	/* without CAP_CHECKPOINT_RESTORE (or CAP_SYS_ADMIN): by its path, if
	 * that is still the file.  On overlayfs (a container's root) maps gives
	 * the inode of the layer's file and a device that is neither the
	 * layer's nor the overlay's: there the inode decides. */
	struct stat st;
	struct statfs sf;
	if ((fd = open_object(*file)) < 0)
		return -1;
	bool same_ino = fstat(fd, &st) == 0 && (uint64_t)st.st_ino == l->ino;
	bool same_dev = same_ino && major(st.st_dev) == l->dev_major && minor(st.st_dev) == l->dev_minor;
	bool overlay = fstatfs(fd, &sf) == 0 && sf.f_type == OVERLAYFS_SUPER_MAGIC;
	if (!same_ino || (!same_dev && !overlay)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The load bias of the object in fd mapped by m: where its p_vaddr 0
 * lands. */
static bool load_bias(int fd, const rp_map_t *m, GElf_Addr *bias, bool *is_exec)
{
	Elf64_Ehdr eh;
	Elf64_Phdr phs[255];
	int n = el_phdrs(fd, 0, &eh, phs, 255);
	if (n < 0)
		return false;
	*is_exec = eh.e_type == ET_EXEC;
	for (int i = 0; i < n; i++) {
		const Elf64_Phdr *ph = &phs[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uint64_t page = ph->p_align > 1 ? ph->p_align : 4096;
		if (page > 65536)
			page = 4096; /* mappings are page-granular, not p_align-granular */
		uint64_t off0 = ph->p_offset & ~(page - 1);
		if (m->offset < off0 || m->offset >= ph->p_offset + ph->p_filesz)
			continue;
		/* the mapping shows file offset m->offset at m->start */
		*bias = m->start - m->offset - (ph->p_vaddr - ph->p_offset);
		return true;
	}
	return false;
}

static const char *under_root(const char *root, const char *path)
{
	if (root == NULL || *root == 0)
		return path;
	return rp_strcat3(root, path[0] == '/' ? "" : "/", path);
}

/* A dump's path may end in " (deleted)" when the file was replaced. */
static const char *file_of(const char *path)
{
	size_t n = strlen(path);
	if (n > 10 && !strcmp(path + n - 10, " (deleted)"))
		return rp_intern_n(path, n - 10);
	return path;
}

static void set_build_id(Dwfl_Module *mod, rp_map_t *m)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &bits, &vaddr);
	if (len <= 0)
		return;
	char *hex = rp_alloc((size_t)len * 2 + 1);
	build_id_hex(bits, len, hex);
	m->build_id = hex;
}

/* ---- build ids -------------------------------------------------------------
 * A dump of heapctl's agent records each loaded object's build id.  A file
 * found at the dump's path whose build id differs (the host's python for a
 * container's, a binary rebuilt since) is never used for names.  The right
 * file is then looked for by its build id: in the live process (-p PID:
 * /proc/PID/map_files, the kernel's handle on what it maps), under the
 * debug directory (<sysroot>/usr/lib/debug/.build-id), from a debuginfod
 * server (the executable, else its debug file), and with --symcache from
 * what an earlier report kept of that build id (cache_by_id).  Otherwise
 * its addresses stay addresses, and rp_profile_t.unnamed says why. */

static int alive_pid; /* rp_symbolize_pid() */

void rp_symbolize_pid(int pid)
{
	alive_pid = pid;
}

/* The GNU build id of the ELF file fd (lowercase hex into hex[129]);
 * false when it has none. */
static bool fd_build_id(int fd, char *hex)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *id;
	ssize_t len = e ? dwelf_elf_gnu_build_id(e, &id) : -1;
	bool ok = len >= 2 && len <= 64;
	if (ok)
		build_id_hex(id, (int)len, hex);
	if (e)
		elf_end(e);
	return ok;
}

/* fd if its build id is want; else closed and -1. */
static int if_build_id(int fd, const char *want)
{
	char have[129];
	if (fd >= 0 && fd_build_id(fd, have) && !strcmp(have, want))
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

/* The object m's dump records build id want for: fd (from the dump's path)
 * if it is that file, else that file found by its build id, with *file its
 * name; -1 and *why when there is none. */
static int by_dump_build_id(int fd, const rp_map_t *m, const char *want, const char **file, const char **why)
{
	char have[129] = "";
	bool found = fd >= 0;
	if (fd >= 0 && fd_build_id(fd, have) && !strcmp(have, want))
		return fd;
	if (fd >= 0)
		close(fd);
	char path[4096];
	if (alive_pid > 0 && conf.pid <= 0) {
		snprintf(path, sizeof path, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, alive_pid, m->start, m->limit);
		if ((fd = if_build_id(open_object(path), want)) >= 0) {
			*file = rp_strdup(path);
			return fd;
		}
	}
	if (rp_debug_build_id_path(want, path, sizeof path) && (fd = if_build_id(open_object(path), want)) >= 0) {
		*file = rp_strdup(path);
		return fd;
	}
	char *name = NULL;
	if ((fd = if_build_id(rp_debuginfod_by_id(want, &name), want)) >= 0) {
		*file = rp_strdup(name ? name : want);
		free(name);
		return fd;
	}
	free(name);
	char line[1024];
	const char *ask = "use -p PID, --sysroot or a debuginfod server";
	if (!found)
		snprintf(line, sizeof line, "build id %s in the dump, no such file on this host (%s)", want, ask);
	else if (have[0])
		snprintf(line, sizeof line, "build id %s in the dump, %s on this host: not used for names (%s)", want,
		    have, ask);
	else
		snprintf(line, sizeof line,
		    "build id %s in the dump, none in the file on this host: not used for "
		    "names (%s)",
		    want, ask);
	*why = rp_strdup(line);
	return -1;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute at;
	const char *s = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &at) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at))
		s = dwarf_formstring(&at);
	if (s == NULL)
		s = dwarf_diename(die);
	return s;
}

/* The subprogram and inlined-call DIEs that contain pc, innermost first
 * (dwarf_getscopes would go on from an inlined call into its abstract
 * definition's scopes, losing the callers it was inlined into).  One walk
 * down from the CU: into namespaces and types, which hold definitions but
 * no addresses, and into every scope whose ranges contain pc. */
static int scopes_walk(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *out, int n, int max, int depth)
{
	Dwarf_Die child;
	if (depth > 64 || dwarf_child(parent, &child) != 0)
		return n;
	do {
		int tag = dwarf_tag(&child);
		switch (tag) {
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
		case DW_TAG_lexical_block:
		case DW_TAG_try_block:
		case DW_TAG_catch_block:
			if (dwarf_haspc(&child, pc) <= 0)
				break;
			if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
				if (n == max)
					return n;
				out[n++] = child;
			}
			return scopes_walk(&child, pc, out, n, max, depth + 1);
		case DW_TAG_namespace:
		case DW_TAG_module: {
			int m = scopes_walk(&child, pc, out, n, max, depth + 1);
			if (m > n)
				return m;
			break;
		}
		default: break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return n;
}

static int scopes_at(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *out, int max)
{
	int n = scopes_walk(cu, pc, out, 0, max, 0);
	for (int i = 0; i < n / 2; i++) { /* outermost first -> innermost first */
		Dwarf_Die t = out[i];
		out[i] = out[n - 1 - i];
		out[n - 1 - i] = t;
	}
	return n;
}

/* One frame: the function's names, and file:line if known. */
static void frame_set(rp_frame_t *f, const char *name, const char *file, int line)
{
	memset(f, 0, sizeof *f);
	rp_name_frame(f, name);
	f->file = file ? rp_intern(file) : NULL;
	f->line = line;
}

/* The frames of one address: inlined calls from the line table and the
 * DIE scopes, then the containing function from the symbol table. */
/* ---- symbol tables ----------------------------------------------------- */

static int binding_rank(const GElf_Sym *sym)
{
	switch (GELF_ST_BIND(sym->st_info)) {
	case STB_GLOBAL: return 3;
	case STB_GNU_UNIQUE: return 2;
	case STB_WEAK: return 1;
	default: return 0;
	}
}

static int sym_cmp(const void *a, const void *b)
{
	const sym_t *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->binding != y->binding)
		return y->binding - x->binding; /* the stronger first */
	return x->index - y->index;
}

/* Every symbol that can name code: defined, not a section, file or TLS
 * symbol (the symbols dwfl_module_addrinfo considers). */
static void symtab_build(Dwfl_Module *mod, symtab_t *t)
{
	t->built = true;
	int n = dwfl_module_getsymtab(mod);
	if (n <= 1)
		return;
	t->s = rp_alloc(sizeof(sym_t) * (size_t)n);
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);
		if (name == NULL || name[0] == 0 || shndx == SHN_UNDEF || type == STT_SECTION || type == STT_FILE ||
		    type == STT_TLS)
			continue;
		t->s[t->n++] = (sym_t){ addr, addr + sym.st_size, name, binding_rank(&sym), i };
	}
	qsort(t->s, t->n, sizeof(sym_t), sym_cmp);
	t->max_end = rp_alloc(sizeof(GElf_Addr) * (t->n + 1));
	t->sizeless = rp_alloc(sizeof(int) * (t->n + 1));
	GElf_Addr me = 0;
	int last = -1;
	for (size_t i = 0; i < t->n; i++) {
		if (t->s[i].end > t->s[i].start) {
			if (t->s[i].end > me)
				me = t->s[i].end;
		} else {
			last = (int)i;
		}
		t->max_end[i] = me;
		t->sizeless[i] = last;
	}
}

/*
 * The symbol that names pc, as dwfl_module_addrinfo finds it: of the sized
 * symbols that contain pc, the one that starts closest to it (the stronger
 * binding, then the first in the table, at the same address); with none,
 * the closest sizeless symbol before pc, if no sized symbol ends between
 * the two.
 */
static const char *symtab_lookup(Dwfl_Module *mod, symtab_t *t, GElf_Addr pc)
{
	if (!t->built)
		symtab_build(mod, t);
	size_t lo = 0, hi = t->n; /* first symbol starting after pc */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t->s[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	size_t k = lo - 1;
	for (size_t j = k + 1; j-- > 0 && t->max_end[j] > pc;) {
		const sym_t *c = &t->s[j];
		if (c->end > pc && c->end > c->start) {
			/* the first of its address in sorted order is the stronger */
			while (j > 0 && t->s[j - 1].start == c->start && t->s[j - 1].end > pc)
				c = &t->s[--j];
			return c->name;
		}
	}
	int z = t->sizeless[k];
	if (z < 0 || t->s[z].start < t->max_end[k])
		return NULL;
	/* the first symbol (sorted) at that address */
	while (z > 0 && t->s[z - 1].start == t->s[z].start && t->s[z - 1].end == t->s[z - 1].start)
		z--;
	return t->s[z].name;
}

/* sub_<start>@<file>: the unnamed function that holds pc, from the
 * binary's unwind tables; NULL when they do not cover pc. */
static const char *unnamed_function(Dwfl_Module *mod, el_ehtab_t *eh, const rp_map_t *m, GElf_Addr pc)
{
	GElf_Addr bias = 0;
	Elf *e = dwfl_module_getelf(mod, &bias);
	size_t size = 0;
	const char *img = e && !eh->built ? elf_rawfile(e, &size) : NULL;
	if (!eh->built)
		el_eh_build(img, size, eh, rp_alloc);
	uint64_t start;
	if (!el_eh_function(eh, pc - bias, &start))
		return NULL;
	char buf[512];
	const char *b = strrchr(m->path, '/');
	snprintf(buf, sizeof buf, "sub_%llx@%s", (unsigned long long)start, b ? b + 1 : m->path);
	return rp_intern(buf);
}

/* Whether the unit is C, whose DWARF names are its symbols' names: no
 * linkage name to find in the symbol table (building a big library's
 * table, libc's, is a twentieth of a report of a few stacks). */
static bool c_unit(Dwarf_Die *cu)
{
	switch (cu ? dwarf_srclang(cu) : -1) {
	case DW_LANG_C89:
	case DW_LANG_C:
	case DW_LANG_C99:
	case DW_LANG_C11: return true;
	default: return false;
	}
}

static unsigned frames_of(Dwfl_Module *mod, symtab_t *syms, el_ehtab_t *eh, rp_map_t *m, GElf_Addr pc, rp_loc_t *loc)
{
	rp_frame_t fr[64];
	int n = 0;
	const char *file = NULL;
	int line = 0;
	unsigned found = 0; /* RP_SC_*: what this address had */

	Dwfl_Line *l = want_lines ? dwfl_module_getsrc(mod, pc) : NULL;
	if (l) {
		file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
		if (file)
			found |= RP_SC_LINES;
	}

	Dwarf_Addr dbias;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, pc, &dbias);
	Dwarf_Die scopes[64];
	int ns = cu ? scopes_at(cu, pc - dbias, scopes, 64) : 0;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	if (ns > 0 && (!want_lines || dwarf_getsrcfiles(cu, &files, &nfiles) != 0))
		files = NULL;
	for (int i = 0; i < ns && n < 63; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag != DW_TAG_inlined_subroutine)
			continue;
		const char *name = die_name(&scopes[i]);
		if (name == NULL)
			continue;
		found |= RP_SC_INLINES;
		frame_set(&fr[n++], name, file, line);
		/* the caller's position is where this inlined call was made */
		Dwarf_Attribute at;
		Dwarf_Word cf = 0, cl = 0;
		file = NULL;
		line = 0;
		if (dwarf_attr(&scopes[i], DW_AT_call_file, &at) && dwarf_formudata(&at, &cf) == 0 && files)
			file = dwarf_filesrc(files, cf, NULL, NULL);
		if (dwarf_attr(&scopes[i], DW_AT_call_line, &at) && dwarf_formudata(&at, &cl) == 0)
			line = (int)cl;
	}

	/* the function itself: DWARF's name first (it is what addr2line and
	 * jeprof show, and it names the function rather than one of its
	 * aliases), else the symbol table's, without a symbol version */
	const char *name = NULL;
	for (int i = 0; i < ns && name == NULL; i++)
		if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram)
			name = die_name(&scopes[i]);
	/* GCC gives C++ functions of internal linkage (static, anonymous
	 * namespace) no linkage name, and DW_AT_name lacks their scope; the
	 * symbol table's mangled name has it */
	const char *symname = NULL;
	if (name == NULL || ((name[0] != '_' || name[1] != 'Z') && !c_unit(cu))) {
		symname = symtab_lookup(mod, syms, pc);
		const char *at = symname ? strchr(symname, '@') : NULL;
		if (at && at > symname)
			symname = rp_intern_n(symname, (size_t)(at - symname));
	}
	if (name == NULL || (symname && symname[0] == '_' && symname[1] == 'Z'))
		name = symname;
	if (name == NULL)
		name = unnamed_function(mod, eh, m, pc);
	if (name == NULL && n == 0)
		return found;
	if (name) {
		found |= RP_SC_FUNCTION;
		frame_set(&fr[n++], name, file, line);
	}
	loc->nframes = n;
	loc->frames = rp_alloc(sizeof(rp_frame_t) * (size_t)n);
	memcpy(loc->frames, fr, sizeof(rp_frame_t) * (size_t)n);
	return found;
}

static void map_found(rp_map_t *m, unsigned found)
{
	m->has_lines |= (found & RP_SC_LINES) != 0;
	m->has_inlines |= (found & RP_SC_INLINES) != 0;
	m->has_functions |= (found & RP_SC_FUNCTION) != 0;
}

int rp_map_of(const rp_profile_t *p, uint64_t a)
{
	size_t lo = 0, hi = p->nmaps; /* maps are sorted by start */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (a < p->maps[mid].start)
			hi = mid;
		else if (a >= p->maps[mid].limit)
			lo = mid + 1;
		else
			return (int)mid;
	}
	return -1;
}

/* Whether the module's own file has DWARF (then no debug file is read). */
static bool has_dwarf(Dwfl_Module *mod)
{
	GElf_Addr bias;
	el_section_t sec;
	size_t size = 0;
	Elf *e = dwfl_module_getelf(mod, &bias);
	const char *img = e ? elf_rawfile(e, &size) : NULL;
	return el_section(img, size, ".debug_info", &sec) || el_section(img, size, ".zdebug_info", &sec);
}

/* Inflated copies already made in this process, by the file they copy: a
 * series of dumps of one program reads the same debug files again, and
 * shares one copy (and its memory) by dup. */
typedef struct copy_s {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	bool lines; /* made with the line tables */
	int fd;
} copy_t;
static copy_t copies[64];
static size_t ncopies;

static copy_t *copy_of(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return NULL;
	for (size_t i = 0; i < ncopies; i++)
		if (copies[i].dev == st.st_dev && copies[i].ino == st.st_ino && copies[i].size == st.st_size &&
		    copies[i].mtime.tv_sec == st.st_mtim.tv_sec && copies[i].mtime.tv_nsec == st.st_mtim.tv_nsec &&
		    copies[i].lines == want_lines)
			return &copies[i];
	return NULL;
}

static void copy_keep(int fd, int copy)
{
	struct stat st;
	int d;
	if (ncopies == sizeof copies / sizeof copies[0] || fstat(fd, &st) != 0 || (d = dup(copy)) < 0)
		return;
	copies[ncopies++] = (copy_t){ st.st_dev, st.st_ino, st.st_size, st.st_mtim, want_lines, d };
}

/* For each fds[i] (or -1), its inflated copy in out[i] (or -1): made once
 * per file, all the new ones together, in two steps.  inflate_start puts
 * in out[] at once the copies this process made before (a series of dumps
 * reads the same debug files) and starts the others on that many threads
 * (todo[] gets their fds); inflate_wait adds them to out[]. */
static rp_inflating_t *inflate_start(const int *fds, int *out, int *todo, size_t n, int threads)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		copy_t *c = fds[i] >= 0 ? copy_of(fds[i]) : NULL;
		out[i] = c ? dup(c->fd) : -1;
		todo[i] = c || fds[i] < 0 ? -1 : fds[i];
		k += todo[i] >= 0;
	}
	return k ? rp_inflated_start(todo, n, threads, want_lines) : NULL;
}

static void inflate_wait(rp_inflating_t *in, const int *todo, int *out, size_t n)
{
	if (in == NULL)
		return;
	int *made = rp_alloc(sizeof(int) * (n + 1));
	rp_inflated_wait(in, made);
	for (size_t i = 0; i < n; i++)
		if (todo[i] >= 0 && made[i] >= 0) {
			copy_keep(todo[i], made[i]);
			out[i] = made[i];
		}
	rp_free(made);
}

static void inflated(const int *fds, int *out, size_t n)
{
	int *todo = rp_alloc(sizeof(int) * (n + 1));
	inflate_wait(inflate_start(fds, out, todo, n, 1), todo, out, n); /* the caller is the second */
	rp_free(todo);
}

/* The separate debug files of the modules that addresses fall in, found
 * up front and inflated all together on two threads of their own, so that
 * every file's sections are shared out at once rather than one file after
 * the other, and so that the caller goes on naming the addresses of other
 * modules meanwhile (a few stacks over libc spend most of their time
 * inflating its .debug_info).  The first module that needs its debug file
 * waits for them all (prepare_finish). */
static struct {
	rp_inflating_t *in;
	object_t *obj;
	size_t nobj;
	int *fd, *todo, *out; /* per object: see inflate_start */
	char **name;
} pending;

static void prepare_debug(object_t *obj, size_t nobj, const bool *used)
{
	int *fd = rp_alloc(sizeof(int) * (nobj + 1));
	char **name = rp_alloc(sizeof(char *) * (nobj + 1));
	size_t n = 0;
	for (size_t j = 0; j < nobj; j++) {
		fd[j] = -1;
		if (!used[j] || obj[j].mod == NULL || has_dwarf(obj[j].mod))
			continue;
		fd[j] = by_build_id(obj[j].mod, &name[j]);
		if (fd[j] < 0) {
			GElf_Addr bias;
			GElf_Word crc = 0;
			Elf *e = dwfl_module_getelf(obj[j].mod, &bias);
			const char *link = e ? dwelf_elf_gnu_debuglink(e, &crc) : NULL;
			fd[j] = by_debuglink(obj[j].file, link, crc, &name[j]);
		}
		obj[j].pre_pending = obj[j].late = fd[j] >= 0;
		n += fd[j] >= 0;
	}
	if (n == 0)
		return;
	pending.obj = obj;
	pending.nobj = nobj;
	pending.fd = fd;
	pending.name = name;
	pending.todo = rp_alloc(sizeof(int) * (nobj + 1));
	pending.out = rp_alloc(sizeof(int) * (nobj + 1));
	pending.in = inflate_start(fd, pending.out, pending.todo, nobj, 2);
}

static void prepare_finish(void)
{
	if (pending.obj == NULL)
		return;
	inflate_wait(pending.in, pending.todo, pending.out, pending.nobj);
	for (size_t j = 0; j < pending.nobj; j++) {
		object_t *o = &pending.obj[j];
		int fd = pending.fd[j], out = pending.out[j];
		if (fd < 0)
			continue;
		/* the copy, or the file itself when it has nothing to inflate */
		if (out >= 0)
			close(fd);
		o->pre_fd = out >= 0 ? out : fd;
		o->pre_name = pending.name[j];
		o->pre_pending = false;
	}
	rp_free(pending.todo);
	rp_free(pending.out);
	memset(&pending, 0, sizeof pending);
}

/* The modules of one profile: one object per distinct file, and the
 * object of each map. */
typedef struct modules_s {
	Dwfl *dwfl;
	object_t *obj;
	size_t nobj;
	int *obj_of_map;
} modules_t;

/* The modules of the last profile symbolized.  The next one with the very
 * same mappings (a series of one process's dumps) uses them again: the same
 * Dwfl, symbol tables and debug files, not one more of each per dump. */
static struct {
	modules_t mods; /* mods.dwfl NULL: none yet */
	unsigned gen;   /* rp_generation() when made */
	bool lines;     /* made with want_lines */
	const char *root;
	rp_map_t *maps;
	size_t nmaps;
} last;

static bool same_maps(const rp_profile_t *p, const char *root)
{
	if (last.mods.dwfl == NULL || last.gen != rp_generation() || last.lines != want_lines ||
	    last.nmaps != p->nmaps || strcmp(last.root, root ? root : "") != 0)
		return false;
	for (size_t i = 0; i < p->nmaps; i++) {
		const rp_map_t *a = &last.maps[i], *b = &p->maps[i];
		if (a->start != b->start || a->limit != b->limit || a->offset != b->offset || a->path != b->path)
			return false;
	}
	return true;
}

static void keep_last(const rp_profile_t *p, const char *root, const modules_t *ms)
{
	last.mods = *ms;
	last.gen = rp_generation();
	last.lines = want_lines;
	last.root = rp_strdup(root ? root : "");
	last.maps = rp_alloc(sizeof *last.maps * (p->nmaps + 1));
	if (p->nmaps)
		memcpy(last.maps, p->maps, sizeof *last.maps * p->nmaps);
	last.nmaps = p->nmaps;
}

/* ---- --symcache ------------------------------------------------------------
 * What a module's frames come from besides the module itself (which its
 * build id names): its debug file, found as find_debuginfo finds it (by
 * build id, by .gnu_debuglink, or from a debuginfod server's client cache),
 * with its size and time, so that one installed or changed since makes the
 * cached frames stale.  Paths are left out: the same module in another
 * process's root (-p) shares the cache. */
/* The object's build id, and its cache where it can have one.  Its key
 * ends with where the module's code lies in the mapping ("load: exec" for
 * ET_EXEC, else "load: vaddr-offset X", the mapped segment's p_vaddr less
 * its p_offset), so that a report that has no file of that build id can
 * still place the cached offsets (cache_by_id). */
static void cache_open(object_t *o, const rp_map_t *m, bool is_exec)
{
	Elf *e = elf_begin(o->fd, ELF_C_READ_MMAP, NULL);
	const void *id;
	ssize_t len = e ? dwelf_elf_gnu_build_id(e, &id) : -1;
	if (len >= 2 && len <= 64) {
		char hex[129], what[600];
		build_id_hex(id, (int)len, hex);
		o->build_id = rp_intern(hex);
		if (rp_debug_source(e, o->file, hex, what, sizeof what - 64)) {
			size_t n = strlen(what);
			if (is_exec)
				snprintf(what + n, sizeof what - n, "\nload: exec");
			else
				snprintf(what + n, sizeof what - n, "\nload: vaddr-offset %" PRIx64,
				    m->start - m->offset - o->bias);
			user_rights(false); /* the cache is the reporter's */
			o->cache = rp_symcache_load(hex, what);
			user_rights(true);
		}
	}
	if (e)
		elf_end(e);
}

/* With --symcache, a module whose file of the dump's build id is nowhere:
 * its frames as a report that had the file kept them; false when none.
 * Not for a report made for someone else (--as-user): the build id is the
 * dump's writer's to choose, and the cache is shared with reports on other
 * users' processes, whose files that user may not read (issue 37). */
static bool cache_by_id(object_t *o, const rp_map_t *m, const char *want)
{
	const char *what, *load;
	uint64_t delta;
	if (conf.as_user)
		return false;
	user_rights(false);
	rp_symcache_t *c = rp_symcache_on() ? rp_symcache_find(want, &what) : NULL;
	user_rights(true);
	if (c == NULL || (load = strstr(what, "\nload: ")) == NULL)
		return false;
	if (!strcmp(load, "\nload: exec"))
		o->bias = 0;
	else if (sscanf(load, "\nload: vaddr-offset %" SCNx64, &delta) == 1)
		o->bias = m->start - m->offset - delta;
	else
		return false;
	o->cache = c;
	o->build_id = want;
	return true;
}

/* A location's key in its module's cache: where it is in the module. */
static uint64_t cache_key(const object_t *o, const rp_loc_t *loc)
{
	return (loc->addr ? loc->addr - 1 : 0) - o->bias;
}

static int symbolize(rp_profile_t *p, const char *root, char *err, size_t errlen);

int rp_symbolize(rp_profile_t *p, const char *root, char *err, size_t errlen)
{
	char why[512];
	if (!user_rights(true))
		snprintf(why, sizeof why, "cannot take on the rights of uid %u (CAP_SETUID, CAP_SETGID): %s",
		    (unsigned)conf.uid, strerror(errno));
	else if (conf.pid > 0 && !read_live(why, sizeof why))
		;
	else
		why[0] = 0;
	if (why[0]) {
		/* no file is read then: the addresses, with the reason */
		user_rights(false);
		for (size_t i = 0; i < p->nlocs; i++)
			p->locs[i].map = rp_map_of(p, p->locs[i].addr);
		p->note = rp_strcat3("no binary read: ", why, "");
		return 0;
	}
	int rc = symbolize(p, root, err, errlen);
	if (!user_rights(false)) {
		snprintf(err, errlen, "cannot give back the rights of uid %u", (unsigned)conf.uid);
		return -1;
	}
	return rc;
}

/* The object of map i, its first map: its file opened (o->fd), found by
 * the dump's build id if it records one, its load bias, and with the
 * cache its cache. */
static void object_open(object_t *o, rp_map_t *m, int i, const char *root, bool cached)
{
	const char *file = conf.pid > 0 ? NULL : under_root(root, file_of(m->path));
	int fd = conf.pid > 0 ? open_mapped(m, root, &file) : open_object(file);
	const char *unnamed = NULL;
	if (m->dump_build_id)
		fd = by_dump_build_id(fd, m, m->dump_build_id, &file, &unnamed);
	*o = (object_t){ .path = m->path, .first_map = i, .file = file, .pre_fd = -1, .fd = -1, .unnamed = unnamed };
	GElf_Addr bias = 0;
	bool is_exec = false;
	if (fd < 0 && unnamed && cached)
		cache_by_id(o, m, m->dump_build_id);
	if (fd < 0)
		return;
	if (!load_bias(fd, m, &bias, &is_exec)) {
		close(fd);
		return;
	}
	o->fd = fd;
	o->bias = is_exec ? 0 : bias;
	if (cached)
		cache_open(o, m, is_exec);
}

/* One object per distinct file of p's maps, opened (object_open). */
static int modules_open(rp_profile_t *p, const char *root, bool cached, modules_t *ms, char *err, size_t errlen)
{
	ms->dwfl = dwfl_begin(&callbacks);
	if (ms->dwfl == NULL) {
		snprintf(err, errlen, "libdwfl: %s", dwfl_errmsg(-1));
		return -1;
	}
	ms->obj = rp_alloc(sizeof(object_t) * (p->nmaps + 1));
	ms->obj_of_map = rp_alloc(sizeof(int) * (p->nmaps + 1));
	ms->nobj = 0;
	for (size_t i = 0; i < p->nmaps; i++) {
		size_t j;
		for (j = 0; j < ms->nobj; j++)
			if (ms->obj[j].path == p->maps[i].path) /* interned */
				break;
		ms->obj_of_map[i] = (int)j;
		if (j == ms->nobj)
			object_open(&ms->obj[ms->nobj++], &p->maps[i], (int)i, root, cached);
	}
	return 0;
}

/* Each address's map; the addresses the cache names (from_cache[]), and
 * the objects whose module the others need (the result, per object). */
static bool *modules_used(rp_profile_t *p, const modules_t *ms, bool *from_cache)
{
	bool *used = rp_alloc(ms->nobj + 1);
	for (size_t i = 0; i < p->nlocs; i++) {
		rp_loc_t *loc = &p->locs[i];
		loc->map = rp_map_of(p, loc->addr);
		if (loc->map < 0)
			continue;
		object_t *o = &ms->obj[ms->obj_of_map[loc->map]];
		unsigned found;
		if (o->cache && rp_symcache_get(o->cache, cache_key(o, loc), loc, &found)) {
			from_cache[i] = true;
			map_found(&p->maps[loc->map], found);
			continue;
		}
		used[ms->obj_of_map[loc->map]] = true;
		if (o->unnamed) { /* said once, for a module the profile uses */
			p->unnamed = rp_strcat3(p->unnamed ? p->unnamed : "", file_of(o->path), ": ");
			p->unnamed = rp_strcat3(p->unnamed, o->unnamed, "\n");
			o->unnamed = NULL;
		}
	}
	return used;
}

/* The opened objects given to libdwfl as modules, and their debug files
 * looked for up front (prepare_debug).  libdwfl rejects modules that
 * overlap; a bad line must not take the others down, so failures here just
 * leave it bare.  On success libdwfl owns fd.  With the cache, only modules
 * it lacks an address of are opened. */
static void modules_report(modules_t *ms, bool cached, const bool *used)
{
	dwfl_report_begin(ms->dwfl);
	for (size_t j = 0; j < ms->nobj; j++) {
		object_t *o = &ms->obj[j];
		int fd = o->fd;
		o->fd = -1;
		if (fd < 0)
			continue;
		if (cached && !used[j]) {
			close(fd);
			continue;
		}
		o->mod = dwfl_report_elf(ms->dwfl, o->path, o->file, fd, o->bias, true);
		if (o->mod == NULL)
			close(fd);
	}
	dwfl_report_end(ms->dwfl, NULL, NULL);
	for (size_t j = 0; j < ms->nobj; j++) {
		void **ud;
		if (ms->obj[j].mod && dwfl_module_info(ms->obj[j].mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
			*ud = &ms->obj[j];
	}
	prepare_debug(ms->obj, ms->nobj, used);
}

static void maps_build_ids(rp_profile_t *p, const modules_t *ms)
{
	for (size_t i = 0; i < p->nmaps; i++) {
		const object_t *o = &ms->obj[ms->obj_of_map[i]];
		if (o->mod)
			set_build_id(o->mod, &p->maps[i]);
		else if (o->build_id)
			p->maps[i].build_id = o->build_id;
		if (p->maps[i].build_id == NULL) /* no file: the one the dump records */
			p->maps[i].build_id = p->maps[i].dump_build_id;
	}
}

/* The frames of every address the cache did not name: the modules whose
 * debug file is being inflated last, so that the others are named
 * meanwhile.  reused: the modules are the last profile's, and the
 * addresses' maps are not set yet. */
static void name_locations(rp_profile_t *p, modules_t *ms, bool reused, const bool *from_cache)
{
	for (size_t k = 0; k < 2 * p->nlocs; k++) {
		size_t i = k % p->nlocs;
		bool late_pass = k >= p->nlocs;
		rp_loc_t *loc = &p->locs[i];
		if (reused && !late_pass)
			loc->map = rp_map_of(p, loc->addr); /* new modules set it in modules_used */
		if (loc->map < 0 || (from_cache && from_cache[i]))
			continue;
		object_t *o = &ms->obj[ms->obj_of_map[loc->map]];
		if (o->mod == NULL || o->late != late_pass)
			continue;
		unsigned found =
		    frames_of(o->mod, &o->syms, &o->eh, &p->maps[loc->map], loc->addr ? loc->addr - 1 : 0, loc);
		map_found(&p->maps[loc->map], found);
		rp_symcache_put(o->cache, cache_key(o, loc), loc, found);
	}
}

/* Keep the per-map flags consistent across a file's mappings. */
static void maps_flags(rp_profile_t *p, const modules_t *ms)
{
	for (size_t i = 0; i < p->nmaps; i++) {
		rp_map_t *f = &p->maps[ms->obj[ms->obj_of_map[i]].first_map];
		rp_map_t *m = &p->maps[i];
		f->has_functions |= m->has_functions;
		f->has_lines |= m->has_lines;
		f->has_inlines |= m->has_inlines;
	}
	for (size_t i = 0; i < p->nmaps; i++) {
		rp_map_t *f = &p->maps[ms->obj[ms->obj_of_map[i]].first_map];
		p->maps[i].has_functions = f->has_functions;
		p->maps[i].has_lines = f->has_lines;
		p->maps[i].has_inlines = f->has_inlines;
	}
}

static int symbolize(rp_profile_t *p, const char *root, char *err, size_t errlen)
{
	elf_version(EV_CURRENT);
	debug_path = (char *)rp_strcat3("+:.debug:", root && *root ? root : "", "/usr/lib/debug");
	rp_debug_begin(root);
	bool cached = rp_symcache_on();
	want_lines = !lines_off || cached; /* the cache keeps whole frames */
	bool reused = !cached && same_maps(p, root);
	bool *from_cache = NULL; /* locations the cache named */
	modules_t ms;
	if (reused) {
		ms = last.mods;
	} else {
		if (modules_open(p, root, cached, &ms, err, errlen) != 0)
			return -1;
		from_cache = rp_alloc(p->nlocs + 1);
		modules_report(&ms, cached, modules_used(p, &ms, from_cache));
		if (!cached)
			keep_last(p, root, &ms);
	}
	maps_build_ids(p, &ms);
	name_locations(p, &ms, reused, from_cache);
	prepare_finish();   /* when no address needed one after all */
	user_rights(false); /* the cache is the reporter's */
	for (size_t j = 0; cached && j < ms.nobj; j++)
		rp_symcache_save(ms.obj[j].cache);
	maps_flags(p, &ms);
	const char *note = rp_debuginfod_note();
	if (note)
		p->note = note;
	/* the Dwfl stays open: names point into its string tables */
	return 0;
}
