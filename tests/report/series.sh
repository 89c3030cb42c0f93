#!/usr/bin/env bash
# series: `heapctl report --series` over a series of dumps ranks the sites
# that only grew first, as leak suspects.
#  * A program dumps (mallctl prof.dump) after each of 6 rounds: a leak that
#    grows every round, a cache that grows and is trimmed, a constant pool
#    and a burst that is freed.  The leak is first, starred, grew 5/5; the
#    cache is not starred; the constant one has growth 0; first/last match
#    each dump's own report.  The order is the dumps' sequence numbers even
#    when their times say otherwise, and a prefix works as the list.
#  * --json carries the same numbers and the values per dump.
#  * The demo service (tests/demo/service.c) with prof.timer_s=1: its leak,
#    session_cache_insert, is the first row.
#  * --svg FILE: headless Chromium renders it (a screenshot with the top
#    site's color in it) and its DOM holds the site names in rank order.
#  * One dump, a prefix that matches nothing and two processes' dumps
#    side by side are one-line errors.
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup report_series "$@"
hr_need chromium python3

cat >"$WORK/prog.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int (*ctl)(const char *, void *, size_t *, void *, size_t);
static void *leak[6000], *cache[6000], *pool[500];
static int nleak, ncache;
__attribute__((noinline)) void leak_site(void)
{
	for (int i = 0; i < 1000; i++)
		memset(leak[nleak++] = malloc(1024), 1, 1024);
}
__attribute__((noinline)) void cache_site(int round)
{
	int want = round % 2 ? 500 : 2500;
	while (ncache < want)
		memset(cache[ncache++] = malloc(1024), 2, 1024);
	while (ncache > want)
		free(cache[--ncache]);
}
__attribute__((noinline)) void pool_site(void)
{
	for (int i = 0; i < 500; i++)
		memset(pool[i] = malloc(2048), 3, 2048);
}
__attribute__((noinline)) void *burst_site(int round)
{
	return round == 2 ? malloc(3000000) : NULL;
}
int main(int argc, char **argv)
{
	ctl = (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
	pool_site();
	for (int r = 0; r < 6; r++) {
		leak_site();
		cache_site(r);
		void *b = burst_site(r);
		if (b)
			memset(b, 4, 3000000);
		char path[512];
		snprintf(path, sizeof path, "%s.%d.%d.m%d.heap", argv[1], 4242, r, r);
		const char *p = path;
		if (ctl == NULL || ctl("prof.dump", NULL, NULL, (void *)&p, sizeof p) != 0)
			return 3;
		free(b);
	}
	return 0;
}
EOF
compile "$WORK/prog" "$WORK/prog.c"
mkdir -p "$WORK/d"
run prog "$WORK" LD_PRELOAD="$BUILD/libheapctl.so" HEAPCTL_CONF=prof:true,lg_prof_sample:0 \
	"$WORK/prog" "$WORK/d/p"
check_eq "program exit" "$RC" 0
# the times say the opposite of the sequence numbers
for i in 0 1 2 3 4 5; do touch -d "@$((2000000000 - i * 60))" "$WORK/d/p.4242.$i.m$i.heap"; done

hr_ok s --series "$WORK"/d/p.4242.{5,3,1,0,2,4}.m*.heap --bytes --top 0
row() { awk -v f="$1" '$NF == f' "$WORK/s.out"; }
first_site=$(awk 'f { print $NF; exit } /^ *first /{ f = 1 }' "$WORK/s.out")
check_eq "first row" "$first_site" leak_site
check_eq "leak_site row" "$(row leak_site | awk '{ print $1, $2, $3, $4, $5, $6 }')" "1024000 6144000 +5120000 5/5 0 *"
[[ "$(row cache_site)" == *"* cache_site"* ]] && fail "cache_site is starred as a leak suspect: $(row cache_site)"
check_eq "cache_site grew/shrank" "$(row cache_site | awk '{ print $4, $5 }')" "2/5 3"
check_eq "pool_site growth" "$(row pool_site | awk '{ print $1, $2, $3 }')" "1024000 1024000 0"
check_eq "burst_site first and last" "$(row burst_site | awk '{ print $1, $2 }')" "0 0"
grep -q "first: $WORK/d/p.4242.0.m0.heap" "$WORK/s.out" || fail "not ordered by sequence: $(sed -n 2,3p "$WORK/s.out")"
# each dump's own report agrees with the series' first and last columns
hr_ok one0 "$WORK/d/p.4242.0.m0.heap" --bytes --top 0
hr_ok one5 "$WORK/d/p.4242.5.m5.heap" --bytes --top 0
for f in leak_site cache_site; do
	check_eq "$f first = dump 0's flat" "$(row $f | awk '{ print $1 }')" "$(awk -v f=$f '$6 == f { print $1 }' "$WORK/one0.out")"
	check_eq "$f last = dump 5's flat" "$(row $f | awk '{ print $2 }')" "$(awk -v f=$f '$6 == f { print $1 }' "$WORK/one5.out")"
done
# a prefix is the same series
hr_ok pre --series "$WORK/d/p" --bytes --top 0
check_eq "a prefix gives the same report" "$(cat "$WORK/pre.out")" "$(cat "$WORK/s.out")"
hr_ok dir --series "$WORK/d" --bytes --top 0
check_eq "a directory gives the same report" "$(cat "$WORK/dir.out")" "$(cat "$WORK/s.out")"

hr_ok j --series "$WORK/d/p" --json
python3 - "$WORK/j.out" <<'EOF' || fail "--json: $(head -c 400 "$WORK/j.out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["type"] == "inuse_space" and len(d["dumps"]) == 6, d["dumps"]
assert [x["path"].split(".")[-3] for x in d["dumps"]] == ["0", "1", "2", "3", "4", "5"]
s = {x["name"]: x for x in d["sites"]}
assert d["sites"][0]["name"] == "leak_site"
l = s["leak_site"]
assert l["only_grew"] and l["grew"] == 5 and l["intervals"] == 5, l
assert l["values"] == [1024000 * (i + 1) for i in range(6)], l["values"]
assert not s["cache_site"]["only_grew"] and s["cache_site"]["shrank"] == 3
assert s["burst_site"]["peak"] >= 3000000 and s["burst_site"]["values"][2] >= 3000000
EOF

# the demo service, dumping every second
gcc -std=gnu11 -O1 -g -fno-omit-frame-pointer -pthread -o "$WORK/service" "$(dirname "$0")/../demo/service.c"
mkdir -p "$WORK/demo"
(cd "$WORK/demo" && LD_PRELOAD="$BUILD/libheapctl.so" \
	HEAPCTL_CONF=prof:true,lg_prof_sample:14,prof_timer_s:1,prof_prefix:"$WORK/demo/svc" \
	exec "$WORK/service" seconds=5) >"$WORK/svc.out" 2>&1 || fail "the demo service failed: $(tail -3 "$WORK/svc.out")"
hr_ok demo --series "$WORK/demo/svc" --top 5
demo_first=$(awk 'f { print $NF; exit } /^ *first /{ f = 1 }' "$WORK/demo.out")
check_eq "the demo's leak is first in the series" "$demo_first" session_cache_insert
n=$(ls "$WORK"/demo/svc.*.t*.heap | wc -l)
[ "$n" -ge 3 ] || fail "the demo service wrote $n timer dumps in 5 s"

# the chart, in a real browser
hr_ok svg --series "$WORK/d/p" --svg "$WORK/c.svg"
check_eq "--svg says what it wrote" "$(cat "$WORK/svg.out")" "wrote chart $WORK/c.svg"
chrome() { timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run "$@" 2>>"$WORK/chromium.err"; }
chrome --dump-dom "file://$WORK/c.svg" >"$WORK/dom.html" || fail "chromium --dump-dom failed: $(tail -3 "$WORK/chromium.err")"
names=$(grep -o 'class="name">[^<]*' "$WORK/dom.html" | sed 's/.*>//' | head -3 | tr '\n' ' ')
check_eq "site names in the rendered DOM, in rank order" "$names" "leak_site pool_site burst_site "
chrome --screenshot="$WORK/c.png" --window-size=1200,700 "file://$WORK/c.svg" >/dev/null ||
	fail "chromium --screenshot failed: $(tail -3 "$WORK/chromium.err")"
python3 - "$WORK/c.png" <<'EOF' || fail "the screenshot does not show the chart's lines"
import struct, sys, zlib
# a PNG decoder for what Chromium writes: 8-bit RGB or RGBA, not interlaced
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), (depth, ctype)
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
counts = {}
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        px = tuple(line[x:x + 3])
        counts[px] = counts.get(px, 0) + 1
    prev = line
