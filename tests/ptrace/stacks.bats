#!/usr/bin/env bats
# tests/ptrace/stacks.bats - heapctl stacks PID: every thread's stack through
# ptrace and libunwind-ptrace, symbolized, for a process started without
# the library; the process is stopped only while they are read and left as
# it was; clear refusals; heapctl status points to it when a process does
# not answer.

load ../lib/helpers

# prog NAME: $T/NAME built from $T/NAME.c (-O2 -g, no frame pointers), run
# in the background; PID= once it printed "ready"
prog() {
	gcc -O2 -g -fomit-frame-pointer -pthread -o "$T/$1" "$T/$1.c"
	rm -f "$T/$1.out" # no earlier run's "ready"
	(cd "$T" && exec env -u LD_PRELOAD "$T/$1") >"$T/$1.out" 2>&1 &
	PID=$!
	track "$PID"
	wait_for 5 grep -q '^ready' "$T/$1.out"
	sleep 0.2
}

# a lock holder sleeping in pause(), a thread waiting for its lock, and
# main joining that thread
write_stuck() {
	cat >"$T/stuck.c" <<-'EOF'
	#include <pthread.h>
	#include <stdio.h>
	#include <unistd.h>
	static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	__attribute__((noinline)) void waits_for_lock(void) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
	__attribute__((noinline)) void holds_lock_and_sleeps(void) { pthread_mutex_lock(&m); for (;;) pause(); }
	static void *worker(void *a) { (void)a; waits_for_lock(); return NULL; }
	static void *holder(void *a) { (void)a; holds_lock_and_sleeps(); return NULL; }
	int main(void)
	{
		pthread_t t1, t2;
		pthread_create(&t1, NULL, holder, NULL);
		usleep(100000);
		pthread_create(&t2, NULL, worker, NULL);
		printf("ready\n");
		fflush(stdout);
		pthread_join(t2, NULL);
		return 0;
	}
	EOF
}

# $T/chain: main -> chain_a -> chain_b -> chain_c, which sleeps in pause()
write_chain() {
	cat >"$T/chain.c" <<-'EOF'
	#include <stdio.h>
	#include <unistd.h>
	__attribute__((noinline)) void chain_c(void) { printf("ready\n"); fflush(stdout); for (;;) pause(); }
	__attribute__((noinline)) void chain_b(void) { chain_c(); __asm__ volatile(""); }
	__attribute__((noinline)) void chain_a(void) { chain_b(); __asm__ volatile(""); }
	int main(void) { chain_a(); return 0; }
	EOF
	gcc -O2 -g -fomit-frame-pointer -o "$T/chain" "$T/chain.c"
}

# $output has chain's frames, named in its file, innermost first
chain_order() {
	local order
	order=$(echo "$output" | grep -o ' in [a-z_]* at [^ ]* (chain)$' | awk '{ print $2 }' | tr '\n' ,)
	[ "$order" = "chain_c,chain_b,chain_a,main," ]
}

# released LINE: the process is not held by anyone after heapctl
released() {
	[ "$(awk '/^TracerPid:/ { print $2 }' "/proc/$1/status")" = 0 ]
	for s in /proc/"$1"/task/*/stat; do
		st=$(sed 's/.*) \(.\).*/\1/' "$s")
		[ "$st" != t ]
	done
}

@test "stacks: every thread of a program started without the library, with functions, files and lines; it runs on" {
	write_stuck
	prog stuck
	run "$HEAPCTL" stacks "$PID"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "process $PID: $T/stuck" ]]
	[[ "${lines[1]}" == "3 threads, 3 stacks read; the process was stopped for "*" ms" ]]
	[[ "$output" == *" in holds_lock_and_sleeps at $T/stuck.c:6 (stuck)"* ]]
	[[ "$output" == *" in holder at $T/stuck.c:8 (stuck)"* ]]
	[[ "$output" == *" in waits_for_lock at $T/stuck.c:5 (stuck)"* ]]
	[[ "$output" == *" in main at $T/stuck.c:17 (stuck)"* ]]
	[[ "$output" == *"pthread_mutex_lock"*"(libc.so.6)"* ]]
	[[ "$output" == *"thread $PID \"stuck\", sleeping (S):"* ]]
	! grep -q LD_PRELOAD "/proc/$PID/environ"
	released "$PID"
	kill -0 "$PID"
}

