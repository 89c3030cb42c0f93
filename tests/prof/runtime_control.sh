#!/usr/bin/env bash
# runtime_control: the profiler controlled through mallctl while running.
#
#  * prof.active switched on in a process started without prof:true: only
#    what is allocated after the switch is in the dump;
#  * prof.lg_sample changed from 19 to 12 between two phases of known
#    volume (410 MB, then 20 MB), without a reset: jeprof's Total is within
#    +-15% of the live bytes, and each phase's site within +-15% of its own;
#  * prof.reset forgets all counts (and a new rate with a value);
#  * thread.prof.active false in one thread keeps its allocations out;
#    prof.thread_active_init false does the same for threads created later;
#  * errors: prof.lg_sample 99 -> EINVAL, unknown name -> ENOENT, wrong
#    size -> EINVAL, writing a read-only name -> EPERM;
#  * dlsym(RTLD_DEFAULT, "mallctl") works in a program that is only
#    LD_PRELOADed, not linked against the library.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup runtime_control "$@"

cat >"$WORK/prog.c" <<'EOF'
#define _GNU_SOURCE
#include <errno.h>
#include <heapctl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
void **keep;                 /* global: the allocations cannot be optimised away */
size_t nkeep;

static void keep_init(size_t n)
{
	keep = mmap(NULL, n * sizeof *keep, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (keep == MAP_FAILED)
		exit(3);
}

/* the allocating frame is take(); the sites below are its callers and are
 * checked by jeprof's cumulative column */
static void take(size_t size, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		char *p = malloc(size);
		if (p == NULL)
			exit(3);
		p[0] = 1;
		keep[nkeep++] = p;
	}
}

__attribute__((noinline)) void before_switch(void) { take(1000, 300); }   /* 300000 (usable 307200) */
__attribute__((noinline)) void after_switch(void) { take(2000, 200); }    /* 400000 (usable 409600) */
__attribute__((noinline)) void phase_lg19(void) { take(4096, 100000); }   /* 409600000 */
__attribute__((noinline)) void phase_lg12(void) { take(1024, 20000); }    /* 20480000 */
__attribute__((noinline)) void before_reset(void) { take(1000, 100); }    /* 100000 (usable 102400) */
__attribute__((noinline)) void after_reset(void) { take(2000, 50); }      /* 100000 (usable 102400) */
__attribute__((noinline)) void in_inactive_thread(void) { take(3000, 100); }
__attribute__((noinline)) void in_active_thread(void) { take(5000, 40); }  /* 200000 (usable 204800) */
__attribute__((noinline)) void in_init_off_thread(void) { take(7000, 30); }

static bool rd_bool(const char *name)
{
	bool v = false;
	size_t len = sizeof v;
	int e = mallctl(name, &v, &len, NULL, 0);
	if (e)
		printf("read %s: error %d\n", name, e);
	return v;
}

static int wr_bool(const char *name, bool v)
{
	return mallctl(name, NULL, NULL, &v, sizeof v);
}

static size_t rd_size(const char *name)
{
	size_t v = 12345;
	size_t len = sizeof v;
	int e = mallctl(name, &v, &len, NULL, 0);
	if (e)
		printf("read %s: error %d\n", name, e);
	return v;
}

static uint64_t rd_u64(const char *name)
{
	uint64_t v = 0;
	size_t len = sizeof v;
	int e = mallctl(name, &v, &len, NULL, 0);
	if (e)
		printf("read %s: error %d\n", name, e);
	return v;
}

static int dump(const char *path)
{
	return mallctl("prof.dump", NULL, NULL, &path, sizeof path);
}

static void *inactive_thread(void *arg)
{
	int e = wr_bool("thread.prof.active", false);
	printf("thread.prof.active write %d, reads %d in the thread\n", e, (int)rd_bool("thread.prof.active"));
	in_inactive_thread();
	return arg;
}

static void *active_thread(void *arg)
{
	in_active_thread();
	return arg;
}

static void *init_off_thread(void *arg)
{
	printf("new thread with thread_active_init false: thread.prof.active %d\n",
	    (int)rd_bool("thread.prof.active"));
	in_init_off_thread();
	return arg;
}

