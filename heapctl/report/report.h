/*
 * heapctl/report/report.h - `heapctl report`: reading heap profiles, symbolizing
 * them, and the views and writers built on the result.
 *
 * Pipeline (command.c drives it; command.h lists the command's files):
 *
 *   rp_read()        read.c: heap_v2 (heapctl, jemalloc) or gperftools
 *                    "heap profile:" text -> raw stacks of addresses,
 *                    per-thread counts, MAPPED_LIBRARIES
 *   rp_symbolize()   symbolize/symbolize.c: every distinct address -> a
 *                    location: its mapping and its frames (inlined ones
 *                    first), through libdwfl
 *   rp_build()       samples.c: raw stacks -> samples: scaled for sampling
 *                    the way jeprof scales them, allocator frames removed
 *   views            view_text.c, view_folded.c (folded stacks; svg.c draws
 *                    the flame graph), pprof.c, view_lifetime.c,
 *                    view_series.c (series.c ranks the trends)
 *
 * Memory: everything the reader and rp_build() make comes from rp_alloc()
 * and lives until rp_reset() gives all of it back at once (the command just
 * exits; a fuzzer or a daemon reads profile after profile).  The writers
 * (svg.c, pprof.c) free what they make themselves.
 */
#ifndef HC_REPORT_H
#define HC_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Sample types, in jeprof's index order (HeapProfileIndex). */
enum { RP_INUSE_OBJECTS = 0, RP_INUSE_SPACE = 1, RP_ALLOC_OBJECTS = 2, RP_ALLOC_SPACE = 3, RP_NTYPES = 4 };
extern const char *const rp_type_name[RP_NTYPES]; /* "inuse_objects", ... */
extern const char *const rp_type_unit[RP_NTYPES]; /* "count" or "bytes"   */

/* One frame of a location.  A location with inlined calls has several,
 * innermost (the inlined callee) first, the real function last. */
typedef struct rp_frame_s {
	const char *func; /* short name: demangled, no arguments/templates */
	const char *full; /* demangled name with arguments                 */
	const char *sys;  /* the symbol as in the ELF file (mangled)       */
	const char *file; /* source file, NULL when unknown                */
	int line;         /* 0 when unknown                                */
} rp_frame_t;

/* One mapped object from MAPPED_LIBRARIES (executable mappings only). */
typedef struct rp_map_s {
	uint64_t start, limit, offset; /* the mapping: [start, limit) at offset */
	const char *path;              /* as in the dump                        */
	const char *build_id;          /* lowercase hex, NULL when none found   */
	const char *dump_build_id;     /* the one the dump records, or NULL     */
	bool has_functions;            /* symbols were found for it             */
	bool has_lines;                /* DWARF line info was found             */
	bool has_inlines;              /* DWARF inline info was found           */
	bool allocator;                /* libheapctl, libjemalloc, libtcmalloc  */
} rp_map_t;

/* One distinct address from the dump. */
typedef struct rp_loc_s {
	uint64_t addr;      /* as written in the dump (a return address)  */
	int map;            /* index into rp_profile_t.maps, -1: none     */
	int nframes;        /* 0 only when nothing at all is known        */
	rp_frame_t *frames; /* innermost first; frames[nframes-1] is the
	                     * function the address is in                 */
} rp_loc_t;

/* One stack with its values (already scaled for sampling).  Values may be
 * negative after --base. */
typedef struct rp_sample_s {
	uint32_t nloc;
	uint32_t *loc; /* indexes into locs; leaf (allocation site) first */
	double v[RP_NTYPES];
	int64_t thread; /* jemalloc thread id, -1: all threads / unknown */
} rp_sample_t;

typedef struct rp_profile_s {
	rp_sample_t *samples;
	size_t nsamples;
	rp_loc_t *locs;
	size_t nlocs;
	rp_map_t *maps;
	size_t nmaps;
	uint64_t period;     /* mean bytes between samples; 0: not sampled */
	const char *path;    /* the profile file                           */
	int64_t time_ns;     /* the file's mtime, for pprof's time_nanos   */
	const char *note;    /* what symbolizing could not get, or NULL    */
	const char *unnamed; /* modules left unnamed and why: one line each
	                      * ("path: cause\n"), or NULL                 */
} rp_profile_t;

/* A folded stack for the flame graph: names root first. */
typedef struct rp_stack_s {
	uint32_t n;
	const char **names;
	double value;
} rp_stack_t;

#include "cli/outfile.h" /* rp_out_*: writing a file (heapctl/cli/outfile.c) */

/* pprof.c: write p as a gzipped profile.proto with all four sample types
 * (alloc_objects, alloc_space, inuse_objects, inuse_space; the default
 * is type, RP_INUSE_SPACE unless the user chose another), values rounded to integers, the thread as a numeric label
 * "thread" when sample.thread >= 0.  Returns 0, or -1 with a one-line
 * reason in err. */
int rp_pprof_write(const rp_profile_t *p, int type, const char *path, char *err, size_t errlen);

/* svg.c: write a self-contained flame graph (root at the bottom, widths
 * proportional to value; stacks with value <= 0 are left out).  unit is
 * "bytes" or "objects"; title goes in the heading.  Returns 0, or -1 with
 * errno set by the failed write. */
int rp_svg_write(FILE *f, const rp_stack_t *stacks, size_t n, const char *title, const char *unit);

#endif
