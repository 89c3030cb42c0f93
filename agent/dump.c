/*
 * agent/dump.c - heap profiles in jemalloc's heap_v2 format, and every
 * trigger that writes one.
 *
 * Format (what jeprof reads):
 *
 *   heap_v2/<sample period>
 *     t*: <curobjs>: <curbytes> [<accumobjs>: <accumbytes>]
 *     t<uid>: ... [name]                       one per thread
 *   @ 0x<frame> 0x<frame> ...                  innermost first
 *     t*: ...                                  the stack's total
 *     t<uid>: ...                              per thread
 *     a: <age ns> <size> <weight x 1000> <uid> one per live sampled object
 *     l: <frees> << 1 ms> << 1 s> << 1 min> <bits>:<count> ...
 *                                              lifetimes of its sampled
 *                                              objects freed so far
 *   ...
 *   @ 0x<frame> ...                            a stack with sampled frees
 *     l: ...                                   and nothing live
 *
 *   MAPPED_LIBRARIES:
 *   <a copy of /proc/self/maps, with each loaded object's build id>
 *
 * jeprof scales each line by 1/(1 - exp(-(bytes/objs)/period)).  The tables
 * hold unbiased sums already, so each line is written with the values that
 * jeprof's scaling turns back into those sums (as jemalloc 5.3 does):
 * with c, s the unbiased objects and bytes and x = s/c,
 *   bytes_written = s * (1 - exp(-x/period)),  objs_written = bytes_written / x.
 *
 * jeprof takes only '@' and 't' lines and skips the rest, so the 'a' and
 * 'l' lines (heapctl report --lifetime, --older-than) leave what it reads
 * as it was; a stack with no 't' lines adds nothing to its profile.  Peak
 * dumps have neither: they are a snapshot of counts.
 *
 * A dump is formatted into memory under hc_prof_lock, written to
 * "<path>.tmp.<pid>" and renamed, so no reader ever sees part of a profile.
 * A name the agent makes never replaces a file: a name that is taken (a
 * restarted container's pid 1 dumping into the same volume, the files of
 * an earlier injection) is skipped for the next number, and the rename
 * itself refuses to replace (RENAME_NOREPLACE), so a file made meanwhile
 * fails the dump ("File exists") instead of being lost.  A name the
 * caller gave (prof.dump, dump -o) is replaced as jemalloc does.
 *
 * Triggers: final (prof_final, prof_leak; at exit), interval (every
 * 2^lg_prof_interval bytes allocated), high-water (prof_gdump: a new peak
 * of mapped memory, at least prof_gdump_pct above the last such dump and
 * prof_gdump_min_ms after it), manual (prof.dump), and heapctl's own:
 * timer (prof_timer_s, from a thread of the agent), threshold
 * (prof_threshold: once, when stats.allocated first exceeds it) and peak
 * (prof_peak: the sample set at the last high-water mark, dumped on demand).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h> /* rename(), and fflush before _exit */
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "events.h"
#include "hc_math.h"

/* ---- an output buffer that never touches the user's heap ---------------- */

typedef struct {
	char *p;
	size_t len, cap;
	bool failed;
} buf_t;

static void buf_reserve(buf_t *b, size_t more)
{
	if (b->failed || b->len + more <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 1 << 16;
	while (cap < b->len + more)
		cap *= 2;
	void *q = b->p ? mremap(b->p, b->cap, cap, MREMAP_MAYMOVE)
	               : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q == MAP_FAILED) {
		b->failed = true;
		return;
	}
	b->p = q;
	b->cap = cap;
}

static void buf_str(buf_t *b, const char *s)
{
	size_t n = strlen(s);
	buf_reserve(b, n);
	if (b->failed)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void buf_u64(buf_t *b, uint64_t v)
{
	char num[24];
	hc_fmt_u64(num, v);
	buf_str(b, num);
}

/* v in hex, with "0x" before it or not */
static void buf_hex_as(buf_t *b, uintptr_t v, bool prefix)
{
	static const char dig[] = "0123456789abcdef";
	char tmp[19];
	int i = 18;
	tmp[i] = 0;
	do {
		tmp[--i] = dig[v & 15];
		v >>= 4;
	} while (v);
	tmp[--i] = 'x';
	tmp[--i] = '0';
	buf_str(b, tmp + (prefix ? i : i + 2));
}

static void buf_hex(buf_t *b, uintptr_t v)
{
	buf_hex_as(b, v, true);
}

static void buf_free(buf_t *b)
{
	if (b->p)
		munmap(b->p, b->cap);
}

/* ---- counts as jeprof must read them ---------------------------------- */

static uint64_t to_u64(double d)
{
	if (!(d > 0))
		return 0;
	d += 0.5; /* round half up: d is positive */
	return d >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)d;
}

static void unbias_for_jeprof(double c, double s, double period, uint64_t *c_in, uint64_t *s_in)
{
	if (!(c > 0.5) || !(s > 0)) {
		*c_in = *s_in = 0;
		return;
	}
	double x = s / c;
	double y = s * -hc_expm1(-x / period);
	*c_in = to_u64(y / x);
	*s_in = to_u64(y);
}

static void buf_cnts(buf_t *b, const hc_cnt_t *cnt, double period, bool accum)
{
	uint64_t co, cb, ao = 0, ab = 0;
	unbias_for_jeprof(cnt->w_curobjs, cnt->w_curbytes, period, &co, &cb);
	if (accum)
		unbias_for_jeprof(cnt->w_accumobjs, cnt->w_accumbytes, period, &ao, &ab);
	buf_u64(b, co);
	buf_str(b, ": ");
	buf_u64(b, cb);
	buf_str(b, " [");
	buf_u64(b, ao);
	buf_str(b, ": ");
	buf_u64(b, ab);
	buf_str(b, "]");
}

