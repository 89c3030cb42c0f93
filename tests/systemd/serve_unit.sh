#!/usr/bin/env bash
# tests/systemd/serve_unit.sh BUILD - heapctl-serve.service as `make install`
# puts it, under a real systemd booted in a container (tests/lib/systemd.sh),
# with its sandbox (issue 37, "Its unit").  What it proves, through the unit:
#   1. the daemon lists and profiles services of other users (nobody,
#      tester) with their symbols named, for binaries in /usr/local (which
#      ProtectSystem=strict makes read-only), in /home (ProtectHome=read-only)
#      and in /tmp (no PrivateTmp=);
#   2. a dump lands in the archive, its StateDirectory, owned by its user;
#      the final dumps of the /home and /tmp services, written as they exit,
#      are archived with a symbolized pprof (read from the host's paths);
#   3. it can write nothing else: in its mount namespace /, /usr, /home and
#      /tmp are read-only (EROFS even for root) and the archive is writable;
#   4. its bounding set is exactly the unit's capabilities (CAP_KILL and
#      CAP_DAC_READ_SEARCH are gone) within the container's;
#   5. MemoryMax=, MemoryHigh=, TasksMax=, TimeoutStopSec= are set (and the
#      kernel's memory limit is 1G where the container has the controller);
#   6. `systemctl stop` with a seconds=600 profile in flight ends by the
#      daemon's own exit (Result=success), not by TimeoutStopSec's SIGKILL;
#   7. systemd-analyze security rates it at most MAX_EXPOSURE.
# The HTTP requests are the host's curl in the container's network and PID
# namespaces (nsenter -n -p): their socket is root's, held by a process the
# daemon sees in its /proc with CAP_SYS_PTRACE, so they see every process
# (a client outside the daemon's PID namespace could not be checked for the
# capability, and would see only its own uid's processes).
source "$(dirname "$0")/../lib/systemd.sh"
sd_setup serve_unit "$@"

HC=/usr/local/bin/heapctl
LIBEXEC=/usr/local/libexec/heapctl-test
URL=http://127.0.0.1:9447
# systemd-analyze security's exposure of the unit (252 in bookworm): 3.2
# when this was written, 3.8 for the unit before (no ProtectSystem=,
# ProtectHome=, ProtectProc=, ProcSubset=, DevicePolicy=, and CAP_KILL and
# CAP_DAC_READ_SEARCH in its set)
MAX_EXPOSURE=3.2

gcc -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o "$WORK/service" \
    "$SD_REPO/tests/programs/systemd_service.c" 2>"$WORK/cc.log" || die "cannot compile service.c: $(head -3 "$WORK/cc.log")"
command -v curl >/dev/null || die "curl not found (Debian package curl; tests/deps.sh installs it)"

sd_rootfs
sd_boot
sd_install
CT=$(ct_root)

# hcurl ARGS...: curl inside the container's network, as root
hcurl() { nsenter -t "$SD_LEADER" -n -p curl -s --max-time 120 "$@"; }
mainpid() { ct systemctl show -p MainPID --value "$1"; }
journal() { ct journalctl -u heapctl-serve --no-pager 2>&1 | tail -"${1:-8}" | tr '\n' '|'; }

# ---- three services of other users, with libheapctl.so ---------------------------------

ct useradd -m tester || die "cannot add the user tester"
install -D -m 0755 "$WORK/service" "$CT$LIBEXEC/service" &&
    install -D -m 0755 "$WORK/service" "$CT/home/tester/bin/service" &&
    install -D -m 0755 "$WORK/service" "$CT/tmp/hcsvc/service" &&
    mkdir -p "$CT/home/tester/dumps" "$CT/tmp/hcdumps" || die "cannot copy the service in"
