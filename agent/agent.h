/*
 * agent/agent.h - what the files of agent/ share: options, the profiler's
 * tables, unwinding and dumping.  Nothing outside agent/ includes this.
 *
 * Who does what, each file calling only files below it in this list, so
 * that no two files call each other:
 *   lifecycle.c  starts, forks and stops the agent (the allocator's hooks
 *                hc_agent_init/start/fork_*); calls the rest, none call it
 *   ctl.c        mallctl;  stats_print.c  malloc_stats_print (calls none)
 *   namespaces.c unshare and setns, around a pause of the control thread
 *   conf.c       MALLOC_CONF and HEAPCTL_CONF, into hc_opt
 *   prof.c       sampling: the countdown and each sample (the allocator's
 *                hc_agent_event/sample/resize/unsample/thread_exit)
 *   control.c    the control segment and its thread: heapctl's commands
 *   unwind.c, got.c  the stacks;  recent.c  prof_recent's ring
 *   settings.c   the settings by number (conf.c, ctl.c, control.c)
 *   explain.c    heapctl explain and purge
 *   dump.c       writing dumps, their triggers and the timer thread
 *   events.c     events for the segment's watchers (events.h): how dumps
 *                reach the control thread
 *   profile.c    the profile's tables, which dumps and commands read
 *   state.c      hc_opt, hc_prof, hc_prof_lock: the data every file reads
 *   log.c        hc_say and the agent threads' descriptors, which call nothing
 */
#ifndef HC_AGENT_H
#define HC_AGENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../allocator/hc_alloc.h"
#include "../allocator/hc_hooks.h"
#include "../allocator/hc_lock.h" /* what agent/ implements */
#include "../shm/heapctl_shm.h"

#define HC_EXPORT          __attribute__((visibility("default")))
#define HC_PREFIX_MAX      1024
#define HC_MAX_FRAMES      128
#define HC_THREAD_NAME_MAX 32

/* ---- options (state.c, read from the environment by conf.c) ------------ */

typedef enum { HC_UNWIND_FP, HC_UNWIND_LIBUNWIND, HC_UNWIND_LIBGCC } hc_unwinder_t;

/* The C type of each kind of setting (shm/hc_settings.def). */
#define HC_FIELD_HC_SET_BOOL(f)   bool f;
#define HC_FIELD_HC_SET_UINT(f)   unsigned f;
#define HC_FIELD_HC_SET_LG(f)     unsigned f;
#define HC_FIELD_HC_SET_SSIZE(f)  long f;
#define HC_FIELD_HC_SET_BYTES(f)  uint64_t f;
#define HC_FIELD_HC_SET_POW2(f)   int f; /* log2, -1 off */
#define HC_FIELD_HC_SET_STR(f)    char f[HC_PREFIX_MAX];
#define HC_FIELD_HC_SET_UNWIND(f) hc_unwinder_t f;
#define HC_FIELD_HC_SET_THP(f)    unsigned f; /* HC_THP_* (hc_alloc.h) */

/* Every setting as configured at start-up, by its option name. */
typedef struct hc_opts_s {
#define HC_OPTION(o, t, mn, mx, d, h)        HC_FIELD_##t(o)
#define HC_RUNTIME(o, t, mn, mx, d, n, f, h) HC_FIELD_##t(o)
#include "../shm/hc_settings.def"
#undef HC_OPTION
#undef HC_RUNTIME
} hc_opts_t;

extern hc_opts_t hc_opt;                             /* as configured at start-up */
void hc_conf_defaults(void);                         /* hc_opt = the list's defaults */
void hc_conf_source(const char *src, const char *s); /* inject: instead of the environment */
void hc_agent_reconfigure(void);                     /* lifecycle.c: defaults, then the given settings */
void hc_conf_init(void);                             /* then the environment's */

/* ---- settings, generic over the list (settings.c) ----------------------- */

/* Store a parsed value as setting i's start-up value (hc_opt). */
void hc_setting_configure(unsigned i, const hc_shm_value_t *v);
/* Setting i's start-up value. */
void hc_setting_option(unsigned i, hc_shm_value_t *v);
/* A run-time setting's current value; a string is copied into buf. */
void hc_setting_get(unsigned i, hc_shm_value_t *v, char *buf, size_t len);
/* Change a run-time setting: checks the range, stores, runs its hook.
 * Returns 0 or EINVAL. */
int hc_setting_set(unsigned i, const hc_shm_value_t *v);
/* The run-time settings take their start-up values. */
void hc_settings_start(void);

/* ---- logging, and a descriptor out of the way (log.c) -------------------- */

