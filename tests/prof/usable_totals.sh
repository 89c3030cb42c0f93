#!/usr/bin/env bash
# usable_totals: sizes and totals as a service sees them.
#
#  * A program that keeps its own memory counter with malloc_usable_size,
#    as redis's used_memory does (added at allocation, subtracted at free,
#    through realloc), reads the same total with profiling sampling at
#    lg_prof_sample:14 and at lg_prof_sample:0 (every object sampled) as
#    with profiling off, and its counter returns to exactly 0 when all is
#    freed: a sampled small object reports its size class from malloc to
#    free, as jemalloc's promoted objects do (not the page it lives in).
#  * 2,000,000 objects of 20 bytes: heapctl's profile total matches
#    jemalloc's profile of the same program within 2%, and both match the
#    program's malloc_usable_size sum (profiles count usable bytes).
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup usable_totals "$@"

JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[ -f "$JEMALLOC" ] || { fail "$JEMALLOC missing (Debian libjemalloc2)"; finish; }

# ---- a redis-like counter --------------------------------------------------
cat >"$WORK/counter.c" <<'EOF'
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 200000
static char *obj[N];
static size_t used;              /* what redis calls used_memory */

static void *zmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL)
		exit(3);
	used += malloc_usable_size(p);
	return p;
}

static void *zrealloc(void *p, size_t n)
{
	size_t old = malloc_usable_size(p);
	void *q = realloc(p, n);
	if (q == NULL)
		exit(3);
	used += malloc_usable_size(q);
	used -= old;
	return q;
}

static void zfree(void *p)
{
	used -= malloc_usable_size(p);
	free(p);
}

int main(void)
{
	unsigned seed = 12345;
	for (int i = 0; i < N; i++) {             /* keys and values: 9 to 300 bytes */
		seed = seed * 1103515245u + 12345u;
		size_t n = 9 + (seed >> 8) % 292;
		obj[i] = zmalloc(n);
		memset(obj[i], 'x', n);
	}
	for (int i = 0; i < N; i += 3) {          /* APPEND: some values grow */
		seed = seed * 1103515245u + 12345u;
		obj[i] = zrealloc(obj[i], malloc_usable_size(obj[i]) + 1 + (seed >> 8) % 500);
	}
	for (int i = 1; i < N; i += 4) {          /* DEL */
		zfree(obj[i]);
		obj[i] = NULL;
	}
	printf("used %zu\n", used);
	for (int i = 0; i < N; i++)
		if (obj[i] != NULL)
			zfree(obj[i]);
	printf("after %zu\n", used);
	return 0;
}
EOF
compile "$WORK/counter" "$WORK/counter.c"

run off "$WORK" MALLOC_CONF=prof:false LD_PRELOAD="$LIB" "$WORK/counter"
check_eq "profiling off: exit status" "$RC" 0
off=$(sed -n 's/^used //p' "$WORK/off.out")
[[ "$off" =~ ^[0-9]+$ ]] || fail "profiling off: no used_memory printed: $(head -3 "$WORK/off.out" "$WORK/off.err")"
check_eq "profiling off: counter after freeing everything" "$(sed -n 's/^after //p' "$WORK/off.out")" 0
for lg in 14 0; do
	run "lg$lg" "$WORK" MALLOC_CONF=prof:true,lg_prof_sample:$lg LD_PRELOAD="$LIB" "$WORK/counter"
	check_eq "lg_prof_sample:$lg: exit status" "$RC" 0
	check_stderr_empty "lg$lg"
	check_eq "lg_prof_sample:$lg: used_memory (= profiling off)" "$(sed -n 's/^used //p' "$WORK/lg$lg.out")" "$off"
	check_eq "lg_prof_sample:$lg: counter after freeing everything" "$(sed -n 's/^after //p' "$WORK/lg$lg.out")" 0
done

# ---- 2M x 20 bytes against jemalloc's own profile ----------------------------
cat >"$WORK/small.c" <<'EOF'
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define N 2000000

__attribute__((noinline)) void *site_small(void)
{
	return malloc(20);
}

int main(void)
{
	/* the pointer array is mmap'd: only the objects are in the profile */
	void **keep = mmap(NULL, N * sizeof(void *), PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (keep == MAP_FAILED)
		return 3;
	size_t usable = 0;
	for (int i = 0; i < N; i++) {
		keep[i] = site_small();
		if (keep[i] == NULL)
			return 3;
		usable += malloc_usable_size(keep[i]);
	}
	printf("pid %d\nusable %zu\n", (int)getpid(), usable);
	return 0;
}
EOF
compile "$WORK/small" "$WORK/small.c"

# Both at lg_prof_sample:10 (about 125,000 samples: sampling error ~0.3%).
total_of() {   # <tag> <preload>: the final dump's jeprof Total
	local tag=$1 preload=$2 pid f
	mkdir -p "$WORK/$tag"
	run "$tag" "$WORK/$tag" MALLOC_CONF=prof:true,lg_prof_sample:10,prof_final:true,prof_prefix:"$WORK/$tag/p" \
	    LD_PRELOAD="$preload" "$WORK/small"
	check_eq "$tag: exit status" "$RC" 0
	pid=$(pid_of "$tag")
	f=$(ls "$WORK/$tag"/p."$pid".*.f.heap 2>/dev/null | head -1)
	if [ -z "$f" ]; then
		fail "$tag: no final dump in $WORK/$tag ($(ls "$WORK/$tag" | tr '\n' ' '))"
		echo absent
		return
	fi
	jp "$WORK/$tag.txt" "$WORK/small" "$f" >&2 || { echo absent; return; }
	jp_total "$WORK/$tag.txt"
}
hc=$(total_of heapctl "$LIB")
je=$(total_of jemalloc "$JEMALLOC")
usable=$(sed -n 's/^usable //p' "$WORK/heapctl.out")
check_eq "2M x malloc(20): malloc_usable_size sum under heapctl" "$usable" $((2000000 * 32))
check_eq "2M x malloc(20): malloc_usable_size sum under jemalloc" "$(sed -n 's/^usable //p' "$WORK/jemalloc.out")" $((2000000 * 32))
# two profiles at lg 10 of 2M 32-byte objects (61,500 samples each): their
# difference has a standard deviation of 0.56%, and 3% is 5.3 of them
check_pct "2M x malloc(20): heapctl's profile total against jemalloc's ($je)" "$hc" "$je" 3
check_pct "2M x malloc(20): heapctl's profile total against the usable bytes" "$hc" "$usable" 2

finish
