/*
 * agent/inject/shim.c - the agent in a process that keeps its own malloc
 * (heapctl inject).
 *
 * libheapctl-agent.so is agent/ without allocator/: `heapctl inject` loads
 * it into a running process with ptrace and calls heapctl_inject_arm.  That
 * points every loaded object's imports of the malloc family (malloc, free,
 * calloc, realloc, reallocarray and the aligned functions; operator new and
 * delete call them from libstdc++) at the wrappers below, which call the
 * process's own functions, as found in the global scope when armed.  A slot
 * is taken only while it still holds that function or its own PLT stub, so
 * an object bound to some other allocator keeps it.  Objects loaded later
 * are found by the control thread at its next wake-up (dl_iterate_phdr's
 * load count).  ld.so's own malloc pointer is never touched.
 *
 * The wrappers charge each thread's byte countdown as the library does
 * (hc_agent_event), and a sampled object's record goes into a table keyed
 * by its address.  free looks there only when a counting filter of the
 * address's bucket is non-zero, so an object allocated before the
 * injection, or never sampled, costs one load.
 *
 * heapctl_inject_disarm (the control thread runs it for `heapctl eject`)
 * puts every slot back and forgets the samples; the code stays mapped, so
 * a thread still inside a wrapper finishes normally.  A later inject arms
 * the same copy again.
 *
 * The allocator's side of agent/ (allocator/hc_alloc.h) is answered from
 * the process: statistics from mallinfo2 and /proc/self/statm (or from
 * jemalloc's mallctl where the process's malloc is jemalloc's), metadata
 * from its calloc, high-water marks of stats.mapped (as the allocator's
 * are: heapctl shows both under one name).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../agent.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*usable)(void *);
	/* jemalloc's, when the process's malloc is jemalloc's (redis) */
	int (*mallctl)(const char *, void *, size_t *, void *, size_t);
} real;

static bool armed;             /* atomic */
static uint64_t armed_ns;      /* CLOCK_REALTIME of the last arm */
static size_t high, high_told; /* atomic; high_told: control thread (see
                                  raise_highwater) */
/* armed and the last eject, for heapctl doctor (shm/heapctl_shm.h) */
__attribute__((used)) static volatile hc_inject_mark_t mark = { .magic = HC_INJECT_MARK_MAGIC };

/* ---- the countdown ------------------------------------------------------ */

static __thread int64_t t_left, t_period;
static __thread uint32_t t_gen;
static __thread bool t_keyed;
static uint32_t gen = 1; /* hc_heap_reset_countdowns bumps it */
static pthread_key_t exit_key;

static void thread_gone(void *arg)
{
	(void)arg;
	hc_agent_thread_exit();
}

static __attribute__((noinline)) bool event(size_t n)
{
	uint64_t consumed = t_gen == __atomic_load_n(&gen, __ATOMIC_RELAXED) ? (uint64_t)(t_period - t_left) + n : n;
	t_gen = __atomic_load_n(&gen, __ATOMIC_RELAXED);
	bool sample = false;
	int64_t next = hc_agent_event(consumed, n, &sample);
	if (next < 1)
		next = 1;
	t_period = t_left = next;
	if (sample && !t_keyed) {
		t_keyed = true;
		pthread_setspecific(exit_key, (void *)1);
	}
	return sample;
}

/* Charge n bytes; true if this allocation is to be sampled. */
static inline bool count(size_t n)
{
	int64_t left = t_left - (int64_t)n;
	if (likely(left >= 0 && t_gen == __atomic_load_n(&gen, __ATOMIC_RELAXED))) {
		t_left = left;
		return false;
	}
	return event(n);
}

void hc_heap_reset_countdowns(void)
{
	__atomic_add_fetch(&gen, 1, __ATOMIC_RELAXED);
}

/* ---- sampled objects ---------------------------------------------------- */

#define TBITS 16
typedef struct node_s {
	void *p, *rec;
	struct node_s *next;
} node_t;
static node_t *table[1u << TBITS];
static uint32_t filter[1u << TBITS]; /* nodes per bucket; read unlocked */
static hc_mutex_t table_lock = HC_MUTEX_INIT(HC_RANK_INJECT_TABLE, "inject_table");

