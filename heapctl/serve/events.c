/*
 * heapctl/serve/events.c - the event log and /events: the last EVLOG
 * events of every target (read from their rings by targets.c), and the
 * daemon's own found and gone, as the lines `heapctl watch --json` prints,
 * each with who may read it; /events streams them (NDJSON, or server-sent
 * events when asked), and a process's page shows its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "cli/json.h"
#include "serve.h"

/* The last EVLOG events of every target, as the lines `heapctl watch
 * --json` prints, numbered: a stream reader keeps its own position. */
#define EVLOG 1024
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *line[EVLOG];
	uid_t owner[EVLOG]; /* its process's access_owner: who reads it   */
	int pid[EVLOG];     /* its process, for the process's page        */
	uint64_t head;      /* lines ever added                           */
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

void events_add(const serve_target_t *x, const hc_shm_event_t *e)
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
void events_target(const serve_target_t *x, const char *type)
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

char **serve_events_of(int pid, serve_peer_t *peer, size_t max, size_t *n)
{
	*n = 0;
	char **v = calloc(max ? max : 1, sizeof *v);
	if (v == NULL)
		return NULL;
	access_owner_ok(peer, ACCESS_NOBODY); /* its capability now, not under E.lock */
	pthread_mutex_lock(&E.lock);
	uint64_t first = E.head > EVLOG ? E.head - EVLOG : 0;
	for (uint64_t at = E.head; at-- > first && *n < max;) { /* newest first */
		if (E.pid[at % EVLOG] != pid || !access_owner_ok(peer, E.owner[at % EVLOG]))
			continue;
		if ((v[*n] = strdup(E.line[at % EVLOG])) == NULL)
			break;
		(*n)++;
	}
	pthread_mutex_unlock(&E.lock);
	for (size_t i = 0; i < *n / 2; i++) { /* oldest first */
		char *t = v[i];
		v[i] = v[*n - 1 - i];
		v[*n - 1 - i] = t;
	}
	return v;
}

typedef struct reader_s {
	serve_peer_t peer; /* it reads only the lines of its processes   */
	uint64_t next;     /* the next line of the log to send           */
	bool sse;          /* text/event-stream: "data: LINE" blocks      */
	char *pending;     /* a line not yet sent in full                 */
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
		do { /* the next line of a process it may see */
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
					return 0; /* asked again */
				static const char keep[] = ": keepalive\n\n";
				size_t n = sizeof keep - 1 < max ? sizeof keep - 1 : max;
				memcpy(buf, keep, n);
				return (ssize_t)n;
			}
			if (E.head - r->next > EVLOG) /* fell a whole log behind */
				r->next = E.head - EVLOG;
			at = r->next++;
		} while (!access_owner_ok(&r->peer, E.owner[at % EVLOG]));
		const char *line = E.line[at % EVLOG];
		size_t n = strlen(line);
		r->pending = malloc(n + 16);
		if (r->pending) {
			r->len =
			    (size_t)sprintf(r->pending, "%s%s%s", r->sse ? "data: " : "", line, r->sse ? "\n" : "");
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

enum MHD_Result events_serve(struct MHD_Connection *c, const serve_peer_t *peer)
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
	access_owner_ok(&r->peer, ACCESS_NOBODY); /* its capability now, not under E.lock */
	/* ?since=0 gives what the log still holds, else only what comes next */
	long since = query_num(c, "since", LONG_MAX);
	pthread_mutex_lock(&E.lock);
	r->next = since >= 0 ? (uint64_t)since : E.head;
	if (r->next > E.head)
		r->next = E.head;
	pthread_mutex_unlock(&E.lock);
	struct MHD_Response *resp =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, events_read, r, events_free);
	if (resp == NULL) {
		free(r);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
	    r->sse ? "text/event-stream" : "application/x-ndjson");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ok;
}

void events_stop(void)
{
	pthread_mutex_lock(&E.lock);
	E.stopping = true;
	pthread_cond_broadcast(&E.cond);
	pthread_mutex_unlock(&E.lock);
}
