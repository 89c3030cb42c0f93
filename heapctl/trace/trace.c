/*
 * heapctl/trace/trace.c - `heapctl trace PID --malloc | --faults`: a heap
 * profile of any process, without touching it, from eBPF (libbpf).
 *
 * The kernel half (trace.bpf.c) samples by bytes, as the library does,
 * and sends the sampled calls' user registers and stack tops through a
 * ring buffer.  Here they are unwound with libunwind's remote API (the
 * process's own .eh_frame, its memory read through /proc/PID/mem and the
 * copied stack), kept in a stack table, and written as heap_v2 dumps that
 * report, jeprof, pprof and the daemon read unchanged, with the build id of
 * each mapped object as the agent's dumps have them.  --malloc keeps its
 * probes' cost on the process within --budget by detaching them for
 * periods (budget.c says why and how).
 *
 * This is libheapctl-trace.so, loaded by `heapctl trace` alone, so that
 * the other commands need no libbpf.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <libunwind-ptrace.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "cli/outfile.h"
#include "elf/unwind.h"
#include "budget.h"
#include "trace.h"
#include "trace.skel.h"

#define MAX_FRAMES 128

__attribute__((visibility("default"))) int hc_trace_main(cli_args_t *a);
__attribute__((visibility("default"))) void hc_trace_help(FILE *f);

enum { T_MALLOC = 256, T_FAULTS, T_LG, T_DURATION, T_PREFIX, T_INTERVAL, T_SYMBOLS, T_LIMIT, T_BUDGET };

static const cli_opt_t trace_opts[] = {
	{ "malloc", T_MALLOC, NULL, "sampled allocations: uprobes on the allocator the process uses" },
	{ "faults", T_FAULTS, NULL, "page faults that bring in new pages: where resident memory grows" },
	{ "lg-sample", T_LG, "N", "sample once per 2^N bytes on average (default 19 for --malloc, "
	  "16 for --faults)" },
	{ "duration", T_DURATION, "SECS", "stop after SECS (default: until Ctrl-C or the process ends)" },
	{ "interval", T_INTERVAL, "SECS", "also write a dump every SECS" },
	{ "prefix", T_PREFIX, "P", "write dumps as P.<pid>.<seq>.<kind><n>.heap (default: jeprof, here)" },
	{ "output", 'o', "FILE", "write the final dump to FILE" },
	{ "symbols", T_SYMBOLS, "LIST", "the allocator's functions as ROLE=NAME,... (roles: malloc calloc "
	  "realloc free memalign posix_memalign), for one heapctl does not know" },
	{ "limit", T_LIMIT, "N", "at most N samples a second per CPU (default 10000; 0: no limit)" },
	{ "budget", T_BUDGET, "PCT", "--malloc: the share of one CPU, in percent, the probes may take from the "
	  "process (default 5; 0: none); past it they are detached for periods and the totals are estimates" },
	{ 0 },
};

void hc_trace_help(FILE *f)
{
	cli_opts_help(f, trace_opts);
}

typedef struct opts_s {
	int mode;                  /* T_MALLOC or T_FAULTS                       */
	int lg;
	double duration, interval;
	const char *prefix, *output, *symbols;
	uint64_t limit;
	double budget;             /* % of one CPU; 0: no budget                 */
} opts_t;

/* ---- the stack table and the live sampled objects ------------------------- */

typedef struct stack_s {
	struct stack_s *next, *all_next;
	uint64_t hash;
	double w_curobjs, w_curbytes, w_accumobjs, w_accumbytes;
	unsigned n;
	uint64_t frames[];
} stack_t_;

typedef struct obj_s {
	uint64_t ptr;              /* 0: empty, 1: deleted                       */
	stack_t_ *stack;
	double weight;
	uint64_t size;
} obj_t;

/* A sample whose call has not returned yet (--malloc): one per thread. */
typedef struct pend_s {
	uint32_t tid;
	stack_t_ *stack;
	uint64_t size;
	double weight;
} pend_t;

static struct {
	opts_t o;
	int pid;
	double period;
	stack_t_ **tab, *all;
	size_t tab_n, nstacks;
	obj_t *live;
	size_t live_cap, live_used, live_n;
	pend_t *pend;
	size_t npend, pend_cap;
	/* unwinding */
	unw_addr_space_t as;
	void *upt;
	int memfd;
	const struct tr_sample *cur;
	char *maps;                /* the last copy of /proc/PID/maps           */
	size_t maps_len;
	uint64_t seq, seq_i, samples, unwound_short, frees;
	struct trace_bpf *skel;
	bool json;
	bool multi;                /* the uprobes go on as uprobe_multi links     */
	int mfd[8];                /* those links' fds                            */
	unsigned nmfd;
	tb_budget_t B;
	double scale;              /* --malloc: weight multiplier of the samples
	                              of this window (budget.c)                   */
} T;

