#!/usr/bin/env bats
# What the control plane must survive (ARCHITECTURE): many clients at once,
# clients and targets killed in the middle of a command, garbage written
# into the segment, other users, fork, PID reuse, a thousand commands in a
# row, control:false, start-up and exit.

load ../lib/helpers

HDR=192   # sizeof(hc_shm_header_t), fixed by the ABI

setup_file() {
	# where the mailbox slots are, from the header the library was built with
	local src
	src=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)/shm
	cc -I"$src" -o "$BATS_FILE_TMPDIR/offsets" -x c - <<'EOF'
#include <stdio.h>
#include <stddef.h>
#include "heapctl_shm.h"
int main(void)
{
	printf("%zu %zu %zu %d\n", sizeof(hc_shm_t), offsetof(hc_shm_t, box.slot[0].state),
	    sizeof(hc_shm_slot_t), HC_SHM_SLOTS);
	return 0;
}
EOF
}

# a. ------------------------------------------------------------------------------------

@test "a. four clients dumping at once and two watchers: 40 distinct files, each watcher sees 40 dumps" {
	start_target grow=0
	# no --count: the dumps' memory may make a high-water event among them
	for w in 1 2; do
		"$HEAPCTL" watch "$TPID" --json >"$T/watch$w" 2>"$T/watch$w.err" &
		eval "w$w=\$!"
		track $!
	done
	wait_for 5 maps_segment "$w1" "$TPID"
	wait_for 5 maps_segment "$w2" "$TPID"
	sleep 0.2
	mkdir "$T/d"
	clients=()
	for i in 1 2 3 4; do
		(
			for j in $(seq 10); do
				"$HEAPCTL" dump "$TPID" --prefix "$T/d/c$i" >>"$T/out$i" 2>>"$T/err$i" ||
				    echo "dump $j exit $?" >>"$T/err$i"
			done
		) &
		clients+=($!)
		track $!
	done
	for c in "${clients[@]}"; do wait "$c"; done
	cat "$T"/err* 2>/dev/null || true
	[ -z "$(cat "$T"/err*)" ]
	[ "$(cat "$T"/out* | wc -l)" -eq 40 ]
	[ "$(cat "$T"/out* | sort -u | wc -l)" -eq 40 ]
	[ "$(ls "$T/d" | wc -l)" -eq 40 ]
	for f in $(cat "$T"/out*); do [[ "$(head -c 8 "$f")" == heap_v2/ ]]; done

	wait_for 10 eval '[ "$(grep -c "\"type\": \"dump\"" "$T/watch1")" -ge 40 ] &&
	    [ "$(grep -c "\"type\": \"dump\"" "$T/watch2")" -ge 40 ]'
	kill -TERM "$w1" "$w2"
	wait "$w1" || true
	wait "$w2" || true
	for w in 1 2; do
		json_lines "$T/watch$w"
		grep -v '"type": "dump"' "$T/watch$w" || true
		[ "$(count_events "$T/watch$w" dump)" -eq 40 ]
		# the same 40 paths the clients printed
		[ "$(python3 -c '
import json, sys
print("\n".join(sorted(e["path"] for e in map(json.loads, open(sys.argv[1])) if e["type"] == "dump")))' "$T/watch$w")" = "$(cat "$T"/out* | sort)" ]
	done
}

# b. ------------------------------------------------------------------------------------

@test "b. eight clients killed with SIGKILL mid-command: their slots come back, 20 sets then succeed" {
	start_target
	stop_target "$TPID"
	for i in $(seq 8); do
		"$HEAPCTL" dump "$TPID" -o "$T/k$i.heap" >/dev/null 2>&1 &
		c=$!
		track "$c"
		sleep 0.2
		kill -KILL "$c"
		wait "$c" 2>/dev/null || true
	done
	kill -CONT "$TPID"
	t0=$(now_ms)
	for i in $(seq 20); do
		run "$HEAPCTL" set "$TPID" prof.lg_sample=$((i % 20))
		[ "$status" -eq 0 ] || { echo "set $i: exit $status: $output"; return 1; }
		[ "$output" = "$TPID: prof.lg_sample=$((i % 20))" ]
	done
	echo "20 sets took $(($(now_ms) - t0)) ms"
	[ "$(status_field "$TPID" prof.lg_sample)" = 0 ]
	kill -0 "$TPID"
}

# c. ------------------------------------------------------------------------------------

@test "c. target killed mid-command: the client ends at once with exit 3 'exited'" {
	start_target
	stop_target "$TPID"
	"$HEAPCTL" dump "$TPID" -o "$T/c.heap" >"$T/c.out" 2>"$T/c.err" &
	c=$!
	track "$c"
	# until the client is waiting for the answer (a loaded machine takes
	# longer to get there)
	sleep 1
	kill -KILL "$TPID"
	t0=$(now_ms)
	wait_status "$c"
	t1=$(now_ms)
	[ "$status" -eq 3 ]
	[ "$(cat "$T/c.err")" = "heapctl: process $TPID exited before answering" ]
	echo "client ended $((t1 - t0)) ms after the kill"
	[ $((t1 - t0)) -lt 2000 ]
}

@test "c2. target killed while its parent has not reaped it yet (a zombie): clients see it exited" {
	# the target's parent is a sleep, which never waits for its children;
	# a supervisor that is slow to reap, or PID 1 of a container, does that
	HEAPCTL_CONF=$DEFAULT_CONF bash -c 'cd "$1" || exit 1; "$2" seconds=600 >z.out 2>&1 & exec sleep 60' _ "$T" "$TARGET" &
	parent=$!
	track "$parent"
	wait_for 5 grep -q '^ready ' "$T/z.out"
	TPID=$(awk '/^ready /{print $2}' "$T/z.out")
	track "$TPID"
	wait_for 5 control_running "$TPID"
	"$HEAPCTL" watch "$TPID" --json >"$T/w.out" 2>&1 &
	w=$!
	track "$w"
	wait_for 5 maps_segment "$w" "$TPID"
	stop_target "$TPID"
	"$HEAPCTL" dump "$TPID" -o "$T/z.heap" >"$T/c.out" 2>"$T/c.err" &
	c=$!
	track "$c"
	# the client has the segment mapped (then posts at once), as in c
	wait_for 5 maps_segment "$c" "$TPID"
	sleep 0.3
	kill -KILL "$TPID"
	wait_for 2 eval "grep -q '^State:.*Z' /proc/$TPID/status 2>/dev/null"
	grep '^State:' /proc/$TPID/status
	t0=$(now_ms)
	wait_status "$c"
	t1=$(now_ms)
	dump_status=$status
	echo "dump: exit $dump_status after $((t1 - t0)) ms: $(cat "$T/c.err")"
	wait_for 2 eval '! kill -0 $w 2>/dev/null' || true
	watch_running=0
	kill -0 "$w" 2>/dev/null && watch_running=1
	echo "watch still running 2 s later: $watch_running; it printed: $(cat "$T/w.out")"
	run "$HEAPCTL" status "$TPID"
	echo "status: exit $status: $output"
	status_status=$status
	status_output=$output

	[ "$dump_status" -eq 3 ]
	[ "$(cat "$T/c.err")" = "heapctl: process $TPID exited before answering" ]
	[ $((t1 - t0)) -lt 2000 ]
	[ "$watch_running" -eq 0 ]
	[ "$(tail -n1 "$T/w.out")" = "{\"type\": \"gone\", \"pid\": $TPID}" ]
	[ "$status_status" -eq 3 ]
	[ "$status_output" = "heapctl: process $TPID has exited" ]
}

# d. ------------------------------------------------------------------------------------

@test "d. random bytes over the whole segment: exit 6 at once; the target lives on and exits 0" {
	start_target
	f=$(seg "$TPID")
	head -c "$(stat -c %s "$f")" /dev/urandom | dd of="$f" conv=notrunc status=none
	t0=$(now_ms)
	run timeout 20 "$HEAPCTL" status "$TPID"
	t1=$(now_ms)
	[ "$status" -eq 6 ]
	[ "$output" = "heapctl: segment /proc/$TPID/root/dev/shm/heapctl.$TPID of process $TPID is corrupt (bad magic)" ]
	[ $((t1 - t0)) -lt 1000 ]
	run timeout 20 "$HEAPCTL" set "$TPID" prof.active=false
	[ "$status" -eq 6 ]
	sleep 2
	kill -0 "$TPID"
	kill -TERM "$TPID"
	wait_status "$TPID"
	[ "$status" -eq 0 ]
	[ ! -e "$f" ]
}

@test "d. random bytes after the header: every command ends in time with 0, 6 or 7; control comes back" {
	start_target -c prof:true    # the default refresh, 1000 ms
	f=$(seg "$TPID")
	size=$(stat -c %s "$f")
	for round in 1 2 3; do
		head -c $((size - HDR)) /dev/urandom |
		    dd of="$f" bs=$HDR seek=1 conv=notrunc status=none
		"$HEAPCTL" watch "$TPID" --json --count 1 >"$T/w$round" 2>&1 &
		w=$!
		track "$w"
		for cmd in "status $TPID" "status $TPID --json" "set $TPID prof.active=true" \
		    "dump $TPID -o $T/r$round.heap" "on $TPID" "off $TPID" "reset $TPID" \
		    "set $TPID prof.lg_sample=$((10 + round))" list; do
			t0=$(now_ms)
			run timeout 20 $HEAPCTL $cmd --timeout 2
			t1=$(now_ms)
			echo "round $round: $cmd: exit $status in $((t1 - t0)) ms: ${output:0:200}"
			[[ " 0 6 7 " == *" $status "* ]]
			[ $((t1 - t0)) -lt 4000 ]
		done
		kill -0 "$TPID"
		# the watcher saw the settings change, or the target went on
		wait_for 5 eval '! kill -0 $w 2>/dev/null' || true
		kill "$w" 2>/dev/null || true
		wait "$w" || true
	done
	sleep 3
	run "$HEAPCTL" set "$TPID" prof.active=true
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: prof.active=true" ]
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o "$T/after.heap"
	[ "$status" -eq 0 ]
	[[ "$(head -c 8 "$T/after.heap")" == heap_v2/ ]]
	kill -TERM "$TPID"
	wait_status "$TPID"
	[ "$status" -eq 0 ]
}

@test "d. command slots left in a state no client is in (BUSY with nothing running) are reclaimed" {
	read -r size slot0 slotsize nslots < <("$BATS_FILE_TMPDIR/offsets")
	start_target
	f=$(seg "$TPID")
	[ "$(stat -c %s "$f")" -eq "$size" ]
	for ((i = 0; i < nslots; i++)); do
		poke "$f" $((slot0 + i * slotsize)) '<I' 3     # HC_SLOT_BUSY
	done
	sleep 3    # more than the 2 s lease
	run "$HEAPCTL" set "$TPID" prof.active=true --timeout 2
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: prof.active=true" ]
}

# runs alone (tests/run.sh): asserts that no client called its target, and another suite's
# daemon asks every preloaded process
# bats test_tags=machine
@test "d. a process no client has called keeps its command slots unwritten: 16 KiB or less of /dev/shm, 40 before; the first command still answers" {
	start_target -n grow=0
	f=$(seg "$TPID")
	sleep 1    # ten control periods
	blocks=$(stat -c %b "$f")
	echo "segment: $blocks blocks of 512 bytes"
	[ "$blocks" -le 32 ]
	run "$HEAPCTL" set "$TPID" prof.active=true --timeout 2
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: prof.active=true" ]
}

# e. ------------------------------------------------------------------------------------

@test "e. another uid cannot open the segment: mode 600, exit 5" {
	need_root
	mkdir "$T/nobody"
	chown nobody "$T/nobody"
	start_target -u nobody -d "$T/nobody"
	f=$(seg "$TPID")
	[ "$(stat -c '%a %U' "$f")" = "600 nobody" ]
	for path in "$f" "/proc/$TPID/root$f"; do
		run setpriv --reuid=daemon --regid=daemon --clear-groups dd if="$path" of=/dev/null count=1 status=none
		[ "$status" -ne 0 ]
		[[ "$output" == *"Permission denied"* ]]
	done
	run setpriv --reuid=daemon --regid=daemon --clear-groups "$HEAPCTL" set "$TPID" prof.active=false
	[ "$status" -eq 5 ]
	[[ "$output" == *"belongs to nobody (uid 65534)"* ]]
	[ "$(status_field "$TPID" prof.active)" = true ]
}

# f. ------------------------------------------------------------------------------------

@test "f. fork: parent and child each have their own segment and settings" {
	start_target fork=1
	[ -n "$CHILD" ] && [ "$CHILD" != "$TPID" ]
	[ -f "$(seg "$TPID")" ]
	[ -f "$(seg "$CHILD")" ]
	run "$HEAPCTL" set "$CHILD" prof.lg_sample=7
	[ "$status" -eq 0 ]
	[ "$output" = "$CHILD: prof.lg_sample=7" ]
	[ "$(status_field "$CHILD" prof.lg_sample)" = 7 ]
	[ "$(status_field "$CHILD" pid)" = "$CHILD" ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 19 ]
	[ "$(status_field "$TPID" pid)" = "$TPID" ]

	run --separate-stderr "$HEAPCTL" dump "$CHILD" --prefix "$T/child"
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^$T/child\.$CHILD\.[0-9]+\.m[0-9]+\.heap$ ]]
	[ "$(status_field "$CHILD" dumps)" = 1 ]
	[ "$(status_field "$TPID" dumps)" = 0 ]

	# the parent ends the child on SIGTERM; both segments go
	kill -TERM "$TPID"
	wait_status "$TPID"
	[ "$status" -eq 0 ]
	wait_for 2 eval '[ ! -e "$(seg "$CHILD")" ]'
	[ ! -e "$(seg "$TPID")" ]
}

