/*
 * larson_sized — a server simulation in the manner of Larson and Krishnan's
 * benchmark (mimalloc-bench's larsonN-sized), with sized frees.
 *
 * Each of `threads` workers owns a slice of `chunks` slots of one shared
 * array, filled by the main thread before the workers start. A worker
 * replaces `rounds` x `chunks` random slots of its slice: it frees the block
 * there with the size it was allocated with and puts a new block of a
 * random size in [minsz, maxsz] in its place. Then it exits and a new thread
 * takes its slice over (with the same random stream), `gens` times: each
 * generation frees blocks that a thread which has exited allocated, as a
 * server whose requests outlive the thread that started them.
 *
 * relay=1 runs the generations as larson itself does: each thread, done,
 * starts its successor and then exits, so the two overlap, and the thread
 * that starts a slice's first generation (the main one) stays alive, idle,
 * with the blocks it filled the slices with still in use.  touch=1 writes
 * only a block's first 8 bytes and reads none before freeing it (larson
 * writes two bytes): the free is the first the program's thread has seen
 * of the block's line.  touch=0 writes a word in each 64 bytes and reads
 * the first and last byte back before the free.  The row larson_relay
 * (tests/bench/run.sh) is both, with free(): mimalloc-bench's larsonN.
 *
 * The sized free is the one the allocator in the process offers, found with
 * dlsym at start: free_sized (C23), sdallocx (jemalloc, heapctl),
 * mi_free_size (mimalloc) or tc_free_sized (tcmalloc), else free (glibc
 * before 2.39). sized=0 frees with free() everywhere (larsonN). stderr
 * names the call and the throughput (frees+allocations per second).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>

#include "bench.h"

/* a line each: the workers write rng and sum on every step, and two of
 * them in one line took it from each other on every step (at 48 bytes,
 * the row's two workers spent more time on their random numbers than in
 * the allocator) */
struct worker {
	pthread_t tid;
	struct bench_churn_slot *slot; /* this worker's slice */
	uint64_t rng, sum, errors;
	long gen; /* relay: generations begun */
} __attribute__((aligned(64)));

static long nchunks, rounds, minsz, maxsz, gens;
static int relay, touch;
static sem_t slices_done; /* relay: posted by each slice's last thread */
static pthread_attr_t detached;

/* The sized free: one of two shapes, resolved once before any thread. */
static void (*free2)(void *, size_t);
static void (*free3)(void *, size_t, int);
static const char *free_name = "free";

static void sized_free(void *p, size_t size)
{
	if (free3)
		free3(p, size, 0);
	else if (free2)
		free2(p, size);
	else
		free(p);
}

static void resolve_sized_free(void)
{
	static const char *const two[] = { "free_sized", "mi_free_size", "tc_free_sized" };

	for (size_t i = 0; i < sizeof(two) / sizeof(two[0]); i++) {
		*(void **)&free2 = dlsym(RTLD_DEFAULT, two[i]);
		if (free2) {
			free_name = two[i];
			return;
		}
	}
	*(void **)&free3 = dlsym(RTLD_DEFAULT, "sdallocx");
	if (free3)
		free_name = "sdallocx";
}

static void fill_slot(struct bench_churn_slot *s, uint64_t *rng)
{
	s->size = (uint32_t)bench_range(rng, minsz, maxsz);
	s->tag = (uint32_t)bench_rand(rng);
	s->p = bench_xmalloc(s->size);
	if (touch) {
		uint64_t w = (uint64_t)s->tag << 32;
		memcpy(s->p, &w, 8);
	} else {
		bench_churn_fill(s->p, s->size, s->tag);
	}
}

/* What bench_churn_check checks of a block that touch=1 wrote. */
static uint64_t first_word_check(const struct bench_churn_slot *s, uint64_t *errors)
{
	uint64_t w;
	memcpy(&w, s->p, 8);
	*errors += w != (uint64_t)s->tag << 32;
	return bench_mix(w + s->size);
}

