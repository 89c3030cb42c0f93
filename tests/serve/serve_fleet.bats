#!/usr/bin/env bats
# tests/serve/serve_fleet.bats - heapctl serve for a fleet's collectors
# (issue 37, "Fleet"): /sd, Prometheus's HTTP service discovery, lists a
# target per process the requester may profile, with its labels and the
# pid parameter that makes a scrape of it fetch that process alone
# (/metrics?pid=N); nobody is given her own processes only, the token
# every one; its parameters narrow the list and a bad one is a 400; and a
# real Prometheus configured with http_sd_configs finds every process,
# scrapes each one's series and nothing else, with their pid and user.
# Every test here fails on the daemon before /sd (404).

load ../lib/helpers

# code CURLARGS...: as root; the body in $T/body
code() { curl -s -o "$T/body" -w '%{http_code}' --max-time 30 "$@"; }

# start_serve [ARGS...]: serve.bats's (root's daemon on a free loopback
# port; sets URL, SPID)
eval "$(sed -n '/^start_serve() {/,/^}/p' "$BATS_TEST_DIRNAME/serve.bats")"

# root's process (ROOTP), nobody's (MINE) and daemon's (OTHER), found
three_targets() {
	mkdir -p "$T/nb" "$T/dm"
	chown nobody:nogroup "$T/nb"
	chown daemon:daemon "$T/dm"
	start_target
	ROOTP=$TPID
	start_target -u nobody -d "$T/nb"
	MINE=$TPID
	start_target -u daemon -d "$T/dm"
	OTHER=$TPID
	found() { curl -s --max-time 5 "$URL/metrics" | grep -q "^heapctl_allocated_bytes{pid=\"$1\""; }
	for p in "$ROOTP" "$MINE" "$OTHER"; do wait_for 5 found "$p"; done
}

# sd_pids FILE: the pids /sd listed in FILE (other engineers' processes
# may be there too: the tests look for theirs), one a line
sd_pids() {
	python3 -c '
import json, sys
for g in json.load(open(sys.argv[1])):
    print(g["labels"]["pid"])' "$1"
}

# prom_job NAME [TOKENFILE]: a Prometheus job of /sd as the README gives
# it (a 1 s refresh here), kept to ROOTP, MINE and OTHER (other daemons'
# tests run on this host too); with TOKENFILE in both its authorizations
prom_job() {
	local auth=""
	[ -z "${2:-}" ] || auth="authorization: {type: Bearer, credentials_file: $2}"
	cat <<-EOF
	  - job_name: $1
	    honor_labels: true
	    http_sd_configs:
	      - url: $URL/sd
	        refresh_interval: 1s
	        $auth
	    $auth
	    relabel_configs:
	      - source_labels: [pid]
	        regex: '$ROOTP|$MINE|$OTHER'
	        action: keep
	EOF
}

# listed FILE PID / unlisted FILE PID
listed() { sd_pids "$1" | grep -qx "$2"; }
unlisted() { ! sd_pids "$1" | grep -qx "$2"; }

@test "serve_fleet: /sd is http_sd JSON: one target per process, the daemon's address, pid, user, unit, container, command and __param_pid" {
	need_root
	start_serve
	three_targets
	curl -s -D "$T/h" -o "$T/sd.json" "$URL/sd"
	grep -qi '^HTTP/1.1 200' "$T/h"
	grep -qi '^Content-Type: application/json' "$T/h"
	curl -s "$URL/targets" >"$T/targets.json"
	python3 - "$T/sd.json" "$T/targets.json" "${URL#http://}" "$ROOTP:root" "$MINE:nobody" "$OTHER:daemon" <<-'PY'
	import json, sys
	sd = json.load(open(sys.argv[1]))
	known = {t["pid"]: t for t in json.load(open(sys.argv[2]))}
	addr = sys.argv[3]
	assert isinstance(sd, list), sd
	for g in sd:
	    # the http_sd shape: targets (strings) and labels (string to string)
	    assert set(g) == {"targets", "labels"}, g
	    assert all(isinstance(v, str) and v for v in g["labels"].values()), g
	    assert g["targets"] == [addr], g
	    assert g["labels"]["__metrics_path__"] == "/metrics", g
	    assert g["labels"]["__param_pid"] == g["labels"]["pid"], g
	by_pid = {g["labels"]["pid"]: g["labels"] for g in sd}
	assert len(by_pid) == len(sd), "a process listed twice"
	for arg in sys.argv[4:]:
	    pid, user = arg.split(":")
	    l = by_pid[pid]
	    t = known[int(pid)]
	    assert l["user"] == user, l
	    assert l["command"] == "target", l
	    # unit and container as /targets has them, absent when it has none
	    assert l.get("unit") == t["unit"], (l, t)
	    assert l.get("container") == t["container"], (l, t)
	    assert set(l) <= {"__metrics_path__", "__param_pid", "pid", "user", "unit", "container", "command"}, l
	PY
}

