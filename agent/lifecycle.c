/*
 * agent/lifecycle.c - how the agent starts, forks and stops: the one place
 * that says in what order its files do so, as allocator/lifecycle.c does
 * for the allocator (which calls the hooks below in its own order).
 *
 * Start: hc_agent_init, from the first malloc, reads the configuration
 *   (conf.c, then settings.c's run-time values; no allocation, and it
 *   waits for the constructor if environ is not there yet);
 *   hc_agent_start, from the constructor, makes prof_recent's ring and the
 *   control segment and thread (control.c).  The timer thread starts when
 *   a setting first asks for it (dump.c).
 *
 * Fork: every lock of the agent, in the order of allocator/hc_lock.h:
 *   control.c's pause_lock, unwind.c's fork lock (unwinds first: a thread
 *   mid-unwind holds no profiler lock yet), dump.c's, hc_prof_lock,
 *   events.c's ev_lock, ctl.c's; released in the reverse order in the
 *   parent and made afresh in the child, where the control thread is
 *   started last, once every lock it takes is fresh.
 *
 * Stop: a thread's exit is prof.c's (hc_agent_thread_exit); at process
 *   exit the final dump and leak report (dump.c), then, last of the
 *   library's destructors, the segment's goodbye (control.c).
 *
 * The other files of agent/ call nothing here: this file calls them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "agent.h"
#include "events.h"

/* Called from the first malloc, which may come from the dynamic loader
 * before libc has set up environ; then configuration waits for the
 * library's constructor (hc_init runs it again). */
static void configure(void);

void hc_agent_init(void)
{
	extern char **environ;
	static bool done, have_defaults;
	if (!have_defaults) {
		hc_conf_defaults();
		have_defaults = true;
	}
	if (done || environ == NULL)
		return;
	done = true;
	configure();
}

/* heapctl inject arming an agent again: the settings it was given. */
void hc_agent_reconfigure(void)
{
	hc_conf_defaults();
	configure();
}

static void configure(void)
{
	hc_conf_init();
	/* The seed documents' MALLOC_CONF lines ask for leak reports, final
	 * dumps or gdumps without "prof:true"; they mean profiling. */
	if (hc_opt.prof_leak || hc_opt.prof_final || hc_opt.prof_gdump || hc_opt.lg_prof_interval >= 0 ||
	    hc_opt.prof_timer_s || hc_opt.prof_threshold)
		hc_opt.prof = true;
	hc_settings_start();
	hc_prof.active = hc_opt.prof && hc_opt.prof_active;
	hc_alloc_set_decay_ms((uint64_t)hc_opt.dirty_decay_ms);
	hc_alloc_set_tcache_max((size_t)hc_opt.tcache_max);
	int err = hc_alloc_set_thp(hc_opt.thp);
	if (err)
		hc_say("thp:", hc_shm_words(HC_SET_THP)[hc_opt.thp], " has no effect: ",
		    err == ENOTSUP      ? "the process's own malloc maps its heap"
		        : err == EINVAL ? "the kernel has no transparent huge pages"
		                        : strerrordesc_np(err),
		    NULL);
	/* threads that allocated before this got idle countdowns */
	hc_prof_rate_changed();
}

void hc_agent_start(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	/* experimental.prof_recent's ring, as jemalloc's prof_recent_alloc_max */
	if (hc_opt.prof_recent_alloc_max != 0)
		(void)hc_recent_set_max(hc_opt.prof_recent_alloc_max);
	hc_control_start();
}

/* Every lock of the agent, in the order of allocator/hc_lock.h. */
void hc_agent_fork_prepare(void)
{
	hc_control_fork_prepare();
	hc_unwind_fork_prepare();
	hc_dump_fork_prepare();
	hc_mutex_lock(&hc_prof_lock);
	hc_event_fork_prepare();
	hc_ctl_fork_prepare();
}

void hc_agent_fork_parent(void)
{
	hc_ctl_fork_parent();
	hc_event_fork_parent();
	hc_mutex_unlock(&hc_prof_lock);
	hc_dump_fork_parent();
	hc_unwind_fork_parent();
	hc_control_fork_parent();
}

void hc_agent_fork_child(void)
{
	hc_ctl_fork_child();
	hc_mutex_reinit(&hc_prof_lock);
	hc_dump_fork_child();
	hc_unwind_fork_child();
	hc_prof_fork_child();
	/* last, once every lock of the agent is fresh: it starts the child's
	 * control thread, which takes these locks */
	hc_control_fork_child();
}

/* At exit: the final dump and the leak report, among the library's other
 * destructors. */
__attribute__((destructor)) static void agent_exit(void)
{
	hc_dump_at_exit();
}

/* Last of the library's destructors: the segment's goodbye. */
__attribute__((destructor(101))) static void agent_exit_last(void)
{
	hc_control_exit();
}
