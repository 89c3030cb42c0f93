/*
 * heapctl/symbolize/inflate.c - a separate debug file with its DWARF sections
 * already inflated, made faster than libdw would make it.
 *
 * Distributions compress debug sections (SHF_COMPRESSED, zlib): libc's
 * debug file is 4 MiB holding 10 MiB of DWARF.  libdw inflates every debug
 * section it knows when the file is opened, one after the other, checksum
 * and all, which is most of the time of a report with few stacks.  Here
 * the file is rewritten into memory (a memfd that libdwfl reads like the
 * file) with:
 *   - only the sections a report reads inflated: not the location lists,
 *     macros and name indexes (those become empty SHT_NOBITS sections),
 *     nor the line tables for a view without file:line;
 *   - raw deflate, without the zlib checksum (the ELF section header says
 *     how big the result must be, which is checked instead);
 *   - two threads taking the sections, largest first, and a section of a
 *     MiB or more (libc's .debug_info) taken by both at once, cut in two
 *     (pinflate.c) on a machine of two cores or more.
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

#include "report/report.h"
#include "report/rp_internal.h"

typedef struct isec_s {
	const unsigned char *src; /* the section's bytes in the file */
	size_t src_size;
	size_t out_off, out_size; /* where it goes in the copy */
	bool inflate, drop;
	rp_split_t *split; /* inflated in two parts (pinflate.c) */
	GElf_Shdr sh;
} isec_t;

/* One file being copied. */
typedef struct ifile_s {
	Elf *e;
	GElf_Ehdr eh;
	size_t nsec, shstrndx, shoff, total;
	isec_t *s;
	int out_fd;
	unsigned char *out;
	int failed; /* set by a worker (atomic) */
} ifile_t;

/* The sections of all the files, largest first, for two workers. */
typedef struct job_s {
	ifile_t *f;
	struct {
		uint32_t file, sec, part;
	} * order; /* part: 0 whole, else split part + 1 */
	size_t n;
	size_t next; /* the next in order (atomic) */
} job_t;

/* Sections that big are inflated by two threads at once. */
#define SPLIT_MIN ((size_t)1 << 20)

/* Sections no view of a report reads; with lines false, also the line
 * tables (views without file:line). */
