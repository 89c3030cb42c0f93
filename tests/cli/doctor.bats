#!/usr/bin/env bats
# heapctl doctor PID: each explanation of heapctl/diagnose/doctor.c, with the
# situation it explains built for real (no faked /proc, no poked flags
# except where the segment itself is the subject): its exit status, the
# finding's topic and a stable part of its text, through --json (checked to
# be valid JSON, naming the PID, with "exit" and "ok" matching the exit
# status, every time).  The UNIT form is tested on a real systemd
# (tests/systemd).
#
# Mounts are made in a private mount namespace of the process under test
# (unshare -m ... exec), so they go away with it; the one cgroup made is
# removed by teardown.

load ../lib/helpers

LIB=$HEAPCTL_BUILD/libheapctl.so
NR_CLONE=56      # x86-64 system call numbers
NR_CLONE3=435
NR_CLOCK_NANOSLEEP=230

# python3 through a pyenv shim costs ~2 s a call; setup_file finds the
# interpreter once and every call here (and in helpers) goes to it directly
python3() { "${DOCTOR_PY:-$(type -P python3)}" "$@"; }

setup_file() {
	DOCTOR_PY=$(command python3 -c 'import sys; print(sys.executable)')
	export DOCTOR_PY
	# a statically linked program that sleeps
	printf '#include <unistd.h>\nint main(void) { sleep(60); return 0; }\n' |
	    cc -static -O2 -x c - -o "$BATS_FILE_TMPDIR/static_sleep"
	# tests/programs/seccomp_run: runs a command under a seccomp allow-list
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	cc -O2 -o "$BATS_FILE_TMPDIR/seccomp_run" "$root/tests/programs/seccomp_run.c"
}

# helpers' teardown, with the cgroup of the frozen-cgroup test thawed
# before its process is killed and removed once it is gone
teardown() {
	if [ -n "${CG:-}" ] && [ -d "$CG" ]; then
		echo 0 >"$CG/cgroup.freeze" 2>/dev/null || true
	fi
	helpers_teardown
	if [ -n "${CG:-}" ] && [ -d "$CG" ]; then
		for _ in $(seq 40); do rmdir "$CG" 2>/dev/null && break; sleep 0.05; done
	fi
	return 0
}

# doctor [-u USER] PID [ARG...]: `heapctl doctor PID --json` (as USER);
# $status, and $output the JSON, which must parse, name PID and say the
# exit status in "exit" and "ok"; its findings, one a line (level, topic,
# text, fix; tab-separated), in $T/findings
doctor() {
	local as=()
	if [ "$1" = -u ]; then
		as=(setpriv "--reuid=$2" "--regid=$(id -gn "$2")" --clear-groups)
		shift 2
	fi
	local pid=$1
	shift
	run --separate-stderr "${as[@]}" "$HEAPCTL" doctor "$pid" --json "$@"
	echo "exit $status: $output${stderr:+ (stderr: $stderr)}"
	python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["pid"] == int(sys.argv[2]), d
assert d["exit"] == int(sys.argv[3]), d
assert d["ok"] is (d["exit"] == 0), d
assert d["findings"], d
for f in d["findings"]:
    assert f["level"] in ("ok", "note", "problem"), f
    assert isinstance(f["topic"], str) and isinstance(f["text"], str) and f["text"], f
    assert f["fix"] is None or isinstance(f["fix"], str), f
    assert not any(c in f["text"] + (f["fix"] or "") for c in "\t\n"), f
    print("\t".join((f["level"], f["topic"], f["text"], f["fix"] or "")))
problems = [f for f in d["findings"] if f["level"] == "problem"]
assert bool(problems) == (d["exit"] != 0), d' "$output" "$pid" "$status" >"$T/findings"
}

