#!/usr/bin/env bash
# threads: per-thread lines of a dump.
#
# Four threads allocate from four different functions; one names itself
# with mallctl("thread.prof.name"), one with pthread_setname_np (used with
# prof_thread_names:true).  The dump, taken while all four are alive, must
# have a "  t<N>:" line per thread carrying those names, per-thread lines
# that add up to the totals, and "jeprof --thread=N" must show each
# thread's own function with its exact bytes (lg_prof_sample:0).
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup threads "$@"

cat >"$WORK/prog.c" <<'EOF'
#define _GNU_SOURCE
#include <errno.h>
#include <heapctl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t ready, go;
void *keep[4][200];   /* global: the allocations cannot be optimised away */

__attribute__((noinline)) void alloc_alpha(void)    /* 100 x 1100 (1280) = 128000 */
{
	for (int i = 0; i < 100; i++)
		keep[0][i] = malloc(1100);
}
__attribute__((noinline)) void alloc_bravo(void)    /* 200 x 700 (768) = 153600 */
{
	for (int i = 0; i < 200; i++)
		keep[1][i] = malloc(700);
}
__attribute__((noinline)) void alloc_charlie(void)  /* 30 x 5000 (5120) = 153600 */
{
	for (int i = 0; i < 30; i++)
		keep[2][i] = malloc(5000);
}
__attribute__((noinline)) void alloc_delta(void)    /* 40 x 4000 (4096) = 163840 */
{
	for (int i = 0; i < 40; i++)
		keep[3][i] = malloc(4000);
}

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	if (id == 0) {
		const char *name = "alpha";
		int e = mallctl("thread.prof.name", NULL, NULL, &name, sizeof name);
		const char *back = NULL;
		size_t len = sizeof back;
		int e2 = mallctl("thread.prof.name", &back, &len, NULL, 0);
		printf("setname %d getname %d %s\n", e, e2, back ? back : "(null)");
	} else if (id == 1) {
		pthread_setname_np(pthread_self(), "bravo-k");
	}
	switch (id) {
	case 0: alloc_alpha(); break;
	case 1: alloc_bravo(); break;
	case 2: alloc_charlie(); break;
	case 3: alloc_delta(); break;
	}
	pthread_barrier_wait(&ready);   /* the dump is taken now */
	pthread_barrier_wait(&go);
	return NULL;
}

int main(int argc, char **argv)
{
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	pthread_barrier_init(&ready, NULL, 5);
	pthread_barrier_init(&go, NULL, 5);
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	pthread_barrier_wait(&ready);
	const char *path = argv[1];
	int e = mallctl("prof.dump", NULL, NULL, &path, sizeof path);
	printf("dump %d\n", e);
	fflush(stdout);
	pthread_barrier_wait(&go);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}
EOF
compile_linked "$WORK/prog" "$WORK/prog.c"

