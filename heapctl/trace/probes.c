/*
 * heapctl/trace/probes.c - the kernel half of `heapctl trace` from this
 * side: whether it may be loaded (capabilities, and why libbpf said no),
 * loading trace.bpf.c, putting its programs on the allocator's functions
 * (uprobe_multi links, or perf-event ones on a kernel before 6.6) or on
 * the page-fault tracepoints, taking them off, and its counters.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "tr_internal.h"
#include "trace.skel.h"

static struct {
	int fd[8]; /* the uprobe_multi links (a role each, and
	              the returns)                                */
	unsigned n;
} M;

bool tr_has_caps(void)
{
	struct {
		uint32_t version;
		int pid;
	} hdr = { 0x20080522, 0 }; /* _LINUX_CAPABILITY_VERSION_3 */
	struct {
		uint32_t eff, perm, inh;
	} d[2];
	if (syscall(SYS_capget, &hdr, d) != 0)
		return geteuid() == 0;
	bool admin = d[0].eff & (1u << 21); /* CAP_SYS_ADMIN */
	bool bpf = d[1].eff & (1u << (39 - 32)), perfmon = d[1].eff & (1u << (38 - 32));
	return admin || (bpf && perfmon);
}

static char libbpf_last[512];

int tr_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	char line[512];
	vsnprintf(line, sizeof line, fmt, ap);
	size_t l = strlen(line);
	while (l > 0 && line[l - 1] == '\n')
		line[--l] = 0;
	if (l > 0)
		snprintf(libbpf_last, sizeof libbpf_last, "%s", line);
	if (getenv("HEAPCTL_TRACE_DEBUG"))
		fprintf(stderr, "libbpf: %s\n", line);
	return 0;
}

const char *tr_why_load_failed(int err)
{
	if (err == -EPERM || err == -EACCES)
		return "permission denied: it needs CAP_BPF and CAP_PERFMON, or root";
	if (err == -ENOMEM)
		return "out of locked memory: raise the limit (ulimit -l unlimited; LimitMEMLOCK=infinity in a unit)";
	return libbpf_last[0] ? libbpf_last : strerror(-err);
}

static void fill_variates(int fd)
{
	/* the quantiles of the exponential distribution of mean period: the
	 * program picks one at random */
	for (uint32_t i = 0; i < TR_VARIATES; i++) {
		double u = (i + 0.5) / TR_VARIATES;
		uint64_t v = (uint64_t)(-log(u) * T.period) + 1;
		bpf_map_update_elem(fd, &i, &v, BPF_ANY);
	}
}

void tr_counters(uint64_t *c)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = calloc((size_t)(ncpu > 0 ? ncpu : 1), sizeof *v);
	for (uint32_t k = 0; k < TR_NCOUNTERS; k++) {
		c[k] = 0;
		if (v && bpf_map_lookup_elem(bpf_map__fd(T.skel->maps.counters), &k, v) == 0)
			for (int i = 0; i < ncpu; i++)
				c[k] += v[i];
	}
	free(v);
}

/*
 * uprobe_multi links (Linux 6.6): one link puts a program on many
 * functions, and removing it waits for RCU grace periods once, where each
 * perf-event uprobe link waits for its own, under a mutex that every such
 * removal takes (tr_detach says what that cost).  libbpf 1.1
 * (Debian 12) predates them, so the kernel's BPF_LINK_CREATE is called
 * directly with its ABI's numbers (include/uapi/linux/bpf.h); on a kernel
 * without them heapctl loads the program again for perf-event links.
 */
#define HC_TRACE_UPROBE_MULTI    48 /* enum bpf_attach_type         */
#define HC_F_UPROBE_MULTI_RETURN 1u

struct link_create_uprobe_multi {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, multi_flags, pid, pad;
};

/* prog on the n functions at offs of path, at their returns if ret */
static int attach_multi(struct bpf_program *prog, const char *path, const uint64_t *offs, uint32_t n, bool ret)
{
	if (n == 0)
		return 0;
	struct link_create_uprobe_multi a;
	memset(&a, 0, sizeof a);
	a.prog_fd = (uint32_t)bpf_program__fd(prog);
	a.attach_type = HC_TRACE_UPROBE_MULTI;
	a.path = (uintptr_t)path;
	a.offsets = (uintptr_t)offs;
	a.cnt = n;
	a.multi_flags = ret ? HC_F_UPROBE_MULTI_RETURN : 0;
	a.pid = (uint32_t)T.pid;
	int fd = (int)syscall(SYS_bpf, BPF_LINK_CREATE, &a, sizeof a);
	if (fd < 0)
		return -errno;
	M.fd[M.n++] = fd;
	return 0;
}

