#!/usr/bin/env bats
# heapctl from the host against a target in a container: PID 1 of its own
# PID namespace, with its own mount and IPC namespaces, /dev/shm and /tmp.
# The caller's files are the caller's: dumps land where heapctl is told (or
# in its directory), copied out of the target's /dev/shm when the target
# cannot see them, and paths printed are paths the caller can open.
# Also: PID-1 targets that share the host's /dev/shm, and a target of
# another user.

load ../lib/helpers

# python3 through a pyenv shim costs ~2 s a call; setup_file finds the
# interpreter once and every call here (and in helpers) goes to it directly
python3() { "${NS_PY:-$(type -P python3)}" "$@"; }

setup_file() {
	NS_PY=$(command python3 -c 'import sys; print(sys.executable)')
	export NS_PY
}

# helpers' teardown, then the segments that PID-1 targets sharing our
# /dev/shm left (their names do not carry the PID we know them by)
teardown() {
	helpers_teardown
	local s
	for s in "${_segs[@]}"; do
		# only the very file the target had mapped
		[ "$(stat -c %i "${s% *}" 2>/dev/null)" = "${s##* }" ] && rm -f "${s% *}"
	done
	return 0
}
_segs=()

# start_container [-s] [-c CONF] [ARG...]: the test service as in a
# container, PID 1 of its own PID namespace; CPID is its PID here.
#   default: its own mount and IPC namespaces, a private /dev/shm and /tmp,
#            and its own copy of the program and the library in /tmp/bin,
#            which only it (and heapctl, through /proc/CPID/root) can see;
#            its working directory is its /tmp
#   -s:      only a PID namespace (and the mount namespace of its /proc):
#            the host's /dev/shm, IPC and files
start_container() {
	local conf=$DEFAULT_CONF shared=0
	while :; do
		case $1 in
		-s) shared=1; shift ;;
		-c) conf=$2; shift 2 ;;
		*) break ;;
		esac
	done
	_ntarget=$((_ntarget + 1))
	local out=$T/container.$_ntarget.out
	if [ "$shared" = 1 ]; then
		unshare --pid --fork --kill-child --mount-proc \
		    env -u MALLOC_CONF -u LD_PRELOAD "HEAPCTL_CONF=$conf" "$TARGET" "$@" seconds=600 >"$out" 2>&1 &
	else
		# the files are copied through the new /dev/shm, since the build
		# may itself be under /tmp
		unshare --pid --fork --kill-child --mount --ipc --mount-proc sh -c '
mount -t tmpfs tmpfs /dev/shm && cp "$1" "$2" /dev/shm/ &&
mount -t tmpfs tmpfs /tmp && mkdir /tmp/bin && mv /dev/shm/target /dev/shm/libheapctl.so /tmp/bin/ &&
cd /tmp && conf=$3 && shift 3 &&
exec env -u MALLOC_CONF -u LD_PRELOAD LD_LIBRARY_PATH=/tmp/bin "HEAPCTL_CONF=$conf" /tmp/bin/target "$@"' \
		    sh "$TARGET" "$HEAPCTL_BUILD/libheapctl.so" "$conf" "$@" seconds=600 >"$out" 2>&1 &
	fi
	local u=$!
	track "$u"
	wait_for 5 grep -q '^ready 1$' "$out" || { echo "container did not start: $(cat "$out")" >&2; return 1; }
	CPID=$(cat "/proc/$u/task/$u/children")
	CPID=${CPID% }
	track "$CPID"
	[ "$(awk '/^NSpid:/{print $NF}' "/proc/$CPID/status")" = 1 ] || { echo "$CPID is not PID 1 there" >&2; return 1; }
	wait_for 5 control_running "$CPID" || { echo "no control thread in $CPID: $(cat "$out")" >&2; return 1; }
	if [ "$shared" = 1 ]; then
		local s
		s=$(grep -o '/dev/shm/heapctl\.1[^ ]*$' "/proc/$CPID/maps" | head -n1)
		[ -n "$s" ] && _segs+=("$s $(stat -c %i "$s")")
	fi
	return 0
}

