/*
 * allocator/hc_alloc.h - the one interface allocator/ offers to agent/.
 *
 * agent/ (configuration, profiling, mallctl) sees the allocator only through
 * these functions; it never reaches into chunks, pages or heaps.  The other
 * direction is hc_hooks.h.
 */
#ifndef HC_ALLOC_H
#define HC_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HC_VERSION "0.1.0"

#ifndef HC_DEBUG
#define HC_DEBUG 0
#endif
/* The library's messages go to the program's standard error, its
 * descriptor 2: all of it (a line is written whole, errno is kept).  The
 * control thread works in a descriptor table of its own (agent/control.c),
 * in which hc_fd_own is set and descriptor 0 is a pidfd of the process:
 * from there the program's descriptor 2 is borrowed for the write
 * (pidfd_getfd), or opened again through /proc/self/fd/2 under a seccomp
 * filter, which may kill pidfd_getfd (systemd's @system-service lacks it);
 * that reaches a file, a pipe or a terminal, not a socket. */
void hc_stderr(const void *buf, size_t len);
extern __thread bool hc_fd_own __attribute__((tls_model("initial-exec")));

/* An invariant, checked in debug builds (make DEBUG=1; make check runs the
 * suites on one): a failure writes the condition and where, and aborts. */
__attribute__((noreturn, cold)) void hc_assert_fail(const char *cond, const char *file, int line);
#define HC_ASSERT(c)                                            \
	do {                                                    \
		if (HC_DEBUG && !(c))                           \
			hc_assert_fail(#c, __FILE__, __LINE__); \
	} while (0)

/* Allocator statistics with jemalloc's meanings (see libheapctl(3), man/libheapctl.3). */
typedef struct hc_stats_s {
	size_t allocated; /* bytes in live objects, by usable size             */
	size_t active;    /* bytes of pages backing live objects               */
	size_t metadata;  /* bytes of allocator (and profiler) bookkeeping     */
	size_t resident;  /* bytes of the allocator's mappings in physical RAM */
	size_t mapped;    /* bytes of chunks and huge mappings in use          */
	size_t retained;  /* bytes of address space kept for reuse, purged     */
	size_t dirty;     /* bytes free but not yet returned to the OS         */
	/* breakdown */
	size_t small_allocated, large_allocated, huge_allocated;
	size_t nchunks_small, nchunks_large, nchunks_cached, nhuge, nhuge_cached;
	size_t nheaps, narenas;
} hc_stats_t;

/* Initialise the allocator and the agent if nothing has yet (idempotent). */
void hc_init(void);

/* Recompute all statistics (walks every chunk; called on "epoch" writes). */
void hc_stats_refresh(hc_stats_t *st);

#define HC_NCLASSES_MAX 40 /* at least the small classes' count */

/* Whose allocator agent/ is over: this one, or (heapctl inject) the
 * process's own, whose statistics come from glibc's mallinfo2 or from
 * jemalloc's mallctl. */
enum { HC_ALLOC_HEAPCTL = 0, HC_ALLOC_PROCESS = 1, HC_ALLOC_PROCESS_JEMALLOC = 2 };
unsigned hc_alloc_kind(void);

/* One small size class's pages (heapctl explain's fragmentation table).
 * A page is sparse when at most a quarter of its carved blocks are live:
 * the few live blocks keep the whole page resident. */
typedef struct hc_class_stats_s {
	size_t size;   /* block size                                        */
	size_t pages;  /* 64 KiB pages of the class in use                  */
	size_t carved; /* blocks carved from them                           */
	size_t used;   /* of which live                                     */
	size_t active; /* bytes of OS pages they span                       */
	size_t sparse_pages, sparse_used, sparse_active;
} hc_class_stats_t;

/* Fill out[0 .. n) for the small classes (n at most the class count);
 * returns how many were filled.  Racy reads: a statistic, not a count. */
unsigned hc_class_stats(hc_class_stats_t *out, unsigned n);

/* The address ranges the allocator has mapped (chunks, cached ones
 * included, huge mappings, metadata), adjacent chunks merged: calls fn for
 * each, in no particular order, until it returns false. */
enum { HC_RANGE_CHUNKS = 0, HC_RANGE_HUGE = 1, HC_RANGE_META = 2 };
void hc_alloc_ranges(bool (*fn)(void *arg, uintptr_t start, uintptr_t end, unsigned kind), void *arg);

/* Bytes the profiler's own structures use, added to stats.metadata. */
void hc_stats_add_metadata(intptr_t delta);

/* Return dirty memory of every arena and the caches to the OS now. */
void hc_purge_all(void);

/* The decay of what no thread's own heap holds (the shared heaps, the
 * abandoned chunks, the chunk cache, the large arenas, the cached huge
 * mappings), and of the calling thread's heap, for a thread that runs
 * while the program's threads may all be idle (the agent's control
 * thread).  It skips a shared heap whose lock is taken, and holds none of
 * their locks for the rest (which tries its locks, but for the chunk
 * cache's, held briefly by whoever puts a chunk there). */
void hc_alloc_idle_decay(void);

/* Give the blocks the calling thread keeps in its cache back to their
 * pages (thread.tcache.flush). */
void hc_thread_cache_flush(void);

size_t hc_usable_size(const void *p);

/* Decimal digits of v into buf (NUL-terminated); returns the end. */
char *hc_fmt_u64(char *buf, uint64_t v);

/* Zeroed memory for agent/ structures, counted in stats.metadata. */
void *hc_meta_alloc(size_t n);
void hc_meta_free(void *p, size_t n);

/* Bytes of chunks and huge mappings in use now, and the high-water mark. */
size_t hc_mapped_now(void);
size_t hc_mapped_highwater(void);

/* dirty_decay_ms: free memory goes back to the OS 1/2 to 1 times this
 * after it was freed. */
void hc_alloc_set_decay_ms(uint64_t ms);
uint64_t hc_alloc_decay_ms(void);

/* tcache_max (jemalloc's opt.tcache_max): the largest block a thread's
 * cache keeps (heap.c); any value from 16384 up keeps every small
 * class, 0 to 8 none.  Set once by the agent at start-up. */
void hc_alloc_set_tcache_max(size_t bytes);

/* thp (jemalloc's opt.thp), in the order of its words in shm/shm.c:
 * default leaves the system's setting alone; always asks for transparent
 * huge pages (MADV_HUGEPAGE) and never refuses them (MADV_NOHUGEPAGE) on
 * every chunk and huge mapping, those mapped already and those to come.
 * The allocator's own metadata is left as it is.  Returns 0, or the errno
 * of the kernel's refusal (EINVAL: a kernel without THP). */
enum { HC_THP_DEFAULT, HC_THP_ALWAYS, HC_THP_NEVER };
int hc_alloc_set_thp(unsigned mode);

/* The dense mode of huge objects (huge.c; thp:default where the system's
 * setting is madvise): "off", or on in "small" or "huge" pages. */
const char *hc_alloc_thp_dense(void);

/* Deliver a new high-water mark of mapped memory to hc_agent_highwater if
 * one is waiting (the small-object path leaves it waiting). */
void hc_highwater_poll(void);

/* Reset every live thread's countdown so a new sample rate or profiling
 * state takes effect at each thread's next allocation. */
void hc_heap_reset_countdowns(void);

#endif
