#!/usr/bin/env bats
# tests/serve/serve.bats - heapctl serve, the daemon, against the real clients:
# promtool and a Prometheus server for /metrics, go tool pprof for
# /debug/pprof/heap, curl for everything else (status codes, a stopped
# target, an exiting one, tokens, a Unix socket).

load ../lib/helpers

# the helpers' teardown, after unmounting what a test mounted
teardown() {
	[ -z "${MOUNTED:-}" ] || umount -l "$MOUNTED" || true
	helpers_teardown
}

# start_serve [ARGS...]: the daemon on a free loopback port; sets URL, SPID
start_serve() {
	"$HEAPCTL" serve --listen 127.0.0.1:0 "$@" >"$T/serve.out" 2>"$T/serve.err" &
	SPID=$!
	track "$SPID"
	wait_for 5 grep -q "listening on http://" "$T/serve.out" || { cat "$T/serve.err" >&2; return 1; }
	URL=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
}

# code URL...: curl's HTTP status, the body in $T/body
code() { curl -s -o "$T/body" -w '%{http_code}' --max-time 30 "$@"; }

# in_metrics PID: the daemon has found PID
in_metrics() { curl -s --max-time 5 "$URL/metrics" | grep -q "^heapctl_allocated_bytes{pid=\"$1\""; }

# metric NAME PID: its value for PID in the text format
metric() { curl -s --max-time 5 "$URL/metrics" | awk -v n="$1" -v p="pid=\"$2\"" 'index($0, n "{" p) == 1 { print $NF }'; }

need_go() {
	(cd "$T" && HOME=$T go tool pprof -h >/dev/null 2>&1) || skip "go tool pprof does not run"
}

@test "serve: /metrics passes promtool check metrics and carries every target's counters and labels" {
	start_target
	start_serve
	wait_for 3 in_metrics "$TPID"
	curl -s "$URL/metrics" >"$T/m.txt"
	run promtool check metrics <"$T/m.txt"
	echo "$output"
	[ "$status" -eq 0 ]
	grep -q "^heapctl_prof_active{pid=\"$TPID\",command=\"[^\"]*target seconds=600\",user=\"root\"} 1$" "$T/m.txt"
	grep -q "^# TYPE heapctl_samples_total counter$" "$T/m.txt"
	sampled() { [ "$(metric heapctl_samples_total "$TPID")" -gt 0 ]; }
	wait_for 5 sampled
	[ "$(metric heapctl_dumps_total "$TPID")" = 0 ]
	"$HEAPCTL" dump "$TPID" -o "$T/x.heap" >/dev/null
	[ "$(metric heapctl_dumps_total "$TPID")" = 1 ]
	grep -q '^heapctl_targets [1-9]' "$T/m.txt"
	[ "$(curl -s -o /dev/null -w '%{content_type}' "$URL/metrics")" = "text/plain; version=0.0.4; charset=utf-8" ]
}

@test "serve: OpenMetrics when the client asks for it: counter families without _total, units, # EOF last" {
	start_target
	start_serve
	wait_for 3 in_metrics "$TPID"
	curl -s -H 'Accept: application/openmetrics-text; version=1.0.0' "$URL/metrics" >"$T/om.txt"
	[ "$(tail -n1 "$T/om.txt")" = "# EOF" ]
	grep -q '^# TYPE heapctl_samples counter$' "$T/om.txt"
	grep -q "^heapctl_samples_total{pid=\"$TPID\"," "$T/om.txt"
	grep -q '^# UNIT heapctl_allocated_bytes bytes$' "$T/om.txt"
	[ "$(grep -c '^# EOF' "$T/om.txt")" = 1 ]
}

@test "serve: a real Prometheus server scrapes it and answers a query for a target's counter" {
	command -v prometheus >/dev/null || skip "prometheus is not installed"
	start_target
	start_serve
	cat >"$T/prom.yml" <<-EOF
	global:
	  scrape_interval: 1s
	scrape_configs:
	  - job_name: heapctl
	    static_configs:
	      - targets: ['${URL#http://}']
	EOF
	start_prometheus "$T/prom.yml"
	local q="$PROM_API/query?query=heapctl_samples_total%7Bpid%3D%22$TPID%22%7D"
	got() { curl -s --max-time 5 "$q" >"$T/q.json" && grep -q '"result":\[{' "$T/q.json"; }
	wait_for 30 got || { tail -5 "$T/prom.log" >&2; cat "$T/q.json" >&2; return 1; }
	python3 - "$T/q.json" "$TPID" <<-'EOF'
	import json, sys
	d = json.load(open(sys.argv[1]))
	r = d["data"]["result"][0]
	assert r["metric"]["pid"] == sys.argv[2], r
	assert r["metric"]["job"] == "heapctl", r
	assert float(r["value"][1]) > 0, r
	EOF
	# and it scraped the OpenMetrics form (no "unsupported" complaints, target up)
	curl -s "$PROM_API/query?query=up" | grep -q '"value":\[[0-9.]*,"1"\]'
}

