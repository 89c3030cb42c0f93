/*
 * agent/control.c - the target's side of the control segment.
 *
 * At start-up the library creates /dev/shm/heapctl.<pid> (shm/heapctl_shm.h
 * is the layout), fills in its identity and starts one thread,
 * "heapctl-ctl", that
 *
 *   - waits on the mailbox doorbell (a futex in the segment) with a timeout
 *     of control_refresh_ms, executes posted commands and wakes the client;
 *   - mirrors configuration and counters into the seqlocked state block on
 *     every wake-up, so `heapctl status` never needs a round trip, and
 *     publishes a config event for every setting that changed since;
 *   - frees slots left behind by clients that died (a lease on each slot),
 *     once some client has rung: until then it never reads the slots, whose
 *     pages (32 KiB of the segment) then stay unwritten.
 *
 * Other threads only publish events (dumps, high-water marks) through
 * events.c, serialised by a lock private to this process; the segment this
 * thread makes is the one they publish to (hc_event_seg).  The target
 * never waits for a client: a command is copied out of its slot, checked,
 * executed and answered, and a client that is gone simply never reads the
 * answer.
 *
 * The thread works in a descriptor table of its own (table_own): it
 * leaves the program's table as it starts, taking nothing of it along
 * (close_range with CLOSE_RANGE_UNSHARE), so that what it opens and closes
 * later (a dump, the segment, /proc files) never takes or closes a number
 * the program's threads are using or are about to get from open(): a
 * daemon's close(0); open("/dev/null"), a shell child setting up a
 * pipeline, a program that closes every descriptor it does not know.  Its
 * descriptor 0 is a pidfd of the process, through which its messages reach
 * the program's standard error (hc_stderr); 1 and 2 are copies, so that
 * nothing of its own is ever written to as standard error.  Where the
 * kernel or a seccomp filter refuses (close_range needs Linux 5.9) it
 * works in the program's table, as any thread.
 *
 * A child of fork gets its own thread at once, from the fork handler, but
 * the thread makes the child's segment only CHILD_GRACE_MS after the fork:
 * a child that execs or exits before (system(), popen, a fork-per-task
 * server) leaves no segment, and one that lives on is in `heapctl list`
 * then, whatever it does: an idle pre-forked worker, the grandchild of a
 * daemon's double fork that only sleeps, a postgres backend waiting for its
 * first query.  The thread exists before the child's own code runs, so a
 * child that then caps its threads (haproxy's workers set RLIMIT_NPROC to
 * 0) or chroots still has it.  For the chroot the handler opens /dev/shm
 * and /proc/self (O_PATH) in the program's table, moved up out of the way
 * (hc_fd_high), and the thread, as it starts, closes both there and opens
 * them again in its own table, where they stay until the segment is made:
 * unless the child chrooted before the thread first ran (microseconds,
 * more on a loaded machine), which the root tells.  The handler does not
 * wait for the thread (a fork under load would wait for the scheduler).
 * Such a child's thread, and one that cannot have a table of its own,
 * works in the program's table with the two as before: until the segment
 * is made, code running in a child that chrooted within those 20 ms could
 * then reach outside its root through them.  The handler also keeps
 * /proc/self/maps open in the program's table (moved up), for dumps its
 * threads write after a chroot: a file, which reaches nothing.  A child
 * that waited for its first allocation 20 ms after the fork (as before)
 * could not be reached while idle; the thread costs a small program's
 * fork-and-exit a few hundred microseconds (tests/bench/RESULTS.md,
 * fork_small and fork_cost).
 *
 * Where no thread can be started (pthread_create fails: a thread limit, a
 * seccomp filter), the segment says why (hdr.control_err) and the
 * program's own allocations serve the mailbox instead: each thread's
 * countdown comes due every HC_POLL_QUANTUM bytes and hc_control_poll
 * serves what is posted, mirrors the counters and tries the thread again,
 * at most once per control_refresh_ms.  Such a process answers while it
 * allocates, not while it is idle.
 *
 * unshare(CLONE_NEWUSER) and setns() into a user or mount namespace need a
 * single-threaded process: agent/namespaces.c stops the thread around
 * them (hc_control_pause/resume).  control:false turns all of this off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "events.h"
#include "../allocator/heapctl.h"
#include "../shm/heapctl_shm.h"

static int seg_pid; /* the pid that made it            */
static char seg_path[64] HC_FORK_DATA;
static uint64_t start_time, pidns;
static uint64_t commands HC_FORK_DATA; /* control thread only          */
static pthread_t ctl_thread;
static bool ctl_running HC_FORK_DATA; /* ctl_thread exists (pause_lock)  */
static uint32_t ctl_stop;             /* asks it to return (atomic)      */
static int child_parent HC_FORK_DATA; /* fork child, no segment yet: the
                                         parent's pid (control thread)   */
#define CHILD_GRACE_MS 20
/* no control thread where one should be: allocations poll (atomic;
 * cleared under pause_lock) */
bool hc_control_poll_pending HC_FORK_DATA;
static int thread_err HC_FORK_DATA;        /* pthread_create's error, 0 */
static uint64_t poll_last_ns HC_FORK_DATA; /* hc_control_poll's last turn */
/* fork child: /dev/shm and its /proc/PID (O_PATH), until its segment is
 * made; in the program's descriptor table (child_fds_program) or the
 * control thread's own */
