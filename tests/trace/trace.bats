#!/usr/bin/env bats
# tests/trace/trace.bats - heapctl trace PID --malloc | --faults: heap
# profiles of processes started without the library, from eBPF.  Known
# sites of tests/programs/prog.c (dynamic, static, against jemalloc) and of
# Debian's python3 are checked in the report, against their sizes and the
# preload profiler's figures for the same program; the budget that detaches
# the probes from a process that calls malloc too often; clear refusals.
# Needs root and a kernel with BTF, as heapctl trace does.

load ../lib/helpers

PROG_SRC="$BATS_TEST_DIRNAME/../programs/prog.c"

setup_file() {
	export TB="$BATS_FILE_TMPDIR"
	gcc -O2 -g -pthread -o "$TB/prog" "$PROG_SRC"
	gcc -O2 -g -pthread -static -o "$TB/prog-static" "$PROG_SRC"
	gcc -O2 -g -pthread -o "$TB/prog-je" "$PROG_SRC" -ljemalloc
	# a program and a library for a root of their own (a container): the
	# library at a path this side does not have
	printf '%s\n' '#include <stdlib.h>' '#include <string.h>' \
	    '__attribute__((noinline)) void *site_lib(void) { void *p = malloc(1024); memset(p, 1, 1024); return p; }' \
	    >"$TB/site.c"
	gcc -O2 -g -shared -fPIC -o "$TB/libsite.so" "$TB/site.c"
	printf '%s\n' '#include <stdio.h>' '#include <unistd.h>' 'void *site_lib(void);' \
	    'static void *keep[8192];' \
	    'int main(void) { puts("ready"); fflush(stdout); while (access("/go", F_OK)) usleep(10000);' \
	    '  for (int i = 0; i < 8192; i++) keep[i] = site_lib(); puts("done 8192"); return 0; }' >"$TB/boxed.c"
	gcc -O2 -g -o "$TB/boxed" "$TB/boxed.c" -L"$TB" -lsite -Wl,-rpath,/clib-heapctl-test
}

# started PROG: run PROG without the library in the background, its output
# in $T/prog.out; PID= once it printed "ready" (it then waits for $T/go)
started() {
	rm -f "$T/go" "$T/prog.out" # no earlier run's "ready"
	env -u LD_PRELOAD "$1" "$T/go" >"$T/prog.out" 2>&1 &
	PID=$!
	track "$PID"
	wait_for 5 grep -q '^ready' "$T/prog.out"
}

# tracing PID OUT TRACE-ARGS...: heapctl trace PID into OUT in the
# background (its stderr in $T/trace.err); TRACER= once the probes are in
tracing() {
	local pid=$1 out=$2
	shift 2
	"$HEAPCTL" trace "$pid" "$@" -o "$out" >"$T/trace.out" 2>"$T/trace.err" &
	TRACER=$!
	track "$TRACER"
	wait_for 10 grep -q 'tracing' "$T/trace.err" || { cat "$T/trace.err"; return 1; }
}

# traced PROG OUT TRACE-ARGS...: start PROG, trace it with heapctl trace
# into OUT, let it go once the probes are in, wait for both.  Sets
# TRACE_ERR (heapctl's stderr) and status (heapctl's).
traced() {
	local prog=$1 out=$2
	shift 2
	started "$prog"
	local pid=$PID
	tracing "$pid" "$out" "$@"
	local tpid=$TRACER
	touch "$T/go"
	wait "$pid"
	status=0
	wait "$tpid" || status=$?
	TRACE_ERR=$(cat "$T/trace.err")
	grep -q '^done 18496' "$T/prog.out"
}