static uint64_t hash_frames(const uint64_t *f, unsigned n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	for (unsigned i = 0; i < n; i++) {
		h ^= f[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

static stack_t_ *stack_get(const uint64_t *f, unsigned n)
{
	if (T.nstacks * 2 >= T.tab_n) {
		size_t nn = T.tab_n ? T.tab_n * 2 : 4096;
		stack_t_ **nt = calloc(nn, sizeof *nt);
		if (nt == NULL)
			return NULL;
		for (stack_t_ *s = T.all; s; s = s->all_next) {
			size_t i = s->hash & (nn - 1);
			s->next = nt[i];
			nt[i] = s;
		}
		free(T.tab);
		T.tab = nt;
		T.tab_n = nn;
	}
	uint64_t h = hash_frames(f, n);
	size_t i = h & (T.tab_n - 1);
	for (stack_t_ *s = T.tab[i]; s; s = s->next)
		if (s->hash == h && s->n == n && memcmp(s->frames, f, n * sizeof *f) == 0)
			return s;
	stack_t_ *s = calloc(1, sizeof *s + n * sizeof *f);
	if (s == NULL)
		return NULL;
	s->hash = h;
	s->n = n;
	memcpy(s->frames, f, n * sizeof *f);
	s->next = T.tab[i];
	T.tab[i] = s;
	s->all_next = T.all;
	T.all = s;
	T.nstacks++;
	return s;
}

static size_t live_slot(uint64_t ptr)
{
	uint64_t h = ptr * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (T.live_cap - 1);
}

static obj_t *live_find(uint64_t ptr)
{
	if (T.live_cap == 0)
		return NULL;
	for (size_t i = live_slot(ptr);; i = (i + 1) & (T.live_cap - 1)) {
		if (T.live[i].ptr == ptr)
			return &T.live[i];
		if (T.live[i].ptr == 0)
			return NULL;
	}
}

static int live_put(uint64_t ptr, stack_t_ *s, uint64_t size, double w)
{
	if ((T.live_used + 1) * 2 > T.live_cap) {
		size_t nc = T.live_cap ? T.live_cap : 4096;
		while ((T.live_n + 1) * 4 > nc)
			nc *= 2;
		obj_t *old = T.live, *nl = calloc(nc, sizeof *nl);
		if (nl == NULL)
			return -1;
		size_t oc = T.live_cap;
		T.live = nl;
		T.live_cap = nc;
		T.live_used = 0;
		for (size_t i = 0; i < oc; i++)
			if (old[i].ptr > 1) {
				size_t j = live_slot(old[i].ptr);
				while (nl[j].ptr)
					j = (j + 1) & (nc - 1);
				nl[j] = old[i];
				T.live_used++;
			}
		free(old);
	}
	obj_t *o = live_find(ptr);
	if (o == NULL) {
		size_t i = live_slot(ptr);
		while (T.live[i].ptr > 1)
			i = (i + 1) & (T.live_cap - 1);
		o = &T.live[i];
		if (o->ptr == 0)
			T.live_used++;
		T.live_n++;
	} else {
		/* a pointer we missed the free of: its old sample ends here */
		o->stack->w_curobjs -= o->weight;
		o->stack->w_curbytes -= o->weight * (double)o->size;
	}
	*o = (obj_t){ ptr, s, w, size };
	return 0;
}

/* ---- unwinding: libunwind's remote API over a copied stack ---------------- */

/*
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

typedef struct eh_obj_s {
	uint64_t lo, hi;           /* the object's mappings                    */
	uint64_t hdr, table;       /* .eh_frame_hdr and its search table       */
	uint64_t nfde;             /* 0: none usable                            */
	int32_t *made;             /* a table made here from .eh_frame, read
	                              by libunwind at the address `table`    */
} eh_obj_t;

/* Tables made here live at addresses no user mapping has; acc_mem serves
 * reads there from them. */
#define MADE_BASE 0xffff900000000000ull
static uint64_t made_next = MADE_BASE;

static uint64_t maps_gen = 1;  /* counts read_maps' copies of the maps */

static struct {
	eh_obj_t *o;
	size_t n;
	uint64_t gen;              /* the copy of the maps they came from      */
} EH;

static int acc_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	if (write)
		return -UNW_EINVAL;
	const struct tr_sample *s = T.cur;
	if (s && addr >= s->regs.sp && addr + sizeof *val <= s->regs.sp + s->stack_len) {
		memcpy(val, s->stack + (addr - s->regs.sp), sizeof *val);
		return 0;
	}
	/* a table made here (eh_make) */
	if (addr >= MADE_BASE) {
		for (size_t i = 0; i < EH.n; i++) {
			const eh_obj_t *o = &EH.o[i];
			if (o->made && addr >= o->table && addr + sizeof *val <= o->table + o->nfde * 8) {
				memcpy(val, (const char *)o->made + (addr - o->table), sizeof *val);
				return 0;
			}
		}
		return -UNW_EINVAL;
	}
	/* text and unwind tables: read-only mappings of the process */
	if (pread(T.memfd, val, sizeof *val, (off_t)addr) != (ssize_t)sizeof *val)
		return -UNW_EINVAL;
	return 0;
}

static int acc_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	if (write || T.cur == NULL)
		return -UNW_EINVAL;
	const struct tr_regs *r = &T.cur->regs;
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

static int acc_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
    unw_word_t *off, void *arg)
{
	return -UNW_ENOINFO;
}


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

static int acc_find(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need, void *arg)
{
	if (EH.gen != maps_gen)
		eh_build();
	for (size_t i = 0; i < EH.n; i++) {
		const eh_obj_t *o = &EH.o[i];
		if (ip < o->lo || ip >= o->hi)
			continue;
		if (o->nfde && cli_unw_search(as, ip, o->lo, o->hi, o->hdr, o->table, o->nfde, pi, need, T.upt) == 0)
			return 0;
		break;
	}
	return _UPT_find_proc_info(as, ip, pi, need, T.upt);
}

static void acc_put(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	_UPT_put_unwind_info(as, pi, T.upt);
}

static int acc_dyn(unw_addr_space_t as, unw_word_t *dil, void *arg)
{
	return _UPT_get_dyn_info_list_addr(as, dil, T.upt);
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
static unsigned unwind(const struct tr_sample *s, uint64_t *f)
{
	T.cur = s;
	unw_cursor_t c;
	unsigned n = 0;
	if (unw_init_remote(&c, T.as, NULL) == 0) {
		int skip = T.o.mode == T_MALLOC;   /* the probed function's frame */
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
		f[n++] = T.o.mode == T_MALLOC && s->stack_len >= 8 ?
		    *(const uint64_t *)s->stack : s->regs.ip;
		T.unwound_short++;
	}
	T.cur = NULL;
	return n;
}

/* ---- dumps ---------------------------------------------------------------- */

static void put_maps(FILE *f);

/* /proc/PID/maps, and the build ids of its objects while they can be read
 * (the last dump is written after the process ended). */
static void read_maps(void)
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
		put_maps(NULL);
	} else {
		free(b);
	}
}

/* The counts jeprof turns back into the unbiased sums (agent/dump.c says
 * why: it divides each line by 1 - exp(-mean size / period)). */
