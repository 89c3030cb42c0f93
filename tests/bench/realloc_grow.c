/*
 * realloc_grow — buffers grown by realloc in small steps, string-builder
 * style.
 *
 * `builders` buffers are grown at once, each by appending 1–64 bytes at a
 * time (realloc to the exact new length, then write the new bytes) until it
 * reaches its random target length (up to 1 MiB); then its whole content is
 * verified and it is freed and a new one started, until `buffers` buffers
 * have been completed. Between appends, small short-lived allocations
 * (16–256 B, freed FIFO from a ring) land next to the growing buffers, so
 * in-place growth is not free. Measures realloc's in-place growth, the copy
 * cost when it moves, and the size-class ladder up to large blocks.
 */
#include "bench.h"

struct builder {
	unsigned char *buf;
	uint32_t len, target, key;
	uint64_t bytesum; /* sum of all bytes appended so far */
};

/* Each append is a run of one byte value that depends on where it starts. */
static inline unsigned char fill_byte(uint32_t key, uint32_t at)
{
	return (unsigned char)(key * 7u + at);
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "builders", 16, "buffers growing at the same time" },
		{ "buffers", 500, "buffers to complete" },
		{ "minlen", 1024, "smallest final length (bytes)" },
		{ "maxlen", 1 << 20, "largest final length (bytes)" },
		{ "maxstep", 64, "largest append (bytes)" },
		{ "others", 4, "one other allocation per this many appends (0: none)" },
		{ "ring", 1024, "other allocations kept live" },
		{ "seed", 1, "random seed" },
	};
	bench_parse(argc, argv, "realloc growth with interleaved allocations", o, BENCH_NOPTS(o));
	long nb = o[0].value, todo = o[1].value, minlen = o[2].value;
	long maxlen = o[3].value, maxstep = o[4].value, others = o[5].value;
	long ringsz = o[6].value;
	if (nb < 1 || minlen < 1 || maxlen < minlen || maxstep < 1 || ringsz < 1 || maxlen > (1L << 30)) {
		fprintf(stderr,
		    "realloc_grow: need builders,maxstep,ring>=1, "
		    "1<=minlen<=maxlen<=2^30\n");
		return 2;
	}

	uint64_t rng = bench_seed(o[7].value, 0), sum = 0, errors = 0;
	struct builder *b = calloc(nb, sizeof(*b));
	unsigned char **ring = calloc(ringsz, sizeof(*ring));
	long started = 0, done = 0, rpos = 0;
	if (!b || !ring)
		return 1;

	for (long i = 0; i < nb && started < todo; i++, started++) {
		b[i].target = (uint32_t)bench_range(&rng, minlen, maxlen);
		b[i].key = (uint32_t)started;
	}
	while (done < todo) {
		struct builder *x = &b[bench_range(&rng, 0, nb - 1)];
		if (!x->target)
			continue; /* this slot has retired */

		uint32_t step = (uint32_t)bench_range(&rng, 1, maxstep);
		if (step > x->target - x->len)
			step = x->target - x->len;
		unsigned char *nbuf = realloc(x->buf, x->len + step);
		if (!nbuf) {
			fprintf(stderr, "realloc_grow: realloc failed\n");
			return 1;
		}
		x->buf = nbuf;
		unsigned char v = fill_byte(x->key, x->len);
		memset(nbuf + x->len, v, step);
		x->bytesum += (uint64_t)v * step;
		x->len += step;

		if (others && bench_range(&rng, 1, others) == 1) {
			uint32_t sz = (uint32_t)bench_range(&rng, 16, 256);
			free(ring[rpos]);
			ring[rpos] = bench_xmalloc(sz);
			memset(ring[rpos], (int)sz, sz);
			rpos = (rpos + 1) % ringsz;
		}

		if (x->len == x->target) {
			uint64_t h = 0;
			for (uint32_t k = 0; k < x->len; k++)
				h += x->buf[k];
			errors += h != x->bytesum || x->buf[0] != fill_byte(x->key, 0) || x->buf[x->len - 1] != v;
			sum += bench_mix(h ^ ((uint64_t)x->len << 32) ^ x->key);
			free(x->buf);
			x->buf = NULL;
			x->len = 0;
			x->target = 0;
			x->bytesum = 0;
			done++;
			if (started < todo) {
				x->target = (uint32_t)bench_range(&rng, minlen, maxlen);
				x->key = (uint32_t)started++;
			}
		}
	}
	for (long i = 0; i < ringsz; i++)
		free(ring[i]);
	free(ring);
	free(b);
	return bench_finish("realloc_grow", sum, errors);
}