static void cnt_add(hc_cnt_t *a, const hc_cnt_t *b)
{
	a->curobjs += b->curobjs;
	a->curbytes += b->curbytes;
	a->accumobjs += b->accumobjs;
	a->accumbytes += b->accumbytes;
	a->w_curobjs += b->w_curobjs;
	a->w_curbytes += b->w_curbytes;
	a->w_accumobjs += b->w_accumobjs;
	a->w_accumbytes += b->w_accumbytes;
}

/* Thread names set with pthread_setname_np, read from the kernel. */
static void kernel_thread_name(hc_thread_t *th)
{
	char path[64] = "/proc/self/task/";
	hc_fmt_u64(path + strlen(path), (uint64_t)th->tid);
	strcat(path, "/comm");
	char name[HC_THREAD_NAME_MAX];
	ssize_t n = hc_shm_read_file(path, name, sizeof name);
	if (n <= 0)
		return;
	while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == ' '))
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (name[i] <= ' ')
			name[i] = '_';
	name[n] = 0;
	memcpy(th->name, name, (size_t)n + 1);
}

/* A tctx's counts plus the bytes its live records have pending (sizes that
 * realloc changed and the lock-free path has not folded in yet). */
static hc_cnt_t tctx_counts(const hc_tctx_t *c, bool peak)
{
	if (peak)
		return c->peak;
	hc_cnt_t cnt = c->cnt;
	uint64_t epoch = hc_prof_reset_epoch();
	for (const hc_sample_t *r = c->samples; r; r = r->next) {
		int64_t p = __atomic_load_n(&r->pending, __ATOMIC_RELAXED);
		if (p == 0 || r->reset_epoch != epoch) /* forgotten by prof.reset */
			continue;
		cnt.curbytes += (uint64_t)p;
		cnt.w_curbytes += r->weight * (double)p;
		if (p > 0) {
			cnt.accumbytes += (uint64_t)p;
			cnt.w_accumbytes += r->weight * (double)p;
		}
	}
	return cnt;
}

void hc_dump_live(double *bytes, double *objs, uint64_t *promoted)
{
	*bytes = *objs = 0;
	*promoted = 0;
	hc_mutex_lock(&hc_prof_lock);
	for (hc_stack_t *s = hc_prof_stacks(); s; s = s->all_next)
		for (hc_tctx_t *c = s->tctxs; c; c = c->next) {
			hc_cnt_t cnt = tctx_counts(c, false);
			*bytes += cnt.w_curbytes;
			*objs += cnt.w_curobjs;
			/* a sampled small object has whole pages of its own */
			for (const hc_sample_t *r = c->samples; r; r = r->next) {
				uint64_t n = r->usize + (uint64_t)__atomic_load_n(&r->pending, __ATOMIC_RELAXED);
				if (n < HC_PROMOTED_BELOW)
					*promoted += ((n + 4095) & ~(uint64_t)4095) - n;
			}
		}
	hc_mutex_unlock(&hc_prof_lock);
}

static void buf_frames(buf_t *b, const hc_stack_t *s)
{
	buf_str(b, "@");
	for (unsigned i = 0; i < s->nframes; i++) {
		buf_str(b, " ");
		buf_hex(b, s->frames[i]);
	}
	buf_str(b, "\n");
}

/* The stack's live sampled objects, one line each, and the lifetimes of
 * those freed.  Under hc_prof_lock. */
static void buf_lives(buf_t *b, const hc_stack_t *s, uint64_t now, bool ages)
{
	uint64_t epoch = hc_prof_reset_epoch();
	for (const hc_tctx_t *c = s->tctxs; c && ages; c = c->next)
		for (const hc_sample_t *r = c->samples; r; r = r->next) {
			if (r->reset_epoch != epoch)
				continue;
			int64_t p = __atomic_load_n(&r->pending, __ATOMIC_RELAXED);
			buf_str(b, "  a: ");
			buf_u64(b, now > r->born_ns ? now - r->born_ns : 0);
			buf_str(b, " ");
			buf_u64(b, (uint64_t)((int64_t)r->usize + p));
			buf_str(b, " ");
			buf_u64(b, (uint64_t)(r->weight * 1000.0 + 0.5));
			buf_str(b, " ");
			buf_u64(b, c->thread->uid);
			buf_str(b, "\n");
		}
	const hc_life_t *l = s->life;
	if (l == NULL || l->epoch != epoch || l->frees == 0)
		return;
	buf_str(b, "  l: ");
	buf_u64(b, l->frees);
	buf_str(b, " ");
	buf_u64(b, l->lt_1ms);
	buf_str(b, " ");
	buf_u64(b, l->lt_1s);
	buf_str(b, " ");
	buf_u64(b, l->lt_1min);
	for (unsigned i = 0; i < HC_LIFE_BUCKETS; i++) {
		if (l->hist[i] == 0)
			continue;
		buf_str(b, " ");
		buf_u64(b, i);
		buf_str(b, ":");
		buf_u64(b, l->hist[i]);
	}
	buf_str(b, "\n");
}

