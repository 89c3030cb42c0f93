/*
 * agent/state.c - what the files of the agent share and read: the
 * settings as configured at start-up (hc_opt) and as they are now
 * (hc_prof), the lock of the profile's tables, the guard that keeps the
 * agent's own allocations out of the profile, and the generation of the
 * sampling rate that every thread's countdown watches.
 *
 * Data, and the one write to it that is more than a store: a file that
 * calls nothing else in agent/, so that every other file may depend on it
 * and it on none of them.
 */
#define _GNU_SOURCE
#include "agent.h"

hc_opts_t hc_opt;
hc_prof_state_t hc_prof;
hc_mutex_t hc_prof_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_PROF, "hc_prof_lock");
__thread int hc_prof_busy __attribute__((tls_model("initial-exec")));
uint64_t hc_prof_rate_generation = 1;

/* prof.active or prof.lg_sample changed (or the configuration was read):
 * every thread draws a new countdown. */
void hc_prof_rate_changed(void)
{
	__atomic_add_fetch(&hc_prof_rate_generation, 1, __ATOMIC_RELAXED);
	hc_heap_reset_countdowns();
}
