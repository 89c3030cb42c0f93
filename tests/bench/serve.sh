#!/usr/bin/env bash
# The daemon's numbers for `make bench` (heapctl serve): a scrape of a
# 10,000-stack profile end to end, without and with the symbol cache,
# against `heapctl dump` and `heapctl report` on the same kind of dump (for
# tests/programs/target and for the report bench's program over 40 libraries
# with DWARF), /metrics, /sd and /metrics?pid=N with 50 targets (latency,
# and the daemon's RSS then and with an archive of 200 dumps), what finding
# out who is asking costs a request, a target's run time while it is
# scraped every second against not scraped, and the requests a second
# another user still gets under each lock-out of issue 37
# (serve_lockout.sh).  Prints Markdown.
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/$build/bench"
mkdir -p "$out"
reps=${BENCH_REPS:-5}
H="$root/$build/heapctl"
target="$root/$build/tests/programs/target"
[ -x "$target" ] || make -C "$root" --no-print-directory "$build/tests/programs/target" >/dev/null || exit 1
[ -x "$out/runstat" ] || gcc -O2 -o "$out/runstat" "$root/tests/bench/runstat.c" || exit 1
[ -x "$out/st_churn" ] || gcc -O2 -g -pthread -o "$out/st_churn" "$root/tests/bench/st_churn.c" -lm || exit 1
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

source "$root/tests/bench/lib.sh"
ms() { awk -v s="$1" 'BEGIN{printf (s < 0.01 ? "%.2f" : "%.1f"), s * 1000}'; }

start() {  # conf args... -> sets $pid once the target is ready
	# in tmp: dumps without a prefix land in the current directory
	(cd "$tmp" && HEAPCTL_CONF=$1 exec "$target" "${@:2}") >"$tmp/t.$#.$RANDOM" 2>&1 &
	pids+=($!)
	pid=$!
	for _ in $(seq 200); do "$H" status "$pid" >/dev/null 2>&1 && return 0; sleep 0.05; done
	echo "target did not start"; exit 1
}
serve() {  # args... -> $url, $spid
	"$H" serve --listen 127.0.0.1:0 "$@" >"$tmp/serve.out" 2>"$tmp/serve.err" &
	spid=$!
	pids+=($spid)
	for _ in $(seq 100); do grep -qs 'listening on' "$tmp/serve.out" && break; sleep 0.05; done
	url=$(sed -n 's/.*listening on //p' "$tmp/serve.out")
}
rss_kib() { awk '/^VmRSS:/{print $2}' "/proc/$1/status"; }

machine_line
echo
echo "| measure | median | note |"
echo "| --- | ---: | --- |"

