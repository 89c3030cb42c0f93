#!/usr/bin/env bash
# exact_and_sampled: what jeprof reports per allocation site.
#
#  * lg_prof_sample:0 samples every allocation: jeprof's flat bytes per
#    function are exactly the usable bytes still live (what
#    malloc_usable_size reports; jemalloc's profiles count the same), for
#    every entry point (malloc, calloc, realloc, posix_memalign,
#    aligned_alloc, memalign) and every size range (small, page runs, huge
#    mappings).  The program adds up malloc_usable_size per site itself.
#  * At the default lg_prof_sample:19 the dump is a sample; with 1.6 GB kept
#    live from two sites in a 3:1 ratio (about 2400 and 800 samples), the
#    totals must be within +-15% and the ratio within +-20% (each more than
#    4 standard deviations of the sampling error, so the test is not flaky).  Run once with sizes that fill their size class
#    and once with sizes just above a class or page boundary: the estimate
#    is of the usable bytes in both cases.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup exact_and_sampled "$@"

cat >"$WORK/exact.c" <<'EOF'
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *keep[4096];            /* global: the allocations cannot be optimised away */
int nkeep;
/* malloc_usable_size summed per site: live, and ever allocated */
enum { S_MALLOC, S_CALLOC, S_REALLOC, S_POSIX, S_ALIGNED, S_MEMALIGN, S_LARGE,
    S_HUGE, S_PARTIAL, S_FREED, NSITES };
static const char *site_name[NSITES] = { "site_malloc", "site_calloc", "site_realloc",
    "site_posix_memalign", "site_aligned_alloc", "site_memalign", "site_large",
    "site_huge", "site_partial", "site_freed" };
size_t live[NSITES], total[NSITES];
int site;
static void hold(void *p)
{
	if (p == NULL) {
		fprintf(stderr, "allocation failed\n");
		exit(3);
	}
	memset(p, 0x5a, 64);
	keep[nkeep++] = p;
	live[site] += malloc_usable_size(p);
	total[site] += malloc_usable_size(p);
}
static void drop(void *p)
{
	live[site] -= malloc_usable_size(p);
	free(p);
}

__attribute__((noinline)) void site_malloc(void)        /* 300 x 200 */
{
	for (int i = 0; i < 300; i++)
		hold(malloc(200));
}
__attribute__((noinline)) void site_calloc(void)        /* 50 x (25 x 40) */
{
	for (int i = 0; i < 50; i++)
		hold(calloc(25, 40));
}
__attribute__((noinline)) void site_realloc(void)       /* one object, ends at 70000 */
{
	char *p = malloc(100);
	static const size_t sizes[] = { 200, 1000, 10000, 50000, 3 << 20, 70000 };
	for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		p = realloc(p, sizes[i]);
		if (p == NULL)
			exit(3);
		p[sizes[i] - 1] = 1;
	}
	hold(p);
}
__attribute__((noinline)) void site_posix_memalign(void) /* 10 x 1000 */
{
	for (int i = 0; i < 10; i++) {
		void *p = NULL;
		if (posix_memalign(&p, 64, 1000) != 0)
			exit(3);
		hold(p);
	}
}
__attribute__((noinline)) void site_aligned_alloc(void)  /* 5 x 8192 */
{
	for (int i = 0; i < 5; i++)
		hold(aligned_alloc(4096, 8192));
}
__attribute__((noinline)) void site_memalign(void)       /* 7 x 300 */
{
	for (int i = 0; i < 7; i++)
		hold(memalign(256, 300));
}
__attribute__((noinline)) void site_large(void)          /* 3 x 100000 */
{
	for (int i = 0; i < 3; i++)
		hold(malloc(100000));
}
__attribute__((noinline)) void site_huge(void)           /* 2 x 3 MiB + 1 */
{
	for (int i = 0; i < 2; i++)
		hold(malloc((3 << 20) + 1));
}
__attribute__((noinline)) void site_partial(void)        /* 100 x 500, 40 freed */
{
	void *p[100];
	for (int i = 0; i < 100; i++) {
		p[i] = malloc(500);
		memset(p[i], 1, 500);
	}
	for (int i = 0; i < 100; i++) {
		if (i % 5 < 2) {
			total[site] += malloc_usable_size(p[i]);
			free(p[i]);
		} else {
			hold(p[i]);
		}
	}
}
__attribute__((noinline)) void site_freed(void)          /* nothing stays */
{
	for (int i = 0; i < 1000; i++) {
		void *p = malloc(64 + i * 13);
		hold(p);
		drop(keep[--nkeep]);
	}
}

