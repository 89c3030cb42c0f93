#!/usr/bin/env bash
# pprof: `heapctl report DUMP --pprof F.pb.gz`, read back by the real
# `go tool pprof`:
#   - for a heapctl dump and a jemalloc dump (3 threads, several call paths,
#     lg_prof_sample:12): pprof's inuse_space and inuse_objects totals are
#     jeprof --text's within 2%, and so is each thread's share; the
#     allocating functions are in pprof -top;
#   - pprof -raw: the four sample types (inuse_space the default), period
#     type and period, every location has a mapping, the malloc call's
#     function and file:line, the executable's mapping has its build id,
#     every sample a thread label;
#   - an always_inline function: one location with two lines (inner, then
#     outer), "inner (inline)" in pprof -top, [IN] on the mapping;
#   - --thread N: only thread N's samples, its total as jeprof --thread=N;
#   - two dumps of one process: pprof -diff_base shows the growth, and so
#     does heapctl report B --base A --pprof;
#   - a file that cannot be written: exit 1, one line, nothing left behind.
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup pprof "$@"
hr_need go readelf gzip
if ! (cd "$WORK" && HOME=$WORK go tool pprof -h >/dev/null 2>&1); then
	echo "FAIL $TEST_NAME: 'go tool pprof' does not run (Debian golang-go)" >&2
	exit 1
fi

cat >"$WORK/pp.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *keep[20000];
static int nkeep;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void hold(void *p)
{
	memset(p, 1, 16);
	pthread_mutex_lock(&mu);
	keep[nkeep++] = p;
	pthread_mutex_unlock(&mu);
}

__attribute__((noinline)) void pp_alloc_small(int n)
{
	for (int i = 0; i < n; i++)
		hold(malloc(64));
}

__attribute__((noinline)) void pp_alloc_medium(int n)
{
	for (int i = 0; i < n; i++)
		hold(malloc(1500)); /* MARK_MEDIUM */
}

__attribute__((noinline)) void pp_alloc_large(int n)
{
	for (int i = 0; i < n; i++)
		hold(malloc(65536));
}

__attribute__((noinline)) void pp_path_one(void)
{
	pp_alloc_medium(300);
}

__attribute__((noinline)) void pp_path_two(void)
{
	pp_alloc_medium(200);
	pp_alloc_small(4000);
}

__attribute__((noinline)) void *pp_worker(void *arg)
{
	int k = (int)(long)arg;
	pp_alloc_large(6 + 4 * k);
	pp_alloc_small(1500 + 1000 * k);
	return NULL;
}

int main(void)
{
	pp_path_one();
	pp_path_two();
	pthread_t t[2];
	for (long k = 0; k < 2; k++)      /* one after the other: thread ids 1, 2 */
		if (pthread_create(&t[k], NULL, pp_worker, (void *)k) != 0 || pthread_join(t[k], NULL) != 0)
			return 1;
	printf("kept %d\n", nkeep);
	return 0;
}
EOF
compile "$WORK/pp" "$WORK/pp.c"
LINE_MEDIUM=$(grep -n MARK_MEDIUM "$WORK/pp.c" | cut -d: -f1)
BUILD_ID=$(readelf -n "$WORK/pp" | awk '/Build ID:/ { print $3; exit }')
if [ -z "$BUILD_ID" ]; then
	fail "readelf -n $WORK/pp shows no build id (the checks of the mapping's build id need one)"
fi