int tr_attach(const allocator_t *al, struct bpf_link **links, unsigned *nlinks)
{
	struct trace_bpf *s = T.skel;
	if (T.o.mode == T_FAULTS) {
		links[(*nlinks)++] = bpf_program__attach_raw_tracepoint(s->progs.fault_user, "page_fault_user");
		if (links[*nlinks - 1] == NULL)
			return -errno;
		links[(*nlinks)++] = bpf_program__attach_raw_tracepoint(s->progs.fault_kernel, "page_fault_kernel");
		return links[*nlinks - 1] ? 0 : -errno;
	}
	struct bpf_program *entry[R_NROLES] = { s->progs.malloc_entry, s->progs.calloc_entry, s->progs.realloc_entry,
		s->progs.free_entry, s->progs.memalign_entry, s->progs.posix_memalign_entry };
	if (T.multi) {
		/* a link for each role's program, one for the returns */
		uint64_t offs[MAX_PROBES], rets[MAX_PROBES];
		uint32_t nret = 0;
		int err = 0;
		for (int r = 0; r < R_NROLES && err == 0; r++) {
			uint32_t n = 0;
			for (unsigned i = 0; i < al->n; i++)
				if (al->p[i].role == r)
					offs[n++] = al->p[i].off;
			err = attach_multi(entry[r], al->open_path, offs, n, false);
		}
		for (unsigned i = 0; i < al->n; i++)
			if (al->p[i].role != R_FREE)
				rets[nret++] = al->p[i].off;
		return err ? err : attach_multi(s->progs.alloc_ret, al->open_path, rets, nret, true);
	}
	for (unsigned i = 0; i < al->n; i++) {
		const probe_t *p = &al->p[i];
		struct bpf_link *l = bpf_program__attach_uprobe(entry[p->role], false, T.pid, al->open_path, p->off);
		if (l == NULL)
			return -errno;
		links[(*nlinks)++] = l;
		if (p->role == R_FREE)
			continue;
		l = bpf_program__attach_uprobe(s->progs.alloc_ret, true, T.pid, al->open_path, p->off);
		if (l == NULL)
			return -errno;
		links[(*nlinks)++] = l;
	}
	return 0;
}

static void *destroy_link(void *link)
{
	bpf_link__destroy(link);
	return NULL;
}

static void *close_link(void *fd)
{
	close((int)(intptr_t)fd);
	return NULL;
}

/* Detach every probe.  A sampled call whose return will not be seen
 * leaves nothing behind: its thread's pending mark in the kernel and its
 * stack here are dropped, or the first return after the probes come back
 * would be taken for it. */
void tr_detach(struct bpf_link **links, unsigned *nlinks)
{
	/* each link's removal waits for RCU grace periods, while the rest
	 * still trap, so they are removed together from threads of their own.
	 * In this VM glibc's 15 perf-event uprobe links took 2.9 s one after
	 * another and 1.4-1.6 s together (a mutex keeps them mostly in turn);
	 * its 7 uprobe_multi links take 85-110 ms */
	pthread_t th[2 * MAX_PROBES + 2 + 8];
	bool started[2 * MAX_PROBES + 2 + 8];
	unsigned n = 0;
	for (unsigned i = 0; i < *nlinks; i++, n++)
		started[n] = pthread_create(&th[n], NULL, destroy_link, links[i]) == 0;
	for (unsigned i = 0; i < M.n; i++, n++)
		started[n] = pthread_create(&th[n], NULL, close_link, (void *)(intptr_t)M.fd[i]) == 0;
	for (unsigned i = 0; i < n; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		else if (i < *nlinks)
			bpf_link__destroy(links[i]);
		else
			close(M.fd[i - *nlinks]);
	}
	*nlinks = 0;
	M.n = 0;
	int fd = bpf_map__fd(T.skel->maps.threads);
	uint32_t key, *prev = NULL, at;
	while (bpf_map_get_next_key(fd, prev, &key) == 0) {
		struct tstate ts;
		if (bpf_map_lookup_elem(fd, &key, &ts) == 0 && ts.pending) {
			ts.pending = 0;
			ts.memptr = 0;
			bpf_map_update_elem(fd, &key, &ts, BPF_EXIST);
		}
		at = key;
		prev = &at;
	}
	tr_pend_drop();
}

/* Open and load the BPF program: its uprobe programs for uprobe_multi
 * links if multi.  0 or a negative errno. */
int tr_load(bool multi)
{
	if (T.skel)
		trace_bpf__destroy(T.skel);
	T.skel = trace_bpf__open();
	if (T.skel == NULL)
		return -errno;
	T.skel->rodata->cfg_tgid = (uint32_t)T.pid;
	T.skel->rodata->cfg_limit = T.o.limit;
	bool faults = T.o.mode == T_FAULTS;
	struct bpf_program *p;
	bpf_object__for_each_program (p, T.skel->obj) {
		bool is_fault = p == T.skel->progs.fault_user || p == T.skel->progs.fault_kernel;
		bpf_program__set_autoload(p, is_fault == faults);
		if (multi && !is_fault)
			bpf_program__set_expected_attach_type(p, HC_TRACE_UPROBE_MULTI);
	}
	int err = trace_bpf__load(T.skel);
	if (err == 0)
		fill_variates(bpf_map__fd(T.skel->maps.variates));
	T.multi = multi && err == 0;
	return err;
}