@test "trace --malloc: known sites of a program started without the library, near their sizes and the preload profiler's" {
	# at lg 13 the sampling error of the smallest site compared (site_b,
	# ~970 samples) is 3% in each profile: 15% is 3.5 standard deviations
	# of their difference (lg 14 made it 2.2, and a clean run failed once)
	traced "$TB/prog" "$T/t.heap" --malloc --lg-sample 13 --budget 0
	[ "$status" -eq 0 ]
	[[ "$TRACE_ERR" != *dropped* ]]       # every sample counted
	[[ "$TRACE_ERR" != *budget* ]]        # and every call: --budget 0
	[[ "$TRACE_ERR" == *"libc.so.6 in process"* ]]
	[[ "$TRACE_ERR" == *"malloc"*"free"* || "$TRACE_ERR" == *"free"*"malloc"* ]]
	head -1 "$T/t.heap" | grep -qx 'heap_v2/8192'
	grep -q '^MAPPED_LIBRARIES:' "$T/t.heap"
	# the program's build id, in the line before its executable mapping (as the agent writes it)
	id=$(readelf -n "$TB/prog" | awk '/Build ID/ { print $3 }')
	[ -n "$id" ]
	grep -A1 -E "^([0-9a-f]+)-\1 r-xp [^ ]*/prog \(@[0-9a-f]+\) $id\$" "$T/t.heap" | tail -1 | grep -Eq ' r-xp .*/prog$'
	# the same program under the library, sampling at the same rate
	rm -f "$T/go"; touch "$T/go"
	env LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" \
	    HEAPCTL_CONF="prof:true,prof_final:true,lg_prof_sample:13,prof_prefix:$T/pre" "$TB/prog" "$T/go" >/dev/null
	pre=$(ls "$T"/pre.*.f.heap)
	sites_near "$T/t.heap" "$pre"
	# calloc (site_d, inlined into main): 4 MiB
	near "$(bytes "$T/t.heap" main)" 4194304 15
	# site_c frees each object at once: nothing in use, 64 MiB allocated
	[ "$(bytes "$T/t.heap" site_c)" -lt 1048576 ]
	near "$(bytes "$T/t.heap" site_c --alloc_space)" 67108864 15
	# jeprof reads the dump too
	run jeprof --text "$TB/prog" "$T/t.heap"
	[[ "$output" == *site_a* && "$output" == *site_b* ]]
}

@test "trace --faults: where resident memory grew, with stacks through code without frame pointers" {
	# lg 12: site_b's 2080 pages give 1300 samples (2% of noise)
	traced "$TB/prog" "$T/f.heap" --faults --lg-sample 12
	[ "$status" -eq 0 ]
	[[ "$TRACE_ERR" == *"page faults seen"* ]]
	# site_a and site_b write every byte they allocate
	near "$(bytes "$T/f.heap" site_a)" 33554432 15
	near "$(bytes "$T/f.heap" site_b)" 8388608 15
	# the faults are in libc's memset (no frame pointer): the caller is found
	run "$HEAPCTL" report "$T/f.heap" --collapsed
	[[ "$output" == *"thread_a;site_a"* ]]
}

@test "trace --faults where no tracefs is mounted (the raw tracepoints need none): the same sizes" {
	# heapctl in a mount namespace of its own, tracefs and debugfs hidden
	printf '%s\n' '#!/bin/sh' \
	    'exec unshare --mount --propagation private sh -c '"'"'mount -t tmpfs none /sys/kernel/tracing &&
	        { ! mountpoint -q /sys/kernel/debug || mount -t tmpfs none /sys/kernel/debug; } && exec "$0" "$@"'"'"' '"$HEAPCTL"' "$@"' \
	    >"$T/no-tracefs"
	chmod +x "$T/no-tracefs"
	HEAPCTL=$T/no-tracefs traced "$TB/prog" "$T/nt.heap" --faults --lg-sample 12
	[ "$status" -eq 0 ]
	near "$(bytes "$T/nt.heap" site_a)" 33554432 15
	near "$(bytes "$T/nt.heap" site_b)" 8388608 15
}

@test "trace --malloc on a program linked with jemalloc probes jemalloc" {
	# site_c (1M calls) is not asserted here: 64K of them spare the probes
	# half a minute of CPU (prog.c)
	PROG_SITE_C=65536 traced "$TB/prog-je" "$T/j.heap" --malloc --lg-sample 13 --budget 0
	[ "$status" -eq 0 ]
	[[ "$TRACE_ERR" == *"libjemalloc.so.2 in process"* ]]
	[[ "$TRACE_ERR" == *"sdallocx"* ]]
	near "$(bytes "$T/j.heap" site_a)" 33554432 15
	near "$(bytes "$T/j.heap" site_b)" 8388608 15
}