/* A descriptor the library keeps in the program's table is moved up to the
 * lowest free number from HC_FD_HIGH (close-on-exec), out of the way of a
 * program that counts on its next open() getting the lowest free number
 * (close(0); open("/dev/null")); where it cannot be (RLIMIT_NOFILE) it
 * stays.  -1 stays -1. */
#define HC_FD_HIGH 32 /* in the 64 slots every table has from the start */
int hc_fd_high(int fd);
/* The agent's own threads (the control thread, the timer thread) each
 * work in a descriptor table of their own: what they open and close at any
 * time never takes or closes a number the program's threads use or are
 * about to get (agent/control.c says more).  The calling thread leaves the
 * table it shares for an empty one (close_range with CLOSE_RANGE_UNSHARE:
 * nothing copied), gets a pidfd of the process at 0 (hc_stderr borrows
 * the program's standard error through it) and copies at 1 and 2, and sets
 * hc_fd_own.  False where the kernel (before 5.9) or a seccomp filter
 * refuses: it goes on in the table it has.  hc_fd_table_own_keeping
 * copies *keep, a descriptor of the shared table, into the new one at its
 * number if it is HC_FD_HIGH or above, and sets *keep to -1 if not. */
bool hc_fd_table_own(void);
bool hc_fd_table_own_keeping(int *keep);

/* Diagnostics on stderr with the <heapctl>: prefix, formatted without
 * allocating: each part is a string, NULL ends the list. */
void hc_say(const char *first, ...) __attribute__((sentinel));
/* Not an error: a choice the library made in place of a default.  Said
 * only with the option verbose, since every program that merely inherits
 * LD_PRELOAD (a shell in a preloaded container, podman exec) would print
 * it on its own stderr. */
#define hc_note(...)                         \
	do {                                 \
		if (hc_opt.verbose)          \
			hc_say(__VA_ARGS__); \
	} while (0)

/* ---- runtime state (state.c) ------------------------------------------- */

/* Settings that can change while the process runs, by their segment
 * field's name (read with atomics where they are used; see settings.c). */
typedef struct hc_prof_state_s {
#define HC_OPTION(o, t, mn, mx, d, h)
#define HC_RUNTIME(o, t, mn, mx, d, n, f, h) HC_FIELD_##t(f)
#include "../shm/hc_settings.def"
#undef HC_OPTION
#undef HC_RUNTIME
} hc_prof_state_t;
extern hc_prof_state_t hc_prof;
extern hc_mutex_t hc_prof_lock; /* tables and hc_prof.prefix */
/* The agent's own allocations are not sampled while it is set. */
extern __thread int hc_prof_busy __attribute__((tls_model("initial-exec")));
/* Bumped when the rate changes; each thread's draw remembers it (atomic). */
extern uint64_t hc_prof_rate_generation __attribute__((visibility("hidden"))); /* one load */
/* prof.active or prof.lg_sample changed: every thread draws a new countdown. */
void hc_prof_rate_changed(void);

/* ---- the profile's tables (profile.c) ------------------------------------ */

typedef struct hc_cnt_s {
	uint64_t curobjs, curbytes;     /* raw samples live            */
	uint64_t accumobjs, accumbytes; /* raw samples ever            */
	double w_curobjs, w_curbytes;   /* unbiased estimates          */
	double w_accumobjs, w_accumbytes;
} hc_cnt_t;

/*
 * A thread that has taken samples.  When it exits, its counts that hold
 * nothing (no live sample, nothing a dump still shows) are freed at once
 * and the rest as their last objects are freed, then the thread itself, as
 * jemalloc's tdata: the tables stay the size of what is live, however many
 * threads come and go.
 */
typedef struct hc_thread_s {
	struct hc_thread_s *next;
	struct hc_tctx_s *tctxs; /* this thread's counts        */
	uint64_t uid;
	int tid;     /* kernel thread id            */
	bool active; /* thread.prof.active          */
	bool exited;
	char name[HC_THREAD_NAME_MAX];
	hc_cnt_t sum; /* filled while dumping        */
} hc_thread_t;

typedef struct hc_stack_s hc_stack_t;

/* Counts of one stack in one thread. */
struct hc_sample_s;

typedef struct hc_tctx_s {
	struct hc_tctx_s *next, *prev;       /* in its stack's list         */
	struct hc_tctx_s *th_next, *th_prev; /* in its thread's list        */
	struct hc_sample_s *samples;         /* live records (for pending)  */
	hc_thread_t *thread;
	hc_stack_t *stack;
	hc_cnt_t cnt;
	hc_cnt_t peak; /* cnt at the last peak        */
} hc_tctx_t;

/* How long the sampled objects of one stack lived, counted at their free
 * (heapctl report --lifetime).  hist has four buckets per doubling of the
 * lifetime in nanoseconds (hc_life_bucket); the last takes everything
 * longer than 2^50 ns (13 days). */
