#!/usr/bin/env bats
# tests/ptrace/inject.bats - heapctl inject PID / heapctl eject PID: the
# profiler loaded with ptrace into processes started without it.  Known
# sites of tests/programs/prog.c are checked against their sizes and the
# preload profiler's figures for the same program; Debian's python3, perl
# and redis-server have their allocation sites named; every command works
# on an injected process; eject and inject 200 times into a program with 8
# threads churning malloc and forking; clear refusals.  Needs root (ptrace
# of another process).  A chroot'ed process in a mount namespace of its own
# is injected too.

load ../lib/helpers

# helpers' teardown, after unmounting what a test mounted under $T (the
# chroot test binds the build directory and /dev/shm there, which rm -rf
# would otherwise empty)
teardown() {
	if [ -n "${T:-}" ]; then
		findmnt -rn -o TARGET | grep "^$T/" | sort -r | xargs -r umount -l
	fi
	helpers_teardown
}

setup_file() {
	export TB="$BATS_FILE_TMPDIR"
	gcc -O2 -g -pthread -o "$TB/prog" "$BATS_TEST_DIRNAME/../programs/prog.c"
	gcc -O2 -g -pthread -static -o "$TB/prog-static" "$BATS_TEST_DIRNAME/../programs/prog.c"
	gcc -O2 -g -pthread -o "$TB/churn" "$BATS_TEST_DIRNAME/../programs/churn.c"
	# a program under a seccomp filter (one that allows everything)
	cat >"$TB/filtered.c" <<-'EOF'
	#include <linux/filter.h>
	#include <linux/seccomp.h>
	#include <stdio.h>
	#include <sys/prctl.h>
	#include <unistd.h>
	int main(void)
	{
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		struct sock_fprog prog = { 1, &allow };
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			return 1;
		printf("ready\n");
		fflush(stdout);
		pause();
		return 0;
	}
	EOF
	gcc -O2 -o "$TB/filtered" "$TB/filtered.c"
	# a program of musl libc (musl-tools)
	printf '#include <stdio.h>\n#include <unistd.h>\nint main(void) { puts("ready"); fflush(stdout); pause(); }\n' \
	    >"$TB/musl.c"
	musl-gcc -O2 -o "$TB/musl" "$TB/musl.c"
	# a library loaded after the injection, and the program that loads it
	cat >"$TB/site.c" <<-'EOF'
	#include <stdlib.h>
	#include <string.h>
	__attribute__((noinline)) void *site_lib(void)
	{
		void *p = malloc(1024);
		memset(p, 'l', 1024);
		return p;
	}
	EOF
	gcc -O2 -g -shared -fPIC -o "$TB/libsite.so" "$TB/site.c"
	cat >"$TB/late.c" <<-'EOF'
	#include <dlfcn.h>
	#include <stdio.h>
	#include <unistd.h>
	static void wait_file(const char *f) { while (access(f, F_OK) != 0) usleep(10000); }
	int main(int argc, char **argv)
	{
		printf("ready\n");
		fflush(stdout);
		wait_file(argv[2]);
		void *h = dlopen(argv[1], RTLD_NOW);
		void *(*site)(void) = h ? (void *(*)(void))dlsym(h, "site_lib") : NULL;
		printf("loaded %d\n", site != NULL);
		fflush(stdout);
		wait_file(argv[3]);
		static void *keep[8192];
		for (int i = 0; site && i < 8192; i++)
			keep[i] = site();
		printf("done\n");
		fflush(stdout);
		wait_file(argv[4]);
		dlclose(h);                  /* its slots go with it */
		printf("closed\n");
		fflush(stdout);
		wait_file(argv[5]);
		return 0;
	}
	EOF
	gcc -O2 -g -o "$TB/late" "$TB/late.c" -ldl
}