@test "trace on a statically linked program: its own malloc, and its page faults" {
	PROG_SITE_C=65536 traced "$TB/prog-static" "$T/s.heap" --malloc --lg-sample 13 --budget 0
	[ "$status" -eq 0 ]
	[[ "$TRACE_ERR" == *"prog-static in process"* ]]
	near "$(bytes "$T/s.heap" site_a)" 33554432 15
	near "$(bytes "$T/s.heap" site_b)" 8388608 15
	# built without .eh_frame_hdr (gcc -static): its callers too, through a
	# table made from .eh_frame
	! readelf -lW "$TB/prog-static" | grep -q GNU_EH_FRAME
	run "$HEAPCTL" report "$T/s.heap" --collapsed
	[[ "$output" == *"thread_a;site_a "* ]]
	traced "$TB/prog-static" "$T/sf.heap" --faults --lg-sample 14
	[ "$status" -eq 0 ]
	total=$("$HEAPCTL" report "$T/sf.heap" --bytes | awk '/^Total:/ { print $2 }')
	[ "$total" -gt 37748736 ]        # 36 MiB of the 40 written
	# stripped, it has no malloc to find: the reason and the ways out
	cp "$TB/prog-static" "$T/stripped"
	strip "$T/stripped"
	started "$T/stripped"
	run "$HEAPCTL" trace "$PID" --malloc
	[ "$status" -eq 1 ]
	[[ "$output" == *"defines malloc and free"*"--symbols"*"--faults"* ]]
	touch "$T/go"
}

@test "trace --malloc on a process in a root of its own (a chroot), its library deleted: unwound from its memory" {
	local r="$T/root"
	mkdir -p "$r/lib64" "$r/lib/x86_64-linux-gnu" "$r/clib-heapctl-test"
	cp /lib64/ld-linux-x86-64.so.2 "$r/lib64/"
	cp /lib/x86_64-linux-gnu/libc.so.6 "$r/lib/x86_64-linux-gnu/"
	cp "$TB/libsite.so" "$r/clib-heapctl-test/"
	cp "$TB/boxed" "$r/boxed"
	[ ! -e /clib-heapctl-test ]
	chroot "$r" /boxed >"$T/prog.out" 2>&1 &
	PID=$!
	track "$PID"
	wait_for 5 grep -q '^ready' "$T/prog.out"
	# and its library's file is gone: only the process has it
	rm "$r/clib-heapctl-test/libsite.so"
	tracing "$PID" "$T/c.heap" --malloc --lg-sample 12 --budget 0
	local tpid=$TRACER
	touch "$r/go"
	wait "$PID"
	wait "$tpid"
	grep -q '^done 8192' "$T/prog.out"
	# the heaviest stack goes from the library's function through main to
	# the start of the program (named by module and offset where the file
	# is gone): without the unwind tables read from the process's memory
	# it would stop at the library's frame
	top=$("$HEAPCTL" report "$T/c.heap" --collapsed | sort -t' ' -k2 -n | tail -1)
	echo "$top"
	frames=$(awk '{ print $1 }' <<<"$top" | tr ';' '\n' | wc -l)
	[ "$frames" -ge 3 ]
	[[ "$top" == *";main;libsite.so (deleted)+0x"* ]]
}

@test "trace --malloc on Debian's redis-server under load: its sites near their sizes and the library's profile" {
	command -v redis-server >/dev/null || skip "no redis-server"
	redis_start
	tracing "$PID" "$T/r.heap" --malloc --lg-sample 14 --budget 0
	local tpid=$TRACER
	redis-cli -p "$PORT" DEBUG POPULATE 50000 key 1000 >/dev/null
	kill -INT "$tpid"
	wait "$tpid"
	[[ "$(cat "$T/trace.err")" == *"libjemalloc.so.2 in process"* ]]
	# 50,000 values of 1000 bytes: sds strings of 1,004 bytes requested
	t=$(bytes "$T/r.heap" _sdsnewlen)
	near "$t" 50200000 15
	redis-cli -p "$PORT" shutdown nosave >/dev/null || true
	wait "$PID" || true
	# the same load under the library, at the same rate (usable sizes:
	# 1,024 bytes each)
	redis_start LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" HEAPCTL_CONF="prof:true,lg_prof_sample:14"
	redis-cli -p "$PORT" DEBUG POPULATE 50000 key 1000 >/dev/null
	"$HEAPCTL" dump "$PID" -o "$T/p.heap" >/dev/null
	near "$t" "$(bytes "$T/p.heap" _sdsnewlen)" 15
	redis-cli -p "$PORT" shutdown nosave >/dev/null || true
}

