/*
 * heapctl/trace/allocator.c - which allocator the process of `heapctl
 * trace --malloc` uses, and where its functions are: the first object of
 * its maps (the program, its libraries, libc last) that defines malloc and
 * free, or the functions --symbols names; each function's file offset,
 * where its uprobe goes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf/elf.h"
#include "tr_internal.h"

static const char *const role_names[R_NROLES] = { "malloc", "calloc", "realloc", "free", "memalign", "posix_memalign" };

/* The functions probed, by role: the standard ones and jemalloc's
 * non-standard API (mallocx and rallocx take the size where malloc and
 * realloc do; dallocx and sdallocx the pointer where free does). */
static const struct {
	int role;
	const char *name;
} family[] = { { R_MALLOC, "malloc" }, { R_CALLOC, "calloc" }, { R_REALLOC, "realloc" }, { R_FREE, "free" },
	{ R_MEMALIGN, "memalign" }, { R_MEMALIGN, "aligned_alloc" }, { R_POSIX, "posix_memalign" },
	{ R_MALLOC, "valloc" }, { R_MALLOC, "pvalloc" }, { R_MALLOC, "mallocx" }, { R_REALLOC, "rallocx" },
	{ R_FREE, "dallocx" }, { R_FREE, "sdallocx" } };
#define NFAMILY (sizeof family / sizeof family[0])

/* The program headers find_functions reads, at most this many. */
#define MAX_PHDRS 256

/* A function's file offset from its address (the PT_LOAD holding it). */
static bool file_offset(const Elf64_Phdr *ph, int n, uint64_t addr, uint64_t *off)
{
	for (int i = 0; i < n; i++) {
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && addr >= ph[i].p_vaddr &&
		    addr < ph[i].p_vaddr + ph[i].p_filesz) {
			*off = addr - ph[i].p_vaddr + ph[i].p_offset;
			return true;
		}
	}
	return false;
}

/* free's first instructions in glibc are "test %rdi,%rdi; je" (free(NULL)
 * returns at once).  The kernel cannot emulate a test: a uprobe there
 * single-steps a copy of it, a second trap that cost 19 us in a VM here,
 * against 0.6 us for a probe on a push, which it emulates.  Where the
 * NULL check is followed by a push, the probe goes on the push: it sees
 * every free of a non-NULL pointer, with the pointer still in %rdi. */
static uint64_t past_null_check(int fd, uint64_t off)
{
	unsigned char b[24];
	if (pread(fd, b, sizeof b, (off_t)off) != (ssize_t)sizeof b)
		return off;
	unsigned i = 0;
	if (b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa)
		i = 4; /* endbr64 */
	if (!(b[i] == 0x48 && b[i + 1] == 0x85 && b[i + 2] == 0xff))
		return off; /* test %rdi,%rdi */
	i += 3;
	if (b[i] == 0x74)
		i += 2; /* je rel8 */
	else if (b[i] == 0x0f && b[i + 1] == 0x84)
		i += 6; /* je rel32 */
	else
		return off;
	bool push = (b[i] >= 0x50 && b[i] <= 0x57) || (b[i] == 0x41 && b[i + 1] >= 0x50 && b[i + 1] <= 0x57);
	return push ? off + i : off;
}

/* The probe of function name (of role) at file offset off of fd, unless
 * one at that offset or of that name is there already. */
static bool add_probe(allocator_t *al, int fd, const char *name, int role, uint64_t off)
{
	for (unsigned k = 0; k < al->n; k++)
		if (al->p[k].off == off || strcmp(al->p[k].name, name) == 0)
			return false;
	if (al->n == MAX_PROBES)
		return false;
	probe_t *p = &al->p[al->n++];
	p->role = role;
	snprintf(p->name, sizeof p->name, "%s", name);
	p->off = role == R_FREE ? past_null_check(fd, off) : off;
	return true;
}

/* The functions of want[] (by role), with prefix, that the file at
 * open_path defines (STT_FUNC: not an IFUNC's resolver): .dynsym's
 * first, then .symtab's (the order a linker writes them in); the count. */
