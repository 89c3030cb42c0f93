/*
 * agent/profile.c - the profile's tables: stacks (deduplicated by hash),
 * threads, and per (stack, thread) counts with the sample records that
 * make them, all under hc_prof_lock and allocated with hc_meta_alloc,
 * never from the user's heap.
 *
 * prof.c decides what is sampled and records it here; dump.c, ctl.c,
 * control.c and explain.c read and reset the tables.  Nothing here calls
 * back into them (it uses only state.c's lock and settings), so the
 * tables are read by many files and depend on none of them.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

#define NBUCKETS 16384
static hc_stack_t **buckets; /* under hc_prof_lock */
static hc_stack_t *stacks_all;
static hc_thread_t *threads_all;
static size_t nexited; /* exited threads still listed */
static uint64_t next_thread_uid;
static uint64_t reset_epoch;
static uint64_t samples_total; /* atomic */

hc_stack_t *hc_prof_stacks(void)
{
	return stacks_all;
}
hc_thread_t *hc_prof_threads(void)
{
	return threads_all;
}
uint64_t hc_prof_reset_epoch(void)
{
	return reset_epoch;
}
uint64_t hc_prof_samples_total(void)
{
	return __atomic_load_n(&samples_total, __ATOMIC_RELAXED);
}
void hc_prof_samples_restart(void)
{
	__atomic_store_n(&samples_total, 0, __ATOMIC_RELAXED);
}

/* A new thread record for the calling thread.  Under hc_prof_lock. */
hc_thread_t *hc_prof_thread_add(bool active, const char *name)
{
	hc_thread_t *th = hc_meta_alloc(sizeof *th);
	if (th == NULL)
		return NULL;
	th->uid = next_thread_uid++;
	th->tid = (int)syscall(SYS_gettid);
	th->active = active;
	memcpy(th->name, name, sizeof th->name);
	th->next = threads_all;
	threads_all = th;
	return th;
}

/* The stack of these frames, made if new.  Under hc_prof_lock. */
static hc_stack_t *stack_get(const uintptr_t *frames, unsigned n)
{
	if (buckets == NULL) {
		buckets = hc_meta_alloc(NBUCKETS * sizeof *buckets);
		if (buckets == NULL)
			return NULL;
	}
	uint64_t h = hc_shm_hash_frames(frames, n);
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

hc_stack_t *hc_prof_stack_get(const uintptr_t *frames, unsigned n)
{
	return stack_get(frames, n);
}

/* th's counts at s, made if new.  Under hc_prof_lock. */
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
	if (c->prev)
		c->prev->next = c->next;
	else
		c->stack->tctxs = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->th_prev)
		c->th_prev->th_next = c->th_next;
	else
		th->tctxs = c->th_next;
	if (c->th_next)
		c->th_next->th_prev = c->th_prev;
	hc_meta_free(c, sizeof *c);
	if (th->tctxs == NULL)
		thread_free(th);
}

/* th's thread is exiting: its record goes now, or with its last count. */
void hc_prof_thread_exit(hc_thread_t *th)
{
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
		HC_ASSERT(s->nframes <= HC_MAX_FRAMES && s->hash == hc_shm_hash_frames(s->frames, s->nframes));
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

/* Fold a record's pending bytes into its counts, with a new weight.
 * Under hc_prof_lock. */
void hc_prof_record_update(hc_sample_t *rec, uint64_t size, double w)
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

/* rec (new) is a sample of usize bytes taken by th at stack s, of this
 * weight, charged these bytes, at now: its counts, made if new, or NULL
 * if there is no memory for them (or no s).  Under hc_prof_lock. */
hc_tctx_t *hc_prof_record_add(hc_stack_t *s, hc_thread_t *th, hc_sample_t *rec, size_t usize, double weight,
    size_t charged, uint64_t now)
{
	hc_tctx_t *c = s ? tctx_get(s, th) : NULL;
	if (c == NULL)
		return NULL;
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
	__atomic_add_fetch(&samples_total, 1, __ATOMIC_RELAXED);
	return c;
}

/* rec's object is freed at now: out of its counts (and into its stack's
 * lifetimes).  Under hc_prof_lock; the caller frees rec. */
void hc_prof_record_remove(hc_sample_t *rec, uint64_t now)
{
	int64_t pending = __atomic_load_n(&rec->pending, __ATOMIC_RELAXED);
	if (pending)
		hc_prof_record_update(rec, (uint64_t)((int64_t)rec->usize + pending), rec->weight);
	if (rec->prev)
		rec->prev->next = rec->next;
	else
		rec->tctx->samples = rec->next;
	if (rec->next)
		rec->next->prev = rec->prev;
	if (rec->reset_epoch == reset_epoch) {
		hc_cnt_t *c = &rec->tctx->cnt;
		c->curobjs--;
		c->curbytes -= rec->usize;
		c->w_curobjs -= rec->weight;
		c->w_curbytes -= rec->weight * (double)rec->usize;
		if (c->curobjs == 0) /* keep the floating sums exact at zero */
			c->w_curobjs = c->w_curbytes = 0;
		if (hc_opt.prof_lifetimes && rec->born_ns)
			life_add(rec->tctx->stack, now > rec->born_ns ? now - rec->born_ns : 0);
	}
	tctx_release(rec->tctx);
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

void hc_prof_snapshot_peak(void)
{
	for (hc_stack_t *s = stacks_all; s; s = s->all_next)
		for (hc_tctx_t *c = s->tctxs, *next; c; c = next) {
			next = c->next;
			c->peak = c->cnt;
			tctx_release(c);
		}
}
