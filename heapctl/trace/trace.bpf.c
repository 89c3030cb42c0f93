// SPDX-License-Identifier: GPL-2.0-only
/*
 * heapctl/trace/trace.bpf.c - the kernel half of `heapctl trace`, built
 * with clang -target bpf and loaded by trace.c through its bpftool
 * skeleton.
 *
 * One process (cfg_tgid).  Each thread counts bytes down from an
 * exponential variate of mean cfg_period, as the library's sampler does;
 * only the allocation (or fault) that crosses zero is sampled: its user
 * registers and the top TR_STACK_MAX bytes of its stack go to the ring
 * buffer, and user space unwinds them (DWARF CFI through libunwind), so
 * stacks are whole in code built without frame pointers.  Everything else
 * costs a hash lookup.
 *
 * --malloc: uprobes on the allocation functions' entries, a uretprobe that
 * learns the sampled pointer (kept in `live`), and a uprobe on free that
 * looks each pointer up there.
 * --faults: the page-fault tracepoints, attached raw (by name, through
 * the bpf system call: no tracefs needed, which a host or container may
 * not have mounted); each fault that finds no page counts one page.
 *
 * The kernel types used are declared here (their layout is the kernel's
 * ABI), so building needs no vmlinux.h.
 */
#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "trace.h"

/* x86_64's struct pt_regs (arch/x86/include/asm/ptrace.h), the user
 * registers at a uprobe or saved at kernel entry. */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

/* The raw exceptions:page_fault_{user,kernel} tracepoints' arguments
 * (arch/x86/include/asm/trace/exceptions.h): address, regs, error_code. */
enum { TP_FAULT_ADDRESS = 0, TP_FAULT_ERROR = 2 };

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 cfg_tgid = 0;
const volatile __u64 cfg_limit = 0; /* samples per second per CPU; 0: none */
/* Set by heapctl while it detaches the probes (--budget): what they see
 * then is not kept, so that the samples come from whole windows. */
volatile __u32 paused = 0;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct tstate);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 20);
	__type(key, __u64);
	__type(value, __u8);
} live SEC(".maps");

/* Exponential variates of mean cfg_period, written by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TR_VARIATES);
	__type(key, __u32);
	__type(value, __u64);
} variates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TR_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct limit {
	__u64 window;
	__u64 n;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct limit);
} limits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);
} ring SEC(".maps");

/* --faults: set on a CPU while a fault's sample copies the user stack.
 * That copy may itself fault (a page of the stack never touched), in
 * kernel mode on a user address: page_fault_kernel, whose raw tracepoint
 * program runs nested inside this one (raw tracepoints guard each
 * program against itself only).  Those faults are ours, not the
 * process's: counted, they were one more page for about every sample. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sampling SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);
	if (c)
		(*c)++;
}

static __always_inline __s64 variate(void)
{
	__u32 i = bpf_get_prandom_u32() & (TR_VARIATES - 1);
	__u64 *v = bpf_map_lookup_elem(&variates, &i);
	return v ? (__s64)*v : 1 << 19;
}

/* The calling thread's state, made on its first call; NULL when the call
 * is not the traced process's. */
static __always_inline struct tstate *thread(__u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();
	if ((__u32)(id >> 32) != cfg_tgid)
		return NULL;
	count(TR_C_HITS);
	if (paused)
		return NULL;
	*tid = (__u32)id;
	struct tstate *t = bpf_map_lookup_elem(&threads, tid);
	if (t)
		return t;
	struct tstate fresh = { .countdown = variate() };
	bpf_map_update_elem(&threads, tid, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&threads, tid);
}

static __always_inline bool within_limit(void)
{
	if (cfg_limit == 0)
		return true;
	__u32 zero = 0;
	struct limit *l = bpf_map_lookup_elem(&limits, &zero);
	if (l == NULL)
		return false;
	__u64 now = bpf_ktime_get_ns();
	if (now - l->window >= 1000000000ull) {
		l->window = now;
		l->n = 0;
	}
	if (l->n >= cfg_limit) {
		count(TR_C_LIMITED);
		return false;
	}
	l->n++;
	return true;
}

