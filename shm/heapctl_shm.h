/*
 * shm/heapctl_shm.h - the whole contract between a process running
 * libheapctl.so (the target) and the heapctl command (a client).
 *
 * The target creates one POSIX shared-memory segment, /dev/shm/heapctl.<pid>
 * (the pid as the target sees it), mode 0600, and maps it for its lifetime.
 * Where that name is held by a file the target did not make (a planted
 * file, a directory or FIFO, or the live segment of a process of another
 * PID namespace sharing /dev/shm), it takes heapctl.<pid>.<64 random bits>
 * instead; clients find the name in /proc/PID/maps, or by reading the
 * directory, and believe the header's pid and start time, never the name.
 * Clients map the same file read-write.  The layout is fixed, holds no
 * pointers, and is versioned: the first 16 bytes (magic, abi, size) mean the
 * same in every version, so a client can always tell a segment it does not
 * speak from a corrupt one.
 *
 *   header    identity, written once by the target, `ready` published last
 *   state     configuration and counters, one writer (the control thread),
 *             read through a seqlock
 *   mailbox   HC_SHM_SLOTS command slots; clients claim one with a CAS,
 *             post a request, ring the doorbell (a futex the control thread
 *             waits on) and wait on the slot's state (a futex) for the reply
 *   ring      HC_SHM_EVENTS events with sequence numbers, written by any
 *             thread of the target, read by any number of watchers
 *
 * Nothing in the segment is trusted by the side that did not write it: the
 * target copies a request out of its slot before checking it, and never
 * waits for a client; a client checks magic, abi, size, pid and start time
 * before it believes a byte, and bounds every wait.  No lock is ever held
 * across the two processes; everything is atomics and futexes with timeouts.
 *
 * Both sides link the functions declared at the end (shm/shm.c).  They
 * neither allocate nor use stdio, so the target may call them anywhere.
 */
#ifndef HEAPCTL_SHM_H
#define HEAPCTL_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HC_SHM_MAGIC    0x314c544350414548ull /* "HEAPCTL1" little-endian */
#define HC_SHM_ABI      1u
#define HC_SHM_DIR      "/dev/shm"
#define HC_SHM_BASENAME "heapctl." /* + decimal pid */
/* A dump heapctl has a process write where heapctl can read it (its
 * /dev/shm, or a directory heapctl makes in a chroot), then copies out and
 * removes, is named with this prefix: transient, never a process's last
 * dump, never archived. */
#define HC_SHM_STAGE_BASE "heapctl-fetch."
static inline bool hc_shm_staged_path(const char *path)
{
	const char *base = __builtin_strrchr(path, '/');
	return __builtin_strncmp(base ? base + 1 : path, HC_SHM_STAGE_BASE, sizeof HC_SHM_STAGE_BASE - 1) == 0;
}
#define HC_SHM_SLOTS     8
#define HC_SHM_EVENTS    128                    /* a power of two */
#define HC_SHM_PATH_MAX  1280                   /* paths, prefixes, messages */
#define HC_SHM_NAME_MAX  48                     /* setting names */
#define HC_SHM_VALUE_MAX HC_SHM_PATH_MAX        /* setting values */
#define HC_SHM_LEASE_NS  (2ull * 1000000000ull) /* a slot left by a dead client */

/* ---- header ------------------------------------------------------------- */