static void put_counts(FILE *f, double c, double s, double ac, double as)
{
	double v[4] = { 0, 0, 0, 0 }, in[2][2] = { { c, s }, { ac, as } };
	for (int k = 0; k < 2; k++) {
		double objs = in[k][0], bytes = in[k][1];
		if (!(objs > 0.5) || !(bytes > 0))
			continue;
		double x = bytes / objs, y = bytes * -expm1(-x / T.period);
		v[2 * k] = floor(y / x + 0.5);
		v[2 * k + 1] = floor(y + 0.5);
	}
	fprintf(f, "%.0f: %.0f [%.0f: %.0f]", v[0], v[1], v[2], v[3]);
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
static void put_maps(FILE *f)
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

static int write_dump(FILE *f, const void *arg)
{
	double c = 0, s = 0, ac = 0, as = 0;
	for (stack_t_ *st = T.all; st; st = st->all_next) {
		c += st->w_curobjs;
		s += st->w_curbytes;
		ac += st->w_accumobjs;
		as += st->w_accumbytes;
	}
	fprintf(f, "heap_v2/%.0f\n  t*: ", T.period);
	put_counts(f, c, s, ac, as);
	fputc('\n', f);
	for (stack_t_ *st = T.all; st; st = st->all_next) {
		if (!(st->w_accumobjs > 0.5))
			continue;
		fputc('@', f);
		for (unsigned i = 0; i < st->n; i++)
			fprintf(f, " 0x%" PRIx64, st->frames[i]);
		fputs("\n  t*: ", f);
		put_counts(f, st->w_curobjs, st->w_curbytes, st->w_accumobjs, st->w_accumbytes);
		fputc('\n', f);
	}
	fputs("\nMAPPED_LIBRARIES:\n", f);
	if (T.maps)
		put_maps(f);
	fflush(f);
	return ferror(f) ? EIO : 0;
}

/* P.<pid>.<seq>.<kind><n>.heap, or FILE; prints the path written. */
static int dump(char kind)
{
	char path[PATH_MAX], err[PATH_MAX + 128];
	if (kind == 'f' && T.o.output) {
		snprintf(path, sizeof path, "%s", T.o.output);
	} else {
		char n[24] = "";
		if (kind != 'f')
			snprintf(n, sizeof n, "%" PRIu64, T.seq_i++);
		/* the pid as we see it (a container's pid 1 has another here);
		 * a name that is taken is skipped for the next number, never
		 * replaced (1000 in a row: someone fills the directory) */
		struct stat st;
		for (int i = 0;; i++, T.seq++) {
			if ((size_t)snprintf(path, sizeof path, "%s.%d.%" PRIu64 ".%c%s.heap",
			    T.o.prefix, T.pid, T.seq, kind, n) >= sizeof path)
				return cli_err(HC_EXIT_USAGE, "trace: --prefix is too long");
			if (lstat(path, &st) != 0)
				break;
			if (i == 1000)
				return cli_err(HC_EXIT_FAILED, "trace: %s and the 1000 names before it are taken: "
				    "not replaced", path);
		}
	}
	T.seq++;
	read_maps();
	if (rp_out_stream(path, write_dump, NULL, err, sizeof err) != 0)
		return cli_err(HC_EXIT_FAILED, "%s", err);
	if (T.json) {
		printf("{\"event\":\"dump\",\"path\":");
		out_json_str(stdout, path);
		printf("}\n");
	} else if (strcmp(path, "-") != 0) {
		printf("%s\n", path);
	}
	fflush(stdout);
	return 0;
}

/* ---- events --------------------------------------------------------------- */

static double weight_of(uint64_t size)
{
	double p = -expm1(-(double)(size ? size : 1) / T.period);
	return p > 0 ? 1 / p : 1;
}

static void json_frames(const stack_t_ *s)
{
	printf(",\"frames\":[");
	for (unsigned i = 0; i < s->n; i++)
		printf("%s\"0x%" PRIx64 "\"", i ? "," : "", s->frames[i]);
	printf("]");
}

static pend_t *pend_of(uint32_t tid, bool make)
{
	for (size_t i = 0; i < T.npend; i++)
		if (T.pend[i].tid == tid)
			return &T.pend[i];
	if (!make)
		return NULL;
	if (T.npend == T.pend_cap) {
		size_t nc = T.pend_cap ? T.pend_cap * 2 : 64;
		pend_t *np = realloc(T.pend, nc * sizeof *np);
		if (np == NULL)
			return NULL;
		T.pend = np;
		T.pend_cap = nc;
	}
	T.pend[T.npend] = (pend_t){ .tid = tid };
	return &T.pend[T.npend++];
}

static void on_sample(const struct tr_sample *e)
{
	uint64_t f[MAX_FRAMES];
	unsigned n = unwind(e, f);
	stack_t_ *s = stack_get(f, n);
	if (s == NULL)
		return;
	T.samples++;
	double w = weight_of(e->size);
	if (T.o.mode == T_FAULTS) {
		/* a page, resident from now on as far as we can tell */
		s->w_curobjs += w;
		s->w_curbytes += w * (double)e->size;
		s->w_accumobjs += w;
		s->w_accumbytes += w * (double)e->size;
		if (T.json) {
			printf("{\"event\":\"fault\",\"tid\":%u,\"addr\":\"0x%" PRIx64 "\",\"bytes\":%" PRIu64
			    ",\"weight\":%.3f", e->tid, (uint64_t)e->addr, (uint64_t)e->size, w);
			json_frames(s);
			printf("}\n");
		}
		return;
	}
	pend_t *p = pend_of(e->tid, true);
	if (p) {
		p->stack = s;
		p->size = e->size;
		p->weight = w * T.scale;
	}
}

static void on_ret(const struct tr_small *e)
{
	pend_t *p = pend_of(e->tid, false);
	if (p == NULL || p->stack == NULL)
		return;
	stack_t_ *s = p->stack;
	p->stack = NULL;
	if (e->ptr == 0)
		return;                 /* the allocation failed */
	s->w_accumobjs += p->weight;
	s->w_accumbytes += p->weight * (double)p->size;
	s->w_curobjs += p->weight;
	s->w_curbytes += p->weight * (double)p->size;
	live_put(e->ptr, s, p->size, p->weight);
	if (T.json) {
		printf("{\"event\":\"alloc\",\"tid\":%u,\"ptr\":\"0x%" PRIx64 "\",\"size\":%" PRIu64
		    ",\"weight\":%.3f", e->tid, (uint64_t)e->ptr, p->size, p->weight);
		json_frames(s);
		printf("}\n");
	}
}

static void on_free(const struct tr_small *e)
{
	obj_t *o = live_find(e->ptr);
	if (o == NULL)
		return;
	o->stack->w_curobjs -= o->weight;
	o->stack->w_curbytes -= o->weight * (double)o->size;
	if (o->stack->w_curobjs < 0.5) {
		o->stack->w_curobjs = 0;
		o->stack->w_curbytes = 0;
	}
	o->ptr = 1;
	T.live_n--;
	T.frees++;
	if (T.json)
		printf("{\"event\":\"free\",\"tid\":%u,\"ptr\":\"0x%" PRIx64 "\"}\n", e->tid, (uint64_t)e->ptr);
}

static int on_event(void *ctx, void *data, size_t len)
{
	uint32_t kind;
	if (len < sizeof kind)
		return 0;
	memcpy(&kind, data, sizeof kind);
	if (kind == TR_SAMPLE && len >= sizeof(struct tr_sample))
		on_sample(data);
	else if (kind == TR_RET && len >= sizeof(struct tr_small))
		on_ret(data);
	else if (kind == TR_FREE && len >= sizeof(struct tr_small))
		on_free(data);
	return 0;
}

/* ---- the allocator the process uses ---------------------------------------- */

enum { R_MALLOC, R_CALLOC, R_REALLOC, R_FREE, R_MEMALIGN, R_POSIX, R_NROLES };
static const char *const role_names[R_NROLES] = {
	"malloc", "calloc", "realloc", "free", "memalign", "posix_memalign",
};

/* The functions probed, by role: the standard ones and jemalloc's
 * non-standard API (mallocx and rallocx take the size where malloc and
 * realloc do; dallocx and sdallocx the pointer where free does). */
static const struct { int role; const char *name; } family[] = {
	{ R_MALLOC, "malloc" }, { R_CALLOC, "calloc" }, { R_REALLOC, "realloc" },
	{ R_FREE, "free" }, { R_MEMALIGN, "memalign" }, { R_MEMALIGN, "aligned_alloc" },
	{ R_POSIX, "posix_memalign" }, { R_MALLOC, "valloc" }, { R_MALLOC, "pvalloc" },
	{ R_MALLOC, "mallocx" }, { R_REALLOC, "rallocx" }, { R_FREE, "dallocx" },
	{ R_FREE, "sdallocx" },
};
#define NFAMILY (sizeof family / sizeof family[0])
#define MAX_PROBES 32

typedef struct probe_s {
	int role;
	char name[64];
	uint64_t off;              /* in the file, where the uprobe goes          */
} probe_t;

typedef struct allocator_s {
	char path[PATH_MAX];       /* as the process names it                    */
	char open_path[PATH_MAX];  /* through /proc/PID/root                     */
	probe_t p[MAX_PROBES];
	unsigned n;
} allocator_t;

/* A function's file offset from its address (the PT_LOAD holding it). */
static bool file_offset(Elf *e, uint64_t addr, uint64_t *off)
{
	size_t n;
	if (elf_getphdrnum(e, &n) != 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    addr >= ph.p_vaddr && addr < ph.p_vaddr + ph.p_filesz) {
			*off = addr - ph.p_vaddr + ph.p_offset;
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
		i = 4;                                     /* endbr64 */
	if (!(b[i] == 0x48 && b[i + 1] == 0x85 && b[i + 2] == 0xff))
		return off;                                /* test %rdi,%rdi */
	i += 3;
	if (b[i] == 0x74)
		i += 2;                                    /* je rel8 */
	else if (b[i] == 0x0f && b[i + 1] == 0x84)
		i += 6;                                    /* je rel32 */
	else
		return off;
	bool push = (b[i] >= 0x50 && b[i] <= 0x57) ||
	    (b[i] == 0x41 && b[i + 1] >= 0x50 && b[i + 1] <= 0x57);
	return push ? off + i : off;
}

/* The functions of names[] (role, name) that path defines; the count. */
static unsigned find_functions(const char *open_path, const char *prefix, allocator_t *al,
    const char *const *want, const int *roles, unsigned nwant)
{
	int fd = open(open_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	Elf *e = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	unsigned found = 0;
	al->n = 0;
	for (Elf_Scn *scn = NULL; e && (scn = elf_nextscn(e, scn)) != NULL;) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) == NULL || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    sh.sh_entsize == 0)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t nsym = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; d && i < nsym; i++) {
			GElf_Sym sym;
			if (gelf_getsym(d, (int)i, &sym) == NULL || sym.st_shndx == SHN_UNDEF ||
			    (GELF_ST_TYPE(sym.st_info) != STT_FUNC))
				continue;
			const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
			size_t pl = strlen(prefix);
			if (name == NULL || strncmp(name, prefix, pl) != 0)
				continue;
			for (unsigned w = 0; w < nwant; w++) {
				uint64_t off;
				if (strcmp(name + pl, want[w]) != 0 || !file_offset(e, sym.st_value, &off))
					continue;
				bool dup = false;
				for (unsigned k = 0; k < al->n; k++)
					dup |= al->p[k].off == off || strcmp(al->p[k].name, name) == 0;
				if (dup || al->n == MAX_PROBES)
					continue;
				probe_t *p = &al->p[al->n++];
				p->role = roles[w];
				snprintf(p->name, sizeof p->name, "%s", name);
				p->off = roles[w] == R_FREE ? past_null_check(fd, off) : off;
				found++;
			}
		}
	}
	if (e)
		elf_end(e);
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

