/*
 * heapctl/rp_internal.h - what the report files share besides report.h:
 * memory that lives until exit, interned strings, and the raw profile the
 * reader produces.
 */
#ifndef HC_RP_INTERNAL_H
#define HC_RP_INTERNAL_H

#include "report.h"

/* Memory and strings for the life of the process.  Out of memory is fatal
 * (one line on stderr, exit 1): a report has nothing to save. */
void *rp_alloc(size_t n);                       /* zeroed */
void rp_free(void *p);                          /* one block, early */
void rp_reset(void);                            /* every block, interned strings too */
void *rp_grow(void *p, size_t *cap, size_t need, size_t elem);
char *rp_strdup(const char *s);
const char *rp_intern(const char *s);           /* same string, same pointer */
const char *rp_intern_n(const char *s, size_t n);
const char *rp_strcat3(const char *a, const char *b, const char *c);

/* One stack as read: addresses as in the file, and the four raw numbers
 * of each "t" line: inuse objects, inuse bytes, alloc objects, alloc bytes. */
typedef struct rp_rawthr_s {
	int64_t thread;            /* -1: the "t*" line (all threads) */
	double c[RP_NTYPES];
} rp_rawthr_t;

typedef struct rp_rawstack_s {
	uint32_t n;
	uint32_t *loc;             /* indexes into the profile's locs */
	rp_rawthr_t all;
	rp_rawthr_t *thr;
	uint32_t nthr;
	uint32_t line;             /* where it starts in the file */
} rp_rawstack_t;

typedef struct rp_raw_s {
	rp_profile_t prof;         /* locs and maps filled; samples empty  */
	rp_rawstack_t *stacks;
	size_t nstacks;
	int algorithm;             /* 0: not sampled, 1: heap/N, 2: heap_v2/N */
	double adjust;             /* jeprof's sample_adjustment for unsampling */
} rp_raw_t;

/* report.c: parse PATH.  Returns 0, or -1 with "PATH:LINE: what" in err. */
int rp_read(const char *path, rp_raw_t *raw, char *err, size_t errlen);

/* symbolize.c: fill every location's map and frames, and the maps'
 * build ids and flags.  root: sysroot or NULL.  Missing files only leave
 * their addresses unnamed; -1 only when libdwfl cannot start. */
int rp_symbolize(rp_profile_t *p, const char *root, char *err, size_t errlen);
void rp_name_frame(rp_frame_t *f, const char *sym);

#endif
