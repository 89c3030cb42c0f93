#!/usr/bin/env bats
# tests/cli/installed.bats - every command from a tree that `make install
# DESTDIR=... PREFIX=/usr/local` wrote, as a package would lay it out: each
# runs in a mount namespace of its own where the build directory is an empty
# tmpfs, so a library, a program or a path taken from build/ fails there
# instead of passing unseen.  The targets run under the installed
# libheapctl.so (started with the installed `heapctl run`).  Last, `make
# uninstall` leaves no file behind.  Needs root (mount namespaces, ptrace,
# BPF).

load ../lib/helpers

setup_file() {
	export TB="$BATS_FILE_TMPDIR"
	export DEST="$TB/root"
	export P="$DEST/usr/local"
	REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	export REPO
	[ "$(id -u)" -eq 0 ] || return 0
	# -o all: this build as it is; never a rebuild into it from sources
	# changed meanwhile (other suites run from it)
	make -s -C "$REPO" -o all install DESTDIR="$DEST" PREFIX=/usr/local BUILD="$HEAPCTL_BUILD" \
	    >"$TB/install.log" 2>&1 || { cat "$TB/install.log" >&2; return 1; }
	# the programs, built here without the library (the CLI suites' target
	# is linked to build/libheapctl.so)
	gcc -O2 -g -o "$TB/target" "$BATS_TEST_DIRNAME/../programs/target.c"
	gcc -O2 -g -pthread -o "$TB/prog" "$BATS_TEST_DIRNAME/../programs/prog.c"
}

setup() {
	need_root
	T=$(mktemp -d /tmp/heapctl-cli.XXXXXX)
	chmod 755 "$T"
	cd "$T" || return 1
	unset MALLOC_CONF HEAPCTL_CONF LD_PRELOAD
	_pids=()
	HEAPCTL="$P/bin/heapctl"
	[ -x "$HEAPCTL" ] || { echo "make install wrote no $HEAPCTL" >&2; return 1; }
	# "${HIDE[@]}" CMD...: CMD where the build directory is empty; exec'd
	# all the way, so that CMD & gives CMD's PID in $!
	HIDE=(unshare --mount --propagation private --
	    sh -c 'mount -t tmpfs -o mode=0755 hidden-build "$0" && exec "$@"' "$HEAPCTL_BUILD")
}

hidden() { "${HIDE[@]}" "$@"; }

# no_build PID: nothing of build/ is mapped in PID, and the installed
# LIB (a file name) is
no_build() {
	if grep -F "$HEAPCTL_BUILD/" "/proc/$1/maps" >&2; then
		echo "process $1 maps the files above from the build directory" >&2
		return 1
	fi
	grep -qF " $P/lib/$2" "/proc/$1/maps"
}

# started [CONF]: the target under the installed library, through the
# installed `heapctl run`; TPID once its control thread answers
started() {
	"${HIDE[@]}" "$HEAPCTL" run --conf "control_refresh_ms:100${1:+,$1}" -- "$TB/target" seconds=600 \
	    >"$T/target.out" 2>"$T/target.err" &
	TPID=$!
	track "$TPID"
	wait_for 5 grep -q "^ready $TPID\$" "$T/target.out" || { cat "$T/target.err" >&2; return 1; }
	wait_for 5 control_running "$TPID"
	no_build "$TPID" libheapctl.so
}

# prog_started: tests/programs/prog.c without the library; PID once "ready"
prog_started() {
	rm -f "$T/go" "$T/end"
	env -u LD_PRELOAD "$TB/prog" "$T/go" "$@" >"$T/prog.out" 2>&1 &
	PID=$!
	track "$PID"
	wait_for 5 grep -q '^ready' "$T/prog.out"
}

@test "installed: make install wrote the command, every library it loads, the pages, the header, the drop-in and the unit" {
	( cd "$DEST" && find . ! -type d | sort ) >"$T/files"
	diff -u - "$T/files" <<-EOF
	./usr/local/bin/heapctl
	./usr/local/include/heapctl.h
	./usr/local/lib/libheapctl-agent.so
	./usr/local/lib/libheapctl-report.so
	./usr/local/lib/libheapctl-secure.so
	./usr/local/lib/libheapctl-serve.so
	./usr/local/lib/libheapctl-trace.so
	./usr/local/lib/libheapctl.so
	./usr/local/lib/systemd/system/heapctl-serve.service
	./usr/local/share/doc/heapctl/examples/50-heapctl.conf
	./usr/local/share/man/man1/heapctl-inject.1
	./usr/local/share/man/man1/heapctl-report.1
	./usr/local/share/man/man1/heapctl-serve.1
	./usr/local/share/man/man1/heapctl-systemd.1
	./usr/local/share/man/man1/heapctl-trace.1
	./usr/local/share/man/man1/heapctl.1
	./usr/local/share/man/man3/libheapctl.3
	./usr/local/share/man/man5/heapctl-shm.5
	./usr/local/share/man/man7/heapctl-internals.7
	EOF
	for f in heapctl libheapctl.so libheapctl-report.so libheapctl-trace.so libheapctl-agent.so; do
		cmp "$HEAPCTL_BUILD/$f" "$P/$([ "$f" = heapctl ] && echo bin || echo lib)/$f"
	done
	grep -qx 'ExecStart=/usr/local/bin/heapctl serve --listen 127.0.0.1:9447 --archive /var/lib/heapctl/archive --max-bytes 512M --max-dump 128M' \
	    "$P/lib/systemd/system/heapctl-serve.service"
	grep -qx 'Environment=LD_PRELOAD=/usr/local/lib/libheapctl.so' "$P/share/doc/heapctl/examples/50-heapctl.conf"
	# the pages render from where they were installed
	MANPATH="$P/share/man" man -w heapctl-shm | grep -qx "$P/share/man/man5/heapctl-shm.5"
	MANPATH="$P/share/man" man -w heapctl-report | grep -qx "$P/share/man/man1/heapctl-report.1"
	MANPATH="$P/share/man" man -w 7 heapctl-internals | grep -qx "$P/share/man/man7/heapctl-internals.7"
}