# finding LEVEL TOPIC TEXT [FIX]: the last doctor's findings have one of
# LEVEL about TOPIC whose text contains TEXT (and whose fix contains FIX)
finding() {
	local level topic text fix
	while IFS=$'\t' read -r level topic text fix; do
		[ "$level" = "$1" ] && [ "$topic" = "$2" ] && [[ $text == *"$3"* ]] && [[ $fix == *"${4:-}"* ]] &&
		    return 0
	done <"$T/findings"
	echo "no $1 finding on $2 with '$3' (fix '${4:-}')"
	return 1
}

# the first problem of the last doctor: "TOPIC: TEXT"
first_problem() {
	awk -F '\t' '$1 == "problem" { print $2 ": " $3; exit }' "$T/findings"
}

# asleep PID: PID is blocked in clock_nanosleep (sleep(1) has started, and
# the dynamic loader is done with it)
asleep() {
	local nr
	read -r nr _ <"/proc/$1/syscall" 2>/dev/null && [ "$nr" = "$NR_CLOCK_NANOSLEEP" ]
}

# spawn CMD...: run CMD (which ends up in a sleep) in the background in $T;
# its PID in SPID once it sleeps, its stderr in $T/spawn.err
spawn() {
	"$@" 2>"$T/spawn.err" &
	SPID=$!
	track "$SPID"
	wait_for 5 asleep "$SPID" || { echo "$* did not get to sleep: $(cat "$T/spawn.err")" >&2; return 1; }
}

# launch [-c CONF] [-n] WRAPPER...: start the test service as
#     WRAPPER... env HEAPCTL_CONF=CONF $TARGET seconds=600
# in $T, where WRAPPER ends by exec'ing its arguments, so that the service
# keeps its PID; waits for "ready" and, unless -n, for the control thread.
# Sets TPID, TOUT and TERR like start_target.
launch() {
	local conf=$DEFAULT_CONF ctl=1
	while :; do
		case $1 in
		-c) conf=$2; shift 2 ;;
		-n) ctl=0; shift ;;
		*) break ;;
		esac
	done
	_ntarget=$((_ntarget + 1))
	TOUT=$T/target.$_ntarget.out
	TERR=$T/target.$_ntarget.err
	(cd "$T" && exec_or_call "$@" env -u MALLOC_CONF -u LD_PRELOAD "HEAPCTL_CONF=$conf" "$TARGET" seconds=600) \
	    >"$TOUT" 2>"$TERR" &
	local bg=$!
	track "$bg"
	wait_for 5 grep -q '^ready ' "$TOUT" || { echo "target did not start: $(cat "$TERR")" >&2; return 1; }
	TPID=$(awk '/^ready /{print $2; exit}' "$TOUT")
	[ "$TPID" = "$bg" ] || { echo "target says ready $TPID but was started as $bg" >&2; return 1; }
	if [ "$ctl" = 1 ]; then
		wait_for 5 control_running "$TPID" || { echo "no control thread: $(cat "$TERR")" >&2; return 1; }
	fi
}

# exec_or_call CMD...: exec CMD, or call it if it is one of our functions
# (which exec in the end themselves)
exec_or_call() {
	if declare -F "$1" >/dev/null; then "$@"; else exec "$@"; fi
}

# in_mountns SCRIPT: a wrapper for spawn or launch: run the sh SCRIPT in a
# private mount namespace, then exec the rest ("$@" in SCRIPT); SCRIPT's own
# arguments go before a "--"
#     launch in_mountns 'mount -t tmpfs tmpfs "$1"' "$T/dir" --
in_mountns() {
	local script=$1
	shift
	exec unshare -m sh -c "$script"' && while [ "$1" != -- ]; do shift; done && shift && exec "$@"' sh "$@"
}

# ---- the process ------------------------------------------------------------------------

