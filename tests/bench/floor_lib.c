/*
 * floor_lib.c - the least an out-of-line allocator can do per pair: pop and
 * push one thread-local free list, no size classes, no sampling, no stats.
 * Built as a shared library so that the calls cross a DSO boundary through
 * the PLT exactly as a preloaded malloc and free do.  floor.c times it.
 */
#include <stddef.h>
#include <stdlib.h>

void *floor_alloc(size_t n);
void floor_free(void *p);

static __thread void *head;
static __thread char arena[64 * 64];
static __thread size_t used;

void *floor_alloc(size_t n)
{
	void *p = head;
	if (__builtin_expect(p != NULL, 1)) {
		head = *(void **)p;
		return p;
	}
	if (n > 64 || used + 64 > sizeof arena)
		abort();
	p = arena + used;
	used += 64;
	return p;
}

void floor_free(void *p)
{
	*(void **)p = head;
	head = p;
}