int main(int argc, char **argv)
{
	const char *mode = argv[1];
	printf("pid %d\n", (int)getpid());
	keep_init(200000);
	if (strcmp(mode, "active") == 0) {
		printf("opt.prof %d\n", (int)rd_bool("opt.prof"));
		printf("prof.active before %d\n", (int)rd_bool("prof.active"));
		before_switch();
		printf("switch %d\n", wr_bool("prof.active", true));
		printf("prof.active after %d\n", (int)rd_bool("prof.active"));
		after_switch();
		printf("dump %d\n", dump(argv[2]));
	} else if (strcmp(mode, "lgchange") == 0) {
		printf("lg before %zu\n", rd_size("prof.lg_sample"));
		phase_lg19();
		size_t lg = 12;
		printf("set %d\n", mallctl("prof.lg_sample", NULL, NULL, &lg, sizeof lg));
		printf("lg after %zu opt %zu\n", rd_size("prof.lg_sample"), rd_size("opt.lg_prof_sample"));
		phase_lg12();
		printf("samples %llu\n", (unsigned long long)rd_u64("prof.samples"));
		printf("dump %d\n", dump(argv[2]));
	} else if (strcmp(mode, "reset") == 0) {
		before_reset();
		printf("reset %d\n", mallctl("prof.reset", NULL, NULL, NULL, 0));
		after_reset();
		printf("dump %d\n", dump(argv[2]));
		/* objects counted before the reset are freed after it */
		for (size_t i = 0; i < 100; i++)
			free(keep[i]);
		printf("dump %d\n", dump(argv[3]));
		size_t lg = 12;
		printf("reset12 %d\n", mallctl("prof.reset", NULL, NULL, &lg, sizeof lg));
		printf("lg %zu\n", rd_size("prof.lg_sample"));
		printf("dump %d\n", dump(argv[4]));
	} else if (strcmp(mode, "threads") == 0) {
		pthread_t a, b, c;
		printf("main thread.prof.active %d\n", (int)rd_bool("thread.prof.active"));
		pthread_create(&a, NULL, inactive_thread, NULL);
		pthread_join(a, NULL);
		pthread_create(&b, NULL, active_thread, NULL);
		pthread_join(b, NULL);
		printf("tai write %d\n", wr_bool("prof.thread_active_init", false));
		printf("tai read %d\n", (int)rd_bool("prof.thread_active_init"));
		pthread_create(&c, NULL, init_off_thread, NULL);
		pthread_join(c, NULL);
		printf("dump %d\n", dump(argv[2]));
	} else if (strcmp(mode, "errors") == 0) {
		size_t lg = 99;
		printf("lg_sample 99: %d\n", mallctl("prof.lg_sample", NULL, NULL, &lg, sizeof lg));
		printf("lg_sample after: %zu\n", rd_size("prof.lg_sample"));
		printf("reset 99: %d\n", mallctl("prof.reset", NULL, NULL, &lg, sizeof lg));
		printf("unknown: %d\n", mallctl("prof.no_such_thing", NULL, NULL, NULL, 0));
		uint64_t u = 0;
		size_t len = sizeof u;
		printf("unknown read: %d\n", mallctl("prof.lg_samples", &u, &len, NULL, 0));
		int big = 1;
		printf("active wrong size: %d\n", mallctl("prof.active", NULL, NULL, &big, sizeof big));
		uint32_t small32 = 0;
		len = sizeof small32;
		printf("samples wrong size: %d\n", mallctl("prof.samples", &small32, &len, NULL, 0));
		uint64_t iv = 5;
		printf("interval write: %d\n", mallctl("prof.interval", NULL, NULL, &iv, sizeof iv));
		uint64_t iv2 = 1 << 20, back = 0;
		len = sizeof back;
		int w2 = mallctl("prof.interval", NULL, NULL, &iv2, sizeof iv2);
		int r2 = mallctl("prof.interval", &back, &len, NULL, 0);
		printf("interval 1M: %d %d %llu\n", w2, r2, (unsigned long long)back);
		iv2 = 0;
		mallctl("prof.interval", NULL, NULL, &iv2, sizeof iv2);
		printf("samples write: %d\n", mallctl("prof.samples", NULL, NULL, &iv, sizeof iv));
		bool t = true;
		printf("opt.prof write: %d\n", mallctl("opt.prof", NULL, NULL, &t, sizeof t));
		unsigned ts = 0;
		len = sizeof ts;
		printf("timer_s: %d %u\n", mallctl("prof.timer_s", &ts, &len, NULL, 0), ts);
		const char *uw = NULL;
		len = sizeof uw;
		int e = mallctl("prof.unwind", &uw, &len, NULL, 0);
		printf("unwind: %d %s\n", e, uw ? uw : "(null)");
		const char *bad = "nonsense";
		printf("unwind bad: %d\n", mallctl("prof.unwind", NULL, NULL, &bad, sizeof bad));
		const char *fp = "fp";
		e = mallctl("prof.unwind", NULL, NULL, &fp, sizeof fp);
		uw = NULL;
		len = sizeof uw;
		mallctl("prof.unwind", &uw, &len, NULL, 0);
		printf("unwind fp: %d %s\n", e, uw ? uw : "(null)");
	}
	printf("ok\n");
	return 0;
}
EOF
compile_linked "$WORK/prog" "$WORK/prog.c"
P=$WORK/prog
out() { grep -E "^$2" "$WORK/$1.out" || true; }

