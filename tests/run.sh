#!/usr/bin/env bash
# tests/run.sh [-j JOBS] [-n] [-b CMD] BUILD[:GROUPS] ... - run the tests of `make check`:
# the C unit and stress programs, the real programs under LD_PRELOAD, the
# profiler's, report's, systemd's and containers' scripts and the bats
# suites, on each BUILD directory given (make check gives three: build,
# build-debug and build-san, so that their suites share one pool).
#   GROUPS        comma-separated groups of that build (unit stress real
#                 prof report systemd containers cli serve ptrace trace);
#                 without them, HC_TESTS="report cli" or every group
#   -j JOBS       suites run at once (default 1; make check 4): most suites
#                 wait on processes, sleeps and timeouts far more than they
#                 compute, so a 2-core machine runs four at a time; each
#                 suite's time limit grows with JOBS/2.
#   -n            only list the suites, in the order they would start, those
#                 in namespaces of their own or alone with their reason
#   -b CMD        CMD makes the builds after the first (make check: the debug
#                 and sanitizer builds, and the first build's unit and stress
#                 programs); the first build's suites that run alone run
#                 meanwhile, then its other suites until CMD ends, the
#                 others' suites after it (the first build's suites are
#                 listed again then)
# Prints one line per suite as it ends (with its failure's details, never
# interleaved with another's), then "N passed, N failed".  A test that
# cannot run on this machine at all prints "SKIP name: why" and passes; the
# line is repeated here, so that a skip is never silent.
#
# Suites named in OWN_NS, and the tests tagged machine of a bats suite, count,
# sweep or dump what every heapctl process they can see leaves, which another
# suite's processes would change, and their daemons would change the others':
# they run in the pool in a PID namespace and a /dev/shm of their own
# (tests/lib/isolate.sh), where they see only their own processes and no
# other suite's sweep or daemon of theirs reaches the rest.  Where
# namespaces cannot be made (not root), they run alone instead, as the
# suites in ALONE always do: after the others, one at a time with nothing
# else running.  Suites start longest first (by the times of the
# build's last run, or CI's in tests/lib/durations), so that a long one does
# not start last.
set -uo pipefail
jobs=1 dry=0 bcmd=""
while getopts j:nb: o; do
	case $o in
	j) jobs=$OPTARG ;;
	n) dry=1 ;;
	b) bcmd=$OPTARG ;;
	*) echo "usage: tests/run.sh [-j JOBS] [-n] [-b CMD] BUILD[:GROUPS] ..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- build
# The sanitizer build's options, unless the caller set its own: no leak
# check, as a command's memory goes at exit (LeakSanitizer's own scan at
# exit crashed in trace.bats's budget tests here: "Tracer caught signal
# 11"), and a stack with each UBSan report.  Here rather than in the
# Makefile, so that a suite run by hand sees what make check's does.
export ASAN_OPTIONS="${ASAN_OPTIONS-detect_leaks=0}" UBSAN_OPTIONS="${UBSAN_OPTIONS-print_stacktrace=1}"
specs=("$@")
root=$(cd "$(dirname "$0")/.." && pwd)

# suite: what of the machine it sees.  A bats suite's tests tagged machine
# (`# bats test_tags=machine`, the reason beside each) are one more suite,
# NAME:machine, treated so; the rest of the suite is not.
declare -A OWN_NS=(
	[serve/serve_archive]="its daemon archives every preloaded process's dumps, and its retention tests count them"
	[prof/daemon_shapes]="asserts that no heapctl-fetch staging file appears in /dev/shm while it runs"
	[prof/fork_children]="takes every heapctl segment in /dev/shm that appears during its run for its children's"
)
# suite: why it cannot share the machine at all.  A namespace hides the
# rest of the machine from a suite, not the suite from the rest: a daemon
# of the initial PID namespace sees every process and reaches its segment
# through /proc/PID/root, so a suite that counts the commands its targets
# receive runs alone (commands:machine saw one, isolated, in make check).
declare -A ALONE=(
	[containers/names]="counts every heapctl segment in /dev/shm before and after, its podman containers' too"
	[stress/mailbox]="counts every command its target receives, and serve and list reach every preloaded process"
	[cli/commands:machine]="asserts that its target received no command"
	[cli/namespaces:machine]="asserts that its target received no command"
	[cli/robustness:machine]="asserts that no client called its target"
	[cli/figures:machine]="compares the commands its target received, by two sources moments apart"
)
iso=0
unshare --pid --fork --mount-proc true 2>/dev/null && iso=1
# own_ns_why NAME: why suite NAME runs in namespaces of its own (or alone,
# without them); fails if it does not
own_ns_why() {
	if [[ $1 == *:machine ]]; then
		echo "its tests tagged machine, each with its reason"
	elif [ -n "${OWN_NS[$1]+x}" ]; then
		echo "${OWN_NS[$1]}"
	else
		return 1
	fi
}
# isolated NAME: suite NAME runs in namespaces of its own here
isolated() { [ "$iso" = 1 ] && own_ns_why "$1" >/dev/null; }
# alone_why NAME: why suite NAME runs alone; fails if it does not
alone_why() {
	if [ -n "${ALONE[$1]+x}" ]; then
		echo "${ALONE[$1]}"
	elif [ "$iso" = 0 ]; then
		own_ns_why "$1"
	else
		return 1
	fi
}