@test "serve: go tool pprof -top reads /debug/pprof/heap; its total agrees with heapctl report on a dump" {
	need_go
	# nothing changes after start-up: the churn runs once in 5 s
	start_target -c prof:true,lg_prof_sample:0,control_refresh_ms:100 grow=0 stacks=2000 tick_ms=5000
	start_serve
	wait_for 3 in_metrics "$TPID"
	run env HOME="$T" PPROF_TMPDIR="$T" go tool pprof -top -unit=B "$URL/debug/pprof/heap?pid=$TPID"
	echo "$output" | head -12
	[ "$status" -eq 0 ]
	[[ "$output" == *"Type: inuse_space"* ]]
	[[ "$output" == *"deep_"* ]]
	pp=$(echo "$output" | sed -n 's/.* of \([0-9]*\)B total.*/\1/p')
	"$HEAPCTL" dump "$TPID" -o "$T/d.heap" >/dev/null
	hc=$("$HEAPCTL" report "$T/d.heap" --bytes | sed -n 's/^Total: \([0-9]*\) B$/\1/p')
	echo "pprof $pp, report $hc"
	[ -n "$pp" ] && [ -n "$hc" ]
	python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 0.02 * b)' "$pp" "$hc"
	# the response is what Go's handler sends
	curl -s -D "$T/h" -o "$T/p.gz" "$URL/debug/pprof/heap?pid=$TPID&gc=1"
	grep -qi '^content-type: application/octet-stream' "$T/h"
	[ "$(head -c2 "$T/p.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ]
}

@test "serve: ?debug=1 is the text top; /debug/pprof/allocs defaults to alloc_space; ?seconds=S is the growth" {
	need_go
	start_target -c prof:true,prof_accum:true,lg_prof_sample:14,control_refresh_ms:100 grow=65536 tick_ms=10
	start_serve
	wait_for 3 in_metrics "$TPID"
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID&debug=1")" = 200 ]
	grep -q '^Total: ' "$T/body"
	grep -q 'main' "$T/body"
	[ "$(code "$URL/debug/pprof/allocs?pid=$TPID")" = 200 ]
	cp "$T/body" "$T/allocs.gz"
	run env HOME="$T" PPROF_TMPDIR="$T" go tool pprof -top "$T/allocs.gz"
	[[ "$output" == *"Type: alloc_space"* ]]
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID&seconds=1")" = 200 ]
	cp "$T/body" "$T/delta.gz"
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID")" = 200 ]
	cp "$T/body" "$T/full.gz"
	total() { HOME="$T" PPROF_TMPDIR="$T" go tool pprof -top -unit=B "$1" | sed -n 's/.* of \([0-9]*\)B total.*/\1/p'; }
	full=$(total "$T/full.gz")
	delta=$(total "$T/delta.gz")
	echo "full $full, delta over 1 s $delta"
	# 64 KiB every 10 ms: up to 6 MiB a second, less than all of it since start
	[ "$delta" -gt 1000000 ] && [ "$delta" -lt "$full" ]
}

@test "serve: bad requests get their status and one line: unknown pid, bad pid, no pid among two, POST, unknown path" {
	start_target
	local first=$TPID
	start_target
	start_serve
	wait_for 3 in_metrics "$first"
	wait_for 3 in_metrics "$TPID"
	[ "$(code "$URL/debug/pprof/heap?pid=1")" = 404 ]
	[ "$(cat "$T/body")" = "process 1 is not running libheapctl.so (see /targets)" ]
	[ "$(code "$URL/debug/pprof/heap?pid=12x")" = 400 ]
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID&seconds=100000")" = 400 ]
	[ "$(code "$URL/debug/pprof/heap")" = 400 ]
	[[ "$(cat "$T/body")" == *"processes run libheapctl.so: say which with ?pid=N (see /targets)" ]]
	[ "$(code -X POST "$URL/metrics")" = 405 ]
	[ "$(code -X POST --data x=1 "$URL/debug/pprof/heap")" = 405 ]
	[ "$(code "$URL/nothing")" = 404 ]
	[ "$(code "$URL/targets")" = 200 ]
	python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
