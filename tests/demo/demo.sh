#!/usr/bin/env bash
# tests/demo/demo.sh BUILD - what `make demo` runs: profile a live service
# with heapctl, step by step, and report on it.
#
# The bundled example service (tests/demo/service.c) is compiled into
# BUILD/demo/ and started with libheapctl.so preloaded and profiling
# compiled in but off, the way a production daemon would run.  Then, printing
# each command before it runs it: heapctl status, heapctl on, a few seconds
# of traffic, heapctl dump, heapctl report (text, SVG flame graph, pprof),
# a dump every second and the trend over them (report --series), and a
# clean stop.  Everything it writes goes to BUILD/demo/out/, which is
# emptied at the start of each run.
#
# Exits 0 when every step worked; otherwise the first failed step is named
# on stderr, the service is stopped and the exit status is 1.
# Environment: DEMO_SECONDS (traffic while profiling, default 4).
set -Eeuo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
secs=${DEMO_SECONDS:-4}

bold='' dim='' off=''
if [ -t 1 ]; then bold=$(printf '\033[1m') dim=$(printf '\033[2m') off=$(printf '\033[0m'); fi

die() {
	echo "demo: FAILED: $*" >&2
	exit 1
}
# An unexpected failure of any other command (set -e) is named too.
trap 'echo "demo: FAILED: line $LINENO: $BASH_COMMAND (exit $?)" >&2' ERR
say() { printf '\n%s%s%s\n' "$bold" "$*" "$off"; }
show() { printf '%s$ %s%s\n' "$dim" "$*" "$off"; }      # a command, as typed
# step DESCRIPTION -- COMMAND...: show COMMAND, run it (output to the
# terminal), and stop with DESCRIPTION if it fails.
step() {
	local what=$1; shift 2
	show "$*"
	"$@" || die "$what (exit $?): $*"
}

lib=$build/libheapctl.so
[ -f "$lib" ] || die "$lib is missing (run make)"
[ -x "$build/heapctl" ] || die "$build/heapctl is missing (run make)"
command -v gcc >/dev/null || die "gcc is not installed"
# `heapctl` below is this build's, so the commands shown are the ones run.
PATH=$build:$PATH
unset MALLOC_CONF HEAPCTL_CONF LD_PRELOAD

bin=$build/demo/service
out=$build/demo/out
rm -rf "$out"
mkdir -p "$out"

# The service, stopped at exit whatever happened.
pid=
stop_service() {
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
}
trap stop_service EXIT
trap 'echo "demo: interrupted" >&2; exit 130' INT TERM
alive() {
	kill -0 "$pid" 2>/dev/null && return 0
	echo "demo: the service is gone; its output:" >&2
	sed 's/^/    /' "$out/service.log" >&2
	die "the service $pid exited early"
}

say "heapctl demo: a leaking service, profiled live without restarting it"
echo "Build: $build   output: $out"

say "1. Build the example service (tests/demo/service.c) with frame pointers and debug info"
step "cannot compile the service" -- \
	gcc -std=gnu11 -O1 -g -fno-omit-frame-pointer -Wall -pthread -o "$bin" "$root/tests/demo/service.c"

conf="prof:true,prof_active:false,prof_accum:true,lg_prof_sample:14,prof_thread_names:true,prof_prefix:$out/service"
say "2. Start it with libheapctl.so preloaded: profiling compiled in, but off (it costs nothing yet)"
echo "   prof_active:false - no sampling until we switch it on"
echo "   lg_prof_sample:14 - when on, one sample per 16 KiB allocated on average"
echo "   prof_accum:true   - dumps also count memory allocated and freed since, not only what is in use"
show "LD_PRELOAD=$lib HEAPCTL_CONF=$conf $bin &"
LD_PRELOAD=$lib HEAPCTL_CONF=$conf "$bin" seconds=60 >"$out/service.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	grep -q '^ready' "$out/service.log" 2>/dev/null && break
	alive
	sleep 0.05
done
grep -q '^ready' "$out/service.log" || die "the service did not say it was ready within 5 s"
# The control segment comes up with the library; wait until heapctl sees it.
for _ in $(seq 100); do
	heapctl status "$pid" >/dev/null 2>&1 && break
	alive
	sleep 0.05
