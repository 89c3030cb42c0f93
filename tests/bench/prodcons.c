/*
 * prodcons — producer/consumer with cross-thread frees.
 *
 * Producers malloc messages of random sizes (16–1024 B), fill them, and push
 * them through one bounded queue; consumers pop them, read every byte, and
 * free them. Every free therefore happens on a thread other than the one that
 * allocated the block: this measures the remote-free path (and, for
 * allocators that keep freed blocks in the freeing thread's cache, how much
 * memory drifts from producers to consumers).
 *
 * The queue moves up to `batch` pointers per lock acquisition so that the
 * mutex does not dominate the measurement.
 */
#include <pthread.h>

#include "bench.h"

struct msg_hdr {
	uint32_t size; /* whole message, header included */
	uint32_t seq;
	uint32_t producer;
	uint8_t fill; /* every payload byte has this value */
	uint8_t pad[3];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t not_full, not_empty;
	void **ring;
	size_t cap, head, count;
	long producers_left;
} q = { .lock = PTHREAD_MUTEX_INITIALIZER,
	.not_full = PTHREAD_COND_INITIALIZER,
	.not_empty = PTHREAD_COND_INITIALIZER };

static long nmsgs, batch, minsz, maxsz;
static uint64_t seed;

static void push(void **v, size_t n)
{
	pthread_mutex_lock(&q.lock);
	while (q.cap - q.count < n)
		pthread_cond_wait(&q.not_full, &q.lock);
	for (size_t i = 0; i < n; i++)
		q.ring[(q.head + q.count + i) % q.cap] = v[i];
	q.count += n;
	pthread_cond_signal(&q.not_empty);
	pthread_mutex_unlock(&q.lock);
}

/* Pop up to max pointers; 0 means the queue is drained for good. */
static size_t pop(void **v, size_t max)
{
	size_t n;

	pthread_mutex_lock(&q.lock);
	while (q.count == 0 && q.producers_left > 0)
		pthread_cond_wait(&q.not_empty, &q.lock);
	n = q.count < max ? q.count : max;
	for (size_t i = 0; i < n; i++)
		v[i] = q.ring[(q.head + i) % q.cap];
	q.head = (q.head + n) % q.cap;
	q.count -= n;
	if (n)
		pthread_cond_signal(&q.not_full);
	if (q.count)
		pthread_cond_signal(&q.not_empty);
	pthread_mutex_unlock(&q.lock);
	return n;
}

static void *producer(void *arg)
{
	uint32_t id = (uint32_t)(uintptr_t)arg;
	uint64_t rng = bench_seed(seed, id);
	void **v = bench_xmalloc(batch * sizeof(*v));
	size_t n = 0;

	for (long i = 0; i < nmsgs; i++) {
		uint32_t size = (uint32_t)bench_range(&rng, minsz, maxsz);
		struct msg_hdr *m = bench_xmalloc(size);
		m->size = size;
		m->seq = (uint32_t)i;
		m->producer = id;
		m->fill = (uint8_t)(i * 31 + id);
		memset(m + 1, m->fill, size - sizeof(*m));
		v[n++] = m;
		if (n == (size_t)batch) {
			push(v, n);
			n = 0;
		}
	}
	if (n)
		push(v, n);
	free(v);

	pthread_mutex_lock(&q.lock);
	if (--q.producers_left == 0)
		pthread_cond_broadcast(&q.not_empty);
	pthread_mutex_unlock(&q.lock);
	return NULL;
}

struct consumer {
	pthread_t tid;
	uint64_t sum, errors, count;
};

static void *consumer(void *arg)
{
	struct consumer *c = arg;
	void **v = bench_xmalloc(batch * sizeof(*v));
	size_t n;

	while ((n = pop(v, batch)) > 0) {
		for (size_t i = 0; i < n; i++) {
			struct msg_hdr *m = v[i];
			const uint8_t *b = (const uint8_t *)(m + 1);
			uint32_t len = m->size - sizeof(*m), bytes = 0;
			for (uint32_t k = 0; k < len; k++)
				bytes += b[k];
			c->errors +=
			    bytes != (uint32_t)m->fill * len || m->fill != (uint8_t)(m->seq * 31 + m->producer);
			c->sum += bench_mix(((uint64_t)m->producer << 32 | m->seq) ^ ((uint64_t)m->size << 40) ^ bytes);
			c->count++;
			free(m);
		}
	}
	free(v);
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "producers", 2, "producer threads" },
		{ "consumers", 2, "consumer threads" },
		{ "msgs", 1000000, "messages per producer" },
		{ "queue", 4096, "queue capacity (messages)" },
		{ "batch", 32, "messages moved per queue operation" },
		{ "minsz", 16, "smallest message (bytes, >= 16)" },
		{ "maxsz", 1024, "largest message (bytes)" },
		{ "seed", 1, "random seed" },
	};
	bench_parse(argc, argv, "producer/consumer with cross-thread frees", o, BENCH_NOPTS(o));
	long np = o[0].value, nc = o[1].value;
	nmsgs = o[2].value;
	q.cap = o[3].value;
	batch = o[4].value;
	minsz = o[5].value;
	maxsz = o[6].value;
	seed = o[7].value;
	if (np < 1 || nc < 1 || batch < 1 || q.cap < (size_t)batch || minsz < (long)sizeof(struct msg_hdr) ||
	    maxsz < minsz) {
		fprintf(stderr,
		    "prodcons: need producers,consumers>=1, "
		    "queue>=batch>=1, 16<=minsz<=maxsz\n");
		return 2;
	}
	q.ring = bench_xmalloc(q.cap * sizeof(void *));
	q.producers_left = np;

	pthread_t *pt = bench_xmalloc(np * sizeof(*pt));
	struct consumer *c = calloc(nc, sizeof(*c));
	if (!c)
		return 1;
	for (long i = 0; i < nc; i++)
		if (pthread_create(&c[i].tid, NULL, consumer, &c[i]))
			return 1;
	for (long i = 0; i < np; i++)
		if (pthread_create(&pt[i], NULL, producer, (void *)(uintptr_t)i))
			return 1;

	uint64_t sum = 0, errors = 0, count = 0;
	for (long i = 0; i < np; i++)
		pthread_join(pt[i], NULL);
	for (long i = 0; i < nc; i++) {
		pthread_join(c[i].tid, NULL);
		sum += c[i].sum;
		errors += c[i].errors;
		count += c[i].count;
	}
	if (count != (uint64_t)np * nmsgs) {
		fprintf(stderr, "prodcons: %" PRIu64 " of %ld messages arrived\n", count, np * nmsgs);
		errors++;
	}
	free(pt);
	free(c);
	free(q.ring);
	return bench_finish("prodcons", sum, errors);
}