static unsigned find_functions(const char *open_path, const char *prefix, allocator_t *al, const char *const *want,
    const int *roles, unsigned nwant)
{
	al->n = 0;
	int fd = open(open_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[MAX_PROBES * 8 + 1024]; /* parse_symbols' list, prefixed */
	const char *names[MAX_PROBES];
	size_t used = 0;
	for (unsigned w = 0; w < nwant; w++) {
		names[w] = buf + used;
		used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", prefix, want[w]) + 1;
	}
	el_file_t f;
	Elf64_Ehdr eh;
	Elf64_Phdr ph[MAX_PHDRS];
	int nph = el_fd_map(fd, &f) ? el_phdrs(fd, 0, &eh, ph, MAX_PHDRS) : -1;
	unsigned found = 0;
	static const unsigned types[] = { SHT_DYNSYM, SHT_SYMTAB };
	for (size_t t = 0; nph > 0 && t < 2; t++) {
		uint64_t value[MAX_PROBES];
		el_symbols(f.p, f.size, types[t] | EL_SYM_NO_IFUNC, names, nwant, value, NULL);
		for (unsigned w = 0; w < nwant; w++) {
			uint64_t off;
			if (value[w] && file_offset(ph, nph, value[w], &off) &&
			    add_probe(al, fd, names[w], roles[w], off))
				found++;
		}
	}
	el_file_unmap(&f);
	close(fd);
	return found;
}

static bool has_role(const allocator_t *al, int role)
{
	for (unsigned i = 0; i < al->n; i++)
		if (al->p[i].role == role)
			return true;
	return false;
}

/* --symbols ROLE=NAME,...: the names for each role. */
static int parse_symbols(const char *list, const char **want, int *roles, unsigned *n, char *buf, size_t len)
{
	if (strlen(list) >= len)
		return cli_err(HC_EXIT_USAGE, "trace: --symbols is too long");
	strcpy(buf, list);
	*n = 0;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		int role = -1;
		if (eq) {
			*eq = 0;
			for (int r = 0; r < R_NROLES; r++)
				if (strcmp(tok, role_names[r]) == 0)
					role = r;
		}
		if (role < 0 || eq[1] == 0)
			return cli_err(HC_EXIT_USAGE,
			    "trace: --symbols takes ROLE=NAME,... with ROLE one of "
			    "malloc calloc realloc free memalign posix_memalign, not '%s'",
			    tok);
		if (*n == MAX_PROBES)
			return cli_err(HC_EXIT_USAGE, "trace: --symbols names more than %d functions", MAX_PROBES);
		want[*n] = eq + 1;
		roles[(*n)++] = role;
	}
	if (*n == 0)
		return cli_err(HC_EXIT_USAGE, "trace: --symbols is empty");
	return 0;
}

int tr_find_allocator(int pid, const char *symbols, allocator_t *al)
{
	const char *want[MAX_PROBES];
	int roles[MAX_PROBES];
	unsigned nwant = 0;
	char buf[1024];
	if (symbols) {
		int code = parse_symbols(symbols, want, roles, &nwant, buf, sizeof buf);
		if (code)
			return code;
	} else {
		for (unsigned i = 0; i < NFAMILY; i++) {
			want[nwant] = family[i].name;
			roles[nwant++] = family[i].role;
		}
	}
	static char objs[256][PATH_MAX];
	size_t n = tr_mapped_objects(pid, objs, 256);
	static const char *const prefixes[] = { "", "je_", "mi_" };
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(objs[i], '/') + 1;
		if (strncmp(base, "ld-linux", 8) == 0)
			continue; /* the loader's minimal malloc */
		cli_proc_object_path(pid, objs[i], al->open_path, sizeof al->open_path);
		for (unsigned p = 0; p < (symbols ? 1 : 3); p++) {
			find_functions(al->open_path, prefixes[p], al, want, roles, nwant);
			bool ok = symbols ? al->n > 0 : has_role(al, R_MALLOC) && has_role(al, R_FREE);
			if (ok) {
				snprintf(al->path, sizeof al->path, "%s", objs[i]);
				return 0;
			}
		}
	}
	if (symbols)
		return cli_err(HC_EXIT_FAILED, "trace: no object of process %d defines %s", pid, want[0]);
	return cli_err(HC_EXIT_FAILED,
	    "trace: no object of process %d defines malloc and free "
	    "(a stripped static program?): name its allocator with --symbols, or use --faults",
	    pid);
}
