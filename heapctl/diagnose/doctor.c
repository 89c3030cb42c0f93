/*
 * heapctl/diagnose/doctor.c - the diagnosis `heapctl doctor` (command.c)
 * and `heapctl systemd` print: why a process is not in `heapctl list`, or
 * refuses a command, and what to do about it.
 *
 * The checks run in the order a process gets there: it exists and runs;
 * the library is in its memory (else: no LD_PRELOAD, an environment reset
 * by a parent, secure execution, a static program, a library path it
 * cannot see or may not execute); it published a segment (else
 * control:false, no /dev/shm it can write); its control thread runs and
 * answers (else a seccomp filter, a stop, a frozen cgroup); and its dumps
 * have somewhere to go (a directory that exists, is writable for it and
 * has room).  For a process without the library, whether its seccomp
 * filter lets heapctl inject in (seccomp.c).  Each finding is ok, a note,
 * or a problem with its fix; the exit status is the heapctl exit code of
 * the first problem.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/json.h"
#include "diagnose/diagnose.h"
#include "diagnose/proc.h"
#include "diagnose/seccomp.h"

static void add(cli_diag_t *d, int level, int code, const char *topic, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void add(cli_diag_t *d, int level, int code, const char *topic, const char *fix, const char *fmt, ...)
{
	if (d->n >= CLI_DIAG_MAX)
		return;
	cli_finding_t *f = &d->f[d->n++];
	f->level = level;
	f->code = code;
	snprintf(f->topic, sizeof f->topic, "%s", topic);
	snprintf(f->fix, sizeof f->fix, "%s", fix ? fix : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->text, sizeof f->text, fmt, ap);
	va_end(ap);
	if (level == CLI_PROBLEM && d->code == 0)
		d->code = code;
}

static const char *user_of(unsigned uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(buf, len, "%s (uid %u)", pw->pw_name, uid);
	else
		snprintf(buf, len, "uid %u", uid);
	return buf;
}

static int parent_of(int pid)
{
	return (int)cli_proc_status_num(pid, "PPid", 0);
}

/* The first libheapctl entry of an LD_PRELOAD value, or NULL. */
static const char *preload_entry(const char *v, char *out, size_t len)
{
	char copy[4096], *save = NULL;
	snprintf(copy, sizeof copy, "%s", v);
	for (char *t = strtok_r(copy, ": ", &save); t; t = strtok_r(NULL, ": ", &save)) {
		if (cli_is_library(t)) {
			snprintf(out, len, "%s", t);
			return out;
		}
	}
	return NULL;
}

/* ---- the library is not in the process: why ----------------------------------- */

