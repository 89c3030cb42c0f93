#!/usr/bin/env bash
# tests/systemd/hardened.sh BUILD - heapctl against a service that a REAL
# systemd sandboxes the way Debian hardens its units, with libheapctl.so
# preloaded through a drop-in.
#
# Why: such a service was killed with SIGSYS in the field (the library
# called mincore(2), which SystemCallFilter=@system-service does not allow;
# fixed in 816287f).  Only the real systemd builds that sandbox (seccomp,
# mount namespaces, DynamicUser=, hidepid /proc), so the test boots
# bookworm's systemd in a container (tests/lib/systemd.sh) and, like an
# operator, drives heapctl from the host against the service's host PID.
#
# Two units run tests/programs/systemd_service.c with every hardening option at once:
#   heapctl-sigsys  SystemCallFilter= with the default action: a forbidden
#                   call kills the process with SIGSYS.  60 s under
#                   `heapctl watch`, with status, on and four dumps.
#   heapctl-eperm   SystemCallErrorNumber=EPERM: a forbidden call fails, and
#                   the library must not complain about it.  10 s, the same.
# Checked for each: the library is really loaded (else all of this passes
# vacuously); every heapctl command succeeds; the unit never restarted and
# ended with no signal; its journal has no SIGSYS, core dump or <heapctl>:
# line; watch saw the `on` and every dump; the dumps (copied out while the
# service runs) are read by `heapctl report -p PID` and by jeprof on the
# host; they belong to the dynamic user and stay in the state directory
# after the unit stops.
set -uo pipefail
# shellcheck source=tests/lib/systemd.sh
source "$(dirname "$0")/../lib/systemd.sh"
sd_setup hardened "$@"

H=$BUILD/heapctl
LIBEXEC=/usr/local/libexec/heapctl-test
# <heapctl>: lines that the journal may carry (an ERE; none so far)
ALLOWED_DIAG='^$'

# jfield KEY: one field of the JSON object on stdin (strings bare)
jfield() {
	python3 -c '
import json, sys
try:
    v = json.load(sys.stdin).get(sys.argv[1], "")
except ValueError:
    v = ""
print(json.dumps(v) if isinstance(v, bool) or v is None else v)' "$1"
}

# ---- the service, built on the host ----------------------------------------

if ! gcc -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o "$WORK/service" \
    "$SD_REPO/tests/programs/systemd_service.c" 2>"$WORK/service.cc.log"; then
	sed 's/^/    /' "$WORK/service.cc.log" >&2
	die "cannot compile tests/programs/systemd_service.c"
fi

sd_rootfs
sd_boot
sd_install
CT=$(ct_root)
install -D -m 0755 "$WORK/service" "$CT$LIBEXEC/service" || die "cannot copy the service into the container"

# write_unit NAME STATEDIR [EXTRA SETTING]: the unit and its heapctl drop-in
write_unit() {
	local name=$1 dir=$2 extra=${3:-}
	cat >"$CT/etc/systemd/system/$name.service" <<-EOF
	[Unit]
	Description=heapctl test service ($name): Debian-style hardening, heapctl preloaded

	[Service]
	ExecStart=$LIBEXEC/service seconds=600
	# how each run ended, recorded outside the sandbox (+) and without the
	# preload: systemd forgets a stopped unit's ExecMain*/Result at once
	ExecStopPost=+/usr/bin/env -u LD_PRELOAD -u HEAPCTL_CONF /bin/sh -c 'echo "\$\$SERVICE_RESULT \$\$EXIT_CODE \$\$EXIT_STATUS" >>/run/heapctl-test/$name.exit'
	Restart=on-failure
	RestartSec=2
	DynamicUser=yes
	StateDirectory=$dir
	ProtectSystem=strict
	ProtectHome=yes
	PrivateTmp=yes
	PrivateDevices=yes
	NoNewPrivileges=yes
	MemoryDenyWriteExecute=yes
	RestrictNamespaces=yes
	SystemCallFilter=@system-service
	$extra
	ProtectProc=invisible
	RestrictAddressFamilies=AF_UNIX AF_INET
	LockPersonality=yes
	ProtectKernelTunables=yes
	CapabilityBoundingSet=
	EOF
	mkdir -p "$CT/etc/systemd/system/$name.service.d"
	cat >"$CT/etc/systemd/system/$name.service.d/50-heapctl.conf" <<-EOF
	[Service]
	Environment=LD_PRELOAD=/usr/local/lib/libheapctl.so
	Environment=HEAPCTL_CONF=prof:true,prof_active:false,prof_prefix:/var/lib/$dir/svc,lg_prof_sample:12
	EOF
}
mkdir -p "$CT/run/heapctl-test"
write_unit heapctl-sigsys heapctl-sigsys
write_unit heapctl-eperm heapctl-eperm SystemCallErrorNumber=EPERM
ct systemctl daemon-reload || die "systemctl daemon-reload failed in the container"

