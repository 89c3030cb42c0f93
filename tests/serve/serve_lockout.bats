#!/usr/bin/env bats
# tests/serve/serve_lockout.bats - no one can lock the others out of root's
# heapctl serve (issue 37, attack 4): an unprivileged local user (nobody)
# holds silent and slow connections, abandons seconds= requests and floods
# bad ones (tests/lib/lockout.py, scaled down), while another user (daemon)
# and root still get their answers.  The bound of 10 s on those answers is a
# functional check of "not locked out", not a measure (make bench has it).

load ../lib/helpers

ATTACK=$BATS_TEST_DIRNAME/../lib/lockout.py

setup_file() {
	id nobody >/dev/null && id daemon >/dev/null
}

# start_serve: root's daemon on a free loopback port, its work directory
# under $T/rt; sets URL (http://HOST:PORT), ADDR (HOST:PORT), SPID
start_serve() {
	mkdir -p "$T/rt"
	RUNTIME_DIRECTORY=$T/rt "$HEAPCTL" serve --listen 127.0.0.1:0 "$@" >"$T/serve.out" 2>"$T/serve.err" &
	SPID=$!
	track "$SPID"
	wait_for 5 grep -q "listening on http://" "$T/serve.out" || { cat "$T/serve.err" >&2; return 1; }
	URL=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
	ADDR=${URL#http://}
}

# as USER CMD...: CMD as that user, without root's groups; "${NOBODY[@]}"
# CMD is the same for nobody as one process (for $! and kill)
as() { local u=$1; shift; setpriv "--reuid=$u" "--regid=$(id -gn "$u")" --clear-groups "$@"; }
NOBODY=(setpriv --reuid=nobody "--regid=$(id -gn nobody)" --clear-groups)

# attack ARGS...: lockout.py as nobody against the daemon, in the background
# (its summary line in $T/attack); sets APID
attack() {
	"${NOBODY[@]}" /usr/bin/python3 "$ATTACK" "$ADDR" "$@" >"$T/attack" 2>"$T/attack.err" &
	APID=$!
	track "$APID"
}

# answers USER PATH: USER's request for PATH is answered 200 within 10 s
answers() {
	local got
	got=$(as "$1" curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 10 "$URL$2") || true
	echo "$1 $2: $got"
	[ "${got%% *}" = 200 ]
}

# in_metrics PID: the daemon has found PID
in_metrics() { curl -s --max-time 5 "$URL/metrics" | grep -q "^heapctl_allocated_bytes{pid=\"$1\""; }

# work_dirs: the profile requests' work directories the daemon still has
work_dirs() { find "$T"/rt/heapctl-serve.* -maxdepth 1 -name 'req.*' | wc -l; }

@test "serve_lockout: 300 silent connections of one user: the others are answered, and the daemon closes all 300 within 15 s" {
	start_target
	start_serve
	attack silent 300 15
	sleep 4                 # all 300 are in (accepting them took 2 s before)
	answers daemon /metrics
	answers root "/debug/pprof/heap?pid=$TPID"
	wait "$APID"
	cat "$T/attack"
	# over its 16 connections at once it is refused; the rest time out
	[[ "$(cat "$T/attack")" == "opened 300 refused "*" closed_by_server 300" ]]
	read -r _ _ _ refused _ _ <"$T/attack"
	[ "$refused" -ge 284 ]
	answers daemon /metrics
}

@test "serve_lockout: 300 slow connections (a header byte every 2 s): the others are answered; none lasts 15 s" {
	start_target
	start_serve
	attack slow 300 15
	sleep 4
	answers daemon /metrics
	answers root "/debug/pprof/heap?pid=$TPID"
	wait "$APID"
	cat "$T/attack"
	[[ "$(cat "$T/attack")" == "opened 300 "*" closed_by_server 300" ]]
}

@test "serve_lockout: 50 abandoned seconds=90 profiles: 3 at most are taken (429 with Retry-After beyond), and those end when their clients leave" {
	start_target -u nobody
	local victim=$TPID
	start_target
	start_serve
	attack abandon 50 "/debug/pprof/heap?pid=$victim&seconds=90"
	wait "$APID"
	cat "$T/attack"
	read -r _ sent _ refused <"$T/attack"
	[ "$sent" = 50 ]
	[ "$refused" -ge 47 ]
	# the clients left after 1 s: their requests' work is gone within 5 s,
	# not after 90
	wait_for 5 eval '[ "$(work_dirs)" = 0 ]' || { work_dirs; false; }
	answers daemon /metrics
	answers root "/debug/pprof/heap?pid=$TPID"
	# the cap as a client sees it: three long profiles of one user, and a
	# fourth is told to come back
	local i pids=()
	for i in 1 2 3; do
		"${NOBODY[@]}" curl -s -o /dev/null --max-time 30 "$URL/debug/pprof/heap?pid=$victim&seconds=30" &
		pids+=($!)
		track $!
	done
	wait_for 5 eval '[ "$(work_dirs)" = 3 ]'
	as nobody curl -s -i --max-time 10 "$URL/debug/pprof/heap?pid=$victim" | tr -d '\r' >"$T/refused"
	cat "$T/refused"
	grep -q '^HTTP/1.1 429 ' "$T/refused"
	grep -qi '^Retry-After: 5$' "$T/refused"
	[ "$(tail -n 1 "$T/refused")" = "heapctl: 3 profiles of yours are in flight already: try again when one is done" ]
	# another user is not held up by them
	start_target -u daemon
	wait_for 3 in_metrics "$TPID"
	answers daemon "/debug/pprof/heap?pid=$TPID"
	# one of the three hangs up: its place is free at once
	kill "${pids[0]}"
	wait_for 5 eval '[ "$(work_dirs)" = 2 ]'
	answers nobody "/debug/pprof/heap?pid=$victim"
}

@test "serve_lockout: 4 /events streams a user, a fifth is refused with 429; the four outlast the 10 s idle timeout" {
	start_serve
	local i
	for i in 1 2 3 4; do
		"${NOBODY[@]}" curl -s -N --max-time 25 "$URL/events" >"$T/ev.$i" &
		track $!
	done
	sleep 1
	as nobody curl -s -i --max-time 10 "$URL/events" | tr -d '\r' >"$T/refused"
	cat "$T/refused"
	grep -q '^HTTP/1.1 429 ' "$T/refused"
	grep -qi '^Retry-After: 30$' "$T/refused"
	[ "$(tail -n 1 "$T/refused")" = "heapctl: 4 /events streams of yours are open already: close one" ]
	# quiet for longer than the idle timeout, then an event reaches all four
	sleep 12
	start_target -u nobody
	for i in 1 2 3 4; do
		wait_for 5 grep -q "\"type\": \"found\", \"pid\": $TPID" "$T/ev.$i"
	done
}

@test "serve_lockout: SIGTERM with a seconds=600 profile and an /events stream in flight: the daemon exits within 5 s" {
	start_target
	local root_pid=$TPID
	start_target -u nobody     # hers: she may profile only her own
	start_serve
	curl -s -o /dev/null --max-time 60 "$URL/debug/pprof/heap?pid=$root_pid&seconds=600" &
	track $!
	"${NOBODY[@]}" curl -s -o /dev/null --max-time 60 "$URL/debug/pprof/heap?pid=$TPID&seconds=600" &
	track $!
	curl -s -N -o /dev/null --max-time 60 "$URL/events" &
	track $!
	wait_for 5 eval '[ "$(work_dirs)" = 2 ]'
	kill -TERM "$SPID"
	local t0
	t0=$(now_ms)
	wait_for 6 eval '! kill -0 $SPID 2>/dev/null'
	echo "exited after $(($(now_ms) - t0)) ms"
	wait "$SPID"
	# and it cleaned up after itself
	[ -z "$(ls -A "$T/rt")" ]
}

@test "serve_lockout: 1,000 bad requests: the log keeps 20 lines of them, and the daemon still answers" {
	start_target
	start_serve
	as nobody /usr/bin/python3 "$ATTACK" "$ADDR" bad 1000
	answers daemon /metrics
	cat "$T/serve.err" | head -3
	wc -l "$T/serve.err"
	[ "$(wc -l <"$T/serve.err")" -le 20 ]
	grep -q "^heapctl serve: Error processing request (HTTP response code is 400" "$T/serve.err"
}
