#!/usr/bin/env bash
# formats: `heapctl report` on every kind of input, symbol source, option
# and error:
#   - a gperftools heap profile (libtcmalloc HEAPPROFILE): Total and the
#     program's rows equal jeprof --text's, for all four sample types;
#   - a PIE program unstripped, stripped + .gnu_debuglink, under --sysroot
#     with a build-id debug file, and stripped with no debug info at all;
#   - C++ names (namespace, class, template, anonymous namespace), and no
#     allocator frame (operator new, malloc, libheapctl, libjemalloc) in any
#     row or folded stack, under heapctl and under jemalloc; under heapctl,
#     none at the top of the dump's own stacks either (its operator new);
#   - --lines, inlined frames, --collapsed, --svg, --focus/--ignore,
#     --inuse_objects/--alloc_space/--alloc_objects (prof_accum:true), --json;
#   - errors: exit status, one line on stderr, nothing on stdout;
#   - MAPPED_LIBRARIES naming files that are gone.
# Profiles are taken at lg_prof_sample:0, so the numbers are exact.
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup formats "$@"
hr_need g++ readelf objcopy strip nm addr2line python3

CFLAGS_T+=(-fPIE -pie)
LIBSTDCXX_SO=$(g++ -print-file-name=libstdc++.so.6)

# ---- the C program --------------------------------------------------------
# main -> fm_path_a -> fm_alloc_alpha          100 x 1000 = 100000 (usable 102400)
# main -> fm_path_b -> fm_alloc_alpha           50 x 1000 =  50000 (51200)
#                   -> fm_alloc_beta            40 x 3000 = 120000 (122880)
# thread fm_worker  -> fm_alloc_gamma (calloc)  25 x 5000 = 125000 (128000)
# heapctl's profiles count usable bytes, as jemalloc's do (every size here is
# 1.024 times its class); gperftools' count the bytes asked for.
# main -> fm_alloc_temp                        200 x 8000, all freed
cat >"$WORK/fmt.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *keep[1000], *temp[200];   /* global: nothing optimised away */
int nkeep;

__attribute__((noinline)) void fm_alloc_alpha(int n)
{
	for (int i = 0; i < n; i++) {
		void *p = malloc(1000); /* MARK_ALPHA */
		memset(p, 1, 1000);
		keep[nkeep++] = p;
	}
}

__attribute__((noinline)) void fm_alloc_beta(int n)
{
	for (int i = 0; i < n; i++) {
		void *p = malloc(3000);
		memset(p, 2, 3000);
		keep[nkeep++] = p;
	}
}

__attribute__((noinline)) void fm_alloc_gamma(int n)
{
	for (int i = 0; i < n; i++)
		keep[nkeep++] = calloc(1, 5000);
}

__attribute__((noinline)) void fm_alloc_temp(void)
{
	for (int i = 0; i < 200; i++)
		temp[i] = malloc(8000);
}

__attribute__((noinline)) void fm_release(void)
{
	for (int i = 0; i < 200; i++)
		free(temp[i]);
}

__attribute__((noinline)) void fm_path_a(void)
{
	fm_alloc_alpha(100);
}

__attribute__((noinline)) void fm_path_b(void)
{
	fm_alloc_alpha(50);
	fm_alloc_beta(40);
}

__attribute__((noinline)) void *fm_worker(void *arg)
{
	fm_alloc_gamma(25);
	return arg;
}

int main(void)
{
	fm_path_a(); /* MARK_CALL_A */
	fm_path_b();
	pthread_t t;
	if (pthread_create(&t, NULL, fm_worker, NULL) != 0 || pthread_join(t, NULL) != 0)
		return 1;
	fm_alloc_temp();
	fm_release();
	printf("kept %d\n", nkeep);
	return 0;
}
EOF
compile "$WORK/fmt" "$WORK/fmt.c"
LINE_ALPHA=$(grep -n 'MARK_ALPHA' "$WORK/fmt.c" | cut -d: -f1)
LINE_CALL_A=$(grep -n 'MARK_CALL_A' "$WORK/fmt.c" | cut -d: -f1)
if [ "$(readelf -h "$WORK/fmt" | awk '/Type:/ { print $2 }')" != DYN ]; then
	fail "fmt is not a PIE (readelf -h: $(readelf -h "$WORK/fmt" | grep Type:))"
fi
FM_FUNCS="fm_alloc_alpha fm_alloc_beta fm_alloc_gamma fm_path_a fm_path_b fm_worker main"

# cmp_rows <what> <heapctl text> <jeprof text> <function>...: the flat and
# cum of each function equal.
cmp_rows() {
	local what=$1 hc=$2 jp=$3
	shift 3
	local f
	for f in "$@"; do
		check_eq "$what: $f flat" "$(row_flat "$hc" "$f")" "$(jp_flat "$jp" "$f")"
		check_eq "$what: $f cum" "$(row_cum "$hc" "$f")" "$(jp_cum "$jp" "$f")"
	done
}

# hc_flags <type>: HCF= heapctl's options for it, in bytes (jp_flag: jeprof's)
hc_flags() {
	case $1 in
	inuse_space) HCF=(--bytes) ;;
	alloc_space) HCF=(--alloc_space --bytes) ;;
	*) HCF=("--$1") ;;
	esac
}
jp_flag() { case $1 in inuse_space) echo --inuse_space ;; *) echo "--$1" ;; esac; }

# four_types <tag> <label> <profile>: for each sample type, the Total and
# the rows of fmt's functions equal jeprof's on the same profile.
four_types() {
	local tag=$1 label=$2 prof=$3 type
	for type in inuse_space inuse_objects alloc_space alloc_objects; do
		hc_flags "$type"
		if hr_ok "$tag-$type" "$prof" --top 0 "${HCF[@]}" &&
			jp "$WORK/$tag-$type.jp" "$(jp_flag "$type")" "$WORK/fmt" "$prof"; then
			check_eq "$label --$type: Total" "$(jp_total "$WORK/$tag-$type.out")" "$(jp_total "$WORK/$tag-$type.jp")"
			cmp_rows "$label --$type" "$WORK/$tag-$type.out" "$WORK/$tag-$type.jp" $FM_FUNCS
		fi
	done
}

