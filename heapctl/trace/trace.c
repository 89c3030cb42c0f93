/*
 * heapctl/trace/trace.c - `heapctl trace PID --malloc | --faults`: a heap
 * profile of any process, without touching it, from eBPF (libbpf).
 *
 * The kernel half (trace.bpf.c) samples by bytes, as the library does,
 * and sends the sampled calls' user registers and stack tops through a
 * ring buffer.  Here they are unwound with libunwind's remote API (the
 * process's own .eh_frame, its memory read through /proc/PID/mem and the
 * copied stack), kept in a stack table, and written as heap_v2 dumps that
 * report, jeprof, pprof and the daemon read unchanged, with the build id of
 * each mapped object as the agent's dumps have them.  --malloc keeps its
 * probes' cost on the process within --budget by detaching them for
 * periods (budget.c says why and how).
 *
 * This is libheapctl-trace.so, loaded by `heapctl trace` alone, so that
 * the other commands need no libbpf.  This file is the run (the checks,
 * the start, the loop, the summary); tr_internal.h lists the others.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tr_internal.h"
#include "trace.skel.h"

__attribute__((visibility("default"))) int hc_trace_main(cli_args_t *a);

/* What the run holds from its checks to its end (cleanup). */
static struct {
	int pidfd;                          /* the process: readable once it ended       */
	double base_t, base_user, base_sys; /* it untraced, before the probes */
	allocator_t al;                     /* --malloc: what is probed                  */
	struct ring_buffer *rb;
	struct bpf_link *links[TR_MAX_LINKS];
	unsigned nlinks;
	bool ended; /* the process is gone                       */
} R;

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* The options, and the process: there, not heapctl, and open to this
 * side (capabilities, BTF for --faults, its memory).  0 or an exit code. */
static int open_process(cli_args_t *a)
{
	int code = tr_parse_opts(a, &T.o);
	if (code)
		return code;
	tb_init(&T.B, T.o.budget);
	T.pid = a->pid;
	T.json = a->json;
	T.period = (double)(1ull << T.o.lg);
	if (T.pid <= 0)
		return cli_err(HC_EXIT_USAGE, "trace: say which process: heapctl trace PID --malloc|--faults");
	if (T.pid == getpid())
		return cli_err(HC_EXIT_USAGE, "trace: process %d is heapctl itself", T.pid);
	R.pidfd = (int)syscall(SYS_pidfd_open, T.pid, 0);
	if (R.pidfd < 0)
		return cli_err(errno == ESRCH ? HC_EXIT_NOPROC : HC_EXIT_FAILED, "no process %d", T.pid);
	/* the process untraced, while the program loads: its system seconds
	 * per user second (budget.c) */
	R.base_t = now_s();
	tb_proc_times(T.pid, &R.base_user, &R.base_sys);
	if (!tr_has_caps())
		return cli_err(HC_EXIT_PERM,
		    "trace: needs CAP_BPF and CAP_PERFMON (or root): "
		    "run it as root, e.g. sudo heapctl trace %d",
		    T.pid);
	if (T.o.mode == T_FAULTS && access("/sys/kernel/btf/vmlinux", R_OK) != 0)
		return cli_err(HC_EXIT_FAILED,
		    "trace: this kernel has no BTF (/sys/kernel/btf/vmlinux), "
		    "which --faults needs: a kernel built with CONFIG_DEBUG_INFO_BTF=y");
	char memp[64];
	snprintf(memp, sizeof memp, "/proc/%d/mem", T.pid);
	T.memfd = open(memp, O_RDONLY | O_CLOEXEC);
	if (T.memfd < 0)
		return cli_err(errno == ENOENT ? HC_EXIT_NOPROC : HC_EXIT_PERM,
		    "trace: cannot read process %d's memory: %s", T.pid, strerror(errno));
	return 0;
}

/* The probes on, with uprobe_multi links if the kernel has them (6.6),
 * else perf-event ones with the program loaded again for them.  0 or an
 * exit code. */
static int attach_first(void)
{
	int err = tr_attach(&R.al, R.links, &R.nlinks);
	if (err && T.multi && err != -ESRCH) {
		/* a kernel without uprobe_multi links: perf-event ones */
		if (getenv("HEAPCTL_TRACE_DEBUG"))
			fprintf(stderr, "heapctl: uprobe_multi links: %s; perf-event links instead\n", strerror(-err));
		tr_detach(R.links, &R.nlinks);
		ring_buffer__free(R.rb);
		R.rb = NULL;
		if ((err = tr_load(false)) == 0 &&
		    (R.rb = ring_buffer__new(bpf_map__fd(T.skel->maps.ring), tr_on_event, NULL, NULL)) == NULL)
			err = -errno;
		if (err == 0)
			err = tr_attach(&R.al, R.links, &R.nlinks);
	}
	if (err)
		return cli_err(err == -ESRCH ? HC_EXIT_NOPROC : HC_EXIT_FAILED,
		    "trace: cannot attach to process %d: %s", T.pid,
		    err == -ESRCH ? "it has exited" : tr_why_load_failed(err));
	return 0;
}

