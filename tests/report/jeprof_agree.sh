#!/usr/bin/env bash
# jeprof_agree: `heapctl report` and `jeprof --text` on the same dumps give
# the same Total and the same flat and cum for every function of the test
# program and its shared library, for all four sample types, per thread,
# with --focus/--ignore and with --base.  Dumps come from heapctl and from
# jemalloc itself; the program is PIE and half its code is in a shared
# library, so both load biases must be right.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup report_jeprof_agree "$@"
HC=$BUILD/heapctl

cat >"$WORK/lib.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void *t_lib_alloc(size_t n)
{
	void *p = malloc(n);
	memset(p, 3, n);
	return p;
}
__attribute__((noinline)) void *t_lib_calloc(size_t n)
{
	return calloc(n, 4);
}
EOF
cat >"$WORK/prog.c" <<'EOF'
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void *t_lib_alloc(size_t n);
void *t_lib_calloc(size_t n);
#include <dlfcn.h>

void *keep[20000];
int nkeep;

__attribute__((noinline)) void t_small(int n)
{
	for (int i = 0; i < n; i++)
		keep[nkeep++] = t_lib_alloc(48 + i % 64);
}
__attribute__((noinline)) void t_big(int n)
{
	for (int i = 0; i < n; i++) {
		keep[nkeep] = malloc(70000);
		memset(keep[nkeep++], 1, 70000);
	}
}
__attribute__((noinline)) void t_grow(int n)
{
	char *p = NULL;
	for (int i = 1; i <= n; i++)
		p = realloc(p, (size_t)i * 1000);
	keep[nkeep++] = p;
}
__attribute__((noinline)) void t_temp(int n)
{
	for (int i = 0; i < n; i++)
		free(t_lib_alloc(5000));
}
__attribute__((noinline)) void t_recurse(int depth)
{
	if (depth > 0) {
		t_recurse(depth - 1);
		return;
	}
	keep[nkeep++] = t_lib_calloc(300);
}
__attribute__((noinline)) void *t_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 400; i++)
		t_recurse(i % 4);
	return NULL;
}
int main(int argc, char **argv)
{
	t_small(3000);
	t_big(40);
	t_temp(500);
	/* the preloaded allocator's mallctl (heapctl's or jemalloc's) */
	int (*ctl)(const char *, void *, size_t *, void *, size_t) =
		(int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
	if (argc > 1 && (ctl == NULL || ctl("prof.dump", NULL, NULL, (void *)&argv[1], sizeof argv[1]) != 0))
		return 3;
	pthread_t th;
	pthread_create(&th, NULL, t_worker, NULL);
	pthread_join(th, NULL);
	t_grow(300);
	t_small(1000);
	printf("%d\n", nkeep);
	return 0;
}
EOF
gcc -O1 -g -fno-omit-frame-pointer -fPIC -shared -o "$WORK/libt.so" "$WORK/lib.c"
gcc -O1 -g -fno-omit-frame-pointer -pie -fPIE -pthread -o "$WORK/prog" "$WORK/prog.c" \
	-L"$WORK" -lt -Wl,-rpath,"$WORK" -ldl

mkdir -p "$WORK/hc" "$WORK/je"
run hc "$WORK/hc" LD_PRELOAD="$BUILD/libheapctl.so" \
	HEAPCTL_CONF=prof:true,prof_accum:true,lg_prof_sample:12,prof_final:true,prof_prefix:"$WORK/hc/d" \
	"$WORK/prog" "$WORK/hc/first.heap"
check_eq "heapctl run exit" "$RC" 0
run je "$WORK/je" LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
	MALLOC_CONF=prof:true,prof_accum:true,lg_prof_sample:12,prof_final:true,prof_prefix:"$WORK/je/d" \
	"$WORK/prog" "$WORK/je/first.heap"
check_eq "jemalloc run exit" "$RC" 0

# "name flat cum" for the program's own functions, from a jeprof-format
# text report; the Total line as "Total VALUE".
own_rows() {
	awk '/^Total/ { print "Total", $(NF-1); next }
	     $6 ~ /^t_/ && NF == 6 { print $6, $1, $4 }' "$1" | sort
}

# Numbers printed with %d from sums of doubles may differ by one in the
# last digit when the two tools add in another order.
compare() {   # label, jeprof.txt, heapctl.txt
	local label=$1 a b
	a=$(own_rows "$2")
	b=$(own_rows "$3")
	if [ -z "$a" ] || ! grep -q '^t_' <<<"$a"; then
		fail "$label: jeprof printed no rows for the program (see $2)"
		return
	fi
	if ! diff <(echo "$a") <(echo "$b") >"$WORK/diff.txt"; then
		if ! paste -d' ' <(echo "$a") <(echo "$b") | awk '
			$1 != $4 { bad = 1 }
			function off(x, y) { d = x - y; if (d < 0) d = -d; return d > 1.0001 && d > 0.10001 * (x < 0 ? -x : x) / 100 }
			$1 == $4 && ($1 == "Total" ? off($2, $5) : (off($2, $5) || off($3, $6))) { bad = 1 }
			END { exit bad }'; then
			fail "$label: rows differ (jeprof < > heapctl): $(tr '\n' '|' <"$WORK/diff.txt")"
		fi
	fi
}

for src in hc je; do
	dump=$(ls "$WORK/$src"/d.*.f.heap 2>/dev/null | head -1)
	first=$WORK/$src/first.heap
	if [ -z "$dump" ] || [ ! -s "$first" ]; then
		fail "$src: dumps missing: $(ls "$WORK/$src")"
		continue
	fi
	for type in inuse_space inuse_objects alloc_space alloc_objects; do
		jeprof --text --show_bytes "--$type" "$WORK/prog" "$dump" >"$WORK/j.txt" 2>/dev/null
		"$HC" report "$dump" --top 0 --bytes "--$type" >"$WORK/h.txt"
		compare "$src $type" "$WORK/j.txt" "$WORK/h.txt"
	done
	# jeprof's default unit: MB with one decimal, same Total line
	jeprof --text "$WORK/prog" "$dump" 2>/dev/null | grep '^Total' >"$WORK/j.txt"
	"$HC" report "$dump" | grep '^Total' >"$WORK/h.txt"
	check_eq "$src: MB total line" "$(cat "$WORK/h.txt")" "$(cat "$WORK/j.txt")"
	# the first few rows, in order, are the program's biggest sites
	top_j=$(jeprof --text --show_bytes "$WORK/prog" "$dump" 2>/dev/null | awk '$6 ~ /^t_/ { print $6 }' | head -4 | tr '\n' ' ')
	top_h=$("$HC" report "$dump" --bytes --top 6 | awk '$6 ~ /^t_/ { print $6 }' | head -4 | tr '\n' ' ')
	check_eq "$src: top functions in order" "$top_h" "$top_j"

	# the worker thread alone
	tid=$(awk '/^@/ { s = 1; next } s && /^  t[0-9]+:/ { sub(":", "", $1); print substr($1, 2) }' "$dump" | sort -n | tail -1)
	jeprof --text --show_bytes --thread "$tid" "$WORK/prog" "$dump" >"$WORK/j.txt" 2>/dev/null
	"$HC" report "$dump" --top 0 --bytes --thread "$tid" >"$WORK/h.txt"
	compare "$src thread $tid" "$WORK/j.txt" "$WORK/h.txt"
	grep -q "^Total (t$tid): " "$WORK/h.txt" || fail "$src: --thread total line: $(head -1 "$WORK/h.txt")"

	# focus and ignore
	jeprof --text --show_bytes --focus=t_recurse "$WORK/prog" "$dump" >"$WORK/j.txt" 2>/dev/null
	"$HC" report "$dump" --top 0 --bytes --focus t_recurse >"$WORK/h.txt"
	compare "$src focus" "$WORK/j.txt" "$WORK/h.txt"
	grep -q ' t_big$' "$WORK/h.txt" && fail "$src: --focus t_recurse still shows t_big"
	jeprof --text --show_bytes --ignore='t_lib_alloc' "$WORK/prog" "$dump" >"$WORK/j.txt" 2>/dev/null
	"$HC" report "$dump" --top 0 --bytes --ignore t_lib_alloc >"$WORK/h.txt"
	compare "$src ignore" "$WORK/j.txt" "$WORK/h.txt"
	grep -q ' t_small$' "$WORK/h.txt" && fail "$src: --ignore t_lib_alloc still shows t_small"

	# growth since the first dump
	jeprof --text --show_bytes --base="$first" "$WORK/prog" "$dump" >"$WORK/j.txt" 2>/dev/null
	"$HC" report "$dump" --base "$first" --top 0 --bytes >"$WORK/h.txt"
	compare "$src base" "$WORK/j.txt" "$WORK/h.txt"
	grep -q ' t_big$' "$WORK/h.txt" && fail "$src: --base: t_big did not grow, yet it has a row"
	grep -q ' t_worker$' "$WORK/h.txt" || fail "$src: --base: t_worker grew, yet it has no row"

	# no allocator frame in any row
	"$HC" report "$dump" --top 0 >"$WORK/h.txt"
	if grep -Eq ' (malloc|calloc|realloc|je_[a-z_]+|prof_[a-z_]+|hc_[a-z_]+|imalloc[a-z_]*)$' "$WORK/h.txt"; then
		fail "$src: allocator frames in the report: $(grep -E ' (malloc|calloc|realloc|je_|prof_|hc_|imalloc)' "$WORK/h.txt" | head -3 | tr '\n' '|')"
	fi
done
finish