@test "stacks --json: one object with every thread's frames; stopped_ns is the pause" {
	write_stuck
	prog stuck
	run "$HEAPCTL" stacks "$PID" --json
	[ "$status" -eq 0 ]
	python3 - "$output" "$PID" "$T/stuck.c" <<-'EOF'
	import json, sys
	d = json.loads(sys.argv[1])
	pid, src = int(sys.argv[2]), sys.argv[3]
	assert d["pid"] == pid, d
	assert 0 < d["stopped_ns"] < 5e9, d
	assert len(d["threads"]) == 3, d
	names = {}
	for t in d["threads"]:
	    assert t["frames"], t
	    for f in t["frames"]:
	        assert f["address"].startswith("0x"), f
	        if f["function"]:
	            names[f["function"]] = f
	for fn in ("holds_lock_and_sleeps", "waits_for_lock", "main"):
	    assert names[fn]["file"] == src and names[fn]["line"] > 0 and names[fn]["module"] == "stuck", names[fn]
	    assert names[fn]["inline"] is False, names[fn]
	EOF
	released "$PID"
}

@test "stacks: through a signal handler into the frame it interrupted" {
	cat >"$T/sig.c" <<-'EOF'
	#include <signal.h>
	#include <stdio.h>
	#include <unistd.h>
	__attribute__((noinline)) void in_handler(void) { printf("ready\n"); fflush(stdout); for (;;) pause(); }
	static void on_usr1(int s) { (void)s; in_handler(); }
	__attribute__((noinline)) void before_signal(void) { raise(SIGUSR1); __asm__ volatile(""); }
	int main(void)
	{
		signal(SIGUSR1, on_usr1);
		before_signal();
		return 0;
	}
	EOF
	prog sig
	run "$HEAPCTL" stacks "$PID"
	echo "$output"
	[ "$status" -eq 0 ]
	# innermost first: in_handler, the handler, the signal frame, raise, before_signal, main
	order=$(echo "$output" | grep -o ' in \(in_handler\|on_usr1\|before_signal\|main\) ' | tr -d ' ' | tr '\n' ,)
	[ "$order" = "inin_handler,inon_usr1,inbefore_signal,inmain," ]
	released "$PID"
}

@test "stacks: a stopped process (SIGSTOP) has its stacks read and stays stopped" {
	write_stuck
	prog stuck
	kill -STOP "$PID"
	wait_for 5 eval "grep -q '^State:.*T' /proc/$PID/status"
	run "$HEAPCTL" stacks "$PID"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"3 stacks read"* ]]
	[[ "$output" == *" in waits_for_lock at "* ]]
	sleep 0.2
	grep '^State:' "/proc/$PID/status"
	grep -q '^State:.*T (stopped)' "/proc/$PID/status"
	kill -CONT "$PID"
	wait_for 5 eval "! grep -q '^State:.*T' /proc/$PID/status"
	released "$PID"
}