red = counts.get((0xd6, 0x27, 0x28), 0)      # the top site's line and legend swatch
bg = counts.get((0xf7, 0xf5, 0xee), 0)
print("red", red, "background", bg, file=sys.stderr)
assert red > 500 and bg > w * h // 3
EOF

# errors
hr_err one 2 --series "$WORK/d/p.4242.0.m0.heap"
grep -q "needs two profiles or more (found 1)" "$WORK/one.err" || fail "one: $(cat "$WORK/one.err")"
hr_err none 2 --series "$WORK/d/nothing"
grep -q "'$WORK/d/nothing' is not a file, and no file matches $WORK/d/nothing\*.heap" "$WORK/none.err" ||
	fail "none: $(cat "$WORK/none.err")"
cp "$WORK/d/p.4242.1.m1.heap" "$WORK/d/p.4343.0.m0.heap"
cp "$WORK/d/p.4242.4.m4.heap" "$WORK/d/p.4343.1.m1.heap"
touch -d "@$((2000000000 - 90))" "$WORK/d/p.4343.0.m0.heap"
touch -d "@$((2000000000 - 150))" "$WORK/d/p.4343.1.m1.heap"
hr_err two 2 --series "$WORK/d/p"
grep -q "were written at the same time; give one process's dumps (for example $WORK/d/p.4" "$WORK/two.err" ||
	fail "two: $(cat "$WORK/two.err")"
hr_err base 2 --series "$WORK/d/p" --base "$WORK/d/p.4242.0.m0.heap"
finish
