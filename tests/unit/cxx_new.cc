// cxx_new.cc - libheapctl's own operator new and delete (allocator/cxx.c):
// the 20 symbols of the family are defined and exported by the library that
// defines malloc (nm -D, and where the dynamic linker resolves them), and
// they behave as the C++ standard says: round trips of many sizes, arrays,
// sized deletes, aligned new (16 B .. 64 KiB), new(0) unique, nothrow new
// returning NULL and throwing new throwing std::bad_alloc on impossible
// sizes, the new_handler called until it uninstalls itself (also from the
// nothrow forms, and one that throws), a non-power-of-two alignment refused
// without harm, and the misuse checks applied to delete as to free (a
// double delete in every build; a pointer not ours or not a block's start
// in the secure build; a sized or aligned delete that lies in the debug
// build).
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <malloc.h>
#include <new>
#include <pthread.h>
#include <set>
#include <signal.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/check.h"
#include "../lib/testutil.h"

namespace
{

const char *const family[] = { "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZdlPv", "_ZdaPv",
	"_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t", "_ZnwmSt11align_val_t",
	"_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
	"_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
	"_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t" };

// The file of the object that defines sym as the dynamic linker resolves it.
std::string defining_file(const char *sym)
{
	Dl_info info;
	std::memset(&info, 0, sizeof info);
	void *f = dlsym(RTLD_DEFAULT, sym);
	if (f == nullptr || dladdr(f, &info) == 0 || info.dli_fname == nullptr)
		return "";
	return info.dli_fname;
}

// Every name is resolved to the library that defines malloc, and nm -D
// lists it as defined there (so the export cannot silently disappear).
void test_exports(const std::string &lib)
{
	for (const char *sym : family)
		CHECK(defining_file(sym) == lib, "%s resolves to \"%s\", not to malloc's \"%s\"", sym,
		    defining_file(sym).c_str(), lib.c_str());
	std::string cmd = "nm -D --defined-only '" + lib + "'";
	FILE *nm = popen(cmd.c_str(), "r");
	CHECK(nm != nullptr, "popen(%s) failed", cmd.c_str());
	if (nm == nullptr)
		return;
	std::set<std::string> defined;
	char line[512], addr[64], type[8], name[400];
	while (std::fgets(line, sizeof line, nm) != nullptr)
		if (std::sscanf(line, "%63s %7s %399s", addr, type, name) == 3 && std::strcmp(type, "T") == 0)
			defined.insert(name);
	int st = pclose(nm);
	CHECK(st == 0, "%s: exit status %#x", cmd.c_str(), st);
	for (const char *sym : family)
		CHECK(defined.count(sym) == 1, "nm -D --defined-only %s: no T %s", lib.c_str(), sym);
}

bool filled(const unsigned char *p, size_t n, unsigned char c)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			return false;
	return true;
}

struct Obj {
	uint64_t a, b, c;
	char tail[40];
};