names=() cmds=() builds=() tmos=()
declare -A added=()
# add BUILD NAME TIMEOUT COMMAND...: one suite (once: the first build is
# listed again after the -b build, which makes the rest of its programs)
add() {
	local b=$1 n=$2 t=$3
	shift 3
	[ -z "${added["$b/$n"]+x}" ] || return 0
	added["$b/$n"]=1
	if isolated "$n"; then set -- "$root/tests/lib/isolate.sh" "$@"; fi
	builds+=("$b") names+=("$n") tmos+=("$t")
	cmds+=("$(printf '%q ' "$@")")
}

# list BUILD GROUPS: every suite of BUILD in GROUPS
list() {
	local build=$1 groups=" $2 " t b lib="$root/$1/libheapctl.so"
	want() { [[ $groups == *" $1 "* ]]; }
	for t in "$root/$build"/tests/unit/* "$root/$build"/tests/stress/*; do
		[[ -x $t && -f $t ]] || continue
		case "$t" in *.log) continue ;; esac
		want "$(basename "$(dirname "$t")")" || continue
		add "$build" "$(basename "$(dirname "$t")")/$(basename "$t")" "${RUN_TIMEOUT:-300}" "$t"
	done
	# libheapctl-secure.so (the misuse checks) through the API and stress tests
	if want unit && [ -f "$root/$build/libheapctl-secure.so" ]; then
		for t in "$root/$build"/tests/unit/api_* "$root/$build"/tests/unit/cxx "$root/$build"/tests/unit/cxx_new \
		    "$root/$build"/tests/stress/stress "$root/$build"/tests/stress/misc; do
			[ -x "$t" ] || continue
			b=${t#"$root/$build/tests/"}
			add "$build" "$b-secure" "${RUN_TIMEOUT:-300}" env LD_PRELOAD="$root/$build/libheapctl-secure.so" "$t"
		done
	fi
	# the remote cache keeping blocks of up to 1 KiB only (tcache_max); and
	# no control thread, so that only the program's allocations decay
	if want unit && [ -x "$root/$build/tests/unit/api_pages" ]; then
		add "$build" "unit/api_pages-tcache_max" "${RUN_TIMEOUT:-300}" env MALLOC_CONF=tcache_max:1024 \
		    "$root/$build/tests/unit/api_pages"
		add "$build" "unit/api_pages-nocontrol" "${RUN_TIMEOUT:-300}" env MALLOC_CONF=control:false \
		    "$root/$build/tests/unit/api_pages"
	fi
	# the allocator alone (allocator/ with the agent's hooks stubbed, sampling
	# every 64 KiB): its tests, built without -lheapctl, have no mallctl to use
	if want unit && [ -f "$root/$build/libheapctl-alone.so" ]; then
		for t in "$root/$build"/tests-alone/unit/* "$root/$build"/tests-alone/stress/*; do
			[[ -x $t && -f $t ]] || continue
			b=${t#"$root/$build/tests-alone/"}
			add "$build" "$b-alone" "${RUN_TIMEOUT:-300}" env LD_PRELOAD="$root/$build/libheapctl-alone.so" \
			    HC_TEST_ALLOW_NO_MALLCTL=1 "$t"
		done
	fi
	want real && [ -x "$root/tests/real/run.sh" ] && add "$build" real/programs "${RUN_TIMEOUT:-300}" "$root/tests/real/run.sh" "$lib"
	if want prof; then
		for t in "$root"/tests/prof/*.sh; do
			[ -x "$t" ] || continue
			add "$build" "prof/$(basename "$t" .sh)" "${RUN_TIMEOUT:-300}" "$t" "$root/$build"
		done
	fi
	if want report; then
		for t in "$root/$build"/tests/engine/*; do
			[[ -x $t && -f $t ]] || continue
			case "$t" in *.log) continue ;; esac
			add "$build" "engine/$(basename "$t")" "${RUN_TIMEOUT:-300}" "$t"
		done
		for t in "$root"/tests/report/*.sh; do
			[ -x "$t" ] || continue
			add "$build" "report/$(basename "$t" .sh)" "${RUN_TIMEOUT:-300}" "$t" "$root/$build"
		done
	fi
	# systemd/*.sh boot a real systemd in a container; the first run also
	# builds its root file system (mmdebstrap, ~75 s more), hence the longer
	# limit.  containers/*.sh run podman containers of an image made with
	# mmdebstrap and cached as systemd's root file system is (~30 s more).
	if want systemd; then
		for t in "$root"/tests/systemd/*.sh; do
			[ -x "$t" ] || continue
			add "$build" "systemd/$(basename "$t" .sh)" 900 "$t" "$root/$build"
		done
	fi
	if want containers; then
		for t in "$root"/tests/containers/*.sh; do
			[ -x "$t" ] || continue
			add "$build" "containers/$(basename "$t" .sh)" 600 "$t" "$root/$build"
		done
	fi
	local g
	for g in cli serve ptrace trace; do
		want $g || continue
		for t in "$root/tests/$g"/*.bats; do
			[ -f "$t" ] || continue
			b="$g/$(basename "$t" .bats)"
			if grep -q '^# bats test_tags=machine' "$t"; then
				add "$build" "$b" "${RUN_TIMEOUT:-300}" env HEAPCTL_BUILD="$root/$build" bats --filter-tags '!machine' "$t"
				add "$build" "$b:machine" "${RUN_TIMEOUT:-300}" env HEAPCTL_BUILD="$root/$build" bats --filter-tags machine "$t"
			else
				add "$build" "$b" "${RUN_TIMEOUT:-300}" env HEAPCTL_BUILD="$root/$build" bats "$t"
			fi
		done
	done
}

# list_spec BUILD[:GROUPS]
list_spec() {
	local spec=$1 groups
	if [[ $spec == *:* ]]; then
		groups=${spec#*:}
		groups=${groups//,/ }
	else
		groups=${HC_TESTS:-unit stress real prof report systemd containers cli serve ptrace trace}
	fi
	list "${spec%%:*}" "$groups"
}

# what each line calls a suite: its name, after its build's when there are several
multi=0
[ $# -gt 1 ] && multi=1
label() { if [ "$multi" = 1 ]; then echo "${builds[$1]}/${names[$1]}"; else echo "${names[$1]}"; fi; }

# longest first by the build's last run (tests/durations in it), else by
# tests/lib/durations (CI's); a suite in neither starts first of all
declare -A last=()
for spec in "$@"; do
	build=${spec%%:*}
	for f in "$root/tests/lib/durations" "$root/$build/tests/durations"; do
		[ -f "$f" ] || continue
		while read -r s n; do
			[[ $s == '#'* ]] || last["$build/$n"]=$s
		done <"$f"
	done
done
# partition: the suites not run yet, longest first, into pool and alone
declare -A ran=()
partition() {
	local i
	pool=() alone=()
	while read -r _ i; do
		[ -z "${ran[$i]+x}" ] || continue
		if alone_why "${names[$i]}" >/dev/null; then alone+=("$i"); else pool+=("$i"); fi
	done < <(for i in "${!names[@]}"; do echo "${last["${builds[$i]}/${names[$i]}"]:-100000} $i"; done | sort -s -k1,1nr)
}

if [ "$dry" = 1 ]; then
	for spec in "$@"; do list_spec "$spec"; done
	partition
	for i in "${pool[@]}"; do
		if isolated "${names[$i]}"; then
			echo "$(label "$i")  (namespaces of its own: $(own_ns_why "${names[$i]}"))"
		else
			echo "$(label "$i")"
		fi
	done
	for i in "${alone[@]}"; do echo "$(label "$i")  (alone: $(alone_why "${names[$i]}"))"; done
	exit 0
fi

pass=0 fail=0 failed=() failed_logs=()
declare -A started=() pids=()
# a suite's time limit is for a hang; suites that share the CPUs take
# longer (inject 58 s alone, over 300 s four at a time under a load of 15)
scale=$(((jobs + 1) / 2))
# start I: suite I in the background, its output in its log, its status in
# the log's .rc
start() {
	local i=$1 log="$root/${builds[$1]}/tests/${names[$1]}.log"
	mkdir -p "$(dirname "$log")"
	rm -f "$log.rc"
	started[$i]=$SECONDS
	( eval "timeout $((tmos[$i] * scale)) ${cmds[$i]}" >"$log" 2>&1; echo $? >"$log.rc" ) &
	pids[$!]=$i
}
# report I: its line, and what failed first (a bats "not ok" and its
# diagnostics, a FAIL line), then how the log begins (a message from ld.so,
# say) and ends
report() {
	local i=$1 log="$root/${builds[$1]}/tests/${names[$1]}.log" secs=$((SECONDS - started[$1])) rc
	rc=$(cat "$log.rc" 2>/dev/null || echo 1)
	echo "$secs ${names[$i]}" >>"$root/${builds[$i]}/tests/durations.new"
	if [ "$rc" = 0 ]; then
		pass=$((pass + 1)); echo "ok   $(label "$i") (${secs}s)"
		grep -m 1 '^SKIP ' "$log" | sed 's/^/     ! /'
	else
		fail=$((fail + 1)); failed+=("$(label "$i")"); failed_logs+=("$log"); echo "FAIL $(label "$i") (${secs}s)"
		grep -n -m 3 -A 12 -E '^not ok|^FAIL|FAIL:' "$log" | sed 's/^/     ! /'
		head -n 3 "$log" | sed 's/^/     < /'
		tail -n 20 "$log" | sed 's/^/     | /'
	fi
	rm -f "$log.rc"
}
# reap: wait for any suite to end and report it
reap() {
	local p=""
	if ! wait -n -p p && [ -z "$p" ]; then
		# no child left to wait for: report what is left (no .rc: failed)
		for p in "${!pids[@]}"; do report "${pids[$p]}"; unset "pids[$p]"; done
		return 0
	fi
	[ -n "${pids[$p]+x}" ] || return 0
	report "${pids[$p]}"
	unset "pids[$p]"
}
# run_pool [UNTIL]: start the suites in pool[], JOBS at a time, reaping
# as they end; with UNTIL, start none once file UNTIL exists (the rest are
# partitioned again later)
run_pool() {
	local i until=${1:-}
	for i in "${pool[@]}"; do
		while [ ${#pids[@]} -ge "$jobs" ] && { [ -z "$until" ] || [ ! -f "$until" ]; }; do reap; done
		[ -n "$until" ] && [ -f "$until" ] && return 0
		start "$i"
		ran[$i]=1
	done
}
# alone_all: the suites in alone[], one at a time
alone_all() {
	local i p
	for i in "${alone[@]}"; do
		start "$i"
		for p in "${!pids[@]}"; do wait "$p"; done
		report "$i"
		pids=()
		ran[$i]=1
	done
}
for spec in "$@"; do rm -f "$root/${spec%%:*}/tests/durations.new"; done
list_spec "$1"
if [ -n "$bcmd" ]; then
	# the other builds are made while the first build's suites that run
	# alone run: nothing of heapctl's runs in a compiler
	blog="$root/${1%%:*}/tests/build.log"
	mkdir -p "$(dirname "$blog")"
	t0=$SECONDS
	rm -f "$blog.rc"
	(
		bash -c "$bcmd" >"$blog" 2>&1
		echo $? >"$blog.rc"
	) &
	bpid=$!
	partition
	alone_all
	# then the first build's other suites while CMD still runs: they may
	# share the machine with a compiler, and its last minute (a few long
	# compiles and links) left most of the CPU idle
	partition
	run_pool "$blog.rc"
	wait "$bpid" 2>/dev/null   # reap may have taken it: its status is in the file
	if [ "$(cat "$blog.rc" 2>/dev/null)" = 0 ]; then
		echo "ok   build: $bcmd ($((SECONDS - t0))s)"
	else
		fail=$((fail + 1)); failed+=(build); echo "FAIL build: $bcmd ($((SECONDS - t0))s)"
		grep -m 5 -E 'error|Error' "$blog" | sed 's/^/     ! /'
		tail -n 10 "$blog" | sed 's/^/     | /'
	fi
	# what CMD made of the first build too (make check: its unit and
	# stress programs, which no suite that runs alone needs)
	list_spec "$1"
fi
shift
for spec in "$@"; do list_spec "$spec"; done
partition
run_pool
while [ ${#pids[@]} -gt 0 ]; do reap; done
alone_all
# this run's times, and the last run's of suites it did not run
for spec in "${specs[@]}"; do
	f="$root/${spec%%:*}/tests/durations"
	[ -f "$f.new" ] || continue
	awk 'FNR == NR { seen[$2] = 1; print; next } !($2 in seen)' "$f.new" "$f" 2>/dev/null >"$f.tmp" ||
		cp "$f.new" "$f.tmp"
	mv "$f.tmp" "$f" && rm -f "$f.new"
done
# again at the end, where a long run's output is still read when its
# middle is cut: each failed suite's first failure, in a few lines
for log in "${failed_logs[@]:0:8}"; do
	echo "why ${log#"$root"/}:"
	grep -m 1 -A 7 -E '^not ok|^FAIL|FAIL:' "$log" | cut -c 1-240 | sed 's/^/     ! /'
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