static inline unsigned bucket(const void *p)
{
	return (unsigned)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> (64 - TBITS));
}

static void track(void *p, void *rec)
{
	node_t *n = real.malloc(sizeof *n);
	hc_mutex_lock(&table_lock);
	if (n != NULL && __atomic_load_n(&armed, __ATOMIC_ACQUIRE)) {
		unsigned b = bucket(p);
		n->p = p;
		n->rec = rec;
		n->next = table[b];
		table[b] = n;
		__atomic_add_fetch(&filter[b], 1, __ATOMIC_RELAXED);
		n = NULL;
		rec = NULL;
	}
	hc_mutex_unlock(&table_lock);
	real.free(n);
	if (rec != NULL) /* disarmed meanwhile, or no memory */
		hc_agent_unsample(rec);
}

/* The record of p, taken out of the table; NULL if p was not sampled. */
static void *untrack(void *p)
{
	unsigned b = bucket(p);
	if (likely(__atomic_load_n(&filter[b], __ATOMIC_RELAXED) == 0))
		return NULL;
	node_t *found = NULL;
	hc_mutex_lock(&table_lock);
	for (node_t **pp = &table[b]; *pp != NULL; pp = &(*pp)->next) {
		if ((*pp)->p == p) {
			found = *pp;
			*pp = found->next;
			__atomic_sub_fetch(&filter[b], 1, __ATOMIC_RELAXED);
			break;
		}
	}
	hc_mutex_unlock(&table_lock);
	if (found == NULL)
		return NULL;
	void *rec = found->rec;
	real.free(found);
	return rec;
}

static void *sampled(void *p, size_t charged)
{
	if (p == NULL)
		return NULL;
	void *rec = hc_agent_sample(p, real.usable(p), charged);
	if (rec != NULL)
		track(p, rec);
	return p;
}

/* ---- the wrappers ------------------------------------------------------- */

static void *w_malloc(size_t n)
{
	void *p = real.malloc(n);
	if (unlikely(count(n)))
		return sampled(p, n);
	return p;
}

static void w_free(void *p)
{
	if (p != NULL) {
		void *rec = untrack(p);
		if (unlikely(rec != NULL))
			hc_agent_unsample(rec);
	}
	real.free(p);
}

static void *w_calloc(size_t k, size_t n)
{
	void *p = real.calloc(k, n);
	size_t t;
	if (!__builtin_mul_overflow(k, n, &t) && unlikely(count(t)))
		return sampled(p, t);
	return p;
}

/* realloc and reallocarray: q from p, now n bytes (q NULL: failed, or
 * freed p when n was 0). */
static void *resized(void *p, void *rec, size_t old, void *q, size_t n)
{
	if (q == NULL) {
		if (rec != NULL && n != 0)
			track(p, rec); /* p is still there */
		else if (rec != NULL)
			hc_agent_unsample(rec);
		return NULL;
	}
	if (rec != NULL) {
		hc_agent_resize(rec, real.usable(q), n);
		track(q, rec);
		return q;
	}
	if (n > old && unlikely(count(n - old)))
		return sampled(q, n);
	return q;
}

static void *w_realloc(void *p, size_t n)
{
	if (p == NULL)
		return w_malloc(n);
	void *rec = untrack(p);
	size_t old = rec ? 0 : real.usable(p);
	return resized(p, rec, old, real.realloc(p, n), n);
}

static void *w_reallocarray(void *p, size_t k, size_t n)
{
	size_t t;
	if (__builtin_mul_overflow(k, n, &t)) {
		errno = ENOMEM;
		return NULL;
	}
	return w_realloc(p, t);
}

static int w_posix_memalign(void **out, size_t al, size_t n)
{
	int e = real.posix_memalign(out, al, n);
	if (e == 0 && unlikely(count(n)))
		sampled(*out, n);
	return e;
}