static void why_not_loaded(cli_diag_t *d, int pid)
{
	char pre[4096], lib[PATH_MAX], buf[PATH_MAX + 64], fix[1024];
	int r = cli_proc_getenv(pid, "LD_PRELOAD", pre, sizeof pre);
	if (r < 0) {
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "library", NULL,
		    "libheapctl.so is not loaded, and its "
		    "environment cannot be read to tell why (%s)",
		    strerror(errno));
		return;
	}
	if (r == 0 || preload_entry(pre, lib, sizeof lib) == NULL) {
		/* a parent that has it: something between reset the environment */
		for (int p = parent_of(pid), hops = 0; p > 1 && hops < 16; p = parent_of(p), hops++) {
			char ppre[4096], comm[64] = "?";
			if (cli_proc_getenv(p, "LD_PRELOAD", ppre, sizeof ppre) != 1 ||
			    !preload_entry(ppre, lib, sizeof lib))
				continue;
			cli_proc_status_field(p, "Name", comm, sizeof comm);
			snprintf(fix, sizeof fix,
			    "set LD_PRELOAD=%.600s where %s builds the environment of its "
			    "children (for postgres: heapctl systemd enable postgresql@VERSION-CLUSTER, which "
			    "writes /etc/postgresql/VERSION/CLUSTER/environment)",
			    lib, comm);
			add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "library", fix,
			    "libheapctl.so is not loaded: its "
			    "parent %s (PID %d) runs with LD_PRELOAD=%s, but this process has %s: %s (or a "
			    "program it started) reset the environment",
			    comm, p, lib, r == 0 ? "no LD_PRELOAD" : "another LD_PRELOAD", comm);
			return;
		}
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "library",
		    "start it under the library: heapctl run -- "
		    "COMMAND, or for a service heapctl systemd enable UNIT and a restart",
		    "libheapctl.so is not loaded: it was started without it (%s)",
		    r == 0 ? "no LD_PRELOAD in its environment" : "LD_PRELOAD does not name it");
		return;
	}
	if (cli_proc_secure(pid) == 1) {
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "library",
		    "run the program as the user that owns it, "
		    "without privileges gained at exec; it cannot be profiled with LD_PRELOAD otherwise",
		    "LD_PRELOAD names %s, but the program runs in secure-execution mode (set-user-ID, "
		    "set-group-ID or file capabilities): the dynamic loader ignores preload paths then",
		    lib);
		return;
	}
	snprintf(buf, sizeof buf, "/proc/%d/exe", pid);
	if (cli_elf_static(buf) == 1) {
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "library",
		    "a static program cannot load libheapctl.so; "
		    "rebuild it dynamically linked",
		    "LD_PRELOAD names %s, but the program is statically linked: no dynamic loader runs, "
		    "so nothing is preloaded",
		    lib);
		return;
	}
	struct stat st;
	snprintf(buf, sizeof buf, "/proc/%d/root%s", pid, lib);
	if (lib[0] != '/' || stat(buf, &st) != 0) {
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "library",
		    "install the library inside its file system "
		    "(make install DESTDIR=ROOT) or give the path it sees",
		    "LD_PRELOAD names %s, which does not exist in the process's file system (a container, "
		    "RootDirectory= or a mount namespace)",
		    lib);
		return;
	}
	char opts[512], dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", lib);
	*strrchr(dir, '/') = 0;
	if (cli_proc_mount_opts(pid, lib, opts, sizeof opts) && cli_opt_has(opts, "noexec")) {
		snprintf(fix, sizeof fix,
		    "allow it: ExecPaths=%.600s in the unit (heapctl systemd enable adds "
		    "it), or install the library on a file system mounted with exec",
		    dir);
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "library", fix,
		    "LD_PRELOAD names %s, but %s is mounted "
		    "noexec for this process (systemd's NoExecPaths=, or a noexec mount): the loader may "
		    "not map it",
		    lib, dir);
		return;
	}
	add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "library",
	    "read what the dynamic loader printed on the "
	    "process's standard error when it started (for a service: journalctl -u UNIT)",
	    "LD_PRELOAD names %s, but the dynamic loader did not load it (unreadable for the process's "
	    "user, or built for another architecture)",
	    lib);
}

/* ---- the segment and the control thread -------------------------------------------- */

/* Would the process's user be allowed to create files in st? */
static bool may_write(int pid, const struct stat *st)
{
	long uid = cli_proc_status_num(pid, "Uid", 1), gid = cli_proc_status_num(pid, "Gid", 1);
	char caps[64], groups[1024];
	if (cli_proc_status_field(pid, "CapEff", caps, sizeof caps) &&
	    (strtoull(caps, NULL, 16) & (1ull << 1))) /* CAP_DAC_OVERRIDE */
		return true;
	if ((long)st->st_uid == uid)
		return st->st_mode & S_IWUSR;
	bool member = (long)st->st_gid == gid;
	if (!member && cli_proc_status_field(pid, "Groups", groups, sizeof groups)) {
		char *save = NULL;
		for (char *g = strtok_r(groups, " \t", &save); g && !member; g = strtok_r(NULL, " \t", &save))
			member = strtol(g, NULL, 10) == (long)st->st_gid;
	}
	if (member)
		return st->st_mode & S_IWGRP;
	return st->st_mode & S_IWOTH;
}

