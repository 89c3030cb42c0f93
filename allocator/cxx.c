/*
 * allocator/cxx.c - C++'s operator new and delete, exported by their
 * x86-64 Itanium-ABI (mangled) names, in C.
 *
 * Without them a C++ program's every allocation went through libstdc++'s
 * operator new (a call to malloc through the PLT, then a test for NULL)
 * and every sized delete became a plain free; jemalloc, mimalloc and
 * tcmalloc export the same 20 symbols.  operator new and new[] inline
 * malloc's fast path (fastpath.h); delete is free (a direct jump to it,
 * so the secure build's checks apply to delete as they do to free, and
 * its messages name free()).  The sizes given to a sized delete are a
 * hint free does not need; the debug build checks them as sdallocx does.
 *
 * The library does not link libstdc++ (C programs load it): the C++
 * runtime's std::get_new_handler and std::__throw_bad_alloc are looked up
 * with dlsym only when an allocation has failed, in a process that called
 * operator new and so has a C++ runtime loaded.  Without one, a failure is
 * fatal (one line, abort), as in a C++ runtime without exceptions.
 *
 * The nothrow forms must return NULL even when the new_handler throws
 * std::bad_alloc, which C cannot catch: once a handler is installed they
 * hand the request to libstdc++'s own nothrow form (the next definition
 * after this library), which calls the throwing form (ours) inside a
 * try block, as the standard specifies them.  Only if there is none (a
 * C++ runtime loaded before this library) is the handler called from
 * here, where a handler that throws is not caught.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "fastpath.h"

typedef void (*new_handler_t)(void);

/* The family, by mangled name: new (n), new[] (n), each also with
 * std::nothrow_t (a reference: a pointer never read) and std::align_val_t
 * (a size_t); delete and delete[] (p), each also with the size, the
 * nothrow_t and the alignment. */
void *_Znwm(size_t n);
void *_Znam(size_t n);
void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt);
void *_ZnamRKSt9nothrow_t(size_t n, const void *nt);
void *_ZnwmSt11align_val_t(size_t n, size_t al);
void *_ZnamSt11align_val_t(size_t n, size_t al);
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt);
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt);
void _ZdlPv(void *p);
void _ZdaPv(void *p);
void _ZdlPvm(void *p, size_t n);
void _ZdaPvm(void *p, size_t n);
void _ZdlPvRKSt9nothrow_t(void *p, const void *nt);
void _ZdaPvRKSt9nothrow_t(void *p, const void *nt);
void _ZdlPvSt11align_val_t(void *p, size_t al);
void _ZdaPvSt11align_val_t(void *p, size_t al);
void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al);
void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al);
void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt);
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt);

static bool pow2(size_t a)
{
	return a != 0 && (a & (a - 1)) == 0;
}

/* One more try after the new_handler ran. */
static void *retry(size_t n, size_t al)
{
	return al ? hc_alloc_aligned(al, n, false) : hc_malloc_slow(n);
}

static new_handler_t current_handler(void)
{
	new_handler_t (*get)(void) = (new_handler_t(*)(void))dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
	return get != NULL ? get() : NULL;
}

/* The next definition of a nothrow form (libstdc++'s), or NULL. */
static void *next_nothrow(size_t al)
{
	void *f = dlsym(RTLD_NEXT, al ? "_ZnwmSt11align_val_tRKSt9nothrow_t" : "_ZnwmRKSt9nothrow_t");
	return f == (void *)_ZnwmRKSt9nothrow_t || f == (void *)_ZnwmSt11align_val_tRKSt9nothrow_t ? NULL : f;
}

/*
 * A request that failed once (al: its alignment, 0 for none).  As the
 * standard says: while a new_handler is installed, call it and try again;
 * then throw std::bad_alloc (the nothrow forms: return NULL).  An alignment
 * that is not a power of two (undefined behaviour) fails at once: no
 * handler can make it possible.
 */
