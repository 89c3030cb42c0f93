#!/usr/bin/env bats
# tests/serve/serve_page.bats - heapctl serve's page as a user sees it
# (issue 37, "the page", and issue 38's HTTP errors): /?pid=N is a page of
# that process (c50ba07 answered it with the bytes of /), and one nobody
# may not see is refused as its profile is; the flame graph's title names
# the program and pid, or the archived dump, never a work file; the text
# top has column headers, as `heapctl report` now prints them; allocs of a
# process without prof_accum says why, as go tool pprof shows it; and no
# answer, error or empty profile, carries a path of the daemon's own (its
# work directory, archive or symbol cache).

load ../lib/helpers

as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

# code CURLARGS...: curl's HTTP status; the body in $T/body, headers in $T/head
code() { curl -s -o "$T/body" -D "$T/head" -w '%{http_code}' --max-time 30 "$@"; }

# ncode CURLARGS...: as nobody, curl's HTTP status (3 digits, after the
# body on her stdout); the body in $T/nbody
ncode() {
	as_nobody curl -s -w '\n%{http_code}' --max-time 30 "$@" >"$T/nraw" || true
	head -c -4 "$T/nraw" >"$T/nbody"
	tail -c 3 "$T/nraw"
}

# start_serve ARGS...: the daemon, its work directory under $T/rt (as
# systemd's RUNTIME_DIRECTORY): sets URL, SPID
start_serve() {
	mkdir -p "$T/rt"
	RUNTIME_DIRECTORY=$T/rt "$HEAPCTL" serve "$@" >"$T/serve.out" 2>"$T/serve.err" &
	SPID=$!
	track "$SPID"
	wait_for 5 grep -q "listening on " "$T/serve.out" || { cat "$T/serve.err" >&2; return 1; }
	URL=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
}

# absent GREPARGS...: grep finds nothing (a bare '! grep' cannot fail a test)
absent() {
	if grep "$@"; then
		echo "found: $*" >&2
		return 1
	fi
}

in_metrics() { curl -s --max-time 5 "$URL/metrics" | grep -q "^heapctl_allocated_bytes{pid=\"$1\""; }

need_go() {
	(cd "$T" && HOME=$T go tool pprof -h >/dev/null 2>&1) || skip "go tool pprof does not run"
}

# no_daemon_path FILE...: none of the daemon's own directories appears
no_daemon_path() {
	local f
	for f in "$@"; do
		if grep -a -e "$T/rt" -e "heapctl-serve\." -e "$T/arch" -e "symcache" "$f"; then
			echo "$f names a path of the daemon's" >&2
			return 1
		fi
	done
}

@test "serve_page: /?pid=N is that process's page (name, user, counters, plot, buttons, downloads, events), / links to it" {
	start_target -c prof:true,lg_prof_sample:12,control_refresh_ms:100
	start_serve
	wait_for 5 in_metrics "$TPID"
	"$HEAPCTL" dump "$TPID" -o "$T/d.heap" >/dev/null
	[ "$(code "$URL/")" = 200 ]
	cp "$T/body" "$T/all.html"
	grep -q "<a href=\"/?pid=$TPID\">$TPID</a>" "$T/all.html"
	# its events (the dump above, once the daemon's poll has read it)
	dumped() { code "$URL/?pid=$TPID" >/dev/null && grep -q "&quot;type&quot;: &quot;dump&quot;.*&quot;pid&quot;: $TPID, .*$T/d.heap" "$T/body"; }
	wait_for 5 dumped
	[ "$(code "$URL/?pid=$TPID")" = 200 ]
	grep -q '^Content-Type: text/html; charset=utf-8' "$T/head"
	if cmp -s "$T/body" "$T/all.html"; then false; fi
	grep -q "<title>target (pid $TPID)</title>" "$T/body"
	grep -q "<h1 id=\"process\">target (pid $TPID)</h1>" "$T/body"
	grep -q "<code class=\"command\">$TARGET seconds=600</code>" "$T/body"
	grep -q "User <b class=\"user\">root</b> (uid 0)" "$T/body"
	grep -q "<img class=\"plot\" src=\"/plot?pid=$TPID&amp;t=0\"" "$T/body"
	grep -q "<a href=\"/debug/pprof/allocs?pid=$TPID\">allocs</a>" "$T/body"
	grep -q "<a href=\"/flame?pid=$TPID\">flame graph</a>" "$T/body"
	grep -q "<button data-act=\"dump\" data-pid=\"$TPID\">dump</button>" "$T/body"
	grep -q 'id="token"' "$T/body"
	# one process's row: no other target of this host is on it
	[ "$(grep -c '<tr data-pid=' "$T/body")" -eq 1 ]
	# its events: found first, and the dump
	grep -q "<ol id=\"events\"><li><code>{&quot;type&quot;: &quot;found&quot;, &quot;pid&quot;: $TPID," "$T/body"
	grep -q "&quot;type&quot;: &quot;dump&quot;.*&quot;pid&quot;: $TPID, .*$T/d.heap" "$T/body"
	# a pid that runs no library, and one that is no pid: one line each
	[ "$(code "$URL/?pid=999999999")" = 404 ]
	grep -q '<p id="error">process 999999999 is not running libheapctl.so (see /targets)</p>' "$T/body"
	[ "$(code "$URL/?pid=12x")" = 400 ]
	grep -q '<p id="error">pid must be a process id</p>' "$T/body"
}