/* Format the whole profile; peak selects the high-water snapshot. */
static void format_profile(buf_t *b, bool peak, uint64_t *leak_objs, uint64_t *leak_bytes, size_t *leak_ctx)
{
	bool accum = hc_opt.prof_accum;
	uint64_t now = hc_shm_mono_ns();
	hc_mutex_lock(&hc_prof_lock);
	hc_prof_check();
	double period = (double)((uint64_t)1 << hc_prof.lg_sample);
	hc_cnt_t all;
	memset(&all, 0, sizeof all);
	for (hc_thread_t *th = hc_prof_threads(); th; th = th->next)
		memset(&th->sum, 0, sizeof th->sum);
	size_t ctx = 0;
	for (hc_stack_t *s = hc_prof_stacks(); s; s = s->all_next) {
		bool live = false;
		for (hc_tctx_t *c = s->tctxs; c; c = c->next) {
			hc_cnt_t cnt = tctx_counts(c, peak);
			cnt_add(&c->thread->sum, &cnt);
			cnt_add(&all, &cnt);
			live |= cnt.curobjs != 0;
		}
		ctx += live;
	}
	buf_str(b, "heap_v2/");
	buf_u64(b, (uint64_t)period);
	buf_str(b, "\n  t*: ");
	buf_cnts(b, &all, period, accum);
	buf_str(b, "\n");
	for (hc_thread_t *th = hc_prof_threads(); th; th = th->next) {
		if (th->sum.curobjs == 0 && (!accum || th->sum.accumobjs == 0))
			continue;
		if (hc_opt.prof_thread_names && th->name[0] == 0)
			kernel_thread_name(th);
		buf_str(b, "  t");
		buf_u64(b, th->uid);
		buf_str(b, ": ");
		buf_cnts(b, &th->sum, period, accum);
		if (th->name[0]) {
			buf_str(b, " ");
			buf_str(b, th->name);
		}
		buf_str(b, "\n");
	}
	for (hc_stack_t *s = hc_prof_stacks(); s; s = s->all_next) {
		hc_cnt_t sum;
		memset(&sum, 0, sizeof sum);
		for (hc_tctx_t *c = s->tctxs; c; c = c->next) {
			hc_cnt_t cnt = tctx_counts(c, peak);
			cnt_add(&sum, &cnt);
		}
		if (accum ? sum.accumobjs == 0 : sum.curobjs == 0)
			continue;
		buf_frames(b, s);
		buf_str(b, "  t*: ");
		buf_cnts(b, &sum, period, accum);
		buf_str(b, "\n");
		for (hc_tctx_t *c = s->tctxs; c; c = c->next) {
			hc_cnt_t cnt = tctx_counts(c, peak);
			if (accum ? cnt.accumobjs == 0 : cnt.curobjs == 0)
				continue;
			buf_str(b, "  t");
			buf_u64(b, c->thread->uid);
			buf_str(b, ": ");
			buf_cnts(b, &cnt, period, accum);
			buf_str(b, "\n");
		}
		if (!peak && hc_opt.prof_lifetimes)
			buf_lives(b, s, now, true);
	}
	/* stacks whose sampled objects were all freed: their lifetimes */
	for (hc_stack_t *s = hc_prof_stacks(); s && !peak && hc_opt.prof_lifetimes; s = s->all_next) {
		const hc_life_t *l = s->life;
		if (l == NULL || l->epoch != hc_prof_reset_epoch() || l->frees == 0)
			continue;
		hc_cnt_t sum;
		memset(&sum, 0, sizeof sum);
		for (hc_tctx_t *c = s->tctxs; c; c = c->next) {
			hc_cnt_t cnt = tctx_counts(c, peak);
			cnt_add(&sum, &cnt);
		}
		if (accum ? sum.accumobjs != 0 : sum.curobjs != 0)
			continue; /* written above */
		buf_frames(b, s);
		buf_lives(b, s, now, false);
	}
	hc_mutex_unlock(&hc_prof_lock);
	if (leak_objs) {
		*leak_objs = to_u64(all.w_curobjs);
		*leak_bytes = to_u64(all.w_curbytes);
		*leak_ctx = ctx;
	}
}

/* ---- build ids ------------------------------------------------------------
 *
 * Each loaded object's GNU build id (NT_GNU_BUILD_ID), so that a report can
 * tell the file it finds at a dump's path from the one the process ran.
 * dl_iterate_phdr gives every object's program headers as mapped in this
 * process: the PT_NOTE segments are read in memory, no file is opened.
 * The table is made again only when the loader's counts of loads and
 * unloads changed (its first callback compares them and stops the walk),
 * so a dump of an unchanged process costs one callback and one bisection
 * per executable mapping.  It lives in pages of its own (no malloc), under
 * bid_lock; an object the table cannot hold (more than fit in the mapping
 * grown to 64 MiB), or without a note, goes without.  Files mapped with
 * mmap are not loaded objects and go without too. */

#define BID_MAX 64 /* bytes; the report takes as many */

typedef struct {
	uintptr_t lo, hi; /* the object's PT_LOAD span       */
	unsigned len;     /* of id, 0: none                  */
	unsigned char id[BID_MAX];
} bid_t;

static struct {
	bid_t *v;
	size_t n, cap;                 /* entries, and room in the pages  */
	unsigned long long adds, subs; /* dl_iterate_phdr's at the walk   */
	bool valid, full;
} bids;
static hc_mutex_t bid_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_BUILD_ID, "bid_lock");

/* The GNU build id among the notes at p (size bytes in memory); 0: none. */
static unsigned note_build_id(const unsigned char *p, size_t size, size_t align, unsigned char *id)
{
	size_t off = 0;
	while (off + sizeof(ElfW(Nhdr)) <= size) {
		const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(p + off);
		size_t name = (nh->n_namesz + align - 1) & ~(align - 1);
		size_t desc = (nh->n_descsz + align - 1) & ~(align - 1);
		size_t at = off + sizeof *nh;
		if (name > size - at || desc > size - at - name)
			return 0;
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(p + at, "GNU", 4) &&
		    nh->n_descsz >= 2 && nh->n_descsz <= BID_MAX) {
			memcpy(id, p + at + name, nh->n_descsz);
			return nh->n_descsz;
		}
		off = at + name + desc;
	}
	return 0;
}

