#!/usr/bin/env bats
# tests/cli/hostile.bats - what another user on the host can put in the
# way: files planted in /dev/shm (a FIFO, a directory, someone else's file,
# a segment of another PID namespace) at any name or at the name a process
# is about to take, and a PID namespace arranged so that a live process's
# segment looks stale to root's heapctl.  Nothing may hang a process or
# heapctl, stop a process from publishing its segment, or get a live
# segment deleted.

load ../lib/helpers

# plant KIND PATH: put a KIND at PATH
plant() {
	case $1 in
	fifo) mkfifo -m 666 "$2" ;;
	dir) mkdir -m 777 "$2" ;;
	foreign) echo "not a segment" >"$2" && chown nobody:nogroup "$2" && chmod 666 "$2" ;;
	junk) head -c 65536 /dev/urandom >"$2" ;;
	empty-old) : >"$2" && touch -d "1 hour ago" "$2" ;;
	empty-new) : >"$2" ;;
	unfinished-old) head -c 4096 /dev/zero >"$2" && touch -d "1 hour ago" "$2" ;;
	esac
}

# start_planted KIND: the target, with KIND planted at /dev/shm/heapctl.<its
# pid> before it starts (a shell plants it at its own pid, then execs the
# target, which keeps the pid).  Sets TPID, TERR, PLANT.
start_planted() {
	local kind=$1
	TOUT=$T/planted.out
	TERR=$T/planted.err
	HEAPCTL_CONF=$DEFAULT_CONF${VERBOSE:+,verbose:true} KIND=$kind TARGET=$TARGET bash -c '
		source "$0"
		plant "$KIND" /dev/shm/heapctl.$$
		exec "$TARGET" seconds=600' "$BATS_TEST_FILENAME.plant" >"$TOUT" 2>"$TERR" &
	local pid=$!
	track "$pid"
	PLANT=/dev/shm/heapctl.$pid
	wait_for 5 grep -q '^ready ' "$TOUT" || { cat "$TERR" >&2; return 1; }
	TPID=$(awk '/^ready /{print $2}' "$TOUT")
	[ "$TPID" = "$pid" ]
	wait_for 5 grep -q "heapctl-ctl" /proc/"$TPID"/task/*/comm
}

# as helpers.bash's, and plant() written out for the planting shell
setup() {
	helpers_setup || return
	declare -f plant >"$BATS_TEST_FILENAME.plant"
	PLANTS=()
}

# helpers.bash's, and what was planted: under the name of a process's
# segment (files and directories), and plant() written out for the
# planting shell
teardown() {
	helpers_teardown
	local p
	for p in "${_pids[@]}"; do rm -rf "/dev/shm/heapctl.$p" /dev/shm/heapctl."$p".????????????????; done
	for p in "${PLANTS[@]}"; do rm -rf "$p"; done
	rm -f "$BATS_TEST_FILENAME.plant"
}

# ---- anywhere in /dev/shm -----------------------------------------------------------

# sees the whole machine (tests/run.sh gives it namespaces of its own): plants a FIFO at a fixed segment name that every process that starts meets
# bats test_tags=machine
@test "a FIFO planted under a segment name: new processes start, list and status do not hang" {
	mkfifo -m 666 /dev/shm/heapctl.999999
	PLANTS+=(/dev/shm/heapctl.999999)
	start_target
	run timeout 10 "$HEAPCTL" list
	[ "$status" -eq 0 ]
	[[ "$output" == *"$TPID "* ]]
	run timeout 10 "$HEAPCTL" status 999999
	[ "$status" -ne 124 ]
	run timeout 10 "$HEAPCTL" dump "$TPID" -o "$T/x.heap"
	[ "$status" -eq 0 ]
	[ -p /dev/shm/heapctl.999999 ]
}

# ---- at the name a process is about to take -----------------------------------------

planted_case() {
	VERBOSE=1 start_planted "$1"
	PLANTS+=("$PLANT")
	# with verbose:true it says once where its segment is, and it is not
	# the planted name (without, nothing: it is no error, and every
	# process of a second container sharing /dev/shm would say it)
	grep -q "is held by a file this process did not create; the control segment is /dev/shm/heapctl.$TPID." "$TERR"
	[ "$(wc -l <"$TERR")" = 1 ]
	run "$HEAPCTL" status "$TPID" --json
	[ "$status" -eq 0 ]
	python3 -c '
import json, re, sys
d = json.loads(sys.argv[1])
assert d["pid"] == int(sys.argv[2]), d
assert re.fullmatch(r"/proc/\d+/root/dev/shm/heapctl\.%s\.[0-9a-f]{16}" % sys.argv[2], d["segment"]), d' "$output" "$TPID"
	run "$HEAPCTL" list
	[ "$status" -eq 0 ]
	[[ "$output" == *$'\n'"$TPID "* ]]
	run "$HEAPCTL" dump "$TPID" -o "$T/p.heap"
	[ "$status" -eq 0 ]
	[[ "$(head -n1 "$T/p.heap")" == heap_v2/* ]]
}

@test "a FIFO at a process's own name: it starts (no hang before main), publishes elsewhere, is found" {
	planted_case fifo
	[ -p "$PLANT" ]
}

@test "a FIFO at a process's own name, without verbose: nothing on its stderr, and it is found" {
	start_planted fifo
	PLANTS+=("$PLANT")
	run "$HEAPCTL" dump "$TPID" -o "$T/q.heap"
	[ "$status" -eq 0 ]
	[[ "$(head -n1 "$T/q.heap")" == heap_v2/* ]]
	[ ! -s "$TERR" ]
}

@test "a directory at a process's own name: it publishes elsewhere and is found" {
	planted_case dir
	[ -d "$PLANT" ]
}

@test "another user's file at a process's own name: left alone, the process publishes elsewhere" {
	planted_case foreign
	[ "$(stat -c %U "$PLANT")" = nobody ]
	[ "$(cat "$PLANT")" = "not a segment" ]
}

@test "junk of its own user at a process's own name: not a segment, so not replaced" {
	planted_case junk
	[ "$(stat -c %s "$PLANT")" = 65536 ]
}

@test "an empty file of its own user, an hour old, at a process's own name: reclaimed (a start-up that was killed)" {
	start_planted empty-old
	PLANTS+=("$PLANT")
	[ ! -s "$TERR" ]
	run "$HEAPCTL" status "$TPID" --json
	[ "$status" -eq 0 ]
	[[ "$output" == *"\"segment\": \"/proc/$TPID/root/dev/shm/heapctl.$TPID\""* ]]
	[ "$(stat -c %s "$PLANT")" -gt 0 ]
}

@test "a sized file of its own user with no header, an hour old: reclaimed (a start-up killed after sizing it)" {
	start_planted unfinished-old
	PLANTS+=("$PLANT")
	[ ! -s "$TERR" ]
	run "$HEAPCTL" status "$TPID" --json
	[ "$status" -eq 0 ]
	[[ "$output" == *"\"segment\": \"/proc/$TPID/root/dev/shm/heapctl.$TPID\""* ]]
	[ "$(head -c 8 "$PLANT" | od -An -tx1 | tr -d ' ')" != 0000000000000000 ]
}

# sees the whole machine (tests/run.sh gives it namespaces of its own): plants stale segments for heapctl list to remove: any preloaded process that starts meanwhile sweeps them first
# bats test_tags=machine
@test "heapctl list removes unfinished files of its own user over 10 s old, and nobody else's" {
	local mine=/dev/shm/heapctl.999991 young=/dev/shm/heapctl.999992 theirs=/dev/shm/heapctl.999993
	PLANTS+=("$mine" "$young" "$theirs")
	head -c 4096 /dev/zero >"$mine" && touch -d "1 minute ago" "$mine"
	: >"$young"
	: >"$theirs" && chown nobody:nogroup "$theirs" && touch -d "1 hour ago" "$theirs"
	run "$HEAPCTL" list
	[ "$status" -eq 0 ]
	# 1, or more where other processes were killed meanwhile
	[[ "$output" =~ removed\ [1-9][0-9]*\ stale\ segment ]]
	[ ! -e "$mine" ] && [ -e "$young" ] && [ -e "$theirs" ]
}

# sees the whole machine (tests/run.sh gives it namespaces of its own): plants staged dumps for heapctl list and a new process to remove: any preloaded process that starts meanwhile sweeps them first
# bats test_tags=machine
@test "staged dumps left over a minute: heapctl list removes its own user's, a new process of nobody's hers; young ones and other users' stay" {
	need_root
	local mine=/dev/shm/heapctl-fetch.00000000000000a1.heap young=/dev/shm/heapctl-fetch.00000000000000a2.heap
	local hers=/dev/shm/heapctl-fetch.00000000000000a3.heap
	PLANTS+=("$mine" "$young" "$hers")
	echo heap_v2/524288 >"$mine" && touch -d "2 minutes ago" "$mine"
	echo heap_v2/524288 >"$young" && touch -d "30 seconds ago" "$young"
	echo heap_v2/524288 >"$hers" && chown nobody:nogroup "$hers" && touch -d "1 hour ago" "$hers"
	run --separate-stderr "$HEAPCTL" list
	[ "$status" -eq 0 ]
	# not a segment: list does not count it among those it removed
	[[ "$stderr" != *"removed"* ]]
	[ ! -e "$mine" ] && [ -e "$young" ] && [ -e "$hers" ]
	# the first process of hers with the library sweeps hers at start
	start_target -u nobody
	wait_for 5 sh -c "[ ! -e $hers ]"
	[ -e "$young" ]
}

@test "an empty file of its own user made just now: it may be another process's start-up, so left alone" {
	planted_case empty-new
	[ "$(stat -c %s "$PLANT")" = 0 ]
}

# ---- a PID namespace arranged to make a live segment look stale ---------------------------

@test "a process of another PID namespace with a live process's pid: root's heapctl deletes nothing" {
	need_pidns
	start_target
	local want=$((TPID - 1))
	# in a new PID namespace sharing /dev/shm, the next pid is set so that a
	# sleeper gets TPID as its pid there; its /proc/PID/root/dev/shm is ours
	unshare --pid --fork --mount-proc bash -c "echo $want >/proc/sys/kernel/ns_last_pid; sleep 30 & wait" &
	track $!
	local inner=""
	for _ in $(seq 100); do
		for p in $(pgrep -x sleep); do
			[ "$(awk '/^NSpid/{print $NF}' /proc/$p/status)" = "$TPID" ] && [ "$p" != "$TPID" ] && inner=$p
		done
		[ -n "$inner" ] && break
		sleep 0.05
	done
	[ -n "$inner" ]
	track "$inner"
	local seg
	seg=$(ls /dev/shm/heapctl.$TPID)
	run "$HEAPCTL" status "$inner"
	[ "$status" -eq 4 ]
	[[ "$output" != *"removed"* ]]
	run "$HEAPCTL" list
	[ "$status" -eq 0 ]
	[ -f "$seg" ]
	run "$HEAPCTL" status "$TPID"
	[ "$status" -eq 0 ]
}

# ---- set-user-ID and set-group-ID programs ----------------------------------------------------

# secure_case MODE: a program that links the library, MODE (u+s or g+s),
# run as nobody with a configuration that would write a root-owned dump
# into a directory nobody chose and make it exit 1
secure_case() {
	mkdir -p "$T/bin" "$T/evil"
	cp "$HEAPCTL_BUILD/libheapctl.so" "$T/bin/"
	cat >"$T/prog.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void)
{
	for (int i = 0; i < 1000; i++)
		if (i % 2 == 0) (void)!malloc(1000); /* leaks: prof_leak_error would fire */
	printf("up %d\n", getpid());
	fflush(stdout);
	sleep(2);
	return 0;
}
C
	gcc -O1 -o "$T/bin/prog" "$T/prog.c" -Wl,--no-as-needed -L"$T/bin" -lheapctl -Wl,-rpath,"$T/bin"
	chown root:root "$T/bin/prog"
	chmod "$1" "$T/bin/prog"
	chmod 755 "$T/bin" "$T/evil"
	touch "$T/mark"      # a stale segment of an earlier process with this pid is older
	setpriv --reuid=nobody --regid=nogroup --clear-groups env \
	    MALLOC_CONF=prof:true,prof_final:true,prof_leak:true,prof_leak_error:true,lg_prof_sample:0,prof_prefix:"$T/evil/x" \
	    HEAPCTL_CONF=prof_gdump:true,prof_timer_s:1 \
	    "$T/bin/prog" >"$T/out" 2>"$T/err" &
	local p=$!
	track "$p"
	wait_for 5 grep -q '^up ' "$T/out"
	# no segment: heapctl cannot attach to it at all
	run "$HEAPCTL" status "$p"
	[ "$status" -eq 4 ]
	[ -z "$(find /dev/shm -maxdepth 1 -name "heapctl.$p*" -newer "$T/mark")" ]
	local st=0
	wait "$p" || st=$?
	[ "$st" -eq 0 ]
	[ -z "$(ls "$T/evil")" ]
	grep -q "secure execution (set-user-ID, set-group-ID or file capabilities): MALLOC_CONF and HEAPCTL_CONF are ignored" "$T/err"
}

