/*
 * heapctl/elf/ehframe.c - where functions begin and end in a binary without
 * symbols for them, from its unwind tables.
 *
 * A stripped program keeps .eh_frame (exceptions and unwinding need it) and
 * the sorted lookup table in .eh_frame_hdr: one Frame Description Entry per
 * function, with the function's first address and its length.  An address
 * that no symbol names is given the function that contains it, so that all
 * the addresses of one unnamed static function make one row in a report
 * (named sub_<start>@<file>, the start as objdump shows it), rather than a
 * row per address.
 *
 * The tables come from a file a dump names: every offset is checked
 * against its section before it is read.  The sections are found by
 * elf.c, in the file's bytes (elf.h).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "elf/elf.h"

enum {
	PE_OMIT = 0xff,
	PE_ABSPTR = 0x00,
	PE_ULEB = 0x01,
	PE_UDATA2 = 0x02,
	PE_UDATA4 = 0x03,
	PE_UDATA8 = 0x04,
	PE_SLEB = 0x09,
	PE_SDATA2 = 0x0a,
	PE_SDATA4 = 0x0b,
	PE_SDATA8 = 0x0c,
	PE_PCREL = 0x10,
	PE_DATAREL = 0x30,
};

typedef struct cursor_s {
	const unsigned char *p, *end;
	uint64_t addr; /* the address of p, for pc-relative values */
	bool bad;
} cursor_t;

static uint64_t take(cursor_t *c, size_t n)
{
	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i); /* little-endian: x86-64, aarch64 */
	c->p += n;
	c->addr += n;
	return v;
}