static int bid_collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	bool *first = arg;
	if (*first) {
		*first = false;
		if (bids.valid && info->dlpi_adds == bids.adds && info->dlpi_subs == bids.subs)
			return 1; /* nothing loaded or unloaded since */
		bids.adds = info->dlpi_adds;
		bids.subs = info->dlpi_subs;
		bids.n = 0;
		bids.full = false;
	}
	if (bids.n == bids.cap) {
		size_t bytes = bids.cap * sizeof(bid_t), more = bytes ? bytes * 2 : 1 << 16;
		void *q = more > 64 << 20 ? MAP_FAILED
		    : bids.v              ? mremap(bids.v, bytes, more, MREMAP_MAYMOVE)
		             : mmap(NULL, more, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (q == MAP_FAILED) {
			bids.full = true;
			return 0;
		}
		bids.v = q;
		bids.cap = more / sizeof(bid_t);
	}
	bid_t *b = &bids.v[bids.n];
	b->lo = UINTPTR_MAX;
	b->hi = 0;
	b->len = 0;
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		b->lo = lo < b->lo ? lo : b->lo;
		b->hi = hi > b->hi ? hi : b->hi;
	}
	for (int i = 0; i < info->dlpi_phnum && b->len == 0; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		/* only a note inside a loaded segment's file bytes is in memory */
		bool loaded = false;
		for (int j = 0; j < info->dlpi_phnum && !loaded; j++) {
			const ElfW(Phdr) *l = &info->dlpi_phdr[j];
			loaded = l->p_type == PT_LOAD && ph->p_vaddr >= l->p_vaddr &&
			    ph->p_vaddr + ph->p_filesz <= l->p_vaddr + l->p_filesz;
		}
		if (loaded)
			b->len = note_build_id((const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_filesz,
			    ph->p_align == 8 ? 8 : 4, b->id);
	}
	if (b->len && b->lo < b->hi) {
		/* kept sorted by lo: objects come mostly in address order */
		size_t k = bids.n++;
		bid_t e = *b;
		for (; k > 0 && bids.v[k - 1].lo > e.lo; k--)
			bids.v[k] = bids.v[k - 1];
		bids.v[k] = e;
	}
	return 0;
}

/* Bring the table up to date; bid_lock held. */
static void bid_refresh(void)
{
	bool first = true;
	dl_iterate_phdr(bid_collect, &first);
	bids.valid = !bids.full;
}

/* The object whose span holds addr; bid_lock held. */
static const bid_t *bid_find(uintptr_t addr)
{
	size_t lo = 0, hi = bids.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bids.v[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && addr < bids.v[lo - 1].hi ? &bids.v[lo - 1] : NULL;
}

static uintptr_t hex_field(const char **s)
{
	uintptr_t v = 0;
	for (;; (*s)++) {
		char c = **s;
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
		    : c >= 'a' && c <= 'f'        ? (unsigned)(c - 'a' + 10)
		                                  : 16;
		if (d == 16)
			return v;
		v = v << 4 | d;
	}
}

/* Copy a /proc/self/maps text into b, each executable mapping of a file
 * with a known build id preceded by a line that gives it, in pprof's own
 * mapping form ("start-end perms file (@offset) build-id"):
 *
 *   7f2c1000-7f2c1000 r-xp /usr/lib/x86_64-linux-gnu/libc.so.6 (@26000) 3a2b...
 *   7f2c1000-7f2c9000 r-xp 00026000 fe:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6
 *
 * The extra line covers no address (start == end): pprof merges it with
 * the next one (adjacent, same file and offset) and keeps its build id;
 * jeprof reads only lines in /proc's form and skips it.  A path with a
 * blank is left without: both read a file name up to the first blank. */
static void copy_maps_with_ids(buf_t *b, const char *p, size_t len)
{
	hc_mutex_lock(&bid_lock);
	bid_refresh();
	const char *end = p + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *s = p, *path = NULL;
		uintptr_t start = hex_field(&s);
		bool exec = false;
		if (*s == '-') {
			s++;
			hex_field(&s);
			exec = s + 4 < eol && s[3] == 'x';
			/* the path: after offset, device and inode */
			for (int field = 0; field < 4 && s < eol; field++) {
				while (s < eol && *s == ' ')
					s++;
				while (s < eol && *s != ' ')
					s++;
			}
			while (s < eol && *s == ' ')
				s++;
			path = s < eol && *s == '/' ? s : NULL;
		}
		const bid_t *id = exec && path && !memchr(path, ' ', (size_t)(eol - path)) &&
		        !memchr(path, '\t', (size_t)(eol - path))
		    ? bid_find(start)
		    : NULL;
		if (id) {
			const char *o = p;
			while (*o != ' ') /* past the range and the perms */
				o++;
			o++;
			while (*o != ' ')
				o++;
			const char *off = o + 1, *q = off;
			uintptr_t offset = hex_field(&q);
			char hex[2 * BID_MAX + 1];
			for (unsigned i = 0; i < id->len; i++) {
				hex[2 * i] = "0123456789abcdef"[id->id[i] >> 4];
				hex[2 * i + 1] = "0123456789abcdef"[id->id[i] & 15];
			}
			hex[2 * id->len] = 0;
			buf_hex_as(b, start, false);
			buf_str(b, "-");
			buf_hex_as(b, start, false);
			buf_str(b, " r-xp ");
			buf_reserve(b, (size_t)(eol - path));
			if (!b->failed) {
				memcpy(b->p + b->len, path, (size_t)(eol - path));
				b->len += (size_t)(eol - path);
			}
			buf_str(b, " (@");
			buf_hex_as(b, offset, false); /* pprof's (@offset) has no 0x */
			buf_str(b, ") ");
			buf_str(b, hex);
			buf_str(b, "\n");
		}
		size_t n = (size_t)(eol - p) + (nl != NULL);
		buf_reserve(b, n);
		if (b->failed)
			break;
		memcpy(b->p + b->len, p, n);
		b->len += n;
		p += n;
	}
	hc_mutex_unlock(&bid_lock);
}