int main(void)
{
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	void (*sites[NSITES])(void) = { site_malloc, site_calloc, site_realloc,
	    site_posix_memalign, site_aligned_alloc, site_memalign, site_large,
	    site_huge, site_partial, site_freed };
	for (site = 0; site < NSITES; site++)
		sites[site]();
	for (int i = 0; i < NSITES; i++)
		printf("usable %s %zu %zu\n", site_name[i], live[i], total[i]);
	return 0;
}
EOF
compile "$WORK/exact" "$WORK/exact.c"
mkdir -p "$WORK/e"
run exact "$WORK/e" MALLOC_CONF=prof:true,lg_prof_sample:0,prof_final:true LD_PRELOAD="$LIB" "$WORK/exact"
check_eq "lg 0: exit status" "$RC" 0
check_stderr_empty exact
pid=$(pid_of exact)
f=$WORK/e/jeprof.$pid.0.f.heap
if [ ! -f "$f" ]; then
	fail "lg 0: no final dump jeprof.$pid.0.f.heap (files: $(heap_files "$WORK/e" | tr '\n' ' '))"
elif jp "$WORK/exact.txt" "$WORK/exact" "$f"; then
	check_eq "lg 0: dump header" "$(head -1 "$f")" "heap_v2/1"
	# what each site asked for, and what it holds (malloc_usable_size)
	while read -r fn asked; do
		bytes=$(awk -v f="$fn" '$1 == "usable" && $2 == f { print $3 }' "$WORK/exact.out")
		[[ "$bytes" =~ ^[0-9]+$ && "$bytes" -ge "$asked" ]] ||
			fail "lg 0: the program's malloc_usable_size sum for $fn is '$bytes', not at least $asked"
		check_eq "lg 0: jeprof bytes for $fn" "$(jp_flat "$WORK/exact.txt" "$fn")" "$bytes"
	done <<'EOF'
site_malloc 60000
site_calloc 50000
site_realloc 70000
site_posix_memalign 10000
site_aligned_alloc 40960
site_memalign 2100
site_large 300000
site_huge 6291458
site_partial 30000
EOF
	# a sampled small object reports its size class, as unsampled ones do
	check_eq "lg 0: usable bytes of 300 x malloc(200)" \
	    "$(awk '$2 == "site_malloc" { print $3 }' "$WORK/exact.out")" $((300 * 224))
	fr=$(jp_flat "$WORK/exact.txt" site_freed)
	[ "$fr" = absent ] || [ "$fr" = 0 ] || fail "lg 0: freed allocations of site_freed still reported: $fr bytes"
	# the header's t* line is the sum of the stacks
	hdr=$(sed -n '2s/^  t\*: [0-9]*: \([0-9]*\) .*/\1/p' "$f")
	check_eq "lg 0: header t* bytes = jeprof Total" "$hdr" "$(jp_total "$WORK/exact.txt")"
fi

# accum fields are 0 without prof_accum
if [ -f "$f" ]; then
	nz=$(awk '/^$/ { exit } /^  t/ && !/\[0: 0\]$/' "$f" | head -3)
	[ -z "$nz" ] || fail "lg 0: accum fields not 0 without prof_accum: $nz"
fi

# ---- prof_accum: jeprof --alloc_space counts freed allocations too ---------
mkdir -p "$WORK/a"
run accum "$WORK/a" MALLOC_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_accum:true \
    LD_PRELOAD="$LIB" "$WORK/exact"
check_eq "prof_accum: exit status" "$RC" 0
check_stderr_empty accum
pid=$(pid_of accum)
f=$WORK/a/jeprof.$pid.0.f.heap
if [ ! -f "$f" ]; then
	fail "prof_accum: no final dump jeprof.$pid.0.f.heap"
else
	if jp "$WORK/accum_alloc.txt" --alloc_space "$WORK/exact" "$f"; then
		# site_freed: the usable sizes of 64 + 13 i for i < 1000, all freed
		for fn in site_freed site_partial site_malloc; do
			check_eq "prof_accum: --alloc_space bytes for $fn" "$(jp_flat "$WORK/accum_alloc.txt" "$fn")" \
			    "$(awk -v f="$fn" '$1 == "usable" && $2 == f { print $4 }' "$WORK/accum.out")"
		done
	fi
	if jp "$WORK/accum_inuse.txt" "$WORK/exact" "$f"; then
		check_eq "prof_accum: in-use bytes for site_partial" "$(jp_flat "$WORK/accum_inuse.txt" site_partial)" \
		    "$(awk '$1 == "usable" && $2 == "site_partial" { print $3 }' "$WORK/accum.out")"
		fr=$(jp_flat "$WORK/accum_inuse.txt" site_freed)
		[ "$fr" = absent ] || [ "$fr" = 0 ] || fail "prof_accum: freed allocations of site_freed in use: $fr bytes"
	fi