# ---- prof.active switched on at run time ------------------------------------
mkdir -p "$WORK/active"
for variant in noconf lg0conf; do
	if [ $variant = noconf ]; then
		# nothing configured at all: the rate is the default 2^19 and the
		# 400000 bytes after the switch are a sample; before_switch must
		# still be absent
		run "active_$variant" "$WORK/active" "$P" active "$WORK/active/$variant.heap"
	else
		# prof not enabled, but every allocation sampled once it is
		run "active_$variant" "$WORK/active" HEAPCTL_CONF=lg_prof_sample:0 "$P" active "$WORK/active/$variant.heap"
	fi
	t=active_$variant
	check_eq "$t: exit status" "$RC" 0
	check_stderr_empty "$t"
	check_eq "$t: opt.prof" "$(out $t opt.prof)" "opt.prof 0"
	check_eq "$t: prof.active before the switch" "$(out $t 'prof.active before')" "prof.active before 0"
	check_eq "$t: mallctl prof.active=true" "$(out $t switch)" "switch 0"
	check_eq "$t: prof.active after the switch" "$(out $t 'prof.active after')" "prof.active after 1"
	check_eq "$t: prof.dump" "$(out $t dump)" "dump 0"
	f=$WORK/active/$variant.heap
	if [ $variant = noconf ] && [ -f "$f" ] && ! grep -q '^@' "$f"; then
		# at 2^19 the 400000 bytes may well give no sample: an empty
		# profile (which jeprof prints nothing for) is right too
		check_eq "$t: empty dump header" "$(sed -n 2p "$f")" "  t*: 0: 0 [0: 0]"
	elif [ -f "$f" ] && jp "$WORK/$t.txt" "$P" "$f"; then
		check_eq "$t: before_switch in the dump" "$(jp_cum "$WORK/$t.txt" before_switch)" absent
		if [ $variant = lg0conf ]; then
			check_eq "$t: dump header" "$(head -1 "$f")" "heap_v2/1"
			check_eq "$t: after_switch bytes" "$(jp_cum "$WORK/$t.txt" after_switch)" 409600
		fi
	else
		[ -f "$f" ] || fail "$t: no dump written"
	fi
done

# ---- prof.lg_sample 19 -> 12 without a reset -----------------------------------
mkdir -p "$WORK/lg"
run lgchange "$WORK/lg" MALLOC_CONF=prof:true "$P" lgchange "$WORK/lg/lg.heap"
check_eq "lg_sample: exit status" "$RC" 0
check_stderr_empty lgchange
check_eq "lg_sample: initial prof.lg_sample" "$(out lgchange 'lg before')" "lg before 19"
check_eq "lg_sample: mallctl prof.lg_sample=12" "$(out lgchange set)" "set 0"
check_eq "lg_sample: prof.lg_sample / opt.lg_prof_sample after" "$(out lgchange 'lg after')" "lg after 12 opt 19"
s=$(out lgchange samples | awk '{ print $2 }')
# N objects of size s at rate 2^lg are sampled N * (1 - exp(-s / 2^lg)) times:
# 100000 * (1 - e^(-4096/2^19)) + 20000 * (1 - e^(-1/4)) = 778 + 4424 = 5202,
# standard deviation 65; the range is 5.4 of them either side
check_range "lg_sample: prof.samples" "${s:-none}" 4850 5550
f=$WORK/lg/lg.heap
if [ -f "$f" ] && jp "$WORK/lg.txt" "$P" "$f"; then
	check_eq "lg_sample: dump header" "$(head -1 "$f")" "heap_v2/4096"
	check_pct "lg_sample: jeprof Total (430080000 bytes live)" "$(jp_total "$WORK/lg.txt")" 430080000 15
	check_pct "lg_sample: phase_lg19 bytes (sampled at 2^19)" "$(jp_cum "$WORK/lg.txt" phase_lg19)" 409600000 15
	check_pct "lg_sample: phase_lg12 bytes (sampled at 2^12)" "$(jp_cum "$WORK/lg.txt" phase_lg12)" 20480000 15