@test "installed: the build directory is really out of reach of a hidden command" {
	run hidden ls -A "$HEAPCTL_BUILD"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	run -127 hidden "$HEAPCTL_BUILD/heapctl" --version
}

@test "installed: run, list, status, on, off, set, dump and report (of that dump) on a target under the installed library" {
	started
	run hidden "$HEAPCTL" list
	[ "$status" -eq 0 ]
	[[ "$output" == *"$TPID "*"$TB/target seconds=600"* ]]
	run hidden "$HEAPCTL" status "$TPID" --json
	[ "$status" -eq 0 ]
	[ "$(jfield prof.active <<<"$output")" = true ]
	run hidden "$HEAPCTL" off "$TPID"
	[ "$status" -eq 0 ]
	run hidden "$HEAPCTL" on "$TPID"
	[ "$status" -eq 0 ]
	run hidden "$HEAPCTL" set "$TPID" prof.lg_sample=12
	[ "$status" -eq 0 ]
	sleep 0.5                    # some allocations at 2^12
	run hidden "$HEAPCTL" dump "$TPID" -o "$T/t.heap"
	[ "$status" -eq 0 ]
	[ "$output" = "$T/t.heap" ]
	head -1 "$T/t.heap" | grep -qx 'heap_v2/4096'
	run hidden "$HEAPCTL" report "$T/t.heap" --top 5
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == "Total: "* ]]
	[[ "$output" == *" main"* ]]
	# --secure takes the installed libheapctl-secure.so
	"${HIDE[@]}" "$HEAPCTL" run --secure -- "$TB/target" seconds=600 >"$T/secure.out" 2>&1 &
	local spid=$!
	track "$spid"
	wait_for 5 grep -q "^ready $spid\$" "$T/secure.out"
	no_build "$spid" libheapctl-secure.so
}

@test "installed: watch and attach" {
	started
	"${HIDE[@]}" "$HEAPCTL" watch "$TPID" --json --count 1 >"$T/w" 2>&1 &
	local w=$!
	track "$w"
	wait_for 5 maps_segment "$w" "$TPID"
	hidden "$HEAPCTL" set "$TPID" prof.lg_sample=15 >/dev/null
	wait_status "$w"
	[ "$status" -eq 0 ]
	python3 -c '
import json, sys
e = json.loads(open(sys.argv[1]).read())
assert e["type"] == "config" and e["name"] == "prof.lg_sample" and e["value"] == "15", e' "$T/w"
	run hidden "$HEAPCTL" attach "$TPID" <<<$'off\nstatus\non'
	[ "$status" -eq 0 ]
	[[ "$output" == *"profiling      off"* ]]
}

@test "installed: serve answers /targets, /metrics and /flame (a dump now through the installed heapctl and its report engine), nothing of build/ mapped" {
	started lg_prof_sample:10
	"${HIDE[@]}" "$HEAPCTL" serve --listen 127.0.0.1:0 >"$T/serve.out" 2>"$T/serve.err" &
	local spid=$!
	track "$spid"
	wait_for 5 grep -q "listening on http://" "$T/serve.out" || { cat "$T/serve.err" >&2; false; }
	local url
	url=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
	wait_for 5 sh -c "curl -sf '$url/targets' | grep -q '\"pid\": $TPID,'"
	curl -sf "$url/metrics" | grep -q "^heapctl_allocated_bytes{pid=\"$TPID\","
	run curl -sf "$url/flame?pid=$TPID"
	echo "$output" | head -5
	[ "$status" -eq 0 ]
	[[ "$output" == *"<svg "* && "$output" == *"<title>main: "* ]]
	no_build "$spid" libheapctl-serve.so
	kill -TERM "$spid"
	wait_status "$spid"
	[ "$status" -eq 0 ]
}

