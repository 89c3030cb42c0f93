/*
 * bench.h — helpers shared by the allocator benchmarks in tests/bench/.
 *
 * Header-only on purpose: every benchmark stays one .c file with its own
 * main(), built with `gcc -O2 -g -pthread X.c`, and uses nothing but the
 * standard malloc API, pthreads and this header (the C++ one, a .cc file
 * built with g++, C++'s operator new and delete).
 *
 * Rules every benchmark follows, so run.sh can compare allocators:
 *  - stdout carries exactly one line, "checksum=<16 hex digits>" (fastpath
 *    appends timing fields). The checksum depends only on the arguments and
 *    on memory contents, never on addresses, malloc_usable_size or thread
 *    interleaving, so it must be identical under every correct allocator.
 *  - Every object is filled with a pattern derived from its identity and
 *    checked before it is freed; a mismatch (an allocator handing out
 *    overlapping or corrupted blocks) is counted, reported on stderr and
 *    folded into the checksum, and the exit status becomes 3.
 *  - If LD_PRELOAD is set, the process checks /proc/self/maps for the
 *    library and exits 4 if it is not mapped (the preload did not happen).
 */
#ifndef BENCH_H
#define BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Helpers a given benchmark may not call. */
#define BENCH_FN static __attribute__((unused))

/* ---- arguments: "name=value" pairs, each with a default ---------------- */

struct bench_opt {
	const char *name;
	long value; /* default on entry, parsed value on return */
	const char *help;
};

BENCH_FN void bench_usage(const char *prog, const char *what, const struct bench_opt *o, size_t n)
{
	fprintf(stderr, "usage: %s [name=value ...]\n%s\n", prog, what);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "  %-10s %-12ld %s\n", o[i].name, o[i].value, o[i].help);
}

/* Parse argv into opts; exits 2 with the usage text on anything unknown. */
BENCH_FN void bench_parse(int argc, char **argv, const char *what, struct bench_opt *o, size_t n)
{
	for (int a = 1; a < argc; a++) {
		const char *eq = strchr(argv[a], '=');
		size_t i = n;

		if (eq)
			for (i = 0; i < n; i++)
				if (strlen(o[i].name) == (size_t)(eq - argv[a]) &&
				    !strncmp(o[i].name, argv[a], eq - argv[a]))
					break;
		if (i == n) {
			bench_usage(argv[0], what, o, n);
			exit(2);
		}
		char *end;
		errno = 0;
		long v = strtol(eq + 1, &end, 0);
		if (errno || *end || end == eq + 1 || v < 0) {
			fprintf(stderr, "%s: bad value for %s: '%s'\n", argv[0], o[i].name, eq + 1);
			exit(2);
		}
		o[i].value = v;
	}
}

#define BENCH_NOPTS(o) (sizeof(o) / sizeof((o)[0]))

/* ---- deterministic random numbers (splitmix64) ------------------------- */

static inline uint64_t bench_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (hi - lo < 2^32). */
static inline uint64_t bench_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + (((bench_rand(s) >> 32) * (hi - lo + 1)) >> 32);
}

/* A distinct, well-mixed seed for stream `i` derived from a base seed. */
static inline uint64_t bench_seed(uint64_t base, uint64_t i)
{
	uint64_t s = base ^ (i * 0xd1b54a32d192ed03ull);
	return bench_rand(&s);
}

/* Order-independent mixing of a value into a checksum (sum of hashes), so
 * threads may add their parts in any order. */
static inline uint64_t bench_mix(uint64_t v)
{
	uint64_t s = v;
	return bench_rand(&s);
}

/* ---- misc --------------------------------------------------------------- */

static inline double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Make the compiler believe p is used, so malloc/free pairs are not elided. */
static inline void bench_escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

BENCH_FN void *bench_xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p) {
		fprintf(stderr, "bench: malloc(%zu) failed\n", n);
		exit(1);
	}
	return p;
}

/* Exit 4 if LD_PRELOAD names a library that is not mapped in this process. */
BENCH_FN void bench_check_preload(void)
{
	const char *pre = getenv("LD_PRELOAD");
	if (!pre || !*pre)
		return;
	const char *base = strrchr(pre, '/');
	base = base ? base + 1 : pre;

	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int found = 0;
	if (!f) {
		perror("bench: /proc/self/maps");
		exit(4);
	}
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, base) != NULL;
	fclose(f);
	if (!found) {
		fprintf(stderr, "bench: LD_PRELOAD=%s is not mapped\n", pre);
		exit(4);
	}
}

/* Print the checksum line; the exit status reports detected corruption. */
BENCH_FN int bench_finish(const char *name, uint64_t sum, uint64_t errors)
{
	bench_check_preload();
	if (errors) {
		fprintf(stderr, "%s: %" PRIu64 " corrupted objects detected\n", name, errors);
		sum ^= bench_mix(errors);
	}
	printf("checksum=%016" PRIx64 "\n", sum);
	fflush(stdout);
	return errors ? 3 : 0;
}

/* ---- small-object churn, shared by st_churn and mt_churn ---------------- */

struct bench_churn_slot {
	unsigned char *p;
	uint32_t size;
	uint32_t tag;
};

/* Fill: one 8-byte word per 64-byte line (so every cache line of the object
 * is touched), then the last byte. Only word 0 and the last byte are checked;
 * size 8 has no separate last byte. */
static inline void bench_churn_fill(unsigned char *p, uint32_t size, uint32_t tag)
{
	for (uint32_t off = 0; off + 8 <= size; off += 64) {
		uint64_t w = ((uint64_t)tag << 32) | off;
		memcpy(p + off, &w, 8);
	}
	if (size > 8)
		p[size - 1] = (unsigned char)tag;
}

static inline uint64_t bench_churn_check(const struct bench_churn_slot *s, uint64_t *errors)
{
	uint64_t w;
	memcpy(&w, s->p, 8);
	int bad = w != (uint64_t)s->tag << 32;
	if (s->size > 8)
		bad |= s->p[s->size - 1] != (unsigned char)s->tag;
	*errors += bad;
	return bench_mix(w + s->size);
}

/*
 * `ops` operations on a window of `window` slots: pick a random slot; free
 * what it holds (after checking it), then put a fresh object of a random
 * size in [minsz, maxsz] there. The order of frees is therefore random, and
 * about `window` objects are live at any time. Returns the checksum part.
 */
BENCH_FN uint64_t bench_churn(uint64_t seed, long ops, long window, uint32_t minsz, uint32_t maxsz, uint64_t *errors)
{
	struct bench_churn_slot *slot = (struct bench_churn_slot *)calloc((size_t)window, sizeof(*slot));
	uint64_t rng = seed, sum = 0;

	if (!slot) {
		fprintf(stderr, "bench: out of memory for %ld slots\n", window);
		exit(1);
	}
	for (long i = 0; i < ops; i++) {
		struct bench_churn_slot *s = &slot[bench_range(&rng, 0, window - 1)];
		if (s->p) {
			sum += bench_churn_check(s, errors);
			free(s->p);
		}
		s->size = (uint32_t)bench_range(&rng, minsz, maxsz);
		s->tag = (uint32_t)i * 2654435761u + 1;
		s->p = (unsigned char *)bench_xmalloc(s->size);
		bench_churn_fill(s->p, s->size, s->tag);
	}
	for (long k = 0; k < window; k++)
		if (slot[k].p) {
			sum += bench_churn_check(&slot[k], errors);
			free(slot[k].p);
		}
	free(slot);
	return sum;
}

#endif /* BENCH_H */
