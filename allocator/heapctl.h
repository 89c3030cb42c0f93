/*
 * heapctl.h - the jemalloc-compatible control entry points libheapctl.so
 * exports besides the standard malloc family.  Same signatures as
 * jemalloc's, so code written against <jemalloc/jemalloc.h> works unchanged.
 */
#ifndef HEAPCTL_H
#define HEAPCTL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
int mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp);
int mallctlbymib(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
void malloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque, const char *opts);

/* jemalloc's non-standard allocation API (MALLOCX_* flags as jemalloc's:
 * low 6 bits lg alignment, 0x40 zero, tcache bits ignored, arena bits
 * checked) */
void *mallocx(size_t size, int flags);
void *rallocx(void *ptr, size_t size, int flags);
size_t xallocx(void *ptr, size_t size, size_t extra, int flags);
size_t sallocx(const void *ptr, int flags);
void dallocx(void *ptr, int flags);
void sdallocx(void *ptr, size_t size, int flags);
size_t nallocx(size_t size, int flags);

#ifdef __cplusplus
}
#endif

#endif
