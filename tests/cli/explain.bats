#!/usr/bin/env bats
# tests/cli/explain.bats - heapctl explain PID and heapctl purge PID: the
# parts of a process's resident memory add up to its VmRSS (within the
# tolerance the man page states: 2% or 1 MiB), on a program that fragments
# on purpose, on Debian's python3 and perl under the preload, on an
# injected glibc program and on a process heapctl never touched; the
# fragmentation shows in the size class where it really is; a purge gives
# the free pages back.

load ../lib/helpers

FRAG="$HEAPCTL_BUILD/tests/programs/fragment"

# add_up JSON: the level-0 parts sum to "sum", and "sum" is VmRSS within
# max(2%, 1 MiB)
add_up() {
	python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
top = sum(p["bytes"] for p in d["parts"] if p["level"] == 0)
assert top == d["sum"], (top, d["sum"])
tol = max(0.02 * d["vm_rss"], 1 << 20)
assert abs(d["sum"] - d["vm_rss"]) <= tol, (d["sum"], d["vm_rss"])
PY
}

explained() {   # PID FILE: explain --json into FILE, whose parts must add up
	"$HEAPCTL" explain "$1" --json >"$2"
	add_up "$2"
}

part() {   # JSON NAME: its bytes
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([p["bytes"] for p in d["parts"] if p["part"]==sys.argv[2]][0])' "$1" "$2"
}

start_frag() {   # CONF ARGS...: FPID
	start_prog 10 fragment "$@"
	FPID=$PROG_PID
}

@test "explain: a fragmenting program's parts add up to VmRSS, and its sparse pages are where it fragments" {
	[ -x "$FRAG" ] || skip "no $FRAG"
	start_frag "prof:true,control_refresh_ms:100" size=64 count=200000 keep=32 anon_mib=8
	explained "$FPID" "$T/e.json"
	python3 - "$T/e.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["heapctl"] and d["allocator"] == "heapctl"
parts = {p["part"]: p["bytes"] for p in d["parts"]}
# 200,000 blocks of 64 bytes, 1 in 32 kept: the 64-byte class holds about
# 12.8 MB of pages for 0.4 MB of live blocks, nearly all of it sparse
c = [c for c in d["classes"] if c["size"] == 64][0]
assert c["live_blocks"] >= 6000 and c["live_blocks"] <= 7000, c
assert c["sparse_pages"] >= 0.9 * c["pages"], c
assert c["free_bytes"] >= 10e6, c
assert d["classes"][0]["size"] == 64, d["classes"][0]          # most free space first
assert parts["heap.fragmentation"] >= 10e6, parts
# the 8 MiB it mapped itself (less at most 1 MiB: the allocator's metadata
# outside its chunks is moved out of this part by its mapped size, an upper
# bound of what of it is resident), and its idle thread's stack
assert parts["anonymous"] >= 7 << 20, parts
assert parts["stacks"] > 0, parts
# the heap's own parts match what the OS counts in its mappings, within 10%
own = sum(parts[k] for k in parts if k.startswith("heap.") and k != "heap.unaccounted")
assert abs(parts["heap"] - own) <= 0.1 * parts["heap"] + (1 << 20), (parts["heap"], own)
PY
	run "$HEAPCTL" explain "$FPID"
	[ "$status" -eq 0 ]
	[[ "$output" == *"heapctl's heap"* ]]
	[[ "$output" == *"free space in pages in use"* ]]
	[[ "$output" == *"fragmentation by size class"* ]]
	# the table's first row is the 64-byte class
	[[ "$(awk '/^ +size +pages/{getline; print $1; exit}' <<<"$output")" == 64 ]]
}

@test "explain: at lg_prof_sample 0 every live object is attributed, and the pages sampling costs are shown" {
	[ -x "$FRAG" ] || skip "no $FRAG"
	start_frag "prof:true,lg_prof_sample:0,control_refresh_ms:100" size=64 count=20000 keep=32 anon_mib=1
	explained "$FPID" "$T/e.json"
	python3 - "$T/e.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
parts = {p["part"]: p["bytes"] for p in d["parts"]}
live = parts["heap.live.attributed"] + parts["heap.live.other"]
assert parts["heap.live.attributed"] >= 0.95 * live, parts
# 625 live sampled blocks of 64 bytes, each on a 4 KiB page of its own
assert 625 * 4032 <= parts["heap.sampling"] <= 700 * 4096, parts
PY
}

@test "purge: the free pages of freed large blocks go back at once, and explain sees them gone" {
	[ -x "$FRAG" ] || skip "no $FRAG"
	# a decay time long enough that nothing goes back by itself meanwhile
	start_frag "prof:true,control_refresh_ms:100,dirty_decay_ms:600000" count=1000 anon_mib=1
	"$HEAPCTL" explain "$FPID" --json >"$T/before.json"
	dirty=$(part "$T/before.json" heap.dirty)
	[ "$dirty" -ge $((30 << 20)) ]
	run "$HEAPCTL" purge "$FPID" --json
	[ "$status" -eq 0 ]
	python3 - "$output" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
assert d["dirty_before"] >= 30 << 20, d
assert d["rss_before"] - d["rss_after"] >= 28 << 20, d
PY
	explained "$FPID" "$T/after.json"
	[ "$(part "$T/after.json" heap.dirty)" -lt $((2 << 20)) ]
}