@test "f. fork: a child's control thread starts in the fork and publishes 20 ms after it, also if the child never allocates" {
	# the child stops itself as fork returns; on a loaded machine it may
	# get there after the 20 ms, and then it has published, as it should:
	# up to 5 tries for one that stopped in time
	local try
	for try in 1 2 3 4 5; do
		start_target fork=stop
		wait_for 5 eval '[ "$(awk "{ print \$3 }" "/proc/$CHILD/stat")" = T ]'
		[ ! -e "$(seg "$CHILD")" ] && break
		echo "try $try: the child published before it stopped"
		kill -KILL "$CHILD" "$TPID"
		wait "$TPID" 2>/dev/null || true
		rm -f "$(seg "$CHILD")" "$(seg "$TPID")"
	done
	# stopped as fork returned: our thread exists, waiting out the grace
	[ "$(ls "/proc/$CHILD/task" | wc -l)" -eq 2 ]
	[ ! -e "$(seg "$CHILD")" ]
	run "$HEAPCTL" status "$CHILD"
	[ "$status" -eq 4 ]
	[ "$output" = "heapctl: process $CHILD, a child of fork (of $TPID), has published no segment: its control thread does so 20 ms after the fork, and the process is stopped; 'heapctl doctor $CHILD' says more" ]
	kill -CONT "$CHILD"
	wait_for 5 control_running "$CHILD"
	[ "$(ls "/proc/$CHILD/task" | wc -l)" -eq 2 ]
	[ "$(status_field "$CHILD" pid)" = "$CHILD" ]
}

