#!/usr/bin/env bash
# tests/prof/exit_midump.sh BUILD - a process that exits while its timer
# thread writes a dump leaves no temporary file behind: exit() waits for a
# dump in flight (and starts no new one) before the process goes.
#
# The CLI suites' target, with 30,000 distinct stacks sampled at
# lg_prof_sample:0, takes tens of milliseconds per timer dump (kind t,
# every second); it is told to exit (SIGTERM: it returns from main) at a
# random moment around the first timer dump, twelve times.  Before the
# wait, about one run in three left a "*.heap.tmp.<pid>" file.
source "$(dirname "$0")/../lib/prof.sh"
hc_setup exit_midump "$@"

target=$BUILD/tests/programs/target
[ -x "$target" ] || { fail "$target missing (make $BUILD/tests/programs/target)"; finish; }
for i in $(seq 12); do
	HEAPCTL_CONF=prof:true,lg_prof_sample:0,prof_timer_s:1,prof_prefix:$WORK/t \
	    "$target" stacks=30000 seconds=600 >"$WORK/out.$i" 2>&1 &
	p=$!
	sleep "1.$((RANDOM % 3))$((RANDOM % 10))"
	kill -TERM "$p"
	st=0
	wait "$p" || st=$?
	[ "$st" -eq 0 ] || fail "run $i: exit status $st: $(tail -2 "$WORK/out.$i" | tr '\n' ' ')"
done
dumps=$(ls "$WORK" | grep -c '\.t[0-9]*\.heap$' || true)
[ "$dumps" -gt 0 ] || fail "no timer dump was written in 12 runs (the test no longer races one)"
check_no_tmp "$WORK"
echo "exit_midump: 12 exits, $dumps timer dumps written, no temporary file left"
finish