pids = {x["pid"] for x in t}
assert {int(sys.argv[2]), int(sys.argv[3])} <= pids, t' "$T/body" "$first" "$TPID"
}

@test "serve: a stopped target: its profile request ends in the timeout with 504, /metrics answers meanwhile" {
	start_target
	start_serve --timeout 1
	wait_for 3 in_metrics "$TPID"
	stop_target "$TPID"
	code "$URL/debug/pprof/heap?pid=$TPID" >"$T/status" &
	local c=$!
	sleep 0.2
	t0=$(now_ms)
	[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/metrics")" = 200 ]
	echo "metrics took $(($(now_ms) - t0)) ms"
	[ $(($(now_ms) - t0)) -lt 900 ]
	wait "$c"
	[ "$(cat "$T/status")" = 504 ]
	[ "$(cat "$T/body")" = "heapctl: process $TPID did not answer within 1 s" ]
	kill -CONT "$TPID"
}

@test "serve: a target that exits leaves /targets and /metrics within a second" {
	start_target
	start_serve
	wait_for 3 in_metrics "$TPID"
	kill -TERM "$TPID"
	wait "$TPID" 2>/dev/null || true
	t0=$(now_ms)
	wait_for 3 eval '! in_metrics $TPID'
	echo "gone after $(($(now_ms) - t0)) ms"
	[ $(($(now_ms) - t0)) -lt 1500 ]
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID")" = 404 ]
}

