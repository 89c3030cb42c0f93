/*
 * heapctl/serve/targets.c - the daemon's process table: every process that
 * runs the library (as `heapctl list` finds them, every half second), with
 * its unit, container and user, its last hour of counters for the page's
 * plot, and its events read from its ring (into the event log, dumps into
 * the archive).  Everything else reads the table through the functions
 * here, under its one lock; the target a request names is decided here too.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "serve.h"

#define MAX_TARGETS 4096

typedef serve_target_t target_t;

static struct {
	pthread_mutex_t lock; /* targets, ntargets                          */
	target_t *targets;
	size_t ntargets;
} S = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The unit and container of pid from its cgroup path (cgroup v2 "0::/..."
 * or the systemd hierarchy of v1). */
static void cgroup_labels(int pid, char *unit, size_t ulen, char *cont, size_t clen)
{
	char path[64], buf[4096];
	unit[0] = cont[0] = 0;
	snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
	if (hc_shm_read_file(path, buf, sizeof buf) <= 0)
		return;
	char *line = strstr(buf, "0::/");
	if (line == NULL)
		line = strstr(buf, "name=systemd:/");
	if (line == NULL)
		return;
	line = strchr(line, '/');
	char *end = strchr(line, '\n');
	if (end)
		*end = 0;
	for (char *c = strtok(line, "/"); c; c = strtok(NULL, "/")) {
		size_t n = strlen(c);
		const char *id = NULL;
		if (strncmp(c, "machine-", 8) == 0 && n > 14 && strcmp(c + n - 6, ".scope") == 0) {
			c[n - 6] = 0;
			id = c + 8;
		} else if ((strncmp(c, "docker-", 7) == 0 || strncmp(c, "libpod-", 7) == 0) && n > 19) {
			c[19] = 0; /* the short id: 12 hex digits */
			id = c + 7;
		}
		if (id) {
			snprintf(cont, clen, "%s", id);
			unit[0] = 0; /* a unit inside the container is its own */
			continue;
		}
		if ((n > 8 && strcmp(c + n - 8, ".service") == 0) || (n > 6 && strcmp(c + n - 6, ".scope") == 0))
			snprintf(unit, ulen, "%s", c);
	}
}

target_t *targets_find_locked(int pid)
{
	for (size_t i = 0; i < S.ntargets; i++)
		if (S.targets[i].t.pid == pid)
			return &S.targets[i];
	return NULL;
}

bool targets_init(void)
{
	S.targets = calloc(MAX_TARGETS, sizeof *S.targets);
	return S.targets != NULL;
}

target_t *targets_lock(size_t *n)
{
	pthread_mutex_lock(&S.lock);
	*n = S.ntargets;
	return S.targets;
}

void targets_unlock(void)
{
	pthread_mutex_unlock(&S.lock);
}

int *targets_pids(long pid, size_t *n)
{
	*n = 0;
	pthread_mutex_lock(&S.lock);
	int *pids = calloc(S.ntargets ? S.ntargets : 1, sizeof *pids);
	for (size_t k = 0; pids && k < S.ntargets; k++)
		if (pid <= 0 || S.targets[k].t.pid == pid)
			pids[(*n)++] = S.targets[k].t.pid;
	pthread_mutex_unlock(&S.lock);
	return pids;
}

unsigned targets_uid(int pid)
{
	pthread_mutex_lock(&S.lock);
	target_t *x = targets_find_locked(pid);
	unsigned uid = x ? x->t.uid : 65534u;
	pthread_mutex_unlock(&S.lock);
	return uid;
}

static void drop_locked(size_t i)
{
	hc_shm_close(&S.targets[i].t);
	free(S.targets[i].hist);
	S.targets[i] = S.targets[--S.ntargets];
}

/* A point of the page's plot every HIST_STEP_S seconds. */
static void hist_add_locked(target_t *x, int64_t now)
{
	serve_hist_t *h = x->hist;
	hc_shm_state_t st;
	if (h == NULL || (h->n && now - h->last < HIST_STEP_S) || !hc_shm_state_read(&x->t.seg->state, &st))
		return;
	h->p[h->head].t = now;
	h->p[h->head].allocated = st.allocated;
	h->p[h->head].resident = st.resident;
	h->p[h->head].highwater = st.highwater;
	h->head = (h->head + 1) % HIST_N;
	if (h->n < HIST_N)
		h->n++;
	h->last = now;
}

/* Dumps announced in this round, archived once the lock is dropped. */
typedef struct pending_s {
	target_t x;
	hc_shm_event_t ev;
	char prefix[HC_SHM_PATH_MAX]; /* its prof.prefix: where dumps may be */
} pending_t;

