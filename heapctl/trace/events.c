/*
 * heapctl/trace/events.c - the records of `heapctl trace`'s ring buffer: a
 * sample is unwound and weighted (a page fault counts at once; a sampled
 * call waits for its return, which gives the pointer), a free of a
 * sampled pointer takes its weight back; with --json, each is one line.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tr_internal.h"

/* A sample whose call has not returned yet (--malloc): one per thread. */
typedef struct pend_s {
	uint32_t tid;
	stack_t_ *stack;
	uint64_t size;
	double weight;
} pend_t;

static struct {
	pend_t *pend;
	size_t npend, pend_cap;
} P;

static double weight_of(uint64_t size)
{
	double p = -expm1(-(double)(size ? size : 1) / T.period);
	return p > 0 ? 1 / p : 1;
}

/* A page or an object sampled, as a line: its address (key), its bytes
 * (bytes_key), weight and frames. */
static void json_sample(const char *event, uint32_t tid, const char *key, uint64_t addr, const char *bytes_key,
    uint64_t bytes, double w, const stack_t_ *s)
{
	json_t j;
	tr_json_event(&j, event);
	json_u64(&j, "tid", tid);
	tr_json_hex(&j, key, addr);
	json_u64(&j, bytes_key, bytes);
	tr_json_num(&j, "weight", "%.3f", w);
	json_arr(&j, "frames");
	for (unsigned i = 0; i < s->n; i++)
		tr_json_hex(&j, NULL, s->frames[i]);
	json_end(&j);
	json_end(&j);
}

static pend_t *pend_of(uint32_t tid, bool make)
{
	for (size_t i = 0; i < P.npend; i++)
		if (P.pend[i].tid == tid)
			return &P.pend[i];
	if (!make)
		return NULL;
	if (P.npend == P.pend_cap) {
		size_t nc = P.pend_cap ? P.pend_cap * 2 : 64;
		pend_t *np = realloc(P.pend, nc * sizeof *np);
		if (np == NULL)
			return NULL;
		P.pend = np;
		P.pend_cap = nc;
	}
	P.pend[P.npend] = (pend_t){ .tid = tid };
	return &P.pend[P.npend++];
}

static void on_sample(const struct tr_sample *e)
{
	uint64_t f[MAX_FRAMES];
	unsigned n = tr_unwind(e, f);
	stack_t_ *s = tr_stack_get(f, n);
	if (s == NULL)
		return;
	T.samples++;
	double w = weight_of(e->size);
	if (T.o.mode == T_FAULTS) {
		/* a page, resident from now on as far as we can tell */
		s->w_curobjs += w;
		s->w_curbytes += w * (double)e->size;
		s->w_accumobjs += w;
		s->w_accumbytes += w * (double)e->size;
		if (T.json)
			json_sample("fault", e->tid, "addr", e->addr, "bytes", e->size, w, s);
		return;
	}
	pend_t *p = pend_of(e->tid, true);
	if (p) {
		p->stack = s;
		p->size = e->size;
		p->weight = w * T.scale;
	}
}

static void on_ret(const struct tr_small *e)
{
	pend_t *p = pend_of(e->tid, false);
	if (p == NULL || p->stack == NULL)
		return;
	stack_t_ *s = p->stack;
	p->stack = NULL;
	if (e->ptr == 0)
		return; /* the allocation failed */
	s->w_accumobjs += p->weight;
	s->w_accumbytes += p->weight * (double)p->size;
	s->w_curobjs += p->weight;
	s->w_curbytes += p->weight * (double)p->size;
	tr_live_put(e->ptr, s, p->size, p->weight);
	if (T.json)
		json_sample("alloc", e->tid, "ptr", e->ptr, "size", p->size, p->weight, s);
}

static void on_free(const struct tr_small *e)
{
	if (!tr_live_free(e->ptr))
		return;
	T.frees++;
	if (T.json) {
		json_t j;
		tr_json_event(&j, "free");
		json_u64(&j, "tid", e->tid);
		tr_json_hex(&j, "ptr", e->ptr);
		json_end(&j);
	}
}

int tr_on_event(void *ctx, void *data, size_t len)
{
	uint32_t kind;
	if (len < sizeof kind)
		return 0;
	memcpy(&kind, data, sizeof kind);
	if (kind == TR_SAMPLE && len >= sizeof(struct tr_sample))
		on_sample(data);
	else if (kind == TR_RET && len >= sizeof(struct tr_small))
		on_ret(data);
	else if (kind == TR_FREE && len >= sizeof(struct tr_small))
		on_free(data);
	return 0;
}

/* The probes are gone: no return will come for the calls sampled. */
void tr_pend_drop(void)
{
	for (size_t i = 0; i < P.npend; i++)
		P.pend[i].stack = NULL;
}
