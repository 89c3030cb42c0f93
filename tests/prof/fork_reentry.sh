#!/usr/bin/env bash
# fork_reentry: sampling every allocation (lg_prof_sample:0) in a threaded
# program that forks and calls into libc and the dynamic loader while its
# allocations are being sampled, with each unwinder (prof_unwind:fp,
# libunwind, libgcc).
#
#  * three threads allocate in a loop, run qsort with a comparator that
#    allocates (malloc called from inside libc), call backtrace() and
#    backtrace_symbols(), and dlopen/dlclose a plugin that allocates;
#  * meanwhile the main thread forks four times; each child allocates
#    (also from a thread of its own), writes its own dump with prof.dump,
#    and exits 0;
#  * the parent then allocates from a known function and dumps.
# Every run must finish (no deadlock), every dump must be read by jeprof
# with the known functions at their exact bytes; with libunwind and libgcc
# the allocations made from qsort's callback must also be charged to the
# function that called qsort (through libc's frames).  fp may stop in libc
# frames, but finds every function of the program itself, which is built
# with -fno-omit-frame-pointer.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup fork_reentry "$@"

cat >"$WORK/plug.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
void *plug_alloc(void)
{
	void *p = malloc(200);
	memset(p, 7, 200);
	return p;
}
EOF
if ! gcc "${CFLAGS_T[@]}" -shared -fPIC -o "$WORK/libplug.so" "$WORK/plug.c" 2>"$WORK/plug.log"; then
	fail "cannot build the plugin: $(head -3 "$WORK/plug.log")"
	finish
fi

cat >"$WORK/prog.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <heapctl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS 3
#define NQSORT 20
void *volatile sink;               /* globals: nothing optimised away */
void *thread_keep[NTHREADS][100];
void *qsort_keep[NTHREADS][NQSORT];
void *known[123];
void *child_keep[100];
void *child_thread_keep[50];
static int started, stop;          /* atomic */
static const char *plugin;
static __thread int t_id, t_want_keep, t_nqsort;

__attribute__((noinline)) void thread_keep_site(int id)    /* 100 x 256 per thread */
{
	for (int i = 0; i < 100; i++)
		thread_keep[id][i] = malloc(256);
}

/* called by qsort, i.e. from inside libc; allocates */
__attribute__((noinline)) int cmp_alloc(const void *a, const void *b)
{
	if (t_want_keep) {               /* once per qsort: 100 bytes kept */
		t_want_keep = 0;
		qsort_keep[t_id][t_nqsort++] = malloc(100);
	} else if ((((unsigned long)a >> 4) & 63) == 0) {
		void *p = malloc(48);
		sink = p;              /* sink is shared: free the local copy */
		free(p);
	}
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

__attribute__((noinline)) void do_qsort(void)
{
	int n = 3000;
	int *v = malloc(n * sizeof *v);
	for (int i = 0; i < n; i++)
		v[i] = (i * 7919) % n;
	t_want_keep = 1;
	qsort(v, n, sizeof *v, cmp_alloc);
	free(v);
}

__attribute__((noinline)) void do_backtrace(void)
{
	void *bt[64];
	int n = backtrace(bt, 64);
	char **s = backtrace_symbols(bt, n);
	if (s)
		sink = s[0];
	free(s);
}

__attribute__((noinline)) void do_dlopen(void)
{
	void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		exit(4);
	}
	void *(*fn)(void) = (void *(*)(void))dlsym(h, "plug_alloc");
	free(fn());
	dlclose(h);
}

/*
 * glibc's fork() does not take the dynamic loader's lock, so a fork while
 * another thread of this program is inside dlopen() or backtrace() can leave
 * it held in the child, whatever the allocator.  The workers' own loader
 * calls and the forks are kept apart; sampling (and so the profiler's
 * unwinding, which libheapctl itself keeps out of fork) goes on throughout.
 */
pthread_rwlock_t loader_gate = PTHREAD_RWLOCK_INITIALIZER;

__attribute__((noinline)) void churn(int i)
{
	void *p = malloc(64 + (size_t)(i % 50) * 16);
	sink = p;
	free(p);
}

static void *thread_main(void *arg)
{
	t_id = (int)(long)arg;
	thread_keep_site(t_id);
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 2000 || !__atomic_load_n(&stop, __ATOMIC_SEQ_CST); i++) {
		churn(i);
		if (i % 100 == 0 && t_nqsort < NQSORT)
			do_qsort();
		if (i % 100 == 50) {
			pthread_rwlock_rdlock(&loader_gate);
			do_backtrace();
			pthread_rwlock_unlock(&loader_gate);
		}
		if (i % 200 == 10) {
			pthread_rwlock_rdlock(&loader_gate);
			do_dlopen();
			pthread_rwlock_unlock(&loader_gate);
		}
		if (i > 100000)   /* never spin forever */
			break;
	}
	return NULL;
}

__attribute__((noinline)) void child_work(void)         /* 100 x 1000 */
{
	for (int i = 0; i < 100; i++)
		child_keep[i] = malloc(1000);
}

__attribute__((noinline)) void child_thread_work(void)  /* 50 x 1000 */
{
	for (int i = 0; i < 50; i++)
		child_thread_keep[i] = malloc(1000);
}

static void *child_thread(void *arg)
{
	child_thread_work();
	return arg;
}

