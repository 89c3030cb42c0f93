#!/usr/bin/env bash
# run.sh — build the allocator benchmarks and run every one of them under
# glibc, jemalloc, mimalloc, tcmalloc and heapctl side by side.
#
#   tests/bench/run.sh [BUILD_DIR]        (BUILD_DIR defaults to build/)
#
# Environment:
#   BENCH_REPS=5                 repetitions (medians are reported)
#   BENCH_ONLY=st_churn,...      run only these benchmarks
#   BENCH_ALLOCS=glibc,...       run only these allocators (also heapctl-thp:
#                                heapctl with thp:always, not run by default)
#   BENCH_TIMEOUT=120            seconds before one run is killed
#
# Runs are interleaved (for each rep, for each benchmark, every allocator
# once, starting with a different allocator each rep) so that drift in the
# machine's speed spreads over all columns. Each run goes through runstat,
# which preloads the library into the benchmark only and records wall time
# and peak RSS. Output: the Markdown table on stdout and in
# BUILD_DIR/bench/results.md, raw runs in results.tsv, each run's stdout and
# stderr in logs/. Exit status 1 if any run crashed, timed out, or printed a
# checksum different from the other allocators'.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
out=$build/bench
reps=${BENCH_REPS:-5}
timeout=${BENCH_TIMEOUT:-120}
start=$(date +%s)

say() { printf 'bench: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

case $reps in '' | *[!0-9]* | 0) die "BENCH_REPS must be a positive integer" ;; esac
case $timeout in '' | *[!0-9]* | 0) die "BENCH_TIMEOUT must be a positive integer" ;; esac

# ---- benchmarks ------------------------------------------------------------

all_benches="st_churn mt_churn prodcons false_share realloc_grow large_churn large_churn_2t fastpath real_perl real_python thread_cost thread_churn thread_churn_1cpu thread_churn_prof fork_cost fork_small startup big_buffers thread_leftover xthread_random bulk_xfree larson_sized larson_relay larson_idle xthread_batches big_buffers_20 false_share_1t false_share_thrash simple_batches pareto_churn thread_swap cxx_new_delete calloc_pairs memalign_pairs size_mix pool_shift fork_shift"
programs="st_churn mt_churn prodcons false_share realloc_grow large_churn fastpath thread_cost thread_churn fork_cost startup big_buffers thread_leftover xthread_random bulk_xfree larson_sized xthread_batches simple_batches pareto_churn size_mix pool_shift"
# C++ (g++), through operator new and delete
cxx_programs="cxx_new_delete"

first_cpu=$(awk '/^Cpus_allowed_list:/ { split($2, a, /[-,]/); print a[1] }' /proc/self/status)
[ -n "$first_cpu" ] || first_cpu=0

# Sets argv to the command line of benchmark $1.
bench_argv() {
	case $1 in
	large_churn_2t) argv=("$out/large_churn" threads=2) ;;
	# profiling on where the allocator has it (jemalloc reads MALLOC_CONF too)
	thread_churn_prof) argv=(env MALLOC_CONF=prof:true,lg_prof_sample:10 "$out/thread_churn") ;;
	# on one CPU: without the wake-ups of the other CPU, whose cost on a VM
	# depends on how long each thread runs more than on what it does
	thread_churn_1cpu) argv=(taskset -c "$first_cpu" "$out/thread_churn") ;;
	# a small program that forks children that exit at once (a shell, a
	# fork-per-connection server's listener): what the fork itself costs
	fork_small) argv=("$out/fork_cost" objects=1000 forks=2000) ;;
	# mimalloc-bench's patterns that the rows above do not cover as they
	# run (issue 41): malloc-large, cache-thrash1, cache-thrashN (false_share
	# itself is cache-scratchN: interleaved first objects), mleak
	big_buffers_20) argv=("$out/big_buffers" live=20 pick=1 zero=1 rounds=100) ;;
	false_share_1t) argv=("$out/false_share" threads=1 passive=0) ;;
	false_share_thrash) argv=("$out/false_share" passive=0) ;;
	thread_swap) argv=("$out/thread_leftover" garbage=0 slots=1000 threads=10 rounds=1000) ;;
	# larsonN as it runs: generations that overlap, an idle main thread whose
	# blocks the workers start from, and blocks touched in their first bytes
	larson_relay) argv=("$out/larson_sized" relay=1 touch=1 sized=0 rounds=100 gens=10) ;;
	# larsonN's gap alone: one worker on slots that an idle owner filled
	larson_idle) argv=("$out/larson_sized" threads=1 chunks=1000 relay=1 gens=1 touch=1 sized=0 rounds=20000) ;;
	# calloc and memalign(16, n) of a small block, and free (rptest uses only those)
	calloc_pairs) argv=("$out/fastpath" via=1 pairs=10000000 size=48) ;;
	memalign_pairs) argv=("$out/fastpath" via=2 pairs=10000000 size=48) ;;
	# a threaded process that forks a long-lived worker right after a burst
	fork_shift) argv=("$out/pool_shift" threads=1 fork=1) ;;
	real_perl) argv=(env PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0
		/usr/bin/perl "$here/real_perl.pl") ;;
	real_python) argv=(env PYTHONHASHSEED=0 PYTHONMALLOC=malloc
		/usr/bin/python3 "$here/real_python.py") ;;
	*) argv=("$out/$1") ;;
	esac
}

