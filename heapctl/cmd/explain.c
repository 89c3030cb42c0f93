/*
 * heapctl/cmd/explain.c - `heapctl explain PID`: where a process's resident
 * memory goes, in parts that add up to it; and `heapctl purge PID`.
 *
 * The operating system's view comes from /proc/PID/smaps: every mapping's
 * Rss, sorted into the allocator's (the ranges the target names through
 * HC_CMD_STATS), other anonymous memory, thread stacks, mapped files and
 * shared memory.  Their sum is what the kernel counts as VmRSS (the two
 * are read a moment apart, and VmRSS is a per-CPU-batched counter, so they
 * agree within a small tolerance, printed).  The allocator's own view then
 * splits its part: live objects (those the profile attributes to a stack,
 * the rest), free space in pages that hold live objects (fragmentation,
 * per size class below), free pages waiting for decay (what a purge
 * returns) and metadata.  A process heapctl never loaded gets the OS parts
 * only, and a line on how to get the rest.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "cmd/cmd.h"
#include "cli/json.h"
#include "elf/elf.h"

/* more than the library has small size classes (its HC_NCLASSES_MAX) */
#define NCLASSES_MAX 64
/* more ranges than any heap has: chunks mapped in a row are one, and a
 * huge object is 8 MiB at least */
#define MAX_RANGES 65536

/* Resident bytes by where they are. */
typedef struct {
	uint64_t heap;    /* in the allocator's ranges                  */
	uint64_t brk;     /* [heap]: brk, another allocator's           */
	uint64_t anon;    /* other private anonymous mappings           */
	uint64_t stacks;  /* [stack] and thread stacks                  */
	uint64_t files;   /* mapped files: binaries, libraries, data    */
	uint64_t shmem;   /* shared memory: /dev/shm, memfd, SysV       */
	uint64_t segment; /* of which heapctl's own segment             */
	uint64_t other;   /* [vdso], [vvar] and the like                */
	uint64_t total;   /* the sum of every mapping's Rss             */
	uint64_t swap;
	unsigned nstacks;
} os_parts_t;

typedef struct {
	uint64_t start, end;
} range_t;

/* What the target's allocator says (HC_CMD_STATS). */
typedef struct {
	bool have;
	uint64_t allocated, active, metadata, dirty, retained;
	unsigned own; /* 0 heapctl's; the process's own malloc
	                 (injected agent): 1 glibc's, 2 jemalloc's */
	uint64_t attributed, attributed_objs, samples, promoted;
	unsigned lg_sample;
	uint64_t large, huge, nhuge;
	hc_shm_stat_t cls[NCLASSES_MAX];
	unsigned ncls;
	range_t *ranges;
	size_t nranges;
} alloc_view_t;

