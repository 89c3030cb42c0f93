#!/usr/bin/env bash
# seccomp: libheapctl.so stays inside systemd's SystemCallFilter=@system-service.
#
# Hardened services run under a seccomp allow-list; one system call outside
# it kills the whole service with SIGSYS (or fails with EPERM under
# SystemCallErrorNumber=EPERM).  The library once called mincore(2) and did
# exactly that (fixed in 816287f).  This is the fast regression test for
# every `make check`; the slow one runs a real systemd in a container.
#
#  * the allow-lists come from the source of truth, `systemd-analyze
#    syscall-filter` (nested @groups expanded), mapped to x86-64 numbers with
#    the kernel headers: @system-service, and Debian's redis-server.service
#    (@system-service, then ~@privileged @resources);
#  * tests/programs/seccomp_run installs the list as a raw BPF filter (kill
#    the process, like systemd, or EPERM with --errno) and execs the target;
#  * negative controls: mincore() is killed by SIGSYS / gets EPERM, and the
#    x32 ABI (and int $0x80, where the kernel runs i386 calls) is killed, so
#    the filter is known to bite;
#  * a program that allocates steadily (workers, threads that start and
#    exit, two fork()ed children that allocate and exit, realloc growth, a
#    leak, deep stacks through frames without CFI so libunwind validates
#    memory) runs preloaded with prof:true,lg_prof_sample:10, prof_final,
#    prof_gdump and prof_timer_s:1, under each unwinder (libunwind, fp,
#    libgcc; the fp and libgcc runs add prof_thread_names, prof_peak and
#    prof_threshold) with the heapctl command driving it from outside the
#    filter (status, off, on, set, dump, watch; dump --peak and reset), and
#    with control:false; each under both lists and both actions, and once
#    without a filter.  Pass: exit 0, every command exits 0, the final
#    (parent and children), timer, high-water, threshold, manual and peak
#    dumps exist and `heapctl report` reads them (Total line; the leak and
#    the frames without CFI in them, or with libgcc the frame below them),
#    nothing on stderr (so no <heapctl>: diagnostic), the segment removed
#    at exit;
#  * and no refused call at all, --errno runs included, in the kernel's
#    audit records (type 1326) where they reach dmesg: a call refused with
#    EPERM that the library shrugs off leaves no other trace;
#  * a fork child's control thread, which works in a descriptor table of
#    its own, says what it has to say on the program's standard error
#    without a filter (pidfd_getfd) and under each list (/proc/self/fd/2),
#    and is not killed for it.
#
# About 25 s on 2 cores (18 runs of 2.5 s, 4 at a time).
# HC_SECCOMP_JOBS (default 4) runs that many targets at once.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup seccomp "$@"
ulimit -c 0                      # SIGSYS dumps core by default
export LC_ALL=C                  # sort, join and comm agree on one order
SRC=$(cd "$(dirname "$0")/../programs" && pwd)
HEAPCTL=$BUILD/heapctl
JOBS=${HC_SECCOMP_JOBS:-4}
T_START=$SECONDS

if [ ! -x "$HEAPCTL" ]; then
	fail "$HEAPCTL missing (run make)"
	finish
fi

# ---- 1. the sandbox ----------------------------------------------------------
SR=$WORK/seccomp_run
if ! gcc -O2 -Wall -Wextra -Werror -o "$SR" "$SRC/seccomp_run.c" 2>"$WORK/sr.cc.log"; then
	fail "cannot compile tests/programs/seccomp_run.c: $(cat "$WORK/sr.cc.log")"
	finish
fi

# ---- 2. the allow-lists --------------------------------------------------------
if ! command -v systemd-analyze >/dev/null 2>&1; then
	fail "systemd-analyze not found (Debian package systemd): the allow-lists come from it"
	finish
fi

