/*
 * heapctl/report/read.c - reading heap profiles: jemalloc's and heapctl's
 * heap_v2 text, and gperftools' "heap profile:" text, each followed by
 * MAPPED_LIBRARIES.  Also the process-lifetime memory the report uses.
 *
 *   heap_v2/524288                          heap profile:  12:  4096 [ 20:  8192] @ heap_v2/524288
 *     t*: 12: 4096 [0: 0]                     3:  1024 [  3:  1024] @ 0x4005d0 0x400610
 *     t0: 12: 4096 [0: 0]                   ...
 *   @ 0x4005d0 0x400610                     MAPPED_LIBRARIES:
 *     t*: 3: 1024 [0: 0]                    (lines of /proc/PID/maps)
 *     t0: 3: 1024 [0: 0]
 *   MAPPED_LIBRARIES:
 *   (lines of /proc/PID/maps)
 *
 * heapctl's agent puts before each executable mapping of a loaded object
 * the object's build id, as a mapping line in pprof's own form that covers
 * no address ("7f10-7f10 r-xp /lib/libc.so.6 (@26000) 93ac..."): it is
 * taken as the build id of the mapping that starts there.
 *
 * Each "t" line is: objects and bytes in use, [objects and bytes
 * allocated over the profile's life].  A file that does not follow this
 * is refused with its line number; nothing is guessed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elf.h"
#include "report.h"
#include "rp_internal.h"

const char *const rp_type_name[RP_NTYPES] = { "inuse_objects", "inuse_space", "alloc_objects", "alloc_space" };
const char *const rp_type_unit[RP_NTYPES] = { "count", "bytes", "count", "bytes" };

/* ---- memory ---------------------------------------------------------- */

static void oom(void)
{
	static const char msg[] = "heapctl: out of memory\n";
	ssize_t r = write(2, msg, sizeof msg - 1);
	(void)r;
	exit(1);
}

/* Every block of the report's memory is on one list behind a small
 * header, so that rp_reset() can give all of it back: the command exits
 * instead, but a long-lived user (a fuzzer, a daemon) reads profile after
 * profile. */
typedef struct blk_s {
	struct blk_s *prev, *next;
	max_align_t align[];
} blk_t;
static blk_t *blocks;

static void *blk_link(blk_t *b)
{
	b->prev = NULL;
	b->next = blocks;
	if (blocks)
		blocks->prev = b;
	blocks = b;
	return b->align;
}

static blk_t *blk_of(void *p)
{
	return (blk_t *)((char *)p - offsetof(blk_t, align));
}

static void blk_unlink(blk_t *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		blocks = b->next;
	if (b->next)
		b->next->prev = b->prev;
}

void *rp_alloc(size_t n)
{
	if (n > SIZE_MAX - sizeof(blk_t))
		oom();
	blk_t *b = calloc(1, sizeof(blk_t) + (n ? n : 1));
	if (b == NULL)
		oom();
	return blk_link(b);
}

void rp_free(void *p)
{
	if (p == NULL)
		return;
	blk_t *b = blk_of(p);
	blk_unlink(b);
	free(b);
}

void *rp_grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	/* from what is needed: one stack's thread lines are mostly one, and
	 * a profile has 100,000 stacks */
	size_t c = *cap ? *cap * 2 : need;
	while (c < need)
		c *= 2;
	if (c > (SIZE_MAX - sizeof(blk_t)) / elem)
		oom();
	blk_t *old = p ? blk_of(p) : NULL;
	if (old)
		blk_unlink(old);
	blk_t *b = realloc(old, sizeof(blk_t) + c * elem);
	if (b == NULL)
		oom();
	*cap = c;
	return blk_link(b);
}

char *rp_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = rp_alloc(n);
	memcpy(d, s, n);
	return d;
}

/* Interned strings: the strings in the order first seen, and the index. */
static const char **istr;
static size_t istr_cap;
static rp_index_t iix;

static unsigned generation;

