/*
 * heapctl/serve/serve.c - `heapctl serve`: the control daemon.  It finds
 * every process that runs the library (as `heapctl list` does, every
 * half second) and serves, over HTTP (libmicrohttpd):
 *
 *   /metrics               the segments' counters for every target, in the
 *                          Prometheus text format or OpenMetrics (by Accept)
 *   /targets               the same as JSON
 *   /sd                    Prometheus's HTTP service discovery (fleet.c)
 *   /debug/pprof/heap      a profile taken now, symbolized, as gzipped
 *   /debug/pprof/allocs    profile.proto (Go's net/http/pprof conventions:
 *                          ?pid=N, ?seconds=S for a delta, ?debug=1 text)
 *
 * A profile is `heapctl dump PID -o FILE` and `heapctl report FILE -p PID`
 * run as children of the daemon: the target writes the dump on its control
 * thread (it is never stopped), and a symbolizer that fails or runs out of
 * memory takes down one request, not the daemon.
 *
 * Built as libheapctl-serve.so, which heapctl loads for `serve` alone (the
 * other commands need no HTTP library).  Nothing here runs in a target.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cmd/cmd.h"
#include "diagnose/proc.h"
#include "cli/json.h"
#include "serve.h"

#define POLL_MS 500
#define MAX_TARGETS 4096
#define MAX_SECONDS 600          /* ?seconds= at most, as a delta          */

typedef serve_target_t target_t;

static struct {
	pthread_mutex_t lock;      /* targets, ntargets                          */
	target_t *targets;
	size_t ntargets;
	char token[256];           /* "" when none is needed                     */
	bool open_reads;           /* loopback: GETs need no token (POSTs do)    */
	bool check_host;           /* loopback TCP: the Host must be loopback    */
	bool unix_socket;          /* no browser reaches it: control by the peer */
	char exe[PATH_MAX];        /* this heapctl, for dump and report          */
	char work[PATH_MAX];       /* private directory for profiles in flight   */
	char symcache[PATH_MAX];   /* report --symcache for every report, or ""  */
	bool own_symcache;         /* symcache is in work: removed at exit       */
	uint64_t timeout_ns;       /* for the target's answers                   */
	unsigned parts_every_ms;   /* --parts-every: memory parts for the page  */
	unsigned requests;         /* for unique work file names                 */
} S = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- the event log (/events) -------------------------------------------- */

/* The last EVLOG events of every target, as the lines `heapctl watch
 * --json` prints, numbered: a stream reader keeps its own position. */
#define EVLOG 1024
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *line[EVLOG];
	uid_t owner[EVLOG];        /* its process's access_owner: who reads it   */
	int pid[EVLOG];            /* its process, for the process's page        */
	uint64_t head;             /* lines ever added                           */
	bool stopping;
} E = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

/* Add a line (malloc'd, ending in a newline; taken over) about process
 * pid of owner's. */
static void evlog_add(char *line, int pid, uid_t owner)
{
	if (line == NULL)
		return;
	pthread_mutex_lock(&E.lock);
	free(E.line[E.head % EVLOG]);
	E.line[E.head % EVLOG] = line;
	E.owner[E.head % EVLOG] = owner;
	E.pid[E.head % EVLOG] = pid;
	E.head++;
	pthread_cond_broadcast(&E.cond);
	pthread_mutex_unlock(&E.lock);
}

static void evlog_event(const target_t *x, const hc_shm_event_t *e)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return;
	cli_event_json(f, &x->t, x->same_view, e);
	if (fclose(f) != 0) {
		free(buf);
		return;
	}
	/* the daemon's own dumps (a profile someone asked for) are in its
	 * work directory, which no answer names */
	char *line = malloc(len + 64);
	if (line)
		serve_scrub(buf, "(a profile this daemon took)", line, len + 64);
	free(buf);
	evlog_add(line, x->t.pid, x->owner);
}

/* found and gone, which no ring has: the daemon's own */
static void evlog_target(const target_t *x, const char *type)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return;
	json_t j;
	json_begin(&j, f, JSON_LINE);
	json_obj(&j, NULL);
	json_str(&j, "type", type);
	json_i64(&j, "pid", x->t.pid);
	if (strcmp(type, "found") == 0)
		json_str(&j, "command", x->command);
	json_end(&j);
	if (fclose(f) == 0)
		evlog_add(buf, x->t.pid, x->owner);
	else
		free(buf);
}

/* ---- finding targets ----------------------------------------------------- */

/* The unit and container of pid from its cgroup path (cgroup v2 "0::/..."
 * or the systemd hierarchy of v1). */
static void cgroup_labels(int pid, char *unit, size_t ulen, char *cont, size_t clen)
{
	char path[64], buf[4096];
	unit[0] = cont[0] = 0;
	snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
	if (cli_read_file(path, buf, sizeof buf) <= 0)
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
			c[19] = 0;         /* the short id: 12 hex digits */
			id = c + 7;
		}
		if (id) {
			snprintf(cont, clen, "%s", id);
			unit[0] = 0;       /* a unit inside the container is its own */
			continue;
		}
		if ((n > 8 && strcmp(c + n - 8, ".service") == 0) || (n > 6 && strcmp(c + n - 6, ".scope") == 0))
			snprintf(unit, ulen, "%s", c);
	}
}

static target_t *find_locked(int pid)
{
	for (size_t i = 0; i < S.ntargets; i++)
		if (S.targets[i].t.pid == pid)
			return &S.targets[i];
	return NULL;
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
	char prefix[HC_SHM_PATH_MAX];   /* its prof.prefix: where dumps may be */
} pending_t;

/* Read a target's new events: counted for the metrics, dumps kept in p
 * (up to max) for the archive.  Returns how many were kept. */
static size_t read_events_locked(target_t *x, pending_t *p, size_t max)
{
	const hc_shm_ring_t *r = &x->t.seg->ring;
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	size_t kept = 0;
	if (head - x->next_ev > HC_SHM_EVENTS)       /* more than the ring holds */
		x->next_ev = head - HC_SHM_EVENTS;
	for (; x->next_ev < head; x->next_ev++) {
		hc_shm_event_t e;
		int got = hc_shm_event_read(r, x->next_ev, &e);
		if (got == 0)
			break;
		if (got < 0)
			continue;
		evlog_event(x, &e);
		if (e.type == HC_EV_GDUMP)
			x->gdumps++;
		else if (e.type == HC_EV_DUMP_FAILED)
			x->dumps_failed++;
		else if (e.type == HC_EV_DUMP && kept < max && e.path[0] == '/' &&
		    hc_shm_strvalid(e.path, sizeof e.path)) {
			hc_shm_state_t st;
			p[kept].x = *x;
			p[kept].ev = e;
			p[kept].prefix[0] = 0;     /* none: not archived */
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
static struct { int pid; uint64_t start; time_t until; } nope[256];

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
static void scan_once(void)
{
	/* processes there when the daemon starts are read from now on; one
	 * found later started since, and its events from its start are read
	 * (what the ring still holds): the dumps it wrote before the next scan
	 * found it are archived too */
	static bool started;
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
		bool known = find_locked(pids[i]) != NULL;
		pthread_mutex_unlock(&S.lock);
		if (known || nope_skip(pids[i], now))
			continue;
		target_t *nt = &fresh[nfresh];
		memset(nt, 0, sizeof *nt);
		char err[512];
		if (hc_shm_open(pids[i], &nt->t, err, sizeof err) != 0) {
			nope_add(pids[i], now);   /* gone, stale, another user's, not a segment */
			continue;
		}
		out_cmdline(nt->t.pid, nt->t.seg, nt->command, sizeof nt->command);
		cgroup_labels(nt->t.pid, nt->unit, sizeof nt->unit, nt->container, sizeof nt->container);
		fleet_user(nt->t.uid, nt->user, sizeof nt->user);
		if (nt->container[0] == 0 && nt->t.nspid != nt->t.pid)
			snprintf(nt->container, sizeof nt->container, "pid %d in its namespace", nt->t.nspid);
		nt->same_view = cli_same_view(&nt->t);
		nt->owner = access_owner(nt->t.pid);
		nt->hist = calloc(1, sizeof *nt->hist);     /* no plot if NULL */
		nt->next_ev = started ? 0 : __atomic_load_n(&nt->t.seg->ring.head, __ATOMIC_ACQUIRE);
		nfresh++;
	}
	pthread_mutex_lock(&S.lock);
	for (size_t i = 0; i < S.ntargets; i++)
		S.targets[i].seen = false;
	for (int i = 0; i < n; i++) {
		target_t *x = find_locked(pids[i]);
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
		evlog_target(&fresh[i], "found");
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
			evlog_target(x, "gone");
			drop_locked(i);
			continue;
		}
		hist_add_locked(x, now);
		i++;
	}
	pthread_mutex_unlock(&S.lock);
	for (size_t i = 0; i < npend; i++)
		arch_dump(&pend[i].x, &pend[i].ev, pend[i].prefix);
	if (nfresh < NEW)          /* every process there at start is in */
		started = true;
}

/* ---- the symbol cache ---------------------------------------------------------
 * Every report the daemon runs is given --symcache DIR: a module's frames
 * are kept there by build id, and the next scrape of any process that maps
 * it reads no symbol table or debug file of it (heapctl/symbolize/symcache.c).
 * Once a minute the directory is held under SYMCACHE_MAX, the files least
 * recently written going first (a file is written when it gains addresses). */
#define SYMCACHE_MAX ((uint64_t)256 << 20)

typedef struct { char name[200]; uint64_t bytes; struct timespec mtime; } cfile_t;

static int cfile_older(const void *a, const void *b)
{
	const cfile_t *x = a, *y = b;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : x->mtime.tv_nsec > y->mtime.tv_nsec;
}

static void symcache_trim(uint64_t max)
{
	DIR *d = S.symcache[0] ? opendir(S.symcache) : NULL;
	if (d == NULL)
		return;
	cfile_t *f = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		/* a half-written file of a report that was killed (at exit,
		 * max 0, every one: no report runs any more) */
		if (serve_tmp_file(dirfd(d), e->d_name, max == 0 ? 0 : 600))
			continue;
		struct stat st;
		size_t len = strlen(e->d_name);
		if (len < 5 || len >= sizeof f->name || strcmp(e->d_name + len - 4, ".sym") != 0 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cfile_t *g = realloc(f, (cap = cap ? cap * 2 : 64) * sizeof *f);
			if (g == NULL)
				break;
			f = g;
		}
		memcpy(f[n].name, e->d_name, len + 1);
		f[n].bytes = (uint64_t)st.st_size;
		f[n].mtime = st.st_mtim;
		total += f[n++].bytes;
	}
	if (total > max) {
		qsort(f, n, sizeof *f, cfile_older);
		for (size_t i = 0; i < n && total > max; i++)
			if (unlinkat(dirfd(d), f[i].name, 0) == 0)
				total -= f[i].bytes;
	}
	free(f);
	closedir(d);
}

static void mem_sample_all(void);

