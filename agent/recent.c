/*
 * agent/recent.c - jemalloc's experimental.prof_recent: the last
 * experimental.prof_recent.alloc_max sampled allocations, each with its
 * size, thread, time and stack, and once freed the freeing thread, time and
 * stack, dumped by experimental.prof_recent.alloc_dump in jemalloc's own
 * JSON (the tools written for jemalloc read it unchanged).
 *
 * The records are a ring under hc_prof_lock, filled by hc_agent_sample and
 * completed by hc_agent_unsample (prof.c); a sample record points at its
 * entry while it is in the ring, and the entry back at it, so the free
 * finds its entry and an entry that is overwritten forgets its sample.
 * alloc_max is 0 by default, as in jemalloc: nothing is kept and nothing
 * costs.  -1 (jemalloc: no limit) keeps the last HC_RECENT_UNLIMITED.
 *
 * The dump copies the entries out under the lock and writes them without
 * it, through the caller's write callback (which may allocate, and so
 * sample, and so take the lock).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

#define HC_RECENT_UNLIMITED 65536

struct hc_recent_s {
	hc_sample_t *sample; /* while live and in the ring              */
	uint64_t usize;
	uint64_t alloc_uid, alloc_ns, dalloc_uid, dalloc_ns;
	const hc_stack_t *alloc_stack, *dalloc_stack;
	bool released;
	char alloc_name[HC_THREAD_NAME_MAX], dalloc_name[HC_THREAD_NAME_MAX];
};

static hc_recent_t *ring;                  /* hc_meta_alloc'd; under hc_prof_lock */
static size_t ring_cap, ring_n, ring_head; /* head: the oldest */
static ssize_t recent_max;                 /* as set; atomic reads                  */

ssize_t hc_recent_max(void)
{
	return __atomic_load_n(&recent_max, __ATOMIC_RELAXED);
}

static void forget(hc_recent_t *e)
{
	if (e->sample)
		e->sample->recent = NULL;
	e->sample = NULL;
}

int hc_recent_set_max(ssize_t max)
{
	if (max < -1)
		return EINVAL;
	size_t cap = max == -1 ? HC_RECENT_UNLIMITED : (size_t)max;
	if (cap > HC_RECENT_UNLIMITED)
		cap = HC_RECENT_UNLIMITED;
	hc_recent_t *fresh = cap ? hc_meta_alloc(cap * sizeof *fresh) : NULL;
	if (cap && fresh == NULL)
		return ENOMEM;
	hc_mutex_lock(&hc_prof_lock);
	/* the newest min(n, cap) entries stay, oldest first */
	size_t keep = ring_n < cap ? ring_n : cap;
	for (size_t i = 0; i < ring_n; i++) {
		hc_recent_t *e = &ring[(ring_head + i) % ring_cap];
		if (i < ring_n - keep) {
			forget(e);
			continue;
		}
		hc_recent_t *d = &fresh[i - (ring_n - keep)];
		*d = *e;
		if (d->sample)
			d->sample->recent = d;
	}
	hc_recent_t *old = ring;
	size_t old_cap = ring_cap;
	ring = fresh;
	ring_cap = cap;
	ring_n = keep;
	ring_head = 0;
	__atomic_store_n(&recent_max, max, __ATOMIC_RELAXED);
	hc_mutex_unlock(&hc_prof_lock);
	hc_meta_free(old, old_cap * sizeof *old);
	return 0;
}

static void name_of(char *out, const hc_thread_t *th)
{
	memcpy(out, th && th->name[0] ? th->name : "", HC_THREAD_NAME_MAX);
	out[HC_THREAD_NAME_MAX - 1] = 0;
}

void hc_recent_alloc(hc_sample_t *rec, const hc_stack_t *s, const hc_thread_t *th, uint64_t now)
{
	if (ring_cap == 0)
		return;
	hc_recent_t *e;
	if (ring_n < ring_cap) {
		e = &ring[(ring_head + ring_n++) % ring_cap];
	} else {
		e = &ring[ring_head]; /* the oldest goes */
		ring_head = (ring_head + 1) % ring_cap;
		forget(e);
	}
	memset(e, 0, sizeof *e);
	e->sample = rec;
	e->usize = rec->usize;
	e->alloc_uid = th->uid;
	e->alloc_ns = now;
	e->alloc_stack = s;
	name_of(e->alloc_name, th);
	rec->recent = e;
}

void hc_recent_free(hc_sample_t *rec, const hc_stack_t *s, const hc_thread_t *th, uint64_t now)
{
	hc_recent_t *e = rec->recent;
	if (e == NULL)
		return;
	e->sample = NULL;
	e->released = true;
	e->usize = (uint64_t)((int64_t)rec->usize + __atomic_load_n(&rec->pending, __ATOMIC_RELAXED));
	e->dalloc_uid = th ? th->uid : 0;
	e->dalloc_ns = now;
	e->dalloc_stack = s;
	name_of(e->dalloc_name, th);
	rec->recent = NULL;
}