typedef struct hc_shm_header_s {
	uint64_t magic; /* HC_SHM_MAGIC                               */
	uint32_t abi;   /* HC_SHM_ABI                                 */
	uint32_t size;  /* sizeof(hc_shm_t)                           */
	/* from here on, meanings belong to abi 1 */
	int32_t pid;              /* getpid() in the target's PID namespace    */
	uint32_t uid;             /* the target's real uid                      */
	uint64_t start_time;      /* field 22 of /proc/self/stat (clock ticks)  */
	uint64_t pidns;           /* inode of /proc/self/ns/pid                 */
	uint64_t created_ns;      /* CLOCK_REALTIME when the segment was made   */
	char version[16];         /* library version, NUL-terminated            */
	char comm[64];            /* argv[0] of the target, NUL-terminated      */
	uint32_t control;         /* 1 while a control thread serves the box   */
	uint32_t ready;           /* 1 when everything above is written; last  */
	uint64_t counts_since_ns; /* heapctl inject: CLOCK_REALTIME from which
	                             the profile counts (0: from the start);
	                             written before ready                     */
	int32_t control_err;      /* control 0: the errno of the control
	                             thread's pthread_create (EAGAIN: a thread
	                             limit such as RLIMIT_NPROC), 0 if none was
	                             tried (control:false, an eject)          */
	uint8_t pad[44];
} hc_shm_header_t;

/* ---- state: configuration and counters, behind a seqlock ---------------- */

typedef struct hc_shm_state_s {
	uint32_t seq; /* odd while the control thread writes        */
	uint32_t pad0;
	uint64_t updated_ns; /* CLOCK_REALTIME of this snapshot            */
	/* configuration (prof.* as the mallctl names report it), prof to prefix
	 * in one run: the target copies it as a block */
	uint8_t prof;   /* opt.prof: profiling possible at all        */
	uint8_t active; /* prof.active                                */
	uint8_t gdump;  /* prof.gdump                                 */
	uint8_t peak;   /* prof.peak                                  */
	uint8_t thread_active_init;
	uint8_t pad1[3];
	uint32_t lg_sample;    /* prof.lg_sample                             */
	int32_t lg_interval;   /* log2 of prof.interval, -1 off              */
	uint32_t timer_s;      /* prof.timer_s, 0 off                        */
	uint32_t gdump_pct;    /* prof.gdump_pct                             */
	uint32_t gdump_min_ms; /* prof.gdump_min_ms                          */
	uint32_t pad2;
	uint64_t threshold;           /* prof.threshold bytes, 0 off                */
	char unwind[16];              /* prof.unwind                                */
	char prefix[HC_SHM_PATH_MAX]; /* prof.prefix; last of the settings     */
	/* counters (stats.* with jemalloc's meanings) */
	uint64_t allocated, active_bytes, metadata, resident, mapped, retained;
	uint64_t highwater; /* highest stats.mapped so far                */
	uint64_t samples;   /* sampled allocations ever                   */
	uint64_t dumps;     /* profiles written                           */
	uint64_t threads;   /* thread heaps in use                        */
	uint64_t commands;  /* commands executed                          */
	char last_dump[HC_SHM_PATH_MAX];
} hc_shm_state_t;

/* ---- mailbox ------------------------------------------------------------ */

/* Slot states; the word is also the futex clients wait on. */
enum {
	HC_SLOT_FREE = 0,    /* anyone may claim it (CAS to CLAIMED)       */
	HC_SLOT_CLAIMED = 1, /* a client is writing its request            */
	HC_SLOT_POSTED = 2,  /* waiting for the control thread             */
	HC_SLOT_BUSY = 3,    /* the control thread is executing it         */
	HC_SLOT_DONE = 4,    /* reply written; the client frees the slot   */
};

typedef enum {
	HC_CMD_PING = 1,  /* no-op: answers, refreshes the state        */
	HC_CMD_SET = 2,   /* name=value                                 */
	HC_CMD_DUMP = 3,  /* arg: 1 peak; text: prefix; text2: file;
	                     name: the pid (decimal) the client knows
	                     the target by, for a name made from the
	                     prefix (a client of another PID namespace;
	                     libraries before it ignore the field)   */
	HC_CMD_RESET = 4, /* arg: lg_sample or -1                       */
	HC_CMD_EJECT = 5, /* heapctl eject: an injected agent puts the
	                     process's malloc back; the segment goes  */
	HC_CMD_STATS = 6, /* arg: first record; see hc_shm_stat_t     */
	HC_CMD_PURGE = 7, /* return free pages to the OS now; value:
	                     bytes the allocator counted dirty before */
} hc_shm_cmd_t;