/* The top of the stack at sp: TR_STACK_MAX bytes, or as much as is
 * mapped above sp (a read that crosses into an unmapped page fails whole,
 * so shorter reads ending on a page boundary are tried next). */
static __always_inline __u32 read_stack(__u8 *dst, __u64 sp)
{
	if (bpf_probe_read_user(dst, TR_STACK_MAX, (void *)sp) == 0)
		return TR_STACK_MAX;
	__u32 head = TR_PAGE - (__u32)(sp & (TR_PAGE - 1));
#pragma unroll
	for (int k = 3; k >= 0; k--) {
		__u32 len = head + (__u32)k * TR_PAGE;
		if (len > TR_STACK_MAX)
			continue;
		if (bpf_probe_read_user(dst, len, (void *)sp) == 0)
			return len;
	}
	return 0;
}

/* Write one sample: the registers at r (user registers) and the stack. */
static __always_inline void sample(const struct pt_regs *r, __u32 tid, __u64 size, __u64 addr)
{
	if (!within_limit())
		return;
	struct tr_sample *e = bpf_ringbuf_reserve(&ring, sizeof *e, 0);
	if (e == NULL) {
		count(TR_C_RINGFULL);
		return;
	}
	e->kind = TR_SAMPLE;
	e->tid = tid;
	e->size = size;
	e->addr = addr;
	e->regs.ip = r->ip;
	e->regs.sp = r->sp;
	e->regs.bp = r->bp;
	e->regs.bx = r->bx;
	e->regs.r12 = r->r12;
	e->regs.r13 = r->r13;
	e->regs.r14 = r->r14;
	e->regs.r15 = r->r15;
	e->regs.ax = r->ax;
	e->regs.cx = r->cx;
	e->regs.dx = r->dx;
	e->regs.si = r->si;
	e->regs.di = r->di;
	e->regs.r8 = r->r8;
	e->regs.r9 = r->r9;
	e->regs.r10 = r->r10;
	e->regs.r11 = r->r11;
	e->pad = 0;
	e->stack_len = read_stack(e->stack, r->sp);
	bpf_ringbuf_submit(e, 0);
	count(TR_C_SAMPLES);
}

static __always_inline void small(__u32 kind, __u32 tid, __u64 ptr, __u64 size)
{
	struct tr_small *e = bpf_ringbuf_reserve(&ring, sizeof *e, 0);
	if (e == NULL) {
		count(TR_C_RINGFULL);
		return;
	}
	e->kind = kind;
	e->tid = tid;
	e->ptr = ptr;
	e->size = size;
	bpf_ringbuf_submit(e, 0);
}

/* ---- --malloc ------------------------------------------------------------ */

/* A call of the process's thread t (from thread()) asking for size bytes. */
static __always_inline int on_alloc(struct pt_regs *ctx, struct tstate *t, __u32 tid, __u64 size, __u64 memptr)
{
	count(TR_C_CALLS);
	t->countdown -= (__s64)size;
	if (t->countdown > 0)
		return 0;
	t->countdown = variate();
	t->pending = 1;
	t->memptr = memptr;
	sample(ctx, tid, size, 0);
	return 0;
}

static __always_inline void on_free(__u32 tid, __u64 ptr)
{
	if (ptr == 0 || bpf_map_lookup_elem(&live, &ptr) == NULL)
		return;
	bpf_map_delete_elem(&live, &ptr);
	small(TR_FREE, tid, ptr, 0);
}

/* The entry programs' common start: the calling thread, or return.  (Its
 * unfinished if is more than clang-format 14 reads in a macro.) */
/* clang-format off */
#define THREAD_OR_RETURN(t, tid)                        \
	__u32 tid;                                      \
	struct tstate *t = thread(&tid);                \
	if (t == NULL)                                  \
		return 0
/* clang-format on */