fi

# ---- sampled: 1.6 GB live from two sites, 3:1 -----------------------------
cat >"$WORK/sampled.c" <<'EOF'
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void **keep;
size_t nkeep;

static void **mmap_keep(size_t n)
{
	void *p = mmap(NULL, n * sizeof(void *), PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		exit(3);
	return p;
}

__attribute__((noinline)) void site_three(size_t size, size_t total)
{
	for (size_t done = 0; done < total; done += size) {
		char *p = malloc(size);
		if (p == NULL)
			exit(3);
		p[0] = 1;
		keep[nkeep++] = p;
	}
}

__attribute__((noinline)) void site_one(size_t size, size_t total)
{
	for (size_t done = 0; done < total; done += size) {
		char *p = malloc(size);
		if (p == NULL)
			exit(3);
		p[0] = 1;
		keep[nkeep++] = p;
	}
}

int main(int argc, char **argv)
{
	size_t a = strtoul(argv[1], NULL, 10), b = strtoul(argv[2], NULL, 10);
	size_t ta = (size_t)1200 << 20, tb = (size_t)400 << 20;
	/* the pointer array itself is mmap'd, not malloc'd: only the two sites
	 * are in the profile */
	size_t n = ta / a + tb / b + 16;
	keep = mmap_keep(n);
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	for (int r = 0; r < 10; r++) {   /* interleaved, 10 rounds */
		site_three(a, ta / 10);
		site_one(b, tb / 10);
	}
	/* the usable bytes held (rounds may overshoot by one object) */
	printf("three %zu one %zu\n", (size_t)10 * ((ta / 10 + a - 1) / a) * malloc_usable_size(keep[0]),
	    (size_t)10 * ((tb / 10 + b - 1) / b) * malloc_usable_size(keep[nkeep - 1]));
	return 0;
}
EOF
compile "$WORK/sampled" "$WORK/sampled.c"

# sampled <tag> <size three> <size one>
sampled() {
	local tag=$1 a=$2 b=$3
	mkdir -p "$WORK/$tag"
	run "$tag" "$WORK/$tag" MALLOC_CONF=prof_final:true LD_PRELOAD="$LIB" "$WORK/sampled" "$a" "$b"
	check_eq "$tag: exit status" "$RC" 0
	check_stderr_empty "$tag"
	local pid want3 want1
	pid=$(pid_of "$tag")
	read -r want3 want1 < <(sed -n 's/^three \([0-9]*\) one \([0-9]*\)$/\1 \2/p' "$WORK/$tag.out")
	local f=$WORK/$tag/jeprof.$pid.0.f.heap
	if [ ! -f "$f" ]; then
		fail "$tag: no final dump jeprof.$pid.0.f.heap"
		return
	fi
	check_eq "$tag: dump header" "$(head -1 "$f")" "heap_v2/524288"
	jp "$WORK/$tag.txt" "$WORK/sampled" "$f" || return 0
	local g3 g1 tot
	g3=$(jp_flat "$WORK/$tag.txt" site_three)
	g1=$(jp_flat "$WORK/$tag.txt" site_one)
	tot=$(jp_total "$WORK/$tag.txt")
	check_pct "$tag: jeprof Total (sizes $a and $b)" "$tot" $((want3 + want1)) 15
	check_pct "$tag: site_three bytes (size $a)" "$g3" "$want3" 15
	check_pct "$tag: site_one bytes (size $b)" "$g1" "$want1" 15
	if [[ "$g3" =~ ^[0-9]+$ && "$g1" =~ ^[0-9]+$ && "$g1" -gt 0 ]]; then
		local ratio
		ratio=$(awk -v x="$g3" -v y="$g1" 'BEGIN { printf "%.3f", x / y }')
		check_pct "$tag: site_three/site_one ratio" "$ratio" 3 20
	fi
}

# sizes close to their class size (12000 -> 12288, 4000 -> 4096)
sampled sampled_fit 12000 4000
# sizes just above a class or page boundary (1040 -> class 1280 and
# 17000 -> 5 pages), as ordinary programs ask for
sampled sampled_odd 1040 17000

check_no_tmp "$WORK"
finish