benches=
for b in $(echo "${BENCH_ONLY:-$all_benches}" | tr ',' ' '); do
	case " $all_benches " in
	*" $b "*) ;;
	*) die "unknown benchmark '$b' (known: $all_benches)" ;;
	esac
	if [ "$b" = real_python ] && [ ! -x /usr/bin/python3 ]; then
		say "real_python skipped: /usr/bin/python3 not installed"
		continue
	fi
	if [ "$b" = real_perl ] && [ ! -x /usr/bin/perl ]; then
		say "real_perl skipped: /usr/bin/perl not installed"
		continue
	fi
	benches="$benches $b"
done
[ -n "$benches" ] || die "no benchmark selected"

# ---- build -----------------------------------------------------------------

mkdir -p "$out/logs" || die "cannot create $out"
rm -f "$out"/logs/*
CC=${CC:-gcc}
build_one() { # name, extra flags...
	local name=$1
	shift
	"$CC" -O2 -g -pthread -Wall -Wextra -o "$out/$name" "$here/$name.c" "$@" ||
		die "failed to build $name"
}
for p in $programs; do build_one "$p" -lm; done
CXX=${CXX:-g++}
for p in $cxx_programs; do
	"$CXX" -O2 -g -pthread -Wall -Wextra -o "$out/$p" "$here/$p.cc" || die "failed to build $p"
done
# the floor fastpath is compared with: one free list behind the same calls
"$CC" -O2 -g -fPIC -shared -ftls-model=initial-exec -o "$out/libfloor.so" "$here/floor_lib.c" ||
	die "failed to build libfloor.so"
build_one floor -L"$out" -lfloor -Wl,-rpath,"$out"
build_one runstat
build_one faultcost
build_one preload_check -ldl

# ---- allocators ------------------------------------------------------------

declare -A lib pkg
peer_libs
lib[heapctl]=$build/libheapctl.so
# the same with the allocator's misuse checks (HC_CHECKS=HC_CHECK_ALL)
lib[heapctl-secure]=$build/libheapctl-secure.so
# the same library configured (HEAPCTL_CONF, which no run sets otherwise)
declare -A conf
lib[heapctl-thp]=$build/libheapctl.so
conf[heapctl-thp]=thp:always

wanted=$(echo "${BENCH_ALLOCS:-glibc,jemalloc,mimalloc,tcmalloc,heapctl,heapctl-secure}" | tr ',' ' ')
for a in $wanted; do
	[ -n "${lib[$a]+set}" ] || die "unknown allocator '$a' (known: glibc jemalloc mimalloc tcmalloc heapctl heapctl-secure heapctl-thp)"
done

# Install missing peers (Debian packages) when we can.
missing=()
for a in $wanted; do
	if [ -n "${pkg[$a]:-}" ] && [ ! -e "${lib[$a]}" ]; then
		missing+=("${pkg[$a]}")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		say "installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y "${missing[@]}" >"$out/logs/apt.log" 2>&1 ||
			{ apt-get update >>"$out/logs/apt.log" 2>&1 &&
				apt-get install -y "${missing[@]}" >>"$out/logs/apt.log" 2>&1; } ||
			say "apt-get install failed, see $out/logs/apt.log"
	else
		say "not root: cannot install ${missing[*]}"
	fi
fi

allocs=
setup_problems=
for a in $wanted; do
	l=${lib[$a]}
	if [ -n "$l" ] && [ ! -e "$l" ]; then
		if [[ $a == heapctl* ]]; then
			say "$a skipped: $l not built (make -C $root)"
		else
			say "$a skipped: $l missing (apt-get install ${pkg[$a]})"
		fi
		continue
	fi
	if [[ $a == heapctl* ]]; then
		# Run a snapshot, so a rebuild during the run cannot mix versions.
		if ! mkdir -p "$out/lib" || ! cp "$l" "$out/lib/lib$a.so"; then
			die "cannot copy $l to $out/lib"
		fi
		heapctl_built=$(date -r "$l" '+%Y-%m-%d %H:%M')
		l=$out/lib/lib$a.so
		lib[$a]=$l
	fi
	# Prove the preload takes effect: malloc must resolve into the library.
	res=$("$out/runstat" -p "$l" -t 30 -o "$out/logs/preload.$a.out" \
		-e "$out/logs/preload.$a.err" -- "$out/preload_check" "$l")
	read -r _ _ status _ <<<"$res"
	if [ "$status" != 0 ]; then
		msg="$a skipped: preload check failed (status $status): $(tr '\n' ' ' <"$out/logs/preload.$a.err")"
		say "$msg"
		setup_problems="$setup_problems- $msg"$'\n'
		continue
	fi
	say "$a: $(cat "$out/logs/preload.$a.out")"
	allocs="$allocs $a"
done
read -ra alloc_list <<<"$allocs"
nalloc=${#alloc_list[@]}
[ "$nalloc" -gt 0 ] || die "no allocator available"
base=jemalloc
case " $allocs " in *" jemalloc "*) ;; *) base=${alloc_list[0]} ;; esac

# ---- header ----------------------------------------------------------------

dpkg_ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo '?'; }
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
# a first-touch page fault: what each page an allocator touches costs here
# (about a microsecond or less on bare metal; 18-23 us on the project's VM,
# whose page tables are paravirtual)
fault=$(env -u LD_PRELOAD "$out/faultcost" | sed -n 's/^us_per_fault=//p')
header="**Machine:** nproc=$(nproc), CPU: ${cpu:-unknown}, kernel $(uname -r), first-touch page fault ${fault:-?} us, $(date '+%Y-%m-%d %H:%M:%S %Z'), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
vers=
for a in $allocs; do
	case $a in
	glibc) v="glibc $(dpkg_ver libc6)" ;;
	heapctl*) v="$a${conf[$a]:+ (HEAPCTL_CONF=${conf[$a]})} $(git -C "$root" describe --always --dirty 2>/dev/null || echo 'no commit') (built $heapctl_built, sha256 $(sha256sum "${lib[$a]}" | cut -c1-12))" ;;
	*) v="$a $(dpkg_ver "${pkg[$a]}")" ;;
	esac
	vers="$vers${vers:+, }$v"
done
header="$header
**Allocators:** $vers. **Reps:** $reps, ratios to $base."
say "$(wc -w <<<"$benches") benchmarks x $nalloc allocators x $reps reps"

# ---- runs ------------------------------------------------------------------

tsv=$out/results.tsv
: >"$tsv"
: >"$out/floor.txt"
for rep in $(seq 1 "$reps"); do
	for b in $benches; do
		bench_argv "$b"
		line="rep $rep/$reps $b:"
		for i in $(seq 0 $((nalloc - 1))); do
			a=${alloc_list[$(((i + rep - 1) % nalloc))]}
			log=$out/logs/$b.$a.$rep
			# the configuration in runstat's environment: an `env` run
			# under the preload would count in the peak RSS
			res=$(env ${conf[$a]:+"HEAPCTL_CONF=${conf[$a]}"} "$out/runstat" -p "${lib[$a]}" \
				-t "$timeout" -o "$log.out" -e "$log.err" -- "${argv[@]}")
			read -r wall rss status user sys minflt <<<"$res"
			[ -n "$minflt" ] ||
				die "harness failure: no result from $out/runstat (was $out removed during the run, e.g. by make clean?)"
			sum=$(grep -o 'checksum=[0-9a-f]*' "$log.out" | head -n 1 | cut -d= -f2)
			tight=$(sed -n 's/.* ns_per_pair=\([0-9.]*\).*/\1/p' "$log.out")
			batch=$(sed -n 's/.* batch_ns_per_pair=\([0-9.]*\).*/\1/p' "$log.out")
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
				"$b" "$a" "$rep" "$wall" "$rss" "$status" "${sum:-none}" \
				"$tight" "$batch" "$user" "$sys" "$minflt" >>"$tsv"
			line="$line $a ${wall}s"
			[ "$status" = 0 ] || line="$line(status $status)"
		done
		if [ "$b" = fastpath ]; then
			# the floor, in the same minute as this rep's fastpath runs
			f=$("$out/floor" | sed -n 's/^ns_per_pair=//p')
			echo "${f:-?}" >>"$out/floor.txt"
			line="$line floor ${f:-?}ns"
		fi
		say "$line"
	done