/* Reply codes. */
typedef enum {
	HC_REP_OK = 0,
	HC_REP_BADREQ = 1,  /* malformed request (bad command, no NUL)   */
	HC_REP_INVALID = 2, /* unknown setting or bad value; text says   */
	HC_REP_FAILED = 3,  /* the operation failed; text is the reason  */
	HC_REP_NOPROF = 4,  /* nothing to dump (only sent by libraries
	                       before 0.1.0; a dump is always written,
	                       with no samples if there are none, as
	                       jemalloc's prof.dump)                     */
} hc_shm_rep_code_t;

typedef struct hc_shm_req_s {
	uint32_t cmd; /* hc_shm_cmd_t                               */
	int32_t arg;
	char name[HC_SHM_NAME_MAX];
	char text[HC_SHM_PATH_MAX];
	char text2[HC_SHM_PATH_MAX];
} hc_shm_req_t;

typedef struct hc_shm_rep_s {
	uint32_t code; /* hc_shm_rep_code_t                          */
	uint32_t pad;
	uint64_t value;             /* DUMP: bytes written; failed: the errno     */
	char text[HC_SHM_PATH_MAX]; /* DUMP: the path; errors: the reason      */
} hc_shm_rep_t;

/*
 * HC_CMD_STATS (heapctl explain): the reply's text holds records
 * [arg, arg + k) of a snapshot the target takes when arg is 0 and keeps
 * for the requests that follow; value is the snapshot's record count.
 * k = min(HC_SHM_STATS_PER_REPLY, count - arg).
 */
typedef enum {
	HC_STAT_TOTAL = 1, /* v: allocated, active, metadata, dirty,
	                      retained, and whose figures: 0 heapctl's
	                      allocator, 1 the process's own malloc
	                      (heapctl inject) by glibc's mallinfo2,
	                      2 by jemalloc's mallctl               */
	HC_STAT_PROF = 2,  /* v: live bytes and objects the profile
	                      attributes (unbiased estimates), samples
	                      ever, lg_sample, bytes of the pages of
	                      sampled small objects beyond their sizes */
	HC_STAT_SMALL = 3, /* size: block size; v: pages, carved blocks,
	                      live blocks, active bytes, sparse pages
	                      (at most a quarter live), their live
	                      blocks, their active bytes               */
	HC_STAT_LARGE = 4, /* v: allocated bytes of 16 KiB .. 8 MiB     */
	HC_STAT_HUGE = 5,  /* v: allocated bytes, objects               */
	HC_STAT_RANGE = 6, /* v: start, end of a mapping the allocator
	                      made; 0 chunks, 1 a huge object, 2
	                      metadata                                 */
} hc_shm_stat_kind_t;

typedef struct hc_shm_stat_s {
	uint32_t kind; /* hc_shm_stat_kind_t                         */
	uint32_t size;
	uint64_t v[7];
} hc_shm_stat_t;
#define HC_SHM_STATS_PER_REPLY (HC_SHM_PATH_MAX / sizeof(hc_shm_stat_t))

/*
 * A slot's life: FREE -> CLAIMED (client) -> POSTED (client) -> BUSY
 * (control thread) -> DONE (control thread) -> FREE (client).  state and gen
 * are one 64-bit word (state the low half, little-endian): a client claims
 * with one CAS of the word, {FREE, g} -> {CLAIMED, g + 1}, and posts, takes
 * the reply and gives up with CASes that name its gen, so a client whose
 * slot was reclaimed learns it and never overwrites its successor.
 *
 * The control thread frees a slot a client claimed or was answered in and
 * then left (a client that died) only after it has itself watched the same
 * {state, gen} for HC_SHM_LEASE_NS by its own clock.  It never believes
 * stamp_ns for this: a client writes that only after its claim succeeded,
 * so in between the slot carries the previous owner's stamp, and a reclaim
 * judged by it would free a slot that had just been claimed (two clients
 * in one slot, and a lost command).
 */