static int range_cmp(const void *a, const void *b)
{
	const range_t *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Ask the target for its snapshot, record by record.  Returns an
 * HC_EXIT_* code, with the reason in err. */
static int fetch_stats(hc_shm_target_t *t, uint64_t tmo, alloc_view_t *v, char *err, size_t len)
{
	size_t cap = 0;
	for (uint64_t at = 0, n = 1; at < n;) {
		hc_shm_req_t req = { .cmd = HC_CMD_STATS, .arg = (int32_t)at };
		hc_shm_rep_t rep;
		int code = hc_shm_call(t, &req, &rep, tmo, err, len);
		if (code)
			return code;
		if (rep.code != HC_REP_OK) {
			/* a library before explain: "unknown command" */
			snprintf(err, len, "process %d does not give its statistics: %.200s", t->pid,
			    hc_shm_strvalid(rep.text, sizeof rep.text) ? rep.text : "?");
			return HC_EXIT_FAILED;
		}
		n = rep.value;
		if (n > (1u << 20)) {
			snprintf(err, len, "process %d answered %" PRIu64 " statistics records: not believed", t->pid,
			    n);
			return HC_EXIT_FAILED;
		}
		size_t k = n - at < HC_SHM_STATS_PER_REPLY ? (size_t)(n - at) : HC_SHM_STATS_PER_REPLY;
		const hc_shm_stat_t *r = (const hc_shm_stat_t *)(const void *)rep.text;
		for (size_t i = 0; i < k; i++) {
			hc_shm_stat_t s;
			memcpy(&s, &r[i], sizeof s);
			switch (s.kind) {
			case HC_STAT_TOTAL:
				v->allocated = s.v[0];
				v->active = s.v[1];
				v->metadata = s.v[2];
				v->dirty = s.v[3];
				v->retained = s.v[4];
				v->own = s.v[5] <= 2 ? (unsigned)s.v[5] : 1;
				break;
			case HC_STAT_PROF:
				v->attributed = s.v[0];
				v->attributed_objs = s.v[1];
				v->samples = s.v[2];
				v->lg_sample = (unsigned)s.v[3];
				v->promoted = s.v[4];
				break;
			case HC_STAT_SMALL:
				if (v->ncls < NCLASSES_MAX)
					v->cls[v->ncls++] = s;
				break;
			case HC_STAT_LARGE: v->large = s.v[0]; break;
			case HC_STAT_HUGE:
				v->huge = s.v[0];
				v->nhuge = s.v[1];
				break;
			case HC_STAT_RANGE:
				if (s.v[1] <= s.v[0])
					break;
				/* the segment is the target's to write: a flood of
				 * ranges would cost every mapping a long walk */
				if (v->nranges == MAX_RANGES) {
					snprintf(err, len,
					    "process %d names more than %d mappings of its allocator: "
					    "not believed",
					    t->pid, MAX_RANGES);
					return HC_EXIT_FAILED;
				}
				if (v->nranges == cap) {
					cap = cap ? cap * 2 : 64;
					range_t *p = realloc(v->ranges, cap * sizeof *p);
					if (p == NULL) {
						snprintf(err, len, "out of memory");
						return HC_EXIT_FAILED;
					}
					v->ranges = p;
				}
				v->ranges[v->nranges++] = (range_t){ s.v[0], s.v[1] };
				break;
			default: /* a newer library's record: skipped */ break;
			}
		}
		at += k;
		if (k == 0)
			break;
	}
	if (v->nranges)
		qsort(v->ranges, v->nranges, sizeof *v->ranges, range_cmp);
	v->have = true;
	return 0;
}

/* Bytes of [s, e) inside the allocator's ranges. */
static uint64_t in_ranges(const alloc_view_t *v, uint64_t s, uint64_t e)
{
	uint64_t n = 0;
	for (size_t i = 0; i < v->nranges; i++) {
		uint64_t lo = v->ranges[i].start > s ? v->ranges[i].start : s;
		uint64_t hi = v->ranges[i].end < e ? v->ranges[i].end : e;
		if (hi > lo)
			n += hi - lo;
	}
	return n;
}

/* Resident pages of [s, e) outside the allocator's ranges, from
 * /proc/PID/pagemap's present bits (bit 63; 62 is swapped); -1 if it
 * cannot be read. */
static int64_t foreign_resident(int pmfd, const alloc_view_t *v, uint64_t s, uint64_t e)
{
	if (pmfd < 0)
		return -1;
	uint64_t n = 0, buf[512];
	for (uint64_t a = s; a < e;) {
		/* skip what lies in a range */
		bool in = false;
		for (size_t i = 0; i < v->nranges; i++)
			if (a >= v->ranges[i].start && a < v->ranges[i].end) {
				a = v->ranges[i].end;
				in = true;
				break;
			}
		if (in)
			continue;
		uint64_t stop = e;
		for (size_t i = 0; i < v->nranges; i++)
			if (v->ranges[i].start > a && v->ranges[i].start < stop)
				stop = v->ranges[i].start;
		uint64_t pages = (stop - a) >> 12, k = pages < 512 ? pages : 512;
		if (k == 0)
			break;
		ssize_t got = pread(pmfd, buf, k * 8, (off_t)((a >> 12) * 8));
		if (got != (ssize_t)(k * 8))
			return -1;
		for (uint64_t i = 0; i < k; i++)
			n += buf[i] >> 63;
		a += k << 12;
	}
	return (int64_t)(n << 12);
}

/* The stack pointers of the threads blocked in a system call
 * (/proc/PID/task/TID/syscall: "nr args... sp pc"). */
static size_t thread_sps(int pid, uint64_t *sp, size_t max)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (d == NULL)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char f[320], buf[512];
		snprintf(f, sizeof f, "/proc/%d/task/%s/syscall", pid, e->d_name);
		ssize_t len = hc_shm_read_file(f, buf, sizeof buf);
		if (len <= 0)
			continue;
		/* the last two fields are sp and pc */
		char *last = strrchr(buf, ' ');
		if (last == NULL || last == buf)
			continue;
		*last = 0;
		char *prev = strrchr(buf, ' ');
		if (prev == NULL)
			continue;
		sp[n++] = strtoull(prev + 1, NULL, 16);
	}
	closedir(d);
	return n;
}

