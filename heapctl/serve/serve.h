/*
 * heapctl/serve/serve.h - what the daemon's files share: a target as the
 * daemon keeps it, running this heapctl as a child, and the archive.
 */
#ifndef HC_SERVE_H
#define HC_SERVE_H

#include <microhttpd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "cli/cli.h"

typedef struct serve_target_s {
	hc_shm_target_t t;
	char command[256];
	char unit[128];            /* systemd unit from /proc/PID/cgroup, or "" */
	char container[128];       /* machine, docker or podman id, or ""       */
	char user[64];             /* its real uid's name, else the number      */
	uint64_t next_ev;          /* the next ring event to read               */
	uint64_t gdumps, dumps_failed;   /* events seen since it was found     */
	bool seen;                 /* in this round's scan                      */
	uid_t owner;               /* who may see it (access_owner), this round */
	bool same_view;            /* it sees our files at our paths (its mount
	                            * namespace and root are ours): known while
	                            * it lived, for the final dump after it     */
	struct serve_hist_s *hist;  /* the last hour, for the page's plot      */
} serve_target_t;

/* A target's counters every HIST_STEP_S seconds over the last hour. */
#define HIST_STEP_S 5
#define HIST_N (3600 / HIST_STEP_S)
typedef struct serve_hist_s {
	unsigned n, head;          /* points kept; the next to write           */
	int64_t last;              /* time of the newest                        */
	struct { int64_t t; uint64_t allocated, resident, highwater; } p[HIST_N];
} serve_hist_t;

/* access.c: who is asking (see its opening comment). */
#define ACCESS_NOBODY ((uid_t)-1)  /* an owner only CAP_SYS_PTRACE may see  */
typedef struct serve_peer_s {
	bool all;                  /* the token, or CAP_SYS_PTRACE: everything  */
	bool known;                /* uid is the requester's                    */
	bool cap_known;            /* all is settled (else: looked up if needed) */
	uid_t uid;
	int pid;                   /* on the Unix socket, else 0                */
	unsigned long inode;       /* on TCP: the peer's socket                 */
	char why[96];              /* when not known: why not                   */
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
/* A command line's program, without its directory and arguments, for a
 * title ("redis-server"); "process" if it has none. */
void serve_program(const char *command, char *out, size_t len);

/* One target as the page shows it: a copy, read under the targets' lock. */
typedef struct serve_row_s {
	int pid;
	char command[256], unit[128], container[128], user[64];
	uid_t uid, owner;          /* its real uid; who may see it (access_owner) */
	hc_shm_state_t st;
} serve_row_t;
/* serve.c: every target's row (free it); NULL and *n 0 when there are none */
serve_row_t *serve_rows(size_t *n);
/* serve.c: the last max lines of /events about process pid that peer may
 * read, oldest first; free each and the array.  NULL and *n 0 when there
 * are none. */
char **serve_events_of(int pid, serve_peer_t *peer, size_t max, size_t *n);

/* page.c: the web page at / (HTML that needs no JavaScript to be read;
 * its script refreshes the counters and drives the buttons), and the plot
 * of one target's last hour as SVG (for the caller, who holds the lock).
 * Both malloc'd, NULL when memory runs out. */
char *page_html(size_t *len, serve_peer_t *peer);
/* page.c: the page of process pid (/?pid=N), NULL with *found false if it
 * is no target; an error's page: status and one line (/?pid=N of one
 * that is not there or not the requester's). */
char *page_process(int pid, size_t *len, serve_peer_t *peer, bool *found);
char *page_error(const char *line, size_t *len);
char *page_plot(const serve_hist_t *h, int pid, size_t *len);

/* A half-written file (".NAME.tmp") in dfd: true if name is one, which is
 * removed when it is ours and over age seconds old (age 0: whatever its
 * age, when no writer can be left). */
bool serve_tmp_file(int dfd, const char *name, time_t age);

/* archive.c */
typedef struct arch_entry_s {
	char group[256], name[256];     /* name: without .heap                  */
	long long uid;                  /* its process's user, -1 if not named  */
	uint64_t bytes;                 /* .heap and .pb.gz                     */
	int64_t time_s;
	uid_t owner;                    /* the dumped process's access_owner     */
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

/* fleet.c: /sd, Prometheus's HTTP service discovery of the processes peer
 * may profile: the HTTP status, and in *body (malloc'd) the JSON or, for
 * a 400, its one line without the newline; *body NULL when memory ran
 * out.  fleet_user: uid's name, else its number. */
unsigned fleet_sd(struct MHD_Connection *c, serve_peer_t *peer, char **body, size_t *len);
void fleet_user(uid_t uid, char *out, size_t len);

/* limits.c: what one peer (a uid, else an address) may hold of the daemon.
 * lim_connection and lim_completed are libmicrohttpd's connection and
 * request-completed callbacks, lim_log its logger (a bounded rate). */
enum { LIM_PROFILE = 1, LIM_STREAM };
void lim_connection(void *cls, struct MHD_Connection *c, void **sock, enum MHD_ConnectionNotificationCode toe);
void lim_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe);
void lim_log(void *cls, const char *fmt, va_list ap);
/* handle(): a request's headers are in */
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

#endif