@test "explain: python3 and perl under the preload; a process heapctl never touched" {
	LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" HEAPCTL_CONF="prof:true,control_refresh_ms:100" \
	    python3 -c 'import sys, time; x = [str(i) * 20 for i in range(300000)]; print("ready", flush=True); time.sleep(60)' \
	    >"$T/py.out" &
	PY=$!
	track "$PY"
	LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" HEAPCTL_CONF="prof:true,control_refresh_ms:100" \
	    perl -e '$| = 1; my @a = map { "x" x 100 } 1 .. 200000; print "ready\n"; sleep 60' >"$T/pl.out" &
	PL=$!
	track "$PL"
	sleep 60 &
	UNT=$!
	track "$UNT"
	wait_for 20 grep -q ready "$T/py.out"
	wait_for 20 grep -q ready "$T/pl.out"
	wait_for 5 control_running "$PY"
	wait_for 5 control_running "$PL"
	for p in "$PY" "$PL" "$UNT"; do
		explained "$p" "$T/$p.json"
	done
	# perl's strings come from malloc: most of its anonymous memory is heapctl's heap
	[ "$(part "$T/$PL.json" heap)" -ge $((20 << 20)) ]
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert not d["heapctl"] and "classes" not in d' "$T/$UNT.json"
	run "$HEAPCTL" explain "$UNT"
	[ "$status" -eq 0 ]
	[[ "$output" == *"anonymous memory (the heap is in here)"* ]]
	[[ "$output" == *"heapctl inject $UNT loads it now"* ]]
}

@test "explain: an injected glibc program shows malloc's own figures beside the OS's" {
	[ -x "$HEAPCTL_BUILD/libheapctl-agent.so" ] || skip "no agent library"
	python3 -c 'import ctypes, time; libc = ctypes.CDLL(None); libc.malloc.restype = ctypes.c_void_p
ps = [libc.malloc(1000) for i in range(20000)]
print("ready", flush=True); time.sleep(60)' >"$T/g.out" &
	G=$!
	track "$G"
	wait_for 20 grep -q ready "$T/g.out"
	"$HEAPCTL" inject "$G" --off >/dev/null
	explained "$G" "$T/g.json"
	python3 - "$T/g.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["heapctl"] and d["allocator"].startswith("the process's own malloc"), d
parts = {p["part"]: p["bytes"] for p in d["parts"]}
assert parts["malloc.live"] >= 20e6, parts      # 20,000 blocks of 1000 bytes
assert parts["anonymous"] >= parts["malloc.live"], parts
PY
	"$HEAPCTL" eject "$G" >/dev/null
}

@test "explain on the demo service (make demo): its parts add up, and its leak is in the heap's live objects" {
	gcc -std=gnu11 -O1 -g -fno-omit-frame-pointer -pthread -o "$T/service" "$BATS_TEST_DIRNAME/../demo/service.c"
	LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" HEAPCTL_CONF="prof:true,lg_prof_sample:14,control_refresh_ms:100" \
	    "$T/service" seconds=600 >"$T/service.log" 2>&1 &
	D=$!
	track "$D"
	wait_for 10 grep -q '^ready' "$T/service.log"
	wait_for 5 control_running "$D"
	sleep 2
	explained "$D" "$T/d.json"
	python3 - "$T/d.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
parts = {p["part"]: p["bytes"] for p in d["parts"]}
assert d["heapctl"] and parts["heap"] > 0 and parts["stacks"] > 0, parts
assert parts["heap.live.attributed"] + parts["heap.live.other"] > 0, parts
PY
}

@test "explain, purge: bad arguments and a process that is gone" {
	run "$HEAPCTL" explain
	[ "$status" -eq 2 ]
	[[ "$output" == *"explain: which process?"* ]]
	run "$HEAPCTL" explain 1 --classes x
	[ "$status" -eq 2 ]
	[[ "$output" == *"--classes 'x' is not a count"* ]]
	run "$HEAPCTL" explain 999999999
	[ "$status" -ne 0 ]
	[ "${#lines[@]}" -eq 1 ]
	run "$HEAPCTL" purge 999999999
	[ "$status" -eq 3 ]
}

