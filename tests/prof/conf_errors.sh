#!/usr/bin/env bash
# conf_errors: configuration from MALLOC_CONF and HEAPCTL_CONF.
#
#  * each malformed or unknown pair gives exactly one line on stderr,
#      <heapctl>: MALLOC_CONF: ignoring "<pair>": <reason>
#    and the program's output and exit status are what they are without
#    the library;
#  * HEAPCTL_CONF is read after MALLOC_CONF and wins on the same name
#    (seen through mallctl opt.lg_prof_sample and opt.prof_prefix);
#  * the options that need profiling imply prof:true.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup conf_errors "$@"

# A program that knows nothing of the library: output and exit status 3.
cat >"$WORK/plain.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

int main(void)
{
	long sum = 0;
	for (int i = 1; i <= 1000; i++) {
		char *p = malloc((size_t)i * 10);
		memset(p, i & 0xff, (size_t)i * 10);
		sum += p[i];
		sink = p;
		free(p);
	}
	printf("hello %d sum %ld\n", 42, sum);
	return 3;
}
EOF
compile "$WORK/plain" "$WORK/plain.c"

# A program that reads the resulting options.
cat >"$WORK/opts.c" <<'EOF'
#include <heapctl.h>
#include <stdbool.h>
#include <stdio.h>

int main(void)
{
	bool prof = false, active = false;
	size_t lg = 99, len;
	const char *prefix = NULL;
	len = sizeof prof;
	int e1 = mallctl("opt.prof", &prof, &len, NULL, 0);
	len = sizeof lg;
	int e2 = mallctl("opt.lg_prof_sample", &lg, &len, NULL, 0);
	len = sizeof prefix;
	int e3 = mallctl("opt.prof_prefix", &prefix, &len, NULL, 0);
	len = sizeof active;
	int e4 = mallctl("prof.active", &active, &len, NULL, 0);
	printf("prof %d lg %zu prefix %s active %d\n", (int)prof, lg, prefix ? prefix : "(null)", (int)active);
	if (e1 || e2 || e3 || e4)
		printf("errors %d %d %d %d\n", e1, e2, e3, e4);
	return 0;
}
EOF
compile_linked "$WORK/opts" "$WORK/opts.c"
mkdir -p "$WORK/cwd"

run baseline "$WORK/cwd" "$WORK/plain"
base_rc=$RC
check_eq "baseline (no library): exit status" "$base_rc" 3
run baseline_lib "$WORK/cwd" LD_PRELOAD="$LIB" "$WORK/plain"
check_eq "library, no configuration: exit status" "$RC" "$base_rc"
check_eq "library, no configuration: output" "$(cat "$WORK/baseline_lib.out")" "$(cat "$WORK/baseline.out")"
check_stderr_empty baseline_lib

n=0
# bad <VAR> <value> <expected stderr, lines separated by '|'; a trailing
# '*' on a line matches any rest of that line>
bad() {
	local var=$1 val=$2 want=$3
	n=$((n + 1))
	local tag=bad$n
	run "$tag" "$WORK/cwd" "$var=$val" LD_PRELOAD="$LIB" "$WORK/plain"
	check_eq "$var=$val: exit status" "$RC" "$base_rc"
	check_eq "$var=$val: program output" "$(cat "$WORK/$tag.out")" "$(cat "$WORK/baseline.out")"
	local got_lines want_lines i
	mapfile -t got_lines <"$WORK/$tag.err"
	IFS='|' read -r -a want_lines <<<"$want"
	if [ "${#got_lines[@]}" -ne "${#want_lines[@]}" ]; then
		fail "$var=$val: ${#got_lines[@]} lines on stderr, expected ${#want_lines[@]}: $(tr '\n' '|' <"$WORK/$tag.err")"
		return 0
	fi
	for i in "${!want_lines[@]}"; do
		local w=${want_lines[$i]} g=${got_lines[$i]}
		if [[ "$w" == *'*' ]]; then
			[[ "$g" == "${w%\*}"* ]] || fail "$var=$val: stderr line $((i + 1)): got '$g', expected '${w%\*}...'"
		else
			[ "$g" = "$w" ] || fail "$var=$val: stderr line $((i + 1)): got '$g', expected '$w'"
		fi
	done
	heap=$(heap_files "$WORK/cwd")
	[ -z "$heap" ] || fail "$var=$val: dump files written: $heap"
	return 0
}