# analyse <tag> <dump> <kernel names expected (0/1)>
analyse() {
	local tag=$1 f=$2 knames=$3
	if [ ! -f "$f" ]; then
		fail "$tag: dump $f not written"
		return
	fi
	# header: the lines between line 1 and the first stack
	awk 'NR > 1 && /^@/ { exit } NR > 1' "$f" >"$WORK/$tag.hdr"
	local nthr
	nthr=$(grep -cE '^  t[0-9]+: ' "$WORK/$tag.hdr" || true)
	check_range "$tag: per-thread lines in the header" "$nthr" 4 5
	check_eq "$tag: thread uids are distinct" \
	    "$(sed -nE 's/^  t([0-9]+): .*/\1/p' "$WORK/$tag.hdr" | sort | uniq -d | wc -l)" 0
	local alpha_line
	alpha_line=$(grep -E '^  t[0-9]+: [0-9]+: [0-9]+ \[[0-9]+: [0-9]+\] alpha$' "$WORK/$tag.hdr" || true)
	[ -n "$alpha_line" ] ||
		fail "$tag: no per-thread line named 'alpha' (thread.prof.name); header: $(tr '\n' '|' <"$WORK/$tag.hdr")"
	local bravo_line
	bravo_line=$(grep -E '^  t[0-9]+: [0-9]+: [0-9]+ \[[0-9]+: [0-9]+\] bravo-k$' "$WORK/$tag.hdr" || true)
	if [ "$knames" = 1 ]; then
		[ -n "$bravo_line" ] ||
			fail "$tag: no per-thread line named 'bravo-k' (pthread_setname_np with prof_thread_names:true); header: $(tr '\n' '|' <"$WORK/$tag.hdr")"
	else
		[ -z "$bravo_line" ] ||
			fail "$tag: kernel thread name used without prof_thread_names: $bravo_line"
	fi
	# t* is the sum of the threads, in the header and for every stack
	local bad
	bad=$(awk '
	    function flush() { if (have && st != sum) printf "%s t*=%d sum=%d; ", where, st, sum }
	    /^  t\*: / { flush(); split($0, a, /[: ]+/); st = a[4]; sum = 0; have = 1; where = (NR == 2 ? "header" : "stack@" NR); next }
	    /^  t[0-9]+: / { split($0, a, /[: ]+/); sum += a[4]; next }
	    /^$/ { flush(); have = 0 }
	    END { flush() }' "$f")
	[ -z "$bad" ] || fail "$tag: t* bytes differ from the sum of the per-thread lines: $bad"

	jp "$WORK/$tag.all.txt" "$WORK/prog" "$f" || return 0
	local fn
	declare -A want=([alloc_alpha]=128000 [alloc_bravo]=153600 [alloc_charlie]=153600 [alloc_delta]=163840)
	for fn in "${!want[@]}"; do
		check_eq "$tag: jeprof bytes for $fn (all threads)" "$(jp_flat "$WORK/$tag.all.txt" "$fn")" "${want[$fn]}"
	done
	# every thread on its own: each function in exactly one thread
	declare -A seen_in=()
	local uid
	for uid in $(sed -nE 's/^  t([0-9]+): .*/\1/p' "$WORK/$tag.hdr"); do
		jp "$WORK/$tag.t$uid.txt" --thread="$uid" "$WORK/prog" "$f" || continue
		for fn in "${!want[@]}"; do
			local b
			b=$(jp_flat "$WORK/$tag.t$uid.txt" "$fn")
			[ "$b" = absent ] && continue
			[ "$b" = 0 ] && continue
			check_eq "$tag: jeprof --thread=$uid bytes for $fn" "$b" "${want[$fn]}"
			seen_in[$fn]="${seen_in[$fn]:-}$uid "
		done
	done
	for fn in "${!want[@]}"; do
		local w
		w=$(echo ${seen_in[$fn]:-} | wc -w)
		check_eq "$tag: number of threads whose jeprof --thread=N shows $fn" "$w" 1
	done
	# the named threads show their own function
	if [ -n "$alpha_line" ]; then
		uid=$(sed -E 's/^  t([0-9]+):.*/\1/' <<<"$alpha_line")
		[ -f "$WORK/$tag.t$uid.txt" ] &&
			check_eq "$tag: jeprof --thread=$uid (alpha) shows alloc_alpha" \
			    "$(jp_flat "$WORK/$tag.t$uid.txt" alloc_alpha)" 128000
	fi
	if [ -n "$bravo_line" ]; then
		uid=$(sed -E 's/^  t([0-9]+):.*/\1/' <<<"$bravo_line")
		[ -f "$WORK/$tag.t$uid.txt" ] &&
			check_eq "$tag: jeprof --thread=$uid (bravo-k) shows alloc_bravo" \
			    "$(jp_flat "$WORK/$tag.t$uid.txt" alloc_bravo)" 153600
	fi
	return 0
}

mkdir -p "$WORK/run1" "$WORK/run2"
run named "$WORK/run1" MALLOC_CONF=prof:true,lg_prof_sample:0,prof_thread_names:true,prof_final:true \
    "$WORK/prog" "$WORK/run1/threads.heap"
check_eq "exit status" "$RC" 0
check_stderr_empty named
check_eq "thread.prof.name write/read" "$(grep '^setname' "$WORK/named.out" || true)" "setname 0 getname 0 alpha"
check_eq "prof.dump to a path" "$(grep '^dump' "$WORK/named.out" || true)" "dump 0"
analyse named "$WORK/run1/threads.heap" 1

# the final dump, after the threads exited: their lines and the name set
# through the profiler stay with their still-live allocations
pid=$(pid_of named)
fin=$WORK/run1/jeprof.$pid.0.f.heap
if [ -f "$fin" ]; then
	n=$(awk 'NR > 1 && /^@/ { exit } NR > 1 && /^  t[0-9]+: /' "$fin" | wc -l)
	check_range "final dump after join: per-thread lines" "$n" 4 5
	grep -qE '^  t[0-9]+: .* alpha$' "$fin" || fail "final dump after join: thread name 'alpha' lost"
else
	fail "no final dump jeprof.$pid.0.f.heap (files: $(heap_files "$WORK/run1" | tr '\n' ' '))"
fi

# jemalloc's name for the option does the same
mkdir -p "$WORK/run3"
run jename "$WORK/run3" MALLOC_CONF=prof:true,lg_prof_sample:0,prof_sys_thread_name:true \
    "$WORK/prog" "$WORK/run3/threads.heap"
check_eq "prof_sys_thread_name (jemalloc's name): exit status" "$RC" 0
check_stderr_empty jename
analyse jename "$WORK/run3/threads.heap" 1

# without prof_thread_names the kernel name is not used
run plain "$WORK/run2" MALLOC_CONF=prof:true,lg_prof_sample:0 "$WORK/prog" "$WORK/run2/threads.heap"
check_eq "without prof_thread_names: exit status" "$RC" 0
check_stderr_empty plain
analyse plain "$WORK/run2/threads.heap" 0

check_no_tmp "$WORK"
finish
