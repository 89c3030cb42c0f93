#!/usr/bin/env bash
# fork_children: what a forked child costs and leaves behind.
#
#  * Children that end at once (_exit, exit, exec) never make a control
#    segment: none of 300 such children that ended within 15 ms of their
#    fork (the grace is 20 ms; the parent times each) leaves a file in
#    /dev/shm (before, each _exit child left its heapctl.<pid> for the next
#    sweep).  On a loaded machine some take longer, and may rightly have
#    published theirs: they are not counted.  The program forks more
#    (up to 1,500) until 150 have been that quick; at least 100 must be.
#  * A child that lives on publishes its own segment 20 ms after the fork
#    and answers heapctl under its own pid, whether it allocates or only
#    sleeps (its control thread starts in the fork): an idle pre-forked
#    worker is reachable (before, one that never allocated was not).
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup fork_children "$@"
H=$BUILD/heapctl

cat >"$WORK/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

int main(void)
{
	free(malloc(64));
	setvbuf(stdout, NULL, _IONBF, 0);     /* nothing buffered for children to repeat */
	printf("pid %d\n", (int)getpid());
	int n = 0;
	for (int quick = 0; n < 300 || (quick < 150 && n < 1500); n++) {
		int i = n % 300;
		long long t0 = now_us();
		pid_t c = fork();
		if (c == 0) {
			if (i >= 100 && i < 200) {        /* a little work, then exit() */
				char *p = malloc(100 + (size_t)i);
				memset(p, 1, 100);
				free(p);
				exit(0);
			}
			if (i < 100)                      /* system(), popen */
				execl("/bin/true", "true", (char *)NULL);
			_exit(0);
		}
		waitpid(c, NULL, 0);
		/* the child lived less than this: from before its fork to after
		 * it was reaped */
		long long us = now_us() - t0;
		quick += us < 15000;
		printf("short %d %lld\n", (int)c, us);
	}
	printf("short done %d\n", n);
	sleep(2);                                      /* the test looks now */
	pid_t idle = fork();
	if (idle == 0) {                               /* lives on, never allocates */
		sleep(20);
		_exit(0);
	}
	pid_t c = fork();
	if (c == 0) {                                  /* a worker that lives on */
		for (int i = 0; i < 2000; i++) {
			void *p[16];
			for (int k = 0; k < 16; k++)
				p[k] = malloc(1000);
			for (int k = 0; k < 16; k++)
				free(p[k]);
			usleep(10000);
		}
		_exit(0);
	}
	printf("idle %d\n", (int)idle);
	printf("long %d\n", (int)c);
	fflush(stdout);
	sleep(20);
	return 0;
}
EOF
compile "$WORK/prog" "$WORK/prog.c"

mkdir -p "$WORK/run"
# what other processes left before (killed ones, other PID namespaces'):
# not this program's children's
ls /dev/shm | grep '^heapctl\.' >"$WORK/before" || true
(cd "$WORK/run" && exec env LD_PRELOAD="$LIB" "$WORK/prog") >"$WORK/prog.out" 2>"$WORK/prog.err" &
prog=$!
trap 'kill $prog $(sed -n "s/^\(long\|idle\) //p" "$WORK/prog.out" 2>/dev/null) 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 600); do
	grep -q '^short done' "$WORK/prog.out" 2>/dev/null && break
	sleep 0.1
done
# before any later process of the program could sweep them
left=0 quick=0
while read -r c us; do
	[ "$us" -lt 15000 ] || continue
	quick=$((quick + 1))
	for f in /dev/shm/heapctl."$c" /dev/shm/heapctl."$c".*; do
		if [ -e "$f" ] && ! grep -qxF "${f#/dev/shm/}" "$WORK/before"; then
			left=$((left + 1))
		fi
	done
done < <(sed -n 's/^short \([0-9]*\) \([0-9]*\)$/\1 \2/p' "$WORK/prog.out")
forked=$(sed -n 's/^short done //p' "$WORK/prog.out")
check_eq "segments left in /dev/shm by the $quick of $forked children that ended within 15 ms" "$left" 0
[ "$quick" -ge 100 ] || fail "only $quick of $forked children ended within 15 ms of their fork: too few to tell"
check_eq "children that ended at once" "$(grep -c '^short [0-9]' "$WORK/prog.out")" "$forked"
for _ in $(seq 100); do
	grep -q '^long ' "$WORK/prog.out" 2>/dev/null && break
	sleep 0.1
done
long=$(sed -n 's/^long //p' "$WORK/prog.out")
[ -n "$long" ] || { fail "the program did not fork its long-lived child: $(head -3 "$WORK/prog.err")"; finish; }

ok=
for _ in $(seq 50); do
	if out=$("$H" status "$long" --json 2>&1) && [[ "$out" == *"\"pid\": $long"* ]]; then
		ok=1
		break
	fi
	sleep 0.1
done
[ -n "$ok" ] || fail "the long-lived child $long never answered heapctl status: $out"
lst=$("$H" list 2>&1 || true)
grep -qE "^$long " <<<"$lst" || fail "heapctl list does not show the long-lived child $long: $lst"
idle=$(sed -n 's/^idle //p' "$WORK/prog.out")
check_eq "threads of the child that sleeps without allocating" "$(ls "/proc/$idle/task" | wc -l)" 2
out=$("$H" status "$idle" --json 2>&1) || fail "heapctl status of the child that never allocated: $out"
[[ "$out" == *"\"pid\": $idle"* ]] || fail "heapctl status of the idle child names another pid: $out"
out=$("$H" dump "$idle" --prefix "$WORK/idle" 2>&1) || fail "heapctl dump of the idle child: $out"
check_eq "the idle child's first dump" "$out" "$WORK/idle.$idle.0.m0.heap"
check_stderr_empty prog
finish