static void why_no_segment(cli_diag_t *d, int pid, const char *err)
{
	char when[64], fix[160];
	snprintf(fix, sizeof fix, "heapctl inject %d arms it again", pid);
	switch (cli_proc_agent_inert(pid, when, sizeof when)) {
	case CLI_AGENT_EJECTED:
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "segment", fix,
		    "the agent heapctl inject loaded was ejected at "
		    "%s (heapctl eject): it stays mapped, inert, and publishes no segment",
		    when);
		return;
	case CLI_AGENT_UNARMED:
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "segment", fix,
		    "the agent heapctl inject loaded was never armed "
		    "(the inject failed after loading it): it is inert and publishes no segment");
		return;
	}
	if (cli_proc_conf_has(pid, "control:false")) {
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "segment",
		    "remove control:false from its HEAPCTL_CONF "
		    "or MALLOC_CONF and restart it",
		    "the library runs with control:false: it publishes no "
		    "segment and starts no control thread, so heapctl cannot reach it");
		return;
	}
	char shm[64], opts[512];
	struct stat st;
	snprintf(shm, sizeof shm, "/proc/%d/root/dev/shm", pid);
	if (stat(shm, &st) != 0 || !S_ISDIR(st.st_mode)) {
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "segment",
		    "give it a /dev/shm (a tmpfs; systemd units "
		    "have one even with PrivateDevices=)",
		    "the process has no /dev/shm, where the library "
		    "publishes its segment");
		return;
	}
	if (cli_proc_mount_opts(pid, "/dev/shm", opts, sizeof opts) && cli_opt_has(opts, "ro")) {
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "segment",
		    "mount /dev/shm read-write for it "
		    "(ReadWritePaths=/dev/shm in a unit that makes it read-only)",
		    "/dev/shm is read-only for "
		    "the process, so the library could not publish its segment");
		return;
	}
	if (!may_write(pid, &st)) {
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "segment",
		    "give /dev/shm its usual mode, 1777 (a tmpfs "
		    "every user may create files in)",
		    "/dev/shm (mode %o) is not writable for the "
		    "process's user, so the library could not publish its segment",
		    st.st_mode & 07777);
		return;
	}
	(void)err;
	int parent;
	if (cli_proc_fork_pending(pid, &parent)) {
		bool stopped = cli_proc_state(pid) == 'T';
		if (stopped)
			snprintf(fix, sizeof fix,
			    "continue it (kill -CONT %d); heapctl reaches its parent, "
			    "%d, meanwhile",
			    pid, parent);
		else
			snprintf(fix, sizeof fix,
			    "read the '<heapctl>:' lines it printed on its standard "
			    "error; heapctl reaches its parent, %d, meanwhile",
			    parent);
		add(d, stopped ? CLI_NOTE : CLI_PROBLEM, stopped ? 0 : HC_EXIT_NOLIB, "segment", fix,
		    "a child of fork (of %d) without a segment: its control thread makes one 20 ms after "
		    "the fork%s",
		    parent, stopped ? ", and the process is stopped" : "");
		return;
	}
	add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "segment",
	    "read the '<heapctl>: cannot create the control "
	    "segment' line the process printed on its standard error at start",
	    "the library is loaded "
	    "but published no control segment");
}

