/*
 * heapctl/report/rp_internal.h - what the report engine's files (report/,
 * symbolize/) share besides report.h: memory that lives until exit,
 * interned strings, the raw profile the reader produces, and each file's
 * functions, declared under the file's name.  The `heapctl report`
 * command's own steps are in command.h.
 */
#ifndef HC_RP_INTERNAL_H
#define HC_RP_INTERNAL_H

#include <elf.h>
#include <sys/types.h>

#include "report.h"

/* read.c: memory and strings for the life of the process.  Out of memory is fatal
 * (one line on stderr, exit 1): a report has nothing to save. */
void *rp_alloc(size_t n);     /* zeroed */
void rp_free(void *p);        /* one block, early */
void rp_reset(void);          /* every block, interned strings too */
unsigned rp_generation(void); /* how many rp_reset()s so far */
void *rp_grow(void *p, size_t *cap, size_t need, size_t elem);
char *rp_strdup(const char *s);
const char *rp_intern(const char *s); /* same string, same pointer:
                                       * compare and hash the pointer */
const char *rp_intern_n(const char *s, size_t n);
const char *rp_strcat3(const char *a, const char *b, const char *c);

/* index.c: the engine's one hash index (see there).  It maps a key to
 * the position of its entry in the caller's own array; the caller gives
 * the key's hash and says whether entry id is the key. */
typedef struct rp_index_s {
	uint32_t *slot; /* id + 1, 0: empty */
	uint64_t *hash; /* per id */
	size_t nslot, n, cap;
} rp_index_t;
typedef bool rp_index_eq(const void *ctx, uint32_t id);
/* The id of the key's entry; or, when there is none, the next id (n,
 * which the caller then appends to its array) with *added set.  -1: out
 * of memory.  rp_index_free() gives the memory back. */
int64_t rp_index_find(rp_index_t *ix, uint64_t hash, rp_index_eq *eq, const void *ctx, bool *added);
void rp_index_free(rp_index_t *ix);
uint64_t rp_hash_bytes(const void *p, size_t n);
/* An interned string or an address as a key: its pointer value, mixed. */
static inline uint64_t rp_hash_u64(uint64_t v)
{
	v *= 0x9e3779b97f4a7c15ull;
	return v ^ (v >> 29);
}

/* One stack as read: addresses as in the file, and the four raw numbers
 * of each "t" line: inuse objects, inuse bytes, alloc objects, alloc bytes. */
typedef struct rp_rawthr_s {
	int64_t thread; /* -1: the "t*" line (all threads) */
	double c[RP_NTYPES];
} rp_rawthr_t;

/* A live sampled object of a stack (its "a:" line): how old it was when
 * the dump was written, its size, its weight (the objects it stands for)
 * and its thread. */
typedef struct rp_age_s {
	uint64_t ns, size;
	double weight;
	int64_t thread;
} rp_age_t;

/* The lifetimes of a stack's sampled objects freed (its "l:" line):
 * how many, how many within 1 ms, 1 s and 1 min, and a histogram with
 * four buckets per doubling (agent/profile.c's hc_life_bucket). */
#define RP_LIFE_BUCKETS 256
typedef struct rp_life_s {
	uint64_t frees, lt_1ms, lt_1s, lt_1min;
	uint64_t hist[RP_LIFE_BUCKETS];
} rp_life_t;

typedef struct rp_rawstack_s {
	uint32_t n;
	uint32_t *loc; /* indexes into the profile's locs */
	rp_rawthr_t all;
	rp_rawthr_t *thr;
	uint32_t nthr;
	uint32_t line;  /* where it starts in the file */
	rp_age_t *ages; /* NULL: the dump has none for it */
	uint32_t nages;
	rp_life_t *life; /* NULL: no sampled object of it was freed */
} rp_rawstack_t;

/* One address of a symbolized profile's "--- symbol" section (jeprof's
 * format for a profile that carries its names): the key is the address
 * as jeprof looks it up (a stack's first address as written, a caller's
 * less one); names are "outer--inlined--..." as jeprof writes them; lines
 * (heapctl's own "#lines" line, which jeprof skips) are "file:line" in the
 * same order, tab-separated, or NULL. */
typedef struct rp_embsym_s {
	uint64_t key;
	const char *names;
	const char *lines;
} rp_embsym_t;

typedef struct rp_raw_s {
	rp_profile_t prof; /* locs and maps filled; samples empty  */
	rp_rawstack_t *stacks;
	size_t nstacks;
	int algorithm;     /* 0: not sampled, 1: heap/N, 2: heap_v2/N */
	double adjust;     /* jeprof's sample_adjustment for unsampling */
	bool symbolized;   /* it began with a "--- symbol" section */
	rp_embsym_t *syms; /* that section, sorted by key */
	size_t nsyms;
	const char *binary; /* its "binary=" line, or NULL */
	const char *text;   /* RP_READ_TEXT: the profile as written, from */
	size_t textlen;     /* its header line on (after any symbols) */
	bool has_ages;      /* it has "a:" lines (heapctl's, not a peak) */
} rp_raw_t;