@test "doctor: a healthy target is exit 0 with ok for process, library, segment, control and dumps" {
	start_target
	doctor "$TPID"
	[ "$status" -eq 0 ]
	finding ok process "$TPID (target) runs as root (uid 0), state "
	finding ok library "$HEAPCTL_BUILD/libheapctl.so is loaded"
	finding ok segment "/proc/$TPID/root/dev/shm/heapctl.$TPID (heapctl "
	finding ok control "the control thread answered in "
	finding ok profiling "sampling is on, a sample every 2^19 bytes on average"
	finding note dumps "prof.prefix 'jeprof' is relative: dumps it writes on its own (final, high-water, timer) go to its working directory $T; heapctl dump writes into yours"
	finding ok dumps "dumps go to $T, which the process can write"

	# the text form: one line per finding, level and topic in columns
	run --separate-stderr "$HEAPCTL" doctor "$TPID"
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" =~ ^ok\ {6}process\ {3}$TPID\ \(target\)\ runs\ as\ root\ \(uid\ 0\),\ state\ [RS]\  ]]
	[ "${lines[1]}" = "ok      library   $HEAPCTL_BUILD/libheapctl.so is loaded" ]
	[[ "${lines[3]}" =~ ^ok\ {6}control\ {3}the\ control\ thread\ answered\ in\ [0-9.]+\ ms$ ]]
	[ "${lines[6]}" = "ok      dumps     dumps go to $T, which the process can write" ]
	[ "${#lines[@]}" -eq 7 ]
}

@test "doctor: no such PID is exit 3" {
	max=$(cat /proc/sys/kernel/pid_max)     # never a PID
	doctor "$max"
	[ "$status" -eq 3 ]
	finding problem process "no process with PID $max"
	run "$HEAPCTL" doctor "$max"
	[ "$status" -eq 3 ]
	[ "$output" = "PROBLEM process   no process with PID $max" ]
}

@test "doctor: a process that has exited but is not reaped (a zombie) is exit 3" {
	# the child exits at once; its parent never waits for it (a shell's
	# SIGCHLD handler might reap it first, so not a shell)
	spawn "$DOCTOR_PY" -c 'import os, time
if os.fork() == 0:
    os._exit(0)
time.sleep(60)'
	wait_for 5 eval '[ -n "$(cat /proc/$SPID/task/$SPID/children)" ]'
	z=$(cat "/proc/$SPID/task/$SPID/children")
	z=${z% }
	[ -n "$z" ]
	wait_for 5 eval '[ "$(awk "/^State:/{print \$2}" /proc/$z/status)" = Z ]'
	doctor "$z"
	[ "$status" -eq 3 ]
	finding problem process "it has exited (state Z (zombie))"
}

@test "doctor: a stopped process is exit 7 'stopped', fix kill -CONT" {
	start_target
	stop_target "$TPID"
	wait_for 5 eval '[ "$(awk "/^State:/{print \$2}" /proc/$TPID/status)" = T ]'
	doctor "$TPID"
	[ "$status" -eq 7 ]
	finding problem process "it is stopped (SIGSTOP or job control)" "kill -CONT $TPID"
	[ "$(first_problem)" = "process: it is stopped (SIGSTOP or job control): it cannot answer commands until it continues" ]
}

@test "doctor: a process stopped by a debugger (tracing stop) is exit 7 'stopped by a debugger'" {
	need_root
	start_target
	ptrace_stop "$TPID"
	wait_for 5 eval '[ "$(awk "/^State:/{print \$2}" /proc/$TPID/status)" = t ]'
	doctor "$TPID"
	[ "$status" -eq 7 ]
	finding problem process "it is stopped by a debugger (tracing stop)" "detach the debugger"
}

@test "doctor: another user's process, doctor run by a third user: exit 5 'belongs to'" {
	need_root
	mkdir "$T/nobody"
	chown nobody "$T/nobody"
	start_target -u nobody -d "$T/nobody"
	doctor -u daemon "$TPID"
	[ "$status" -eq 5 ]
	finding problem process "it belongs to nobody (uid 65534): heapctl, running as uid $(id -u daemon), may not look into it" \
	    "run heapctl as that user or as root"
	# nothing after the problem: the rest cannot be seen
	[ "$(first_problem)" = "process: it belongs to nobody (uid 65534): heapctl, running as uid $(id -u daemon), may not look into it" ]
	# root may
	doctor "$TPID"
	[ "$status" -eq 0 ]
	finding ok process "$TPID (target) runs as nobody (uid 65534)"
}

