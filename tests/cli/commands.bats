#!/usr/bin/env bats
# heapctl's commands as a person types them, against the test service
# (build/tests/programs/target, linked with libheapctl.so): what they print and
# their exit status.

load ../lib/helpers

# ---- list ------------------------------------------------------------------

@test "list: a header and one row per process with pid, on/off, rate and command" {
	start_target
	# stderr apart: a note that it removed the segments of killed processes
	# (another test's) is not the table
	run --separate-stderr "$HEAPCTL" list
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" =~ ^PID\ +NSPID\ +PROF\ +SAMPLE\ +ALLOCATED\ +MAPPED\ +HIGH-WATER\ +DUMPS\ +COMMAND$ ]]
	[[ "$output" =~ (^|$'\n')$TPID\ +-\ +on\ +2\^19\ +[0-9.]+\ [KMG]?i?B\ .*\ 0\ \ $TARGET\ seconds=600($'\n'|$) ]]

	"$HEAPCTL" off "$TPID"
	run --separate-stderr "$HEAPCTL" list
	[ "$status" -eq 0 ]
	[[ "$output" =~ (^|$'\n')$TPID\ +-\ +off\ +2\^19\  ]]
}

@test "list --json: a JSON array with the process, its pid, command and prof_active" {
	start_target
	run --separate-stderr "$HEAPCTL" list --json
	[ "$status" -eq 0 ]
	echo "$output" | python3 -c 'import json,sys; json.load(sys.stdin)'
	echo "$output" | python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["pid"] == int(sys.argv[1])]
assert len(rows) == 1, rows
r = rows[0]
assert r["prof_active"] is True and r["lg_sample"] == 19, r
assert r["command"].startswith(sys.argv[2]), r
assert r["allocated"] > 0 and r["mapped"] > 0 and r["highwater"] >= r["mapped"], r
assert r["dumps"] == 0, r' "$TPID" "$TARGET"
}

@test "list: unexpected argument is a usage error" {
	run "$HEAPCTL" list extra
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: list: unexpected argument 'extra'" ]
}

# ---- status -----------------------------------------------------------------

# runs alone (tests/run.sh): asserts that the target received no command (0 commands served): a daemon of another suite asks every preloaded process
# bats test_tags=machine
@test "status: text shows identity, settings and counters" {
	start_target
	run --separate-stderr "$HEAPCTL" status "$TPID"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "process        $TPID" ]
	[ "${lines[1]}" = "command        $TARGET seconds=600" ]
	[[ "$output" == *$'\nlibrary        heapctl '*", segment ABI 1, "*"heapctl.$TPID"$'\n'* ]]
	[[ "$output" == *$'\ncontrol        running, 0 commands served\n'* ]]
	[[ "$output" == *$'\nprofiling      on\n'* ]]
	[[ "$output" == *$'\nprof.lg_sample           19 (a sample every 512.0 KiB on average)\n'* ]]
	[[ "$output" == *$'\nprof.unwind              libunwind\n'* ]]
	[[ "$output" == *$'\nprof.interval            off\n'* ]]
	[[ "$output" == *$'\nprof.gdump_pct           10\n'* ]]
	# every run-time setting of the list has its line, in the list's order
	[ "$(echo "$output" | grep -o '^prof\.[a-z_]*' | tr '\n' ' ')" = \
	    "$("$HEAPCTL" help set | sed -n 's/^  \(prof\.[a-z_]*\) .*/\1/p' | tr '\n' ' ')" ]
	[[ "$output" == *$'\ndumps          0\n'* ]]
	[[ "$output" =~ $'\n'allocated\ +[1-9][0-9.]*\ (B|KiB|MiB) ]]
}

@test "status --json: pid, prof.active, prof.lg_sample, allocated, mapped, highwater, samples, dumps, last_dump" {
	start_target -c "prof:true,lg_prof_sample:10,control_refresh_ms:100"
	run --separate-stderr "$HEAPCTL" status "$TPID" --json
	[ "$status" -eq 0 ]
	echo "$output" | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["pid"] == int(sys.argv[1]), s
assert s["prof.active"] is True and s["opt.prof"] is True, s
assert s["prof.lg_sample"] == 10, s
assert s["allocated"] > 0, s
assert s["mapped"] >= s["allocated"], s
assert s["highwater"] >= s["mapped"], s
assert isinstance(s["samples"], int) and s["samples"] >= 0, s
assert s["dumps"] == 0 and s["last_dump"] == "", s
assert s["control"] is True and s["abi"] == 1, s
assert s["segment"].endswith("/dev/shm/heapctl." + sys.argv[1]), s' "$TPID"

	# the target samples as it runs (a sample every 1 KiB on average)
	wait_for 5 eval '[ "$(status_field "$TPID" samples)" -gt 0 ]'
	path=$("$HEAPCTL" dump "$TPID" -o "$T/one.heap")
	[ "$(status_field "$TPID" dumps)" -eq 1 ]
	[ "$(status_field "$TPID" last_dump)" = "$T/one.heap" ]
	[ "$path" = "$T/one.heap" ]
}

