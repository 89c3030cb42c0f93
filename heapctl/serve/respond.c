/*
 * heapctl/serve/respond.c - how the daemon answers a request: a buffer
 * with its type, an error as its status and one line of text (with the
 * header go tool pprof needs to show it), a failed `heapctl` child's exit
 * code as an HTTP status and its message in the requester's terms, what a
 * memstream built, an HTML page; and the one reader of a number in the
 * query.  Every route file answers through these.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "serve.h"

enum MHD_Result respond_buf(struct MHD_Connection *c, unsigned status, const char *type, const void *body, size_t len)
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

enum MHD_Result respond_err(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
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

/* A failed `heapctl` child's answer: its status, and its message (err)
 * in the requester's terms (serve_scrub with what), or fallback. */
enum MHD_Result respond_child(struct MHD_Connection *c, int rc, const char *err, const char *what, const char *fallback)
{
	char msg[1024];
	serve_scrub(err[0] ? err : fallback, what, msg, sizeof msg);
	return respond_err(c, child_status(rc), "%s", msg);
}

/* Respond with what a memstream built (and free it): buf and len are the
 * ones given to open_memstream, set when f is closed. */
enum MHD_Result respond_stream(struct MHD_Connection *c, const char *type, FILE *f, char **buf, size_t *len)
{
	if (fclose(f) != 0 || *buf == NULL) {
		free(*buf);
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	}
	enum MHD_Result ok = respond_buf(c, MHD_HTTP_OK, type, *buf, *len);
	free(*buf);
	return ok;
}

enum MHD_Result respond_html(struct MHD_Connection *c, unsigned status, char *html, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, html, MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(html);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	/* the page's own style and script, requests to this daemon, nothing else */
	MHD_add_response_header(r, "Content-Security-Policy",
	    "default-src 'self'; script-src 'unsafe-inline'; "
	    "style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'none'");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

/* A number parameter: digits only, at most max.  -1 if absent, -2 if bad. */
long query_num(struct MHD_Connection *c, const char *name, long max)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	if (v == NULL)
		return -1;
	if (*v == 0 || strlen(v) > 9 || strspn(v, "0123456789") != strlen(v))
		return -2;
	long n = strtol(v, NULL, 10);
	return n > max ? -2 : n;
}