static int os_read(int pid, const alloc_view_t *v, os_parts_t *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof *o);
	uint64_t sps[4096];
	size_t nsp = thread_sps(pid, sps, sizeof sps / sizeof sps[0]);
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/pagemap", pid);
	int pmfd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof path, "/proc/%d/smaps", pid);
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		int e = errno;
		if (pmfd >= 0)
			close(pmfd);
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
		return e == ENOENT ? HC_EXIT_NOPROC : HC_EXIT_FAILED;
	}
	char line[4096 + 256];
	uint64_t s = 0, e = 0, prev_end = 0;
	bool prev_guard = false, shared = false, anon = false, guard = false, stack = false;
	char name[4096] = "";
	/* one mapping's Rss is counted when its Rss: line comes */
	while (fgets(line, sizeof line, f)) {
		/* a mapping's header line: elf/'s maps reader refuses the
		 * "Rss:   4 kB" lines of its fields */
		el_map_t m;
		if (el_map_parse(line, &m) && strlen(m.perms) == 4) {
			bool this_guard = strcmp(m.perms, "---p") == 0;
			prev_guard = guard && prev_end == m.lo;
			prev_end = m.hi;
			guard = this_guard;
			s = m.lo;
			e = m.hi;
			shared = m.perms[3] == 's';
			snprintf(name, sizeof name, "%s", m.path);
			name[strcspn(name, "\n")] = 0;
			anon = name[0] == 0;
			stack = strncmp(name, "[stack", 6) == 0;
			for (size_t i = 0; !stack && anon && i < nsp; i++)
				stack = sps[i] >= s && sps[i] < e;
			/* glibc's thread stacks: rw anonymous right above a guard page */
			if (!stack && anon && prev_guard && strcmp(m.perms, "rw-p") == 0 && in_ranges(v, s, e) == 0)
				stack = true;
			continue;
		}
		unsigned long long kb;
		if (sscanf(line, "Swap: %llu kB", &kb) == 1) {
			o->swap += kb << 10;
			continue;
		}
		if (sscanf(line, "Rss: %llu kB", &kb) != 1)
			continue;
		uint64_t rss = (uint64_t)kb << 10;
		o->total += rss;
		if (rss == 0)
			continue;
		if (stack) {
			o->stacks += rss;
			o->nstacks++;
		} else if (shared &&
		    (anon || strncmp(name, "/dev/shm/", 9) == 0 || strncmp(name, "/memfd:", 7) == 0 ||
		        strncmp(name, "/SYSV", 5) == 0 || strncmp(name, "/dev/zero", 9) == 0)) {
			o->shmem += rss;
			if (strncmp(name, HC_SHM_DIR "/" HC_SHM_BASENAME,
			        sizeof HC_SHM_DIR + sizeof HC_SHM_BASENAME - 1) == 0)
				o->segment += rss;
		} else if (name[0] == '/') {
			o->files += rss;
		} else if (strcmp(name, "[heap]") == 0) {
			o->brk += rss;
		} else if (anon || strncmp(name, "[anon", 5) == 0) {
			/* a mapping partly in the allocator's ranges: the kernel
			 * merged it with a neighbour (the program's own mmap, the
			 * allocator's metadata), which pagemap tells apart; by
			 * length if it cannot be read */
			uint64_t mine = in_ranges(v, s, e), part = 0;
			if (mine >= e - s) {
				part = rss;
			} else if (mine != 0) {
				int64_t other = foreign_resident(pmfd, v, s, e);
				part = other >= 0 ? (rss > (uint64_t)other ? rss - (uint64_t)other : 0)
				                  : (uint64_t)((double)rss * (double)mine / (double)(e - s));
			}
			o->heap += part;
			o->anon += rss - part;
		} else {
			o->other += rss;
		}
	}
	fclose(f);
	if (pmfd >= 0)
		close(pmfd);
	return 0;
}