# g. ------------------------------------------------------------------------------------

# runs alone (tests/run.sh): sweeps stale segments and counts heapctl list's rows: any heapctl process that starts meanwhile changes both
# bats test_tags=machine
@test "g. PID reuse: a segment whose pid/start time are not the process's is stale: exit 4, removed" {
	start_target
	sleep 100 &
	s=$!
	track "$s"
	cp "$(seg "$TPID")" "$(seg "$s")"
	poke "$(seg "$s")" 16 '<i' "$s"
	run "$HEAPCTL" status "$s"
	[ "$status" -eq 4 ]
	[ "$output" = "heapctl: process $s is not running libheapctl.so (removed the stale segment of an earlier process $s)" ]
	[ ! -e "$(seg "$s")" ]

	# the same with the pid left as it was
	cp "$(seg "$TPID")" "$(seg "$s")"
	run "$HEAPCTL" set "$s" prof.active=false
	[ "$status" -eq 4 ]
	[[ "$output" == *"stale segment"* ]]
	[ ! -e "$(seg "$s")" ]
	[ "$(status_field "$TPID" prof.active)" = true ]
}

# bats test_tags=machine
@test "g. a target killed with SIGKILL leaves its segment; heapctl list removes it" {
	need_pidns
	run in_pidns '
ns_start; p=$NSPID
kill -KILL "$p"; wait "$p" 2>/dev/null
[ -e /dev/shm/heapctl.$p ] && echo "left behind"
"$H" status "$p"; echo "exit $?"
"$H" list; echo "exit $?"
[ -e /dev/shm/heapctl.$p ] || echo "removed"
"$H" list; echo "exit $?"
'
	[ "$status" -eq 0 ]
	echo "$output"
	[ "${lines[0]}" = "left behind" ]
	[[ "${lines[1]}" =~ ^heapctl:\ no\ process\ with\ PID\ [0-9]+$ ]]
	[ "${lines[2]}" = "exit 3" ]
	[ "${lines[3]}" = "heapctl: removed 1 stale segment of processes that are gone" ]
	[[ "${lines[4]}" =~ ^PID\ +NSPID\ +PROF ]]
	[ "${lines[5]}" = "exit 0" ]
	[ "${lines[6]}" = "removed" ]
	[[ "${lines[7]}" =~ ^PID\ +NSPID\ +PROF ]]
	[ "${lines[8]}" = "exit 0" ]
}