static int child_dfd HC_FORK_DATA = -1;
static int child_procfd HC_FORK_DATA = -1;
static bool child_fds_program HC_FORK_DATA;
/* the root the fork handler saw, for the thread to tell whether the child
 * chrooted since */
static dev_t child_root_dev HC_FORK_DATA;
static ino_t child_root_ino HC_FORK_DATA;
static dev_t child_dfd_dev HC_FORK_DATA, child_procfd_dev HC_FORK_DATA; /* what they */
static ino_t child_dfd_ino HC_FORK_DATA, child_procfd_ino HC_FORK_DATA; /* are, for a
                                       program that closed them since  */
static uint64_t child_forked_ns HC_FORK_DATA;                           /* when this process was forked    */
static int fork_pid HC_FORK_DATA;                                       /* the forking process's pid and */
static uint64_t fork_ns HC_FORK_DATA;                                   /* the time, taken in the parent
                                                                           (outer prepare), where the clock's
                                                                           pages are mapped: a child reading
                                                                           it took two page faults          */
/* heapctl inject (agent/inject/shim.c): since when the profile counts, and
 * the injected agent's eject and its scan for newly loaded objects */
static uint64_t counts_since;
static bool (*eject_hook)(char *why, size_t len);
static unsigned (*scan_hook)(bool force);
static bool ejecting; /* written by the control thread only */
static bool pausing;  /* under pause_lock */
static hc_mutex_t pause_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_PAUSE, "pause_lock");

/* ---- creating the segment -------------------------------------------------- */

/* A file at our name is ours to replace only when it is provably a segment
 * of ours that nobody uses: a regular file of our user, with our magic, our
 * PID namespace and our pid (so a process that had our pid before, or this
 * one before an exec), or a file of our user whose header was never finished
 * (empty, or zeros or our magic with ready still 0) and that is over a second
 * old: its creator was killed while starting, between creating the file and
 * publishing it.  Anything else someone else made, and is left alone. */
static bool own_stale(int dfd, const char *name)
{
	hc_shm_header_t h;
	struct stat st;
	int err = hc_shm_header_at(dfd, name, &h, &st);
	/* one still being created is microseconds old */
	if (hc_shm_unfinished_own(err, &h, &st, 1))
		return true;
	return err == 0 && st.st_uid == geteuid() && h.magic == HC_SHM_MAGIC && h.pidns == pidns && pidns != 0 &&
	    h.pid == getpid();
}

/* Create our segment file in /dev/shm (dfd), exclusively: heapctl.<pid>, or
 * where that name is held by something we did not make, a name of our own
 * with 64 random bits (which no one can plant in advance).  Returns the fd,
 * or -errno; name gets the name used. */
static int create_file(int dfd, char *name, size_t len)
{
	const int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int pid = getpid();
	char *e = name + (sizeof HC_SHM_BASENAME - 1);
	memcpy(name, HC_SHM_BASENAME, sizeof HC_SHM_BASENAME - 1);
	e = hc_fmt_u64(e, (uint64_t)pid);
	int fd = openat(dfd, name, flags, 0600);
	if (fd < 0 && errno == EEXIST && own_stale(dfd, name) && unlinkat(dfd, name, 0) == 0)
		fd = openat(dfd, name, flags, 0600);
	if (fd >= 0 || errno != EEXIST)
		return fd >= 0 ? fd : -errno;
	for (int attempt = 0; attempt < 8; attempt++) {
		unsigned char rnd[8];
		if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
			/* no entropy yet (early boot): the clock and an address */
			uint64_t x = hc_shm_mono_ns() ^ ((uint64_t)(uintptr_t)&rnd << 17) ^ (uint64_t)attempt;
			memcpy(rnd, &x, sizeof rnd);
		}
		static const char hex[] = "0123456789abcdef";
		char *q = e;
		*q++ = '.';
		for (unsigned i = 0; i < sizeof rnd; i++) {
			*q++ = hex[rnd[i] >> 4];
			*q++ = hex[rnd[i] & 15];
		}
		*q = 0;
		fd = openat(dfd, name, flags, 0600);
		if (fd >= 0) {
			char held[32];
			memcpy(held, name, (size_t)(e - name));
			held[e - name] = 0;
			hc_note("/dev/shm/", held,
			    " is held by a file this process did not create; "
			    "the control segment is /dev/shm/",
			    name, NULL);
			return fd;
		}
		if (errno != EEXIST)
			break;
	}
	(void)len;
	return -errno;
}
static void command_line(char *out, size_t len)
{
	char buf[256];
	ssize_t n = hc_shm_read_file("/proc/self/cmdline", buf, sizeof buf);
	if (n <= 0) {
		n = hc_shm_read_file("/proc/self/comm", buf, sizeof buf);
		if (n > 0 && buf[n - 1] == '\n')
			buf[--n] = 0;
	}
	for (ssize_t i = 0; i + 1 < n; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	hc_shm_strlcpy(out, n > 0 ? buf : "?", len);
}

/* A descriptor the fork handler opened, once, if it still is what it
 * opened (-1 else): a daemon may have closed every descriptor since and
 * opened another file under its number, which is then left alone. */
static int child_fd(int *fd, dev_t dev, ino_t ino)
{
	int f = *fd;
	*fd = -1;
	struct stat st;
	if (f < 0 || fstat(f, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_dev != dev || st.st_ino != ino)
		return -1;
	return f;
}

/* Both of the fork child's directories closed, where they still are what
 * was opened. */
static void child_fds_close(void)
{
	int f;
	if ((f = child_fd(&child_procfd, child_procfd_dev, child_procfd_ino)) >= 0)
		close(f);
	if ((f = child_fd(&child_dfd, child_dfd_dev, child_dfd_ino)) >= 0)
		close(f);
}

/* Open a directory for the fork child (O_PATH); -1 if it cannot.  In the
 * program's table it is moved out of the way (hc_fd_high). */
static int child_open(const char *path, dev_t *dev, ino_t *ino)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (!hc_fd_own)
		fd = hc_fd_high(fd);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0) {
		*dev = st.st_dev;
		*ino = st.st_ino;
		return fd;
	}
	if (fd >= 0)
		close(fd);
	return -1;
}