static uint64_t vmrss(int pid)
{
	char v[64];
	unsigned long long kb = 0;
	if (cli_proc_status_field(pid, "VmRSS", v, sizeof v))
		sscanf(v, "%llu", &kb);
	return (uint64_t)kb << 10;
}

/* One part, as text or JSON. */
typedef struct {
	json_t *j;
	uint64_t whole;
} printer_t;

static void part(printer_t *p, int depth, const char *key, const char *label, int64_t bytes, const char *note)
{
	if (p->j) {
		json_obj(p->j, NULL);
		json_str(p->j, "part", key);
		json_u64(p->j, "level", (uint64_t)depth); /* level 0 parts add up to the sum */
		json_i64(p->j, "bytes", bytes);
		json_end(p->j);
		return;
	}
	char b[32], sb[40];
	out_bytes((uint64_t)(bytes < 0 ? -bytes : bytes), b, sizeof b);
	snprintf(sb, sizeof sb, "%s%s", bytes < 0 ? "-" : "", b);
	double pct = p->whole ? 100.0 * (double)bytes / (double)p->whole : 0;
	printf("  %*s%-*s %11s %6.1f%%%s%s\n", depth * 2, "", 44 - depth * 2, label, sb, pct,
	    note && *note ? "   " : "", note ? note : "");
}

static int64_t sub(uint64_t a, uint64_t b)
{
	return (int64_t)a - (int64_t)b;
}

/* The classes worth a look: most free space in their pages first. */
static int cls_cmp(const void *a, const void *b)
{
	const hc_shm_stat_t *x = a, *y = b;
	uint64_t fx = x->v[3] - x->v[2] * x->size, fy = y->v[3] - y->v[2] * y->size;
	return fx < fy ? 1 : fx > fy ? -1 : 0;
}

static void print_classes(json_t *j, alloc_view_t *v, unsigned limit)
{
	qsort(v->cls, v->ncls, sizeof v->cls[0], cls_cmp);
	if (j) {
		json_arr(j, "classes");
		for (unsigned i = 0; i < v->ncls; i++) {
			const hc_shm_stat_t *c = &v->cls[i];
			json_obj(j, NULL);
			json_u64(j, "size", c->size);
			json_u64(j, "pages", c->v[0]);
			json_u64(j, "blocks", c->v[1]);
			json_u64(j, "live_blocks", c->v[2]);
			json_u64(j, "free_blocks", c->v[1] - c->v[2]);
			json_u64(j, "resident_bytes", c->v[3]);
			json_u64(j, "free_bytes", c->v[3] - c->v[2] * c->size);
			json_u64(j, "sparse_pages", c->v[4]);
			json_u64(j, "sparse_live_blocks", c->v[5]);
			json_u64(j, "sparse_resident_bytes", c->v[6]);
			json_end(j);
		}
		json_end(j);
		return;
	}
	if (v->ncls == 0)
		return;
	printf("\nfragmentation by size class (most free space first; a page is sparse when a quarter or\n"
	       "less of its blocks are live, and those few keep all of it resident):\n");
	printf("  %7s %7s %10s %10s %11s %10s %7s %12s\n", "size", "pages", "blocks", "live", "free space", "resident",
	    "sparse", "sparse holds");
	for (unsigned i = 0; i < v->ncls && i < limit; i++) {
		const hc_shm_stat_t *c = &v->cls[i];
		char fb[32], rb[32], sb[32];
		out_bytes(c->v[3] - c->v[2] * c->size, fb, sizeof fb);
		out_bytes(c->v[3], rb, sizeof rb);
		out_bytes(c->v[6], sb, sizeof sb);
		printf("  %7u %7" PRIu64 " %10" PRIu64 " %10" PRIu64 " %11s %10s %7" PRIu64 " %12s\n", c->size, c->v[0],
		    c->v[1], c->v[2], fb, rb, c->v[4], sb);
	}
	if (v->ncls > limit)
		printf("  (%u more classes: --classes 0 shows all)\n", v->ncls - limit);
}

/* The heap's size as the allocator counts it. */
static uint64_t heap_count(const alloc_view_t *v)
{
	return (v->active > v->allocated ? v->active : v->allocated) + v->dirty + v->metadata;
}