@test "serve: beyond loopback only with a token file; then every request needs the bearer token" {
	run "$HEAPCTL" serve --listen 0.0.0.0:0
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: serve: --listen 0.0.0.0:0 reaches beyond this host: give --token-file FILE" ]
	echo "0123456789abcdef0123" >"$T/token"
	chmod 644 "$T/token"
	run "$HEAPCTL" serve --listen 0.0.0.0:0 --token-file "$T/token"
	[ "$status" -eq 2 ]
	[[ "$output" == *"must be a regular file only its owner can read (chmod 600)" ]]
	chmod 600 "$T/token"
	"$HEAPCTL" serve --listen 0.0.0.0:0 --token-file "$T/token" >"$T/serve.out" 2>&1 &
	track $!
	wait_for 5 grep -q "listening on http://0.0.0.0:" "$T/serve.out"
	local port
	port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$T/serve.out")
	[ "$(code "http://127.0.0.1:$port/metrics")" = 401 ]
	[ "$(code -H "Authorization: Bearer wrong-token-wrong-token" "http://127.0.0.1:$port/metrics")" = 401 ]
	[ "$(code -H "Authorization: Bearer 0123456789abcdef0123" "http://127.0.0.1:$port/metrics")" = 200 ]
}

@test "serve: on loopback, a request whose Host is not a loopback name is refused (DNS rebinding)" {
	start_serve
	[ "$(code -H 'Host: evil.example:9447' "$URL/metrics")" = 403 ]
	[ "$(cat "$T/body")" = "this daemon answers to a loopback Host only (127.0.0.1, localhost, [::1])" ]
	[ "$(code -H 'Host: localhost:9447' "$URL/metrics")" = 200 ]
	[ "$(code -H 'Host: [::1]:9447' "$URL/metrics")" = 200 ]
	[ "$(code -H 'Host: 127.0.0.2' "$URL/metrics")" = 200 ]
	[ "$(code "$URL/metrics")" = 200 ]
}

@test "serve: a Unix socket every user may connect to (each sees her own processes: serve_access.bats)" {
	start_target
	"$HEAPCTL" serve --listen "unix:$T/s.sock" >"$T/serve.out" 2>&1 &
	track $!
	wait_for 5 grep -q "listening on unix:$T/s.sock" "$T/serve.out"
	[ "$(stat -c %a "$T/s.sock")" = 666 ]
	[ "$(code --unix-socket "$T/s.sock" http://localhost/targets)" = 200 ]
	grep -q "\"pid\": $TPID" "$T/body"
	# a file that is not a socket is never replaced
	echo keep >"$T/f"
	run "$HEAPCTL" serve --listen "unix:$T/f"
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: serve: $T/f exists and is not a socket of ours" ]
	[ "$(cat "$T/f")" = keep ]
}

# ---- the archive ---------------------------------------------------------------

# sees the whole machine (tests/run.sh gives it namespaces of its own): counts and lists what the daemon archived: root's daemon archives every preloaded process's dumps
# bats test_tags=machine
@test "serve --archive: manual, high-water and final dumps copied with a pprof beside; /archive lists them; they outlive the process" {
	need_go
	start_serve --archive "$T/arch"
	start_target -c prof:true,lg_prof_sample:12,prof_final:true,prof_gdump:true,prof_prefix:$T/jp,control_refresh_ms:100 \
	    grow=1000000
	local pid=$TPID
	wait_for 10 in_metrics "$pid"
	"$HEAPCTL" dump "$pid" >/dev/null
	# it ends (SIGTERM: a normal exit, with its final dump) once it has
	# made a high-water dump; a run of a fixed length was over before the
	# dump above on a loaded machine (make check, build-san)
	wait_for 10 eval 'ls "$T"/arch/target/*."$pid".gdump.heap >/dev/null 2>&1'
	kill -TERM "$pid"
	wait "$pid"
	wait_for 10 eval 'ls "$T"/arch/target/*.final.pb.gz >/dev/null 2>&1'
	ls -R "$T/arch"
	local final gdump manual
	final=$(ls "$T"/arch/target/*."$pid".final.heap)
	gdump=$(ls "$T"/arch/target/*."$pid".gdump.heap | head -n1)
	manual=$(ls "$T"/arch/target/*."$pid".manual.heap)
	# byte for byte what the process wrote
	cmp "$final" "$T/jp.$pid".*.f.heap
	cmp "$manual" "$(ls "$T/jp.$pid".*.m*.heap)"
	[ -s "$gdump" ]
	# read after the process is gone: heapctl report, and go tool pprof on the pprof beside it
	run "$HEAPCTL" report "$final"
	[ "$status" -eq 0 ]
	[[ "$output" == *"Total: "* ]]
	run env HOME="$T" PPROF_TMPDIR="$T" go tool pprof -top "${final%.heap}.pb.gz"
	[ "$status" -eq 0 ]
	[[ "$output" == *"Type: inuse_space"* ]]
	# /archive: newest first, with the kinds; a file by its name
	[ "$(code "$URL/archive")" = 200 ]
	python3 - "$T/body" "$pid" <<-'PY'
	import json, sys
	a = json.load(open(sys.argv[1]))
	kinds = {e["kind"] for e in a if e["pid"] == int(sys.argv[2])}
	assert {"final", "gdump", "manual"} <= kinds, a
	assert a[0]["kind"] == "final", a[0]
	assert all(e["pprof"] for e in a), a
	PY
	[ "$(code "$URL/archive/target/$(basename "$final")")" = 200 ]
	cmp "$T/body" "$final"
	[ "$(code "$URL/archive/target/..%2F..%2Fetc%2Fpasswd")" = 404 ]
	[ "$(code "$URL/archive/../x.heap")" = 404 ]
	[ "$(curl -s "$URL/metrics" | sed -n 's/^heapctl_archived_dumps_total //p')" -ge 3 ]
}

# bats test_tags=machine
@test "serve --archive: retention keeps the newest --keep of a group and stays under --max-bytes, newest never removed" {
	start_serve --archive "$T/arch" --keep 3
	start_target -c prof:true,lg_prof_sample:12,prof_prefix:$T/jp,control_refresh_ms:100
	wait_for 3 in_metrics "$TPID"
	# scrapes are not kept: the daemon's own dumps, direct or staged
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID")" = 200 ]
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID&debug=1")" = 200 ]
	sleep 1
	# (the target's group: another program's dumps on this host are archived too)
	[ "$(ls "$T"/arch/target/*.heap 2>/dev/null | wc -l)" -eq 0 ]
	! grep -q "not archived" "$T/serve.err"
	for i in 1 2 3 4 5 6; do "$HEAPCTL" dump "$TPID" >/dev/null; sleep 0.02; done
	wait_for 5 eval '[ "$(ls "$T"/arch/target/*.heap 2>/dev/null | wc -l)" -eq 3 ] && [ "$(ls "$T"/jp.* | wc -l)" -eq 6 ]'
	sleep 1
	[ "$(ls "$T"/arch/target/*.heap | wc -l)" -eq 3 ]
	# the three kept are the last three written
	local newest
	newest=$(ls "$T"/jp."$TPID".5.m5.heap)
	cmp "$(ls "$T"/arch/target/*.heap | tail -n1)" "$newest"
	kill -TERM "$SPID"
	wait "$SPID" || true
	# a limit in bytes below one dump: only the newest stays; a copy that a
	# stopped daemon left half made is cleared away
	echo partial >"$T/arch/target/.20260101T000000.000Z.1.manual.heap.1.0.tmp"
	touch -d "1 hour ago" "$T/arch/target/.20260101T000000.000Z.1.manual.heap.1.0.tmp"
	start_serve --archive "$T/arch" --max-bytes 1K
	[ ! -e "$T/arch/target/.20260101T000000.000Z.1.manual.heap.1.0.tmp" ]
	"$HEAPCTL" dump "$TPID" >/dev/null
	same() { [ "$(ls "$T"/arch/target/*.heap | wc -l)" -eq 1 ] && cmp -s "$(ls "$T"/arch/target/*.heap)" "$1"; }
	wait_for 5 same "$T/jp.$TPID.6.m6.heap" || { ls -R "$T/arch"; cat "$T/serve.err"; false; }
	run "$HEAPCTL" serve --archive "$T/arch" --max-age 3x
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: serve: --max-age 3x: want an age like 90s, 30m, 12h or 7d" ]
	run "$HEAPCTL" serve --keep 3
	[ "$status" -eq 2 ]
}

# bats test_tags=machine
@test "serve --archive on a full file system: the dump is counted as lost, the older ones stay, every request is answered" {
	need_root
	mkdir "$T/small"
	mount -t tmpfs -o size=64k tmpfs "$T/small" || skip "cannot mount a tmpfs"
	MOUNTED=$T/small
	start_serve --archive "$T/small/arch"
	start_target -c prof:true,lg_prof_sample:10,prof_prefix:$T/jp,control_refresh_ms:100
	wait_for 3 in_metrics "$TPID"
	local i
	for i in $(seq 30); do "$HEAPCTL" dump "$TPID" >/dev/null; done
	failed() { [ "$(curl -s "$URL/metrics" | sed -n 's/^heapctl_archive_failures_total //p')" -ge 1 ]; }
	wait_for 10 failed || { cat "$T/serve.err"; false; }
	local kept
	kept=$(ls "$T"/small/arch/target/*.heap | wc -l)
	echo "kept $kept, $(df -k "$T/small" | tail -n1)"
	cat "$T/serve.err"
	[ "$kept" -ge 1 ]
	# every dump the daemon archived is still there (none removed to make room)
	[ "$(curl -s "$URL/metrics" | sed -n 's/^heapctl_archived_dumps_total //p')" -eq "$kept" ]
	# what was archived is whole: each is byte for byte one of the dumps
	for f in "$T"/small/arch/target/*.heap; do
		"$HEAPCTL" report "$f" >/dev/null
	done
	grep -q "not archived: No space left on device" "$T/serve.err"
	[ "$(code "$URL/metrics")" = 200 ]
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID&debug=1")" = 200 ]
	kill -TERM "$SPID"
	wait "$SPID" || true
}

# ---- /events and control -------------------------------------------------------

@test "serve: /events streams what heapctl watch --json prints, for every process, plus found and gone" {
	start_serve
	curl -s -N --max-time 20 "$URL/events" >"$T/ev" &
	local reader=$!
	track "$reader"
	sleep 0.3
	start_target -c prof:true,lg_prof_sample:12,prof_prefix:$T/jp,control_refresh_ms:100
	wait_for 3 in_metrics "$TPID"
	"$HEAPCTL" set "$TPID" prof.lg_sample=14 >/dev/null
	"$HEAPCTL" dump "$TPID" >/dev/null
	kill -TERM "$TPID"
	wait "$TPID" 2>/dev/null || true
	wait_for 5 grep -q "\"type\": \"gone\", \"pid\": $TPID}" "$T/ev"
	cat "$T/ev"
	python3 - "$T/ev" "$TPID" "$T/jp.$TPID.0.m0.heap" <<-'PY'
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1])]
	pid = int(sys.argv[2])
	mine = [e for e in ev if e["pid"] == pid]
	types = [e["type"] for e in mine]
	assert types[0] == "found" and types[-1] == "gone", types
	assert {"config", "dump", "exit"} <= set(types), types
	c = next(e for e in mine if e["type"] == "config")
	assert (c["name"], c["value"], c["previous"]) == ("prof.lg_sample", "14", "12"), c
	d = next(e for e in mine if e["type"] == "dump")
	assert d["kind"] == "manual" and d["path"] == sys.argv[3], d
	PY
	# the same lines as heapctl watch --json, as server-sent events, and the backlog with ?since=0
	curl -s --max-time 2 -H 'Accept: text/event-stream' "$URL/events?since=0" >"$T/sse" || true
	grep -q "^data: {\"type\": \"dump\", .*\"pid\": $TPID, \"kind\": \"manual\"" "$T/sse"
}

@test "serve: POST /control/{on,off,set,dump} with the token only; never by GET" {
	start_target -c prof:true,lg_prof_sample:12,prof_prefix:$T/jp,control_refresh_ms:100
	start_serve
	wait_for 3 in_metrics "$TPID"
	# without a token file there is no control at all
	[ "$(code -X POST "$URL/control/off?pid=$TPID")" = 403 ]
	[ "$(cat "$T/body")" = "control over HTTP needs serve --token-file FILE" ]
	kill -TERM "$SPID"
	echo "0123456789abcdef0123" >"$T/token"
	chmod 600 "$T/token"
	start_serve --token-file "$T/token"
	local auth="Authorization: Bearer 0123456789abcdef0123"
	[ "$(code -X POST "$URL/control/off?pid=$TPID")" = 401 ]
	[ "$(status_field "$TPID" prof.active)" = true ]
	[ "$(code -H "$auth" "$URL/control/off?pid=$TPID")" = 405 ]
	[ "$(code -X POST -H "$auth" "$URL/control/off?pid=$TPID")" = 200 ]
	[ "$(cat "$T/body")" = "$TPID: profiling off" ]
	[ "$(status_field "$TPID" prof.active)" = false ]
	[ "$(code -X POST -H "$auth" "$URL/control/on?pid=$TPID")" = 200 ]
	[ "$(status_field "$TPID" prof.active)" = true ]
	[ "$(code -X POST -H "$auth" "$URL/control/set?pid=$TPID&prof.lg_sample=16&prof.gdump=true")" = 200 ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 16 ]
	[ "$(status_field "$TPID" prof.gdump)" = true ]
	[ "$(code -X POST -H "$auth" "$URL/control/set?pid=$TPID&prof.lg_sample=99")" = 400 ]
	[[ "$(cat "$T/body")" == "heapctl: "*"prof.lg_sample"* ]]
	[ "$(code -X POST -H "$auth" "$URL/control/set?pid=$TPID")" = 400 ]
	[ "$(code -X POST -H "$auth" "$URL/control/dump?pid=$TPID")" = 200 ]
	# the first manual dump; prof.gdump, set above, may have taken the
	# sequence's 0 with a high-water dump (jp.PID.0.u0.heap) before it
	local body
	body=$(cat "$T/body")
	echo "dump: $body"
	[[ "$body" == "$T/jp.$TPID."[0-9]*".m0.heap" ]]
	[[ "$(head -n1 "$body")" == heap_v2/* ]]
	[ "$(code -X POST -H "$auth" "$URL/control/reset?pid=$TPID")" = 405 ]
}

# ---- the web page -----------------------------------------------------------------

@test "serve: the page in headless Chromium: the targets in its DOM, a screenshot, and its on button switches sampling on" {
	command -v chromium >/dev/null || skip "chromium is not installed"
	start_target -c prof:true,prof_active:false,lg_prof_sample:12,control_refresh_ms:100
	echo "0123456789abcdef0123" >"$T/token"
	chmod 600 "$T/token"
	start_serve --token-file "$T/token"
	wait_for 3 in_metrics "$TPID"
	[ "$(status_field "$TPID" prof.active)" = false ]
	run timeout 120 python3 "$BATS_TEST_DIRNAME/../lib/cdp.py" "$URL/" --shot "$T/page.png" \
	    "[...document.querySelectorAll('#targets tr[data-pid]')].map(r => r.dataset.pid).join(' ')" \
	    "document.querySelector('tr[data-pid=\"$TPID\"] .prof').textContent" \
	    "(async () => { const i = document.querySelector('img.plot[src^=\"/plot?pid=$TPID&\"]');
	        for (let k = 0; k < 100 && !(i.complete && i.naturalWidth); k++) await new Promise(r => setTimeout(r, 100));
	        return i.naturalWidth })()" \
	    "(async () => { document.getElementById('token').value = '0123456789abcdef0123';
	        document.querySelector('button[data-act=on][data-pid=\"$TPID\"]').click();
	        const s = document.getElementById('status');
	        for (let i = 0; i < 100 && !s.dataset.code; i++) await new Promise(r => setTimeout(r, 100));
	        return s.dataset.code + ' ' + s.textContent })()"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == *"$TPID"* ]]
	[ "${lines[1]}" = '"off"' ]
	[ "${lines[2]}" = 720 ]
	[ "${lines[3]}" = "\"200 $TPID: profiling on\"" ]
	[ "$(status_field "$TPID" prof.active)" = true ]
	# the screenshot is a PNG of the page, not an empty one
	[ "$(head -c 8 "$T/page.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
	[ "$(stat -c %s "$T/page.png")" -gt 10000 ]
}

# sees the whole machine (tests/run.sh gives it namespaces of its own): counts what the daemon archived: root's daemon archives every preloaded process's dumps
# bats test_tags=machine
@test "serve: the page without JavaScript: the table, a plot as SVG, an archived dump's top, flame graph and a difference" {
	start_target -c prof:true,lg_prof_sample:12,prof_prefix:$T/jp,control_refresh_ms:100
	start_serve --archive "$T/arch"
	wait_for 3 in_metrics "$TPID"
	"$HEAPCTL" dump "$TPID" >/dev/null
	sleep 0.3
	"$HEAPCTL" dump "$TPID" >/dev/null
	wait_for 5 eval '[ "$(ls "$T"/arch/target/*.pb.gz 2>/dev/null | wc -l)" -eq 2 ]'
	[ "$(code "$URL/")" = 200 ]
	grep -q "<tr data-pid=\"$TPID\"><td class=\"n\"><a href=\"/?pid=$TPID\">$TPID</a></td>" "$T/body"
	grep -q '<table id="archive">' "$T/body"
	[ "$(grep -c '<a href="/top?file=target/' "$T/body")" -eq 2 ]
	[ "$(code "$URL/plot?pid=$TPID")" = 200 ]
	grep -q '<polyline class="allocated"' "$T/body"
	local new old
	new=$(cd "$T/arch" && ls target/*.heap | tail -n1)
	old=$(cd "$T/arch" && ls target/*.heap | head -n1)
	[ "$(code "$URL/top?file=$new")" = 200 ]
	grep -q '^Total: ' "$T/body"
	[ "$(code "$URL/top?file=$new&base=$old")" = 200 ]
	[ -s "$T/body" ]
	[ "$(code "$URL/flame?file=$new")" = 200 ]
	grep -q '<svg' "$T/body"
	[ "$(code "$URL/flame?pid=$TPID")" = 200 ]
	grep -q '<svg' "$T/body"
	[ "$(code "$URL/top?file=../../etc/passwd")" = 404 ]
	[ "$(code "$URL/top?file=target/nothing.heap")" = 404 ]
	[ "$(code "$URL/top")" = 400 ]
	[ "$(code "$URL/plot?pid=1")" = 404 ]
}

# ---- faults ------------------------------------------------------------------------

@test "serve: a target that exits mid-scrape gets its request a clear error; a client that hangs up is no harm; nothing is left behind" {
	start_target
	local first=$TPID
	start_target
	mkdir "$T/rt"
	RUNTIME_DIRECTORY=$T/rt start_serve
	wait_for 3 in_metrics "$first"
	wait_for 3 in_metrics "$TPID"
	# the delta's second dump finds the process gone
	code "$URL/debug/pprof/heap?pid=$first&seconds=2" >"$T/status" &
	local c=$!
	sleep 0.5
	kill -TERM "$first"
	wait "$c"
	echo "status $(cat "$T/status"): $(cat "$T/body")"
	[ "$(cat "$T/status")" = 404 ]
	[[ "$(cat "$T/body")" == "heapctl: "*"$first"* ]]
	# clients that go away mid-request and mid-stream
	curl -s --max-time 0.5 "$URL/debug/pprof/heap?pid=$TPID&seconds=2" >/dev/null || true
	curl -s --max-time 0.5 "$URL/events" >/dev/null || true
	sleep 2
	[ "$(code "$URL/metrics")" = 200 ]
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID")" = 200 ]
	kill -0 "$SPID"
	# no work files left from any of it (the symbol cache stays while the
	# daemon runs), and the work directory goes with the daemon
	ls -A "$T"/rt/heapctl-serve.* "$T"/rt/heapctl-serve.*/symcache
	[ "$(ls -A "$T"/rt/heapctl-serve.*)" = symcache ]
	[ -z "$(ls -A "$T"/rt/heapctl-serve.*/symcache | grep -v '^[0-9a-f]*\.sym$')" ]
	kill -TERM "$SPID"
	wait "$SPID" || true
	[ -z "$(ls -A "$T/rt")" ]
}

@test "serve: 50 targets at once: all in /targets and /metrics within seconds, promtool accepts it, each one's profile answers" {
	local i p all=()
	for i in $(seq 50); do
		HEAPCTL_CONF=prof:true,lg_prof_sample:14 "$TARGET" grow=0 tick_ms=500 seconds=120 >/dev/null 2>&1 &
		track $!
		all+=($!)
	done
	start_serve
	count() { [ "$(curl -s "$URL/metrics" | sed -n 's/^heapctl_targets //p')" -ge 50 ]; }
	wait_for 15 count
	curl -s "$URL/metrics" >"$T/m.txt"
	promtool check metrics <"$T/m.txt"
	for p in "${all[@]}"; do grep -q "^heapctl_allocated_bytes{pid=\"$p\"," "$T/m.txt"; done
	[ "$(code "$URL/targets")" = 200 ]
	python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); assert len(t) >= 50, len(t)' "$T/body"
	for p in "${all[@]:0:5}"; do [ "$(code "$URL/debug/pprof/heap?pid=$p&debug=1")" = 200 ]; done
}

@test "serve --symcache DIR: symbols are kept per build id between scrapes, and the next scrape reads them from there" {
	start_target -c prof:true,lg_prof_sample:14 grow=65536 tick_ms=10
	start_serve --symcache "$T/sc"
	wait_for 3 in_metrics "$TPID"
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID&debug=1")" = 200 ]
	cp "$T/body" "$T/first"
	grep -q ' main$' "$T/first"
	local id
	id=$(readelf -n "$TARGET" | awk '/Build ID/ { print $3 }')
	[ -n "$id" ]
	ls -l "$T/sc"
	[ -f "$T/sc/$id.sym" ]
	[ "$(stat -c %a "$T/sc")" = 700 ]
	# the cache holds the target's frames: a name edited there is what the
	# next scrape shows, so it read no symbols of the target itself
	python3 - "$T/sc/$id.sym" <<-'EOF'
	import sys
	data = open(sys.argv[1], "rb").read()
	open(sys.argv[1], "wb").write(data.replace(b"main", b"MAIN"))
	EOF
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID&debug=1")" = 200 ]
	cat "$T/body"
	grep -q ' MAIN$' "$T/body"
	! grep -q ' main$' "$T/body"
	# the pprof endpoint uses it too, and the file outlives the daemon
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID")" = 200 ]
	zcat "$T/body" | grep -qa MAIN
	kill -TERM "$SPID"
	wait "$SPID" || true
	[ -f "$T/sc/$id.sym" ]
}