static void *poller(void *arg)
{
	(void)arg;
	uint64_t parts_last = hc_shm_mono_ns();
	for (unsigned round = 1;; round++) {
		/* where each process's memory goes, for its page's stacked plot:
		 * a point a minute, measured without the targets' lock */
		uint64_t now = hc_shm_mono_ns();
		if (round == 2 || now - parts_last >= (uint64_t)S.parts_every_ms * 1000000u) {
			mem_sample_all();
			parts_last = now;
		}
		/* as heapctl list: segments of processes, and of containers'
		 * PID namespaces, that are gone; once a minute, from the start */
		if (round % (60000 / POLL_MS) == 1)
			hc_shm_clean_stale(true);
		scan_once();
		lim_sweep();
		if (round % (60000 / POLL_MS) == 0)
			symcache_trim(SYMCACHE_MAX);
		struct timespec ts = { 0, POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---- responses ----------------------------------------------------------- */

static enum MHD_Result respond_buf(struct MHD_Connection *c, unsigned status, const char *type,
    const void *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	/* go tool pprof shows an error's text only with this header (what
	 * net/http/pprof's serveError sets), else just the status */
	if (status >= 400)
		MHD_add_response_header(r, "X-Go-Pprof", "1");
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

/* An error: its status and one line of text. */
static enum MHD_Result respond_err(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result respond_err(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof msg - 2)
		n = (int)sizeof msg - 2;
	msg[n++] = '\n';
	msg[n] = 0;
	return respond_buf(c, status, "text/plain; charset=utf-8", msg, (size_t)n);
}

/* The HTTP status for a failed `heapctl` child's exit code. */
static unsigned child_status(int code)
{
	switch (code) {
	case HC_EXIT_USAGE: return MHD_HTTP_BAD_REQUEST;
	case HC_EXIT_NOPROC:
	case HC_EXIT_NOLIB: return MHD_HTTP_NOT_FOUND;
	case HC_EXIT_PERM: return MHD_HTTP_FORBIDDEN;
	case HC_EXIT_TIMEOUT: return MHD_HTTP_GATEWAY_TIMEOUT;
	default: return MHD_HTTP_INTERNAL_SERVER_ERROR;
	}
}

void serve_scrub(const char *s, const char *what, char *out, size_t len)
{
	const char *dirs[3] = { arch_enabled() ? arch_dir() : "", S.symcache, S.work };
	size_t o = 0;
	while (*s && o + 1 < len) {
		size_t dl = 0;
		int k = -1;
		for (int i = 0; i < 3 && k < 0; i++)
			if ((dl = strlen(dirs[i])) > 0 && strncmp(s, dirs[i], dl) == 0 && (s[dl] == 0 || s[dl] == '/' ||
			    strchr(SCRUB_END, s[dl])))
				k = i;
		if (k < 0) {
			out[o++] = *s++;
			continue;
		}
		/* the path ends where a message goes on; the daemon's own names
		 * (req.N.XXXXXX, a.heap, an archived GROUP/NAME) have none of these */
		size_t end = dl + strcspn(s + dl, SCRUB_END);
		char rel[600];
		const char *name = what;
		if (k == 0 && end > dl + 1) {
			snprintf(rel, sizeof rel, "%.*s", (int)(end - dl - 1), s + dl + 1);
			name = rel;
		} else if (k == 0)
			name = "the archive";
		else if (k == 1)
			name = "the symbol cache";
		int n = snprintf(out + o, len - o, "%s", name);
		o = n < 0 ? o : (size_t)n >= len - o ? len - 1 : o + (size_t)n;
		s += end;
	}
	out[o] = 0;
}

/* A failed `heapctl` child's answer: its status, and its message (err)
 * in the requester's terms (serve_scrub with what), or fallback. */
static enum MHD_Result respond_child(struct MHD_Connection *c, int rc, const char *err, const char *what,
    const char *fallback)
{
	char msg[1024];
	serve_scrub(err[0] ? err : fallback, what, msg, sizeof msg);
	return respond_err(c, child_status(rc), "%s", msg);
}

/* Respond with what a memstream built (and free it): buf and len are the
 * ones given to open_memstream, set when f is closed. */
static enum MHD_Result respond_stream(struct MHD_Connection *c, const char *type, FILE *f, char **buf,
    size_t *len)
{
	if (fclose(f) != 0 || *buf == NULL) {
		free(*buf);
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	}
	enum MHD_Result ok = respond_buf(c, MHD_HTTP_OK, type, *buf, *len);
	free(*buf);
	return ok;
}

/* ---- /metrics -------------------------------------------------------------- */

/* A label value: valid UTF-8 (out_safe's rendering of anything else),
 * with \ " and newlines escaped. */
static void put_label(FILE *f, const char *name, const char *v, bool *first)
{
	if (v == NULL || *v == 0)
		return;
	char safe[1024];
	v = out_safe(v, safe, sizeof safe);
	fprintf(f, "%s%s=\"", *first ? "" : ",", name);
	*first = false;
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
	fputc('"', f);
}

typedef struct metric_s {
	const char *name;          /* without _total                            */
	bool counter;
	const char *unit;          /* OpenMetrics UNIT, or NULL                  */
	const char *help;
} metric_t;

static const metric_t metrics[] = {
	{ "heapctl_allocated_bytes", false, "bytes", "Bytes in allocated objects (stats.allocated)." },
	{ "heapctl_active_bytes", false, "bytes", "Bytes in pages holding objects (stats.active)." },
	{ "heapctl_resident_bytes", false, "bytes", "Allocator bytes resident in memory (stats.resident)." },
	{ "heapctl_mapped_bytes", false, "bytes", "Bytes the allocator has mapped (stats.mapped)." },
	{ "heapctl_metadata_bytes", false, "bytes", "Allocator and profiler metadata (stats.metadata)." },
	{ "heapctl_retained_bytes", false, "bytes", "Address space kept but given back (stats.retained)." },
	{ "heapctl_highwater_bytes", false, "bytes", "Highest stats.mapped so far (the high-water mark)." },
	{ "heapctl_threads", false, NULL, "Thread heaps in use." },
	{ "heapctl_prof_active", false, NULL, "1 while sampling is on (prof.active)." },
	{ "heapctl_sample_period_bytes", false, "bytes", "Mean bytes between samples (2^prof.lg_sample)." },
	{ "heapctl_samples", true, NULL, "Sampled allocations." },
	{ "heapctl_dumps", true, NULL, "Heap profiles written." },
	{ "heapctl_commands", true, NULL, "Control commands executed." },
	{ "heapctl_highwater_events", true, NULL, "High-water (gdump) events seen by this daemon." },
	{ "heapctl_dump_failures", true, NULL, "Failed dumps seen by this daemon." },
};
#define NMETRICS (sizeof metrics / sizeof metrics[0])

static double metric_value(unsigned i, const target_t *x, const hc_shm_state_t *st)
{
	switch (i) {
	case 0: return (double)st->allocated;
	case 1: return (double)st->active_bytes;
	case 2: return (double)st->resident;
	case 3: return (double)st->mapped;
	case 4: return (double)st->metadata;
	case 5: return (double)st->retained;
	case 6: return (double)st->highwater;
	case 7: return (double)st->threads;
	case 8: return st->active ? 1 : 0;
	case 9: return st->lg_sample < 63 ? (double)((uint64_t)1 << st->lg_sample) : 0;
	case 10: return (double)st->samples;
	case 11: return (double)st->dumps;
	case 12: return (double)st->commands;
	case 13: return (double)x->gdumps;
	default: return (double)x->dumps_failed;
	}
}

/* ---- where each process's resident memory goes (heapctl explain) ---- */

/* Two families: heapctl_rss_part_bytes, whose parts add up to the
 * process's resident set (within explain's 2%), and heapctl_heap_part_bytes,
 * the heap's part split by the allocator's count.  Each process's parts are
 * measured at most every MEM_TTL_NS (smaps is read, and the process asked
 * for its statistics with a short timeout), outside the targets' lock. */
#define MEM_TTL_NS (10ull * 1000000000ull)
#define MEM_TIMEOUT_NS (200ull * 1000000ull)
static const char *const rss_parts[] = { "heap", "anonymous", "stacks", "files", "shared", "kernel" };
static const char *const heap_parts[] = { "live_attributed", "live_other", "sampling", "fragmentation", "free",
	"metadata" };

typedef struct mem_s {
	int pid;
	uint64_t at_ns;
	bool ok;
	cli_explain_t x;
} mem_t;
static struct {
	pthread_mutex_t lock;
	mem_t *v;
	size_t n, cap;
} M = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t mem_value(const cli_explain_t *x, bool heap, unsigned i)
{
	if (heap) {
		const uint64_t v[] = { x->live_attributed, x->live_other, x->sampling, x->fragmentation, x->free,
			x->metadata };
		return v[i];
	}
	const uint64_t v[] = { x->heap, x->anonymous, x->stacks, x->files, x->shared, x->kernel };
	return v[i];
}

/* The parts of each of pids[0 .. n), into out (ok false: not measured) */
static void mem_measure(const int *pids, size_t n, mem_t *out)
{
	uint64_t now = hc_shm_mono_ns();
	for (size_t i = 0; i < n; i++) {
		out[i].pid = pids[i];
		out[i].ok = false;
		pthread_mutex_lock(&M.lock);
		for (size_t k = 0; k < M.n; k++)
			if (M.v[k].pid == pids[i] && now - M.v[k].at_ns < MEM_TTL_NS) {
				out[i] = M.v[k];
				break;
			}
		pthread_mutex_unlock(&M.lock);
		if (out[i].ok)
			continue;
		char why[512];
		out[i].ok = cli_explain(pids[i], MEM_TIMEOUT_NS, &out[i].x, why, sizeof why) == 0;
		out[i].at_ns = now;
		pthread_mutex_lock(&M.lock);
		size_t k = 0;
		while (k < M.n && M.v[k].pid != pids[i])
			k++;
		if (k == M.n && M.n < 4096) {
			mem_t *g = M.n == M.cap ? realloc(M.v, (M.cap = M.cap ? M.cap * 2 : 64) * sizeof *g) : M.v;
			if (g) {
				M.v = g;
				M.n++;
			} else {
				k = SIZE_MAX;
			}
		}
		if (k < M.n)
			M.v[k] = out[i];
		pthread_mutex_unlock(&M.lock);
	}
}

/* A point a minute of each process's parts, the last hour (the page's
 * stacked plot; a process's points go with it once it is no target). */
#define MEMH_N 60
typedef struct memh_s {
	int pid;
	unsigned n, head;
	struct { int64_t t; uint64_t v[6]; } p[MEMH_N];
} memh_t;
static struct {
	pthread_mutex_t lock;
	memh_t *v;
	size_t n;
} MH = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void mem_sample_all(void)
{
	pthread_mutex_lock(&S.lock);
	size_t np = S.ntargets;
	int *pids = calloc(np ? np : 1, sizeof *pids);
	for (size_t k = 0; pids && k < np; k++)
		pids[k] = S.targets[k].t.pid;
	pthread_mutex_unlock(&S.lock);
	mem_t *mem = calloc(np ? np : 1, sizeof *mem);
	if (pids && mem)
		mem_measure(pids, np, mem);
	int64_t now = time(NULL);
	pthread_mutex_lock(&MH.lock);
	memh_t *fresh = calloc(np ? np : 1, sizeof *fresh);
	for (size_t i = 0; fresh && pids && mem && i < np; i++) {
		memh_t *h = &fresh[i];
		for (size_t k = 0; k < MH.n; k++)
			if (MH.v[k].pid == pids[i])
				*h = MH.v[k];
		h->pid = pids[i];
		if (!mem[i].ok)
			continue;
		h->p[h->head].t = now;
		for (unsigned j = 0; j < 6; j++)
			h->p[h->head].v[j] = mem_value(&mem[i].x, false, j);
		h->head = (h->head + 1) % MEMH_N;
		if (h->n < MEMH_N)
			h->n++;
	}
	if (fresh) {
		free(MH.v);
		MH.v = fresh;
		MH.n = np;
	}
	pthread_mutex_unlock(&MH.lock);
	free(pids);
	free(mem);
}

/* /plot?pid=N&parts=1: the parts of its resident memory over the last
 * hour, stacked (a point a minute) */
static char *mem_plot(int pid, size_t *len)
{
	enum { W = 720, H = 170, L = 70, R = 10, T = 22, B = 24 };
	static const char *const color[6] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#7f7f7f" };
	memh_t h = { .pid = pid };
	pthread_mutex_lock(&MH.lock);
	for (size_t k = 0; k < MH.n; k++)
		if (MH.v[k].pid == pid)
			h = MH.v[k];
	pthread_mutex_unlock(&MH.lock);
	char *buf = NULL;
	*len = 0;
	FILE *f = open_memstream(&buf, len);
	if (f == NULL)
		return NULL;
	int64_t now = time(NULL), t0 = now - 3600;
	uint64_t max = 1;
	for (unsigned i = 0; i < h.n; i++) {
		uint64_t sum = 0;
		for (unsigned j = 0; j < 6; j++)
			sum += h.p[(h.head + MEMH_N - h.n + i) % MEMH_N].v[j];
		max = sum > max ? sum : max;
	}
	char b[32];
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
	    "font-family=\"sans-serif\" font-size=\"11\"><title>process %d: where its resident memory goes, the last "
	    "hour</title><rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>", W, H, W, H, pid, W, H);
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", L - 4, T + 8, out_bytes(max, b, sizeof b));
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>", L - 4, H - B);
	fprintf(f, "<text x=\"%d\" y=\"%d\">an hour ago</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">now</text>",
	    L, H - 8, W - R, H - 8);
	/* each part an area between the running sums below and with it */
	for (unsigned j = 0; j < 6 && h.n >= 2; j++) {
		fprintf(f, "<polygon class=\"%s\" fill=\"%s\" fill-opacity=\"0.75\" points=\"", rss_parts[j], color[j]);
		for (int pass = 0; pass < 2; pass++)
			for (unsigned i = 0; i < h.n; i++) {
				unsigned q = pass ? h.n - 1 - i : i;
				unsigned k = (h.head + MEMH_N - h.n + q) % MEMH_N;
				uint64_t below = 0;
				for (unsigned m = 0; m < j + (pass == 0); m++)
					below += h.p[k].v[m];
				double x = L + (double)(h.p[k].t - t0) * (W - L - R) / 3600.0;
				double y = (H - B) - (double)below * (H - B - T) / (double)max;
				fprintf(f, "%s%.1f,%.1f", pass || i ? " " : "", x < L ? L : x, y);
			}
		fprintf(f, "\"/>");
	}
	for (unsigned j = 0; j < 6; j++)
		fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>", L + 10 + j * 100, 14, color[j], rss_parts[j]);
	if (h.n < 2)
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#777\">collecting: a point a minute"
		    "</text>", (L + W) / 2, H / 2);
	fputs("</svg>\n", f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void mem_families(FILE *f, bool om, const mem_t *mem, size_t nmem)
{
	for (int heap = 0; heap < 2; heap++) {
		const char *name = heap ? "heapctl_heap_part_bytes" : "heapctl_rss_part_bytes";
		fprintf(f, "# HELP %s %s\n", name, heap ? "The allocator's heap by its own count (heapctl explain): "
		    "live objects the profile attributes, other live objects, sampled objects' pages, free space "
		    "in pages in use, free pages not yet returned, metadata." :
		    "Resident memory by where it is (heapctl explain): the allocator's heap, other anonymous memory, "
		    "thread stacks, mapped files, shared memory, kernel mappings; they add up to the resident set.");
		fprintf(f, "# TYPE %s gauge\n", name);
		if (om)
			fprintf(f, "# UNIT %s bytes\n", name);
		pthread_mutex_lock(&S.lock);
		for (size_t k = 0; k < S.ntargets; k++) {
			const target_t *x = &S.targets[k];
			const mem_t *m = NULL;
			for (size_t i = 0; i < nmem && m == NULL; i++)
				if (mem[i].pid == x->t.pid && mem[i].ok)
					m = &mem[i];
			if (m == NULL || (heap && !m->x.heapctl))
				continue;
			for (unsigned i = 0; i < 6; i++) {
				char num[16];
				snprintf(num, sizeof num, "%d", x->t.pid);
				bool first = true;
				fprintf(f, "%s{", name);
				put_label(f, "pid", num, &first);
				put_label(f, "command", x->command, &first);
				put_label(f, "unit", x->unit, &first);
				put_label(f, "container", x->container, &first);
				put_label(f, "part", heap ? heap_parts[i] : rss_parts[i], &first);
				put_label(f, "user", x->user, &first);
				fprintf(f, "} %llu\n", (unsigned long long)mem_value(&m->x, heap, i));
			}
		}
		pthread_mutex_unlock(&S.lock);
	}
}

/* serve --leaks: each process's suspects, to those who may see its
 * profiles (a site is a function of its code: part of a profile) */
static void request_peer(struct MHD_Connection *c, serve_peer_t *p);
static void leak_families(FILE *f, bool om, struct MHD_Connection *c)
{
	serve_peer_t peer;
	request_peer(c, &peer);
	size_t n;
	serve_row_t *rows = serve_rows(&n);
	for (int growth = 0; growth < 2; growth++) {
		const char *name = growth ? "heapctl_leak_growth_bytes_per_hour" : "heapctl_leak_suspect_bytes";
		fprintf(f, "# HELP %s %s\n", name, growth ? "Growth per hour of a site that grew in each of the last "
		    "--leak-intervals intervals (serve --leaks)." : "In-use bytes of a site that grew in each of the "
		    "last --leak-intervals intervals (serve --leaks).");
		fprintf(f, "# TYPE %s gauge\n", name);
		if (om)
			fprintf(f, "# UNIT %s %s\n", name, growth ? "bytes_per_hour" : "bytes");
		for (size_t i = 0; rows && i < n; i++) {
			leak_t l[20];
			size_t k = leaks_of(rows[i].pid, l, 20);
			char why[256];
			if (k == 0 || !access_may(&peer, rows[i].pid, why, sizeof why))
				continue;
			char num[16];
			snprintf(num, sizeof num, "%d", rows[i].pid);
			for (size_t j = 0; j < k; j++) {
				bool first = true;
				fprintf(f, "%s{", name);
				put_label(f, "pid", num, &first);
				put_label(f, "command", rows[i].command, &first);
				put_label(f, "unit", rows[i].unit, &first);
				put_label(f, "container", rows[i].container, &first);
				put_label(f, "site", l[j].site, &first);
				put_label(f, "user", rows[i].user, &first);
				fprintf(f, "} %.17g\n", growth ? l[j].per_hour : l[j].bytes);
			}
		}
	}
	free(rows);
}

/* pid > 0: that process's series alone (a target of /sd), without the
 * daemon's own (heapctl_targets, the archive's), which would otherwise come
 * once per process scraped */
static enum MHD_Result serve_metrics(struct MHD_Connection *c, long pid)
{
	/* the processes' memory parts first, without the targets' lock */
	int *pids = NULL;
	size_t np = 0;
	pthread_mutex_lock(&S.lock);
	pids = calloc(S.ntargets ? S.ntargets : 1, sizeof *pids);
	for (size_t k = 0; pids && k < S.ntargets; k++)
		if (pid <= 0 || S.targets[k].t.pid == pid)
			pids[np++] = S.targets[k].t.pid;
	pthread_mutex_unlock(&S.lock);
	mem_t *mem = calloc(np ? np : 1, sizeof *mem);
	if (pids && mem)
		mem_measure(pids, np, mem);
	free(pids);

	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	bool om = accept && strstr(accept, "application/openmetrics-text");
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	pthread_mutex_lock(&S.lock);
	hc_shm_state_t *st = calloc(S.ntargets ? S.ntargets : 1, sizeof *st);
	bool *ok = calloc(S.ntargets ? S.ntargets : 1, sizeof *ok);
	bool found = false;
	for (size_t k = 0; st && ok && k < S.ntargets; k++) {
		if (pid > 0 && S.targets[k].t.pid != pid)
			continue;
		ok[k] = hc_shm_state_read(&S.targets[k].t.seg->state, &st[k]);
		found = true;
	}
	for (unsigned i = 0; st && ok && i < NMETRICS; i++) {
		const metric_t *m = &metrics[i];
		/* the text format names a counter with its _total; OpenMetrics
		 * names the family without it and the sample with it */
		const char *sfx = m->counter ? "_total" : "";
		const char *fam_sfx = om ? "" : sfx;
		fprintf(f, "# HELP %s%s %s\n", m->name, fam_sfx, m->help);
		fprintf(f, "# TYPE %s%s %s\n", m->name, fam_sfx, m->counter ? "counter" : "gauge");
		if (om && m->unit)
			fprintf(f, "# UNIT %s %s\n", m->name, m->unit);
		for (size_t k = 0; k < S.ntargets; k++) {
			if (!ok[k])
				continue;
			const target_t *x = &S.targets[k];
			char num[16];
			snprintf(num, sizeof num, "%d", x->t.pid);
			bool first = true;
			fprintf(f, "%s%s{", m->name, sfx);
			put_label(f, "pid", num, &first);
			put_label(f, "command", x->command, &first);
			put_label(f, "unit", x->unit, &first);
			put_label(f, "container", x->container, &first);
			put_label(f, "user", x->user, &first);
			fprintf(f, "} %.17g\n", metric_value(i, x, &st[k]));
		}
	}
	size_t n = S.ntargets;
	pthread_mutex_unlock(&S.lock);
	bool oom = st == NULL || ok == NULL;
	free(st);
	free(ok);
	if (oom || (pid > 0 && !found)) {
		free(mem);
		fclose(f);
		free(buf);
		return oom ? respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory") :
		    respond_err(c, MHD_HTTP_NOT_FOUND, "process %ld is not running libheapctl.so (see /targets)", pid);
	}
	if (mem)
		mem_families(f, om, mem, np);
	free(mem);
	if (leaks_enabled())
		leak_families(f, om, c);
	if (pid > 0)
		goto end;
	fprintf(f, "# HELP heapctl_targets Processes running the library that this daemon sees.\n"
	    "# TYPE heapctl_targets gauge\nheapctl_targets %zu\n", n);
	if (arch_enabled()) {
		uint64_t archived, failed;
		arch_counts(&archived, &failed);
		fprintf(f, "# HELP heapctl_archived_dumps%s Dumps copied into the archive.\n"
		    "# TYPE heapctl_archived_dumps%s counter\nheapctl_archived_dumps_total %llu\n",
		    om ? "" : "_total", om ? "" : "_total", (unsigned long long)archived);
		fprintf(f, "# HELP heapctl_archive_failures%s Dumps that could not be archived.\n"
		    "# TYPE heapctl_archive_failures%s counter\nheapctl_archive_failures_total %llu\n",
		    om ? "" : "_total", om ? "" : "_total", (unsigned long long)failed);
	}
end:
	if (om)
		fputs("# EOF\n", f);
	return respond_stream(c, om ? "application/openmetrics-text; version=1.0.0; charset=utf-8" :
	    "text/plain; version=0.0.4; charset=utf-8", f, &buf, &len);
}

/* ---- /targets ---------------------------------------------------------------- */

static enum MHD_Result serve_targets(struct MHD_Connection *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	json_t j;
	json_begin(&j, f, JSON_PRETTY);
	json_arr(&j, NULL);
	pthread_mutex_lock(&S.lock);
	for (size_t k = 0; k < S.ntargets; k++) {
		const target_t *x = &S.targets[k];
		hc_shm_state_t st;
		if (!hc_shm_state_read(&x->t.seg->state, &st))
			continue;
		json_obj(&j, NULL);
		json_i64(&j, "pid", x->t.pid);
		json_i64(&j, "nspid", x->t.nspid);
		json_u64(&j, "uid", x->t.uid);
		json_str(&j, "command", x->command);
		json_str(&j, "unit", x->unit[0] ? x->unit : NULL);
		json_str(&j, "container", x->container[0] ? x->container : NULL);
		char ver[sizeof x->t.seg->hdr.version + 1];
		memcpy(ver, x->t.seg->hdr.version, sizeof ver - 1);
		ver[sizeof ver - 1] = 0;
		json_str(&j, "version", ver);
		json_bool(&j, "prof_active", st.active);
		json_u64(&j, "lg_sample", st.lg_sample);
		json_u64(&j, "allocated", st.allocated);
		json_u64(&j, "resident", st.resident);
		json_u64(&j, "mapped", st.mapped);
		json_u64(&j, "highwater", st.highwater);
		json_u64(&j, "samples", st.samples);
		json_u64(&j, "dumps", st.dumps);
		json_u64(&j, "threads", st.threads);
		json_end(&j);
	}
	pthread_mutex_unlock(&S.lock);
	json_end(&j);
	return respond_stream(c, "application/json", f, &buf, &len);
}

/* ---- /archive ------------------------------------------------------------------ */

static enum MHD_Result serve_archive_list(struct MHD_Connection *c, serve_peer_t *peer)
{
	if (!arch_enabled())
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no archive: start serve with --archive DIR");
	size_t n;
	arch_entry_t *v = arch_scan(&n);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL) {
		free(v);
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	}
	json_t j;
	json_begin(&j, f, JSON_PRETTY);
	json_arr(&j, NULL);
	for (size_t i = n; i-- > 0;) {          /* newest first */
		const arch_entry_t *e = &v[i];
		if (!access_owner_ok(peer, e->owner))
			continue;
		char path[600], pb[620], kind[32] = "";
		int pid = 0;
		long long uid;
		arch_name_parse(e->name, &uid, &pid, kind, sizeof kind);
		snprintf(path, sizeof path, "%s/%s.heap", e->group, e->name);
		snprintf(pb, sizeof pb, "%s/%s/%s.pb.gz", arch_dir(), e->group, e->name);
		json_obj(&j, NULL);
		json_str(&j, "group", e->group);
		json_str(&j, "file", path);
		json_i64(&j, "pid", pid);
		if (e->uid >= 0)
			json_i64(&j, "uid", e->uid);
		else
			json_null(&j, "uid");
		json_str(&j, "kind", kind);
		json_u64(&j, "bytes", e->bytes);
		if (access(pb, R_OK) == 0) {
			snprintf(pb, sizeof pb, "%s/%s.pb.gz", e->group, e->name);
			json_str(&j, "pprof", pb);
		} else
			json_null(&j, "pprof");
		json_end(&j);
	}
	json_end(&j);
	free(v);
	return respond_stream(c, "application/json", f, &buf, &len);
}

/* /archive/GROUP/FILE: one archived dump or its pprof. */
static enum MHD_Result serve_archive_file(struct MHD_Connection *c, const char *rel, serve_peer_t *peer)
{
	char group[256], name[256];
	const char *slash = strchr(rel, '/');
	size_t glen = slash ? (size_t)(slash - rel) : 0;
	if (!arch_enabled() || slash == NULL || glen == 0 || glen >= sizeof group || strlen(slash + 1) >= sizeof name)
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such archived file");
	memcpy(group, rel, glen);
	group[glen] = 0;
	strcpy(name, slash + 1);
	size_t nl = strlen(name);
	bool heap = nl > 5 && strcmp(name + nl - 5, ".heap") == 0;
	bool pb = nl > 6 && strcmp(name + nl - 6, ".pb.gz") == 0;
	if (!arch_name_ok(group) || !arch_name_ok(name) || (!heap && !pb))
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such archived file");
	if (!access_owner_ok(peer, arch_owner(group, name)))
		return respond_err(c, MHD_HTTP_FORBIDDEN, "archived %s/%s: a dump of a process you may not read", group,
		    name);
	char path[PATH_MAX + 600];
	snprintf(path, sizeof path, "%s/%s/%s", arch_dir(), group, name);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such archived file");
	}
	struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)sb.st_size, fd);
	if (r == NULL) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, heap ? "text/plain; charset=utf-8" :
	    "application/octet-stream");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ok;
}