/* read.c: parse PATH.  Returns 0, or -1 with "PATH:LINE: what" in err.
 * flags: RP_READ_TEXT keeps a copy of the profile's text in raw->text. */
enum { RP_READ_TEXT = 1 };
int rp_read(const char *path, rp_raw_t *raw, unsigned flags, char *err, size_t errlen);

/* symbolize/symbolize.c: fill every location's map and frames, and the maps'
 * build ids and flags.  root: sysroot or NULL.  Missing files only leave
 * their addresses unnamed; -1 only when libdwfl cannot start.
 * rp_symbolize_lines(false): the frames get no file:line, and the line
 * tables are not read (for views that show none; not with --symcache,
 * which keeps whole frames). */
int rp_symbolize(rp_profile_t *p, const char *root, char *err, size_t errlen);
void rp_symbolize_lines(bool on);
/* The live process the dump is of (report -p PID), 0: none.  A file whose
 * build id is not the dump's is then also looked for in its mappings. */
void rp_symbolize_pid(int pid);
int rp_map_of(const rp_profile_t *p, uint64_t addr); /* index of the map holding addr, or -1 */
/* Reports on behalf of someone else (symbolize/symbolize.c's opening comment):
 * with as_user, every file rp_symbolize opens is opened with uid's rights
 * (gid and groups too; only as root, where they are fewer than ours); with
 * pid > 0, objects only as the live process pid maps them.  0, or -1 with
 * err. */
int rp_symbolize_confine(int pid, bool as_user, uid_t uid, gid_t gid, const gid_t *groups, int ngroups, char *err,
    size_t errlen);

/* svg.c: at most max characters of str as XML character data (safe in
 * attributes); control characters and bytes that are not UTF-8 become
 * U+FFFD. */
void rp_xml_esc(FILE *f, const char *str, size_t max);

/* series.c: how the sites of a series of profiles changed.  v holds
 * v[site * ndumps + dump]: the site's flat value in that dump. */
typedef struct rp_series_s {
	size_t ndumps, nsites;
	const char **path; /* per dump */
	int64_t *time_ns;  /* per dump: when it was written (mtime) */
	double *total;     /* per dump */
	const char **site; /* per site */
	double *v;
} rp_series_t;

/* One site's trend, first to last dump. */
typedef struct rp_trend_s {
	size_t site;
	double first, last, growth, peak;
	unsigned grew, shrank; /* intervals in which it went up, down */
	bool only_grew;        /* grew in every interval: a leak suspect */
} rp_trend_t;

/* The sites that were ever non-zero, leak suspects first (by growth),
 * then the rest by growth; *n gets the count. */
rp_trend_t *rp_series_rank(const rp_series_t *s, size_t *n);
/* A self-contained SVG line chart of the first top trends over time.
 * Returns 0, or -1 with errno set by the failed write. */
int rp_series_svg(FILE *f, const rp_series_t *s, const rp_trend_t *t, size_t n, size_t top, const char *title,
    bool bytes);

/* symbolize/inflate.c: for each debug file open at fds[i] (or -1), a copy in
 * memory in out[i], with the DWARF sections a report reads inflated (and
 * the others left out), for libdwfl to read instead; -1 when the file has
 * nothing compressed or is not what it expects (then the file is read as
 * it is).  In two steps: rp_inflated_start() starts the copies on threads
 * (at most 2) of their own, sharing out the files' sections, and returns;
 * rp_inflated_wait() works on what is left and waits for them, then fills
 * out[].  fds[] stay open in between.  NULL from start: no copies.
 * lines false leaves the line tables out too. */
typedef struct rp_inflating_s rp_inflating_t;
rp_inflating_t *rp_inflated_start(const int *fds, size_t n, int threads, bool lines);
void rp_inflated_wait(rp_inflating_t *in, int *out);

/* symbolize/pinflate.c: one zlib stream (z, zlen: header, deflate data, Adler-32)
 * inflated into out[0, size) in two parts, which may run at once on two
 * threads: rp_split_run(sp, 0) and rp_split_run(sp, 1), each once, in
 * either order.  rp_split_end(): 1 when out holds the stream's bytes
 * from both parts (checked with its Adler-32; 2 when part 1 handed over
 * to zlib once nothing before the cut could be copied), 0 when from zlib alone (no
 * cut found, or it did not hold), -1 when the stream does not inflate to
 * size bytes (or a part did not run); frees sp.  NULL from new: not a
 * zlib stream. */
