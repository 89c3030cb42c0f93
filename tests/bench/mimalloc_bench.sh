#!/usr/bin/env bash
# mimalloc_bench.sh — build mimalloc-bench's C and C++ programs from a
# checkout and run the 19 that issue 41 holds heapctl to, under glibc,
# jemalloc, mimalloc, tcmalloc and heapctl side by side.
#
#   tests/bench/mimalloc_bench.sh SRC_DIR [BUILD_DIR]
#
# SRC_DIR is a checkout of https://github.com/daanx/mimalloc-bench (the
# directory holding bench/CMakeLists.txt); BUILD_DIR defaults to build/. The
# programs are built with cmake in BUILD_DIR/bench/mimalloc-bench/, never in
# SRC_DIR. Not part of `make bench`: it needs the checkout.
#
# Environment:
#   MB_REPS=3                    repetitions (medians are reported)
#   MB_ONLY=cfrac,larsonN,...    run only these rows
#   MB_ALLOCS=glibc,...          run only these allocators
#   MB_THREADS=2                 the thread count of the programs that take one
#   MB_TIMEOUT=300               seconds before one run is killed
#
# Arguments are those of mimalloc-bench's bench.sh with its procs set to
# MB_THREADS. Runs are interleaved as in run.sh (for each rep, each row,
# every allocator once, starting with a different one each rep) and go
# through runstat (wall time, peak RSS, the preload in the child only).
# Rows that run for a fixed time (larson, rptest, xmalloc-test,
# glibc-thread) are compared by the throughput they print, as bench.sh
# does. sh6bench and sh8bench are built only if the checkout has
# bench/shbench/sh6bench-new.c and sh8bench-new.c (bench.sh's
# build-bench-env.sh downloads and patches them; they are not in the repo).
# Output: the Markdown table on stdout and in
# BUILD_DIR/bench/mimalloc-bench/results.md, the runs in results.tsv, each
# run's output in logs/. Exit status 1 if any run failed or printed no
# throughput, 2 if nothing could be built or run.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/lib.sh"

say() { printf 'mimalloc-bench: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 SRC_DIR [BUILD_DIR]"
src=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such directory"
[ -f "$src/bench/CMakeLists.txt" ] ||
	die "$src: not a mimalloc-bench checkout (no bench/CMakeLists.txt)"
build=${2:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
out=$build/bench/mimalloc-bench
reps=${MB_REPS:-3}
threads=${MB_THREADS:-2}
timeout=${MB_TIMEOUT:-300}
for v in reps threads timeout; do
	case ${!v} in '' | *[!0-9]* | 0) die "MB_${v^^} must be a positive integer" ;; esac
done
start=$(date +%s)

# ---- rows: name, program, arguments (bench.sh's) -----------------------------

bench=$src/bench
declare -A cmd
rows="alloc-test1 barnes cache-scratch1 cache-scratchN cache-thrash1 cache-thrashN cfrac espresso glibc-simple glibc-thread larsonN larsonN-sized malloc-large mleak100 mstressN rptestN sh6benchN sh8benchN xmalloc-testN"
cmd[alloc-test1]="alloc-test 1"
cmd[barnes]="barnes"	# reads bench/barnes/input on stdin
cmd[cache-scratch1]="cache-scratch 1 1000 1 2000000 $threads"
cmd[cache-scratchN]="cache-scratch $threads 1000 1 2000000 $threads"
cmd[cache-thrash1]="cache-thrash 1 1000 1 2000000 $threads"
cmd[cache-thrashN]="cache-thrash $threads 1000 1 2000000 $threads"
cmd[cfrac]="cfrac 17545186520507317056371138836327483792789528"
cmd[espresso]="espresso $bench/espresso/largest.espresso"
cmd[glibc-simple]="glibc-simple"
cmd[glibc-thread]="glibc-thread $threads"
cmd[larsonN]="larson 5 8 1000 5000 100 4141 $threads"
cmd[larsonN-sized]="larson-sized 5 8 1000 5000 100 4141 $threads"
cmd[malloc-large]="malloc-large"
cmd[mleak100]="mleak 50"
cmd[mstressN]="mstress $threads 50 25"
cmd[rptestN]="rptest $threads 0 1 2 500 1000 100 8 16000"
cmd[sh6benchN]="sh6bench $((threads * 2))"
cmd[sh8benchN]="sh8bench $((threads * 2))"
cmd[xmalloc-testN]="xmalloc-test -w $threads -t 5 -s 64"

# The throughput a fixed-duration row printed (empty for the others).
throughput() { # row, stdout file
	case $1 in
	larson*) sed -n 's/^Throughput = *\([0-9.]*\) operations.*/\1/p' "$2" ;;
	rptest*) sed -n 's/.*\.\.\.\([0-9]*\) memory ops.*/\1/p' "$2" ;;
	# frees per second, printed in millions
	xmalloc*) sed -n 's/.*free\/sec: \([0-9.]*\) M.*/\1/p' "$2" | awk '{ printf "%.0f\n", $1 * 1e6 }' ;;
	glibc-thread) sed -n 's/^\([0-9.]*\) iterations.*/\1/p' "$2" ;;
	esac | tail -n 1
}