/* The directory the fork handler opened, opened again by the control
 * thread: -1 unless it is the same one (the child chrooted since). */
static int child_reopen(const char *path, dev_t dev, ino_t ino)
{
	dev_t d;
	ino_t i;
	int fd = child_open(path, &d, &i);
	if (fd >= 0 && (d != dev || i != ino)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static hc_shm_t *segment_create(int parent)
{
	int pid = getpid();
	bool ended;
	struct stat nst;
	/* a fork child may have chrooted since the fork, away from /proc and
	 * /dev/shm: its handler opened both then */
	int procfd = child_fd(&child_procfd, child_procfd_dev, child_procfd_ino);
	if (procfd >= 0 && (start_time = hc_shm_proc_start_time_at(procfd, "stat", &ended)) &&
	    fstatat(procfd, "ns/pid", &nst, 0) == 0) {
		pidns = (uint64_t)nst.st_ino;
	} else {
		start_time = hc_shm_proc_start_time(pid, &ended);
		pidns = hc_shm_pidns();
	}
	if (procfd >= 0) {
		hc_event_maps_open(procfd, "maps");
		close(procfd);
	}
	char name[64];
	int dfd = child_fd(&child_dfd, child_dfd_dev, child_dfd_ino);
	if (dfd < 0)
		dfd = open(HC_SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = dfd < 0 ? -errno : create_file(dfd, name, sizeof name);
	if (fd < 0) {
		if (dfd >= 0)
			close(dfd);
		hc_say("cannot create the control segment in " HC_SHM_DIR ": ", strerrordesc_np(-fd),
		    "; heapctl cannot attach to this process", NULL);
		return NULL;
	}
	char path[64];
	memcpy(path, HC_SHM_DIR "/", sizeof HC_SHM_DIR);
	hc_shm_strlcpy(path + sizeof HC_SHM_DIR, name, sizeof path - sizeof HC_SHM_DIR);
	hc_shm_t *s = MAP_FAILED;
	if (fchmod(fd, 0600) == 0 && ftruncate(fd, sizeof(hc_shm_t)) == 0)
		s = mmap(NULL, sizeof(hc_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int err = errno;
	close(fd);
	if (s == MAP_FAILED) {
		unlinkat(dfd, name, 0);
		close(dfd);
		hc_say("cannot map the control segment ", path, ": ", strerrordesc_np(err), NULL);
		return NULL;
	}
	close(dfd);
	hc_shm_header_t *h = &s->hdr;
	h->abi = HC_SHM_ABI;
	h->size = (uint32_t)sizeof(hc_shm_t);
	/* last of the three a client checks first: it waits while magic is 0 */
	__atomic_store_n(&h->magic, HC_SHM_MAGIC, __ATOMIC_RELEASE);
	h->pid = pid;
	h->uid = (uint32_t)getuid();
	h->start_time = start_time;
	h->pidns = pidns;
	h->created_ns = hc_shm_now_ns();
	hc_shm_strlcpy(h->version, HC_VERSION, sizeof h->version);
	command_line(h->comm, sizeof h->comm);
	h->control = thread_err == 0; /* cleared if the thread cannot be started */
	h->control_err = thread_err;
	h->counts_since_ns = counts_since;
	memcpy(seg_path, path, sizeof seg_path);
	seg_pid = pid;
	hc_shm_event_t ev = { .type = HC_EV_START, .value = (uint64_t)parent };
	ev.time_ns = hc_shm_now_ns();
	hc_shm_event_publish(&s->ring, &ev);
	__atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
	return s;
}

/* ---- mirroring ------------------------------------------------------------------ */

/* The segment's copy of the settings: opt.prof, then every run-time
 * setting of the list into its field. */
static void config_read(hc_shm_state_t *c)
{
	static char buf[HC_SHM_VALUE_MAX];
	c->prof = hc_opt.prof;
	for (unsigned i = 0; i < HC_NSETTINGS; i++) {
		const hc_shm_setting_t *s = &hc_shm_settings[i];
		if (s->name == NULL)
			continue;
		hc_shm_value_t v;
		char why[8];
		hc_setting_get(i, &v, buf, sizeof buf);
		/* every write was checked, so what the target holds is in range */
		HC_ASSERT(hc_shm_setting_check(s, &v, why, sizeof why));
		hc_shm_setting_put(s, c, &v);
	}
}

#define CONFIG_END offsetof(hc_shm_state_t, allocated) /* settings end where counters begin */

/* The control thread's last published configuration. */
static hc_shm_state_t last;
static bool have_last HC_FORK_DATA;

/* Settings always; counters (a walk over the heap) when asked. */
static void mirror(bool counters)
{
	static hc_shm_state_t cur;
	config_read(&cur);
	if (have_last) {
		for (unsigned i = 0; i < HC_NSETTINGS; i++) {
			const hc_shm_setting_t *m = &hc_shm_settings[i];
			if (m->name == NULL ||
			    memcmp((char *)&cur + m->shm_offset, (char *)&last + m->shm_offset, m->shm_size) == 0)
				continue;
			hc_shm_event_t ev = { .type = HC_EV_CONFIG };
			hc_shm_value_t v;
			hc_shm_strlcpy(ev.name, m->name, sizeof ev.name);
			hc_shm_setting_get(m, &cur, &v);
			hc_shm_setting_text(m, &v, ev.path, sizeof ev.path);
			hc_shm_setting_get(m, &last, &v);
			hc_shm_setting_text(m, &v, ev.text, sizeof ev.text);
			hc_event_publish(&ev);
		}
	}
	last = cur;
	have_last = true;

	static hc_stats_t st;
	if (counters)
		hc_stats_refresh(&st);
	hc_shm_state_t *s = &hc_event_seg->state;
	hc_shm_state_write_begin(s);
	s->updated_ns = hc_shm_now_ns();
	/* the settings are one run of fields, prof up to the counters */
	memcpy(&s->prof, &cur.prof, CONFIG_END - offsetof(hc_shm_state_t, prof));
	s->allocated = st.allocated;
	s->active_bytes = st.active;
	s->metadata = st.metadata;
	s->resident = st.resident;
	s->mapped = st.mapped;
	s->retained = st.retained;
	s->highwater = hc_mapped_highwater();
	s->samples = hc_prof_samples_total();
	s->dumps = hc_dumps_written();
	s->threads = st.nheaps;
	s->commands = commands;
	hc_event_last_dump(s->last_dump);
	hc_shm_state_write_end(s);
}

/* ---- commands -------------------------------------------------------------------- */

static void reply(hc_shm_rep_t *rep, uint32_t code, const char *a, const char *b)
{
	rep->code = code;
	rep->text[0] = 0;
	size_t n = 0;
	for (const char *p = a; p && *p && n + 1 < sizeof rep->text; p++)
		rep->text[n++] = *p;
	for (const char *p = b; p && *p && n + 1 < sizeof rep->text; p++)
		rep->text[n++] = *p;
	rep->text[n] = 0;
}

static void do_set(const hc_shm_req_t *q, hc_shm_rep_t *rep)
{
	const hc_shm_setting_t *s = hc_shm_setting_find(q->name);
	if (s == NULL) {
		reply(rep, HC_REP_INVALID, "unknown setting ", q->name);
		return;
	}
	hc_shm_value_t v;
	char why[256];
	if (!hc_shm_setting_parse(s, q->text, &v, why, sizeof why)) {
		reply(rep, HC_REP_INVALID, why, NULL);
		return;
	}
	int err = hc_setting_set((unsigned)(s - hc_shm_settings), &v);
	if (err)
		reply(rep, HC_REP_INVALID, "rejected: ", strerrordesc_np(err));
	else
		reply(rep, HC_REP_OK, NULL, NULL);
}

static void do_dump(const hc_shm_req_t *q, hc_shm_rep_t *rep)
{
	bool peak = q->arg == 1;
	if (q->arg != 0 && q->arg != 1) {
		reply(rep, HC_REP_BADREQ, "bad dump kind", NULL);
		return;
	}
	if (peak && !__atomic_load_n(&hc_prof.peak, __ATOMIC_RELAXED)) {
		reply(rep, HC_REP_FAILED, "no peak profile is kept: prof.peak is false", NULL);
		return;
	}
	/* name: the pid the caller knows us by, for the file's name (empty
	 * from a heapctl of before it, or of our PID namespace) */
	long name_pid = 0;
	char *end = NULL;
	if (q->name[0]) {
		name_pid = strtol(q->name, &end, 10);
		if (*end || name_pid <= 0 || name_pid > INT32_MAX || q->name[0] < '1' || q->name[0] > '9') {
			reply(rep, HC_REP_BADREQ, "bad pid for the dump's name", NULL);
			return;
		}
	}
	char path[HC_SHM_PATH_MAX];
	uint64_t size = 0;
	int err = hc_dump_ex(peak ? HC_DUMP_PEAK : HC_DUMP_MANUAL, q->text2[0] ? q->text2 : NULL,
	    q->text[0] ? q->text : NULL, (int)name_pid, path, sizeof path, &size);
	if (err) {
		reply(rep, HC_REP_FAILED, path, ": ");
		size_t n = strlen(rep->text);
		hc_shm_strlcpy(rep->text + n, strerrordesc_np(err), sizeof rep->text - n);
		rep->value = (uint64_t)err; /* heapctl stages the dump where this is EACCES */
		return;
	}
	reply(rep, HC_REP_OK, path, NULL);
	rep->value = size;
}

static void execute(const hc_shm_req_t *q, hc_shm_rep_t *rep)
{
	if (!hc_shm_strvalid(q->name, sizeof q->name) || !hc_shm_strvalid(q->text, sizeof q->text) ||
	    !hc_shm_strvalid(q->text2, sizeof q->text2)) {
		reply(rep, HC_REP_BADREQ, "malformed request: unterminated string", NULL);
		return;
	}
	switch (q->cmd) {
	case HC_CMD_PING: reply(rep, HC_REP_OK, NULL, NULL); return;
	case HC_CMD_SET: do_set(q, rep); return;
	case HC_CMD_DUMP: do_dump(q, rep); return;
	case HC_CMD_RESET:
		if (q->arg < -1 || q->arg > 62) {
			reply(rep, HC_REP_INVALID, "lg_sample must be from 0 to 62", NULL);
			return;
		}
		hc_prof_reset(q->arg);
		reply(rep, HC_REP_OK, NULL, NULL);
		return;
	case HC_CMD_STATS: hc_explain_stats(q, rep); return;
	case HC_CMD_PURGE: hc_explain_purge(rep); return;
	case HC_CMD_EJECT: {
		char why[256] = "";
		if (eject_hook == NULL) {
			reply(rep, HC_REP_FAILED,
			    "this process runs the preloaded library, not an injected "
			    "agent: it has no other malloc to go back to",
			    NULL);
			return;
		}
		if (!eject_hook(why, sizeof why)) {
			reply(rep, HC_REP_FAILED, why, NULL);
			return;
		}
		__atomic_store_n(&ejecting, true, __ATOMIC_RELEASE); /* the segment goes after this answer */
		reply(rep, HC_REP_OK, NULL, NULL);
		return;
	}
	}
	reply(rep, HC_REP_BADREQ, "unknown command", NULL);
}

/* A staged dump (heapctl dump -o or --fetch has us write it where heapctl
 * can read it, to copy out and remove) whose answer nobody collected:
 * heapctl stopped waiting (its --timeout) while we were writing it.  The
 * file is then ours to remove, when reclaim frees the slot after its lease.
 * Remembered here, in our own memory: what the segment says is anyone's
 * with write access to it.  pid: a fork child has the parent's copy of
 * this, and the parent's files are not its to remove. */
static struct {
	bool set;
	uint32_t gen;
	int pid;
	char path[HC_SHM_PATH_MAX];
} staged[HC_SHM_SLOTS];

static void staged_note(const hc_shm_slot_t *sl, const hc_shm_req_t *req, const hc_shm_rep_t *rep)
{
	size_t i = (size_t)(sl - hc_event_seg->box.slot);
	if (i >= HC_SHM_SLOTS)
		return;
	staged[i].set = req->cmd == HC_CMD_DUMP && rep->code == HC_REP_OK && hc_shm_staged_path(rep->text);
	if (!staged[i].set)
		return;
	staged[i].gen = __atomic_load_n(&sl->gen, __ATOMIC_RELAXED);
	staged[i].pid = getpid();
	memcpy(staged[i].path, rep->text, sizeof staged[i].path);
}

/* Slot i, answered in generation gen, was freed uncollected: remove its
 * staged dump, and the directory heapctl made for it in a chroot
 * (/.heapctl-fetch.X, cmd/dump.c), which holds nothing else. */
static void staged_drop(unsigned i, uint32_t gen)
{
	if (!staged[i].set || staged[i].gen != gen || staged[i].pid != getpid())
		return;
	staged[i].set = false;
	unlink(staged[i].path);
	char *slash = strrchr(staged[i].path, '/');
	if (slash != NULL && slash != staged[i].path) {
		*slash = 0;
		const char *dir = strrchr(staged[i].path, '/');
		if (dir != NULL && strncmp(dir + 1, "." HC_SHM_STAGE_BASE, sizeof HC_SHM_STAGE_BASE) == 0)
			rmdir(staged[i].path);
	}
}

static void serve(hc_shm_slot_t *sl)
{
	uint32_t expect = HC_SLOT_POSTED;
	if (!__atomic_compare_exchange_n(&sl->state, &expect, HC_SLOT_BUSY, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	static hc_shm_req_t req; /* control thread only */
	static hc_shm_rep_t rep;
	memcpy(&req, (const void *)&sl->req, sizeof req);
	memset(&rep, 0, sizeof rep);
	execute(&req, &rep);
	staged_note(sl, &req, &rep);
	HC_ASSERT(rep.code <= HC_REP_NOPROF && hc_shm_strvalid(rep.text, sizeof rep.text));
	if (req.cmd != HC_CMD_PING) /* status and doctor ask if it answers */
		commands++;
	mirror(false); /* status after the answer shows the change */
	memcpy(&sl->rep, &rep, sizeof rep);
	__atomic_store_n(&sl->stamp_ns, hc_shm_mono_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&sl->state, HC_SLOT_DONE, __ATOMIC_RELEASE);
	hc_shm_futex_wake(&sl->state, INT_MAX);
}

/* Slots a client claimed and never posted, or never collected, are freed
 * once this thread has seen the same {state, gen} for a whole lease by its
 * own clock (see hc_shm_slot_t: a client's stamp is not to be believed);
 * so is a slot whose state is garbage, at once. */
static uint64_t seen_word[HC_SHM_SLOTS] HC_FORK_DATA, seen_since[HC_SHM_SLOTS];

static void reclaim(uint64_t now)
{
	for (unsigned i = 0; i < HC_SHM_SLOTS; i++) {
		hc_shm_slot_t *sl = &hc_event_seg->box.slot[i];
		uint64_t w = hc_shm_slot_load(sl);
		uint32_t st = (uint32_t)w, gen = (uint32_t)(w >> 32);
		/* POSTED is served; BUSY is only ever set by this thread inside
		 * serve(), so one seen here is garbage */
		bool garbage = st > HC_SLOT_DONE || st == HC_SLOT_BUSY;
		if (!garbage && (st == HC_SLOT_FREE || st == HC_SLOT_POSTED))
			continue;
		if (!garbage && w != seen_word[i]) {
			seen_word[i] = w;
			seen_since[i] = now;
			continue;
		}
		if (garbage || now - seen_since[i] > HC_SHM_LEASE_NS) {
			if (hc_shm_slot_cas(sl, st, gen, HC_SLOT_FREE, gen)) {
				hc_shm_futex_wake(&sl->state, INT_MAX);
				if (st == HC_SLOT_DONE)
					staged_drop(i, gen);
			}
			seen_word[i] = 0;
		}
	}
}

/* In a fork child: wait out the grace period (a child that execs or exits
 * meanwhile leaves no segment), then publish the segment.  False if the
 * thread is to stop instead (a pause: it is started again after). */
static bool child_publish(void)
{
	for (;;) {
		if (__atomic_load_n(&ctl_stop, __ATOMIC_ACQUIRE))
			return false;
		uint64_t now = hc_shm_mono_ns(), due = child_forked_ns + (uint64_t)CHILD_GRACE_MS * 1000000u;
		if (now >= due)
			break;
		hc_shm_futex_wait(&ctl_stop, 0, due - now);
	}
	hc_shm_t *s = segment_create(child_parent);
	if (s == NULL)
		return false;
	child_parent = 0;
	__atomic_store_n(&hc_event_seg, s, __ATOMIC_RELEASE);
	return true;
}

/* A high-water mark the program's threads have not delivered (they do on
 * large and sampled allocations only).  This thread is never inside a
 * dump here, so the guard against one re-entering itself may be lifted. */
static void poll_highwater(void)
{
	hc_prof_busy = 0;
	hc_highwater_poll();
	hc_prof_busy = 1;
}

/* Watchers learn the process (or its agent) is gone, and the name is
 * freed: at exit, and after heapctl eject. */
static void segment_goodbye(hc_shm_t *s)
{
	hc_shm_event_t ev = { .type = HC_EV_EXIT };
	hc_event_publish(&ev);
	__atomic_store_n(&s->hdr.control, 0, __ATOMIC_RELEASE);
	unlink(seg_path);
}

/* After heapctl eject: watchers learn the agent is gone, the segment is
 * removed, and this thread ends on its own (detached, unless a pause is
 * waiting to join it).  A later inject makes both again. */
static void retire(void)
{
	hc_shm_t *s = hc_event_seg;
	segment_goodbye(s);
	__atomic_store_n(&hc_event_seg, NULL, __ATOMIC_RELEASE);
	/* only now: hc_control_begin takes a segment that is not ejecting */
	__atomic_store_n(&ejecting, false, __ATOMIC_RELEASE);
	seg_path[0] = 0;
	munmap(s, sizeof(hc_shm_t));
	for (;;) {
		if (__atomic_load_n(&pausing, __ATOMIC_ACQUIRE))
			return; /* hc_control_pause joins this thread */
		if (hc_mutex_trylock(&pause_lock) == 0) {
			if (!pausing) {
				ctl_running = false;
				pthread_detach(pthread_self());
			}
			hc_mutex_unlock(&pause_lock);
			return;
		}
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* The control thread's descriptor table of its own (see the top and
 * hc_fd_table_own).  In a fork child before its segment, the two
 * directories the fork handler opened in the program's table are moved
 * into it: closed there and opened again, if the child has not chrooted
 * since (then the thread goes on in the program's table with them, as
 * before). */
static void table_own(bool child)
{
	if (child && child_fds_program) {
		struct stat root;
		if (stat("/", &root) != 0 || root.st_dev != child_root_dev || root.st_ino != child_root_ino)
			return;
		child_fds_close();
		child_fds_program = false;
	}
	bool own = hc_fd_table_own();
	/* opened again, in whichever table the thread has (a thread that
	 * stopped before the segment took its own table's with it) */
	if (child && !child_fds_program) {
		child_fds_program = !own;
		child_procfd = child_reopen("/proc/self", child_procfd_dev, child_procfd_ino);
		child_dfd = child_reopen(HC_SHM_DIR, child_dfd_dev, child_dfd_ino);
	}
}

static void *control_main(void *arg)
{
	(void)arg;
	hc_prof_busy = 1; /* nothing this thread allocates is profiled */
	bool child = child_parent != 0;
	table_own(child);
	pthread_setname_np(pthread_self(), "heapctl-ctl");
	if (child && !child_publish()) { /* stopped, or no segment: the thread ends */
		if (hc_fd_own)           /* and its table, and what was open in it */
			child_procfd = child_dfd = -1;
		return NULL;
	}
	hc_shm_t *s = hc_event_seg;
	poll_highwater();
	mirror(true);
	if (!child) /* the first process of the program swept */
		hc_shm_clean_stale(false);
	uint64_t period = (uint64_t)hc_opt.control_refresh_ms * 1000000ull;
	uint64_t last_mirror = hc_shm_mono_ns();
	/* The slots are looked at only when the doorbell moved since the last
	 * look (a client rings it after posting, and a waiting client when it
	 * finds every slot taken): a read of a never-written page of the
	 * segment gives the process and /dev/shm a page of it, and the eight
	 * slots are a page each, 32 KiB of the 40 an idle process held.  A
	 * post made after the bell was read here rings it again, so the wait
	 * below returns at once and the next turn looks. */
	uint32_t looked = 0;
	bool rung = false; /* reclaim only once some client came */
	while (!__atomic_load_n(&ctl_stop, __ATOMIC_ACQUIRE)) {
		uint32_t bell = __atomic_load_n(&s->box.doorbell, __ATOMIC_ACQUIRE);
		bool served = false, moved = bell != looked;
		if (moved) {
			looked = bell;
			rung = true;
			for (unsigned i = 0; i < HC_SHM_SLOTS; i++) {
				if (__atomic_load_n(&s->box.slot[i].state, __ATOMIC_ACQUIRE) == HC_SLOT_POSTED) {
					serve(&s->box.slot[i]);
					served = true;
				}
			}
		}
		uint64_t now = hc_shm_mono_ns();
		if (ejecting)
			break;
		if (served || now - last_mirror >= period) {
			if (scan_hook != NULL)
				scan_hook(false);
			poll_highwater();
			hc_alloc_idle_decay();
			mirror(true);
			if (rung)
				reclaim(now);
			last_mirror = now;
		} else if (moved) {
			reclaim(now); /* a client that found every slot taken rang */
		}
		if (served)
			continue; /* more may have come while we worked */
		uint64_t wait = period - (now - last_mirror);
		hc_shm_futex_wait(&s->box.doorbell, bell, wait);
	}
	if (ejecting)
		retire();
	return NULL;
}

/* A stack of 256 KiB, which is plenty for what the thread does.  glibc
 * puts the program's static TLS at the top of every thread's stack and
 * refuses a stack too small for it with EINVAL: a program whose threads
 * hold a large __thread array (a per-thread buffer of a few MiB) would
 * have no control thread.  So on EINVAL the size doubles, up to 1 GiB of
 * address space, of which the thread touches what it uses. */
static int thread_create(void)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	int err = EINVAL;
	for (size_t size = 256 << 10; err == EINVAL && size <= (size_t)1 << 30; size *= 2) {
		pthread_attr_setstacksize(&attr, size);
		err = pthread_create(&ctl_thread, &attr, control_main, NULL);
	}
	pthread_attr_destroy(&attr);
	return err;
}

/* Start the control thread; false if pthread_create failed, which the
 * segment then says (hdr.control_err) and the allocations' poll makes up
 * for as far as it can. */
static bool thread_start(void)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the program's threads */
	int busy = hc_prof_busy;
	hc_prof_busy = 1; /* what glibc allocates here is not sampled */
	__atomic_store_n(&ctl_stop, 0, __ATOMIC_RELEASE);
	int err = thread_create();
	ctl_running = err == 0;
	hc_prof_busy = busy;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	bool first = thread_err == 0;
	thread_err = err;
	hc_shm_t *s = hc_event_seg;
	if (s != NULL) {
		__atomic_store_n(&s->hdr.control_err, err, __ATOMIC_RELAXED);
		__atomic_store_n(&s->hdr.control, err == 0, __ATOMIC_RELEASE);
	}
	bool was_pending = __atomic_exchange_n(&hc_control_poll_pending, err != 0, __ATOMIC_ACQ_REL);
	if (err) {
		if (!was_pending)                   /* each thread's next allocation polls; then */
			hc_heap_reset_countdowns(); /* the quantum keeps them at it */
		if (first)
			hc_say("cannot start the control thread: ", strerrordesc_np(err),
			    err == EAGAIN ? " (a thread limit: RLIMIT_NPROC, or the cgroup's pids.max)" : "",
			    "; heapctl commands are served while the program allocates", NULL);
	}
	return err == 0;
}

/* The segment and the control thread (lifecycle.c, at start-up). */
void hc_control_start(void)
{
	if (!hc_opt.control)
		return;
	hc_shm_t *s = segment_create(0);
	if (s == NULL)
		return;
	have_last = false;
	commands = 0;
	memset(seen_word, 0, sizeof seen_word);
	__atomic_store_n(&hc_event_seg, s, __ATOMIC_RELEASE);
	/* the settings are there from the start, also if no thread ever runs
	 * to mirror them (a seccomp filter that refuses it, a thread limit) */
	mirror(false);
	thread_start();
}

/* Stop the control thread and wait until it is gone; true if there was
 * one.  Commands posted meanwhile wait in their slots (clients time out as
 * for a busy target).  Must be followed by hc_control_resume. */
bool hc_control_pause(void)
{
	hc_mutex_lock(&pause_lock);
	if (!ctl_running)
		return false;
	__atomic_store_n(&pausing, true, __ATOMIC_RELEASE);
	__atomic_store_n(&ctl_stop, 1, __ATOMIC_RELEASE);
	hc_shm_futex_wake(&ctl_stop, INT_MAX);
	hc_shm_t *s = __atomic_load_n(&hc_event_seg, __ATOMIC_ACQUIRE);
	if (s != NULL) {
		__atomic_add_fetch(&s->box.doorbell, 1, __ATOMIC_RELEASE);
		hc_shm_futex_wake(&s->box.doorbell, INT_MAX);
	}
	pthread_join(ctl_thread, NULL);
	ctl_running = false;
	__atomic_store_n(&pausing, false, __ATOMIC_RELEASE);
	return hc_event_seg != NULL; /* not if it ended after an eject */
}

void hc_control_resume(bool was_running)
{
	if (was_running)
		thread_start();
	hc_mutex_unlock(&pause_lock);
}

void hc_inject_hooks(bool (*eject)(char *, size_t), unsigned (*scan)(bool))
{
	eject_hook = eject;
	scan_hook = scan;
}

/* heapctl inject: the segment and the thread, made again after an eject;
 * the profile counts from since.  False if there is no segment. */
bool hc_control_begin(uint64_t since)
{
	/* the thread of an eject just before may still be on its way out:
	 * its segment, answered but not yet removed, is not this injection's */
	for (int i = 0; i < 1000; i++) {
		hc_mutex_lock(&pause_lock);
		if ((hc_event_seg != NULL && !__atomic_load_n(&ejecting, __ATOMIC_ACQUIRE)) || !ctl_running)
			break;
		hc_mutex_unlock(&pause_lock);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		if (i == 999)
			return false;
	}
	counts_since = since;
	if (hc_event_seg == NULL && !ctl_running) {
		/* a new injection's counters start from 0 (its profile does, by
		 * hc_prof_reset): the segment is new, the agent's statics not */
		hc_dumps_restart();
		hc_prof_samples_restart();
		hc_event_forget_dump();
		hc_control_start();
	}
	bool ok = hc_event_seg != NULL;
	hc_mutex_unlock(&pause_lock);
	return ok;
}

/* fork: pause_lock is the agent's outermost lock (allocator/hc_lock.h;
 * events.c's ev_lock is an inner one). */
void hc_control_fork_prepare(void)
{
	hc_mutex_lock(&pause_lock);
	fork_pid = getpid();
	fork_ns = hc_shm_mono_ns();
}

void hc_control_fork_parent(void)
{
	hc_mutex_unlock(&pause_lock);
}

/* The child has the parent's mapping but not its thread: it starts its own
 * thread now, which makes the child's segment after the grace period (see
 * the top); the parent's segment stays the parent's.  Last of the fork
 * handlers' work: the allocator and the agent's locks are fresh. */
void hc_control_fork_child(void)
{
	hc_event_fork_child();
	hc_mutex_reinit(&pause_lock);
	ctl_running = false;
	hc_shm_t *old = hc_event_seg;
	/* a child forked before its parent, itself a fork child, published:
	 * the parent has (or is to have) a segment when it has a thread, its
	 * own or pending */
	if (old == NULL && child_parent == 0 && !hc_control_poll_pending)
		return;
	hc_event_seg = NULL;
	if (old != NULL)
		munmap(old, sizeof(hc_shm_t));
	seg_path[0] = 0;
	hc_event_fork_forget();
	have_last = false;
	commands = 0;
	memset(seen_word, 0, sizeof seen_word);
	child_parent = fork_pid;
	child_forked_ns = fork_ns;
	poll_last_ns = 0;
	/* the parent's, and a fork child's not yet used, where they were in
	 * the program's table: copies of ours to close (in the parent's
	 * control thread's own table they were not copied) */
	if (child_fds_program)
		child_fds_close();
	hc_event_maps_open(AT_FDCWD, "/proc/self/maps");
	/* before this child's code runs and can chroot: the thread moves
	 * them into its own table as it starts */
	struct stat root;
	child_root_dev = 0;
	child_root_ino = 0;
	if (stat("/", &root) == 0) {
		child_root_dev = root.st_dev;
		child_root_ino = root.st_ino;
	}
	child_fds_program = true;
	child_procfd = child_open("/proc/self", &child_procfd_dev, &child_procfd_ino);
	child_dfd = child_open(HC_SHM_DIR, &child_dfd_dev, &child_dfd_ino);
	thread_start();
}

/* From the profiler's countdown (hc_agent_event, no allocator lock held),
 * while hc_control_poll_pending: the process has no control thread.  At
 * most once per control_refresh_ms: make a fork child's segment once its
 * grace period is over, try the thread again, and else serve what clients
 * posted and mirror the counters from here.  A pause (unshare) in
 * progress, or another thread at it, leaves it to a later poll. */
void hc_control_poll(void)
{
	uint64_t now = hc_shm_mono_ns();
	uint64_t period = (uint64_t)hc_opt.control_refresh_ms * 1000000ull;
	if (now - __atomic_load_n(&poll_last_ns, __ATOMIC_RELAXED) < period || hc_mutex_trylock(&pause_lock) != 0)
		return;
	if (!hc_control_poll_pending || ctl_running || now - poll_last_ns < period) {
		hc_mutex_unlock(&pause_lock);
		return;
	}
	__atomic_store_n(&poll_last_ns, now, __ATOMIC_RELAXED);
	if (child_parent != 0 && now - child_forked_ns >= (uint64_t)CHILD_GRACE_MS * 1000000u) {
		hc_shm_t *s = segment_create(child_parent);
		if (s != NULL) {
			child_parent = 0;
			__atomic_store_n(&hc_event_seg, s, __ATOMIC_RELEASE);
		}
	}
	if (!thread_start() && hc_event_seg != NULL) {
		int busy = hc_prof_busy;
		hc_prof_busy = 1;
		hc_shm_t *s = hc_event_seg;
		for (unsigned i = 0; i < HC_SHM_SLOTS; i++)
			if (__atomic_load_n(&s->box.slot[i].state, __ATOMIC_ACQUIRE) == HC_SLOT_POSTED)
				serve(&s->box.slot[i]);
		reclaim(now);
		mirror(true);
		hc_prof_busy = busy;
	}
	hc_mutex_unlock(&pause_lock);
}

/* Last of the library's destructors (lifecycle.c): watchers learn the
 * process is going, and the name is freed. */
void hc_control_exit(void)
{
	hc_shm_t *s = hc_event_seg;
	if (s == NULL || seg_pid != getpid())
		return;
	segment_goodbye(s);
}
