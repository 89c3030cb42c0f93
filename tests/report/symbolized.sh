#!/usr/bin/env bash
# symbolized: `heapctl report DUMP --symbolize -o OUT` writes a profile that
# carries its function names (jeprof's "--- symbol" section), and both
# jeprof and heapctl read OUT after the program and its library are gone:
#  * heapctl's text, --lines and --collapsed of OUT, without the binaries,
#    equal those of the dump with them;
#  * jeprof --text OUT (no program argument) names the program's functions
#    with the same flat and cum bytes as jeprof PROG DUMP did;
#  * the dump itself, without the binaries, has no names (so the names in
#    OUT came from OUT);
#  * symbolizing OUT again writes the same bytes;
#  * bad symbol sections and bad options are one-line errors.
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup report_symbolized "$@"
hr_need jeprof

mkdir -p "$WORK/bin" "$WORK/d"
cat >"$WORK/lib.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void *s_lib_alloc(size_t n)
{
	void *p = malloc(n);
	memset(p, 1, n);
	return p;
}
EOF
cat >"$WORK/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
void *s_lib_alloc(size_t n);
void *keep[10000];
int nkeep;
static inline __attribute__((always_inline)) void s_inlined(int n)
{
	for (int i = 0; i < n; i++)
		keep[nkeep++] = malloc(3000);
}
__attribute__((noinline)) void s_outer(int n) { s_inlined(n); }
__attribute__((noinline)) void s_small(int n)
{
	for (int i = 0; i < n; i++)
		keep[nkeep++] = s_lib_alloc(100 + i % 50);
}
int main(void)
{
	s_small(4000);
	s_outer(300);
	printf("%d\n", nkeep);
	return 0;
}
EOF
gcc -O1 -g -fno-omit-frame-pointer -fPIC -shared -o "$WORK/bin/libs.so" "$WORK/lib.c"
gcc -O1 -g -fno-omit-frame-pointer -pie -fPIE -o "$WORK/bin/prog" "$WORK/prog.c" \
	-L"$WORK/bin" -ls -Wl,-rpath,"$WORK/bin"
run prog "$WORK/d" LD_PRELOAD="$BUILD/libheapctl.so" \
	HEAPCTL_CONF=prof:true,lg_prof_sample:10,prof_final:true,prof_prefix:"$WORK/d/d" "$WORK/bin/prog"
check_eq "program exit" "$RC" 0
dump=$(ls "$WORK"/d/d.*.f.heap | head -1)

# with the binaries
hr_ok text "$dump" --bytes --top 0
hr_ok lines "$dump" --bytes --top 0 --lines
hr_ok coll "$dump" --collapsed
jp "$WORK/jeprof.txt" "$WORK/bin/prog" "$dump"
grep -q ' s_small$' "$WORK/text.out" || fail "the dump's report does not name s_small: $(head -5 "$WORK/text.out")"

hr_ok sym "$dump" --symbolize -o "$WORK/s.heap"
check_eq "--symbolize says what it wrote" "$(cat "$WORK/sym.out")" \
	"wrote symbolized profile $WORK/s.heap (jeprof and heapctl read it without the program)"
check_eq "OUT begins with jeprof's symbol marker" "$(head -1 "$WORK/s.heap")" "--- symbol"
grep -q "^0x[0-9a-f]* s_outer--s_inlined$" "$WORK/s.heap" ||
	fail "no 's_outer--s_inlined' line (function, then what it inlined): $(grep s_outer "$WORK/s.heap" | head -2)"
# everything after "--- heap" is the dump, byte for byte
check_eq "OUT carries the dump unchanged" "$(sed '1,/^--- heap$/d' "$WORK/s.heap" | md5sum)" "$(md5sum <"$dump")"

# without them
mv "$WORK/bin" "$WORK/gone"
hr_ok text2 "$WORK/s.heap" --bytes --top 0
hr_ok lines2 "$WORK/s.heap" --bytes --top 0 --lines
hr_ok coll2 "$WORK/s.heap" --collapsed
check_eq "text of OUT without the binaries" "$(sed 1d "$WORK/text2.out")" "$(sed 1d "$WORK/text.out")"
check_eq "--lines of OUT without the binaries" "$(sed 1d "$WORK/lines2.out")" "$(sed 1d "$WORK/lines.out")"
check_eq "--collapsed of OUT without the binaries" "$(cat "$WORK/coll2.out")" "$(cat "$WORK/coll.out")"
hr_ok bare "$dump" --bytes --top 0
grep -q 's_small\|s_lib_alloc' "$WORK/bare.out" &&
	fail "the dump without its binaries still has names: the test proves nothing"

# jeprof reads OUT with no program
if jp "$WORK/jeprof2.txt" "$WORK/s.heap"; then
	for f in s_small s_lib_alloc s_outer main; do
		check_eq "jeprof on OUT: flat of $f" "$(jp_flat "$WORK/jeprof2.txt" $f)" "$(jp_flat "$WORK/jeprof.txt" $f)"
		check_eq "jeprof on OUT: cum of $f" "$(jp_cum "$WORK/jeprof2.txt" $f)" "$(jp_cum "$WORK/jeprof.txt" $f)"
	done
	check_eq "jeprof on OUT: total" "$(jp_total "$WORK/jeprof2.txt")" "$(jp_total "$WORK/jeprof.txt")"
	[ "$(jp_flat "$WORK/jeprof2.txt" s_lib_alloc)" != absent ] || fail "jeprof on OUT: no s_lib_alloc row"
fi

# again, from OUT itself: the same file
hr_ok sym2 "$WORK/s.heap" --symbolize -o "$WORK/s2.heap"
cmp -s "$WORK/s.heap" "$WORK/s2.heap" || fail "symbolizing OUT again changed it: $(diff "$WORK/s.heap" "$WORK/s2.heap" | head -4)"

# errors
hr_err noout 2 "$WORK/s.heap" --symbolize
hr_err onlyo 2 "$WORK/s.heap" -o "$WORK/x.heap"
printf -- '--- symbol\n0x10 f\n' >"$WORK/cut.heap"
hr_err cut 2 "$WORK/cut.heap"
grep -q "cut.heap:2: the symbol section has no '---' line to end it" "$WORK/cut.err" || fail "cut: $(cat "$WORK/cut.err")"
printf -- '--- symbol\nzz\n---\n--- heap\nheap_v2/1\n' >"$WORK/junk.heap"
hr_err junk 2 "$WORK/junk.heap"
grep -q "junk.heap:2: expected '0x<address> <function>'" "$WORK/junk.err" || fail "junk: $(cat "$WORK/junk.err")"
finish