# ---- gperftools heap profile ----------------------------------------------
if prof_tcmalloc gp "$WORK/fmt"; then
	GP=$DUMP
	check_eq "gperftools profile: first line" "$(head -c 13 "$GP")" "heap profile:"
	four_types gp gperftools "$GP"
	check_eq "gperftools: fm_alloc_alpha flat (exact)" "$(row_flat "$WORK/gp-inuse_space.out" fm_alloc_alpha)" 150000
	check_eq "gperftools: fm_alloc_gamma flat (exact)" "$(row_flat "$WORK/gp-inuse_space.out" fm_alloc_gamma)" 125000
	bad=$(row_names "$WORK/gp-inuse_space.out" |
		grep -E 'libtcmalloc|^tc_|tcmalloc::|^(malloc|calloc|realloc|free|operator new|operator delete)$' | tr '\n' '|' || true)
	check_eq "gperftools: allocator frames in rows" "$bad" ""
fi

# ---- a heapctl profile with the alloc counts --------------------------------
H=
if prof_heapctl hc "$WORK/fmt" lg_prof_sample:0,prof_accum:true; then
	H=$DUMP
fi

if [ -n "$H" ]; then
	# the four sample types against jeprof
	four_types hc "heapctl dump" "$H"
	check_eq "inuse_space: fm_alloc_alpha flat" "$(row_flat "$WORK/hc-inuse_space.out" fm_alloc_alpha)" 153600
	check_eq "inuse_space: fm_alloc_beta flat" "$(row_flat "$WORK/hc-inuse_space.out" fm_alloc_beta)" 122880
	check_eq "inuse_space: fm_alloc_gamma flat" "$(row_flat "$WORK/hc-inuse_space.out" fm_alloc_gamma)" 128000
	check_eq "inuse_space: fm_alloc_temp (freed)" "$(row_flat "$WORK/hc-inuse_space.out" fm_alloc_temp)" absent
	check_eq "inuse_objects: fm_alloc_beta flat" "$(row_flat "$WORK/hc-inuse_objects.out" fm_alloc_beta)" 40
	check_eq "alloc_space: fm_alloc_temp flat" "$(row_flat "$WORK/hc-alloc_space.out" fm_alloc_temp)" 1638400
	check_eq "alloc_objects: fm_alloc_temp flat" "$(row_flat "$WORK/hc-alloc_objects.out" fm_alloc_temp)" 200
	head -1 "$WORK/hc-inuse_objects.out" | grep -q '^Total: [0-9]* objects$' ||
		fail "--inuse_objects: Total line '$(head -1 "$WORK/hc-inuse_objects.out")' is not 'Total: N objects'"

	# --lines: function and file:line, the line of the malloc call
	if hr_ok lines "$H" --top 0 --bytes --lines; then
		alpha=$(row_names "$WORK/lines.out" | grep '^fm_alloc_alpha ' || true)
		case "$alpha" in
		"fm_alloc_alpha $WORK/fmt.c:$LINE_ALPHA" | "fm_alloc_alpha fmt.c:$LINE_ALPHA") ;;
		*) fail "--lines: fm_alloc_alpha rows '$alpha', expected one 'fm_alloc_alpha [$WORK/]fmt.c:$LINE_ALPHA'" ;;
		esac
		if [ -n "$alpha" ]; then
			check_eq "--lines: flat of '$alpha'" "$(row_flat "$WORK/lines.out" "$(echo "$alpha" | head -1)")" 153600
		fi
		calla=$(row_names "$WORK/lines.out" | grep -E "^main (.*/)?fmt\.c:$LINE_CALL_A\$" | head -1 || true)
		if [ -z "$calla" ]; then
			fail "--lines: no row 'main fmt.c:$LINE_CALL_A' (the call of fm_path_a): $(row_names "$WORK/lines.out" | grep '^main' | tr '\n' '|')"
		else
			check_eq "--lines: cum of '$calla'" "$(row_cum "$WORK/lines.out" "$calla")" 102400
		fi
	fi

	# --collapsed
	if hr_ok coll "$H" --collapsed; then
		check_stderr_empty coll
		total=$(jp_total "$WORK/hc-inuse_space.out")
		python3 - "$WORK/coll.out" "$total" >"$WORK/coll.check" <<'EOF' || fail "--collapsed: $(head -5 "$WORK/coll.check" | tr '\n' '|')"
import re, sys
path, total = sys.argv[1], sys.argv[2]
bad, s, n = [], 0, 0
for i, line in enumerate(open(path).read().split("\n")[:-1], 1):
    m = re.match(r"^(.+) ([0-9]+)$", line)
    if not m:
        bad.append("line %d not 'frames VALUE': %r" % (i, line)); continue
    frames = m.group(1).split(";")
    n += 1
    s += int(m.group(2))
    if any(f == "" or f != f.strip() for f in frames):
        bad.append("line %d has an empty or padded frame: %r" % (i, line))
    if "main" in frames and frames.index("main") > 3:
        bad.append("line %d: main is frame %d, not near the root: %r" % (i, frames.index("main"), line))
    if frames[0].startswith("fm_"):
        bad.append("line %d starts at the leaf, not the root: %r" % (i, line))
    for leaf, callers in (("fm_alloc_alpha", ("fm_path_a", "fm_path_b")), ("fm_alloc_beta", ("fm_path_b",)),
                          ("fm_alloc_gamma", ("fm_worker",))):
        if leaf in frames:
            if frames[-1] != leaf:
                bad.append("line %d: %s is not the last frame: %r" % (i, leaf, line))
            elif len(frames) < 2 or frames[-2] not in callers:
                bad.append("line %d: %s called from %s: %r" % (i, leaf, frames[-2:-1], line))
            if leaf != "fm_alloc_gamma" and "main" not in frames:
                bad.append("line %d: %s without main: %r" % (i, leaf, line))
if n == 0:
    bad.append("no folded stacks")