/* The process's executable objects (from the copy of its maps), its
 * program first, then its libraries with libc last (a library that defines malloc beside libc is
 * the allocator the process uses: jemalloc, tcmalloc, mimalloc). */
static size_t mapped_objects(int pid, char (*out)[PATH_MAX], size_t max)
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
			return cli_err(HC_EXIT_USAGE, "trace: --symbols takes ROLE=NAME,... with ROLE one of "
			    "malloc calloc realloc free memalign posix_memalign, not '%s'", tok);
		if (*n == MAX_PROBES)
			return cli_err(HC_EXIT_USAGE, "trace: --symbols names more than %d functions", MAX_PROBES);
		want[*n] = eq + 1;
		roles[(*n)++] = role;
	}
	if (*n == 0)
		return cli_err(HC_EXIT_USAGE, "trace: --symbols is empty");
	return 0;
}

static int find_allocator(int pid, const char *symbols, allocator_t *al)
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
	elf_version(EV_CURRENT);
	static char objs[256][PATH_MAX];
	size_t n = mapped_objects(pid, objs, 256);
	static const char *const prefixes[] = { "", "je_", "mi_" };
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(objs[i], '/') + 1;
		if (strncmp(base, "ld-linux", 8) == 0)
			continue;                  /* the loader's minimal malloc */
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
	return cli_err(HC_EXIT_FAILED, "trace: no object of process %d defines malloc and free "
	    "(a stripped static program?): name its allocator with --symbols, or use --faults", pid);
}

/* ---- checks --------------------------------------------------------------- */

static bool has_caps(void)
{
	struct { uint32_t version; int pid; } hdr = { 0x20080522, 0 };   /* _LINUX_CAPABILITY_VERSION_3 */
	struct { uint32_t eff, perm, inh; } d[2];
	if (syscall(SYS_capget, &hdr, d) != 0)
		return geteuid() == 0;
	bool admin = d[0].eff & (1u << 21);                              /* CAP_SYS_ADMIN */
	bool bpf = d[1].eff & (1u << (39 - 32)), perfmon = d[1].eff & (1u << (38 - 32));
	return admin || (bpf && perfmon);
}

static char libbpf_last[512];

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	char line[512];
	vsnprintf(line, sizeof line, fmt, ap);
	size_t l = strlen(line);
	while (l > 0 && line[l - 1] == '\n')
		line[--l] = 0;
	if (l > 0)
		snprintf(libbpf_last, sizeof libbpf_last, "%s", line);
	if (getenv("HEAPCTL_TRACE_DEBUG"))
		fprintf(stderr, "libbpf: %s\n", line);
	return 0;
}

