#!/usr/bin/env bash
# unnamed: code that no symbol names (static functions of a stripped
# program) is grouped by the function that holds it, from the binary's
# unwind tables (.eh_frame_hdr), and a MiniDebugInfo section
# (.gnu_debugdata) names it.
#  * A program with two static functions, one allocating from two places,
#    is stripped: each function is one row, sub_<start>@prog, its start the
#    one nm gives in the unstripped program, its bytes those of both places.
#  * go tool pprof shows the same two functions (not one [prog] node).
#  * Random bytes in those tables change nothing but names.
#  * With a .gnu_debugdata section (xz-compressed symbols of the static
#    functions, as Fedora ships), the rows have the real names.
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup report_unnamed "$@"
hr_need nm objcopy strip xz comm

cat >"$WORK/prog.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
void *keep[10000];
int nkeep;
static __attribute__((noinline)) void fill_index(int n)
{
	for (int i = 0; i < n; i++)
		memset(keep[nkeep++] = malloc(1024), 1, 1024);
	for (int i = 0; i < n; i++)
		memset(keep[nkeep++] = malloc(2048), 2, 2048);
}
static __attribute__((noinline)) void load_names(int n)
{
	for (int i = 0; i < n; i++)
		memset(keep[nkeep++] = malloc(4096), 3, 4096);
}
int main(void)
{
	fill_index(1000);
	load_names(500);
	return 0;
}
EOF
mkdir -p "$WORK/bin" "$WORK/d"
gcc -O1 -g -fno-omit-frame-pointer -pie -fPIE -o "$WORK/prog.full" "$WORK/prog.c"
strip -o "$WORK/bin/prog" "$WORK/prog.full"
nm "$WORK/bin/prog" >/dev/null 2>&1 && nm "$WORK/bin/prog" 2>/dev/null | grep -q fill_index &&
	fail "strip left fill_index in the symbol table: the test proves nothing"
run prog "$WORK" LD_PRELOAD="$BUILD/libheapctl.so" \
	HEAPCTL_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:"$WORK/d/u" "$WORK/bin/prog"
check_eq "program exit" "$RC" 0
dump=$(ls "$WORK"/d/u.*.f.heap | head -1)

start_of() { printf '%x' "0x$(nm "$WORK/prog.full" | awk -v f="$1" '$3 == f { print $1 }')"; }
fi_name="sub_$(start_of fill_index)@prog"
ln_name="sub_$(start_of load_names)@prog"
hr_ok text "$dump" --bytes --top 0
flat() { awk -v f="$2" '$6 == f && NF == 6 { print $1; found = 1 } END { if (!found) print "absent" }' "$1"; }
check_eq "$fi_name: both of fill_index's malloc calls in one row" "$(flat "$WORK/text.out" "$fi_name")" 3072000
check_eq "$ln_name: load_names's row" "$(flat "$WORK/text.out" "$ln_name")" 2048000
grep -q 'prog+0x' "$WORK/text.out" && fail "rows of bare addresses remain: $(grep 'prog+0x' "$WORK/text.out")"

if command -v go >/dev/null; then
	hr_ok pp "$dump" --pprof "$WORK/u.pb.gz"
	go tool pprof -top -nodecount=20 "$WORK/u.pb.gz" >"$WORK/pprof.txt" 2>"$WORK/pprof.err" ||
		fail "go tool pprof: $(head -3 "$WORK/pprof.err")"
	grep -q " $fi_name\$" "$WORK/pprof.txt" || fail "pprof: no $fi_name row: $(head -12 "$WORK/pprof.txt")"
	grep -q " $ln_name\$" "$WORK/pprof.txt" || fail "pprof: no $ln_name row: $(head -12 "$WORK/pprof.txt")"
fi

# unwind tables with garbage in them (a dump can name any file): reports
# still come out, with addresses where nothing can be trusted
cp "$WORK/bin/prog" "$WORK/prog.good"
for seed in 1 2 3 4 5 6 7 8; do
	python3 - "$WORK/prog.good" "$WORK/bin/prog" "$seed" <<'EOF'
import random, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
rng = random.Random(int(sys.argv[3]))
# the section headers: find .eh_frame_hdr and .eh_frame
shoff, = struct.unpack_from("<Q", data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
def sh(i):
    return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
stroff = sh(shstrndx)[4]
for i in range(shnum):
    name_off, _, _, _, off, size = sh(i)
    name = data[stroff + name_off:data.index(0, stroff + name_off)]
    if name in (b".eh_frame_hdr", b".eh_frame"):
        for _ in range(12):
            data[off + rng.randrange(size)] = rng.randrange(256)
        if rng.random() < 0.3:              # a count or length to the sky
            data[off + rng.randrange(min(size, 16))] = 0xff
open(sys.argv[2], "wb").write(data)
EOF
	hr bad$seed "$dump" --bytes --top 0
	check_eq "garbled unwind tables ($seed): exit status" "$RC" 0
	check_eq "garbled unwind tables ($seed): Total" "$(head -1 "$WORK/bad$seed.out")" "$(head -1 "$WORK/text.out")"
done
cp "$WORK/prog.good" "$WORK/bin/prog"

# MiniDebugInfo: the static functions' symbols, xz-compressed, in .gnu_debugdata
nm -D --format=posix --defined-only "$WORK/prog.full" | awk '{ print $1 }' | sort >"$WORK/dynsyms"
nm --format=posix --defined-only "$WORK/prog.full" | awk '$2 == "T" || $2 == "t" { print $1 }' | sort >"$WORK/funcsyms"
comm -13 "$WORK/dynsyms" "$WORK/funcsyms" >"$WORK/keep"
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols="$WORK/keep" \
	"$WORK/prog.full" "$WORK/mini"
strip --remove-section=.comment --remove-section=.note --strip-debug "$WORK/mini" 2>/dev/null || true
xz -f "$WORK/mini"
objcopy --add-section .gnu_debugdata="$WORK/mini.xz" "$WORK/bin/prog" "$WORK/bin/prog.mdi"
mv "$WORK/bin/prog.mdi" "$WORK/bin/prog"
nm "$WORK/bin/prog" 2>/dev/null | grep -q fill_index && fail "the MiniDebugInfo program has a .symtab"
hr_ok mdi "$dump" --bytes --top 0
check_eq "MiniDebugInfo: fill_index named" "$(flat "$WORK/mdi.out" fill_index)" 3072000
check_eq "MiniDebugInfo: load_names named" "$(flat "$WORK/mdi.out" load_names)" 2048000
finish
