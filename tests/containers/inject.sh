#!/usr/bin/env bash
# containers/inject: heapctl inject into containers under podman's DEFAULT
# seccomp profile, from the host.
#
# podman (like Docker) starts every container under a seccomp filter; inject
# used to refuse them all.  Now it reads the filter and runs it for every
# call the agent makes (heapctl/diagnose/seccomp.c), and the default profile allows
# them.  Checked here, with python3 from the image (not the host's build):
#   - a container as root and one as --user 1000 --cap-drop=all, both under
#     the default profile (Seccomp: 2 in their status): inject exits 0, the
#     agent's segment answers, a dump taken from the host into our directory
#     is a heap_v2 profile, and report -p (the container's own binaries)
#     names the function that allocates bytearrays, PyByteArray_Resize, and
#     the interpreter's entry, Py_BytesMain; eject exits 0 and status then
#     says the agent is inert;
#   - a container under a profile made from the default one without
#     ftruncate (answered ENOSYS, the profile's default errno): inject
#     refuses, names ftruncate and --security-opt seccomp=, and the process
#     is untouched (alive, no segment); doctor PID says the same.
source "$(dirname "$0")/../lib/containers.sh"
ct_setup inject "$@"
ct_image

# allocates through bytearray (PyByteArray_Resize) on a steady beat and keeps
# the last 100: a live profile whatever the moment of the dump
PY='import time
keep = []
while True:
    keep.append(bytearray(100000)); keep = keep[-100:]; time.sleep(0.002)'

check_injected() {   # name pid
	local name=$1 pid=$2 out
	grep -q '^Seccomp:[[:space:]]*2' "/proc/$pid/status" ||
	    fail "$name: not under a seccomp filter: the test proves nothing"
	if ! out=$("$BUILD/heapctl" inject "$pid" --lg-sample 14 2>&1); then
		fail "$name: inject failed: $out"
		return
	fi
	[[ $out == *"injected into process $pid"* ]] || fail "$name: inject printed: $out"
	"$BUILD/heapctl" status "$pid" >"$WORK/$name.status" 2>&1 ||
	    fail "$name: status after inject: $(head -3 "$WORK/$name.status")"
	# the beat allocates ~50 MB/s: some samples come at once; poll for one
	local i
	for ((i = 0; i < 100; i++)); do
		"$BUILD/heapctl" status "$pid" 2>/dev/null | grep -qE '^samples +[1-9]' && break
		sleep 0.1
	done
	if ! out=$("$BUILD/heapctl" dump "$pid" -o "$WORK/$name.heap" 2>&1); then
		fail "$name: dump from the host: $out"
		return
	fi
	head -1 "$WORK/$name.heap" | grep -q '^heap_v2/' || fail "$name: $WORK/$name.heap is not a heap_v2 dump"
	"$BUILD/heapctl" report "$WORK/$name.heap" -p "$pid" >"$WORK/$name.report" 2>"$WORK/$name.report.err" ||
	    fail "$name: report -p $pid: $(head -3 "$WORK/$name.report.err")"
	local fn
	for fn in PyByteArray_Resize Py_BytesMain; do
		grep -q "$fn" "$WORK/$name.report" ||
		    fail "$name: report -p does not name $fn: $(head -12 "$WORK/$name.report" | tr '\n' '|')"
	done
	out=$("$BUILD/heapctl" eject "$pid" 2>&1) || fail "$name: eject: $out"
	"$BUILD/heapctl" doctor "$pid" >"$WORK/$name.doctor" 2>&1
	grep -q "was ejected at" "$WORK/$name.doctor" ||
	    fail "$name: doctor after eject: $(tr '\n' '|' <"$WORK/$name.doctor")"
	kill -0 "$pid" 2>/dev/null || fail "$name: the process died"
}

note "a container under the default profile, as root"
ct_run root -- python3 -c "$PY"
check_injected root "$(ct_pid)"

note "a container under the default profile, --user 1000 --cap-drop=all"
ct_run user --user 1000 --cap-drop=all -- python3 -c "$PY"
check_injected user "$(ct_pid)"

note "a container under the default profile without ftruncate"
python3 - /usr/share/containers/seccomp.json "$WORK/no-ftruncate.json" <<'EOF' ||
import json, sys
p = json.load(open(sys.argv[1]))
n = 0
for s in p["syscalls"]:
    if "ftruncate" in s["names"]:
        s["names"].remove("ftruncate")
        n += 1
assert n > 0, "the default profile does not name ftruncate"
json.dump(p, open(sys.argv[2], "w"))
EOF
    die "cannot derive a profile without ftruncate from /usr/share/containers/seccomp.json"
ct_run strict --security-opt seccomp="$WORK/no-ftruncate.json" -- python3 -c "$PY"
pid=$(ct_pid)
if out=$("$BUILD/heapctl" inject "$pid" 2>&1); then
	fail "strict: inject went on under a profile without ftruncate: $out"
else
	[[ $out == *"would fail ftruncate with ENOSYS"*"--security-opt seccomp="* ]] ||
	    fail "strict: inject's refusal does not name ftruncate and the option: $out"
fi
[ -e "/proc/$pid/root/dev/shm/heapctl.1" ] && fail "strict: a segment was published after the refusal"
kill -0 "$pid" 2>/dev/null || fail "strict: the process died"
"$BUILD/heapctl" doctor "$pid" >"$WORK/strict.doctor" 2>&1
grep -q "would fail ftruncate with ENOSYS, which the agent's start makes: heapctl inject $pid refuses" \
    "$WORK/strict.doctor" || fail "strict: doctor: $(tr '\n' '|' <"$WORK/strict.doctor")"

note "done"
finish