# bats test_tags=machine
@test "g. a segment left by a killed process is removed when the next process starts" {
	need_pidns
	run in_pidns '
ns_start; a=$NSPID
kill -KILL "$a"; wait "$a" 2>/dev/null
[ -e /dev/shm/heapctl.$a ] && echo "left behind"
ns_start; b=$NSPID
for _ in $(seq 40); do [ -e /dev/shm/heapctl.$a ] || break; sleep 0.05; done
[ -e /dev/shm/heapctl.$a ] || echo "removed"
[ -e /dev/shm/heapctl.$b ] && echo "new one there"
'
	[ "$status" -eq 0 ]
	[ "$output" = "left behind"$'\n'"removed"$'\n'"new one there" ]
}

# bats test_tags=machine
@test "g. a process that starts removes the segments of processes that are gone, heapctl list also one whose PID was taken since" {
	need_pidns
	run in_pidns '
ns_start; a=$NSPID
ns_start; c=$NSPID
kill -KILL "$c"; wait "$c" 2>/dev/null
sleep 60 & s=$!
cp /dev/shm/heapctl.$a /dev/shm/heapctl.$s
poke /dev/shm/heapctl.$s 16 "<i" $s
ns_start; b=$NSPID
for _ in $(seq 40); do [ -e /dev/shm/heapctl.$c ] || break; sleep 0.05; done
[ -e /dev/shm/heapctl.$c ] || echo "gone one removed"
[ -e /dev/shm/heapctl.$s ] && echo "taken one left"
"$H" list 2>&1 >/dev/null; echo "exit $?"
[ -e /dev/shm/heapctl.$s ] || echo "taken one removed"
[ -e /dev/shm/heapctl.$a ] && [ -e /dev/shm/heapctl.$b ] && echo "live ones there"
kill $s
'
	[ "$status" -eq 0 ]
	echo "$output"
	[ "${lines[0]}" = "gone one removed" ]
	[ "${lines[1]}" = "taken one left" ]
	[ "${lines[2]}" = "heapctl: removed 1 stale segment of processes that are gone" ]
	[ "${lines[3]}" = "exit 0" ]
	[ "${lines[4]}" = "taken one removed" ]
	[ "${lines[5]}" = "live ones there" ]
}