static const char *why_load_failed(int err)
{
	if (err == -EPERM || err == -EACCES)
		return "permission denied: it needs CAP_BPF and CAP_PERFMON, or root";
	if (err == -ENOMEM)
		return "out of locked memory: raise the limit (ulimit -l unlimited; LimitMEMLOCK=infinity in a unit)";
	return libbpf_last[0] ? libbpf_last : strerror(-err);
}

static int parse_opts(cli_args_t *a, opts_t *o)
{
	*o = (opts_t){ .lg = -1, .prefix = "jeprof", .limit = 10000, .budget = -1 };
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "trace", trace_opts, false);
	const char *v;
	char *end;
	for (int id; code == 0 && (id = cli_scan_next(&sc, &v)) != 0;) {
		switch (id) {
		case T_MALLOC: case T_FAULTS:
			if (o->mode && o->mode != id)
				code = cli_err(HC_EXIT_USAGE, "trace: --malloc and --faults are two runs, not one");
			o->mode = id;
			break;
		case T_LG:
			errno = 0;
			o->lg = (int)strtol(v, &end, 10);
			if (errno || *end || end == v || o->lg < 0 || o->lg > 40)
				code = cli_err(HC_EXIT_USAGE, "trace: --lg-sample takes 0 to 40, not '%s'", v);
			break;
		case T_DURATION: case T_INTERVAL: {
			double d = strtod(v, &end);
			if (*end || end == v || !(d > 0) || d > 1e9)
				code = cli_err(HC_EXIT_USAGE, "trace: --%s takes seconds (> 0), not '%s'",
				    id == T_DURATION ? "duration" : "interval", v);
			*(id == T_DURATION ? &o->duration : &o->interval) = d;
			break;
		}
		case T_LIMIT:
			errno = 0;
			o->limit = strtoull(v, &end, 10);
			if (errno || *end || end == v || v[0] == '-')
				code = cli_err(HC_EXIT_USAGE, "trace: --limit takes a count, not '%s'", v);
			break;
		case T_BUDGET: {
			double d = strtod(v, &end);
			if (end != v && *end == '%')
				end++;
			if (*end || end == v || !(d >= 0) || d > 100)
				code = cli_err(HC_EXIT_USAGE, "trace: --budget takes a percent of one CPU, 0 (none) "
				    "to 100, not '%s'", v);
			o->budget = d;
			break;
		}
		case T_PREFIX: o->prefix = v; break;
		case 'o': o->output = v; break;
		case T_SYMBOLS: o->symbols = v; break;
		case CLI_OPERAND:
			errno = 0;
			long p = strtol(v, &end, 10);
			if (a->pid == 0 && !errno && !*end && end != v && p > 0 && p <= INT32_MAX)
				a->pid = (int)p;
			else
				code = cli_err(HC_EXIT_USAGE, "trace: unexpected argument '%s'", v);
			break;
		default: code = -id;
		}
	}
	cli_scan_end(&sc);
	if (code)
		return code < 0 ? -code : code;
	if (o->mode == 0)
		return cli_err(HC_EXIT_USAGE, "trace: say what to trace: --malloc or --faults");
	if (o->symbols && o->mode != T_MALLOC)
		return cli_err(HC_EXIT_USAGE, "trace: --symbols is for --malloc");
	if (o->budget >= 0 && o->mode != T_MALLOC)
		return cli_err(HC_EXIT_USAGE, "trace: --budget is for --malloc (a page fault's program "
		    "costs the process nothing per malloc)");
	if (o->budget < 0)
		o->budget = o->mode == T_MALLOC ? TB_DEFAULT_PCT : 0;
	if (o->lg < 0)
		o->lg = o->mode == T_MALLOC ? 19 : 16;
	if (o->prefix[0] == 0)
		return cli_err(HC_EXIT_USAGE, "trace: --prefix is empty");
	return 0;
}

/* ---- the run ---------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fill_variates(int fd)
{
	/* the quantiles of the exponential distribution of mean period: the
	 * program picks one at random */
	for (uint32_t i = 0; i < TR_VARIATES; i++) {
		double u = (i + 0.5) / TR_VARIATES;
		uint64_t v = (uint64_t)(-log(u) * T.period) + 1;
		bpf_map_update_elem(fd, &i, &v, BPF_ANY);
	}
}

static void counters(uint64_t *c)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = calloc((size_t)(ncpu > 0 ? ncpu : 1), sizeof *v);
	for (uint32_t k = 0; k < TR_NCOUNTERS; k++) {
		c[k] = 0;
		if (v && bpf_map_lookup_elem(bpf_map__fd(T.skel->maps.counters), &k, v) == 0)
			for (int i = 0; i < ncpu; i++)
				c[k] += v[i];
	}
	free(v);
}

/*
 * uprobe_multi links (Linux 6.6): one link puts a program on many
 * functions, and removing it waits for RCU grace periods once, where each
 * perf-event uprobe link waits for its own, under a mutex that every such
 * removal takes (trace.c's detach says what that cost).  libbpf 1.1
 * (Debian 12) predates them, so the kernel's BPF_LINK_CREATE is called
 * directly with its ABI's numbers (include/uapi/linux/bpf.h); on a kernel
 * without them heapctl loads the program again for perf-event links.
 */
#define HC_TRACE_UPROBE_MULTI 48          /* enum bpf_attach_type         */
#define HC_F_UPROBE_MULTI_RETURN 1u

struct link_create_uprobe_multi {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, multi_flags, pid, pad;
};

/* prog on the n functions at offs of path, at their returns if ret */
static int attach_multi(struct bpf_program *prog, const char *path, const uint64_t *offs, uint32_t n, bool ret)
{
	if (n == 0)
		return 0;
	struct link_create_uprobe_multi a;
	memset(&a, 0, sizeof a);
	a.prog_fd = (uint32_t)bpf_program__fd(prog);
	a.attach_type = HC_TRACE_UPROBE_MULTI;
	a.path = (uintptr_t)path;
	a.offsets = (uintptr_t)offs;
	a.cnt = n;
	a.multi_flags = ret ? HC_F_UPROBE_MULTI_RETURN : 0;
	a.pid = (uint32_t)T.pid;
	int fd = (int)syscall(SYS_bpf, BPF_LINK_CREATE, &a, sizeof a);
	if (fd < 0)
		return -errno;
	T.mfd[T.nmfd++] = fd;
	return 0;
}

