#!/usr/bin/env bash
# containers/names: no dump lost to a name another container's dump took,
# no segment left by a container that is gone, no noise on the stderr of a
# program that only inherits the preload.
#
# Every container's first process is pid 1 in its own pid namespace, and a
# dump's default name carried that pid: two containers dumped from the host
# into one directory both wrote ./jeprof.1.0.m0.heap, and one profile was
# lost without a word.  Checked here, from the host, with real containers:
#   - a preloaded python3 container and a preloaded redis-server container
#     (both pid 1): `heapctl dump PID` of each, from one directory, prints two
#     different names, each carrying the host pid, both files are there and
#     each is that process's profile (report -p names python's and redis's
#     own functions);
#   - --fetch of both: two more files, two names;
#   - two containers of the same program, injected (not preloaded): their
#     dumps into one directory are two files;
#   - `podman exec` into a preloaded container runs ls with the preload
#     inherited: nothing on its stderr;
#   - containers run with --ipc=host share our /dev/shm: once they are
#     removed their segments are gone after `heapctl list` (the pid
#     namespace they were made in exists no more).
source "$(dirname "$0")/../lib/containers.sh"
ct_setup names "$@"
ct_image

PY='import time
keep = []
while True:
    keep.append(bytearray(100000)); keep = keep[-100:]; time.sleep(0.002)'

note "two preloaded containers, both pid 1, dumped into one directory"
mkdir -p "$WORK/out"
py=$(ct_start py -- python3 -c "$PY") || exit 1
rd=$(ct_start rd -- redis-server --port 0 --unixsocket /tmp/r.sock --save "") || exit 1
cd "$WORK/out" || die "no $WORK/out"
a=$("$BUILD/heapctl" dump "$py" 2>&1) || fail "dump of the python container: $a"
b=$("$BUILD/heapctl" dump "$rd" 2>&1) || fail "dump of the redis container: $b"
[ "$a" != "$b" ] || fail "both dumps printed one name: $a"
[[ $a == *".$py."*.heap ]] || fail "the python container's dump does not carry its host pid $py: $a"
[[ $b == *".$rd."*.heap ]] || fail "the redis container's dump does not carry its host pid $rd: $b"
n=$(find "$WORK/out" -name '*.heap' | wc -l)
[ "$n" -eq 2 ] || fail "two dumps into one directory left $n files: $(ls "$WORK/out" | tr '\n' ' ')"
"$BUILD/heapctl" report "$a" -p "$py" --top 100 >"$WORK/py.report" 2>&1 ||
    fail "report of $a: $(head -3 "$WORK/py.report")"
grep -q PyByteArray_Resize "$WORK/py.report" || fail "$a is not the python container's profile"
"$BUILD/heapctl" report "$b" -p "$rd" --top 100 >"$WORK/rd.report" 2>&1 ||
    fail "report of $b: $(head -3 "$WORK/rd.report")"
grep -q PyByteArray_Resize "$WORK/rd.report" && fail "$b names python's functions: it is not redis's profile"

note "--fetch of both"
mkdir -p "$WORK/fetch" && cd "$WORK/fetch" || die "no $WORK/fetch"
"$BUILD/heapctl" dump "$py" --fetch >/dev/null 2>&1 || fail "dump --fetch of the python container"
"$BUILD/heapctl" dump "$rd" --fetch >/dev/null 2>&1 || fail "dump --fetch of the redis container"
n=$(find "$WORK/fetch" -name '*.heap' | wc -l)
[ "$n" -eq 2 ] || fail "two --fetch dumps left $n files: $(ls "$WORK/fetch" | tr '\n' ' ')"

note "podman exec into a preloaded container: nothing on the stderr of what it runs"
pm exec "hc-rd-$$" ls / >"$WORK/exec.out" 2>"$WORK/exec.err" || fail "podman exec ls failed"
[ -s "$WORK/exec.out" ] || fail "podman exec ls printed nothing"
[ -s "$WORK/exec.err" ] && fail "podman exec ls printed on stderr: $(head -3 "$WORK/exec.err")"
pm exec "hc-rd-$$" sh -c 'echo "$LD_PRELOAD"' | grep -q libheapctl.so ||
    fail "podman exec did not inherit the preload: the check proves nothing"

note "two injected containers of one program"
mkdir -p "$WORK/inj" && cd "$WORK/inj" || die "no $WORK/inj"
ct_run i1 -- python3 -c "$PY"
i1=$(ct_pid)
ct_run i2 -- python3 -c "$PY"
i2=$(ct_pid)
for p in "$i1" "$i2"; do
	out=$("$BUILD/heapctl" inject "$p" --lg-sample 14 2>&1) || fail "inject $p: $out"
	out=$("$BUILD/heapctl" dump "$p" 2>&1) || fail "dump of injected $p: $out"
done
n=$(find "$WORK/inj" -name '*.heap' | wc -l)
[ "$n" -eq 2 ] || fail "dumps of two injected containers left $n files: $(ls "$WORK/inj" | tr '\n' ' ')"

note "containers sharing our /dev/shm (--ipc=host): their segments go with them"
s1=$(ct_start ipc1 --ipc=host -- python3 -c "$PY") || exit 1
name1=hc-ipc1-$$      # ct_start ran in a subshell: its CT_LAST is not ours
segs=$(grep -l . /dev/shm/heapctl.* 2>/dev/null | wc -l)
[ "$segs" -ge 1 ] || fail "a --ipc=host container made no segment in our /dev/shm"
before=$(ls /dev/shm | grep -c '^heapctl\.')
pm rm -f -t 2 "$name1" >/dev/null 2>&1 || fail "podman rm $name1"
kill -0 "$s1" 2>/dev/null && fail "the container's process $s1 is still running"
"$BUILD/heapctl" list >"$WORK/list.out" 2>"$WORK/list.err"
after=$(ls /dev/shm | grep -c '^heapctl\.')
[ "$after" -lt "$before" ] ||
    fail "heapctl list left the removed container's segment ($before before, $after after): $(cat "$WORK/list.err")"

note "done"
finish
