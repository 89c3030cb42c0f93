#!/usr/bin/env bash
# thread_records: the profiler's per-thread records go with their threads.
#
# With profiling on, threads come and go (20,000 of them, each sampling
# from eight stacks at lg_prof_sample:10).  The profiler's bookkeeping
# (stats.metadata) must not grow with the number of threads that have
# exited: before the fix it grew by about 1 KiB per thread, forever.
# Objects that outlive their thread stay in the profile, under that
# thread, until they are freed; then the thread's records go too.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup thread_records "$@"

cat >"$WORK/prog.c" <<'EOF'
#include <heapctl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SITE(n) __attribute__((noinline)) void *site##n(size_t s) { void *p = malloc(s); __asm__ volatile("" ::: "memory"); return p; }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)
static void *(*sites[8])(size_t) = { site0, site1, site2, site3, site4, site5, site6, site7 };

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	void *p[16];
	for (int i = 0; i < 16; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = sites[i % 8](64 + (seed >> 8) % 1000);
	}
	for (int i = 0; i < 16; i++)
		free(p[i]);
	return NULL;
}

#define NKEEP 100
static void *kept[NKEEP][10];
__attribute__((noinline)) void *keeper_site(size_t s) { return malloc(s); }
static void *keeper(void *arg)
{
	void **k = arg;
	for (int i = 0; i < 10; i++)
		k[i] = keeper_site(65536);     /* sampled: 64 KiB >> 2^10 */
	return NULL;
}

static void threads(int n, void *(*fn)(void *), int start)
{
	for (int i = 0; i < n; i++) {
		pthread_t t;
		void *arg = fn == keeper ? (void *)kept[i] : (void *)(uintptr_t)(start + i);
		if (pthread_create(&t, NULL, fn, arg) != 0 || pthread_join(t, NULL) != 0) {
			fprintf(stderr, "thread %d failed\n", i);
			exit(3);
		}
	}
}

static size_t metadata(void)
{
	uint64_t e = 1;
	size_t m = 0, len = sizeof m;
	mallctl("epoch", NULL, NULL, &e, sizeof e);
	if (mallctl("stats.metadata", &m, &len, NULL, 0) != 0)
		exit(4);
	return m;
}

static int dump(const char *path)
{
	return mallctl("prof.dump", NULL, NULL, &path, sizeof path);
}

int main(void)
{
	threads(2000, churn, 0);
	size_t m1 = metadata();
	threads(18000, churn, 2000);
	size_t m2 = metadata();
	threads(NKEEP, keeper, 0);
	int d1 = dump("kept.heap");
	for (int i = 0; i < NKEEP; i++)
		for (int j = 0; j < 10; j++)
			free(kept[i][j]);
	int d2 = dump("freed.heap");
	threads(100, churn, 30000);
	size_t m3 = metadata();
	printf("metadata %zu %zu %zu\ndumps %d %d\n", m1, m2, m3, d1, d2);
	return 0;
}
EOF
compile_linked "$WORK/prog" "$WORK/prog.c"
mkdir -p "$WORK/run"
run churn "$WORK/run" MALLOC_CONF=prof:true,lg_prof_sample:10 "$WORK/prog"
check_eq "exit status" "$RC" 0
check_stderr_empty churn
check_eq "prof.dump results" "$(grep '^dumps ' "$WORK/churn.out" || true)" "dumps 0 0"
read -r m1 m2 m3 < <(sed -n 's/^metadata //p' "$WORK/churn.out")
if [[ "${m1:-}" =~ ^[0-9]+$ && "${m2:-}" =~ ^[0-9]+$ && "${m3:-}" =~ ^[0-9]+$ ]]; then
	# 18,000 more threads: at most 512 KiB more bookkeeping (tables that
	# grow with stacks seen, not with threads); the old code added ~20 MiB
	[ $((m2 - m1)) -le 524288 ] ||
		fail "stats.metadata grew by $((m2 - m1)) bytes over 18,000 exited threads ($m1 -> $m2)"
	# the 64 KiB objects' chunks keep their sample slots (16 B a page)
	[ $((m3 - m2)) -le 1048576 ] ||
		fail "stats.metadata after the kept objects were freed: $m3, $((m3 - m2)) more than after 20,000 threads"
else
	fail "no metadata line: $(head -3 "$WORK/churn.out")"
fi

# objects that outlive their thread are still in the profile, then gone
if [ -f "$WORK/run/kept.heap" ] && jp "$WORK/kept.txt" "$WORK/prog" "$WORK/run/kept.heap"; then
	k=$(jp_flat "$WORK/kept.txt" keeper_site)
	[[ "$k" =~ ^[0-9]+$ ]] && [ "$k" -ge $((1000 * 65536 * 9 / 10)) ] && [ "$k" -le $((1000 * 65536 * 11 / 10)) ] ||
		fail "kept.heap: keeper_site (1,000 x 64 KiB kept by exited threads) shows '$k' bytes"
	# each keeper thread has its own line (heap_v2: t<uid>: ...)
	nt=$(awk '/^@/ { stack = 1; next } stack && /^  t[0-9]+: [1-9]/ { n++ } END { print n + 0 }' "$WORK/run/kept.heap")
	[ "$nt" -ge 90 ] ||
		fail "kept.heap: $nt per-thread stack lines with live objects, expected about 100 (one per exited keeper)"
else
	fail "kept.heap not written or not read by jeprof"
fi
# every kept object freed: under 64 KiB live in all (what libc keeps)
if [ -f "$WORK/run/freed.heap" ]; then
	live=$(sed -n '2s/^  t\*: [0-9]*: \([0-9]*\) .*/\1/p' "$WORK/run/freed.heap")
	[[ "$live" =~ ^[0-9]+$ ]] && [ "$live" -lt 65536 ] ||
		fail "freed.heap: $live bytes live after every kept object was freed"
else
	fail "freed.heap not written"
fi
finish