/* ---- /debug/pprof/heap and allocs ------------------------------------------- */

int serve_run_self(char **args, char *out, size_t outlen, char *err, size_t errlen, uint64_t timeout_ms)
{
	char *argv[48];
	int n = 0;
	argv[n++] = S.exe;
	for (; *args && n < 45; args++)
		argv[n++] = *args;
	if (S.symcache[0] && !strcmp(argv[1], "report")) {
		argv[n++] = "--symcache";
		argv[n++] = S.symcache;
	}
	argv[n] = NULL;
	char junk[256];
	err[0] = 0;
	int rc = cli_spawn(argv, NULL, out ? out : junk, out ? outlen : sizeof junk, err, errlen,
	    (int)timeout_ms);
	if (rc < 0) {
		snprintf(err, errlen, "cannot run heapctl %s: %s", argv[1], strerror(errno));
		return HC_EXIT_FAILED;
	}
	char *nl = strchr(err, '\n');
	if (nl)
		*nl = 0;
	if (rc >= 128 && err[0] == 0)
		snprintf(err, errlen, "heapctl %s did not finish in %llu ms", argv[1],
		    (unsigned long long)timeout_ms);
	return rc;
}

/* A number parameter: digits only, at most max.  -1 if absent, -2 if bad. */
static long num_arg(struct MHD_Connection *c, const char *name, long max)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	if (v == NULL)
		return -1;
	if (*v == 0 || strlen(v) > 9 || strspn(v, "0123456789") != strlen(v))
		return -2;
	long n = strtol(v, NULL, 10);
	return n > max ? -2 : n;
}

