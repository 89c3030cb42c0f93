/*
 * allocator/meta.c - memory for the profiler's own structures (stacks,
 * per-thread counters, sample records, dump buffers).
 *
 * Kept apart from the user's heap so a profile never profiles itself and
 * stats.metadata can count it: power-of-two classes from 16 B to 4 KiB carved
 * from 64 KiB mappings, with a free list per class; larger requests are
 * mapped directly.  One mutex; callers are slow paths only.
 *
 * Every mapping starts with a header on a list, so that heapctl explain
 * can tell metadata from the program's own anonymous memory in
 * /proc/PID/smaps (the kernel merges neighbouring mappings into one): a
 * span's first 64 bytes, a direct mapping's first page (what it returns
 * stays page-aligned).
 */
#define _GNU_SOURCE
#include <string.h>

#include "internal.h"

#define META_MIN_SHIFT 4
#define META_MAX_SHIFT 12
#define META_NCLASSES  (META_MAX_SHIFT - META_MIN_SHIFT + 1)
#define META_SPAN      ((size_t)64 << 10)

static hc_mutex_t meta_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_META, "meta_lock");
static hc_block_t *meta_free[META_NCLASSES];
static char *meta_bump, *meta_end;

typedef struct meta_map_s {
	struct meta_map_s *next, *prev;
	size_t size;
} meta_map_t;
static meta_map_t *meta_maps; /* under meta_lock */
#define META_SPAN_HDR 64

/* Every byte of metadata, of this file's mappings and of the chunk and
 * heap headers heap.c and large.c count: here, so that counting it calls
 * back into none of them. */
static size_t meta_bytes; /* atomic: headers, heaps, profiler */

void hc_stats_add_metadata(intptr_t delta)
{
	__atomic_add_fetch(&meta_bytes, (size_t)delta, __ATOMIC_RELAXED);
}

size_t hc_meta_bytes(void)
{
	return __atomic_load_n(&meta_bytes, __ATOMIC_RELAXED);
}

/* Map size bytes and put them on the list; under meta_lock. */
static void *meta_map(size_t size)
{
	meta_map_t *m = hc_os_map(size);
	if (m == NULL)
		return NULL;
	m->size = size;
	m->next = meta_maps;
	if (meta_maps)
		meta_maps->prev = m;
	meta_maps = m;
	hc_stats_add_metadata((intptr_t)size);
	return m;
}

void hc_meta_ranges(bool (*fn)(void *arg, uintptr_t start, uintptr_t end, unsigned kind), void *arg)
{
	hc_mutex_lock(&meta_lock);
	for (meta_map_t *m = meta_maps; m && fn(arg, (uintptr_t)m, (uintptr_t)m + m->size, HC_RANGE_META); m = m->next)
		;
	hc_mutex_unlock(&meta_lock);
}

static unsigned meta_class(size_t n)
{
	unsigned c = 0;
	while (((size_t)1 << (c + META_MIN_SHIFT)) < n)
		c++;
	return c;
}

/* Zeroed memory of at least n bytes, or NULL. */
void *hc_meta_alloc(size_t n)
{
	if (n == 0)
		n = 1;
	if (n > ((size_t)1 << META_MAX_SHIFT)) {
		size_t sz = ((n + HC_PAGE - 1) & ~(HC_PAGE - 1)) + HC_PAGE;
		hc_mutex_lock(&meta_lock);
		char *m = meta_map(sz);
		hc_mutex_unlock(&meta_lock);
		return m ? m + HC_PAGE : NULL;
	}
	unsigned c = meta_class(n);
	size_t sz = (size_t)1 << (c + META_MIN_SHIFT);
	void *p = NULL;
	hc_mutex_lock(&meta_lock);
	if (meta_free[c]) {
		p = meta_free[c];
		meta_free[c] = meta_free[c]->next;
	} else {
		if (meta_bump == NULL || (size_t)(meta_end - meta_bump) < sz) {
			char *span = meta_map(META_SPAN);
			if (span != NULL) {
				meta_bump = span + META_SPAN_HDR;
				meta_end = span + META_SPAN;
			}
		}
		if (meta_bump && (size_t)(meta_end - meta_bump) >= sz) {
			p = meta_bump;
			meta_bump += sz;
		}
	}
	hc_mutex_unlock(&meta_lock);
	if (p)
		memset(p, 0, sz);
	return p;
}

void hc_meta_free(void *p, size_t n)
{
	if (p == NULL)
		return;
	if (n == 0)
		n = 1;
	if (n > ((size_t)1 << META_MAX_SHIFT)) {
		size_t sz = ((n + HC_PAGE - 1) & ~(HC_PAGE - 1)) + HC_PAGE;
		meta_map_t *m = (meta_map_t *)((char *)p - HC_PAGE);
		hc_mutex_lock(&meta_lock);
		if (m->prev)
			m->prev->next = m->next;
		else
			meta_maps = m->next;
		if (m->next)
			m->next->prev = m->prev;
		hc_mutex_unlock(&meta_lock);
		hc_os_unmap(m, sz);
		hc_stats_add_metadata(-(intptr_t)sz);
		return;
	}
	unsigned c = meta_class(n);
	hc_mutex_lock(&meta_lock);
	((hc_block_t *)p)->next = meta_free[c];
	meta_free[c] = p;
	hc_mutex_unlock(&meta_lock);
}

void hc_meta_fork_prepare(void)
{
	hc_mutex_lock(&meta_lock);
}
void hc_meta_fork_parent(void)
{
	hc_mutex_unlock(&meta_lock);
}
void hc_meta_fork_child(void)
{
	hc_mutex_reinit(&meta_lock);
}