/* Read a target's new events: counted for the metrics, dumps kept in p
 * (up to max) for the archive.  Returns how many were kept. */
static size_t read_events_locked(target_t *x, pending_t *p, size_t max)
{
	const hc_shm_ring_t *r = &x->t.seg->ring;
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	size_t kept = 0;
	if (head - x->next_ev > HC_SHM_EVENTS) /* more than the ring holds */
		x->next_ev = head - HC_SHM_EVENTS;
	for (; x->next_ev < head; x->next_ev++) {
		hc_shm_event_t e;
		int got = hc_shm_event_read(r, x->next_ev, &e);
		if (got == 0)
			break;
		if (got < 0)
			continue;
		events_add(x, &e);
		if (e.type == HC_EV_GDUMP)
			x->gdumps++;
		else if (e.type == HC_EV_DUMP_FAILED)
			x->dumps_failed++;
		else if (e.type == HC_EV_DUMP && kept < max && e.path[0] == '/' &&
		    hc_shm_strvalid(e.path, sizeof e.path)) {
			hc_shm_state_t st;
			p[kept].x = *x;
			p[kept].ev = e;
			p[kept].prefix[0] = 0; /* none: not archived */
			if (hc_shm_state_read(&x->t.seg->state, &st) && hc_shm_strvalid(st.prefix, sizeof st.prefix))
				memcpy(p[kept].prefix, st.prefix, sizeof st.prefix);
			kept++;
		}
	}
	return kept;
}

/* Processes that have a segment file but could not be opened (another
 * user's, stale, not finished): tried again after NOPE_S seconds, not at
 * every round. */
#define NOPE_S 2
static struct {
	int pid;
	uint64_t start;
	time_t until;
} nope[256];

static bool nope_skip(int pid, time_t now)
{
	bool ended;
	uint64_t st = hc_shm_proc_start_time(pid, &ended);
	for (unsigned i = 0; i < sizeof nope / sizeof nope[0]; i++)
		if (nope[i].pid == pid && nope[i].start == st)
			return now < nope[i].until;
	return false;
}

static void nope_add(int pid, time_t now)
{
	static unsigned next;
	bool ended;
	unsigned i = next++ % (sizeof nope / sizeof nope[0]);
	nope[i].pid = pid;
	nope[i].start = hc_shm_proc_start_time(pid, &ended);
	nope[i].until = now + NOPE_S;
}

/* One round: open new processes (without the lock: a segment that is not
 * ready makes hc_shm_open wait), read every target's events (also those of
 * one that has just exited: its final dump), drop the gone, archive. */
void targets_scan(void)
{
	/* processes there when the daemon started are read from now on; one
	 * that started since, from its start (what the ring still holds): the
	 * dumps it wrote before a scan found it are archived too.  Told apart
	 * by start time, not by the round that finds them: with more new
	 * processes than one round opens (NEW), a process started after the
	 * daemon could be found in a later round and lose its first dumps. */
	static uint64_t self_start;
	if (self_start == 0) {
		bool ended;
		self_start = hc_shm_proc_start_time(getpid(), &ended);
	}
	static int pids[MAX_TARGETS];
	enum { PENDING = 256, NEW = 64 };
	static pending_t pend[PENDING];
	static target_t fresh[NEW];
	size_t npend = 0, nfresh = 0;
	int n = hc_shm_scan(pids, MAX_TARGETS);
	time_t now = time(NULL);
	for (int i = 0; i < n && nfresh < NEW; i++) {
		if (pids[i] == getpid())
			continue;
		pthread_mutex_lock(&S.lock);
		bool known = targets_find_locked(pids[i]) != NULL;
		pthread_mutex_unlock(&S.lock);
		if (known || nope_skip(pids[i], now))
			continue;
		target_t *nt = &fresh[nfresh];
		memset(nt, 0, sizeof *nt);
		char err[512];
		if (hc_shm_open(pids[i], &nt->t, err, sizeof err) != 0) {
			nope_add(pids[i], now); /* gone, stale, another user's, not a segment */
			continue;
		}
		out_cmdline(nt->t.pid, nt->t.seg, nt->command, sizeof nt->command);
		cgroup_labels(nt->t.pid, nt->unit, sizeof nt->unit, nt->container, sizeof nt->container);
		serve_user(nt->t.uid, nt->user, sizeof nt->user);
		if (nt->container[0] == 0 && nt->t.nspid != nt->t.pid)
			snprintf(nt->container, sizeof nt->container, "pid %d in its namespace", nt->t.nspid);
		nt->same_view = cli_same_view(&nt->t);
		nt->owner = access_owner(nt->t.pid);
		nt->hist = calloc(1, sizeof *nt->hist); /* no plot if NULL */
		nt->next_ev =
		    nt->t.start_time >= self_start ? 0 : __atomic_load_n(&nt->t.seg->ring.head, __ATOMIC_ACQUIRE);
		nfresh++;
	}
	pthread_mutex_lock(&S.lock);
	for (size_t i = 0; i < S.ntargets; i++)
		S.targets[i].seen = false;
	for (int i = 0; i < n; i++) {
		target_t *x = targets_find_locked(pids[i]);
		if (x)
			x->seen = true;
	}
	for (size_t i = 0; i < nfresh; i++) {
		if (S.ntargets == MAX_TARGETS) {
			hc_shm_close(&fresh[i].t);
			free(fresh[i].hist);
			continue;
		}
		fresh[i].seen = true;
		S.targets[S.ntargets++] = fresh[i];
		events_target(&fresh[i], "found");
	}
	for (size_t i = 0; i < S.ntargets;) {
		target_t *x = &S.targets[i];
		/* who may see it, for its events and archived dumps: as it is
		 * now (a setuid or PR_SET_DUMPABLE changes it), and as it was
		 * for those of a process that has gone */
		uid_t owner = access_owner(x->t.pid);
		if (owner != ACCESS_NOBODY || hc_shm_alive(&x->t))
			x->owner = owner;
		npend += read_events_locked(x, pend + npend, PENDING - npend);
		if (!x->seen || !hc_shm_alive(&x->t)) {
			events_target(x, "gone");
			drop_locked(i);
			continue;
		}
		hist_add_locked(x, now);
		i++;
	}
	pthread_mutex_unlock(&S.lock);
	for (size_t i = 0; i < npend; i++)
		arch_dump(&pend[i].x, &pend[i].ev, pend[i].prefix);
}

