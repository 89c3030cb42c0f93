/*
 * agent/prof.c - sampling and the profile's tables.
 *
 * Sampling is by bytes: each thread draws the distance to its next sample
 * from an exponential distribution of mean 2^lg_sample (a Poisson process
 * over allocated bytes), so an allocation of s bytes is sampled with
 * probability 1 - exp(-s / 2^lg_sample) whatever its size.  The allocator
 * counts the distance down on its fast path and calls hc_agent_event when
 * it runs out; nothing else is paid when profiling is off.
 *
 * Every sample keeps its own weight, 1 / P(sampled) at the rate in force
 * when it was taken, and the tables sum weights as well as raw counts, so a
 * profile stays unbiased across a change of rate.  At lg_sample 0 every
 * allocation is sampled and the weight is exactly 1.
 *
 * Tables: stacks (deduplicated by hash), threads, and per (stack, thread)
 * counters, all under hc_prof_lock and allocated with hc_meta_alloc, never
 * from the user's heap.  Sampling at the default rate is rare enough that
 * one lock is not contended; the unwinding happens before taking it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "hc_math.h"

hc_prof_state_t hc_prof;
hc_mutex_t hc_prof_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_PROF, "hc_prof_lock");
__thread int hc_prof_busy __attribute__((tls_model("initial-exec")));

#define NBUCKETS 16384
static hc_stack_t **buckets;            /* under hc_prof_lock */
static hc_stack_t *stacks_all;
static hc_thread_t *threads_all;
static size_t nexited;                  /* exited threads still listed */
static uint64_t next_thread_uid;
static uint64_t reset_epoch;
static uint64_t rate_generation = 1;    /* atomic */
static uint64_t samples_total;          /* atomic */
static bool enabled;                    /* prof:true or switched on later */

/* Per-thread sampling state. */
typedef struct {
	int64_t left;           /* bytes until the next sample point */
	uint64_t rng;
	uint64_t generation;    /* rate_generation the draw was made at */
	hc_thread_t *thread;
	bool active_set, active;
	char name[HC_THREAD_NAME_MAX];
} tsd_t;
static __thread tsd_t tsd __attribute__((tls_model("initial-exec")));

#define QUANTUM_IDLE ((int64_t)1 << 20)   /* event spacing while not sampling */

static void record_update(hc_sample_t *rec, uint64_t size, double w);

hc_stack_t *hc_prof_stacks(void) { return stacks_all; }
hc_thread_t *hc_prof_threads(void) { return threads_all; }
uint64_t hc_prof_reset_epoch(void) { return reset_epoch; }
uint64_t hc_prof_samples_total(void) { return __atomic_load_n(&samples_total, __ATOMIC_RELAXED); }
void hc_prof_samples_restart(void) { __atomic_store_n(&samples_total, 0, __ATOMIC_RELAXED); }

/* Called from the first malloc, which may come from the dynamic loader
 * before libc has set up environ; then configuration waits for the
 * library's constructor (hc_init runs it again). */
static void configure(void);

void hc_agent_init(void)
{
	extern char **environ;
	static bool done, have_defaults;
	if (!have_defaults) {
		hc_conf_defaults();
		have_defaults = true;
	}
	if (done || environ == NULL)
		return;
	done = true;
	configure();
}

/* heapctl inject arming an agent again: the settings it was given. */
void hc_agent_reconfigure(void)
{
	hc_conf_defaults();
	configure();
}

