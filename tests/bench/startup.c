/*
 * startup — what the allocator costs a process before and besides its own
 * work: the time to start, allocate a little and exit, and the resident
 * memory of a program that allocates a little.
 *
 * The program starts itself `spawns` times (posix_spawn, the environment
 * and so the preload passed on) and waits for each; each child allocates
 * `objects` objects of 16 B to 1 KiB, fills and checks them, frees them and
 * exits with a status derived from their contents, which the parent checks.
 * Wall time is spawns times the cost of one short-lived process (exec, the
 * dynamic loader, the allocator's start-up, exit); peak RSS is that of the
 * largest of these small processes, which is mostly the allocator's fixed
 * cost: the libraries' pages, its first mappings and its own metadata.
 */
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

/* The child's work: the same under every allocator. */
static uint64_t work(long objects, uint64_t *errors)
{
	struct bench_churn_slot s[256];
	uint64_t seed = 11, sum = 0;
	if (objects > 256)
		objects = 256;
	for (long i = 0; i < objects; i++) {
		s[i].size = (uint32_t)bench_range(&seed, 16, 1024);
		s[i].tag = (uint32_t)i * 2654435761u;
		s[i].p = bench_xmalloc(s[i].size);
		bench_churn_fill(s[i].p, s[i].size, s[i].tag);
	}
	for (long i = 0; i < objects; i++) {
		sum += bench_churn_check(&s[i], errors);
		free(s[i].p);
	}
	return sum;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "spawns", 300, "short-lived processes started one after another" },
		{ "objects", 100, "objects each allocates (<= 256)" },
		{ "child", 0, "(internal) be one of the short-lived processes" },
	};
	bench_parse(argc, argv, "Start, allocate a little, exit.", o, BENCH_NOPTS(o));
	uint64_t errors = 0, v = work(o[1].value, &errors);
	if (o[2].value)
		return errors ? 99 : (int)(v & 63);
	char objects[32];
	snprintf(objects, sizeof objects, "objects=%ld", o[1].value);
	char *args[] = { argv[0], objects, "child=1", NULL };
	uint64_t sum = 0;
	for (long k = 0; k < o[0].value; k++) {
		pid_t c;
		int err = posix_spawn(&c, "/proc/self/exe", NULL, NULL, args, environ);
		if (err) {
			fprintf(stderr, "startup: posix_spawn: %s\n", strerror(err));
			return 1;
		}
		int st;
		if (waitpid(c, &st, 0) != c || !WIFEXITED(st)) {
			fprintf(stderr, "startup: child %ld did not exit\n", k);
			return 1;
		}
		errors += WEXITSTATUS(st) != (int)(v & 63);
		sum += bench_mix(v + (uint64_t)k);
	}
	return bench_finish("startup", sum, errors);
}