SEC("uprobe")
int malloc_entry(struct pt_regs *ctx)
{
	THREAD_OR_RETURN(t, tid);
	return on_alloc(ctx, t, tid, ctx->di, 0);
}

SEC("uprobe")
int calloc_entry(struct pt_regs *ctx)
{
	THREAD_OR_RETURN(t, tid);
	__u64 n = ctx->di, m = ctx->si;
	if ((n >> 32 || m >> 32) && n && m)
		return 0; /* too big for this check; fails anyway */
	return on_alloc(ctx, t, tid, n * m, 0);
}

SEC("uprobe")
int memalign_entry(struct pt_regs *ctx) /* (alignment, size) */
{
	THREAD_OR_RETURN(t, tid);
	return on_alloc(ctx, t, tid, ctx->si, 0);
}

SEC("uprobe")
int posix_memalign_entry(struct pt_regs *ctx) /* (memptr, alignment, size) */
{
	THREAD_OR_RETURN(t, tid);
	return on_alloc(ctx, t, tid, ctx->dx, ctx->di);
}

SEC("uprobe")
int realloc_entry(struct pt_regs *ctx)
{
	THREAD_OR_RETURN(t, tid);
	on_free(tid, ctx->di);
	return ctx->si ? on_alloc(ctx, t, tid, ctx->si, 0) : 0;
}

SEC("uretprobe")
int alloc_ret(struct pt_regs *ctx)
{
	THREAD_OR_RETURN(t, tid);
	if (!t->pending)
		return 0;
	t->pending = 0;
	__u64 ptr = ctx->ax;
	if (t->memptr) {
		/* posix_memalign: 0 and the pointer in *memptr */
		__u64 p = 0;
		if (ptr != 0 || bpf_probe_read_user(&p, sizeof p, (void *)t->memptr) != 0)
			p = 0;
		ptr = p;
		t->memptr = 0;
	}
	if (ptr) {
		__u8 one = 1;
		if (bpf_map_update_elem(&live, &ptr, &one, BPF_ANY) != 0)
			count(TR_C_LIVEFULL);
	}
	small(TR_RET, tid, ptr, 0);
	return 0;
}

SEC("uprobe")
int free_entry(struct pt_regs *ctx)
{
	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != cfg_tgid)
		return 0;
	count(TR_C_HITS);
	if (paused)
		return 0;
	on_free((__u32)bpf_get_current_pid_tgid(), ctx->di);
	return 0;
}

/* ---- --faults ------------------------------------------------------------ */

static __always_inline int on_fault(unsigned long address, unsigned long error)
{
	/* bit 0 set: a protection fault on a present page, no new page */
	if (error & 1)
		return 0;
	if (address >= 0x800000000000ul) /* not a user address */
		return 0;
	THREAD_OR_RETURN(t, tid);
	__u32 zero = 0, *busy = bpf_map_lookup_elem(&sampling, &zero);
	if (busy == NULL || *busy) /* our own copy of a stack */
		return 0;
	count(TR_C_CALLS);
	t->countdown -= TR_PAGE;
	if (t->countdown > 0)
		return 0;
	t->countdown = variate();
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct pt_regs r;
	if (regs == NULL || bpf_probe_read_kernel(&r, sizeof r, regs) != 0)
		return 0;
	*busy = 1;
	sample(&r, tid, TR_PAGE, address);
	*busy = 0;
	return 0;
}

SEC("raw_tp/page_fault_user")
int fault_user(struct bpf_raw_tracepoint_args *ctx)
{
	return on_fault(ctx->args[TP_FAULT_ADDRESS], ctx->args[TP_FAULT_ERROR]);
}

/* The kernel touching user memory for the process (read(2) into a new
 * buffer, say): the user registers are those of the system call. */
SEC("raw_tp/page_fault_kernel")
int fault_kernel(struct bpf_raw_tracepoint_args *ctx)
{
	return on_fault(ctx->args[TP_FAULT_ADDRESS], ctx->args[TP_FAULT_ERROR]);
}
