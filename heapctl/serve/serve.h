/*
 * heapctl/serve/serve.h - what the daemon's files share: a target as the
 * daemon keeps it, the daemon's own paths, and each file's functions, in
 * the order of serve.c's list: a file calls only those declared before it.
 */
#ifndef HC_SERVE_H
#define HC_SERVE_H

#include <limits.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "cli/cli.h"
#include "cmd/cmd.h"

typedef struct serve_target_s {
	hc_shm_target_t t;
	char command[256];
	char unit[128];                /* systemd unit from /proc/PID/cgroup, or "" */
	char container[128];           /* machine, docker or podman id, or ""       */
	char user[64];                 /* its real uid's name, else the number      */
	uint64_t next_ev;              /* the next ring event to read               */
	uint64_t gdumps, dumps_failed; /* events seen since it was found     */
	bool seen;                     /* in this round's scan                      */
	uid_t owner;                   /* who may see it (access_owner), this round */
	bool same_view;                /* it sees our files at our paths (its mount
	                                * namespace and root are ours): known while
	                                * it lived, for the final dump after it     */
	struct serve_hist_s *hist;     /* the last hour, for the page's plot      */
} serve_target_t;

/* A target's counters every HIST_STEP_S seconds over the last hour. */
#define HIST_STEP_S 5
#define HIST_N      (3600 / HIST_STEP_S)
typedef struct serve_hist_s {
	unsigned n, head; /* points kept; the next to write           */
	int64_t last;     /* time of the newest                        */
	struct {
		int64_t t;
		uint64_t allocated, resident, highwater;
	} p[HIST_N];
} serve_hist_t;

/* access.c: who is asking (see its opening comment). */
#define ACCESS_NOBODY ((uid_t)-1) /* an owner only CAP_SYS_PTRACE may see  */
typedef struct serve_peer_s {
	bool all;       /* the token, or CAP_SYS_PTRACE: everything  */
	bool known;     /* uid is the requester's                    */
	bool cap_known; /* all is settled (else: looked up if needed) */
	uid_t uid;
	int pid;             /* on the Unix socket, else 0                */
	unsigned long inode; /* on TCP: the peer's socket                 */
	char why[96];        /* when not known: why not                   */
} serve_peer_t;

/* The client's end of TCP connection fd, whose remote address is peer,
 * when it is in this network namespace (a loopback client): the uid that
 * made that socket and its inode (0 when no process holds it any more),
 * from sock_diag, else /proc/net/tcp{,6}.  false when it is not found
 * (gone already, or elsewhere).  access.c and limits.c both ask it. */
bool access_tcp_peer(int fd, const struct sockaddr *peer, uid_t *uid, unsigned long *inode);
/* The requester on connection fd, whose remote address is remote. */
void access_peer(serve_peer_t *p, int fd, const struct sockaddr *remote);
/* The one uid that may read pid's /proc/PID/maps without CAP_SYS_PTRACE:
 * its real, effective and saved uid if they are one and it is dumpable,
 * else ACCESS_NOBODY. */
uid_t access_owner(int pid);
/* May p see what owner's process showed (owner from access_owner)? */
bool access_owner_ok(serve_peer_t *p, uid_t owner);
/* May p see process pid?  If not, why (one line) says so. */
bool access_may(serve_peer_t *p, int pid, char *why, size_t len);

/* One target as the page shows it: a copy, read under the targets' lock. */
typedef struct serve_row_s {
	int pid;
	char command[256], unit[128], container[128], user[64];
	uid_t uid, owner; /* its real uid; who may see it (access_owner) */
	hc_shm_state_t st;
} serve_row_t;

/* mem.c: a process's parts (ok false: not measured) */
typedef struct mem_s {
	int pid;
	uint64_t at_ns;
	bool ok;
	cli_explain_t x;
} mem_t;
/* A point a minute of each process's resident parts, the last hour */
#define MEMH_N 60
typedef struct memh_s {
	int pid;
	unsigned n, head;
	struct {
		int64_t t;
		uint64_t v[6];
	} p[MEMH_N];
} memh_t;

