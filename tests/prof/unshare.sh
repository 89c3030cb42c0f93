#!/usr/bin/env bash
# unshare: the control thread steps aside for calls that need a
# single-threaded process.
#
#  * `unshare --user` (util-linux) in a preloaded shell works: before, the
#    control thread made it fail with "unshare failed: Invalid argument".
#  * A program that calls unshare(CLONE_NEWUSER) and then setns() into
#    another process's user namespace succeeds at both, and afterwards still
#    answers heapctl (status, set, dump): the thread came back.
#  * A program that really has a second thread gets EINVAL, as without the
#    library.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup unshare "$@"
H=$BUILD/heapctl

if ! unshare --user true 2>/dev/null; then
	fail "unshare --user fails even without the library (user namespaces disabled?)"
	finish
fi

run shell "$WORK" LD_PRELOAD="$LIB" bash -c 'unshare --user --map-root-user id -u'
check_eq "unshare --user --map-root-user id -u in a preloaded shell: exit status" "$RC" 0
check_eq "unshare --user --map-root-user id -u: output" "$(cat "$WORK/shell.out")" 0
check_stderr_empty shell

cat >"$WORK/prog.c" <<'EOF'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *idle(void *arg) { pause(); return arg; }

int main(int argc, char **argv)
{
	char ns[64] = "";
	free(malloc(100));
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	int r = fd < 0 ? -1 : setns(fd, CLONE_NEWUSER);
	printf("setns %s\n", r == 0 ? "ok" : strerror(errno));
	if (readlink("/proc/self/ns/user", ns, sizeof ns - 1) < 0)
		strcpy(ns, "?");
	printf("joined %s\n", ns);
	r = unshare(CLONE_NEWUSER);    /* a child of the joined namespace */
	printf("unshare %s\n", r == 0 ? "ok" : strerror(errno));
	pthread_t t;
	pthread_create(&t, NULL, idle, NULL);
	r = unshare(CLONE_NEWUSER);
	printf("threaded %s\n", r == 0 ? "ok" : strerror(errno));
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	sleep(30);
	return 0;
}
EOF
compile "$WORK/prog" "$WORK/prog.c"

# a user namespace to join, where root (who runs this test) is mapped
unshare --user --map-root-user sleep 60 &
holder=$!
prog=
cleanup() {
	kill "$holder" 2>/dev/null || true
	[ -z "$prog" ] || kill "$prog" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
for _ in $(seq 50); do
	[ "$(readlink "/proc/$holder/ns/user")" != "$(readlink /proc/self/ns/user)" ] && break
	sleep 0.1
done

mkdir -p "$WORK/run"
(cd "$WORK/run" && exec env MALLOC_CONF=prof:true LD_PRELOAD="$LIB" "$WORK/prog" "/proc/$holder/ns/user") \
    >"$WORK/prog.out" 2>"$WORK/prog.err" &
prog=$!
for _ in $(seq 100); do
	grep -q '^pid ' "$WORK/prog.out" 2>/dev/null && break
	sleep 0.1
done
check_eq "unshare(CLONE_NEWUSER)" "$(sed -n 's/^unshare //p' "$WORK/prog.out")" ok
check_eq "setns(user namespace of another process, CLONE_NEWUSER)" "$(sed -n 's/^setns //p' "$WORK/prog.out")" ok
check_eq "unshare(CLONE_NEWUSER) with a second thread of the program's" \
    "$(sed -n 's/^threaded //p' "$WORK/prog.out")" "Invalid argument"
check_eq "the namespace setns joined is the other process's" \
    "$(sed -n 's/^joined //p' "$WORK/prog.out")" "$(readlink "/proc/$holder/ns/user")"
u=$(readlink "/proc/$prog/ns/user")
[ "$u" != "$(readlink "/proc/$holder/ns/user")" ] && [ "$u" != "$(readlink /proc/self/ns/user)" ] ||
	fail "after unshare(CLONE_NEWUSER) the program is still in $u"

# the control thread is back: heapctl commands work
out=$("$H" set "$prog" prof.gdump_pct=50 2>&1) || fail "heapctl set after unshare/setns: $out"
out=$("$H" dump "$prog" -o "$WORK/after.heap" 2>&1) || fail "heapctl dump after unshare/setns: $out"
[ -s "$WORK/after.heap" ] && check_eq "dump after unshare/setns: header" "$(head -c 8 "$WORK/after.heap")" "heap_v2/" ||
	fail "no dump written after unshare/setns"
check_eq "control threads in the program after the calls" "$(cat /proc/"$prog"/task/*/comm | grep -c heapctl-ctl)" 1
check_stderr_empty prog
finish
