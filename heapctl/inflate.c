/*
 * heapctl/inflate.c - a separate debug file with its DWARF sections
 * already inflated, made faster than libdw would make it.
 *
 * Distributions compress debug sections (SHF_COMPRESSED, zlib): libc's
 * debug file is 4 MiB holding 10 MiB of DWARF.  libdw inflates every debug
 * section it knows when the file is opened, one after the other, checksum
 * and all, which is most of the time of a report with few stacks.  Here
 * the file is rewritten into memory (a memfd that libdwfl reads like the
 * file) with:
 *   - only the sections a report reads inflated: not the location lists,
 *     macros and name indexes (those become empty SHT_NOBITS sections);
 *   - raw deflate, without the zlib checksum (the ELF section header says
 *     how big the result must be, which is checked instead);
 *   - two threads taking the sections, largest first.
 * Everything else is copied as it is.  Anything unexpected (another ELF
 * class or byte order, another compression, a size that does not match)
 * returns -1, and the file is used as it is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <gelf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "report.h"
#include "rp_internal.h"

typedef struct isec_s {
	const unsigned char *src;     /* the section's bytes in the file */
	size_t src_size;
	size_t out_off, out_size;     /* where it goes in the copy */
	bool inflate, drop;
	GElf_Shdr sh;
} isec_t;

typedef struct job_s {
	isec_t *s;
	size_t n;
	size_t *order;                /* section indexes, largest first */
	unsigned char *out;
	size_t next;                  /* the next in order (atomic) */
	int failed;
} job_t;

