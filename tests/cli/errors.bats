#!/usr/bin/env bats
# Every error exit of heapctl: its code and its one-line message.
#   1 failed in the target (commands.bats: dump), 2 usage, 3 no such process,
#   4 no segment (not running libheapctl.so, control:false), 5 permission
#   denied, 6 another ABI or a corrupt segment, 7 no answer in time, 8 no PID
#   and not exactly one.

load ../lib/helpers

# ---- 2: usage -------------------------------------------------------------------

@test "usage errors are exit 2 with a one-line message" {
	run "$HEAPCTL" bogus
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: unknown command 'bogus' (try 'heapctl help')" ]
	run "$HEAPCTL" status 0
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: '0' is not a PID" ]
	run "$HEAPCTL" status -p abc
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: 'abc' is not a PID" ]
	run "$HEAPCTL" status abc
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: status: unexpected argument 'abc'" ]
	run "$HEAPCTL" status -p
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: -p needs a value" ]
	run "$HEAPCTL" status 1 --timeout abc
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: --timeout 'abc' is not a number of seconds (like 5 or 0.5)" ]
	run "$HEAPCTL" set 1 --timeout 0 prof.active=true
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: --timeout '0' is not a number of seconds (like 5 or 0.5)" ]
	run "$HEAPCTL" set 1 --bogus
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: set: unknown option '--bogus'" ]
}

# The command table says which commands take a PID: for them a number is
# one (0 is refused before any engine is loaded), for the others it is an
# operand and the command's own message names it.
@test "a number is a PID only for the commands that take one" {
	for cmd in list doctor explain attach stacks inject trace; do
		run "$HEAPCTL" $cmd 0
		[ "$status" -eq 2 ] || { echo "$cmd: exit $status: $output"; return 1; }
		[ "$output" = "heapctl: '0' is not a PID" ]
	done
	run "$HEAPCTL" help 0
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: unknown command '0' (try 'heapctl help')" ]
	run "$HEAPCTL" systemd 0
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: systemd: unknown action '0' (enable, disable or status)" ]
	run "$HEAPCTL" serve 0
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: serve: unexpected argument '0' (it serves every process; ask for one with ?pid=N)" ]
	run "$HEAPCTL" report 0
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: cannot open 0: No such file or directory" ]
	run -127 "$HEAPCTL" run 0
	[ "$output" = "heapctl: run: cannot execute 0: No such file or directory" ]
}

# ---- 3: no such process ------------------------------------------------------------