if total == "absent" or abs(s - int(total)) > n:
    bad.append("values sum to %d, the Total is %s" % (s, total))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
		for want in "fm_path_a;fm_alloc_alpha 102400" "fm_path_b;fm_alloc_alpha 51200" \
			"fm_path_b;fm_alloc_beta 122880" "fm_worker;fm_alloc_gamma 128000"; do
			grep -q ";$want\$" "$WORK/coll.out" || fail "--collapsed: no stack ending ';$want'"
		done
	fi

	# --svg
	if hr_ok svg "$H" --svg "$WORK/flame.svg"; then
		check_eq "--svg: stdout" "$(cat "$WORK/svg.out")" "wrote flame graph $WORK/flame.svg"
		if [ ! -s "$WORK/flame.svg" ]; then
			fail "--svg: $WORK/flame.svg not written"
		else
			python3 - "$WORK/flame.svg" >"$WORK/svg.check" <<'EOF' || fail "--svg: $(head -5 "$WORK/svg.check" | tr '\n' '|')"
import re, sys
import xml.etree.ElementTree as ET
path = sys.argv[1]
bad = []
try:
    root = ET.parse(path).getroot()
except ET.ParseError as e:
    print("not well-formed XML: %s" % e); sys.exit(1)
if root.tag != "{http://www.w3.org/2000/svg}svg":
    bad.append("root element is %s, not svg" % root.tag)
text = " ".join(t for t in root.itertext())
for f in ("fm_alloc_alpha", "fm_alloc_beta", "fm_alloc_gamma", "fm_path_a", "main"):
    if f not in text:
        bad.append("no %s in the text of the flame graph" % f)
raw = open(path).read()
ns = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink", "http://www.w3.org/XML/1998/namespace"}
for u in set(re.findall(r"https?://[^\s\"'<>)]*", raw)):
    if u not in ns:
        bad.append("external reference %s" % u)
for m in re.findall(r"(?:href|src)\s*=\s*[\"'][^\"'#][^\"']*[\"']", raw):
    bad.append("reference to another file: %s" % m)
if re.search(r"@import|url\(\s*['\"]?(?!#)", raw):
    bad.append("stylesheet import or url()")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
		fi
	fi
	hr_err svg-nodir 1 "$H" --svg "$WORK/missing/flame.svg"

	# --focus and --ignore, against jeprof
	total=$(jp_total "$WORK/hc-inuse_space.out")
	if hr_ok focus "$H" --top 0 --bytes --focus fm_path_a && jp "$WORK/focus.jp" --focus=fm_path_a "$WORK/fmt" "$H"; then
		check_eq "--focus fm_path_a: Total (the profile's)" "$(jp_total "$WORK/focus.out")" "$total"
		check_eq "--focus fm_path_a: Total vs jeprof" "$(jp_total "$WORK/focus.out")" "$(jp_total "$WORK/focus.jp")"
		check_eq "--focus fm_path_a: fm_alloc_alpha flat" "$(row_flat "$WORK/focus.out" fm_alloc_alpha)" 102400
		for f in fm_alloc_beta fm_path_b fm_worker fm_alloc_gamma start_thread; do
			check_eq "--focus fm_path_a: row $f" "$(row_flat "$WORK/focus.out" "$f")" absent
		done
		cmp_rows "--focus fm_path_a vs jeprof" "$WORK/focus.out" "$WORK/focus.jp" $FM_FUNCS
		check_eq "--focus fm_path_a: fm_alloc_alpha flat% vs jeprof" \
			"$(row_field "$WORK/focus.out" fm_alloc_alpha 2)" "$(awk '$6 == "fm_alloc_alpha" { print $2 }' "$WORK/focus.jp")"
		check_eq "--focus fm_path_a: rows" "$(row_names "$WORK/focus.out" | grep -c . || true)" \
			"$(awk '/^Total/ { next } NF >= 6' "$WORK/focus.jp" | grep -c . || true)"
	fi
	if hr_ok ignore "$H" --top 0 --bytes --ignore fm_path_b && jp "$WORK/ignore.jp" --ignore=fm_path_b "$WORK/fmt" "$H"; then
		check_eq "--ignore fm_path_b: Total (the profile's)" "$(jp_total "$WORK/ignore.out")" "$total"
		check_eq "--ignore fm_path_b: Total vs jeprof" "$(jp_total "$WORK/ignore.out")" "$(jp_total "$WORK/ignore.jp")"
		check_eq "--ignore fm_path_b: fm_alloc_alpha flat" "$(row_flat "$WORK/ignore.out" fm_alloc_alpha)" 102400
		check_eq "--ignore fm_path_b: fm_alloc_gamma flat" "$(row_flat "$WORK/ignore.out" fm_alloc_gamma)" 128000
		for f in fm_alloc_beta fm_path_b; do
			check_eq "--ignore fm_path_b: row $f" "$(row_flat "$WORK/ignore.out" "$f")" absent
		done
		cmp_rows "--ignore fm_path_b vs jeprof" "$WORK/ignore.out" "$WORK/ignore.jp" $FM_FUNCS
	fi
	if hr_ok ignore2 "$H" --top 0 --bytes --ignore 'fm_alloc_be.a'; then
		check_eq "--ignore fm_alloc_be.a: fm_path_b cum" "$(row_cum "$WORK/ignore2.out" fm_path_b)" 51200
		check_eq "--ignore fm_alloc_be.a: row fm_alloc_beta" "$(row_flat "$WORK/ignore2.out" fm_alloc_beta)" absent
	fi
	if hr_ok focuscoll "$H" --collapsed --focus fm_alloc_beta; then
		check_eq "--collapsed --focus fm_alloc_beta: stacks" "$(wc -l <"$WORK/focuscoll.out")" 1
		grep -q ';fm_path_b;fm_alloc_beta 122880$' "$WORK/focuscoll.out" ||
			fail "--collapsed --focus fm_alloc_beta: $(head -3 "$WORK/focuscoll.out")"
	fi

	# --json
	if hr_ok json "$H" --json --top 0; then
		python3 - "$WORK/json.out" "$total" "$(row_flat "$WORK/hc-inuse_space.out" fm_alloc_alpha)" \
			>"$WORK/json.check" <<'EOF' || fail "--json: $(head -5 "$WORK/json.check" | tr '\n' '|')"
import json, sys
path, total, alpha = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bad = []
try:
    d = json.load(open(path))
except ValueError as e:
    print("not JSON: %s" % e); sys.exit(1)
rows = d.get("rows") if isinstance(d, dict) else None
if not isinstance(rows, list) or not rows:
    bad.append("no rows list")
    rows = []
