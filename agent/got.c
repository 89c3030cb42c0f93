/*
 * agent/got.c - rewriting a loaded object's imports.
 *
 * A call from one shared object to a function of another goes through a
 * slot of the caller's global offset table: a JUMP_SLOT relocation for a
 * PLT call, a GLOB_DAT one for -fno-plt code and for taking the function's
 * address.  Storing another address in those slots redirects the object's
 * calls and nothing else; the slot's old value is what restores it.  Slots
 * under PT_GNU_RELRO are read-only after start-up: the page is made
 * writable for the moment of the store.
 *
 * Two users: unwind.c points libunwind's mincore at a stand-in, and the
 * injected agent (agent/inject/) points every object's malloc family at its
 * wrappers and back.
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"
#include "events.h"

#if defined(__x86_64__)
#define R_SLOT(t) ((t) == R_X86_64_JUMP_SLOT || (t) == R_X86_64_GLOB_DAT)
#elif defined(__aarch64__)
#define R_SLOT(t) ((t) == R_AARCH64_JUMP_SLOT || (t) == R_AARCH64_GLOB_DAT)
#else
#define R_SLOT(t) 0
#endif

void hc_got_relro_of(const struct dl_phdr_info *info, hc_relro_t *r)
{
	uintptr_t mask = ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
	r->base = info->dlpi_addr;
	r->lo = r->hi = 0;
	r->busy = false;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
			/* the pages the loader makes read-only (glibc's
			 * _dl_protect_relro): whole pages from the start's, up to
			 * the one the end is in, which keeps its other data
			 * writable */
			ElfW(Addr) lo = r->base + info->dlpi_phdr[i].p_vaddr;
			r->lo = lo & mask;
			r->hi = (lo + info->dlpi_phdr[i].p_memsz) & mask;
		}
	}
}

static int find_relro(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	hc_relro_t *r = arg;
	if (info->dlpi_addr != r->base)
		return 0;
	hc_got_relro_of(info, r);
	return 1;
}

/* For each r[i] whose RELRO range is not empty: busy if its first page is
 * writable now, from one read of /proc/self/maps, a piece at a time into
 * the stack (no malloc).  Unknown (no maps) counts as not busy. */
void hc_got_busy(hc_relro_t *r, unsigned n)
{
	bool own;
	int fd = hc_event_maps(&own);
	if (fd < 0)
		return;
	char buf[4096];
	size_t have = 0;
	for (off_t off = 0;;) {
		ssize_t got = pread(fd, buf + have, sizeof buf - 1 - have, off);
		if (got <= 0)
			break;
		off += got;
		have += (size_t)got;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n')) != NULL) {
			*nl = 0;
			char *end;
			uintptr_t lo = (uintptr_t)strtoull(line, &end, 16);
			uintptr_t hi = *end == '-' ? (uintptr_t)strtoull(end + 1, &end, 16) : 0;
			if (*end == ' ' && end[2] == 'w')
				for (unsigned k = 0; k < n; k++)
					if (r[k].lo < r[k].hi && r[k].lo >= lo && r[k].lo < hi)
						r[k].busy = true;
			line = nl + 1;
		}
		have -= (size_t)(line - buf); /* a line cut short: keep its start */
		memmove(buf, line, have);
		if (have == sizeof buf - 1)
			have = 0; /* no line is that long */
	}
	if (own)
		close(fd);
}

void hc_got_relro(hc_relro_t *r)
{
	r->lo = r->hi = 0;
	r->busy = false;
	dl_iterate_phdr(find_relro, r);
	hc_got_busy(r, 1);
}

/* Store v in *slot, through a RELRO page if it is one. */
bool hc_got_store(void **slot, void *v, uintptr_t relro_lo, uintptr_t relro_hi)
{
	long pagesz = sysconf(_SC_PAGESIZE);
	bool ro = (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi;
	void *page = (void *)((uintptr_t)slot & ~(uintptr_t)(pagesz - 1));
	if (ro && mprotect(page, (size_t)pagesz, PROT_READ | PROT_WRITE) != 0)
		return false;
	__atomic_store_n(slot, v, __ATOMIC_RELEASE);
	if (ro)
		mprotect(page, (size_t)pagesz, PROT_READ);
	return true;
}

/* Call fn for every JUMP_SLOT and GLOB_DAT slot of the object loaded at
 * r->base with dynamic section dyn, with the slot's symbol name; fn's
 * return is added up. */
unsigned hc_got_each(const hc_relro_t *r, const void *dyn, hc_got_fn fn, void *arg)
{
	uintptr_t base = r->base;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Rela) *rela[2] = { NULL, NULL };
	size_t relasz[2] = { 0, 0 };
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
		/* glibc rebases these in place where .dynamic is writable */
		ElfW(Addr) p = d->d_un.d_ptr < base ? d->d_un.d_ptr + base : d->d_un.d_ptr;
		switch (d->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)p; break;
		case DT_STRTAB: strtab = (const char *)p; break;
		case DT_JMPREL: rela[0] = (const ElfW(Rela) *)p; break;
		case DT_PLTRELSZ: relasz[0] = d->d_un.d_val; break;
		case DT_RELA: rela[1] = (const ElfW(Rela) *)p; break;
		case DT_RELASZ: relasz[1] = d->d_un.d_val; break;
		}
	}
	if (symtab == NULL || strtab == NULL)
		return 0;
	/* dl_iterate_phdr lists an object another thread's dlopen has mapped
	 * and is still relocating: its RELRO pages are writable until the
	 * loader is done.  Made read-only after a store (hc_got_store), the
	 * loader's next relocation there faults (python3 died so in ld.so's
	 * _dl_relocate_object when the injected agent's scan ran meanwhile);
	 * and a slot taken now could still be relocated over.  Left for later. */
	if (r->busy)
		return 0;
	unsigned n = 0;
	for (int t = 0; t < 2; t++) {
		for (size_t i = 0; rela[t] && i < relasz[t] / sizeof(ElfW(Rela)); i++) {
			const ElfW(Rela) *rel = &rela[t][i];
			if (!R_SLOT(ELF64_R_TYPE(rel->r_info)) || ELF64_R_SYM(rel->r_info) == 0)
				continue;
			const char *name = strtab + symtab[ELF64_R_SYM(rel->r_info)].st_name;
			n += fn((void **)(base + rel->r_offset), name, r->lo, r->hi, arg);
		}
	}
	return n;
}
