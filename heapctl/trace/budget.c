/*
 * heapctl/trace/budget.c - how much `heapctl trace --malloc` may slow the
 * process it traces, and the duty cycle of the probes that holds it there.
 *
 * A uprobe costs its trap on every hit, whether the BPF program samples
 * the call or returns at once: 0.6-1.6 us on this 2-core VM (two hosts)
 * for an instruction the kernel emulates (a push), 8-19 us for one it
 * must single-step, as jemalloc's malloc and free begin with (a cmp and a
 * mov): Debian's redis-server went from 418k to 7.5k SETs a second
 * (tests/bench/RESULTS.md).  Sampling inside the program cannot lower
 * that; only fewer hits can, so the probes are detached.  They observe
 * for windows of TB_WINDOW seconds; at the end of each, their share of a
 * CPU in it is estimated from the process's own CPU time (the traps run
 * as its system time).  Over the budget, they stop observing and are
 * detached, which is not instant: removing a link waits for RCU grace
 * periods with the other probes still trapping (here 85-110 ms for
 * glibc's 7 uprobe_multi links, 1.4-1.6 s for its 15 perf-event links on
 * a kernel before 6.6).  So the span from the window's start to the last
 * link gone is what the probes cost, and they stay off until that is the
 * budget's share of the whole cycle.  The samples of the next window
 * stand for all the time unobserved before it too (cycle.c multiplies
 * their weights by (unobserved + window) / window), so the totals are
 * estimates that assume the process did the same while unobserved.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"

/* The least a hit is taken to cost, whatever the process's CPU time says
 * (that is counted in ticks of 10 ms, and a short window may show none):
 * below the 0.6 us of the cheapest hit measured on this VM, so that it
 * never makes a cheap probe look dear. */
#define TB_FLOOR_NS 200.0

/* The most a hit is taken to cost: 2.5 times the dearest measured here (a
 * single-stepped probe with the sample's stack, 19 us).  The system time
 * of a process that mostly sleeps jumps by whole ticks, and under a loaded
 * machine its own page faults and wake-ups take ticks of their own: a few
 * hundred hits cannot have cost more than this, so the rest is not put
 * down to the probes (make check's load once took a program of 400 calls
 * a second over the 5% budget). */
#define TB_CEIL_NS 50000.0

void tb_init(tb_budget_t *b, double pct)
{
	memset(b, 0, sizeof *b);
	b->pct = pct;
}

bool tb_proc_times(int pid, double *user, double *sys)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* the command name may hold spaces and parentheses: fields count
	 * from the last ')'; utime and stime are fields 14 and 15 */
	const char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return false;
	double hz = (double)sysconf(_SC_CLK_TCK);
	*user = (double)ut / hz;
	*sys = (double)st / hz;
	return true;
}

void tb_baseline(tb_budget_t *b, double duser, double dsys)
{
	/* fewer than 5 ticks of user time tell nothing: then every second of
	 * system time in a window is put down to the probes, which can only
	 * overstate their cost */
	if (duser >= 0.05)
		b->k = dsys / duser;
}

/* The probes' seconds in a span: the system time the process's own work
 * does not explain (its system calls go with its user work, k system
 * seconds a user second untraced), less one tick (/proc counts whole
 * ticks of 10 ms, which is 4% of a window: a process that sleeps must not
 * look over a 5% budget for one tick that fell in its system time), and
 * between TB_FLOOR_NS and TB_CEIL_NS a hit. */
static double probe_seconds(const tb_budget_t *b, uint64_t hits, double duser, double dsys)
{
	double s = dsys - b->k * duser - 1 / (double)sysconf(_SC_CLK_TCK);
	double least = (double)hits * TB_FLOOR_NS / 1e9, most = (double)hits * TB_CEIL_NS / 1e9;
	return s < least ? least : s > most ? most : s;
}

bool tb_window_end(tb_budget_t *b, uint64_t hits, double dt, double duser, double dsys)
{
	b->windows++;
	b->hits += hits;
	b->t_on += dt;
	if (!(dt > 0))
		return false;
	double probe = probe_seconds(b, hits, duser, dsys);
	b->cpu_pct = 100 * probe / dt;
	b->ns_hit = hits ? probe / (double)hits * 1e9 : 0;
	return b->pct > 0 && b->cpu_pct > b->pct;
}

double tb_off(tb_budget_t *b, uint64_t hits, double span, double duser, double dsys)
{
	/* off for as long as brings the probes' share of the whole cycle
	 * (span, then off) down to the budget */
	double off = probe_seconds(b, hits, duser, dsys) * 100 / b->pct - span;
	if (off < TB_WINDOW)
		off = TB_WINDOW;
	b->cycles++;
	if (off > b->max_off)
		b->max_off = off;
	return off;
}