/* The pid a profile request is for: ?pid=N, or the only target; one the
 * requester may see. */
static int request_pid(struct MHD_Connection *c, serve_peer_t *peer, unsigned *status, char *why, size_t len)
{
	long pid = num_arg(c, "pid", INT_MAX);
	pthread_mutex_lock(&S.lock);
	size_t n = S.ntargets;
	int only = n == 1 ? S.targets[0].t.pid : 0;
	bool known = pid > 0 && find_locked((int)pid) != NULL;
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
	snprintf(why, len, n ? "%zu processes run libheapctl.so: say which with ?pid=N (see /targets)" :
	    "no process runs libheapctl.so", n);
	return -1;
}

static void remove_work(const char *dir)
{
	static const char *const names[] = { "a.heap", "b.heap", "out.pb.gz", "out.svg" };
	char p[PATH_MAX + 96];
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

enum { OUT_PPROF, OUT_TEXT, OUT_SVG };

/* A work directory of this request's own under S.work; false after the
 * error response was queued (in *res). */
static bool work_dir(struct MHD_Connection *c, char *dir, size_t len, enum MHD_Result *res)
{
	snprintf(dir, len, "%s/req.%u.XXXXXX", S.work, __atomic_add_fetch(&S.requests, 1, __ATOMIC_RELAXED));
	if (mkdtemp(dir) != NULL)
		return true;
	*res = respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot make a work directory for the request: %s",
	    strerror(errno));
	return false;
}

/* Report on file (less base if not NULL) into the response: pprof, text or
 * SVG.  The dump's paths are its writer's: with pid > 0 the binaries are
 * read as the live process maps them (report --mapped), else (an archived
 * dump) by those paths; every file with the rights of the process's user,
 * who owns an archived dump (--as-user).  title names it in the
 * requester's terms (the flame graph's title, the pprof's comment, every
 * message), never by the daemon's paths.  dir is the request's work
 * directory, removed here. */