__attribute__((noinline)) void known_site(void)         /* 123 x 777 */
{
	for (int i = 0; i < 123; i++)
		known[i] = malloc(777);
}

int main(int argc, char **argv)
{
	const char *dir = argv[1];
	plugin = argv[2];
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	pthread_t t[NTHREADS];
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, thread_main, (void *)i);
	while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < NTHREADS)
		sched_yield();
	int status[4];
	for (int k = 0; k < 4; k++) {
		pthread_rwlock_wrlock(&loader_gate);
		pid_t pid = fork();
		if (pid != 0)
			pthread_rwlock_unlock(&loader_gate);
		if (pid < 0) {
			perror("fork");
			return 5;
		}
		if (pid == 0) {
			alarm(30);           /* a deadlocked child dies, not hangs */
			child_work();
			pthread_t ct;
			pthread_create(&ct, NULL, child_thread, NULL);
			pthread_join(ct, NULL);
			char path[4096];
			snprintf(path, sizeof path, "%s/child.%d.heap", dir, k);
			const char *p = path;
			int e = mallctl("prof.dump", NULL, NULL, &p, sizeof p);
			exit(e == 0 ? 0 : 10 + e);
		}
		status[k] = -1;
		while (waitpid(pid, &status[k], 0) < 0 && errno == EINTR)
			;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	known_site();
	char path[4096];
	snprintf(path, sizeof path, "%s/parent.heap", dir);
	const char *p = path;
	int e = mallctl("prof.dump", NULL, NULL, &p, sizeof p);
	const char *uw = NULL;
	size_t len = sizeof uw;
	mallctl("prof.unwind", &uw, &len, NULL, 0);
	printf("children");
	for (int k = 0; k < 4; k++) {
		if (WIFEXITED(status[k]))
			printf(" exit=%d", WEXITSTATUS(status[k]));
		else if (WIFSIGNALED(status[k]))
			printf(" signal=%d", WTERMSIG(status[k]));
		else
			printf(" status=%d", status[k]);
	}
	printf("\ndump %d unwind %s\n", e, uw ? uw : "(null)");
	return 0;
}
EOF
compile_linked "$WORK/prog" "$WORK/prog.c"

for u in fp libunwind libgcc; do
	d=$WORK/$u && mkdir -p "$d"
	run "$u" "$d" MALLOC_CONF=prof:true,lg_prof_sample:0,prof_unwind:$u "$WORK/prog" "$d" "$WORK/libplug.so"
	check_eq "$u: exit status" "$RC" 0
	check_stderr_empty "$u"
	check_eq "$u: children's exit" "$(grep '^children' "$WORK/$u.out" || true)" \
	    "children exit=0 exit=0 exit=0 exit=0"
	check_eq "$u: parent dump, prof.unwind" "$(grep '^dump' "$WORK/$u.out" || true)" "dump 0 unwind $u"

	for k in 0 1 2 3; do
		f=$d/child.$k.heap
		if [ ! -f "$f" ]; then
			fail "$u: child $k wrote no dump"
			continue
		fi
		check_eq "$u: child $k dump header" "$(head -1 "$f")" "heap_v2/1"
		jp "$WORK/$u.child$k.txt" "$WORK/prog" "$f" || continue
		check_eq "$u: child $k: child_work bytes" "$(jp_flat "$WORK/$u.child$k.txt" child_work)" 102400   # 100 x 1000, usable 1024
		check_eq "$u: child $k: child_thread_work bytes" "$(jp_flat "$WORK/$u.child$k.txt" child_thread_work)" 51200   # 50 x 1024
		check_eq "$u: child $k: known_site (not allocated yet)" "$(jp_flat "$WORK/$u.child$k.txt" known_site)" absent
	done

	f=$d/parent.heap
	if [ ! -f "$f" ]; then
		fail "$u: the parent wrote no dump"
		continue
	fi
	check_eq "$u: parent dump header" "$(head -1 "$f")" "heap_v2/1"
	jp "$WORK/$u.parent.txt" "$WORK/prog" "$f" || continue
	T=$WORK/$u.parent.txt
	check_eq "$u: parent: known_site bytes" "$(jp_flat "$T" known_site)" $((123 * 896))   # 777 is in class 896
	check_eq "$u: parent: thread_keep_site bytes" "$(jp_flat "$T" thread_keep_site)" 76800
	check_eq "$u: parent: child_work (the children's only)" "$(jp_flat "$T" child_work)" absent
	# 100 bytes kept from inside each qsort call (20 per thread)
	check_eq "$u: parent: cmp_alloc bytes (malloc called back from qsort)" "$(jp_flat "$T" cmp_alloc)" 6720   # 60 x 100, usable 112
	check_eq "$u: parent: thread_keep_site called from thread_main" \
	    "$(awk -v t="$(jp_cum "$T" thread_main)" 'BEGIN { print (t >= 76800) ? "yes" : "no (" t ")" }')" yes
	if [ "$u" != fp ]; then
		# through libc's qsort frames back to the program
		check_eq "$u: parent: do_qsort cumulative bytes (unwound through qsort)" "$(jp_cum "$T" do_qsort)" 6720
		check_eq "$u: parent: thread_main cumulative bytes" \
		    "$(awk -v t="$(jp_cum "$T" thread_main)" 'BEGIN { print (t >= 76800 + 6720) ? "yes" : "no (" t ")" }')" yes
	fi
done

check_no_tmp "$WORK"
finish
