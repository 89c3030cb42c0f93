#!/usr/bin/env bash
# symcache: `heapctl report --symcache DIR` keeps the frames each module's
# addresses came to in DIR/<build id>.sym, and the next report reads them
# from there instead of the module's symbols and DWARF (heapctl serve gives
# it to every scrape).
#  * With and without the cache, first and second time: the same --lines
#    text, collapsed stacks and pprof.
#  * The second report takes its names from the cache: a name edited in
#    the cache file is what it shows.
#  * A debug file installed since the cache was made makes it stale: the
#    report then has the debug file's names and lines, as without a cache.
#  * A cache file of random bytes, cut short, a symlink, or another user's
#    file: the report is the same as without a cache (and a file of ours
#    is made again).  A directory that others can write, or a file as DIR:
#    exit 2, one line.
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup report_symcache "$@"
hr_need objcopy strip readelf python3

fill_prog_dump
dump=$DUMP
id=$(readelf -n "$WORK/p.full" 2>/dev/null | awk '/Build ID/ { print $3 }')
sc=$WORK/sc
sym=$sc/$id.sym

# ---- the same report, with the cache filled and read -------------------------
hr_ok plain "$dump" --lines --bytes --top 0
grep -q "grab (inline) $WORK/p.c:" "$WORK/plain.out" || fail "no inlined grab row: $(head -4 "$WORK/plain.out")"
hr_ok c1 "$dump" --lines --bytes --top 0 --symcache "$sc"
[ -f "$sym" ] || fail "no $id.sym in the cache after a report: $(ls "$sc" 2>&1 | tr '\n' ' ')"
check_eq "cache directory mode" "$(stat -c %a "$sc")" 700
hr_ok c2 "$dump" --lines --bytes --top 0 --symcache "$sc"
check_eq "first report with the cache: as without" "$(cat "$WORK/c1.out")" "$(cat "$WORK/plain.out")"
check_eq "second report, from the cache: as without" "$(cat "$WORK/c2.out")" "$(cat "$WORK/plain.out")"
hr_ok colp "$dump" --collapsed
hr_ok colc "$dump" --collapsed --symcache "$sc"
check_eq "collapsed from the cache" "$(cat "$WORK/colc.out")" "$(cat "$WORK/colp.out")"
hr_ok ppp "$dump" --pprof "$WORK/p.pb.gz"
hr_ok ppc "$dump" --pprof "$WORK/c.pb.gz" --symcache "$sc"
cmp -s <(zcat "$WORK/p.pb.gz") <(zcat "$WORK/c.pb.gz") || fail "the pprof profile from the cache differs"

# ---- the names come from the cache ----------------------------------------------
edit() {  # FILE FROM TO: the same number of bytes
	python3 - "$@" <<'EOF'
import sys
path, a, b = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
data = open(path, "rb").read()
assert a in data and len(a) == len(b)
open(path, "wb").write(data.replace(a, b))
EOF
}
cp "$sym" "$WORK/good.sym"
edit "$sym" fill_a fill_X
hr_ok edited "$dump" --lines --bytes --top 0 --symcache "$sc"
grep -q " fill_X $WORK/p.c:" "$WORK/edited.out" || fail "a name edited in the cache file is not shown: $(head -4 "$WORK/edited.out")"
grep -q " fill_a " "$WORK/edited.out" && fail "the module was read although the cache had every address"

# ---- untrusted or damaged cache files ---------------------------------------------
same_as_plain() {  # TAG WHAT
	hr_ok "$1" "$dump" --lines --bytes --top 0 --symcache "$sc"
	check_eq "$2: the report as without a cache" "$(cat "$WORK/$1.out")" "$(cat "$WORK/plain.out")"
}
head -c "$(stat -c %s "$WORK/good.sym")" /dev/urandom >"$sym"
same_as_plain random "random bytes in the cache file"
check_eq "random bytes: the file made again" "$(head -c 6 "$sym")" HCSYMC
head -c 100 "$WORK/good.sym" >"$sym"
same_as_plain short "a cache file cut short"
head -c $(($(stat -c %s "$WORK/good.sym") - 3)) "$WORK/good.sym" >"$sym"
same_as_plain short3 "a cache file without its last 3 bytes"
cp "$WORK/good.sym" "$WORK/evil.sym"
edit "$WORK/evil.sym" fill_a fill_X
rm -f "$sym"
ln -s "$WORK/evil.sym" "$sym"
same_as_plain symlink "a symlink in the cache file's place"
[ -L "$sym" ] && fail "the symlink was left in place of the cache file"
grep -q fill_X "$WORK/evil.sym" || fail "the symlink's target was written"
if [ "$(id -u)" -eq 0 ]; then
	cp "$WORK/evil.sym" "$sym"
	chown nobody "$sym"
	same_as_plain other_user "a cache file of another user"
fi

# ---- a stale cache: a debug file installed since --------------------------------
root=$WORK/root
mkdir -p "$root$WORK/bin" "$root/usr/lib/debug/.build-id/${id:0:2}"
strip -o "$root$WORK/bin/p" "$WORK/p.full"
hr_ok s_plain "$dump" --lines --bytes --top 0 --sysroot "$root"
hr_ok s_c1 "$dump" --lines --bytes --top 0 --sysroot "$root" --symcache "$WORK/sc2"
check_eq "stripped, with the cache" "$(cat "$WORK/s_c1.out")" "$(cat "$WORK/s_plain.out")"
grep -q "fill_a" "$WORK/s_c1.out" && fail "stripped without a debug file, yet fill_a is named"
objcopy --only-keep-debug --compress-debug-sections=zlib "$WORK/p.full" \
	"$root/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
hr_ok s_dbg "$dump" --lines --bytes --top 0 --sysroot "$root"
hr_ok s_c2 "$dump" --lines --bytes --top 0 --sysroot "$root" --symcache "$WORK/sc2"
grep -q " fill_a $WORK/p.c:" "$WORK/s_dbg.out" || fail "the debug file gave no fill_a row: $(head -4 "$WORK/s_dbg.out")"
check_eq "a debug file installed since the cache was made: as without a cache" "$(cat "$WORK/s_c2.out")" \
	"$(cat "$WORK/s_dbg.out")"
hr_ok s_c3 "$dump" --lines --bytes --top 0 --sysroot "$root" --symcache "$WORK/sc2"
check_eq "and again, from the cache made with it" "$(cat "$WORK/s_c3.out")" "$(cat "$WORK/s_dbg.out")"

# ---- refused directories ----------------------------------------------------------
mkdir -m 777 "$WORK/open"
chmod 777 "$WORK/open"
hr_err open 2 "$dump" --symcache "$WORK/open"
grep -q "symcache $WORK/open: not a directory of this user's that others cannot write" "$WORK/open.err" ||
	fail "a directory others can write: $(cat "$WORK/open.err")"
hr_err afile 2 "$dump" --symcache "$WORK/p.c"
ln -s "$sc" "$WORK/sclink"
hr_err dirlink 2 "$dump" --symcache "$WORK/sclink"

finish