else
	[ -f "$f" ] || fail "lg_sample: no dump written"
fi

# ---- prof.reset -------------------------------------------------------------------
mkdir -p "$WORK/reset"
run reset "$WORK/reset" MALLOC_CONF=prof:true,lg_prof_sample:0 "$P" reset \
    "$WORK/reset/1.heap" "$WORK/reset/2.heap" "$WORK/reset/3.heap"
check_eq "reset: exit status" "$RC" 0
check_stderr_empty reset
check_eq "reset: mallctl results" "$(out reset 'reset|dump' | tr '\n' ' ')" "reset 0 dump 0 dump 0 reset12 0 dump 0 "
check_eq "reset: prof.lg_sample after prof.reset=12" "$(out reset 'lg ')" "lg 12"
if [ -f "$WORK/reset/1.heap" ] && jp "$WORK/reset1.txt" "$P" "$WORK/reset/1.heap"; then
	check_eq "reset: before_reset after prof.reset" "$(jp_cum "$WORK/reset1.txt" before_reset)" absent
	check_eq "reset: after_reset bytes" "$(jp_cum "$WORK/reset1.txt" after_reset)" 102400
	check_eq "reset: Total after prof.reset" "$(jp_total "$WORK/reset1.txt")" 102400
fi
if [ -f "$WORK/reset/2.heap" ] && jp "$WORK/reset2.txt" "$P" "$WORK/reset/2.heap"; then
	# freeing objects counted before the reset must not disturb the counts
	check_eq "reset: after_reset bytes once pre-reset objects are freed" "$(jp_cum "$WORK/reset2.txt" after_reset)" 102400
	check_eq "reset: Total once pre-reset objects are freed" "$(jp_total "$WORK/reset2.txt")" 102400
fi
if [ -f "$WORK/reset/3.heap" ]; then
	check_eq "reset: header after prof.reset=12" "$(head -1 "$WORK/reset/3.heap")" "heap_v2/4096"
	check_eq "reset: stacks after the second reset" "$(grep -c '^@' "$WORK/reset/3.heap" || true)" 0
fi

# ---- thread.prof.active, prof.thread_active_init ---------------------------------
mkdir -p "$WORK/threads"
run threads "$WORK/threads" MALLOC_CONF=prof:true,lg_prof_sample:0 "$P" threads "$WORK/threads/t.heap"
check_eq "thread.prof.active: exit status" "$RC" 0
check_stderr_empty threads
check_eq "thread.prof.active: main thread" "$(out threads 'main thread')" "main thread.prof.active 1"
check_eq "thread.prof.active: set false in a thread" "$(out threads 'thread.prof.active write')" \
    "thread.prof.active write 0, reads 0 in the thread"
check_eq "prof.thread_active_init: write/read" "$(out threads 'tai' | tr '\n' ' ')" "tai write 0 tai read 0 "
check_eq "prof.thread_active_init: a new thread starts inactive" "$(out threads 'new thread')" \
    "new thread with thread_active_init false: thread.prof.active 0"
if [ -f "$WORK/threads/t.heap" ] && jp "$WORK/threads.txt" "$P" "$WORK/threads/t.heap"; then
	check_eq "thread.prof.active: allocations of the inactive thread" "$(jp_cum "$WORK/threads.txt" in_inactive_thread)" absent
	check_eq "thread.prof.active: allocations of an active thread" "$(jp_cum "$WORK/threads.txt" in_active_thread)" 204800
	check_eq "prof.thread_active_init: allocations of a thread created inactive" "$(jp_cum "$WORK/threads.txt" in_init_off_thread)" absent
fi