# h. ------------------------------------------------------------------------------------

@test "h. a thousand commands back to back through attach" {
	start_target
	t0=$(now_ms)
	for i in $(seq 1000); do echo "set prof.lg_sample=$((i % 20))"; done |
	    "$HEAPCTL" attach "$TPID" >"$T/out" 2>"$T/err"
	echo "took $(($(now_ms) - t0)) ms"
	[ ! -s "$T/err" ]
	[ "$(wc -l <"$T/out")" -eq 1000 ]
	[ "$(grep -c "^$TPID: prof.lg_sample=[0-9]*$" "$T/out")" -eq 1000 ]
	[ "$(sed -n 1000p "$T/out")" = "$TPID: prof.lg_sample=0" ]
	[ "$(status_field "$TPID" commands)" -ge 1000 ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 0 ]
}

@test "status right after a command shows its effect (1000 set/status pairs)" {
	# the counters are mirrored 'after each command': a status that follows
	# a set must not show the old value
	start_target -c prof:true
	for i in $(seq 1000); do
		echo "set prof.lg_sample=$((i % 20))"
		echo "status --json"
	done | "$HEAPCTL" attach "$TPID" >"$T/out" 2>"$T/err"
	[ ! -s "$T/err" ]
	python3 -c '
import json, re, sys
want, buf, stale, n = None, "", 0, 0
for line in open(sys.argv[1]):
    m = re.match(r"\d+: prof.lg_sample=(\d+)$", line)
    if m:
        want = int(m.group(1))
        continue
    buf += line
    if line.startswith("}"):
        got = json.loads(buf)["prof.lg_sample"]
        buf, n = "", n + 1
        stale += got != want
print("%d of %d status outputs showed the value before the set" % (stale, n))
sys.exit(1 if stale or n != 1000 else 0)' "$T/out"
}