for r in rows:
    if not isinstance(r, dict) or not {"name", "flat", "cum"} <= set(r):
        bad.append("row without name/flat/cum: %r" % (r,)); break
byname = {r.get("name"): r for r in rows if isinstance(r, dict)}
if "fm_alloc_alpha" not in byname:
    bad.append("no row fm_alloc_alpha")
elif byname["fm_alloc_alpha"]["flat"] != alpha:
    bad.append("fm_alloc_alpha flat %r, text view says %d" % (byname["fm_alloc_alpha"]["flat"], alpha))
if isinstance(d, dict) and "total" in d and abs(d["total"] - total) > 1:
    bad.append("total %r, text view says %d" % (d["total"], total))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
	fi

	# ---- errors ------------------------------------------------------------
	hr_err err-missing 2 "$WORK/no-such-file.heap"
	mkdir -p "$WORK/adir"
	hr_err err-dir 2 "$WORK/adir"
	: >"$WORK/empty.heap"
	hr_err err-empty 2 "$WORK/empty.heap"
	python3 -c 'import random, sys; random.seed(7); sys.stdout.buffer.write(bytes(random.getrandbits(8) for _ in range(4096)))' >"$WORK/random.bin"
	hr_err err-random 2 "$WORK/random.bin"
	# a garbage line among the stacks (line 6) and in the memory map
	awk 'NR == 6 { print "this is no profile line" } { print }' "$H" >"$WORK/garbage.heap"
	hr_err err-garbage 2 "$WORK/garbage.heap"
	grep -qE '(:6:|line 6([^0-9]|$))' "$WORK/err-garbage.err" ||
		fail "garbage at line 6: the message does not name line 6: $(cat "$WORK/err-garbage.err")"
	mapl=$(($(grep -n '^MAPPED_LIBRARIES:' "$H" | cut -d: -f1) + 2))
	awk -v l="$mapl" 'NR == l { print "garbage in the map" } { print }' "$H" >"$WORK/garbage2.heap"
	hr_err err-garbage-map 2 "$WORK/garbage2.heap"
	grep -qE "(:$mapl:|line $mapl([^0-9]|\$))" "$WORK/err-garbage-map.err" ||
		fail "garbage at line $mapl (memory map): the message does not name it: $(cat "$WORK/err-garbage-map.err")"
	# cut after a stack's '@' line: a stack without counts
	cutl=$(grep -n '^@' "$H" | sed -n 2p | cut -d: -f1)
	head -n "$cutl" "$H" >"$WORK/cut.heap"
	hr_err err-cut 2 "$WORK/cut.heap"
	# a pprof file given as the profile
	if ! "$HEAPCTL" report "$H" --pprof "$WORK/in.pb.gz" >/dev/null 2>&1 || [ ! -s "$WORK/in.pb.gz" ]; then
		gzip -c "$H" >"$WORK/in.pb.gz"      # pprof writing is pprof.sh's test
	fi
	hr_err err-pprof-input 2 "$WORK/in.pb.gz"
	hr_err err-option 2 "$H" --no-such-option
	hr_err err-two 2 "$H" "$H"
	hr_err err-none 2 --bytes
	hr_err err-top 2 "$H" --top abc
	hr_err err-top-missing 2 "$H" --top
	hr_err err-thread 2 "$H" --thread x1
	hr_err err-types 2 "$H" --inuse_objects --alloc_space
	hr_err err-sysroot 2 "$H" --sysroot "$WORK/no-such-root"
	hr_err err-focus 2 "$H" --focus '('
	hr_err err-ignore 2 "$H" --ignore '[a'
	hr_err err-base 2 "$H" --base "$WORK/no-such-base.heap"
fi

