#!/usr/bin/env bats
# tests/cli/untrusted.bats - what heapctl reads from others: strings a target
# puts in its segment (a prefix, its command line, dump paths) reach the
# terminal escaped and JSON as valid UTF-8; profiles that are cut short,
# FIFOs and large binary files are refused quickly with a reason; small
# misuses get usage errors.

load ../lib/helpers

setup_file() {
	# one real interpreter (pyenv's shim costs seconds per call)
	PY=$(python3 -c 'import sys; print(sys.executable)')
	export PY
}

# ---- strings from a target ------------------------------------------------------------

@test "a prefix with an escape sequence, a bell, a newline and a byte that is not UTF-8: escaped in text, valid JSON" {
	start_target
	local evil
	evil=$(printf '%s/p\033[31m\a\nx\377y' "$T")
	"$HEAPCTL" set "$TPID" prof.prefix="$evil" >/dev/null
	run --separate-stderr "$HEAPCTL" status "$TPID"
	[ "$status" -eq 0 ]
	[[ "$output" != *$'\033'* && "$output" != *$'\a'* && "$output" != *$'\377'* ]]
	[[ "$output" == *"prof.prefix              $T/p\\x1b[31m\\x07\\x0ax\\xffy"* ]]
	run --separate-stderr "$HEAPCTL" status "$TPID" --json
	[ "$status" -eq 0 ]
	"$PY" -c '
import json, sys
d = json.loads(sys.stdin.buffer.read().decode("utf-8"))   # strict: invalid UTF-8 raises
assert d["prof.prefix"] == sys.argv[1] + "/p\x1b[31m\x07\nx\ufffdy", repr(d["prof.prefix"])' "$T" <<<"$output"
	# the dump path in a watch event, and in dump's own output
	"$HEAPCTL" watch "$TPID" --count 1 >"$T/w" 2>/dev/null &
	local w=$!
	track "$w"
	wait_for 5 grep -q heapctl-ctl /proc/"$TPID"/task/*/comm
	wait_for 5 maps_segment "$w" "$TPID"        # the watcher is reading events
	run --separate-stderr "$HEAPCTL" dump "$TPID"
	wait "$w" || true
	for f in "$T/w"; do
		! grep -q $'\033' "$f"
		grep -q 'x1b\[31m' "$f"
	done
	[[ "$output" != *$'\033'* ]]
	[[ "$output" == *"\\x1b[31m"* ]]
}

@test "a command line with escape sequences: list escapes it" {
	cp "$TARGET" "$T/$(printf 'tgt\033]0;owned\a')"
	HEAPCTL_CONF=$DEFAULT_CONF "$T/$(printf 'tgt\033]0;owned\a')" seconds=600 >"$T/o" 2>&1 &
	local p=$!
	track "$p"
	wait_for 5 grep -q '^ready ' "$T/o"
	wait_for 5 grep -q heapctl-ctl /proc/"$p"/task/*/comm
	run --separate-stderr "$HEAPCTL" list
	[ "$status" -eq 0 ]
	[[ "$output" != *$'\033'* && "$output" != *$'\a'* ]]
	[[ "$output" == *"tgt\\x1b]0;owned\\x07"* ]]
	run --separate-stderr "$HEAPCTL" list --json
	"$PY" -c 'import json, sys; json.loads(sys.stdin.buffer.read().decode("utf-8"))' <<<"$output"
}

# ---- profiles that are not what they claim ------------------------------------------------

@test "report on a FIFO with no writer: refused at once, not a hang" {
	mkfifo "$T/fifo"
	run --separate-stderr timeout 10 "$HEAPCTL" report "$T/fifo"
	[ "$status" -ne 124 ]
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"is not a regular file"* ]]
}

