#!/usr/bin/env bats
# tests/cli/lifetime.bats - the lifetimes of sampled objects: a dump's
# "a:" (live objects' ages) and "l:" (lifetimes of those freed) lines,
# heapctl report --lifetime and --older-than, at lg_prof_sample 0 (every
# object) and at the default rate (within tolerance); jeprof reads the
# dump as it reads one without those lines, on every sample type.

load ../lib/helpers

LIFE="$HEAPCTL_BUILD/tests/programs/lifetimes"

run_life() {   # CONF ARGS...: a dump of it in $T/l.heap
	start_prog 60 lifetimes "$@"
	LPID=$PROG_PID
	"$HEAPCTL" dump "$LPID" -o "$T/l.heap" >/dev/null
}

site() {   # NAME FIELD: from report --lifetime --json
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=[x for x in d["sites"] if x["site"]==sys.argv[2]]; print(s[0].get(sys.argv[3], "") if s else "none")' "$T/life.json" "$1" "$2"
}

@test "lifetime: at lg_prof_sample 0 each site is classified by how long its objects lived" {
	run_life "prof:true,lg_prof_sample:0,control_refresh_ms:100" rounds=2000 hold_ms=2000
	grep -q '^  a: ' "$T/l.heap"
	grep -q '^  l: ' "$T/l.heap"
	"$HEAPCTL" report "$T/l.heap" --lifetime --json >"$T/life.json"
	# churn: 200,000 frees, within a millisecond (all but the few a busy
	# machine preempted in between)
	[ "$(site site_churn frees)" -eq 200000 ]
	[ "$(site site_churn within_1ms)" -ge 198000 ]
	[ "$(site site_churn median_ns)" -lt 100000 ]
	# hold: 2,000 frees after about 2 s: none within 1 s, all within 1 min
	[ "$(site site_hold frees)" -eq 2000 ]
	[ "$(site site_hold within_1s)" -eq 0 ]
	[ "$(site site_hold within_1min)" -eq 2000 ]
	med=$(site site_hold median_ns)
	[ "$med" -ge 1800000000 ] && [ "$med" -le 4000000000 ]
	# leak: never freed, 2,000 live, all older than the hold
	[ "$(site site_leak frees)" -eq 0 ]
	[ "$(site site_leak live)" -eq 2000 ]
	[ "$(site site_leak oldest_ns)" -ge 1800000000 ]
	run "$HEAPCTL" report "$T/l.heap" --lifetime
	[ "$status" -eq 0 ]
	[[ "${lines[2]}" == site*frees*median*p99*"<1ms"*"<1s"*"<1min"*live*oldest ]]
	[[ "$output" == *site_churn*"100%"* ]]
	# only what is older than 1 s: the leak (32 MiB), not the churn
	run "$HEAPCTL" report "$T/l.heap" --older-than 1s --top 5
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "Total: 31."?" MB" ]]    # 2,000 x 16 KiB, and a stdio buffer
	[[ "${lines[2]}" == *" 31.2 "*site_leak ]]    # after the column headers
	[[ "$output" != *site_churn* ]]
	run "$HEAPCTL" report "$T/l.heap" --older-than 1h
	[[ "$output" == *"nothing to show"* ]]
}

@test "lifetime: at the default rate, within tolerance" {
	run_life "prof:true,control_refresh_ms:100" rounds=4000 hold_ms=1500
	"$HEAPCTL" report "$T/l.heap" --lifetime --json >"$T/life.json"
	# 4 KiB objects are sampled about 1 in 128: ~3,000 of 400,000 frees
	f=$(site site_churn frees)
	[ "$f" -ge 1500 ] && [ "$(site site_churn within_1ms)" -ge $((f * 95 / 100)) ]
	h=$(site site_hold frees)
	[ "$h" -ge 10 ] && [ "$(site site_hold within_1s)" -eq 0 ]
	[ "$(site site_leak frees)" -eq 0 ]
	python3 - "$T/life.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
leak = [s for s in d["sites"] if s["site"] == "site_leak"][0]
# 4,000 x 16 KiB = 62.5 MiB live, estimated from the samples within 25%
assert abs(leak["live_bytes"] - 4000 * 16384) <= 0.25 * 4000 * 16384, leak
PY
}

@test "lifetime: jeprof reads the dump as it reads it without ages and lifetimes, on every sample type" {
	run_life "prof:true,prof_accum:true,lg_prof_sample:12,control_refresh_ms:100" rounds=500 hold_ms=100
	grep -v -e '^  a: ' -e '^  l: ' "$T/l.heap" | awk '
		/^@/ { held = $0; next }            # a stack with only lifetimes loses its lines
		/^  t\*/ && held != "" { print held; held = "" }
		held != "" && !/^  / { held = "" }
		{ print }' >"$T/plain.heap"
	grep -q '^  l: ' "$T/l.heap"
	! grep -q '^  [al]: ' "$T/plain.heap"
	for t in inuse_space inuse_objects alloc_space alloc_objects; do
		jeprof --text --$t "$LIFE" "$T/l.heap" >"$T/a.$t" 2>/dev/null
		jeprof --text --$t "$LIFE" "$T/plain.heap" >"$T/b.$t" 2>/dev/null
		grep -q site_ "$T/a.$t"
		diff "$T/a.$t" "$T/b.$t"
		"$HEAPCTL" report "$T/l.heap" --$t --top 10 >"$T/c.$t"
		"$HEAPCTL" report "$T/plain.heap" --$t --top 10 >"$T/d.$t"
		diff "$T/c.$t" "$T/d.$t"
	done
}