@test "serve_page: nobody gets her own process's page; root's is refused as its profile is (403, the same line), on TCP and the Unix socket" {
	need_root
	mkdir -p "$T/nb"
	chown nobody:nogroup "$T/nb"
	start_target -c prof:true,lg_prof_sample:12,control_refresh_ms:100
	local rootp=$TPID
	start_target -u nobody -d "$T/nb" -c prof:true,lg_prof_sample:12,control_refresh_ms:100
	local mine=$TPID
	start_serve --listen 127.0.0.1:0
	wait_for 5 in_metrics "$rootp"
	wait_for 5 in_metrics "$mine"
	[ "$(ncode "$URL/?pid=$mine")" = 200 ]
	grep -q "<h1 id=\"process\">target (pid $mine)</h1>" "$T/nbody"
	grep -q "User <b class=\"user\">nobody</b> (uid 65534)" "$T/nbody"
	[ "$(ncode "$URL/?pid=$rootp")" = 403 ]
	cp "$T/nbody" "$T/page403"
	[ "$(ncode "$URL/debug/pprof/heap?pid=$rootp")" = 403 ]
	local line
	line=$(cat "$T/nbody")
	[ "$line" = "process $rootp is not yours: uid 65534 cannot read its /proc/$rootp/maps" ]
	grep -qF "<p id=\"error\">$line</p>" "$T/page403"
	absent -q "seconds=600\|<tr data-pid" "$T/page403"
	kill -TERM "$SPID"
	wait "$SPID" || true
	start_serve --listen "unix:$T/s.sock"
	wait_for 5 curl -s -o /dev/null --unix-socket "$T/s.sock" "http://localhost/metrics"
	wait_for 5 eval "curl -s --unix-socket '$T/s.sock' http://localhost/metrics | grep -q 'pid=\"$mine\"'"
	[ "$(ncode --unix-socket "$T/s.sock" "http://localhost/?pid=$mine")" = 200 ]
	grep -q "<h1 id=\"process\">target (pid $mine)</h1>" "$T/nbody"
	[ "$(ncode --unix-socket "$T/s.sock" "http://localhost/?pid=$rootp")" = 403 ]
	grep -qF "<p id=\"error\">$line</p>" "$T/nbody"
}

# sees the whole machine (tests/run.sh gives it namespaces of its own): counts what the daemon archived: root's daemon archives every preloaded process's dumps
# bats test_tags=machine
@test "serve_page: the flame graph's title names the program and pid (or the archived dump), never a work file" {
	start_target -c prof:true,lg_prof_sample:12,prof_prefix:$T/jp,control_refresh_ms:100
	start_serve --archive "$T/arch"
	wait_for 5 in_metrics "$TPID"
	[ "$(code "$URL/flame?pid=$TPID")" = 200 ]
	grep -q "^<title>target (pid $TPID): in-use space</title>$" "$T/body"
	grep -q "<text class=\"h1\" x=\"[0-9]*\" y=\"24\">target (pid $TPID): in-use space</text>" "$T/body"
	no_daemon_path "$T/body"
	absent -q "/tmp\|b\.heap" "$T/body"
	[ "$(code "$URL/flame?pid=$TPID&seconds=1")" = 200 ]
	grep -q "^<title>target (pid $TPID), growth over 1 s: in-use space</title>$" "$T/body"
	no_daemon_path "$T/body"
	absent -q "/tmp\|a\.heap" "$T/body"
	"$HEAPCTL" dump "$TPID" >/dev/null
	sleep 0.3
	"$HEAPCTL" dump "$TPID" >/dev/null
	wait_for 5 eval '[ "$(ls "$T"/arch/target/*.pb.gz 2>/dev/null | wc -l)" -eq 2 ]'
	local a b
	a=$(cd "$T/arch" && ls target/*.heap | sed -n 1p)
	b=$(cd "$T/arch" && ls target/*.heap | sed -n 2p)
	[ "$(code "$URL/flame?file=$b")" = 200 ]
	grep -q "^<title>$b: in-use space</title>$" "$T/body"
	[ "$(code "$URL/flame?file=$b&base=$a")" = 200 ]
	grep -q "^<title>$b - $a: in-use space</title>$" "$T/body"
	no_daemon_path "$T/body"
	absent -q "/tmp" "$T/body"
	# the pprof's comment names the process too, not the work file
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID")" = 200 ]
	zcat "$T/body" >"$T/heap.pb"
	grep -aq "heapctl report target (pid $TPID)" "$T/heap.pb"
	no_daemon_path "$T/heap.pb"
}

# sees the whole machine (tests/run.sh gives it namespaces of its own): counts what the daemon archived: root's daemon archives every preloaded process's dumps
# bats test_tags=machine
@test "serve_page: the text top has the column headers heapctl report prints; report --json is unchanged" {
	start_target -c prof:true,lg_prof_sample:12,prof_prefix:$T/jp,control_refresh_ms:100
	start_serve --archive "$T/arch"
	wait_for 5 in_metrics "$TPID"
	local header='    flat  flat%   sum%      cum   cum% function'
	"$HEAPCTL" dump "$TPID" -o "$T/d.heap" >/dev/null
	run "$HEAPCTL" report "$T/d.heap"
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "Total: "* ]]
	[ "${lines[1]}" = "$header" ]
	[[ "${lines[2]}" =~ ^\ +[0-9.]+\ +[0-9.]+%\ +[0-9.]+%\ +[0-9.]+\ +[0-9.]+%\ [^\ ]+ ]]
	run "$HEAPCTL" report "$T/d.heap" --lines --top 1
	[ "${lines[1]}" = "$header file:line" ]
	"$HEAPCTL" report "$T/d.heap" --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert sorted(j) == ["profile", "rows", "total", "type", "unit"], sorted(j)
assert all(sorted(r) == ["cum", "flat", "name"] for r in j["rows"]), j["rows"][:2]
assert j["profile"].endswith("/d.heap"), j["profile"]'
	[ "$(code "$URL/debug/pprof/heap?pid=$TPID&debug=1")" = 200 ]
	[[ "$(sed -n 1p "$T/body")" == "Total: "* ]]
	[ "$(sed -n 2p "$T/body")" = "$header" ]
	"$HEAPCTL" dump "$TPID" >/dev/null
	wait_for 5 eval '[ "$(ls "$T"/arch/target/*.pb.gz 2>/dev/null | wc -l)" -eq 1 ]'
	[ "$(code "$URL/top?file=$(cd "$T/arch" && ls target/*.heap)")" = 200 ]
	[ "$(sed -n 2p "$T/body")" = "$header" ]
}

@test "serve_page: allocs of a process without prof_accum says why and how, and go tool pprof shows it; with prof_accum it is a profile" {
	need_go
	start_target -c prof:true,lg_prof_sample:12,control_refresh_ms:100
	local plain=$TPID
	start_target -c prof:true,prof_accum:true,lg_prof_sample:12,control_refresh_ms:100
	local accum=$TPID
	start_serve
	wait_for 5 in_metrics "$plain"
	wait_for 5 in_metrics "$accum"
	local why="target (pid $plain) keeps no allocation counts (allocs): it was started without prof_accum:true"
	[ "$(code "$URL/debug/pprof/allocs?pid=$plain")" = 404 ]
	[[ "$(cat "$T/body")" == "$why"*"HEAPCTL_CONF=prof_accum:true"*"/debug/pprof/heap?pid=$plain has what it holds now" ]]
	[ "$(wc -l <"$T/body")" -eq 1 ]
	grep -q '^X-Go-Pprof: 1' "$T/head"
	grep -q '^Content-Type: text/plain; charset=utf-8' "$T/head"
	[ "$(code "$URL/debug/pprof/allocs?pid=$plain&debug=1")" = 404 ]
	run env HOME="$T" PPROF_TMPDIR="$T" go tool pprof -top "$URL/debug/pprof/allocs?pid=$plain"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"server response: 404 Not Found - $why"* ]]
	[[ "$output" != *"0 of 0 total"* ]]
	# the heap of the same process, and allocs of one with the counts
	[ "$(code "$URL/debug/pprof/heap?pid=$plain")" = 200 ]
	run env HOME="$T" PPROF_TMPDIR="$T" go tool pprof -top "$URL/debug/pprof/allocs?pid=$accum"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"Type: alloc_space"* ]]
	[[ "$output" =~ Showing\ nodes\ accounting\ for\ [0-9.]+[kMG]?B,\ [0-9.]+%\ of\ [0-9.]+[kMG]?B\ total ]]
	[[ "$output" != *"of 0 total"* ]]
}

@test "serve_page: go tool pprof prints why a daemon beyond loopback refused it (401 without the token)" {
	need_go
	start_target -c prof:true,lg_prof_sample:12,control_refresh_ms:100
	echo "0123456789abcdef0123" >"$T/token"
	chmod 600 "$T/token"
	start_serve --listen 0.0.0.0:0 --token-file "$T/token"
	local port=${URL##*:}
	run env HOME="$T" PPROF_TMPDIR="$T" go tool pprof -top "http://127.0.0.1:$port/debug/pprof/heap?pid=$TPID"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"server response: 401 Unauthorized - a bearer token is needed"* ]]
}

# sees the whole machine (tests/run.sh gives it namespaces of its own): reads /events, which carries every process's events: another daemon's work paths among them
# bats test_tags=machine
@test "serve_page: no error, empty profile or answer names a path of the daemon's (work directory, archive, symbol cache)" {
	need_root
	start_target -c prof:true,lg_prof_sample:12,prof_prefix:$T/jp,control_refresh_ms:100
	local live=$TPID
	start_target -c prof:true,prof_active:false,control_refresh_ms:100
	local empty=$TPID
	start_target -c prof:true,lg_prof_sample:12,control_refresh_ms:100
	local vanish=$TPID
	start_target -c prof:true,lg_prof_sample:12,control_refresh_ms:100
	local stopped=$TPID
	start_serve --archive "$T/arch" --timeout 1
	for p in "$live" "$empty" "$vanish" "$stopped"; do wait_for 5 in_metrics "$p"; done
	"$HEAPCTL" dump "$live" >/dev/null
	sleep 0.3
	"$HEAPCTL" dump "$live" >/dev/null
	wait_for 5 eval '[ "$(ls "$T"/arch/target/*.pb.gz 2>/dev/null | wc -l)" -eq 2 ]'
	local a b n=0
	a=$(cd "$T/arch" && ls target/*.heap | sed -n 1p)
	b=$(cd "$T/arch" && ls target/*.heap | sed -n 2p)
	# one archived dump spoilt, one gone (its pprof stays)
	printf 'heap_v2/garbage\n' >"$T/arch/$a"
	rm "$T/arch/$b"
	# ask URL-PATH WANTED-STATUS: the answer, kept as $T/ans.N (with its headers)
	ask() {
		n=$((n + 1))
		local got
		got=$(curl -s -o "$T/ans.$n" -D "$T/ans.$n.head" -w '%{http_code}' --max-time 30 "$URL$1")
		[ "$got" = "$2" ] || { echo "$1: $got, not $2: $(cat "$T/ans.$n")" >&2; return 1; }
		if [ "$(head -c2 "$T/ans.$n" | od -An -tx1 | tr -d ' ')" = 1f8b ]; then
			zcat "$T/ans.$n" >"$T/ans.$n.raw" && mv "$T/ans.$n.raw" "$T/ans.$n"
		fi
	}
	ask "/debug/pprof/heap?pid=abc" 400
	ask "/debug/pprof/heap?pid=999999999" 404
	ask "/?pid=999999999" 404
	ask "/top?file=$a" 400                         # spoilt: report's message, by its archive name
	grep -qF "heapctl: $a:1: expected 'heap_v2/<sample period>'" "$T/ans.$n"
	ask "/flame?file=$a" 400
	ask "/top?file=$b" 404
	ask "/top?file=$a&base=$b" 404
	ask "/archive/$b" 404
	ask "/archive/${b%.heap}.pb.gz" 200
	# empty: a profile of nothing, with its name, as text, pprof and flame graph
	ask "/debug/pprof/heap?pid=$empty&debug=1" 200
	[ "$(cat "$T/ans.$n")" = "heapctl: target (pid $empty): nothing to show: no inuse_space" ]
	ask "/debug/pprof/heap?pid=$empty" 200
	grep -aq "heapctl report target (pid $empty)" "$T/ans.$n"
	ask "/flame?pid=$empty" 200
	ask "/debug/pprof/allocs?pid=$live" 404
	# a process that does not answer, and one that is gone in the middle
	kill -STOP "$stopped"
	ask "/debug/pprof/heap?pid=$stopped&debug=1" 504
	kill -CONT "$stopped"
	(sleep 1; kill -KILL "$vanish") &
	ask "/debug/pprof/heap?pid=$vanish&seconds=3" 404
	ask "/nothing" 404
	# the events of those scrapes: dumps the daemon asked for, not where
	# (this host's other processes, other daemons' targets, are left out)
	curl -s --max-time 2 "$URL/events?since=0" >"$T/events.all" || true
	grep -E "\"pid\": ($live|$empty|$vanish|$stopped)[,}]" "$T/events.all" >"$T/events"
	grep -q "\"type\": \"dump\", .*\"pid\": $empty, .*\"path\": \"(a profile this daemon took)\"" "$T/events"
	no_daemon_path "$T/events"
	cat "$T"/ans.*
	for ((i = 1; i <= n; i++)); do no_daemon_path "$T/ans.$i" "$T/ans.$i.head"; done
	# every error in text (not the page's) carries X-Go-Pprof, so that go
	# tool pprof shows it
	for ((i = 1; i <= n; i++)); do
		if [ "$(sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$T/ans.$i.head")" -ge 400 ] &&
		    grep -q '^Content-Type: text/plain' "$T/ans.$i.head"; then
			grep -q '^X-Go-Pprof: 1' "$T/ans.$i.head" || { echo "ans.$i: no X-Go-Pprof" >&2; cat "$T/ans.$i.head" >&2; return 1; }
		fi
	done
}

@test "serve_page: /?pid=N in headless Chromium: the process, its user and its plot in the DOM, its events" {
	command -v chromium >/dev/null || skip "chromium is not installed"
	start_target -c prof:true,lg_prof_sample:12,control_refresh_ms:100
	start_serve
	wait_for 5 in_metrics "$TPID"
	"$HEAPCTL" dump "$TPID" -o "$T/d.heap" >/dev/null
	run timeout 120 python3 "$BATS_TEST_DIRNAME/../lib/cdp.py" "$URL/?pid=$TPID" --shot "$T/page.png" \
	    "document.title" \
	    "document.getElementById('process').textContent" \
	    "document.querySelector('#facts .user').textContent" \
	    "[...document.querySelectorAll('#targets tr[data-pid]')].map(r => r.dataset.pid).join(' ')" \
	    "(async () => { const i = document.querySelector('img.plot');
	        for (let k = 0; k < 100 && !i.complete; k++) await new Promise(r => setTimeout(r, 100));
	        return i.naturalWidth + ' ' + new URL(i.src).pathname + new URL(i.src).search.replace(/&t=.*/, '') })()" \
	    "document.querySelectorAll('#events li').length >= 2" \
	    "document.querySelector('a[href=\"/debug/pprof/allocs?pid=$TPID\"]') !== null"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "\"target (pid $TPID)\"" ]
	[ "${lines[1]}" = "\"target (pid $TPID)\"" ]
	[ "${lines[2]}" = '"root"' ]
	[ "${lines[3]}" = "\"$TPID\"" ]
	[ "${lines[4]}" = "\"720 /plot?pid=$TPID\"" ]
	[ "${lines[5]}" = true ]
	[ "${lines[6]}" = true ]
	[ "$(head -c 8 "$T/page.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}