/* self.c: the daemon's own paths and settings, set by hc_serve_main at
 * start (before the poller and the server start), read-only after. */
typedef struct serve_conf_s {
	char exe[PATH_MAX];      /* this heapctl, for dump and report          */
	char work[PATH_MAX];     /* private directory for profiles in flight   */
	char symcache[PATH_MAX]; /* report --symcache for every report, or ""  */
	char archive[PATH_MAX];  /* arch_dir() when there is one, else ""      */
	uint64_t timeout_ns;     /* for the target's answers                   */
} serve_conf_t;
extern serve_conf_t serve_conf;
/* Run this heapctl with args (NULL-terminated, without argv[0]); its
 * stdout into out (may be NULL).  0, or the exit code with the child's
 * first line of stderr in err. */
int serve_run_self(char **args, char *out, size_t outlen, char *err, size_t errlen, uint64_t timeout_ms);
/* s for a requester, into out: every path of the daemon's own in it (its
 * work directory's, its symbol cache's, its archive's) replaced: one in
 * the archive by its name there (GROUP/NAME.heap, as /archive names it),
 * any other by what (the requester's name for the object, "process 12's
 * profile").  A path ends at a space or one of SCRUB_END. */
#define SCRUB_END " \t\n:,;\"'()[]<>"
void serve_scrub(const char *s, const char *what, char *out, size_t len);
/* A half-written file (".NAME.tmp") in dfd: true if name is one, which is
 * removed when it is ours and over age seconds old (age 0: whatever its
 * age, when no writer can be left). */
bool serve_tmp_file(int dfd, const char *name, time_t age);
/* A command line's program, without its directory and arguments, for a
 * title ("redis-server"); "process" if it has none. */
void serve_program(const char *command, char *out, size_t len);
/* uid's name, else its number */
void serve_user(uid_t uid, char *out, size_t len);

/* limits.c: what one peer (a uid, else an address) may hold of the daemon.
 * lim_connection and lim_completed are libmicrohttpd's connection and
 * request-completed callbacks, lim_log its logger (a bounded rate). */
enum { LIM_PROFILE = 1, LIM_STREAM };
void lim_connection(void *cls, struct MHD_Connection *c, void **sock, enum MHD_ConnectionNotificationCode toe);
void lim_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe);
void lim_log(void *cls, const char *fmt, va_list ap);
/* routes_handle(): a request's headers are in */
void lim_request(struct MHD_Connection *c);
/* Mark the request a profile or a stream: false when its peer holds as
 * many as it may (then answer lim_refuse: 429 with a Retry-After). */
bool lim_take(struct MHD_Connection *c, int kind);
enum MHD_Result lim_refuse(struct MHD_Connection *c, int kind);
/* The poller, every round: shut silent and slow connections; the log's
 * count of dropped lines once a minute is over. */
void lim_sweep(void);
void lim_log_flush(void);
/* Wait seconds for a seconds= profile: 0 when done, 1 when the client hung
 * up, 2 when the daemon stops. */
int lim_wait(struct MHD_Connection *c, long seconds);
/* Stop the daemon: no new connections, every child killed, and
 * MHD_stop_daemon given max_ms; false if it did not finish in that. */
bool lim_stop(struct MHD_Daemon *d, unsigned max_ms);
bool lim_stopping(void);

/* listen.c: the token's file (its first line), read once at start: 0, or
 * the exit code after its message.  listen_open: the socket for --listen
 * spec ("HOST:PORT", "[V6]:PORT" or "unix:PATH"), its address for people
 * in shown, *loopback whether only this host can reach it; -1 after one
 * line on stderr. */
int listen_token_file(const char *path);
int listen_open(const char *spec, char *shown, size_t len, bool *loopback);
bool listen_has_token(void);
/* May c read (GET): on loopback anyone, else the token's holder. */
bool listen_may_read(struct MHD_Connection *c);
/* May peer POST /control: the token's holder, or anyone on the Unix
 * socket (no web page reaches it; she is shown her own processes). */
bool listen_control_ok(const serve_peer_t *peer);
/* 401 with WWW-Authenticate: Bearer */
enum MHD_Result listen_unauthorized(struct MHD_Connection *c);
/* On loopback TCP, does the request name a loopback Host (no DNS
 * rebinding)?  true elsewhere. */