@test "status: the PID as -p, --pid, --pid= and before the command" {
	start_target
	for form in "status $TPID" "status -p $TPID" "status --pid $TPID" "status --pid=$TPID" "-p $TPID status"; do
		run $HEAPCTL $form
		[ "$status" -eq 0 ]
		[ "${lines[0]}" = "process        $TPID" ]
	done
}

# ---- set ----------------------------------------------------------------------

@test "set: every setting once, each confirmed by status --json" {
	start_target
	check() {   # NAME=VALUE EXPECTED (as status --json prints it)
		run "$HEAPCTL" set "$TPID" "$1"
		[ "$status" -eq 0 ]
		[ "$output" = "$TPID: $1" ]
		[ "$(status_field "$TPID" "${1%%=*}")" = "$2" ]
	}
	check "prof.prefix=$T/pfx" "$T/pfx"
	check prof.active=false false
	check prof.gdump=true true
	check prof.gdump_pct=5 5
	check prof.gdump_min_ms=250 250
	check prof.interval=1M 1048576
	check prof.lg_sample=12 12
	check prof.peak=true true
	check prof.thread_active_init=false false
	check prof.threshold=64M 67108864
	check prof.timer_s=3600 3600
	check prof.unwind=fp fp
	check prof.interval=0 0
	check prof.active=on true
}

@test "status: byte counts step up a unit rather than print 1024.0" {
	start_target
	for v in "1023 1023 B" "1024 1.0 KiB" "1048524 1023.9 KiB" "1048575 1.0 MiB" "1073741823 1.0 GiB"; do
		set -- $v
		run "$HEAPCTL" set "$TPID" "prof.threshold=$1"
		[ "$status" -eq 0 ]
		run "$HEAPCTL" status "$TPID"
		[ "$status" -eq 0 ]
		echo "$output" | grep -qx "prof.threshold  *$2 $3" || { echo "want '$2 $3' for $1: $(echo "$output" | grep threshold)"; false; }
	done
}

@test "set: several settings at once, and --json" {
	start_target
	run "$HEAPCTL" set "$TPID" prof.lg_sample=14 prof.gdump_pct=7
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: prof.lg_sample=14"$'\n'"$TPID: prof.gdump_pct=7" ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 14 ]
	[ "$(status_field "$TPID" prof.gdump_pct)" = 7 ]

	run --separate-stderr "$HEAPCTL" set "$TPID" prof.lg_sample=15 --json
	[ "$status" -eq 0 ]
	[ "$output" = "{\"pid\": $TPID, \"set\": {\"prof.lg_sample\": \"15\"}}" ]
	echo "$output" | python3 -c 'import json,sys; json.load(sys.stdin)'
}

@test "set: an unknown setting is exit 2 'unknown setting'" {
	start_target
	run "$HEAPCTL" set "$TPID" prof.bogus=1
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: set: unknown setting 'prof.bogus' (see 'heapctl help set')" ]
}