selected=
for r in $(echo "${MB_ONLY:-$rows}" | tr ',' ' '); do
	[ -n "${cmd[$r]+set}" ] || die "unknown row '$r' (known: $rows)"
	selected="$selected $r"
done

# ---- tools -----------------------------------------------------------------

mkdir -p "$out/logs" || die "cannot create $out"
rm -f "$out"/logs/*
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
apt_install() { # packages...
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		say "not root: cannot install $*"
		return 1
	fi
	say "installing $*"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y "$@" >>"$out/logs/apt.log" 2>&1 ||
		{ apt-get update >>"$out/logs/apt.log" 2>&1 &&
			apt-get install -y "$@" >>"$out/logs/apt.log" 2>&1; } ||
		{ say "apt-get install $* failed, see $out/logs/apt.log"; return 1; }
}
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}" || die "cannot build without ${need[*]}"
CC=${CC:-gcc}
for p in runstat preload_check; do
	"$CC" -O2 -g -Wall -Wextra -o "$out/$p" "$here/$p.c" -ldl || die "failed to build $p"
done

# ---- build mimalloc-bench --------------------------------------------------

# cmake reads the checkout's bench/CMakeLists.txt through a directory of
# links to it, so that the two shbench targets, whose sources the
# repository does not hold, can be left out without touching SRC_DIR.
farm=$out/src
rm -rf "$farm" && mkdir -p "$farm" || die "cannot create $farm"
for e in "$bench"/*; do
	[ "$(basename "$e")" = CMakeLists.txt ] || ln -s "$e" "$farm/"
done
targets="alloc-test barnes cache-scratch cache-thrash cfrac espresso glibc-simple glibc-thread larson larson-sized malloc-large mleak mstress rptest xmalloc-test"
if [ -f "$bench/shbench/sh6bench-new.c" ] && [ -f "$bench/shbench/sh8bench-new.c" ]; then
	cp "$bench/CMakeLists.txt" "$farm/"
	targets="$targets sh6bench sh8bench"
else
	say "sh6benchN, sh8benchN not built: $bench/shbench has no sh6bench-new.c/sh8bench-new.c (mimalloc-bench's build-bench-env.sh downloads and patches them)"
	grep -v -E 'sh[68]bench' "$bench/CMakeLists.txt" >"$farm/CMakeLists.txt"
fi
say "building in $out/obj (log: $out/logs/build.log)"
{ cmake -S "$farm" -B "$out/obj" -DCMAKE_BUILD_TYPE=Release &&
	# shellcheck disable=SC2086
	cmake --build "$out/obj" -j "$(nproc)" --target $targets; } >"$out/logs/build.log" 2>&1 ||
	die "build failed, see $out/logs/build.log"
srcrev=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo "(not a git checkout)")

runnable=
for r in $selected; do
	read -r prog _ <<<"${cmd[$r]}"
	if [ -x "$out/obj/$prog" ]; then
		runnable="$runnable $r"
	else
		say "$r skipped: $prog not built"
	fi
done
[ -n "$runnable" ] || die "no row to run"

# ---- allocators (the libraries run.sh uses) --------------------------------

declare -A lib pkg
peer_libs
lib[heapctl]=$build/libheapctl.so
allocs=
for a in $(echo "${MB_ALLOCS:-glibc,jemalloc,mimalloc,tcmalloc,heapctl}" | tr ',' ' '); do
	[ -n "${lib[$a]+set}" ] || die "unknown allocator '$a' (known: glibc jemalloc mimalloc tcmalloc heapctl)"
	l=${lib[$a]}
	if [ -n "${pkg[$a]:-}" ] && [ ! -e "$l" ]; then
		apt_install "${pkg[$a]}"
	fi
	if [ -n "$l" ] && [ ! -e "$l" ]; then
		say "$a skipped: $l missing"
		continue
	fi
	if [ "$a" = heapctl ]; then
		# a snapshot, so that a rebuild during the run cannot mix versions
		mkdir -p "$out/lib" && cp "$l" "$out/lib/" || die "cannot copy $l"
		heapctl_built=$(date -r "$l" '+%Y-%m-%d %H:%M')
		lib[$a]=$out/lib/libheapctl.so
	fi
	res=$("$out/runstat" -p "${lib[$a]}" -t 30 -o "$out/logs/preload.$a.out" \
		-e "$out/logs/preload.$a.err" -- "$out/preload_check" "${lib[$a]}")
	read -r _ _ status _ <<<"$res"
	if [ "$status" != 0 ]; then
		say "$a skipped: preload check failed: $(tr '\n' ' ' <"$out/logs/preload.$a.err")"
		continue
	fi
	allocs="$allocs $a"
done
read -ra alloc_list <<<"$allocs"
nalloc=${#alloc_list[@]}
[ "$nalloc" -gt 0 ] || die "no allocator available"

vers=
for a in $allocs; do
	case $a in
	glibc) v="glibc $(dpkg-query -W -f='${Version}' libc6 2>/dev/null)" ;;
	heapctl) v="heapctl $(git -C "$root" describe --always --dirty 2>/dev/null || echo 'no commit') (built $heapctl_built)" ;;
	*) v="$a $(dpkg-query -W -f='${Version}' "${pkg[$a]}" 2>/dev/null)" ;;
	esac
	vers="$vers${vers:+, }$v"
done
say "$(wc -w <<<"$runnable") rows x $nalloc allocators x $reps reps"

# ---- runs ------------------------------------------------------------------

tsv=$out/results.tsv
: >"$tsv"
cd "$out/obj" || die "cannot enter $out/obj"
for rep in $(seq 1 "$reps"); do
	for r in $runnable; do
		read -ra argv <<<"${cmd[$r]}"
		input=/dev/null
		[ "$r" = barnes ] && input=$bench/barnes/input
		line="rep $rep/$reps $r:"
		for i in $(seq 0 $((nalloc - 1))); do
			a=${alloc_list[$(((i + rep - 1) % nalloc))]}
			log=$out/logs/$r.$a.$rep
			res=$("$out/runstat" -p "${lib[$a]}" -t "$timeout" -o "$log.out" \
				-e "$log.err" -- "./${argv[0]}" "${argv[@]:1}" <"$input")
			read -r wall rss status _ <<<"$res"
			[ -n "$status" ] || die "harness failure: no result from $out/runstat"
			tp=$(throughput "$r" "$log.out")
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$a" "$rep" "$wall" "$rss" \
				"$status" "${tp:--}" >>"$tsv"
			line="$line $a ${wall}s${tp:+ ($tp/s)}"
			[ "$status" = 0 ] || line="$line(status $status)"
		done
		say "$line"
	done
done

# ---- report ----------------------------------------------------------------

{
	echo "$(machine_line), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "mimalloc-bench $srcrev from $src, $threads threads where a program takes a count; $vers; $reps reps, medians."
	echo
	awk -F'\t' -v allocs="$allocs" -v rows="$runnable" -f "$here/mimalloc_bench.awk" "$tsv"
} >"$out/results.md" 2>"$out/problems.txt"
cat "$out/results.md"
say "total time $(($(date +%s) - start)) s; table in $out/results.md"
if [ -s "$out/problems.txt" ]; then
	cat "$out/problems.txt" >&2
	say "PROBLEMS FOUND: see above; each run's output is in $out/logs/"
	exit 1
fi
exit 0