done

# ---- report ----------------------------------------------------------------

awk -v allocs="$allocs" -v benches="$benches" -v base="$base" \
	-v header="$header" -f "$here/report.awk" "$tsv" >"$out/results.md" \
	2>"$out/problems.txt"
fs_runs=$(find "$out/logs" -name 'false_share.*.err' | wc -l)
busy=$(grep -l 'false sharing is under-measured' "$out"/logs/false_share.*.err 2>/dev/null | wc -l)
if [ "$busy" -gt 0 ]; then
	printf '\nNote: in %s of %s false_share runs the two threads mostly took turns on one core (the machine was busy), so false sharing was under-measured there (see logs/false_share.*.err).\n' \
		"$busy" "$fs_runs" >>"$out/results.md"
fi
if [ -n "$setup_problems" ]; then
	printf '\n**SKIPPED ALLOCATORS** (the library is there but does not replace malloc):\n\n%s' \
		"$setup_problems" >>"$out/results.md"
	printf '!!! %s' "$setup_problems" >>"$out/problems.txt"
fi
case " $benches " in
*" fastpath "*)
	# the floor was run once per rep, interleaved with fastpath's runs
	floor=$(grep -E '^[0-9.]+$' "$out/floor.txt" | sort -n | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}')
	printf '\nFloor on this machine: %s ns per pair (tests/bench/floor.c, median of %s runs, one per rep between the fastpath runs): the same tight loop over an allocator that only pops and pushes one thread-local free list, behind the same two calls into a shared library.\n' \
		"${floor:-?}" "$(grep -cE '^[0-9.]+$' "$out/floor.txt")" >>"$out/results.md"
	if [ -n "$floor" ]; then
		# each allocator's median tight and batched ns over the floor
		awk -F'\t' -v floor="$floor" -v allocs="$allocs" '
			$1 == "fastpath" && $8 != "" { t[$2] = t[$2] " " $8; bt[$2] = bt[$2] " " $9 }
			function med(s,   v, n, i, j, x) {
				n = split(s, v, " ")
				for (i = 2; i <= n; i++)
					for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
				return n ? v[int((n + 1) / 2)] : 0
			}
			END {
				printf "\nOver the floor (median ns / floor):"
				n = split(allocs, a, " ")
				for (i = 1; i <= n; i++)
					if (a[i] in t)
						printf " %s %.2fx tight, %.2fx batch%s", a[i], med(t[a[i]]) / floor,
						    med(bt[a[i]]) / floor, i < n ? ";" : ".\n"
			}' "$tsv" >>"$out/results.md"
	fi
	;;
esac
cat "$out/results.md"
echo
say "total time $(($(date +%s) - start)) s; table in $out/results.md"
if [ -s "$out/problems.txt" ]; then
	cat "$out/problems.txt" >&2
	say "PROBLEMS FOUND: see above; per-run stderr is in $out/logs/"
	exit 1
fi
exit 0