# expand @group|name...: the system call names, one a line (nested groups
# expanded; a group seen once is not expanded again)
declare -A seen_group=()
expand() {
	local g out line
	for g in "$@"; do
		case "$g" in @*) ;; *) echo "$g"; continue ;; esac
		[ -n "${seen_group[$g]:-}" ] && continue
		seen_group[$g]=1
		if ! out=$(systemd-analyze syscall-filter "$g" 2>&1); then
			echo "systemd-analyze syscall-filter $g: $out" >&2
			return 1
		fi
		while IFS= read -r line; do
			line=${line#"${line%%[![:space:]]*}"}
			case "$line" in
			'' | '#'* | "$g") ;;
			@*) expand "$line" || return 1 ;;
			*[!a-z0-9_]*) echo "systemd-analyze syscall-filter $g: unexpected line '$line'" >&2; return 1 ;;
			*) echo "$line" ;;
			esac
		done <<<"$out"
	done
}

# name number, for every __NR_ macro of the kernel headers gcc uses
echo '#include <sys/syscall.h>' | gcc -E -dM - 2>"$WORK/nr.err" |
	sed -n 's/^#define __NR_\([a-z0-9_]*\) \([0-9][0-9]*\)$/\1 \2/p' | sort -k1,1 >"$WORK/nr.map" || true
if [ "$(wc -l <"$WORK/nr.map")" -lt 300 ]; then
	fail "cannot read __NR_ numbers from <sys/syscall.h> (linux-libc-dev): $(head -3 "$WORK/nr.err")"
	finish
fi

seen_group=()
if ! expand @system-service 2>"$WORK/ss.err" | sort -u >"$WORK/ss.names" || [ -s "$WORK/ss.err" ]; then
	fail "expanding @system-service: $(cat "$WORK/ss.err")"
	finish
fi
seen_group=()
if ! expand @privileged @resources 2>"$WORK/deny.err" | sort -u >"$WORK/deny.names" || [ -s "$WORK/deny.err" ]; then
	fail "expanding @privileged @resources: $(cat "$WORK/deny.err")"
	finish
fi
comm -23 "$WORK/ss.names" "$WORK/deny.names" >"$WORK/redis.names"
unit=/lib/systemd/system/redis-server.service
if [ -f "$unit" ] && [ "$(grep '^SystemCallFilter=' "$unit" | tr -d ' ' | tr '\n' ' ')" != \
	"SystemCallFilter=@system-service SystemCallFilter=~@privileged@resources " ]; then
	echo "note: $unit filters differently now: $(grep '^SystemCallFilter=' "$unit" | tr '\n' ' ')"
fi

# names -> numbers; the names with no x86-64 number (other architectures',
# or newer than these headers) are skipped, as libseccomp does
to_numbers() {   # <names> <numbers out>
	join "$1" "$WORK/nr.map" | awk '{ print $2 }' | sort -n >"$2"
	join -v1 "$1" "$WORK/nr.map" >"${2%.allow}.unmapped"
}
to_numbers "$WORK/ss.names" "$WORK/system-service.allow"
to_numbers "$WORK/redis.names" "$WORK/redis.allow"
for l in system-service redis; do
	echo "$l: $(wc -l <"$WORK/$l.allow") system calls allowed" \
		"($(wc -l <"$WORK/$l.unmapped") of its names have no x86-64 number in these headers)"
done
# the lists must be plausible: what every program needs is in, what the
# redis unit takes away is out
nr() { awk -v n="$1" '$1 == n { print $2 }' "$WORK/nr.map"; }
for name in execve exit_group mmap futex clone3 rt_sigreturn; do
	for l in system-service redis; do
		grep -qx "$(nr "$name")" "$WORK/$l.allow" || fail "$l list has no $name: systemd-analyze output not understood"
	done
done
for name in mincore setrlimit setuid mbind; do
	for l in system-service redis; do
		if [ "$name" = mincore ] || [ "$l" = redis ]; then
			! grep -qx "$(nr "$name")" "$WORK/$l.allow" || fail "$l list allows $name"
		fi
	done
done
[ "$FAILS" -eq 0 ] || finish
LISTS=(system-service redis)

