#!/usr/bin/env bash
# The report command's numbers for `make bench`: symbolizing and reporting
# a profile with thousands of stacks over dozens of libraries, one of gcc's
# cc1plus (a big stripped C++ binary: names from .dynsym only), one of
# python3 with a few dozen stacks (fixed costs), `heapctl report` against
# `jeprof --text` on the same file; and time and peak memory on a profile
# of over 100,000 stacks.  Bar: at least 10x faster, under 50 ms on the few
# stacks.
#
#   tests/bench/report.sh [BUILD_DIR]      (default build/)
#
# It generates, under BUILD_DIR/bench/report/, 40 shared libraries (30 in C,
# 10 in C++ with namespaced template functions and std::vector/std::string/
# new[] allocations, so names need demangling and allocations pass through
# libstdc++), each with 4 non-inlined functions that either call on into
# another library's function from one of 4 call sites or allocate from one
# of 4 sites, all built with -O1 -g -fno-omit-frame-pointer; and a driver
# linked against all of them that walks BENCH_REPORT_WALKS (default 5000)
# pseudo-random paths 3 to 8 hops long, each ending in an allocation that is
# kept (then, given a second argument, it sleeps that many seconds: serve.sh
# scrapes it).  The driver runs under LD_PRELOAD=libheapctl.so with
# prof:true,lg_prof_sample:0,prof_final:true, so the final dump holds every
# stack.  Then, interleaved (the first of the pair alternates), BENCH_REPS
# (default 5) runs each of
#     jeprof --text DRIVER DUMP
#     heapctl report DUMP
# to /dev/null, timed wall clock.  Prints Markdown: the table (stacks,
# libraries, median seconds, ratio) and the two "Total:" lines.
#
# Exit status: 0 measured; 1 a step failed, heapctl has no report command,
# or the two totals of a profile differ.
set -Eeuo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
case $build in /*) ;; *) build=$root/$build ;; esac
dir=$build/bench/report
lib=$build/libheapctl.so
heapctl=$build/heapctl
reps=${BENCH_REPS:-5}
walks=${BENCH_REPORT_WALKS:-5000}
nlib=40

die() { echo "report bench: $*" >&2; exit 1; }
trap 'echo "report bench: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
case $reps in '' | *[!0-9]* | 0) die "BENCH_REPS must be a positive integer" ;; esac
case $walks in '' | *[!0-9]* | 0) die "BENCH_REPORT_WALKS must be a positive integer" ;; esac
[ -f "$lib" ] || die "$lib is missing (run make)"
[ -x "$heapctl" ] || die "$heapctl is missing (run make)"
command -v jeprof >/dev/null || die "jeprof is not installed (Debian package libjemalloc-dev)"
command -v g++ >/dev/null || die "g++ is not installed"
unset MALLOC_CONF HEAPCTL_CONF LD_PRELOAD

# ---- the generated program --------------------------------------------------
# Rebuilt only when this script (the generator) or the compilers change.
stamp=$( (cat "$0"; gcc --version; g++ --version) | sha1sum | cut -c1-16)
if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -x "$dir/driver" ]; then
	echo "report bench: generating and building $nlib libraries and the driver in $dir ..." >&2
	rm -rf "$dir"
	mkdir -p "$dir/src"
	cat >"$dir/src/hop.h" <<'EOF'
/* One walk: steps[i] names the function of hop i (index << 2) and which of
 * its 4 call sites or allocation sites it uses (low 2 bits). */