/* Sections no view of a report reads. */
static bool unneeded(const char *name)
{
	static const char *const names[] = {
		".debug_loc", ".debug_loclists", ".debug_macro", ".debug_macinfo", ".debug_pubnames",
		".debug_pubtypes", ".debug_gnu_pubnames", ".debug_gnu_pubtypes", ".debug_names",
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

static int inflate_one(const isec_t *s, unsigned char *out)
{
	const unsigned char *z = s->src + sizeof(Elf64_Chdr);
	size_t zlen = s->src_size - sizeof(Elf64_Chdr);
	/* a zlib stream: deflate (CM 8), no preset dictionary */
	if (zlen < 6 || (z[0] & 0x0f) != 8 || (z[1] & 0x20) || ((z[0] << 8) | z[1]) % 31)
		return -1;
	z_stream zs = { 0 };
	if (inflateInit2(&zs, -15) != Z_OK)
		return -1;
	zs.next_in = (Bytef *)(uintptr_t)(z + 2);
	zs.avail_in = (uInt)(zlen - 2);
	zs.next_out = out;
	zs.avail_out = (uInt)s->out_size;
	int rc = inflate(&zs, Z_FINISH);
	size_t got = zs.total_out;
	inflateEnd(&zs);
	return rc == Z_STREAM_END && got == s->out_size ? 0 : -1;
}

static void *worker(void *arg)
{
	job_t *j = arg;
	for (;;) {
		size_t k = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (k >= j->n || __atomic_load_n(&j->failed, __ATOMIC_RELAXED))
			break;
		isec_t *s = &j->s[j->order[k]];
		int rc = 0;
		if (s->inflate)
			rc = inflate_one(s, j->out + s->out_off);
		else if (!s->drop && s->sh.sh_type != SHT_NOBITS && s->out_size)
			memcpy(j->out + s->out_off, s->src, s->out_size);
		if (rc)
			__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static const isec_t *cmp_base;

static int by_size(const void *a, const void *b)
{
	size_t x = cmp_base[*(const size_t *)a].out_size, y = cmp_base[*(const size_t *)b].out_size;
	return x < y ? 1 : x > y ? -1 : 0;
}

static size_t align_up(size_t v, uint64_t a)
{
	return a > 1 ? (v + (size_t)a - 1) / (size_t)a * (size_t)a : v;
}

int rp_inflated_copy(int fd)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	size_t nsec, shstrndx;
	if (e == NULL || gelf_getclass(e) != ELFCLASS64 || gelf_getehdr(e, &eh) == NULL ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || elf_getshdrnum(e, &nsec) != 0 ||
	    elf_getshdrstrndx(e, &shstrndx) != 0 || nsec < 2 || nsec > 65000 || eh.e_shnum != nsec) {
		if (e)
			elf_end(e);
		return -1;
	}
	isec_t *s = calloc(nsec, sizeof *s);
	size_t *order = calloc(nsec, sizeof *order);
	int out_fd = -1;
	unsigned char *out = MAP_FAILED;
	size_t total = 0;
	bool any = false;
	if (s == NULL || order == NULL)
		goto fail;
	/* the layout: header, program headers where they were, sections in
	 * order, the section header table */
	size_t phsize = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
	size_t off = sizeof(Elf64_Ehdr);
	if (eh.e_phnum && eh.e_phoff != sizeof(Elf64_Ehdr))
		goto fail;
	off += phsize;
	for (size_t i = 1; i < nsec; i++) {
		Elf_Scn *scn = elf_getscn(e, i);
		isec_t *c = &s[i];
		if (scn == NULL || gelf_getshdr(scn, &c->sh) == NULL)
			goto fail;
		const char *name = elf_strptr(e, shstrndx, c->sh.sh_name);
		if (name == NULL)
			goto fail;
		if (c->sh.sh_type != SHT_NOBITS) {
			Elf_Data *d = elf_rawdata(scn, NULL);
			if (d == NULL || (d->d_size && d->d_buf == NULL))
				goto fail;
			c->src = d->d_buf;
			c->src_size = d->d_size;
		}
		c->out_size = c->src_size;
		if (c->sh.sh_flags & SHF_COMPRESSED) {
			Elf64_Chdr ch;
			if (c->src_size < sizeof ch)
				goto fail;
			memcpy(&ch, c->src, sizeof ch);
			if (ch.ch_type != ELFCOMPRESS_ZLIB || ch.ch_size > ((size_t)1 << 32))
				goto fail;
			any = true;
			if (unneeded(name)) {
				c->drop = true;
				c->out_size = 0;
				c->sh.sh_type = SHT_NOBITS;
			} else {
				c->inflate = true;
				c->out_size = (size_t)ch.ch_size;
				c->sh.sh_addralign = ch.ch_addralign ? ch.ch_addralign : 1;
			}
			c->sh.sh_flags &= ~(uint64_t)SHF_COMPRESSED;
			c->sh.sh_size = c->out_size;
		}
		if (c->sh.sh_type != SHT_NOBITS) {
			off = align_up(off, c->sh.sh_addralign);
			c->out_off = off;
			off += c->out_size;
		} else {
			c->out_off = off;
		}
	}
	if (!any)
		goto fail;                     /* nothing to gain: the file as it is */
	off = align_up(off, 8);
	size_t shoff = off;
	total = off + nsec * sizeof(Elf64_Shdr);
	out_fd = memfd_create("heapctl-debug", MFD_CLOEXEC);
	if (out_fd < 0 || ftruncate(out_fd, (off_t)total) != 0)
		goto fail;
	out = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, out_fd, 0);
	if (out == MAP_FAILED)
		goto fail;
	for (size_t i = 0; i < nsec; i++)
		order[i] = i;
	cmp_base = s;
	qsort(order + 1, nsec - 1, sizeof *order, by_size);
	job_t j = { .s = s, .n = nsec, .order = order, .out = out, .next = 1 };
	pthread_t t;
	bool threaded = pthread_create(&t, NULL, worker, &j) == 0;
	worker(&j);
	if (threaded)
		pthread_join(t, NULL);
	if (j.failed)
		goto fail;
	/* the headers */
	Elf64_Ehdr neh;
	memcpy(&neh, elf_getident(e, NULL), EI_NIDENT);
	neh.e_type = eh.e_type;
	neh.e_machine = eh.e_machine;
	neh.e_version = (Elf64_Word)eh.e_version;
	neh.e_entry = eh.e_entry;
	neh.e_phoff = eh.e_phnum ? sizeof(Elf64_Ehdr) : 0;
	neh.e_shoff = shoff;
	neh.e_flags = eh.e_flags;
	neh.e_ehsize = sizeof(Elf64_Ehdr);
	neh.e_phentsize = eh.e_phnum ? sizeof(Elf64_Phdr) : 0;
	neh.e_phnum = eh.e_phnum;
	neh.e_shentsize = sizeof(Elf64_Shdr);
	neh.e_shnum = (Elf64_Half)nsec;
	neh.e_shstrndx = (Elf64_Half)shstrndx;
	memcpy(out, &neh, sizeof neh);
	for (size_t i = 0; i < eh.e_phnum; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) == NULL)
			goto fail;
		Elf64_Phdr p = { (Elf64_Word)ph.p_type, (Elf64_Word)ph.p_flags, ph.p_offset, ph.p_vaddr,
		    ph.p_paddr, ph.p_filesz, ph.p_memsz, ph.p_align };
		memcpy(out + sizeof neh + i * sizeof p, &p, sizeof p);
	}
	Elf64_Shdr *sh = (Elf64_Shdr *)(out + shoff);
	memset(&sh[0], 0, sizeof sh[0]);
	for (size_t i = 1; i < nsec; i++) {
		const GElf_Shdr *g = &s[i].sh;
		sh[i] = (Elf64_Shdr){ (Elf64_Word)g->sh_name, (Elf64_Word)g->sh_type, g->sh_flags, g->sh_addr,
		    s[i].out_off, g->sh_type == SHT_NOBITS && s[i].drop ? 0 : g->sh_size,
		    (Elf64_Word)g->sh_link, (Elf64_Word)g->sh_info, g->sh_addralign, g->sh_entsize };
	}
	munmap(out, total);
	elf_end(e);
	free(s);
	free(order);
	return out_fd;
fail:
	if (out != MAP_FAILED)
		munmap(out, total);
	if (out_fd >= 0)
		close(out_fd);
	elf_end(e);
	free(s);
	free(order);
	return -1;
}