typedef struct hc_shm_slot_s {
	uint32_t state;     /* futex, HC_SLOT_*; low half of the word     */
	uint32_t gen;       /* bumped by each claim; high half            */
	uint64_t stamp_ns;  /* CLOCK_MONOTONIC of the claim / the reply
	                       (diagnostics only, never trusted)          */
	int32_t client_pid; /* for diagnostics only                       */
	uint32_t pad;
	hc_shm_req_t req;
	hc_shm_rep_t rep;
} hc_shm_slot_t;

typedef struct hc_shm_mailbox_s {
	uint32_t doorbell; /* futex: bumped by clients after posting    */
	uint32_t pad;
	hc_shm_slot_t slot[HC_SHM_SLOTS];
} hc_shm_mailbox_t;

/* ---- events ------------------------------------------------------------- */

typedef enum {
	HC_EV_GDUMP = 1,       /* new high-water: value = the mark (what
	                          state.highwater then holds), value2 = the
	                          previous event's mark; path if dumped    */
	HC_EV_DUMP = 2,        /* a profile written: kind, path, value=size */
	HC_EV_DUMP_FAILED = 3, /* kind, path, text = reason                 */
	HC_EV_CONFIG = 4,      /* name, text = new value                    */
	HC_EV_EXIT = 5,        /* the target is exiting                     */
	HC_EV_START = 6,       /* segment created (value = parent pid after
	                          fork, else 0)                              */
} hc_shm_ev_type_t;

typedef struct hc_shm_event_s {
	uint64_t seq;     /* n + 1 when event n is complete; 0 writing  */
	uint64_t time_ns; /* CLOCK_REALTIME                             */
	uint32_t type;    /* hc_shm_ev_type_t                           */
	uint32_t kind;    /* dump kind letter: f i m u t s p            */
	uint64_t value, value2;
	char name[HC_SHM_NAME_MAX];
	char path[HC_SHM_PATH_MAX];
	char text[128];
} hc_shm_event_t;

typedef struct hc_shm_ring_s {
	uint64_t head;  /* events ever published (next number)        */
	uint32_t futex; /* bumped after each event; watchers wait    */
	uint32_t pad;
	hc_shm_event_t ev[HC_SHM_EVENTS];
} hc_shm_ring_t;

/* ---- the segment ---------------------------------------------------------- */

typedef struct hc_shm_s {
	hc_shm_header_t hdr;
	hc_shm_state_t state __attribute__((aligned(64)));
	hc_shm_mailbox_t box __attribute__((aligned(64)));
	hc_shm_ring_t ring __attribute__((aligned(64)));
} hc_shm_t;

/* ---- settings: shm/hc_settings.def, shared by both sides ------------------ */

typedef enum {
	HC_SET_BOOL,   /* true/false                                 */
	HC_SET_UINT,   /* unsigned, in [min, max]                    */
	HC_SET_LG,     /* unsigned log2, in [min, max]; mallctl size_t */
	HC_SET_SSIZE,  /* signed, in [min, max]; mallctl ssize_t     */
	HC_SET_BYTES,  /* a byte count, suffixes K M G T             */
	HC_SET_POW2,   /* configured as log2 (-1 off), set at run time
	                  as bytes (a power of two, 0 off)           */
	HC_SET_STR,    /* min to max bytes                           */
	HC_SET_UNWIND, /* fp, libunwind or libgcc                    */
	HC_SET_THP,    /* default, always or never                   */
} hc_set_type_t;

