// cxx_new_delete - single-thread C++ object churn through operator new and
// delete (issue 41: C++ programs allocate with new, and their deletes are
// sized since C++14), the cost an allocator's own operator new saves over
// libstdc++'s (a call to malloc through the PLT, a test for NULL, and a
// sized delete that becomes a plain free).
//
// A window of live objects of mixed small sizes (16-256 B, most under 64,
// as C++ nodes, strings and shared_ptr blocks are); each step deletes a
// random one, after checking the words it was given, and news another in
// its place.  Two variants, `ops` steps each: plain delete, then sized
// delete (operator delete(p, size)).  Each is timed and reported in ns per
// new+delete on stderr and on stdout:
//   checksum=<hex> ns_per_pair=<plain> sized_ns_per_pair=<sized>
// (run.sh compares only the checksum field across allocators).
#include <new>

#include "bench.h"

namespace
{

struct slot {
	unsigned char *p;
	uint32_t size, tag;
};

// Sizes as C++ programs have them: three in four under 64 B.
uint32_t pick_size(uint64_t *rng)
{
	uint64_t r = bench_rand(rng);
	return (r & 3) != 0 ? (uint32_t)(16 + (r >> 8) % 48) : (uint32_t)(64 + (r >> 8) % 193);
}

void fill(const slot &s)
{
	uint64_t w = ((uint64_t)s.tag << 32) | s.size;
	memcpy(s.p, &w, 8);
	s.p[s.size - 1] = (unsigned char)s.tag;
}

uint64_t check(const slot &s, uint64_t *errors)
{
	uint64_t w;
	memcpy(&w, s.p, 8);
	bool ok = w == (((uint64_t)s.tag << 32) | s.size) && s.p[s.size - 1] == (unsigned char)s.tag;
	*errors += !ok;
	return bench_mix(w ^ s.p[s.size - 1]);
}

template <bool sized>
uint64_t __attribute__((noinline)) churn(slot *v, long window, long ops, uint64_t seed, uint64_t *errors)
{
	uint64_t rng = seed, sum = 0;
	for (long i = 0; i < ops; i++) {
		slot &s = v[bench_range(&rng, 0, (uint64_t)window - 1)];
		if (s.p != nullptr) {
			sum += check(s, errors);
			if (sized)
				::operator delete(s.p, s.size);
			else
				::operator delete(s.p);
		}
		s.size = pick_size(&rng);
		s.tag = (uint32_t)i * 2654435761u + 1;
		s.p = static_cast<unsigned char *>(::operator new(s.size));
		fill(s);
	}
	for (long k = 0; k < window; k++)
		if (v[k].p != nullptr) {
			sum += check(v[k], errors);
			::operator delete(v[k].p);
			v[k].p = nullptr;
		}
	return sum;
}

} // namespace

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "ops", 30000000, "new+delete steps per variant" },
		{ "window", 1000, "live objects" },
		{ "seed", 1, "random seed" },
	};
	bench_parse(argc, argv, "single-thread C++ new/delete churn, plain and sized delete", o, BENCH_NOPTS(o));
	long ops = o[0].value, window = o[1].value;
	if (window < 1) {
		fprintf(stderr, "cxx_new_delete: need window>=1\n");
		return 2;
	}
	slot *v = static_cast<slot *>(calloc((size_t)window, sizeof *v));
	if (v == nullptr) {
		fprintf(stderr, "cxx_new_delete: out of memory for %ld slots\n", window);
		return 1;
	}
	uint64_t errors = 0, sum = 0;
	churn<false>(v, window, ops / 20, bench_seed(o[2].value, 0), &errors); // warm-up
	churn<true>(v, window, ops / 20, bench_seed(o[2].value, 0), &errors);
	double t0 = bench_now();
	sum += churn<false>(v, window, ops, bench_seed(o[2].value, 1), &errors);
	double t1 = bench_now();
	sum += churn<true>(v, window, ops, bench_seed(o[2].value, 2), &errors);
	double t2 = bench_now();
	free(v);
	double plain = (t1 - t0) * 1e9 / (double)ops, sized = (t2 - t1) * 1e9 / (double)ops;
	fprintf(stderr, "cxx_new_delete: %.2f ns per new+delete (plain delete), %.2f (sized delete)\n", plain, sized);
	bench_check_preload();
	if (errors)
		fprintf(stderr, "cxx_new_delete: %" PRIu64 " corrupted objects detected\n", errors);
	printf("checksum=%016" PRIx64 " ns_per_pair=%.2f sized_ns_per_pair=%.2f\n", sum ^ bench_mix(errors), plain,
	    sized);
	return errors ? 3 : 0;
}