@test "a set-user-ID program: MALLOC_CONF and HEAPCTL_CONF ignored, no dump, no exit 1, no segment" {
	secure_case u+s
}

@test "a set-group-ID program: the same" {
	secure_case g+s
}

# ---- files written where they should not be -----------------------------------------------------

@test "dump -o onto /dev/null or a FIFO writes in place and never replaces it; a FIFO nobody reads is an error, not a hang" {
	start_target
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o /dev/null
	[ "$status" -eq 0 ]
	[ -c /dev/null ]
	mkfifo "$T/fifo"
	cat "$T/fifo" >"$T/from-fifo" &
	local reader=$!
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o "$T/fifo"
	[ "$status" -eq 0 ]
	wait "$reader"
	[ -p "$T/fifo" ]
	[[ "$(head -n1 "$T/from-fifo")" == heap_v2/* ]]
	run --separate-stderr timeout 10 "$HEAPCTL" dump "$TPID" -o "$T/fifo"
	[ "$status" -eq 1 ]
	[ "$stderr" = "heapctl: cannot write $T/fifo: a FIFO that nobody reads" ]
	[ -p "$T/fifo" ]
}

@test "the target never renames a dump over a FIFO at its prof.prefix name: it takes the next number" {
	start_target
	"$HEAPCTL" set "$TPID" prof.prefix="$T/p" >/dev/null
	mkfifo "$T/p.$TPID.0.m0.heap"
	run --separate-stderr timeout 10 "$HEAPCTL" dump "$TPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/p.$TPID.1.m1.heap" ]
	[[ "$(head -n1 "$T/p.$TPID.1.m1.heap")" == heap_v2/* ]]
	[ -p "$T/p.$TPID.0.m0.heap" ]
	[ -z "$(ls "$T" | grep '\.tmp\.' || true)" ]
}

@test "report and dump outputs: a symlink another user planted in a sticky world-writable directory is not followed" {
	start_target
	mkdir -m 1777 "$T/shared"
	echo secret >"$T/victim"
	chmod 600 "$T/victim"
	ln -s "$T/victim" "$T/shared/out.svg"
	chown -h nobody:nogroup "$T/shared/out.svg"
	"$HEAPCTL" dump "$TPID" -o "$T/d.heap" >/dev/null
	run --separate-stderr "$HEAPCTL" report "$T/d.heap" --svg "$T/shared/out.svg"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"cannot write $T/shared/out.svg: a symlink owned by another user in a world-writable sticky directory (not followed)" ]]
	[ "$(cat "$T/victim")" = secret ]
	ln -s "$T/victim" "$T/shared/d2.heap"
	chown -h nobody:nogroup "$T/shared/d2.heap"
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o "$T/shared/d2.heap"
	[ "$status" -eq 1 ]
	[ "$(cat "$T/victim")" = secret ]
	# one's own symlink is followed, as the kernel's protected_symlinks does
	ln -s "$T/mine.svg" "$T/shared/own.svg"
	run --separate-stderr "$HEAPCTL" report "$T/d.heap" --svg "$T/shared/own.svg"
	[ "$status" -eq 0 ]
	[ -L "$T/shared/own.svg" ]
	grep -q '<svg' "$T/mine.svg"
}

@test "temporary files of a dump that never finished are removed by the next dump in that directory" {
	start_target
	sleep 30 &
	local dead=$!
	kill "$dead"
	wait "$dead" || true
	echo partial >"$T/x.$dead.0.m0.heap.tmp.$dead"
	touch -d '2 minutes ago' "$T/x.$dead.0.m0.heap.tmp.$dead"
	echo fresh >"$T/y.heap.tmp.$dead"                 # too young: perhaps still being written
	echo live >"$T/z.heap.tmp.$TPID"                  # a live process's
	touch -d '2 minutes ago' "$T/z.heap.tmp.$TPID"
	run --separate-stderr "$HEAPCTL" dump "$TPID" --prefix "$T/x"
	[ "$status" -eq 0 ]
	[ ! -e "$T/x.$dead.0.m0.heap.tmp.$dead" ]
	[ -e "$T/y.heap.tmp.$dead" ]
	[ -e "$T/z.heap.tmp.$TPID" ]
}