serve_row_t *serve_rows(size_t *n)
{
	pthread_mutex_lock(&S.lock);
	serve_row_t *r = S.ntargets ? calloc(S.ntargets, sizeof *r) : NULL;
	*n = 0;
	for (size_t i = 0; r && i < S.ntargets; i++) {
		const target_t *x = &S.targets[i];
		serve_row_t *w = &r[*n];
		if (!hc_shm_state_read(&x->t.seg->state, &w->st))
			continue;
		w->pid = x->t.pid;
		snprintf(w->command, sizeof w->command, "%s", x->command);
		snprintf(w->unit, sizeof w->unit, "%s", x->unit);
		snprintf(w->container, sizeof w->container, "%s", x->container);
		snprintf(w->user, sizeof w->user, "%s", x->user);
		w->uid = x->t.uid;
		w->owner = x->owner;
		(*n)++;
	}
	pthread_mutex_unlock(&S.lock);
	return r;
}

/* The pid a profile request is for: ?pid=N, or the only target; one the
 * requester may see. */
int targets_request_pid(struct MHD_Connection *c, serve_peer_t *peer, unsigned *status, char *why, size_t len)
{
	long pid = query_num(c, "pid", INT_MAX);
	pthread_mutex_lock(&S.lock);
	size_t n = S.ntargets;
	int only = n == 1 ? S.targets[0].t.pid : 0;
	bool known = pid > 0 && targets_find_locked((int)pid) != NULL;
	pthread_mutex_unlock(&S.lock);
	*status = MHD_HTTP_BAD_REQUEST;
	if (pid == -2 || pid == 0) {
		snprintf(why, len, "pid must be a process id");
		return -1;
	}
	if (pid > 0 && !known) {
		*status = MHD_HTTP_NOT_FOUND;
		snprintf(why, len, "process %ld is not running libheapctl.so (see /targets)", pid);
		return -1;
	}
	if (pid < 0 && n == 1)
		pid = only;
	if (pid > 0 && !access_may(peer, (int)pid, why, len)) {
		*status = MHD_HTTP_FORBIDDEN;
		return -1;
	}
	if (pid > 0)
		return (int)pid;
	*status = n ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_NOT_FOUND;
	snprintf(why, len,
	    n ? "%zu processes run libheapctl.so: say which with ?pid=N (see /targets)"
	      : "no process runs libheapctl.so",
	    n);
	return -1;
}

/* "PROGRAM (pid N)": a live profile's name for people */
void targets_title(int pid, char *out, size_t len)
{
	char prog[256] = "process";
	pthread_mutex_lock(&S.lock);
	const target_t *x = targets_find_locked(pid);
	if (x)
		serve_program(x->command, prog, sizeof prog);
	pthread_mutex_unlock(&S.lock);
	snprintf(out, len, "%s (pid %d)", prog, pid);
}
