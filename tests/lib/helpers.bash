# tests/lib/helpers.bash - shared set-up for the bats suites (cli, serve, ptrace, trace).
#
#   load ../lib/helpers
#
# Every test gets its own directory $T (also the cwd), and teardown kills
# every process the test started (targets, background heapctl clients,
# sleepers), stopped or not, and removes their leftover segments.
#
# HEAPCTL_BUILD is the build directory (tests/run.sh sets it); by default
# the build/ next to tests/.

bats_require_minimum_version 1.5.0

: "${HEAPCTL_BUILD:=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)/build}"
HEAPCTL="$HEAPCTL_BUILD/heapctl"
TARGET="$HEAPCTL_BUILD/tests/programs/target"
# profiling on, counters mirrored every 100 ms (the default is 1000)
DEFAULT_CONF="prof:true,control_refresh_ms:100"

# setup and teardown are these two: a suite that needs more defines its own
# and calls them
setup() { helpers_setup; }
teardown() { helpers_teardown; }

helpers_setup() {
	if [ ! -x "$HEAPCTL" ] || [ ! -x "$TARGET" ]; then
		echo "missing $HEAPCTL or $TARGET: run 'make all $HEAPCTL_BUILD/tests/programs/target'" >&2
		return 1
	fi
	T=$(mktemp -d /tmp/heapctl-cli.XXXXXX)
	chmod 755 "$T"
	cd "$T" || return 1
	unset MALLOC_CONF HEAPCTL_CONF LD_PRELOAD
	_pids=()
	_ntarget=0
}

helpers_teardown() {
	local p
	# stopped processes first get SIGCONT so that SIGTERM can reach them
	for p in "${_pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; done
	for p in "${_pids[@]}"; do
		for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	# segments left by our own processes (killed with a signal); a pid now
	# reused by someone else is alive, and its segment is left alone
	for p in "${_pids[@]}"; do
		kill -0 "$p" 2>/dev/null || rm -f "/dev/shm/heapctl.$p"
	done
	cd /
	if [ -n "${T:-}" ]; then rm -rf "$T"; fi
	return 0
}

# track PID...: kill these at teardown
track() { _pids+=("$@"); }

# wait_for SECS CMD...: poll CMD every 50 ms until it succeeds; false if it
# never does within SECS
wait_for() {
	local secs=$1 i n
	shift
	n=$(awk -v s="$secs" 'BEGIN { print int(s * 20) }')
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		sleep 0.05
	done
	"$@"
}

# staged_by_nobody MARKER: the heapctl-fetch staging files of nobody's that
# appeared in /dev/shm since MARKER was touched (cmd/dump.c's staged dump:
# each must be gone once heapctl fetched it); a suite that calls it runs it
# in a test tagged machine, as another suite's commands stage files too
staged_by_nobody() { find /dev/shm -maxdepth 1 -name 'heapctl-fetch.*' -user nobody -newer "$1"; }

# as_nobody CMD...: CMD as nobody:nogroup, no other groups
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

# ncode CURLARGS...: as nobody, curl's HTTP status; the body in $T/nbody
# (written in a directory of hers: nobody cannot write $T)
ncode() {
	[ -d "$T/n" ] || { mkdir "$T/n" && chown nobody:nogroup "$T/n"; }
	rm -f "$T/n/body"
	as_nobody curl -s -o "$T/n/body" -w '%{http_code}' --max-time 30 "$@"
	cp "$T/n/body" "$T/nbody" 2>/dev/null || : >"$T/nbody"
}

# start_prometheus CONFIG [RUNNER...]: a Prometheus server with CONFIG on a
# free loopback port (data in $T/tsdb, log in $T/prom.log), run by RUNNER
# (a command, e.g. setpriv ...: not a function, whose subshell would be
# what teardown kills); sets PROM_PID and PROM_API, its http://127.0.0.1:PORT/api/v1
start_prometheus() {
	local port
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"${@:2}" prometheus --config.file="$1" --storage.tsdb.path="$T/tsdb" \
	    --web.listen-address="127.0.0.1:$port" >"$T/prom.log" 2>&1 &
	PROM_PID=$!
	track "$PROM_PID"
	PROM_API="http://127.0.0.1:$port/api/v1"
}