bool listen_host_ok(struct MHD_Connection *c);
/* Who is asking: everyone's with the token (beyond loopback every request
 * carries it), else the peer the kernel names (access.c). */
void listen_peer(struct MHD_Connection *c, serve_peer_t *p);

/* respond.c: a buffer of type (copied); an error: its status and one line
 * of text; a failed `heapctl` child's exit code rc as a status, with its
 * message err in the requester's terms (serve_scrub with what) or
 * fallback; what a memstream built (f closed here, *buf freed: the
 * pointers given to open_memstream); an HTML page (html taken over). */
enum MHD_Result respond_buf(struct MHD_Connection *c, unsigned status, const char *type, const void *body, size_t len);
enum MHD_Result respond_err(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum MHD_Result respond_child(struct MHD_Connection *c, int rc, const char *err, const char *what,
    const char *fallback);
enum MHD_Result respond_stream(struct MHD_Connection *c, const char *type, FILE *f, char **buf, size_t *len);
enum MHD_Result respond_html(struct MHD_Connection *c, unsigned status, char *html, size_t len);
/* A number in the query: digits only, at most max.  -1 if absent, -2 if bad. */
long query_num(struct MHD_Connection *c, const char *name, long max);

/* archive.c */
typedef struct arch_entry_s {
	char group[256], name[256]; /* name: without .heap                  */
	long long uid;              /* its process's user, -1 if not named  */
	uint64_t bytes;             /* .heap and .pb.gz                     */
	int64_t time_s;
	uid_t owner; /* the dumped process's access_owner     */
} arch_entry_t;

/* keep: per group and user; max_bytes: per user; max_dump: one dump */
int arch_init(const char *dir, unsigned keep, uint64_t max_bytes, uint64_t max_age_s, uint64_t max_dump);
bool arch_enabled(void);
const char *arch_dir(void);
/* Dumps written under dir (the daemon's work directory) are not archived. */
void arch_skip(const char *dir);
/* Copy the dump that event ev of target x announced into the archive, if
 * it is where prefix (its prof.prefix when the event was read) puts them. */
void arch_dump(const serve_target_t *x, const hc_shm_event_t *ev, const char *prefix);
/* An archived dump's name (TIME.uUID.PID.KIND; uid -1 for TIME.PID.KIND). */
bool arch_name_parse(const char *name, long long *uid, int *pid, char *kind, size_t klen);
/* Every archived dump, oldest first, *n of them (free it); NULL if none. */
arch_entry_t *arch_scan(size_t *n);
/* A group or file name of the archive (no '/', no leading '.'). */
bool arch_name_ok(const char *s);
/* The owner recorded with an archived dump (GROUP/NAME.heap, or its .pb.gz
 * beside it), ACCESS_NOBODY if none. */
uid_t arch_owner(const char *group, const char *name);
void arch_counts(uint64_t *archived, uint64_t *failed);
/* /archive (newest first, as JSON) and /archive/GROUP/FILE */
enum MHD_Result arch_serve_list(struct MHD_Connection *c, serve_peer_t *peer);
enum MHD_Result arch_serve_file(struct MHD_Connection *c, const char *rel, serve_peer_t *peer);

/* events.c: the log's lines: a target's ring event e, and the daemon's own
 * "found" and "gone" of x (type); events_stop ends every /events stream. */
void events_add(const serve_target_t *x, const hc_shm_event_t *e);
void events_target(const serve_target_t *x, const char *type);
void events_stop(void);
/* The last max lines about process pid that peer may read, oldest first;
 * free each and the array.  NULL and *n 0 when there are none. */
char **serve_events_of(int pid, serve_peer_t *peer, size_t max, size_t *n);
/* /events?since=N: the stream, of the lines peer may read */
enum MHD_Result events_serve(struct MHD_Connection *c, const serve_peer_t *peer);

/* targets.c: the table.  targets_init before the first targets_scan (one
 * round: new processes opened, events read, the gone dropped, dumps
 * archived).  targets_lock holds the table's lock and returns its *n
 * targets (the pointers valid until targets_unlock); a target by pid
 * under that lock, NULL if none. */
bool targets_init(void);
void targets_scan(void);
serve_target_t *targets_lock(size_t *n);
void targets_unlock(void);
serve_target_t *targets_find_locked(int pid);
/* Every target's row (free it); NULL and *n 0 when there are none. */
serve_row_t *serve_rows(size_t *n);
/* The pids of every target (pid <= 0) or of pid alone, *n of them (free
 * it; NULL when memory runs out). */
int *targets_pids(long pid, size_t *n);
/* Target pid's user (its process's uid), 65534 (nobody) if it is none. */
unsigned targets_uid(int pid);
/* "PROGRAM (pid N)": a live profile's name for people */
void targets_title(int pid, char *out, size_t len);
/* The pid a request is for: ?pid=N, or the only target; one the requester
 * may see.  -1 with the HTTP status and one line why if none. */
int targets_request_pid(struct MHD_Connection *c, serve_peer_t *peer, unsigned *status, char *why, size_t len);

/* mem.c: a part's name (heap: the heap's six, else the resident set's
 * six) and value; the parts of each of pids[0 .. n) into out (measured at
 * most every 10 s); the poller's point a minute of every target; target
 * pid's last hour of them (none if it has no history). */
const char *mem_part(bool heap, unsigned i);
uint64_t mem_value(const cli_explain_t *x, bool heap, unsigned i);
void mem_measure(const int *pids, size_t n, mem_t *out);
void mem_sample_all(void);
void mem_history(int pid, memh_t *h);

/* leaks.c: serve --leaks SECS: the sites of each process that grew in
 * every one of the last N intervals of SECS seconds */
typedef struct leak_s {
	char site[256];
	double bytes, per_hour;
} leak_t;
int leaks_start(const char *work, unsigned every_s, unsigned intervals, char *err, size_t len);
void leaks_stop(void);
bool leaks_enabled(void);
size_t leaks_of(int pid, leak_t *out, size_t max);

/* metrics.c: /metrics (pid > 0: that process's series alone), /targets */
enum MHD_Result metrics_serve(struct MHD_Connection *c, long pid);
enum MHD_Result metrics_targets(struct MHD_Connection *c);

/* profiles.c: /debug/pprof/heap and allocs (pprof, or text with debug),
 * /flame?pid=N (svg); /top?file=GROUP/NAME.heap[&base=...] (text),
 * /flame?file=... (svg): an archived dump, or the difference of two. */
enum MHD_Result profiles_live(struct MHD_Connection *c, bool allocs, bool svg, serve_peer_t *peer);
enum MHD_Result profiles_archived(struct MHD_Connection *c, bool svg, serve_peer_t *peer);

/* control.c: POST /control/WHAT?pid=N (on, off, set, dump) */
enum MHD_Result control_serve(struct MHD_Connection *c, const char *what, serve_peer_t *peer);

/* page.c: the web page at / (HTML that needs no JavaScript to be read;
 * its script refreshes the counters and drives the buttons); the page of
 * process pid (/?pid=N), NULL with *found false if it is no target; an
 * error's page: one line (/?pid=N of one that is not there or not the
 * requester's).  All malloc'd, NULL when memory runs out. */
char *page_html(size_t *len, serve_peer_t *peer);
char *page_process(int pid, size_t *len, serve_peer_t *peer, bool *found);
char *page_error(const char *line, size_t *len);
/* / and /?pid=N; /plot?pid=N[&parts=1] */
enum MHD_Result page_serve(struct MHD_Connection *c, serve_peer_t *peer);
enum MHD_Result page_serve_plot(struct MHD_Connection *c);

/* fleet.c: /sd, Prometheus's HTTP service discovery of the processes peer
 * may profile */
enum MHD_Result fleet_serve(struct MHD_Connection *c, serve_peer_t *peer);

/* routes.c: libmicrohttpd's request handler; the endpoints' list (what
 * /debug/pprof/ shows and `heapctl help serve` prints) */
enum MHD_Result routes_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **state);
const char *routes_index(void);

#endif