# ---- 3. negative controls: the filter bites --------------------------------------
cat >"$WORK/bite.c" <<'EOF'
/* bite mincore|x32|int80: one call the filter must refuse */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static unsigned char vec[1];
	long r;
	if (argc > 1 && strcmp(argv[1], "x32") == 0) {
		r = syscall(0x40000000 | SYS_getpid);            /* the x32 ABI */
	} else if (argc > 1 && strcmp(argv[1], "int80") == 0) {
		long nr = 20;                                    /* i386 getpid */
		__asm__ volatile("int $0x80" : "+a"(nr) : : "memory");
		r = nr < 0 ? -1 : 0;
		errno = nr < 0 ? (int)-nr : 0;
	} else {
		long pg = sysconf(_SC_PAGESIZE);
		r = mincore((void *)((unsigned long)vec & ~(unsigned long)(pg - 1)), (size_t)pg, vec);
	}
	printf("%s\n", r == 0 ? "allowed" : strerror(errno));
	return 0;
}
EOF
if ! gcc -O1 -o "$WORK/bite" "$WORK/bite.c" 2>"$WORK/bite.cc.log"; then
	fail "cannot compile bite.c: $(cat "$WORK/bite.cc.log")"
	finish
fi
# control <what> <expected rc> <expected stdout> [seccomp_run options]
control() {
	local what=$1 want_rc=$2 want_out=$3 rc out
	shift 3
	set +e
	out=$(timeout 10 "$SR" "$@" -- "$WORK/bite" "$what" 2>"$WORK/bite.err")
	rc=$?
	set -e
	if [ "$rc" != "$want_rc" ] || [ "$out" != "$want_out" ]; then
		fail "negative control: $what under seccomp_run $*: exit $rc, '$out' (expected exit $want_rc, '$want_out') $(head -2 "$WORK/bite.err")"
	fi
}
set +e
out=$("$WORK/bite" mincore 2>&1)
set -e
[ "$out" = allowed ] || fail "negative control: mincore() fails without a filter: $out"
for l in "${LISTS[@]}"; do
	control mincore 159 "" --allow-file "$WORK/$l.allow"
	control mincore 0 "Operation not permitted" --errno --allow-file "$WORK/$l.allow"
done
control x32 159 "" --errno --allow-file "$WORK/system-service.allow"
# int $0x80 only where the kernel runs i386 calls at all (not with
# ia32_emulation=0, where it is a general protection fault)
set +e
out=$("$WORK/bite" int80 2>&1)
set -e
if [ "$out" = allowed ]; then
	control int80 159 "" --errno --allow-file "$WORK/system-service.allow"
	int80="int \$0x80 killed"
else
	int80="int \$0x80 not checked (no i386 calls on this kernel)"
fi
[ "$FAILS" -eq 0 ] && echo "negative controls: mincore killed (159) / EPERM, x32 killed, $int80"
# the kernel's audit records of refused calls reach dmesg (no auditd, dmesg
# readable): then the runs below are also checked for calls --errno refused
sleep 0.2
if dmesg 2>/dev/null | grep 'type=1326' | grep -F "exe=\"$WORK/bite\"" | grep -q 'syscall=27 .*code=0x50000'; then
	audit=yes
	echo "audit records of refused calls are in dmesg: --errno runs are checked with them too"
else
	audit=no
	echo "note: no seccomp audit records in dmesg (auditd, or dmesg restricted): --errno runs are checked by their stderr only"
fi

# ---- 4. the target ---------------------------------------------------------------
cat >"$WORK/nocfi.c" <<'EOF'
/* Built with -fno-asynchronous-unwind-tables -fno-unwind-tables and no -g:
 * no CFI for these frames anywhere, so libunwind falls back to the frame
 * chain and validates every address it reads. */
