/*
 * heapctl/report/index.c - the one hash index of the report engine.
 *
 * Every table of the engine (interned strings, addresses to locations,
 * rows by name, pprof's strings, functions and locations, the flame
 * graph's names) keeps its entries in an array of its own, in the order
 * they were added; the index maps a key to the entry's position.  It is
 * open addressing with linear probing over the positions, at most half
 * full, and it keeps each entry's hash, so growing never looks at a key.
 * The caller says what a key is by its hash and an equality test.
 *
 * Interned strings (rp_intern) are one pointer per string: tables keyed by
 * an interned name hash and compare the pointer (rp_hash_u64), never the
 * characters.
 */
#include <stdint.h>
#include <stdlib.h>

#include "rp_internal.h"

uint64_t rp_hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 1099511628211ull;
	return h ^ (h >> 32);
}

static int grow(rp_index_t *ix)
{
	size_t nslot = ix->nslot ? ix->nslot * 2 : 1024;
	uint32_t *slot = calloc(nslot, sizeof *slot);
	if (slot == NULL)
		return -1;
	for (size_t id = 0; id < ix->n; id++) {
		size_t i = ix->hash[id] & (nslot - 1);
		while (slot[i])
			i = (i + 1) & (nslot - 1);
		slot[i] = (uint32_t)id + 1;
	}
	free(ix->slot);
	ix->slot = slot;
	ix->nslot = nslot;
	return 0;
}

int64_t rp_index_find(rp_index_t *ix, uint64_t hash, rp_index_eq *eq, const void *ctx, bool *added)
{
	*added = false;
	if (ix->n >= UINT32_MAX - 1)
		return -1;
	if ((ix->n + 1) * 2 > ix->nslot && grow(ix) != 0)
		return -1;
	size_t i = hash & (ix->nslot - 1);
	for (; ix->slot[i]; i = (i + 1) & (ix->nslot - 1)) {
		uint32_t id = ix->slot[i] - 1;
		if (ix->hash[id] == hash && eq(ctx, id))
			return id;
	}
	if (ix->n == ix->cap) {
		size_t cap = ix->cap ? ix->cap * 2 : 1024;
		uint64_t *h = realloc(ix->hash, cap * sizeof *h);
		if (h == NULL)
			return -1;
		ix->hash = h;
		ix->cap = cap;
	}
	ix->hash[ix->n] = hash;
	ix->slot[i] = (uint32_t)ix->n + 1;
	*added = true;
	return (int64_t)ix->n++;
}

void rp_index_free(rp_index_t *ix)
{
	free(ix->slot);
	free(ix->hash);
	*ix = (rp_index_t){ 0 };
}
