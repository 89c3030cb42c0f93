/*
 * allocator/meta.c - memory for the profiler's own structures (stacks,
 * per-thread counters, sample records, dump buffers).
 *
 * Kept apart from the user's heap so a profile never profiles itself and
 * stats.metadata can count it: power-of-two classes from 16 B to 4 KiB carved
 * from 64 KiB mappings, with a free list per class; larger requests are
 * mapped directly.  One mutex; callers are slow paths only.
 */
#define _GNU_SOURCE
#include <string.h>

#include "internal.h"

#define META_MIN_SHIFT 4
#define META_MAX_SHIFT 12
#define META_NCLASSES (META_MAX_SHIFT - META_MIN_SHIFT + 1)
#define META_SPAN ((size_t)64 << 10)

static hc_mutex_t meta_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_META, "meta_lock");
static hc_block_t *meta_free[META_NCLASSES];
static char *meta_bump, *meta_end;

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
		size_t sz = (n + HC_PAGE - 1) & ~(HC_PAGE - 1);
		void *p = hc_os_map(sz);
		if (p)
			hc_stats_add_metadata((intptr_t)sz);
		return p;
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
			char *span = hc_os_map(META_SPAN);
			if (span != NULL) {
				meta_bump = span;
				meta_end = span + META_SPAN;
				hc_stats_add_metadata((intptr_t)META_SPAN);
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
		size_t sz = (n + HC_PAGE - 1) & ~(HC_PAGE - 1);
		hc_os_unmap(p, sz);
		hc_stats_add_metadata(-(intptr_t)sz);
		return;
	}
	unsigned c = meta_class(n);
	hc_mutex_lock(&meta_lock);
	((hc_block_t *)p)->next = meta_free[c];
	meta_free[c] = p;
	hc_mutex_unlock(&meta_lock);
}

void hc_meta_fork_prepare(void) { hc_mutex_lock(&meta_lock); }
void hc_meta_fork_parent(void) { hc_mutex_unlock(&meta_lock); }
void hc_meta_fork_child(void) { hc_mutex_reinit(&meta_lock); }