static bool unneeded(const char *name, bool lines)
{
	if (!lines && !strcmp(name, ".debug_line"))
		return true;
	static const char *const names[] = { ".debug_loc", ".debug_loclists", ".debug_macro", ".debug_macinfo",
		".debug_pubnames", ".debug_pubtypes", ".debug_gnu_pubnames", ".debug_gnu_pubtypes", ".debug_names" };
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
		if (k >= j->n)
			break;
		ifile_t *f = &j->f[j->order[k].file];
		isec_t *s = &f->s[j->order[k].sec];
		if (__atomic_load_n(&f->failed, __ATOMIC_RELAXED))
			continue;
		int rc = 0;
		if (j->order[k].part)
			rp_split_run(s->split, (int)j->order[k].part - 1); /* checked in rp_inflated_wait */
		else if (s->inflate)
			rc = inflate_one(s, f->out + s->out_off);
		else if (!s->drop && s->sh.sh_type != SHT_NOBITS && s->out_size)
			memcpy(f->out + s->out_off, s->src, s->out_size);
		if (rc)
			__atomic_store_n(&f->failed, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static const job_t *cmp_job;

static int by_size(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	size_t sx = cmp_job->f[x[0]].s[x[1]].out_size, sy = cmp_job->f[y[0]].s[y[1]].out_size;
	return sx < sy ? 1 : sx > sy ? -1 : 0;
}

static size_t align_up(size_t v, uint64_t a)
{
	return a > 1 ? (v + (size_t)a - 1) / (size_t)a * (size_t)a : v;
}

/* The split sections' results: false when one failed. */
static bool end_splits(ifile_t *f)
{
	bool ok = true;
	for (size_t i = 0; f->s && i < f->nsec; i++)
		if (f->s[i].split) {
			ok &= rp_split_end(f->s[i].split) >= 0;
			f->s[i].split = NULL;
		}
	return ok;
}

static void drop_file(ifile_t *f)
{
	end_splits(f);
	if (f->out != NULL && f->out != MAP_FAILED)
		munmap(f->out, f->total);
	if (f->out_fd >= 0)
		close(f->out_fd);
	if (f->e)
		elf_end(f->e);
	free(f->s);
	memset(f, 0, sizeof *f);
	f->out_fd = -1;
}

/* The copy's layout, and its memfd mapped: false when there is nothing to
 * gain or something is not as expected. */
static bool plan(ifile_t *f, int fd, bool lines)
{
	f->out_fd = -1;
	Elf *e = f->e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr *eh = &f->eh;
	if (e == NULL || gelf_getclass(e) != ELFCLASS64 || gelf_getehdr(e, eh) == NULL ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB || elf_getshdrnum(e, &f->nsec) != 0 ||
	    elf_getshdrstrndx(e, &f->shstrndx) != 0 || f->nsec < 2 || f->nsec > 65000 || eh->e_shnum != f->nsec ||
	    (eh->e_phnum && eh->e_phoff != sizeof(Elf64_Ehdr)))
		return false;
	isec_t *s = f->s = calloc(f->nsec, sizeof *s);
	if (s == NULL)
		return false;
	/* header, program headers where they were, sections in order, the
	 * section header table */
	size_t off = sizeof(Elf64_Ehdr) + (size_t)eh->e_phnum * sizeof(Elf64_Phdr);
	bool any = false;
	for (size_t i = 1; i < f->nsec; i++) {
		Elf_Scn *scn = elf_getscn(e, i);
		isec_t *c = &s[i];
		if (scn == NULL || gelf_getshdr(scn, &c->sh) == NULL)
			return false;
		const char *name = elf_strptr(e, f->shstrndx, c->sh.sh_name);
		if (name == NULL)
			return false;
		if (c->sh.sh_type != SHT_NOBITS) {
			Elf_Data *d = elf_rawdata(scn, NULL);
			if (d == NULL || (d->d_size && d->d_buf == NULL))
				return false;
			c->src = d->d_buf;
			c->src_size = d->d_size;
		}
		c->out_size = c->src_size;
		if (c->sh.sh_flags & SHF_COMPRESSED) {
			Elf64_Chdr ch;
			if (c->src_size < sizeof ch)
				return false;
			memcpy(&ch, c->src, sizeof ch);
			if (ch.ch_type != ELFCOMPRESS_ZLIB || ch.ch_size > ((size_t)1 << 32))
				return false;
			any = true;
			if (unneeded(name, lines)) {
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
		return false; /* nothing to gain: the file as it is */
	f->shoff = align_up(off, 8);
	f->total = f->shoff + f->nsec * sizeof(Elf64_Shdr);
	f->out_fd = memfd_create("heapctl-debug", MFD_CLOEXEC);
	if (f->out_fd < 0 || ftruncate(f->out_fd, (off_t)f->total) != 0)
		return false;
	f->out = mmap(NULL, f->total, PROT_READ | PROT_WRITE, MAP_SHARED, f->out_fd, 0);
	return f->out != MAP_FAILED;
}

/* The headers, once the sections are in. */
static bool finish(ifile_t *f)
{
	const GElf_Ehdr *eh = &f->eh;
	Elf64_Ehdr neh;
	memcpy(&neh, elf_getident(f->e, NULL), EI_NIDENT);
	neh.e_type = eh->e_type;
	neh.e_machine = eh->e_machine;
	neh.e_version = (Elf64_Word)eh->e_version;
	neh.e_entry = eh->e_entry;
	neh.e_phoff = eh->e_phnum ? sizeof(Elf64_Ehdr) : 0;
	neh.e_shoff = f->shoff;
	neh.e_flags = eh->e_flags;
	neh.e_ehsize = sizeof(Elf64_Ehdr);
	neh.e_phentsize = eh->e_phnum ? sizeof(Elf64_Phdr) : 0;
	neh.e_phnum = eh->e_phnum;
	neh.e_shentsize = sizeof(Elf64_Shdr);
	neh.e_shnum = (Elf64_Half)f->nsec;
	neh.e_shstrndx = (Elf64_Half)f->shstrndx;
	memcpy(f->out, &neh, sizeof neh);
	for (size_t i = 0; i < eh->e_phnum; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(f->e, (int)i, &ph) == NULL)
			return false;
		Elf64_Phdr p = { (Elf64_Word)ph.p_type, (Elf64_Word)ph.p_flags, ph.p_offset, ph.p_vaddr, ph.p_paddr,
			ph.p_filesz, ph.p_memsz, ph.p_align };
		memcpy(f->out + sizeof neh + i * sizeof p, &p, sizeof p);
	}
	Elf64_Shdr *sh = (Elf64_Shdr *)(f->out + f->shoff);
	memset(&sh[0], 0, sizeof sh[0]);
	for (size_t i = 1; i < f->nsec; i++) {
		const GElf_Shdr *g = &f->s[i].sh;
		sh[i] = (Elf64_Shdr){ (Elf64_Word)g->sh_name, (Elf64_Word)g->sh_type, g->sh_flags, g->sh_addr,
			f->s[i].out_off, g->sh_size, (Elf64_Word)g->sh_link, (Elf64_Word)g->sh_info, g->sh_addralign,
			g->sh_entsize };
	}
	return true;
}

/* A set of copies being made: the files, the sections in the order the
 * workers take them, and the workers. */
struct rp_inflating_s {
	ifile_t *f;
	size_t n;
	job_t j;
	pthread_t t[2];
	int nthreads;
};

rp_inflating_t *rp_inflated_start(const int *fds, size_t n, int threads, bool lines)
{
	ifile_t *f = calloc(n + 1, sizeof *f);
	rp_inflating_t *in = calloc(1, sizeof *in);
	if (f == NULL || in == NULL) {
		free(f);
		free(in);
		return NULL;
	}
	size_t nsec = 0;
	for (size_t i = 0; i < n; i++) {
		f[i].out_fd = -1;
		if (fds[i] < 0)
			continue;
		if (!plan(&f[i], fds[i], lines))
			drop_file(&f[i]);
		else
			nsec += f[i].nsec;
	}
	in->f = f;
	in->n = n;
	in->j = (job_t){ .f = f, .order = nsec ? calloc(2 * nsec, sizeof *in->j.order) : NULL };
	if (in->j.order == NULL)
		return in; /* nothing to do, or no memory: no copies */
	/* a big section on a machine of two cores or more: two jobs */
	bool cores = sysconf(_SC_NPROCESSORS_ONLN) >= 2;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 1; k < f[i].nsec; k++) {
			isec_t *c = &f[i].s[k];
			if (cores && c->inflate && c->out_size >= SPLIT_MIN)
				c->split = rp_split_new(c->src + sizeof(Elf64_Chdr), c->src_size - sizeof(Elf64_Chdr),
				    f[i].out + c->out_off, c->out_size);
			for (uint32_t part = c->split ? 1 : 0; part <= (c->split ? 2 : 0); part++)
				in->j.order[in->j.n++] = (typeof(*in->j.order)){ (uint32_t)i, (uint32_t)k, part };
		}
	cmp_job = &in->j;
	qsort(in->j.order, in->j.n, sizeof *in->j.order, by_size);
	for (int k = 0; k < threads && k < 2; k++)
		if (pthread_create(&in->t[in->nthreads], NULL, worker, &in->j) == 0)
			in->nthreads++;
	return in;
}

void rp_inflated_wait(rp_inflating_t *in, int *out)
{
	for (size_t i = 0; in && i < in->n; i++)
		out[i] = -1;
	if (in == NULL)
		return;
	if (in->j.order) {
		worker(&in->j); /* what no worker has taken yet */
		for (int k = 0; k < in->nthreads; k++)
			pthread_join(in->t[k], NULL);
	}
	for (size_t i = 0; i < in->n; i++) {
		ifile_t *f = &in->f[i];
		if (!end_splits(f))
			f->failed = 1;
		if (in->j.order && f->out_fd >= 0 && !f->failed && finish(f)) {
			out[i] = f->out_fd;
			f->out_fd = -1;
		}
		drop_file(f);
	}
	free(in->j.order);
	free(in->f);
	free(in);
}