# ---- symbol sources, one dump of a PIE program ------------------------------
mkdir -p "$WORK/sym"
cp "$WORK/fmt" "$WORK/sym/fmt"
cp "$WORK/fmt" "$WORK/fmt.unstripped"
BUILD_ID=$(readelf -n "$WORK/fmt" | awk '/Build ID:/ { print $3; exit }')
[ -n "$BUILD_ID" ] || fail "readelf -n fmt: no build id"
FN_SYMS=$(nm --defined-only "$WORK/fmt" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | sort -u)
if prof_heapctl sym "$WORK/sym/fmt" lg_prof_sample:0 && [ -n "$BUILD_ID" ]; then
	S=$DUMP
	# (a) unstripped
	hr_ok sym-a "$S" --top 0 --bytes || true
	hr_ok sym-al "$S" --top 0 --bytes --lines || true
	for f in fm_alloc_alpha fm_alloc_beta fm_alloc_gamma fm_path_a fm_path_b fm_worker main; do
		[ "$(row_flat "$WORK/sym-a.out" "$f")" != absent ] || fail "symbols (a) unstripped: no row $f"
	done
	# program rows: the rows of (a) named after a function of fmt
	prog_rows=$(row_names "$WORK/sym-a.out" | grep -Fx -f <(echo "$FN_SYMS") || true)
	prog_lrows=$(row_names "$WORK/sym-al.out" | awk 'NR == FNR { f[$1] = 1; next } ($1 in f)' <(echo "$FN_SYMS") - || true)

	# (b) strip --strip-all + .gnu_debuglink, the debug file next to it
	objcopy --only-keep-debug "$WORK/sym/fmt" "$WORK/sym/fmt.debug"
	strip --strip-all "$WORK/sym/fmt"
	(cd "$WORK/sym" && objcopy --add-gnu-debuglink=fmt.debug fmt)
	if hr_ok sym-b "$S" --top 0 --bytes && hr_ok sym-bl "$S" --top 0 --bytes --lines; then
		diff "$WORK/sym-a.out" "$WORK/sym-b.out" >"$WORK/sym-b.diff" ||
			fail "symbols (b) stripped + debuglink: report differs from unstripped: $(head -6 "$WORK/sym-b.diff" | tr '\n' '|')"
		diff "$WORK/sym-al.out" "$WORK/sym-bl.out" >"$WORK/sym-bl.diff" ||
			fail "symbols (b) stripped + debuglink: --lines differs from unstripped: $(head -6 "$WORK/sym-bl.diff" | tr '\n' '|')"
	fi

	# (c) --sysroot: ROOT/<path> stripped, ROOT/usr/lib/debug/.build-id/xx/rest.debug
	ROOT=$WORK/root
	mkdir -p "$ROOT$WORK/sym" "$ROOT/usr/lib/debug/.build-id/${BUILD_ID:0:2}"
	cp "$WORK/fmt.unstripped" "$ROOT$WORK/sym/fmt"
	strip --strip-all "$ROOT$WORK/sym/fmt"
	mv "$WORK/sym/fmt.debug" "$ROOT/usr/lib/debug/.build-id/${BUILD_ID:0:2}/${BUILD_ID:2}.debug"
	rm -f "$WORK/sym/fmt"             # only the sysroot has it now
	if hr_ok sym-c "$S" --top 0 --bytes --sysroot "$ROOT" && hr_ok sym-cl "$S" --top 0 --bytes --lines --sysroot "$ROOT"; then
		check_eq "symbols (c) --sysroot: Total" "$(jp_total "$WORK/sym-c.out")" "$(jp_total "$WORK/sym-a.out")"
		while IFS= read -r r; do
			[ -n "$r" ] || continue
			check_eq "symbols (c) --sysroot: row $r" "$(row_line "$WORK/sym-c.out" "$r")" "$(row_line "$WORK/sym-a.out" "$r")"
		done <<<"$prog_rows"
		while IFS= read -r r; do
			[ -n "$r" ] || continue
			check_eq "symbols (c) --sysroot --lines: row $r" "$(row_line "$WORK/sym-cl.out" "$r")" "$(row_line "$WORK/sym-al.out" "$r")"
		done <<<"$prog_lrows"
	fi

	# (d) stripped, no debug information anywhere
	cp "$WORK/fmt.unstripped" "$WORK/sym/fmt"
	strip --strip-all "$WORK/sym/fmt"
	if hr_ok sym-d "$S" --top 0 --bytes; then
		check_eq "symbols (d) no debug info: Total" "$(jp_total "$WORK/sym-d.out")" "$(jp_total "$WORK/sym-a.out")"
		# every row is either a name (a) has too, or sub_START@fmt: the
		# function that holds it, from fmt's unwind tables
		others=$(row_names "$WORK/sym-d.out" | grep -vE '^sub_[0-9a-f]+@fmt$' |
			grep -vxF -f <(row_names "$WORK/sym-a.out") | tr '\n' '|' || true)
		check_eq "symbols (d): rows neither named as unstripped nor sub_START@fmt" "$others" ""
		for f in $FM_FUNCS; do
			check_eq "symbols (d): a row named $f (fmt has no symbols)" "$(row_flat "$WORK/sym-d.out" "$f")" absent
		done
		# the allocating rows are sub_START@fmt, START the allocating
		# function's address in the unstripped fmt, with its flat
		for f in fm_alloc_alpha fm_alloc_beta fm_alloc_gamma; do
			want=$(row_flat "$WORK/sym-a.out" "$f")
			start=$(nm "$WORK/fmt.unstripped" | awk -v f="$f" '$3 == f { print $1 }')
			check_eq "symbols (d): the row of $f's flat" \
				"$(row_flat "$WORK/sym-d.out" "sub_$(printf '%x' "0x$start")@fmt")" "$want"
		done
		# jeprof on the stripped program: what it can name, heapctl names
		# alike, with the same cum.  Only callers (jeprof flat 0): jeprof
		# looks the first address of a stack up without the -1 a return
		# address needs (it expects allocator frames there, which heapctl
		# dumps do not have), so its leaf rows may name the instruction
		# after the call.  jeprof runs addr2line without -i on a library it
		# finds no _fini in (Debian's libc), which then names the innermost
		# inlined function: heapctl shows that one as "NAME (inline)".
		if jp "$WORK/sym-d.jp" "$WORK/sym/fmt" "$S"; then
			while read -r fl _ _ cu _ nm rest; do
				[ -z "$rest" ] || continue                    # "?? ??:0" and the like
				[ "$fl" = 0 ] || continue
				case "$nm" in '??' | 0x* | '') continue ;; esac
				got=$(row_line "$WORK/sym-d.out" "$nm")
				if [ "$got" = absent ] && [ "$(row_flat "$WORK/sym-d.out" "$nm (inline)")" != absent ]; then
					got="$(row_flat "$WORK/sym-d.out" "$nm (inline)") $(row_cum "$WORK/sym-d.out" "$nm (inline)") $nm"
				fi
				# glibc's aliases (__clone3 and clone3 are one function at
				# one address): addr2line and libdw pick different ones
				if [ "$got" = absent ] && [ "$(row_flat "$WORK/sym-d.out" "__$nm")" != absent ]; then
					got="$(row_flat "$WORK/sym-d.out" "__$nm") $(row_cum "$WORK/sym-d.out" "__$nm") $nm"
				fi
				check_eq "symbols (d): row '$nm' that jeprof names (cum name)" "${got#* }" "$cu $nm"
			done < <(awk '/^Total/ { next } NF >= 6 && $1 ~ /^-?[0-9]+$/' "$WORK/sym-d.jp")
		fi
	fi
	check_eq "symbols: rows named like the program's functions found in (a)" \
		"$(echo "$prog_rows" | grep -c '^fm_' || true)" 6
fi