typedef struct hc_shm_setting_s {
	const char *name;   /* run-time name, e.g. "prof.lg_sample"; NULL
	                       for a start-up option                      */
	const char *option; /* MALLOC_CONF name, e.g. "lg_prof_sample"    */
	hc_set_type_t type;
	int64_t min, max; /* integers; STR: length                      */
	const char *def;  /* the default, as configuration text         */
	const char *help;
	uint32_t shm_offset; /* of its field in hc_shm_state_t (run-time)  */
	uint32_t shm_size;
} hc_shm_setting_t;

typedef struct hc_shm_value_s {
	bool b;
	uint64_t u;    /* UINT, LG, BYTES; POW2: the log2, or
	                  UINT64_MAX for off                         */
	int64_t i;     /* SSIZE                                      */
	const char *s; /* STR, UNWIND, THP: points into the parsed text,
	                  or into the segment                        */
} hc_shm_value_t;

/* Every setting, in the order of the list: HC_SETTING_<option> indexes it. */
enum {
#define HC_OPTION(o, t, mn, mx, d, h)        HC_SETTING_##o,
#define HC_RUNTIME(o, t, mn, mx, d, n, f, h) HC_SETTING_##o,
#include "hc_settings.def"
#undef HC_OPTION
#undef HC_RUNTIME
	HC_NSETTINGS
};

extern const hc_shm_setting_t hc_shm_settings[HC_NSETTINGS];
extern const unsigned hc_shm_nsettings;

/* A word type's (UNWIND, THP) values, NULL-terminated, in the order of
 * their numbers; NULL for other types. */
const char *const *hc_shm_words(hc_set_type_t t);
/* The number of word w of type t, or -1. */
int hc_shm_word_index(hc_set_type_t t, const char *w);

/* The run-time setting called name, or NULL. */
const hc_shm_setting_t *hc_shm_setting_find(const char *name);
/* The setting whose option name is the len bytes at option, or NULL. */
const hc_shm_setting_t *hc_shm_option_find(const char *option, size_t len);
/* Parse value for setting s as `heapctl set` and the segment take it.
 * Returns true if valid; otherwise writes a one-line reason (without the
 * name) to err. */
bool hc_shm_setting_parse(const hc_shm_setting_t *s, const char *value, hc_shm_value_t *out, char *err, size_t errlen);
/* The same as configuration text (jemalloc's syntax: booleans are true or
 * false, POW2 is the log2); the reason begins "expected". */
bool hc_shm_option_parse(const hc_shm_setting_t *s, const char *value, hc_shm_value_t *out, char *err, size_t errlen);
/* Whether v is in the range of s; otherwise the reason, as the parser's. */
bool hc_shm_setting_check(const hc_shm_setting_t *s, const hc_shm_value_t *v, char *err, size_t errlen);
/* A run-time setting's value in a state snapshot, and its writing. */
void hc_shm_setting_get(const hc_shm_setting_t *s, const struct hc_shm_state_s *st, hc_shm_value_t *out);
void hc_shm_setting_put(const hc_shm_setting_t *s, struct hc_shm_state_s *st, const hc_shm_value_t *v);
/* The value as `heapctl set` takes it back (POW2 as bytes, 0 off). */
void hc_shm_setting_text(const hc_shm_setting_t *s, const hc_shm_value_t *v, char *buf, size_t len);

/* ---- the library both sides use ----------------------------------------- */

/* "/dev/shm/heapctl.<pid>" (or below root, e.g. "/proc/123/root"). */
void hc_shm_path(char *buf, size_t len, const char *root, int pid);

/* Seqlock on state: the single writer brackets its writes; readers copy. */
void hc_shm_state_write_begin(hc_shm_state_t *st);
void hc_shm_state_write_end(hc_shm_state_t *st);
/* Copies a consistent snapshot; false if none could be had (a writer that
 * never finishes, or garbage in seq). */
bool hc_shm_state_read(const hc_shm_state_t *st, hc_shm_state_t *out);