static enum MHD_Result respond_report(struct MHD_Connection *c, const char *dir, const char *file,
    const char *base, int pid, int out_kind, bool allocs, const char *title)
{
	char out[PATH_MAX + 96], pids[16], err[1024], uid[16];
	snprintf(out, sizeof out, "%s/%s", dir, out_kind == OUT_SVG ? "out.svg" : "out.pb.gz");
	snprintf(pids, sizeof pids, "%d", pid);
	struct stat fs;
	unsigned owner = lstat(file, &fs) == 0 ? (unsigned)fs.st_uid : 65534u;
	if (pid > 0) {             /* its user's process, not one that has its pid since */
		pthread_mutex_lock(&S.lock);
		target_t *x = find_locked(pid);
		owner = x ? x->t.uid : 65534u;
		pthread_mutex_unlock(&S.lock);
	}
	snprintf(uid, sizeof uid, "%u", owner);
	char *rep[20];
	int n = 0, rc;
	enum MHD_Result res;
	rep[n++] = "report";
	rep[n++] = (char *)file;
	if (base) {
		rep[n++] = "--base";
		rep[n++] = (char *)base;
	}
	if (pid > 0) {
		rep[n++] = "-p";
		rep[n++] = pids;
		rep[n++] = "--mapped";
	}
	rep[n++] = "--as-user";
	rep[n++] = uid;
	rep[n++] = "--title";
	rep[n++] = (char *)title;
	if (allocs)
		rep[n++] = "--alloc_space";
	if (out_kind == OUT_TEXT) {
		rep[n] = NULL;
		enum { TEXT_MAX = 1 << 20 };
		char *text = malloc(TEXT_MAX);
		if (text == NULL) {
			remove_work(dir);
			return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		}
		text[0] = 0;
		rc = serve_run_self(rep, text, TEXT_MAX, err, sizeof err, 300000);
		/* an empty profile is a profile: 200, with report's "nothing
		 * to show: ..." (said on its stderr) as its text */
		if (rc == 0 && text[0] == 0)
			serve_scrub(err, title, text, TEXT_MAX);
		if (rc == 0 && text[0] && text[strlen(text) - 1] != '\n' && strlen(text) + 1 < TEXT_MAX)
			strcat(text, "\n");
		res = rc == 0 ? respond_buf(c, MHD_HTTP_OK, "text/plain; charset=utf-8", text, strlen(text)) :
		    respond_child(c, rc, err, title, "heapctl report failed");
		free(text);
		remove_work(dir);
		return res;
	}
	rep[n++] = out_kind == OUT_SVG ? "--svg" : "--pprof";
	rep[n++] = out;
	rep[n] = NULL;
	if ((rc = serve_run_self(rep, NULL, 0, err, sizeof err, 300000)) != 0) {
		remove_work(dir);
		return respond_child(c, rc, err, title, "heapctl report failed");
	}
	int fd = open(out, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0) {
		snprintf(err, sizeof err, "cannot read the profile: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		remove_work(dir);
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s", err);
	}
	remove_work(dir);          /* the open fd keeps the file */
	struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)sb.st_size, fd);
	if (r == NULL) {
		close(fd);
		return MHD_NO;
	}
	if (out_kind == OUT_SVG) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "image/svg+xml");
		/* the flame graph's own script, and nothing from elsewhere */
		MHD_add_response_header(r, "Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; "
		    "style-src 'unsafe-inline'");
	} else {
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
		MHD_add_response_header(r, "Content-Disposition",
		    allocs ? "attachment; filename=\"allocs\"" : "attachment; filename=\"heap\"");
	}
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	res = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return res;
}

void serve_program(const char *command, char *out, size_t len)
{
	char safe[1024];
	command = out_safe(command, safe, sizeof safe);   /* valid UTF-8 in a title */
	size_t n = strcspn(command, " ");
	const char *slash = memrchr(command, '/', n);
	const char *p = slash ? slash + 1 : command;
	snprintf(out, len, "%.*s", (int)(command + n - p), p);
	if (out[0] == 0)
		snprintf(out, len, "process");
}

/* "PROGRAM (pid N)": a live profile's name for people */
static void process_title(int pid, char *out, size_t len)
{
	char prog[256] = "process";
	pthread_mutex_lock(&S.lock);
	const target_t *x = find_locked(pid);
	if (x)
		serve_program(x->command, prog, sizeof prog);
	pthread_mutex_unlock(&S.lock);
	snprintf(out, len, "%s (pid %d)", prog, pid);
}

/* Does a dump carry allocation counts?  Its totals line "  t*: N: B
 * [AN: AB]" has AN 0 while N is not when the process runs without
 * prof_accum (jemalloc's shape too); a dump of nothing at all has them,
 * as far as anyone can tell, and is an empty profile. */
static bool has_alloc_counts(const char *file)
{
	char head[512];
	unsigned long long n, b, an, ab;
	ssize_t got = cli_read_file(file, head, sizeof head);
	const char *t = got > 0 ? strstr(head, "\n  t*: ") : NULL;
	if (t == NULL || sscanf(t, "\n  t*: %llu: %llu [%llu: %llu]", &n, &b, &an, &ab) != 4)
		return true;               /* not ours to judge: report says what it finds */
	return !(n > 0 && an == 0);
}

/* /debug/pprof/heap and allocs (pprof, or text with debug), /flame?pid=N */
static enum MHD_Result serve_profile(struct MHD_Connection *c, bool allocs, bool svg, serve_peer_t *peer)
{
	char why[1024];
	unsigned status;
	int pid = request_pid(c, peer, &status, why, sizeof why);
	if (pid < 0)
		return respond_err(c, status, "%s", why);
	long seconds = num_arg(c, "seconds", MAX_SECONDS);
	long debug = num_arg(c, "debug", 9);
	if (seconds == -2)
		return respond_err(c, MHD_HTTP_BAD_REQUEST, "seconds must be a whole number from 0 to %d",
		    MAX_SECONDS);
	if (debug == -2)
		return respond_err(c, MHD_HTTP_BAD_REQUEST, "debug must be a small number");
	if (!lim_take(c, LIM_PROFILE))
		return lim_refuse(c, LIM_PROFILE);

	char dir[PATH_MAX + 64];
	enum MHD_Result res;
	if (!work_dir(c, dir, sizeof dir, &res))
		return res;
	char a[PATH_MAX + 96], b[PATH_MAX + 96], pids[16], tmo[32], err[1024], title[400];
	process_title(pid, title, sizeof title);
	snprintf(a, sizeof a, "%s/a.heap", dir);
	snprintf(b, sizeof b, "%s/b.heap", dir);
	snprintf(pids, sizeof pids, "%d", pid);
	snprintf(tmo, sizeof tmo, "%.3f", (double)S.timeout_ns / 1e9);
	uint64_t dump_ms = S.timeout_ns / 1000000 + 30000;
	int rc = 0;
	/* with seconds, the first dump is the base and the profile the delta */
	if (seconds > 0) {
		char *d1[] = { "dump", pids, "-o", a, "--timeout", tmo, NULL };
		if ((rc = serve_run_self(d1, NULL, 0, err, sizeof err, dump_ms)) != 0)
			goto failed;
		int why_not = lim_wait(c, seconds);
		if (why_not) {              /* no one to answer, or no time to */
			remove_work(dir);
			return why_not == 1 ? MHD_NO : respond_err(c, MHD_HTTP_SERVICE_UNAVAILABLE,
			    "the daemon is stopping");
		}
	}
	char *d2[] = { "dump", pids, "-o", b, "--timeout", tmo, NULL };
	if ((rc = serve_run_self(d2, NULL, 0, err, sizeof err, dump_ms)) != 0)
		goto failed;
	if (allocs && !has_alloc_counts(b)) {
		remove_work(dir);
		return respond_err(c, MHD_HTTP_NOT_FOUND, "%s keeps no allocation counts (allocs): it was started without "
		    "prof_accum:true, which cannot be turned on while it runs; start it with HEAPCTL_CONF=prof_accum:true "
		    "(heapctl run --conf prof_accum:true, heapctl enable UNIT --conf prof_accum:true, heapctl inject "
		    "--conf prof_accum:true); /debug/pprof/heap?pid=%d has what it holds now", title, pid);
	}
	if (seconds > 0)
		snprintf(title + strlen(title), sizeof title - strlen(title), ", growth over %ld s", seconds);
	return respond_report(c, dir, b, seconds > 0 ? a : NULL, pid, svg ? OUT_SVG : debug > 0 ? OUT_TEXT : OUT_PPROF,
	    allocs, title);
failed:
	remove_work(dir);
	return respond_child(c, rc, err, title, "heapctl failed");
}

/* An archived file named by query argument arg ("GROUP/NAME.heap") as a
 * path; false if absent (*given false), not one, or not one the requester
 * may read (*refused). */
static bool archived_arg(struct MHD_Connection *c, const char *arg, char *path, size_t len, bool *given,
    serve_peer_t *peer, bool *refused)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, arg);
	*given = v != NULL;
	*refused = false;
	if (v == NULL || !arch_enabled())
		return false;
	const char *slash = strchr(v, '/');
	char group[256], name[256];
	size_t gl = slash ? (size_t)(slash - v) : 0, nl = slash ? strlen(slash + 1) : 0;
	if (!slash || gl == 0 || gl >= sizeof group || nl < 6 || nl >= sizeof name)
		return false;
	memcpy(group, v, gl);
	group[gl] = 0;
	strcpy(name, slash + 1);
	if (!arch_name_ok(group) || !arch_name_ok(name) || strcmp(name + nl - 5, ".heap") != 0)
		return false;
	snprintf(path, len, "%s/%s/%s", arch_dir(), group, name);
	struct stat st;
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	*refused = !access_owner_ok(peer, arch_owner(group, name));
	return !*refused;
}

/* /top?file=GROUP/NAME.heap[&base=...] (text), /flame?file=... (SVG):
 * an archived dump, or the difference of two. */
static enum MHD_Result serve_archived(struct MHD_Connection *c, bool svg, serve_peer_t *peer)
{
	char file[PATH_MAX + 600], base[PATH_MAX + 600];
	bool given, base_given, refused, base_refused;
	if (!archived_arg(c, "file", file, sizeof file, &given, peer, &refused))
		return respond_err(c, refused ? MHD_HTTP_FORBIDDEN : given ? MHD_HTTP_NOT_FOUND : MHD_HTTP_BAD_REQUEST,
		    refused ? "archived dump: of a process you may not read" : given ? "no such archived dump" :
		    "file=GROUP/NAME.heap (see /archive)");
	bool has_base = archived_arg(c, "base", base, sizeof base, &base_given, peer, &base_refused);
	if (base_refused)
		return respond_err(c, MHD_HTTP_FORBIDDEN, "archived dump (base): of a process you may not read");
	if (base_given && !has_base)
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such archived dump (base)");
	if (!lim_take(c, LIM_PROFILE))
		return lim_refuse(c, LIM_PROFILE);
	char dir[PATH_MAX + 64];
	enum MHD_Result res;
	if (!work_dir(c, dir, sizeof dir, &res))
		return res;
	/* its name in the archive ("GROUP/NAME.heap", checked above), the
	 * difference's "FILE - BASE" */
	char title[1200];
	snprintf(title, sizeof title, "%s%s%s", MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "file"),
	    has_base ? " - " : "", has_base ? MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "base") : "");
	return respond_report(c, dir, file, has_base ? base : NULL, 0, svg ? OUT_SVG : OUT_TEXT, false, title);
}

/* ---- /events ------------------------------------------------------------------- */

typedef struct reader_s {
	serve_peer_t peer;         /* it reads only the lines of its processes   */
	uint64_t next;             /* the next line of the log to send           */
	bool sse;                  /* text/event-stream: "data: LINE" blocks      */
	char *pending;             /* a line not yet sent in full                 */
	size_t off, len;
} reader_t;

/* libmicrohttpd asks for more of the stream: the next lines, waiting for
 * them (a connection has its own thread).  A server-sent-events reader
 * gets a comment every 15 s, so a browser that went away is noticed. */