# raw_check <tag> <pprof -raw output> <dump>: the structure of the profile.
raw_check() {
	local tag=$1 raw=$2 dump=$3
	local types
	types=$(awk '/^Samples:/ { getline; print; exit }' "$raw")
	local t
	for t in alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes; do
		case " $types " in
		*" $t "* | *" ${t}[dflt] "*) ;;
		*) fail "$tag: pprof -raw sample types '$types' lack $t" ;;
		esac
	done
	case " $types " in
	*" inuse_space/bytes[dflt] "*) ;;
	*) fail "$tag: the default sample type is not inuse_space: '$types'" ;;
	esac
	# every location line ("  N: 0xADDR M=N name file:line s=0") has a mapping
	local nloc bad
	nloc=$(awk '/^Locations/ { on = 1; next } /^Mappings/ { on = 0 } on && /^ *[0-9]+: 0x/' "$raw" | wc -l)
	bad=$(awk '/^Locations/ { on = 1; next } /^Mappings/ { on = 0 } on && /^ *[0-9]+: 0x/ && !/ M=[1-9][0-9]* /' "$raw")
	if [ "$nloc" -eq 0 ]; then
		fail "$tag: pprof -raw shows no locations"
	elif [ -n "$bad" ]; then
		fail "$tag: locations without a mapping: $(echo "$bad" | head -3)"
	fi
	# the call of malloc in pp_alloc_medium: its function, file and line
	local medium
	medium=$(awk '/^Locations/ { on = 1; next } /^Mappings/ { on = 0 } on && / pp_alloc_medium / { print; exit }' "$raw")
	case "$medium" in
	*" M="*" pp_alloc_medium $WORK/pp.c:$LINE_MEDIUM "*) ;;
	*) fail "$tag: location of the malloc in pp_alloc_medium is '$medium', expected 'pp_alloc_medium $WORK/pp.c:$LINE_MEDIUM'" ;;
	esac
	check_eq "$tag: pprof -raw PeriodType" "$(sed -n 's/^PeriodType: //p' "$raw")" "space bytes"
	check_eq "$tag: pprof -raw Period" "$(sed -n 's/^Period: //p' "$raw")" 4096
	# the executable's mapping and its build id
	local mline
	mline=$(awk -v p="$WORK/pp" '/^Mappings/ { on = 1; next } on && $3 == p { print; exit }' "$raw")
	if [ -z "$mline" ]; then
		fail "$tag: no mapping for $WORK/pp in pprof -raw: $(sed -n '/^Mappings/,$p' "$raw" | head -5)"
	else
		check_eq "$tag: build id of the mapping of pp" "$(echo "$mline" | awk '{ print $4 }')" "$BUILD_ID"
		case "$mline" in
		*"[FN]"*) ;;
		*) fail "$tag: the mapping of pp is not marked as having functions ([FN]): $mline" ;;
		esac
	fi
	# every sample with a value has a thread label, and the labels are the
	# dump's threads
	local unlabelled labels want
	unlabelled=$(awk '
	    function done() { if (open && nz && !lab) n++; open = 0 }
	    /^Samples:/ { on = 1; getline; next }
	    /^Locations/ { done(); on = 0 }
	    !on { next }
	    /^ *-?[0-9]+ +-?[0-9]+ +-?[0-9]+ +-?[0-9]+:/ {
		done(); open = 1; lab = 0; sub(/:.*/, ""); nz = ($1 != 0 || $2 != 0 || $3 != 0 || $4 != 0); next
	    }
	    /thread:\[/ { lab = 1 }
	    END { done(); print n + 0 }' "$raw")
	check_eq "$tag: samples with values but no thread label" "$unlabelled" 0
	labels=$(grep -o 'thread:\[[0-9]*' "$raw" | sed 's/.*\[//' | sort -un | tr '\n' ' ')
	want=$(awk '$1 ~ /^t[0-9]+:$/ && ($2 != "0:" || $3 != "0") { sub(/^t/, "", $1); sub(/:$/, "", $1); print $1 }' "$dump" | sort -un | tr '\n' ' ')
	check_eq "$tag: thread labels in the pprof file (threads with data in the dump)" "$labels" "$want"
}

# thread_sum <pprof -raw output> <thread> <column 1..4>: that sample
# type's sum over the samples labelled with the thread.
thread_sum() {
	awk -v t="$2" -v c="$3" '
	    function done() { if (open && th == t) s += v; open = 0 }
	    /^Samples:/ { on = 1; getline; next }
	    /^Locations/ { done(); on = 0 }
	    !on { next }
	    /^ *-?[0-9]+ +-?[0-9]+ +-?[0-9]+ +-?[0-9]+:/ { done(); open = 1; th = ""; sub(/:.*/, ""); v = $c; next }
	    /thread:\[/ { x = $0; sub(/.*thread:\[/, "", x); sub(/[^0-9].*/, "", x); th = x }
	    END { done(); printf "%.0f\n", s }' "$1"
}

# check_dump <tag> <dump>: the pprof file of one dump against jeprof.
check_dump() {
	local tag=$1 dump=$2
	local pb="$WORK/$tag.pb.gz"
	hr_ok "$tag-write" "$dump" --pprof "$pb" || return 0
	check_eq "$tag: stdout of --pprof" "$(cat "$WORK/$tag-write.out")" "wrote pprof profile $pb"
	check_stderr_empty "$tag-write"
	if [ ! -s "$pb" ]; then
		fail "$tag: $pb not written"
		return 0
	fi
	if ! gzip -t "$pb" 2>/dev/null; then
		fail "$tag: $pb is not gzip"
		return 0
	fi
	# totals against jeprof
	if jp "$WORK/$tag.jp-space" "$WORK/pp" "$dump" &&
		gopp "$WORK/$tag.pp-space" -top -unit=B -sample_index=inuse_space "$pb"; then
		check_pct "$tag: pprof inuse_space total vs jeprof's" \
			"$(pp_total "$WORK/$tag.pp-space")" "$(jp_total "$WORK/$tag.jp-space")" 2
		local f
		for f in pp_alloc_small pp_alloc_medium pp_alloc_large; do
			local v
			v=$(pp_flat "$WORK/$tag.pp-space" "$f")
			if [ "$v" = absent ] || [ "$v" = 0 ]; then
				fail "$tag: $f has no flat row in pprof -top: $(sed -n '/flat%/,$p' "$WORK/$tag.pp-space" | head -12 | tr '\n' '|')"
			fi
		done
	fi
	if jp "$WORK/$tag.jp-obj" --inuse_objects "$WORK/pp" "$dump" &&
		gopp "$WORK/$tag.pp-obj" -top -sample_index=inuse_objects "$pb"; then
		check_pct "$tag: pprof inuse_objects total vs jeprof's" \
			"$(pp_total "$WORK/$tag.pp-obj")" "$(jp_total "$WORK/$tag.jp-obj")" 2
	fi
	# structure
	gopp "$WORK/$tag.raw" -raw "$pb" || return 0
	raw_check "$tag" "$WORK/$tag.raw" "$dump"
	# each thread's share (the labels) against jeprof --thread
	local th
	for th in $(awk '$1 ~ /^t[0-9]+:$/ && $3 != "0" { sub(/^t/, "", $1); sub(/:$/, "", $1); print $1 }' "$dump" | sort -un); do
		if jp "$WORK/$tag.jp-t$th" --thread="$th" "$WORK/pp" "$dump"; then
			check_pct "$tag: inuse_space of the samples labelled thread $th vs jeprof --thread=$th" \
				"$(thread_sum "$WORK/$tag.raw" "$th" 4)" "$(jp_total "$WORK/$tag.jp-t$th")" 2
		fi
	done
}

# ---- a heapctl dump and a jemalloc dump ---------------------------------
HC_DUMP="" JE_DUMP=""
if prof_heapctl hc "$WORK/pp" lg_prof_sample:12; then
	HC_DUMP=$DUMP
	check_dump hc "$HC_DUMP"
fi
if prof_jemalloc je "$WORK/pp" lg_prof_sample:12; then
	JE_DUMP=$DUMP
	check_dump je "$JE_DUMP"
fi

# ---- --thread N: only that thread's samples -----------------------------
if [ -n "$HC_DUMP" ]; then
	# the second worker: the highest thread id with data
	th=$(awk '$1 ~ /^t[0-9]+:$/ && $3 != "0" { sub(/^t/, "", $1); sub(/:$/, "", $1); print $1 }' "$HC_DUMP" | sort -n | tail -1)
	if [ -z "$th" ] || [ "$th" -eq 0 ]; then
		fail "thread: the heapctl dump has no worker thread lines"
	elif hr_ok thr-write "$HC_DUMP" --thread "$th" --pprof "$WORK/thr.pb.gz" &&
		gopp "$WORK/thr.raw" -raw "$WORK/thr.pb.gz" &&
		gopp "$WORK/thr.top" -top -unit=B "$WORK/thr.pb.gz"; then
		others=$(grep -o 'thread:\[[0-9]*' "$WORK/thr.raw" | sed 's/.*\[//' | sort -u | grep -vx "$th" | tr '\n' ' ' || true)
		check_eq "--thread $th: samples of other threads" "$others" ""
		nsamples=$(awk '/^Samples:/ { on = 1; getline; next } /^Locations/ { on = 0 } on && /^ *-?[0-9]+ +-?[0-9]+ +-?[0-9]+ +-?[0-9]+:/' "$WORK/thr.raw" | wc -l)
		nlabelled=$(grep -c "thread:\[$th " "$WORK/thr.raw" || true)
		check_eq "--thread $th: samples labelled thread $th (of $nsamples)" "$nlabelled" "$nsamples"
		if jp "$WORK/thr.jp" --thread="$th" "$WORK/pp" "$HC_DUMP"; then
			check_pct "--thread $th: pprof total vs jeprof --thread=$th" \
				"$(pp_total "$WORK/thr.top")" "$(jp_total "$WORK/thr.jp")" 2
		fi
		check_eq "--thread $th: pp_worker in pprof -top" \
			"$(awk '$NF == "pp_worker" { print "yes"; exit }' "$WORK/thr.top")" yes
		for f in pp_path_one pp_path_two pp_alloc_medium main; do
			check_eq "--thread $th: $f (main thread only) in pprof -top" \
				"$(awk -v f="$f" '$NF == f { print "yes"; exit }' "$WORK/thr.top")" ""
		done
	fi
fi

# ---- two dumps of one process: -diff_base and --base --pprof -------------
cat >"$WORK/grow.c" <<'EOF'
#include <heapctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *base[100], *grown[250];

__attribute__((noinline)) void site_base(void)       /* 100 x 1000, stays */
{
	for (int i = 0; i < 100; i++) {
		base[i] = malloc(1000);
		memset(base[i], 1, 1000);
	}
}

__attribute__((noinline)) void site_growth(void)     /* 250 x 400 (448) = 112000 */
{
	for (int i = 0; i < 250; i++) {
		grown[i] = malloc(400);
		memset(grown[i], 2, 400);
	}
}

int main(void)
{
	site_base();
	int e1 = mallctl("prof.dump", NULL, NULL, NULL, 0);
	site_growth();
	int e2 = mallctl("prof.dump", NULL, NULL, NULL, 0);
	printf("dumps %d %d\n", e1, e2);
	return 0;
}
EOF
compile_linked "$WORK/grow" "$WORK/grow.c"
run grow "$WORK" HEAPCTL_CONF="prof:true,lg_prof_sample:0,prof_prefix:$WORK/g" "$WORK/grow"
check_eq "grow: exit status" "$RC" 0
check_eq "grow: mallctl prof.dump results" "$(grep '^dumps ' "$WORK/grow.out" || true)" "dumps 0 0"
A=$(ls "$WORK"/g.*.0.m0.heap 2>/dev/null || true)
B=$(ls "$WORK"/g.*.1.m1.heap 2>/dev/null || true)
if [ -z "$A" ] || [ -z "$B" ]; then
	fail "grow: dumps g.PID.0.m0.heap and g.PID.1.m1.heap not written: $(cd "$WORK" && echo g.*)"
else
	if hr_ok diffA "$A" --pprof "$WORK/A.pb.gz" && hr_ok diffB "$B" --pprof "$WORK/B.pb.gz" &&
		gopp "$WORK/diff.top" -top -unit=B -diff_base="$WORK/A.pb.gz" "$WORK/B.pb.gz"; then
		# with -diff_base, pprof's "of N total" is the base's: 100 x 1024
		check_eq "pprof -diff_base A B: total" "$(pp_total "$WORK/diff.top")" 102400
		check_eq "pprof -diff_base A B: site_growth flat" "$(pp_flat "$WORK/diff.top" site_growth)" 112000
		case "$(pp_flat "$WORK/diff.top" site_base)" in
		absent | 0) ;;
		*) fail "pprof -diff_base A B: site_base (no growth) shows $(pp_flat "$WORK/diff.top" site_base)" ;;
		esac
	fi
	if hr_ok based "$B" --base "$A" --pprof "$WORK/D.pb.gz" &&
		gopp "$WORK/based.top" -top -unit=B "$WORK/D.pb.gz"; then
		check_eq "report B --base A --pprof: pprof total" "$(pp_total "$WORK/based.top")" 112000
		check_eq "report B --base A --pprof: site_growth flat" "$(pp_flat "$WORK/based.top" site_growth)" 112000
		case "$(pp_flat "$WORK/based.top" site_base)" in
		absent | 0) ;;
		*) fail "report B --base A --pprof: site_base (no growth) shows $(pp_flat "$WORK/based.top" site_base)" ;;
		esac
		gopp "$WORK/based.raw" -raw "$WORK/D.pb.gz" || true
	fi
	if hr_ok based-text "$B" --base "$A" --bytes; then
		check_eq "report B --base A --bytes: Total" "$(jp_total "$WORK/based-text.out")" 112000
	fi