# ms since the epoch
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# start_prog SECS PROGRAM CONF [ARG...]
#   Runs the build's tests/programs/PROGRAM in the background with libheapctl.so
#   preloaded and HEAPCTL_CONF=CONF, its output in $T/PROGRAM.out and .err;
#   waits SECS seconds at most for its "ready" line, then for its control
#   thread.  Sets PROG_PID.
start_prog() {
	local secs=$1 prog=$2 conf=$3
	shift 3
	# the redirect below truncates the file only once the shell has forked:
	# a "ready" left by an earlier run must not be taken for this one's
	rm -f "$T/$prog.out" "$T/$prog.err"
	env -u LD_PRELOAD HEAPCTL_CONF="$conf" LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" \
	    "$HEAPCTL_BUILD/tests/programs/$prog" "$@" >"$T/$prog.out" 2>"$T/$prog.err" &
	PROG_PID=$!
	track "$PROG_PID"
	wait_for "$secs" grep -q '^ready ' "$T/$prog.out"
	wait_for 5 control_running "$PROG_PID"
}

# start_target [-c CONF|-] [-u USER] [-d DIR] [-n] [ARG...]
#   Runs the test service in the background, in DIR (default $T), as USER
#   (setpriv; default the caller), with HEAPCTL_CONF=CONF (default
#   $DEFAULT_CONF; "-" leaves it unset).  Waits for "ready PID" (and "child
#   PID" with fork=1 or fork=stop) and, unless the library is off
#   (control:false), for the control thread (asked with a command; -n: only
#   for its segment, so that no client has called), the stopped child's
#   excepted.  Sets TPID, CHILD, TOUT (its stdout), TERR.
#   Every target gets seconds=600 unless told otherwise, so nothing outlives
#   a broken teardown for long.
start_target() {
	local conf=$DEFAULT_CONF user="" dir=$T ask=1
	while [ $# -gt 0 ]; do
		case $1 in
		-c) conf=$2; shift 2 ;;
		-u) user=$2; shift 2 ;;
		-d) dir=$2; shift 2 ;;
		-n) ask=0; shift ;;
		*) break ;;
		esac
	done
	local args=("$@") a fork=0 seconds=1
	for a in "${args[@]}"; do
		[[ $a == seconds=* ]] && seconds=0
		[[ $a == fork=1 ]] && fork=1
		[[ $a == fork=stop ]] && fork=stop
	done
	[ "$seconds" = 1 ] && args+=(seconds=600)
	_ntarget=$((_ntarget + 1))
	TOUT=$T/target.$_ntarget.out
	TERR=$T/target.$_ntarget.err
	local cmd=(env -u MALLOC_CONF -u LD_PRELOAD)
	[ "$conf" != - ] && cmd+=("HEAPCTL_CONF=$conf")
	cmd+=("$TARGET" "${args[@]}")
	if [ -n "$user" ]; then
		local group
		group=$(id -gn "$user")
		cmd=(setpriv "--reuid=$user" "--regid=$group" --clear-groups "${cmd[@]}")
	fi
	(cd "$dir" && exec "${cmd[@]}") >"$TOUT" 2>"$TERR" &
	local bg=$!
	track "$bg"
	if ! wait_for 5 grep -q '^ready ' "$TOUT"; then
		echo "target did not start: $(cat "$TERR")" >&2
		return 1
	fi
	TPID=$(awk '/^ready /{print $2; exit}' "$TOUT")
	if [ "$TPID" != "$bg" ]; then
		echo "target says ready $TPID but was started as $bg" >&2
		return 1
	fi
	CHILD=""
	if [ "$fork" != 0 ]; then
		wait_for 5 grep -q '^child ' "$TOUT" || { echo "no child line" >&2; return 1; }
		CHILD=$(awk '/^child /{print $2; exit}' "$TOUT")
		track "$CHILD"
	fi
	if [[ $conf != *control:false* ]]; then
		local p
		# a child that stopped itself (fork=stop) makes no segment yet
		for p in "$TPID" $([ "$fork" = 1 ] && echo "$CHILD"); do
			if [ "$ask" = 1 ]; then
				wait_for 5 control_running "$p" || { echo "no control thread in $p" >&2; return 1; }
			else
				wait_for 5 test -s "$(seg "$p")" || { echo "no segment of $p" >&2; return 1; }
			fi
		done
	fi
}

