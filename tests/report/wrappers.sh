#!/usr/bin/env bash
# wrappers: a program's own allocation functions are allocator frames, so
# the site is the code that called them.
#  * xmalloc (gnulib's name, not inlined) and xcalloc (inlined into its
#    caller): by default the rows are their callers, with the same bytes;
#    --keep-wrappers shows xmalloc and xcalloc as rows, as jeprof does.
#  * --drop RE makes the program's own my_pool_get a wrapper too, and the
#    cum of the callers does not change.
#  * Folded stacks and the pprof file lose the wrapper frames the same way.
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup report_wrappers "$@"

cat >"$WORK/prog.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
void *keep[20000];
int nkeep;
__attribute__((noinline)) void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL)
		abort();
	return p;
}
static inline __attribute__((always_inline)) void *xcalloc(size_t n, size_t s)
{
	void *p = calloc(n, s);
	if (p == NULL)
		abort();
	return p;
}
__attribute__((noinline)) void *my_pool_get(size_t n)
{
	char *p = xmalloc(n);       /* not a tail call: my_pool_get stays on the stack */
	p[0] = 0;
	return p;
}
__attribute__((noinline)) void parse_config(void)
{
	for (int i = 0; i < 2000; i++)
		memset(keep[nkeep++] = xmalloc(1024), 1, 1024);
}
__attribute__((noinline)) void load_table(void)
{
	for (int i = 0; i < 1000; i++)
		keep[nkeep++] = xcalloc(512, 4);
}
__attribute__((noinline)) void serve(void)
{
	for (int i = 0; i < 3000; i++)
		memset(keep[nkeep++] = my_pool_get(512), 2, 512);
}
int main(void)
{
	parse_config();
	load_table();
	serve();
	return 0;
}
EOF
compile "$WORK/prog" "$WORK/prog.c" -O2 -fno-inline-small-functions
mkdir -p "$WORK/d"
run prog "$WORK" LD_PRELOAD="$BUILD/libheapctl.so" \
	HEAPCTL_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:"$WORK/d/w" "$WORK/prog"
check_eq "program exit" "$RC" 0
dump=$(ls "$WORK"/d/w.*.f.heap | head -1)

flat() { awk -v f="$2" '$6 == f && NF == 6 { print $1; found = 1 } END { if (!found) print "absent" }' "$1"; }
cum() { awk -v f="$2" '$6 == f && NF == 6 { print $4; found = 1 } END { if (!found) print "absent" }' "$1"; }

hr_ok def "$dump" --bytes --top 0
check_eq "parse_config's flat (its xmalloc calls)" "$(flat "$WORK/def.out" parse_config)" 2048000
check_eq "load_table's flat (its inlined xcalloc)" "$(flat "$WORK/def.out" load_table)" 2048000
check_eq "my_pool_get's flat (it calls xmalloc)" "$(flat "$WORK/def.out" my_pool_get)" 1536000
check_eq "no xmalloc row" "$(flat "$WORK/def.out" xmalloc)" absent
grep -q 'xcalloc' "$WORK/def.out" && fail "an xcalloc row by default: $(grep xcalloc "$WORK/def.out")"

hr_ok keep "$dump" --bytes --top 0 --keep-wrappers
check_eq "--keep-wrappers: xmalloc's flat" "$(flat "$WORK/keep.out" xmalloc)" 3584000
check_eq "--keep-wrappers: parse_config's flat" "$(flat "$WORK/keep.out" parse_config)" 0
grep -q '^ *2048000 .* xcalloc (inline)$' "$WORK/keep.out" ||
	fail "--keep-wrappers: no inlined xcalloc row of 2048000: $(grep xcalloc "$WORK/keep.out")"
check_eq "the total does not depend on wrappers" "$(head -1 "$WORK/keep.out")" "$(head -1 "$WORK/def.out")"

hr_ok drop "$dump" --bytes --top 0 --drop '^my_pool_'
check_eq "--drop: serve's flat" "$(flat "$WORK/drop.out" serve)" 1536000
check_eq "--drop: serve's cum as before" "$(cum "$WORK/drop.out" serve)" "$(cum "$WORK/def.out" serve)"
check_eq "--drop: no my_pool_get row" "$(flat "$WORK/drop.out" my_pool_get)" absent
hr_err badre 2 "$dump" --drop '('

hr_ok coll "$dump" --collapsed
grep -q 'xmalloc\|xcalloc' "$WORK/coll.out" && fail "folded stacks keep wrapper frames: $(grep -m1 'xmalloc\|xcalloc' "$WORK/coll.out")"
grep -q ';parse_config 2048000$' "$WORK/coll.out" || fail "folded: no stack ending in parse_config: $(head -3 "$WORK/coll.out")"

if command -v go >/dev/null; then
	hr_ok pp "$dump" --pprof "$WORK/w.pb.gz"
	go tool pprof -top -nodecount=50 "$WORK/w.pb.gz" >"$WORK/pprof.txt" 2>"$WORK/pprof.err" ||
		fail "go tool pprof: $(head -3 "$WORK/pprof.err")"
	grep -q ' xmalloc$' "$WORK/pprof.txt" && fail "pprof file keeps xmalloc: $(grep xmalloc "$WORK/pprof.txt")"
	grep -q ' parse_config$' "$WORK/pprof.txt" || fail "pprof: no parse_config: $(head -12 "$WORK/pprof.txt")"
fi
finish
