/*
 * heapctl/elf/elf.c - an ELF file's sections, symbols and program headers
 * (elf.h), read from its bytes: a file mapped here, an engine's libelf
 * handle (elf_rawfile) or, for the program headers, a process's memory.
 *
 * Build ids are read from the PT_NOTE segments, which a stripped file
 * keeps too.
 *
 * The files come from paths a process or a dump names: every header,
 * table and string is checked against the image before it is read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elf.h"

bool el_fd_map(int fd, el_file_t *f)
{
	*f = (el_file_t){ 0 };
	struct stat st;
	void *p = MAP_FAILED;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	else
		errno = EINVAL;
	if (p == MAP_FAILED)
		return false;
	f->p = p;
	f->size = (size_t)st.st_size;
	return true;
}

bool el_file_map(const char *path, el_file_t *f)
{
	*f = (el_file_t){ 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = el_fd_map(fd, f);
	int e = errno;
	close(fd);
	errno = e;
	return ok;
}

void el_file_unmap(el_file_t *f)
{
	if (f->p)
		munmap((void *)f->p, f->size);
	*f = (el_file_t){ 0 };
}

/* The section headers of a 64-bit little-endian image, and how many
 * (e_shnum, or the first header's sh_size when there are more than
 * SHN_LORESERVE); NULL when it is none or they lie outside it. */
static const Elf64_Shdr *section_headers(const unsigned char *img, size_t size, size_t *n, size_t *shstrndx)
{
	const Elf64_Ehdr *eh = (const void *)img;
	if (img == NULL || size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff == 0 || eh->e_shoff % 8 != 0 || eh->e_shoff > size ||
	    size - eh->e_shoff < sizeof(Elf64_Shdr))
		return NULL;
	const Elf64_Shdr *sh = (const void *)(img + eh->e_shoff);
	*n = eh->e_shnum ? eh->e_shnum : sh[0].sh_size;
	*shstrndx = eh->e_shstrndx == SHN_XINDEX ? sh[0].sh_link : eh->e_shstrndx;
	if (*n > (size - eh->e_shoff) / sizeof(Elf64_Shdr))
		return NULL;
	return sh;
}

/* Section i's bytes, or NULL when it has none in the image. */
static const unsigned char *section_data(const unsigned char *img, size_t size, const Elf64_Shdr *sh)
{
	if (sh->sh_type == SHT_NOBITS || sh->sh_offset > size || sh->sh_size > size - sh->sh_offset)
		return NULL;
	return img + sh->sh_offset;
}

/* The string at off of string table section strtab, or NULL. */
static const char *string_at(const unsigned char *img, size_t size, const Elf64_Shdr *strtab, uint64_t off)
{
	const unsigned char *s = section_data(img, size, strtab);
	if (s == NULL || off >= strtab->sh_size || memchr(s + off, 0, strtab->sh_size - off) == NULL)
		return NULL;
	return (const char *)s + off;
}

bool el_section(const void *image, size_t size, const char *name, el_section_t *s)
{
	const unsigned char *img = image;
	size_t n, shstrndx;
	const Elf64_Shdr *sh = section_headers(img, size, &n, &shstrndx);
	if (sh == NULL || shstrndx == SHN_UNDEF || shstrndx >= n)
		return false;
	for (size_t i = 1; i < n; i++) {
		const char *nm = string_at(img, size, &sh[shstrndx], sh[i].sh_name);
		if (nm && strcmp(nm, name) == 0) {
			s->sh = sh[i];
			s->data = section_data(img, size, &sh[i]);
			return true;
		}
	}
	return false;
}

bool el_symbols(const void *image, size_t size, unsigned type, const char *const *names, size_t n, uint64_t *value,
    uint64_t *sizes)
{
	const unsigned char *img = image;
	memset(value, 0, n * sizeof *value);
	if (sizes)
		memset(sizes, 0, n * sizeof *sizes);
	size_t nsec, shstrndx;
	const Elf64_Shdr *sh = section_headers(img, size, &nsec, &shstrndx);
	if (sh == NULL)
		return false;
	unsigned ifunc = type & EL_SYM_NO_IFUNC ? STT_FUNC : STT_GNU_IFUNC;
	type &= ~EL_SYM_NO_IFUNC;
	for (size_t i = 1; i < nsec; i++) {
		const unsigned char *d = section_data(img, size, &sh[i]);
		if (sh[i].sh_type != type || sh[i].sh_entsize != sizeof(Elf64_Sym) || d == NULL ||
		    sh[i].sh_link >= nsec)
			continue;
		const Elf64_Sym *sym = (const void *)d;
		for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
			unsigned t = ELF64_ST_TYPE(sym[k].st_info);
			/* an undefined one's value is no function's: a PLT entry, in a
			 * -no-pie program that takes the function's address */
			if (sym[k].st_value == 0 || sym[k].st_shndx == SHN_UNDEF || (t != STT_FUNC && t != ifunc))
				continue;
			const char *nm = string_at(img, size, &sh[sh[i].sh_link], sym[k].st_name);
			for (size_t w = 0; nm && w < n; w++) {
				if (value[w] == 0 && strcmp(nm, names[w]) == 0) {
					value[w] = sym[k].st_value;
					if (sizes)
						sizes[w] = sym[k].st_size;
				}
			}
		}
	}
	return true;
}

int el_phdrs(int fd, uint64_t at, Elf64_Ehdr *eh, Elf64_Phdr *ph, int max)
{
	if (pread(fd, eh, sizeof *eh, (off_t)at) != (ssize_t)sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum > max)
		return -1;
	size_t len = eh->e_phnum * sizeof *ph;
	if (len && pread(fd, ph, len, (off_t)(at + eh->e_phoff)) != (ssize_t)len)
		return -1;
	return eh->e_phnum;
}

/* The GNU build id among the notes [n, n + len) (aligned to align), as
 * lowercase hex; false when none is there. */
static bool note_build_id(const unsigned char *n, uint64_t len, uint64_t align, char *hex)
{
	for (uint64_t off = 0; len >= sizeof(Elf64_Nhdr) && off <= len - sizeof(Elf64_Nhdr);) {
		Elf64_Nhdr nh;
		memcpy(&nh, n + off, sizeof nh);
		uint64_t name = off + sizeof nh;
		uint64_t desc = name + ((nh.n_namesz + align - 1) & ~(align - 1));
		uint64_t next = desc + ((nh.n_descsz + align - 1) & ~(align - 1));
		if (desc > len || nh.n_descsz > len - desc)
			return false;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(n + name, "GNU", 4) &&
		    nh.n_descsz >= 2 && nh.n_descsz <= 64) {
			for (uint32_t k = 0; k < nh.n_descsz; k++)
				snprintf(hex + 2 * k, 3, "%02x", n[desc + k]);
			return true;
		}
		off = next;
	}
	return false;
}

bool el_build_id(const void *image, size_t size, char *hex)
{
	const unsigned char *img = image;
	const Elf64_Ehdr *eh = image;
	if (img == NULL || size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > size ||
	    eh->e_phnum > (size - eh->e_phoff) / sizeof(Elf64_Phdr))
		return false;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		Elf64_Phdr ph;
		memcpy(&ph, img + eh->e_phoff + i * sizeof ph, sizeof ph);
		if (ph.p_type != PT_NOTE || ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
			continue;
		if (note_build_id(img + ph.p_offset, ph.p_filesz, ph.p_align == 8 ? 8 : 4, hex))
			return true;
	}
	return false;
}
