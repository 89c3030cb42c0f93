#!/usr/bin/env bash
# daemon_shapes: the shapes of classic C daemons, each dumped with
# `heapctl dump -p PID` and no option, as the README says (issue 36).
#
#  * privdrop: a master that stays root and a pre-forked worker that
#    switches to nobody and then only sleeps; prof_prefix is in a directory
#    of root's (as StateDirectory= makes it for a unit without User=).  The
#    worker is reachable without allocating, and its dump lands in that
#    directory, numbered from 0 under its own pid although the master
#    dumped before the fork; --fetch, -o FILE and -o - work; a dump that
#    fails uses no number.
#  * a daemon that double-forks and then sleeps without allocating: the
#    grandchild is reachable.
#  * a worker that chroots into an empty directory, switches to nobody and
#    sets RLIMIT_NPROC to 0 (haproxy's workers): reachable, and dumped.
#  * a process started by nobody with RLIMIT_NPROC 0, so no control thread
#    can start: it says why, and is served while it allocates.
#  * a program whose threads each hold 4 MiB of static TLS (a __thread
#    buffer), which every thread's stack must make room for: its control
#    thread runs, and it is dumped while it sleeps.
# Needs root (setuid, chroot).
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup daemon_shapes "$@"
# staged dumps made from here on are this script's (below: none may be left)
touch "$WORK/started"
H=$BUILD/heapctl
[ "$(id -u)" -eq 0 ] || { fail "needs root (setuid, chroot)"; finish; }

cat >"$WORK/prog.c" <<'EOF'
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <heapctl.h>

static void *kept[64];

__attribute__((noinline)) void *shapes_leak_site(size_t n)
{
	void *p = malloc(n);
	memset(p, 7, n);
	return p;
}

static void become_nobody(void)
{
	if (setgroups(0, NULL) || setgid(65534) || setuid(65534)) {
		perror("setuid");
		_exit(3);
	}
}

static void idle(void)
{
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	const char *mode = argv[1];
	for (int i = 0; i < 64; i++)
		kept[i] = shapes_leak_site(4096);
	if (!strcmp(mode, "privdrop")) {
		mallctl("prof.dump", NULL, NULL, NULL, 0);   /* the master's dump 0 */
		pid_t c = fork();
		if (c == 0) {
			become_nobody();
			idle();
		}
		printf("master %d\nworker %d\n", (int)getpid(), (int)c);
		idle();
	}
	if (!strcmp(mode, "double")) {
		if (fork() != 0)
			_exit(0);
		setsid();
		pid_t g = fork();
		if (g != 0) {
			printf("daemon %d\n", (int)g);
			_exit(0);
		}
		idle();
	}
	if (!strcmp(mode, "chroot")) {
		pid_t c = fork();
		if (c == 0) {
			struct rlimit none = { 0, 0 };
			if (chroot(argv[2]) || chdir("/")) {
				perror("chroot");
				_exit(3);
			}
			become_nobody();
			if (setrlimit(RLIMIT_NPROC, &none)) {
				perror("setrlimit");
				_exit(3);
			}
			idle();
		}
		printf("worker %d\n", (int)c);
		idle();
	}
	if (!strcmp(mode, "busy")) {   /* run with RLIMIT_NPROC 0 by nobody */
		printf("busy %d\n", (int)getpid());
		for (;;) {
			free(shapes_leak_site(1000));
			struct timespec ts = { 0, 2000000 };
			nanosleep(&ts, NULL);
		}
	}
	return 2;
}
EOF
compile "$WORK/prog" "$WORK/prog.c" -L"$BUILD" -lheapctl -Wl,-rpath,"$BUILD"
chmod 755 "$WORK"
mkdir -m 0755 "$WORK/state" "$WORK/here" "$WORK/empty"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true     # no "Killed" line per background job
	rm -rf "$WORK"
}
trap cleanup EXIT

# wait_line FILE KEY: the number after "KEY " in FILE, within 5 s
wait_line() {
	local v
	for _ in $(seq 50); do
		v=$(sed -n "s/^$2 //p" "$1" 2>/dev/null | head -1)
		[ -n "$v" ] && { echo "$v"; return 0; }
		sleep 0.1
	done
	return 1
}
# reachable PID: heapctl status answers within 5 s (the grace is 20 ms)
reachable() {
	local out
	for _ in $(seq 50); do
		out=$("$H" status "$1" --json 2>&1) && [[ "$out" == *"\"pid\": $1"* ]] && return 0
		sleep 0.1
	done
	echo "$out"
	return 1
}

# ---- privilege drop -------------------------------------------------------
HEAPCTL_CONF="prof:true,lg_prof_sample:0,prof_prefix:$WORK/state/jeprof" LD_PRELOAD="$LIB" \
    "$WORK/prog" privdrop >"$WORK/p.out" 2>"$WORK/p.err" &