@test "doctor: a set-user-ID process, doctor run by the user who started it: the set-user-ID program is named" {
	need_root
	cp /usr/bin/sleep "$T/sleep"
	chown root:root "$T/sleep"
	chmod 4755 "$T/sleep"
	spawn setpriv --reuid=nobody --regid=nogroup --clear-groups env "LD_PRELOAD=$LIB" "$T/sleep" 60
	[[ "$(grep '^Uid:' "/proc/$SPID/status")" =~ ^Uid:[[:space:]]+65534[[:space:]]+0[[:space:]] ]]
	doctor -u nobody "$SPID"
	[ "$status" -eq 4 ] || [ "$status" -eq 5 ]
	[[ "$(first_problem)" == *set-user-ID* ]]
}

@test "doctor: a process in another PID namespace gets a note with the PID it has there" {
	need_pidns
	unshare --pid --fork --kill-child --mount --ipc --mount-proc \
	    sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh \
	    env "HEAPCTL_CONF=$DEFAULT_CONF" "$TARGET" seconds=600 >"$T/ns.out" 2>&1 &
	u=$!
	track "$u"
	wait_for 5 grep -q '^ready 1$' "$T/ns.out"
	p=$(cat "/proc/$u/task/$u/children")
	p=${p% }
	track "$p"
	wait_for 5 control_running "$p"
	doctor "$p"
	[ "$status" -eq 0 ]
	finding note process "it runs in another PID namespace (a container), where it is PID 1; its dump file names carry that PID"
	finding ok segment "/proc/$p/root/dev/shm/heapctl.1 "
}

# ---- the library is not loaded --------------------------------------------------------------

@test "doctor: a program started without the library is exit 4 'started without it'" {
	spawn sleep 60
	doctor "$SPID"
	[ "$status" -eq 4 ]
	finding problem library "libheapctl.so is not loaded: it was started without it (no LD_PRELOAD in its environment)" \
	    "heapctl run -- COMMAND"
	run --separate-stderr "$HEAPCTL" doctor "$SPID"
	[ "$status" -eq 4 ]
	[ "${lines[1]}" = "PROBLEM library   libheapctl.so is not loaded: it was started without it (no LD_PRELOAD in its environment)" ]
	[[ "${lines[2]}" =~ ^\ {18}fix:\ start\ it\ under\ the\ library:\ heapctl\ run\ --\ COMMAND ]]

	# an LD_PRELOAD of something else
	spawn env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libm.so.6 sleep 60
	doctor "$SPID"
	[ "$status" -eq 4 ]
	finding problem library "libheapctl.so is not loaded: it was started without it (LD_PRELOAD does not name it)"
}

@test "doctor: a parent with the library that reset its child's environment is exit 4, naming the parent" {
	LD_PRELOAD=$LIB bash -c 'env -i sleep 60 & wait' &
	parent=$!
	track "$parent"
	wait_for 5 eval '[ -n "$(cat /proc/$parent/task/$parent/children 2>/dev/null)" ]'
	child=$(cat "/proc/$parent/task/$parent/children")
	child=${child% }
	track "$child"
	wait_for 5 asleep "$child"
	doctor "$child"
	[ "$status" -eq 4 ]
	finding problem library "libheapctl.so is not loaded: its parent bash (PID $parent) runs with LD_PRELOAD=$LIB, but this process has no LD_PRELOAD: bash (or a program it started) reset the environment" \
	    "set LD_PRELOAD=$LIB where bash builds the environment of its children"
}

@test "doctor: a set-user-ID program (secure execution) is exit 4 'secure-execution'" {
	need_root
	cp /usr/bin/sleep "$T/sleep"
	chown root:root "$T/sleep"
	chmod 4755 "$T/sleep"
	spawn setpriv --reuid=nobody --regid=nogroup --clear-groups env "LD_PRELOAD=$LIB" "$T/sleep" 60
	# it did gain root at exec (no nosuid mount in the way)
	[[ "$(grep '^Uid:' "/proc/$SPID/status")" =~ ^Uid:[[:space:]]+65534[[:space:]]+0[[:space:]] ]]
	doctor "$SPID"
	[ "$status" -eq 4 ]
	finding problem library "LD_PRELOAD names $LIB, but the program runs in secure-execution mode (set-user-ID, set-group-ID or file capabilities)"
}