/* ---- the dump --------------------------------------------------------- */

typedef struct {
	void (*cb)(void *, const char *);
	void *opaque;
	char buf[4096];
	size_t len;
} out_t;

static void flush(out_t *o)
{
	if (o->len == 0)
		return;
	o->buf[o->len] = 0;
	if (o->cb) {
		o->cb(o->opaque, o->buf);
	} else { /* jemalloc's default: malloc_message */
		hc_stderr(o->buf, o->len);
	}
	o->len = 0;
}

static void put(out_t *o, const char *s)
{
	for (; *s; s++) {
		if (o->len + 1 >= sizeof o->buf)
			flush(o);
		o->buf[o->len++] = *s;
	}
}

static void put_u64(out_t *o, uint64_t v)
{
	char b[24];
	hc_fmt_u64(b, v);
	put(o, b);
}

/* a JSON string of a thread name: printable ASCII, escaped */
static void put_str(out_t *o, const char *s)
{
	put(o, "\"");
	for (; *s; s++) {
		char c[3] = { *s, 0, 0 };
		if (*s == '"' || *s == '\\') {
			c[0] = '\\';
			c[1] = *s;
		} else if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) {
			c[0] = '?';
		}
		put(o, c);
	}
	put(o, "\"");
}

static void put_trace(out_t *o, const char *key, const hc_stack_t *s)
{
	put(o, ",\"");
	put(o, key);
	put(o, "\":[");
	for (unsigned i = 0; s && i < s->nframes; i++) {
		static const char hex[] = "0123456789abcdef";
		char b[24] = "\"0x";
		size_t n = 3;
		uintptr_t v = s->frames[i];
		int shift = 60;
		while (shift > 0 && ((v >> shift) & 0xf) == 0)
			shift -= 4;
		for (; shift >= 0; shift -= 4)
			b[n++] = hex[(v >> shift) & 0xf];
		b[n++] = '"';
		b[n] = 0;
		if (i)
			put(o, ",");
		put(o, b);
	}
	put(o, "]");
}

int hc_recent_dump(void (*cb)(void *, const char *), void *opaque)
{
	hc_mutex_lock(&hc_prof_lock);
	size_t n = ring_n;
	hc_recent_t *copy = n ? hc_meta_alloc(n * sizeof *copy) : NULL;
	if (n && copy == NULL) {
		hc_mutex_unlock(&hc_prof_lock);
		return ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		copy[i] = ring[(ring_head + i) % ring_cap];
	ssize_t max = recent_max;
	unsigned lg = hc_prof.lg_sample;
	hc_mutex_unlock(&hc_prof_lock);

	out_t *o = hc_meta_alloc(sizeof *o);
	if (o == NULL) {
		hc_meta_free(copy, n * sizeof *copy);
		return ENOMEM;
	}
	o->cb = cb;
	o->opaque = opaque;
	put(o, "{\"sample_interval\":");
	put_u64(o, lg < 64 ? (uint64_t)1 << lg : 0);
	put(o, ",\"recent_alloc_max\":");
	if (max < 0)
		put(o, "-");
	put_u64(o, max < 0 ? (uint64_t)-max : (uint64_t)max);
	put(o, ",\"recent_alloc\":[");
	for (size_t i = 0; i < n; i++) {
		const hc_recent_t *e = &copy[i];
		put(o, i ? ",{\"size\":" : "{\"size\":");
		put_u64(o, e->usize);
		put(o, ",\"usize\":");
		put_u64(o, e->usize);
		put(o, e->released ? ",\"released\":true" : ",\"released\":false");
		put(o, ",\"alloc_thread_uid\":");
		put_u64(o, e->alloc_uid);
		if (e->alloc_name[0]) {
			put(o, ",\"alloc_thread_name\":");
			put_str(o, e->alloc_name);
		}
		put(o, ",\"alloc_time\":");
		put_u64(o, e->alloc_ns);
		put_trace(o, "alloc_trace", e->alloc_stack);
		if (e->released) {
			put(o, ",\"dalloc_thread_uid\":");
			put_u64(o, e->dalloc_uid);
			if (e->dalloc_name[0]) {
				put(o, ",\"dalloc_thread_name\":");
				put_str(o, e->dalloc_name);
			}
			put(o, ",\"dalloc_time\":");
			put_u64(o, e->dalloc_ns);
			put_trace(o, "dalloc_trace", e->dalloc_stack);
		}
		put(o, "}");
	}
	put(o, "]}");
	flush(o);
	hc_meta_free(o, sizeof *o);
	hc_meta_free(copy, n * sizeof *copy);
	return 0;
}