@test "serve --symcache: a directory others can write is refused with one line; 'off' keeps none" {
	mkdir -m 777 "$T/open"
	chmod 777 "$T/open"
	run "$HEAPCTL" serve --listen 127.0.0.1:0 --symcache "$T/open"
	echo "$output"
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: serve: --symcache $T/open: not a directory of this user's that others cannot write" ]
	start_target -c prof:true,lg_prof_sample:14 grow=65536 tick_ms=10
	mkdir "$T/rt"
	RUNTIME_DIRECTORY=$T/rt start_serve --symcache off
	wait_for 3 in_metrics "$TPID"
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID&debug=1")" = 200 ]
	grep -q ' main$' "$T/body"
	[ -z "$(ls -A "$T"/rt/heapctl-serve.*)" ]
}

@test "serve --archive: a dump a new process writes before the daemon's next scan finds it is archived too" {
	start_serve --archive "$T/arch"
	sleep 0.6                  # the daemon's first scan is done
	start_target -c prof:true,lg_prof_sample:12,prof_prefix:$T/early
	# at once: the daemon scans every half second
	"$HEAPCTL" dump "$TPID" >/dev/null
	wait_for 10 eval 'ls "$T"/arch/target/*."$TPID".manual.pb.gz >/dev/null 2>&1'
	cmp "$(ls "$T"/arch/target/*."$TPID".manual.heap)" "$(ls "$T/early.$TPID".*.m*.heap)"
}