@test "no such process: exit 3 'no process with PID'" {
	max=$(cat /proc/sys/kernel/pid_max)     # never a PID
	run "$HEAPCTL" status "$max"
	[ "$status" -eq 3 ]
	[ "$output" = "heapctl: no process with PID $max" ]

	# a process that ran and was reaped
	sleep 0 &
	gone=$!
	wait "$gone"
	for cmd in status "set $gone prof.active=true" dump on off reset watch attach; do
		read -r name rest <<<"$cmd"
		run "$HEAPCTL" $name "$gone" ${rest#"$gone"} </dev/null
		[ "$status" -eq 3 ] || { echo "$cmd: exit $status: $output"; return 1; }
		[ "$output" = "heapctl: no process with PID $gone" ]
	done
}

# ---- 4: not running the library ------------------------------------------------------

@test "a process not running libheapctl.so: exit 4, the message says how to preload it" {
	sleep 100 &
	s=$!
	track "$s"
	for cmd in status "set $s prof.active=true" dump on watch attach; do
		read -r name rest <<<"$cmd"
		run "$HEAPCTL" $name "$s" ${rest#"$s"} </dev/null
		[ "$status" -eq 4 ] || { echo "$cmd: exit $status: $output"; return 1; }
		[ "$output" = "heapctl: process $s is not running libheapctl.so (start it with LD_PRELOAD=/path/to/libheapctl.so)" ]
	done
	[ ! -e "$(seg "$s")" ]
}

# ---- 5: permission denied ---------------------------------------------------------------

# sees the whole machine (tests/run.sh gives it namespaces of its own): asserts that no heapctl-fetch staging file, anyone's, is in /dev/shm
# bats test_tags=machine
@test "another user's process: exit 5 naming the owner; the segment is 0600; root still controls it" {
	need_root
	mkdir "$T/nobody"
	chown nobody "$T/nobody"
	start_target -u nobody -d "$T/nobody"
	[ "$(stat -c '%a %U' "$(seg "$TPID")")" = "600 nobody" ]
	as_daemon() { setpriv --reuid=daemon --regid=daemon --clear-groups "$@"; }

	for cmd in status "set $TPID prof.active=false" dump off watch; do
		read -r name rest <<<"$cmd"
		run as_daemon "$HEAPCTL" $name "$TPID" ${rest#"$TPID"}
		[ "$status" -eq 5 ] || { echo "$cmd: exit $status: $output"; return 1; }
		[ "$output" = "heapctl: permission denied: process $TPID belongs to nobody (uid 65534); run heapctl as that user or as root" ]
	done
	# the file itself is closed to other users
	run as_daemon head -c 16 "$(seg "$TPID")"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	# list leaves it out and says so
	run --separate-stderr as_daemon "$HEAPCTL" list
	[ "$status" -eq 0 ]
	[[ ! "$output" =~ (^|$'\n')$TPID\  ]]
	[[ "$stderr" =~ more\ process(es)?\ of\ other\ users\ not\ shown\ \(permission\ denied\) ]]
	[ "$(status_field "$TPID" prof.active)" = true ]

	# its own user may
	run setpriv --reuid=nobody --regid=nogroup --clear-groups "$HEAPCTL" set "$TPID" prof.lg_sample=10
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: prof.lg_sample=10" ]
	# and root may
	run "$HEAPCTL" set "$TPID" prof.lg_sample=11
	[ "$status" -eq 0 ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 11 ]
	[ "$(status_field "$TPID" uid)" = 65534 ]
	touch "$T/before-fetch"
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o "$T/nobody/root.heap"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/nobody/root.heap" ]
	# another user's process writes into its /dev/shm and heapctl fetches
	# the file, so it is root's, and no staged copy is left behind
	[ "$(stat -c %U "$T/nobody/root.heap")" = root ]
	[[ "$(head -n1 "$T/nobody/root.heap")" == heap_v2/* ]]
	# (this dump's: one another run left, or is making, is not ours to judge)
	[ -z "$(staged_by_nobody "$T/before-fetch")" ]
}

# ---- 6: another ABI, corrupt segment -------------------------------------------------------

@test "a segment of another ABI version: exit 6 'ABI 99'" {
	start_target
	poke "$(seg "$TPID")" 8 '<I' 99
	for cmd in status "set $TPID prof.active=false" dump watch; do
		read -r name rest <<<"$cmd"
		run "$HEAPCTL" $name "$TPID" ${rest#"$TPID"}
		[ "$status" -eq 6 ] || { echo "$cmd: exit $status: $output"; return 1; }
		[ "$output" = "heapctl: process $TPID runs a libheapctl.so with segment ABI 99; this heapctl speaks ABI 1 (use the heapctl of the same release)" ]
	done
	kill -0 "$TPID"
}

@test "a corrupt segment (bad magic, wrong size): exit 6 'corrupt'" {
	start_target
	poke "$(seg "$TPID")" 12 '<I' 1234
	run "$HEAPCTL" status "$TPID"
	[ "$status" -eq 6 ]
	[ "$output" = "heapctl: segment /proc/$TPID/root/dev/shm/heapctl.$TPID of process $TPID is corrupt (size 1234, file $(stat -c %s "$(seg "$TPID")"))" ]
	poke "$(seg "$TPID")" 0 '<Q' 0
	run "$HEAPCTL" status "$TPID"
	[ "$status" -eq 6 ]
	[ "$output" = "heapctl: segment /proc/$TPID/root/dev/shm/heapctl.$TPID of process $TPID is corrupt (bad magic)" ]
	run "$HEAPCTL" set "$TPID" prof.active=false
	[ "$status" -eq 6 ]
	[[ "$output" == *"is corrupt (bad magic)" ]]
	kill -0 "$TPID"
}

# ---- 7: no answer in time -----------------------------------------------------------------

@test "a stopped target: exit 7 'did not answer' within the timeout; fine again after SIGCONT" {
	start_target
	stop_target "$TPID"
	t0=$(now_ms)
	run "$HEAPCTL" set "$TPID" prof.active=true --timeout 0.5
	t1=$(now_ms)
	[ "$status" -eq 7 ]
	[ "$output" = "heapctl: process $TPID did not answer within 0.5 s" ]
	echo "took $((t1 - t0)) ms"
	[ $((t1 - t0)) -ge 450 ] && [ $((t1 - t0)) -lt 1500 ]

	run "$HEAPCTL" dump "$TPID" --timeout=0.3
	[ "$status" -eq 7 ]
	[ "$output" = "heapctl: process $TPID did not answer within 0.3 s" ]
	# status still shows the process, and why it does not answer
	run "$HEAPCTL" status "$TPID" --timeout 0.3
	[ "$status" -eq 0 ]
	[[ "$output" == *$'\ncontrol        not answering: the process is stopped: kill -CONT '"$TPID"$'\n'* ]]

	kill -CONT "$TPID"
	run "$HEAPCTL" set "$TPID" prof.lg_sample=8
	[ "$status" -eq 0 ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 8 ]
}

# ---- 8: PID left out, not exactly one -------------------------------------------------------

@test "PID left out and no process runs the library: exit 8" {
	need_pidns
	run in_pidns '
sleep 100 &
for c in status "set prof.active=true" dump on watch; do
	"$H" $c; echo "exit $?"
done
'
	[ "$status" -eq 0 ]
	[ "$(grep -c '^exit 8$' <<<"$output")" -eq 5 ]
	[ "$(grep -c '^heapctl: no process running libheapctl.so is visible; start one with LD_PRELOAD=/path/to/libheapctl.so$' <<<"$output")" -eq 5 ]
}

@test "PID left out and two processes run the library: exit 8 listing both" {
	need_pidns
	run in_pidns '
ns_start; a=$NSPID
ns_start; b=$NSPID
echo "pids $a $b"
"$H" status; echo "exit $?"
"$H" set prof.active=false; echo "exit $?"
"$H" list | grep -c target
'
	[ "$status" -eq 0 ]
	read -r _ a b <<<"$(grep '^pids ' <<<"$output")"
	[ -n "$a" ] && [ -n "$b" ]
	msg="heapctl: 2 processes run libheapctl.so: $a ($TARGET seconds=600), $b ($TARGET seconds=600); say which with a PID"
	[ "${lines[1]}" = "$msg" ]
	[ "${lines[2]}" = "exit 8" ]
	[ "${lines[3]}" = "$msg" ]
	[ "${lines[4]}" = "exit 8" ]
	[ "${lines[5]}" = 2 ]
}

@test "the control commands need no libdw: heapctl links libc alone; report loads the engine, and says where it looked when it is not there" {
	run ldd "$HEAPCTL"
	[ "$status" -eq 0 ]
	! grep -Eq 'libdw|libelf|libz\.|libstdc\+\+' <<<"$output"
	run ldd "$HEAPCTL_BUILD/libheapctl-report.so"
	grep -q 'libdw' <<<"$output"
	# a heapctl copied alone: control works, report names the engine
	mkdir "$T/alone"
	cp "$HEAPCTL" "$T/alone/heapctl"
	run "$T/alone/heapctl" --version
	[ "$status" -eq 0 ]
	printf 'heap_v2/1\n  t*: 0: 0 [0: 0]\n\nMAPPED_LIBRARIES:\n' >"$T/p.heap"
	run --separate-stderr "$T/alone/heapctl" report "$T/p.heap"
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	[ "$stderr" = "heapctl: libheapctl-report.so is neither next to $T/alone/heapctl nor in $T/alone/../lib" ]
	# installed: bin/heapctl finds lib/libheapctl-report.so
	mkdir -p "$T/inst/bin" "$T/inst/lib"
	cp "$HEAPCTL" "$T/inst/bin/heapctl"
	cp "$HEAPCTL_BUILD/libheapctl-report.so" "$T/inst/lib/"
	run "$T/inst/bin/heapctl" report "$T/p.heap"
	[ "$status" -eq 0 ] || [[ "$output" == *"nothing to show"* ]]
}

@test "report's options (getopt_long over one table that also makes its help): both spellings, --opt=value, errors in one line" {
	printf 'heap_v2/1\n  t*: 1: 64 [1: 64]\n@ 0x10\n  t*: 1: 64 [1: 64]\n\nMAPPED_LIBRARIES:\n' >"$T/p.heap"
	run --separate-stderr "$HEAPCTL" report "$T/p.heap" --inuse-objects --show_bytes --top=5
	[ "$status" -eq 0 ]
	[[ "$output" == "Total: 1 objects"* ]]
	run --separate-stderr "$HEAPCTL" report --inuse_objects "$T/p.heap"
	[ "$status" -eq 0 ]
	[[ "$output" == "Total: 1 objects"* ]]
	run --separate-stderr "$HEAPCTL" report "$T/p.heap" --bogus
	[ "$status" -eq 2 ]
	[ "$stderr" = "heapctl: report: unknown option '--bogus' (try 'heapctl help report')" ]
	run --separate-stderr "$HEAPCTL" report "$T/p.heap" --top
	[ "$status" -eq 2 ]
	[ "$stderr" = "heapctl: report: --top needs a value" ]
	run --separate-stderr "$HEAPCTL" report "$T/p.heap" --top=x
	[ "$status" -eq 2 ]
	[ "$stderr" = "heapctl: --top 'x' is not a whole number from 0 to 1000000000" ]
	run --separate-stderr "$HEAPCTL" report "$T/p.heap" "$T/p.heap"
	[ "$status" -eq 2 ]
	[[ "$stderr" == "heapctl: one profile at a time"*"--series for a trend" ]]
	# every option of the table is in the help, and in heapctl-report(1)
	run "$HEAPCTL" help report
	for o in inuse_space inuse_objects alloc_space alloc_objects base thread focus ignore drop keep_wrappers \
	    series top cum lines bytes collapsed svg pprof symbolize text sysroot; do
		[[ "$output" == *"--$o"* || "$output" == *"--${o//_/-}"* ]] || { echo "help report lacks --$o"; return 1; }
		man -l "$BATS_TEST_DIRNAME/../../man/heapctl-report.1" 2>/dev/null | grep -q -- "--${o//_/.}" ||
			{ echo "heapctl-report(1) lacks --$o"; return 1; }
	done
}