# own_dump FILE PID: FILE is a heap profile of process PID (its mappings,
# which differ between processes, are those of PID)
own_dump() {
	[[ "$(head -n1 "$1")" == heap_v2/* ]] || { echo "$1 is not a profile" >&2; return 1; }
	local first
	first=$(awk 'NR == 1 { print $1 " " $2 " " $3; exit }' "/proc/$2/maps")
	grep -q "^$first " "$1" || { echo "$1 does not have $2's mapping $first" >&2; return 1; }
}

# ---- list and status ---------------------------------------------------------------------

@test "list: a container's target has NSPID 1, a target of our namespace '-'; --json has nspid" {
	need_pidns
	start_container
	start_target
	run --separate-stderr "$HEAPCTL" list
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" =~ ^PID\ +NSPID\ +PROF ]]
	[[ "$output" =~ (^|$'\n')$CPID\ +1\ +on\ +2\^19\ .*\ /tmp/bin/target\ seconds=600($'\n'|$) ]]
	[[ "$output" =~ (^|$'\n')$TPID\ +-\ +on\ +2\^19\ .*\ $TARGET\ seconds=600($'\n'|$) ]]

	run --separate-stderr "$HEAPCTL" list --json
	[ "$status" -eq 0 ]
	python3 -c '
import json, sys
rows = {r["pid"]: r for r in json.loads(sys.argv[1])}
c, t = rows[int(sys.argv[2])], rows[int(sys.argv[3])]
assert c["nspid"] == 1 and c["command"] == "/tmp/bin/target seconds=600", c
assert t["nspid"] == t["pid"], t' "$output" "$CPID" "$TPID"
}

@test "status: '(PID 1 in its namespace)'; --json has nspid 1 and the segment through /proc/PID/root" {
	need_pidns
	start_container
	run --separate-stderr "$HEAPCTL" status "$CPID"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "process        $CPID (PID 1 in its namespace)" ]
	[ "${lines[1]}" = "command        /tmp/bin/target seconds=600" ]
	[ "$(status_field "$CPID" nspid)" = 1 ]
	[ "$(status_field "$CPID" pid)" = "$CPID" ]
	[ "$(status_field "$CPID" segment)" = "/proc/$CPID/root/dev/shm/heapctl.1" ]
}

# ---- dump -------------------------------------------------------------------------------

@test "dump: the default relative prof.prefix lands in the caller's directory, copied out of the target's /dev/shm" {
	need_pidns
	start_container
	mkdir "$T/here"
	cd "$T/here"
	run --separate-stderr "$HEAPCTL" dump "$CPID"
	[ "$status" -eq 0 ]
	# named with the pid we know it by, not its own (1, as every container's)
	[ "$output" = "$T/here/jeprof.$CPID.0.m0.heap" ]
	own_dump "$T/here/jeprof.$CPID.0.m0.heap" "$CPID"
	# the target cannot see this directory, and wrote nothing in its own
	[ ! -e "/proc/$CPID/root$T" ]
	[ "$(ls "/proc/$CPID/root/tmp")" = bin ]
	# and the staged copy is gone from its /dev/shm
	[ "$(ls "/proc/$CPID/root/dev/shm")" = heapctl.1 ]

	run --separate-stderr "$HEAPCTL" dump "$CPID" --json
	[ "$status" -eq 0 ]
	python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
assert d["pid"] == int(sys.argv[2]) and d["nspid"] == 1, d
assert d["path"] == "%s/here/jeprof.%s.1.m1.heap" % (sys.argv[3], sys.argv[2]), d
assert d["fetched"] is True and d["bytes"] == os.path.getsize(d["path"]), d' "$output" "$CPID" "$T"
	[ "$(ls "/proc/$CPID/root/dev/shm")" = heapctl.1 ]
}

@test "dump -o FILE, --prefix (relative and absolute) and -o -: the caller's files and stdout" {
	need_pidns
	start_container
	mkdir "$T/sub"
	run --separate-stderr "$HEAPCTL" dump "$CPID" -o rel.heap
	[ "$status" -eq 0 ]
	[ "$output" = "$T/rel.heap" ]
	own_dump "$T/rel.heap" "$CPID"

	run --separate-stderr "$HEAPCTL" dump "$CPID" -o "$T/sub/abs.heap"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/sub/abs.heap" ]
	own_dump "$T/sub/abs.heap" "$CPID"

	# -o does not count in the numbers of prefix dumps
	run --separate-stderr "$HEAPCTL" dump "$CPID" --prefix p
	[ "$status" -eq 0 ]
	[ "$output" = "$T/p.$CPID.0.m0.heap" ]
	own_dump "$T/p.$CPID.0.m0.heap" "$CPID"

	run --separate-stderr "$HEAPCTL" dump "$CPID" --prefix "$T/sub/q"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/sub/q.$CPID.1.m1.heap" ]
	own_dump "$T/sub/q.$CPID.1.m1.heap" "$CPID"

	"$HEAPCTL" dump "$CPID" -o - >"$T/stdout.heap" 2>"$T/stdout.err"
	[ ! -s "$T/stdout.err" ]
	own_dump "$T/stdout.heap" "$CPID"
	grep -q '^MAPPED_LIBRARIES:$' "$T/stdout.heap"

	# nothing left in the target's /dev/shm, nothing written in its /tmp
	[ "$(ls "/proc/$CPID/root/dev/shm")" = heapctl.1 ]
	[ "$(ls "/proc/$CPID/root/tmp")" = bin ]
	[ "$(ls "$T" | grep -c heap)" -eq 3 ]
}

@test "dump -o - that heapctl stops waiting for (--timeout) while the target writes it: the target removes the staged file" {
	need_pidns
	# its own /dev/shm: what is staged there is this test's alone
	start_container -c prof:true,lg_prof_sample:0 stacks=20000
	local t i codes=""
	for t in 0.005 0.01 0.02 0.04 0.08; do
		for i in 1 2; do
			"$HEAPCTL" dump "$CPID" -o - --timeout "$t" >/dev/null 2>"$T/to.err" && codes+="0 " || codes+="$? "
		done
	done
	echo "exit codes: $codes"
	[[ " $codes" == *" 7 "* ]]
	# a staged file whose answer nobody collected goes with the slot's
	# lease (2 s) at the control thread's next turn
	wait_for 8 eval '[ "$(ls "/proc/$CPID/root/dev/shm")" = heapctl.1 ]' || { ls -la "/proc/$CPID/root/dev/shm"; false; }
	"$HEAPCTL" dump "$CPID" -o - >"$T/after.heap"
	own_dump "$T/after.heap" "$CPID"
}

@test "dump with an absolute prof.prefix inside: a /proc/PID/root path; --json path and target_path; --fetch copies it here" {
	need_pidns
	start_container
	run --separate-stderr "$HEAPCTL" set "$CPID" prof.prefix=/tmp/inside
	[ "$status" -eq 0 ]
	[ "$output" = "$CPID: prof.prefix=/tmp/inside" ]

	run --separate-stderr "$HEAPCTL" dump "$CPID"
	[ "$status" -eq 0 ]
	[ "$output" = "/proc/$CPID/root/tmp/inside.$CPID.0.m0.heap" ]
	own_dump "$output" "$CPID"

	run --separate-stderr "$HEAPCTL" dump "$CPID" --json
	[ "$status" -eq 0 ]
	python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
assert d["path"] == "/proc/%s/root/tmp/inside.%s.1.m1.heap" % (sys.argv[2], sys.argv[2]), d
assert d["target_path"] == "/tmp/inside.%s.1.m1.heap" % sys.argv[2], d
assert d["fetched"] is False and d["bytes"] == os.path.getsize(d["path"]), d' "$output" "$CPID"

	run --separate-stderr "$HEAPCTL" dump "$CPID" --fetch --json
	[ "$status" -eq 0 ]
	python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["path"] == "%s/inside.%s.2.m2.heap" % (sys.argv[3], sys.argv[2]), d
assert d["target_path"] == "/tmp/inside.%s.2.m2.heap" % sys.argv[2], d
assert d["fetched"] is True, d' "$output" "$CPID" "$T"
	cmp "$T/inside.$CPID.2.m2.heap" "/proc/$CPID/root/tmp/inside.$CPID.2.m2.heap"
	[ "$(ls "/proc/$CPID/root/dev/shm")" = heapctl.1 ]
}

# runs alone (tests/run.sh): asserts that the target received no command: a daemon of another suite asks every preloaded process
# bats test_tags=machine
@test "set prof.prefix=RELATIVE for a target that sees another file system: exit 2, nothing changed" {
	need_pidns
	start_container
	run --separate-stderr "$HEAPCTL" set "$CPID" prof.prefix=relative
	[ "$status" -eq 2 ]
	[ "$stderr" = "heapctl: set: prof.prefix 'relative' is relative, and process $CPID sees another file system (a container or a sandboxed service): give an absolute path as that process sees it" ]
	[ -z "$output" ]
	[ "$(status_field "$CPID" prof.prefix)" = jeprof ]
	[ "$(status_field "$CPID" commands)" = 0 ]
}

@test "watch --json: a container's dump events have a /proc/PID/root path and the target_path inside" {
	need_pidns
	start_container
	"$HEAPCTL" set "$CPID" prof.prefix=/tmp/inside >/dev/null
	"$HEAPCTL" watch "$CPID" --json --count 1 >"$T/w" 2>"$T/w.err" &
	w=$!
	track "$w"
	# it has mapped the segment (the kernel names it as the target sees it)
	wait_for 5 grep -q ' /dev/shm/heapctl\.1$' "/proc/$w/maps"
	for i in $(seq 50); do
		"$HEAPCTL" dump "$CPID" >/dev/null
		kill -0 "$w" 2>/dev/null || break
		sleep 0.1
	done
	wait "$w"
	[ "$(wc -l <"$T/w")" -eq 1 ]
	python3 -c '
import json, os, re, sys
e = json.loads(open(sys.argv[1]).read())
assert e["type"] == "dump" and e["kind"] == "manual" and e["pid"] == int(sys.argv[2]), e
assert re.fullmatch(r"/tmp/inside\.%s\.\d+\.m\d+\.heap" % sys.argv[2], e["target_path"]), e
assert e["path"] == "/proc/%s/root" % sys.argv[2] + e["target_path"], e
assert os.path.getsize(e["path"]) == e["bytes"], e' "$T/w" "$CPID"
}

@test "report -p PID: a container's dump is symbolized from the files the container sees" {
	need_pidns
	# every allocation sampled: the 20 objects of 64 B from deep() are in
	# the dump for sure (at lg_prof_sample:10 each had a 6% chance)
	start_container -c "prof:true,lg_prof_sample:0,control_refresh_ms:100" stacks=20
	"$HEAPCTL" dump "$CPID" -o "$T/c.heap" >/dev/null
	run --separate-stderr "$HEAPCTL" report "$T/c.heap" -p "$CPID"
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" =~ ^Total:\ [0-9.]+\ MB$ ]]
	grep -qE '%[[:space:]]+main$' <<<"$output"
	grep -qE '%[[:space:]]+deep$' <<<"$output"
	# the program is in the container's /tmp only: without -p it has no names
	if [ ! -e /tmp/bin/target ]; then
		run --separate-stderr "$HEAPCTL" report "$T/c.heap"
		[ "$status" -eq 0 ]
		! grep -qE '%[[:space:]]+main$' <<<"$output"
		[[ "$output" == *"target+0x"* ]]
	fi
}

# ---- more than one PID 1 ------------------------------------------------------------------

@test "PID-1 targets sharing our /dev/shm and a container's PID 1: all listed, each dumpable as itself" {
	need_pidns
	start_container
	c=$CPID
	start_container -s
	s1=$CPID
	start_container -s
	s2=$CPID
	run --separate-stderr "$HEAPCTL" list
	[ "$status" -eq 0 ]
	for p in "$c" "$s1" "$s2"; do
		[[ "$output" =~ (^|$'\n')$p\ +1\ +on\  ]] || { echo "$p is not listed"; return 1; }
	done
	for p in "$c" "$s1" "$s2"; do
		run --separate-stderr "$HEAPCTL" dump "$p" -o "$T/$p.heap"
		[ "$status" -eq 0 ]
		[ "$output" = "$T/$p.heap" ]
		own_dump "$T/$p.heap" "$p"
		[ "$(status_field "$p" dumps)" = 1 ]
	done
}

# ---- another user --------------------------------------------------------------------------

# runs alone (tests/run.sh): asserts that no heapctl-fetch file of nobody's appeared in /dev/shm (serve's and hostile's suites run commands as nobody)
# bats test_tags=machine
@test "a target of another user in our mount namespace: dump -o FILE and dump make root's files in root's directory" {
	need_root
	mkdir "$T/nobody" "$T/cdir"
	chown nobody "$T/nobody"
	start_target -u nobody -d "$T/nobody"
	touch "$T/before"
	cd "$T/cdir"
	run --separate-stderr "$HEAPCTL" dump "$TPID" -o f.heap --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jfield path)" = "$T/cdir/f.heap" ]
	[ "$(echo "$output" | jfield fetched)" = true ]
	[ "$(stat -c %U "$T/cdir/f.heap")" = root ]
	own_dump "$T/cdir/f.heap" "$TPID"

	run --separate-stderr "$HEAPCTL" dump "$TPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/cdir/jeprof.$TPID.0.m0.heap" ]
	[ "$(stat -c %U "$output")" = root ]
	own_dump "$output" "$TPID"
	[ -z "$(ls "$T/nobody")" ]
	# the copies it wrote into /dev/shm for heapctl to fetch are gone
	[ -z "$(staged_by_nobody "$T/before")" ]
}

# ---- dump names (issue 38) -------------------------------------------------------------------

@test "two containers' PID 1 dumped into one directory: two files, each named with the pid we know it by; jeprof reads both" {
	need_pidns
	# sampled finely enough that their few allocations are in the profile
	start_container -c "$DEFAULT_CONF,lg_prof_sample:10"
	c1=$CPID
	start_container -c "$DEFAULT_CONF,lg_prof_sample:10"
	c2=$CPID
	mkdir "$T/here"
	cd "$T/here"
	for p in "$c1" "$c2"; do
		run --separate-stderr "$HEAPCTL" dump "$p"
		[ "$status" -eq 0 ]
		[ "$output" = "$T/here/jeprof.$p.0.m0.heap" ]
	done
	# both kept, each the profile of its own process (a build of before
	# printed jeprof.1.0.m0.heap twice and left one file)
	[ "$(ls "$T/here" | wc -l)" = 2 ]
	own_dump "$T/here/jeprof.$c1.0.m0.heap" "$c1"
	own_dump "$T/here/jeprof.$c2.0.m0.heap" "$c2"
	for p in "$c1" "$c2"; do
		run jeprof --text "$TARGET" "$T/here/jeprof.$p.0.m0.heap"
		[ "$status" -eq 0 ]
		[[ "$output" == *"Total:"* ]]
		# the program is at /tmp/bin only inside; libc is the host's too
		[[ "$output" == *"__libc_start_main"* ]]
	done
}

@test "dump --fetch of three containers' PID 1 with the same prof.prefix inside: three files here" {
	need_pidns
	local cs=()
	for i in 1 2 3; do
		start_container
		cs+=("$CPID")
		"$HEAPCTL" set "$CPID" prof.prefix=/tmp/inside >/dev/null
	done
	mkdir "$T/here"
	cd "$T/here"
	for p in "${cs[@]}"; do
		run --separate-stderr "$HEAPCTL" dump "$p" --fetch
		[ "$status" -eq 0 ]
		[ "$output" = "$T/here/inside.$p.0.m0.heap" ]
		# inside, the container's own file carries the same name
		cmp "$output" "/proc/$p/root/tmp/inside.$p.0.m0.heap"
		own_dump "$output" "$p"
	done
	[ "$(ls "$T/here" | wc -l)" = 3 ]
}

@test "a dump name heapctl or the target makes never replaces a file: the next number; -o replaces as asked; our namespace keeps jemalloc's names" {
	need_pidns
	start_target
	cd "$T"
	# our namespace: jemalloc's name, the pid the process knows itself by
	echo mine >"$T/jeprof.$TPID.0.m0.heap"
	run --separate-stderr "$HEAPCTL" dump "$TPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/jeprof.$TPID.1.m1.heap" ]
	[ "$(cat "$T/jeprof.$TPID.0.m0.heap")" = mine ]
	own_dump "$output" "$TPID"
	# a container's dump copied here: the copy skips a taken name
	start_container
	mkdir "$T/c"
	cd "$T/c"
	echo theirs >"$T/c/jeprof.$CPID.0.m0.heap"
	run --separate-stderr "$HEAPCTL" dump "$CPID"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/c/jeprof.$CPID.1.m0.heap" ]
	[ "$(cat "$T/c/jeprof.$CPID.0.m0.heap")" = theirs ]
	own_dump "$output" "$CPID"
	# a name the caller gives is hers to replace
	run --separate-stderr "$HEAPCTL" dump "$CPID" -o "$T/c/jeprof.$CPID.0.m0.heap"
	[ "$status" -eq 0 ]
	own_dump "$T/c/jeprof.$CPID.0.m0.heap" "$CPID"
}

# ---- leftovers and quiet stderr (issue 38) --------------------------------------------------------

@test "list removes the segment of a process of a PID namespace that is gone, and keeps it while the namespace lives" {
	need_pidns
	local try s
	# up to three containers: under make check, another suite's list or
	# daemon may remove the stale segment between the kill and our list
	for try in 1 2 3; do
		start_container -s
		s=${_segs[-1]% *}
		[ -e "$s" ]
		run --separate-stderr "$HEAPCTL" list
		[ "$status" -eq 0 ]
		[[ "$output" =~ (^|$'\n')$CPID\ +1\  ]]
		[ -e "$s" ]
		# killed: the library had no chance to remove it, and its pid (1)
		# is nobody's here to judge by
		kill -9 "$CPID"
		wait_for 5 test ! -d "/proc/$CPID"
		[ -e "$s" ] || continue
		run --separate-stderr "$HEAPCTL" list
		[ "$status" -eq 0 ]
		[ ! -e "$s" ]
		echo "try $try: $stderr"
		[[ "$stderr" == *"removed"*"stale segment"* ]] && return 0
	done
	false
}

@test "a preloaded program without libunwind prints nothing on stderr, and its profile works; verbose:true says the fallback; status shows it" {
	need_pidns
	local lib
	lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libunwind.so.8)
	[ -f "$lib" ] || skip "no libunwind.so.8 here"
	# libunwind.so.8 hidden by /dev/null, as in an image without it
	unshare --mount sh -c '
mount --bind /dev/null "$1" || exit 9
shift
LD_PRELOAD="$1" HEAPCTL_CONF="prof:true,prof_final:true,lg_prof_sample:10,prof_prefix:$2/quiet" "$3" seconds=1 \
    >/dev/null 2>"$2/quiet.err" || exit 1
LD_PRELOAD="$1" HEAPCTL_CONF=prof:true,verbose:true "$3" seconds=1 >/dev/null 2>"$2/verbose.err" || exit 1
LD_PRELOAD="$1" ls / >/dev/null 2>"$2/ls.err"' sh "$lib" "$HEAPCTL_BUILD/libheapctl.so" "$T" "$TARGET"
	[ ! -s "$T/quiet.err" ]
	[ ! -s "$T/ls.err" ]
	grep -q 'libunwind.so.8 not available.*using libgcc' "$T/verbose.err"
	run "$HEAPCTL" report "$T"/quiet.*.f.heap --top 0
	[ "$status" -eq 0 ]
	[[ "$output" == *" main"* ]]
	# heapctl status of such a process says the unwinder it took
	unshare --mount sh -c 'mount --bind /dev/null "$1" && shift &&
exec env LD_PRELOAD="$1" HEAPCTL_CONF=prof:true,control_refresh_ms:100 "$2" seconds=600' \
	    sh "$lib" "$HEAPCTL_BUILD/libheapctl.so" "$TARGET" >"$T/st.out" 2>"$T/st.err" &
	track $!
	wait_for 5 grep -q '^ready ' "$T/st.out"
	local p
	p=$(awk '/^ready /{print $2; exit}' "$T/st.out")
	track "$p"
	wait_for 5 control_running "$p"
	wait_for 5 eval '[ "$(status_field "$p" prof.unwind)" = libgcc ]'
	[ ! -s "$T/st.err" ]
}

@test "the daemon keeps the segment of a live container sharing /dev/shm, and removes it at its start once the namespace is gone" {
	need_pidns
	local try s d url
	# up to three containers: under make check, another suite's list or
	# daemon may remove the stale segment between the kill and our start
	for try in 1 2 3; do
		start_container -s
		s=${_segs[-1]% *}
		"$HEAPCTL" serve --listen 127.0.0.1:0 >"$T/serve.out" 2>"$T/serve.err" &
		d=$!
		track "$d"
		wait_for 5 grep -q "listening on http://" "$T/serve.out"
		url=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
		# found it: the sweep of its first round came before
		wait_for 5 eval 'curl -s --max-time 5 "$url/metrics" | grep -q "^heapctl_allocated_bytes{pid=\"$CPID\""'
		[ -e "$s" ]
		kill "$d"
		wait "$d" || true
		kill -9 "$CPID"
		wait_for 5 test ! -d "/proc/$CPID"
		[ -e "$s" ] || continue
		"$HEAPCTL" serve --listen 127.0.0.1:0 >"$T/serve2.out" 2>"$T/serve2.err" &
		d=$!
		track "$d"
		wait_for 10 test ! -e "$s"
		kill "$d"
		wait "$d" || true
		echo "try $try: $(cat "$T/serve2.err")"
		return 0
	done
	false
}