# runs alone (tests/run.sh): asserts that the target received no command: a daemon of another suite asks every preloaded process
# bats test_tags=machine
@test "set: invalid values are exit 2 with the precise reason, checked before anything is sent" {
	start_target
	bad() {   # NAME=VALUE MESSAGE
		run "$HEAPCTL" set "$TPID" "$1"
		[ "$status" -eq 2 ]
		[ "$output" = "heapctl: set: ${1%%=*}: $2" ]
	}
	bad prof.lg_sample=99 "'99' is not a whole number from 0 to 62"
	bad prof.lg_sample=-1 "'-1' is not a whole number from 0 to 62"
	bad prof.interval=3000 "'3000' is not a power of two (like 64M or 1G)"
	bad prof.unwind=bogus "'bogus' is not an unwinder (fp, libunwind or libgcc)"
	bad prof.active=maybe "'maybe' is not a boolean (true or false)"
	bad prof.threshold=lots "'lots' is not a byte count (like 4096, 512K, 1G)"
	bad prof.prefix= "the value is empty"

	run "$HEAPCTL" set "$TPID" prof.active
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: set: 'prof.active' is not NAME=VALUE (see 'heapctl help set')" ]

	run "$HEAPCTL" set "$TPID"
	[ "$status" -eq 2 ]
	[[ "$output" == "heapctl: set: say what to set, as NAME=VALUE"* ]]

	# one bad value among good ones: nothing is applied, nothing was sent
	run "$HEAPCTL" set "$TPID" prof.lg_sample=12 prof.unwind=bogus
	[ "$status" -eq 2 ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 19 ]
	[ "$(status_field "$TPID" commands)" = 0 ]
}

# ---- on / off ---------------------------------------------------------------------

@test "on and off: printed and shown by status" {
	start_target
	run "$HEAPCTL" off "$TPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: profiling off" ]
	[ "$(status_field "$TPID" prof.active)" = false ]
	run "$HEAPCTL" status "$TPID"
	[[ "$output" == *$'\nprofiling      off\n'* ]]

	run "$HEAPCTL" on "$TPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: profiling on" ]
	[ "$(status_field "$TPID" prof.active)" = true ]

	run --separate-stderr "$HEAPCTL" off "$TPID" --json
	[ "$status" -eq 0 ]
	[ "$output" = "{\"pid\": $TPID, \"prof.active\": false}" ]

	run "$HEAPCTL" on "$TPID" extra
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: on: unexpected argument 'extra'" ]
}

