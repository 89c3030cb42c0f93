/*
 * heapctl/serve/limits.c - what one peer may hold of the daemon, so that no
 * local user can lock the others out (issue 37).
 *
 * The peer is who is on the other end: the uid of a Unix socket's client
 * (SO_PEERCRED), the uid that owns the client's socket of a loopback TCP
 * connection (access_tcp_peer: the kernel's socket table), else its IP
 * address.  Every connection is listed here from its accept to its close,
 * and:
 *
 *   - a peer holds at most LIM_CONNS connections; one more is answered 429
 *     and closed at once (the daemon has a thread a connection);
 *   - a connection must send a request's headers within LIM_HEADER_S of
 *     its accept or of its last request's end, and any request that is not
 *     a profile or a stream must be over within LIM_REQUEST_S: silent, slow
 *     and idle connections are shut by the poller's sweep;
 *   - a peer has at most LIM_PROFILES profiles (dump and report children)
 *     and LIM_STREAMS /events streams in flight; beyond, 429 with a
 *     Retry-After;
 *   - a seconds= wait ends when its client hangs up or the daemon stops.
 *
 * Root (and the daemon's own user) is not counted: it can stop the daemon
 * anyway, and its scrapers run many requests at once.  The timeouts apply
 * to everyone.  libmicrohttpd's log lines (one per bad request) are kept
 * to LIM_LOG_LINES in a minute that starts at the first of them, and a
 * line says how many more there were.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve.h"

#define LIM_CONNS     16
#define LIM_PROFILES  3
#define LIM_STREAMS   4
#define LIM_HEADER_S  10
#define LIM_REQUEST_S 60
#define LIM_LOG_LINES 20

/* One connection, from its accept to its close.  Invariant: in L.conns
 * exactly while libmicrohttpd has its socket open, so fd is its. */
typedef struct lim_conn_s {
	struct lim_conn_s *prev, *next;
	int fd;
	uint64_t peer; /* lim_peer()'s key                          */
	bool counted;  /* not root's: the caps apply                */
	bool busy;     /* a request's headers are in, not yet over  */
	bool shut;     /* the sweep shut it                         */
	int kind;      /* LIM_PROFILE, LIM_STREAM or 0              */
	time_t since;  /* accept, last request's start or end       */
} lim_conn_t;

static struct {
	pthread_mutex_t lock;
	lim_conn_t *conns;
	volatile int stopping;
	/* the log */
	time_t log_start; /* the window's first line (open while log_lines) */
	unsigned log_lines;
	unsigned long log_dropped;
} L = { .lock = PTHREAD_MUTEX_INITIALIZER };

static time_t mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/* ---- who is on the other end ---------------------------------------------- */

/* The peer of connection fd: 1<<32 | uid when its user is known, else its
 * address (2<<32 | an IPv4 address, 3<<62 | a hash of an IPv6 one). */
static uint64_t lim_peer(int fd, bool *root)
{
	*root = false;
	struct ucred cr;
	socklen_t cl = sizeof cr;
	struct sockaddr_storage them;
	socklen_t tl = sizeof them;
	uid_t uid;
	bool known = false;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 && cr.pid > 0) {
		uid = cr.uid; /* a Unix socket's client */
		known = true;
	} else if (getpeername(fd, (struct sockaddr *)&them, &tl) == 0) {
		unsigned long inode;
		known = access_tcp_peer(fd, (struct sockaddr *)&them, &uid, &inode);
		if (!known && them.ss_family == AF_INET)
			return 2ull << 32 | ((struct sockaddr_in *)&them)->sin_addr.s_addr;
		if (!known) {
			uint64_t h = 1469598103934665603ull; /* FNV-1a of the address */
			const unsigned char *a = (const unsigned char *)&((struct sockaddr_in6 *)&them)->sin6_addr;
			for (unsigned i = 0; i < 16; i++)
				h = (h ^ a[i]) * 1099511628211ull;
			return 3ull << 62 | (h >> 2);
		}
	}
	if (!known)
		return 0;
	*root = uid == 0 || uid == geteuid();
	return 1ull << 32 | uid;
}