# started PROG [ARGS...]: PROG without the library in the background, its
# output in $T/prog.out; PID= once it printed "ready"
started() {
	rm -f "$T/go" "$T/end" "$T/prog.out" "$T/prog.err" # no earlier run's "ready"
	env -u LD_PRELOAD "$@" >"$T/prog.out" 2>"$T/prog.err" &
	PID=$!
	track "$PID"
	wait_for 5 grep -q '^ready' "$T/prog.out"
}

# injected OUT PROG [ARGS...]: start PROG (it prints "ready", waits for
# $T/go, allocates, prints "done", waits for $T/end), inject, let it go,
# dump into OUT once it is done, and let it end
injected() {
	local out=$1
	shift
	started "$@"
	"$HEAPCTL" inject "$PID" --lg-sample 14 >/dev/null
	touch "$T/go"
	wait_for 10 grep -q '^done' "$T/prog.out"
	"$HEAPCTL" dump "$PID" -o "$out" 2>/dev/null
	touch "$T/end"
	wait "$PID"
}

# cum FILE FUNC: FUNC's cumulative bytes (Debian's python3 has its
# allocation wrappers unnamed: the site is their caller)
cum() {
	"$HEAPCTL" report "$1" --bytes --top 0 | awk -v fn="$2" '$NF == fn { print $4; found = 1 } END { if (!found) print 0 }'
}