static uint64_t uleb(cursor_t *c)
{
	uint64_t v = 0;
	for (unsigned shift = 0; !c->bad; shift += 7) {
		uint64_t b = take(c, 1);
		if (shift < 64)
			v |= (b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int64_t sleb(cursor_t *c)
{
	uint64_t v = 0, b = 0;
	unsigned shift = 0;
	do {
		b = take(c, 1);
		if (shift < 64)
			v |= (b & 0x7f) << shift;
		shift += 7;
	} while ((b & 0x80) && !c->bad);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

/* One pointer in encoding enc; pc-relative ones become addresses, and
 * data-relative ones are relative to base. */
static uint64_t pointer(cursor_t *c, unsigned enc, uint64_t base)
{
	uint64_t at = c->addr, v;
	switch (enc & 0x0f) {
	case PE_ABSPTR: v = take(c, 8); break;
	case PE_ULEB: v = uleb(c); break;
	case PE_UDATA2: v = take(c, 2); break;
	case PE_UDATA4: v = take(c, 4); break;
	case PE_UDATA8: v = take(c, 8); break;
	case PE_SLEB: v = (uint64_t)sleb(c); break;
	case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)take(c, 2); break;
	case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)take(c, 4); break;
	case PE_SDATA8: v = take(c, 8); break;
	default: c->bad = true; return 0;
	}
	switch (enc & 0x70) {
	case 0: break;
	case PE_PCREL: v += at; break;
	case PE_DATAREL: v += base; break;
	default: c->bad = true;
	}
	return v;
}

/* A section's bytes and address; false when it is not there or holds none. */
static bool section(const void *img, size_t size, const char *want, const unsigned char **data, size_t *len,
    uint64_t *addr)
{
	el_section_t sec;
	if (!el_section(img, size, want, &sec) || sec.data == NULL)
		return false;
	*data = sec.data;
	*len = sec.sh.sh_size;
	*addr = sec.sh.sh_addr;
	return true;
}

void el_eh_build(const void *img, size_t size, el_ehtab_t *t, void *(*alloc)(size_t))
{
	t->built = true;
	const unsigned char *hdr;
	size_t hsize;
	uint64_t haddr;
	if (!section(img, size, ".eh_frame_hdr", &hdr, &hsize, &haddr) ||
	    !section(img, size, ".eh_frame", &t->eh, &t->eh_size, &t->eh_addr))
		return;
	cursor_t c = { hdr, hdr + hsize, haddr, false };
	unsigned version = (unsigned)take(&c, 1), ptr_enc = (unsigned)take(&c, 1);
	unsigned count_enc = (unsigned)take(&c, 1), table_enc = (unsigned)take(&c, 1);
	/* the binary search table: what GNU ld and lld write */
	if (c.bad || version != 1 || table_enc != (PE_DATAREL | PE_SDATA4) || ptr_enc == PE_OMIT ||
	    count_enc == PE_OMIT)
		return;
	pointer(&c, ptr_enc, haddr);
	uint64_t n = pointer(&c, count_enc, haddr);
	if (c.bad || n == 0 || n > (uint64_t)(c.end - c.p) / 8)
		return;
	t->start = alloc(sizeof *t->start * n);
	t->fde = alloc(sizeof *t->fde * n);
	for (uint64_t i = 0; i < n; i++) {
		t->start[i] = haddr + (uint64_t)(int64_t)(int32_t)take(&c, 4);
		t->fde[i] = haddr + (uint64_t)(int64_t)(int32_t)take(&c, 4);
	}
	t->n = (size_t)n;
}

/* The function an FDE at addr describes: its start and its length (0:
 * the entry cannot be read). */
static uint64_t fde_length(const el_ehtab_t *t, uint64_t addr, uint64_t *begin)
{
	if (addr < t->eh_addr || addr - t->eh_addr >= t->eh_size)
		return 0;
	const unsigned char *end = t->eh + t->eh_size;
	cursor_t f = { t->eh + (addr - t->eh_addr), end, addr, false };
	uint64_t len = take(&f, 4);
	if (len == 0 || len == 0xffffffff)
		return 0;
	uint64_t cie_at = f.addr;
	uint64_t cie_ptr = take(&f, 4);
	if (f.bad || cie_ptr == 0 || cie_ptr > cie_at - t->eh_addr)
		return 0;
	cie_at -= cie_ptr;
	/* the CIE says how the FDE's addresses are encoded */
	cursor_t c = { t->eh + (cie_at - t->eh_addr), end, cie_at, false };
	uint64_t clen = take(&c, 4);
	if (clen == 0 || clen == 0xffffffff || take(&c, 4) != 0)
		return 0;
	unsigned version = (unsigned)take(&c, 1);
	const char *aug = (const char *)c.p;
	size_t alen = strnlen(aug, (size_t)(c.end - c.p));
	if (c.bad || alen == (size_t)(c.end - c.p))
		return 0;
	c.p += alen + 1;
	c.addr += alen + 1;
	if (strstr(aug, "eh"))
		return 0; /* the old GCC 2 form */
	uleb(&c);         /* code alignment */
	sleb(&c);         /* data alignment */
	if (version == 1)
		take(&c, 1); /* return address register */
	else
		uleb(&c);
	unsigned enc = PE_ABSPTR;
	if (aug[0] == 'z') {
		uleb(&c);
		for (const char *a = aug + 1; *a && !c.bad; a++) {
			if (*a == 'R') {
				enc = (unsigned)take(&c, 1);
			} else if (*a == 'P') {
				unsigned penc = (unsigned)take(&c, 1);
				pointer(&c, penc & 0x7f, 0);
			} else if (*a == 'L') {
				take(&c, 1);
			} else if (*a != 'S' && *a != 'B' && *a != 'G') {
				return 0;
			}
		}
	}
	if (c.bad)
		return 0;
	*begin = pointer(&f, enc, 0);
	uint64_t range = pointer(&f, enc & 0x0f, 0);
	return f.bad ? 0 : range;
}

bool el_eh_function(const el_ehtab_t *t, uint64_t pc, uint64_t *start)
{
	size_t lo = 0, hi = t->n; /* the first entry starting after pc */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t->start[mid] <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	uint64_t s = t->start[lo - 1], begin = 0;
	uint64_t len = fde_length(t, t->fde[lo - 1], &begin);
	if (len == 0 || begin != s || pc - s >= len)
		return false;
	*start = s;
	return true;
}

void el_eh_fdes(const unsigned char *eh, size_t size, uint64_t addr, el_fde_fn *fn, void *arg)
{
	el_ehtab_t t = { .eh = eh, .eh_size = size, .eh_addr = addr };
	for (uint64_t off = 0; eh && off + 8 <= size;) {
		cursor_t c = { eh + off, eh + size, addr + off, false };
		uint64_t len = take(&c, 4);
		if (len == 0 || len == 0xffffffff || len > size - off - 4)
			break; /* the terminator, or 64-bit: stop */
		uint64_t begin = 0, range;
		if (take(&c, 4) != 0 && (range = fde_length(&t, addr + off, &begin)) != 0)
			fn(begin, range, off, arg);
		off += 4 + len;
	}
}