pids+=($!)
master=$(wait_line "$WORK/p.out" master) && worker=$(wait_line "$WORK/p.out" worker) ||
    { fail "privdrop did not start: $(cat "$WORK/p.err")"; finish; }
pids+=("$worker")
out=$(reachable "$worker") || fail "the idle worker $worker (nobody) is not reachable: $out"
cd "$WORK/here"
out=$("$H" dump -p "$worker" 2>"$WORK/e") || fail "dump -p $worker: $(cat "$WORK/e")"
check_eq "the worker's first dump, no option" "$out" "$WORK/state/jeprof.$worker.0.m0.heap"
[ -r "$out" ] && head -c 8 "$out" | grep -q '^heap_v2/' || fail "$out is not a readable heap_v2 dump"
rep=$("$H" report "$out" --top 5 2>&1) || fail "report of the worker's dump: $rep"
grep -q shapes_leak_site <<<"$rep" || fail "the report of the worker's dump does not name shapes_leak_site: $rep"
out=$("$H" dump -p "$worker" --fetch 2>"$WORK/e") || fail "dump --fetch: $(cat "$WORK/e")"
check_eq "the worker's dump with --fetch" "$out" "$WORK/here/jeprof.$worker.1.m1.heap"
[ -s "$out" ] || fail "dump --fetch left no file"
out=$("$H" dump -p "$worker" -o "$WORK/here/o.heap" 2>"$WORK/e") || fail "dump -o FILE: $(cat "$WORK/e")"
check_eq "dump -o FILE" "$out" "$WORK/here/o.heap"
head -c 8 "$WORK/here/o.heap" | grep -q '^heap_v2/' || fail "dump -o FILE wrote no heap_v2 dump"
"$H" dump -p "$worker" -o - >"$WORK/here/stdout.heap" 2>"$WORK/e" || fail "dump -o -: $(cat "$WORK/e")"
head -c 8 "$WORK/here/stdout.heap" | grep -q '^heap_v2/' || fail "dump -o - wrote no heap_v2 dump"
# a prefix in a directory that does not exist: the process's own attempt
# fails and gives its numbers back; the staged dump takes them
"$H" set "$worker" "prof.prefix=$WORK/missing/x" >/dev/null || fail "set prof.prefix"
out=$("$H" dump -p "$worker" 2>"$WORK/e") || fail "dump to a missing directory: $(cat "$WORK/e")"
check_eq "a dump whose first attempt failed (-o names take no number)" "$out" "$WORK/here/x.$worker.2.m2.heap"
out=$("$H" dump -p "$master" 2>"$WORK/e") || fail "dump of the master: $(cat "$WORK/e")"
check_eq "the master's second dump" "$out" "$WORK/state/jeprof.$master.1.m1.heap"
dumps=$("$H" list --json 2>/dev/null | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p["pid"] == '"$worker"':
        print(p["dumps"])')
check_eq "the worker's dump count in heapctl list" "$dumps" 5
ls "$WORK/state" | grep -v '\.heap$' | grep . && fail "files other than dumps left in the prefix's directory"
# every dump of the worker was staged and copied out: none is its own
last=$("$H" status "$worker" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["last_dump"])')
check_eq "the worker's last dump after staged ones (a removed temporary file before)" "$last" ""
"$H" dump -p "$master" >/dev/null 2>&1 || fail "a dump of the master"
last=$("$H" status "$master" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["last_dump"])')
check_eq "the master's last dump" "$last" "$WORK/state/jeprof.$master.2.m2.heap"
left=$(find /dev/shm -maxdepth 1 -name 'heapctl-fetch.*' -newer "$WORK/started")
[ -n "$left" ] && fail "a staged dump was left in /dev/shm: $left"

# ---- double fork ----------------------------------------------------------
LD_PRELOAD="$LIB" "$WORK/prog" double >"$WORK/d.out" 2>"$WORK/d.err"
daemon=$(wait_line "$WORK/d.out" daemon) || { fail "double did not start: $(cat "$WORK/d.err")"; finish; }
pids+=("$daemon")
out=$(reachable "$daemon") || fail "the double-forked idle daemon $daemon is not reachable: $out"
out=$("$H" dump -p "$daemon" --prefix "$WORK/here/d" 2>&1) || fail "dump of the daemon: $out"
check_eq "the daemon's first dump" "$out" "$WORK/here/d.$daemon.0.m0.heap"

# ---- chroot, a user switch and RLIMIT_NPROC 0 -----------------------------
HEAPCTL_CONF="prof:true,lg_prof_sample:0,prof_prefix:/var/lib/nowhere/jeprof" LD_PRELOAD="$LIB" \
    "$WORK/prog" chroot "$WORK/empty" >"$WORK/c.out" 2>"$WORK/c.err" &
pids+=($!)
cw=$(wait_line "$WORK/c.out" worker) || { fail "chroot did not start: $(cat "$WORK/c.err")"; finish; }
pids+=("$cw")
out=$(reachable "$cw") || fail "the chrooted worker $cw is not reachable: $out; $(cat "$WORK/c.err"); shm: $(ls -la /dev/shm | grep "\.$cw")"
check_eq "the chrooted worker's limit" "$(awk '/^Max processes/ { print $3 }' "/proc/$cw/limits")" 0
out=$("$H" dump -p "$cw" 2>"$WORK/e") || fail "dump of the chrooted worker: $(cat "$WORK/e")"
check_eq "the chrooted worker's dump" "$out" "$WORK/here/jeprof.$cw.0.m0.heap"
head -c 8 "$out" 2>/dev/null | grep -q '^heap_v2/' || fail "the chrooted worker's dump is not a heap_v2 dump"
# its maps, read with no /proc in its root, and its binaries found under
# its master's root
maps=$(sed -n '/^MAPPED_LIBRARIES:/,$p' "$out")
grep -q " $WORK/prog\$" <<<"$maps" ||
	fail "the chrooted worker's dump has no MAPPED_LIBRARIES line for $WORK/prog: $(sed -n "/^MAPPED_LIBRARIES:/,\$p" "$out" | head -4 | tr "\n" "|")"
rep=$("$H" report "$out" -p "$cw" --top 5 2>&1) || fail "report -p of the chrooted worker's dump: $rep"
grep -q shapes_leak_site <<<"$rep" || fail "the report of the chrooted worker's dump does not name shapes_leak_site: $rep"
[ -z "$(ls -A "$WORK/empty")" ] || fail "heapctl left files in the chroot: $(ls -A "$WORK/empty")"

# ---- 4 MiB of static TLS ----------------------------------------------------
# glibc refused the control thread's 256 KiB stack (EINVAL) when the
# program's static TLS did not fit in it
cat >"$WORK/tls.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static __thread char per_thread[4 << 20];
__attribute__((noinline)) void *tls_leak_site(size_t n)
{
	void *p = malloc(n);
	memset(p, 7, n);
	return p;
}
int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	memset(per_thread, 1, 4096);
	static void *kept[16];
	for (int i = 0; i < 16; i++)
		kept[i] = tls_leak_site(8192);
	printf("tls %d\n", (int)getpid());
	for (;;)
		pause();
}
EOF
compile "$WORK/tls" "$WORK/tls.c"
HEAPCTL_CONF="prof:true,lg_prof_sample:0" LD_PRELOAD="$LIB" "$WORK/tls" >"$WORK/t.out" 2>"$WORK/t.err" &
pids+=($!)
tp=$(wait_line "$WORK/t.out" tls) || { fail "tls did not start: $(cat "$WORK/t.err")"; finish; }
out=$(reachable "$tp") || fail "the program with 4 MiB of TLS is not reachable: $out"
st=$("$H" status "$tp" 2>&1) || fail "status of the program with 4 MiB of TLS: $st"
grep -q "^control        running" <<<"$st" || fail "the program with 4 MiB of TLS has no control thread: $st; $(cat "$WORK/t.err")"
[ -s "$WORK/t.err" ] && fail "the program with 4 MiB of TLS wrote to stderr: $(cat "$WORK/t.err")"
out=$("$H" dump -p "$tp" --prefix "$WORK/here/t" 2>&1) || fail "dump of the program with 4 MiB of TLS: $out"
check_eq "the sleeping program's dump" "$out" "$WORK/here/t.$tp.0.m0.heap"
rep=$("$H" report "$out" --top 5 2>&1) || fail "report of its dump: $rep"
grep -q tls_leak_site <<<"$rep" || fail "the report of its dump does not name tls_leak_site: $rep"