@test "report on a 1 TiB binary file: refused from its first bytes" {
	truncate -s 1T "$T/big"
	head -c 4096 /dev/urandom | dd of="$T/big" conv=notrunc status=none
	# reading all of it (sparse: zeros) would take minutes, the first
	# 64 KiB take milliseconds; timeout's 124 is a read to the end (a bound
	# this loose, not one in milliseconds, holds on a loaded machine)
	run --separate-stderr timeout 60 "$HEAPCTL" report "$T/big"
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	[[ "$stderr" == *"is not a heap profile"* ]]
}

@test "a profile cut anywhere in its stacks, or in the middle of a line, is refused as truncated" {
	start_target -c "prof:true,lg_prof_sample:8,control_refresh_ms:100" stacks=200
	sleep 1.5
	"$HEAPCTL" dump "$TPID" -o "$T/full.heap" >/dev/null
	run "$HEAPCTL" report "$T/full.heap"
	[ "$status" -eq 0 ]
	local maps total accepted=0 refused=0 wrong=0
	maps=$(grep -n '^MAPPED_LIBRARIES:$' "$T/full.heap" | cut -d: -f1)
	total=$(wc -l <"$T/full.heap")
	[ "$(grep -c '^@' "$T/full.heap")" -ge 15 ]
	# every cut at a line boundary before the memory map, and one in the
	# middle of every fifth line after line 1
	for ((n = 1; n < maps; n++)); do
		head -n "$n" "$T/full.heap" >"$T/cut.heap"
		if "$HEAPCTL" report "$T/cut.heap" >/dev/null 2>"$T/cut.err"; then
			wrong=$((wrong + 1)); echo "cut after line $n accepted" >&2
		elif ! grep -q truncated "$T/cut.err"; then
			wrong=$((wrong + 1)); echo "cut after line $n: $(cat "$T/cut.err")" >&2
		else
			refused=$((refused + 1))
		fi
		if ((n % 5 == 0)); then
			head -n "$n" "$T/full.heap" | head -c -3 >"$T/cut.heap"
			if "$HEAPCTL" report "$T/cut.heap" >/dev/null 2>"$T/cut.err"; then
				wrong=$((wrong + 1)); echo "cut inside line $n accepted" >&2
			fi
		fi
	done
	# a cut inside the memory map's last line is refused too
	head -c -5 "$T/full.heap" >"$T/cut.heap"
	run --separate-stderr "$HEAPCTL" report "$T/cut.heap"
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"truncated: the file ends in the middle of a line"* ]]
	echo "refused $refused cuts; $wrong wrong" >&2
	[ "$wrong" -eq 0 ]
	[ "$refused" -gt 20 ]
}

@test "report X --base X on a profile with no mappings: nothing, and no undefined behaviour" {
	printf 'heap_v2/524288\n  t*: 1: 100 [0: 0]\n@ 0x1000\n  t*: 1: 100 [0: 0]\n\nMAPPED_LIBRARIES:\n' >"$T/nomap.heap"
	run --separate-stderr "$HEAPCTL" report "$T/nomap.heap" --base "$T/nomap.heap"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[[ "$stderr" == *"nothing to show: no difference in inuse_space"* ]]
}

# ---- small misuses ----------------------------------------------------------------------------

@test "help with two commands is a usage error" {
	run --separate-stderr "$HEAPCTL" help set extra
	[ "$status" -eq 2 ]
	[ "$stderr" = "heapctl: help: one command at a time, not 'extra'" ]
}

@test "a non-dumpable process of the same user that does not run the library: exit 4, not 5" {
	need_root
	cat >"$T/nd.c" <<'C'
#include <sys/prctl.h>
#include <unistd.h>
int main(void) { prctl(PR_SET_DUMPABLE, 0); sleep(30); return 0; }
C
	gcc -o "$T/nd" "$T/nd.c"
	chmod 755 "$T/nd"
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$T/nd" &
	local p=$!
	track "$p"
	sleep 0.3
	run --separate-stderr setpriv --reuid=nobody --regid=nogroup --clear-groups "$HEAPCTL" status "$p"
	[ "$status" -eq 4 ]
	[[ "$stderr" == *"is not running libheapctl.so"* ]]
}