/* ---- connections ------------------------------------------------------------ */

/* A refusal written on a connection that has not asked anything yet: the
 * client reads it as the answer to what it sends. */
static void refuse_raw(int fd)
{
	char body[96], msg[256];
	int bl =
	    snprintf(body, sizeof body, "heapctl: too many connections from you: at most %d at a time\n", LIM_CONNS);
	int n = snprintf(msg, sizeof msg,
	    "HTTP/1.1 429 Too Many Requests\r\nRetry-After: %d\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
	    LIM_HEADER_S, bl, body);
	ssize_t sent = send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)sent;
	shutdown(fd, SHUT_RDWR);
}

void lim_connection(void *cls, struct MHD_Connection *c, void **sock, enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		lim_conn_t *x = *sock;
		if (x == NULL)
			return;
		pthread_mutex_lock(&L.lock);
		if (x->prev)
			x->prev->next = x->next;
		else
			L.conns = x->next;
		if (x->next)
			x->next->prev = x->prev;
		pthread_mutex_unlock(&L.lock);
		free(x);
		*sock = NULL;
		return;
	}
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	lim_conn_t *x = ci ? calloc(1, sizeof *x) : NULL;
	if (x == NULL) {
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR);
		return;
	}
	bool root;
	x->fd = ci->connect_fd;
	x->peer = lim_peer(x->fd, &root);
	x->counted = !root;
	x->since = mono_s();
	unsigned held = 0;
	pthread_mutex_lock(&L.lock);
	for (lim_conn_t *y = L.conns; y && x->counted; y = y->next)
		held += y->peer == x->peer && !y->shut;
	if ((x->next = L.conns) != NULL)
		L.conns->prev = x;
	L.conns = x;
	if (held >= LIM_CONNS || L.stopping) {
		x->shut = true;
		refuse_raw(x->fd);
	}
	pthread_mutex_unlock(&L.lock);
	*sock = x;
}

static lim_conn_t *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

void lim_request(struct MHD_Connection *c)
{
	lim_conn_t *x = conn_of(c);
	if (x == NULL)
		return;
	pthread_mutex_lock(&L.lock);
	if (!x->busy) {
		x->busy = true;
		x->since = mono_s();
	}
	pthread_mutex_unlock(&L.lock);
}

void lim_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)con_cls;
	(void)toe;
	lim_conn_t *x = conn_of(c);
	if (x == NULL)
		return;
	pthread_mutex_lock(&L.lock);
	x->busy = false;
	x->kind = 0;
	x->since = mono_s();
	pthread_mutex_unlock(&L.lock);
}

bool lim_take(struct MHD_Connection *c, int kind)
{
	lim_conn_t *x = conn_of(c);
	if (x == NULL)
		return true;
	unsigned held = 0;
	bool ok = true;
	pthread_mutex_lock(&L.lock);
	for (lim_conn_t *y = L.conns; y && x->counted; y = y->next)
		held += y != x && y->peer == x->peer && y->kind == kind;
	if (held >= (kind == LIM_PROFILE ? LIM_PROFILES : LIM_STREAMS))
		ok = false;
	else
		x->kind = kind;
	pthread_mutex_unlock(&L.lock);
	return ok;
}

enum MHD_Result lim_refuse(struct MHD_Connection *c, int kind)
{
	char body[160];
	int n = snprintf(body, sizeof body,
	    kind == LIM_PROFILE ? "heapctl: %d profiles of yours are in flight already: try again when one is done\n"
	                        : "heapctl: %d /events streams of yours are open already: close one\n",
	    kind == LIM_PROFILE ? LIM_PROFILES : LIM_STREAMS);
	struct MHD_Response *r = MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, kind == LIM_PROFILE ? "5" : "30");
	MHD_add_response_header(r, "X-Go-Pprof", "1"); /* go tool pprof prints the line */
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, r);
	MHD_destroy_response(r);
	return ok;
}