# ---- a scrape of 10,000 stacks, without and with the symbol cache ----------------
# scrape URL PID: the median end-to-end time of $reps scrapes
scrape() {
	for ((i = 0; i < reps; i++)); do
		curl -s -o "$tmp/s.pb.gz" -w '%{time_total}\n' "$1/debug/pprof/heap?pid=$2"
	done | median
}
# timed CMD...: the median wall time of $reps runs of CMD, in ns
timed() {
	for ((i = 0; i < reps; i++)); do
		t0=$(date +%s%N)
		"$@" >/dev/null
		echo "$(( $(date +%s%N) - t0 ))"
	done | median
}
nsms() { awk -v n="$1" 'BEGIN{printf "%.1f", n/1e6}'; }
# rows PID WHAT: the rows for one process
rows() {
	local p=$1 what=$2 cold warm dump nstk rep repc
	serve --symcache off
	sleep 0.6
	cold=$(scrape "$url" "$p")
	kill "$spid"
	serve --symcache "$tmp/sc.$p"
	sleep 0.6
	curl -s -o /dev/null "$url/debug/pprof/heap?pid=$p"        # fills the cache
	warm=$(scrape "$url" "$p")
	kill "$spid"
	"$H" dump "$p" -o "$tmp/d.heap" >/dev/null
	nstk=$(grep -c '^@' "$tmp/d.heap")
	rep=$(timed "$H" report "$tmp/d.heap" -p "$p" --pprof "$tmp/r.pb.gz")
	repc=$(timed "$H" report "$tmp/d.heap" -p "$p" --pprof "$tmp/r.pb.gz" --symcache "$tmp/sc.$p")
	dump=$(timed "$H" dump "$p" -o "$tmp/e.heap")
	printf '| %s: /debug/pprof/heap, %s stacks, end to end (%d runs) | %s ms | dump + symbolized pprof |\n' \
	    "$what" "$nstk" "$reps" "$(ms "$cold")"
	printf '| %s: the same with the symbol cache (--symcache, kept per build id) | %s ms | ratio %s |\n' "$what" \
	    "$(ms "$warm")" "$(awk -v a="$cold" -v b="$warm" 'BEGIN{printf "%.2f", b/a}')"
	printf '| %s: heapctl dump -o of the same process | %s ms | |\n' "$what" "$(nsms "$dump")"
	printf '| %s: heapctl report --pprof on that dump | %s ms | the scrape runs dump and report as children |\n' \
	    "$what" "$(nsms "$rep")"
	printf '| %s: heapctl report --pprof --symcache on that dump | %s ms | ratio %s |\n' "$what" "$(nsms "$repc")" \
	    "$(awk -v a="$rep" -v b="$repc" 'BEGIN{printf "%.2f", b/a}')"
}
start "prof:true,lg_prof_sample:0" grow=0 tick_ms=1000 stacks=10000
big=$pid
rows "$big" "tests/programs/target (libc with its debug file)"
kill "$big"
wait "$big" 2>/dev/null
# the report bench's generated program: 40 libraries with DWARF (built by
# tests/bench/report.sh, which make bench runs first), 10,000 walks kept
driver=$root/$build/bench/report/driver
if [ -x "$driver" ]; then
	(cd "$tmp" && HEAPCTL_CONF=prof:true,lg_prof_sample:0 LD_PRELOAD="$root/$build/libheapctl.so" \
	    exec "$driver" 10000 600) >"$tmp/driver.out" 2>&1 &
	pids+=($!)
	dpid=$!
	for _ in $(seq 600); do grep -q '^walks=' "$tmp/driver.out" && break; sleep 0.05; done
	rows "$dpid" "report bench driver (40 libraries with DWARF)"
	kill "$dpid"
	wait "$dpid" 2>/dev/null
else
	echo "| report bench driver | not run | $driver is missing: run tests/bench/report.sh first |"
fi

# ---- 50 targets ------------------------------------------------------------------
for i in $(seq 50); do start "prof:true" grow=0 tick_ms=1000; done
serve --archive "$tmp/arch" --keep 0 --max-bytes 0
for _ in $(seq 100); do
	[ "$(curl -s "$url/metrics" | sed -n 's/^heapctl_targets //p')" = 50 ] && break
	sleep 0.1
done
n=$(curl -s "$url/metrics" | sed -n 's/^heapctl_targets //p')
lat=$(for i in $(seq 50); do curl -s -o /dev/null -w '%{time_total}\n' "$url/metrics"; done | median)
lines=$(curl -s "$url/metrics" | grep -vc '^#')
printf '| /metrics with %s targets (%s samples), 50 requests | %s ms | |\n' "$n" "$lines" "$(ms "$lat")"
printf '| the daemon'"'"'s RSS with %s targets | %s MiB | |\n' "$n" "$(awk -v k="$(rss_kib "$spid")" 'BEGIN{printf "%.1f", k/1024}')"
tp=("${pids[@]: -51:50}")
# a collector's view: /sd (root's: every process, its program read from
# /proc/PID/cmdline each time) and one target's scrape, /metrics?pid=N
lat=$(for i in $(seq 50); do curl -s -o /dev/null -w '%{time_total}\n' "$url/sd"; done | median)
printf '| /sd with %s targets (%s listed), 50 requests | %s ms | |\n' "$n" "$(curl -s "$url/sd" | grep -c '"targets"')" \
    "$(ms "$lat")"
lat=$(for i in $(seq 50); do curl -s -o /dev/null -w '%{time_total}\n' "$url/metrics?pid=${tp[0]}"; done | median)
printf '| /metrics?pid=N (one target of /sd), 50 requests | %s ms | |\n' "$(ms "$lat")"
# 200 dumps of the 50 targets, every one archived with its pprof
for i in $(seq 200); do "$H" dump "${tp[$((i % 50))]}" >/dev/null 2>&1; done
for _ in $(seq 600); do
	[ "$(ls "$tmp"/arch/*/*.pb.gz 2>/dev/null | wc -l)" -ge 200 ] && break
	sleep 0.1