static ssize_t events_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	reader_t *r = cls;
	if (r->pending == NULL) {
		pthread_mutex_lock(&E.lock);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 15;
		uint64_t at;
		do {                       /* the next line of a process it may see */
			while (r->next == E.head && !E.stopping)
				if (pthread_cond_timedwait(&E.cond, &E.lock, &until) == ETIMEDOUT)
					break;
			if (E.stopping) {
				pthread_mutex_unlock(&E.lock);
				return MHD_CONTENT_READER_END_OF_STREAM;
			}
			if (r->next == E.head) {
				pthread_mutex_unlock(&E.lock);
				if (!r->sse)
					return 0;        /* asked again */
				static const char keep[] = ": keepalive\n\n";
				size_t n = sizeof keep - 1 < max ? sizeof keep - 1 : max;
				memcpy(buf, keep, n);
				return (ssize_t)n;
			}
			if (E.head - r->next > EVLOG)        /* fell a whole log behind */
				r->next = E.head - EVLOG;
			at = r->next++;
		} while (!access_owner_ok(&r->peer, E.owner[at % EVLOG]));
		const char *line = E.line[at % EVLOG];
		size_t n = strlen(line);
		r->pending = malloc(n + 16);
		if (r->pending) {
			r->len = (size_t)sprintf(r->pending, "%s%s%s", r->sse ? "data: " : "", line, r->sse ? "\n" : "");
			r->off = 0;
		}
		pthread_mutex_unlock(&E.lock);
		if (r->pending == NULL)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	size_t n = r->len - r->off < max ? r->len - r->off : max;
	memcpy(buf, r->pending + r->off, n);
	r->off += n;
	if (r->off == r->len) {
		free(r->pending);
		r->pending = NULL;
	}
	return (ssize_t)n;
}

static void events_free(void *cls)
{
	reader_t *r = cls;
	free(r->pending);
	free(r);
}

static enum MHD_Result serve_events(struct MHD_Connection *c, const serve_peer_t *peer)
{
	if (!lim_take(c, LIM_STREAM))
		return lim_refuse(c, LIM_STREAM);
	/* a stream is quiet between events for longer than the idle timeout;
	 * its peer has few of them (LIM_STREAMS) */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	reader_t *r = calloc(1, sizeof *r);
	if (r == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	r->sse = accept && strstr(accept, "text/event-stream");
	r->peer = *peer;
	access_owner_ok(&r->peer, ACCESS_NOBODY);  /* its capability now, not under E.lock */
	/* ?since=0 gives what the log still holds, else only what comes next */
	long since = num_arg(c, "since", LONG_MAX);
	pthread_mutex_lock(&E.lock);
	r->next = since >= 0 ? (uint64_t)since : E.head;
	if (r->next > E.head)
		r->next = E.head;
	pthread_mutex_unlock(&E.lock);
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, events_read, r,
	    events_free);
	if (resp == NULL) {
		free(r);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->sse ? "text/event-stream" :
	    "application/x-ndjson");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ok;
}

/* ---- POST /control/{on,off,set,dump}?pid=N ------------------------------------ */

typedef struct set_args_s {
	char *argv[40];
	char store[32][HC_SHM_VALUE_MAX + 64];
	int n;
	bool bad;
} set_args_t;

/* Every query argument but pid is a setting: NAME=VALUE for heapctl set. */
static enum MHD_Result set_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	set_args_t *a = cls;
	if (strcmp(key, "pid") == 0)
		return MHD_YES;
	if (value == NULL || a->n >= 32 || strchr(key, '=') || key[0] == '-' ||
	    (size_t)snprintf(a->store[a->n], sizeof a->store[0], "%s=%s", key, value) >= sizeof a->store[0]) {
		a->bad = true;
		return MHD_NO;
	}
	a->n++;
	return MHD_YES;
}

static enum MHD_Result serve_control(struct MHD_Connection *c, const char *what, serve_peer_t *peer)
{
	char why[1024];
	unsigned status;
	int pid = request_pid(c, peer, &status, why, sizeof why);
	if (pid < 0)
		return respond_err(c, status, "%s", why);
	char pids[16], tmo[32], out[4096], err[1024];
	snprintf(pids, sizeof pids, "%d", pid);
	snprintf(tmo, sizeof tmo, "%.3f", (double)S.timeout_ns / 1e9);
	/* heapctl WHAT PID [NAME=VALUE...] --timeout T */
	set_args_t a = { .n = 0 };
	int n = 0;
	a.argv[n++] = (char *)what;
	a.argv[n++] = pids;
	if (strcmp(what, "set") == 0) {
		MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, set_arg, &a);
		if (a.bad || a.n == 0)
			return respond_err(c, MHD_HTTP_BAD_REQUEST,
			    "set takes NAME=VALUE query arguments (see heapctl help set)");
		for (int i = 0; i < a.n; i++)
			a.argv[n++] = a.store[i];
	}
	a.argv[n++] = "--timeout";
	a.argv[n++] = tmo;
	a.argv[n] = NULL;
	out[0] = 0;
	int rc = serve_run_self(a.argv, out, sizeof out, err, sizeof err, S.timeout_ns / 1000000 + 30000);
	if (rc != 0)
		return respond_child(c, rc, err, "a file of the daemon's", "heapctl failed");
	return respond_buf(c, MHD_HTTP_OK, "text/plain; charset=utf-8", out, strlen(out));
}

/* ---- the page ---------------------------------------------------------------- */

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

char **serve_events_of(int pid, serve_peer_t *peer, size_t max, size_t *n)
{
	*n = 0;
	char **v = calloc(max ? max : 1, sizeof *v);
	if (v == NULL)
		return NULL;
	access_owner_ok(peer, ACCESS_NOBODY);   /* its capability now, not under E.lock */
	pthread_mutex_lock(&E.lock);
	uint64_t first = E.head > EVLOG ? E.head - EVLOG : 0;
	for (uint64_t at = E.head; at-- > first && *n < max;) {          /* newest first */
		if (E.pid[at % EVLOG] != pid || !access_owner_ok(peer, E.owner[at % EVLOG]))
			continue;
		if ((v[*n] = strdup(E.line[at % EVLOG])) == NULL)
			break;
		(*n)++;
	}
	pthread_mutex_unlock(&E.lock);
	for (size_t i = 0; i < *n / 2; i++) {       /* oldest first */
		char *t = v[i];
		v[i] = v[*n - 1 - i];
		v[*n - 1 - i] = t;
	}
	return v;
}