#include <stddef.h>
__attribute__((noinline)) void *deep(int depth, void *(*fn)(size_t), size_t size)
{
	void *volatile p;
	if (depth <= 0)
		p = fn(size);
	else
		p = deep(depth - 1, fn, size);
	return p;
}
EOF
cat >"$WORK/prog.c" <<'EOF'
/* A service that allocates steadily until SIGTERM (or argv[1] seconds):
 * three workers with a ring of live blocks, a leak and realloc growth,
 * threads that start and exit, and two fork()ed children that allocate
 * (with a thread of their own) and exit.  A quarter of the allocations go
 * through deep() in nocfi.c.  Exit status 0, or what went wrong. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void *deep(int depth, void *(*fn)(size_t), size_t size);

static volatile sig_atomic_t stop;
static int failed;
void **leaked;
size_t nleaked;
static pthread_mutex_t leak_lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap(long us)
{
	struct timespec ts = { us / 1000000, us % 1000000 * 1000 };
	nanosleep(&ts, NULL);
}

__attribute__((noinline)) void *alloc_block(size_t n)
{
	char *p = malloc(n);
	if (p == NULL)
		abort();
	p[0] = 1;
	p[n - 1] = 2;
	return p;
}

__attribute__((noinline)) void leak_block(size_t n)
{
	void *p = alloc_block(n);
	pthread_mutex_lock(&leak_lock);
	if (nleaked < 4096)
		leaked[nleaked++] = p;
	else
		free(p);
	pthread_mutex_unlock(&leak_lock);
}

/* one batch: blocks into a ring (the evicted one freed), a quarter through
 * the frames without CFI, one leaked block, a buffer grown by realloc */
__attribute__((noinline)) void batch(void **ring, unsigned *pos, char **grow, size_t *glen, unsigned seed)
{
	for (unsigned i = 0; i < 200; i++) {
		unsigned r = seed * 2654435761u + i * 40503u;
		size_t n = 16 + r % 600;
		void *p = (i % 4 == 0) ? deep(6 + (int)(r % 8), alloc_block, n) : alloc_block(n);
		free(ring[*pos]);
		ring[*pos] = p;
		*pos = (*pos + 1) % 256;
	}
	leak_block(1024 + seed % 8192);
	if (*glen >= (4u << 20)) {
		free(*grow);
		*grow = NULL;
		*glen = 0;
	}
	*glen += *glen / 4 + 4096;
	char *g = realloc(*grow, *glen);
	if (g == NULL)
		abort();
	memset(g + *glen - 4096, 3, 4096);
	*grow = g;
}

static void *worker(void *arg)
{
	void *ring[256] = { 0 };
	unsigned pos = 0, seed = (unsigned)(size_t)arg;
	char *grow = NULL;
	size_t glen = 0;
	while (!stop) {
		batch(ring, &pos, &grow, &glen, seed++);
		nap(2000);
	}
	for (unsigned i = 0; i < 256; i++)
		free(ring[i]);
	free(grow);
	return NULL;
}

static void *short_lived(void *arg)
{
	void *ring[256] = { 0 };
	unsigned pos = 0;
	char *grow = NULL;
	size_t glen = 0;
	for (unsigned k = 0; k < 3; k++)
		batch(ring, &pos, &grow, &glen, (unsigned)(size_t)arg + k);
	for (unsigned i = 0; i < 256; i++)
		free(ring[i]);
	free(grow);
	return NULL;
}

static void child(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, short_lived, (void *)7) != 0)
		_exit(4);
	short_lived((void *)8);
	pthread_join(t, NULL);
	nap(200000);
	exit(0);              /* atexit: the child's own final dump */
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	double limit = argc > 1 ? atof(argv[1]) : 4;
	leaked = calloc(4096, sizeof *leaked);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	pthread_t w[3];
	for (long i = 0; i < 3; i++)
		if (pthread_create(&w[i], NULL, worker, (void *)(i * 1000)) != 0)
			return 5;
	double t0 = now();
	unsigned forks = 0, spawned = 0;
	while (!stop && now() - t0 < limit) {
		pthread_t t;
		if (pthread_create(&t, NULL, short_lived, (void *)(size_t)spawned++) != 0 ||
		    pthread_join(t, NULL) != 0) {
			fprintf(stderr, "prog: pthread_create/join failed\n");
			failed = 6;
		}
		if (forks < 2 && now() - t0 > 0.4 + forks) {
			forks++;
			pid_t c = fork();
			if (c == 0)
				child();
			printf("child %d\n", (int)c);
			fflush(stdout);
			int st = 0;
			pid_t w = -1;
			while (c > 0 && (w = waitpid(c, &st, 0)) < 0 && errno == EINTR)
				;
			if (c < 0 || w != c) {
				fprintf(stderr, "prog: fork/waitpid failed\n");
				failed = 7;
			} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr, "prog: child %d %s %d\n", (int)c,
				    WIFSIGNALED(st) ? "killed by signal" : "exited with",
				    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
				failed = 8;
			}
		}
		nap(50000);
	}
	if (forks < 2) {
		fprintf(stderr, "prog: stopped before both forks\n");
		failed = 9;
	}
	stop = 1;
	for (int i = 0; i < 3; i++)
		pthread_join(w[i], NULL);
	return failed;
}
EOF
if ! gcc -O1 -fno-omit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables \
	-c -o "$WORK/nocfi.o" "$WORK/nocfi.c" 2>"$WORK/nocfi.cc.log"; then
	fail "cannot compile nocfi.c: $(cat "$WORK/nocfi.cc.log")"
	finish