# no thread of PID is stopped or traced
let_go() {
	# one process for all the threads (a thread that ended meanwhile is
	# skipped): the stress test calls this 200 times beside 8 busy threads
	cat /proc/"$1"/task/*/status 2>/dev/null | awk -v pid="$1" '
		/^Name:/ { name = $2 }
		/^State:.*t \(tracing stop\)/ { print "a thread of " pid " is stopped: " name > "/dev/stderr"; bad = 1 }
		/^TracerPid:/ && $2 != 0 { print "a thread of " pid " is traced: " name > "/dev/stderr"; bad = 1 }
		END { exit bad }'
}

@test "inject: known sites after the injection near their sizes and the preload profiler's; what came before is not counted" {
	need_root
	started "$TB/prog" "$T/go" "$T/end"
	run "$HEAPCTL" inject "$PID" --lg-sample 13 --conf prof_accum:true
	[ "$status" -eq 0 ]
	[[ "$output" == *"injected into process $PID: sampling on at lg_sample 13"* ]]
	[[ "$output" == *"the profile counts allocations from"* ]]
	let_go "$PID"
	run "$HEAPCTL" status "$PID"
	[[ "$output" == *"injected       heapctl inject"* ]]
	touch "$T/go"
	wait_for 10 grep -q '^done 18496' "$T/prog.out"
	run "$HEAPCTL" dump "$PID" -o "$T/i.heap"
	[ "$status" -eq 0 ]
	[[ "$output" == *"was injected (heapctl inject): the profile counts what was allocated from"* ]]
	head -1 "$T/i.heap" | grep -qx 'heap_v2/8192'
	# the same program under the library, sampling at the same rate
	touch "$T/go" "$T/end"
	env LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" \
	    HEAPCTL_CONF="prof:true,prof_accum:true,prof_final:true,lg_prof_sample:13,prof_prefix:$T/pre" "$TB/prog" \
	    "$T/go" >/dev/null
	pre=$(ls "$T"/pre.*.f.heap)
	sites_near "$T/i.heap" "$pre"
	near "$(bytes "$T/i.heap" main)" 4194304 15         # site_d: calloc, inlined into main
	# site_c: 1M requests of 64 bytes, counted as glibc's usable size, 72
	# (the agent counts usable bytes, as jemalloc's profiles do): 64 MiB
	# was 12.5% low, and sampling noise of 2.5% failed the test once
	near "$(bytes "$T/i.heap" site_c --alloc_space)" 75497472 15
	# site_early: allocated before the injection (4 MiB), freed after it
	near "$(bytes "$pre" site_early --alloc_space)" 4194304 15
	[ "$(bytes "$T/i.heap" site_early --alloc_space)" -eq 0 ]
	run jeprof --text "$TB/prog" "$T/i.heap"
	[[ "$output" == *site_a* && "$output" == *site_b* ]]
	wait "$PID"
}

@test "inject: every command works on an injected process; eject puts its malloc back; inject arms it again" {
	need_root
	started "$TB/prog" "$T/go" "$T/end"
	"$HEAPCTL" inject "$PID" --off >/dev/null
	run "$HEAPCTL" list
	[[ "$output" == *"$PID"* ]]
	[ "$(status_field "$PID" prof.active)" = false ]
	"$HEAPCTL" on "$PID"
	"$HEAPCTL" set "$PID" prof.lg_sample=12
	[ "$(status_field "$PID" prof.lg_sample)" = 12 ]
	# every event until the dump's: others (a high-water mark, a setting)
	# may come first
	"$HEAPCTL" watch "$PID" --json >"$T/watch.out" &
	local w=$!
	track "$w"
	wait_for 5 maps_segment "$w" "$PID"
	touch "$T/go"
	wait_for 10 grep -q '^done 18496' "$T/prog.out"
	"$HEAPCTL" dump "$PID" --prefix "$T/d" >/dev/null
	wait_for 10 grep -q '"dump"' "$T/watch.out"
	kill "$w"
	wait "$w" || true
	near "$(bytes "$T"/d.*.heap site_a)" 33554432 15
	# eject: the segment goes, commands say so, the program runs on
	run "$HEAPCTL" eject "$PID"
	[ "$status" -eq 0 ]
	[[ "$output" == *"ejected from process $PID"* ]]
	[ ! -e "/dev/shm/heapctl.$PID" ]
	run "$HEAPCTL" status "$PID"
	[ "$status" -eq 4 ]
	grep -q libheapctl-agent.so "/proc/$PID/maps"     # mapped, inert
	# again: the same copy armed, a fresh profile
	run "$HEAPCTL" inject "$PID" --lg-sample 13
	[ "$status" -eq 0 ]
	[ "$(grep -c libheapctl-agent.so "/proc/$PID/maps")" -ge 1 ]
	"$HEAPCTL" dump "$PID" -o "$T/again.heap" 2>/dev/null
	[ "$(bytes "$T/again.heap" site_a)" -eq 0 ]    # allocated before this injection
	run "$HEAPCTL" inject "$PID"
	[ "$status" -eq 1 ]
	[[ "$output" == *"has the agent already"*"heapctl eject $PID"* ]]
	"$HEAPCTL" eject "$PID" >/dev/null
	let_go "$PID"
	touch "$T/end"
	wait "$PID"
}

@test "inject: a library loaded later is wrapped too, and one unloaded is left alone; the daemon serves the injected process" {
	need_root
	started "$TB/late" "$TB/libsite.so" "$T/go" "$T/go2" "$T/unload" "$T/end"
	"$HEAPCTL" inject "$PID" --lg-sample 13 --conf control_refresh_ms:100 >/dev/null
	touch "$T/go"
	wait_for 5 grep -q '^loaded 1' "$T/prog.out"
	sleep 0.5                      # the control thread's next look at the objects
	touch "$T/go2"
	wait_for 10 grep -q '^done' "$T/prog.out"
	"$HEAPCTL" dump "$PID" -o "$T/late.heap" 2>/dev/null
	near "$(bytes "$T/late.heap" site_lib)" 8388608 15
	"$HEAPCTL" serve --listen 127.0.0.1:0 >"$T/serve.out" 2>"$T/serve.err" &
	track $!
	wait_for 5 grep -q "listening on http://" "$T/serve.out"
	url=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
	wait_for 5 eval "curl -s --max-time 5 '$url/metrics' | grep -q 'heapctl_allocated_bytes{pid=\"$PID\"'"
	[ "$(curl -s -o "$T/p.pb" -w '%{http_code}' --max-time 30 "$url/debug/pprof/heap?pid=$PID")" = 200 ]
	[ -s "$T/p.pb" ]
	# the library unloaded, then eject: its slots are gone, not written
	touch "$T/unload"
	wait_for 5 grep -q '^closed' "$T/prog.out"
	! grep -q libsite.so "/proc/$PID/maps"
	"$HEAPCTL" eject "$PID" >/dev/null
	touch "$T/end"
	wait "$PID"
}

@test "inject: counters and dump counts start afresh at each injection; the names go on, replacing nothing" {
	need_root
	started "$TB/prog" "$T/go" "$T/end"
	"$HEAPCTL" inject "$PID" --lg-sample 13 >/dev/null
	touch "$T/go"
	wait_for 10 grep -q '^done 18496' "$T/prog.out"
	cd "$T"
	run --separate-stderr "$HEAPCTL" dump "$PID"
	[ "$output" = "$T/jeprof.$PID.0.m0.heap" ]
	# the control thread copies the counters into the segment a period on
	wait_for 5 eval '[ "$(status_field "$PID" dumps)" = 1 ]'
	[ "$(status_field "$PID" samples)" -gt 0 ]
	[ "$(status_field "$PID" last_dump)" = "$T/jeprof.$PID.0.m0.heap" ]
	"$HEAPCTL" eject "$PID" >/dev/null
	"$HEAPCTL" inject "$PID" --off >/dev/null
	# a build of before showed 1 dump and the first injection's samples
	# (list's warnings on other suites' segments go to stderr, not here)
	run --separate-stderr "$HEAPCTL" list --json
	python3 -c '
import json, sys
r = [r for r in json.loads(sys.argv[1]) if r["pid"] == int(sys.argv[2])][0]
assert r["dumps"] == 0 and r["prof_active"] is False, r' "$output" "$PID"
	[ "$(status_field "$PID" dumps)" = 0 ]
	[ "$(status_field "$PID" samples)" = 0 ]
	[ "$(status_field "$PID" last_dump)" = "" ]
	run --separate-stderr "$HEAPCTL" dump "$PID"
	[ "$output" = "$T/jeprof.$PID.1.m1.heap" ]
	[ -s "$T/jeprof.$PID.0.m0.heap" ]
	wait_for 5 eval '[ "$(status_field "$PID" dumps)" = 1 ]'
	"$HEAPCTL" eject "$PID" >/dev/null
	let_go "$PID"
	touch "$T/end"
	wait "$PID"
}

@test "inject into two processes that are each PID 1 of their own PID namespace: their dumps into one directory keep a file each, named with their pids here" {
	need_root
	need_pidns
	local ps=() i u p
	for i in 1 2; do
		rm -f "$T/ns$i.out"
		unshare --pid --fork --kill-child --mount-proc env -u LD_PRELOAD "$TB/prog" "$T/go$i" "$T/end$i" \
		    >"$T/ns$i.out" 2>&1 &
		u=$!
		track "$u"
		wait_for 5 grep -q '^ready' "$T/ns$i.out"
		p=$(cat "/proc/$u/task/$u/children")
		p=${p% }
		track "$p"
		[ "$(awk '/^NSpid:/{print $NF}' "/proc/$p/status")" = 1 ]
		"$HEAPCTL" inject "$p" --lg-sample 14 >/dev/null
		ps+=("$p")
	done
	mkdir "$T/here"
	cd "$T/here"
	for i in 1 2; do
		p=${ps[$((i - 1))]}
		touch "$T/go$i"
		wait_for 10 grep -q '^done' "$T/ns$i.out"
		run --separate-stderr "$HEAPCTL" dump "$p"
		[ "$status" -eq 0 ]
		[ "$output" = "$T/here/jeprof.$p.0.m0.heap" ]
		[ "$(bytes "$output" site_a)" -gt 0 ]
	done
	[ "$(ls "$T/here" | wc -l)" = 2 ]
	for i in 1 2; do
		"$HEAPCTL" eject "${ps[$((i - 1))]}" >/dev/null
		touch "$T/end$i"
	done
}

@test "inject into Debian's python3, perl and redis-server: their allocation sites named" {
	need_root
	[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
	cat >"$T/build.py" <<-EOF
	import os, time
	print("ready", flush=True)
	while not os.path.exists("$T/go"):
	    time.sleep(0.01)
	keep = [bytearray(4096) for _ in range(8192)]
	print("done", flush=True)
	while not os.path.exists("$T/end"):
	    time.sleep(0.01)
	EOF
	injected "$T/py.heap" /usr/bin/python3 "$T/build.py"
	near "$(cum "$T/py.heap" PyByteArray_Resize)" 33554432 15

	cat >"$T/build.pl" <<-EOF
	\$| = 1; print "ready\n"; sleep 0.01 until -e "$T/go";
	my @a; push @a, "x" x 4000 for 1..8192; print "done\n"; sleep 0.01 until -e "$T/end";
	EOF
	injected "$T/pl.heap" perl "$T/build.pl"
	near "$(bytes "$T/pl.heap" Perl_sv_grow)" 32768000 15

	command -v redis-server >/dev/null || skip "no redis-server"
	redis_start
	run "$HEAPCTL" inject "$PID" --lg-sample 14
	[ "$status" -eq 0 ]
	[[ "$output" == *"its malloc is libjemalloc.so.2's"* ]]
	redis-cli -p "$PORT" DEBUG POPULATE 50000 key 1000 >/dev/null
	"$HEAPCTL" dump "$PID" -o "$T/redis.heap" 2>/dev/null
	used=$(redis-cli -p "$PORT" info memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }')
	total=$("$HEAPCTL" report "$T/redis.heap" --bytes | awk '/^Total:/ { print $2 }')
	near "$(bytes "$T/redis.heap" _sdsnewlen)" 51200000 15      # 50000 values of 1000 bytes
	near "$total" "$used" 20
	"$HEAPCTL" eject "$PID" >/dev/null
	redis-cli -p "$PORT" set k v >/dev/null
	redis-cli -p "$PORT" shutdown nosave >/dev/null || true
}

@test "inject into Debian's python3 -m http.server under load: what serving allocates, named" {
	need_root
	[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
	mkdir -p "$T/www"
	head -c 100000 /dev/urandom >"$T/www/f.bin"
	# port 0: the kernel's choice, which no other suite holds (a random
	# one could be, or be a connection's ephemeral port); it prints it
	(cd "$T/www" && exec env -u LD_PRELOAD /usr/bin/python3 -u -m http.server 0 --bind 127.0.0.1) \
	    >"$T/http.out" 2>&1 &
	PID=$!
	track "$PID"
	wait_for 30 grep -q '^Serving HTTP on .* port [0-9]' "$T/http.out" || { cat "$T/http.out" >&2; false; }
	local port
	port=$(sed -n 's/^Serving HTTP on .* port \([0-9]*\).*/\1/p' "$T/http.out")
	wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$port/f.bin"
	# requests before and during the injection, then 200 counted ones
	(for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/f.bin"; done) &
	local load=$!
	"$HEAPCTL" inject "$PID" --lg-sample 12 --conf prof_accum:true >/dev/null
	wait "$load"
	"$HEAPCTL" reset "$PID" >/dev/null
	for i in $(seq 200); do curl -s -o "$T/got" "http://127.0.0.1:$port/f.bin"; done
	cmp "$T/got" "$T/www/f.bin"
	"$HEAPCTL" dump "$PID" -o "$T/http.heap" 2>/dev/null
	# each response reads the file into a bytes object of 100,000 bytes
	run "$HEAPCTL" report "$T/http.heap" --bytes --alloc_space
	top=$(awk 'NR == 3 { print $NF }' <<<"$output")   # Total, the column names, then the first row
	[ "$top" = PyBytes_FromStringAndSize ]
	[ "$(bytes "$T/http.heap" PyBytes_FromStringAndSize --alloc_space)" -ge 17000000 ]
	"$HEAPCTL" eject "$PID" >/dev/null
	curl -s -o "$T/got" "http://127.0.0.1:$port/f.bin"
	cmp "$T/got" "$T/www/f.bin"
}

@test "inject into a process in a root of its own (a chroot in its own mount namespace, no unwinder in it): its sites near their sizes; status keeps its segment" {
	need_root
	local r="$T/root" b="$HEAPCTL_BUILD"
	mkdir -p "$r/lib64" "$r/lib/x86_64-linux-gnu" "$r/dev/shm" "$r/proc" "$r$b" "$r/w"
	cp /lib64/ld-linux-x86-64.so.2 "$r/lib64/"
	cp /lib/x86_64-linux-gnu/libc.so.6 "$r/lib/x86_64-linux-gnu/"
	cp "$TB/prog" "$r/prog"
	# its mounts go with it: the build directory (the agent at the same
	# path), /dev/shm and /proc; neither libunwind nor libgcc_s in there.
	# Its maps show this side's paths (/…/root/prog, /…/root/dev/shm/…).
	started unshare --mount --propagation private sh -c "mount --bind '$b' '$r$b' &&
	    mount --bind /dev/shm '$r/dev/shm' && mount -t proc proc '$r/proc' && exec chroot '$r' /prog /w/go /w/end"
	run "$HEAPCTL" inject "$PID" --lg-sample 12
	[ "$status" -eq 0 ]
	[[ "$output" == *"injected into process $PID"* ]]
	let_go "$PID"
	run "$HEAPCTL" status "$PID"
	[ "$status" -eq 0 ]
	[ -e "/dev/shm/heapctl.$PID" ]
	touch "$r/w/go"
	wait_for 10 grep -q '^done' "$T/prog.out"
	"$HEAPCTL" dump "$PID" -o "$T/c.heap" 2>/dev/null
	# its files are under the root (--sysroot); one frame at least per
	# stack without an unwinder (frame pointers from the agent's own)
	near "$(bytes "$T/c.heap" site_a --sysroot "$r")" 33554432 10
	near "$(bytes "$T/c.heap" site_b --sysroot "$r")" 8388608 10
	touch "$r/w/end"
	wait "$PID"
}

@test "inject into a chroot of our mount namespace: refused with its root directory and what it lacks; the mounts it names make it work" {
	need_root
	local j="$T/jail" lib
	mkdir -p "$j/w"
	cp "$TB/prog" "$j/prog"
	for lib in $(ldd "$TB/prog" | grep -o '/[^ ]*'); do
		mkdir -p "$j$(dirname "$lib")"
		cp -L "$lib" "$j$lib"
	done
	started chroot "$j" /prog /w/go /w/end
	[ "$(readlink "/proc/$PID/root")" = "$j" ]
	run "$HEAPCTL" inject "$PID"
	echo "$output"
	[ "$status" -eq 1 ]
	[ "${#lines[@]}" -eq 1 ]
	local agent="$HEAPCTL_BUILD/libheapctl-agent.so"
	[[ "$output" == "heapctl: process $PID is in a chroot (its root directory is $j), which has no $agent, /dev/shm, /proc: "* ]]
	[[ "$output" == *"mount --bind $HEAPCTL_BUILD $j$HEAPCTL_BUILD; mount --bind /dev/shm $j/dev/shm; mount -t proc proc $j/proc, or use heapctl trace $PID --malloc" ]]
	[[ "$output" != *"container"* ]]
	let_go "$PID"
	# the way out it names, as it names it
	local how=${output#*/proc: }
	how=${how%, or use heapctl trace*}
	mkdir -p "$j$HEAPCTL_BUILD" "$j/dev/shm" "$j/proc"
	eval "$how"
	run "$HEAPCTL" inject "$PID" --lg-sample 12
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"injected into process $PID"* ]]
	run "$HEAPCTL" status "$PID"
	[ "$status" -eq 0 ]
	touch "$j/w/go"
	wait_for 10 grep -q '^done' "$T/prog.out"
	"$HEAPCTL" dump "$PID" -o "$T/j.heap" 2>/dev/null
	near "$(bytes "$T/j.heap" site_a --sysroot "$j")" 33554432 10
	touch "$j/w/end"
	wait "$PID"
}