static void check_control(cli_diag_t *d, hc_shm_target_t *t, uint64_t timeout_ns)
{
	int terr = __atomic_load_n(&t->seg->hdr.control_err, __ATOMIC_RELAXED);
	char sec[32] = "0";
	cli_proc_status_field(t->pid, "Seccomp", sec, sizeof sec);
	/* the errno the process recorded says why, unless it is a seccomp
	 * filter's EPERM (below) */
	if (!__atomic_load_n(&t->seg->hdr.control, __ATOMIC_ACQUIRE) && terr && !(sec[0] == '2' && terr == EPERM)) {
		char lim[64] = "?";
		cli_proc_limit(t->pid, "Max processes", lim, sizeof lim);
		const char *fix = terr == EAGAIN
		    ? "raise the user's process limit (LimitNPROC= in its unit, "
		      "ulimit -u) or the cgroup's pids.max, or set it to 0 only after the library has started (a "
		      "fork child's thread starts in the fork)"
		    : "allow it to create threads";
		hc_shm_req_t req = { .cmd = HC_CMD_PING };
		hc_shm_rep_t rep;
		char err[512];
		uint64_t t0 = hc_shm_mono_ns();
		bool answered = hc_shm_call(t, &req, &rep, timeout_ns, err, sizeof err) == 0;
		double ms = (double)(hc_shm_mono_ns() - t0) / 1e6;
		if (answered)
			add(d, CLI_OK, 0, "control", NULL,
			    "the program's allocations answered in %.1f ms, in "
			    "place of a control thread",
			    ms);
		add(d, answered ? CLI_NOTE : CLI_PROBLEM, answered ? 0 : HC_EXIT_NOLIB, "control", fix,
		    "the control thread could not be started (pthread_create: %s; max processes %s): heapctl "
		    "commands are served only while the program allocates%s",
		    strerror(terr), lim, answered ? "" : ", and none was within the timeout");
		return;
	}
	if (!__atomic_load_n(&t->seg->hdr.control, __ATOMIC_ACQUIRE)) {
		if (sec[0] == '2')
			add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "control",
			    "allow thread creation (clone, clone3) in "
			    "its seccomp filter; systemd's @system-service does",
			    "the control thread is not "
			    "running, and a seccomp filter is in force: it most likely refused the thread "
			    "(the process printed '<heapctl>: cannot start the control thread' at start)");
		else
			add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "control",
			    "read the '<heapctl>: cannot start the "
			    "control thread' line on its standard error (a thread limit?)",
			    "the control thread "
			    "is not running: it could not be started, or the process is exiting");
		return;
	}
	hc_shm_req_t req = { .cmd = HC_CMD_PING };
	hc_shm_rep_t rep;
	char err[512];
	uint64_t t0 = hc_shm_mono_ns();
	int code = hc_shm_call(t, &req, &rep, timeout_ns, err, sizeof err);
	double ms = (double)(hc_shm_mono_ns() - t0) / 1e6;
	if (code == 0) {
		add(d, CLI_OK, 0, "control", NULL, "the control thread answered in %.1f ms", ms);
		return;
	}
	char cgs[4096], path[600], v[16], *cg = NULL;
	snprintf(path, sizeof path, "/proc/%d/cgroup", t->pid);
	if (code == HC_EXIT_TIMEOUT && hc_shm_read_file(path, cgs, sizeof cgs) > 0) {
		/* the unified hierarchy's line, "0::/path", wherever it is */
		for (char *l = cgs; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
			if (strncmp(l, "0::", 3) == 0)
				cg = l;
	}
	if (cg) {
		cg[strcspn(cg, "\n")] = 0;
		snprintf(path, sizeof path, "/sys/fs/cgroup%.500s/cgroup.freeze", cg + 3);
		bool frozen = hc_shm_read_file(path, v, sizeof v) > 0 && v[0] == '1';
		snprintf(path, sizeof path, "/sys/fs/cgroup/unified%.500s/cgroup.freeze", cg + 3);
		frozen = frozen || (hc_shm_read_file(path, v, sizeof v) > 0 && v[0] == '1');
		if (frozen) {
			add(d, CLI_PROBLEM, HC_EXIT_TIMEOUT, "control",
			    "thaw it (systemctl thaw UNIT, or "
			    "write 0 to the cgroup's cgroup.freeze)",
			    "the process is frozen (cgroup %s)", cg + 3);
			return;
		}
	}
	char fix[96];
	snprintf(fix, sizeof fix, CLI_STACKS_HINT, t->pid);
	add(d, CLI_PROBLEM, code, "control", code == HC_EXIT_TIMEOUT ? fix : NULL, "%s", err);
}

/* ---- where dumps go ------------------------------------------------------------------ */