# ---- no control thread at all ---------------------------------------------
setpriv --reuid 65534 --regid 65534 --clear-groups prlimit --nproc=0 env LD_PRELOAD="$LIB" \
    "$WORK/prog" busy >"$WORK/b.out" 2>"$WORK/b.err" &
pids+=($!)
busy=$(wait_line "$WORK/b.out" busy) || { fail "busy did not start: $(cat "$WORK/b.err")"; finish; }
grep -q "cannot start the control thread: Resource temporarily unavailable (a thread limit" "$WORK/b.err" ||
	fail "the thread-less process did not say why: $(cat "$WORK/b.err")"
st=$("$H" status "$busy" 2>&1) || fail "status of the thread-less process: $st"
grep -q "^control        no thread (pthread_create: Resource temporarily unavailable): served while the program allocates" <<<"$st" ||
	fail "status does not say the process has no control thread and why: $st"
out=$("$H" dump -p "$busy" --prefix "$WORK/here/b" 2>&1) || fail "dump of the thread-less process: $out"
check_eq "the thread-less process's dump" "$out" "$WORK/here/b.$busy.0.m0.heap"
doc=$("$H" doctor "$busy" 2>&1 || true)
grep -q "the control thread could not be started (pthread_create: Resource temporarily unavailable; max processes 0)" <<<"$doc" ||
	fail "doctor does not name the thread limit: $doc"
finish
