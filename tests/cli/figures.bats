#!/usr/bin/env bats
# tests/cli/figures.bats - a figure has one name wherever it is shown: list,
# status, watch and the daemon's /targets and /metrics give one quiescent
# process (it allocated a known amount, freed half, then sleeps) the same
# value under each name, in JSON and in text (heapctl(1), COUNTERS), and
# the daemon's page rounds as the command does, also where its script
# rewrites a cell.
# watch's gdump event once said "mapped" for the high-water mark, where
# list said the mapped now, lower once memory was given back.

load ../lib/helpers

setup_file() {
	export TB="$BATS_FILE_TMPDIR"
	# hold SIZE COUNT KEEP GOFILE [PEAKFILE]: "ready PID"; once GOFILE
	# exists, COUNT blocks of SIZE bytes (written), all but the first KEEP
	# freed again, "allocated"; then nothing until killed.  With PEAKFILE,
	# before the frees: "peak N", glibc's arena and mmapped bytes (what an
	# injected agent counts as mapped), and a wait until PEAKFILE exists
	cat >"$TB/hold.c" <<-'EOF'
	#include <malloc.h>
	#include <stdio.h>
	#include <stdlib.h>
	#include <string.h>
	#include <unistd.h>
	static char *keep[1024];
	int main(int argc, char **argv)
	{
		size_t size = strtoull(argv[1], NULL, 0);
		int count = atoi(argv[2]), keep_n = atoi(argv[3]);
		printf("ready %d\n", getpid());
		fflush(stdout);
		while (access(argv[4], F_OK) != 0)
			usleep(10000);
		for (int i = 0; i < count && i < 1024; i++) {
			keep[i] = malloc(size);
			memset(keep[i], 1, size);
		}
		if (argc > 5) {
			struct mallinfo2 mi = mallinfo2();
			printf("peak %zu\n", mi.arena + mi.hblkhd);
			fflush(stdout);
			while (access(argv[5], F_OK) != 0)
				usleep(10000);
		}
		for (int i = keep_n; i < count && i < 1024; i++)
			free(keep[i]);
		printf("allocated\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	EOF
	gcc -O2 -g -o "$TB/hold" "$TB/hold.c"
}

# figures_still PID: two snapshots of status --json 300 ms apart (each
# refreshes the counters) agree on every counter
figures_still() {
	"$HEAPCTL" status "$1" --json >"$T/s1" || return 1
	sleep 0.3
	"$HEAPCTL" status "$1" --json >"$T/s2" || return 1
	python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
keys = ("allocated", "active", "metadata", "resident", "mapped", "retained", "highwater",
        "samples", "dumps", "threads", "commands")
sys.exit(any(a[k] != b[k] for k in keys))' "$T/s1" "$T/s2"
}

# watching PID: two watchers (JSON into $T/wj, text into $T/wt) reading
# PID's events, and the daemon (URL) once it lists PID
watching() {
	local pid=$1 w
	"$HEAPCTL" watch "$pid" --json >"$T/wj" 2>"$T/wj.err" &
	track $!
	"$HEAPCTL" watch "$pid" >"$T/wt" 2>"$T/wt.err" &
	track $!
	for w in "${_pids[@]: -2}"; do wait_for 5 maps_segment "$w" "$pid"; done
	"$HEAPCTL" serve --listen 127.0.0.1:0 >"$T/serve.out" 2>"$T/serve.err" &
	track $!
	wait_for 5 grep -q "listening on http://" "$T/serve.out" || { cat "$T/serve.err" >&2; return 1; }
	URL=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
	wait_for 5 sh -c "curl -s '$URL/targets' | grep -q '\"pid\": $pid,'"
}

# same_figures PID: once PID's counters hold still, every source once
# (none of them a command: status's ping is not one), compared name by
# name in JSON and in text; allocated must be 32 MiB and a little, and the
# high-water mark 16 MiB or more above what is mapped now
same_figures() {
	local pid=$1
	wait_for 20 figures_still "$pid"
	"$HEAPCTL" status "$pid" --json >"$T/status.json"
	"$HEAPCTL" list --json >"$T/list.json"
	curl -sf "$URL/targets" >"$T/targets.json"
	curl -sf "$URL/metrics" >"$T/metrics.txt"
	"$HEAPCTL" status "$pid" >"$T/status.txt"
	"$HEAPCTL" list >"$T/list.txt"
	run python3 - "$T" "$pid" <<-'EOF'
	import json, math, re, sys
	d, pid = sys.argv[1], int(sys.argv[2])
	def mine(rows):
	    r = [x for x in rows if x["pid"] == pid]
	    assert len(r) == 1, rows
	    return r[0]
	src = {}
	st = json.load(open(d + "/status.json"))
	# the settings under their mallctl names, as set shows them
	st["prof_active"], st["lg_sample"] = st.pop("prof.active"), st.pop("prof.lg_sample")
	src["status --json"] = st
	src["list --json"] = mine(json.load(open(d + "/list.json")))
	src["/targets"] = mine(json.load(open(d + "/targets.json")))
	m = {}
	for line in open(d + "/metrics.txt"):
	    g = re.match(r'heapctl_(\w+)\{pid="%d",[^}]*\} (\S+)$' % pid, line)
	    if g:
	        name, v = g.group(1), float(g.group(2))
	        name = re.sub(r"_(bytes|total)$", "", name)
	        if name == "sample_period":
	            name, v = "lg_sample", math.log2(v)
	        m[name] = v == 1 if name == "prof_active" else int(v)
	src["/metrics"] = m
	gd = [json.loads(l) for l in open(d + "/wj") if json.loads(l)["type"] == "gdump"]
	assert gd, open(d + "/wj").read()
	src["watch --json (last gdump)"] = {"highwater": gd[-1]["highwater"]}
	# what each carries, so that a figure that goes from one is noticed
	want = {
	    "status --json": "allocated active metadata resident mapped retained highwater samples dumps threads commands prof_active lg_sample",
	    "list --json": "allocated mapped highwater dumps prof_active lg_sample",
	    "/targets": "allocated resident mapped highwater samples dumps threads prof_active lg_sample",
	    "/metrics": "allocated active metadata resident mapped retained highwater samples dumps threads commands prof_active lg_sample",
	    "watch --json (last gdump)": "highwater",
	}
	bad = []
	for s, names in want.items():
	    for n in names.split():
	        if n not in src[s]:
	            bad.append("%s has no %s" % (s, n))
	names = {n for ns in want.values() for n in ns.split()}
	for n in sorted(names):
	    vals = {s: src[s][n] for s in src if n in src[s]}
	    print(n, vals)
	    if len(set(vals.values())) != 1:
	        bad.append("%s differs: %s" % (n, vals))
	# the known amount, and a mark above what is mapped now
	a = st["allocated"]
	if not (32 << 20) <= a < (34 << 20):
	    bad.append("allocated %d is not 32 MiB and a little" % a)
	if not (a <= st["mapped"] and st["mapped"] + (16 << 20) <= st["highwater"]):
	    bad.append("not allocated <= mapped < highwater - 16 MiB: %s" % st)
	assert not bad, "\n".join(bad)
	EOF
	echo "$output"
	[ "$status" -eq 0 ]
	# text: one rounding; watch's last gdump line, status and list agree
	local hw_status hw_watch row
	hw_status=$(sed -n 's/^high-water  *//p' "$T/status.txt")
	hw_watch=$(sed -n 's/.* gdump high-water \(.*\) (was .*/\1/p' "$T/wt" | tail -n1)
	# list: PID NSPID PROF SAMPLE ALLOCATED MAPPED HIGH-WATER ..., each "N unit"
	row=$(awk -v p="$pid" '$1 == p { print $5 " " $6 "|" $7 " " $8 "|" $9 " " $10 }' "$T/list.txt")
	echo "status: $(grep -E '^(allocated|mapped|high-water) ' "$T/status.txt" | tr -s ' ' | tr '\n' ';') list: $row; watch: $hw_watch"
	[ -n "$hw_status" ]
	[ "$hw_watch" = "$hw_status" ]
	[ "$row" = "$(sed -n 's/^allocated  *//p' "$T/status.txt")|$(sed -n 's/^mapped  *//p' "$T/status.txt")|$hw_status" ]
}

# held: hold under the library, 64 x 1 MiB with 32 of them freed, so that
# mapped falls below the high-water mark; every new mark a gdump event (no
# growth gate), dirty pages purged at once so that nothing changes by
# itself afterwards.  Watched (watching) from before it allocates; HPID
held() {
	env -u LD_PRELOAD LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" \
	    HEAPCTL_CONF=prof:true,lg_prof_sample:16,control_refresh_ms:100,prof_gdump_pct:0,prof_gdump_min_ms:0,dirty_decay_ms:0 \
	    "$TB/hold" 1048576 64 32 "$T/go" >"$T/hold.out" 2>"$T/hold.err" &
	HPID=$!
	track "$HPID"
	wait_for 5 grep -q "^ready $HPID\$" "$T/hold.out"
	wait_for 5 control_running "$HPID"
	watching "$HPID"
	touch "$T/go"
	wait_for 10 grep -q '^allocated$' "$T/hold.out"
}

# runs alone (tests/run.sh): compares the commands a process received, by two sources moments apart: another suite's daemon asks every process where its memory goes (a command) as it starts and on each /metrics scrape (serve/mem.c)
# bats test_tags=machine
@test "figures: list, status, watch, /targets and /metrics show one quiescent process's figures equal, name by name" {
	held
	same_figures "$HPID"
}

@test "figures: the daemon's page rounds as the command does, also in the cells its script refreshes" {
	command -v chromium >/dev/null || skip "chromium is not installed"
	held
	wait_for 20 figures_still "$HPID"
	# heapctl's own rounding of chosen sizes: status prints prof.threshold
	# with it (on another process: a threshold makes a dump); a tie at one
	# decimal (1280, 1310720) and the step to the next unit (1048525)
	start_target
	local n want=() sizes=(1023 1024 1280 1792 1048524 1048525 1310720 1073689396)
	for n in "${sizes[@]}"; do
		"$HEAPCTL" set "$TPID" prof.threshold="$n" >/dev/null
		want+=("$("$HEAPCTL" status "$TPID" | sed -n 's/^prof.threshold  *//p')")
	done
	local cells="['allocated','resident','highwater'].map(k => document.querySelector('tr[data-pid=\"$HPID\"] .' + k).textContent).join('|')"
	run timeout 120 python3 "$BATS_TEST_DIRNAME/../lib/cdp.py" "$URL/" "$cells" "(async () => { await refresh(); return $cells })()" \
	    "[$(IFS=,; echo "${sizes[*]}")].map(fmt).join('|')"
	echo "$output"
	[ "$status" -eq 0 ]
	local st
	"$HEAPCTL" status "$HPID" >"$T/status.txt"
	st="\"$(sed -n 's/^allocated  *//p' "$T/status.txt")|$(sed -n 's/^resident  *//p' "$T/status.txt")|$(sed -n 's/^high-water  *//p' "$T/status.txt")\""
	[ "${lines[0]}" = "$st" ]          # as the server wrote them
	[ "${lines[1]}" = "$st" ]          # as the script rewrote them
	[ "${lines[2]}" = "\"$(IFS='|'; echo "${want[*]}")\"" ]
}

# runs alone (tests/run.sh): compares system-wide figures taken moments apart
# bats test_tags=machine
@test "figures: an injected process's highwater is its highest mapped (glibc's heap), as a preloaded one's, and shown the same everywhere" {
	need_root
	env -u LD_PRELOAD "$TB/hold" 1048576 64 32 "$T/go" "$T/peak" >"$T/hold.out" 2>"$T/hold.err" &
	local pid=$!
	track "$pid"
	wait_for 5 grep -q "^ready $pid\$" "$T/hold.out"
	"$HEAPCTL" inject "$pid" --conf control_refresh_ms:100,prof_gdump_pct:0,prof_gdump_min_ms:0 >/dev/null
	watching "$pid"
	touch "$T/go"
	wait_for 10 grep -q '^peak ' "$T/hold.out"
	local peak
	peak=$(awk '/^peak / { print $2 }' "$T/hold.out")
	# the agent has counted the peak as mapped before the frees: the
	# program's count, or up to 512 KiB more where glibc made an arena for
	# the agent's thread after the program printed it (seen in make check)
	at_peak() {
		local m
		m=$(status_field "$pid" mapped)
		[ "$m" -ge "$peak" ] && [ "$m" -le $((peak + 524288)) ]
	}
	wait_for 10 at_peak || { echo "the program's peak: $peak; mapped: $(status_field "$pid" mapped)"; false; }
	touch "$T/peak"
	wait_for 10 grep -q '^allocated$' "$T/hold.out"
	same_figures "$pid"
	# not the peak of resident memory, another quantity (the program, its
	# libraries and stacks: megabytes more), but of mapped: the program's
	# own count at its peak, or a little more when glibc's arenas grew for
	# a moment around it (a thread's first malloc, a heap extended and
	# trimmed: 132 KiB steps, seen on a loaded machine)
	local hw
	hw=$(status_field "$pid" highwater)
	echo "the program's peak: $peak; highwater: $hw"
	[ "$hw" -ge "$peak" ] && [ "$hw" -le $((peak + 524288)) ]
}