# i. ------------------------------------------------------------------------------------

@test "i. control:false: no segment, no control thread, exit 4" {
	start_target -c "prof:true,control:false"
	[ ! -e "$(seg "$TPID")" ]
	run cat /proc/"$TPID"/task/*/comm
	[[ "$output" != *heapctl-ctl* ]]
	run "$HEAPCTL" status "$TPID"
	[ "$status" -eq 4 ]
	[ "$output" = "heapctl: process $TPID runs libheapctl.so with control:false: it publishes no control segment, so heapctl cannot reach it" ]
	run "$HEAPCTL" on "$TPID"
	[ "$status" -eq 4 ]
	[ "$output" = "heapctl: process $TPID runs libheapctl.so with control:false: it publishes no control segment, so heapctl cannot reach it" ]
	# a process without the library is told apart
	sleep 30 &
	local plain=$!
	track "$plain"
	run "$HEAPCTL" status "$plain"
	[ "$status" -eq 4 ]
	[ "$output" = "heapctl: process $plain is not running libheapctl.so (start it with LD_PRELOAD=/path/to/libheapctl.so)" ]

	# and with control on, the thread is there
	start_target
	run cat /proc/"$TPID"/task/*/comm
	[[ "$output" == *heapctl-ctl* ]]
}

@test "i. a process that runs the library but whose segment is gone: said so, and where to look" {
	start_target
	rm "$(seg "$TPID")"
	run "$HEAPCTL" status "$TPID"
	[ "$status" -eq 4 ]
	[ "$output" = "heapctl: process $TPID runs libheapctl.so, but heapctl finds no control segment of it; 'heapctl doctor $TPID' says why" ]
}

@test "i. a normal exit removes the segment file" {
	# long enough that start_target sees the control thread on a busy machine
	start_target seconds=4
	f=$(seg "$TPID")
	[ -f "$f" ]
	wait_status "$TPID"
	[ "$status" -eq 0 ]
	[ ! -e "$f" ]
	run "$HEAPCTL" status "$TPID"
	[ "$status" -eq 3 ]
}

# start-up ---------------------------------------------------------------------------

@test "a command sent as soon as the segment exists is served (no 'no control thread' at start-up)" {
	# the loop runs in a plain bash: bats' DEBUG trap would slow the spin
	run bash -c '
H=$1 TARGET=$2 fails=0
for i in $(seq 300); do
	HEAPCTL_CONF=prof:true "$TARGET" seconds=10 >/dev/null 2>&1 &
	p=$!
	f=/dev/shm/heapctl.$p
	end=$((SECONDS + 5))
	while [ ! -e "$f" ] && [ "$SECONDS" -lt "$end" ]; do :; done
	if ! out=$("$H" set "$p" prof.lg_sample=3 2>&1); then
		fails=$((fails + 1))
		echo "try $i: $out"
	fi
	kill -TERM "$p"
	wait "$p"
done
echo "$fails of 300 failed"
[ "$fails" -eq 0 ]' _ "$HEAPCTL" "$TARGET"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "0 of 300 failed" ]
}