@test "doctor: an injected process after heapctl eject is exit 4, topic segment, 'ejected at', fix inject; status says so too" {
	need_root
	spawn sleep 60
	"$HEAPCTL" inject "$SPID" >/dev/null
	local before after
	before=$(date -u +%s)
	run "$HEAPCTL" eject "$SPID"
	[ "$status" -eq 0 ]
	after=$(date -u +%s)
	doctor "$SPID"
	[ "$status" -eq 4 ]
	[ "$(first_problem)" = "segment: $(awk -F '\t' '$1 == "problem" { print $3 }' "$T/findings")" ]
	finding problem segment "the agent heapctl inject loaded was ejected at " "heapctl inject $SPID arms it again"
	# the time of the eject, as the agent took it
	local when
	when=$(sed -n 's/.*ejected at \([0-9T:.-]*Z\).*/\1/p' "$T/findings")
	[ -n "$when" ]
	when=$(date -u -d "${when%.*}" +%s)
	[ "$when" -ge "$before" ] && [ "$when" -le "$after" ]
	! grep -q "cannot create the control segment" "$T/findings"
	run "$HEAPCTL" status "$SPID"
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == "heapctl: process $SPID has heapctl inject's agent loaded but inert: it was ejected at "*"Z; 'heapctl inject $SPID' arms it again" ]]
	# armed again, it is healthy
	"$HEAPCTL" inject "$SPID" >/dev/null
	doctor "$SPID"
	[ "$status" -eq 0 ]
	"$HEAPCTL" eject "$SPID" >/dev/null
}

@test "doctor: a statically linked program is exit 4 'statically linked'" {
	spawn env "LD_PRELOAD=$LIB" "$BATS_FILE_TMPDIR/static_sleep"
	doctor "$SPID"
	[ "$status" -eq 4 ]
	finding problem library "LD_PRELOAD names $LIB, but the program is statically linked: no dynamic loader runs" \
	    "rebuild it dynamically linked"
}

@test "doctor: a library path the process cannot see is exit 4 'does not exist in the process's file system'" {
	need_root
	# its mount namespace has an empty tmpfs over the build directory
	spawn in_mountns 'mount -t tmpfs tmpfs "$1"' "$HEAPCTL_BUILD" -- env "LD_PRELOAD=$LIB" sleep 60
	grep -q "from LD_PRELOAD cannot be preloaded" "$T/spawn.err"
	doctor "$SPID"
	[ "$status" -eq 4 ]
	finding problem library "LD_PRELOAD names $LIB, which does not exist in the process's file system"
}

@test "doctor: the library on a noexec mount is exit 4 'noexec'" {
	need_root
	mkdir "$T/nx"
	spawn in_mountns 'mount -t tmpfs -o noexec tmpfs "$1" && cp "$2" "$1/"' "$T/nx" "$LIB" -- \
	    env "LD_PRELOAD=$T/nx/libheapctl.so" sleep 60
	grep -q "from LD_PRELOAD cannot be preloaded (failed to map segment from shared object)" "$T/spawn.err"
	doctor "$SPID"
	[ "$status" -eq 4 ]
	finding problem library "LD_PRELOAD names $T/nx/libheapctl.so, but $T/nx is mounted noexec for this process" \
	    "ExecPaths=$T/nx"
}

@test "doctor: a library the process's user may not read is exit 4 'did not load it'" {
	need_root
	mkdir "$T/priv"
	cp "$LIB" "$T/priv/"
	chmod 600 "$T/priv/libheapctl.so"
	spawn setpriv --reuid=nobody --regid=nogroup --clear-groups env "LD_PRELOAD=$T/priv/libheapctl.so" sleep 60
	doctor "$SPID"
	[ "$status" -eq 4 ]
	finding problem library "LD_PRELOAD names $T/priv/libheapctl.so, but the dynamic loader did not load it (unreadable for the process's user" \
	    "standard error"
}