ct chown -R tester: /home/tester/bin /home/tester/dumps /tmp/hcsvc /tmp/hcdumps || die "chown in the container"
# svc UNIT USER BINARY PREFIX
svc() {
	cat >"$CT/etc/systemd/system/$1.service" <<EOF
[Service]
User=$2
ExecStart=$3 grow=4096 tick_ms=20
Environment=LD_PRELOAD=/usr/local/lib/libheapctl.so
Environment=HEAPCTL_CONF=prof:true,lg_prof_sample:12,prof_final:true,prof_prefix:$4
EOF
}
svc hc-usr nobody "$LIBEXEC/service" /tmp/hcdumps/usr
svc hc-home tester /home/tester/bin/service /home/tester/dumps/home
svc hc-tmp tester /tmp/hcsvc/service /tmp/hcdumps/tmp
ct chmod 1777 /tmp/hcdumps
ct systemctl daemon-reload
ct systemctl start hc-usr hc-home hc-tmp || die "the services do not start: $(ct systemctl --failed --no-legend | tr '\n' '|')"

# ---- the daemon --------------------------------------------------------------------------

note "heapctl-serve.service: start"
UNIT=$CT/usr/local/lib/systemd/system/heapctl-serve.service
[ -f "$UNIT" ] || die "make install put no heapctl-serve.service in /usr/local/lib/systemd/system"
ct systemctl start heapctl-serve || die "systemctl start heapctl-serve: $(journal)"
dpid=$(sd_host_pid "$(mainpid heapctl-serve)")
[ -n "$dpid" ] || die "no main process for heapctl-serve: $(journal)"

declare -A PID
for u in hc-usr hc-home hc-tmp; do PID[$u]=$(mainpid "$u"); done
for _ in $(seq 100); do
	hcurl "$URL/targets" >"$WORK/targets" 2>/dev/null
	n=0
	for u in "${!PID[@]}"; do grep -q "\"pid\": ${PID[$u]}," "$WORK/targets" && n=$((n + 1)); done
	[ "$n" = 3 ] && break
	sleep 0.2
done
for u in "${!PID[@]}"; do
	grep -q "\"pid\": ${PID[$u]}," "$WORK/targets" ||
	    fail "list: /targets has no $u (pid ${PID[$u]}): $(head -c 600 "$WORK/targets" | tr '\n' ' ')"
done

# ---- 1. profiles, with symbols, of binaries in /usr/local, /home and /tmp -------------------

note "profiles and symbols"
for u in hc-usr hc-home hc-tmp; do
	p=${PID[$u]}
	code=$(hcurl -o "$WORK/$u.pb.gz" -w '%{http_code}' "$URL/debug/pprof/heap?pid=$p")
	if [ "$code" != 200 ] || [ "$(head -c 2 "$WORK/$u.pb.gz" | od -An -tx1 | tr -d ' ')" != 1f8b ]; then
		fail "profile $u: /debug/pprof/heap?pid=$p: $code, not gzip: $(head -c 200 "$WORK/$u.pb.gz" | tr -c '[:print:]' .)"
		continue
	fi
	gzip -dc "$WORK/$u.pb.gz" >"$WORK/$u.pb" 2>/dev/null || fail "profile $u: the pprof does not decompress"
	[ "$(wc -c <"$WORK/$u.pb")" -gt 200 ] || fail "profile $u: the pprof holds $(wc -c <"$WORK/$u.pb") bytes"
	# the service's function names, in the pprof's string table and the top
	grep -qa 'svc_keep' "$WORK/$u.pb" || fail "profile $u: no svc_keep in the pprof: its binary was not read"
	got=""
	for _ in $(seq 10); do
		got=$(hcurl "$URL/debug/pprof/heap?pid=$p&debug=1")
		grep -q 'svc_keep' <<<"$got" && grep -q 'svc_worker' <<<"$got" && break
		sleep 1
	done
	grep -q 'svc_keep' <<<"$got" && grep -q 'svc_worker' <<<"$got" ||
	    fail "symbols $u: the top does not name svc_keep and svc_worker: $(head -c 600 <<<"$got" | tr '\n' '|')"
done

# ---- 2. the archive, in the StateDirectory -------------------------------------------------

note "archive"
AR=$CT/var/lib/heapctl/archive
ct runuser -u nobody -- "$HC" dump "${PID[hc-usr]}" >"$WORK/dump.out" 2>&1 ||
    fail "archive: heapctl dump as nobody: $(cat "$WORK/dump.out")"
