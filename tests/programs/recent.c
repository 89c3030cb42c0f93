/*
 * recent - jemalloc's experimental.prof_recent through mallctl, as a program
 * written for jemalloc uses it: keep the last 3 sampled allocations,
 * allocate 5 at site_a, free the last of them at release_b, read
 * alloc_max back and write the dump to standard output through a write
 * callback.  Linked with libheapctl.so (make) or with Debian's
 * libjemalloc.so.2 (tests/cli/lifetime.bats builds that one and compares).
 * With an argument N it sets nothing and expects alloc_max N from
 * MALLOC_CONF's prof_recent_alloc_max.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

__attribute__((noinline)) static void *site_a(void)
{
	void *p = malloc(1000);
	__asm__ volatile("" ::: "memory"); /* no tail call: a frame of its own */
	return p;
}

__attribute__((noinline)) static void release_b(void *p)
{
	free(p);
	__asm__ volatile("" ::: "memory");
}

static void to_file(void *f, const char *s)
{
	fputs(s, f);
}

int main(int argc, char **argv)
{
	ssize_t max = argc > 1 ? atol(argv[1]) : 3, got = 0;
	size_t len = sizeof got;
	if (argc == 1 && mallctl("experimental.prof_recent.alloc_max", NULL, NULL, &max, sizeof max) != 0)
		return 1;
	void *p[5];
	for (int i = 0; i < 5; i++)
		p[i] = site_a();
	release_b(p[4]);
	if (mallctl("experimental.prof_recent.alloc_max", &got, &len, NULL, 0) != 0 || got != max)
		return 2;
	struct {
		void (*cb)(void *, const char *);
		void *arg;
	} w = { to_file, stdout };
	if (mallctl("experimental.prof_recent.alloc_dump", NULL, NULL, &w, sizeof w) != 0)
		return 3;
	printf("\n");
	return 0;
}
