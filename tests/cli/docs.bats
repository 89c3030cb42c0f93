#!/usr/bin/env bats
# tests/cli/docs.bats - the documentation stays true and clean: every man
# page renders without a warning, every command `heapctl help` lists has
# its entry in heapctl(1) and its own help, and the README's test command is
# the one CI runs.

load helpers

@test "every man page renders with man --warnings and no warning" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	command -v man >/dev/null || { echo "man is not installed (Debian man-db; make deps installs it)" >&2; false; }
	for m in "$root"/man/*.[0-9]; do
		run --separate-stderr man --warnings -l "$m"
		[ "$status" -eq 0 ]
		[ -z "$stderr" ] || { echo "$m: $stderr" >&2; false; }
		[ -n "$output" ]
	done
}

@test "every command in 'heapctl help' has an entry in heapctl(1) and its own help" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	run "$HEAPCTL" help
	[ "$status" -eq 0 ]
	local cmds
	cmds=$(sed -n '/^commands:/,/^$/p' <<<"$output" | awk 'NF && $1 != "commands:" {print $1}')
	[ "$(wc -w <<<"$cmds")" -ge 14 ]
	for c in $cmds; do
		grep -q "^\.B $c\b\|^\.B $c \\\\" "$root/man/heapctl.1" || { echo "heapctl(1) has no entry for $c" >&2; false; }
		run "$HEAPCTL" help "$c"
		[ "$status" -eq 0 ]
		[[ "${lines[0]}" == "usage: heapctl $c"* ]]
	done
}

# the lines between a page's BEGIN and END settings comments
settings_block() {
	sed -n '/^\.\\" BEGIN settings/,/^\.\\" END settings/p' "$1" | sed '1d;$d'
}

@test "the settings tables of libheapctl(3) and heapctl(1) are the list's (shm/hc_settings.def)" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	for p in conf:libheapctl.3 set:heapctl.1; do
		run "$HEAPCTL" help "${p%%:*}.roff"
		[ "$status" -eq 0 ]
		[ -n "$output" ]
		[ "$(settings_block "$root/man/${p#*:}")" = "$output" ] || {
			echo "man/${p#*:} disagrees with the settings list; run make man-settings:" >&2
			diff <(settings_block "$root/man/${p#*:}") <(echo "$output") >&2
			false
		}
	done
	# the test can fail: a page with one option changed no longer matches
	settings_block "$root/man/libheapctl.3" | sed 's/lg_prof_sample " (19/lg_prof_sample " (20/' >"$T/page"
	run "$HEAPCTL" help conf.roff
	[ "$(cat "$T/page")" != "$output" ]
	# every option of the list, and only those, in help conf and in the page
	local opts
	opts=$("$HEAPCTL" help conf | awk '/^  [a-z_]+ / && $1 != "option" {print $1}')
	[ "$(wc -w <<<"$opts")" -eq 26 ]
	[ "$opts" = "$(settings_block "$root/man/libheapctl.3" | sed -n 's/^\.BR \([a-z_]*\) .*/\1/p')" ]
}

@test "the README's test command is what CI runs" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	grep -q '^make check' "$root/README.md"
	grep -q '^make check$' "$root/.ci/run"
}