for _ in $(seq 100); do ls "$AR"/hc-usr.service/*.manual.pb.gz >/dev/null 2>&1 && break; sleep 0.2; done
h=$(ls "$AR"/hc-usr.service/*.manual.heap 2>/dev/null | head -1)
if [ -z "$h" ]; then
	fail "archive: no manual dump of hc-usr in /var/lib/heapctl/archive: $(ls -R "$AR" 2>&1 | tr '\n' ' ') $(journal)"
else
	[ "$(stat -c %U "$h")" = nobody ] || fail "archive: $h is $(stat -c %U "$h")'s, not nobody's"
	head -c 8 "$h" | grep -q '^heap_v2/' || fail "archive: $h is no heap profile"
fi
# the final dumps of the /home and /tmp services, written as they exit:
# copied from the host's paths (no /proc/PID/root after the exit)
ct systemctl stop hc-home hc-tmp
for u in hc-home hc-tmp; do
	for _ in $(seq 150); do ls "$AR/$u.service/"*.final.pb.gz >/dev/null 2>&1 && break; sleep 0.2; done
	f=$(ls "$AR/$u.service/"*.final.heap 2>/dev/null | head -1)
	if [ -z "$f" ]; then
		fail "archive: no final dump of $u: $(ls "$CT"/home/tester/dumps "$CT"/tmp/hcdumps 2>&1 | tr '\n' ' ') $(journal)"
	elif ! gzip -dc "${f%.heap}.pb.gz" 2>/dev/null | grep -qa svc_keep; then
		fail "archive: the pprof of $u's final dump names no svc_keep: its binary was not read after the exit"
	fi
done

# ---- 3. nothing else is writable -------------------------------------------------------------

note "read-only"
# in the daemon's own mount namespace, as the host's root (every capability):
# what is read-only there is the mount's, not a missing right
for d in /usr /etc /home/tester /tmp /var/lib /var/lib/heapctl; do
	if nsenter -t "$dpid" -m -- touch "$d/.hc-probe" 2>"$WORK/ro.err"; then
		fail "read-only: the daemon's namespace lets root write $d"
		nsenter -t "$dpid" -m -- rm -f "$d/.hc-probe"
	elif ! grep -q 'Read-only file system' "$WORK/ro.err"; then
		fail "read-only: writing $d fails, but not with EROFS: $(cat "$WORK/ro.err")"
	fi
done
for d in /var/lib/heapctl/archive /run/heapctl-serve /dev/shm; do
	nsenter -t "$dpid" -m -- touch "$d/.hc-probe" 2>"$WORK/rw.err" ||
	    fail "writable: the daemon cannot write $d: $(cat "$WORK/rw.err")"
	nsenter -t "$dpid" -m -- rm -f "$d/.hc-probe"
done
awk '$5 == "/" { print $6 }' "/proc/$dpid/mountinfo" | grep -q '^ro' ||
    fail "read-only: / in the daemon's mountinfo is not ro: $(awk '$5 == "/"' "/proc/$dpid/mountinfo")"

# ---- 4. the capabilities -----------------------------------------------------------------------

note "capabilities"
# the bit of each capability the unit names
declare -A BIT=([CAP_CHOWN]=0 [CAP_DAC_OVERRIDE]=1 [CAP_DAC_READ_SEARCH]=2 [CAP_FOWNER]=3 [CAP_KILL]=5
	[CAP_SETGID]=6 [CAP_SETUID]=7 [CAP_SYS_PTRACE]=19 [CAP_CHECKPOINT_RESTORE]=40)
want=0
for c in $(sed -n '/^CapabilityBoundingSet=/,/[^\\]$/p' "$UNIT" | sed 's/CapabilityBoundingSet=//; s/\\//g'); do
	[ -n "${BIT[$c]:-}" ] || { fail "capabilities: the unit names $c, which this test does not know"; continue; }
	want=$((want | 1 << BIT[$c]))
done
ctbnd=$((16#$(awk '/^CapBnd:/ { print $2 }' "/proc/$SD_LEADER/status")))
bnd=$((16#$(awk '/^CapBnd:/ { print $2 }' "/proc/$dpid/status")))
[ "$bnd" = $((want & ctbnd)) ] ||
    fail "capabilities: CapBnd $(printf %x "$bnd"), expected the unit's $(printf %x "$want") within the container's $(printf %x "$ctbnd")"
for c in CAP_KILL CAP_DAC_READ_SEARCH; do
	[ $((bnd >> BIT[$c] & 1)) = 0 ] || fail "capabilities: $c is still in the daemon's bounding set"
done
grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$dpid/status" || fail "capabilities: NoNewPrivs is not set"

# ---- 5. resource bounds ------------------------------------------------------------------------

for kv in MemoryMax=1073741824 MemoryHigh=805306368 TasksMax=1100 TimeoutStopUSec=10s; do
	got=$(ct systemctl show -p "${kv%%=*}" --value heapctl-serve)
	[ "$got" = "${kv#*=}" ] || fail "bounds: ${kv%%=*} is '$got', not ${kv#*=}"
done
# the limit the kernel applies, where the container's systemd has a memory
# controller: memory.max (cgroup v2), else memory.limit_in_bytes (v1), of
# the unit's own cgroup.  On a hybrid host the v1 memory controller is not
# delegated to the container (this project's VM): nothing to read there.
cg2=$(awk -F: '$1 == "0" { print $3 }' "/proc/$dpid/cgroup")
cg1=$(awk -F: '$2 == "memory" { print $3 }' "/proc/$dpid/cgroup")
if [[ $cg1 == */heapctl-serve.service ]]; then
	f=/sys/fs/cgroup/memory$cg1/memory.limit_in_bytes
