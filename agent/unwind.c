/*
 * agent/unwind.c - backtraces for sampled allocations.
 *
 * Three unwinders, chosen with prof_unwind:
 *   fp         the frame-pointer chain, bounded by the thread's stack; exact
 *              and cheapest, but stops at the first frame built without
 *              frame pointers (most Debian packages);
 *   libunwind  unw_backtrace from libunwind.so.8, loaded with dlopen and
 *              RTLD_LOCAL so its _Unwind_* symbols never replace libgcc's for
 *              the rest of the process;
 *   libgcc     glibc's backtrace(), i.e. libgcc's _Unwind_Backtrace.
 * libunwind is the default (tests/bench/unwind measures all three).
 *
 * libunwind checks that an address is mapped before it reads a frame that
 * has no CFI, and its first choice for that is mincore(2), which seccomp
 * filters such as systemd's @system-service do not allow (the process is
 * killed, or gets EPERM).  Its own fallback, msync(2) and a pipe, is
 * allowed, so libunwind's import of mincore is pointed at a function that
 * answers ENOSYS: libunwind then uses the fallback everywhere.  Only the
 * copy of libunwind loaded here is changed; the program's mincore is not.
 *
 * unw_backtrace is libunwind's fast path, but its first call in a thread
 * maps and fills a 256 KiB frame cache for that thread (freed at thread
 * exit): ~1 ms and 256 KiB of RSS per thread, which a server with thousands
 * of threads, or one that makes a thread per connection, pays in full.  So
 * a thread's first UNW_STEP_SAMPLES samples walk with unw_step, which needs
 * no per-thread state, and only a thread that keeps sampling gets the
 * cache.
 *
 * Only sampled allocations unwind, with hc_prof_busy set, so anything an
 * unwinder allocates is served normally and never sampled.  Frames inside
 * libheapctl.so are dropped: the first frame kept is the caller of malloc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"


static int (*unw_backtrace_fn)(void **, int);
/* the step-by-step API, for threads that have sampled little (see above) */
static int (*ul_getcontext)(unw_context_t *);
static int (*ul_init_local)(unw_cursor_t *, unw_context_t *);
static int (*ul_step)(unw_cursor_t *);
static int (*ul_get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);

#define UNW_STEP_SAMPLES 64
static __thread unsigned thread_samples;

/*
 * libunwind and libgcc walk the loaded objects with dl_iterate_phdr, which
 * holds the dynamic loader's lock, and glibc's fork() does not take that
 * lock: a fork in the middle of an unwind leaves it held for ever in the
 * child.  Unwinds hold this lock as readers; the fork handler takes it as
 * writer (writers first, so a stream of samples cannot starve fork).
 */
static pthread_rwlock_t unwind_fork_lock HC_FORK_DATA = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

static hc_lockid_t unwind_id = { "unwind_fork_lock", HC_RANK_UNWIND, 0 };

/* The rwlock in the order of hc_lock.h, as the mutexes are. */
static void unwind_lock(bool write)
{
	if (HC_DEBUG)
		hc_lock_check(&unwind_id);
	if (write)
		pthread_rwlock_wrlock(&unwind_fork_lock);
	else
		pthread_rwlock_rdlock(&unwind_fork_lock);
	if (HC_DEBUG)
		hc_lock_held(&unwind_id);
}

static void unwind_unlock(void)
{
	if (HC_DEBUG)
		hc_lock_released(&unwind_id);
	pthread_rwlock_unlock(&unwind_fork_lock);
}

void hc_unwind_fork_prepare(void)
{
	unwind_lock(true);
}
void hc_unwind_fork_parent(void)
{
	unwind_unlock();
}

void hc_unwind_fork_child(void)
{
	pthread_rwlock_t fresh = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
	if (HC_DEBUG)
		hc_lock_released(&unwind_id);
	unwind_fork_lock = fresh;
}
static uintptr_t self_lo, self_hi; /* our own text */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	uintptr_t me = (uintptr_t)arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		uintptr_t hi = lo + ph->p_memsz;
		if (me >= lo && me < hi) {
			self_lo = lo;
			self_hi = hi;
			return 1;
		}
	}
	return 0;
}

/* ---- redirecting one import of a library loaded here ------------------- */

static int mincore_unavailable(void *addr, size_t len, unsigned char *vec)
{
	(void)addr, (void)len, (void)vec;
	errno = ENOSYS;
	return -1;
}

static unsigned redirect_one(void **slot, const char *name, uintptr_t lo, uintptr_t hi, void *arg)
{
	return strcmp(name, "mincore") == 0 && hc_got_store(slot, arg, lo, hi);
}

/* Point the imports of mincore of the object behind handle at fn. */
static unsigned redirect_import(void *handle, void *fn)
{
	struct link_map *lm;
	if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm->l_addr == 0)
		return 0;
	hc_relro_t r = { .base = lm->l_addr };
	hc_got_relro(&r);
	return hc_got_each(&r, lm->l_ld, redirect_one, fn);
}

/*
 * The first sample loads libunwind (and libgcc_s) with dlopen.  A fork in
 * the middle of a dlopen that adds a TLS module leaves glibc's TLS slot list
 * ahead of its generation count in the child, and the child's first
 * pthread_create (the control thread starts in every child) then stops the
 * process on an ld.so assertion, exit status 127.  So the loads happen with
 * the fork lock held as writer: a fork waits until they are done.
 */