# ---- no segment -------------------------------------------------------------------------------

@test "doctor: control:false is exit 4, topic segment, 'control:false'" {
	start_target -c "prof:true,control:false"
	doctor "$TPID"
	[ "$status" -eq 4 ]
	finding ok library "$LIB is loaded"
	finding problem segment "the library runs with control:false: it publishes no segment and starts no control thread" \
	    "remove control:false"
}

@test "doctor: a read-only /dev/shm is exit 4, topic segment, 'read-only'" {
	need_root
	launch -n in_mountns 'mount -t tmpfs -o ro tmpfs /dev/shm' --
	wait_for 5 grep -qE "cannot create the control segment .*: Read-only file system" "$TERR"
	doctor "$TPID"
	[ "$status" -eq 4 ]
	finding problem segment "/dev/shm is read-only for the process, so the library could not publish its segment" \
	    "ReadWritePaths=/dev/shm"
}

@test "doctor: no /dev/shm at all is exit 4, topic segment, 'has no /dev/shm'" {
	need_root
	launch -n in_mountns 'mount -t tmpfs tmpfs /dev' --
	wait_for 5 grep -qE "cannot create the control segment .*: No such file or directory" "$TERR"
	doctor "$TPID"
	[ "$status" -eq 4 ]
	finding problem segment "the process has no /dev/shm, where the library publishes its segment"
}

@test "doctor: a /dev/shm the process's user may not write is exit 4, topic segment, naming the mode" {
	need_root
	launch -n in_mountns 'mount -t tmpfs -o mode=755 tmpfs /dev/shm' -- \
	    setpriv --reuid=nobody --regid=nogroup --clear-groups
	wait_for 5 grep -qE "cannot create the control segment .*: Permission denied" "$TERR"
	doctor "$TPID"
	[ "$status" -eq 4 ]
	finding ok library "$LIB is loaded"
	finding problem segment "/dev/shm (mode 755) is not writable for the process's user" "1777"
	[[ "$(first_problem)" != *"is not running libheapctl.so"* ]]
}

@test "doctor: a segment of another ABI is exit 6, topic segment" {
	start_target
	poke "$(seg "$TPID")" 8 '<I' 99
	doctor "$TPID"
	[ "$status" -eq 6 ]
	finding problem segment "process $TPID runs a libheapctl.so with segment ABI 99; this heapctl speaks ABI 1"
}

# ---- the control thread -------------------------------------------------------------------------

@test "doctor: a seccomp filter that refuses threads is exit 4, topic control, 'seccomp'" {
	need_root
	seq 0 599 | grep -vxE "$NR_CLONE|$NR_CLONE3" >"$T/allow"
	launch -n "$BATS_FILE_TMPDIR/seccomp_run" --errno --allow-file "$T/allow" --
	wait_for 5 grep -q "cannot start the control thread: Operation not permitted" "$TERR"
	doctor "$TPID"
	[ "$status" -eq 4 ]
	finding ok segment "heapctl.$TPID"
	finding problem control "the control thread is not running, and a seccomp filter is in force: it most likely refused the thread" \
	    "allow thread creation (clone, clone3) in its seccomp filter"
}