elif [[ $cg2 == */heapctl-serve.service ]] && [ -z "$cg1" ] && [ -e "/sys/fs/cgroup$cg2/memory.max" ]; then
	f=/sys/fs/cgroup$cg2/memory.max
else
	f=""
	note "bounds: no memory controller for the unit's cgroup here (memory ${cg1:-none}, unified $cg2): MemoryMax= is set, not applied"
fi
if [ -n "$f" ]; then
	[ "$(cat "$f")" = 1073741824 ] || fail "bounds: the kernel's limit $f is '$(cat "$f")', not 1G"
	peak=$(cat "${f%/*}/memory.peak" "${f%/*}/memory.max_usage_in_bytes" 2>/dev/null | head -1)
	[ -n "$peak" ] && note "the daemon's unit used at most $((peak / 1048576)) MiB for all that"
fi
note "the daemon's own peak RSS so far: $(awk '/^VmHWM:/ { print $2 }' "/proc/$dpid/status") KiB"

# ---- 7. systemd-analyze security -----------------------------------------------------------------

ct systemd-analyze security --no-pager heapctl-serve.service >"$WORK/security" 2>&1
exposure=$(grep -oE 'Overall exposure level for heapctl-serve.service: [0-9.]+' "$WORK/security" | grep -oE '[0-9.]+$')
if [ -z "$exposure" ]; then
	fail "security: systemd-analyze security printed no exposure: $(tail -3 "$WORK/security")"
else
	note "systemd-analyze security heapctl-serve.service: exposure $exposure"
	awk -v e="$exposure" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e <= m) }' ||
	    fail "security: exposure $exposure, over $MAX_EXPOSURE: $(grep -E '^✗' "$WORK/security" | head -20 | tr '\n' '|')"
fi

# ---- 6. systemctl stop with a long profile in flight -----------------------------------------------

note "stop with a seconds=600 profile in flight"
hcurl -o /dev/null "$URL/debug/pprof/heap?pid=${PID[hc-usr]}&seconds=600" &
sd_track $!
sleep 2
ct systemctl stop heapctl-serve || fail "stop: systemctl stop heapctl-serve failed"
res=$(ct systemctl show -p Result --value heapctl-serve)
[ "$res" = success ] || fail "stop: Result=$res, not success: $(journal)"
if ct journalctl -u heapctl-serve --no-pager 2>&1 | grep -qE 'timed out|Killing process|SIGSYS|core-dump'; then
	fail "stop: the journal: $(journal)"
fi
[ "$(ct systemctl is-active hc-usr)" = active ] || fail "stop: hc-usr is no longer active"

note "done"
sd_teardown
finish