@test "inject into a set-user-ID program: its real user's status says the segment is its effective user's, not that the library is absent" {
	need_root
	cp "$TB/prog" "$T/suid"
	chmod 4755 "$T/suid"
	started setpriv --reuid=65534 --regid=65534 --clear-groups "$T/suid" "$T/go" "$T/end"
	[ "$(awk '/^Uid:/ { print $2 " " $3 }' "/proc/$PID/status")" = "65534 0" ]
	run "$HEAPCTL" inject "$PID"
	[ "$status" -eq 0 ]
	[ "$(stat -c %u "/dev/shm/heapctl.$PID")" = 0 ]
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$HEAPCTL" status "$PID"
	echo "$output"
	[ "$status" -eq 5 ]
	[ "$output" = "heapctl: permission denied: process $PID runs libheapctl.so, but its segment /dev/shm/heapctl.$PID belongs to root (uid 0), its effective user (a set-user-ID program); run heapctl as that user or as root" ]
	# doctor, as that user, says the same rather than secure execution
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$HEAPCTL" doctor "$PID"
	echo "$output"
	[ "$status" -eq 5 ]
	local nl=$'\n'
	[[ "$output" == *"${nl}PROBLEM segment   process $PID runs libheapctl.so, but its segment /dev/shm/heapctl.$PID belongs to root (uid 0), its effective user (a set-user-ID program)${nl}"*"fix: run heapctl as that user or as root"* ]]
	[[ "$output" != *"secure-execution"* ]]
	run "$HEAPCTL" status "$PID"
	[ "$status" -eq 0 ]
	"$HEAPCTL" eject "$PID" >/dev/null
	touch "$T/go" "$T/end"
	wait "$PID"
}