/* Both views of process pid: the allocator's (v->have false when it has
 * no segment that answers: why says so) and the OS's, and VmRSS.  The
 * allocator is asked before and after the OS is read; when its count of
 * the heap moved by more than the tolerance explain holds its parts to
 * (a decay purge returning the free pages, a burst of allocation), the
 * OS's view was read against the wrong figures and all of it is read
 * again, up to four times.  Returns 0, or an HC_EXIT_* code for the OS's
 * view with the reason in why; v's ranges are to be freed either way. */
static int collect(int pid, uint64_t tmo, alloc_view_t *v, os_parts_t *o, uint64_t *rss, char *why, size_t len)
{
	memset(v, 0, sizeof *v);
	hc_shm_target_t t;
	bool open = hc_shm_open(pid, &t, why, len) == 0;
	int code;
	for (int tries = 1;; tries++) {
		if (open && fetch_stats(&t, tmo, v, why, len) != 0) {
			free(v->ranges);
			memset(v, 0, sizeof *v);
		}
		uint64_t rss0 = vmrss(pid);
		char err[512];
		code = os_read(pid, v, o, err, sizeof err);
		*rss = (rss0 + vmrss(pid)) / 2;
		if (code) {
			snprintf(why, len, "%s", err);
			break;
		}
		alloc_view_t after = { 0 };
		bool steady = true;
		if (v->have && tries < 4 && fetch_stats(&t, tmo, &after, err, sizeof err) == 0) {
			uint64_t a = heap_count(v), b = heap_count(&after);
			uint64_t tol = a / 50 > (1u << 20) ? a / 50 : (1u << 20);
			steady = (a > b ? a - b : b - a) <= tol;
		}
		free(after.ranges);
		if (steady)
			break;
		free(v->ranges);
		memset(v, 0, sizeof *v);
	}
	if (open)
		hc_shm_close(&t);
	return code;
}

int cli_explain(int pid, uint64_t tmo, cli_explain_t *x, char *why, size_t len)
{
	alloc_view_t v;
	os_parts_t o;
	uint64_t rss = 0;
	memset(x, 0, sizeof *x);
	int code = collect(pid, tmo, &v, &o, &rss, why, len);
	free(v.ranges);
	if (code)
		return code;
	x->vm_rss = rss;
	x->sum = o.total;
	x->heapctl = v.have && !v.own;
	x->heap = o.heap;
	x->anonymous = o.anon + o.brk;
	x->stacks = o.stacks;
	x->files = o.files;
	x->shared = o.shmem;
	x->kernel = o.other;
	if (x->heapctl) {
		x->live_attributed = v.attributed < v.allocated ? v.attributed : v.allocated;
		x->sampling =
		    v.promoted < v.allocated - x->live_attributed ? v.promoted : v.allocated - x->live_attributed;
		x->live_other = v.allocated - x->live_attributed - x->sampling;
		x->fragmentation = v.active > v.allocated ? v.active - v.allocated : 0;
		x->free = v.dirty;
		x->metadata = v.metadata;
	}
	return 0;
}

/* The heap's parts, as the allocator counts them: heapctl's own, or
 * (an injected agent) the process's own malloc's. */