#define ALIGNED(name, ...)                         \
	static void *w_##name(size_t al, size_t n) \
	{                                          \
		void *p = real.name(al, n);        \
		if (unlikely(count(n)))            \
			return sampled(p, n);      \
		return p;                          \
	}
ALIGNED(aligned_alloc)
ALIGNED(memalign)

static void *w_valloc(size_t n)
{
	void *p = real.valloc(n);
	return unlikely(count(n)) ? sampled(p, n) : p;
}

static void *w_pvalloc(size_t n)
{
	void *p = real.pvalloc(n);
	return unlikely(count(n)) ? sampled(p, n) : p;
}

/* ---- the slots ---------------------------------------------------------- */

static const struct {
	const char *name;
	void *wrapper;
	size_t off; /* of the real function in `real` */
} fns[] = {
/* a braced initializer as a macro body, which clang-format 14 takes for a block */
/* clang-format off */
#define F(n) { #n, (void *)w_##n, offsetof(__typeof__(real), n) }
	/* clang-format on */
	F(malloc), F(free), F(calloc), F(realloc), F(reallocarray), F(posix_memalign), F(aligned_alloc), F(memalign),
	F(valloc), F(pvalloc)
#undef F
};
#define NFNS (sizeof fns / sizeof fns[0])

typedef struct {
	void **slot;
	void *orig;
	uintptr_t lo, hi;
} saved_t;
static saved_t *saved; /* under slots_lock */
static size_t nsaved, capsaved;
static hc_mutex_t slots_lock = HC_MUTEX_INIT(HC_RANK_INJECT_SLOTS, "inject_slots");
static unsigned long long seen_adds; /* dl_iterate_phdr's load count at the last scan */

typedef struct {
	uintptr_t base, text_lo, text_hi; /* the object's own range: its PLT */
	uintptr_t lo, hi;                 /* all of its segments            */
} scan_obj_t;

static unsigned take_slot(void **slot, const char *name, uintptr_t lo, uintptr_t hi, void *arg)
{
	const scan_obj_t *o = arg;
	for (size_t i = 0; i < NFNS; i++) {
		if (strcmp(name, fns[i].name) != 0)
			continue;
		void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		void *fn = *(void **)((char *)&real + fns[i].off);
		bool own_plt = (uintptr_t)cur >= o->text_lo && (uintptr_t)cur < o->text_hi;
		if (cur == fns[i].wrapper || (cur != fn && !own_plt))
			return 0;
		if (nsaved == capsaved) {
			size_t cap = capsaved ? 2 * capsaved : 256;
			saved_t *n = real.realloc(saved, cap * sizeof *n);
			if (n == NULL)
				return 0;
			saved = n;
			capsaved = cap;
		}
		if (!hc_got_store(slot, fns[i].wrapper, lo, hi))
			return 0;
		saved[nsaved++] = (saved_t){ slot, cur, lo, hi };
		return 1;
	}
	return 0;
}

typedef struct {
	scan_obj_t obj[512];
	const void *dyn[512];
	hc_relro_t relro[512];
	unsigned n;
	unsigned long long adds;
} scan_t;

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	scan_t *s = arg;
	if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
		s->adds = info->dlpi_adds;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	if (strstr(name, "linux-vdso") || strstr(name, "/ld-linux") || strstr(name, "libheapctl-agent"))
		return 0;
	const void *dyn = NULL;
	uintptr_t lo = UINTPTR_MAX, hi = 0, alo = UINTPTR_MAX, ahi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const void *)(info->dlpi_addr + ph->p_vaddr);
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		alo = a < alo ? a : alo;
		ahi = a + ph->p_memsz > ahi ? a + ph->p_memsz : ahi;
		if (ph->p_flags & PF_X) {
			lo = a < lo ? a : lo;
			hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
		}
	}
	if (dyn == NULL || s->n == sizeof s->dyn / sizeof s->dyn[0])
		return 0;
	s->obj[s->n] = (scan_obj_t){ info->dlpi_addr, lo, hi, alo, ahi };
	hc_got_relro_of(info, &s->relro[s->n]);
	s->dyn[s->n++] = dyn;
	return 0;
}