unsigned rp_generation(void)
{
	return generation;
}

void rp_reset(void)
{
	generation++;
	while (blocks) {
		blk_t *b = blocks;
		blocks = b->next;
		free(b);
	}
	istr = NULL;
	istr_cap = 0;
	rp_index_free(&iix);
}

typedef struct {
	const char *s;
	size_t n;
} strkey_t;

static bool same_str(const void *ctx, uint32_t id)
{
	const strkey_t *k = ctx;
	return strncmp(istr[id], k->s, k->n) == 0 && istr[id][k->n] == 0;
}

const char *rp_intern_n(const char *s, size_t n)
{
	strkey_t k = { s, n };
	bool added;
	int64_t id = rp_index_find(&iix, rp_hash_bytes(s, n), same_str, &k, &added);
	if (id < 0)
		oom();
	if (!added)
		return istr[id];
	char *d = rp_alloc(n + 1);
	memcpy(d, s, n);
	istr = rp_grow(istr, &istr_cap, (size_t)id + 1, sizeof *istr);
	istr[id] = d;
	return d;
}

const char *rp_intern(const char *s)
{
	return rp_intern_n(s, strlen(s));
}

const char *rp_strcat3(const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
	char *d = rp_alloc(la + lb + lc + 1);
	memcpy(d, a, la);
	memcpy(d + la, b, lb);
	memcpy(d + la + lb, c, lc);
	return d;
}

/* ---- reading --------------------------------------------------------- */

typedef struct reader_s {
	const char *path;
	char *buf, *pos, *end;
	unsigned lineno;
	char *err;
	size_t errlen;
	bool ended_nl;  /* the last line read ended with a newline    */
	bool maps_seen; /* a MAPPED_LIBRARIES section was found       */
	rp_raw_t *raw;
	rp_index_t addrs; /* address -> location index */
	size_t loccap, stackcap;
} reader_t;