static void *generation(void *arg)
{
	struct worker *w = arg;

	for (long k = 0; k < rounds * nchunks; k++) {
		struct bench_churn_slot *s = &w->slot[bench_range(&w->rng, 0, nchunks - 1)];
		if (touch)
			w->sum += bench_mix(((uint64_t)s->tag << 32) | s->size);
		else
			w->sum += bench_churn_check(s, &w->errors);
		sized_free(s->p, s->size);
		fill_slot(s, &w->rng);
	}
	if (relay) {
		/* w belongs to the successor from here on */
		if (++w->gen < gens) {
			if (pthread_create(&w->tid, &detached, generation, w)) {
				fprintf(stderr, "larson_sized: pthread_create failed\n");
				exit(1);
			}
		} else {
			sem_post(&slices_done);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 2, "workers (slices of the array)" },
		{ "chunks", 5000, "slots per worker" },
		{ "minsz", 8, "smallest block (bytes, >= 8)" },
		{ "maxsz", 1000, "largest block (bytes)" },
		{ "rounds", 10, "replacements per generation, in slices" },
		{ "gens", 20, "threads that take each slice over in turn" },
		{ "sized", 1, "1: free with the size (sdallocx etc.), 0: free()" },
		{ "seed", 4141, "random seed" },
		{ "relay", 0, "1: each thread starts its successor, then exits (larson)" },
		{ "touch", 0, "1: write a block's first 8 bytes only, read none before its free" },
	};
	bench_parse(argc, argv, "Larson server simulation with sized frees.", o, BENCH_NOPTS(o));
	long nt = o[0].value;
	gens = o[5].value;
	relay = o[8].value != 0;
	touch = o[9].value != 0;
	nchunks = o[1].value;
	minsz = o[2].value;
	maxsz = o[3].value;
	rounds = o[4].value;
	if (nt < 1 || nt > 64 || nchunks < 1 || minsz < 8 || maxsz < minsz) {
		fprintf(stderr, "larson_sized: need 1<=threads<=64, chunks>=1, 8<=minsz<=maxsz\n");
		return 2;
	}
	if (o[6].value)
		resolve_sized_free();

	struct bench_churn_slot *all = calloc((size_t)(nt * nchunks), sizeof(*all));
	struct worker w[64];
	uint64_t sum = 0, errors = 0;
	if (!all)
		return 1;
	/* The main thread fills every slice (larson's warm-up). */
	for (long t = 0; t < nt; t++) {
		w[t] =
		    (struct worker){ .slot = all + t * nchunks, .rng = bench_seed((uint64_t)o[7].value, (uint64_t)t) };
		for (long i = 0; i < nchunks; i++)
			fill_slot(&w[t].slot[i], &w[t].rng);
	}
	double t0 = bench_now();
	if (relay && gens > 0) {
		if (sem_init(&slices_done, 0, 0) || pthread_attr_init(&detached) ||
		    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED)) {
			fprintf(stderr, "larson_sized: cannot set up the relay\n");
			return 1;
		}
		for (long t = 0; t < nt; t++)
			if (pthread_create(&w[t].tid, &detached, generation, &w[t])) {
				fprintf(stderr, "larson_sized: pthread_create failed\n");
				return 1;
			}
		for (long t = 0; t < nt; t++)
			while (sem_wait(&slices_done) != 0)
				;
	}
	for (long g = 0; g < gens && !relay; g++) {
		for (long t = 0; t < nt; t++)
			if (pthread_create(&w[t].tid, NULL, generation, &w[t])) {
				fprintf(stderr, "larson_sized: pthread_create failed\n");
				return 1;
			}
		for (long t = 0; t < nt; t++)
			pthread_join(w[t].tid, NULL);
	}
	double secs = bench_now() - t0;
	for (long t = 0; t < nt; t++) {
		sum += w[t].sum;
		errors += w[t].errors;
	}
	for (long i = 0; i < nt * nchunks; i++) {
		sum += touch ? first_word_check(&all[i], &errors) : bench_churn_check(&all[i], &errors);
		sized_free(all[i].p, all[i].size);
	}
	free(all);
	fprintf(stderr, "larson_sized: free call %s, ops_per_sec=%.0f\n", free_name,
	    2.0 * nt * gens * rounds * nchunks / (secs > 0 ? secs : 1e-9));
	return bench_finish("larson_sized", sum, errors);
}
