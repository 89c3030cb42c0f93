/*
 * heapctl/trace/unwind.c - the frames of a sample of `heapctl trace`, by
 * libunwind's remote API: its registers and stack are the ones the BPF
 * program copied, text and unwind tables are read from the process's
 * memory (/proc/PID/mem), and each object's search table is maps.c's.
 * Nothing stops the process.
 */
#define _GNU_SOURCE
#include <libunwind-ptrace.h>
#include <string.h>
#include <unistd.h>

#include "elf/unwind.h"
#include "tr_internal.h"

static struct {
	unw_addr_space_t as;
	void *upt;
	const struct tr_sample *cur; /* the sample being unwound */
} U;

static int acc_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	if (write)
		return -UNW_EINVAL;
	const struct tr_sample *s = U.cur;
	if (s && addr >= s->regs.sp && addr + sizeof *val <= s->regs.sp + s->stack_len) {
		memcpy(val, s->stack + (addr - s->regs.sp), sizeof *val);
		return 0;
	}
	/* a table made here (maps.c's eh_make) */
	if (addr >= MADE_BASE)
		return tr_eh_made_read(addr, (uint64_t *)val) ? 0 : -UNW_EINVAL;
	/* text and unwind tables: read-only mappings of the process */
	if (pread(T.memfd, val, sizeof *val, (off_t)addr) != (ssize_t)sizeof *val)
		return -UNW_EINVAL;
	return 0;
}

static int acc_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	if (write || U.cur == NULL)
		return -UNW_EINVAL;
	const struct tr_regs *r = &U.cur->regs;
	switch (reg) {
	case UNW_X86_64_RAX: *val = r->ax; break;
	case UNW_X86_64_RDX: *val = r->dx; break;
	case UNW_X86_64_RCX: *val = r->cx; break;
	case UNW_X86_64_RBX: *val = r->bx; break;
	case UNW_X86_64_RSI: *val = r->si; break;
	case UNW_X86_64_RDI: *val = r->di; break;
	case UNW_X86_64_RBP: *val = r->bp; break;
	case UNW_X86_64_RSP: *val = r->sp; break;
	case UNW_X86_64_R8: *val = r->r8; break;
	case UNW_X86_64_R9: *val = r->r9; break;
	case UNW_X86_64_R10: *val = r->r10; break;
	case UNW_X86_64_R11: *val = r->r11; break;
	case UNW_X86_64_R12: *val = r->r12; break;
	case UNW_X86_64_R13: *val = r->r13; break;
	case UNW_X86_64_R14: *val = r->r14; break;
	case UNW_X86_64_R15: *val = r->r15; break;
	case UNW_X86_64_RIP: *val = r->ip; break;
	default: return -UNW_EBADREG;
	}
	return 0;
}

static int acc_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	return -UNW_EBADREG;
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	return -UNW_EINVAL;
}

static int acc_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len, unw_word_t *off, void *arg)
{
	return -UNW_ENOINFO;
}

static int acc_find(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need, void *arg)
{
	const eh_obj_t *o = tr_eh_object(ip);
	if (o && o->nfde && cli_unw_search(as, ip, o->lo, o->hi, o->hdr, o->table, o->nfde, pi, need, U.upt) == 0)
		return 0;
	return _UPT_find_proc_info(as, ip, pi, need, U.upt);
}

static void acc_put(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	_UPT_put_unwind_info(as, pi, U.upt);
}

static int acc_dyn(unw_addr_space_t as, unw_word_t *dil, void *arg)
{
	return _UPT_get_dyn_info_list_addr(as, dil, U.upt);
}

static unw_accessors_t accessors = {
	.find_proc_info = acc_find,
	.put_unwind_info = acc_put,
	.get_dyn_info_list_addr = acc_dyn,
	.access_mem = acc_mem,
	.access_reg = acc_reg,
	.access_fpreg = acc_fpreg,
	.resume = acc_resume,
	.get_proc_name = acc_proc_name,
};

/* The sample's frames, innermost first: the faulting instruction, or (for
 * --malloc) the return address into the allocator's caller. */
unsigned tr_unwind(const struct tr_sample *s, uint64_t *f)
{
	U.cur = s;
	unw_cursor_t c;
	unsigned n = 0;
	if (unw_init_remote(&c, U.as, NULL) == 0) {
		int skip = T.o.mode == T_MALLOC; /* the probed function's frame */
		do {
			unw_word_t ip = 0;
			if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0)
				break;
			if (skip > 0)
				skip--;
			else
				f[n++] = ip;
		} while (n < MAX_FRAMES && unw_step(&c) > 0);
	}
	if (n == 0) {
		/* no unwind info at all: the one frame we know */
		f[n++] = T.o.mode == T_MALLOC && s->stack_len >= 8 ? *(const uint64_t *)s->stack : s->regs.ip;
		T.unwound_short++;
	}
	U.cur = NULL;
	return n;
}

/* The address space over the accessors above, and libunwind's ptrace
 * accessors for what they do not find (they open the files the maps
 * name); false when libunwind cannot make them. */
bool tr_unwind_open(void)
{
	U.as = unw_create_addr_space(&accessors, 0);
	U.upt = _UPT_create(T.pid);
	if (U.as == NULL || U.upt == NULL)
		return false;
	unw_set_caching_policy(U.as, UNW_CACHE_GLOBAL);
	return true;
}

void tr_unwind_close(void)
{
	if (U.upt)
		_UPT_destroy(U.upt);
	if (U.as)
		unw_destroy_addr_space(U.as);
	U.upt = NULL;
	U.as = NULL;
}