static int attach(const allocator_t *al, struct bpf_link **links, unsigned *nlinks)
{
	struct trace_bpf *s = T.skel;
	if (T.o.mode == T_FAULTS) {
		links[(*nlinks)++] = bpf_program__attach_raw_tracepoint(s->progs.fault_user, "page_fault_user");
		if (links[*nlinks - 1] == NULL)
			return -errno;
		links[(*nlinks)++] = bpf_program__attach_raw_tracepoint(s->progs.fault_kernel, "page_fault_kernel");
		return links[*nlinks - 1] ? 0 : -errno;
	}
	struct bpf_program *entry[R_NROLES] = {
		s->progs.malloc_entry, s->progs.calloc_entry, s->progs.realloc_entry,
		s->progs.free_entry, s->progs.memalign_entry, s->progs.posix_memalign_entry,
	};
	if (T.multi) {
		/* a link for each role's program, one for the returns */
		uint64_t offs[MAX_PROBES], rets[MAX_PROBES];
		uint32_t nret = 0;
		int err = 0;
		for (int r = 0; r < R_NROLES && err == 0; r++) {
			uint32_t n = 0;
			for (unsigned i = 0; i < al->n; i++)
				if (al->p[i].role == r)
					offs[n++] = al->p[i].off;
			err = attach_multi(entry[r], al->open_path, offs, n, false);
		}
		for (unsigned i = 0; i < al->n; i++)
			if (al->p[i].role != R_FREE)
				rets[nret++] = al->p[i].off;
		return err ? err : attach_multi(s->progs.alloc_ret, al->open_path, rets, nret, true);
	}
	for (unsigned i = 0; i < al->n; i++) {
		const probe_t *p = &al->p[i];
		struct bpf_link *l = bpf_program__attach_uprobe(entry[p->role], false, T.pid, al->open_path, p->off);
		if (l == NULL)
			return -errno;
		links[(*nlinks)++] = l;
		if (p->role == R_FREE)
			continue;
		l = bpf_program__attach_uprobe(s->progs.alloc_ret, true, T.pid, al->open_path, p->off);
		if (l == NULL)
			return -errno;
		links[(*nlinks)++] = l;
	}
	return 0;
}

static void *destroy_link(void *link)
{
	bpf_link__destroy(link);
	return NULL;
}

static void *close_link(void *fd)
{
	close((int)(intptr_t)fd);
	return NULL;
}

/* Detach every probe.  A sampled call whose return will not be seen
 * leaves nothing behind: its thread's pending mark in the kernel and its
 * stack here are dropped, or the first return after the probes come back
 * would be taken for it. */
static void detach(struct bpf_link **links, unsigned *nlinks)
{
	/* each link's removal waits for RCU grace periods, while the rest
	 * still trap, so they are removed together from threads of their own.
	 * In this VM glibc's 15 perf-event uprobe links took 2.9 s one after
	 * another and 1.4-1.6 s together (a mutex keeps them mostly in turn);
	 * its 7 uprobe_multi links take 85-110 ms */
	pthread_t th[2 * MAX_PROBES + 2 + 8];
	bool started[2 * MAX_PROBES + 2 + 8];
	unsigned n = 0;
	for (unsigned i = 0; i < *nlinks; i++, n++)
		started[n] = pthread_create(&th[n], NULL, destroy_link, links[i]) == 0;
	for (unsigned i = 0; i < T.nmfd; i++, n++)
		started[n] = pthread_create(&th[n], NULL, close_link, (void *)(intptr_t)T.mfd[i]) == 0;
	for (unsigned i = 0; i < n; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		else if (i < *nlinks)
			bpf_link__destroy(links[i]);
		else
			close(T.mfd[i - *nlinks]);
	}
	*nlinks = 0;
	T.nmfd = 0;
	int fd = bpf_map__fd(T.skel->maps.threads);
	uint32_t key, *prev = NULL, at;
	while (bpf_map_get_next_key(fd, prev, &key) == 0) {
		struct tstate ts;
		if (bpf_map_lookup_elem(fd, &key, &ts) == 0 && ts.pending) {
			ts.pending = 0;
			ts.memptr = 0;
			bpf_map_update_elem(fd, &key, &ts, BPF_EXIST);
		}
		at = key;
		prev = &at;
	}
	for (size_t i = 0; i < T.npend; i++)
		T.pend[i].stack = NULL;
}

/* --malloc's duty cycle in the run loop: windows with the probes on, each
 * measured, and off periods where the budget asks for them (budget.c). */
typedef struct cycle_s {
	bool on;
	double t_next;             /* the next switch                            */
	double t0, user, sys;      /* this window's or off period's start        */
	uint64_t hits;             /* TR_C_HITS then                             */
	double t_paused;           /* when the probes stopped observing          */
} cycle_t;

static void cycle_mark(cycle_t *cy, double t)
{
	uint64_t c[TR_NCOUNTERS];
	counters(c);
	cy->t0 = t;
	cy->hits = c[TR_C_HITS];
	if (!tb_proc_times(T.pid, &cy->user, &cy->sys))
		cy->user = cy->sys = 0;
}

/* The one line, and the --json event, when the budget first turns the
 * probes off: what they cost, what heapctl does, what the profile then is. */
static void cycle_say(double off)
{
	const tb_budget_t *b = &T.B;
	if (T.json) {
		printf("{\"event\":\"budget\",\"action\":\"duty_cycle\",\"budget_pct\":%g,\"probe_cpu_pct\":%.1f"
		    ",\"ns_per_hit\":%.0f,\"on_s\":%g,\"off_s\":%.3f}\n", b->pct, b->cpu_pct, b->ns_hit, TB_WINDOW, off);
		fflush(stdout);
	}
	fprintf(stderr, "heapctl: the probes cost process %d about %.0f%% of a CPU (%.1f us a hit), over the "
	    "budget of %g%% (--budget): they are detached and come back for %g s at a time (now after %.1f s "
	    "off), and the profile's totals are estimates scaled from what they saw; for a process this hot, "
	    "heapctl inject %d profiles at a few ns a call\n", T.pid, b->cpu_pct, b->ns_hit / 1000, b->pct,
	    TB_WINDOW, off, T.pid);
}

/* The switch due now: the end of a window (the probes go off when over the
 * budget) or of an off period (they come back, and the samples of the
 * window that starts stand for the time unobserved too).  0, or an exit
 * code; *ended when the process is gone. */
