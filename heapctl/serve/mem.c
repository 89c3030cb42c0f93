/*
 * heapctl/serve/mem.c - where each process's resident memory goes (heapctl
 * explain), for /metrics and the page's stacked plot.  Two sets of parts:
 * the resident set's (they add up to it, within explain's 2%) and the
 * heap's, split by the allocator's count.  Each process's parts are
 * measured at most every MEM_TTL_NS (smaps is read, and the process asked
 * for its statistics with a short timeout), outside the targets' lock; the
 * poller keeps a point a minute of each for the last hour.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "serve.h"

#define MEM_TTL_NS     (10ull * 1000000000ull)
#define MEM_TIMEOUT_NS (200ull * 1000000ull)
static const char *const rss_parts[] = { "heap", "anonymous", "stacks", "files", "shared", "kernel" };
static const char *const heap_parts[] = { "live_attributed", "live_other", "sampling", "fragmentation", "free",
	"metadata" };

const char *mem_part(bool heap, unsigned i)
{
	return heap ? heap_parts[i] : rss_parts[i];
}

static struct {
	pthread_mutex_t lock;
	mem_t *v;
	size_t n, cap;
} M = { .lock = PTHREAD_MUTEX_INITIALIZER };

uint64_t mem_value(const cli_explain_t *x, bool heap, unsigned i)
{
	if (heap) {
		const uint64_t v[] = { x->live_attributed, x->live_other, x->sampling, x->fragmentation, x->free,
			x->metadata };
		return v[i];
	}
	const uint64_t v[] = { x->heap, x->anonymous, x->stacks, x->files, x->shared, x->kernel };
	return v[i];
}

/* The parts of each of pids[0 .. n), into out (ok false: not measured) */
void mem_measure(const int *pids, size_t n, mem_t *out)
{
	uint64_t now = hc_shm_mono_ns();
	for (size_t i = 0; i < n; i++) {
		out[i].pid = pids[i];
		out[i].ok = false;
		pthread_mutex_lock(&M.lock);
		for (size_t k = 0; k < M.n; k++)
			if (M.v[k].pid == pids[i] && now - M.v[k].at_ns < MEM_TTL_NS) {
				out[i] = M.v[k];
				break;
			}
		pthread_mutex_unlock(&M.lock);
		if (out[i].ok)
			continue;
		char why[512];
		out[i].ok = cli_explain(pids[i], MEM_TIMEOUT_NS, &out[i].x, why, sizeof why) == 0;
		out[i].at_ns = now;
		pthread_mutex_lock(&M.lock);
		size_t k = 0;
		while (k < M.n && M.v[k].pid != pids[i])
			k++;
		if (k == M.n && M.n < 4096) {
			mem_t *g = M.n == M.cap ? realloc(M.v, (M.cap = M.cap ? M.cap * 2 : 64) * sizeof *g) : M.v;
			if (g) {
				M.v = g;
				M.n++;
			} else {
				k = SIZE_MAX;
			}
		}
		if (k < M.n)
			M.v[k] = out[i];
		pthread_mutex_unlock(&M.lock);
	}
}

/* A point a minute of each process's parts, the last hour (the page's
 * stacked plot; a process's points go with it once it is no target). */
static struct {
	pthread_mutex_t lock;
	memh_t *v;
	size_t n;
} MH = { .lock = PTHREAD_MUTEX_INITIALIZER };

void mem_sample_all(void)
{
	size_t np;
	int *pids = targets_pids(0, &np);
	mem_t *mem = calloc(np ? np : 1, sizeof *mem);
	if (pids && mem)
		mem_measure(pids, np, mem);
	int64_t now = time(NULL);
	pthread_mutex_lock(&MH.lock);
	memh_t *fresh = calloc(np ? np : 1, sizeof *fresh);
	for (size_t i = 0; fresh && pids && mem && i < np; i++) {
		memh_t *h = &fresh[i];
		for (size_t k = 0; k < MH.n; k++)
			if (MH.v[k].pid == pids[i])
				*h = MH.v[k];
		h->pid = pids[i];
		if (!mem[i].ok)
			continue;
		h->p[h->head].t = now;
		for (unsigned j = 0; j < 6; j++)
			h->p[h->head].v[j] = mem_value(&mem[i].x, false, j);
		h->head = (h->head + 1) % MEMH_N;
		if (h->n < MEMH_N)
			h->n++;
	}
	if (fresh) {
		free(MH.v);
		MH.v = fresh;
		MH.n = np;
	}
	pthread_mutex_unlock(&MH.lock);
	free(pids);
	free(mem);
}

void mem_history(int pid, memh_t *h)
{
	memset(h, 0, sizeof *h);
	h->pid = pid;
	pthread_mutex_lock(&MH.lock);
	for (size_t k = 0; k < MH.n; k++)
		if (MH.v[k].pid == pid)
			*h = MH.v[k];
	pthread_mutex_unlock(&MH.lock);
}