/* Everything before the loop: the allocator (--malloc), the program, the
 * unwinder, the ring buffer, the signals, the baseline, the probes.  0 or
 * an exit code. */
static int start(void)
{
	tr_read_maps();
	int code;
	if (T.o.mode == T_MALLOC && (code = tr_find_allocator(T.pid, T.o.symbols, &R.al)) != 0)
		return code;

	libbpf_set_print(tr_libbpf_print);
	/* HEAPCTL_TRACE_NO_MULTI: perf-event links, as on a kernel before 6.6 */
	bool multi = T.o.mode != T_FAULTS && getenv("HEAPCTL_TRACE_NO_MULTI") == NULL;
	int err = tr_load(multi);
	if (err && multi)
		err = tr_load(false);
	if (err)
		return cli_err(err == -EPERM ? HC_EXIT_PERM : HC_EXIT_FAILED, "trace: cannot load the BPF program: %s",
		    tr_why_load_failed(err));
	if (!tr_unwind_open())
		return cli_err(HC_EXIT_FAILED, "trace: libunwind: cannot make an address space");
	R.rb = ring_buffer__new(bpf_map__fd(T.skel->maps.ring), tr_on_event, NULL, NULL);
	if (R.rb == NULL)
		return cli_err(HC_EXIT_FAILED, "trace: cannot map the ring buffer: %s", strerror(errno));

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (T.o.mode == T_MALLOC) {
		double wait = R.base_t + TB_BASELINE - now_s(), user, sys;
		if (wait > 0)
			usleep((useconds_t)(wait * 1e6));
		if (tb_proc_times(T.pid, &user, &sys))
			tb_baseline(&T.B, user - R.base_user, sys - R.base_sys);
	}
	return attach_first();
}

static void announce(void)
{
	if (T.o.mode == T_MALLOC) {
		fprintf(stderr, "heapctl: tracing %u functions of %s in process %d (", R.al.n, R.al.path, T.pid);
		for (unsigned i = 0; i < R.al.n; i++)
			fprintf(stderr, "%s%s", i ? " " : "", R.al.p[i].name);
		fprintf(stderr, "), one sample per %.0f bytes; Ctrl-C to stop\n", T.period);
	} else {
		fprintf(stderr,
		    "heapctl: tracing page faults of process %d, one sample per %.0f bytes "
		    "of new pages; Ctrl-C to stop\n",
		    T.pid, T.period);
	}
}

/* Until Ctrl-C, --duration or the end of the process: the ring buffer
 * read, the maps copied each second, --interval's dumps, --malloc's duty
 * cycle.  0 or an exit code (a failed --interval dump is one, until the
 * cycle's next step says 0, as it always did). */
static int run_loop(double t0)
{
	bool faults = T.o.mode == T_FAULTS;
	double next_dump = T.o.interval > 0 ? t0 + T.o.interval : 0, next_maps = t0 + 1, now = t0;
	int code = 0;
	cycle_t cy = { .on = true };
	if (!faults) {
		tr_cycle_mark(&cy, t0);
		cy.t_next = t0 + TB_WINDOW;
	}
	while (!stop_signal && !R.ended) {
		int wait_ms = 100;
		if (cy.t_next && cy.t_next - now < 0.1)
			wait_ms = cy.t_next > now ? (int)((cy.t_next - now) * 1000) : 0;
		int r = ring_buffer__poll(R.rb, wait_ms);
		if (r < 0 && r != -EINTR) {
			code = cli_err(HC_EXIT_FAILED, "trace: reading the ring buffer: %s", strerror(-r));
			break;
		}
		struct pollfd pf = { .fd = R.pidfd, .events = POLLIN };
		R.ended = poll(&pf, 1, 0) == 1;
		now = now_s();
		if (T.o.duration > 0 && now - t0 >= T.o.duration)
			break;
		if (!R.ended && now >= next_maps) {
			tr_read_maps();
			next_maps = now + 1;
		}
		if (next_dump && now >= next_dump) {
			if (tr_dump('t') != 0)
				code = HC_EXIT_FAILED;
			next_dump += T.o.interval;
		}
		if (!R.ended && cy.t_next && now >= cy.t_next &&
		    (code = tr_cycle_step(&cy, &R.al, R.links, &R.nlinks, R.rb, now, &R.ended)) != 0)
			break;
	}
	if (cy.on && !faults)
		T.B.t_on += now - cy.t0;
	return code;
}