fi
if readelf -S "$WORK/nocfi.o" | grep -q 'eh_frame\|debug_frame'; then
	fail "nocfi.o has CFI after all: $(readelf -S "$WORK/nocfi.o" | grep frame)"
fi
compile "$WORK/prog" "$WORK/prog.c" "$WORK/nocfi.o"

# ---- 5. the scenarios ------------------------------------------------------------
why() {   # <exit status>: what it means
	case "$1" in
	159) echo " (SIGSYS: a system call outside the list)" ;;
	124) echo " (timed out)" ;;
	esac
}

# scenario <tag> <list|none> <kill|errno> <unwinder> <cli|noctl> <plain|extras>
# (extras: also prof_thread_names, prof_peak and prof_threshold, and the
# commands reset and dump --peak)
# Runs one target and checks it; failures go to $WORK/<tag>/fails, one a line.
scenario() {
	local tag=$1 list=$2 action=$3 unw=$4 mode=$5 extras=$6
	local d=$WORK/$tag
	mkdir -p "$d"
	: >"$d/fails"
	: >"$d/out"
	sfail() { printf '%s: %s\n' "$tag" "$(printf '%s' "$*" | tr '\n' '|')" >>"$d/fails"; }
	errtext() { [ -s "$1" ] && head -c 800 "$1" || echo "(empty)"; }
	local conf="prof:true,prof_active:true,lg_prof_sample:10,prof_unwind:$unw"
	conf+=",prof_final:true,prof_gdump:true,prof_timer_s:1,prof_prefix:$d/p"
	[ "$mode" = noctl ] && conf+=",control:false"
	[ "$extras" = extras ] && conf+=",prof_thread_names:true,prof_peak:true,prof_threshold:2M"
	local sandbox=()
	if [ "$list" != none ]; then
		sandbox=("$SR" --allow-file "$WORK/$list.allow")
		[ "$action" = errno ] && sandbox=("$SR" --errno --allow-file "$WORK/$list.allow")
		sandbox+=(--)
	fi
	# the filter is installed before the exec that loads the library, as
	# systemd does; env runs inside it and sets the preload for prog only
	local t0=$SECONDS us0=${EPOCHREALTIME/./}
	# (sh writes the pid the target will have, so that a target killed
	# before it prints its own is still known)
	timeout 40 sh -c 'echo $$ >"$0"; exec "$@"' "$d/pid" \
		"${sandbox[@]}" env LD_PRELOAD="$LIB" HEAPCTL_CONF="$conf" \
		"$d/../prog" 20 >"$d/out" 2>"$d/err" &
	local job=$! pid="" rc
	for _ in $(seq 200); do
		pid=$(sed -n 's/^pid \([0-9][0-9]*\)$/\1/p' "$d/out")
		[ -n "$pid" ] && break
		kill -0 "$job" 2>/dev/null || break
		sleep 0.05
	done
	if [ -n "$pid" ] && [ "$pid" != "$(cat "$d/pid")" ]; then
		sfail "the target says it is pid $pid, sh said $(cat "$d/pid")"
	fi
	if [ -z "$pid" ]; then
		wait "$job" && rc=0 || rc=$?
		sfail "target died before it printed its pid: exit $rc$(why "$rc"), stderr: $(errtext "$d/err")"
		return
	fi
	local cmd m="" peak=""
	if [ "$mode" = cli ]; then
		timeout 20 "$HEAPCTL" watch "$pid" --count 2 --json >"$d/watch.out" 2>"$d/watch.err" &
		local watcher=$!
		sleep 0.3
		local cmds=(status off on "set prof.lg_sample=8" "dump --prefix $d/x")
		[ "$extras" = extras ] && cmds+=("dump --peak --prefix $d/y" "reset --lg-sample 9")
		for cmd in "${cmds[@]}"; do
			kill -0 "$pid" 2>/dev/null || break      # died: said below
			local words
			read -ra words <<<"$cmd"
			timeout 20 "$HEAPCTL" "${words[0]}" "$pid" "${words[@]:1}" \
				>"$d/${words[0]}.out" 2>"$d/${words[0]}.err" && rc=0 || rc=$?
			[ "$rc" -eq 0 ] ||
				sfail "heapctl ${words[0]} $pid ${words[*]:1}: exit $rc: $(head -c 300 "$d/${words[0]}.err")"
		done
		wait "$watcher" && rc=0 || rc=$?
		[ "$rc" -eq 0 ] || sfail "heapctl watch $pid --count 2 --json: exit $rc: $(head -c 300 "$d/watch.err")"
		[ "$(grep -c '^{.*}$' "$d/watch.out")" -eq 2 ] ||
			sfail "heapctl watch printed not 2 JSON events: $(head -c 300 "$d/watch.out")"
		grep -q . "$d/status.out" 2>/dev/null || sfail "heapctl status printed nothing"
		m=$(ls "$d"/x."$pid".*.m*.heap 2>/dev/null | head -1) || true
		[ -n "$m" ] || sfail "heapctl dump --prefix $d/x: no dump file ($(cat "$d/dump.out" 2>/dev/null))"
		if [ "$extras" = extras ]; then
			peak=$(ls "$d"/y."$pid".*.heap 2>/dev/null | head -1) || true
			[ -n "$peak" ] || sfail "heapctl dump --peak --prefix $d/y: no dump file ($(cat "$d/dump.out" 2>/dev/null))"
		fi
	else
		# control:false: no segment, so heapctl finds no library (exit 4)
		timeout 20 "$HEAPCTL" status "$pid" >/dev/null 2>&1 && rc=0 || rc=$?
		[ "$rc" -eq 4 ] || sfail "control:false, yet heapctl status $pid exits $rc (expected 4)"
	fi
	# let the timer and high-water dumps happen, then stop it like systemd;
	# at 2.5 s, between the timer's ticks (at about 1, 2 and 3 s)
	while [ $((${EPOCHREALTIME/./} - us0)) -lt 2500000 ]; do sleep 0.1; done
	kill -TERM "$pid" 2>/dev/null || true
	wait "$job" && rc=0 || rc=$?
	sed -n 's/^child \([0-9][0-9]*\)$/\1/p' "$d/out" >"$d/children"
	if [ "$rc" -ne 0 ]; then
		# (the heapctl commands and dumps it could not answer are moot)
		sed -i '/: heapctl /d' "$d/fails"
		sfail "target exited with status $rc$(why "$rc"); stderr: $(errtext "$d/err")"
		return
	fi
	if [ -s "$d/err" ]; then
		sfail "target wrote on stderr (a blocked call?): $(errtext "$d/err")"
	fi
	local segs
	segs=$(find /dev/shm -maxdepth 1 \( -name "heapctl.$pid" -o -name "heapctl.$pid.*" \) -printf '%f ')
	[ -z "$segs" ] || sfail "control segment left behind at exit: /dev/shm/$segs"
	# the dumps: final (the parent and both children), timer, high-water
	local f t u th=""
	f=$(ls "$d"/p."$pid".*.f.heap 2>/dev/null | head -1) || true
	t=$(ls "$d"/p."$pid".*.t*.heap 2>/dev/null | sort -t. -k3,3n | head -1) || true
	u=$(ls "$d"/p."$pid".*.u*.heap 2>/dev/null | tail -1) || true
	[ -n "$f" ] || sfail "no final dump p.$pid.*.f.heap: $(ls "$d" | tr '\n' ' ')"
	[ -n "$t" ] || sfail "no timer dump p.$pid.*.t*.heap: $(ls "$d" | tr '\n' ' ')"
	[ -n "$u" ] || sfail "no high-water dump p.$pid.*.u*.heap: $(ls "$d" | tr '\n' ' ')"
	if [ "$extras" = extras ]; then
		th=$(ls "$d"/p."$pid".*.s*.heap 2>/dev/null | head -1) || true
		[ -n "$th" ] || sfail "no threshold dump p.$pid.*.s*.heap: $(ls "$d" | tr '\n' ' ')"
	fi
	local child c="" dump
	[ "$(wc -l <"$d/children")" -eq 2 ] || sfail "the target did not fork twice: $(cat "$d/out")"
	while read -r child; do
		c=$(ls "$d"/p."$child".*.f.heap 2>/dev/null | head -1) || true
		[ -n "$c" ] || sfail "no final dump of the child $child: $(ls "$d" | tr '\n' ' ')"
	done <"$d/children"
	# every dump is a heap profile; one of each kind is read by the report
	for dump in "$d"/*.heap; do
		[ -f "$dump" ] || continue
		[ "$(head -c 8 "$dump")" = heap_v2/ ] || sfail "$(basename "$dump") is no heap_v2 profile: $(head -c 100 "$dump")"
	done
	# one of each kind through the report: exit 0 and a Total line, except
	# for a profile of no samples (a dump just after `heapctl reset`), of
	# which the report, like jeprof, prints nothing
	for dump in "$f" "$t" "$u" ${c:+"$c"} ${m:+"$m"} ${peak:+"$peak"} ${th:+"$th"}; do
		[ -n "$dump" ] && [ -f "$dump" ] || continue
		timeout 30 "$HEAPCTL" report "$dump" >"$dump.txt" 2>"$dump.err" && rc=0 || rc=$?
		if [ "$rc" -ne 0 ]; then
			sfail "heapctl report $(basename "$dump"): exit $rc, $(head -c 300 "$dump.err")"
		elif ! grep -q '^Total: ' "$dump.txt"; then
			if [ "$dump" = "$f" ] || [ "$dump" = "$m" ] || ! sed -n 2p "$dump" | grep -q '^ *t\*: 0: 0 '; then
				sfail "heapctl report $(basename "$dump"): no Total line: $(head -c 300 "$dump.txt" "$dump.err")"
			fi
		fi
	done
	# the leak is in the final dump; the stacks through the frames without
	# CFI are in a dump taken while the workers' blocks are live: the manual
	# one (before any reset), or without the control thread the first timer
	# dump
	if [ -n "$f" ] && ! grep -q ' leak_block$' "$f.txt" 2>/dev/null; then
		sfail "final dump's report has no leak_block: $(head -c 400 "$f.txt")"
	fi
	# libunwind (falling back to the frame chain) and fp follow the frame
	# pointers through deep(); libgcc's unwinder has only CFI to go by and
	# may stop at the first frame without it, so there the stacks are only
	# sure to hold alloc_block(), which deep() calls (seen: one libgcc run
	# in several with no sample through deep() at all)
	local live=${m:-$t} want=deep
	[ "$unw" != libgcc ] || want=alloc_block
	if [ -n "$live" ] && ! grep -q " $want\$" "$live.txt" 2>/dev/null; then
		sfail "$(basename "$live")'s report has no $want(): $(head -c 400 "$live.txt")"
	fi
	# a dump in flight on another thread (the timer's) when the process
	# exits is cut between its open and its rename: a known race of the
	# library, not of the filter, so only a note
	local tmps
	tmps=$(find "$d" -name '*.tmp*' -printf '%f ')
	[ -z "$tmps" ] || echo "note: $tag: temporary dump files left behind at exit: $tmps"
	echo "$tag: $((SECONDS - t0)) s" >"$d/time"
}

# every scenario: a baseline without a filter first (if that fails, the
# test itself is broken), then each list x action
runs=("baseline none kill libunwind cli plain" "baseline-extras none kill fp cli extras")
for l in "${LISTS[@]}"; do
	for a in kill errno; do
		for s in "libunwind cli plain" "fp cli extras" "libgcc cli extras" "libunwind noctl plain"; do
			set -- $s
			runs+=("$l-$a-$1-$2 $l $a $1 $2 $3")
		done
	done
done
tags=()
for r in "${runs[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
	set -- $r
	tags+=("$1")
	scenario "$@" &
done
wait || true
# Every call the filter refused, also those --errno answered quietly: the
# kernel's audit records (seccomp_run sets SECCOMP_FILTER_FLAG_LOG), which
# name the pid and the number.  Best effort: only where they reach dmesg
# (and the kernel's printk rate limit may drop some of many).
if [ "$audit" = yes ]; then
	sleep 0.2                   # kauditd prints asynchronously
	dmesg 2>/dev/null | grep 'type=1326' | grep -F "exe=\"$WORK/prog\"" |
		sed -n 's/.* pid=\([0-9]*\) .* syscall=\([0-9]*\) .* code=\(0x[0-9a-f]*\).*/\1 \2 \3/p' |
		sort -u >"$WORK/refused" || true
	while read -r p n code; do
		case "$code" in 0x8*) a=killed ;; 0x5*) a="refused with EPERM" ;; *) a="refused ($code)" ;; esac
		msg="seccomp $a system call $n ($(awk -v n="$n" '$2 == n { print $1 }' "$WORK/nr.map")) in pid $p"
		t=$(grep -lx "$p" "$WORK"/*/pid "$WORK"/*/children 2>/dev/null | head -1) || true
		if [ -n "$t" ]; then
			t=${t%/*}
			echo "${t##*/}: $msg" >>"$t/fails"
		else
			fail "$msg (a process of no known run)"
		fi
	done <"$WORK/refused"