static void append_maps(buf_t *b)
{
	buf_str(b, "\nMAPPED_LIBRARIES:\n");
	bool own;
	int fd = hc_event_maps(&own);
	if (fd < 0)
		return;
	buf_t maps = { 0 };
	for (off_t off = 0;;) {
		buf_reserve(&maps, 65536);
		if (maps.failed)
			break;
		ssize_t n = pread(fd, maps.p + maps.len, maps.cap - maps.len, off);
		if (n <= 0)
			break;
		maps.len += (size_t)n;
		off += n;
	}
	if (own)
		close(fd);
	if (maps.failed)
		b->failed = true;
	else
		copy_maps_with_ids(b, maps.p, maps.len);
	buf_free(&maps);
}

/* ---- file names --------------------------------------------------------- */

static hc_mutex_t name_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_DUMP_NAME, "name_lock");
/* Each process numbers its dumps from 0 (a fork child starts again), and a
 * dump that failed gives its numbers back unless a later one took the next
 * ones meanwhile. */
static uint64_t seq HC_FORK_DATA, seq_i HC_FORK_DATA, seq_m HC_FORK_DATA, seq_u HC_FORK_DATA, seq_t HC_FORK_DATA,
    seq_s HC_FORK_DATA, seq_p HC_FORK_DATA, dumps_written HC_FORK_DATA;

uint64_t hc_dumps_written(void)
{
	return __atomic_load_n(&dumps_written, __ATOMIC_RELAXED);
}
void hc_dumps_restart(void)
{
	__atomic_store_n(&dumps_written, 0, __ATOMIC_RELAXED);
}

static uint64_t *kind_seq(hc_dump_kind_t kind)
{
	switch (kind) {
	case HC_DUMP_INTERVAL: return &seq_i;
	case HC_DUMP_MANUAL: return &seq_m;
	case HC_DUMP_GDUMP: return &seq_u;
	case HC_DUMP_TIMER: return &seq_t;
	case HC_DUMP_THRESHOLD: return &seq_s;
	case HC_DUMP_PEAK: return &seq_p;
	case HC_DUMP_FINAL: break;
	}
	return NULL;
}

/* The numbers a name took, to give back if its dump fails. */
typedef struct {
	uint64_t s, n;
} name_seq_t;

static void unmake_name(hc_dump_kind_t kind, name_seq_t taken)
{
	hc_mutex_lock(&name_lock);
	uint64_t *k = kind_seq(kind);
	if (seq == taken.s + 1 && (k == NULL || *k == taken.n + 1)) {
		seq = taken.s;
		if (k)
			*k = taken.n;
	}
	hc_mutex_unlock(&name_lock);
}

/* <prefix>.<pid>.<seq>.<kind><n>.heap; the final dump has no <n>; with
 * prof_time_names a UTC timestamp goes before ".heap".  <pid> is ours, or
 * name_pid where a caller of another PID namespace gave the pid it knows
 * us by (HC_CMD_DUMP's name): its dumps of several containers' pid 1 then
 * have names of their own in its directory. */
static name_seq_t make_name(hc_dump_kind_t kind, const char *prefix_for, int name_pid, char *out, size_t outlen)
{
	hc_mutex_lock(&name_lock);
	uint64_t *k = kind_seq(kind);
	uint64_t n = k ? (*k)++ : 0;
	uint64_t s = seq++;
	char prefix[HC_PREFIX_MAX];
	if (prefix_for) {
		size_t l = strnlen(prefix_for, sizeof prefix - 1);
		memcpy(prefix, prefix_for, l);
		prefix[l] = 0;
	} else {
		hc_mutex_lock(&hc_prof_lock);
		memcpy(prefix, hc_prof.prefix, sizeof prefix);
		hc_mutex_unlock(&hc_prof_lock);
	}
	hc_mutex_unlock(&name_lock);

	char tail[128], *e = tail;
	*e++ = '.';
	e = hc_fmt_u64(e, (uint64_t)(name_pid > 0 ? name_pid : getpid()));
	*e++ = '.';
	e = hc_fmt_u64(e, s);
	*e++ = '.';
	*e++ = (char)kind;
	if (kind != HC_DUMP_FINAL)
		e = hc_fmt_u64(e, n);
	if (hc_opt.prof_time_names) {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		e += strftime(e, 32, ".%Y%m%dT%H%M%S", &tm);
		*e++ = '.';
		char ms[8];
		hc_fmt_u64(ms, (uint64_t)(ts.tv_nsec / 1000000) + 1000);
		memcpy(e, ms + 1, 3); /* milliseconds, zero-padded */
		e += 3;
		*e++ = 'Z';
	}
	strcpy(e, ".heap");
	size_t plen = strlen(prefix);
	if (plen + strlen(tail) + 1 > outlen)
		plen = outlen - strlen(tail) - 1;
	memcpy(out, prefix, plen);
	strcpy(out + plen, tail);
	return (name_seq_t){ s, n };
}

