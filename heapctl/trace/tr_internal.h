/*
 * heapctl/trace/tr_internal.h - what the files of `heapctl trace` share:
 * the run's state (T), the stack table's records, the allocator found in
 * the process, and each file's entry points.  Nothing here leaves
 * libheapctl-trace.so (hidden); hc_trace_main and hc_trace_help are its
 * only exports.
 *
 * Who calls whom (no file calls one that calls it back):
 *   trace.c    the run: checks, start, loop, summary; calls every other
 *   cycle.c    --malloc's duty cycle (budget.c decides)  -> probes.c
 *   probes.c   the BPF program: load, attach, detach     -> events.c
 *   events.c   the ring buffer's records                 -> unwind.c, stacks.c
 *   dump.c     heap_v2 dumps                             -> stacks.c, maps.c
 *   allocator.c  which functions to probe                -> maps.c
 *   unwind.c   libunwind's remote API                    -> maps.c
 *   maps.c     /proc/PID/maps, unwind tables, build ids  -> opts.c (T), elf/
 *   stacks.c   the stack table and the live objects
 *   opts.c     the options, and T
 */
#ifndef HC_TR_INTERNAL_H
#define HC_TR_INTERNAL_H

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <bpf/libbpf.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "cli/json.h"
#include "budget.h"
#include "trace.h"

#pragma GCC visibility push(hidden)

#define MAX_FRAMES 128
#define MAX_PROBES 32

enum { T_MALLOC = 256, T_FAULTS, T_LG, T_DURATION, T_PREFIX, T_INTERVAL, T_SYMBOLS, T_LIMIT, T_BUDGET };

typedef struct opts_s {
	int mode; /* T_MALLOC or T_FAULTS                       */
	int lg;
	double duration, interval;
	const char *prefix, *output, *symbols;
	uint64_t limit;
	double budget; /* % of one CPU; 0: no budget                 */
} opts_t;

/* The run: set up by trace.c, read by every file.  What one file alone
 * keeps (the stack table, the unwind tables, the dump numbers, the links)
 * is that file's own. */
typedef struct tr_state_s {
	opts_t o;
	int pid;
	double period;
	int memfd;  /* /proc/PID/mem                             */
	char *maps; /* the last copy of /proc/PID/maps           */
	size_t maps_len;
	uint64_t samples, unwound_short, frees;
	struct trace_bpf *skel;
	bool json;
	bool multi; /* the uprobes go on as uprobe_multi links     */
	tb_budget_t B;
	double scale; /* --malloc: weight multiplier of the samples
	                 of this window (budget.c)                   */
} tr_state_t;

extern tr_state_t T; /* opts.c */

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* --json: one object a line, written as the events always were (no
 * spaces; numbers in the formats below, which json_int would round). */
static inline void tr_json_event(json_t *j, const char *event)
{
	json_begin(j, stdout, JSON_COMPACT);
	json_obj(j, NULL);
	json_str(j, "event", event);
}

static inline void tr_json_num(json_t *j, const char *key, const char *fmt, double v)
{
	char b[64];
	snprintf(b, sizeof b, fmt, v);
	json_raw(j, key, b);
}

static inline void tr_json_hex(json_t *j, const char *key, uint64_t v)
{
	char b[24];
	snprintf(b, sizeof b, "0x%" PRIx64, v);
	json_str(j, key, b);
}

/* opts.c */
int tr_parse_opts(cli_args_t *a, opts_t *o);

/* stacks.c: each distinct stack once, with its weighted sums, and the
 * sampled objects still live (found again by pointer when freed). */
typedef struct stack_s {
	struct stack_s *next, *all_next;
	uint64_t hash;
	double w_curobjs, w_curbytes, w_accumobjs, w_accumbytes;
	unsigned n;
	uint64_t frames[];
} stack_t_;

stack_t_ *tr_stack_get(const uint64_t *f, unsigned n); /* NULL: out of memory */
stack_t_ *tr_stacks(void);                             /* every one, by all_next */
size_t tr_nstacks(void);
int tr_live_put(uint64_t ptr, stack_t_ *s, uint64_t size, double w);
bool tr_live_free(uint64_t ptr); /* false: not a sampled one */

/* maps.c: T.maps, and what is read from the objects it names. */
typedef struct eh_obj_s {
	uint64_t lo, hi;     /* the object's mappings                    */
	uint64_t hdr, table; /* .eh_frame_hdr and its search table       */
	uint64_t nfde;       /* 0: none usable                            */
	int32_t *made;       /* a table made here from .eh_frame, read
	                        by libunwind at the address `table`    */
} eh_obj_t;

/* Tables made here live at addresses no user mapping has; unwind.c's
 * acc_mem serves reads there from them (tr_eh_made_read). */
#define MADE_BASE 0xffff900000000000ull

void tr_read_maps(void);
void tr_put_maps(FILE *f);
size_t tr_mapped_objects(int pid, char (*out)[PATH_MAX], size_t max);
const eh_obj_t *tr_eh_object(uint64_t ip); /* the object holding ip, or NULL */
bool tr_eh_made_read(uint64_t addr, uint64_t *val);
void tr_maps_close(void);

/* unwind.c */
bool tr_unwind_open(void);
void tr_unwind_close(void);
unsigned tr_unwind(const struct tr_sample *s, uint64_t *f);

/* dump.c: kind 'f' (final) or 't' (--interval); 0 or an exit code. */
int tr_dump(char kind);

/* events.c: the ring buffer's callback. */
int tr_on_event(void *ctx, void *data, size_t len);
void tr_pend_drop(void); /* the samples whose returns will not be seen */

/* allocator.c: the allocator the process uses, and its functions. */
enum { R_MALLOC, R_CALLOC, R_REALLOC, R_FREE, R_MEMALIGN, R_POSIX, R_NROLES };

typedef struct probe_s {
	int role;
	char name[64];
	uint64_t off; /* in the file, where the uprobe goes          */
} probe_t;

typedef struct allocator_s {
	char path[PATH_MAX];      /* as the process names it                    */
	char open_path[PATH_MAX]; /* through /proc/PID/root                     */
	probe_t p[MAX_PROBES];
	unsigned n;
} allocator_t;

int tr_find_allocator(int pid, const char *symbols, allocator_t *al);

/* probes.c */
#define TR_MAX_LINKS (2 * MAX_PROBES + 2)
bool tr_has_caps(void);
int tr_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap);
const char *tr_why_load_failed(int err);
int tr_load(bool multi);
void tr_counters(uint64_t *c);
int tr_attach(const allocator_t *al, struct bpf_link **links, unsigned *nlinks);
void tr_detach(struct bpf_link **links, unsigned *nlinks);

/* cycle.c: --malloc's duty cycle in the run loop: windows with the probes
 * on, each measured, and off periods where the budget asks for them
 * (budget.c). */
typedef struct cycle_s {
	bool on;
	double t_next;        /* the next switch                            */
	double t0, user, sys; /* this window's or off period's start        */
	uint64_t hits;        /* TR_C_HITS then                             */
	double t_paused;      /* when the probes stopped observing          */
} cycle_t;

void tr_cycle_mark(cycle_t *cy, double t);
int tr_cycle_step(cycle_t *cy, const allocator_t *al, struct bpf_link **links, unsigned *nlinks, struct ring_buffer *rb,
    double now, bool *ended);

#pragma GCC visibility pop

#endif