void test_round_trips()
{
	// sizes across every small class, the large runs and a huge mapping;
	// each block is written whole and checked after its neighbours were
	enum { N = 64 };
	for (size_t n = 0; n < ((size_t)32 << 20); n = n < 2048 ? n + 1 : n * 5 / 4) {
		unsigned char *p[N];
		size_t k = n < 65536 ? N : 2;
		for (size_t i = 0; i < k; i++) {
			p[i] = static_cast<unsigned char *>(::operator new(n));
			CHECK(malloc_usable_size(p[i]) >= n, "usable(new(%zu)) = %zu", n, malloc_usable_size(p[i]));
			std::memset(p[i], (int)(i + n), n);
		}
		for (size_t i = 0; i < k; i++) {
			CHECK(filled(p[i], n, (unsigned char)(i + n)), "new(%zu) #%zu overwritten", n, i);
			if (i & 1)
				::operator delete(p[i], n);
			else
				::operator delete(p[i]);
		}
		// the array forms, sized and not
		unsigned char *a = static_cast<unsigned char *>(::operator new[](n));
		std::memset(a, 0x5c, n);
		unsigned char *b = static_cast<unsigned char *>(::operator new[](n, std::nothrow));
		CHECK(b != nullptr, "new[](%zu, nothrow) = NULL", n);
		if (b != nullptr)
			std::memset(b, 0x5d, n);
		CHECK(filled(a, n, 0x5c), "new[](%zu) overwritten", n);
		::operator delete[](a, n);
		::operator delete[](b, std::nothrow);
	}
	// what the compiler emits: new T / delete (sized, C++14), new T[] /
	// delete[] (with the array cookie)
	for (int i = 0; i < 100000; i++) {
		Obj *o = new Obj{ (uint64_t)i, (uint64_t)i * 3, (uint64_t)i * 7, "object" };
		std::string *s = new std::string((size_t)(i % 300), 'x');
		CHECK(o->b == (uint64_t)i * 3 && s->size() == (size_t)(i % 300), "new Obj / std::string #%d", i);
		delete o;
		delete s;
		std::string *arr = new std::string[i % 17 + 1];
		arr[i % 17] = "last";
		delete[] arr;
	}
}

void test_aligned()
{
	for (size_t al = 16; al <= 65536; al <<= 1)
		for (size_t n :
		    { (size_t)0, (size_t)1, (size_t)24, al - 1, al, al + 1, (size_t)100000, (size_t)9 << 20 }) {
			std::align_val_t a{ al };
			void *p = ::operator new(n, a);
			void *q = ::operator new[](n, a);
			void *r = ::operator new(n, a, std::nothrow);
			void *s = ::operator new[](n, a, std::nothrow);
			for (void *x : { p, q, r, s }) {
				CHECK(x != nullptr && ((uintptr_t)x & (al - 1)) == 0, "aligned new(%zu, %zu) = %p", n,
				    al, x);
				CHECK(malloc_usable_size(x) >= n, "usable(new(%zu, align %zu)) = %zu", n, al,
				    malloc_usable_size(x));
				if (x != nullptr)
					std::memset(x, 0x3a, n);
			}
			::operator delete(p, a);
			::operator delete[](q, n, a);
			::operator delete(r, n, a);
			::operator delete[](s, a, std::nothrow);
		}
	// an alignment that is not a power of two is undefined behaviour;
	// heapctl refuses it as the failure it is, and the heap stays whole
	void *bad = ::operator new(100, std::align_val_t(48), std::nothrow);
	CHECK(bad == nullptr, "nothrow new(100, align 48) = %p", bad);
	bool thrown = false;
	try {
		bad = ::operator new[](100, std::align_val_t(3 << 12));
		CHECK(false, "new[](100, align 12288) = %p", bad);
	} catch (const std::bad_alloc &) {
		thrown = true;
	}
	CHECK(thrown, "new[](100, align 12288) did not throw std::bad_alloc");
	unsigned char *ok = new unsigned char[100];
	std::memset(ok, 1, 100);
	delete[] ok;
}

void test_zero()
{
	std::set<void *> seen;
	void *v[300];
	for (int i = 0; i < 100; i++) {
		v[3 * i] = ::operator new(0);
		v[3 * i + 1] = ::operator new[](0);
		v[3 * i + 2] = ::operator new(hc_opaque_size(0), std::align_val_t(64));
	}
	for (void *p : v) {
		CHECK(p != nullptr, "new(0) = NULL");
		seen.insert(p);
	}
	CHECK(seen.size() == 300, "300 new(0) gave %zu distinct pointers", seen.size());
	for (int i = 0; i < 100; i++) {
		::operator delete(v[3 * i]);
		::operator delete[](v[3 * i + 1]);
		::operator delete(v[3 * i + 2], std::align_val_t(64));
	}
}

const size_t huge_sizes[] = { SIZE_MAX / 2, (size_t)1 << 62, (size_t)1 << 47 };