@test "doctor: a control thread that never ran: no advice drawn from settings it never published" {
	need_root
	seq 0 599 | grep -vxE "$NR_CLONE|$NR_CLONE3" >"$T/allow"
	launch -n -c "prof:true,prof_prefix:$T/d" "$BATS_FILE_TMPDIR/seccomp_run" --errno --allow-file "$T/allow" --
	wait_for 5 grep -q "cannot start the control thread" "$TERR"
	doctor "$TPID"
	[ "$status" -eq 4 ]
	run python3 -c '
import json, sys
for f in json.loads(sys.argv[1])["findings"]:
    assert f["fix"] != "heapctl on " + sys.argv[2], f
    assert "prof.prefix '"''"'" not in f["text"], f' "$output" "$TPID"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "doctor: a control thread refused by a thread limit names the limit, and the allocations that answer instead" {
	need_root
	# RLIMIT_NPROC 1 for nobody: the process itself is its one
	launch -n setpriv --reuid=nobody --regid=nogroup --clear-groups prlimit --nproc=1
	wait_for 5 grep -q "cannot start the control thread: Resource temporarily unavailable" "$TERR"
	doctor "$TPID"
	# the one problem is the dump directory nobody cannot write (exit 1)
	[ "$status" -eq 1 ]
	[ "$(first_problem)" = "dumps: the dump directory $T (owner root (uid 0), mode 755) is not writable for the process's user" ]
	# it allocates every 20 ms: its allocations answer in place of the thread
	finding ok control "the program's allocations answered in"
	finding note control "the control thread could not be started (pthread_create: Resource temporarily unavailable; max processes 1): heapctl commands are served only while the program allocates" \
	    "raise the user's process limit"
	[[ "$output" != *seccomp* ]]
}

@test "doctor: a seccomp filter that lets the library be is a note, exit 0" {
	seq 0 599 >"$T/allow"
	launch "$BATS_FILE_TMPDIR/seccomp_run" --errno --allow-file "$T/allow" --
	doctor "$TPID"
	[ "$status" -eq 0 ]
	finding ok control "the control thread answered in "
	finding note seccomp "a seccomp filter is in force; the library keeps to systemd's @system-service"
}

