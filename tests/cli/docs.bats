#!/usr/bin/env bats
# tests/cli/docs.bats - the documentation stays true and clean: every man
# page renders without a warning, every command `heapctl help` lists has
# its entry and every option of its help in the page of its family, every
# page is in heapctl(1)'s SEE ALSO, the README is a front door of at most
# 200 lines whose map names folders that exist (and each folder's README a
# few lines), the README's test command is the one CI runs, and every C
# file follows .clang-format.

load ../lib/helpers

# the page of a command's family (man/); the control commands are heapctl(1)'s
family_page() {
	case "$1" in
	report) echo heapctl-report.1 ;;
	serve) echo heapctl-serve.1 ;;
	trace) echo heapctl-trace.1 ;;
	inject | eject | stacks) echo heapctl-inject.1 ;;
	systemd | doctor | run) echo heapctl-systemd.1 ;;
	*) echo heapctl.1 ;;
	esac
}

# a page's source as words: roff's \- as -, font escapes and en dashes gone
page_text() {
	sed 's/\\-/-/g; s/\\f[BIRP]//g; s/\\(en/-/g' "$1"
}

# the options a help text names: -x and --name, at a line's start or after
# a blank, bracket, bar, comma or parenthesis
help_options() {
	grep -oE '(^|[][ |,(])--?[a-zA-Z][a-zA-Z0-9_-]*' | sed 's/^[][ |,(]//' | sort -u
}

# the options of help text on stdin that page $1 does not name, one a line
options_missing() {
	local o text
	text=$(page_text "$1")
	for o in $(help_options); do
		grep -qE -- "(^|[^a-zA-Z0-9_-])$o([^a-zA-Z0-9_-]|$)" <<<"$text" || echo "$o"
	done
}