// Every way of asking for n: the plain ones, nothrow (must be NULL) and
// throwing (must throw std::bad_alloc).  Returns how many threw.
int impossible(size_t n, const char *what)
{
	n = hc_opaque_size(n);
	int threw = 0;
	void *q = ::operator new(n, std::nothrow);
	CHECK(q == nullptr, "%s: new(%zu, nothrow) = %p", what, n, q);
	q = ::operator new[](n, std::align_val_t(256), std::nothrow);
	CHECK(q == nullptr, "%s: new[](%zu, align 256, nothrow) = %p", what, n, q);
	try {
		q = ::operator new(n);
		CHECK(false, "%s: new(%zu) = %p", what, n, q);
	} catch (const std::bad_alloc &) {
		threw++;
	}
	try {
		q = ::operator new[](n, std::align_val_t(4096));
		CHECK(false, "%s: new[](%zu, align 4096) = %p", what, n, q);
	} catch (const std::bad_alloc &) {
		threw++;
	}
	return threw;
}

void test_failures()
{
	for (size_t n : huge_sizes)
		CHECK(impossible(n, "no handler") == 2, "new(%zu) did not throw std::bad_alloc twice", n);
}

int handler_calls;
int handler_limit;

// Called for each failed attempt; uninstalls itself at its limit.
void counting_handler()
{
	if (++handler_calls >= handler_limit)
		std::set_new_handler(nullptr);
}

void throwing_handler()
{
	handler_calls++;
	throw std::bad_alloc();
}

void test_new_handler()
{
	size_t n = hc_opaque_size((size_t)1 << 62);
	// the throwing forms call it until it is gone, then throw
	handler_calls = 0, handler_limit = 3;
	std::set_new_handler(counting_handler);
	bool thrown = false;
	try {
		void *p = ::operator new(n);
		CHECK(false, "new(2^62) with a handler = %p", p);
	} catch (const std::bad_alloc &) {
		thrown = true;
	}
	CHECK(thrown && handler_calls == 3, "new(2^62): thrown %d, handler called %d times (3 expected)", thrown,
	    handler_calls);
	CHECK(std::get_new_handler() == nullptr, "the handler did not uninstall itself");

	handler_calls = 0, handler_limit = 2;
	std::set_new_handler(counting_handler);
	thrown = false;
	try {
		void *p = ::operator new[](n, std::align_val_t(128));
		CHECK(false, "new[](2^62, align 128) with a handler = %p", p);
	} catch (const std::bad_alloc &) {
		thrown = true;
	}
	CHECK(thrown && handler_calls == 2, "new[](2^62, align 128): thrown %d, handler called %d times (2 expected)",
	    thrown, handler_calls);

	// the nothrow forms call it too, and return NULL when it gives up ...
	handler_calls = 0, handler_limit = 4;
	std::set_new_handler(counting_handler);
	void *q = ::operator new(n, std::nothrow);
	CHECK(q == nullptr && handler_calls == 4, "new(2^62, nothrow) = %p, handler called %d times (4 expected)", q,
	    handler_calls);
	handler_calls = 0, handler_limit = 1;
	std::set_new_handler(counting_handler);
	q = ::operator new(n, std::align_val_t(64), std::nothrow);
	CHECK(q == nullptr && handler_calls == 1, "new(2^62, align 64, nothrow) = %p, handler called %d times", q,
	    handler_calls);

	// ... or when it throws std::bad_alloc, which must not get out
	handler_calls = 0;
	std::set_new_handler(throwing_handler);
	q = ::operator new[](n, std::nothrow);
	CHECK(q == nullptr && handler_calls == 1, "new[](2^62, nothrow), throwing handler: %p, %d calls", q,
	    handler_calls);
	q = ::operator new[](n, std::align_val_t(32), std::nothrow);
	CHECK(q == nullptr && handler_calls == 2, "new[](2^62, align 32, nothrow), throwing handler: %p, %d calls", q,
	    handler_calls);
	thrown = false;
	try {
		q = ::operator new(n);
	} catch (const std::bad_alloc &) {
		thrown = true;
	}
	CHECK(thrown && handler_calls == 3, "new(2^62), throwing handler: thrown %d, %d calls", thrown, handler_calls);
	std::set_new_handler(nullptr);

	// a handler never runs for a request that succeeds
	handler_calls = 0, handler_limit = 1;
	std::set_new_handler(counting_handler);
	delete new std::string(500, 'h');
	CHECK(handler_calls == 0, "a successful new called the handler %d times", handler_calls);
	std::set_new_handler(nullptr);
}