@test "explain: redis (jemalloc) injected: jemalloc's own statistics, and the parts still add up" {
	command -v redis-server >/dev/null || skip "no redis-server"
	[ -x "$HEAPCTL_BUILD/libheapctl-agent.so" ] || skip "no agent library"
	redis-server --port 0 --unixsocket "$T/r.sock" --save "" >"$T/redis.log" 2>&1 &
	R=$!
	track "$R"
	wait_for 10 test -S "$T/r.sock"
	for i in $(seq 3000); do echo "SET k$i $(printf '%0500d' "$i")"; done | redis-cli -s "$T/r.sock" >/dev/null
	"$HEAPCTL" inject "$R" --off >/dev/null
	explained "$R" "$T/r.json"
	python3 - "$T/r.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["allocator"] == "the process's own malloc (jemalloc's mallctl)", d
parts = {p["part"]: p["bytes"] for p in d["parts"]}
assert parts["malloc.live"] >= 3000 * 500, parts     # 3,000 values of 500 bytes
assert parts["malloc.metadata"] > 0, parts
PY
	run "$HEAPCTL" purge "$R"
	[ "$status" -eq 0 ]
	"$HEAPCTL" eject "$R" >/dev/null
}

@test "explain in the daemon: /metrics has each process's resident parts (adding up to VmRSS) and its heap's, as explain gives them" {
	[ -x "$FRAG" ] || skip "no $FRAG"
	# no decay while it runs: the 32 MiB of large blocks it freed went back
	# to the OS between the daemon's sample and explain's when promtool
	# took a second (its first run on a fresh machine)
	start_frag "prof:true,control_refresh_ms:100,dirty_decay_ms:3600000" count=20000 anon_mib=4
	"$HEAPCTL" serve --listen 127.0.0.1:0 >"$T/serve.out" 2>"$T/serve.err" &
	SPID=$!
	track "$SPID"
	wait_for 5 grep -q "listening on http://" "$T/serve.out"
	URL=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
	wait_for 5 bash -c "curl -s '$URL/metrics?pid=$FPID' | grep -q '^heapctl_rss_part_bytes'"
	curl -s "$URL/metrics?pid=$FPID" >"$T/m.txt"
	promtool check metrics <"$T/m.txt"
	explained "$FPID" "$T/e.json"
	python3 - "$T/m.txt" "$T/e.json" "$FPID" <<'PY'
import json, re, sys
rss, heap = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r'heapctl_(rss|heap)_part_bytes\{pid="(\d+)",.*part="(\w+)".*\} (\d+)', line)
    if m and m.group(2) == sys.argv[3]:
        (rss if m.group(1) == "rss" else heap)[m.group(3)] = int(m.group(4))
assert set(rss) == {"heap", "anonymous", "stacks", "files", "shared", "kernel"}, rss
assert set(heap) == {"live_attributed", "live_other", "sampling", "fragmentation", "free", "metadata"}, heap
e = json.load(open(sys.argv[2]))
tol = max(0.02 * e["vm_rss"], 1 << 20)
assert abs(sum(rss.values()) - e["vm_rss"]) <= tol, (sum(rss.values()), e["vm_rss"])
parts = {p["part"]: p["bytes"] for p in e["parts"]}
# a moment apart: the same within 10% or 1 MiB
for k, j in (("heap", "heap"), ("anonymous", "anonymous"), ("files", "files")):
    assert abs(rss[k] - parts[j]) <= max(0.1 * parts[j], 1 << 20), (k, rss[k], parts[j])
assert abs(heap["fragmentation"] - parts["heap.fragmentation"]) <= max(0.1 * parts["heap.fragmentation"], 1 << 20)
PY
}

@test "explain on the page: the process page has a stacked plot of where its memory goes, a point every --parts-every" {
	[ -x "$FRAG" ] || skip "no $FRAG"
	start_frag "prof:true,control_refresh_ms:100" count=20000 anon_mib=4
	"$HEAPCTL" serve --listen 127.0.0.1:0 --parts-every 1 >"$T/serve.out" 2>"$T/serve.err" &
	SPID=$!
	track "$SPID"
	wait_for 5 grep -q "listening on http://" "$T/serve.out"
	URL=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
	curl -s "$URL/?pid=$FPID" | grep -q "src=\"/plot?pid=$FPID&amp;parts=1"
	# two points and more: each part an area
	stacked() { curl -s "$URL/plot?pid=$FPID&parts=1" >"$T/p.svg" && [ "$(grep -o '<polygon class="' "$T/p.svg" | wc -l)" -eq 6 ]; }
	wait_for 10 stacked
	python3 - "$T/p.svg" <<'PY'
import re, sys, xml.dom.minidom
svg = open(sys.argv[1]).read()
xml.dom.minidom.parseString(svg)                       # well-formed
names = re.findall(r'<polygon class="(\w+)"', svg)
assert names == ["heap", "anonymous", "stacks", "files", "shared", "kernel"], names
assert "where its resident memory goes" in svg
PY
	run "$HEAPCTL" serve --parts-every 5000
	[ "$status" -eq 2 ]
	[[ "$output" == *"--parts-every 5000: want seconds from 1 to 3600"* ]]
}