@test "lifetime: bad input is one line: a bad age, a profile without lifetimes, a broken l: line" {
	run "$HEAPCTL" report /dev/null --older-than 10x
	[ "$status" -eq 2 ]
	[[ "$output" == *"--older-than '10x' is not an age"* ]]
	printf 'heap_v2/524288\n  t*: 1: 100 [0: 0]\n@ 0x1\n  t*: 1: 100 [0: 0]\n\nMAPPED_LIBRARIES:\n' >"$T/old.heap"
	run "$HEAPCTL" report "$T/old.heap" --lifetime
	[ "$status" -eq 2 ]
	[[ "$output" == *"has no lifetimes"* ]]
	run "$HEAPCTL" report "$T/old.heap" --older-than 1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"has no ages"* ]]
	printf 'heap_v2/524288\n  t*: 1: 100 [0: 0]\n@ 0x1\n  t*: 1: 100 [0: 0]\n  l: 5 1 2 3 7:4\n\nMAPPED_LIBRARIES:\n' >"$T/bad.heap"
	run "$HEAPCTL" report "$T/bad.heap" --lifetime
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"bad.heap:5: lifetime buckets add up to 4, not 5 frees"* ]]
}

@test "lifetime: experimental.prof_recent gives the last sampled allocations in jemalloc's own JSON, as jemalloc does" {
	[ -f /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || skip "no libjemalloc2"
	gcc -O1 -g -o "$T/recent-je" "$BATS_TEST_DIRNAME/../programs/recent.c" -L/usr/lib/x86_64-linux-gnu -l:libjemalloc.so.2
	MALLOC_CONF=prof:true,lg_prof_sample:0 "$T/recent-je" >"$T/je.json"
	HEAPCTL_CONF=prof:true,lg_prof_sample:0 "$HEAPCTL_BUILD/tests/programs/recent" >"$T/hc.json"
	python3 - "$T/je.json" "$T/hc.json" "$HEAPCTL_BUILD/tests/programs/recent" <<'PY'
import json, subprocess, sys
je, hc = (json.load(open(f)) for f in sys.argv[1:3])
assert list(hc) == list(je) == ["sample_interval", "recent_alloc_max", "recent_alloc"], (list(hc), list(je))
assert hc["sample_interval"] == je["sample_interval"] == 1
assert hc["recent_alloc_max"] == je["recent_alloc_max"] == 3
# the last 3 of 5: two live, the last released, with the same keys in the same order
assert [r["released"] for r in hc["recent_alloc"]] == [r["released"] for r in je["recent_alloc"]] == [False, False, True]
for a, b in zip(hc["recent_alloc"], je["recent_alloc"]):
    assert list(a) == list(b), (list(a), list(b))
    assert a["usize"] == b["usize"] == 1024
    assert a["alloc_time"] > 0 and (not a["released"] or a["dalloc_time"] >= a["alloc_time"])
# the traces name the program's own sites: site_a where it was allocated,
# release_b where it was freed (a PIE loads at a page boundary: a return
# address's offset in its page falls in the function's range there)
nm = subprocess.run(["nm", "-S", sys.argv[3]], capture_output=True, text=True).stdout.split("\n")
fn = {l.split()[3]: (int(l.split()[0], 16), int(l.split()[1], 16)) for l in nm if len(l.split()) == 4}
def within(trace, name):
    start, size = fn[name]
    return any(start & 0xfff < (int(x, 16) & 0xfff) <= (start & 0xfff) + size for x in trace)
last = hc["recent_alloc"][-1]
assert within(last["alloc_trace"], "site_a"), last
assert within(last["dalloc_trace"], "release_b"), last
PY
}

@test "lifetime: prof_recent_alloc_max in the configuration, as jemalloc's option" {
	gcc -O1 -g -o "$T/recent-je" "$BATS_TEST_DIRNAME/../programs/recent.c" -L/usr/lib/x86_64-linux-gnu -l:libjemalloc.so.2
	MALLOC_CONF=prof:true,lg_prof_sample:0,prof_recent_alloc_max:2 "$T/recent-je" 2 >"$T/je.json"
	MALLOC_CONF=prof:true,lg_prof_sample:0,prof_recent_alloc_max:2 "$HEAPCTL_BUILD/tests/programs/recent" 2 >"$T/hc.json"
	python3 -c '
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    assert d["recent_alloc_max"] == 2 and [r["released"] for r in d["recent_alloc"]] == [False, True], d
' "$T/je.json" "$T/hc.json"
	run env MALLOC_CONF=prof_recent_alloc_max:70000 "$HEAPCTL_BUILD/tests/programs/recent" 3
	[[ "$output" == *"prof_recent_alloc_max"* ]]
}

@test "lifetime: prof_lifetimes:false keeps no times: no ages nor lifetimes in the dump, and report says so" {
	run_life "prof:true,lg_prof_sample:12,prof_lifetimes:false,control_refresh_ms:100" rounds=200 hold_ms=10
	! grep -q '^  [al]: ' "$T/l.heap"
	grep -q '^  t\*: ' "$T/l.heap"
	run "$HEAPCTL" report "$T/l.heap" --lifetime
	[ "$status" -eq 2 ]
	[[ "$output" == *"has no lifetimes"* ]]
}
