#!/usr/bin/env bash
# debugfiles: separate debug files with compressed sections (as Debian's
# -dbg and -dbgsym packages ship them) give the same report as the program
# built with its DWARF in it.  heapctl inflates them itself (heapctl/
# inflate.c: only the sections a report reads, on two threads), found by
# build id under <sysroot>/usr/lib/debug or by .gnu_debuglink.
#  * --lines of the unstripped program = by build id (under --sysroot),
#    zlib-compressed = by build id, uncompressed = by debuglink, compressed.
#  * A compressed .debug_info with garbage in it: the report still comes
#    out, exit 0, with the function names the symbol table gives.
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup report_debugfiles "$@"
hr_need objcopy strip readelf

fill_prog_dump
dump=$DUMP
hr_ok full "$dump" --lines --bytes --top 0
grep -q "grab (inline) $WORK/p.c:" "$WORK/full.out" || fail "unstripped: no inlined grab row: $(head -4 "$WORK/full.out")"

id=$(readelf -n "$WORK/p.full" 2>/dev/null | awk '/Build ID/ { print $3 }')
root=$WORK/root
mkdir -p "$root$WORK/bin" "$root/usr/lib/debug/.build-id/${id:0:2}"
strip -o "$root$WORK/bin/p" "$WORK/p.full"
dbg=$root/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
for how in zlib none; do
	objcopy --only-keep-debug --compress-debug-sections=$how "$WORK/p.full" "$dbg"
	if [ $how = zlib ]; then
		readelf -SW "$dbg" 2>/dev/null | grep -q '\.debug_info .* C ' || fail "objcopy did not compress .debug_info"
	fi
	hr_ok "bid-$how" "$dump" --lines --bytes --top 0 --sysroot "$root"
	# the sysroot has only the program: its rows
	check_eq "by build id, $how: the program's rows as unstripped" "$(grep -F "$WORK/p.c:" "$WORK/bid-$how.out")" \
		"$(grep -F "$WORK/p.c:" "$WORK/full.out")"
done
# a view without file:line leaves the line tables out: the same functions
# (inlined ones too) and total; --focus on a file:line still reads them
hr_ok nolines "$dump" --bytes --top 0 --sysroot "$root"
check_eq "without --lines: Total" "$(head -1 "$WORK/nolines.out")" "$(head -1 "$WORK/bid-zlib.out")"
# (rows from line 3 on: the Total line, then the column headers)
check_eq "without --lines: the same functions" \
	"$(awk 'NR > 2 {$1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print}' "$WORK/nolines.out" | sort -u)" \
	"$(awk 'NR > 2 {$1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); sub(/ [^ ]*:[0-9]+$/, ""); print}' \
	    "$WORK/bid-zlib.out" | sort -u)"
grep -q "^ .* grab (inline)\$" "$WORK/nolines.out" || fail "without --lines: no inlined grab row: $(head -4 "$WORK/nolines.out")"
grep -q ":[0-9]" "$WORK/nolines.out" && fail "without --lines: a file:line in the rows: $(head -4 "$WORK/nolines.out")"
hr_ok focus "$dump" --bytes --top 0 --sysroot "$root" --focus "p\\.c:[0-9]+\$"
check_eq "--focus on file:line: Total" "$(head -1 "$WORK/focus.out")" "$(head -1 "$WORK/bid-zlib.out")"
# garbage inside the compressed .debug_info (found by build id: no CRC to
# turn it away): the DWARF cannot be read, the debug file's symbol table can
objcopy --only-keep-debug --compress-debug-sections=zlib "$WORK/p.full" "$dbg"
python3 - "$dbg" <<'EOF'
import struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
shoff, = struct.unpack_from("<Q", data, 0x28)
ent, num, stri = struct.unpack_from("<HHH", data, 0x3a)
sh = lambda i: struct.unpack_from("<IIQQQQ", data, shoff + i * ent)
stroff = sh(stri)[4]
for i in range(num):
    name_off, _, flags, _, off, size = sh(i)
    name = data[stroff + name_off:data.index(0, stroff + name_off)]
    if name == b".debug_info":
        for k in range(24 + 40, size, 97):
            data[off + k] ^= 0x5a
open(path, "wb").write(data)
EOF
hr_ok bad "$dump" --lines --bytes --top 0 --sysroot "$root"
check_eq "garbled .debug_info: Total" "$(head -1 "$WORK/bad.out")" "$(head -1 "$WORK/full.out")"
grep -q " fill_a ??:0\$" "$WORK/bad.out" || fail "garbled .debug_info: fill_a not named from the symbol table: $(head -4 "$WORK/bad.out")"
rm -f "$dbg"

# by .gnu_debuglink, next to the program
strip -o "$WORK/bin/p" "$WORK/p.full"
objcopy --only-keep-debug --compress-debug-sections=zlib "$WORK/p.full" "$WORK/bin/p.debug"
objcopy --add-gnu-debuglink="$WORK/bin/p.debug" "$WORK/bin/p"
hr_ok link "$dump" --lines --bytes --top 0
check_eq "by debuglink, compressed: same as the unstripped program" "$(cat "$WORK/link.out")" "$(cat "$WORK/full.out")"

finish
