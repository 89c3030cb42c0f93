#!/usr/bin/env bats
# tests/ptrace/inject_seccomp.bats - heapctl inject and doctor on processes
# under a seccomp filter: the filter is read (PTRACE_SECCOMP_GET_FILTER) and
# run for every call the agent makes (heapctl/diagnose/seccomp.c).  The filters are
# real ones, installed by tests/programs/seccomp_run: allow-all, a call that
# kills, a call that fails with EPERM, Docker's clone3 answered with ENOSYS
# and podman's clone allowed without namespace flags (where glibc falls back
# to clone: the agent's thread must then run), calls whose failure the agent
# copes with, stacked filters (the strictest answer wins), and a filter
# heapctl may not read (no CAP_SYS_ADMIN).  And heapctl/diagnose/seccomp.c's table
# must hold every call strace sees the agent make.  Where
# inject goes on, the agent must answer and dump; where it refuses, the
# process must be untouched (alive, no segment).  Needs root.

load ../lib/helpers

setup_file() {
	export TB="$BATS_FILE_TMPDIR"
	gcc -O2 -Wall -Wextra -Werror -o "$TB/seccomp_run" "$BATS_TEST_DIRNAME/../programs/seccomp_run.c"
	gcc -O2 -g -pthread -o "$TB/prog" "$BATS_TEST_DIRNAME/../programs/prog.c"
	# every x86-64 number; a test takes out the ones it refuses
	seq 0 470 >"$TB/all.allow"
}

# nr NAME: the x86-64 number of a system call, from the C headers
nr() { printf '#include <sys/syscall.h>\nSYS_%s\n' "$1" | gcc -E -P - | tail -1; }

# filtered SECCOMP_RUN_OPTIONS [-- seccomp_run SECCOMP_RUN_OPTIONS]: prog under
# that filter (or two, stacked), in $PID
filtered() {
	# prog.out too: the shell below truncates it only once it has forked,
	# and the wait would otherwise find the last process's "ready" and go on
	# before this one's filters are in place
	rm -f "$T/go" "$T/end" "$T/prog.out"
	env -u LD_PRELOAD "$TB/seccomp_run" "$@" -- "$TB/prog" "$T/go" "$T/end" >"$T/prog.out" 2>"$T/prog.err" &
	PID=$!
	track "$PID"
	wait_for 5 grep -q '^ready' "$T/prog.out"
}

# without NAME...: the allow-list without those calls, in $T/allow
without() {
	cp "$TB/all.allow" "$T/allow"
	local n
	for n in "$@"; do
		grep -vx "$(nr "$n")" "$T/allow" >"$T/allow.new"
		mv "$T/allow.new" "$T/allow"
	done
}