# ---- errors -----------------------------------------------------------------------
run errors "$WORK" MALLOC_CONF=prof:true "$P" errors
check_eq "errors: exit status" "$RC" 0
check_eq "errors: prof.lg_sample=99" "$(out errors 'lg_sample 99')" "lg_sample 99: 22"
check_eq "errors: prof.lg_sample unchanged after 99" "$(out errors 'lg_sample after')" "lg_sample after: 19"
check_eq "errors: prof.reset=99" "$(out errors 'reset 99')" "reset 99: 22"
check_eq "errors: unknown name" "$(out errors 'unknown:')" "unknown: 2"
check_eq "errors: unknown name, read" "$(out errors 'unknown read')" "unknown read: 2"
check_eq "errors: prof.active written with an int" "$(out errors 'active wrong size')" "active wrong size: 22"
check_eq "errors: prof.samples read into 4 bytes" "$(out errors 'samples wrong size')" "samples wrong size: 22"
check_eq "errors: prof.interval not a power of two" "$(out errors 'interval write')" "interval write: 22"
check_eq "prof.interval written and read back" "$(out errors 'interval 1M')" "interval 1M: 0 0 1048576"
check_eq "errors: write to read-only prof.samples" "$(out errors 'samples write')" "samples write: 1"
check_eq "errors: write to read-only opt.prof" "$(out errors 'opt.prof write')" "opt.prof write: 1"
check_eq "errors: prof.timer_s" "$(out errors 'timer_s')" "timer_s: 0 0"
check_eq "errors: prof.unwind default" "$(out errors 'unwind: ')" "unwind: 0 libunwind"
check_eq "errors: prof.unwind=nonsense" "$(out errors 'unwind bad')" "unwind bad: 22"
check_eq "errors: prof.unwind=fp" "$(out errors 'unwind fp')" "unwind fp: 0 fp"

# ---- dlsym(RTLD_DEFAULT, "mallctl") in a program that is not linked ------------------
cat >"$WORK/dl.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*mallctl_t)(const char *, void *, size_t *, void *, size_t);
void *keep[100];

__attribute__((noinline)) void dl_site(void)   /* 100 x 3000 */
{
	for (int i = 0; i < 100; i++)
		keep[i] = malloc(3000);
}

int main(int argc, char **argv)
{
	mallctl_t ctl = (mallctl_t)dlsym(RTLD_DEFAULT, "mallctl");
	if (ctl == NULL) {
		printf("no mallctl\n");
		return 0;
	}
	bool prof = false;
	size_t len = sizeof prof;
	int e = ctl("opt.prof", &prof, &len, NULL, 0);
	size_t lg = 99;
	len = sizeof lg;
	int e2 = ctl("opt.lg_prof_sample", &lg, &len, NULL, 0);
	printf("opt.prof %d %d lg %d %zu\n", e, (int)prof, e2, lg);
	dl_site();
	const char *path = argv[1];
	printf("dump %d\n", ctl("prof.dump", NULL, NULL, &path, sizeof path));
	return 0;
}
EOF
compile "$WORK/dl" "$WORK/dl.c"
if nm -D "$WORK/dl" | grep -q heapctl || readelf -d "$WORK/dl" | grep -q libheapctl; then
	fail "dlsym: the test program is linked against libheapctl (it must not be)"
fi
run dl_none "$WORK" "$WORK/dl" "$WORK/none.heap"
check_eq "dlsym without LD_PRELOAD (glibc has no mallctl)" "$(cat "$WORK/dl_none.out")" "no mallctl"
run dl "$WORK" MALLOC_CONF=prof:true,lg_prof_sample:0 LD_PRELOAD="$LIB" "$WORK/dl" "$WORK/dl.heap"
check_eq "dlsym: exit status" "$RC" 0
check_stderr_empty dl
check_eq "dlsym: mallctl found and answering" "$(head -1 "$WORK/dl.out")" "opt.prof 0 1 lg 0 0"
check_eq "dlsym: prof.dump through it" "$(sed -n 2p "$WORK/dl.out")" "dump 0"
if [ -f "$WORK/dl.heap" ] && jp "$WORK/dl.txt" "$WORK/dl" "$WORK/dl.heap"; then
	check_eq "dlsym: dl_site bytes" "$(jp_flat "$WORK/dl.txt" dl_site)" 307200   # 100 x 3000, usable 3072
fi

check_no_tmp "$WORK"
finish