@test "installed: inject the installed agent into a program started without it, dump, report and eject" {
	prog_started "$T/end"
	run hidden "$HEAPCTL" inject "$PID" --lg-sample 14
	echo "$output"
	[ "$status" -eq 0 ]
	no_build "$PID" libheapctl-agent.so
	touch "$T/go"
	wait_for 30 grep -q '^done' "$T/prog.out"
	run hidden "$HEAPCTL" dump "$PID" -o "$T/i.heap"
	[ "$status" -eq 0 ]
	run hidden "$HEAPCTL" report "$T/i.heap" --top 0 -p "$PID"
	[ "$status" -eq 0 ]
	[[ "$output" == *" site_a"* && "$output" == *" site_b"* ]]
	run hidden "$HEAPCTL" eject "$PID"
	[ "$status" -eq 0 ]
	touch "$T/end"
	wait_status "$PID"
	[ "$status" -eq 0 ]
}

@test "installed: stacks of a program started without the library" {
	prog_started
	run hidden "$HEAPCTL" stacks "$PID"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "process $PID: $TB/prog $T/go" ]
	[[ "$output" == *" in main at "*"prog.c:"* ]]
}

@test "installed: trace --malloc loads the installed libheapctl-trace.so and writes a dump the installed report reads" {
	[ -r /sys/kernel/btf/vmlinux ] || skip "the kernel has no BTF (/sys/kernel/btf/vmlinux), which heapctl trace needs"
	prog_started
	"${HIDE[@]}" "$HEAPCTL" trace "$PID" --malloc --lg-sample 14 -o "$T/t.heap" >"$T/trace.out" 2>"$T/trace.err" &
	local tr=$!
	track "$tr"
	wait_for 10 grep -q 'tracing' "$T/trace.err" || { cat "$T/trace.err" >&2; false; }
	no_build "$tr" libheapctl-trace.so
	touch "$T/go"
	wait_status "$tr"
	cat "$T/trace.err"
	[ "$status" -eq 0 ]
	run hidden "$HEAPCTL" report "$T/t.heap" --top 0
	[ "$status" -eq 0 ]
	[[ "$output" == *" site_a"* && "$output" == *" site_b"* ]]
}

@test "installed: systemd enable and disable write and remove a drop-in naming the installed libraries (systemctl stands in for the host's systemd)" {
	# the host runs no systemd: a systemctl that answers show for one unit
	# and daemon-reload (tests/systemd/ runs these against a real systemd)
	mkdir -p "$T/bin"
	cat >"$T/bin/systemctl" <<-EOF
	#!/bin/sh
	echo "\$*" >>"$T/systemctl.log"
	case "\$*" in
	"--user show demo.service --timestamp=unix")
	    printf 'LoadState=loaded\nActiveState=inactive\nMainPID=0\n'
	    printf 'ExecStart={ path=$TB/target ; argv[]=$TB/target seconds=1 ; ignore_errors=no }\n' ;;
	"--user daemon-reload") ;;
	*) echo "unexpected systemctl \$*" >&2; exit 1 ;;
	esac
	EOF
	chmod +x "$T/bin/systemctl"
	local conf="$T/cfg/systemd/user/demo.service.d/50-heapctl.conf"
	export XDG_CONFIG_HOME="$T/cfg" XDG_STATE_HOME="$T/state"
	PATH="$T/bin:$PATH" run hidden "$HEAPCTL" systemd enable demo --user --conf lg_prof_sample:17
	echo "$output"
	[ "$status" -eq 0 ]
	grep -qx "Environment=\"LD_PRELOAD=$P/lib/libheapctl.so\"" "$conf"
	grep -q '^Environment="HEAPCTL_CONF=.*,lg_prof_sample:17"$' "$conf"
	PATH="$T/bin:$PATH" run hidden "$HEAPCTL" systemd disable demo --user
	[ "$status" -eq 0 ]
	[ ! -e "$conf" ]
	PATH="$T/bin:$PATH" run hidden "$HEAPCTL" systemd enable demo --user --secure
	[ "$status" -eq 0 ]
	grep -qx "Environment=\"LD_PRELOAD=$P/lib/libheapctl-secure.so\"" "$conf"
	PATH="$T/bin:$PATH" hidden "$HEAPCTL" systemd disable demo --user
	[ ! -e "$conf" ]
}

@test "installed: doctor finds a target under the installed library healthy, and one without it not" {
	started
	run hidden "$HEAPCTL" doctor "$TPID"
	echo "$output"
	[ "$status" -eq 0 ]
	prog_started
	run hidden "$HEAPCTL" doctor "$PID"
	[ "$status" -eq 4 ]
	[[ "$output" == *"started without it"* ]]
}

@test "installed: help shows the options the installed engines carry" {
	for c in report serve trace inject; do
		run hidden "$HEAPCTL" help "$c"
		[ "$status" -eq 0 ]
		[[ "$output" != *"is not installed"* ]]
	done
}

# last: the tree is gone after this
@test "installed: make uninstall leaves no file behind" {
	make -s -C "$REPO" uninstall DESTDIR="$DEST" PREFIX=/usr/local BUILD="$HEAPCTL_BUILD"
	run find "$DEST" ! -type d
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}
