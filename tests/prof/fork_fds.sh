#!/usr/bin/env bash
# fork_fds: a fork child's descriptors stay the program's.
#
# The child's control thread makes its segment 20 ms after the fork, while
# the child's own code runs; what it opens then must never take a number
# the child is about to get from open().  Before, it opened /proc/self/maps
# (and /proc/self/stat, the segment file) in the program's table: a child
# that had closed its standard input and reopened /dev/null across that
# moment got 3 instead of 0 in most of its opens from then on.
#
#  * A child that closes its standard input and reopens /dev/null, again
#    and again for 150 ms (across the grace), gets 0 from every open.
#  * Right after the fork, the child has the parent's descriptors and, at
#    numbers from 32 up, its /proc/PID/maps (kept for dumps after a
#    chroot) and, until the control thread has moved them into its own
#    table, /proc/PID and /dev/shm.  150 ms later it has no directory of
#    ours (which code in a chrooted child could use to get out): its maps
#    alone.
#  * The control thread's own table holds nothing of the program's: the
#    child's end of a pipe, closed by the child, gives the parent its EOF
#    while the child lives on.
#  * The timer thread (prof_timer_s) has a table of its own too, holding
#    nothing of the program's, and writes its dumps.  In a fork child that
#    chrooted into a root without /proc, it takes a copy of the child's
#    kept maps along: its dumps have MAPPED_LIBRARIES (before, none).
#  * (What the control thread says still reaches the program's standard
#    error, with and without a seccomp filter: tests/prof/seccomp.sh.)
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup fork_fds "$@"
H=$BUILD/heapctl

cat >"$WORK/prog.c" <<'EOF'
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* every descriptor but the listing's own, with what it is */
static void fds(const char *tag)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char path[64], target[PATH_MAX];
		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, target, sizeof target - 1);
		target[n > 0 ? n : 0] = 0;
		printf("%s %s %s\n", tag, e->d_name, target);
	}
	closedir(d);
}

int main(void)
{
	free(malloc(64));
	setvbuf(stdout, NULL, _IONBF, 0);
	fds("parent");
	int p[2];
	if (pipe(p))
		return 2;
	pid_t c = fork();
	if (c == 0) {
		close(p[0]);
		fds("early");
		close(0);
		long n = 0, moved = 0;
		for (long long t0 = now_ms(); now_ms() - t0 < 150; n++) {
			int fd = open("/dev/null", O_RDONLY);
			if (fd != 0)
				moved++;
			close(fd);
		}
		if (open("/dev/null", O_RDONLY) != 0)
			moved++;
		printf("opens %ld moved %ld\n", n, moved);
		fds("late");
		close(p[1]);
		printf("child %d\n", (int)getpid());
		for (;;)
			pause();
	}
	close(p[1]);
	char b;
	alarm(10); /* an EOF that never comes ends the parent here */
	ssize_t r = read(p[0], &b, 1);
	printf("eof %zd\n", r);
	sleep(30);
	return 0;
}
EOF
compile "$WORK/prog" "$WORK/prog.c"

LD_PRELOAD="$LIB" "$WORK/prog" >"$WORK/prog.out" 2>"$WORK/prog.err" &
prog=$!
trap 'kill $prog $(sed -n "s/^child //p" "$WORK/prog.out" 2>/dev/null) 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do
	grep -q '^eof ' "$WORK/prog.out" 2>/dev/null && break
	sleep 0.1
done
child=$(sed -n 's/^child //p' "$WORK/prog.out")
[ -n "$child" ] || { fail "the child did not get through its opens: $(cat "$WORK/prog.out" "$WORK/prog.err")"; finish; }
check_eq "the parent's read when the child closed its end of the pipe" "$(sed -n 's/^eof //p' "$WORK/prog.out")" 0

read -r n moved < <(sed -n 's/^opens \([0-9]*\) moved \([0-9]*\)$/\1 \2/p' "$WORK/prog.out")
check_eq "opens of /dev/null (of $n) that did not get descriptor 0" "$moved" 0
[ "$n" -ge 100 ] || fail "only $n opens in 150 ms: too few to tell"

# the child's table against the parent's, right after the fork and later
set_of() { sed -n "s/^$1 //p" "$WORK/prog.out" | sort; }
extra() { comm -13 <(set_of parent | grep -v '^[0-9]* pipe:') <(set_of "$1" | grep -v '^[0-9]* pipe:\|^0 '); }
# right after the fork: its maps, and until the control thread has moved
# them into its own table (microseconds), the two directories; all of
# them from 32 up
while IFS=' ' read -r fd what; do
	[ "$fd" -ge 32 ] || fail "the child has $what at descriptor $fd, not 32 or above"
	case $what in
	"/proc/$child/maps" | "/proc/$child" | /dev/shm | "") ;; # "": closed as the child looked
	*) fail "right after the fork the child has descriptor $fd, $what, which the parent had not" ;;
	esac
