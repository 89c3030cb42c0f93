/*
 * heapctl/elf/elf.h - the one reader of /proc/PID/maps (maps.c), of an ELF
 * file's sections, symbols and program headers (elf.c) and of its unwind
 * tables, .eh_frame_hdr and .eh_frame (ehframe.c), for heapctl's commands
 * and for its engines (report, stacks, inject, trace).
 *
 * It needs no library (no libelf): heapctl itself reads maps (doctor,
 * systemd, status) and program headers (run), so elf/ is built into the
 * command and the engines call it there (heapctl is linked -rdynamic).
 * An engine that holds a libelf handle passes its bytes (elf_rawfile).
 * Only 64-bit little-endian objects are read (x86-64, aarch64): anything
 * else is "not found", as a file that cannot be read is.
 */
#ifndef HC_ELF_H
#define HC_ELF_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- maps.c: /proc/PID/maps ------------------------------------------------- */

/* One line: "lo-hi perms offset dev inode path".  The same parse serves
 * the maps of a dump (MAPPED_LIBRARIES), which other writers may shorten:
 * a line needs its range, permissions and offset; the rest may be absent. */
typedef struct el_map_s {
	uint64_t lo, hi, offset;
	char perms[8]; /* "r-xp"                                     */
	unsigned dev_major, dev_minor;
	uint64_t ino;
	bool has_ino;     /* the device and inode read as numbers       */
	const char *path; /* the rest of the line ("" for none; "[heap]"
	                     and the like too): points into it          */
} el_map_t;

/* false: not a maps line (fewer fields, or an empty range) */
bool el_map_parse(const char *line, el_map_t *m);
/* A mapping of a file (its path is absolute) that may run code. */
static inline bool el_map_exec_file(const el_map_t *m)
{
	return m->path[0] == '/' && strchr(m->perms, 'x') != NULL;
}
/* Each line of /proc/PID/maps that parses, in order, to fn until it
 * returns false (m->path is valid during the call only).  0, or -1 with
 * errno when the file cannot be opened. */
typedef bool el_maps_fn(const el_map_t *m, void *arg);
int el_maps_each(int pid, el_maps_fn *fn, void *arg);

/* ---- elf.c: sections, symbols, program headers ----------------------------- */

/* A file read into memory (mapped, read-only) */
typedef struct el_file_s {
	const unsigned char *p;
	size_t size;
} el_file_t;
bool el_file_map(const char *path, el_file_t *f); /* false with errno */
bool el_fd_map(int fd, el_file_t *f);             /* the same, fd stays open */
void el_file_unmap(el_file_t *f);

/* The first section named name of the image [img, img + size): its header
 * and its bytes (data NULL when it has none in the file: SHT_NOBITS, or
 * beyond the image).  false: no such section, or not an ELF image. */
typedef struct el_section_s {
	Elf64_Shdr sh;
	const unsigned char *data;
} el_section_t;
bool el_section(const void *img, size_t size, const char *name, el_section_t *s);

/* For each of names[0, n), the value (and the size, if size) of the
 * first function (STT_FUNC, STT_GNU_IFUNC) of that name with a value in
 * the image's sections of type type (SHT_DYNSYM, SHT_SYMTAB); 0 where
 * there is none.  false: not an ELF image.  With EL_SYM_NO_IFUNC or'ed
 * into type, STT_FUNC only: an IFUNC's value is its resolver, run once,
 * which a uprobe (trace) must not take for the function. */
#define EL_SYM_NO_IFUNC 0x80000000u
bool el_symbols(const void *img, size_t size, unsigned type, const char *const *names, size_t n, uint64_t *value,
    uint64_t *sizes);

/* The GNU build id of the image, from its PT_NOTE segments, as lowercase
 * hex into hex[129]; false when it has none. */
bool el_build_id(const void *img, size_t size, char *hex);

/* The ELF header and program headers (at most max) of the object that
 * starts at offset at of fd: a file (at 0) or a process's memory (its
 * /proc/PID/mem, at the object's first page).  Returns how many program
 * headers, or -1 when there is no 64-bit ELF object there or a header
 * cannot be read. */
int el_phdrs(int fd, uint64_t at, Elf64_Ehdr *eh, Elf64_Phdr *ph, int max);

/* ---- ehframe.c: unwind tables --------------------------------------------- */

/* A binary's functions from its unwind tables (.eh_frame_hdr and
 * .eh_frame), for code no symbol names.  Addresses are the file's own
 * (not relocated).  el_eh_build() reads them from the image (alloc: the
 * caller's, for the table's two arrays; the table points into the image,
 * which must outlive it); el_eh_function() gives the start of the function
 * holding pc; false when no entry covers it. */
typedef struct el_ehtab_s {
	uint64_t *start, *fde; /* sorted by start */
	size_t n;
	const unsigned char *eh; /* .eh_frame */
	size_t eh_size;
	uint64_t eh_addr;
	bool built;
} el_ehtab_t;
void el_eh_build(const void *img, size_t size, el_ehtab_t *t, void *(*alloc)(size_t));
bool el_eh_function(const el_ehtab_t *t, uint64_t pc, uint64_t *start);
/* Each FDE of an .eh_frame section (its bytes eh[0, size), at address
 * addr): fn gets the function's start and length and the FDE's offset in
 * the section, in the section's order (for a table of one's own where
 * .eh_frame_hdr has none, or one of another encoding).  An entry that
 * cannot be read is skipped; a 64-bit length ends the walk. */
typedef void el_fde_fn(uint64_t start, uint64_t len, uint64_t off, void *arg);
void el_eh_fdes(const unsigned char *eh, size_t size, uint64_t addr, el_fde_fn *fn, void *arg);

#endif
