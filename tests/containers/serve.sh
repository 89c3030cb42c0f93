#!/usr/bin/env bash
# containers/serve: heapctl serve in a container that shares the host's pid
# namespace, as a Kubernetes DaemonSet runs a node's profiler, serving the
# host's processes and those of other containers.
#
# The daemon's container is the one documented in heapctl(1) and
# man/heapctl-serve.daemonset.yaml: --pid=host, every capability dropped but
# the four it needs (SYS_PTRACE: /proc/PID/root of processes of every user
# and container; SETUID, SETGID: it reads a process's binaries as that
# process's user; DAC_OVERRIDE: segments of other users, mode 0600), under
# podman's default seccomp profile, no-new-privileges, a read-only root.
# Checked from the host, over HTTP:
#   - /targets lists a preloaded host process (tests/programs/target) and a
#     preloaded python3 in another container run as --user 1000, by host
#     pid, the latter with its pid in its namespace (1);
#   - /debug/pprof/heap?pid=N&debug=1 of each is 200 and a symbolized text
#     profile naming the host program's function (main) and python's
#     PyByteArray_Resize, from the container's own python3;
#   - a second daemon with --archive in a volume and CHOWN besides keeps a
#     dump of the container's process, owned by its user (1000).
source "$(dirname "$0")/../lib/containers.sh"
ct_setup serve "$@"
[ -x "$BUILD/tests/programs/target" ] || die "$BUILD/tests/programs/target missing (make $BUILD/tests/programs/target)"
ct_image

note "a preloaded process on the host and one in a container (--user 1000)"
MALLOC_CONF=prof:true,lg_prof_sample:10 "$BUILD/tests/programs/target" >"$WORK/target.out" 2>&1 &
host=$!
ct_track "$host"
ct_wait_status "$host" || die "the host's target (pid $host) never answered heapctl status"
py=$(CT_MALLOC_CONF=prof:true,lg_prof_sample:14,prof_prefix:/tmp/jeprof ct_start py --user 1000 -- python3 -c 'import time
keep = []
while True:
    keep.append(bytearray(100000)); keep = keep[-100:]; time.sleep(0.002)') || exit 1

note "the daemon in a container with the host's pid namespace"
ct_run serve --pid=host --network=host --cap-drop=all --cap-add=SYS_PTRACE,SETUID,SETGID,DAC_OVERRIDE \
    --security-opt no-new-privileges --read-only -- "$BUILD/heapctl" serve --listen 127.0.0.1:0
# daemon_url: where the daemon of container CT_LAST listens, once it says
daemon_url() {
	local i u
	for ((i = 0; i < 100; i++)); do
		u=$(pm logs "$CT_LAST" 2>&1 | sed -n 's|.*listening on \(http://127\.0\.0\.1:[0-9]*\).*|\1|p' | head -1)
		[ -n "$u" ] && { echo "$u"; return 0; }
		kill -0 "$(ct_pid)" 2>/dev/null || break
		sleep 0.1
	done
	die "the daemon never said where it listens: $(pm logs "$CT_LAST" 2>&1 | tail -3 | tr '\n' '|')"
}
url=$(daemon_url) || exit 1
note "it listens on $url"

curl -sf "$url/targets" >"$WORK/targets.json" || die "GET /targets failed"
python3 - "$WORK/targets.json" "$host" "$py" <<'EOF' || fail "/targets: $(head -c 600 "$WORK/targets.json")"
import json, sys
t = {e["pid"]: e for e in json.load(open(sys.argv[1]))}
host, py = int(sys.argv[2]), int(sys.argv[3])
assert host in t, "the host's process %d is not listed" % host
assert py in t, "the container's process %d is not listed" % py
assert t[py]["nspid"] == 1 and t[py]["uid"] == 1000, t[py]
assert "python3" in t[py]["command"], t[py]
EOF

profile() {   # name pid function
	local code
	code=$(curl -s -o "$WORK/$1.txt" -w '%{http_code}' "$url/debug/pprof/heap?pid=$2&debug=1")
	if [ "$code" != 200 ]; then
		fail "$1: /debug/pprof/heap?pid=$2 answered $code: $(head -c 300 "$WORK/$1.txt")"
		return
	fi
	grep -q '^Total:' "$WORK/$1.txt" || fail "$1: not a text profile: $(head -c 300 "$WORK/$1.txt")"
	grep -qw "$3" "$WORK/$1.txt" || fail "$1: the profile does not name $3: $(head -8 "$WORK/$1.txt" | tr '\n' '|')"
}
profile host "$host" main
profile container "$py" PyByteArray_Resize

# --archive DIR (a volume) also needs CHOWN: an archived dump is its user's
note "a second daemon with --archive and CHOWN"
mkdir -p "$WORK/archive"
ct_run archive --pid=host --network=host --cap-drop=all \
    --cap-add=SYS_PTRACE,SETUID,SETGID,DAC_OVERRIDE,CHOWN -v "$WORK/archive:/archive" \
    --security-opt no-new-privileges --read-only -- "$BUILD/heapctl" serve --listen 127.0.0.1:0 --archive /archive
# the archive takes what a process dumps once a scan has found it
aurl=$(daemon_url) || exit 1
for ((i = 0; i < 100; i++)); do
	curl -sf "$aurl/targets" | grep -q "\"pid\": $py," && break
	sleep 0.1
done
out=$("$BUILD/heapctl" dump "$py" 2>&1) || fail "dump of the container's process: $out"
got=""
for ((i = 0; i < 100; i++)); do
	got=$(find "$WORK/archive" -path '*python3/*.u1000.*.heap' -user 1000 2>/dev/null | head -1)
	[ -n "$got" ] && break
	sleep 0.1
done
[ -n "$got" ] || fail "archive: no dump of the container's process, its user's, in $WORK/archive: $(pm logs "$CT_LAST" 2>&1 | grep -m 3 "$py" | tr '\n' '|')"

note "done"
finish