/* ---- writing ------------------------------------------------------------ */

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int dump_write(const char *path, bool fresh, bool peak, uint64_t *lo, uint64_t *lb, size_t *lc, uint64_t *size);

/* Temporary files of dumps that never finished ("<name>.heap.tmp.<pid>",
 * left by a process killed mid-dump) are removed from the directory of the
 * next dump: ours (same owner), regular, of a pid that no longer runs here,
 * and over a minute old (a process of another PID namespace writing into a
 * shared directory takes milliseconds, not a minute).  Bounded, no
 * allocation. */
static void remove_stale_tmp(const char *path)
{
	char dir[HC_PREFIX_MAX + 200];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	if (slash == NULL || n + 1 >= sizeof dir)
		return;
	memcpy(dir, path, n ? n : 1);
	dir[n ? n : 1] = 0;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
	if (dfd < 0)
		return;
	char buf[4096];
	long got;
	unsigned seen = 0;
	time_t now = time(NULL);
	while (seen < 8192 && (got = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
		for (long off = 0; off < got; seen++) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			off += d->d_reclen;
			const char *t = strstr(d->d_name, ".heap.tmp.");
			if (t == NULL)
				continue;
			const char *digits = t + 10, *q = digits;
			long pid = 0;
			for (; *q >= '0' && *q <= '9' && pid < 1 << 30; q++)
				pid = pid * 10 + (*q - '0');
			if (*q || q == digits || pid <= 0 || pid == getpid())
				continue;
			struct stat st;
			if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
			    st.st_uid != geteuid() || now - st.st_mtime < 60)
				continue;
			if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
				unlinkat(dfd, d->d_name, 0);
		}
	}
	close(dfd);
}

/* Dumps being written, and whether the process is exiting: exit() does not
 * wait for other threads, so the exit path waits for dumps in flight (a
 * timer or high-water dump) and refuses new ones but its own final dump;
 * otherwise their temporary files would be left half written. */
static int writing HC_FORK_DATA, exiting; /* atomic */
static __thread bool exit_thread;

static int dump_to(const char *path, bool fresh, bool peak, uint64_t *lo, uint64_t *lb, size_t *lc, uint64_t *size)
{
	__atomic_add_fetch(&writing, 1, __ATOMIC_ACQ_REL);
	if (__atomic_load_n(&exiting, __ATOMIC_ACQUIRE) && !exit_thread) {
		__atomic_sub_fetch(&writing, 1, __ATOMIC_RELEASE);
		return ECANCELED;
	}
	int err = dump_write(path, fresh, peak, lo, lb, lc, size);
	__atomic_sub_fetch(&writing, 1, __ATOMIC_RELEASE);
	return err;
}

/* At exit: no new dump starts, and those in flight may finish (2 s at most:
 * a dump of 10,000 stacks takes 11 ms, tests/bench/RESULTS.md). */