# refused: inject failed with $1 in its message; the process lives on,
# untouched: no segment, no thread held
refused() {
	[ "$status" -eq 1 ]
	[[ "$output" == *"$1"* ]]
	kill -0 "$PID"
	[ ! -e "/dev/shm/heapctl.$PID" ]
	! grep -q '^TracerPid:[[:space:]]*[1-9]' /proc/"$PID"/task/*/status
}

# injected_ok: inject went on, and the agent answers and dumps
injected_ok() {
	[ "$status" -eq 0 ]
	[[ "$output" == *"injected into process $PID"* ]]
	"$HEAPCTL" status "$PID" | grep -q '^control *running'
	touch "$T/go"
	wait_for 10 grep -q '^done' "$T/prog.out"
	"$HEAPCTL" dump "$PID" -o "$T/p.heap" >/dev/null
	head -1 "$T/p.heap" | grep -q '^heap_v2/'
	"$HEAPCTL" eject "$PID" >/dev/null
	kill -0 "$PID"
}

@test "inject seccomp: a filter that allows every call lets it in; doctor says so" {
	need_root
	filtered --allow-file "$TB/all.allow"
	run "$HEAPCTL" doctor "$PID"
	[[ "$output" == *"seccomp"*"a seccomp filter is in force (1 filter, "*"allows every call heapctl inject's agent makes: heapctl inject $PID can load it"* ]]
	run "$HEAPCTL" inject "$PID"
	injected_ok
}

@test "inject seccomp: a call that kills (ftruncate) is named with the way out, the process untouched; doctor says the same" {
	need_root
	without ftruncate
	filtered --allow-file "$T/allow"
	run "$HEAPCTL" inject "$PID"
	refused "runs under a seccomp filter that would kill the process at ftruncate (KILL_PROCESS), which the agent's start makes: run it under a seccomp profile that allows ftruncate (podman, docker: --security-opt seccomp=PROFILE.json with it added, or seccomp=unconfined"
	[[ "$output" == *"heapctl trace $PID --malloc"* ]]
	[ "${#lines[@]}" -eq 1 ]
	run "$HEAPCTL" doctor "$PID"
	[[ "$output" == *"note    seccomp   a seccomp filter is in force that would kill the process at ftruncate (KILL_PROCESS), which the agent's start makes: heapctl inject $PID refuses"* ]]
	[[ "$output" == *"fix: run it under a seccomp profile that allows ftruncate"* ]]
	run "$HEAPCTL" doctor "$PID" --json
	[[ "$output" == *'"topic": "seccomp", "text": "a seccomp filter is in force that would kill the process at ftruncate'* ]]
	# the filter is real: the program itself runs on under it
	touch "$T/go"
	wait_for 10 grep -q '^done' "$T/prog.out"
}

@test "inject seccomp: a required call failed with EPERM (mremap, a dump's) refuses; rseq, set_robust_list, prctl, kill, getrandom failing is tolerated" {
	need_root
	without mremap
	filtered --errno --allow-file "$T/allow"
	run "$HEAPCTL" inject "$PID"
	refused "seccomp filter that would fail mremap with EPERM, which a dump makes: run it under a seccomp profile that allows mremap"
	kill "$PID"
	filtered --errno-nr "$(nr rseq):1" --errno-nr "$(nr set_robust_list):1" --errno-nr "$(nr prctl):1" \
	    --errno-nr "$(nr kill):1" --errno-nr "$(nr getrandom):1" --allow-file "$TB/all.allow"
	run "$HEAPCTL" doctor "$PID"
	[[ "$output" == *"allows every call heapctl inject's agent makes, and fails getrandom (EPERM), rseq (EPERM), set_robust_list (EPERM), prctl (EPERM), kill (EPERM), which it copes with"* ]]
	run "$HEAPCTL" inject "$PID"
	injected_ok
}

@test "inject seccomp: Docker's clone3 ENOSYS and podman's clone without namespace flags let it in (glibc falls back to clone); clone3 EPERM or clone refused for CLONE_THREAD do not" {
	need_root
	# the namespace flags podman's and Docker's profiles keep clone from
	filtered --errno-nr "$(nr clone3):38" --arg0-clear "$(nr clone):0x7e020000" --allow-file "$TB/all.allow"
	run "$HEAPCTL" inject "$PID"
	injected_ok
	kill "$PID"
	# the thread flags themselves refused: the argument is what is judged
	filtered --errno-nr "$(nr clone3):38" --arg0-clear "$(nr clone):0x10000" --allow-file "$TB/all.allow"
	run "$HEAPCTL" inject "$PID"
	refused "would kill the process at clone (KILL_PROCESS), which the agent's start makes"
	kill "$PID"
	filtered --errno-nr "$(nr clone3):1" --allow-file "$TB/all.allow"
	run "$HEAPCTL" inject "$PID"
	refused "would fail clone3 with EPERM"
}

@test "inject seccomp: a filter heapctl may not read (no CAP_SYS_ADMIN) refuses as before, saying why and what to do" {
	need_root
	command -v capsh >/dev/null || skip "capsh (libcap2-bin) not installed"
	filtered --allow-file "$TB/all.allow"
	run capsh --drop=cap_sys_admin -- -c "'$HEAPCTL' inject $PID"
	refused "runs under a seccomp filter, which could kill it for a call the agent makes, and which heapctl could not check: reading it needs CAP_SYS_ADMIN"
	[[ "$output" == *"run heapctl as root on the host (CAP_SYS_ADMIN, outside any filter) to have the filter read, or run the process without one (podman, docker: --security-opt seccomp=unconfined)"* ]]
	run capsh --drop=cap_sys_admin -- -c "'$HEAPCTL' doctor $PID"
	[[ "$output" == *"a seccomp filter is in force, and heapctl could not check it (reading it needs CAP_SYS_ADMIN"*"heapctl inject $PID refuses"* ]]
}

@test "inject seccomp: stacked filters are all read, and the strictest answer wins, as in the kernel" {
	need_root
	# two filters that allow everything
	filtered --allow-file "$TB/all.allow" -- "$TB/seccomp_run" --allow-file "$TB/all.allow"
	run "$HEAPCTL" doctor "$PID"
	[[ "$output" == *"a seccomp filter is in force (2 filters, "*"heapctl inject $PID can load it"* ]]
	run "$HEAPCTL" inject "$PID"
	injected_ok
	kill "$PID"
	# the older filter fails ftruncate with EPERM, the newer kills for it
	without ftruncate
	filtered --errno-nr "$(nr ftruncate):1" --allow-file "$TB/all.allow" -- "$TB/seccomp_run" --allow-file "$T/allow"
	run "$HEAPCTL" inject "$PID"
	refused "would kill the process at ftruncate (KILL_PROCESS)"
	kill "$PID"
	# and the other way round
	filtered --allow-file "$T/allow" -- "$TB/seccomp_run" --errno-nr "$(nr ftruncate):1" --allow-file "$TB/all.allow"
	run "$HEAPCTL" inject "$PID"
	refused "would kill the process at ftruncate (KILL_PROCESS)"
}

@test "inject seccomp: the table of calls covers every call the agent makes (strace of a load, arm, samples, dump, eject)" {
	need_root
	command -v strace >/dev/null || skip "strace not installed (tests/deps.sh installs it)"
	# what inject's two remote calls do, made by the program itself (a
	# tracer cannot trace what inject traces), then sampled allocations
	cat >"$T/load.c" <<-'EOF'
	#include <dlfcn.h>
	#include <stdio.h>
	#include <stdlib.h>
	#include <unistd.h>
	int main(int argc, char **argv)
	{
		fprintf(stderr, "MARK load\n");
		void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		int (*arm)(const char *) = h ? (int (*)(const char *))dlsym(h, "heapctl_inject_arm") : NULL;
		if (arm == NULL || arm("prof:true,prof_active:true,lg_prof_sample:10") != 0)
			return 1;
		fprintf(stderr, "MARK armed\n");
		for (int i = 0; i < 2000; i++)
			free(malloc(4096));
		printf("ready\n");
		fflush(stdout);
		pause();
		return 0;
	}
	EOF
	gcc -O1 -o "$T/load" "$T/load.c" -ldl
	env -u LD_PRELOAD strace -f -qq -o "$T/trace" "$T/load" "$HEAPCTL_BUILD/libheapctl-agent.so" \
	    >"$T/load.out" 2>"$T/load.err" &
	local st=$!
	track "$st"
	wait_for 10 grep -q '^ready' "$T/load.out"
	PID=$(awk '{ print $1; exit }' "$T/trace")
	"$HEAPCTL" dump "$PID" -o "$T/l.heap" >/dev/null
	"$HEAPCTL" eject "$PID" >/dev/null
	wait_for 5 grep -q 'exit(0)' "$T/trace"
	kill "$PID"
	wait "$st" || true
	# the calls from the load on: the main thread's between the marks and
	# after (sampling), and every call of the agent's thread; the program's
	# own (its marks, printf, pause, exit_group) left out
	awk -v main="$PID" '
		/MARK load/ { on = 1; next }
		!on { next }
		$1 == main && /MARK armed/ { next }
		{ if (match($2, /^[a-z0-9_]+\(/)) print substr($2, 1, RLENGTH - 1) }' "$T/trace" |
	    grep -vxE 'pause|exit_group|write' | sort -u >"$T/made"
	grep -o '{ "[a-z0-9_]*", SYS_' "$BATS_TEST_DIRNAME/../../heapctl/diagnose/seccomp.c" |
	    sed 's/{ "//; s/", SYS_//' | sort -u >"$T/table"
	# the strace saw the agent at work: its load, its thread, its dump
	grep -qx openat "$T/made"
	grep -qx clone3 "$T/made"
	grep -qx rename "$T/made"
	run comm -23 "$T/made" "$T/table"
	echo "calls the agent made that heapctl/diagnose/seccomp.c's table lacks: $output"
	[ -z "$output" ]
}
