#!/usr/bin/env bats
# tests/cli/leaks.bats - heapctl watch PID --leaks: leak suspects of a
# running process, live.  A program with a leak (a site that only grows)
# and a cache (a site that grows and shrinks): the leak is named once, the
# cache never; bad options and a process that is gone are one line.

load ../lib/helpers

start_leaky() {
	# every allocation sampled: the cache's two levels are exact in a dump
	start_prog 10 leaky "prof:true,lg_prof_sample:0,control_refresh_ms:100"
	LPID=$PROG_PID
}

@test "watch --leaks: the site that grows in every interval is named once, the cache that gives back never" {
	start_leaky
	# its dumps go in a directory of its own in $XDG_RUNTIME_DIR: this test's
	mkdir -m 700 "$T/rt"
	export XDG_RUNTIME_DIR=$T/rt
	run "$HEAPCTL" watch "$LPID" --leaks --every 1 --intervals 3 --count 6
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "watching process $LPID: a dump every 1 s;"* ]]
	[ "$(grep -c '^leak suspect in ' <<<"$output")" -eq 1 ]
	[[ "$output" == *"leak suspect in $LPID: leaky_site grew in each of the last 3 intervals: +"*" MB/h), now "* ]]
	[[ "$output" != *cache_site* ]]
	run "$HEAPCTL" watch "$LPID" --leaks --every 1 --intervals 2 --count 4 --json
	[ "$status" -eq 0 ]
	python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines()]
assert [r["site"] for r in rows] == ["leaky_site"], rows
r = rows[0]
assert r["pid"] == int(sys.argv[2]) and r["intervals"] == 2 and r["every_s"] == 1, r
assert r["growth_bytes"] > 0 and r["bytes"] >= r["growth_bytes"] and r["growth_per_hour"] > r["growth_bytes"], r
' "$output" "$LPID"
	# the dumps it took are gone with it, and so is the directory it made
	[ -z "$(ls -A "$T/rt")" ]
}

@test "watch --leaks: bad options, no process, a process that is gone" {
	run "$HEAPCTL" watch 1 --every 5
	[ "$status" -eq 2 ]
	[[ "$output" == *"--every and --intervals go with --leaks"* ]]
	run "$HEAPCTL" watch --leaks
	[ "$status" -eq 2 ]
	[[ "$output" == *"which process?"* ]]
	run "$HEAPCTL" watch 1 --leaks --intervals 1
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	run "$HEAPCTL" watch 999999999 --leaks --every 1
	[ "$status" -eq 3 ]
	[ "${#lines[@]}" -le 2 ]
	[[ "$output" == *"watch --leaks: "* ]]
}

# sees the whole machine (tests/run.sh gives it namespaces of its own): its daemon dumps every preloaded process on the machine each
# second, which changes the dump counts other suites' tests assert
# bats test_tags=machine
@test "serve --leaks: /metrics names the leak of a running process to those who may see it, never the cache; the alert rules load" {
	start_leaky
	"$HEAPCTL" serve --listen 127.0.0.1:0 --leaks 1 --leak-intervals 3 >"$T/serve.out" 2>"$T/serve.err" &
	SPID=$!
	track "$SPID"
	wait_for 5 grep -q "listening on http://" "$T/serve.out"
	URL=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
	suspect() { curl -s "$URL/metrics" >"$T/m.txt" && grep -q "^heapctl_leak_suspect_bytes{pid=\"$LPID\"" "$T/m.txt"; }
	wait_for 40 suspect
	promtool check metrics <"$T/m.txt"
	grep -q "^heapctl_leak_suspect_bytes{pid=\"$LPID\",.*site=\"leaky_site\"" "$T/m.txt"
	grep -q "^heapctl_leak_growth_bytes_per_hour{pid=\"$LPID\",.*site=\"leaky_site\"" "$T/m.txt"
	! grep -q 'site="cache_site"' "$T/m.txt"
	# a site is part of a profile: nobody does not see root's
	setpriv --reuid=nobody --regid=nogroup --clear-groups curl -s "$URL/metrics" >"$T/nobody.txt"
	grep -q "^heapctl_allocated_bytes{pid=\"$LPID\"" "$T/nobody.txt"
	! grep -q "pid=\"$LPID\".*site=" "$T/nobody.txt"
	promtool check rules "$BATS_TEST_DIRNAME/../../man/heapctl-alerts.yml"
	run "$HEAPCTL" serve --leaks 0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--leaks 0: want a whole number from 1 to 86400"* ]]
}