# ---- MAPPED_LIBRARIES that name files that are gone --------------------------
mkdir -p "$WORK/gone"
cp "$WORK/fmt" "$WORK/gone/fmt"
if prof_heapctl gone "$WORK/gone/fmt" lg_prof_sample:0 && hr_ok gone-before "$DUMP" --top 0 --bytes; then
	G=$DUMP
	rm -rf "$WORK/gone"
	if hr_ok gone-after "$G" --top 0 --bytes; then
		check_eq "program deleted: Total" "$(jp_total "$WORK/gone-after.out")" "$(jp_total "$WORK/gone-before.out")"
		for f in $FM_FUNCS; do
			check_eq "program deleted: row $f" "$(row_flat "$WORK/gone-after.out" "$f")" absent
		done
		name=$(awk '/^Total/ { next } $1 == 153600 { print $6; exit }' "$WORK/gone-after.out")
		[[ "$name" =~ ^fmt\+0x[0-9a-f]+$ ]] ||
			fail "program deleted: the 153600 B row of fm_alloc_alpha is '$name', not fmt+0xOFFSET"
	fi
	# libc under a path that does not exist
	sed 's#/[^ ]*/libc\.so\.6$#/nonexistent/dir/libc.so.6#' "$G" >"$WORK/nolibc.heap"
	if hr_ok nolibc "$WORK/nolibc.heap" --top 0 --bytes; then
		check_eq "libc gone: Total" "$(jp_total "$WORK/nolibc.out")" "$(jp_total "$WORK/gone-before.out")"
		row_names "$WORK/nolibc.out" | grep -qE '^libc\.so\.6\+0x[0-9a-f]+$' ||
			fail "libc gone: no row libc.so.6+0xOFFSET: $(row_names "$WORK/nolibc.out" | tr '\n' '|')"
		check_eq "libc gone: row __libc_start_main_impl" "$(row_flat "$WORK/nolibc.out" __libc_start_main_impl)" absent
	fi
	# the program's lines taken out of MAPPED_LIBRARIES: bare addresses
	grep -v " $WORK/gone/fmt\$" "$G" >"$WORK/nomap.heap"
	if hr_ok nomap "$WORK/nomap.heap" --top 0 --bytes; then
		check_eq "program not mapped: Total" "$(jp_total "$WORK/nomap.out")" "$(jp_total "$WORK/gone-before.out")"
		name=$(awk '/^Total/ { next } $1 == 153600 { print $6; exit }' "$WORK/nomap.out")
		[[ "$name" =~ ^0x[0-9a-f]+$ ]] ||
			fail "program not mapped: the 153600 B row of fm_alloc_alpha is '$name', not 0xADDRESS"
	fi
fi
# " (deleted)" after a path that exists (the file replaced while it ran)
if [ -n "$H" ]; then
	sed "s# $WORK/fmt\$# $WORK/fmt (deleted)#" "$H" >"$WORK/deleted.heap"
	if hr_ok deleted "$WORK/deleted.heap" --top 0 --bytes; then
		for f in fm_alloc_alpha fm_path_a main; do
			check_eq "' (deleted)' path: row $f" "$(row_line "$WORK/deleted.out" "$f")" "$(row_line "$WORK/hc-inuse_space.out" "$f")"
		done
	fi
fi

# ---- C++ ----------------------------------------------------------------------
cat >"$WORK/cx.cc" <<'EOF'
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace store {
class Cache {
public:
	void fill(int n);
	char *items[400];
};

void Cache::fill(int n)          /* 300 x new char[2000] = 600000 */
{
	for (int i = 0; i < n; i++)
		items[i] = new char[2000];
}

template <typename T> struct Pool {
	__attribute__((noinline)) T *make() { return new T[64]; }   /* 512 B each */
};

static __attribute__((noinline)) void *scratch(size_t n) { return malloc(n); }

struct Outer {
	struct Inner {
		__attribute__((noinline)) static void *grow(size_t n) { return std::calloc(1, n); }
	};
};
}

namespace {
__attribute__((noinline)) void *make_buffer(size_t n) { return malloc(n); }

struct Hidden {
	__attribute__((noinline)) void *get(size_t n) { return new char[n]; }
};
}

struct Node {
	long v[16];
};

void *keep[1000];

int main()
{
	store::Cache *c = new store::Cache;     /* 3200 B, from main */
	c->fill(300);
	store::Pool<double> pd;
	store::Pool<long> pl;
	int k = 0;
	for (int i = 0; i < 200; i++) {
		keep[k++] = pd.make();
		keep[k++] = pl.make();
	}
	for (int i = 0; i < 100; i++)
		keep[k++] = make_buffer(3000);  /* 300000 */
	for (int i = 0; i < 50; i++)
		keep[k++] = new Node;            /* 50 x 128, from main */
	keep[k++] = store::scratch(70000);
	keep[k++] = store::Outer::Inner::grow(80000);
	Hidden h;
	keep[k++] = h.get(90000);
	std::printf("%d %p\n", k, (void *)c);
	return 0;
}
EOF
if ! g++ "${CFLAGS_T[@]}" -o "$WORK/cx" "$WORK/cx.cc" 2>"$WORK/cx.cc.log"; then
	fail "cannot compile cx.cc: $(head -5 "$WORK/cx.cc.log")"