#define HC_LIFE_BUCKETS 196
typedef struct hc_life_s {
	uint64_t epoch; /* the reset_epoch it counts in */
	uint64_t frees, lt_1ms, lt_1s, lt_1min;
	uint32_t hist[HC_LIFE_BUCKETS];
} hc_life_t;
unsigned hc_life_bucket(uint64_t ns);

struct hc_stack_s {
	hc_stack_t *next; /* hash chain                  */
	hc_stack_t *all_next;
	uint64_t hash;
	hc_tctx_t *tctxs;
	hc_life_t *life; /* NULL until a sampled free   */
	unsigned nframes;
	uintptr_t frames[];
};

/*
 * Kept with each sampled object.  usize is the size the counts include;
 * pending is what realloc has added or removed since, written without the
 * lock by the thread that owns the object and folded into the counts under
 * the lock once it passes usize/64 (or the charge grows, or the object is
 * freed).  Dumps add the pending bytes of live records, so they stay exact.
 */
typedef struct hc_sample_s {
	struct hc_sample_s *next, *prev; /* in tctx->samples            */
	hc_tctx_t *tctx;
	uint64_t usize;
	int64_t pending;  /* atomic                      */
	double weight;    /* 1 / P(sampled)              */
	uint64_t charged; /* bytes the countdown charged */
	uint64_t reset_epoch;
	uint64_t born_ns;           /* CLOCK_MONOTONIC at sampling */
	struct hc_recent_s *recent; /* its prof_recent entry, or NULL */
} hc_sample_t;

hc_stack_t *hc_prof_stacks(void); /* list of all, under hc_prof_lock */
void hc_prof_check(void);         /* the invariants, in debug builds */
hc_thread_t *hc_prof_threads(void);
void hc_prof_reset(int lg_sample); /* -1 keeps the rate */
void hc_prof_set_lg_sample(unsigned lg);
void hc_prof_snapshot_peak(void); /* under hc_prof_lock */
uint64_t hc_prof_samples_total(void);
void hc_prof_samples_restart(void); /* heapctl inject: from 0 again */
uint64_t hc_prof_reset_epoch(void); /* under hc_prof_lock */
/* What prof.c records a sample in, each under hc_prof_lock: */
hc_thread_t *hc_prof_thread_add(bool active, const char *name);
void hc_prof_thread_exit(hc_thread_t *th); /* takes the lock itself */
hc_stack_t *hc_prof_stack_get(const uintptr_t *frames, unsigned n);
/* rec's counts at s (made if new), or NULL: then rec is not the profile's */
hc_tctx_t *hc_prof_record_add(hc_stack_t *s, hc_thread_t *th, hc_sample_t *rec, size_t usize, double weight,
    size_t charged, uint64_t now);
void hc_prof_record_update(hc_sample_t *rec, uint64_t size, double w);
void hc_prof_record_remove(hc_sample_t *rec, uint64_t now);

/* ---- sampling (prof.c) --------------------------------------------------- */

bool hc_prof_thread_name_set(const char *name);
const char *hc_prof_thread_name_get(void);
bool hc_prof_thread_active_get(void);
void hc_prof_thread_active_set(bool on);
void hc_prof_fork_child(void); /* the thread's record's new tid */

/* ---- unwinding (unwind.c) ---------------------------------------------- */

unsigned hc_unwind(uintptr_t *frames, unsigned max); /* caller first */
/* got.c: a loaded object's JUMP_SLOT and GLOB_DAT slots.  An object's
 * hc_relro_t is its RELRO range and whether the loader is still relocating
 * it (its RELRO pages still writable: another thread's dlopen).
 * hc_got_relro_of fills it in from the object's dl_iterate_phdr entry, but
 * for busy, which hc_got_busy sets for n of them with one read of
 * /proc/self/maps; hc_got_relro does both for one object by its load bias
 * (dl_iterate_phdr must not be running in this thread).  hc_got_fn gets a
 * slot, its symbol's name and the object's RELRO range (for hc_got_store);
 * hc_got_each adds up what it returns, or calls nothing for a busy
 * object. */
struct dl_phdr_info;
typedef struct {
	uintptr_t base;   /* load bias                          */
	uintptr_t lo, hi; /* PT_GNU_RELRO's pages (none: lo == hi) */
	bool busy;
} hc_relro_t;
typedef unsigned (*hc_got_fn)(void **slot, const char *name, uintptr_t relro_lo, uintptr_t relro_hi, void *arg);
void hc_got_relro_of(const struct dl_phdr_info *info, hc_relro_t *r);
void hc_got_busy(hc_relro_t *r, unsigned n);
void hc_got_relro(hc_relro_t *r);
unsigned hc_got_each(const hc_relro_t *r, const void *dyn, hc_got_fn fn, void *arg);
bool hc_got_store(void **slot, void *v, uintptr_t relro_lo, uintptr_t relro_hi);