static void heap_parts(printer_t *p, const alloc_view_t *v, const os_parts_t *o, int pid)
{
	uint64_t heap_os = o->heap, anon = o->anon;
	uint64_t attributed = v->attributed < v->allocated ? v->attributed : v->allocated;
	uint64_t promoted = v->promoted < v->allocated - attributed ? v->promoted : v->allocated - attributed;
	uint64_t frag = v->active > v->allocated ? v->active - v->allocated : 0;
	int64_t diff = (int64_t)heap_os - (int64_t)heap_count(v);
	if (v->own) {
		/* glibc's heap is in the anonymous mappings; its own statistics
		 * say how it is used, not where */
		char note[160];
		snprintf(note, sizeof note, "%" PRIu64 " samples since the injection", v->samples);
		part(p, 0, "anonymous", "anonymous memory (malloc's heap is in here)", (int64_t)(anon + o->brk), NULL);
		if (v->own == 2) {
			part(p, 1, "malloc.live", "live (jemalloc's stats.allocated)", (int64_t)v->allocated, NULL);
			part(p, 2, "malloc.live.attributed", "attributed by the profile", (int64_t)attributed, note);
			part(p, 1, "malloc.fragmentation", "free space in pages in use", (int64_t)frag,
			    "stats.active less stats.allocated");
			part(p, 1, "malloc.free", "free pages not yet returned", (int64_t)v->dirty,
			    "every arena's pdirty; heapctl purge purges them");
			part(p, 1, "malloc.metadata", "jemalloc's metadata", (int64_t)v->metadata, NULL);
			part(p, 1, "malloc.unaccounted", "(the OS's count less jemalloc's)",
			    (int64_t)(anon + o->brk) - (int64_t)heap_count(v),
			    "other anonymous memory, or counted but not resident");
		} else {
			part(p, 1, "malloc.live", "in use by malloc (mallinfo2)", (int64_t)v->allocated, NULL);
			part(p, 2, "malloc.live.attributed", "attributed by the profile", (int64_t)attributed, note);
			part(p, 1, "malloc.free", "free in malloc's arenas", (int64_t)v->dirty,
			    "fragmentation and untrimmed tops; heapctl purge runs malloc_trim");
		}
	} else {
		char note[160];
		part(p, 0, "heap", "heapctl's heap", (int64_t)heap_os, NULL);
		snprintf(note, sizeof note, "%" PRIu64 " samples, 1 per %s", v->samples,
		    v->lg_sample < 63 ? out_bytes((uint64_t)1 << v->lg_sample, (char[32]){ 0 }, 32) : "?");
		part(p, 1, "heap.live.attributed", "live, attributed by the profile", (int64_t)attributed, note);
		part(p, 1, "heap.live.other", "live, not attributed", sub(v->allocated, attributed + promoted),
		    "allocated before profiling started, or unsampled");
		part(p, 1, "heap.sampling", "pages of sampled objects", (int64_t)promoted,
		    "each sampled small object has a page of its own");
		part(p, 1, "heap.fragmentation", "free space in pages in use", (int64_t)frag,
		    "fragmentation: see the size classes below");
		snprintf(note, sizeof note, "decaying; heapctl purge %d returns them now", pid);
		part(p, 1, "heap.dirty", "free pages not yet returned", (int64_t)v->dirty, note);
		part(p, 1, "heap.metadata", "allocator and profiler metadata", (int64_t)v->metadata, NULL);
		part(p, 1, "heap.unaccounted", "(the OS's count less the allocator's)", diff,
		    "pages counted but never touched, or returned");
	}
}

static const cli_opt_t explain_opts[] = {
	{ "classes", 'c', "N", "size classes to list, most free space first (default 8; 0: all)" },
	{ NULL, 0, NULL, NULL },
};

const cli_help_t cmd_help_explain = {
	.usage = "PID [--classes N] [--json]",
	.line = "where its resident memory goes: heap (live, fragmented, free), stacks, files",
	.opts = explain_opts,
};