static void check_dumps(cli_diag_t *d, hc_shm_target_t *t, const hc_shm_state_t *st)
{
	char dir[PATH_MAX], local[PATH_MAX + 64], fix[1024], opts[512];
	if (st->prefix[0] != '/') {
		char cwd[64];
		snprintf(cwd, sizeof cwd, "/proc/%d/cwd", t->pid);
		ssize_t n = readlink(cwd, dir, sizeof dir - 1);
		if (n <= 0) {
			add(d, CLI_NOTE, 0, "dumps", NULL,
			    "prof.prefix '%s' is relative to its working "
			    "directory, which cannot be read",
			    st->prefix);
			return;
		}
		dir[n] = 0;
		add(d, CLI_NOTE, 0, "dumps", NULL,
		    "prof.prefix '%s' is relative: dumps it writes on its "
		    "own (final, high-water, timer) go to its working directory %s; heapctl dump writes "
		    "into yours",
		    st->prefix, dir);
		snprintf(local, sizeof local, "/proc/%d/cwd", t->pid);
	} else {
		snprintf(dir, sizeof dir, "%s", st->prefix);
		char *slash = strrchr(dir, '/');
		if (slash == dir)
			slash[1] = 0;
		else
			*slash = 0;
		cli_local_path(t, dir, local, sizeof local);
	}
	struct stat sb;
	if (stat(local, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		snprintf(fix, sizeof fix,
		    "create it, or point prof.prefix elsewhere: heapctl set %d "
		    "prof.prefix=/DIR/NAME",
		    t->pid);
		add(d, CLI_PROBLEM, HC_EXIT_FAILED, "dumps", fix,
		    "the dump directory %s does not exist "
		    "for the process",
		    dir);
		return;
	}
	if (cli_proc_mount_opts(t->pid, dir, opts, sizeof opts) && cli_opt_has(opts, "ro")) {
		snprintf(fix, sizeof fix,
		    "give the unit ReadWritePaths=%.600s or a StateDirectory= for dumps "
		    "(heapctl systemd enable does), or heapctl set %d prof.prefix=/WRITABLE/NAME",
		    dir, t->pid);
		add(d, CLI_PROBLEM, HC_EXIT_FAILED, "dumps", fix,
		    "the dump directory %s is read-only for "
		    "the process (ProtectSystem=strict, or a read-only mount)",
		    dir);
		return;
	}
	if (!may_write(t->pid, &sb)) {
		char who[96];
		snprintf(fix, sizeof fix, "let its user write there, or heapctl set %d prof.prefix=/DIR/NAME", t->pid);
		add(d, CLI_PROBLEM, HC_EXIT_FAILED, "dumps", fix,
		    "the dump directory %s (owner %s, mode "
		    "%o) is not writable for the process's user",
		    dir, user_of(sb.st_uid, who, sizeof who), sb.st_mode & 07777);
		return;
	}
	struct statvfs vfs;
	if (statvfs(local, &vfs) == 0) {
		uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize, need = 1 << 20;
		char last[PATH_MAX + 64];
		cli_local_path(t, st->last_dump, last, sizeof last);
		if (st->last_dump[0] && stat(last, &sb) == 0 && (uint64_t)sb.st_size > need)
			need = (uint64_t)sb.st_size;
		if (avail < need || (vfs.f_favail == 0 && vfs.f_files != 0)) {
			char b1[32], b2[32];
			snprintf(fix, sizeof fix, "free space there, or heapctl set %d prof.prefix=/ELSEWHERE/NAME",
			    t->pid);
			add(d, CLI_PROBLEM, HC_EXIT_FAILED, "dumps", fix,
			    "the file system of the dump directory %s is full: "
			    "%s free, a dump needs about %s%s",
			    dir, out_bytes(avail, b1, sizeof b1), out_bytes(need, b2, sizeof b2),
			    vfs.f_favail == 0 && vfs.f_files ? " (and no inodes)" : "");
			return;
		}
	}
	add(d, CLI_OK, 0, "dumps", NULL, "dumps go to %s, which the process can write", dir);
}

/* What its seccomp filter means for heapctl inject, the way out when the
 * library is not loaded (inject refuses, or goes on, for these reasons).
 * Reading the filter stops its main thread for a moment (seccomp.c). */
static void inject_seccomp(cli_diag_t *d, int pid)
{
	cli_seccomp_t sc;
	cli_seccomp_check(pid, &sc);
	char fix[512];
	cli_seccomp_fix(&sc, fix, sizeof fix);
	if (sc.verdict == CLI_SC_OK)
		add(d, CLI_NOTE, 0, "seccomp", NULL,
		    "a seccomp filter is in force (%d filter%s, %u instructions); it "
		    "allows every call heapctl inject's agent makes%s%s%s: heapctl inject %d can load it",
		    sc.filters, sc.filters == 1 ? "" : "s", sc.insns, sc.tolerated[0] ? ", and fails " : "",
		    sc.tolerated, sc.tolerated[0] ? ", which it copes with" : "", pid);
	else if (sc.verdict == CLI_SC_REFUSED)
		add(d, CLI_NOTE, 0, "seccomp", fix,
		    "a seccomp filter is in force that %s, which %s makes: heapctl "
		    "inject %d refuses",
		    sc.what, sc.by, pid);
	else if (sc.verdict == CLI_SC_UNKNOWN)
		add(d, CLI_NOTE, 0, "seccomp", fix,
		    "a seccomp filter is in force, and heapctl could not check it "
		    "(%s): heapctl inject %d refuses",
		    sc.why, pid);
}

/* ---- the whole diagnosis ------------------------------------------------------------- */

void cli_diagnose(int pid, uint64_t timeout_ns, cli_diag_t *d)
{
	memset(d, 0, sizeof *d);
	d->pid = pid;
	char state[64], name[64] = "?", who[96];
	if ((kill(pid, 0) != 0 && errno == ESRCH) || !cli_proc_status_field(pid, "State", state, sizeof state)) {
		add(d, CLI_PROBLEM, HC_EXIT_NOPROC, "process", NULL, "no process with PID %d", pid);
		return;
	}
	cli_proc_status_field(pid, "Name", name, sizeof name);
	long uid = cli_proc_status_num(pid, "Uid", 0);
	add(d, CLI_OK, 0, "process", NULL, "%d (%s) runs as %s, state %s", pid, name,
	    user_of((unsigned)uid, who, sizeof who), state);
	long nspid = -1;
	char ns[128];
	if (cli_proc_status_field(pid, "NSpid", ns, sizeof ns)) {
		char *last = strrchr(ns, '\t') ? strrchr(ns, '\t') + 1 : strrchr(ns, ' ') ? strrchr(ns, ' ') + 1 : ns;
		nspid = strtol(last, NULL, 10);
	}
	if (nspid > 0 && nspid != pid)
		add(d, CLI_NOTE, 0, "process", NULL,
		    "it runs in another PID namespace (a container), "
		    "where it is PID %ld; its dump file names carry that PID",
		    nspid);
	if (state[0] == 'Z' || state[0] == 'X') {
		add(d, CLI_PROBLEM, HC_EXIT_NOPROC, "process", NULL, "it has exited (state %s)", state);
		return;
	}
	char fix[128];
	snprintf(fix, sizeof fix, "continue it: kill -CONT %d", pid);
	if (state[0] == 'T') {
		add(d, CLI_PROBLEM, HC_EXIT_TIMEOUT, "process", fix,
		    "it is stopped (SIGSTOP or job "
		    "control): it cannot answer commands until it continues");
		return;
	}
	if (state[0] == 't') {
		add(d, CLI_PROBLEM, HC_EXIT_TIMEOUT, "process", "detach the debugger",
		    "it is stopped by "
		    "a debugger (tracing stop): it cannot answer commands until the debugger lets it run");
		return;
	}
	char libpath[PATH_MAX];
	bool readable;
	bool mapped = cli_proc_maps_library(pid, libpath, sizeof libpath, &readable);
	long euid = cli_proc_status_num(pid, "Uid", 1), gid = cli_proc_status_num(pid, "Gid", 0),
	     egid = cli_proc_status_num(pid, "Gid", 1);
	hc_shm_target_t t;
	char err[512];
	/* a set-user-ID program may run the library all the same (heapctl
	 * inject): its segment is its effective user's, and hc_shm_open says so */
	if (!readable && euid != uid) {
		int c = hc_shm_open(pid, &t, err, sizeof err);
		if (c == HC_EXIT_OK)
			hc_shm_close(&t);
		char *fix_in_err = strstr(err, "; run heapctl as");
		if (c == HC_EXIT_PERM && strstr(err, "runs libheapctl.so") && fix_in_err) {
			*fix_in_err = 0; /* the fix has a line of its own */
			add(d, CLI_PROBLEM, c, "segment", "run heapctl as that user or as root", "%s",
			    err + strlen("permission denied: "));
			return;
		}
	}
	if (!readable && (euid != uid || egid != gid)) {
		add(d, CLI_PROBLEM, HC_EXIT_NOLIB, "library",
		    "run the program as the user that owns it, "
		    "without privileges gained at exec; it cannot be profiled with LD_PRELOAD otherwise",
		    "it runs with privileges gained at exec (real uid %ld, effective %ld; real gid %ld, "
		    "effective %ld: a set-user-ID or set-group-ID program), so it runs in secure-execution "
		    "mode: the dynamic loader ignores LD_PRELOAD paths, and a library it links publishes no "
		    "segment",
		    uid, euid, gid, egid);
		return;
	}
	if (!readable && geteuid() != 0 && (long)geteuid() != uid) {
		add(d, CLI_PROBLEM, HC_EXIT_PERM, "process", "run heapctl as that user or as root",
		    "it belongs to %s: heapctl, running as uid %u, may not look into it",
		    user_of((unsigned)uid, who, sizeof who), (unsigned)geteuid());
		return;
	}
	if (readable && !mapped) {
		why_not_loaded(d, pid);
		inject_seccomp(d, pid);
		return;
	}
	if (mapped)
		add(d, CLI_OK, 0, "library", NULL, "%s is loaded", libpath);
	int code = hc_shm_open(pid, &t, err, sizeof err);
	if (code == HC_EXIT_NOLIB && mapped) {
		why_no_segment(d, pid, err);
		return;
	}
	if (code) {
		add(d, CLI_PROBLEM, code, "segment", NULL, "%s", err);
		return;
	}
	char version[17];
	snprintf(version, sizeof version, "%.*s", (int)sizeof t.seg->hdr.version, t.seg->hdr.version);
	add(d, CLI_OK, 0, "segment", NULL, "%s (heapctl %s)", t.path, version);
	check_control(d, &t, timeout_ns);
	bool control = d->code == 0;
	hc_shm_state_t st;
	if (hc_shm_state_read(&t.seg->state, &st)) {
		if (!st.active && control) {
			snprintf(fix, sizeof fix, "heapctl on %d", pid);
			add(d, CLI_NOTE, 0, "profiling", fix,
			    "sampling is off: nothing allocated from now on is "
			    "in a profile until it is switched on");
		} else if (st.active) {
			add(d, CLI_OK, 0, "profiling", NULL, "sampling is on, a sample every 2^%u bytes on average",
			    st.lg_sample);
		}
		check_dumps(d, &t, &st);
	}
	char sec[32];
	if (cli_proc_status_field(pid, "Seccomp", sec, sizeof sec) && sec[0] == '2')
		add(d, CLI_NOTE, 0, "seccomp", NULL,
		    "a seccomp filter is in force; the library keeps to "
		    "systemd's @system-service, so only a stricter filter can stop it");
	hc_shm_close(&t);
}

/* ---- the findings, printed --------------------------------------------------------------- */

static const char *level_name[] = { [CLI_OK] = "ok", [CLI_NOTE] = "note", [CLI_PROBLEM] = "PROBLEM" };

/* The findings as members of an open JSON object: pid, ok, exit, findings
 * (cli_diag_json), or findings alone (cli_diag_json_findings). */
void cli_diag_json(json_t *j, const cli_diag_t *d)
{
	json_i64(j, "pid", d->pid);
	json_bool(j, "ok", d->code == 0);
	json_i64(j, "exit", d->code);
	cli_diag_json_findings(j, d);
}

void cli_diag_json_findings(json_t *j, const cli_diag_t *d)
{
	json_arr(j, "findings");
	for (int i = 0; i < d->n; i++) {
		const cli_finding_t *f = &d->f[i];
		json_obj(j, NULL);
		json_str(j, "level", f->level == CLI_PROBLEM ? "problem" : level_name[f->level]);
		json_str(j, "topic", f->topic);
		json_str(j, "text", f->text);
		json_str(j, "fix", f->fix[0] ? f->fix : NULL);
		json_end(j);
	}
	json_end(j);
}

void cli_diag_print(const cli_diag_t *d, bool json, const char *indent)
{
	if (json) {
		json_t j;
		json_begin(&j, stdout, JSON_PRETTY);
		json_obj(&j, NULL);
		cli_diag_json(&j, d);
		json_end(&j);
		return;
	}
	char safe[4 * 1024];
	for (int i = 0; i < d->n; i++) {
		const cli_finding_t *f = &d->f[i];
		printf("%s%-7s %-9s %s\n", indent, level_name[f->level], f->topic,
		    out_safe(f->text, safe, sizeof safe));
		if (f->fix[0] && f->level != CLI_OK)
			printf("%s%-7s %-9s fix: %s\n", indent, "", "", out_safe(f->fix, safe, sizeof safe));
	}
}

/* A process's control thread answered the diagnosis's ping. */
bool cli_diag_answers(const cli_diag_t *d)
{
	for (int i = 0; i < d->n; i++)
		if (d->f[i].level == CLI_OK && !strcmp(d->f[i].topic, "control"))
			return true;
	return false;
}

/* Why it does not answer, in one line: the first problem, or else the
 * first note (a child of fork that has published no segment yet). */
const char *cli_diag_why(const cli_diag_t *d)
{
	for (int level = CLI_PROBLEM; level >= CLI_NOTE; level--)
		for (int i = 0; i < d->n; i++)
			if (d->f[i].level == level)
				return d->f[i].text;
	return "no control thread answered";
}