else
	# names that must never be a frame: allocator entry points and every
	# function of libheapctl.so and libjemalloc
	{
		printf '%s\n' malloc calloc realloc free posix_memalign aligned_alloc memalign valloc pvalloc \
			mallocx rallocx newImpl "operator new" "operator new[]" "operator delete" "operator delete[]"
		nm --defined-only "$LIB" 2>/dev/null | awk '$2 ~ /^[tTwWiI]$/ { print $3 }'
		nm -D --defined-only "$JEMALLOC_SO" 2>/dev/null | awk '$2 ~ /^[tTwWiI]$/ { print $3 }'
	} | sort -u >"$WORK/alloc-names"
	for which in hc je; do
		if [ "$which" = hc ]; then
			prof_heapctl cx-$which "$WORK/cx" lg_prof_sample:0 || continue
		else
			prof_jemalloc cx-$which "$WORK/cx" lg_prof_sample:0 || continue
		fi
		D=$DUMP
		hr_ok cx-$which-text "$D" --top 0 --bytes || continue
		hr_ok cx-$which-coll "$D" --collapsed || continue
		hr_ok cx-$which-lines "$D" --top 0 --bytes --lines || true
		for f in "store::Cache::fill" "store::Pool::make" "(anonymous namespace)::make_buffer" "store::scratch" \
			"store::Outer::Inner::grow" "(anonymous namespace)::Hidden::get" main; do
			[ "$(row_flat "$WORK/cx-$which-text.out" "$f")" != absent ] ||
				fail "C++ ($which): no row '$f': $(row_names "$WORK/cx-$which-text.out" | head -12 | tr '\n' '|')"
		done
		frames=$( (row_names "$WORK/cx-$which-text.out"
			sed 's/ [0-9]*$//' "$WORK/cx-$which-coll.out" | tr ';' '\n') | sort -u)
		bad=$({ grep -xF -f "$WORK/alloc-names" <<<"$frames"
			grep -E 'libheapctl|libjemalloc|^operator (new|delete)|^(je_|_Zn[wa]|_Zd[la])' <<<"$frames"; } |
			sort -u | tr '\n' '|' || true)
		check_eq "C++ ($which): allocator frames in rows or folded stacks" "$bad" ""
		bad=$(grep -E '^_Z|[A-Za-z_]\(' <<<"$frames" | tr '\n' '|' || true)
		check_eq "C++ ($which): mangled names or argument lists" "$bad" ""
		if [ "$which" = hc ]; then
			# The dump itself, before the report's jeprof list of
			# allocator names: the program's new resolves to heapctl's
			# (allocator/cxx.c), and a sample taken in it starts at its
			# caller, so no stack's first address is in libheapctl or
			# in libstdc++'s operator new/delete (each new'd object's
			# was there while libheapctl.so exported no operator new)
			first=$(awk -v stdcxx="$(nm -D -S --defined-only "$LIBSTDCXX_SO" | awk '$4 ~ /^_Z[nd][wla]/ { printf "%s:%s ", $1, $2 }')" '
				function hex(s,  i, v) { v = 0; s = tolower(s); sub(/^0x/, "", s)
					for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
					return v }
				/^@/ { first[$2] = 1; next }
				/^MAPPED_LIBRARIES:/ { maps = 1; next }
				maps && $3 == "00000000" && ($6 ~ /libstdc\+\+|libheapctl/) {
					split($1, r, "-"); lo[$6] = hex(r[1]) }
				maps && $2 ~ /x/ && ($6 ~ /libstdc\+\+|libheapctl/) {
					split($1, r, "-"); n++; xlo[n] = hex(r[1]); xhi[n] = hex(r[2]); xf[n] = $6 }
				END {
					k = split(stdcxx, f, " ")
					if (k == 0 || n < 2) print "no libstdc++ operator new or no mapping to look in"
					for (a in first) for (i = 1; i <= n; i++) {
						v = hex(a); if (v < xlo[i] || v >= xhi[i]) continue
						if (xf[i] ~ /libheapctl/) { print a " in libheapctl"; continue }
						for (j = 1; j <= k; j++) { split(f[j], e, ":")
							if (v - lo[xf[i]] >= hex(e[1]) && v - lo[xf[i]] < hex(e[1]) + hex(e[2]))
								print a " in libstdc++ operator new/delete" }
					}
				}' "$D")
			check_eq "C++: first frames in libheapctl or libstdc++'s operator new" "$first" ""
			check_eq "C++: store::Cache::fill flat" "$(row_flat "$WORK/cx-hc-text.out" store::Cache::fill)" 614400
			check_eq "C++: store::Pool::make flat (both instances)" "$(row_flat "$WORK/cx-hc-text.out" store::Pool::make)" 204800
			check_eq "C++: (anonymous namespace)::make_buffer flat" \
				"$(row_flat "$WORK/cx-hc-text.out" "(anonymous namespace)::make_buffer")" 307200
			check_eq "C++: main flat (new Cache, new Node)" "$(row_flat "$WORK/cx-hc-text.out" main)" 9984   # 3200 is in class 3584
			check_eq "C++: store::scratch flat" "$(row_flat "$WORK/cx-hc-text.out" store::scratch)" 73728   # usable: 18 pages
			check_eq "C++: store::Outer::Inner::grow flat" "$(row_flat "$WORK/cx-hc-text.out" store::Outer::Inner::grow)" 81920   # 20 pages
			check_eq "C++: (anonymous namespace)::Hidden::get flat" \
				"$(row_flat "$WORK/cx-hc-text.out" "(anonymous namespace)::Hidden::get")" 90112   # 22 pages
			# jeprof's names where it has the same ones
			if jp "$WORK/cx-hc.jp" "$WORK/cx" "$D"; then
				for f in store::Cache::fill store::Pool::make store::scratch store::Outer::Inner::grow main; do
					check_eq "C++: $f cum vs jeprof" "$(row_cum "$WORK/cx-hc-text.out" "$f")" "$(jp_cum "$WORK/cx-hc.jp" "$f")"
				done
				# jeprof strips no versioned name: its flat column had
				# "operator new@@GLIBCXX_3.4" while libstdc++'s was called
				check_eq "C++: operator new rows in jeprof --text" \
					"$(grep -c 'operator new' "$WORK/cx-hc.jp" || true)" 0
			fi
		fi
	done
fi

# ---- inlined frames ------------------------------------------------------------
write_inline_prog "$WORK/inl.c"
if ! gcc -O2 -g -o "$WORK/inl" "$WORK/inl.c" 2>"$WORK/inl.cc.log"; then
	fail "cannot compile inl.c: $(head -5 "$WORK/inl.cc.log")"
else
	LINE_INNER=$(grep -n MARK_INNER "$WORK/inl.c" | cut -d: -f1)
	LINE_OUTER=$(grep -n MARK_OUTER "$WORK/inl.c" | cut -d: -f1)
	if prof_heapctl inl-hc "$WORK/inl" lg_prof_sample:0 && hr_ok inl-hc-text "$DUMP" --top 0 --bytes &&
		hr_ok inl-hc-lines "$DUMP" --top 0 --bytes --lines; then
		# usable bytes of malloc(1000 + i), i < 1000 (see tests/report/pprof.sh)
		check_eq "inline (heapctl dump): 'inner (inline)' flat" "$(row_flat "$WORK/inl-hc-text.out" "inner (inline)")" 1629184
		check_eq "inline (heapctl dump): outer cum" "$(row_cum "$WORK/inl-hc-text.out" outer)" 1629184
		check_eq "inline (heapctl dump): outer flat" "$(row_flat "$WORK/inl-hc-text.out" outer)" 0
		check_eq "inline --lines: 'inner (inline) inl.c:$LINE_INNER' flat" \
			"$(row_flat "$WORK/inl-hc-lines.out" "inner (inline) $WORK/inl.c:$LINE_INNER")" 1629184
		check_eq "inline --lines: 'outer inl.c:$LINE_OUTER' cum" \
			"$(row_cum "$WORK/inl-hc-lines.out" "outer $WORK/inl.c:$LINE_OUTER")" 1629184
		grep -q ';outer;inner (inline) 1629184$' <("$HEAPCTL" report "$DUMP" --collapsed 2>&1) ||
			fail "inline: no folded stack ending ';outer;inner (inline) 1629184'"
	fi
	# jemalloc's dump, whose first frames are jemalloc's own, so jeprof
	# looks every program frame up at its call and shows the inlined frame
	if prof_jemalloc inl-je "$WORK/inl" lg_prof_sample:0 && hr_ok inl-je-text "$DUMP" --top 0 --bytes &&
		jp "$WORK/inl-je.jp" "$WORK/inl" "$DUMP"; then
		jflat=$(awk '/^Total/ { next } $6 == "inner" && $7 == "(inline)" { print $1; exit }' "$WORK/inl-je.jp")
		[ -n "$jflat" ] || fail "inline: jeprof shows no 'inner (inline)' row for the jemalloc dump (test assumption)"
		check_eq "inline (jemalloc dump): 'inner (inline)' flat vs jeprof" \
			"$(row_flat "$WORK/inl-je-text.out" "inner (inline)")" "${jflat:-absent}"
		cmp_rows "inline (jemalloc dump) vs jeprof" "$WORK/inl-je-text.out" "$WORK/inl-je.jp" outer main
	fi
fi

# ---- two levels of inlining: inner inlined into middle inlined into top ---
cat >"$WORK/inl2.c" <<'EOF'
#include <stdlib.h>
void *volatile sink[2000];
static inline void *inner(size_t n) { void *p = malloc(n); sink[n % 1000] = p; return p; } /* L_INNER */
static inline void *middle(size_t n) { return inner(n + 1); } /* L_MIDDLE */
__attribute__((noinline)) void *top(size_t n) { void *p = middle(n); __asm__ volatile(""); return p; } /* L_TOP */
int main(void) { for (int i = 0; i < 1000; i++) sink[i + 1000] = top(1000 + (size_t)i); return 0; }
EOF
if gcc -O2 -g -o "$WORK/inl2" "$WORK/inl2.c" && prof_heapctl inl2 "$WORK/inl2" lg_prof_sample:0 &&
	hr_ok inl2-lines "$DUMP" --top 0 --bytes --lines; then
	for f in "inner (inline):L_INNER" "middle (inline):L_MIDDLE" "top:L_TOP"; do
		name=${f%%:*}
		line=$(grep -n "${f##*:}" "$WORK/inl2.c" | cut -d: -f1)
		[ "$(row_cum "$WORK/inl2-lines.out" "$name $WORK/inl2.c:$line")" != absent ] ||
			fail "two inline levels: no row '$name inl2.c:$line': $(row_names "$WORK/inl2-lines.out" | tr '\n' '|')"
	done
fi

# ---- hostile and odd inputs ----------------------------------------------------
# a FIFO named in MAPPED_LIBRARIES must not block the report
if [ -n "${S:-}" ] && [ -f "$S" ]; then
	mkfifo "$WORK/fifo"
	sed "s#$WORK/sym/fmt\$#$WORK/fifo#" "$S" >"$WORK/fifo.heap"
	grep -q "$WORK/fifo" "$WORK/fifo.heap" || fail "fifo: test setup: no mapping replaced"
	hr_ok fifo "$WORK/fifo.heap" --top 3 || true
fi
# objects of no bytes: no division by zero, no NaN
printf 'heap_v2/524288\n@ 0x1234\n  t*: 5: 0 [0: 0]\n@ 0x1238\n  t*: 1: 1000 [0: 0]\nMAPPED_LIBRARIES:\n' >"$WORK/zero.heap"
if hr_ok zero "$WORK/zero.heap" --bytes --top 0; then
	grep -qi 'nan\|inf' "$WORK/zero.out" && fail "zero bytes: NaN or inf in the report: $(tr '\n' '|' <"$WORK/zero.out")"
fi
# gperftools v1 sampling: jeprof adjusts by period/2, and 128 KiB without one
printf 'heap profile: 1: 100 [1: 100] @ heap/1048576\n 1: 100 [ 1: 100] @ 0x1000\n' >"$WORK/v1.heap"
printf 'heap profile: 1: 100 [1: 100] @ heap\n 1: 100 [ 1: 100] @ 0x1000\n' >"$WORK/v1b.heap"
for v in v1 v1b; do
	if hr_ok "$v" "$WORK/$v.heap" --bytes && jp "$WORK/$v.jp" /bin/true "$WORK/$v.heap"; then
		check_eq "$v: Total as jeprof's" "$(jp_total "$WORK/$v.out")" "$(jp_total "$WORK/$v.jp")"
	fi
done
# a profile less itself is nothing at all, as in jeprof
if [ -n "${S:-}" ] && hr_ok self "$S" --base "$S" --top 0; then
	check_eq "profile --base itself: output" "$(cat "$WORK/self.out")" ""
fi
# outputs that are not regular files are written in place
if [ -n "${S:-}" ]; then
	ln -s /dev/null "$WORK/to-null"
	hr_ok svg-symlink "$S" --svg "$WORK/to-null" || true
	[ -L "$WORK/to-null" ] || fail "--svg onto a symlink to /dev/null replaced the symlink"
	if hr_ok pprof-stdout "$S" --pprof -; then
		gzip -t <"$WORK/pprof-stdout.out" 2>/dev/null || fail "--pprof -: standard output is not one gzip stream"
	fi
	hr_err two-stdout 2 "$S" --pprof - --collapsed
fi

# -p PID: binaries under /proc/PID/root (here the same tree as ours)
if [ -n "${S:-}" ]; then
	sleep 60 &
	sleeper=$!
	if hr_ok root-pid "$S" --top 0 -p "$sleeper" && hr_ok root-none "$S" --top 0; then
		check_eq "-p PID: the same report as without" "$(cat "$WORK/root-pid.out")" "$(cat "$WORK/root-none.out")"
	fi
	kill "$sleeper" 2>/dev/null
	wait "$sleeper" 2>/dev/null || true
	hr_err root-gone 3 "$S" -p "$sleeper"
	hr_err root-and-sysroot 2 "$S" -p "$$" --sysroot /
fi

check_no_tmp "$WORK"
finish