# show UNIT: the unit's state as KEY=VALUE lines in $WORK/UNIT.show
show() {
	ct systemctl show -p ActiveState,SubState,Result,NRestarts,MainPID,ExecMainCode,ExecMainStatus,DropInPaths \
	    "$1" >"$WORK/$1.show" 2>&1
}
prop() { sed -n "s/^$2=//p" "$WORK/$1.show"; }

journal() {   # UNIT: its journal of this boot in $WORK/UNIT.journal
	ct journalctl --sync >/dev/null 2>&1
	ct journalctl -b -u "$1" --no-pager -o short-monotonic >"$WORK/$1.journal" 2>&1
}

print_journal() {
	echo "--- journalctl -u $1 (in the container):" >&2
	tail -n 40 "$WORK/$1.journal" | sed 's/^/    /' >&2
}

# postmortem UNIT: why the unit has no process to test: its state, how
# its runs ended, its journal
postmortem() {
	local ends
	show "$1"
	journal "$1"
	ends=$(tr '\n' '|' <"$CT/run/heapctl-test/${1%.service}.exit" 2>/dev/null)
	fail "$1: is $(prop "$1" ActiveState)/$(prop "$1" SubState), Result=$(prop "$1" Result), NRestarts=$(prop "$1" NRestarts), its runs ended as '${ends:-}' (SERVICE_RESULT EXIT_CODE EXIT_STATUS)"
	print_journal "$1"
	ct systemctl stop "$1" >/dev/null 2>&1     # no restart loop beside the next unit
}

# dump_file HPID PATH: where the host opens the dump that `heapctl dump`
# named PATH: PATH itself if the host has it (a path heapctl made for its
# caller), else PATH under the process's root (the process's own view)
dump_file() {
	if [ -f "$2" ]; then
		echo "$2"
	elif [ -f "/proc/$1/root$2" ]; then
		echo "/proc/$1/root$2"
	fi
}