/* Publish an event (the caller serialises publishers). */
void hc_shm_event_publish(hc_shm_ring_t *r, const hc_shm_event_t *ev);
/* A byte count: 4096, 512K, 1G, 1GiB, 64MB (binary multiples); false if
 * it is not one or does not fit. */
bool hc_shm_parse_bytes(const char *s, uint64_t *out);

/* Read event number n.  Returns 1 and copies it if it is there, 0 if not
 * yet published, -1 if it has been overwritten (missed). */
int hc_shm_event_read(const hc_shm_ring_t *r, uint64_t n, hc_shm_event_t *out);

/* Field 22 of /proc/PID/stat (clock ticks since boot), 0 if unreadable;
 * *ended tells whether the process has exited (a zombie still has one). */
uint64_t hc_shm_proc_start_time(int pid, bool *ended);
/* The same from a stat file named relative to dfd (a /proc/PID directory
 * opened before a chroot). */
uint64_t hc_shm_proc_start_time_at(int dfd, const char *path, bool *ended);
/* The inode of /proc/self/ns/pid, 0 if unknown. */
uint64_t hc_shm_pidns(void);
/* Remove segments in /dev/shm left by processes of our PID namespace that
 * are gone (bounded); returns how many were removed.  With reused, also
 * those whose pid a later process has (which costs a look at each live
 * process's segment and /proc/PID/stat), and, from the initial PID
 * namespace, those of other namespaces (containers sharing /dev/shm) whose
 * namespace no process has any more (hdr.pidns; a look at every
 * /proc/PID/ns/pid, as root or the segment's user where all are readable);
 * without, only those whose pid no process has.  Either way also our own
 * user's staged dumps (HC_SHM_STAGE_BASE) unwritten for a minute, which
 * are not counted. */
int hc_shm_clean_stale(bool reused);
/* The pid in a segment's name, "heapctl.<pid>" or, where that name was
 * taken by something else, "heapctl.<pid>.<16 hex digits>"; -1 otherwise. */
int hc_shm_name_pid(const char *name);
/* Read the header of file name in directory dfd: opened with O_NOFOLLOW
 * and O_NONBLOCK, regular files only (else EPROTOTYPE).  0 or an errno. */
struct stat;
int hc_shm_header_at(int dfd, const char *name, hc_shm_header_t *h, struct stat *st);
/* Whether hc_shm_header_at's answer (err, h, st) is a file of our own user
 * whose header was never finished (empty or short, or zeros or our magic
 * with ready still 0), unchanged for over age_s seconds: its creator was
 * killed between creating the file and publishing it (that takes a live
 * process microseconds).  Another user's file is never one. */
bool hc_shm_unfinished_own(int err, const hc_shm_header_t *h, const struct stat *st, int age_s);

/* A slot's {state, gen} word (see hc_shm_slot_t). */
#define HC_SLOT_WORD(state, gen) ((uint64_t)(state) | (uint64_t)(gen) << 32)
uint64_t hc_shm_slot_load(hc_shm_slot_t *sl);
/* Replace the word if it is {state, gen}; true if it was. */
bool hc_shm_slot_cas(hc_shm_slot_t *sl, uint32_t state, uint32_t gen, uint32_t nstate, uint32_t ngen);

/* Futexes in shared memory (not process-private). */
int hc_shm_futex_wait(uint32_t *addr, uint32_t val, uint64_t timeout_ns);
void hc_shm_futex_wake(uint32_t *addr, int n);

uint64_t hc_shm_now_ns(void);  /* CLOCK_REALTIME */
uint64_t hc_shm_mono_ns(void); /* CLOCK_MONOTONIC */

/* The hash of a stack's frames, for the tables that keep each distinct
 * stack once: the agent's profile and `heapctl trace`'s stacks. */