// ---- misuse: each in a child that must abort with one line naming it ----

void *volatile sink;
// what delete[] calls, out of the compiler's sight (-Wuse-after-free)
void (*volatile v_delete)(void *) = ::operator delete[];
void (*volatile v_delete_sized)(void *, size_t) = ::operator delete[];
char static_object[64];

void run(const char *name, void (*fn)(), const char *want)
{
	char err[1024];
	int st = hc_run_child(fn, err, sizeof err);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "%s: child %s %d, stderr \"%s\"", name,
	    WIFSIGNALED(st) ? "killed by signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), err);
	CHECK(std::strstr(err, want) != nullptr, "%s: stderr \"%s\", expected \"%s\"", name, err, want);
}

// The only block of a thread's own page (its first 16 of a class come
// from a shared heap), deleted twice.
void *double_delete_thread(void *sized)
{
	for (int i = 0; i < 16; i++)
		sink = new char[200];
	char *x = new char[200];
	for (int i = 0; i < 2; i++)
		if (sized != nullptr)
			v_delete_sized(x, 200);
		else
			v_delete(x);
	return nullptr;
}

void double_delete(void *sized)
{
	pthread_t t;
	if (pthread_create(&t, nullptr, double_delete_thread, sized) == 0)
		pthread_join(t, nullptr);
}

void double_delete_plain()
{
	double_delete(nullptr);
}
void double_delete_sized()
{
	double_delete(static_object);
}
void delete_static()
{
	::operator delete(hc_launder(static_object));
}
void delete_interior()
{
	char *p = static_cast<char *>(::operator new(64));
	::operator delete[](hc_launder(p + 16), std::align_val_t(16));
}
void delete_sized_larger()
{
	void *p = ::operator new(100);
	::operator delete(hc_launder(p), 100000);
}
void delete_misaligned()
{
	// two blocks of 112 bytes: one of them is not 4 KiB-aligned
	void *p = ::operator new(100), *q = ::operator new(100);
	::operator delete(hc_launder(((uintptr_t)p & 4095) != 0 ? p : q), 100, std::align_val_t(4096));
}

bool debug_build()
{
	auto ctl = (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
	bool debug = false;
	size_t len = sizeof debug;
	return ctl != nullptr && ctl("config.debug", &debug, &len, nullptr, 0) == 0 && debug;
}

void test_misuse(const std::string &lib)
{
	run("delete[] twice", double_delete_plain, "double free");
	run("sized delete[] twice", double_delete_sized, "double free");
	if (lib.find("secure") != std::string::npos) {
		run("delete of a static object", delete_static, "not from this allocator");
		run("aligned delete[] inside a block", delete_interior, "not the start of a block");
	}
	if (debug_build()) {
		run("sized delete larger than the object", delete_sized_larger, "size larger than the object's");
		run("aligned delete of a misaligned pointer", delete_misaligned, "not aligned as the delete says");
	}
}

} // namespace

int main()
{
	std::string lib = defining_file("malloc");
	if (lib.find("heapctl") == std::string::npos) {
		std::fprintf(stderr,
		    "cxx_new: malloc is %s's, not libheapctl's (run it linked with or preloading it)\n", lib.c_str());
		return 1;
	}
	test_exports(lib);
	test_round_trips();
	test_aligned();
	test_zero();
	test_failures();
	test_new_handler();
	test_misuse(lib);
	return hc_check_finish("cxx_new");
}