# exercise UNIT STATEDIR SECONDS NDUMPS: run the unit for SECONDS with
# heapctl on it from the host, then stop it and check everything
exercise() {
	local unit=$1 dir=$2 secs=$3 ndumps=$4
	local ctpid hpid uid rc out wpid i t0 next k path f died=""
	local dumps=() copies=()
	note "$unit: start"
	if ! ct systemctl start "$unit" >"$WORK/$unit.start" 2>&1; then
		fail "$unit: systemctl start failed: $(head -2 "$WORK/$unit.start")"
		postmortem "$unit"
		return
	fi
	show "$unit"
	ctpid=$(prop "$unit" MainPID)
	grep -q '50-heapctl.conf' <<<"$(prop "$unit" DropInPaths)" ||
	    fail "$unit: the drop-in 50-heapctl.conf is not in effect (DropInPaths=$(prop "$unit" DropInPaths))"
	if [ -z "$ctpid" ] || [ "$ctpid" = 0 ]; then
		fail "$unit: no main process right after systemctl start"
		postmortem "$unit"
		return
	fi
	hpid=$(sd_host_pid "$ctpid")
	if [ -z "$hpid" ]; then
		fail "$unit: its main process (container PID $ctpid) was gone at once"
		postmortem "$unit"
		return
	fi
	note "$unit: running, container PID $ctpid, host PID $hpid"
	# the preload is real, or every check below passes vacuously; with
	# Type=simple, systemctl start returns once the process is forked, so
	# give it a moment to exec the service (cmdline "(service)" until then)
	for i in $(seq 50); do
		grep -q '/usr/local/lib/libheapctl\.so$' "/proc/$hpid/maps" 2>/dev/null && break
		kill -0 "$hpid" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q '/usr/local/lib/libheapctl\.so$' "/proc/$hpid/maps" 2>/dev/null; then
		if kill -0 "$hpid" 2>/dev/null; then
			fail "$unit: /usr/local/lib/libheapctl.so is not mapped in host PID $hpid (the drop-in's LD_PRELOAD did not take)"
		else
			fail "$unit: its main process (host PID $hpid) was gone at once"
			postmortem "$unit"
		fi
		return
	fi
	uid=$(awk '/^Uid:/ { print $2 }' "/proc/$hpid/status")
	if ! [ "${uid:-0}" -ge 61184 ] 2>/dev/null || [ "$uid" -gt 65519 ]; then
		fail "$unit: runs as uid '$uid', not a DynamicUser= uid (61184-65519)"
	fi
	# the control thread is up once the segment says so
	for ((i = 0; i < 100; i++)); do
		"$H" status "$hpid" --json 2>/dev/null | grep -q '"control": true' && break
		sleep 0.1
	done

	"$H" watch "$hpid" --json >"$WORK/$unit.watch" 2>"$WORK/$unit.watch.err" &
	wpid=$!
	sd_track "$wpid"
	# watch has the segment mapped before anything happens that it must see
	for ((i = 0; i < 50; i++)); do
		grep -q "heapctl\.$ctpid\$" "/proc/$wpid/maps" 2>/dev/null && break
		kill -0 "$wpid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$wpid" 2>/dev/null ||
	    fail "$unit: heapctl watch $hpid --json exited at once: $(head -3 "$WORK/$unit.watch.err")"

	rc=0
	"$H" status "$hpid" >"$WORK/$unit.status" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || fail "$unit: heapctl status $hpid: exit $rc: $(head -3 "$WORK/$unit.status")"
	rc=0
	out=$("$H" on "$hpid" 2>&1) || rc=$?
	[ "$rc" -eq 0 ] || fail "$unit: heapctl on $hpid: exit $rc: $out"
	rc=0
	out=$("$H" status "$hpid" --json 2>&1) || rc=$?
	if [ "$rc" -ne 0 ]; then
		fail "$unit: heapctl status $hpid --json after heapctl on: exit $rc: $(head -2 <<<"$out")"
	elif [ "$(jfield prof.active <<<"$out")" != true ]; then
		fail "$unit: after heapctl on, status --json says prof.active '$(jfield prof.active <<<"$out")'"
	fi
	# inside the container, the installed heapctl reaches the service too
	rc=0
	ct /usr/local/bin/heapctl status "$ctpid" >"$WORK/$unit.ct-status" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || fail "$unit: heapctl status $ctpid inside the container: exit $rc: $(head -3 "$WORK/$unit.ct-status")"

	# SECONDS under watch; NDUMPS dumps spread over them
	mkdir -p "$WORK/dumps"
	t0=$SECONDS k=0
	next=$((t0 + 3))
	while [ $((SECONDS - t0)) -lt "$secs" ]; do
		if ! kill -0 "$hpid" 2>/dev/null; then
			died=$((SECONDS - t0))
			fail "$unit: the service (host PID $hpid) died $died s after heapctl on"
			break
		fi
		if [ "$k" -lt "$ndumps" ] && [ "$SECONDS" -ge "$next" ]; then
			rc=0
			out=$("$H" dump "$hpid" --json 2>"$WORK/$unit.dump$k.err") || rc=$?
			path=$(jfield path <<<"$out")
			if [ "$rc" -ne 0 ]; then
				fail "$unit: heapctl dump $hpid --json (number $((k + 1))): exit $rc: $out $(head -3 "$WORK/$unit.dump$k.err")"
			elif [ -z "$path" ]; then
				fail "$unit: heapctl dump $hpid --json printed no \"path\": $out"
			else
				f=$(dump_file "$hpid" "$path")
				if [ -z "$f" ]; then
					fail "$unit: the dump $path exists neither on the host nor under /proc/$hpid/root"
				elif ! cp "$f" "$WORK/dumps/$unit.$k.heap"; then
					fail "$unit: cannot copy the dump $f"
				else
					dumps+=("$path") copies+=("$WORK/dumps/$unit.$k.heap")
					[ "$(stat -c %u "$f")" = "$uid" ] ||
					    fail "$unit: the dump $f belongs to uid $(stat -c %u "$f"), not to the service's dynamic user $uid"
				fi
			fi
			k=$((k + 1))
			next=$((t0 + 3 + k * (secs - 5) / ndumps))
		fi
		sleep 0.5
	done
	note "$unit: $((SECONDS - t0)) s under heapctl, ${#dumps[@]} dumps"
	[ -n "$died" ] || [ "${#dumps[@]}" -ge 2 ] || fail "$unit: ${#dumps[@]} dumps succeeded while it ran, expected at least 2"

	# the dumps, read on the host while the service (and /proc/PID/root) lives
	if [ "${#copies[@]}" -gt 0 ] && kill -0 "$hpid" 2>/dev/null; then
		local last=${copies[${#copies[@]} - 1]} fn
		rc=0
		"$H" report "$last" -p "$hpid" >"$WORK/$unit.report" 2>&1 || rc=$?
		if [ "$rc" -ne 0 ]; then
			fail "$unit: heapctl report $last -p $hpid: exit $rc: $(head -3 "$WORK/$unit.report")"
		elif ! grep -q '^Total: ' "$WORK/$unit.report"; then
			fail "$unit: heapctl report -p $hpid printed no Total line: $(head -3 "$WORK/$unit.report")"
		else
			for fn in main svc_keep svc_worker; do
				grep -qE "[[:space:]]$fn\$" "$WORK/$unit.report" ||
				    fail "$unit: heapctl report -p $hpid does not name $fn: $(head -8 "$WORK/$unit.report" | tr '\n' '|')"
			done
		fi
	fi
	for f in "${copies[@]}"; do
		rc=0
		jeprof --text "$WORK/service" "$f" >"$f.jeprof" 2>"$f.jeprof.err" </dev/null || rc=$?
		if [ "$rc" -ne 0 ]; then
			fail "$unit: jeprof --text service $(basename "$f"): exit $rc: $(grep -v '^Using local file' "$f.jeprof.err" | head -3)"
		elif ! grep -q '^Total: ' "$f.jeprof"; then
			fail "$unit: jeprof --text service $(basename "$f") printed no Total line"
		fi
	done

	# the unit at the end: still the same process, never restarted, no signal
	show "$unit"
	[ "$(prop "$unit" ActiveState)/$(prop "$unit" SubState)" = active/running ] ||
	    fail "$unit: $(prop "$unit" ActiveState)/$(prop "$unit" SubState) after $((SECONDS - t0)) s, not active/running"
	[ "$(prop "$unit" NRestarts)" = 0 ] || fail "$unit: NRestarts=$(prop "$unit" NRestarts), expected 0"
	[ "$(prop "$unit" Result)" = success ] || fail "$unit: Result=$(prop "$unit" Result) while running, expected success"
	[ "$(prop "$unit" MainPID)" = "$ctpid" ] ||
	    fail "$unit: MainPID is $(prop "$unit" MainPID), not $ctpid: the service was restarted"
	if [ -z "$died" ]; then
		rc=0
		out=$("$H" status "$hpid" 2>&1) || rc=$?
		[ "$rc" -eq 0 ] || fail "$unit: heapctl status $hpid at the end: exit $rc: $out"
	fi

	note "$unit: stop"
	ct systemctl stop "$unit" || fail "$unit: systemctl stop failed"
	# one run, ended by the stop: the service handles SIGTERM and exits 0
	out=$(cat "$CT/run/heapctl-test/${unit%.service}.exit" 2>/dev/null)
	[ "$out" = "success exited 0" ] ||
	    fail "$unit: its runs ended as '$(tr '\n' '|' <<<"$out")' (SERVICE_RESULT EXIT_CODE EXIT_STATUS), expected one 'success exited 0'"

	# watch ends with its process
	_sd_wait_gone "$wpid" 5 || { kill -TERM "$wpid" 2>/dev/null; _sd_wait_gone "$wpid" 2; }
	check_watch "$unit" "${dumps[@]}"

	# the journal: the service's own output is there (else the checks below
	# read nothing), and nothing of a signal or of the library
	journal "$unit"
	grep -q "ready $ctpid\$" "$WORK/$unit.journal" ||
	    fail "$unit: the journal lacks the service's \"ready $ctpid\" line, so it cannot show a crash either"
	if grep -qE 'SIGSYS|core-dump|Bad system call|status=31/SYS|code=(killed|dumped)' "$WORK/$unit.journal"; then
		fail "$unit: the journal shows the service killed by a signal: $(grep -E 'SIGSYS|core-dump|Bad system call|status=31/SYS|code=(killed|dumped)' "$WORK/$unit.journal" | head -2 | tr '\n' '|')"
		print_journal "$unit"
	elif grep '<heapctl>:' "$WORK/$unit.journal" | grep -vqE "$ALLOWED_DIAG"; then
		fail "$unit: the library complained in the journal: $(grep '<heapctl>:' "$WORK/$unit.journal" | head -2 | tr '\n' '|')"
		print_journal "$unit"
	fi

	# the dumps stay in the state directory, the dynamic user's, unchanged
	local sdir=$CT/var/lib/private/$dir
	[ -d "$sdir" ] || fail "$unit: no state directory /var/lib/private/$dir after stop"
	for ((i = 0; i < ${#dumps[@]}; i++)); do
		f=$sdir/$(basename "${dumps[$i]}")
		if [ ! -f "$f" ]; then
			fail "$unit: the dump /var/lib/private/$dir/$(basename "$f") is gone after the unit stopped"
		else
			[ "$(stat -c %u "$f")" = "$uid" ] ||
			    fail "$unit: after stop, $(basename "$f") belongs to uid $(stat -c %u "$f"), not $uid"
			cmp -s "$f" "${copies[$i]}" || fail "$unit: $(basename "$f") changed after it was dumped"
		fi
	done
	out=$(find "$sdir" -name '*.tmp*' 2>/dev/null | head -3)
	[ -z "$out" ] || fail "$unit: temporary files left in the state directory: $out"
}

# check_watch UNIT DUMP_PATH...: the watch log has the `on` and every dump
check_watch() {
	local unit=$1
	shift
	local out
	out=$(python3 - "$WORK/$unit.watch" "$@" <<-'EOF'
	import json, os, sys
	events = []
	for n, line in enumerate(open(sys.argv[1]), 1):
	    try:
	        events.append(json.loads(line))
	    except ValueError:
	        print("line %d is not JSON: %r" % (n, line[:80]))
	on = [e for e in events if e.get("type") == "config" and e.get("name") == "prof.active"
	      and str(e.get("value")) in ("true", "True")]
	if not on:
	    print("no config event prof.active=true (heapctl on)")
	seen = {os.path.basename(str(e.get("path"))) for e in events if e.get("type") == "dump"}
	for p in sys.argv[2:]:
	    if os.path.basename(p) not in seen:
	        print("no dump event for %s" % p)
	EOF
	)
	if [ -n "$out" ]; then
		while read -r line; do fail "$unit: heapctl watch --json: $line"; done <<<"$out"
		echo "--- heapctl watch --json output:" >&2
		head -n 20 "$WORK/$unit.watch" "$WORK/$unit.watch.err" | sed 's/^/    /' >&2
	fi
}

exercise heapctl-sigsys.service heapctl-sigsys 60 4
exercise heapctl-eperm.service heapctl-eperm 10 2
sd_teardown
note "done, $FAILS failures"
finish
