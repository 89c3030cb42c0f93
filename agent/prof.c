/*
 * agent/prof.c - sampling: which allocations are sampled, with what weight.
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
 * The tables a sample is counted in (profile.c) are under one lock,
 * hc_prof_lock: sampling at the default rate is rare enough that it is not
 * contended; the unwinding happens before taking it.
 *
 * This file only samples: the countdown (hc_agent_event), the unwinding
 * and weighing of a sample, and each thread's own sampling state.  What a
 * sample is counted in, the tables, is profile.c's; the settings and the
 * lock are state.c's; starting, forking and stopping are lifecycle.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "hc_math.h"

/* Per-thread sampling state. */
typedef struct {
	int64_t left; /* bytes until the next sample point */
	uint64_t rng;
	uint64_t generation; /* rate_generation the draw was made at */
	hc_thread_t *thread;
	bool active_set, active;
	char name[HC_THREAD_NAME_MAX];
} tsd_t;
static __thread tsd_t tsd __attribute__((tls_model("initial-exec")));

#define QUANTUM_IDLE ((int64_t)1 << 20) /* event spacing while not sampling */

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
	t->generation = __atomic_load_n(&hc_prof_rate_generation, __ATOMIC_RELAXED);
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
		return 1; /* the agent's own allocations: ask again right after */
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
		t->generation = 0; /* draw afresh when sampling resumes */
		return quantum;
	}
	if (t->rng == 0)
		t->rng = ((uint64_t)syscall(SYS_gettid) << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)t ^
		    0x9E3779B97F4A7C15ULL;
	if (t->generation != __atomic_load_n(&hc_prof_rate_generation, __ATOMIC_RELAXED))
		t->left = draw(t);
	t->left -= (int64_t)consumed;
	if (t->left <= 0) {
		*sample = true;
		t->left = draw(t);
	}
	int64_t next = t->left > 0 ? t->left : 1;
	return next < quantum ? next : quantum;
}

/* The calling thread's record, made at its first sample.  Under
 * hc_prof_lock. */
static hc_thread_t *thread_get(tsd_t *t)
{
	if (t->thread)
		return t->thread;
	t->thread = hc_prof_thread_add(thread_active(t), t->name);
	return t->thread;
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
	hc_stack_t *s = th && rec ? hc_prof_stack_get(frames, n) : NULL;
	hc_tctx_t *c = hc_prof_record_add(s, th, rec, usize, weight, charged, now);
	if (c != NULL && hc_recent_max() != 0)
		hc_recent_alloc(rec, s, th, now);
	hc_mutex_unlock(&hc_prof_lock);
	if (c == NULL && rec) {
		hc_meta_free(rec, sizeof *rec);
		rec = NULL;
	}
	hc_prof_busy = 0;
	return rec;
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
		hc_recent_free(rec, nf ? hc_prof_stack_get(frames, nf) : NULL, thread_get(&tsd), now);
	hc_prof_record_remove(rec, now);
	hc_mutex_unlock(&hc_prof_lock);
	hc_meta_free(rec, sizeof *rec);
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
	hc_prof_record_update(rec, size, w);
	hc_mutex_unlock(&hc_prof_lock);
}

bool hc_prof_thread_name_set(const char *name)
{
	size_t n = strlen(name);
	if (n >= HC_THREAD_NAME_MAX)
		n = HC_THREAD_NAME_MAX - 1;
	for (size_t i = 0; i < n; i++) /* a name must stay one token */
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

const char *hc_prof_thread_name_get(void)
{
	return tsd.name;
}
bool hc_prof_thread_active_get(void)
{
	return thread_active(&tsd);
}

void hc_prof_thread_active_set(bool on)
{
	tsd.active_set = true;
	tsd.active = on;
	if (tsd.thread)
		tsd.thread->active = on;
}

/* The calling thread is exiting (its heap's destructor). */
void hc_agent_thread_exit(void)
{
	hc_thread_t *th = tsd.thread;
	if (th == NULL)
		return;
	tsd.thread = NULL;
	hc_prof_thread_exit(th);
}

/* In a fork child (lifecycle.c): the child's own thread keeps its record,
 * with its new tid. */
void hc_prof_fork_child(void)
{
	if (tsd.thread)
		tsd.thread->tid = (int)syscall(SYS_gettid);
}
