/*
 * heapctl/trace/stacks.c - the stack table and the live sampled objects of
 * `heapctl trace`: each distinct stack once (hashed by its frames) with
 * its weighted sums, and an open-addressing table of the sampled pointers
 * still live, so that a free takes its sample's weight off its stack.
 */
#include <stdlib.h>
#include <string.h>

#include "tr_internal.h"

typedef struct obj_s {
	uint64_t ptr; /* 0: empty, 1: deleted                       */
	stack_t_ *stack;
	double weight;
	uint64_t size;
} obj_t;

/* Invariants: tab_n and live_cap are 0 or powers of two, grown before
 * they are half full; live_used counts the live and deleted slots,
 * live_n the live ones. */
static struct {
	stack_t_ **tab, *all;
	size_t tab_n, nstacks;
	obj_t *live;
	size_t live_cap, live_used, live_n;
} S;

stack_t_ *tr_stack_get(const uint64_t *f, unsigned n)
{
	if (S.nstacks * 2 >= S.tab_n) {
		size_t nn = S.tab_n ? S.tab_n * 2 : 4096;
		stack_t_ **nt = calloc(nn, sizeof *nt);
		if (nt == NULL)
			return NULL;
		for (stack_t_ *s = S.all; s; s = s->all_next) {
			size_t i = s->hash & (nn - 1);
			s->next = nt[i];
			nt[i] = s;
		}
		free(S.tab);
		S.tab = nt;
		S.tab_n = nn;
	}
	uint64_t h = hc_shm_hash_frames(f, n);
	size_t i = h & (S.tab_n - 1);
	for (stack_t_ *s = S.tab[i]; s; s = s->next)
		if (s->hash == h && s->n == n && memcmp(s->frames, f, n * sizeof *f) == 0)
			return s;
	stack_t_ *s = calloc(1, sizeof *s + n * sizeof *f);
	if (s == NULL)
		return NULL;
	s->hash = h;
	s->n = n;
	memcpy(s->frames, f, n * sizeof *f);
	s->next = S.tab[i];
	S.tab[i] = s;
	s->all_next = S.all;
	S.all = s;
	S.nstacks++;
	return s;
}

static size_t live_slot(uint64_t ptr)
{
	uint64_t h = ptr * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (S.live_cap - 1);
}

static obj_t *live_find(uint64_t ptr)
{
	if (S.live_cap == 0)
		return NULL;
	for (size_t i = live_slot(ptr);; i = (i + 1) & (S.live_cap - 1)) {
		if (S.live[i].ptr == ptr)
			return &S.live[i];
		if (S.live[i].ptr == 0)
			return NULL;
	}
}

int tr_live_put(uint64_t ptr, stack_t_ *s, uint64_t size, double w)
{
	if ((S.live_used + 1) * 2 > S.live_cap) {
		size_t nc = S.live_cap ? S.live_cap : 4096;
		while ((S.live_n + 1) * 4 > nc)
			nc *= 2;
		obj_t *old = S.live, *nl = calloc(nc, sizeof *nl);
		if (nl == NULL)
			return -1;
		size_t oc = S.live_cap;
		S.live = nl;
		S.live_cap = nc;
		S.live_used = 0;
		for (size_t i = 0; i < oc; i++)
			if (old[i].ptr > 1) {
				size_t j = live_slot(old[i].ptr);
				while (nl[j].ptr)
					j = (j + 1) & (nc - 1);
				nl[j] = old[i];
				S.live_used++;
			}
		free(old);
	}
	obj_t *o = live_find(ptr);
	if (o == NULL) {
		size_t i = live_slot(ptr);
		while (S.live[i].ptr > 1)
			i = (i + 1) & (S.live_cap - 1);
		o = &S.live[i];
		if (o->ptr == 0)
			S.live_used++;
		S.live_n++;
	} else {
		/* a pointer we missed the free of: its old sample ends here */
		o->stack->w_curobjs -= o->weight;
		o->stack->w_curbytes -= o->weight * (double)o->size;
	}
	*o = (obj_t){ ptr, s, w, size };
	return 0;
}

stack_t_ *tr_stacks(void)
{
	return S.all;
}

size_t tr_nstacks(void)
{
	return S.nstacks;
}

bool tr_live_free(uint64_t ptr)
{
	obj_t *o = live_find(ptr);
	if (o == NULL)
		return false;
	o->stack->w_curobjs -= o->weight;
	o->stack->w_curbytes -= o->weight * (double)o->size;
	if (o->stack->w_curobjs < 0.5) {
		o->stack->w_curobjs = 0;
		o->stack->w_curbytes = 0;
	}
	o->ptr = 1;
	S.live_n--;
	return true;
}