done
echo "The service runs as PID $pid: two http-worker threads and a bufpool thread."
sleep 1.5      # some traffic, and a refresh of the counters heapctl shows
alive

say "3. Find it: every process running the library, then this one's settings and counters"
step "heapctl list failed" -- heapctl list
step "heapctl status failed" -- heapctl status "$pid"

say "4. Switch sampling on, in the running process"
step "heapctl on failed" -- heapctl on "$pid"

say "5. Let it serve requests for $secs s while it is sampled"
show "sleep $secs"
sleep "$secs"
alive

say "6. Write a heap profile now (the service writes it; heapctl prints its path)"
show "heapctl dump $pid --prefix $out/demo"
heap=$(heapctl dump "$pid" --prefix "$out/demo") || die "heapctl dump failed (exit $?)"
echo "$heap"
[ -s "$heap" ] || die "heapctl dump printed '$heap', which is not a non-empty file"

say "7. Which code holds the memory it allocated since sampling went on, and still has not freed?"
echo "   (jeprof --text's layout: flat = allocated in the function itself, cum = in it and in what it calls)"
if ! heapctl help report >/dev/null 2>&1; then
	die "this heapctl has no 'report' command ($(command -v heapctl)); the profile is $heap"
fi
step "heapctl report failed" -- heapctl report "$heap" --top 15
echo
echo "session_cache_insert keeps every visitor's session and nothing evicts them: the leak."
echo "grow_buffer_pool only ever adds buffers: growth that is not lost, but never comes back."

say "8. And what was allocated in all, freed or not, since sampling went on? (the churn)"
step "heapctl report --alloc_space failed" -- heapctl report "$heap" --alloc_space --top 8

say "9. The same profile as an SVG flame graph, and as a pprof protobuf"
step "heapctl report --svg failed" -- heapctl report "$heap" --svg "$out/demo.svg"
[ -s "$out/demo.svg" ] || die "heapctl report --svg wrote no $out/demo.svg"
step "heapctl report --pprof failed" -- heapctl report "$heap" --pprof "$out/demo.pb.gz"
[ -s "$out/demo.pb.gz" ] || die "heapctl report --pprof wrote no $out/demo.pb.gz"
gzip -t "$out/demo.pb.gz" 2>/dev/null || die "$out/demo.pb.gz is not a gzip file"

say "10. Which site keeps growing?  A dump every second for $secs s, then the trend over the series"
step "heapctl set prof.timer_s=1 failed" -- heapctl set "$pid" prof.timer_s=1
show "sleep $secs"
sleep "$secs"
alive
step "heapctl set prof.timer_s=0 failed" -- heapctl set "$pid" prof.timer_s=0
step "heapctl report --series failed" -- \
	heapctl report --series "$out/service.$pid." --top 6 --svg "$out/series.svg" --text
[ -s "$out/series.svg" ] || die "heapctl report --series --svg wrote no $out/series.svg"
echo
echo "Sites marked * only grew from one dump to the next: the leak comes first."

say "11. Where does its resident memory go, and how long do its objects live?"
step "heapctl explain failed" -- heapctl explain "$pid" --classes 4
step "heapctl report --lifetime failed" -- heapctl report "$heap" --lifetime --top 6

say "12. Stop the service (SIGTERM: it shuts down cleanly)"
show "kill $pid"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] || die "the service exited with status $rc on SIGTERM; its output is in $out/service.log"
sed 's/^/    /' "$out/service.log"

say "Done.  Files in $out:"
echo "  $heap   the heap profile (jemalloc heap_v2; jeprof reads it too)"
echo "  $out/demo.svg   flame graph: open it in a browser"
echo "  $out/series.svg   the top sites over the timer dumps, as a chart"
echo "  $out/demo.pb.gz   pprof profile, for example:"
echo "      go tool pprof -top $out/demo.pb.gz"
echo "      go tool pprof -http=localhost:8080 $out/demo.pb.gz"
echo "  $out/service.log   the service's output"
echo "  $bin   the service, to try yourself:"
echo "      LD_PRELOAD=$lib $bin &  then  heapctl on; heapctl dump ..."