@test "on: works in a process started with prof:false, and dump then succeeds" {
	start_target -c "control_refresh_ms:100"
	[ "$(status_field "$TPID" opt.prof)" = false ]
	run "$HEAPCTL" on "$TPID"
	[ "$status" -eq 0 ]
	[ "$(status_field "$TPID" prof.active)" = true ]
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o "$T/late.heap"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/late.heap" ]
	[[ "$(head -n1 "$T/late.heap")" == heap_v2/* ]]
}

# ---- dump ---------------------------------------------------------------------------

@test "dump: writes a heap_v2 profile that jeprof --text reads" {
	start_target -c "prof:true,lg_prof_sample:10,control_refresh_ms:100" stacks=20
	run --separate-stderr "$HEAPCTL" dump "$TPID" --prefix "$T/prof"
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^$T/prof\.$TPID\.[0-9]+\.m[0-9]+\.heap$ ]]
	file=$output
	[ -s "$file" ]
	[[ "$(head -n1 "$file")" == heap_v2/* ]]
	run jeprof --text "$TARGET" "$file"
	[ "$status" -eq 0 ]
	[[ "$output" == *"Total: "* ]]
	[[ "$output" == *" main"* ]]
}

@test "dump --prefix: <prefix>.<pid>.<seq>.m<n>.heap, numbered on" {
	start_target
	run --separate-stderr "$HEAPCTL" dump "$TPID" --prefix "$T/a"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/a.$TPID.0.m0.heap" ]
	[ -s "$output" ]
	run --separate-stderr "$HEAPCTL" dump "$TPID" --prefix="$T/b"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/b.$TPID.1.m1.heap" ]
	[ -s "$output" ]
}

@test "dump -o FILE writes exactly FILE; --json gives path and bytes" {
	start_target
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o "$T/exact.heap"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/exact.heap" ]
	[[ "$(head -n1 "$T/exact.heap")" == heap_v2/* ]]

	run --separate-stderr "$HEAPCTL" dump "$TPID" --output "$T/j.heap" --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jfield path)" = "$T/j.heap" ]
	[ "$(echo "$output" | jfield pid)" = "$TPID" ]
	[ "$(echo "$output" | jfield bytes)" = "$(stat -c %s "$T/j.heap")" ]

	run "$HEAPCTL" dump "$TPID" -o "$T/x.heap" --prefix "$T/y"
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: dump: give --prefix or -o, not both" ]
	run "$HEAPCTL" dump "$TPID" --bogus
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: dump: unknown option '--bogus' (try 'heapctl help dump')" ]
}

@test "dump: relative -o and --prefix are resolved against heapctl's directory, not the target's" {
	mkdir -p "$T/tdir" "$T/cdir/sub"
	start_target -d "$T/tdir"
	cd "$T/cdir"
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o rel.heap
	[ "$status" -eq 0 ]
	[ "$output" = "$T/cdir/rel.heap" ]
	[ -s "$T/cdir/rel.heap" ]
	[ ! -e "$T/tdir/rel.heap" ]

	run --separate-stderr "$HEAPCTL" dump "$TPID" --prefix sub/p
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^$T/cdir/sub/p\.$TPID\.[0-9]+\.m[0-9]+\.heap$ ]]
	[ -s "$output" ]
}

@test "dump: with the default (relative) prof.prefix the dump lands in heapctl's directory, not the target's" {
	# prof.prefix is "jeprof", which jemalloc resolves against the service's
	# working directory, where nobody would look (PGDATA, for postgres)
	mkdir -p "$T/tdir" "$T/cdir"
	start_target -d "$T/tdir"
	cd "$T/cdir"
	run --separate-stderr "$HEAPCTL" dump "$TPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/cdir/jeprof.$TPID.0.m0.heap" ]
	[[ "$(head -n1 "$output")" == heap_v2/* ]]
	[ -z "$(ls "$T/tdir")" ]
	# an absolute prof.prefix is the target's own choice, and is kept
	"$HEAPCTL" set "$TPID" prof.prefix="$T/tdir/abs"
	run --separate-stderr "$HEAPCTL" dump "$TPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/tdir/abs.$TPID.1.m1.heap" ]
	# --fetch copies it here as well
	run --separate-stderr "$HEAPCTL" dump "$TPID" --fetch --json
	[ "$status" -eq 0 ]
	python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["path"] == sys.argv[2] + "/cdir/abs." + sys.argv[3] + ".2.m2.heap", d
assert d["target_path"] == sys.argv[2] + "/tdir/abs." + sys.argv[3] + ".2.m2.heap", d
assert d["fetched"] is True and d["bytes"] > 0, d' "$output" "$T" "$TPID"
	cmp "$T/cdir/abs.$TPID.2.m2.heap" "$T/tdir/abs.$TPID.2.m2.heap"
}

@test "set prof.prefix=REL: relative to heapctl's directory, as dump --prefix is" {
	mkdir -p "$T/tdir" "$T/cdir"
	start_target -d "$T/tdir"
	cd "$T/cdir"
	run --separate-stderr "$HEAPCTL" set "$TPID" prof.prefix=sub/p
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: prof.prefix=$T/cdir/sub/p" ]
	[ "$(status_field "$TPID" prof.prefix)" = "$T/cdir/sub/p" ]
}

@test "dump --peak: exit 1 without prof.peak; with it a .p<n> profile" {
	start_target
	run --separate-stderr "$HEAPCTL" dump "$TPID" --peak
	[ "$status" -eq 1 ]
	[ "$stderr" = "heapctl: process $TPID: no peak profile is kept: prof.peak is false" ]
	[ -z "$output" ]

	"$HEAPCTL" set "$TPID" prof.peak=true
	run --separate-stderr "$HEAPCTL" dump "$TPID" --peak --prefix "$T/pk"
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^$T/pk\.$TPID\.[0-9]+\.p[0-9]+\.heap$ ]]
	[[ "$(head -n1 "$output")" == heap_v2/* ]]
}

@test "dump to a directory that does not exist: exit 1 'No such file or directory'" {
	start_target
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o /nonexistent/dir/x.heap
	[ "$status" -eq 1 ]
	[ "$stderr" = "heapctl: cannot write /nonexistent/dir/x.heap: No such file or directory" ]
	[ -z "$output" ]
	[ "$(status_field "$TPID" dumps)" = 0 ]
}

@test "dump when profiling has never been on, or after on, off and reset: a valid profile with no samples" {
	start_target -c "control_refresh_ms:100"
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o "$T/never.heap"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/never.heap" ]
	[ "$(head -n1 "$T/never.heap")" = "heap_v2/524288" ]
	grep -q '^  t\*: 0: 0 \[0: 0\]$' "$T/never.heap"
	grep -q '^MAPPED_LIBRARIES:$' "$T/never.heap"
	[ -z "$(grep '^@' "$T/never.heap" || true)" ]
	run jeprof --text "$TARGET" "$T/never.heap"
	[ "$status" -eq 0 ]
	"$HEAPCTL" on "$TPID" >/dev/null
	"$HEAPCTL" off "$TPID" >/dev/null
	"$HEAPCTL" reset "$TPID" >/dev/null
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o "$T/reset.heap"
	[ "$status" -eq 0 ]
	grep -q '^  t\*: 0: 0 \[0: 0\]$' "$T/reset.heap"
	run "$HEAPCTL" report "$T/reset.heap"
	[ "$status" -eq 0 ]
}

# ---- reset -------------------------------------------------------------------------

@test "reset: with --lg-sample changes the rate; 99 is exit 2" {
	start_target
	run "$HEAPCTL" reset "$TPID" --lg-sample 12
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: profile reset, prof.lg_sample=12" ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 12 ]

	run "$HEAPCTL" reset "$TPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: profile reset" ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 12 ]

	run "$HEAPCTL" reset "$TPID" --lg-sample=13 --json
	[ "$status" -eq 0 ]
	[ "$output" = "{\"pid\": $TPID, \"reset\": true}" ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 13 ]

	run "$HEAPCTL" reset "$TPID" --lg-sample 99
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: reset: --lg-sample: '99' is not a whole number from 0 to 62" ]
	[ "$(status_field "$TPID" prof.lg_sample)" = 13 ]
}

# ---- watch --------------------------------------------------------------------------

@test "watch --json --count 1: a config event from a concurrent set" {
	start_target
	"$HEAPCTL" watch "$TPID" --json --count 1 >"$T/w" 2>"$T/w.err" &
	w=$!
	track "$w"
	wait_for 5 maps_segment "$w" "$TPID"
	sleep 0.1
	# the watcher starts at the ring's head: set until it has seen one
	for i in $(seq 50); do
		"$HEAPCTL" set "$TPID" prof.lg_sample=$((11 + i % 2)) >/dev/null
		kill -0 "$w" 2>/dev/null || break
		sleep 0.1
	done
	wait "$w"
	[ "$(wc -l <"$T/w")" -eq 1 ]
	json_lines "$T/w"
	python3 -c '
import json, sys
e = json.loads(open(sys.argv[1]).readline())
assert e["type"] == "config" and e["pid"] == int(sys.argv[2]), e
assert e["name"] == "prof.lg_sample" and e["value"] in ("11", "12"), e
assert e["previous"] in ("19", "11", "12") and e["previous"] != e["value"], e
assert e["time"].endswith("Z"), e' "$T/w" "$TPID"
}

@test "watch --json: a dump event with kind manual and the path" {
	start_target
	"$HEAPCTL" watch "$TPID" --json --count 1 >"$T/w" 2>"$T/w.err" &
	w=$!
	track "$w"
	for i in $(seq 50); do
		"$HEAPCTL" dump "$TPID" -o "$T/d$i.heap" >/dev/null
		kill -0 "$w" 2>/dev/null || break
		sleep 0.1
	done
	wait "$w"
	[ "$(wc -l <"$T/w")" -eq 1 ]
	python3 -c '
import json, os, sys
e = json.loads(open(sys.argv[1]).readline())
assert e["type"] == "dump" and e["kind"] == "manual", e
assert os.path.dirname(e["path"]) == sys.argv[2] and os.path.exists(e["path"]), e
assert e["bytes"] == os.path.getsize(e["path"]), e' "$T/w" "$T"
}

@test "watch --json: a dump_failed event with the reason" {
	start_target
	"$HEAPCTL" set "$TPID" prof.prefix=/nonexistent/dir/x >/dev/null
	"$HEAPCTL" watch "$TPID" --json --count 3 >"$T/w" 2>"$T/w.err" &
	w=$!
	track "$w"
	for i in $(seq 50); do
		"$HEAPCTL" dump "$TPID" 2>/dev/null || true
		kill -0 "$w" 2>/dev/null || break
		sleep 0.1
	done
	wait "$w"
	python3 -c '
import json, re, sys
e = [json.loads(l) for l in open(sys.argv[1]) if "dump_failed" in l][0]
assert e["type"] == "dump_failed" and e["kind"] == "manual", e
# the first failed dump may come before the watcher is reading
assert re.fullmatch(r"/nonexistent/dir/x\.%s\.(\d+)\.m\1\.heap" % sys.argv[2], e["path"]), e
assert e["error"] == "No such file or directory", e' "$T/w" "$TPID"
}

@test "watch --json: gdump events while the target grows carry the highwater mark and a .u<n>.heap path" {
	start_target -c "prof:true,prof_gdump:true,prof_gdump_pct:1,prof_gdump_min_ms:0,prof_prefix:$T/g,control_refresh_ms:100" \
	    grow=1048576 tick_ms=20
	run timeout 20 "$HEAPCTL" watch "$TPID" --json --count 6
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 6 ]
	printf '%s\n' "${lines[@]}" >"$T/w"
	json_lines "$T/w"
	python3 -c '
import json, os, re, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
g = [e for e in ev if e["type"] == "gdump"]
assert g, ev
for e in g:
    assert e["highwater"] > e["previous"] >= 0, e
    assert re.fullmatch(re.escape(sys.argv[2]) + r"/g\.%s\.\d+\.u\d+\.heap" % sys.argv[3], e["path"]), e
    assert os.path.exists(e["path"]), e
d = [e for e in ev if e["type"] == "dump"]
assert all(e["kind"] == "gdump" for e in d), d' "$T/w" "$T" "$TPID"
}

@test "watch: ends with exit 0 and an exit event when the target exits (JSON and text)" {
	start_target
	"$HEAPCTL" watch "$TPID" --json >"$T/wj" 2>"$T/wj.err" &
	wj=$!
	"$HEAPCTL" watch "$TPID" >"$T/wt" 2>"$T/wt.err" &
	wt=$!
	track "$wj" "$wt"
	wait_for 5 grep -q "watching process $TPID" "$T/wt.err"
	wait_for 5 maps_segment "$wj" "$TPID"
	sleep 0.2
	kill -TERM "$TPID"
	wait_for 5 eval '! kill -0 $wj 2>/dev/null && ! kill -0 $wt 2>/dev/null'
	wait "$wj"
	wait "$wt"
	[ "$(tail -n1 "$T/wj" | jfield type)" = exit ]
	[ "$(tail -n1 "$T/wj" | jfield pid)" = "$TPID" ]
	[[ "$(tail -n1 "$T/wt")" =~ ^[0-9-]+T[0-9:.]+Z\ exit$ ]]
	[ "$(cat "$T/wt.err")" = "heapctl: watching process $TPID (Ctrl-C to stop)" ]
}

@test "watch: a target killed with SIGKILL ends the watch with 'gone' (JSON) and 'exited' (text)" {
	start_target
	"$HEAPCTL" watch "$TPID" --json >"$T/wj" 2>&1 &
	wj=$!
	"$HEAPCTL" watch "$TPID" >"$T/wt" 2>/dev/null &
	wt=$!
	track "$wj" "$wt"
	wait_for 5 maps_segment "$wj" "$TPID"
	wait_for 5 maps_segment "$wt" "$TPID"
	kill -KILL "$TPID"
	wait "$TPID" 2>/dev/null || true
	wait_for 5 eval '! kill -0 $wj 2>/dev/null && ! kill -0 $wt 2>/dev/null'
	wait "$wj"
	wait "$wt"
	[ "$(tail -n1 "$T/wj")" = "{\"type\": \"gone\", \"pid\": $TPID}" ]
	[ "$(tail -n1 "$T/wt")" = "process $TPID exited" ]
}

@test "watch: text mode prints one line per event" {
	start_target
	"$HEAPCTL" watch "$TPID" --count 2 >"$T/wt" 2>"$T/wt.err" &
	wt=$!
	track "$wt"
	wait_for 5 grep -q "watching process $TPID" "$T/wt.err"
	"$HEAPCTL" set "$TPID" prof.lg_sample=13 >/dev/null
	"$HEAPCTL" dump "$TPID" -o "$T/t.heap" >/dev/null
	wait_for 5 eval '! kill -0 $wt 2>/dev/null'
	wait "$wt"
	run cat "$T/wt"
	[ "${#lines[@]}" -eq 2 ]
	[[ "${lines[0]}" =~ ^[0-9-]+T[0-9:.]+Z\ config\ prof\.lg_sample=13\ \(was\ 19\)$ ]]
	[[ "${lines[1]}" =~ ^[0-9-]+T[0-9:.]+Z\ dump\ manual\ $T/t\.heap\ \([0-9.]+\ (B|KiB)\)$ ]]
}

@test "watch: a watcher more than 128 events behind says how many it missed" {
	start_target grow=0
	"$HEAPCTL" watch "$TPID" --json --count 128 >"$T/w" 2>&1 &
	w=$!
	track "$w"
	wait_for 5 maps_segment "$w" "$TPID"
	sleep 0.2
	stop_target "$w"
	# 200 config events while the watcher sleeps
	for i in $(seq 200); do echo "set prof.lg_sample=$((10 + i % 2))"; done |
	    "$HEAPCTL" attach "$TPID" >/dev/null
	kill -CONT "$w"
	wait_for 5 eval '! kill -0 $w 2>/dev/null'
	wait "$w"
	json_lines "$T/w"
	[ "$(wc -l <"$T/w")" -eq 129 ]
	python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert ev[0]["type"] == "missed" and ev[0]["count"] >= 72, ev[0]
assert all(e["type"] != "missed" for e in ev[1:]), ev
last = ev[-1]
assert last["type"] == "config" and last["value"] == "10" and last["previous"] == "11", last' "$T/w"
}

@test "watch: SIGTERM ends it with exit 0; a bad --count is exit 2" {
	start_target
	"$HEAPCTL" watch "$TPID" --json >"$T/w" 2>&1 &
	w=$!
	track "$w"
	wait_for 5 maps_segment "$w" "$TPID"
	kill -TERM "$w"
	wait_status "$w"
	[ "$status" -eq 0 ]
	kill -0 "$TPID"

	run "$HEAPCTL" watch "$TPID" --count 0
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: watch: --count '0' is not a positive number" ]
	run "$HEAPCTL" watch "$TPID" --count
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: watch: --count needs a value" ]
}

# ---- attach -------------------------------------------------------------------------

@test "attach: commands from stdin, one per line; dump prints the path" {
	start_target -c "control_refresh_ms:100"
	run --separate-stderr bash -c "printf 'on\ndump --prefix $T/x\n' | '$HEAPCTL' attach $TPID"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "$TPID: profiling on" ]
	[ "${lines[1]}" = "$T/x.$TPID.0.m0.heap" ]
	[ "${#lines[@]}" -eq 2 ]
	[[ "$(head -n1 "$T/x.$TPID.0.m0.heap")" == heap_v2/* ]]
}

@test "attach: blank lines and comments are skipped, quoting works, quit ends" {
	start_target
	run bash -c "printf '\n# a comment\nset \"prof.prefix=$T/with space\"\nquit\nbogus\n' | '$HEAPCTL' attach $TPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$TPID: prof.prefix=$T/with space" ]
	[ "$(status_field "$TPID" prof.prefix)" = "$T/with space" ]
}

@test "attach: exits with the code of the first failing line, and goes on after it" {
	start_target
	run --separate-stderr bash -c "printf 'set prof.lg_sample=99\non\nbogus\ndump --peak\n' | '$HEAPCTL' attach $TPID"
	[ "$status" -eq 2 ]
	[ "$output" = "$TPID: profiling on" ]
	[ "${stderr_lines[0]}" = "heapctl: set: prof.lg_sample: '99' is not a whole number from 0 to 62" ]
	[ "${stderr_lines[1]}" = "heapctl: unknown command 'bogus' (try 'heapctl help')" ]
	[ "${stderr_lines[2]}" = "heapctl: process $TPID: no peak profile is kept: prof.peak is false" ]

	run bash -c "printf 'dump --peak\nset prof.bogus=1\n' | '$HEAPCTL' attach $TPID"
	[ "$status" -eq 1 ]

	run bash -c "printf 'attach $TPID\n' | '$HEAPCTL' attach $TPID"
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: 'attach' cannot be used inside attach" ]
}

@test "attach: help and status work inside" {
	start_target
	run --separate-stderr bash -c "printf 'help\nstatus --json\n' | '$HEAPCTL' attach $TPID"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "usage: heapctl COMMAND [PID] [OPTIONS]" ]
	[[ "$output" == *$'\n  attach   PID '* ]]
	[[ "$output" == *"\"pid\": $TPID,"* ]]
}

@test "attach without a PID is exit 2" {
	run "$HEAPCTL" attach
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: attach: which process? usage: heapctl attach PID" ]
}

# ---- help, --help, --version, no arguments -------------------------------------------

@test "no arguments: usage on stderr naming every command, exit 2" {
	run --separate-stderr "$HEAPCTL"
	[ "$status" -eq 2 ]
	[ -z "$output" ]
	[ "${stderr_lines[0]}" = "usage: heapctl COMMAND [PID] [OPTIONS]" ]
	for c in list status set on off dump reset watch attach help; do
		[[ "$stderr" == *$'\n'"  $c "* ]] || { echo "usage does not mention $c"; return 1; }
	done
}

@test "help, --help and -h: the usage on stdout, exit 0" {
	for form in help --help -h; do
		run --separate-stderr "$HEAPCTL" $form
		[ "$status" -eq 0 ]
		[ "${lines[0]}" = "usage: heapctl COMMAND [PID] [OPTIONS]" ]
		for c in list status set on off dump reset watch attach help; do
			[[ "$output" == *$'\n'"  $c "* ]]
		done
		[[ "$output" == *"exit status: 0 ok, 1 failed in the target, 2 usage, 3 no such process,"* ]]
	done
}

@test "help COMMAND and COMMAND --help; help set lists every setting" {
	run "$HEAPCTL" help dump
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "usage: heapctl dump [PID] [--prefix P | -o FILE | --fetch] [--peak] [--json]" ]
	run "$HEAPCTL" status --help
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "usage: heapctl status [PID] [--json]" ]
	run "$HEAPCTL" help set
	[ "$status" -eq 0 ]
	for s in prof.active prof.gdump prof.gdump_pct prof.gdump_min_ms prof.interval prof.lg_sample \
	    prof.peak prof.prefix prof.thread_active_init prof.threshold prof.timer_s prof.unwind; do
		[[ "$output" == *$'\n'"  $s "* ]] || { echo "help set does not list $s"; return 1; }
	done
	run "$HEAPCTL" help bogus
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: unknown command 'bogus' (try 'heapctl help')" ]
}

# One table makes the list and each command's help: every command `heapctl
# help` lists has a help whose first line is its own usage line from the
# list, and COMMAND --help and -h print exactly what help COMMAND does.
@test "every command help lists: help COMMAND, COMMAND --help and -h are the same text" {
	cmds=$("$HEAPCTL" help | awk '/^commands:/ {on = 1; next} /^$/ {on = 0} on {print $1}')
	[ "$(echo "$cmds" | wc -l)" -ge 21 ]
	for c in $cmds; do
		want=$("$HEAPCTL" help "$c") || { echo "help $c failed"; return 1; }
		[ "$("$HEAPCTL" "$c" --help)" = "$want" ] || { echo "$c --help differs"; return 1; }
		[ "$("$HEAPCTL" "$c" -h)" = "$want" ] || { echo "$c -h differs"; return 1; }
		usage=$("$HEAPCTL" help | awk -v c="$c" '$1 == c {sub(/^  [^ ]+ +/, ""); print; exit}')
		first=$(echo "$want" | head -n 1)
		[[ "$first" == "usage: heapctl $c "* ]] || { echo "$c: $first"; return 1; }
		# the list pads the usage to a column and puts the line after it
		[[ "$usage" == "${first#usage: heapctl $c }"* ]] || { echo "$c: '$usage' / '$first'"; return 1; }
	done
}

@test "--version and -V" {
	run "$HEAPCTL" --version
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^heapctl\ [0-9]+\.[0-9]+\.[0-9]+\ \(segment\ ABI\ 1\)$ ]]
	run "$HEAPCTL" -V
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^heapctl\ [0-9.]+\ \(segment\ ABI\ 1\)$ ]]
}

# ---- PID left out --------------------------------------------------------------------

@test "PID left out with exactly one process running the library: it is used" {
	need_pidns
	run in_pidns '
ns_start; p=$NSPID
echo "target $p"
"$H" status | head -n 1
"$H" set prof.lg_sample=9 || exit 11
"$H" status --json | grep "\"prof.lg_sample\""
f=$("$H" dump --prefix /dev/shm/ns) || exit 12
echo "dumped $f"
[ -s "$f" ] || exit 13
printf "off\n" | "$H" attach "$p" || exit 14
"$H" on || exit 15
'
	echo "$output"
	[ "$status" -eq 0 ]
	p=$(awk '/^target /{print $2}' <<<"$output")
	[ -n "$p" ]
	[[ "$output" == *$'\n'"process        $p"$'\n'* ]]
	[[ "$output" == *"$p: prof.lg_sample=9"* ]]
	[[ "$output" == *'"prof.lg_sample": 9,'* ]]
	[[ "$output" == *"dumped /dev/shm/ns.$p.0.m0.heap"* ]]
	[[ "$output" == *"$p: profiling off"*"$p: profiling on"* ]]
}