static int cycle_step(cycle_t *cy, const allocator_t *al, struct bpf_link **links, unsigned *nlinks,
    struct ring_buffer *rb, double now, bool *ended)
{
	double user, sys;
	uint64_t c[TR_NCOUNTERS];
	if (!tb_proc_times(T.pid, &user, &sys)) {
		*ended = true;
		return 0;
	}
	counters(c);
	if (cy->on) {
		bool over = tb_window_end(&T.B, c[TR_C_HITS] - cy->hits, now - cy->t0, user - cy->user, sys - cy->sys);
		if (!over) {
			ring_buffer__consume(rb);      /* this window's samples, at its scale */
			T.scale = 1;
			cycle_mark(cy, now);
			cy->t_next = now + TB_WINDOW;
			return 0;
		}
		T.skel->bss->paused = 1;
		cy->t_paused = now;
		detach(links, nlinks);
		ring_buffer__consume(rb);
		double t = now_s();
		counters(c);
		/* a process that ended meanwhile keeps its times at the window's end */
		*ended = !tb_proc_times(T.pid, &user, &sys);
		double off = tb_off(&T.B, c[TR_C_HITS] - cy->hits, t - cy->t0, user - cy->user, sys - cy->sys);
		if (T.B.cycles == 1)
			cycle_say(off);
		cy->on = false;
		cycle_mark(cy, t);
		cy->t_next = t + off;
		return 0;
	}
	/* what the untraced process did in the off period refines k */
	tb_baseline(&T.B, user - cy->user, sys - cy->sys);
	int err = attach(al, links, nlinks);
	if (err) {
		detach(links, nlinks);
		if (err == -ESRCH || kill(T.pid, 0) != 0) {
			*ended = true;
			return 0;
		}
		return cli_err(HC_EXIT_FAILED, "trace: cannot attach to process %d again: %s", T.pid,
		    why_load_failed(err));
	}
	double t = now_s();
	T.scale = (t - cy->t_paused + TB_WINDOW) / TB_WINDOW;
	T.skel->bss->paused = 0;
	cy->on = true;
	cycle_mark(cy, t);
	cy->t_next = t + TB_WINDOW;
	return 0;
}

/* Open and load the BPF program: its uprobe programs for uprobe_multi
 * links if multi.  0 or a negative errno. */
static int load(bool multi)
{
	if (T.skel)
		trace_bpf__destroy(T.skel);
	T.skel = trace_bpf__open();
	if (T.skel == NULL)
		return -errno;
	T.skel->rodata->cfg_tgid = (uint32_t)T.pid;
	T.skel->rodata->cfg_limit = T.o.limit;
	bool faults = T.o.mode == T_FAULTS;
	struct bpf_program *p;
	bpf_object__for_each_program(p, T.skel->obj) {
		bool is_fault = p == T.skel->progs.fault_user || p == T.skel->progs.fault_kernel;
		bpf_program__set_autoload(p, is_fault == faults);
		if (multi && !is_fault)
			bpf_program__set_expected_attach_type(p, HC_TRACE_UPROBE_MULTI);
	}
	int err = trace_bpf__load(T.skel);
	if (err == 0)
		fill_variates(bpf_map__fd(T.skel->maps.variates));
	T.multi = multi && err == 0;
	return err;
}