typedef struct rp_split_s rp_split_t;
rp_split_t *rp_split_new(const unsigned char *z, size_t zlen, unsigned char *out, size_t size);
void rp_split_run(rp_split_t *sp, int part);
int rp_split_end(rp_split_t *sp);

/* symbolize/symcache.c: the frames found for each address of a module, kept per
 * build id in a directory (--symcache).  rp_symcache_use() opens DIR
 * (made if missing; it must be the user's and writable by nobody else):
 * 0, or -1 with err.  rp_symcache_load() gives a module's cache (NULL when
 * caching is off or the build id is not one); what says what its frames
 * come from (the debug file), and a file made from anything else is not
 * used.  Keys are offsets into the module.  rp_symcache_save() writes the
 * entries put since it was loaded. */
enum { RP_SC_LINES = 1, RP_SC_INLINES = 2, RP_SC_FUNCTION = 4 };
typedef struct rp_symcache_s rp_symcache_t;
int rp_symcache_use(const char *dir, char *err, size_t errlen);
bool rp_symcache_on(void);
rp_symcache_t *rp_symcache_load(const char *build_id, const char *what);
/* The cache of build_id as it was saved, whatever debug file it was made
 * with (*what: that part of its key), for a module whose file is not here;
 * NULL when there is none of this version. */
rp_symcache_t *rp_symcache_find(const char *build_id, const char **what);
bool rp_symcache_get(const rp_symcache_t *c, uint64_t key, rp_loc_t *loc, unsigned *flags);
void rp_symcache_put(rp_symcache_t *c, uint64_t key, const rp_loc_t *loc, unsigned flags);
void rp_symcache_save(rp_symcache_t *c);

/* symbolize/symfile.c: a symbolized profile.  rp_symbols_apply() names raw's
 * locations from its own symbol section (no binaries are read);
 * rp_symbols_write() writes raw (read with RP_READ_TEXT, symbolized by
 * either) as a symbolized profile that jeprof and heapctl read without
 * the program.  Returns 0, or -1 with errno set by the failed write. */
void rp_symbols_apply(rp_raw_t *raw);
int rp_symbols_write(const rp_raw_t *raw, FILE *f);

/* symbolize/names.c: f's names from a symbol: sys as given, full
 * demangled, func short (jeprof's ShortFunctionName); file and line are
 * left as they are. */
void rp_name_frame(rp_frame_t *f, const char *sym);

/* symbolize/debuginfod.c: where a module's separate debug file is, on this
 * host and from debuginfod servers.  rp_debug_begin() starts a report's
 * lookups under root (a sysroot, or NULL) and sets elfutils' debuginfod
 * defaults.  The paths: <root>/usr/lib/debug/.build-id/xx/yyyy.debug for a
 * build id (hex); for the .gnu_debuglink link of file, the k-th (0..2) of
 * next to it, in .debug/ beside it, under the debug directory by its
 * directory; false when there is no such path. */
struct Elf;
struct Dwfl_Module;
void rp_debug_begin(const char *root);
bool rp_debug_build_id_path(const char *hex, char *path, size_t len);
bool rp_debug_link_path(const char *file, const char *link, int k, char *path, size_t len);
/* What a module's frames come from besides the module (its build id hex),
 * for its --symcache key: its debug file with size and time, "no debug
 * file", or false when a server may still send one. */
bool rp_debug_source(struct Elf *e, const char *file, const char *hex, char *what, size_t len);
bool rp_debuginfod_asking(void); /* DEBUGINFOD_URLS is set */
double rp_debuginfod_now(void);  /* seconds, CLOCK_MONOTONIC */
/* A server asked since t0 gave nothing for mod: said in the note. */
void rp_debuginfod_missed(struct Dwfl_Module *mod, const char *modname, double t0);
/* The executable of a build id (hex), else its debug file, from a server:
 * an fd and *name, or -1. */
int rp_debuginfod_by_id(const char *hex, char **name);
/* What servers did not give this report, as one line; NULL: nothing. */
const char *rp_debuginfod_note(void);

/* read.c: one line of /proc/PID/maps (or of a dump's, parsed by
 * elf/maps.c) as a map of the report: 1 and *m for an executable mapping
 * of a file, 0 for any other mapping, -1 for a line that is not one.
 * rp_maps_sort() sorts p's maps by address: -1 when two overlap. */
int rp_map_line(const char *s, rp_map_t *m);
/* The same from a line elf/maps.c parsed: true for an executable mapping
 * of a file. */
struct el_map_s;
bool rp_map_from(const struct el_map_s *em, rp_map_t *m);
int rp_maps_sort(rp_profile_t *p);

#endif
