/*
 * agent/explain.c - the allocator's side of `heapctl explain` and `heapctl
 * purge`: what the allocator knows about its memory, handed out through the
 * mailbox.
 *
 * heapctl explain reads the operating system's view (/proc/PID/smaps) from
 * outside and asks the target for the rest with HC_CMD_STATS: its totals,
 * what the profile attributes, each small size class's pages, and the
 * ranges it mapped for objects, so that heapctl can find those in smaps and
 * say which resident pages are the allocator's.  The records do not fit in
 * one reply, so the first request (arg 0) takes a snapshot and the ones that
 * follow read it; a client that starts again gets a new one.  Only the one
 * thread that serves the mailbox at a time (control.c) gets here.
 */
#define _GNU_SOURCE
#include <string.h>

#include "agent.h"

static hc_shm_stat_t *snap HC_FORK_DATA; /* hc_meta_alloc'd */
static size_t snap_cap, snap_n;

typedef struct {
	hc_shm_stat_t *out;
	size_t n, cap;
} ranges_t;

static bool range_add(void *arg, uintptr_t start, uintptr_t end, unsigned kind)
{
	ranges_t *r = arg;
	if (r->out != NULL && r->n < r->cap) {
		hc_shm_stat_t *s = &r->out[r->n];
		memset(s, 0, sizeof *s);
		s->kind = HC_STAT_RANGE;
		s->v[0] = start;
		s->v[1] = end;
		s->v[2] = kind;
	}
	r->n++;
	return r->out == NULL || r->n < r->cap;
}

/* Room for n records (the old snapshot goes). */
static bool snap_reserve(size_t n)
{
	if (n <= snap_cap)
		return true;
	size_t cap = n + n / 2 + 16;
	hc_shm_stat_t *p = hc_meta_alloc(cap * sizeof *p);
	if (p == NULL)
		return false;
	hc_meta_free(snap, snap_cap * sizeof *snap);
	snap = p;
	snap_cap = cap;
	return true;
}

static hc_shm_stat_t *rec(unsigned kind)
{
	hc_shm_stat_t *s = &snap[snap_n++];
	memset(s, 0, sizeof *s);
	s->kind = kind;
	return s;
}

static bool take_snapshot(void)
{
	ranges_t count = { NULL, 0, 0 };
	hc_alloc_ranges(range_add, &count);
	/* a few more ranges may appear between the count and the copy */
	size_t fixed = 4 + HC_NCLASSES_MAX;
	if (!snap_reserve(fixed + count.n + 64))
		return false;
	snap_n = 0;
	hc_stats_t st;
	hc_stats_refresh(&st);
	hc_shm_stat_t *t = rec(HC_STAT_TOTAL);
	t->v[0] = st.allocated;
	t->v[1] = st.active;
	t->v[2] = st.metadata;
	t->v[3] = st.dirty;
	t->v[4] = st.retained;
	t->v[5] = hc_alloc_kind();
	double bytes, objs;
	uint64_t promoted;
	hc_dump_live(&bytes, &objs, &promoted);
	t = rec(HC_STAT_PROF);
	t->v[0] = (uint64_t)(bytes + 0.5);
	t->v[1] = (uint64_t)(objs + 0.5);
	t->v[2] = hc_prof_samples_total();
	t->v[3] = hc_prof.lg_sample;
	t->v[4] = hc_alloc_kind() == HC_ALLOC_HEAPCTL ? promoted : 0;
	hc_class_stats_t cls[HC_NCLASSES_MAX];
	unsigned nc = hc_class_stats(cls, HC_NCLASSES_MAX);
	for (unsigned i = 0; i < nc; i++) {
		if (cls[i].pages == 0)
			continue;
		t = rec(HC_STAT_SMALL);
		t->size = (uint32_t)cls[i].size;
		t->v[0] = cls[i].pages;
		t->v[1] = cls[i].carved;
		t->v[2] = cls[i].used;
		t->v[3] = cls[i].active;
		t->v[4] = cls[i].sparse_pages;
		t->v[5] = cls[i].sparse_used;
		t->v[6] = cls[i].sparse_active;
	}
	t = rec(HC_STAT_LARGE);
	t->v[0] = st.large_allocated;
	t = rec(HC_STAT_HUGE);
	t->v[0] = st.huge_allocated;
	t->v[1] = st.nhuge;
	ranges_t r = { snap + snap_n, 0, snap_cap - snap_n };
	hc_alloc_ranges(range_add, &r);
	snap_n += r.n < r.cap ? r.n : r.cap;
	return true;
}

void hc_explain_stats(const hc_shm_req_t *q, hc_shm_rep_t *rep)
{
	rep->code = HC_REP_OK;
	if (q->arg == 0 && !take_snapshot()) {
		rep->code = HC_REP_FAILED;
		hc_shm_strlcpy(rep->text, "no memory for the statistics", sizeof rep->text);
		return;
	}
	if (q->arg < 0 || (size_t)q->arg > snap_n) {
		rep->code = HC_REP_INVALID;
		hc_shm_strlcpy(rep->text, "no such record: ask for record 0 first", sizeof rep->text);
		return;
	}
	size_t k = snap_n - (size_t)q->arg;
	if (k > HC_SHM_STATS_PER_REPLY)
		k = HC_SHM_STATS_PER_REPLY;
	memset(rep->text, 0, sizeof rep->text);
	memcpy(rep->text, snap + q->arg, k * sizeof *snap);
	rep->value = snap_n;
}

void hc_explain_purge(hc_shm_rep_t *rep)
{
	hc_stats_t st;
	hc_stats_refresh(&st);
	hc_purge_all();
	rep->code = HC_REP_OK;
	rep->value = st.dirty;
	rep->text[0] = 0;
}