void lim_sweep(void)
{
	time_t now = mono_s();
	pthread_mutex_lock(&L.lock);
	for (lim_conn_t *x = L.conns; x; x = x->next) {
		time_t limit = !x->busy ? LIM_HEADER_S : x->kind == 0 ? LIM_REQUEST_S : 0;
		if (!x->shut && limit && now - x->since >= limit) {
			/* libmicrohttpd reads the end of the stream and closes it */
			x->shut = true;
			shutdown(x->fd, SHUT_RDWR);
		}
	}
	pthread_mutex_unlock(&L.lock);
	lim_log_flush();
}

int lim_wait(struct MHD_Connection *c, long seconds)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (L.stopping)
			return 2;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = seconds * 1000 - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return 0;
		/* the handler has this connection's thread: nobody else reads
		 * the socket, and a client that hung up shows as RDHUP */
		struct pollfd p = { ci ? ci->connect_fd : -1, POLLRDHUP, 0 };
		if (poll(&p, 1, left < 250 ? (int)left : 250) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return 1;
	}
}

/* ---- stopping --------------------------------------------------------------- */

/* Kill every child of this process (a dump or report in flight): their
 * requests end at once.  The children of each thread are listed in
 * /proc/self/task/TID/children. */
static void kill_children(void)
{
	DIR *d = opendir("/proc/self/task");
	if (d == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char p[64];
		snprintf(p, sizeof p, "/proc/self/task/%.20s/children", e->d_name);
		FILE *f = fopen(p, "re");
		int pid;
		while (f && fscanf(f, "%d", &pid) == 1)
			if (pid > 0)
				kill(pid, SIGKILL);
		if (f)
			fclose(f);
	}
	closedir(d);
}

static void *stop_thread(void *d)
{
	MHD_stop_daemon(d);
	return NULL;
}

bool lim_stop(struct MHD_Daemon *d, unsigned max_ms)
{
	L.stopping = 1;
	pthread_t th;
	if (pthread_create(&th, NULL, stop_thread, d) != 0) {
		kill_children();
		MHD_stop_daemon(d);
		return true;
	}
	/* a handler may start one more child after a kill: kill again until
	 * libmicrohttpd has joined every connection's thread */
	for (unsigned ms = 0; ms < max_ms; ms += 50) {
		kill_children();
		if (pthread_tryjoin_np(th, NULL) == 0)
			return true;
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
	pthread_detach(th);
	return false;
}

bool lim_stopping(void)
{
	return L.stopping;
}

/* ---- the log ------------------------------------------------------------------ */

/* Under L.lock: when the window's minute is over, the count of its dropped
 * lines, and no window until the next line.  A window starts at its first
 * line, not on the clock's minute, so that a burst gets LIM_LOG_LINES lines
 * whenever it comes, not up to twice that across a minute's turn. */
static void log_window_locked(time_t now)
{
	if (L.log_lines == 0 || now - L.log_start < 60)
		return;
	if (L.log_dropped)
		fprintf(stderr,
		    "heapctl serve: %lu more libmicrohttpd messages in the last minute were not logged "
		    "(%d a minute at most)\n",
		    L.log_dropped, LIM_LOG_LINES);
	L.log_lines = 0;
	L.log_dropped = 0;
}

void lim_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	pthread_mutex_lock(&L.lock);
	time_t now = mono_s();
	log_window_locked(now);
	if (L.log_lines == 0)
		L.log_start = now;
	if (L.log_lines < LIM_LOG_LINES) {
		L.log_lines++;
		char line[512];
		vsnprintf(line, sizeof line, fmt, ap);
		line[strcspn(line, "\r\n")] = 0;
		fprintf(stderr, "heapctl serve: %s\n", line);
	} else {
		L.log_dropped++;
	}
	pthread_mutex_unlock(&L.lock);
}

void lim_log_flush(void)
{
	pthread_mutex_lock(&L.lock);
	log_window_locked(mono_s());
	pthread_mutex_unlock(&L.lock);
}
