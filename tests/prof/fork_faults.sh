#!/usr/bin/env bash
# fork_faults: what the library's fork handlers cost a child in page
# faults.  Every page they write after fork (a lock to unlock or reinit, a
# flag to reset) is a copy-on-write fault at every fork, in the child and,
# for the unlocks, in the parent; allocator/fork_data.ld keeps all of it on
# one page.  A program with two threads' heaps, the shared heaps and a
# large run forks 31 times; each child reads its own minor faults at once
# (they count from the fork, the handlers included) and exits with them.
# With control:false (no control thread) the median may exceed the same
# program's under glibc by at most 6: on the project machine 4 (fork-data
# page, a heap, two of the library's code pages), and 12 when the locks and
# the state they guard were spread over the files' data.  The child's
# control thread, started in the fork so that an idle child is reachable,
# adds its own (its stack, its TLS, glibc's thread list: 20 on the project
# machine): at most 26 over glibc in all.  Counts, not times: they do not
# depend on the machine's load.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup fork_faults "$@"

cat >"$WORK/prog.c" <<'PROG'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void *keep[3][64];

static void *work(void *arg)
{
	void **v = arg;
	for (int i = 0; i < 64; i++) {
		v[i] = malloc(16 + (size_t)i * 24);
		memset(v[i], 1, 16 + (size_t)i * 24);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, work, keep[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	work(keep[2]);
	char *big = malloc(100000);
	memset(big, 1, 100000);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);    /* its code's pages faulted in here */
	int v[31], n = 0;
	for (int k = 0; k < 31; k++) {
		pid_t c = fork();
		if (c < 0)
			return 1;
		if (c == 0) {
			getrusage(RUSAGE_SELF, &ru);
			_exit(ru.ru_minflt > 250 ? 250 : (int)ru.ru_minflt);
		}
		int st;
		if (waitpid(c, &st, 0) != c || !WIFEXITED(st))
			return 1;
		v[n++] = WEXITSTATUS(st);
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			int x = v[j];
			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	printf("%d\n", v[n / 2]);
	free(big);
	return 0;
}
PROG
compile "$WORK/prog" "$WORK/prog.c"

run glibc "$WORK" "$WORK/prog"
[ "$RC" -eq 0 ] || fail "the program failed without the library: exit $RC: $(cat "$WORK/glibc.err")"
run lib "$WORK" LD_PRELOAD="$LIB" HEAPCTL_CONF=control:false "$WORK/prog"
[ "$RC" -eq 0 ] || fail "the program failed under the library: exit $RC: $(cat "$WORK/lib.err")"
base=$(cat "$WORK/glibc.out") mine=$(cat "$WORK/lib.out")
if ! [[ "$base" =~ ^[0-9]+$ && "$mine" =~ ^[0-9]+$ ]]; then
	fail "no fault counts: glibc '$base', library '$mine'"
elif [ "$mine" -gt $((base + 6)) ]; then
	fail "a fork child takes $mine page faults before it returns from fork under the library (control:false), $base under glibc (at most 6 more expected): the fork handlers write more pages than the one of allocator/fork_data.ld"
fi
# the child's control thread, started in the fork
run ctl "$WORK" LD_PRELOAD="$LIB" "$WORK/prog"
mine=$(cat "$WORK/ctl.out")
[ "$RC" -eq 0 ] && [[ "$mine" =~ ^[0-9]+$ ]] && [ "$mine" -le $((base + 26)) ] ||
	fail "with its control thread a fork child takes '$mine' page faults (exit $RC), $base under glibc (at most 26 more expected)"

# prof:true adds no page of its own to a child
run prof "$WORK" LD_PRELOAD="$LIB" HEAPCTL_CONF=prof:true,control:false "$WORK/prog"
mine=$(cat "$WORK/prof.out")
[ "$RC" -eq 0 ] && [[ "$mine" =~ ^[0-9]+$ ]] && [ "$mine" -le $((base + 6)) ] ||
	fail "with prof:true a fork child takes '$mine' page faults (exit $RC), $base under glibc"
finish