@test "doctor: a control thread that does not answer is exit 7, topic control, within --timeout" {
	need_root
	start_target
	# only the control thread is held (in a tracing stop): the process runs
	ctl=$(grep -lx heapctl-ctl /proc/"$TPID"/task/*/comm | cut -d/ -f5)
	[ -n "$ctl" ]
	ptrace_stop "$ctl"
	t0=$(now_ms)
	doctor "$TPID" --timeout 0.5
	t1=$(now_ms)
	[ "$status" -eq 7 ]
	finding ok process "$TPID (target) runs as root (uid 0), state "
	[ "$(first_problem)" = "control: process $TPID did not answer within 0.5 s" ]
	finding problem control "did not answer" "heapctl stacks $TPID"
	# --timeout was kept, not the default 5 s (a bound, not a speed: a
	# loaded machine stretches 0.5 s, never to the default)
	[ $((t1 - t0)) -lt 4500 ]
}

# Hybrid layouts (cgroup v1 controllers with the v2 hierarchy at
# /sys/fs/cgroup/unified, as on this machine) have the freezer too; what
# cannot be done is skipped: no v2 hierarchy, a kernel without
# cgroup.freeze (before 5.2), or a cgroup file system we may not write.
#
@test "doctor: a process in a frozen cgroup is exit 7 'frozen'" {
	need_root
	local root
	for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ -f "$root/cgroup.controllers" ] && break
	done
	[ -f "$root/cgroup.controllers" ] || skip "no cgroup v2 hierarchy (no cgroup.controllers in /sys/fs/cgroup or /sys/fs/cgroup/unified)"
	local self
	self=$(sed -n 's/^0:://p' /proc/self/cgroup)
	CG=$root${self%/}/heapctl-doctor.$$.$BATS_TEST_NUMBER
	mkdir "$CG" 2>"$T/mkdir.err" || { CG=""; skip "cannot create a cgroup: $(cat "$T/mkdir.err")"; }
	[ -f "$CG/cgroup.freeze" ] || skip "no cgroup.freeze in $CG (a kernel before 5.2)"
	start_target
	echo "$TPID" >"$CG/cgroup.procs"
	[ "$(sed -n 's/^0:://p' "/proc/$TPID/cgroup")" = "${CG#"$root"}" ]
	echo 1 >"$CG/cgroup.freeze"
	wait_for 5 grep -qx 'frozen 1' "$CG/cgroup.events"
	doctor "$TPID" --timeout 1
	[ "$status" -eq 7 ]
	finding problem control "the process is frozen (cgroup ${CG#"$root"})" "write 0 to the cgroup's cgroup.freeze"
}

# ---- profiling and dumps ------------------------------------------------------------------------

@test "doctor: sampling off is a note with the fix 'heapctl on PID', exit 0" {
	start_target -c "control_refresh_ms:100"
	doctor "$TPID"
	[ "$status" -eq 0 ]
	finding note profiling "sampling is off: nothing allocated from now on is in a profile until it is switched on" \
	    "heapctl on $TPID"
	"$HEAPCTL" on "$TPID" >/dev/null
	doctor "$TPID"
	[ "$status" -eq 0 ]
	finding ok profiling "sampling is on"
}

@test "doctor: a dump directory that does not exist is exit 1, topic dumps, 'does not exist'" {
	start_target
	"$HEAPCTL" set "$TPID" prof.prefix=/nonexistent/dir/x >/dev/null
	doctor "$TPID"
	[ "$status" -eq 1 ]
	finding ok control "the control thread answered"
	finding problem dumps "the dump directory /nonexistent/dir does not exist for the process" \
	    "heapctl set $TPID prof.prefix=/DIR/NAME"
}

@test "doctor: a dump directory on a mount that is read-only for the process is exit 1, 'read-only'" {
	need_root
	mkdir "$T/ro"
	launch in_mountns 'mount -t tmpfs -o ro tmpfs "$1"' "$T/ro" --
	"$HEAPCTL" set "$TPID" "prof.prefix=$T/ro/x" >/dev/null
	# writable here, read-only as the process sees it
	touch "$T/ro/here"
	doctor "$TPID"
	[ "$status" -eq 1 ]
	finding problem dumps "the dump directory $T/ro is read-only for the process" "ReadWritePaths=$T/ro"
}

@test "doctor: a dump directory the process's user may not write is exit 1, 'not writable'" {
	need_root
	mkdir -m 755 "$T/nobody" "$T/rootdir"
	chown nobody "$T/nobody"
	start_target -u nobody -d "$T/nobody"
	"$HEAPCTL" set "$TPID" "prof.prefix=$T/rootdir/x" >/dev/null
	doctor "$TPID"
	[ "$status" -eq 1 ]
	finding problem dumps "the dump directory $T/rootdir (owner root (uid 0), mode 755) is not writable for the process's user"
	# its own directory is fine
	"$HEAPCTL" set "$TPID" "prof.prefix=$T/nobody/x" >/dev/null
	doctor "$TPID"
	[ "$status" -eq 0 ]
	finding ok dumps "dumps go to $T/nobody, which the process can write"
}

@test "doctor: a dump directory on a full file system is exit 1, 'full'" {
	need_root
	mkdir "$T/full"
	launch in_mountns 'mount -t tmpfs -o size=64k tmpfs "$1" && { dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null; true; }' "$T/full" --
	[ "$(stat -f -c %a "/proc/$TPID/root$T/full")" -eq 0 ]
	"$HEAPCTL" set "$TPID" "prof.prefix=$T/full/x" >/dev/null
	doctor "$TPID"
	[ "$status" -eq 1 ]
	finding problem dumps "the file system of the dump directory $T/full is full: 0 B free, a dump needs about 1.0 MiB" \
	    "free space there"
}

@test "doctor: a dump directory with space but no inodes left is exit 1, 'full ... (and no inodes)'" {
	need_root
	mkdir "$T/full"
	# its root directory is the one inode
	launch in_mountns 'mount -t tmpfs -o size=4m,nr_inodes=1 tmpfs "$1"' "$T/full" --
	"$HEAPCTL" set "$TPID" "prof.prefix=$T/full/x" >/dev/null
	doctor "$TPID"
	[ "$status" -eq 1 ]
	finding problem dumps "the file system of the dump directory $T/full is full: 4.0 MiB free, a dump needs about 1.0 MiB (and no inodes)"
}