static scan_t s; /* under slots_lock */

/* Take the slots of every object loaded since the last scan (of all when
 * force).  Returns the slots taken. */
static unsigned scan(bool force)
{
	unsigned n = 0;
	hc_mutex_lock(&slots_lock);
	s.n = 0;
	s.adds = 0;
	dl_iterate_phdr(collect, &s);
	if (__atomic_load_n(&armed, __ATOMIC_ACQUIRE) && (force || s.adds != seen_adds)) {
		bool busy = false; /* an object the loader is still relocating */
		hc_got_busy(s.relro, s.n);
		for (unsigned i = 0; i < s.n; i++) {
			busy |= s.relro[i].busy;
			n += hc_got_each(&s.relro[i], s.dyn[i], take_slot, &s.obj[i]);
		}
		if (!busy) /* else the next scan looks again */
			seen_adds = s.adds;
	}
	hc_mutex_unlock(&slots_lock);
	return n;
}

/* Every slot back, newest first, in the objects still loaded (one that
 * dlclose unloaded took its slots with it: they are not touched). */
static void restore_slots(void)
{
	hc_mutex_lock(&slots_lock);
	s.n = 0;
	dl_iterate_phdr(collect, &s);
	for (size_t i = nsaved; i-- > 0;) {
		saved_t *v = &saved[i];
		bool loaded = false;
		for (unsigned k = 0; k < s.n && !loaded; k++)
			loaded =
			    (uintptr_t)v->slot >= s.obj[k].lo && (uintptr_t)v->slot + sizeof(void *) <= s.obj[k].hi;
		for (size_t k = 0; loaded && k < NFNS; k++)
			if (__atomic_load_n(v->slot, __ATOMIC_ACQUIRE) == fns[k].wrapper)
				hc_got_store(v->slot, v->orig, v->lo, v->hi);
	}
	nsaved = 0;
	seen_adds = 0;
	hc_mutex_unlock(&slots_lock);
}

/* ---- arm and disarm ----------------------------------------------------- */

static int first_definer(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	void **io = arg; /* in: the name; out: its definition */
	const char *name = io[0];
	if (info->dlpi_name == NULL || info->dlpi_name[0] == 0 || strstr(info->dlpi_name, "libheapctl-agent") ||
	    strstr(info->dlpi_name, "linux-vdso"))
		return 0;
	void *h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
	if (h == NULL)
		return 0;
	void *f = dlsym(h, name);
	dlclose(h);
	Dl_info di;
	if (f == NULL || dladdr(f, &di) == 0 || (uintptr_t)di.dli_fbase != info->dlpi_addr + (uintptr_t)0 ||
	    strcmp(di.dli_fname, info->dlpi_name) != 0)
		return 0;
	io[1] = f;
	return 1;
}

/* The function the process calls by that name.  A program built without
 * -pie that takes a function's address gets a "canonical" PLT entry,
 * which dlsym(RTLD_DEFAULT) returns: an undefined symbol of the program
 * with a value, whose real definition is in the first object after it that
 * has one (libc, or an allocator it was linked with). */
