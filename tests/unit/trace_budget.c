/*
 * trace_budget.c - the decisions of heapctl trace's budget
 * (heapctl/trace/budget.c) on given CPU times: the probes' share of a CPU
 * in a window, when that is over the budget, how long they then stay
 * off, the least a hit is taken to cost, and the process's system time
 * that its own work explains.  The run loop around them is
 * tests/trace/trace.bats'.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/check.h"
#include "../../heapctl/trace/budget.h"

static int near(double got, double want)
{
	return fabs(got - want) <= 1e-9 + fabs(want) * 1e-9;
}

int main(void)
{
	double tick = 1 / (double)sysconf(_SC_CLK_TCK);
	tb_budget_t b;

	/* a process busy in the probes all of a window: 10,000 hits at 25 us,
	 * the window's 0.25 s of system time plus a tick (which is discounted) */
	tb_init(&b, 5);
	CHECK(tb_window_end(&b, 10000, 0.25, 0, 0.25 + tick), "a window all in the probes is over 5%%");
	CHECK(near(b.cpu_pct, 100), "cpu_pct %g, want 100", b.cpu_pct);
	CHECK(near(b.ns_hit, 25000), "ns_hit %g, want 25000", b.ns_hit);
	CHECK(b.windows == 1 && b.hits == 10000 && near(b.t_on, 0.25), "windows %llu hits %llu t_on %g",
	    (unsigned long long)b.windows, (unsigned long long)b.hits, b.t_on);
	/* detached 0.15 s later, 0.4 s of probes in the span (plus the tick):
	 * off until 0.4 s is 5% of the cycle, 8 s in all */
	double off = tb_off(&b, 16000, 0.4, 0, 0.4 + tick);
	CHECK(near(off, 8 - 0.4), "off %g, want 7.6", off);
	CHECK(b.cycles == 1 && near(b.max_off, off), "cycles %llu max_off %g", (unsigned long long)b.cycles, b.max_off);

	/* the same window with no budget: measured, never over */
	tb_init(&b, 0);
	CHECK(!tb_window_end(&b, 10000, 0.25, 0, 0.25 + tick), "no budget is never over");
	CHECK(near(b.cpu_pct, 100), "measured all the same: %g", b.cpu_pct);

	/* a process that sleeps: one tick of system time in a window is 4%,
	 * and is not taken for the probes' */
	tb_init(&b, 5);
	CHECK(!tb_window_end(&b, 200, 0.25, 0, tick), "one tick is not over 5%%: cpu_pct %g", b.cpu_pct);
	CHECK(near(b.cpu_pct, 100 * 200 * 200e-9 / 0.25), "200 hits at the floor: cpu_pct %g", b.cpu_pct);

	/* the floor: 1,000,000 hits cost 0.2 s however little the ticks say */
	tb_init(&b, 5);
	CHECK(tb_window_end(&b, 1000000, 0.25, 0, 0), "a million hits are over 5%%");
	CHECK(near(b.cpu_pct, 80) && near(b.ns_hit, 200), "cpu_pct %g ns_hit %g", b.cpu_pct, b.ns_hit);
	/* the ceiling: 100 hits in a window with 30 ms of system time (a
	 * sleeping process's page faults and wake-ups on a loaded machine)
	 * cost at most 50 us each, 2% of the window, not 12% */
	tb_init(&b, 5);
	CHECK(!tb_window_end(&b, 100, 0.25, 0, 0.03 + tick), "100 hits are not over 5%%: cpu_pct %g", b.cpu_pct);
	CHECK(near(b.cpu_pct, 2) && near(b.ns_hit, 50000), "cpu_pct %g ns_hit %g", b.cpu_pct, b.ns_hit);
	/* 500 such hits can be: 10% */
	CHECK(tb_window_end(&b, 500, 0.25, 0, 0.03 + tick),
	    "500 hits, 50 us each at the most, are over 5%%: cpu_pct %g", b.cpu_pct);
	CHECK(near(b.cpu_pct, 10), "cpu_pct %g, want 10", b.cpu_pct);
	tb_init(&b, 5);
	/* an off period is a window at the least */
	CHECK(near(tb_off(&b, 1, 10, 0, 0), TB_WINDOW), "the shortest off period is a window");

	/* the process's own system calls: 2 system seconds a user second
	 * untraced; a window with 0.05 s of user time and 0.2 s of system
	 * time leaves 0.1 s (less the tick) to the probes */
	tb_init(&b, 5);
	tb_baseline(&b, 0.5, 1.0);
	CHECK(near(b.k, 2), "k %g, want 2", b.k);
	tb_window_end(&b, 10000, 0.25, 0.05, 0.2);
	CHECK(near(b.cpu_pct, 100 * (0.1 - tick) / 0.25), "cpu_pct %g", b.cpu_pct);
	/* fewer than 5 ticks of user time do not change k */
	tb_baseline(&b, 0.04, 1.0);
	CHECK(near(b.k, 2), "k %g after a short baseline, want 2", b.k);

	/* the times of a live process, and none for one that is gone */
	double u = -1, s = -1;
	CHECK(tb_proc_times(getpid(), &u, &s) && u >= 0 && s >= 0, "own times: %g %g", u, s);
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	CHECK(!tb_proc_times(child, &u, &s), "no times for a process that is gone");
	return hc_check_finish("trace_budget");
}