/* The --json summary event: the counters c, what was kept, the budget. */
static void summary_json(const uint64_t *c)
{
	json_t j;
	tr_json_event(&j, "summary");
	json_u64(&j, "calls", c[TR_C_CALLS]);
	json_u64(&j, "samples", T.samples);
	json_u64(&j, "frees", T.frees);
	json_u64(&j, "dropped_ring_full", c[TR_C_RINGFULL]);
	json_u64(&j, "dropped_rate_limit", c[TR_C_LIMITED]);
	json_u64(&j, "live_map_full", c[TR_C_LIVEFULL]);
	json_u64(&j, "stacks", tr_nstacks());
	json_u64(&j, "unwind_failed", T.unwound_short);
	json_u64(&j, "hits", c[TR_C_HITS]);
	tr_json_num(&j, "budget_pct", "%g", T.B.pct);
	tr_json_num(&j, "probe_cpu_pct", "%.4f", T.B.cpu_pct);
	tr_json_num(&j, "ns_per_hit", "%.0f", T.B.ns_hit);
	tr_json_num(&j, "on_fraction", "%.4f", T.B.t_traced > 0 ? T.B.t_on / T.B.t_traced : 1);
	json_u64(&j, "off_periods", T.B.cycles);
	json_bool(&j, "estimated", T.B.cycles != 0);
	json_end(&j);
}

/* The summary on stderr (and with --json, as an event). */
static void summary(const uint64_t *c)
{
	bool faults = T.o.mode == T_FAULTS;
	uint64_t dropped = c[TR_C_RINGFULL] + c[TR_C_LIMITED];
	if (T.json)
		summary_json(c);
	fprintf(stderr, "heapctl: %s%" PRIu64 " %s seen, %" PRIu64 " sampled (%zu stacks)",
	    R.ended ? "the process ended; " : "", c[TR_C_CALLS], faults ? "page faults" : "calls", T.samples,
	    tr_nstacks());
	if (!faults)
		fprintf(stderr, ", %" PRIu64 " sampled objects freed", T.frees);
	if (dropped || c[TR_C_LIVEFULL])
		fprintf(stderr,
		    "; dropped %" PRIu64 " samples (ring full %" PRIu64 ", rate limit %" PRIu64 "), %" PRIu64
		    " not tracked (live map full)",
		    dropped, c[TR_C_RINGFULL], c[TR_C_LIMITED], c[TR_C_LIVEFULL]);
	if (T.B.cycles)
		fprintf(stderr,
		    "; over the budget of %g%% (the probes cost about %.2f%% of a CPU), they "
		    "observed %.1f%% of the time: the totals are estimates",
		    T.B.pct, T.B.cpu_pct, T.B.t_traced > 0 ? 100 * T.B.t_on / T.B.t_traced : 100.0);
	fputc('\n', stderr);
}

/* The run, the probes off, what they still sent read, the final dump and
 * the summary.  0 or an exit code. */
static int trace_run(void)
{
	announce();
	double t0 = now_s();
	int code = run_loop(t0);
	T.B.t_traced = now_s() - t0;
	tr_detach(R.links, &R.nlinks);
	ring_buffer__consume(R.rb);
	uint64_t c[TR_NCOUNTERS];
	tr_counters(c);
	if (code == 0 && tr_dump('f') != 0)
		code = HC_EXIT_FAILED;
	summary(c);
	return code;
}

static void finish(void)
{
	for (unsigned i = 0; i < R.nlinks; i++)
		bpf_link__destroy(R.links[i]);
	ring_buffer__free(R.rb);
	if (T.skel)
		trace_bpf__destroy(T.skel);
	tr_unwind_close();
	tr_maps_close();
	if (T.memfd >= 0)
		close(T.memfd);
	if (R.pidfd >= 0)
		close(R.pidfd);
}

int hc_trace_main(cli_args_t *a)
{
	memset(&T, 0, sizeof T);
	memset(&R, 0, sizeof R);
	T.memfd = -1;
	T.scale = 1;
	R.pidfd = -1;
	int code = open_process(a);
	if (code == 0 && (code = start()) == 0)
		code = trace_run();
	finish();
	return code;
}
