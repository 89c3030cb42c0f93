#!/usr/bin/env bash
# The lock-outs of issue 37 against heapctl serve, measured (make bench runs
# it from tests/bench/serve.sh): how many normal requests a second another
# user (daemon) still gets, /metrics and /debug/pprof/heap?pid= of its own
# process, each for WINDOW seconds with a new connection a request, with no
# attack and under each attack by nobody (tests/lib/lockout.py): 500 slow
# connections and 300 silent ones (each reopened when the daemon closes
# it), 260 seconds=90 profiles whose clients left after 1 s, and a flood of
# malformed requests.  Needs root (setpriv).  Prints Markdown.
#   serve_lockout.sh [BUILD]
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tests/bench/lib.sh"
H="$root/$build/heapctl"
target="$root/$build/tests/programs/target"
attack_py="$root/tests/lib/lockout.py"
window=${LOCKOUT_WINDOW:-8}
[ -x "$target" ] || make -C "$root" --no-print-directory "$build/tests/programs/target" >/dev/null || exit 1
if [ "$(id -u)" != 0 ]; then
	echo "| lock-outs | not run | needs root (the attacker and the victim are other users) |"
	exit 0
fi
tmp=$(mktemp -d)
chmod 755 "$tmp"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
nobody=(setpriv --reuid=nobody "--regid=$(id -gn nobody)" --clear-groups)
victim=(setpriv --reuid=daemon "--regid=$(id -gn daemon)" --clear-groups)

# the victim's process
(cd "$tmp" && exec "${victim[@]}" env HEAPCTL_CONF=prof:true LD_PRELOAD="$root/$build/libheapctl.so" "$target" \
    grow=0 tick_ms=100 seconds=3600) >"$tmp/target.out" 2>&1 &
tpid=$!
pids+=($tpid)
for _ in $(seq 100); do "$H" status "$tpid" >/dev/null 2>&1 && break; sleep 0.05; done

serve() {  # -> $addr, $spid
	"$H" serve --listen 127.0.0.1:0 >"$tmp/serve.out" 2>"$tmp/serve.err" &
	spid=$!
	for _ in $(seq 100); do grep -qs 'listening on' "$tmp/serve.out" && break; sleep 0.05; done
	addr=$(sed -n 's/.*listening on http:\/\///p' "$tmp/serve.out")
	for _ in $(seq 40); do curl -s "http://$addr/metrics" | grep -q "pid=\"$tpid\"" && break; sleep 0.1; done
}
normal() {  # PATH -> "per_second (ok N failed F)"
	"${victim[@]}" /usr/bin/python3 "$attack_py" "$addr" normal "$1" "$window" |
	    awk '{printf "%s (%s ok, %s failed)", $6, $2, $4}'
}
# row NAME ATTACK-ARGS...: a fresh daemon, the attack started (and given 3 s
# to take hold), then the two measures
row() {
	local name=$1 ap m h
	shift
	serve
	if [ $# -gt 0 ]; then
		"${nobody[@]}" /usr/bin/python3 "$attack_py" "$addr" "$@" >"$tmp/attack" 2>&1 &
		ap=$!
		sleep 3
	fi
	m=$(normal /metrics)
	h=$(normal "/debug/pprof/heap?pid=$tpid")
	[ -n "${ap:-}" ] && { kill "$ap" 2>/dev/null; wait "$ap" 2>/dev/null; }
	kill "$spid"
	wait "$spid" 2>/dev/null
	printf '| %s | %s | %s | %s lines |\n' "$name" "$m" "$h" "$(wc -l <"$tmp/serve.err")"
}

echo
machine_line
echo
echo "| attack by another user (nobody) | /metrics a second | heap?pid= a second | daemon's log |"
echo "| --- | ---: | ---: | ---: |"
row "none"
row "500 slow connections, reopened" slow 500 $((window * 2 + 10)) renew
row "300 silent connections, reopened" silent 300 $((window * 2 + 10)) renew
row "260 seconds=90 profiles, clients gone after 1 s" abandon 260 "/debug/pprof/heap?pid=$tpid&seconds=90"
row "malformed requests, one after another" bad 1000000