static void init_once_fn(void)
{
	unwind_lock(true);
	dl_iterate_phdr(find_self, (void *)(uintptr_t)&hc_unwind);
	void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	if (h) {
		redirect_import(h, (void *)mincore_unavailable);
		unw_backtrace_fn = (int (*)(void **, int))dlsym(h, "unw_backtrace");
		ul_getcontext = (int (*)(unw_context_t *))dlsym(h, "_Ux86_64_getcontext");
		ul_init_local = (int (*)(unw_cursor_t *, unw_context_t *))dlsym(h, "_ULx86_64_init_local");
		ul_step = (int (*)(unw_cursor_t *))dlsym(h, "_ULx86_64_step");
		ul_get_reg = (int (*)(unw_cursor_t *, unw_regnum_t, unw_word_t *))dlsym(h, "_ULx86_64_get_reg");
		if (!ul_getcontext || !ul_init_local || !ul_step || !ul_get_reg)
			ul_getcontext = NULL;
	}
	if (unw_backtrace_fn == NULL && hc_prof.unwind == HC_UNWIND_LIBUNWIND) {
		/* heapctl status shows prof.unwind libgcc, and doctor why */
		hc_note("prof_unwind: libunwind.so.8 not available (Debian package "
		        "libunwind8); using libgcc",
		    NULL);
		hc_prof.unwind = HC_UNWIND_LIBGCC;
	}
	/* backtrace() loads libgcc_s on first use; do it now, not mid-sample */
	void *dummy[2];
	backtrace(dummy, 2);
	unwind_unlock();
}

void hc_unwind_init(void)
{
	pthread_once(&init_once, init_once_fn);
}

/* Stack bounds of the calling thread, cached. */
static __thread uintptr_t stack_lo, stack_hi;

static void stack_bounds(void)
{
	pthread_attr_t attr;
	void *addr;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
			stack_lo = (uintptr_t)addr;
			stack_hi = (uintptr_t)addr + size;
		}
		pthread_attr_destroy(&attr);
	}
}

/* Follow saved frame pointers while each frame lies above the last and
 * inside this thread's stack, so a frame built without them ends the walk
 * instead of reading a wild address. */
static __attribute__((noinline)) unsigned unwind_fp(uintptr_t *out, unsigned max)
{
	if (stack_hi == 0)
		stack_bounds();
	uintptr_t *fp = __builtin_frame_address(0);
	unsigned n = 0;
	while (n < max) {
		uintptr_t f = (uintptr_t)fp;
		if (f < stack_lo || f + 2 * sizeof(uintptr_t) > stack_hi || (f & 7))
			break;
		uintptr_t ret = fp[1];
		uintptr_t *next = (uintptr_t *)fp[0];
		if (ret == 0)
			break;
		out[n++] = ret;
		if ((uintptr_t)next <= f)
			break;
		fp = next;
	}
	return n;
}

/* libunwind one frame at a time: no per-thread cache. */
static __attribute__((noinline)) int unwind_steps(uintptr_t *out, int max)
{
	unw_context_t uc;
	unw_cursor_t cur;
	if (ul_getcontext(&uc) != 0 || ul_init_local(&cur, &uc) != 0)
		return 0;
	int n = 0;
	while (n < max) {
		unw_word_t ip;
		if (ul_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		out[n++] = (uintptr_t)ip;
		if (ul_step(&cur) <= 0)
			break;
	}
	return n;
}

/* The frames of raw[0, n) after our own (everything up to the last one
 * inside us), at most max, into frames. */
static unsigned theirs(const uintptr_t *raw, int n, uintptr_t *frames, unsigned max)
{
	int first = 0;
	for (int i = 0; i < n; i++)
		if (raw[i] >= self_lo && raw[i] < self_hi)
			first = i + 1;
	unsigned k = 0;
	for (int i = first; i < n && k < max; i++)
		frames[k++] = raw[i];
	return k;
}

unsigned hc_unwind(uintptr_t *frames, unsigned max)
{
	hc_unwind_init();
	uintptr_t raw[HC_MAX_FRAMES + 16];
	unsigned cap = max + 16 <= sizeof raw / sizeof raw[0] ? max + 16 : sizeof raw / sizeof raw[0];
	int n;
	unwind_lock(false);
	switch (hc_prof.unwind) {
	case HC_UNWIND_FP: n = (int)unwind_fp(raw, cap); break;
	case HC_UNWIND_LIBUNWIND:
		if (ul_getcontext && thread_samples < UNW_STEP_SAMPLES) {
			thread_samples++;
			n = unwind_steps(raw, (int)cap);
			break;
		}
		if (unw_backtrace_fn) {
			n = unw_backtrace_fn((void **)raw, (int)cap);
			break;
		}
		/* fall through */
	default: n = backtrace((void **)raw, (int)cap); break;
	}
	unwind_unlock();
	unsigned k = theirs(raw, n, frames, max);
	/* none: no unwinder could be loaded (a chroot without libgcc_s), or it
	 * failed; our own frames keep frame pointers, so these reach at least
	 * the caller (a dump's stack must have an address) */
	if (k == 0 && hc_prof.unwind != HC_UNWIND_FP)
		k = theirs(raw, (int)unwind_fp(raw, cap), frames, max);
	return k;
}
