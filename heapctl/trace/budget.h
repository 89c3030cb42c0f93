/*
 * heapctl/trace/budget.h - the cost `heapctl trace --malloc` may put on the
 * process it traces (--budget), and the duty cycle of its probes that keeps
 * it there: budget.c decides, cycle.c attaches and detaches.
 */
#ifndef HC_TRACE_BUDGET_H
#define HC_TRACE_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#define TB_DEFAULT_PCT 5.0  /* --budget's default: % of one CPU          */
#define TB_WINDOW      0.25 /* seconds the probes stay on at a time      */
#define TB_BASELINE    0.2  /* seconds of the untraced process, at least */

/* Invariants: t_on <= t_traced; an estimate is never below its hits at
 * TB_FLOOR_NS each nor above them at TB_CEIL_NS each (budget.c); cycles
 * counts the windows that ended in an off period. */
typedef struct tb_budget_s {
	double pct;                     /* % of one CPU; 0: no budget                 */
	double k;                       /* system per user seconds, untraced           */
	double t_on, t_traced;          /* seconds observed (windows), seconds traced */
	uint64_t hits, windows, cycles; /* hits in windows; off periods           */
	double cpu_pct;                 /* the probes' share of a CPU, last window     */
	double ns_hit;                  /* their cost a hit, last window               */
	double max_off;                 /* the longest off period asked                */
} tb_budget_t;

void tb_init(tb_budget_t *b, double pct);
/* The process's user and system seconds so far (every thread); false when
 * /proc/PID/stat cannot be read (the process ended). */
bool tb_proc_times(int pid, double *user, double *sys);
/* The untraced process spent dsys system seconds per duser user seconds. */
void tb_baseline(tb_budget_t *b, double duser, double dsys);
/* The end of a window of dt seconds observed with the probes on: hits
 * probe hits, duser and dsys the process's seconds.  True when the probes
 * cost more than the budget. */
bool tb_window_end(tb_budget_t *b, uint64_t hits, double dt, double duser, double dsys);
/* The probes detached after a window over the budget: span seconds from
 * that window's start to the last link gone, with hits, duser and dsys in
 * it.  Returns how long they stay off (at least TB_WINDOW). */
double tb_off(tb_budget_t *b, uint64_t hits, double span, double duser, double dsys);

#endif