done
printf '| the daemon'"'"'s RSS with %s targets and %s archived dumps | %s MiB | |\n' "$n" \
    "$(ls "$tmp"/arch/*/*.heap | wc -l)" "$(awk -v k="$(rss_kib "$spid")" 'BEGIN{printf "%.1f", k/1024}')"
kill "$spid" "${tp[@]}"
wait 2>/dev/null

# ---- who is asking: the peer lookup of a request, as nobody ------------------------
# A refused profile request costs the lookup alone (nothing is dumped): on
# TCP a sock_diag query, and the /proc/*/fd scan for CAP_SYS_PTRACE that a
# refusal makes; on the Unix socket SO_PEERCRED.  /debug/pprof/ looks no
# one up.  200 requests on one kept-alive connection, the median each.
if [ "$(id -u)" = 0 ]; then
	start "prof:true" grow=0 tick_ms=1000
	rp=$pid
	"$H" serve --listen "unix:$tmp/s.sock" >"$tmp/userve.out" 2>&1 &
	upid=$!
	pids+=($upid)
	serve
	for _ in $(seq 100); do curl -s "$url/targets" | grep -q "\"pid\": $rp," && break; sleep 0.05; done
	# each URL CURLARGS...: the median time of 200 requests for URL as nobody
	each() {
		local u=$1
		shift
		setpriv --reuid=nobody --regid=nogroup --clear-groups curl -s "$@" -w '%{time_total}\n' \
		    $(for _ in $(seq 200); do printf -- '-o /dev/null %s ' "$u"; done) | median
	}
	idx=$(each "$url/debug/pprof/")
	look=$(each "$url/archive")
	tcp=$(each "$url/debug/pprof/heap?pid=$rp")
	uds=$(each "http://localhost/debug/pprof/heap?pid=$rp" --unix-socket "$tmp/s.sock")
	code=$(setpriv --reuid=nobody --regid=nogroup --clear-groups curl -s -o /dev/null -w '%{http_code}' \
	    "$url/debug/pprof/heap?pid=$rp")
	nproc_=$(ls -d /proc/[0-9]* | wc -l)
	nsock=$(($(cat /proc/net/tcp /proc/net/tcp6 | wc -l) - 2))
	printf '| /debug/pprof/ as nobody, no one looked up (200 requests) | %s ms | |\n' "$(ms "$idx")"
	printf '| /archive as nobody with no archive: the TCP lookup alone | %s ms | sock_diag |\n' "$(ms "$look")"
	printf '| root'"'"'s profile refused to nobody on loopback TCP (%s) | %s ms | sock_diag (%s sockets) and /proc/*/fd (%s processes) |\n' \
	    "$code" "$(ms "$tcp")" "$nsock" "$nproc_"
	printf '| the same on the Unix socket | %s ms | SO_PEERCRED |\n' "$(ms "$uds")"
	kill "$spid" "$upid" "$rp"
	wait 2>/dev/null
else
	echo "| the peer lookup | not run | needs root (a request as nobody to root's daemon) |"
fi

# ---- a target scraped every second ----------------------------------------------
serve
scraper() {
	while :; do
		p=$(pgrep -n -f "$out/st_churn ops=") && curl -s -o /dev/null "$url/debug/pprof/heap?pid=$p"
		sleep 1
	done
}
plain=() scraped=()
for ((i = 0; i < reps; i++)); do
	plain+=("$(HEAPCTL_CONF=prof:true "$out/runstat" -p "$root/$build/libheapctl.so" -t 120 -o /dev/null -- \
	    "$out/st_churn" ops=150000000 | cut -d' ' -f1)")
	scraper &
	sc=$!
	scraped+=("$(HEAPCTL_CONF=prof:true "$out/runstat" -p "$root/$build/libheapctl.so" -t 120 -o /dev/null -- \
	    "$out/st_churn" ops=150000000 | cut -d' ' -f1)")
	kill "$sc"
	wait "$sc" 2>/dev/null
done
a=$(printf '%s\n' "${plain[@]}" | median)
b=$(printf '%s\n' "${scraped[@]}" | median)
printf '| st_churn (prof:true) wall time, not scraped (%d runs) | %s s | |\n' "$reps" "$a"
printf '| the same, /debug/pprof/heap every second | %s s | ratio %s |\n' "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", b/a}')"

# ---- the lock-outs of issue 37: normal requests a second under each ----------------
"$root/tests/bench/serve_lockout.sh" "$build"