@test "inject and eject 200 times into 8 threads churning malloc and forking: no crash, no hang, no stopped thread, the same output" {
	need_root
	# niced: its 8 busy threads on two CPUs kept every process this test
	# starts waiting ~50 ms to run (the test took 11 minutes); they still
	# take all the CPU the test leaves
	started nice -n 10 "$TB/churn" "$T/end"
	for i in $(seq 200); do
		run "$HEAPCTL" inject "$PID" --lg-sample 10 --timeout 20
		[ "$status" -eq 0 ] || { echo "inject $i: $output"; false; }
		if ((i % 50 == 0)); then
			"$HEAPCTL" dump "$PID" -o "$T/churn.$i.heap" 2>/dev/null
			[ "$("$HEAPCTL" report "$T/churn.$i.heap" --bytes | awk '/^Total:/ { print $2 }')" -gt 0 ]
		fi
		run "$HEAPCTL" eject "$PID"
		[ "$status" -eq 0 ] || { echo "eject $i: $output"; false; }
		let_go "$PID"
	done
	touch "$T/end"
	wait "$PID"
	[ "$(cat "$T/prog.out")" = "$(printf 'ready\nchurn ok')" ]
	! grep -q FAIL "$T/prog.err"
}

@test "inject refuses clearly: static, stopped, a container without the agent, musl, preloaded, not root, no process, bad options; eject of the preloaded library; an allow-all seccomp filter lets it in" {
	need_root
	started "$TB/prog-static" "$T/go"
	run "$HEAPCTL" inject "$PID"
	[ "$status" -eq 1 ]
	[[ "$output" == *"is statically linked"*"heapctl trace $PID"* ]]
	let_go "$PID"
	touch "$T/go"
	wait "$PID"

	started "$TB/prog" "$T/go"
	kill -STOP "$PID"
	wait_for 5 eval "grep -q '^State:.*T (stopped)' /proc/$PID/status"
	run "$HEAPCTL" inject "$PID"
	[ "$status" -eq 1 ]
	[[ "$output" == *"is stopped (SIGSTOP)"*"kill -CONT $PID"* ]]
	grep -q '^State:.*T (stopped)' "/proc/$PID/status"
	kill -CONT "$PID"
	touch "$T/go"
	wait "$PID"

	# a filter that allows everything is read and lets inject in
	# (inject_seccomp.bats: filters that refuse)
	started "$TB/filtered"
	run "$HEAPCTL" inject "$PID"
	[ "$status" -eq 0 ]
	[[ "$output" == *"injected into process $PID"* ]]
	"$HEAPCTL" eject "$PID" >/dev/null
	kill "$PID"

	# a container whose files are not ours: the agent is not there
	started unshare --mount --propagation private sh -c \
	    "mount -t tmpfs none '$HEAPCTL_BUILD' && exec '$TB/prog' '$T/go'"
	run "$HEAPCTL" inject "$PID"
	[ "$status" -eq 1 ]
	[[ "$output" == *"another mount namespace (a container)"*"libheapctl-agent.so"* ]]
	let_go "$PID"
	kill "$PID"
	# one of its own mount namespace where the agent is at the same path
	started unshare --mount --propagation private "$TB/prog" "$T/go" "$T/end"
	run "$HEAPCTL" inject "$PID"
	[ "$status" -eq 0 ]
	"$HEAPCTL" eject "$PID" >/dev/null
	touch "$T/go" "$T/end"
	wait "$PID"

	started "$TB/musl"
	run "$HEAPCTL" inject "$PID"
	[ "$status" -eq 1 ]
	[[ "$output" == *"uses musl libc"*"heapctl trace $PID --malloc"* ]]
	kill "$PID"

	start_target
	run "$HEAPCTL" inject "$TPID"
	[ "$status" -eq 1 ]
	[[ "$output" == *"runs libheapctl.so already"* ]]
	run "$HEAPCTL" eject "$TPID"
	[ "$status" -eq 1 ]
	[[ "$output" == *"runs the preloaded library"* ]]

	started "$TB/prog" "$T/go" "$T/end"
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$HEAPCTL" inject "$PID"
	[ "$status" -eq 5 ]
	[[ "$output" == *"cannot inject into process $PID"*"CAP_SYS_PTRACE"* ]]
	let_go "$PID"
	[ ! -e "/dev/shm/heapctl.$PID" ]
	touch "$T/go" "$T/end"
	wait "$PID"

	run "$HEAPCTL" inject 999999999
	[ "$status" -eq 2 ] || [ "$status" -eq 3 ]
	run "$HEAPCTL" inject "$$" --conf prof_nonsense:1
	[ "$status" -eq 2 ]
	[[ "$output" == *"--conf"*"prof_nonsense"* ]]
	run "$HEAPCTL" inject "$$" --conf prof_accum:true,thp:always
	[ "$status" -eq 2 ]
	[[ "$output" == *"--conf thp:always: the process keeps its own malloc"* ]]
	run "$HEAPCTL" inject "$$" --lg-sample 99
	[ "$status" -eq 2 ]
	[[ "$output" == *"--lg-sample takes 0 to 62"* ]]
	run "$HEAPCTL" inject
	[ "$status" -eq 2 ]
	[[ "$output" == *"say which process"* ]]
}