static void *definition(const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	Dl_info di;
	const ElfW(Sym) *sym = NULL;
	if (f == NULL || dladdr1(f, &di, (void **)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL ||
	    sym->st_shndx != SHN_UNDEF)
		return f;
	void *io[2] = { (void *)name, NULL };
	dl_iterate_phdr(first_definer, io);
	return io[1];
}

static bool resolve(void)
{
	for (size_t i = 0; i < NFNS; i++) {
		void *f = definition(fns[i].name);
		if (f == NULL)
			return false;
		*(void **)((char *)&real + fns[i].off) = f;
	}
	real.usable = (size_t(*)(void *))definition("malloc_usable_size");
	/* jemalloc's statistics if its mallctl is in the object whose malloc
	 * the process calls (not this agent's own mallctl, nor a jemalloc
	 * loaded beside glibc's malloc) */
	void *ctl = definition("mallctl");
	Dl_info a, b;
	if (ctl && dladdr(ctl, &a) && dladdr((void *)real.malloc, &b) && a.dli_fbase == b.dli_fbase &&
	    !strstr(a.dli_fname, "libheapctl"))
		real.mallctl = (int (*)(const char *, void *, size_t *, void *, size_t))ctl;
	return real.usable != NULL;
}

static void fork_prepare(void)
{
	hc_agent_fork_prepare();
	hc_mutex_lock(&slots_lock);
	hc_mutex_lock(&table_lock);
}
static void fork_parent(void)
{
	hc_mutex_unlock(&table_lock);
	hc_mutex_unlock(&slots_lock);
	hc_agent_fork_parent();
}
static void fork_child(void)
{
	hc_mutex_reinit(&table_lock);
	hc_mutex_reinit(&slots_lock);
	hc_agent_fork_child();
}

static bool disarm(char *why, size_t len);
HC_EXPORT int heapctl_inject_arm(const char *conf);

/*
 * Called by heapctl inject (a remote call, with every other thread
 * stopped).  conf: MALLOC_CONF-style settings for this agent (the
 * process's own MALLOC_CONF is its allocator's, not ours).  Returns 0, or
 * 1 if already armed, 2 if the malloc family cannot be found, 3 if the
 * control segment could not be published.
 */
HC_EXPORT int heapctl_inject_arm(const char *conf)
{
	static bool once;
	if (__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
		return 1;
	if (!once) {
		if (!resolve())
			return 2;
		pthread_key_create(&exit_key, thread_gone);
		pthread_atfork(fork_prepare, fork_parent, fork_child);
		hc_inject_hooks(disarm, scan);
		hc_conf_source("heapctl inject", conf);
		hc_agent_init();
		once = true;
	} else {
		hc_conf_source("heapctl inject", conf);
		hc_agent_reconfigure();
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	armed_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	hc_prof_reset(-1);
	hc_heap_reset_countdowns();
	/* the high-water mark is this injection's, as its profile is */
	__atomic_store_n(&high, 0, __ATOMIC_RELAXED);
	high_told = 0;
	__atomic_store_n(&armed, true, __ATOMIC_RELEASE);
	mark.armed = 1;
	scan(true);
	if (!hc_control_begin(armed_ns))
		return 3;
	return 0;
}

/* heapctl eject, on the control thread: every slot back, every sample
 * forgotten, profiling off. */
static bool disarm(char *why, size_t len)
{
	(void)why, (void)len;
	__atomic_store_n(&armed, false, __ATOMIC_RELEASE);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	mark.ejected_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	mark.armed = 0;
	restore_slots();
	hc_mutex_lock(&table_lock);
	node_t *all = NULL;
	for (unsigned b = 0; b < (1u << TBITS); b++) {
		for (node_t *n = table[b], *next; n != NULL; n = next) {
			next = n->next;
			n->next = all;
			all = n;
		}
		table[b] = NULL;
		__atomic_store_n(&filter[b], 0, __ATOMIC_RELAXED);
	}
	hc_mutex_unlock(&table_lock);
	for (node_t *n = all, *next; n != NULL; n = next) {
		next = n->next;
		hc_agent_unsample(n->rec);
		real.free(n);
	}
	hc_prof.active = false;
	return true;
}

/* ---- allocator/hc_alloc.h, from the process ----------------------------- */

void hc_init(void) {}

static size_t statm_resident(void)
{
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[128];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strchr(buf, ' ');
	return p ? (size_t)strtoull(p + 1, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

/* High-water marks of stats.mapped, not of resident memory (statm):
 * heapctl shows the mark as highwater beside stats.mapped, as for the
 * allocator's.  Each refresh of the statistics raises it rather than a
 * second mallinfo2 in the poll (it walks every arena's free lists under
 * the arena's lock, and the control thread refreshes once a period
 * anyway); the thread's next poll delivers it, a period later. */
/* high, high_told: declared at the top (arming resets them) */

static void raise_highwater(size_t mapped)
{
	size_t hw = __atomic_load_n(&high, __ATOMIC_RELAXED);
	while (
	    mapped > hw && !__atomic_compare_exchange_n(&high, &hw, mapped, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static size_t je_size(const char *name)
{
	size_t v = 0, len = sizeof v;
	return real.mallctl(name, &v, &len, NULL, 0) == 0 ? v : 0;
}

/* jemalloc's stats.* (after an epoch write, which refreshes them); dirty
 * pages are every arena's pdirty */
static void je_stats(hc_stats_t *st)
{
	uint64_t epoch = 1;
	size_t len = sizeof epoch;
	(void)real.mallctl("epoch", &epoch, &len, &epoch, len);
	st->allocated = je_size("stats.allocated");
	st->active = je_size("stats.active");
	st->metadata = je_size("stats.metadata");
	st->resident = je_size("stats.resident");
	st->mapped = je_size("stats.mapped");
	st->retained = je_size("stats.retained");
	size_t page = je_size("arenas.page");
	st->dirty = je_size("stats.arenas.4096.pdirty") * (page ? page : 4096);
	st->narenas = je_size("arenas.narenas");
}

void hc_stats_refresh(hc_stats_t *st)
{
	memset(st, 0, sizeof *st);
	if (real.mallctl) {
		je_stats(st);
		raise_highwater(st->mapped);
		return;
	}
	struct mallinfo2 mi = mallinfo2();
	st->allocated = mi.uordblks + mi.hblkhd;
	st->active = st->allocated;
	st->mapped = mi.arena + mi.hblkhd;
	st->dirty = mi.fordblks;
	st->resident = statm_resident();
	st->narenas = 1;
	raise_highwater(st->mapped);
}

void hc_stats_add_metadata(intptr_t delta)
{
	(void)delta;
}
unsigned hc_alloc_kind(void)
{
	return real.mallctl ? HC_ALLOC_PROCESS_JEMALLOC : HC_ALLOC_PROCESS;
}
/* glibc's malloc has no size classes of pages to show, and its mappings
 * (brk, arenas, one per large block) are not listed: heapctl explain
 * counts them with the other anonymous memory */
unsigned hc_class_stats(hc_class_stats_t *out, unsigned n)
{
	(void)out;
	(void)n;
	return 0;
}
void hc_alloc_ranges(bool (*fn)(void *, uintptr_t, uintptr_t, unsigned), void *arg)
{
	(void)fn;
	(void)arg;
}
void hc_purge_all(void)
{
	if (real.mallctl)
		(void)real.mallctl("arena.4096.purge", NULL, NULL, NULL, 0); /* MALLCTL_ARENAS_ALL */
	else
		malloc_trim(0);
}
/* the process's malloc maps its heap: thp has nothing to act on */
int hc_alloc_set_thp(unsigned mode)
{
	return mode == HC_THP_DEFAULT ? 0 : ENOTSUP;
}
const char *hc_alloc_thp_dense(void)
{
	return "off";
}
/* the process's own malloc keeps its thread caches (if any) to itself,
 * and decays (or not) what it holds on its own */
void hc_thread_cache_flush(void) {}
void hc_alloc_idle_decay(void) {}
void hc_alloc_set_tcache_max(size_t bytes)
{
	(void)bytes;
}
size_t hc_usable_size(const void *p)
{
	return real.usable((void *)p);
}

void *hc_meta_alloc(size_t n)
{
	return real.calloc(1, n);
}
void hc_meta_free(void *p, size_t n)
{
	(void)n;
	real.free(p);
}

size_t hc_mapped_now(void)
{
	if (real.mallctl) {
		uint64_t epoch = 1;
		size_t len = sizeof epoch;
		(void)real.mallctl("epoch", &epoch, &len, &epoch, len);
		return je_size("stats.mapped");
	}
	struct mallinfo2 mi = mallinfo2();
	return mi.arena + mi.hblkhd;
}

size_t hc_mapped_highwater(void)
{
	return __atomic_load_n(&high, __ATOMIC_RELAXED);
}

void hc_highwater_poll(void)
{
	if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
		return;
	size_t hw = hc_mapped_highwater();
	if (hw > high_told && hc_agent_highwater(hw))
		high_told = hw;
}