int hc_trace_main(cli_args_t *a)
{
	memset(&T, 0, sizeof T);
	T.memfd = -1;
	T.scale = 1;
	int code = parse_opts(a, &T.o);
	if (code)
		return code;
	tb_init(&T.B, T.o.budget);
	T.pid = a->pid;
	T.json = a->json;
	T.period = (double)(1ull << T.o.lg);
	if (T.pid <= 0)
		return cli_err(HC_EXIT_USAGE, "trace: say which process: heapctl trace PID --malloc|--faults");
	if (T.pid == getpid())
		return cli_err(HC_EXIT_USAGE, "trace: process %d is heapctl itself", T.pid);
	int pidfd = (int)syscall(SYS_pidfd_open, T.pid, 0);
	if (pidfd < 0)
		return cli_err(errno == ESRCH ? HC_EXIT_NOPROC : HC_EXIT_FAILED, "no process %d", T.pid);
	/* the process untraced, while the program loads: its system seconds
	 * per user second (budget.c) */
	double base_t = now_s(), base_user = 0, base_sys = 0;
	tb_proc_times(T.pid, &base_user, &base_sys);
	if (!has_caps()) {
		close(pidfd);
		return cli_err(HC_EXIT_PERM, "trace: needs CAP_BPF and CAP_PERFMON (or root): "
		    "run it as root, e.g. sudo heapctl trace %d", T.pid);
	}
	if (T.o.mode == T_FAULTS && access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		close(pidfd);
		return cli_err(HC_EXIT_FAILED, "trace: this kernel has no BTF (/sys/kernel/btf/vmlinux), "
		    "which --faults needs: a kernel built with CONFIG_DEBUG_INFO_BTF=y");
	}
	char memp[64];
	snprintf(memp, sizeof memp, "/proc/%d/mem", T.pid);
	T.memfd = open(memp, O_RDONLY | O_CLOEXEC);
	if (T.memfd < 0) {
		close(pidfd);
		return cli_err(errno == ENOENT ? HC_EXIT_NOPROC : HC_EXIT_PERM,
		    "trace: cannot read process %d's memory: %s", T.pid, strerror(errno));
	}
	read_maps();
	static allocator_t al;
	memset(&al, 0, sizeof al);
	if (T.o.mode == T_MALLOC && (code = find_allocator(T.pid, T.o.symbols, &al)) != 0)
		goto out;

	libbpf_set_print(libbpf_print);
	bool faults = T.o.mode == T_FAULTS;
	/* HEAPCTL_TRACE_NO_MULTI: perf-event links, as on a kernel before 6.6 */
	bool multi = !faults && getenv("HEAPCTL_TRACE_NO_MULTI") == NULL;
	int err = load(multi);
	if (err && multi)
		err = load(false);
	if (err) {
		code = cli_err(err == -EPERM ? HC_EXIT_PERM : HC_EXIT_FAILED, "trace: cannot load the BPF program: %s",
		    why_load_failed(err));
		goto out;
	}
	T.as = unw_create_addr_space(&accessors, 0);
	T.upt = _UPT_create(T.pid);
	if (T.as == NULL || T.upt == NULL) {
		code = cli_err(HC_EXIT_FAILED, "trace: libunwind: cannot make an address space");
		goto out;
	}
	unw_set_caching_policy(T.as, UNW_CACHE_GLOBAL);
	struct ring_buffer *rb = ring_buffer__new(bpf_map__fd(T.skel->maps.ring), on_event, NULL, NULL);
	if (rb == NULL) {
		code = cli_err(HC_EXIT_FAILED, "trace: cannot map the ring buffer: %s", strerror(errno));
		goto out;
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct bpf_link *links[2 * MAX_PROBES + 2];
	unsigned nlinks = 0;
	if (T.o.mode == T_MALLOC) {
		double wait = base_t + TB_BASELINE - now_s(), user, sys;
		if (wait > 0)
			usleep((useconds_t)(wait * 1e6));
		if (tb_proc_times(T.pid, &user, &sys))
			tb_baseline(&T.B, user - base_user, sys - base_sys);
	}
	err = attach(&al, links, &nlinks);
	if (err && T.multi && err != -ESRCH) {
		/* a kernel without uprobe_multi links: perf-event ones */
		if (getenv("HEAPCTL_TRACE_DEBUG"))
			fprintf(stderr, "heapctl: uprobe_multi links: %s; perf-event links instead\n", strerror(-err));
		detach(links, &nlinks);
		ring_buffer__free(rb);
		rb = NULL;
		if ((err = load(false)) == 0 && (rb = ring_buffer__new(bpf_map__fd(T.skel->maps.ring), on_event, NULL,
		    NULL)) == NULL)
			err = -errno;
		if (err == 0)
			err = attach(&al, links, &nlinks);
	}
	if (err) {
		code = cli_err(err == -ESRCH ? HC_EXIT_NOPROC : HC_EXIT_FAILED, "trace: cannot attach to process %d: %s",
		    T.pid, err == -ESRCH ? "it has exited" : why_load_failed(err));
	} else {
		if (T.o.mode == T_MALLOC) {
			fprintf(stderr, "heapctl: tracing %u functions of %s in process %d (", al.n, al.path, T.pid);
			for (unsigned i = 0; i < al.n; i++)
				fprintf(stderr, "%s%s", i ? " " : "", al.p[i].name);
			fprintf(stderr, "), one sample per %.0f bytes; Ctrl-C to stop\n", T.period);
		} else {
			fprintf(stderr, "heapctl: tracing page faults of process %d, one sample per %.0f bytes "
			    "of new pages; Ctrl-C to stop\n", T.pid, T.period);
		}
		double t0 = now_s(), next_dump = T.o.interval > 0 ? t0 + T.o.interval : 0, next_maps = t0 + 1, now = t0;
		bool ended = false;
		cycle_t cy = { .on = true };
		if (!faults) {
			cycle_mark(&cy, t0);
			cy.t_next = t0 + TB_WINDOW;
		}
		while (!stop_signal && !ended) {
			int wait_ms = 100;
			if (cy.t_next && cy.t_next - now < 0.1)
				wait_ms = cy.t_next > now ? (int)((cy.t_next - now) * 1000) : 0;
			int r = ring_buffer__poll(rb, wait_ms);
			if (r < 0 && r != -EINTR) {
				code = cli_err(HC_EXIT_FAILED, "trace: reading the ring buffer: %s", strerror(-r));
				break;
			}
			struct pollfd pf = { .fd = pidfd, .events = POLLIN };
			ended = poll(&pf, 1, 0) == 1;
			now = now_s();
			if (T.o.duration > 0 && now - t0 >= T.o.duration)
				break;
			if (!ended && now >= next_maps) {
				read_maps();
				next_maps = now + 1;
			}
			if (next_dump && now >= next_dump) {
				if (dump('t') != 0)
					code = HC_EXIT_FAILED;
				next_dump += T.o.interval;
			}
			if (!ended && cy.t_next && now >= cy.t_next && (code = cycle_step(&cy, &al, links, &nlinks, rb,
			    now, &ended)) != 0)
				break;
		}
		if (cy.on && !faults)
			T.B.t_on += now - cy.t0;
		T.B.t_traced = now_s() - t0;
		detach(links, &nlinks);
		ring_buffer__consume(rb);
		uint64_t c[TR_NCOUNTERS];
		counters(c);
		if (code == 0 && dump('f') != 0)
			code = HC_EXIT_FAILED;
		uint64_t dropped = c[TR_C_RINGFULL] + c[TR_C_LIMITED];
		if (T.json)
			printf("{\"event\":\"summary\",\"calls\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"frees\":%" PRIu64
			    ",\"dropped_ring_full\":%" PRIu64 ",\"dropped_rate_limit\":%" PRIu64
			    ",\"live_map_full\":%" PRIu64 ",\"stacks\":%zu,\"unwind_failed\":%" PRIu64
			    ",\"hits\":%" PRIu64 ",\"budget_pct\":%g,\"probe_cpu_pct\":%.1f,\"ns_per_hit\":%.0f"
			    ",\"on_fraction\":%.4f,\"off_periods\":%" PRIu64 ",\"estimated\":%s}\n",
			    c[TR_C_CALLS], T.samples, T.frees, c[TR_C_RINGFULL], c[TR_C_LIMITED],
			    c[TR_C_LIVEFULL], T.nstacks, T.unwound_short, c[TR_C_HITS], T.B.pct, T.B.cpu_pct,
			    T.B.ns_hit, T.B.t_traced > 0 ? T.B.t_on / T.B.t_traced : 1, T.B.cycles,
			    T.B.cycles ? "true" : "false");
		fprintf(stderr, "heapctl: %s%" PRIu64 " %s seen, %" PRIu64 " sampled (%zu stacks)",
		    ended ? "the process ended; " : "", c[TR_C_CALLS], faults ? "page faults" : "calls",
		    T.samples, T.nstacks);
		if (!faults)
			fprintf(stderr, ", %" PRIu64 " sampled objects freed", T.frees);
		if (dropped || c[TR_C_LIVEFULL])
			fprintf(stderr, "; dropped %" PRIu64 " samples (ring full %" PRIu64 ", rate limit %" PRIu64
			    "), %" PRIu64 " not tracked (live map full)", dropped, c[TR_C_RINGFULL],
			    c[TR_C_LIMITED], c[TR_C_LIVEFULL]);
		if (T.B.cycles)
			fprintf(stderr, "; over the budget of %g%% (the probes cost about %.0f%% of a CPU), they "
			    "observed %.1f%% of the time: the totals are estimates", T.B.pct, T.B.cpu_pct,
			    T.B.t_traced > 0 ? 100 * T.B.t_on / T.B.t_traced : 100.0);
		fputc('\n', stderr);
	}
	for (unsigned i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	ring_buffer__free(rb);
out:
	if (T.skel)
		trace_bpf__destroy(T.skel);
	if (T.upt)
		_UPT_destroy(T.upt);
	if (T.as)
		unw_destroy_addr_space(T.as);
	eh_free();
	EH.o = NULL;
	EH.n = 0;
	EH.gen = 0;
	if (T.memfd >= 0)
		close(T.memfd);
	close(pidfd);
	return code;
}
