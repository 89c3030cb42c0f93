// cxx.cc - C++ runtime on top of libheapctl: operator new/delete (plain,
// array, sized, aligned, nothrow), STL container churn, exceptions (whose
// objects are malloc'd by the C++ runtime, including exception_ptr handed
// across threads), std::thread with thread_local objects, and std::bad_alloc
// for absurd sizes.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <list>
#include <malloc.h>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../lib/check.h"
#include "../lib/testutil.h"

namespace
{

struct alignas(256) Aligned256 {
	unsigned char data[300];
	Aligned256()
	{
		std::memset(data, 0x5a, sizeof data);
	}
};

struct alignas(4096) AlignedPage {
	uint64_t words[16];
};

std::atomic<long> live_tracked{ 0 };

struct Tracked {
	std::string name;
	std::vector<int> v;
	explicit Tracked(int i = 7) : name("tracked-object-with-a-long-enough-name-" + std::to_string(i)), v(i % 50, i)
	{
		live_tracked.fetch_add(1, std::memory_order_relaxed);
	}
	~Tracked()
	{
		live_tracked.fetch_sub(1, std::memory_order_relaxed);
	}
};

size_t usable(void *p)
{
	return malloc_usable_size(p);
}

void test_basic_new_delete()
{
	for (int i = 0; i < 20000; i++) {
		int *p = new int(i);
		CHECK(*p == i, "new int lost value");
		delete p;
		Tracked *t = new Tracked(i);
		CHECK(t->v.size() == (size_t)(i % 50), "Tracked vector size");
		delete t;
	}
	CHECK(live_tracked.load() == 0, "Tracked leak count %ld", live_tracked.load());

	// arrays, including element types with destructors (array cookie)
	for (size_t n = 0; n < 3000; n += 7) {
		char *c = new char[n + 1];
		std::memset(c, 1, n + 1);
		CHECK(usable(c) >= n + 1, "usable(new char[%zu]) = %zu", n + 1, usable(c));
		delete[] c;
		Tracked *arr = new Tracked[n % 64 + 1];
		CHECK(live_tracked.load() == (long)(n % 64 + 1), "new Tracked[%zu] live count %ld", n % 64 + 1,
		    live_tracked.load());
		delete[] arr;
	}
	CHECK(live_tracked.load() == 0, "Tracked array leak count %ld", live_tracked.load());

	// large arrays
	for (size_t n = 1 << 10; n <= (size_t)64 << 20; n <<= 2) {
		unsigned char *big = new unsigned char[n];
		uint64_t seed = hc_seed(big, n, 3);
		hc_fill(big, n, seed);
		CHECK(hc_verify(big, n, seed) == (size_t)-1, "new unsigned char[%zu] corrupted", n);
		delete[] big;
	}

	// sized delete
	for (size_t n = 1; n < 100000; n = n * 3 + 1) {
		void *p = ::operator new(n);
		std::memset(p, 0x33, n);
		::operator delete(p, n);
	}

	// nothrow
	for (size_t n = 1; n < 100000; n = n * 5 + 3) {
		void *p = ::operator new(n, std::nothrow);
		CHECK(p != nullptr, "nothrow new(%zu) returned null", n);
		std::memset(p, 0x44, n);
		::operator delete(p, std::nothrow);
	}
}

void test_aligned_new()
{
	std::vector<Aligned256 *> v;
	for (int i = 0; i < 2000; i++) {
		Aligned256 *a = new Aligned256;
		CHECK(((uintptr_t)a & 255) == 0, "new Aligned256 = %p not 256-aligned", (void *)a);
		v.push_back(a);
	}
	for (Aligned256 *a : v) {
		bool ok = true;
		for (unsigned char c : a->data)
			ok &= c == 0x5a;
		CHECK(ok, "Aligned256 contents corrupted");
		delete a;
	}
	for (size_t n = 1; n <= 100; n += 9) {
		Aligned256 *arr = new Aligned256[n];
		for (size_t i = 0; i < n; i++)
			CHECK(((uintptr_t)&arr[i] & 255) == 0, "Aligned256[%zu] element %zu misaligned", n, i);
		delete[] arr;
		AlignedPage *pg = new AlignedPage[n];
		CHECK(((uintptr_t)pg & 4095) == 0, "new AlignedPage[%zu] = %p misaligned", n, (void *)pg);
		std::memset(static_cast<void *>(pg), 0x11, n * sizeof(AlignedPage));
		delete[] pg;
	}
	for (size_t lg = 4; lg <= 24; lg++) {
		size_t al = (size_t)1 << lg;
		for (size_t n : { (size_t)1, (size_t)100, al, al + 1, (size_t)3 << 20 }) {
			void *p = ::operator new(n, std::align_val_t(al));
			CHECK(((uintptr_t)p & (al - 1)) == 0, "operator new(%zu, align %zu) = %p misaligned", n, al, p);
			CHECK(usable(p) >= n, "operator new(%zu, align %zu) usable %zu", n, al, usable(p));
			std::memset(p, 0x77, n);
			if (n & 1)
				::operator delete(p, std::align_val_t(al));
			else
				::operator delete(p, n, std::align_val_t(al));
			void *q = ::operator new[](n, std::align_val_t(al), std::nothrow);
			CHECK(q != nullptr && ((uintptr_t)q & (al - 1)) == 0, "nothrow aligned new[](%zu, %zu) = %p", n,
			    al, q);
			if (q) {
				std::memset(q, 0x78, n);
				::operator delete[](q, std::align_val_t(al));
			}
		}
	}
	// the exact calls named in the spec
	void *p = ::operator new(4096 * 3, std::align_val_t(4096));
	CHECK(((uintptr_t)p & 4095) == 0, "operator new(12288, align_val_t(4096)) = %p", p);
	std::memset(p, 0, 4096 * 3);
	::operator delete(p, std::align_val_t(4096));
}

void test_bad_alloc()
{
	static const size_t absurd[] = { SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 2 + 1, (size_t)1 << 62, (size_t)1 << 48,
		(size_t)1 << 47, SIZE_MAX - 4095 };
	for (size_t n : absurd) {
		size_t sz = hc_opaque_size(n);
		void *q = ::operator new(sz, std::nothrow);
		CHECK(q == nullptr, "nothrow operator new(%zu) returned %p", sz, q);
		if (q)
			::operator delete(q);
		bool thrown = false;
		try {
			void *p = ::operator new(sz);
			CHECK(false, "operator new(%zu) returned %p instead of throwing", sz, p);
			::operator delete(p);
		} catch (const std::bad_alloc &) {
			thrown = true;
		}
		CHECK(thrown, "operator new(%zu) did not throw std::bad_alloc", sz);

		thrown = false;
		try {
			char *p = new char[sz];
			CHECK(false, "new char[%zu] returned %p instead of throwing", sz, (void *)p);
			delete[] p;
		} catch (const std::bad_alloc &) {
			thrown = true;
		}
		CHECK(thrown, "new char[%zu] did not throw std::bad_alloc", sz);

		// libstdc++'s aligned new (gcc 12) rounds the size up to a multiple
		// of the alignment before calling aligned_alloc, so SIZE_MAX wraps to
		// 0 inside libstdc++ itself; heapctl's own (allocator/cxx.c) refuses it.
		if (n == SIZE_MAX && !hc_malloc_is_heapctl())
			continue;
		thrown = false;
		try {
			void *p = ::operator new(sz, std::align_val_t(64));
			CHECK(false, "aligned operator new(%zu) returned %p instead of throwing", sz, p);
			::operator delete(p, std::align_val_t(64));
		} catch (const std::bad_alloc &) {
			thrown = true;
		}
		CHECK(thrown, "aligned operator new(%zu, 64) did not throw std::bad_alloc", sz);

		q = ::operator new(sz, std::align_val_t(4096), std::nothrow);
		CHECK(q == nullptr, "nothrow aligned operator new(%zu) returned %p", sz, q);
		if (q)
			::operator delete(q, std::align_val_t(4096));
	}
	// array length overflow
	bool thrown = false;
	try {
		size_t cnt = hc_opaque_size(SIZE_MAX / 4);
		uint64_t *p = new uint64_t[cnt];
		CHECK(false, "new uint64_t[SIZE_MAX/4] returned %p", (void *)p);
		delete[] p;
	} catch (const std::bad_alloc &) { // includes std::bad_array_new_length
		thrown = true;
	}
	CHECK(thrown, "new uint64_t[SIZE_MAX/4] did not throw");
	// std::vector::reserve of an impossible size
	thrown = false;
	try {
		std::vector<char> v;
		v.reserve(hc_opaque_size((size_t)1 << 50));
		CHECK(false, "vector::reserve(2^50) succeeded");
	} catch (const std::bad_alloc &) {
		thrown = true;
	} catch (const std::length_error &) {
		thrown = true;
	}
	CHECK(thrown, "vector::reserve(2^50) did not throw");
}

// Deterministic container churn; returns a checksum.
uint64_t container_churn(uint64_t seed, int rounds)
{
	hc_rng rng;
	hc_rng_init(&rng, seed);
	uint64_t sum = 0;
	std::map<std::string, std::vector<uint32_t>> m;
	std::unordered_map<uint64_t, std::string> um;
	std::deque<std::string> dq;
	std::list<std::unique_ptr<Tracked>> lst;
	std::vector<std::shared_ptr<std::string>> shared;
	for (int r = 0; r < rounds; r++) {
		uint64_t x = hc_rng_next(&rng);
		std::string key = "k" + std::to_string(x % 5000);
		auto &vec = m[key];
		vec.push_back((uint32_t)x);
		if (vec.size() > 40)
			vec.erase(vec.begin(), vec.begin() + 20);
		if (x % 7 == 0)
			m.erase(key);
		std::string s(x % 300, (char)('a' + x % 26));
		s += std::to_string(x);
		um[x % 3000] = s;
		if (x % 5 == 0)
			um.erase((x >> 8) % 3000);
		dq.push_back(std::move(s));
		if (dq.size() > 500)
			dq.pop_front();
		if (x % 3 == 0)
			lst.emplace_back(new Tracked((int)(x % 1000)));
		if (lst.size() > 200)
			lst.pop_front();
		if (x % 11 == 0) {
			shared.push_back(std::make_shared<std::string>(std::string(x % 5000, 'z')));
			if (shared.size() > 100)
				shared.erase(shared.begin(), shared.begin() + 50);
		}
		if (x % 1000 == 0) {
			std::vector<std::string> tmp;
			for (auto &kv : m)
				tmp.push_back(kv.first);
			std::sort(tmp.begin(), tmp.end(), std::greater<std::string>());
			sum += tmp.size();
			std::string big(hc_rng_range(&rng, 100000, 3000000), 'q');
			big.append(big.size() / 2, 'r');
			sum += big.size() + (unsigned char)big[big.size() - 1];
		}
	}
	for (auto &kv : m) {
		sum = sum * 31 + kv.first.size();
		for (uint32_t v : kv.second)
			sum = sum * 131 + v;
	}
	for (auto &kv : um)
		sum += kv.first * 7 + kv.second.size();
	for (auto &s : dq)
		sum = sum * 17 + s.size();
	for (auto &t : lst)
		sum += t->name.size() + t->v.size();
	for (auto &sp : shared)
		sum += sp->size() + (size_t)sp.use_count();
	return sum;
}

void test_containers()
{
	uint64_t a = container_churn(1, 120000);
	uint64_t b = container_churn(1, 120000);
	CHECK(a == b, "container churn not deterministic: %llu vs %llu", (unsigned long long)a, (unsigned long long)b);
	CHECK(live_tracked.load() == 0, "Tracked leak after churn: %ld", live_tracked.load());
}

struct MyError : std::runtime_error {
	std::vector<int> payload;
	explicit MyError(const std::string &s, int n) : std::runtime_error(s), payload(n, n) {}
};

int thrower(int depth, int i)
{
	std::string local(100 + i % 200, 'x');
	std::vector<int> v(i % 100, i);
	if (depth == 0) {
		if (i % 3 == 0)
			throw MyError("my error number " + std::to_string(i) + std::string(i % 500, '!'), i % 64);
		if (i % 3 == 1)
			throw std::runtime_error(std::string(i % 4000 + 1, 'e'));
		throw i;
	}
	return thrower(depth - 1, i) + (int)local.size() + (int)v.size();
}

void test_exceptions()
{
	long caught = 0;
	for (int i = 0; i < 30000; i++) {
		try {
			thrower(i % 8, i);
		} catch (const MyError &e) {
			CHECK(e.payload.size() == (size_t)(i % 64), "MyError payload size");
			CHECK(std::string(e.what()).rfind("my error number ", 0) == 0, "MyError message corrupted");
			caught++;
		} catch (const std::runtime_error &e) {
			CHECK(std::strlen(e.what()) == (size_t)(i % 4000 + 1), "runtime_error message length");
			caught++;
		} catch (int v) {
			CHECK(v == i, "int exception value %d != %d", v, i);
			caught++;
		}
	}
	CHECK(caught == 30000, "caught %ld exceptions, expected 30000", caught);

	// nested exceptions and rethrow
	for (int i = 0; i < 2000; i++) {
		try {
			try {
				throw std::runtime_error("inner " + std::to_string(i));
			} catch (...) {
				std::throw_with_nested(std::logic_error(std::string(200, 'o') + std::to_string(i)));
			}
		} catch (const std::logic_error &e) {
			try {
				std::rethrow_if_nested(e);
				CHECK(false, "no nested exception");
			} catch (const std::runtime_error &inner) {
				CHECK(std::string(inner.what()) == "inner " + std::to_string(i),
				    "nested exception message");
			}
		}
	}
}

// thread-local objects that allocate in their constructor and free in their
// destructor at thread exit
std::atomic<long> tls_constructed{ 0 }, tls_destroyed{ 0 };
struct TlsObj {
	std::vector<std::string> strs;
	std::unique_ptr<char[]> buf;
	size_t n;
	TlsObj() : buf(new char[64 * 1024]), n(64 * 1024)
	{
		std::memset(buf.get(), 0x6b, n);
		for (int i = 0; i < 100; i++)
			strs.push_back(std::string(50 + i, 't'));
		tls_constructed++;
	}
	~TlsObj()
	{
		bool ok = true;
		for (size_t i = 0; i < n; i++)
			ok &= buf[i] == 0x6b;
		CHECK(ok, "thread_local buffer corrupted at thread exit");
		CHECK(strs.size() >= 100, "thread_local vector corrupted");
		tls_destroyed++;
	}
};
thread_local TlsObj tls_obj;
thread_local std::string tls_string;

void test_threads()
{
	const int nthreads = 8;
	std::vector<uint64_t> results(nthreads);
	std::vector<std::exception_ptr> eptrs(nthreads);
	std::mutex mu;
	std::vector<std::unique_ptr<std::string>> handoff; // cross-thread frees
	{
		std::vector<std::thread> ths;
		for (int t = 0; t < nthreads; t++) {
			ths.emplace_back([t, &results, &eptrs, &mu, &handoff] {
				tls_obj.strs.push_back("thread " + std::to_string(t));
				tls_string.assign(10000 + t, 's');
				results[t] = container_churn(100 + t, 40000);
				for (int i = 0; i < 2000; i++) {
					std::unique_ptr<std::string> s(new std::string(i % 700 + 1, (char)('A' + t)));
					std::lock_guard<std::mutex> g(mu);
					handoff.push_back(std::move(s));
					if (handoff.size() > 300) {
						// free strings allocated by (probably) other threads
						for (auto &p : handoff)
							CHECK(p->size() >= 1 && p->size() <= 700,
							    "handoff string corrupted");
						handoff.erase(handoff.begin(), handoff.begin() + 200);
					}
				}
				try {
					thrower(3, 3 * t); // MyError
				} catch (...) {
					eptrs[t] = std::current_exception(); // freed by the main thread
				}
				CHECK(tls_string.size() == (size_t)(10000 + t), "thread_local string corrupted");
			});
		}
		for (auto &th : ths)
			th.join();
	}
	for (int t = 0; t < nthreads; t++) {
		CHECK(results[t] == container_churn(100 + t, 40000), "thread %d churn checksum mismatch", t);
		CHECK(eptrs[t] != nullptr, "thread %d did not capture an exception", t);
		try {
			std::rethrow_exception(eptrs[t]);
		} catch (const MyError &e) {
			CHECK(e.payload.size() == (size_t)((3 * t) % 64), "exception from thread %d corrupted", t);
		} catch (...) {
			CHECK(false, "unexpected exception type from thread %d", t);
		}
		eptrs[t] = nullptr;
	}
	handoff.clear();
	// the main thread's TlsObj (if constructed) is destroyed only at exit
	CHECK(tls_destroyed.load() == nthreads, "thread_local destructors ran %ld times, expected %d",
	    tls_destroyed.load(), nthreads);

	// many short-lived threads using thread_local and exceptions
	for (int wave = 0; wave < 20; wave++) {
		std::vector<std::thread> ths;
		for (int t = 0; t < 8; t++)
			ths.emplace_back([t, wave] {
				tls_string = std::string(1000 * (t + 1), 'w');
				try {
					throw std::runtime_error(std::string(wave * 10 + t, 'y'));
				} catch (const std::exception &e) {
					CHECK(std::strlen(e.what()) == (size_t)(wave * 10 + t),
					    "exception message length");
				}
				(void)tls_obj.n;
			});
		for (auto &th : ths)
			th.join();
	}
	CHECK(tls_constructed.load() == tls_destroyed.load(), "thread_local constructed %ld, destroyed %ld",
	    tls_constructed.load(), tls_destroyed.load());
}

} // namespace

int main()
{
	double t0 = hc_now();
	if (!hc_malloc_is_heapctl() && !hc_allow_no_mallctl())
		CHECK(false,
		    "malloc does not resolve to libheapctl (set HC_TEST_ALLOW_NO_MALLCTL=1 to run against glibc)");
	test_basic_new_delete();
	test_aligned_new();
	test_bad_alloc();
	test_containers();
	test_exceptions();
	test_threads();
	std::fprintf(stderr, "cxx: %.2f s\n", hc_now() - t0);
	return hc_check_finish("cxx");
}