@test "every man page renders with man --warnings and no warning" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	command -v man >/dev/null || { echo "man is not installed (Debian man-db; make deps installs it)" >&2; false; }
	local n=0
	for m in "$root"/man/*.[0-9]; do
		run --separate-stderr env MANWIDTH=80 man --warnings -l "$m"
		[ "$status" -eq 0 ]
		[ -z "$stderr" ] || { echo "$m: $stderr" >&2; false; }
		[ -n "$output" ]
		n=$((n + 1))
	done
	# heapctl(1), five family pages, libheapctl(3), heapctl-shm(5), heapctl-internals(7)
	[ "$n" -ge 9 ]
}

@test "every command in 'heapctl help' has an entry in the page of its family and its own help" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	run "$HEAPCTL" help
	[ "$status" -eq 0 ]
	local cmds
	cmds=$(sed -n '/^commands:/,/^$/p' <<<"$output" | awk 'NF && $1 != "commands:" {print $1}')
	[ "$(wc -w <<<"$cmds")" -ge 14 ]
	for c in $cmds; do
		local page
		page="$root/man/$(family_page "$c")"
		[ -f "$page" ] || { echo "$c: no page $page" >&2; false; }
		grep -q "^\.B $c\b\|^\.B $c \\\\" "$page" || { echo "$(basename "$page") has no entry for $c" >&2; false; }
		run "$HEAPCTL" help "$c"
		[ "$status" -eq 0 ]
		[[ "${lines[0]}" == "usage: heapctl $c"* ]]
	done
}

@test "every option in a command's help is in the page of its family, and the common ones in heapctl(1)" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	local cmds
	cmds=$("$HEAPCTL" help | sed -n '/^commands:/,/^$/p' | awk 'NF && $1 != "commands:" {print $1}')
	local c page missing total=0
	for c in $cmds; do
		page="$root/man/$(family_page "$c")"
		total=$((total + $("$HEAPCTL" help "$c" | help_options | wc -l)))
		missing=$("$HEAPCTL" help "$c" | options_missing "$page")
		[ -z "$missing" ] || { echo "$c: not in $(basename "$page"):" $missing >&2; false; }
	done
	# report alone has over 25 options: the extraction finds them
	[ "$total" -ge 80 ]
	local common
	common=$("$HEAPCTL" help | sed -n '/^options for every command:/,/^$/p')
	[ "$(help_options <<<"$common" | wc -l)" -ge 5 ]
	missing=$(options_missing "$root/man/heapctl.1" <<<"$common")
	[ -z "$missing" ] || { echo "heapctl help: not in heapctl.1:" $missing >&2; false; }
	# the check can fail: report's help against heapctl(1), which leaves
	# report's options to heapctl-report(1)
	missing=$("$HEAPCTL" help report | options_missing "$root/man/heapctl.1")
	grep -qx -- '--keep-wrappers' <<<"$missing"
	grep -qx -- '--symcache' <<<"$missing"
}

@test "every page is in heapctl(1)'s SEE ALSO, and each family page points back to heapctl(1)" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	local see
	see=$(sed -n '/^\.SH SEE ALSO/,/^\.SH/p' "$root/man/heapctl.1" | sed 's/\\-/-/g')
	[ -n "$see" ]
	local m name sec
	for m in "$root"/man/*.[0-9]; do
		name=$(basename "$m")
		sec=${name##*.}
		name=${name%.*}
		[ "$name" = heapctl ] && continue
		grep -q "^\.BR $name ($sec)" <<<"$see" || { echo "heapctl(1) SEE ALSO lacks $name($sec)" >&2; false; }
		sed -n '/^\.SH SEE ALSO/,$p' "$m" | grep -q '^\.BR heapctl (1)' || { echo "$name($sec) does not point to heapctl(1)" >&2; false; }
	done
}

@test "the README is a front door of at most 200 lines, its map names folders that exist, and each folder's README is a few lines" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	[ "$(wc -l <"$root/README.md")" -le 200 ]
	local dirs
	dirs=$(sed -n '/^## Where things are/,/^## /p' "$root/README.md" | sed -n 's/^| `\([^`]*\/\)` |.*/\1/p')
	# the tree of heapctl-internals(7): allocator, agent, shm, heapctl's ten, man, tests
	[ "$(wc -w <<<"$dirs")" -ge 15 ]
	local d
	for d in $dirs; do
		[ -d "$root/$d" ] || { echo "README's map names $d, which does not exist" >&2; false; }
		grep -q "^\.I $d\$" "$root/man/heapctl-internals.7" || { echo "heapctl-internals(7) does not describe $d" >&2; false; }
	done
	# the folders' own notes stay as short as shm/README.md: heapctl-internals(7) has the rest
	local r n=0
	while read -r r; do
		[ "$(wc -l <"$r")" -le 15 ] || { echo "$r has over 15 lines: move them to heapctl-internals(7)" >&2; false; }
		n=$((n + 1))
	done < <(find "$root" -mindepth 2 -name README.md -not -path '*/build*' -not -path '*/.git/*')
	[ "$n" -ge 3 ]
	# every page the README lists is in man/, and every page of man/ is listed
	local listed
	listed=$(sed -n 's/^| \([a-z-]*\)(\([1-8]\)) |.*/\1.\2/p' "$root/README.md")
	[ "$listed" ]
	[ "$(sort <<<"$listed")" = "$(cd "$root/man" && ls -1 *.[1-8] | sort)" ]
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
	[ "$(wc -w <<<"$opts")" -eq 27 ]
	[ "$opts" = "$(settings_block "$root/man/libheapctl.3" | sed -n 's/^\.BR \([a-z_]*\) .*/\1/p')" ]
}

@test "the README's test command is what CI runs" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	grep -q '^make check' "$root/README.md"
	grep -q '^make check$' "$root/.ci/run"
}

@test "every C file follows .clang-format (make format-check), which names a file that does not" {
	local root
	root=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	# without clang-format the target says SKIP and passes
	run make -s --no-print-directory -C "$root" format-check CLANG_FORMAT_BIN=clang-format-absent
	[ "$status" -eq 0 ]
	[ "$output" = "format-check: SKIP: clang-format-absent is not installed" ]
	command -v clang-format >/dev/null || skip "SKIP: clang-format is not installed (tests/deps.sh installs it)"
	clang-format --version | grep -q ' version 14\.' || skip "SKIP: $(clang-format --version) is not clang-format 14"
	run make -s --no-print-directory -C "$root" format-check
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ "$output" == "format-check: the "*" C files follow .clang-format" ]]
	# a copy of a source whose first indented line is indented with spaces
	cp "$root/allocator/os.c" "$BATS_TEST_TMPDIR/drift.c"
	sed -i '0,/^\t/s/^\t/        /' "$BATS_TEST_TMPDIR/drift.c"
	run make -s --no-print-directory -C "$root" format-check FORMATTED="$BATS_TEST_TMPDIR/drift.c"
	[ "$status" -ne 0 ]
	[[ "$output" == *"format-check: $BATS_TEST_TMPDIR/drift.c does not follow .clang-format"* ]]
}