# control_running PID: the segment says its control thread runs
control_running() {
	"$HEAPCTL" status "$1" --json 2>/dev/null | grep -q '"control": true'
}

# jfield KEY: the value of KEY in the JSON object on stdin (python's repr
# for strings is avoided: strings print bare, booleans as true/false)
jfield() {
	python3 -c '
import json, sys
v = json.load(sys.stdin)[sys.argv[1]]
print(json.dumps(v) if isinstance(v, bool) or v is None else v)' "$1"
}

# status_field PID KEY: one field of `heapctl status PID --json`
status_field() {
	"$HEAPCTL" status "$1" --json | jfield "$2"
}

# json_lines FILE: every line of FILE is a JSON object with a "type"
json_lines() {
	python3 -c '
import json, sys
for n, line in enumerate(open(sys.argv[1]), 1):
    o = json.loads(line)
    assert isinstance(o, dict) and "type" in o, "line %d has no type: %r" % (n, line)' "$1"
}

# count_events FILE TYPE: how many JSON lines of FILE have "type": TYPE
count_events() {
	python3 -c '
import json, sys
print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["type"] == sys.argv[2]))' "$1" "$2"
}

# seg PID: the segment file of PID (as seen from here)
seg() { echo "/dev/shm/heapctl.$1"; }

# poke FILE OFFSET FORMAT VALUE: write one struct-packed value into FILE
poke() {
	python3 -c '
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    f.write(struct.pack(sys.argv[3], int(sys.argv[4])))' "$@"
}

# the mapped segment of process W mentions PID's segment (W has opened it)
maps_segment() { grep -q "heapctl\.$2\b" "/proc/$1/maps" 2>/dev/null; }

