/*
 * xthread_batches — random sizes 8 B to 16,000 B, blocks freed in batches
 * by other threads (the pattern of rpmalloc's rptest, mimalloc-bench's
 * rptestN).
 *
 * Each of `threads` threads keeps `live` slots. In each of `loops` loops it
 * replaces 30 to 100 random slots (frees what a slot holds, after checking
 * it, and allocates a block of a log-uniform random size in [minsz, maxsz]
 * there); every `xrate` loops it hands `xbatch` of its blocks to the next
 * thread's mailbox, and at the end of every loop frees, after checking them,
 * the blocks other threads handed to it. Unlike xthread_random, where every
 * free may be remote, most frees here are local and remote ones come in
 * bursts, so an allocator's batching of remote frees shows. stderr gives
 * the throughput (allocations per second, over the loops).
 */
#include <math.h>
#include <pthread.h>

#include "bench.h"

struct mailbox {
	pthread_mutex_t lock;
	struct bench_churn_slot *item;
	long n, cap;
};

struct worker {
	pthread_t tid;
	long id;
	uint64_t rng, sum, errors, allocs;
};

static long nthreads, nlive, loops, xrate, xbatch, minsz, maxsz;
static struct mailbox *box;
static pthread_barrier_t start;

static void post(struct mailbox *m, struct bench_churn_slot *s, long n)
{
	pthread_mutex_lock(&m->lock);
	if (m->n + n > m->cap) {
		m->cap = (m->n + n) * 2;
		m->item = realloc(m->item, (size_t)m->cap * sizeof(*m->item));
		if (!m->item) {
			fprintf(stderr, "xthread_batches: out of memory\n");
			exit(1);
		}
	}
	memcpy(m->item + m->n, s, (size_t)n * sizeof(*s));
	m->n += n;
	pthread_mutex_unlock(&m->lock);
}

/* Free what other threads handed to m; buf holds up to *cap items. */
static void drain(struct mailbox *m, struct bench_churn_slot **buf, long *cap, uint64_t *errors)
{
	pthread_mutex_lock(&m->lock);
	long n = m->n;
	if (n > *cap) {
		*cap = n * 2;
		free(*buf);
		*buf = bench_xmalloc((size_t)*cap * sizeof(**buf));
	}
	memcpy(*buf, m->item, (size_t)n * sizeof(**buf));
	m->n = 0;
	pthread_mutex_unlock(&m->lock);
	for (long i = 0; i < n; i++) {
		bench_churn_check(&(*buf)[i], errors);
		free((*buf)[i].p);
	}
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct bench_churn_slot *slot = calloc((size_t)nlive, sizeof(*slot));
	struct bench_churn_slot *out = bench_xmalloc((size_t)xbatch * sizeof(*out));
	struct bench_churn_slot *in = NULL;
	long incap = 0;
	double lmin = log((double)minsz), lmax = log((double)maxsz);

	if (!slot)
		exit(1);
	pthread_barrier_wait(&start);
	for (long l = 0; l < loops; l++) {
		for (long k = (long)bench_range(&w->rng, 30, 100); k > 0; k--) {
			struct bench_churn_slot *s = &slot[bench_range(&w->rng, 0, nlive - 1)];
			if (s->p) {
				bench_churn_check(s, &w->errors);
				free(s->p);
			}
			double u = (bench_rand(&w->rng) >> 11) * 0x1.0p-53;
			s->size = (uint32_t)exp(lmin + u * (lmax - lmin));
			if (s->size < minsz)
				s->size = minsz;
			if (s->size > maxsz)
				s->size = maxsz;
			s->tag = (uint32_t)bench_rand(&w->rng);
			s->p = bench_xmalloc(s->size);
			bench_churn_fill(s->p, s->size, s->tag);
			w->sum += bench_mix(((uint64_t)s->tag << 32) | s->size);
			w->allocs++;
		}
		if (nthreads > 1 && l % xrate == 0) {
			long n = 0;
			for (long k = 0; k < xbatch; k++) {
				struct bench_churn_slot *s = &slot[bench_range(&w->rng, 0, nlive - 1)];
				if (s->p) {
					out[n++] = *s;
					s->p = NULL;
				}
			}
			post(&box[(w->id + 1) % nthreads], out, n);
		}
		drain(&box[w->id], &in, &incap, &w->errors);
	}
	for (long i = 0; i < nlive; i++)
		if (slot[i].p) {
			bench_churn_check(&slot[i], &w->errors);
			free(slot[i].p);
		}
	free(slot);
	free(out);
	free(in);
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 2, "threads (1..64)" },
		{ "live", 1000, "slots per thread" },
		{ "loops", 10000, "loops per thread (30-100 allocations each)" },
		{ "xrate", 2, "hand blocks to the next thread every xrate loops" },
		{ "xbatch", 100, "slots handed on each time" },
		{ "minsz", 8, "smallest block (bytes, >= 8)" },
		{ "maxsz", 16000, "largest block (bytes)" },
		{ "seed", 29, "random seed" },
	};
	bench_parse(argc, argv, "Random sizes, batches freed by other threads.", o, BENCH_NOPTS(o));
	nthreads = o[0].value;
	nlive = o[1].value;
	loops = o[2].value;
	xrate = o[3].value;
	xbatch = o[4].value;
	minsz = o[5].value;
	maxsz = o[6].value;
	if (nthreads < 1 || nthreads > 64 || nlive < 1 || xrate < 1 || minsz < 8 || maxsz < minsz) {
		fprintf(stderr, "xthread_batches: need 1<=threads<=64, live,xrate>=1, 8<=minsz<=maxsz\n");
		return 2;
	}
	struct worker w[64];
	box = calloc((size_t)nthreads, sizeof(*box));
	if (!box)
		return 1;
	pthread_barrier_init(&start, NULL, (unsigned)nthreads);
	for (long t = 0; t < nthreads; t++) {
		pthread_mutex_init(&box[t].lock, NULL);
		w[t] = (struct worker){ .id = t, .rng = bench_seed((uint64_t)o[7].value, (uint64_t)t) };
	}
	double t0 = bench_now();
	for (long t = 0; t < nthreads; t++)
		if (pthread_create(&w[t].tid, NULL, run, &w[t])) {
			fprintf(stderr, "xthread_batches: pthread_create failed\n");
			return 1;
		}
	uint64_t sum = 0, errors = 0, allocs = 0;
	for (long t = 0; t < nthreads; t++) {
		pthread_join(w[t].tid, NULL);
		sum += w[t].sum;
		errors += w[t].errors;
		allocs += w[t].allocs;
	}
	double secs = bench_now() - t0;
	/* what was handed on after its receiver's last loop */
	struct bench_churn_slot *buf = NULL;
	long cap = 0;
	for (long t = 0; t < nthreads; t++) {
		drain(&box[t], &buf, &cap, &errors);
		free(box[t].item);
	}
	free(buf);
	free(box);
	fprintf(stderr, "xthread_batches: ops_per_sec=%.0f\n", allocs / (secs > 0 ? secs : 1e-9));
	return bench_finish("xthread_batches", sum, errors);
}