void hc_unwind_init(void);
void hc_unwind_fork_prepare(void), hc_unwind_fork_parent(void), hc_unwind_fork_child(void);

/* ---- dumps (dump.c) ---------------------------------------------------- */

typedef enum {
	HC_DUMP_FINAL = 'f',
	HC_DUMP_INTERVAL = 'i',
	HC_DUMP_MANUAL = 'm',
	HC_DUMP_GDUMP = 'u',
	HC_DUMP_TIMER = 't',
	HC_DUMP_THRESHOLD = 's',
	HC_DUMP_PEAK = 'p'
} hc_dump_kind_t;

/* Write a dump; path NULL makes the name from the prefix.  Returns 0 or an
 * errno value; the path written goes to out (may be NULL). */
int hc_dump(hc_dump_kind_t kind, const char *path, char *out, size_t outlen);
/* The same with a prefix for this dump only (NULL: prof.prefix), the pid
 * its name carries (0: ours; see make_name), and the size of the file
 * written (may be NULL): heapctl's requests (control.c), whose failure is
 * answered, not said on stderr as hc_dump's are. */
int hc_dump_ex(hc_dump_kind_t kind, const char *path, const char *prefix, int name_pid, char *out, size_t outlen,
    uint64_t *size);
void hc_dump_interval_account(uint64_t bytes);
void hc_dump_highwater(size_t mapped);
void hc_dump_at_exit(void); /* lifecycle.c: final dump, leak report */
void hc_dump_fork_prepare(void), hc_dump_fork_parent(void), hc_dump_fork_child(void);
void hc_dump_start_timer(void);
uint64_t hc_dumps_written(void);
/* heapctl inject: the count from 0 again (the names' numbers go on, so
 * that no file of the injection before is taken) */
void hc_dumps_restart(void);
/* The live bytes and objects the profile attributes now (unbiased
 * estimates, as a dump's t* line before jeprof's scaling), and the bytes
 * by which whole pages exceed the live sampled small objects on them
 * (what sampling itself costs the heap). */
#define HC_PROMOTED_BELOW ((uint64_t)16 << 10) /* the small classes' sizes */
void hc_dump_live(double *bytes, double *objs, uint64_t *promoted);

/* ---- experimental.prof_recent (recent.c) --------------------------------- */

typedef struct hc_recent_s hc_recent_t;
ssize_t hc_recent_max(void);
int hc_recent_set_max(ssize_t max); /* EINVAL below -1, ENOMEM */
/* rec was sampled at stack s by th / is being freed (s: the freeing
 * stack, NULL if unknown); under hc_prof_lock */
void hc_recent_alloc(hc_sample_t *rec, const hc_stack_t *s, const hc_thread_t *th, uint64_t now);
void hc_recent_free(hc_sample_t *rec, const hc_stack_t *s, const hc_thread_t *th, uint64_t now);
/* jemalloc's JSON through cb (NULL: standard error); 0 or an errno value */
int hc_recent_dump(void (*cb)(void *, const char *), void *opaque);

/* ---- heapctl explain and purge (explain.c) ------------------------------ */

void hc_explain_stats(const hc_shm_req_t *q, hc_shm_rep_t *rep);
void hc_explain_purge(hc_shm_rep_t *rep);

/* ---- mallctl (ctl.c) ----------------------------------------------------- */

void hc_ctl_fork_prepare(void), hc_ctl_fork_parent(void), hc_ctl_fork_child(void);

/* ---- the control segment (control.c) ------------------------------------ */

/* (Events for its watchers: events.h.) */
void hc_control_start(void); /* the segment and the thread */
void hc_control_exit(void);  /* the segment's goodbye */
void hc_control_fork_prepare(void), hc_control_fork_parent(void);
void hc_control_fork_child(void);
/* A process without the control thread it should have (control.c: one
 * that could not be started): each thread's countdown comes due every
 * HC_POLL_QUANTUM bytes meanwhile, and hc_agent_event polls. */
extern bool hc_control_poll_pending;
#define HC_POLL_QUANTUM ((int64_t)16 << 10)
void hc_control_poll(void);
bool hc_control_pause(void);
/* heapctl inject (agent/inject/shim.c): its eject and object scan, and the
 * segment and control thread made (again) with the profile counting from
 * since (CLOCK_REALTIME ns). */
void hc_inject_hooks(bool (*eject)(char *why, size_t len), unsigned (*scan)(bool force));
bool hc_control_begin(uint64_t since);
void hc_control_resume(bool was_running);

#endif
