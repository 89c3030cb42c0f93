/*
 * preload_check — did LD_PRELOAD really replace malloc in this process?
 *
 *   preload_check [LIB]
 *
 * With LIB: LIB's file name must appear in /proc/self/maps and `malloc`,
 * `free` and `realloc` as the dynamic linker resolves them must live in LIB.
 * Without LIB: they must live in libc. Also does one malloc/realloc/free
 * round to show the allocator works at all. Prints where malloc came from;
 * exits 0 if all holds, 1 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *base(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 && *argv[1] ? base(argv[1]) : "libc.so";
	const char *fns[] = { "malloc", "free", "realloc" };
	const char *from = "?";
	int ok = 1;

	if (argc > 1 && *argv[1]) {
		FILE *f = fopen("/proc/self/maps", "r");
		char line[4096];
		int mapped = 0;
		while (f && !mapped && fgets(line, sizeof line, f))
			mapped = strstr(line, want) != NULL;
		if (f)
			fclose(f);
		if (!mapped) {
			fprintf(stderr, "preload_check: %s not mapped\n", want);
			ok = 0;
		}
	}
	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
		Dl_info di;
		void *sym = dlsym(RTLD_DEFAULT, fns[i]);
		if (!sym || !dladdr(sym, &di) || !di.dli_fname) {
			fprintf(stderr, "preload_check: cannot resolve %s\n", fns[i]);
			ok = 0;
			continue;
		}
		if (i == 0)
			from = di.dli_fname;
		if (!strstr(base(di.dli_fname), want)) {
			fprintf(stderr, "preload_check: %s comes from %s, not %s\n", fns[i], di.dli_fname, want);
			ok = 0;
		}
	}

	char *p = malloc(100);
	p = p ? realloc(p, 100000) : NULL;
	if (!p) {
		fprintf(stderr, "preload_check: malloc/realloc failed\n");
		ok = 0;
	}
	free(p);
	printf("malloc from %s\n", from);
	return ok ? 0 : 1;
}