@test "trace --malloc on Debian's python3: its allocation sites named" {
	cat >"$T/build.py" <<-EOF
	import os, time
	print("ready", flush=True)
	while not os.path.exists("$T/go"):
	    time.sleep(0.01)
	keep = [bytearray(4096) for _ in range(8192)]
	print("done 18496", flush=True)
	EOF
	cat >"$T/py" <<-EOF
	#!/bin/sh
	exec python3 "$T/build.py"
	EOF
	chmod +x "$T/py"
	traced "$T/py" "$T/p.heap" --malloc --lg-sample 14 --budget 0
	[ "$status" -eq 0 ]
	# python frees it all at exit: what was allocated, by whom
	near "$(bytes "$T/p.heap" PyByteArray_Resize --alloc_space)" 33554432 15
}

@test "trace --json: one event per line, and the summary" {
	traced "$TB/prog" "$T/j.heap" --malloc --lg-sample 18 --json --budget 0
	[ "$status" -eq 0 ]
	python3 - "$T/trace.out" <<-'EOF'
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1])]
	allocs = [e for e in ev if e["event"] == "alloc"]
	frees = [e for e in ev if e["event"] == "free"]
	assert allocs and all(e["frames"] and e["size"] > 0 and e["ptr"].startswith("0x") for e in allocs), ev[:3]
	assert ev[-2]["event"] == "dump" and ev[-1]["event"] == "summary", ev[-2:]
	s = ev[-1]
	assert s["samples"] >= len(allocs) and s["frees"] == len(frees) and s["calls"] > 1000000, s
	EOF
}

@test "trace: --duration and Ctrl-C end it with a dump; the process runs on; --interval dumps" {
	started "$TB/prog"
	pid=$PID
	run "$HEAPCTL" trace "$pid" --malloc --duration 0.5 --interval 0.2 --prefix "$T/d"
	[ "$status" -eq 0 ]
	ls "$T"/d."$pid".*.t0.heap "$T"/d."$pid".*.f.heap
	[[ "$output" == *"$T/d.$pid."*".f.heap"* ]]
	"$HEAPCTL" trace "$pid" --faults -o "$T/int.heap" 2>"$T/int.err" &
	tpid=$!
	wait_for 10 grep -q tracing "$T/int.err"
	kill -INT "$tpid"
	wait "$tpid"
	head -1 "$T/int.heap" | grep -q '^heap_v2/'
	kill -0 "$pid"
	touch "$T/go"
	wait "$pid"
	grep -q '^done 18496' "$T/prog.out"
}

@test "trace: a dump name that is taken is skipped for the next number, never replaced" {
	started "$TB/prog"
	pid=$PID
	echo keep >"$T/d.$pid.0.f.heap"
	run --separate-stderr "$HEAPCTL" trace "$pid" --malloc --duration 0.3 --prefix "$T/d"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/d.$pid.1.f.heap" ]
	[ "$(cat "$T/d.$pid.0.f.heap")" = keep ]
	head -1 "$T/d.$pid.1.f.heap" | grep -q '^heap_v2/'
	touch "$T/go"
	wait "$pid"
}

@test "trace: the rate limit drops samples and says how many" {
	PROG_SITE_C=65536 traced "$TB/prog" "$T/r.heap" --malloc --lg-sample 0 --limit 100 --budget 0
	[ "$status" -eq 0 ]
	[[ "$TRACE_ERR" =~ dropped\ [0-9]+\ samples\ \(ring\ full\ [0-9]+,\ rate\ limit\ [1-9][0-9]*\) ]]
}