static enum MHD_Result respond_html(struct MHD_Connection *c, unsigned status, char *html, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, html, MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(html);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	/* the page's own style and script, requests to this daemon, nothing else */
	MHD_add_response_header(r, "Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; "
	    "style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'none'");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

/* / (every process), /?pid=N (one: its page, else one line, 404 or 403
 * as for its profile) */
static enum MHD_Result serve_page(struct MHD_Connection *c, serve_peer_t *peer)
{
	size_t len;
	char *html, why[1024];
	unsigned status = MHD_HTTP_OK;
	bool found = true;
	if (MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pid") == NULL)
		html = page_html(&len, peer);
	else {
		int pid = request_pid(c, peer, &status, why, sizeof why);
		html = pid < 0 ? NULL : page_process(pid, &len, peer, &found);
		if (pid > 0 && !found) {               /* gone since */
			status = MHD_HTTP_NOT_FOUND;
			snprintf(why, sizeof why, "process %d is not running libheapctl.so (see /targets)", pid);
		}
		if (pid < 0 || !found)
			html = page_error(why, &len);
		else
			status = MHD_HTTP_OK;
	}
	if (html == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	return respond_html(c, status, html, len);
}

static enum MHD_Result serve_plot(struct MHD_Connection *c)
{
	long pid = num_arg(c, "pid", INT_MAX);
	if (pid <= 0)
		return respond_err(c, MHD_HTTP_BAD_REQUEST, "pid must be a process id");
	const char *parts = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "parts");
	pthread_mutex_lock(&S.lock);
	const target_t *x = find_locked((int)pid);
	size_t len = 0;
	char *svg = x && !parts ? page_plot(x->hist, (int)pid, &len) : NULL;
	pthread_mutex_unlock(&S.lock);
	if (x && parts)
		svg = mem_plot((int)pid, &len);
	if (x == NULL)
		return respond_err(c, MHD_HTTP_NOT_FOUND, "process %ld is not running libheapctl.so (see /targets)", pid);
	if (svg == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	enum MHD_Result ok = respond_buf(c, MHD_HTTP_OK, "image/svg+xml", svg, len);
	free(svg);
	return ok;
}

/* ---- /sd (fleet.c) ------------------------------------------------------------- */

static enum MHD_Result serve_sd(struct MHD_Connection *c, serve_peer_t *peer)
{
	char *body;
	size_t len;
	unsigned status = fleet_sd(c, peer, &body, &len);
	if (body == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	enum MHD_Result ok = status == MHD_HTTP_OK ? respond_buf(c, status, "application/json", body, len) :
	    respond_err(c, status, "%s", body);
	free(body);
	return ok;
}

/* ---- requests -------------------------------------------------------------- */

static bool token_ok(struct MHD_Connection *c)
{
	if (S.token[0] == 0)
		return true;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (h == NULL || strncmp(h, "Bearer ", 7) != 0)
		return false;
	h += 7;
	size_t n = strlen(S.token), m = strlen(h);
	unsigned char diff = (unsigned char)(n != m);
	for (size_t i = 0; i < n; i++)      /* the same time whatever matches */
		diff |= (unsigned char)(S.token[i] ^ (i < m ? h[i] : 0));
	return diff == 0;
}

static enum MHD_Result respond_unauthorized(struct MHD_Connection *c)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(sizeof "a bearer token is needed\n" - 1,
	    (void *)"a bearer token is needed\n", MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	MHD_add_response_header(r, "X-Go-Pprof", "1");      /* go tool pprof prints the line */
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, r);
	MHD_destroy_response(r);
	return ok;
}

/* On a loopback address, the Host a request names must be a loopback one:
 * a web page whose name was made to resolve to 127.0.0.1 (DNS rebinding)
 * would otherwise read every profile through the visitor's browser. */
static bool host_ok(struct MHD_Connection *c)
{
	if (!S.check_host)
		return true;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	if (h == NULL)
		return true;              /* HTTP/1.0 without one: not a browser */
	char name[256];
	size_t n;
	if (h[0] == '[') {
		const char *e = strchr(h, ']');
		n = e ? (size_t)(e - h - 1) : 0;
		h++;
	} else
		n = strcspn(h, ":");
	if (n == 0 || n >= sizeof name)
		return false;
	memcpy(name, h, n);
	name[n] = 0;
	struct in_addr a4;
	return strcasecmp(name, "localhost") == 0 || strcmp(name, "::1") == 0 ||
	    (inet_pton(AF_INET, name, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127);
}

/* Who is asking: everyone's with the token (beyond loopback every request
 * carries it), else the peer the kernel names (access.c). */
static void request_peer(struct MHD_Connection *c, serve_peer_t *p)
{
	if (S.token[0] && token_ok(c)) {
		memset(p, 0, sizeof *p);
		p->all = p->known = p->cap_known = true;
		return;
	}
	const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *ad = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	access_peer(p, fd ? fd->connect_fd : -1, ad ? ad->client_addr : NULL);
}

static const char index_text[] =
    "heapctl serve\n\n"
    "/                           the web page: processes, plots, profiles, buttons, the archive\n"
    "/?pid=N                     one process's page: its user, unit, counters, plot, downloads,\n"
    "                            buttons, archived dumps and recent events\n"
    "/metrics                    counters of every process (Prometheus text or OpenMetrics);\n"
    "                            ?pid=N: that process's alone\n"
    "/targets                    the processes, as JSON\n"
    "/sd                         Prometheus HTTP service discovery (http_sd_configs): a target\n"
    "                            of each process you may profile, with pid, user, unit,\n"
    "                            container and command labels and __param_pid; narrowed by\n"
    "                            ?user=, unit=, container=, command=, pid= (exact match)\n"
    "/debug/pprof/heap?pid=N     a heap profile taken now (gzipped profile.proto);\n"
    "                            &seconds=S: the growth over S seconds; &debug=1: text\n"
    "/debug/pprof/allocs?pid=N   the same, alloc_space first (404 and why without prof_accum:true)\n"
    "/flame?pid=N                its flame graph (SVG); /flame?file=GROUP/NAME.heap: an archived one's\n"
    "/top?file=GROUP/NAME.heap   an archived dump's text top; &base=GROUP/NAME.heap: the difference\n"
    "/plot?pid=N                 allocated, resident and high-water over the last hour (SVG);\n"
    "                            &parts=1: where its resident memory goes, stacked (heapctl explain)\n"
    "/archive                    the archived dumps (--archive), newest first, as JSON\n"
    "/archive/GROUP/FILE         one of them, or the pprof beside it\n"
    "/events                     the processes' events as heapctl watch --json prints them\n"
    "                            (text/event-stream when asked; ?since=0: the last 1024 too)\n"
    "POST /control/on?pid=N      sampling on; also off, dump (to its prof.prefix, so\n"
    "                            archived), set?pid=N&NAME=VALUE; with the token, or on\n"
    "                            a Unix socket for the requester's own processes\n"
    "\nWithout the token a local requester sees the profiles, events and archived dumps\n"
    "of the processes whose /proc/PID/maps she could read (/sd lists those); /metrics and\n"
    "/targets list all.\n";

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **state)
{
	(void)cls; (void)version; (void)upload;
	lim_request(c);
	if (!host_ok(c))
		return respond_err(c, MHD_HTTP_FORBIDDEN, "this daemon answers to a loopback Host only (127.0.0.1, "
		    "localhost, [::1])");
	bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
	bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
	const char *control = strncmp(url, "/control/", 9) == 0 ? url + 9 : NULL;
	if (control && (strcmp(control, "on") == 0 || strcmp(control, "off") == 0 || strcmp(control, "set") == 0 ||
	    strcmp(control, "dump") == 0) && post) {
		if (*upload_size) {          /* a body is not read: arguments are in the query */
			*upload_size = 0;
			return MHD_YES;
		}
		if (*state == NULL) {
			*state = (void *)1;
			return MHD_YES;
		}
		/* the peer's own processes on the Unix socket, which no web
		 * page can reach; over TCP a page the user visits could post
		 * here in her name, and only the token says it is her */
		serve_peer_t peer;
		request_peer(c, &peer);
		if (!peer.all && !S.unix_socket) {
			if (S.token[0] == 0)
				return respond_err(c, MHD_HTTP_FORBIDDEN, "control over HTTP needs serve --token-file FILE");
			return respond_unauthorized(c);
		}
		return serve_control(c, control, &peer);
	}
	if (control) {
		struct MHD_Response *r = MHD_create_response_from_buffer(sizeof "control is POST only\n" - 1,
		    (void *)"control is POST only\n", MHD_RESPMEM_PERSISTENT);
		if (r == NULL)
			return MHD_NO;
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "POST");
		enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
		MHD_destroy_response(r);
		return ok;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && !head) {
		if (*upload_size) {          /* take the body; answer at its end */
			*upload_size = 0;
			return MHD_YES;
		}
		struct MHD_Response *r = MHD_create_response_from_buffer(sizeof "only GET\n" - 1,
		    (void *)"only GET\n", MHD_RESPMEM_PERSISTENT);
		if (r == NULL)
			return MHD_NO;
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
		enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
		MHD_destroy_response(r);
		return ok;
	}
	if (*state == NULL) {            /* headers only so far */
		*state = (void *)1;
		return MHD_YES;
	}
	if (!S.open_reads && !token_ok(c))
		return respond_unauthorized(c);
	/* counters, as visible as /proc/PID/stat: to anyone who gets here */
	if (strcmp(url, "/metrics") == 0) {
		long pid = num_arg(c, "pid", INT_MAX);
		if (pid == -2 || pid == 0)
			return respond_err(c, MHD_HTTP_BAD_REQUEST, "pid must be a process id");
		return serve_metrics(c, pid);
	}
	if (strcmp(url, "/targets") == 0)
		return serve_targets(c);
	if (strcmp(url, "/plot") == 0)
		return serve_plot(c);
	if (strcmp(url, "/debug/pprof/") == 0)
		return respond_buf(c, MHD_HTTP_OK, "text/plain; charset=utf-8", index_text, sizeof index_text - 1);
	/* what carries an address, a path or a profile: the requester's own
	 * (looked up for these only: a bad path costs no look-up) */
	static const char *const own[] = { "/events", "/debug/pprof/heap", "/debug/pprof/allocs", "/flame", "/top",
		"/", "/archive", "/sd" };
	bool routed = strncmp(url, "/archive/", 9) == 0;
	for (size_t i = 0; !routed && i < sizeof own / sizeof own[0]; i++)
		routed = strcmp(url, own[i]) == 0;
	if (!routed)
		return respond_err(c, MHD_HTTP_NOT_FOUND, "no such endpoint: see /");
	serve_peer_t peer;
	request_peer(c, &peer);
	if (strcmp(url, "/events") == 0)
		return serve_events(c, &peer);
	if (strcmp(url, "/debug/pprof/heap") == 0)
		return serve_profile(c, false, false, &peer);
	if (strcmp(url, "/debug/pprof/allocs") == 0)
		return serve_profile(c, true, false, &peer);
	if (strcmp(url, "/flame") == 0)
		return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "file") ? serve_archived(c, true, &peer) :
		    serve_profile(c, false, true, &peer);
	if (strcmp(url, "/top") == 0)
		return serve_archived(c, false, &peer);
	if (strcmp(url, "/") == 0)
		return serve_page(c, &peer);
	if (strcmp(url, "/archive") == 0)
		return serve_archive_list(c, &peer);
	if (strcmp(url, "/sd") == 0)
		return serve_sd(c, &peer);
	return serve_archive_file(c, url + 9, &peer);
}

/* ---- listening --------------------------------------------------------------- */

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

/* A listening socket for "HOST:PORT", "[V6]:PORT" or "unix:PATH"; its
 * address for people in shown; *loopback says whether only this host can
 * reach it.  -1 after one line on stderr. */
static int listen_on(const char *spec, char *shown, size_t len, bool *loopback)
{
	if (strncmp(spec, "unix:", 5) == 0) {
		const char *path = spec + 5;
		struct sockaddr_un su = { .sun_family = AF_UNIX };
		if (*path != '/' || strlen(path) >= sizeof su.sun_path)
			return cli_err(HC_EXIT_USAGE, "serve: --listen unix:PATH needs an absolute path of at most %zu bytes",
			    sizeof su.sun_path - 1), -1;
		strcpy(su.sun_path, path);
		struct stat sb;
		if (lstat(path, &sb) == 0) {
			/* a socket of ours left by an earlier run; anything else stays */
			if (!S_ISSOCK(sb.st_mode) || sb.st_uid != geteuid())
				return cli_err(HC_EXIT_USAGE, "serve: %s exists and is not a socket of ours", path), -1;
			unlink(path);
		}
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		/* every local user may connect: each is shown her own processes
		 * (SO_PEERCRED), as on loopback TCP.  Made the owner's only, then
		 * opened, so that no one connects before listen() */
		mode_t old = umask(0077);
		int ok = fd >= 0 && bind(fd, (struct sockaddr *)&su, sizeof su) == 0 && listen(fd, 64) == 0 &&
		    chmod(path, 0666) == 0;
		umask(old);
		if (!ok) {
			cli_err(HC_EXIT_FAILED, "serve: cannot listen on %s: %s", path, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		snprintf(shown, len, "unix:%s", path);
		*loopback = true;
		return fd;
	}
	char host[256];
	const char *colon = strrchr(spec, ':');
	if (colon == NULL || colon == spec || (size_t)(colon - spec) >= sizeof host || !colon[1])
		return cli_err(HC_EXIT_USAGE, "serve: --listen %s: want HOST:PORT, [IPV6]:PORT or unix:PATH", spec), -1;
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = 0;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = 0;
	}
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
		.ai_socktype = SOCK_STREAM }, *ai;
	int e = getaddrinfo(host, colon + 1, &hints, &ai);
	if (e)
		return cli_err(HC_EXIT_USAGE, "serve: --listen %s: %s (an IP address and a port number)", spec,
		    gai_strerror(e)), -1;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
		cli_err(HC_EXIT_FAILED, "serve: cannot listen on %s: %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	*loopback = is_loopback(ai->ai_addr);
	freeaddrinfo(ai);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip);
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
			snprintf(shown, len, "http://%s:%u", ip, port);
		} else {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof ip);
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
			snprintf(shown, len, "http://[%s]:%u", ip, port);
		}
	}
	return fd;
}

/* The token: the file's first line, at least 16 bytes; the file must not
 * be readable by others. */
static int read_token(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return cli_err(HC_EXIT_USAGE, "serve: --token-file %s: %s", path, strerror(e));
	}
	if (!S_ISREG(sb.st_mode) || (sb.st_mode & 0077)) {
		close(fd);
		return cli_err(HC_EXIT_USAGE, "serve: --token-file %s must be a regular file only its owner can read "
		    "(chmod 600)", path);
	}
	ssize_t n = read(fd, S.token, sizeof S.token - 1);
	close(fd);
	S.token[n > 0 ? n : 0] = 0;
	S.token[strcspn(S.token, "\r\n")] = 0;
	if (strlen(S.token) < 16 || strspn(S.token, "\t ") || strchr(S.token, ' ')) {
		S.token[0] = 0;
		return cli_err(HC_EXIT_USAGE, "serve: the token in %s must be one line of at least 16 characters "
		    "and no spaces", path);
	}
	return 0;
}

/* ---- the command ---------------------------------------------------------- */

static bool parse_count(const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n > UINT_MAX)
		return false;
	*out = n;
	return true;
}

/* 90s, 30m, 12h, 7d, or seconds */
static bool parse_age(const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || errno || (end[0] && end[1]))
		return false;
	unsigned long long unit = *end == 0 || *end == 's' ? 1 : *end == 'm' ? 60 : *end == 'h' ? 3600 :
	    *end == 'd' ? 86400 : 0;
	if (unit == 0 || n > UINT64_MAX / unit)
		return false;
	*out = n * unit;
	return true;
}

enum { O_LISTEN = 256, O_TOKEN, O_ARCHIVE, O_KEEP, O_MAX_BYTES, O_MAX_AGE, O_MAX_DUMP, O_SYMCACHE, O_PARTS, O_LEAKS,
	O_LEAK_N };
