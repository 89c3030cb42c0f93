/*
 * heapctl/trace/trace.h - what the BPF program (trace.bpf.c) and heapctl
 * trace (its loader, probes.c, and reader, events.c) share: the records in
 * the ring buffer, the counters and the sizes.  Fixed-size types only;
 * both sides are x86_64 or both arm64.
 */
#ifndef HC_TRACE_H
#define HC_TRACE_H

#define TR_STACK_MAX 16384u /* user stack bytes copied per sample     */
#define TR_VARIATES  4096u  /* exponential variates, a power of two   */
#define TR_PAGE      4096u

/* Record kinds: the first field of every record. */
enum {
	TR_SAMPLE = 1, /* a sampled allocation or fault: registers, stack   */
	TR_RET,        /* the sampled allocation returned this pointer       */
	TR_FREE,       /* a sampled pointer was freed (or realloc'd away)    */
};

/* The counters (a per-CPU array, summed by heapctl). */
enum {
	TR_C_CALLS,    /* probe or fault hits of the process                 */
	TR_C_SAMPLES,  /* samples written                                    */
	TR_C_RINGFULL, /* samples lost: the ring was full                    */
	TR_C_LIMITED,  /* samples dropped by the rate limit                  */
	TR_C_LIVEFULL, /* sampled pointers the live map had no room for      */
	TR_C_HITS,     /* every program run for the process: entries, returns
	                  and frees (--budget weighs their cost)             */
	TR_NCOUNTERS
};

/* A thread's state in the kernel (the `threads` map): heapctl clears
 * `pending` when it detaches the probes, so that a sampled call whose
 * return it will not see is not paired with a later one. */
struct tstate {
	__s64 countdown; /* bytes until the next sample                  */
	__u64 memptr;    /* posix_memalign's out pointer                 */
	__u32 pending;   /* a sampled call has not returned yet          */
	__u32 pad;
};

/* The user registers libunwind needs for the first frame, x86_64 names. */
struct tr_regs {
	__u64 ip, sp, bp, bx, r12, r13, r14, r15;
	__u64 ax, cx, dx, si, di, r8, r9, r10, r11;
};

struct tr_sample {
	__u32 kind; /* TR_SAMPLE                                  */
	__u32 tid;
	__u64 size; /* requested bytes, or the page size          */
	__u64 addr; /* the faulting address (faults), else 0      */
	struct tr_regs regs;
	__u32 stack_len; /* bytes of stack[] read from regs.sp         */
	__u32 pad;
	__u8 stack[TR_STACK_MAX];
};

struct tr_small {
	__u32 kind; /* TR_RET, TR_FREE                            */
	__u32 tid;
	__u64 ptr;
	__u64 size;
};

#endif