@test "stacks: refusals are one line with the reason: no process, another user's process, one a debugger holds" {
	need_root
	run "$HEAPCTL" stacks 999999999
	echo "$output"
	[ "$status" -eq 3 ]
	[ "${#lines[@]}" -eq 1 ]
	run "$HEAPCTL" stacks
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: stacks: say which process: heapctl stacks PID" ]
	write_stuck
	prog stuck
	run setpriv --reuid=nobody --regid=nogroup --clear-groups "$HEAPCTL" stacks "$PID"
	echo "$output"
	[ "$status" -eq 5 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "heapctl: cannot trace process $PID: "*"root (CAP_SYS_PTRACE)"* ]]
	ptrace_stop "$PID"
	local tracer
	tracer=$(awk '/^TracerPid:/ { print $2 }' "/proc/$PID/status")
	run "$HEAPCTL" stacks "$PID"
	echo "$output"
	[ "$status" -eq 5 ]
	[ "$output" = "heapctl: cannot trace process $PID: process $tracer (a debugger?) traces it already" ]
}

@test "status points to heapctl stacks when a running process does not answer; stacks shows its other threads" {
	need_root
	start_target
	ctl=$(grep -lx heapctl-ctl /proc/"$TPID"/task/*/comm | cut -d/ -f5)
	[ -n "$ctl" ]
	ptrace_stop "$ctl"
	run "$HEAPCTL" status "$TPID" --timeout 0.5
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *$'\ncontrol        not answering: nothing within 0.5 s; see where its threads are: heapctl stacks '"$TPID"$'\n'* ]]
	run "$HEAPCTL" on "$TPID" --timeout 0.5
	echo "$output"
	[ "$status" -eq 7 ]
	[ "$output" = "heapctl: process $TPID did not answer within 0.5 s; see where its threads are: heapctl stacks $TPID" ]
	run "$HEAPCTL" stacks "$TPID"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"thread $ctl \"heapctl-ctl\", tracing stop (t): no stack: process "*" (a debugger?) traces it"* ]]
	[[ "$output" == *" in main at "*"target.c:"* ]]
}

@test "stacks: Debian's own programs, stripped, started without the library: redis-server's threads and python3's interpreter" {
	command -v redis-server >/dev/null || skip "redis-server is not installed"
	local port
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	(cd "$T" && exec env -u LD_PRELOAD redis-server --port "$port" --bind 127.0.0.1 --save "" \
	    --appendonly no) >"$T/redis.out" 2>&1 &
	local rpid=$!
	track "$rpid"
	wait_for 5 grep -q 'Ready to accept connections' "$T/redis.out"
	run "$HEAPCTL" stacks "$rpid"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *" in epoll_wait at "*"(libc.so.6)"* ]]
	[[ "$output" == *" in aeMain ("* ]]
	[[ "$output" == *"thread "*" \"bio_close_file\", sleeping (S):"* ]]
	[[ "$output" == *" in ___pthread_cond_wait at "* ]]
	released "$rpid"
	[ "$(redis-cli -p "$port" ping)" = PONG ]

	/usr/bin/python3 -c 'import time
print("ready", flush=True)
time.sleep(60)' >"$T/py.out" 2>&1 &
	local ppid=$!
	track "$ppid"
	wait_for 5 grep -q ready "$T/py.out"
	run "$HEAPCTL" stacks "$ppid" --json
	[ "$status" -eq 0 ]
	python3 - "$output" <<-'PYEOF'
	import json, sys
	d = json.loads(sys.argv[1])
	names = [f["function"] for t in d["threads"] for f in t["frames"]]
	assert any(n and "clock_nanosleep" in n for n in names), names
	assert "_PyEval_EvalFrameDefault" in names and "PyEval_EvalCode" in names, names
	PYEOF
	released "$ppid"
}

@test "stacks: signals sent to the process while its stacks are read all arrive, each once; it never gets a SIGTRAP" {
	cat >"$T/sigs.c" <<-'EOF2'
	#include <signal.h>
	#include <stdio.h>
	#include <unistd.h>
	static volatile sig_atomic_t got, report;
	static void on_rt(int s) { (void)s; got++; }
	static void on_usr2(int s) { (void)s; report = 1; }
	int main(void)
	{
		signal(SIGRTMIN, on_rt);
		signal(SIGUSR2, on_usr2);
		printf("ready\n");
		fflush(stdout);
		for (;;) {
			pause();
			if (report) {
				printf("got %d\n", (int)got);
				fflush(stdout);
				report = 0;
			}
		}
	}
	EOF2
	prog sigs
	# real-time signals queue, so every one sent must be handled once
	( for ((i = 0; i < 3000; i++)); do kill -RTMIN "$PID" || exit 1; done ) &
	local sender=$!
	for ((j = 0; j < 20; j++)); do "$HEAPCTL" stacks "$PID" >/dev/null; done
	wait "$sender"
	sleep 0.3
	kill -USR2 "$PID"
	wait_for 5 grep -q '^got ' "$T/sigs.out"
	cat "$T/sigs.out"
	[ "$(sed -n 's/^got //p' "$T/sigs.out")" = 3000 ]
	released "$PID"
}

@test "stacks: a chrooted process is unwound through its own libraries, as deep as eu-stack, with the same names" {
	need_root
	write_chain
	# the program and the libraries it loads, at their paths inside
	mkdir "$T/jail"
	cp "$T/chain" "$T/jail/chain"
	local lib
	for lib in $(ldd "$T/chain" | grep -o '/[^ ]*'); do
		mkdir -p "$T/jail$(dirname "$lib")"
		cp -L "$lib" "$T/jail$lib"
	done
	chroot "$T/jail" /chain >"$T/chain.out" 2>&1 &
	PID=$!
	track "$PID"
	wait_for 5 grep -q '^ready' "$T/chain.out"
	[ "$(readlink "/proc/$PID/root")" = "$T/jail" ]
	run "$HEAPCTL" stacks "$PID"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "process $PID: /chain" ]]
	# innermost first, each in the file of the jail's program
	chain_order
	[[ "$output" == *" in chain_c at $T/chain.c:3 (chain)"* ]]
	# the jail's libc, unwound and named: pause() below, glibc's start-up
	# above (__libc_pause and __libc_start_main_impl with libc6-dbg)
	echo "$output" | grep -q '^  #0  0x[0-9a-f]* in [_a-z]*pause .*(libc\.so\.6)$'
	echo "$output" | grep -q ' in __libc_start_main[_a-z@.0-9]* .*(libc\.so\.6)$'
	local depth
	depth=$(echo "$output" | grep -c '^  #')
	[ "$depth" -ge 7 ]
	released "$PID"
	if command -v eu-stack >/dev/null; then
		local eu
		eu=$(eu-stack -p "$PID")
		echo "$eu"
		[ "$depth" -ge "$(echo "$eu" | grep -c '^#')" ]
		# every function eu-stack names in the program is named here too
		for fn in $(echo "$eu" | awk '/^#/ { print $3 }' | grep '^chain_\|^main$'); do
			[[ "$output" == *" in $fn at "* ]]
		done
		[ "$(echo "$eu" | awk '/^#/ { print $3 }' | grep -c '^chain_\|^main$')" -eq 4 ]
	fi
}

@test "stacks: a process in a mount namespace of its own, its program on a tmpfs only it sees: unwound and named from /proc/PID/root" {
	need_root
	write_chain
	mkdir "$T/priv"
	(cd "$T" && exec unshare --mount --propagation private sh -c \
	    "mount -t tmpfs tmpfs '$T/priv' && cp '$T/chain' '$T/priv/chain' && exec '$T/priv/chain'") >"$T/chain.out" 2>&1 &
	PID=$!
	track "$PID"
	wait_for 5 grep -q '^ready' "$T/chain.out"
	[ ! -e "$T/priv/chain" ]
	[ -e "/proc/$PID/root$T/priv/chain" ]
	run "$HEAPCTL" stacks "$PID"
	echo "$output"
	[ "$status" -eq 0 ]
	chain_order
	[ "$(echo "$output" | grep -c '^  #')" -ge 7 ]
	released "$PID"
}