@test "trace --malloc over its budget: the probes detached, one line that says so and names inject, a dump that reads" {
	# 0.01% of a CPU: a hit costs 0.2 us at the least (budget.c), so 125
	# hits in a window of 0.25 s are over it, and prog makes millions
	traced "$TB/prog" "$T/b.heap" --malloc --lg-sample 13 --budget 0.01 --json
	[ "$status" -eq 0 ]
	echo "$TRACE_ERR"
	[ "$(grep -c 'over the budget of 0.01% (--budget): they are detached' <<<"$TRACE_ERR")" -eq 1 ]
	[[ "$TRACE_ERR" == *"heapctl inject $PID profiles"* ]]
	[[ "$TRACE_ERR" == *"over the budget of 0.01%"*"the totals are estimates"* ]]
	python3 - "$T/trace.out" <<-'EOF'
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1])]
	b = [e for e in ev if e["event"] == "budget"]
	assert len(b) == 1 and b[0]["action"] == "duty_cycle" and b[0]["budget_pct"] == 0.01, b
	assert b[0]["probe_cpu_pct"] > 0.01 and b[0]["off_s"] >= 0.25, b
	s = ev[-1]
	assert s["event"] == "summary" and s["estimated"] is True and s["off_periods"] >= 1, s
	assert s["budget_pct"] == 0.01 and 0 < s["on_fraction"] < 1 and s["hits"] >= s["calls"] > 0, s
	EOF
	# what the window saw is a profile report and jeprof read
	run "$HEAPCTL" report "$T/b.heap" --alloc_space --collapsed
	[ "$status" -eq 0 ]
	[[ "$output" == *site_* ]]
	run jeprof --text --alloc_space "$TB/prog" "$T/b.heap"
	[ "$status" -eq 0 ]
	[[ "$output" == *"Total:"* ]]
}

@test "trace --malloc over its budget with perf-event links (a kernel before 6.6): detached too, and the dump reads" {
	export HEAPCTL_TRACE_NO_MULTI=1      # this test's subshell only
	traced "$TB/prog" "$T/bp.heap" --malloc --lg-sample 13 --budget 0.01
	[ "$status" -eq 0 ]
	echo "$TRACE_ERR"
	[ "$(grep -c 'over the budget of 0.01% (--budget): they are detached' <<<"$TRACE_ERR")" -eq 1 ]
	[[ "$TRACE_ERR" == *"observed"*"the totals are estimates"* ]]
	run "$HEAPCTL" report "$T/bp.heap" --alloc_space --collapsed
	[ "$status" -eq 0 ]
	[[ "$output" == *site_* ]]
}

@test "trace --malloc duty-cycled: the probes come back, and the samples of a window after an off period weigh for it" {
	# malloc and free in a loop until told to stop: always over 20%
	printf '%s\n' '#include <stdio.h>' '#include <stdlib.h>' '#include <unistd.h>' \
	    '__attribute__((noinline)) static void site_hot(void) { void *p = malloc(64); __asm__ volatile("" : : "r"(p) : "memory"); free(p); }' \
	    'int main(int argc, char **argv) { puts("ready"); fflush(stdout); while (access(argv[1], F_OK)) usleep(10000);' \
	    '  for (;;) { for (int i = 0; i < 100000; i++) site_hot(); if (!access(argv[2], F_OK)) break; } puts("done"); return 0; }' \
	    >"$T/hot.c"
	gcc -O2 -g -o "$T/hot" "$T/hot.c"
	rm -f "$T/go" "$T/stop"
	env -u LD_PRELOAD "$T/hot" "$T/go" "$T/stop" >"$T/prog.out" 2>&1 &
	local pid=$!
	track "$pid"
	wait_for 5 grep -q '^ready' "$T/prog.out"
	tracing "$pid" "$T/d.heap" --malloc --lg-sample 13 --budget 20 --json
	touch "$T/go"
	# until a sample comes after the probes went off once: they came back
	wait_for 60 awk '/"event":"budget"/ { b = 1 } b && /"event":"alloc"/ { f = 1 } END { exit !f }' "$T/trace.out"
	touch "$T/stop"
	wait "$pid"
	wait "$TRACER"
	python3 - "$T/trace.out" <<-'EOF'
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1])]
	at = [i for i, e in enumerate(ev) if e["event"] == "budget"][0]
	before = [e["weight"] for e in ev[:at] if e["event"] == "alloc"]
	after = [e["weight"] for e in ev[at:] if e["event"] == "alloc"]
	# 64 bytes at 2^13: 1 / (1 - exp(-64 / 8192)) = 128.5 each, unscaled
	assert before and all(abs(w - 128.5) < 0.1 for w in before), before[:5]
	# the window after an off period (of at least a window) is scaled by
	# (unobserved + window) / window >= 2; a later window that stays under
	# the budget (a busy machine gives the process less CPU) is not scaled
	assert after and after[0] >= 2 * 128.5, after[:5]
	assert all(abs(w - 128.5) < 0.1 or w >= 2 * 128.5 for w in after), after
	s = ev[-1]
	assert s["estimated"] is True and s["off_periods"] >= 1 and 0 < s["on_fraction"] < 1, s
	EOF
	[ "$(bytes "$T/d.heap" site_hot --alloc_space)" -gt 0 ]
}