static void configure(void)
{
	hc_conf_init();
	/* The seed documents' MALLOC_CONF lines ask for leak reports, final
	 * dumps or gdumps without "prof:true"; they mean profiling. */
	if (hc_opt.prof_leak || hc_opt.prof_final || hc_opt.prof_gdump ||
	    hc_opt.lg_prof_interval >= 0 || hc_opt.prof_timer_s || hc_opt.prof_threshold)
		hc_opt.prof = true;
	enabled = hc_opt.prof;
	hc_settings_start();
	hc_prof.active = hc_opt.prof && hc_opt.prof_active;
	hc_alloc_set_decay_ms((uint64_t)hc_opt.dirty_decay_ms);
	int err = hc_alloc_set_thp(hc_opt.thp);
	if (err)
		hc_say("thp:", hc_shm_words(HC_SET_THP)[hc_opt.thp], " has no effect: ",
		    err == ENOTSUP ? "the process's own malloc maps its heap" :
		    err == EINVAL ? "the kernel has no transparent huge pages" : strerrordesc_np(err),
		    NULL);
	/* threads that allocated before this got idle countdowns */
	__atomic_add_fetch(&rate_generation, 1, __ATOMIC_RELAXED);
	hc_heap_reset_countdowns();
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* Bytes to the next sample point: exponential with mean 2^lg (0: every
 * allocation). */
static int64_t draw(tsd_t *t)
{
	unsigned lg = __atomic_load_n(&hc_prof.lg_sample, __ATOMIC_RELAXED);
	t->generation = __atomic_load_n(&rate_generation, __ATOMIC_RELAXED);
	if (lg == 0)
		return 0;
	double u = (double)((rng_next(&t->rng) >> 11) + 1) * (1.0 / 9007199254740993.0);
	double d = -hc_log(u) * (double)((uint64_t)1 << lg);
	if (d > (double)INT64_MAX / 2)
		d = (double)INT64_MAX / 2;
	return (int64_t)d + 1;
}

static bool thread_active(tsd_t *t)
{
	if (!t->active_set) {
		t->active = __atomic_load_n(&hc_prof.thread_active_init, __ATOMIC_RELAXED);
		t->active_set = true;
	}
	return t->active;
}

int64_t hc_agent_event(uint64_t consumed, size_t usize, bool *sample)
{
	tsd_t *t = &tsd;
	if (hc_prof_busy)
		return 1;   /* the agent's own allocations: ask again right after */
	if (__atomic_load_n(&hc_prof.lg_interval, __ATOMIC_RELAXED) >= 0 ||
	    __atomic_load_n(&hc_prof.timer_s, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&hc_prof.threshold, __ATOMIC_RELAXED))
		hc_dump_interval_account(consumed);
	int64_t quantum = QUANTUM_IDLE;
	int lgi = __atomic_load_n(&hc_prof.lg_interval, __ATOMIC_RELAXED);
	if (lgi >= 0 && lgi < 62) {
		/* each thread reports its bytes at least 16 times per interval */
		int64_t q = ((int64_t)1 << lgi) / 16;
		quantum = q < 1 ? 1 : q < quantum ? q : quantum;
	}
	if (__builtin_expect(__atomic_load_n(&hc_control_poll_pending, __ATOMIC_ACQUIRE), 0)) {
		hc_control_poll();
		if (quantum > HC_POLL_QUANTUM)
			quantum = HC_POLL_QUANTUM;
	}
	if (!__atomic_load_n(&hc_prof.active, __ATOMIC_RELAXED) || !thread_active(t)) {
		t->generation = 0;   /* draw afresh when sampling resumes */
		return quantum;
	}
	if (t->rng == 0)
		t->rng = ((uint64_t)syscall(SYS_gettid) << 32) ^ (uint64_t)time(NULL) ^
		    (uint64_t)(uintptr_t)t ^ 0x9E3779B97F4A7C15ULL;
	if (t->generation != __atomic_load_n(&rate_generation, __ATOMIC_RELAXED))
		t->left = draw(t);
	t->left -= (int64_t)consumed;
	if (t->left <= 0) {
		*sample = true;
		t->left = draw(t);
	}
	int64_t next = t->left > 0 ? t->left : 1;
	return next < quantum ? next : quantum;
}

/* ---- tables -------------------------------------------------------------- */

static uint64_t hash_frames(const uintptr_t *f, unsigned n)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ n;
	for (unsigned i = 0; i < n; i++) {
		h ^= f[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h;
}

static hc_thread_t *thread_get(tsd_t *t)
{
	if (t->thread)
		return t->thread;
	hc_thread_t *th = hc_meta_alloc(sizeof *th);
	if (th == NULL)
		return NULL;
	th->uid = next_thread_uid++;
	th->tid = (int)syscall(SYS_gettid);
	th->active = thread_active(t);
	memcpy(th->name, t->name, sizeof th->name);
	th->next = threads_all;
	threads_all = th;
	t->thread = th;
	return th;
}

static hc_stack_t *stack_get(const uintptr_t *frames, unsigned n)
{
	if (buckets == NULL) {
		buckets = hc_meta_alloc(NBUCKETS * sizeof *buckets);
		if (buckets == NULL)
			return NULL;
	}
	uint64_t h = hash_frames(frames, n);
	hc_stack_t **b = &buckets[h % NBUCKETS];
	for (hc_stack_t *s = *b; s; s = s->next)
		if (s->hash == h && s->nframes == n && memcmp(s->frames, frames, n * sizeof *frames) == 0)
			return s;
	hc_stack_t *s = hc_meta_alloc(sizeof *s + n * sizeof *frames);
	if (s == NULL)
		return NULL;
	s->hash = h;
	s->nframes = n;
	memcpy(s->frames, frames, n * sizeof *frames);
	s->next = *b;
	*b = s;
	s->all_next = stacks_all;
	stacks_all = s;
	return s;
}

static hc_tctx_t *tctx_get(hc_stack_t *s, hc_thread_t *th)
{
	for (hc_tctx_t *c = s->tctxs; c; c = c->next)
		if (c->thread == th)
			return c;
	hc_tctx_t *c = hc_meta_alloc(sizeof *c);
	if (c == NULL)
		return NULL;
	c->thread = th;
	c->stack = s;
	c->next = s->tctxs;
	if (c->next)
		c->next->prev = c;
	s->tctxs = c;
	c->th_next = th->tctxs;
	if (c->th_next)
		c->th_next->th_prev = c;
	th->tctxs = c;
	return c;
}

/* A count of an exited thread that nothing needs: no live sample (which
 * points to it), no live bytes, no peak to show, and no history a dump
 * shows (with prof_accum).  Under hc_prof_lock. */
static bool tctx_idle(const hc_tctx_t *c)
{
	return c->samples == NULL && c->cnt.curobjs == 0 && c->peak.curobjs == 0 &&
	    (!hc_opt.prof_accum || (c->cnt.accumobjs == 0 && c->peak.accumobjs == 0));
}

static void thread_free(hc_thread_t *th)
{
	hc_thread_t **pp = &threads_all;
	while (*pp != th)
		pp = &(*pp)->next;
	*pp = th->next;
	nexited -= th->exited;
	hc_meta_free(th, sizeof *th);
}

/* Free c if its thread has exited and nothing needs it, and the thread
 * with its last count.  Under hc_prof_lock. */
static void tctx_release(hc_tctx_t *c)
{
	hc_thread_t *th = c->thread;
	if (!th->exited || !tctx_idle(c))
		return;
	if (c->prev) c->prev->next = c->next; else c->stack->tctxs = c->next;
	if (c->next) c->next->prev = c->prev;
	if (c->th_prev) c->th_prev->th_next = c->th_next; else th->tctxs = c->th_next;
	if (c->th_next) c->th_next->th_prev = c->th_prev;
	hc_meta_free(c, sizeof *c);
	if (th->tctxs == NULL)
		thread_free(th);
}

/* The calling thread is exiting (its heap's destructor). */
void hc_agent_thread_exit(void)
{
	hc_thread_t *th = tsd.thread;
	if (th == NULL)
		return;
	tsd.thread = NULL;
	hc_mutex_lock(&hc_prof_lock);
	th->exited = true;
	nexited++;
	if (th->tctxs == NULL) {
		thread_free(th);
	} else {
		/* th goes with its last count, when next is NULL */
		for (hc_tctx_t *c = th->tctxs, *next; c != NULL; c = next) {
			next = c->th_next;
			tctx_release(c);
		}
	}
	hc_mutex_unlock(&hc_prof_lock);
}

/*
 * The tables' invariants (debug builds; under hc_prof_lock): each stack is
 * in the bucket its frames hash to; each count belongs to its stack and its
 * thread, with links both ways; a count's live objects and bytes are its
 * live records of this reset epoch, exactly, and never more than it ever
 * counted; the exited threads are nexited.
 */
void hc_prof_check(void)
{
	if (!HC_DEBUG)
		return;
	for (hc_stack_t *s = stacks_all; s; s = s->all_next) {
		HC_ASSERT(s->nframes <= HC_MAX_FRAMES && s->hash == hash_frames(s->frames, s->nframes));
		hc_stack_t *b = buckets ? buckets[s->hash % NBUCKETS] : NULL;
		while (b && b != s)
			b = b->next;
		HC_ASSERT(b == s);
		for (hc_tctx_t *c = s->tctxs; c; c = c->next) {
			HC_ASSERT(c->stack == s && c->thread != NULL);
			HC_ASSERT(c->next == NULL || c->next->prev == c);
			HC_ASSERT(c->prev != NULL || s->tctxs == c);
			HC_ASSERT(c->th_prev != NULL || c->thread->tctxs == c);
			uint64_t objs = 0, bytes = 0;
			for (hc_sample_t *r = c->samples; r; r = r->next) {
				HC_ASSERT(r->tctx == c && (r->next == NULL || r->next->prev == r));
				if (r->reset_epoch == reset_epoch) {
					objs++;
					bytes += r->usize;
				}
			}
			HC_ASSERT(objs == c->cnt.curobjs && bytes == c->cnt.curbytes);
			HC_ASSERT(c->cnt.curobjs <= c->cnt.accumobjs);
		}
	}
	size_t exited = 0;
	for (hc_thread_t *th = threads_all; th; th = th->next) {
		exited += th->exited;
		for (hc_tctx_t *c = th->tctxs; c; c = c->th_next)
			HC_ASSERT(c->thread == th && (c->th_next == NULL || c->th_next->th_prev == c));
	}
	HC_ASSERT(exited == nexited);
}

/* After counts were zeroed (reset, a new peak): free what exited threads
 * no longer need.  Under hc_prof_lock. */
static void release_exited(void)
{
	if (nexited == 0)
		return;
	for (hc_stack_t *s = stacks_all; s; s = s->all_next)
		for (hc_tctx_t *c = s->tctxs, *next; c != NULL; c = next) {
			next = c->next;
			tctx_release(c);
		}
}

/* 1 / P(an object charged this many bytes is sampled) at the current rate. */
static double sample_weight(size_t charged)
{
	unsigned lg = __atomic_load_n(&hc_prof.lg_sample, __ATOMIC_RELAXED);
	if (lg == 0)
		return 1.0;
	double r = (double)((uint64_t)1 << lg);
	double prob = -hc_expm1(-(double)charged / r);
	return prob > 0 ? 1.0 / prob : r;
}

void *hc_agent_sample(void *p, size_t usize, size_t charged)
{
	(void)p;
	if (hc_prof_busy)
		return NULL;
	hc_prof_busy = 1;
	uintptr_t frames[HC_MAX_FRAMES];
	unsigned n = hc_unwind(frames, HC_MAX_FRAMES);
	double weight = sample_weight(charged);
	hc_sample_t *rec = hc_meta_alloc(sizeof *rec);
	/* vDSO: no system call; the time is for lifetimes and prof_recent */
	uint64_t now = hc_opt.prof_lifetimes || hc_recent_max() ? hc_shm_mono_ns() : 0;
	hc_mutex_lock(&hc_prof_lock);
	hc_thread_t *th = thread_get(&tsd);
	hc_stack_t *s = th && rec ? stack_get(frames, n) : NULL;
	hc_tctx_t *c = s ? tctx_get(s, th) : NULL;
	if (c != NULL) {
		double wb = weight * (double)usize;
		c->cnt.curobjs++;
		c->cnt.curbytes += usize;
		c->cnt.accumobjs++;
		c->cnt.accumbytes += usize;
		c->cnt.w_curobjs += weight;
		c->cnt.w_curbytes += wb;
		c->cnt.w_accumobjs += weight;
		c->cnt.w_accumbytes += wb;
		rec->tctx = c;
		rec->prev = NULL;
		rec->next = c->samples;
		if (c->samples)
			c->samples->prev = rec;
		c->samples = rec;
		rec->usize = usize;
		rec->weight = weight;
		rec->charged = charged;
		rec->reset_epoch = reset_epoch;
		rec->born_ns = now;
		rec->recent = NULL;
		if (hc_recent_max() != 0)
			hc_recent_alloc(rec, s, th, now);
	}
	hc_mutex_unlock(&hc_prof_lock);
	if (c == NULL && rec) {
		hc_meta_free(rec, sizeof *rec);
		rec = NULL;
	}
	if (rec)
		__atomic_add_fetch(&samples_total, 1, __ATOMIC_RELAXED);
	hc_prof_busy = 0;
	return rec;
}

/* 0-3 for 0-3 ns; then for a lifetime of b bits whose top three are m
 * (4 to 7), 4 (b - 3) + m: [m, m + 1) * 2^(b - 3) ns, a quarter of an
 * octave (heapctl/report reads it back the same way). */
unsigned hc_life_bucket(uint64_t ns)
{
	if (ns < 4)
		return (unsigned)ns;
	unsigned b = 64 - (unsigned)__builtin_clzll(ns);
	unsigned i = 4 * (b - 3) + (unsigned)(ns >> (b - 3));
	return i < HC_LIFE_BUCKETS ? i : HC_LIFE_BUCKETS - 1;
}

/* A sampled object of stack s lived ns nanoseconds.  Under hc_prof_lock. */
static void life_add(hc_stack_t *s, uint64_t ns)
{
	hc_life_t *l = s->life;
	if (l == NULL && (l = s->life = hc_meta_alloc(sizeof *l)) == NULL)
		return;
	if (l->epoch != reset_epoch) {
		memset(l, 0, sizeof *l);
		l->epoch = reset_epoch;
	}
	l->frees++;
	l->lt_1ms += ns < 1000000u;
	l->lt_1s += ns < 1000000000u;
	l->lt_1min += ns < 60000000000u;
	l->hist[hc_life_bucket(ns)]++;
}

void hc_agent_unsample(void *r)
{
	hc_sample_t *rec = r;
	uint64_t now = rec->born_ns ? hc_shm_mono_ns() : 0;
	/* one of the prof_recent entries: where it is freed, unwound before
	 * the lock (the entry may be overwritten meanwhile: then unused) */
	uintptr_t frames[HC_MAX_FRAMES];
	unsigned nf = 0;
	if (__atomic_load_n(&rec->recent, __ATOMIC_RELAXED) != NULL && !hc_prof_busy) {
		hc_prof_busy = 1;
		nf = hc_unwind(frames, HC_MAX_FRAMES);
		hc_prof_busy = 0;
	}
	hc_mutex_lock(&hc_prof_lock);
	if (rec->recent != NULL)
		hc_recent_free(rec, nf ? stack_get(frames, nf) : NULL, thread_get(&tsd), now);
	int64_t pending = __atomic_load_n(&rec->pending, __ATOMIC_RELAXED);
	if (pending)
		record_update(rec, (uint64_t)((int64_t)rec->usize + pending), rec->weight);
	if (rec->prev) rec->prev->next = rec->next; else rec->tctx->samples = rec->next;
	if (rec->next) rec->next->prev = rec->prev;
	if (rec->reset_epoch == reset_epoch) {
		hc_cnt_t *c = &rec->tctx->cnt;
		c->curobjs--;
		c->curbytes -= rec->usize;
		c->w_curobjs -= rec->weight;
		c->w_curbytes -= rec->weight * (double)rec->usize;
		if (c->curobjs == 0)      /* keep the floating sums exact at zero */
			c->w_curobjs = c->w_curbytes = 0;
		if (hc_opt.prof_lifetimes && rec->born_ns)
			life_add(rec->tctx->stack, now > rec->born_ns ? now - rec->born_ns : 0);
	}
	tctx_release(rec->tctx);
	hc_mutex_unlock(&hc_prof_lock);
	hc_meta_free(rec, sizeof *rec);
}

/* Fold a record's pending bytes into its counts, with a new weight.
 * Under hc_prof_lock. */
static void record_update(hc_sample_t *rec, uint64_t size, double w)
{
	if (rec->reset_epoch == reset_epoch) {
		hc_cnt_t *c = &rec->tctx->cnt;
		c->curbytes += size - rec->usize;
		c->w_curobjs += w - rec->weight;
		c->w_curbytes += w * (double)size - rec->weight * (double)rec->usize;
		if (size > rec->usize) {
			c->accumbytes += size - rec->usize;
			c->w_accumbytes += w * (double)(size - rec->usize);
		}
	}
	rec->usize = size;
	rec->weight = w;
	__atomic_store_n(&rec->pending, 0, __ATOMIC_RELAXED);
}

/*
 * A sampled object grew or shrank in place (or moved, keeping its record).
 * Its chance of having been sampled is that of the most bytes it was ever
 * charged, so the weight follows the charge and the counts follow both.
 * A buffer appended to a few bytes at a time changes size on every call:
 * those changes wait in rec->pending (no lock) until they add up to 1/64 of
 * the size or the charge grows.  At lg_sample 0 every change is counted at
 * once.
 */
void hc_agent_resize(void *r, size_t size, size_t charged)
{
	hc_sample_t *rec = r;
	int64_t pending = (int64_t)size - (int64_t)rec->usize;
	uint64_t slack = rec->usize / 64;
	if (charged <= rec->charged && __atomic_load_n(&hc_prof.lg_sample, __ATOMIC_RELAXED) > 0 &&
	    (uint64_t)(pending < 0 ? -pending : pending) <= slack) {
		__atomic_store_n(&rec->pending, pending, __ATOMIC_RELAXED);
		return;
	}
	hc_mutex_lock(&hc_prof_lock);
	if (charged < rec->charged)
		charged = rec->charged;
	double w = charged == rec->charged ? rec->weight : sample_weight(charged);
	rec->charged = charged;
	record_update(rec, size, w);
	hc_mutex_unlock(&hc_prof_lock);
}

/* Forget every count; live sampled objects are no longer tracked (their
 * frees are recognised by the epoch).  lg >= 0 also sets a new rate. */
void hc_prof_reset(int lg)
{
	hc_mutex_lock(&hc_prof_lock);
	reset_epoch++;
	for (hc_stack_t *s = stacks_all; s; s = s->all_next)
		for (hc_tctx_t *c = s->tctxs; c; c = c->next) {
			memset(&c->cnt, 0, sizeof c->cnt);
			memset(&c->peak, 0, sizeof c->peak);
		}
	release_exited();
	hc_prof_check();
	hc_mutex_unlock(&hc_prof_lock);
	if (lg >= 0)
		hc_prof_set_lg_sample((unsigned)lg);
}

void hc_prof_set_lg_sample(unsigned lg)
{
	__atomic_store_n(&hc_prof.lg_sample, lg, __ATOMIC_RELAXED);
	hc_prof_rate_changed();
}

void hc_prof_rate_changed(void)
{
	if (__atomic_load_n(&hc_prof.active, __ATOMIC_RELAXED))
		enabled = true;
	__atomic_add_fetch(&rate_generation, 1, __ATOMIC_RELAXED);
	hc_heap_reset_countdowns();
}

void hc_prof_snapshot_peak(void)
{
	for (hc_stack_t *s = stacks_all; s; s = s->all_next)
		for (hc_tctx_t *c = s->tctxs, *next; c; c = next) {
			next = c->next;
			c->peak = c->cnt;
			tctx_release(c);
		}
}

bool hc_prof_thread_name_set(const char *name)
{
	size_t n = strlen(name);
	if (n >= HC_THREAD_NAME_MAX)
		n = HC_THREAD_NAME_MAX - 1;
	for (size_t i = 0; i < n; i++)       /* a name must stay one token */
		if (name[i] <= ' ' || name[i] == 0x7f)
			return false;
	hc_mutex_lock(&hc_prof_lock);
	memcpy(tsd.name, name, n);
	tsd.name[n] = 0;
	if (tsd.thread)
		memcpy(tsd.thread->name, tsd.name, sizeof tsd.name);
	hc_mutex_unlock(&hc_prof_lock);
	return true;
}

const char *hc_prof_thread_name_get(void) { return tsd.name; }
bool hc_prof_thread_active_get(void) { return thread_active(&tsd); }

void hc_prof_thread_active_set(bool on)
{
	tsd.active_set = true;
	tsd.active = on;
	if (tsd.thread)
		tsd.thread->active = on;
}

/* Unwinds first: a thread mid-unwind holds no profiler lock yet. */
/* Every lock of the agent, in the order of allocator/hc_lock.h. */
void hc_agent_fork_prepare(void)
{
	hc_control_fork_prepare(true);
	hc_unwind_fork_prepare();
	hc_dump_fork_prepare();
	hc_mutex_lock(&hc_prof_lock);
	hc_control_fork_prepare(false);
	hc_ctl_fork_prepare();
}

void hc_agent_fork_parent(void)
{
	hc_ctl_fork_parent();
	hc_control_fork_parent(false);
	hc_mutex_unlock(&hc_prof_lock);
	hc_dump_fork_parent();
	hc_unwind_fork_parent();
	hc_control_fork_parent(true);
}

void hc_agent_fork_child(void)
{
	hc_ctl_fork_child();
	hc_mutex_reinit(&hc_prof_lock);
	hc_dump_fork_child();
	hc_unwind_fork_child();
	/* the child's own thread keeps its record, with its new tid */
	if (tsd.thread)
		tsd.thread->tid = (int)syscall(SYS_gettid);
	/* last, once every lock of the agent is fresh: it starts the child's
	 * control thread, which takes these locks */
	hc_control_fork_child();
}