fi
# A fork child's control thread, in its own descriptor table, reaches the
# program's standard error (through pidfd_getfd without a filter; under one,
# which may kill that call, through /proc/self/fd/2, here a pipe): a child
# that cannot make its segment (RLIMIT_FSIZE, inherited) says so, and
# lives.
cat >"$WORK/fsize.c" <<'EOF'
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
	free(malloc(64));
	struct rlimit one = { 1, 1 };
	setrlimit(RLIMIT_FSIZE, &one);
	pid_t c = fork();
	if (c == 0) {
		usleep(200000);
		_exit(0);
	}
	int st;
	return waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
EOF
compile "$WORK/fsize" "$WORK/fsize.c"
for l in none "${LISTS[@]}"; do
	sandbox=()
	[ "$l" = none ] || sandbox=("$SR" --allow-file "$WORK/$l.allow" --)
	rc=0
	LD_PRELOAD="$LIB" "${sandbox[@]}" "$WORK/fsize" 2>&1 >/dev/null | cat >"$WORK/fsize.$l.err" || rc=$?
	[ "$rc" -eq 0 ] || fail "$l: the program whose fork child cannot make its segment: exit $rc$(why "$rc")"
	got=$(sed -E 's/heapctl\.[0-9]+/heapctl.PID/' "$WORK/fsize.$l.err")
	[ "$got" = "<heapctl>: cannot map the control segment /dev/shm/heapctl.PID: File too large" ] ||
		fail "$l: what a fork child's control thread said under the filter: '$got'"
done

passed=0
for tag in "${tags[@]}"; do
	if [ -s "$WORK/$tag/fails" ]; then
		while IFS= read -r line; do fail "$line"; done <"$WORK/$tag/fails"
	elif [ -f "$WORK/$tag/time" ]; then
		passed=$((passed + 1))
	else
		fail "$tag: the scenario did not finish"
	fi
done
if [ "$FAILS" -gt 0 ]; then
	echo "where a call comes from: HEAPCTL_CONF=... LD_PRELOAD=$LIB strace -f -k -e trace=NAME PROGRAM" \
		"(the program and the configurations are in this script; HC_KEEP=1 keeps $WORK)"
fi
echo "$passed of ${#tags[@]} runs passed (${#LISTS[@]} lists x kill/errno x libunwind, fp, libgcc, control:false; and 2 baselines without a filter), $((SECONDS - T_START)) s"
finish