static void drain_dumps(void)
{
	exit_thread = true;
	__atomic_store_n(&exiting, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2000 && __atomic_load_n(&writing, __ATOMIC_ACQUIRE) > 0; i++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* tmp to path, never over a file there: EEXIST if one is.  Where the file
 * system has no RENAME_NOREPLACE, a hard link does the same; where it has
 * neither, a plain rename after the look make_name's caller had. */
static int rename_fresh(const char *tmp, const char *path)
{
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return errno;
	if (link(tmp, path) == 0) {
		unlink(tmp);
		return 0;
	}
	if (errno == EEXIST)
		return EEXIST;
	return rename(tmp, path) == 0 ? 0 : errno;
}

/* fresh: a name the agent made, which never replaces a file. */
static int dump_write(const char *path, bool fresh, bool peak, uint64_t *lo, uint64_t *lb, size_t *lc, uint64_t *size)
{
	buf_t b = { 0 };
	format_profile(&b, peak, lo, lb, lc);
	append_maps(&b);
	if (b.failed) {
		buf_free(&b);
		return ENOMEM;
	}
	char tmp[HC_PREFIX_MAX + 200];
	size_t plen = strlen(path);
	if (plen + 32 > sizeof tmp) {
		buf_free(&b);
		return ENAMETOOLONG;
	}
	memcpy(tmp, path, plen);
	strcpy(tmp + plen, ".tmp.");
	hc_fmt_u64(tmp + plen + 5, (uint64_t)getpid());
	int err = 0;
	/* O_EXCL: never through a symlink or into a FIFO someone put there
	 * (a FIFO would block this thread); a stale file of ours is replaced. */
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int fd = open(tmp, flags, 0644);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp, flags, 0644);
	if (fd < 0) {
		err = errno;
	} else {
		err = write_all(fd, b.p, b.len);
		if (close(fd) != 0 && err == 0)
			err = errno;
		/* a FIFO or device at the name is someone's, never replaced (a
		 * symlink is: rename replaces the link, not what it names) */
		struct stat st;
		if (err == 0 && lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
			err = S_ISDIR(st.st_mode) ? EISDIR : EEXIST;
		if (err == 0 && fresh)
			err = rename_fresh(tmp, path);
		else if (err == 0 && rename(tmp, path) != 0)
			err = errno;
		if (err)
			unlink(tmp);
		remove_stale_tmp(path);
	}
	if (size)
		*size = b.len;
	buf_free(&b);
	if (err == 0)
		__atomic_add_fetch(&dumps_written, 1, __ATOMIC_RELAXED);
	return err;
}

/* Write path (made absolute, so whoever reads the name in an event or a
 * reply needs no idea of this process's directory), say so on stderr if it
 * fails, and publish the event.  Every dump goes through here. */
static int dump_reported(hc_dump_kind_t kind, const char *path, bool fresh, bool say, uint64_t *lo, uint64_t *lb,
    size_t *lc, char *out, size_t outlen, uint64_t *size)
{
	char abs[HC_PREFIX_MAX + 512];
	size_t plen = strlen(path);
	if (path[0] != '/' && getcwd(abs, sizeof abs - plen - 2) != NULL) {
		size_t n = strlen(abs);
		if (n > 1)
			abs[n++] = '/';
		memcpy(abs + n, path, plen + 1);
		path = abs;
	}
	uint64_t bytes = 0;
	int err = dump_to(path, fresh, kind == HC_DUMP_PEAK, lo, lb, lc, &bytes);
	/* ECANCELED: the process is exiting and its final dump is the one
	 * taken (dump_to); not an error of the program's to print, only an
	 * event for a watcher */
	if (err && say && err != ECANCELED)
		hc_say("failed to write heap profile \"", path, "\": ", strerrordesc_np(err), NULL);
	hc_event_dump(kind, path, bytes, err);
	if (out && outlen) {
		size_t n = strlen(path);
		if (n >= outlen)
			n = outlen - 1;
		memcpy(out, path, n);
		out[n] = 0;
	}
	if (size)
		*size = bytes;
	return err;
}

/* A name of ours no file has yet (see the top): 1000 taken names in a row
 * are a directory someone fills on purpose, and the rename refuses then. */
static name_seq_t make_fresh_name(hc_dump_kind_t kind, const char *prefix, int name_pid, char *out, size_t outlen)
{
	name_seq_t taken = make_name(kind, prefix, name_pid, out, outlen);
	struct stat st;
	for (int i = 0; i < 1000 && lstat(out, &st) == 0; i++)
		taken = make_name(kind, prefix, name_pid, out, outlen);
	return taken;
}

static int dump_named(hc_dump_kind_t kind, const char *path, const char *prefix, int name_pid, bool say, char *out,
    size_t outlen, uint64_t *size)
{
	char name[HC_PREFIX_MAX + 160];
	name_seq_t taken = { 0, 0 };
	bool named = path == NULL;
	if (named) {
		taken = make_fresh_name(kind, prefix, name_pid, name, sizeof name);
		path = name;
	}
	int saved = errno;
	int busy = hc_prof_busy;
	hc_prof_busy = 1; /* the dump's own work is never sampled */
	int err = dump_reported(kind, path, named, say, NULL, NULL, NULL, out, outlen, size);
	if (err && named)
		unmake_name(kind, taken);
	hc_prof_busy = busy;
	errno = saved;
	return err;
}

/* heapctl's request is answered with the error (and heapctl may still
 * stage the dump elsewhere): the service's stderr is not told */
int hc_dump_ex(hc_dump_kind_t kind, const char *path, const char *prefix, int name_pid, char *out, size_t outlen,
    uint64_t *size)
{
	return dump_named(kind, path, prefix, name_pid, false, out, outlen, size);
}

int hc_dump(hc_dump_kind_t kind, const char *path, char *out, size_t outlen)
{
	return dump_named(kind, path, NULL, 0, true, out, outlen, NULL);
}

/* ---- interval and threshold accounting ---------------------------------- */

static uint64_t interval_accum HC_FORK_DATA; /* atomic: bytes since the last i dump */
static bool threshold_fired;

void hc_dump_interval_account(uint64_t bytes)
{
	int lg = __atomic_load_n(&hc_prof.lg_interval, __ATOMIC_RELAXED);
	if (hc_prof.timer_s || hc_prof.threshold)
		hc_dump_start_timer();
	if (lg < 0 || lg > 62)
		return;
	uint64_t interval = (uint64_t)1 << lg;
	uint64_t v = __atomic_add_fetch(&interval_accum, bytes, __ATOMIC_RELAXED);
	if (v < interval)
		return;
	/* one thread wins the right to dump for this interval */
	uint64_t expect = v;
	while (expect >= interval) {
		if (__atomic_compare_exchange_n(&interval_accum, &expect, expect % interval, false, __ATOMIC_RELAXED,
		        __ATOMIC_RELAXED)) {
			if (__atomic_load_n(&hc_prof.active, __ATOMIC_RELAXED))
				hc_dump(HC_DUMP_INTERVAL, NULL, NULL, 0);
			return;
		}
	}
}

/* ---- high water --------------------------------------------------------- */

static size_t last_u_mapped, last_peak_mapped;
static uint64_t last_u_ms;
static hc_mutex_t hw_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_HIGHWATER, "hw_lock");

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Every new high-water mark that passes the growth gate (prof.gdump_pct
 * over the last one, prof.gdump_min_ms after it) is an event for watchers,
 * with or without profiling; it is also a u dump when prof.gdump is on. */
bool hc_agent_highwater(size_t mapped)
{
	if (hc_prof_busy)
		return false; /* inside the profiler: the next allocation or the
		                 control thread delivers it */
	bool active = __atomic_load_n(&hc_prof.active, __ATOMIC_RELAXED);
	bool event = false, dump = false;
	size_t previous = 0;
	hc_mutex_lock(&hw_lock);
	if (active && hc_prof.peak && mapped > last_peak_mapped + last_peak_mapped / 100) {
		last_peak_mapped = mapped;
		hc_mutex_lock(&hc_prof_lock);
		hc_prof_snapshot_peak();
		hc_mutex_unlock(&hc_prof_lock);
	}
	uint64_t t = now_ms();
	unsigned pct = __atomic_load_n(&hc_prof.gdump_pct, __ATOMIC_RELAXED);
	unsigned min_ms = __atomic_load_n(&hc_prof.gdump_min_ms, __ATOMIC_RELAXED);
	size_t need = last_u_mapped + last_u_mapped / 100 * pct;
	if (mapped > need && (last_u_ms == 0 || t - last_u_ms >= min_ms)) {
		previous = last_u_mapped;
		last_u_mapped = mapped;
		last_u_ms = t;
		event = true;
		dump = active && __atomic_load_n(&hc_prof.gdump, __ATOMIC_RELAXED);
	}
	hc_mutex_unlock(&hw_lock);
	if (!event)
		return true;
	char path[HC_PREFIX_MAX + 160];
	bool written = dump && hc_dump(HC_DUMP_GDUMP, NULL, path, sizeof path) == 0;
	hc_event_gdump(mapped, previous, written ? path : NULL);
	return true;
}

/* ---- the timer thread ---------------------------------------------------- */

static int timer_started HC_FORK_DATA; /* atomic */

static void *timer_main(void *arg)
{
	(void)arg;
	hc_prof_busy = 1; /* nothing this thread allocates is profiled */
	/* its dumps take and close none of the program's numbers; a fork
	 * child's maps, kept for after a chroot, come along */
	int maps = hc_event_maps_kept();
	if (hc_fd_table_own_keeping(&maps))
		hc_event_maps_keep(maps);
	pthread_setname_np(pthread_self(), "heapctl-timer");
	uint64_t last = now_ms();
	for (;;) {
		struct timespec ts = { 0, 100 * 1000000 };
		nanosleep(&ts, NULL);
		uint64_t thr = __atomic_load_n(&hc_prof.threshold, __ATOMIC_RELAXED);
		if (thr && !threshold_fired) {
			hc_stats_t st;
			hc_stats_refresh(&st);
			if (st.allocated > thr) {
				threshold_fired = true;
				hc_dump(HC_DUMP_THRESHOLD, NULL, NULL, 0);
			}
		}
		unsigned period = __atomic_load_n(&hc_prof.timer_s, __ATOMIC_RELAXED);
		uint64_t t = now_ms();
		if (period && t - last >= (uint64_t)period * 1000) {
			last = t;
			if (__atomic_load_n(&hc_prof.active, __ATOMIC_RELAXED))
				hc_dump(HC_DUMP_TIMER, NULL, NULL, 0);
		} else if (!period) {
			last = t;
		}
	}
	return NULL;
}

void hc_dump_start_timer(void)
{
	if (__atomic_load_n(&timer_started, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&timer_started, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int busy = hc_prof_busy;
	hc_prof_busy = 1;
	if (pthread_create(&t, &attr, timer_main, NULL) != 0) {
		hc_say("could not start the timer thread; prof_timer_s and prof_threshold are off", NULL);
		__atomic_store_n(&timer_started, 0, __ATOMIC_RELEASE);
	}
	hc_prof_busy = busy;
	pthread_attr_destroy(&attr);
}

void hc_dump_fork_prepare(void)
{
	hc_mutex_lock(&name_lock);
	hc_mutex_lock(&hw_lock);
	hc_mutex_lock(&bid_lock);
}

void hc_dump_fork_parent(void)
{
	hc_mutex_unlock(&bid_lock);
	hc_mutex_unlock(&hw_lock);
	hc_mutex_unlock(&name_lock);
}

void hc_dump_fork_child(void)
{
	hc_mutex_reinit(&bid_lock); /* its table holds: the child maps the same objects */
	hc_mutex_reinit(&hw_lock);
	hc_mutex_reinit(&name_lock);
	timer_started = 0;       /* threads do not survive fork; restarted on demand */
	if (seq | dumps_written) /* a write only where needed: the page is copied */
		seq = seq_i = seq_m = seq_u = seq_t = seq_s = seq_p = dumps_written = 0;
	writing = 0; /* nor do the dumps they were writing */
	interval_accum = 0;
}

/* ---- at exit ------------------------------------------------------------ */

/* The final dump and the leak report (lifecycle.c, at exit). */
void hc_dump_at_exit(void)
{
	drain_dumps();
	if (!hc_opt.prof || (!hc_opt.prof_final && !hc_opt.prof_leak))
		return;
	hc_prof_busy = 1;
	char name[HC_PREFIX_MAX + 160];
	make_fresh_name(HC_DUMP_FINAL, NULL, 0, name, sizeof name);
	uint64_t lo = 0, lb = 0;
	size_t lc = 0;
	int err = dump_reported(HC_DUMP_FINAL, name, true, true, &lo, &lb, &lc, NULL, 0, NULL);
	if (!hc_opt.prof_leak || lb == 0)
		return;
	char b[24], o[24], c[24];
	hc_fmt_u64(b, lb);
	hc_fmt_u64(o, lo);
	hc_fmt_u64(c, lc);
	hc_say("Leak approximation summary: ~", b, lb == 1 ? " byte, ~" : " bytes, ~", o,
	    lo == 1 ? " object, >= " : " objects, >= ", c, lc == 1 ? " context" : " contexts", NULL);
	if (!err)
		hc_say("Run jeprof on \"", name, "\" for leak detail", NULL);
	if (hc_opt.prof_leak_error) {
		hc_say("Exiting with error code because memory leaks were detected", NULL);
		fflush(NULL); /* exit() has not flushed stdio yet: keep the program's output */
		_exit(1);
	}
}
