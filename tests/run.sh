#!/usr/bin/env bash
# Run every test of `make check`: the C unit and stress programs, the real
# programs under LD_PRELOAD, and the bats suites.  Prints one line per test
# and a closing "N passed, N failed".
#   HC_TESTS="report cli"   only these groups (unit stress real prof report
#                           systemd containers cli); make check's sanitizer
#                           pass uses it
# A test that cannot run on this machine at all prints "SKIP name: why" and
# passes; the line is repeated here, so that a skip is never silent.
set -uo pipefail
groups=${HC_TESTS:-unit stress real prof report systemd containers cli}
want() { [[ " $groups " == *" $1 "* ]]; }
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
lib="$root/$build/libheapctl.so"
pass=0 fail=0 failed=()
run() {   # name, command...
	local name=$1; shift
	local log="$root/$build/tests/$name.log"
	mkdir -p "$(dirname "$log")"
	local t0=$SECONDS
	if timeout "${RUN_TIMEOUT:-300}" "$@" >"$log" 2>&1; then
		pass=$((pass + 1)); echo "ok   $name ($((SECONDS - t0))s)"
		grep -m 1 '^SKIP ' "$log" | sed 's/^/     ! /'
	else
		fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name ($((SECONDS - t0))s)"
		# what failed first (a bats "not ok" and its diagnostics, a FAIL
		# line), then how the log begins (a message from ld.so, say) and ends
		grep -n -m 3 -A 12 -E '^not ok|^FAIL|FAIL:' "$log" | sed 's/^/     ! /'
		head -n 3 "$log" | sed 's/^/     < /'
		tail -n 20 "$log" | sed 's/^/     | /'
	fi
}
for t in "$root/$build"/tests/unit/* "$root/$build"/tests/stress/*; do
	[[ -x $t && -f $t ]] || continue
	case "$t" in *.log) continue ;; esac
	want "$(basename "$(dirname "$t")")" || continue
	run "$(basename "$(dirname "$t")")/$(basename "$t")" "$t"
done
# libheapctl-secure.so (the misuse checks) through the API and stress tests
if want unit && [ -f "$root/$build/libheapctl-secure.so" ]; then
	for t in unit/api unit/cxx stress/stress stress/misc; do
		[ -x "$root/$build/tests/$t" ] &&
			run "$t-secure" env LD_PRELOAD="$root/$build/libheapctl-secure.so" "$root/$build/tests/$t"
	done
fi
# the allocator alone (allocator/ with the agent's hooks stubbed, sampling
# every 64 KiB): its tests, built without -lheapctl, have no mallctl to use
if want unit && [ -f "$root/$build/libheapctl-alone.so" ]; then
	for t in unit/api unit/cxx stress/stress stress/misc stress/churn stress/fork; do
		[ -x "$root/$build/tests-alone/$t" ] &&
			run "$t-alone" env LD_PRELOAD="$root/$build/libheapctl-alone.so" \
			    HC_TEST_ALLOW_NO_MALLCTL=1 "$root/$build/tests-alone/$t"
	done
fi
want real && [ -x "$root/tests/real/run.sh" ] && run real/programs "$root/tests/real/run.sh" "$lib"
for t in "$root"/tests/prof/*.sh; do
	want prof && [ -x "$t" ] || continue
	case "$(basename "$t")" in lib.sh) continue ;; esac
	run "prof/$(basename "$t" .sh)" "$t" "$root/$build"
done
for t in "$root/$build"/tests/engine/*; do
	want report && [[ -x $t && -f $t ]] || continue
	case "$t" in *.log) continue ;; esac
	run "engine/$(basename "$t")" "$t"
done
for t in "$root"/tests/report/*.sh; do
	want report && [ -x "$t" ] || continue
	case "$(basename "$t")" in lib.sh) continue ;; esac
	run "report/$(basename "$t" .sh)" "$t" "$root/$build"
done
# systemd/*.sh boot a real systemd in a container; the first run also builds
# its root file system (mmdebstrap, ~75 s more), hence the longer limit.
for t in "$root"/tests/systemd/*.sh; do
	want systemd && [ -x "$t" ] || continue
	case "$(basename "$t")" in lib.sh) continue ;; esac
	RUN_TIMEOUT=900 run "systemd/$(basename "$t" .sh)" "$t" "$root/$build"
done
# containers/*.sh run podman containers of an image made with mmdebstrap
# and cached as systemd's root file system is (its first build ~30 s more)
for t in "$root"/tests/containers/*.sh; do
	want containers && [ -x "$t" ] || continue
	case "$(basename "$t")" in lib.sh) continue ;; esac
	RUN_TIMEOUT=600 run "containers/$(basename "$t" .sh)" "$t" "$root/$build"
done
if want cli && ls "$root"/tests/cli/*.bats >/dev/null 2>&1; then
	for b in "$root"/tests/cli/*.bats; do
		run "cli/$(basename "$b" .bats)" env HEAPCTL_BUILD="$root/$build" bats "$b"
	done
fi
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