@test "serve_fleet: /metrics labels every process's series with its user; ?pid=N is that process's alone; promtool accepts both" {
	need_root
	start_serve
	three_targets
	curl -s "$URL/metrics" >"$T/m.txt"
	promtool check metrics <"$T/m.txt"
	# every per-process series has a user label; ours have the right one
	[ "$(grep '^heapctl_[a-z_]*{pid=' "$T/m.txt" | grep -vc ',user="[^"]*"}')" = 0 ]
	grep -q "^heapctl_allocated_bytes{pid=\"$ROOTP\",.*,user=\"root\"} " "$T/m.txt"
	grep -q "^heapctl_allocated_bytes{pid=\"$MINE\",.*,user=\"nobody\"} " "$T/m.txt"
	grep -q "^heapctl_allocated_bytes{pid=\"$OTHER\",.*,user=\"daemon\"} " "$T/m.txt"
	grep -q '^heapctl_targets [1-9]' "$T/m.txt"
	[ "$(code "$URL/metrics?pid=$MINE")" = 200 ]
	cp "$T/body" "$T/one.txt"
	promtool check metrics <"$T/one.txt"
	# 27 series of hers (15 counters, 6 parts of her resident memory, 6 of
	# her heap), none of anyone else's, no daemon-wide series
	[ "$(grep -c '^heapctl_[a-z_]*{' "$T/one.txt")" = 27 ]
	[ "$(grep -c "^heapctl_[a-z_]*{pid=\"$MINE\",.*,user=\"nobody\"} " "$T/one.txt")" = 27 ]
	[ "$(grep -c '^heapctl_targets' "$T/one.txt")" = 0 ]
	# OpenMetrics too, with its # EOF
	curl -s -H 'Accept: application/openmetrics-text; version=1.0.0' "$URL/metrics?pid=$MINE" >"$T/om.txt"
	[ "$(tail -n1 "$T/om.txt")" = "# EOF" ]
	[ "$(grep -c "^heapctl_[a-z_]*{pid=\"$MINE\"," "$T/om.txt")" = 27 ]
	# a process that is not there, and a pid that is none
	[ "$(code "$URL/metrics?pid=1")" = 404 ]
	[ "$(cat "$T/body")" = "process 1 is not running libheapctl.so (see /targets)" ]
	[ "$(code "$URL/metrics?pid=abc")" = 400 ]
	[ "$(cat "$T/body")" = "pid must be a process id" ]
}

@test "serve_fleet: nobody is given her own processes only, on loopback TCP and the Unix socket; root and the token every one" {
	need_root
	printf 'fleet-token-0123456789\n' >"$T/token"
	chmod 600 "$T/token"
	start_serve --token-file "$T/token"
	three_targets
	[ "$(ncode "$URL/sd")" = 200 ]
	cat "$T/nbody"
	listed "$T/nbody" "$MINE"
	unlisted "$T/nbody" "$ROOTP"
	unlisted "$T/nbody" "$OTHER"
	# every one listed to her is hers: nobody's
	python3 -c '
import json, sys
assert all(g["labels"]["user"] == "nobody" for g in json.load(open(sys.argv[1])))' "$T/nbody"
	# the token, as a collector sends it (authorization in its config)
	[ "$(ncode -H 'Authorization: Bearer fleet-token-0123456789' "$URL/sd")" = 200 ]
	listed "$T/nbody" "$MINE"
	listed "$T/nbody" "$ROOTP"
	listed "$T/nbody" "$OTHER"
	# a wrong token is no token: her own again
	[ "$(ncode -H 'Authorization: Bearer fleet-token-9876543210' "$URL/sd")" = 200 ]
	unlisted "$T/nbody" "$ROOTP"
	listed "$T/nbody" "$MINE"
	# root, with no token, sees all (CAP_SYS_PTRACE)
	[ "$(code "$URL/sd")" = 200 ]
	listed "$T/body" "$ROOTP"
	listed "$T/body" "$OTHER"
	# the Unix socket: her credentials from SO_PEERCRED
	"$HEAPCTL" serve --listen "unix:$T/s.sock" >"$T/serve2.out" 2>"$T/serve2.err" &
	track $!
	wait_for 5 test -S "$T/s.sock"
	chmod 666 "$T/s.sock"
	got_mine() { [ "$(ncode --unix-socket "$T/s.sock" http://localhost/sd)" = 200 ] && listed "$T/nbody" "$MINE"; }
	wait_for 5 got_mine
	unlisted "$T/nbody" "$ROOTP"
	unlisted "$T/nbody" "$OTHER"
	grep -q '"targets": \["localhost"\]' "$T/nbody"
}

# sees the whole machine (tests/run.sh gives it namespaces of its own): ?container= lists every preloaded process: with another's after the one grep -q takes, the lister dies of a broken pipe
# bats test_tags=machine
@test "serve_fleet: user=, unit=, container=, command= and pid= narrow /sd by exact match" {
	need_root
	start_serve
	three_targets
	sd() { [ "$(code "$URL/sd?$1")" = 200 ] || { cat "$T/body" >&2; return 1; }; }
	sd "user=nobody"
	listed "$T/body" "$MINE"; unlisted "$T/body" "$ROOTP"; unlisted "$T/body" "$OTHER"
	sd "user=65534"
	listed "$T/body" "$MINE"; unlisted "$T/body" "$ROOTP"
	sd "user=root"
	listed "$T/body" "$ROOTP"; unlisted "$T/body" "$MINE"; unlisted "$T/body" "$OTHER"
	sd "command=target"
	listed "$T/body" "$ROOTP"; listed "$T/body" "$MINE"; listed "$T/body" "$OTHER"
	sd "command=targe"
	unlisted "$T/body" "$ROOTP"; unlisted "$T/body" "$MINE"
	sd "user=daemon&command=target"
	listed "$T/body" "$OTHER"; unlisted "$T/body" "$MINE"
	sd "pid=$MINE"
	[ "$(sd_pids "$T/body")" = "$MINE" ]
	# unit= and container= as /targets names them; empty: none
	local unit
	unit=$(curl -s "$URL/targets" | python3 -c '
import json, sys
print(next(t["unit"] or "" for t in json.load(sys.stdin) if t["pid"] == int(sys.argv[1])))' "$ROOTP")
	sd "unit=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$unit")"
	listed "$T/body" "$ROOTP"
	sd "unit=no-such.service"
	[ -z "$(sd_pids "$T/body")" ]
	sd "container="
	listed "$T/body" "$ROOTP"; listed "$T/body" "$MINE"
	sd "container=0123456789ab"
	unlisted "$T/body" "$ROOTP"; unlisted "$T/body" "$MINE"
	# no match at all: 200 and an empty array, as http_sd wants
	sd "pid=999999999"
	[ "$(tr -d ' \n' <"$T/body")" = "[]" ]
	curl -s -D "$T/h" -o /dev/null "$URL/sd?pid=999999999"
	grep -qi '^Content-Type: application/json' "$T/h"
}

@test "serve_fleet: a bad parameter or Host is a 400 with one line" {
	need_root
	start_serve
	start_target
	bad() {
		[ "$(code "$@")" = 400 ] || { echo "$*: not 400" >&2; return 1; }
		[ "$(wc -l <"$T/body")" = 1 ]
		cat "$T/body"
	}
	[ "$(bad "$URL/sd?foo=1")" = "unknown parameter 'foo': /sd takes user, unit, container, command and pid" ]
	[ "$(bad "$URL/sd?pid=abc")" = "pid must be a process id" ]
	[ "$(bad "$URL/sd?pid=0")" = "pid must be a process id" ]
	[ "$(bad "$URL/sd?pid=12345678901")" = "pid must be a process id" ]
	[ "$(bad "$URL/sd?user")" = "user needs a value of at most 255 bytes (user=VALUE)" ]
	[ "$(bad "$URL/sd?unit=$(printf 'u%.0s' $(seq 300))")" = "unit needs a value of at most 255 bytes (unit=VALUE)" ]
	[ "$(bad "$URL/sd?user=root&user=nobody")" = "user is given twice: one value each" ]
	# a loopback Host the target address cannot be (passes the loopback check)
	[ "$(bad -H 'Host: 127.0.0.1:99999' "$URL/sd")" = "the Host '127.0.0.1:99999' is no HOST:PORT to scrape" ]
	[ "$(bad -H 'Host: localhost:80"x' "$URL/sd")" = "the Host 'localhost:80\"x' is no HOST:PORT to scrape" ]
	# HTTP/1.0 without a Host
	[ "$(bad -0 -H 'Host:' "$URL/sd")" = "a Host header is needed: it is the targets' address" ]
	[ "$(bad "$URL/metrics?pid=-3")" = "pid must be a process id" ]
}

@test "serve_fleet: a real Prometheus with http_sd_configs makes each process a target and scrapes its series with its pid and user" {
	need_root
	command -v prometheus >/dev/null || skip "prometheus is not installed"
	start_serve
	three_targets
	printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n' >"$T/prom.yml"
	prom_job heapctl >>"$T/prom.yml"
	promtool check config "$T/prom.yml"
	start_prometheus "$T/prom.yml"
	local api=$PROM_API
	# the three targets, up, each scraped at /metrics?pid=N
	all_up() {
		curl -s --max-time 5 "$api/targets?state=active" >"$T/targets.json" || return 1
		python3 - "$T/targets.json" "$ROOTP" "$MINE" "$OTHER" <<-'PY'
		import json, sys
		t = json.load(open(sys.argv[1]))["data"]["activeTargets"]
		up = {x["labels"].get("pid") for x in t if x["health"] == "up"}
		sys.exit(0 if set(sys.argv[2:]) <= up else 1)
		PY
	}
	wait_for 40 all_up || { tail -5 "$T/prom.log" >&2; cat "$T/targets.json" >&2; return 1; }
	python3 - "$T/targets.json" "${URL#http://}" "$ROOTP:root" "$MINE:nobody" "$OTHER:daemon" <<-'PY'
	import json, sys
	t = json.load(open(sys.argv[1]))["data"]["activeTargets"]
	assert len(t) == 3, t
	for arg in sys.argv[3:]:
	    pid, user = arg.split(":")
	    x = next(x for x in t if x["labels"]["pid"] == pid)
	    assert x["labels"]["user"] == user, x
	    assert x["labels"]["command"] == "target", x
	    assert x["labels"]["job"] == "heapctl", x
	    assert x["scrapeUrl"] == "http://%s/metrics?pid=%s" % (sys.argv[2], pid), x
	    assert x["discoveredLabels"]["__param_pid"] == pid, x
	PY
	# each process's series, scraped from its own target, with its labels
	local q="$api/query?query=heapctl_allocated_bytes%7Bjob%3D%22heapctl%22%7D"
	three() {
		curl -s --max-time 5 "$q" >"$T/q.json" &&
		    [ "$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["data"]["result"]))' "$T/q.json")" = 3 ]
	}
	wait_for 20 three || { cat "$T/q.json" >&2; return 1; }
	python3 - "$T/q.json" "${URL#http://}" "$ROOTP:root" "$MINE:nobody" "$OTHER:daemon" <<-'PY'
	import json, sys
	r = json.load(open(sys.argv[1]))["data"]["result"]
	by_pid = {x["metric"]["pid"]: x for x in r}
	for arg in sys.argv[3:]:
	    pid, user = arg.split(":")
	    m = by_pid[pid]["metric"]
	    assert m["user"] == user, m
	    assert m["instance"] == sys.argv[2], m
	    assert "exported_pid" not in m and "exported_user" not in m, m
	    assert float(by_pid[pid]["value"][1]) > 0, by_pid[pid]
	PY
	# one process a scrape: as many samples as /metrics?pid=N has series
	local want
	want=$(curl -s "$URL/metrics?pid=$MINE" | grep -c '^heapctl_')
	[ "$want" = 27 ]
	samples() {
		curl -s --max-time 5 "$api/query?query=scrape_samples_scraped%7Bpid%3D%22$MINE%22%7D" >"$T/s.json" &&
		    grep -q "\"value\":\[[0-9.]*,\"$want\"\]" "$T/s.json"
	}
	wait_for 10 samples || { cat "$T/s.json" >&2; return 1; }
}

@test "serve_fleet: a Prometheus that runs as nobody is given her own process, and every one with the token in its authorization" {
	need_root
	command -v prometheus >/dev/null || skip "prometheus is not installed"
	printf 'fleet-token-0123456789\n' >"$T/token"
	chmod 600 "$T/token"
	start_serve --token-file "$T/token"
	three_targets
	# her copy of the token, as /etc/prometheus/heapctl.token would be
	install -o nobody -g nogroup -m 600 "$T/token" "$T/prom.token"
	install -d -o nobody -g nogroup "$T/tsdb"
	printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n' >"$T/prom.yml"
	prom_job own >>"$T/prom.yml"
	prom_job all "$T/prom.token" >>"$T/prom.yml"
	cat "$T/prom.yml"
	promtool check config "$T/prom.yml"
	start_prometheus "$T/prom.yml" setpriv --reuid=nobody --regid=nogroup --clear-groups
	# the jobs' targets that are up, "JOB PID" a line
	up_targets() {
		curl -s --max-time 5 "$PROM_API/targets?state=active" | python3 -c '
import json, sys
for x in json.load(sys.stdin)["data"]["activeTargets"]:
    if x["health"] == "up":
        print(x["labels"]["job"], x["labels"]["pid"])' | sort >"$T/up.txt"
	}
	want() { printf '%s\n' "all $ROOTP" "all $MINE" "all $OTHER" "own $MINE" | sort; }
	settled() { up_targets && [ "$(cat "$T/up.txt")" = "$(want)" ]; }
	# (both jobs read the same /sd at the same moments: root's and daemon's
	# processes never in "own" while they are in "all")
	wait_for 20 settled || { tail -5 "$T/prom.log" >&2; cat "$T/up.txt" >&2; return 1; }
	[ "$(ps -o user= -p "$PROM_PID")" = nobody ]
}