static inline uint64_t hc_shm_hash_frames(const uint64_t *f, unsigned n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	for (unsigned i = 0; i < n; i++) {
		h ^= f[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

/* A small file (of /proc, or any) into buf, NUL-terminated, at most len - 1
 * bytes, without following a symlink or blocking on a FIFO: the bytes
 * read, or -1 with errno.  No allocation: the agent uses it too. */
ssize_t hc_shm_read_file(const char *path, char *buf, size_t len);
ssize_t hc_shm_read_file_at(int dfd, const char *path, char *buf, size_t len); /* openat's dfd */

/* Copy a string into a fixed field, truncating, always NUL-terminated. */
void hc_shm_strlcpy(char *dst, const char *src, size_t len);
/* true if a fixed field holds a NUL within len bytes */
bool hc_shm_strvalid(const char *s, size_t len);

const char *hc_shm_event_name(uint32_t type);     /* "gdump", "dump", ... or NULL */
const char *hc_shm_dump_kind_name(uint32_t kind); /* "manual", ... or NULL */

/* ---- the client side (shm/client.c; heapctl links it, the library not) ---- */

/* heapctl's exit codes; the client functions return them too. */
enum {
	HC_EXIT_OK = 0,
	HC_EXIT_FAILED = 1,  /* the target tried and failed (its reason)   */
	HC_EXIT_USAGE = 2,   /* bad command, option, setting or value      */
	HC_EXIT_NOPROC = 3,  /* no such process (or it exited meanwhile)   */
	HC_EXIT_NOLIB = 4,   /* the process does not run libheapctl.so     */
	HC_EXIT_PERM = 5,    /* permission denied                          */
	HC_EXIT_ABI = 6,     /* another segment ABI, or a corrupt segment  */
	HC_EXIT_TIMEOUT = 7, /* the target did not answer in time          */
	HC_EXIT_PICK = 8,    /* no PID given and not exactly one candidate */
};

/* heapctl inject's agent keeps this in its own writable data: after
 * heapctl eject no segment says that it is there, or since when it is
 * inert, and heapctl doctor finds it by its magic in the agent's writable
 * mapping (reading the process's memory, as ptrace allows). */
#define HC_INJECT_MARK_MAGIC "heapctl-inj-mark" /* 16 bytes, no NUL */
typedef struct hc_inject_mark_s {
	char magic[16];
	uint64_t armed;      /* 1 while the agent is armed                 */
	uint64_t ejected_ns; /* CLOCK_REALTIME of the last eject; 0: none  */
} hc_inject_mark_t;

typedef struct hc_shm_target_s {
	int pid;             /* as heapctl sees it                         */
	int nspid;           /* as the target sees itself                  */
	unsigned uid;        /* the process's real uid                     */
	unsigned euid;       /* and its effective uid (a set-user-ID one)  */
	uint64_t start_time; /* from /proc/PID/stat                        */
	char path[320];      /* the segment file opened                    */
	hc_shm_t *seg;
} hc_shm_target_t;

/* Find, open, map and check the segment of process pid.  Returns an
 * HC_EXIT_* code; on failure err holds a one-line reason. */
/* The root under which process pid's files are: /proc/PID/root, or that
 * of the nearest ancestor in its mount namespace when pid chrooted after
 * its fork (its root has no /dev/shm); -1 if neither has one. */
int hc_shm_proc_root(int pid, char *out, size_t len);
int hc_shm_open(int pid, hc_shm_target_t *t, char *err, size_t errlen);
void hc_shm_close(hc_shm_target_t *t);
/* true while the process that made the segment is still running */
bool hc_shm_alive(const hc_shm_target_t *t);
/* Post a request and wait for the reply, at most timeout_ns.  Returns an
 * HC_EXIT_* code for the transport (the reply's own code is in rep). */
int hc_shm_call(hc_shm_target_t *t, const hc_shm_req_t *req, hc_shm_rep_t *rep, uint64_t timeout_ns, char *err,
    size_t errlen);
/* PIDs (as heapctl sees them) of processes that appear to have a segment;
 * returns how many were stored (at most max), or -1. */
int hc_shm_scan(int *pids, int max);


#endif