# all_stopped PID: every thread of PID is in a group stop (state T).  kill
# -STOP only queues the signal: until a thread of the target has taken it,
# the others (the control thread) still run and answer, which a loaded
# machine shows.
all_stopped() {
	local st
	for st in /proc/"$1"/task/*/stat; do
		[ "$(awk '{ sub(/^.*\) /, ""); print $1 }' "$st" 2>/dev/null)" = T ] || return 1
	done
}

# stop_target PID: SIGSTOP, then wait until it has taken effect
stop_target() {
	kill -STOP "$1"
	wait_for 5 all_stopped "$1"
}

# need_root: skip the test unless we are root (other users, namespaces)
need_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root"
}

# need_pidns: skip the test where PID namespaces cannot be made
# in_pidns SCRIPT: run the bash SCRIPT in a private PID namespace (its /proc
# shows only its own processes) with a private /dev/shm, so that "PID left
# out" sees exactly the processes the script starts.  Everything in it dies
# with the namespace.  $H (heapctl), $TARGET, ns_start and poke are
# defined inside.
need_pidns() {
	need_root
	unshare --pid --fork --mount-proc true 2>/dev/null ||
	    skip "cannot create a PID namespace (needs root)"
}
in_pidns() {
	local prelude='
set -u
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 99
unset MALLOC_CONF HEAPCTL_CONF LD_PRELOAD
H=$HEAPCTL
# ns_start [ARG...]: start a target (a child of this shell, so that wait
# works) and wait for its control thread; its pid in $NSPID
ns_start() {
	local out; out=$(mktemp)
	HEAPCTL_CONF=prof:true,control_refresh_ms:100 "$TARGET" "$@" seconds=600 >"$out" 2>&1 &
	NSPID=$!
	for _ in $(seq 100); do grep -q "^ready " "$out" && break; sleep 0.05; done
	for _ in $(seq 100); do "$H" status "$NSPID" --json 2>/dev/null | grep -q "\"control\": true" && break; sleep 0.05; done
	rm -f "$out"
}
'
	export -f poke
	HEAPCTL=$HEAPCTL TARGET=$TARGET timeout 60 unshare --pid --fork --mount-proc \
	    bash -c "$prelude$1"
}

# wait_status PID: wait for a child of this shell; its exit status in $status
# (not `run wait`: run's subshell cannot wait for our children)
wait_status() {
	status=0
	wait "$1" || status=$?
}

# ptrace_stop TID: a tracer (tracked) attaches to thread TID, which then
# stays in a tracing stop until the tracer goes (the python binary itself
# runs in the background, so that teardown's kill reaches it; doctor.bats
# names it in DOCTOR_PY)
ptrace_stop() {
	"${DOCTOR_PY:-$(type -P python3)}" -c '
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
tid = int(sys.argv[1])
if libc.ptrace(16, tid, None, None) != 0:          # PTRACE_ATTACH
    sys.exit("PTRACE_ATTACH: " + os.strerror(ctypes.get_errno()))
os.waitpid(tid, 0x40000000)                         # __WALL
print("attached", flush=True)
time.sleep(60)' "$1" >"$T/tracer.out" 2>&1 &
	track $!
	wait_for 5 grep -q '^attached$' "$T/tracer.out" || { cat "$T/tracer.out" >&2; return 1; }
}

# bytes FILE FUNC [REPORT-ARGS...]: FUNC's flat bytes in heapctl report
bytes() {
	local f=$1 fn=$2
	shift 2
	"$HEAPCTL" report "$f" --bytes --top 0 "$@" | awk -v fn="$fn" '$NF == fn { print $1; found = 1 } END { if (!found) print 0 }'
}

# sites_near FILE PRE: the kept sites of tests/programs/prog.c (site_a,
# site_b, site_e) in profile FILE within 15% of their sizes and of the
# same sites in PRE, the program's profile under the preloaded library
sites_near() {
	local site_size site size got
	for site_size in site_a:33554432 site_b:8388608 site_e:2097152; do
		site=${site_size%:*} size=${site_size#*:}
		got=$(bytes "$1" "$site")
		near "$got" "$size" 15
		near "$got" "$(bytes "$2" "$site")" 15
	done
}

# near A B PCT: A within PCT% of B
near() {
	awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= b * p / 100) }' ||
		{ echo "$1 is not within $3% of $2" >&2; return 1; }
}

# redis_start [VAR=VALUE...]: Debian's redis-server on a free port, with
# those variables in its environment (none: without the library); sets PID
# and PORT once it answers.  The port is random below the kernel's
# ephemeral range (32768 up), which connections take; another suite's
# server can hold it: redis-server then exits, and the next port is tried.
redis_start() {
	local try
	for try in 1 2 3 4 5; do
		PORT=$((20000 + RANDOM % 12000))
		env -u LD_PRELOAD "$@" redis-server --port "$PORT" --save "" --appendonly no --enable-debug-command yes \
		    >"$T/redis.$PORT.out" 2>&1 &
		PID=$!
		track "$PID"
		wait_for 10 redis_up "$PID" "$PORT" && kill -0 "$PID" 2>/dev/null && return 0
		kill -0 "$PID" 2>/dev/null && break # running, and not answering
		cat "$T/redis.$PORT.out" >&2
	done
	redis-cli -p "$PORT" ping
}

# redis_up PID PORT: the server answers on PORT, or PID has exited (true
# either way, so that wait_for stops waiting on a server that is gone)
redis_up() { redis-cli -p "$2" ping >/dev/null 2>&1 || ! kill -0 "$1" 2>/dev/null; }