static const cli_opt_t serve_opts[] = {
	{ "listen", O_LISTEN, "ADDR", "HOST:PORT, [IPV6]:PORT or unix:PATH (default 127.0.0.1:9447; port 0: any)" },
	{ "token-file", O_TOKEN, "FILE", "requests must carry 'Authorization: Bearer TOKEN' (FILE's first "
	  "line); needed to listen beyond loopback" },
	{ NULL, 0, NULL, "the archive:" },
	{ "archive", O_ARCHIVE, "DIR", "copy every dump of every process into DIR/GROUP/ (GROUP: its systemd unit, "
	  "else its program), with a symbolized pprof beside it" },
	{ "keep", O_KEEP, "N", "keep the newest N dumps of each group and user (default 50, 0: all)" },
	{ "max-bytes", O_MAX_BYTES, "SIZE", "keep each user's dumps under SIZE, oldest out first (default 1G, "
	  "0: no limit)" },
	{ "max-dump", O_MAX_DUMP, "SIZE", "archive no dump over SIZE (default 256M)" },
	{ "max-age", O_MAX_AGE, "AGE", "remove dumps older than AGE: 90s, 30m, 12h, 7d (default: none)" },
	{ NULL, 0, NULL, "symbols:" },
	{ "symcache", O_SYMCACHE, "DIR", "keep each module's symbols in DIR by build id between scrapes, "
	  "256 MiB at most (default: in the work directory, gone at exit; 'off': none)" },
	{ NULL, 0, NULL, "the page:" },
	{ "parts-every", O_PARTS, "SECS", "measure where each process's memory goes (its page's stacked plot) "
	  "every SECS seconds (default 60; the plot holds 60 points)" },
	{ NULL, 0, NULL, "leak suspects:" },
	{ "leaks", O_LEAKS, "SECS", "dump each process every SECS seconds and export the sites that grew in "
	  "each of the last --leak-intervals intervals in /metrics (default: off)" },
	{ "leak-intervals", O_LEAK_N, "N", "intervals a site must grow in, in a row (default 5)" },
	{ NULL, 0, NULL, NULL }
};

void hc_serve_help(FILE *f);
void hc_serve_help(FILE *f)
{
	fputs("\noptions:\n", f);
	cli_opts_help(f, serve_opts);
	fprintf(f, "\nendpoints:\n%s", index_text + sizeof "heapctl serve\n");
}

/* The work directory at exit, with the symbol cache if it is there. */
static void work_remove(void)
{
	leaks_stop();
	if (S.own_symcache) {
		symcache_trim(0);
		rmdir(S.symcache);
	}
	rmdir(S.work);
}

int hc_serve_main(cli_args_t *a);
int hc_serve_main(cli_args_t *a)
{
	const char *listen_spec = "127.0.0.1:9447", *token_file = NULL, *archive = NULL, *symcache = NULL;
	uint64_t keep = 50, max_bytes = (uint64_t)1 << 30, max_age = 0, max_dump = (uint64_t)256 << 20;
	unsigned leak_every = 0, leak_n = 5;
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "serve", serve_opts, false);
	if (code)
		return code;
	const char *v;
	int id;
	while ((id = cli_scan_next(&sc, &v)) > 0) {
		if (id == O_LISTEN)
			listen_spec = v;
		else if (id == O_TOKEN)
			token_file = v;
		else if (id == O_ARCHIVE)
			archive = v;
		else if (id == O_SYMCACHE)
			symcache = v;
		else if (id == O_PARTS || id == O_LEAKS || id == O_LEAK_N) {
			/* whole numbers in a range, read as --keep is */
			static const struct { const char *name, *what; unsigned lo, hi; } num[] = {
				{ "parts-every", "seconds", 1, 3600 },
				{ "leaks", "a whole number", 1, 86400 },
				{ "leak-intervals", "a whole number", 2, 30 },
			};
			unsigned k = id == O_PARTS ? 0 : id == O_LEAKS ? 1 : 2;
			uint64_t n;
			if (!parse_count(v, &n) || n < num[k].lo || n > num[k].hi) {
				cli_scan_end(&sc);
				return cli_err(HC_EXIT_USAGE, "serve: --%s %s: want %s from %u to %u", num[k].name, v,
				    num[k].what, num[k].lo, num[k].hi);
			}
			if (k == 0)
				S.parts_every_ms = (unsigned)n * 1000;
			else
				*(k == 1 ? &leak_every : &leak_n) = (unsigned)n;
		} else if (id == O_KEEP || id == O_MAX_BYTES || id == O_MAX_AGE || id == O_MAX_DUMP) {
			bool size = id == O_MAX_BYTES || id == O_MAX_DUMP;
			uint64_t *dst = id == O_KEEP ? &keep : id == O_MAX_BYTES ? &max_bytes : id == O_MAX_DUMP ?
			    &max_dump : &max_age;
			bool ok = id == O_KEEP ? parse_count(v, dst) : size ? hc_shm_parse_bytes(v, dst) &&
			    (id != O_MAX_DUMP || *dst > 0) : parse_age(v, dst);
			if (!ok) {
				cli_scan_end(&sc);
				return cli_err(HC_EXIT_USAGE, "serve: --%s %s: want %s", id == O_KEEP ? "keep" :
				    id == O_MAX_BYTES ? "max-bytes" : id == O_MAX_DUMP ? "max-dump" : "max-age", v,
				    id == O_KEEP ? "a whole number" : size ? "a size like 500M or 2G" :
				    "an age like 90s, 30m, 12h or 7d");
			}
		} else {
			cli_scan_end(&sc);
			return cli_err(HC_EXIT_USAGE, "serve: unexpected argument '%s'%s", v, strspn(v, "0123456789") ==
			    strlen(v) ? " (it serves every process; ask for one with ?pid=N)" : "");
		}
	}
	cli_scan_end(&sc);
	if (id < 0)
		return -id;
	if (a->pid)
		return cli_err(HC_EXIT_USAGE, "serve: it serves every process; ask for one with ?pid=N");
	if (token_file && (code = read_token(token_file)) != 0)
		return code;
	if (!archive && (keep != 50 || max_bytes != (uint64_t)1 << 30 || max_age || max_dump != (uint64_t)256 << 20))
		return cli_err(HC_EXIT_USAGE, "serve: --keep, --max-bytes, --max-age and --max-dump are for --archive DIR");
	S.timeout_ns = a->timeout_ns;
	if (S.parts_every_ms == 0)
		S.parts_every_ms = 60000;
	ssize_t n = readlink("/proc/self/exe", S.exe, sizeof S.exe - 1);
	if (n <= 0)
		return cli_err(HC_EXIT_FAILED, "serve: cannot tell where heapctl is: %s", strerror(errno));
	S.exe[n] = 0;
	if (archive && (code = arch_init(archive, keep > UINT_MAX ? UINT_MAX : (unsigned)keep, max_bytes,
	    max_age, max_dump)) != 0)
		return code;
	const char *rt = getenv("RUNTIME_DIRECTORY");     /* systemd's, else /tmp */
	snprintf(S.work, sizeof S.work, "%s/heapctl-serve.XXXXXX", rt && *rt == '/' ? rt : "/tmp");
	if (mkdtemp(S.work) == NULL)
		return cli_err(HC_EXIT_FAILED, "serve: cannot make a work directory: %s", strerror(errno));
	arch_skip(S.work);
	if (symcache == NULL) {
		if (strlen(S.work) + sizeof "/symcache" <= sizeof S.symcache) {
			memcpy(S.symcache, S.work, strlen(S.work));
			strcpy(S.symcache + strlen(S.work), "/symcache");
			S.own_symcache = true;
		}
	} else if (strcmp(symcache, "off") != 0 &&
	    (code = cli_absolute("serve --symcache", symcache, S.symcache, sizeof S.symcache)) != 0) {
		rmdir(S.work);
		return code;
	}
	/* as report checks it: the names in it are shown as the programs' */
	if (S.symcache[0]) {
		char why[256];
		int dfd = cli_private_dir(S.symcache, why, sizeof why);
		if (dfd < 0) {
			S.own_symcache = false;
			work_remove();
			return cli_err(HC_EXIT_USAGE, "serve: --symcache %s: %s", S.symcache, why);
		}
		close(dfd);
	}

	char shown[PATH_MAX + 16];
	bool loopback = false;
	int fd = listen_on(listen_spec, shown, sizeof shown, &loopback);
	if (fd < 0) {
		work_remove();
		return HC_EXIT_USAGE;
	}
	S.open_reads = loopback;
	S.check_host = loopback && strncmp(listen_spec, "unix:", 5) != 0;
	S.unix_socket = strncmp(listen_spec, "unix:", 5) == 0;
	if (!loopback && S.token[0] == 0) {
		close(fd);
		work_remove();
		return cli_err(HC_EXIT_USAGE, "serve: --listen %s reaches beyond this host: give --token-file FILE",
		    listen_spec);
	}
	S.targets = calloc(MAX_TARGETS, sizeof *S.targets);
	if (S.targets == NULL)
		return cli_err(HC_EXIT_FAILED, "out of memory");

	/* signals go to sigwait below, not to the server's threads */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	scan_once();
	pthread_t th;
	if (pthread_create(&th, NULL, poller, NULL) != 0)
		return cli_err(HC_EXIT_FAILED, "serve: cannot start a thread");
	char why[PATH_MAX + 128];
	if (leaks_start(S.work, leak_every, leak_n, why, sizeof why) != 0) {
		work_remove();
		return cli_err(HC_EXIT_FAILED, "serve: %s", why);
	}
	/* a thread a connection (a profile's handler waits on its children);
	 * limits.c bounds what each peer holds and for how long, and poll()
	 * lets the connections pass FD_SETSIZE */
	struct rlimit nf;
	if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_cur < 4096) {
		nf.rlim_cur = nf.rlim_max < 4096 ? nf.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &nf);
	}
	struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
	    MHD_USE_POLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, NULL,
	    MHD_OPTION_EXTERNAL_LOGGER, lim_log, NULL,      /* first: it logs the others */
	    MHD_OPTION_LISTEN_SOCKET, fd,
	    MHD_OPTION_CONNECTION_LIMIT, 1000u,
	    MHD_OPTION_CONNECTION_TIMEOUT, 10u,
	    MHD_OPTION_NOTIFY_CONNECTION, lim_connection, NULL,
	    MHD_OPTION_NOTIFY_COMPLETED, lim_completed, NULL,
	    MHD_OPTION_END);
	if (d == NULL) {
		close(fd);
		work_remove();
		return cli_err(HC_EXIT_FAILED, "serve: libmicrohttpd would not start on %s", shown);
	}
	printf("heapctl serve: listening on %s\n", shown);
	fflush(stdout);
	int sig = 0;
	sigwait(&sigs, &sig);
	pthread_mutex_lock(&E.lock);
	E.stopping = true;            /* /events readers end their streams */
	pthread_cond_broadcast(&E.cond);
	pthread_mutex_unlock(&E.lock);
	/* within systemd's stop timeout whatever is in flight: the children
	 * are killed, and a thread that still will not end is left to exit() */
	if (!lim_stop(d, 3000))
		fprintf(stderr, "heapctl serve: requests still in flight after 3 s were cut off\n");
	if (strncmp(listen_spec, "unix:", 5) == 0)
		unlink(listen_spec + 5);
	work_remove();
	return 0;
}