int cmd_explain(cli_args_t *a)
{
	unsigned limit = 8;
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "explain", explain_opts, false);
	if (code)
		return code;
	const char *val;
	int id;
	while ((id = cli_scan_next(&sc, &val)) > 0) {
		if (id == 'c') {
			char *end;
			errno = 0;
			unsigned long n = strtoul(val, &end, 10);
			if (errno || *end || end == val || n > 1000) {
				cli_scan_end(&sc);
				return cli_err(HC_EXIT_USAGE, "explain: --classes '%s' is not a count from 0 to 1000",
				    val);
			}
			limit = n ? (unsigned)n : ~0u;
		} else {
			cli_scan_end(&sc);
			return cli_err(HC_EXIT_USAGE, "explain: unexpected argument '%s'", val);
		}
	}
	cli_scan_end(&sc);
	if (id < 0)
		return -id;
	if (a->pid <= 0)
		return cli_err(HC_EXIT_USAGE, "explain: which process? (heapctl explain PID)");
	int pid = a->pid;
	char comm[64] = "?", user[64];
	cli_proc_who(pid, user, sizeof user, comm, sizeof comm);

	alloc_view_t v;
	os_parts_t o;
	uint64_t rss;
	char why[512] = "";
	if ((code = collect(pid, a->timeout_ns, &v, &o, &rss, why, sizeof why)) != 0) {
		free(v.ranges);
		return cli_err(code, "%s", why);
	}
	uint64_t anon = o.anon;
	double err = rss ? 100.0 * ((double)o.total - (double)rss) / (double)rss : 0;

	json_t j, *jp = NULL;
	if (a->json) {
		jp = &j;
		json_begin(jp, stdout, JSON_PRETTY);
		json_obj(jp, NULL);
		json_i64(jp, "pid", pid);
		json_str(jp, "command", comm);
		json_u64(jp, "vm_rss", rss);
		json_u64(jp, "sum", o.total);
		json_u64(jp, "swap", o.swap);
		json_bool(jp, "heapctl", v.have);
		json_arr(jp, "parts");
	} else {
		char b1[32], b2[32];
		printf("process %d (%s): resident %s; the parts below add up to %s (%+.2f%%)\n\n", pid, comm,
		    out_bytes(rss, b1, sizeof b1), out_bytes(o.total, b2, sizeof b2), err);
	}
	printer_t p = { jp, o.total };
	if (v.have)
		heap_parts(&p, &v, &o, pid);
	char note[160];
	snprintf(note, sizeof note, "[heap] (brk) %s, mappings %s", out_bytes(o.brk, (char[32]){ 0 }, 32),
	    out_bytes(anon, (char[32]){ 0 }, 32));
	if (!v.have || !v.own)
		part(&p, 0, "anonymous", v.have ? "other anonymous memory" : "anonymous memory (the heap is in here)",
		    (int64_t)(anon + o.brk), note);
	snprintf(note, sizeof note, "%u mappings", o.nstacks);
	part(&p, 0, "stacks", "thread stacks", (int64_t)o.stacks, note);
	part(&p, 0, "files", "mapped files", (int64_t)o.files, "binaries, libraries, their data");
	snprintf(note, sizeof note, "heapctl's segment %s", out_bytes(o.segment, (char[32]){ 0 }, 32));
	part(&p, 0, "shared", "shared memory", (int64_t)o.shmem, o.segment ? note : NULL);
	if (o.other)
		part(&p, 0, "kernel", "kernel mappings ([vdso], [vvar])", (int64_t)o.other, NULL);
	if (jp) {
		json_end(jp);
		if (v.have) {
			json_str(jp, "allocator",
			    v.own == 2  ? "the process's own malloc (jemalloc's mallctl)"
			        : v.own ? "the process's own malloc (mallinfo2)"
			                : "heapctl");
			json_u64(jp, "purge_would_return", v.dirty);
			print_classes(jp, &v, limit);
		} else {
			json_str(jp, "heap", why);
		}
		json_end(jp);
	} else if (v.have) {
		print_classes(NULL, &v, limit);
	} else {
		printf("\nthe heap's own parts need heapctl in the process (%s):\n"
		       "  heapctl inject %d loads it now; heapctl run or heapctl systemd enable at the next start\n",
		    why, pid);
	}
	free(v.ranges);
	return 0;
}

const cli_help_t cmd_help_purge = {
	.usage = "[PID] [--json]",
	.line = "return the allocator's free pages to the OS now",
};

int cmd_purge(cli_args_t *a)
{
	if (a->argc)
		return cli_err(HC_EXIT_USAGE, "purge: unexpected argument '%s'", a->argv[0]);
	hc_shm_target_t t;
	int code = cli_target(a, &t);
	if (code)
		return code;
	uint64_t before = vmrss(t.pid);
	hc_shm_req_t req = { .cmd = HC_CMD_PURGE };
	hc_shm_rep_t rep;
	code = cli_call(a, &t, &req, &rep);
	uint64_t after = vmrss(t.pid);
	int pid = t.pid;
	hc_shm_close(&t);
	if (code)
		return code;
	if (a->json) {
		json_t j;
		json_begin(&j, stdout, JSON_LINE);
		json_obj(&j, NULL);
		json_i64(&j, "pid", pid);
		json_u64(&j, "dirty_before", rep.value);
		json_u64(&j, "rss_before", before);
		json_u64(&j, "rss_after", after);
		json_end(&j);
		return 0;
	}
	char b1[32], b2[32], b3[32];
	printf("process %d: free pages returned; resident %s -> %s (the allocator held %s of free pages)\n", pid,
	    out_bytes(before, b1, sizeof b1), out_bytes(after, b2, sizeof b2), out_bytes(rep.value, b3, sizeof b3));
	return 0;
}