done < <(extra early)
check_eq "descriptors the child has and the parent had not, 150 ms after the fork" \
	"$(extra late | sed -E 's/^[0-9]+ //')" "/proc/$child/maps"

# the control thread's own table: its pidfds and its own maps, nothing else
ok=
for _ in $(seq 50); do
	out=$("$H" status "$child" --json 2>&1) && [[ "$out" == *"\"pid\": $child"* ]] && ok=1 && break
	sleep 0.1
done
[ -n "$ok" ] || fail "the child $child never answered heapctl status: $out"
ctl=
for t in /proc/"$child"/task/*; do
	[ "$(cat "$t/comm" 2>/dev/null)" = heapctl-ctl ] && ctl=$t
done
[ -n "$ctl" ] || fail "the child $child has no heapctl-ctl thread"
check_eq "what the control thread's table holds" "$(for f in "$ctl"/fd/*; do readlink "$f"; done | sort)" \
	"$(printf '%s\n' "/proc/$child/maps" 'anon_inode:[pidfd]' 'anon_inode:[pidfd]' 'anon_inode:[pidfd]' | sort)"

check_stderr_empty prog

# the timer thread (prof_timer_s) writes its dumps from a table of its own.
# timer ROOT: the same from a fork child that chroots into ROOT first
cat >"$WORK/timer.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void churn(int n)
{
	for (int i = 0; i < n; i++) {
		char *p = malloc(4096);
		memset(p, 1, 4096);
		if (i % 2)
			free(p);
		usleep(10000);
	}
}
int main(int argc, char **argv)
{
	if (argc < 2) {
		churn(400);
		return 0;
	}
	free(malloc(64));
	pid_t c = fork();
	if (c == 0) {
		if (chroot(argv[1]) || chdir("/")) {
			perror("chroot");
			_exit(3);
		}
		churn(250);
		_exit(0);
	}
	printf("child %d\n", (int)c);
	fflush(stdout);
	int st;
	waitpid(c, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
EOF
compile "$WORK/timer" "$WORK/timer.c"
HEAPCTL_CONF="prof:true,prof_timer_s:1,prof_prefix:$WORK/timer" LD_PRELOAD="$LIB" "$WORK/timer" 2>"$WORK/timer.err" &
tp=$!
table=
for _ in $(seq 40); do
	sleep 0.1
	for t in /proc/"$tp"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = heapctl-timer ] || continue
		table=$(for f in "$t"/fd/*; do readlink "$f"; done | sort | tr '\n' ' ')
	done
	[ "$table" = "anon_inode:[pidfd] anon_inode:[pidfd] anon_inode:[pidfd] " ] && break
done
check_eq "what the timer thread's table holds" "$table" "anon_inode:[pidfd] anon_inode:[pidfd] anon_inode:[pidfd] "
for _ in $(seq 30); do
	compgen -G "$WORK/timer.$tp.*.t*.heap" >/dev/null && break
	sleep 0.1
done
compgen -G "$WORK/timer.$tp.*.t*.heap" >/dev/null || fail "no timer dump: $(ls "$WORK")"
kill "$tp" 2>/dev/null || true
wait "$tp" 2>/dev/null || true
check_stderr_empty timer

# the timer thread of a fork child that chrooted into a root without /proc
# (and then allocated, which starts it) keeps the child's maps, which the
# fork opened in the program's table: its dumps name the program
if [ "$(id -u)" -eq 0 ]; then
	mkdir -p "$WORK/root/out"
	(cd "$WORK/root" && HEAPCTL_CONF="prof:true,lg_prof_sample:0,prof_timer_s:1,prof_prefix:out/ct" \
	    LD_PRELOAD="$LIB" "$WORK/timer" "$WORK/root") >"$WORK/ctimer.out" 2>"$WORK/ctimer.err" ||
		fail "the chrooting program failed: $(cat "$WORK/ctimer.err")"
	cp=$(sed -n 's/^child //p' "$WORK/ctimer.out")
	d=$(compgen -G "$WORK/root/out/ct.$cp.*.t*.heap" | head -n1 || true)
	if [ -z "$d" ]; then
		fail "no timer dump of the chrooted child $cp: $(ls "$WORK/root/out")"
	else
		sed -n '/^MAPPED_LIBRARIES:/,$p' "$d" | grep -q " $WORK/timer\$" ||
			fail "the chrooted child's timer dump has no MAPPED_LIBRARIES line for $WORK/timer: $(sed -n '/^MAPPED_LIBRARIES:/,$p' "$d" | head -3 | tr '\n' '|')"
	fi
	check_stderr_empty ctimer
fi
finish