static int bad(reader_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(reader_t *r, const char *fmt, ...)
{
	int n = snprintf(r->err, r->errlen, "%s:%u: ", r->path, r->lineno);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < r->errlen)
		vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* The next line, NUL-terminated in place; NULL at the end. */
static char *next_line(reader_t *r)
{
	if (r->pos >= r->end)
		return NULL;
	char *s = r->pos;
	char *nl = memchr(s, '\n', (size_t)(r->end - s));
	if (nl) {
		*nl = 0;
		r->pos = nl + 1;
	} else {
		*r->end = 0;
		r->pos = r->end;
	}
	r->ended_nl = nl != NULL;
	size_t n = strlen(s);
	if (n && s[n - 1] == '\r')
		s[n - 1] = 0;
	r->lineno++;
	return s;
}

static const char *skip_sp(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

static bool take_u64(const char **sp, uint64_t *v)
{
	const char *s = skip_sp(*sp);
	if (*s < '0' || *s > '9')
		return false;
	char *e;
	errno = 0;
	*v = strtoull(s, &e, 10);
	if (errno)
		return false;
	*sp = e;
	return true;
}

static bool take_ch(const char **sp, char c)
{
	const char *s = skip_sp(*sp);
	if (*s != c)
		return false;
	*sp = s + 1;
	return true;
}

/* "A: B [C: D]" */
static bool take_counts(const char **sp, double c[RP_NTYPES])
{
	uint64_t v[4];
	if (!take_u64(sp, &v[0]) || !take_ch(sp, ':') || !take_u64(sp, &v[1]) || !take_ch(sp, '[') ||
	    !take_u64(sp, &v[2]) || !take_ch(sp, ':') || !take_u64(sp, &v[3]) || !take_ch(sp, ']'))
		return false;
	for (int i = 0; i < 4; i++)
		c[i] = (double)v[i];
	return true;
}

typedef struct {
	const rp_profile_t *p;
	uint64_t a;
} addrkey_t;

static bool same_addr(const void *ctx, uint32_t id)
{
	const addrkey_t *k = ctx;
	return k->p->locs[id].addr == k->a;
}

/* The location of an address: its position in locs is its id in the index. */
static uint32_t loc_of(reader_t *r, uint64_t a)
{
	rp_profile_t *p = &r->raw->prof;
	addrkey_t k = { p, a };
	bool added;
	int64_t id = rp_index_find(&r->addrs, rp_hash_u64(a), same_addr, &k, &added);
	if (id < 0)
		oom();
	if (added) {
		p->locs = rp_grow(p->locs, &r->loccap, p->nlocs + 1, sizeof *p->locs);
		p->locs[p->nlocs++] = (rp_loc_t){ .addr = a, .map = -1 };
	}
	return (uint32_t)id;
}

/* "0x4005d0 0x400610 ..." -> a new stack */
static int take_stack(reader_t *r, const char *s)
{
	uint32_t tmp[1024];
	uint32_t n = 0;
	for (;;) {
		s = skip_sp(s);
		if (*s == 0)
			break;
		if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
			return bad(r, "expected a hex address like 0x4005d0, found '%.20s'", s);
		char *e;
		errno = 0;
		uint64_t a = strtoull(s + 2, &e, 16);
		if (errno || e == s + 2 || (*e && *e != ' ' && *e != '\t'))
			return bad(r, "bad address '%.20s'", s);
		if (n == sizeof tmp / sizeof tmp[0])
			return bad(r, "stack deeper than %u frames", n);
		tmp[n++] = loc_of(r, a);
		s = e;
	}
	if (n == 0)
		return bad(r, "'@' without addresses");
	rp_raw_t *raw = r->raw;
	raw->stacks = rp_grow(raw->stacks, &r->stackcap, raw->nstacks + 1, sizeof *raw->stacks);
	rp_rawstack_t *st = &raw->stacks[raw->nstacks++];
	*st = (rp_rawstack_t){ .n = n, .loc = rp_alloc(n * sizeof(uint32_t)), .line = r->lineno };
	st->all.thread = -1;
	memcpy(st->loc, tmp, n * sizeof(uint32_t));
	return 0;
}

static bool is_allocator(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return !strncmp(b, "libheapctl", 10) || !strncmp(b, "libjemalloc", 11) || !strncmp(b, "libtcmalloc", 11);
}

static int cmp_map(const void *a, const void *b)
{
	const rp_map_t *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

bool rp_map_from(const struct el_map_s *em, rp_map_t *m)
{
	if (!el_map_exec_file(em))
		return false;
	const char *path = rp_intern(em->path);
	*m = (rp_map_t){ .start = em->lo,
		.limit = em->hi,
		.offset = em->offset,
		.path = path,
		.allocator = is_allocator(path) };
	return true;
}

int rp_map_line(const char *s, rp_map_t *m)
{
	el_map_t em;
	if (!el_map_parse(s, &em))
		return -1;
	return rp_map_from(&em, m);
}

int rp_maps_sort(rp_profile_t *p)
{
	if (p->nmaps)
		qsort(p->maps, p->nmaps, sizeof *p->maps, cmp_map);
	for (size_t i = 1; i < p->nmaps; i++)
		if (p->maps[i].start < p->maps[i - 1].limit)
			return -1;
	return 0;
}

/* "start-start r-xp PATH (@offset) BUILD-ID": the build id of the mapping
 * that starts at start (agent/dump.c).  False for any other line. */
static bool build_id_line(const char *s, uint64_t *start, const char **id)
{
	unsigned long long lo, hi;
	int pos = -1;
	if (sscanf(s, "%llx-%llx %*s %n", &lo, &hi, &pos) < 2 || pos < 0 || lo != hi || s[pos] != '/')
		return false;
	const char *sp = strrchr(s, ' ');
	size_t n = strlen(sp + 1);
	if (n < 4 || n > 128 || strspn(sp + 1, "0123456789abcdef") != n || sp - s < 4 || sp[-1] != ')' ||
	    strstr(s + pos, " (@") == NULL)
		return false;
	*start = lo;
	*id = rp_intern(sp + 1);
	return true;
}

/* MAPPED_LIBRARIES: keep the executable mappings of files, with the build
 * ids the dump gives. */
static int take_maps(reader_t *r)
{
	rp_profile_t *p = &r->raw->prof;
	size_t cap = 0, idcap = 0, nids = 0;
	struct {
		uint64_t start;
		const char *id;
	} *ids = NULL;
	char *s;
	while ((s = next_line(r)) != NULL) {
		if (*skip_sp(s) == 0)
			continue;
		rp_map_t m;
		uint64_t at;
		const char *id;
		if (build_id_line(s, &at, &id)) {
			ids = rp_grow(ids, &idcap, nids + 1, sizeof *ids);
			ids[nids].start = at;
			ids[nids++].id = id;
			continue;
		}
		int k = rp_map_line(s, &m);
		if (k < 0)
			return bad(r, "not a memory map line: '%.60s'", s);
		if (k == 0)
			continue;
		p->maps = rp_grow(p->maps, &cap, p->nmaps + 1, sizeof *p->maps);
		p->maps[p->nmaps++] = m;
	}
	if (rp_maps_sort(p) != 0) {
		size_t i = 1;
		while (p->maps[i].start >= p->maps[i - 1].limit)
			i++;
		return bad(r, "memory map has overlapping mappings at 0x%llx", (unsigned long long)p->maps[i].start);
	}
	for (size_t k = 0; k < nids; k++)
		for (size_t i = 0; i < p->nmaps; i++)
			if (p->maps[i].start == ids[k].start)
				p->maps[i].dump_build_id = ids[k].id;
	/* every mapping of a file that has one: the object's */
	for (size_t i = 0; i < p->nmaps; i++)
		for (size_t j = 0; j < p->nmaps && !p->maps[i].dump_build_id; j++)
			if (p->maps[j].path == p->maps[i].path)
				p->maps[i].dump_build_id = p->maps[j].dump_build_id;
	rp_free(ids);
	return 0;
}

static bool maps_header(const char *s)
{
	return !strcmp(s, "MAPPED_LIBRARIES:") || !strcmp(s, "--- Memory map: ---");
}

/* The next line of the stacks section that is not blank; NULL at its
 * end.  MAPPED_LIBRARIES ends it in both formats, and the memory map is
 * read then: *rc is its result (0 at the end of the file). */
static char *stack_line(reader_t *r, int *rc)
{
	char *s;
	*rc = 0;
	while ((s = next_line(r)) != NULL) {
		const char *t = skip_sp(s);
		if (*t == 0)
			continue;
		if (maps_header(t)) {
			r->maps_seen = true;
			*rc = take_maps(r);
			return NULL;
		}
		return s;
	}
	return NULL;
}

/* "a: <age ns> <size> <weight x 1000> <thread>" (agent/dump.c) */
static int take_age(reader_t *r, rp_rawstack_t *st, const char *q, size_t *cap)
{
	uint64_t ns, size, w, th;
	if (st->all.thread == -2 || !take_u64(&q, &ns) || !take_u64(&q, &size) || !take_u64(&q, &w) ||
	    !take_u64(&q, &th) || th > INT64_MAX || *skip_sp(q))
		return bad(r,
		    "expected 'a: <age ns> <size> <weight> <thread>' after a stack's 't' lines, found '%.60s'", q - 2);
	st->ages = rp_grow(st->ages, cap, st->nages + 1, sizeof *st->ages);
	st->ages[st->nages++] = (rp_age_t){ ns, size, (double)w / 1000.0, (int64_t)th };
	r->raw->has_ages = true;
	return 0;
}

/* "l: <frees> <in 1 ms> <in 1 s> <in 1 min> <bits>:<count>..." */
static int take_life(reader_t *r, rp_rawstack_t *st, const char *q)
{
	const char *line = q - 2;
	rp_life_t *l = rp_alloc(sizeof *l);
	memset(l, 0, sizeof *l);
	if (st->life || !take_u64(&q, &l->frees) || !take_u64(&q, &l->lt_1ms) || !take_u64(&q, &l->lt_1s) ||
	    !take_u64(&q, &l->lt_1min) || l->lt_1ms > l->lt_1s || l->lt_1s > l->lt_1min || l->lt_1min > l->frees)
		return bad(r,
		    "expected one 'l: <frees> <in 1 ms> <in 1 s> <in 1 min> <bits>:<count>...' per stack, "
		    "found '%.60s'",
		    line);
	uint64_t sum = 0;
	while (*skip_sp(q)) {
		uint64_t b, n;
		if (!take_u64(&q, &b) || !take_ch(&q, ':') || !take_u64(&q, &n) || b >= RP_LIFE_BUCKETS ||
		    n > l->frees - sum)
			return bad(r, "bad lifetime bucket in '%.60s'", line);
		l->hist[b] += n;
		sum += n;
	}
	if (sum != l->frees)
		return bad(r, "lifetime buckets add up to %llu, not %llu frees, in '%.60s'", (unsigned long long)sum,
		    (unsigned long long)l->frees, line);
	st->life = l;
	return 0;
}

static int read_heap_v2(reader_t *r, const char *first)
{
	rp_raw_t *raw = r->raw;
	char *e;
	errno = 0;
	unsigned long long period = strtoull(first + 8, &e, 10);
	if (errno || e == first + 8 || *skip_sp(e))
		return bad(r, "expected 'heap_v2/<sample period>', found '%.40s'", first);
	raw->algorithm = 2;
	raw->prof.period = period;
	raw->adjust = (double)period;
	char *s;
	int rc;
	rp_rawstack_t *cur = NULL;
	size_t thrcap = 0, agecap = 0;
	while ((s = stack_line(r, &rc)) != NULL) {
		const char *t = skip_sp(s);
		if (t[0] == '@') {
			if (cur && cur->all.thread == -2 && cur->life == NULL)
				return bad(r, "stack without a 't*' line");
			if (take_stack(r, t + 1))
				return -1;
			cur = &raw->stacks[raw->nstacks - 1];
			cur->all.thread = -2; /* no t* line yet */
			thrcap = 0;
			agecap = 0;
			continue;
		}
		if ((t[0] == 'a' || t[0] == 'l') && t[1] == ':') {
			if (cur == NULL)
				return bad(r, "'%c:' line before the first stack", t[0]);
			if (t[0] == 'a' ? take_age(r, cur, t + 2, &agecap) : take_life(r, cur, t + 2))
				return -1;
			continue;
		}
		if (t[0] != 't')
			return bad(r, "expected '@ addresses' or a 't' line, found '%.40s'", t);
		double c[RP_NTYPES];
		const char *q = t + 1;
		int64_t thread;
		if (*q == '*') {
			thread = -1;
			q++;
		} else {
			uint64_t v;
			if (!take_u64(&q, &v) || v > INT64_MAX)
				return bad(r, "expected 't*:' or 't<thread>:', found '%.40s'", t);
			thread = (int64_t)v;
		}
		/* a thread line may end in the thread's name (thread.prof.name) */
		if (!take_ch(&q, ':') || !take_counts(&q, c) || (thread == -1 && *skip_sp(q)) ||
		    (*q && *q != ' ' && *q != '\t'))
			return bad(r, "expected 't<thread>: objects: bytes [objects: bytes]', found '%.60s'", t);
		if (cur == NULL)
			continue; /* the profile-wide totals */
		if (thread == -1) {
			if (cur->all.thread != -2)
				return bad(r, "second 't*' line for one stack");
			cur->all.thread = -1;
			memcpy(cur->all.c, c, sizeof c);
		} else {
			if (cur->all.thread == -2)
				return bad(r, "thread line before the stack's 't*' line");
			cur->thr = rp_grow(cur->thr, &thrcap, cur->nthr + 1, sizeof *cur->thr);
			cur->thr[cur->nthr].thread = thread;
			memcpy(cur->thr[cur->nthr].c, c, sizeof c);
			cur->nthr++;
		}
	}
	return rc;
}

static int read_gperftools(reader_t *r, const char *first)
{
	rp_raw_t *raw = r->raw;
	const char *q = first + strlen("heap profile:");
	double c[RP_NTYPES];
	if (!take_counts(&q, c))
		return bad(r, "expected 'heap profile: objects: bytes [objects: bytes] @ type', found '%.60s'", first);
	/* jeprof's rules (ReadHeapProfile): "heapprofile" or a type without
	 * "heap" is every allocation; a type with "_v2" is heap_v2 sampling at
	 * period N; another "heap" type is v1 sampling, adjusted by N/2; a
	 * sampled profile without N was taken at 128 KiB; no type at all is
	 * v1 sampling when the in-use and allocated counts are equal. */
	uint64_t period = 0;
	if (take_ch(&q, '@')) {
		q = skip_sp(q);
		const char *slash = strchr(q, '/');
		size_t tlen = slash ? (size_t)(slash - q) : strlen(q);
		while (tlen && (q[tlen - 1] == ' ' || q[tlen - 1] == '\t'))
			tlen--;
		if (slash) {
			char *e;
			errno = 0;
			period = strtoull(slash + 1, &e, 10);
			if (errno || e == slash + 1 || *skip_sp(e))
				return bad(r, "bad sampling period in '%.40s'", q);
		}
		bool heapish = memmem(q, tlen, "heap", 4) != NULL;
		if (tlen == 11 && !strncmp(q, "heapprofile", 11))
			heapish = false;
		if (heapish && memmem(q, tlen, "_v2", 3)) {
			raw->algorithm = 2;
			raw->adjust = (double)period;
		} else if (heapish) {
			raw->algorithm = 1;
			raw->adjust = (double)period / 2;
		}
	} else if (c[0] == c[2] && c[1] == c[3]) {
		raw->algorithm = 1;
	}
	if (raw->algorithm && raw->adjust == 0)
		raw->adjust = 128 * 1024;
	raw->prof.period = period ? period : (uint64_t)raw->adjust;
	char *s;
	int rc;
	while ((s = stack_line(r, &rc)) != NULL) {
		const char *t = skip_sp(s);
		if (!take_counts(&t, c) || !take_ch(&t, '@'))
			return bad(r, "expected 'objects: bytes [objects: bytes] @ addresses', found '%.60s'", s);
		if (take_stack(r, t))
			return -1;
		rp_rawstack_t *st = &raw->stacks[raw->nstacks - 1];
		memcpy(st->all.c, c, sizeof c);
	}
	return rc;
}

/* "--- symbol" (jeprof allows spaces after the dashes) */
static bool marker(const char *s, const char *name)
{
	if (strncmp(s, "---", 3) != 0)
		return false;
	s += 3;
	while (*s == ' ')
		s++;
	return strncmp(s, name, strlen(name)) == 0;
}

static int cmp_embsym(const void *a, const void *b)
{
	const rp_embsym_t *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* A symbolized profile's symbol section, after its "--- symbol" line, up
 * to and including the "---" that ends it: "0x<address> names" lines, our
 * "#lines 0x<address>\tfile:line..." lines, and jeprof's "binary=" (other
 * "name=value" lines jeprof ignores, and so do we). */
static int read_symbols(reader_t *r)
{
	rp_raw_t *raw = r->raw;
	size_t cap = 0;
	char *s;
	while ((s = next_line(r)) != NULL) {
		const char *t = skip_sp(s);
		if (!strncmp(s, "---", 3))
			break;
		if (*t == 0)
			continue;
		bool lines = !strncmp(s, "#lines 0x", 9);
		if (s[0] == '0' && s[1] == 'x' ? false : !lines) {
			if (!strncmp(s, "binary=", 7))
				raw->binary = rp_strdup(s + 7);
			else if (!(s[0] >= 'a' && s[0] <= 'z' && strchr(s, '=')) && s[0] != '#')
				return bad(r, "expected '0x<address> <function>' in the symbol section, found '%.40s'",
				    s);
			continue;
		}
		const char *q = lines ? s + 9 : s + 2;
		char *e;
		errno = 0;
		uint64_t key = strtoull(q, &e, 16);
		if (errno || e == q || (*e != ' ' && *e != '\t') || *skip_sp(e) == 0)
			return bad(r, "expected '0x<address> <function>' in the symbol section, found '%.40s'", s);
		const char *v = skip_sp(e);
		if (lines) {
			/* it follows its address's names line */
			if (raw->nsyms && raw->syms[raw->nsyms - 1].key == key)
				raw->syms[raw->nsyms - 1].lines = rp_strdup(v);
			continue;
		}
		raw->syms = rp_grow(raw->syms, &cap, raw->nsyms + 1, sizeof *raw->syms);
		raw->syms[raw->nsyms++] = (rp_embsym_t){ .key = key, .names = rp_strdup(v) };
	}
	if (s == NULL)
		return bad(r, "the symbol section has no '---' line to end it");
	if (raw->nsyms)
		qsort(raw->syms, raw->nsyms, sizeof *raw->syms, cmp_embsym);
	raw->symbolized = true;
	return 0;
}

/* The whole file into r->buf (*got bytes), *mtime_ns its time written;
 * -1 with r->err when it cannot be read or is plainly no heap profile. */
static int read_file(reader_t *r, size_t *got, int64_t *mtime_ns)
{
	const char *path = r->path;
	char *err = r->err;
	size_t errlen = r->errlen;
	/* O_NONBLOCK: a FIFO with no writer is refused below, not waited for */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is not a regular file", path);
		close(fd);
		return -1;
	}
	*mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	/* the first 64 KiB say whether it is a profile at all, before a
	 * gigabyte of something else is read, or room is asked for a
	 * terabyte of it */
	size_t head = (size_t)st.st_size < 65536 ? (size_t)st.st_size : 65536;
	r->buf = rp_alloc(head + 1);
	*got = 0;
	while (*got < head) {
		ssize_t n = read(fd, r->buf + *got, head - *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		*got += (size_t)n;
	}
	const char *why = NULL;
	if (*got >= 2 && (unsigned char)r->buf[0] == 0x1f && (unsigned char)r->buf[1] == 0x8b)
		why = "is gzip-compressed, not a heap profile (a pprof file? 'go tool pprof' reads those)";
	else if (memchr(r->buf, 0, *got))
		why = "is not a heap profile (it holds binary data)";
	else if (*got >= 13 && strncmp(r->buf, "heap_v2/", 8) != 0 && strncmp(r->buf, "heap profile:", 13) != 0 &&
	    strncmp(r->buf, "---", 3) != 0)
		why = "is not a heap profile (expected 'heap_v2/' or 'heap profile:' on line 1)";
	if (why) {
		snprintf(err, errlen, "%s %s", path, why);
		close(fd);
		return -1;
	}
	if ((size_t)st.st_size > head) {
		char *all = rp_alloc((size_t)st.st_size + 1);
		memcpy(all, r->buf, *got);
		r->buf = all;
	}
	while (*got < (size_t)st.st_size) {
		ssize_t n = read(fd, r->buf + *got, (size_t)st.st_size - *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "cannot read %s: %s", path, n ? strerror(errno) : "file shrank");
			close(fd);
			return -1;
		}
		*got += (size_t)n;
	}
	close(fd);
	if (memchr(r->buf, 0, *got)) {
		snprintf(err, errlen, "%s is not a heap profile (it holds binary data)", path);
		return -1;
	}
	return 0;
}

/* RP_READ_TEXT: the profile as written from its header line first on. */
static void keep_text(reader_t *r, rp_raw_t *raw, const char *first)
{
	/* the header line read ends in a NUL now (two, for "\r\n");
	 * what follows it is untouched */
	raw->textlen = (size_t)(r->end - first);
	char *t = rp_alloc(raw->textlen + 1);
	size_t l1 = strlen(first), span = (size_t)(r->pos - first);
	memcpy(t, first, l1);
	if (span > l1 + 1)
		t[l1] = '\r';
	if (r->ended_nl)
		t[span - 1] = '\n';
	memcpy(t + span, r->pos, (size_t)(r->end - r->pos));
	raw->text = t;
}

/* A profile read to its end is whole: 0, or -1 with r->err. */
static int check_whole(reader_t *r, rp_raw_t *raw, const char *first, size_t got)
{
	/* A cut profile is refused, not summed: every writer ends a line with a
	 * newline, and jemalloc and heapctl always end heap_v2 with the memory
	 * map, so a cut between stacks shows as a missing MAPPED_LIBRARIES. */
	if (got > 0 && !r->ended_nl) {
		snprintf(r->err, r->errlen, "%s:%u: truncated: the file ends in the middle of a line", r->path,
		    r->lineno);
		return -1;
	}
	if (first && !strncmp(first, "heap_v2/", 8) && !r->maps_seen) {
		snprintf(r->err, r->errlen,
		    "%s:%u: truncated: no MAPPED_LIBRARIES section after the last stack "
		    "(a whole heap_v2 profile ends with one)",
		    r->path, r->lineno);
		return -1;
	}
	for (size_t i = 0; i < raw->nstacks; i++) {
		rp_rawstack_t *rs = &raw->stacks[i];
		if (rs->all.thread == -2 && rs->life) {
			rs->all.thread = -1; /* its objects were all freed */
			memset(rs->all.c, 0, sizeof rs->all.c);
		} else if (rs->all.thread == -2) {
			snprintf(r->err, r->errlen, "%s:%u: stack without a 't*' line", r->path, rs->line);
			return -1;
		}
	}
	return 0;
}

int rp_read(const char *path, rp_raw_t *raw, unsigned flags, char *err, size_t errlen)
{
	memset(raw, 0, sizeof *raw);
	reader_t r = { .path = path, .err = err, .errlen = errlen, .raw = raw };
	size_t got;
	int64_t mtime_ns;
	if (read_file(&r, &got, &mtime_ns) != 0)
		return -1;
	r.pos = r.buf;
	r.end = r.buf + got;
	raw->prof.path = path;
	raw->prof.time_ns = mtime_ns;
	const char *first = next_line(&r);
	int rc = 0;
	if (first && marker(first, "symbol")) {
		/* a symbolized profile: the symbols, then "--- heap" (or
		 * "--- growth") and the profile itself */
		if (read_symbols(&r) != 0) {
			rp_index_free(&r.addrs);
			return -1;
		}
		while ((first = next_line(&r)) != NULL && *skip_sp(first) == 0)
			;
		if (first && (marker(first, "heap") || marker(first, "growth")))
			first = next_line(&r);
	}
	if (first && (flags & RP_READ_TEXT))
		keep_text(&r, raw, first);
	if (first && !strncmp(first, "heap_v2/", 8))
		rc = read_heap_v2(&r, first);
	else if (first && !strncmp(first, "heap profile:", 13))
		rc = read_gperftools(&r, first);
	else {
		snprintf(err, errlen, "%s is not a heap profile (expected 'heap_v2/' or 'heap profile:' on line 1)",
		    path);
		rc = -1;
	}
	rp_index_free(&r.addrs);
	if (rc == 0)
		rc = check_whole(&r, raw, first, got);
	rp_free(r.buf); /* everything read from it was copied */
	return rc;
}