H='<heapctl>: MALLOC_CONF: ignoring'
bad MALLOC_CONF lg_prof_sample:abc "$H \"lg_prof_sample:abc\": expected an integer from 0 to 62"
bad MALLOC_CONF lg_prof_sample:63 "$H \"lg_prof_sample:63\": expected an integer from 0 to 62"
bad MALLOC_CONF lg_prof_sample:-1 "$H \"lg_prof_sample:-1\": expected an integer from 0 to 62"
bad MALLOC_CONF lg_prof_sample: "$H \"lg_prof_sample:\": expected an integer from 0 to 62"
bad MALLOC_CONF lg_prof_interval:-2 "$H \"lg_prof_interval:-2\": expected an integer from -1 to 62"
bad MALLOC_CONF prof:yes "$H \"prof:yes\": expected true or false"
bad MALLOC_CONF prof_leak:1 "$H \"prof_leak:1\": expected true or false"
bad MALLOC_CONF prof_active:TRUE "$H \"prof_active:TRUE\": expected true or false"
bad MALLOC_CONF no_such_option:1 "$H \"no_such_option:1\": unknown option"
# a MALLOC_CONF written for jemalloc: its options heapctl has nothing for
bad MALLOC_CONF background_thread:true,metadata_thp:auto,prof:true "$H \"background_thread:true\": jemalloc's option, which heapctl does not have|$H \"metadata_thp:auto\": jemalloc's option, which heapctl does not have"
bad MALLOC_CONF prof "$H \"prof\": expected name:value"
bad MALLOC_CONF prof_unwind:xyz "$H \"prof_unwind:xyz\": *"
bad MALLOC_CONF prof_threshold:lots "$H \"prof_threshold:lots\": *"
bad MALLOC_CONF prof_timer_s:-5 "$H \"prof_timer_s:-5\": *"
# several problems: one line each, in order; the good pairs still apply
bad MALLOC_CONF prof:yes,bogus:1,lg_prof_sample:7 "$H \"prof:yes\": expected true or false|$H \"bogus:1\": unknown option"
bad HEAPCTL_CONF prof:maybe "<heapctl>: HEAPCTL_CONF: ignoring \"prof:maybe\": expected true or false"
bad HEAPCTL_CONF lg_prof_sample:x "<heapctl>: HEAPCTL_CONF: ignoring \"lg_prof_sample:x\": expected an integer from 0 to 62"

# valid settings print nothing and change nothing the program sees
for conf in "" prof:false prof:true lg_prof_sample:0 prof:true,lg_prof_sample:7,prof_active:false; do
	n=$((n + 1))
	run "good$n" "$WORK/cwd" MALLOC_CONF="$conf" LD_PRELOAD="$LIB" "$WORK/plain"
	check_eq "MALLOC_CONF='$conf': exit status" "$RC" "$base_rc"
	check_eq "MALLOC_CONF='$conf': program output" "$(cat "$WORK/good$n.out")" "$(cat "$WORK/baseline.out")"
	check_stderr_empty "good$n"
done

# ---- the options as the program sees them ---------------------------------
# opts <expected line> [VAR=value...]
opts() {
	local want=$1
	shift
	n=$((n + 1))
	rm -rf "$WORK/ocwd" && mkdir -p "$WORK/ocwd"
	run "opts$n" "$WORK/ocwd" "$@" "$WORK/opts"
	check_eq "opts with $*: exit status" "$RC" 0
	check_eq "opts with $*" "$(cat "$WORK/opts$n.out")" "$want"
	OPTS_ERR=$(cat "$WORK/opts$n.err")
}

opts "prof 0 lg 19 prefix jeprof active 0"
check_eq "defaults: stderr" "$OPTS_ERR" ""
opts "prof 0 lg 5 prefix jeprof active 0" MALLOC_CONF=lg_prof_sample:5
opts "prof 0 lg 9 prefix jeprof active 0" HEAPCTL_CONF=lg_prof_sample:9
opts "prof 0 lg 9 prefix jeprof active 0" MALLOC_CONF=lg_prof_sample:5 HEAPCTL_CONF=lg_prof_sample:9
opts "prof 1 lg 9 prefix hc active 1" MALLOC_CONF=prof:true,lg_prof_sample:5,prof_prefix:mc HEAPCTL_CONF=prof_prefix:hc,lg_prof_sample:9
opts "prof 1 lg 5 prefix jeprof active 1" MALLOC_CONF=prof:false,lg_prof_sample:5 HEAPCTL_CONF=prof:true
# a bad value in HEAPCTL_CONF leaves MALLOC_CONF's
opts "prof 0 lg 5 prefix jeprof active 0" MALLOC_CONF=lg_prof_sample:5 HEAPCTL_CONF=lg_prof_sample:abc
check_eq "bad HEAPCTL_CONF value: stderr" "$OPTS_ERR" \
    '<heapctl>: HEAPCTL_CONF: ignoring "lg_prof_sample:abc": expected an integer from 0 to 62'
# a bad pair before a good one of the same name
opts "prof 0 lg 7 prefix jeprof active 0" MALLOC_CONF=lg_prof_sample:abc,lg_prof_sample:7
# the last of a name wins within one variable
opts "prof 0 lg 3 prefix jeprof active 0" MALLOC_CONF=lg_prof_sample:8,lg_prof_sample:3
opts "prof 1 lg 19 prefix jeprof active 0" MALLOC_CONF=prof:true,prof_active:false

# options that imply prof:true
for c in prof_leak:true prof_final:true prof_gdump:true lg_prof_interval:30 prof_timer_s:100 prof_threshold:1G; do
	opts "prof 1 lg 19 prefix jeprof active 1" MALLOC_CONF="$c"
	if [ "$c" = prof_leak:true ]; then
		# the program's stdio buffer is live at exit: about one run in a
		# hundred samples it, and prof_leak then rightly reports it
		OPTS_ERR=$(printf '%s\n' "$OPTS_ERR" | grep -Ev '^<heapctl>: (Leak approximation summary: ~[0-9]+ bytes, ~[0-9]+ objects, >= [0-9]+ contexts?|Run jeprof on "jeprof\.[0-9]+\.0\.f\.heap" for leak detail)$' || true)
	fi
	check_eq "$c: stderr" "$OPTS_ERR" ""
done
for c in prof_leak:false prof_final:false prof_gdump:false lg_prof_interval:-1 prof_timer_s:0; do
	opts "prof 0 lg 19 prefix jeprof active 0" MALLOC_CONF="$c"
done

check_no_tmp "$WORK"
finish