static HC_COLD void *new_fail(size_t n, size_t al, bool nothrow)
{
	if (al == 0 || pow2(al)) {
		if (nothrow && current_handler() != NULL) {
			void *f = next_nothrow(al);
			if (f != NULL)
				return al ? ((void *(*)(size_t, size_t, const void *))f)(n, al, NULL)
				          : ((void *(*)(size_t, const void *))f)(n, NULL);
		}
		for (new_handler_t h; (h = current_handler()) != NULL;) {
			h();
			void *p = retry(n, al);
			if (p != NULL)
				return p;
		}
	}
	if (nothrow)
		return NULL;
	void (*throw_bad_alloc)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv");
	if (throw_bad_alloc != NULL)
		throw_bad_alloc();
	hc_diag("operator new: out of memory, and no C++ runtime to throw std::bad_alloc");
	abort();
}

static HC_NOINLINE void *new_slow(size_t n)
{
	void *p = hc_malloc_slow(n);
	return likely(p != NULL) ? p : new_fail(n, 0, false);
}

static HC_NOINLINE void *new_slow_nothrow(size_t n)
{
	void *p = hc_malloc_slow(n);
	return likely(p != NULL) ? p : new_fail(n, 0, true);
}

static inline void *aligned_new(size_t n, size_t al, bool nothrow)
{
	if (likely(pow2(al))) {
		void *p = hc_alloc_aligned(al, n, false);
		if (likely(p != NULL))
			return p;
	}
	return new_fail(n, al, nothrow);
}

/* A sized or aligned delete's claims about p, checked in the debug build
 * (release builds trust them, as sdallocx does). */
static inline void check_delete(void *p, size_t n, size_t al)
{
	if (HC_DEBUG && p != NULL) {
		if (hc_usable_size(p) < n)
			hc_fatal_ptr("operator delete(): size larger than the object's:", p);
		if (pow2(al) && ((uintptr_t)p & (al - 1)) != 0)
			hc_fatal_ptr("operator delete(): pointer not aligned as the delete says:", p);
	}
}

/* ---- exported ---------------------------------------------------------- */

/* Each array form is its scalar form under a second name, as in tcmalloc:
 * a new[] and a delete differ only in what the compiler does around them. */
#define HC_ARRAY_OF(scalar) HC_EXPORT __attribute__((alias(#scalar)))

HC_EXPORT void *_Znwm(size_t n)
{
	return hc_malloc_fast(n, new_slow);
}

HC_EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt)
{
	return hc_malloc_fast(n, new_slow_nothrow);
}

HC_EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t al)
{
	return aligned_new(n, al, false);
}

HC_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt)
{
	return aligned_new(n, al, true);
}

HC_EXPORT void _ZdlPv(void *p)
{
	hc_free(p);
}
HC_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt)
{
	hc_free(p);
}

HC_EXPORT void _ZdlPvm(void *p, size_t n)
{
	check_delete(p, n, 0);
	hc_free(p);
}

HC_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t al)
{
	check_delete(p, 0, al);
	hc_free(p);
}

HC_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al)
{
	check_delete(p, n, al);
	hc_free(p);
}

HC_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt)
{
	check_delete(p, 0, al);
	hc_free(p);
}

HC_ARRAY_OF(_Znwm) void *_Znam(size_t n);
HC_ARRAY_OF(_ZnwmRKSt9nothrow_t) void *_ZnamRKSt9nothrow_t(size_t n, const void *nt);
HC_ARRAY_OF(_ZnwmSt11align_val_t) void *_ZnamSt11align_val_t(size_t n, size_t al);
HC_ARRAY_OF(_ZnwmSt11align_val_tRKSt9nothrow_t)
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt);
HC_ARRAY_OF(_ZdlPv) void _ZdaPv(void *p);
HC_ARRAY_OF(_ZdlPvRKSt9nothrow_t) void _ZdaPvRKSt9nothrow_t(void *p, const void *nt);
HC_ARRAY_OF(_ZdlPvm) void _ZdaPvm(void *p, size_t n);
HC_ARRAY_OF(_ZdlPvSt11align_val_t) void _ZdaPvSt11align_val_t(void *p, size_t al);
HC_ARRAY_OF(_ZdlPvmSt11align_val_t) void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al);
HC_ARRAY_OF(_ZdlPvSt11align_val_tRKSt9nothrow_t)
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt);