fi

# ---- inlined frames: one location, two lines ----------------------------------
write_inline_prog "$WORK/inl.c"
if ! gcc -O2 -g -o "$WORK/inl" "$WORK/inl.c" 2>"$WORK/inl.cc.log"; then
	fail "cannot compile inl.c: $(head -5 "$WORK/inl.cc.log")"
elif prof_heapctl inl "$WORK/inl" lg_prof_sample:0 && hr_ok inl-write "$DUMP" --pprof "$WORK/inl.pb.gz" &&
	gopp "$WORK/inl.top" -top -unit=B "$WORK/inl.pb.gz" && gopp "$WORK/inl.raw" -raw "$WORK/inl.pb.gz"; then
	LINE_INNER=$(grep -n MARK_INNER "$WORK/inl.c" | cut -d: -f1)
	LINE_OUTER=$(grep -n MARK_OUTER "$WORK/inl.c" | cut -d: -f1)
	# usable bytes of malloc(1000 + i), i < 1000: 25 x 1024 + 256 x (1280 +
	# 1536 + 1792) + 207 x 2048
	check_eq "inline: pprof -top 'inner (inline)' flat" \
		"$(awk '$6 == "inner" && $7 == "(inline)" { v = $1; sub(/B$/, "", v); print v; exit }' "$WORK/inl.top")" 1629184
	check_eq "inline: pprof -top outer cum" \
		"$(awk '$6 == "outer" && NF == 6 { v = $4; sub(/B$/, "", v); print v; exit }' "$WORK/inl.top")" 1629184
	loc=$(awk '/^Locations/ { on = 1; next } /^Mappings/ { on = 0 } on && / inner / { print; getline; print; exit }' "$WORK/inl.raw")
	case "$loc" in
	*" inner $WORK/inl.c:$LINE_INNER "*$'\n'*" outer $WORK/inl.c:$LINE_OUTER "*) ;;
	*) fail "inline: location of the malloc is '$(echo "$loc" | tr '\n' '|')', expected lines 'inner inl.c:$LINE_INNER' then 'outer inl.c:$LINE_OUTER'" ;;
	esac
	grep -q "/inl .*\[IN\]" <(sed -n '/^Mappings/,$p' "$WORK/inl.raw") ||
		fail "inline: the mapping of inl is not marked as having inline frames ([IN]): $(grep '/inl ' "$WORK/inl.raw")"
fi

# ---- files that cannot be written -----------------------------------------
if [ -n "$HC_DUMP" ]; then
	hr_err nodir 1 "$HC_DUMP" --pprof "$WORK/missing/dir/out.pb.gz"
	if [ -e "$WORK/missing" ]; then
		fail "--pprof into a missing directory: $WORK/missing was created"
	fi
	mkdir "$WORK/adir"
	hr_err isdir 1 "$HC_DUMP" --pprof "$WORK/adir"
	if [ ! -d "$WORK/adir" ] || [ -n "$(ls -A "$WORK/adir")" ]; then
		fail "--pprof onto a directory: the directory was changed: $(ls -la "$WORK/adir" 2>&1 | head -3)"
	fi
	# an existing file is replaced by a complete profile
	echo "old" >"$WORK/over.pb.gz"
	if hr_ok over "$HC_DUMP" --pprof "$WORK/over.pb.gz" && gopp "$WORK/over.top" -top -unit=B "$WORK/over.pb.gz"; then
		check_pct "--pprof over an existing file: total" "$(pp_total "$WORK/over.top")" \
			"$(jp_total "$WORK/hc.jp-space" 2>/dev/null || echo absent)" 2
	fi
fi
check_no_tmp "$WORK"
finish
