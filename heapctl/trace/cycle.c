/*
 * heapctl/trace/cycle.c - the duty cycle of `heapctl trace --malloc`'s
 * probes in the run loop: at the end of each window they are measured,
 * and taken off for as long as budget.c says when they cost the process
 * more than --budget; put back after, with the samples of the next window
 * standing for the time unobserved too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>

#include "tr_internal.h"
#include "trace.skel.h"

void tr_cycle_mark(cycle_t *cy, double t)
{
	uint64_t c[TR_NCOUNTERS];
	tr_counters(c);
	cy->t0 = t;
	cy->hits = c[TR_C_HITS];
	if (!tb_proc_times(T.pid, &cy->user, &cy->sys))
		cy->user = cy->sys = 0;
}

/* The one line, and the --json event, when the budget first turns the
 * probes off: what they cost, what heapctl does, what the profile then is. */
static void cycle_say(double off)
{
	const tb_budget_t *b = &T.B;
	if (T.json) {
		json_t j;
		tr_json_event(&j, "budget");
		json_str(&j, "action", "duty_cycle");
		tr_json_num(&j, "budget_pct", "%g", b->pct);
		tr_json_num(&j, "probe_cpu_pct", "%.4f", b->cpu_pct);
		tr_json_num(&j, "ns_per_hit", "%.0f", b->ns_hit);
		tr_json_num(&j, "on_s", "%g", TB_WINDOW);
		tr_json_num(&j, "off_s", "%.3f", off);
		json_end(&j);
		fflush(stdout);
	}
	fprintf(stderr,
	    "heapctl: the probes cost process %d about %.2f%% of a CPU (%.1f us a hit), over the "
	    "budget of %g%% (--budget): they are detached and come back for %g s at a time (now after %.1f s "
	    "off), and the profile's totals are estimates scaled from what they saw; for a process this hot, "
	    "heapctl inject %d profiles at a few ns a call\n",
	    T.pid, b->cpu_pct, b->ns_hit / 1000, b->pct, TB_WINDOW, off, T.pid);
}

/* The switch due now: the end of a window (the probes go off when over the
 * budget) or of an off period (they come back, and the samples of the
 * window that starts stand for the time unobserved too).  0, or an exit
 * code; *ended when the process is gone. */
int tr_cycle_step(cycle_t *cy, const allocator_t *al, struct bpf_link **links, unsigned *nlinks, struct ring_buffer *rb,
    double now, bool *ended)
{
	double user, sys;
	uint64_t c[TR_NCOUNTERS];
	if (!tb_proc_times(T.pid, &user, &sys)) {
		*ended = true;
		return 0;
	}
	tr_counters(c);
	if (cy->on) {
		bool over = tb_window_end(&T.B, c[TR_C_HITS] - cy->hits, now - cy->t0, user - cy->user, sys - cy->sys);
		if (!over) {
			ring_buffer__consume(rb); /* this window's samples, at its scale */
			T.scale = 1;
			tr_cycle_mark(cy, now);
			cy->t_next = now + TB_WINDOW;
			return 0;
		}
		T.skel->bss->paused = 1;
		cy->t_paused = now;
		tr_detach(links, nlinks);
		ring_buffer__consume(rb);
		double t = now_s();
		tr_counters(c);
		/* a process that ended meanwhile keeps its times at the window's end */
		*ended = !tb_proc_times(T.pid, &user, &sys);
		double off = tb_off(&T.B, c[TR_C_HITS] - cy->hits, t - cy->t0, user - cy->user, sys - cy->sys);
		if (T.B.cycles == 1)
			cycle_say(off);
		cy->on = false;
		tr_cycle_mark(cy, t);
		cy->t_next = t + off;
		return 0;
	}
	/* what the untraced process did in the off period refines k */
	tb_baseline(&T.B, user - cy->user, sys - cy->sys);
	int err = tr_attach(al, links, nlinks);
	if (err) {
		tr_detach(links, nlinks);
		if (err == -ESRCH || kill(T.pid, 0) != 0) {
			*ended = true;
			return 0;
		}
		return cli_err(HC_EXIT_FAILED, "trace: cannot attach to process %d again: %s", T.pid,
		    tr_why_load_failed(err));
	}
	double t = now_s();
	T.scale = (t - cy->t_paused + TB_WINDOW) / TB_WINDOW;
	T.skel->bss->paused = 0;
	cy->on = true;
	tr_cycle_mark(cy, t);
	cy->t_next = t + TB_WINDOW;
	return 0;
}
