/*
 * big_buffers — buffers of 5 to 25 MiB allocated and freed in a loop, with
 * a few alive at once, each written every 64 KiB (a file or network buffer,
 * a decompression target).  Shows whether an allocator reuses big mappings
 * or maps, faults and unmaps them every time.
 *
 * live=20 pick=1 zero=1 is mimalloc-bench's malloc-large: 20 buffers alive,
 * a random one replaced each time, each zeroed whole (C++'s make_unique of
 * a char array value-initialises it), so every page is faulted in and the
 * peak RSS is what the allocator keeps beyond 20 buffers.
 */
#include "bench.h"

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "rounds", 2000, "buffers allocated in all" },
		{ "live", 4, "buffers alive at once" },
		{ "pick", 0, "0: replace the oldest buffer, 1: a random one" },
		{ "zero", 0, "1: zero each buffer whole before writing it" },
		{ "seed", 5, "random seed" },
	};
	bench_parse(argc, argv, "Big buffers in a loop.", o, BENCH_NOPTS(o));
	long live = o[1].value < 1 ? 1 : o[1].value > 64 ? 64 : o[1].value;
	uint64_t seed = (uint64_t)o[4].value, sum = 0, errors = 0;
	struct bench_churn_slot s[64] = { { 0 } };
	for (long r = 0; r < o[0].value; r++) {
		struct bench_churn_slot *b =
		    &s[o[2].value ? (long)bench_range(&seed, 0, (uint64_t)live - 1) : r % live];
		if (b->p) {
			uint64_t w;
			memcpy(&w, b->p + b->size / 2 / 65536 * 65536, 8);
			errors += w != b->tag;
			sum += bench_mix(w + b->size);
			free(b->p);
		}
		b->size = (uint32_t)bench_range(&seed, 5u << 20, 25u << 20);
		b->tag = (uint32_t)bench_rand(&seed);
		b->p = bench_xmalloc(b->size);
		if (o[3].value) {
			/* not malloc+memset folded into calloc by the compiler,
			 * which fresh pages let an allocator skip */
			bench_escape(b->p);
			memset(b->p, 0, b->size);
		}
		for (uint32_t off = 0; off + 8 <= b->size; off += 65536) {
			uint64_t w = b->tag;
			memcpy(b->p + off, &w, 8);
		}
	}
	for (long i = 0; i < live; i++)
		free(s[i].p);
	return bench_finish("big_buffers", sum, errors);
}