#include <stddef.h>
struct walk;
typedef void hop_fn(struct walk *, int);
struct walk {
	const unsigned short *steps;
	int n;
	hop_fn *const *table;
	void **keep;
	size_t nkeep;
	unsigned long acc;
};
#define HOPS_PER_LIB 4
#define KEEP(w, p) ((w)->keep[(w)->nkeep++] = (void *)(p))
#define NEXT(w, i) ((w)->table[(w)->steps[(i) + 1] >> 2])
#define SIZE(w) (16 + ((w)->acc * 2654435761u >> 7) % 2000)
EOF
	names=(parse route commit emit)
	for ((l = 0; l < nlib; l++)); do
		n=$(printf '%02d' "$l")
		if ((l % 4 == 3)); then   # C++: svc::mNN::Stage<T, K>::run
			{
				echo '#include <string>'
				echo '#include <vector>'
				echo '#include "hop.h"'
				echo "namespace svc { namespace m$n {"
				echo 'template <typename T, int K> struct Stage { __attribute__((noinline)) static void run(walk *w, int i); };'
				echo 'template <typename T, int K> void Stage<T, K>::run(walk *w, int i)'
				echo '{'
				echo '	unsigned v = w->steps[i] & 3;'
				echo "	w->acc += $((l * 7919 + 17)) + K;"
				echo '	if (i + 1 == w->n) {'
				echo '		size_t sz = SIZE(w);'
				echo '		switch (v) {'
				echo '		case 0: KEEP(w, new std::vector<T>(sz / sizeof(T) + 1)); break;'
				echo '		case 1: KEEP(w, new char[sz]); break;'
				echo '		case 2: KEEP(w, new std::string(sz, (char)K)); break;'
				echo '		default: KEEP(w, new T[sz / sizeof(T) + 1]()); break;'
				echo '		}'
				echo '		return;'
				echo '	}'
				echo '	switch (v) {'
				echo "	case 0: NEXT(w, i)(w, i + 1); w->acc ^= $((l + 101)); break;"
				echo "	case 1: w->acc *= 3; NEXT(w, i)(w, i + 1); w->acc += $((l + 211)); break;"
				echo "	case 2: w->acc += K * 5; NEXT(w, i)(w, i + 1); w->acc -= $((l + 307)); break;"
				echo "	default: NEXT(w, i)(w, i + 1); w->acc = (w->acc << 1) ^ $((l + 401)); break;"
				echo '	}'
				echo '	__asm__ volatile("" ::: "memory");'
				echo '}'
				echo 'template struct Stage<int, 0>;'
				echo 'template struct Stage<double, 1>;'
				echo 'template struct Stage<long, 2>;'
				echo 'template struct Stage<unsigned char, 3>;'
				echo '} }'
				echo "extern \"C\" void svc${n}_register(hop_fn **slot)"
				echo '{'
				echo "	slot[0] = &svc::m$n::Stage<int, 0>::run;"
				echo "	slot[1] = &svc::m$n::Stage<double, 1>::run;"
				echo "	slot[2] = &svc::m$n::Stage<long, 2>::run;"
				echo "	slot[3] = &svc::m$n::Stage<unsigned char, 3>::run;"
				echo '}'
			} >"$dir/src/svc$n.cc"
		else                      # C: svcNN_parse, svcNN_route, ...
			{
				echo '#include <stdlib.h>'
				echo '#include "hop.h"'
				for ((f = 0; f < 4; f++)); do
					echo "__attribute__((noinline)) void svc${n}_${names[f]}(struct walk *w, int i);"
					echo "__attribute__((noinline)) void svc${n}_${names[f]}(struct walk *w, int i)"
					echo '{'
					echo '	unsigned v = w->steps[i] & 3;'
					echo "	w->acc += $((l * 7919 + f * 104729 + 17));"
					echo '	if (i + 1 == w->n) {'
					echo '		size_t sz = SIZE(w);'
					echo '		switch (v) {'
					echo '		case 0: KEEP(w, malloc(sz)); break;'
					echo '		case 1: KEEP(w, calloc(1, sz)); break;'
					echo '		case 2: KEEP(w, malloc(sz + 64)); break;'
					echo '		default: KEEP(w, realloc(NULL, sz)); break;'
					echo '		}'
					echo '		return;'
					echo '	}'
					echo '	switch (v) {'
					echo "	case 0: NEXT(w, i)(w, i + 1); w->acc ^= $((l + f + 101)); break;"
					echo "	case 1: w->acc *= 3; NEXT(w, i)(w, i + 1); w->acc += $((l + f + 211)); break;"
					echo "	case 2: w->acc += $((f + 5)); NEXT(w, i)(w, i + 1); w->acc -= $((l + f + 307)); break;"
					echo "	default: NEXT(w, i)(w, i + 1); w->acc = (w->acc << 1) ^ $((l + f + 401)); break;"
					echo '	}'
					echo '	__asm__ volatile("" ::: "memory");'
					echo '}'
				done
				echo "void svc${n}_register(hop_fn **slot);"
				echo "void svc${n}_register(hop_fn **slot)"
				echo '{'
				for ((f = 0; f < 4; f++)); do echo "	slot[$f] = svc${n}_${names[f]};"; done
				echo '}'
			} >"$dir/src/svc$n.c"
		fi
	done
	{
		echo '#include <stdio.h>'
		echo '#include <stdlib.h>'
		echo '#include <unistd.h>'
		echo '#include "hop.h"'
		for ((l = 0; l < nlib; l++)); do printf 'void svc%02d_register(hop_fn **slot);\n' "$l"; done
		echo "#define NLIB $nlib"
		cat <<'EOF'
static unsigned long long rng = 0x2545f4914f6cdd1dull;
static unsigned next_rand(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (unsigned)((rng * 2685821657736338717ull) >> 32);
}

__attribute__((noinline)) static void walk_path(struct walk *w)
{
	w->table[w->steps[0] >> 2](w, 0);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	int walks = argc > 1 ? atoi(argv[1]) : 5000;
	hop_fn *table[NLIB * HOPS_PER_LIB];
EOF
		for ((l = 0; l < nlib; l++)); do printf '\tsvc%02d_register(table + %d);\n' "$l" $((l * 4)); done
		cat <<'EOF'
	struct walk w = { 0 };
	w.table = table;
	w.keep = malloc((size_t)walks * sizeof *w.keep);   /* everything stays live */
	if (!w.keep)
		return 1;
	for (int k = 0; k < walks; k++) {
		unsigned short steps[8];
		w.n = 3 + (int)(next_rand() % 6);
		for (int i = 0; i < w.n; i++)
			steps[i] = (unsigned short)((next_rand() % (NLIB * HOPS_PER_LIB)) << 2 | (next_rand() & 3));
		w.steps = steps;
		walk_path(&w);
	}
	printf("walks=%d kept=%zu\n", walks, w.nkeep);
	if (argc > 2) {             /* stay alive, for tests/bench/serve.sh to scrape */
		fflush(stdout);
		sleep((unsigned)atoi(argv[2]));
	}
	return 0;
}
EOF
	} >"$dir/src/driver.c"

	cflags=(-O1 -g -fno-omit-frame-pointer -fPIC -Wall -Wextra -Werror -I"$dir/src")
	# Compile the libraries nproc at a time, each with its own log.
	compile_lib() {
		local n=$1 src cc
		if [ -f "$dir/src/svc$n.cc" ]; then src=$dir/src/svc$n.cc cc=(g++ -std=gnu++17); else src=$dir/src/svc$n.c cc=(gcc -std=gnu11); fi
		"${cc[@]}" "${cflags[@]}" -shared -o "$dir/libsvc$n.so" "$src" >"$dir/src/svc$n.log" 2>&1
	}
	failed=0
	for ((l = 0; l < nlib; l++)); do
		compile_lib "$(printf '%02d' "$l")" &
		if (($(jobs -rp | wc -l) >= $(nproc))); then wait -n || failed=1; fi
	done
	while (($(jobs -rp | wc -l) > 0)); do wait -n || failed=1; done
	wait || failed=1
	if ((failed)); then
		cat "$dir"/src/*.log >&2
		die "cannot build the generated libraries (sources and logs in $dir/src)"
	fi
	libs=()
	for ((l = 0; l < nlib; l++)); do libs+=("-l:libsvc$(printf '%02d' "$l").so"); done
	gcc -std=gnu11 "${cflags[@]}" -o "$dir/driver" "$dir/src/driver.c" -L"$dir" "${libs[@]}" \
	    -Wl,-rpath,"$dir" >"$dir/src/driver.log" 2>&1 ||
		{ cat "$dir/src/driver.log" >&2; die "cannot build the driver (sources in $dir/src)"; }
	echo "$stamp" >"$dir/.stamp"
fi

# ---- the profile --------------------------------------------------------------
rm -rf "$dir/prof"
mkdir -p "$dir/prof"
HEAPCTL_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:$dir/prof/driver \
    LD_PRELOAD=$lib "$dir/driver" "$walks" >"$dir/prof/driver.out" 2>&1 ||
	{ cat "$dir/prof/driver.out" >&2; die "the driver failed under $lib"; }
dumps=("$dir"/prof/driver.*.f.heap)
[ -f "${dumps[0]}" ] || { cat "$dir/prof/driver.out" >&2; die "the driver wrote no final dump (driver.*.f.heap) in $dir/prof"; }
dump=${dumps[0]}
stacks=$(grep -c '^@' "$dump")
# executable mappings in the dump: the generated libraries and the system's
nmapped=$(sed -n '/^MAPPED_LIBRARIES:/,$p' "$dump" | awk '$2 ~ /x/ && $6 ~ /^\// {print $6}' | sort -u | wc -l)
ngen=$(sed -n '/^MAPPED_LIBRARIES:/,$p' "$dump" | awk '$2 ~ /x/ && $6 ~ /\/libsvc[0-9]+\.so$/ {print $6}' | sort -u | wc -l)
[ "$ngen" -eq "$nlib" ] || die "the dump maps $ngen of the $nlib generated libraries"

# ---- timing ---------------------------------------------------------------------
has_report=1
"$heapctl" help report >/dev/null 2>&1 || has_report=0

source "$root/tests/bench/lib.sh"
# timed OUTFILE COMMAND...: wall seconds of one run, appended to OUTFILE.
timed() {
	local f=$1 t0 t1; shift
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1 || die "failed: $*"
	t1=$(date +%s%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", (b - a) / 1e9}' >>"$f"
}
# row LABEL PROGRAM DUMP LIBCELL: time `jeprof --text PROGRAM DUMP` against
# `heapctl report DUMP`, interleaved, and print one table row; the two
# "Total:" lines go to $dir/prof/LABEL.totals.  Sets ratio.
row() {
	local label=$1 program=$2 d=$3 lib_cell=$4 out=$dir/prof/$1
	local je=(jeprof --text "$program" "$d") hc=("$heapctl" report "$d")
	# one untimed run each, for the totals (and a warm page cache)
	"${je[@]}" >"$out.jeprof.txt" 2>"$out.jeprof.err" ||
		{ cat "$out.jeprof.err" >&2; die "jeprof failed: ${je[*]}"; }
	"${hc[@]}" >"$out.report.txt" 2>"$out.report.err" ||
		{ cat "$out.report.err" >&2; die "heapctl report failed: ${hc[*]}"; }
	: >"$out.jeprof.times"
	: >"$out.report.times"
	for ((i = 0; i < reps; i++)); do
		if ((i % 2 == 1)); then timed "$out.report.times" "${hc[@]}"; fi
		timed "$out.jeprof.times" "${je[@]}"
		if ((i % 2 == 0)); then timed "$out.report.times" "${hc[@]}"; fi
	done
	local je_s hc_s n
	je_s=$(median <"$out.jeprof.times")
	hc_s=$(median <"$out.report.times")
	ratio=$(awk -v a="$je_s" -v b="$hc_s" 'BEGIN {printf "%.1f", (b > 0) ? a / b : 0}')
	n=$(grep -c '^@' "$d")
	printf '| %s (%s KiB) | %s | %s | %s s | %s s | %sx |\n' "$label" $(($(stat -c %s "$d") / 1024)) \
	    "$n" "$lib_cell" "$je_s" "$hc_s" "$ratio"
	{
		echo "    $label, jeprof --text:  $(grep -m1 '^Total:' "$out.jeprof.txt" || echo "(no Total: line)")"
		echo "    $label, heapctl report: $(grep -m1 '^Total:' "$out.report.txt" || echo "(no Total: line)")"
	} >"$out.totals"
}
((has_report)) || die "$heapctl has no 'report' command (heapctl help report fails)"

# A big stripped C++ program of the system: gcc's cc1plus (no DWARF, only
# .dynsym), compiling a small C++ file with every allocation sampled.
cc1plus=$(g++ -print-prog-name=cc1plus 2>/dev/null || true)
big=""
if [ -x "$cc1plus" ]; then
	mkdir -p "$dir/cc1plus"
	rm -f "$dir/cc1plus"/d.*.heap
	printf '%s\n' '#include <map>' '#include <string>' '#include <vector>' '#include <iostream>' \
	    '#include <sstream>' 'template <int N> struct F { static int v() { return F<N - 1>::v() + N; } };' \
	    'template <> struct F<0> { static int v() { return 0; } };' \
	    'int main() { std::map<std::string, std::vector<int>> m; m["a"].push_back(F<300>::v());' \
	    '	std::ostringstream o; o << m.size(); std::cout << o.str(); }' >"$dir/cc1plus/t.cc"
	LD_PRELOAD=$lib MALLOC_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:$dir/cc1plus/d \
	    g++ -O2 -S "$dir/cc1plus/t.cc" -o "$dir/cc1plus/t.s" || die "g++ under the preload failed"
	big=$(grep -l "$cc1plus" "$dir"/cc1plus/d.*.heap 2>/dev/null | head -1 || true)
	[ -n "$big" ] || die "no dump of cc1plus in $dir/cc1plus"
fi

# Few stacks: Debian's python3 (stripped; libc's debug file from libc6-dbg
# when installed, with compressed sections) building a few structures,
# sampled every KiB: tens of stacks, where fixed costs are all there is.
py=/usr/bin/python3
few=""
if [ -x "$py" ]; then
	mkdir -p "$dir/python3"
	rm -f "$dir/python3"/d.*.heap
	LD_PRELOAD=$lib MALLOC_CONF=prof:true,lg_prof_sample:10,prof_final:true,prof_prefix:$dir/python3/d \
	    "$py" -c "import json, re, decimal, collections
x = [json.dumps({'a': i, 'b': 'x' * 200}) for i in range(20000)]
y = collections.Counter(x)" || die "python3 under the preload failed"
	few=$(ls -S "$dir"/python3/d.*.heap 2>/dev/null | head -1 || true)
	[ -n "$few" ] || die "no dump of python3 in $dir/python3"
fi

# Many stacks: the driver again with BENCH_REPORT_BIG_WALKS (default
# 150000) walks, over 100,000 stacks; one run each, time and peak RSS.
bigwalks=${BENCH_REPORT_BIG_WALKS:-150000}
mkdir -p "$dir/big"
rm -f "$dir/big"/driver.*.heap
HEAPCTL_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:$dir/big/driver \
    LD_PRELOAD=$lib "$dir/driver" "$bigwalks" >"$dir/big/driver.out" 2>&1 ||
	{ cat "$dir/big/driver.out" >&2; die "the driver failed under $lib ($bigwalks walks)"; }
many=$(ls "$dir"/big/driver.*.f.heap | head -1)
# memrow LABEL PROGRAM DUMP: one run of each, "seconds KiB" from time(1)
memrow() {
	local label=$1 program=$2 d=$3 out=$dir/big/$1 je hc
	/usr/bin/time -f '%e %M' -o "$out.jeprof.rss" jeprof --text "$program" "$d" >"$out.jeprof.txt" 2>/dev/null ||
		die "jeprof failed on $d"
	/usr/bin/time -f '%e %M' -o "$out.report.rss" "$heapctl" report "$d" >"$out.report.txt" 2>/dev/null ||
		die "heapctl report failed on $d"
	read -r je_t je_k <"$out.jeprof.rss"
	read -r hc_t hc_k <"$out.report.rss"
	printf '| %s (%s MiB) | %s | %s s, %s MiB | %s s, %s MiB | %s of the time, %s of the memory |\n' "$label" \
	    $(($(stat -c %s "$d") / 1048576)) "$(grep -c '^@' "$d")" "$je_t" $((je_k / 1024)) "$hc_t" $((hc_k / 1024)) \
	    "$(awk -v a="$hc_t" -v b="$je_t" 'BEGIN {printf "%.3f", a / b}')" \
	    "$(awk -v a="$hc_k" -v b="$je_k" 'BEGIN {printf "%.2f", a / b}')"
	[ "$(grep -m1 '^Total:' "$out.jeprof.txt")" = "$(grep -m1 '^Total:' "$out.report.txt")" ] ||
		die "$label: the Total: lines differ"
}

machine_line
echo
echo "| profile | stacks | libraries | jeprof --text | heapctl report | jeprof / report |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
row generated "$dir/driver" "$dump" "$nlib generated + $((nmapped - ngen)) system"
gen_ratio=$ratio
if [ -n "$big" ]; then
	row cc1plus "$cc1plus" "$big" "cc1plus (stripped, $(($(stat -Lc %s "$cc1plus") / 1048576)) MiB) + system"
	big_ratio=$ratio
fi
if [ -n "$few" ]; then
	row python3 "$py" "$few" "python3 (stripped) + libc, libm, libz, libexpat"
	few_ratio=$ratio
	few_s=$(median <"$dir/prof/python3.report.times")
fi
echo
echo "Medians of $reps interleaved runs each, wall clock, output to /dev/null."
echo
echo "| many stacks | stacks | jeprof --text | heapctl report | heapctl / jeprof |"
echo "| --- | ---: | ---: | ---: | ---: |"
memrow generated-big "$dir/driver" "$many"
echo
echo "One run each, wall clock and peak RSS (time -f %M)."
echo
cat "$dir/prof/generated.totals"
if [ -n "$big" ]; then cat "$dir/prof/cc1plus.totals"; fi
if [ -n "$few" ]; then cat "$dir/prof/python3.totals"; fi
echo
bar=met
awk -v r="$gen_ratio" 'BEGIN {exit !(r >= 10)}' || bar="NOT met"
echo "Bar: heapctl report at least 10x faster than jeprof --text on the generated profile: $bar (${gen_ratio}x)."
if [ -n "$big" ]; then
	bar=met
	awk -v r="$big_ratio" 'BEGIN {exit !(r >= 10)}' || bar="NOT met"
	echo "The same on the stripped binary (symbols sorted once per module): $bar (${big_ratio}x)."
fi
if [ -n "$few" ]; then
	bar=met
	awk -v r="$few_ratio" -v s="$few_s" 'BEGIN {exit !(r >= 10 && s < 0.050)}' || bar="NOT met"
	echo "Few stacks (python3): at least 10x faster and under 50 ms: $bar (${few_ratio}x, ${few_s} s)."
fi
for t in generated ${big:+cc1plus} ${few:+python3}; do
	[ "$(sed -n 1p "$dir/prof/$t.totals" | sed 's/.*: *Total/Total/')" = \
	  "$(sed -n 2p "$dir/prof/$t.totals" | sed 's/.*: *Total/Total/')" ] ||
		die "$t: the Total: lines differ: $(cat "$dir/prof/$t.totals")"
done