@test "trace --malloc under its budget (the default, 5%): every call traced, nothing said" {
	# 400 mallocs a second: under 2% of a CPU even at 19 us a hit
	printf '%s\n' '#include <stdio.h>' '#include <stdlib.h>' '#include <string.h>' '#include <unistd.h>' \
	    'static void *keep[400];' \
	    '__attribute__((noinline)) static void *site_slow(void) { void *p = malloc(4096); memset(p, 1, 4096); return p; }' \
	    'int main(int argc, char **argv) { puts("ready"); fflush(stdout); while (access(argv[1], F_OK)) usleep(10000);' \
	    '  for (int i = 0; i < 400; i++) { keep[i] = site_slow(); usleep(2500); } puts("done 400"); return 0; }' \
	    >"$T/slow.c"
	gcc -O2 -g -o "$T/slow" "$T/slow.c"
	started "$T/slow"
	local pid=$PID
	tracing "$pid" "$T/u.heap" --malloc --lg-sample 10 --json
	touch "$T/go"
	wait "$pid"
	wait "$TRACER"
	grep -q '^done 400' "$T/prog.out"
	[[ "$(cat "$T/trace.err")" != *budget* ]] || { cat "$T/trace.err"; tail -n 1 "$T/trace.out"; false; }
	python3 - "$T/trace.out" <<-'EOF'
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1])]
	assert not [e for e in ev if e["event"] == "budget"], ev
	s = ev[-1]
	assert s["estimated"] is False and s["off_periods"] == 0 and s["budget_pct"] == 5, s
	assert s["calls"] >= 400 and s["on_fraction"] == 1, s
	EOF
	# at 2^10 each 4 KiB block is sampled with p = 98%: all 1.6 MB seen
	near "$(bytes "$T/u.heap" site_slow)" 1638400 10
}

@test "trace refuses clearly: no mode, both modes, no process, bad options, not root" {
	run "$HEAPCTL" trace $$
	[ "$status" -eq 2 ]
	[[ "$output" == *"--malloc or --faults"* ]]
	run "$HEAPCTL" trace $$ --malloc --faults
	[ "$status" -eq 2 ]
	run "$HEAPCTL" trace 999999999 --faults
	[ "$status" -eq 3 ]
	[[ "$output" == *"no process 999999999"* ]]
	run "$HEAPCTL" trace $$ --malloc --symbols frob=x
	[ "$status" -eq 2 ]
	[[ "$output" == *"ROLE=NAME"* ]]
	run "$HEAPCTL" trace $$ --malloc --symbols malloc=no_such_function_here
	[ "$status" -eq 1 ]
	[[ "$output" == *"defines no_such_function_here"* ]]
	run "$HEAPCTL" trace $$ --faults --lg-sample 99
	[ "$status" -eq 2 ]
	local v
	for v in -1 abc 101 5x '' nan; do
		run "$HEAPCTL" trace $$ --malloc --budget "$v"
		[ "$status" -eq 2 ]
		[ "$output" = "heapctl: trace: --budget takes a percent of one CPU, 0 (none) to 100, not '$v'" ]
	done
	run "$HEAPCTL" trace $$ --faults --budget 5%
	[ "$status" -eq 2 ]
	[[ "$output" == "heapctl: trace: --budget is for --malloc"* ]]
	sleep 30 &
	track $!
	run setpriv --reuid=nobody --regid=nogroup --clear-groups "$HEAPCTL" trace $! --faults
	[ "$status" -eq 5 ]
	[[ "$output" == *"needs CAP_BPF and CAP_PERFMON"* ]]
}
