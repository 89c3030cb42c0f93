/*
 * heapctl/serve/listen.c - listening and who may ask: the socket the daemon
 * listens on (HOST:PORT, [V6]:PORT or unix:PATH), the bearer token (its
 * file, and its check in the same time whatever matches), the Host a
 * request on loopback TCP must name, and the requester a request is from
 * (everyone's with the token, else the peer the kernel names: access.c).
 * What a loopback or Unix socket allows is decided here once, at start.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/cli.h"
#include "serve.h"

static struct {
	char token[256];  /* "" when none is needed                     */
	bool open_reads;  /* loopback: GETs need no token (POSTs do)    */
	bool check_host;  /* loopback TCP: the Host must be loopback    */
	bool unix_socket; /* no browser reaches it: control by the peer */
} S;

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
	for (size_t i = 0; i < n; i++) /* the same time whatever matches */
		diff |= (unsigned char)(S.token[i] ^ (i < m ? h[i] : 0));
	return diff == 0;
}

bool listen_has_token(void)
{
	return S.token[0] != 0;
}

bool listen_may_read(struct MHD_Connection *c)
{
	return S.open_reads || token_ok(c);
}

bool listen_control_ok(const serve_peer_t *peer)
{
	return peer->all || S.unix_socket;
}

enum MHD_Result listen_unauthorized(struct MHD_Connection *c)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(sizeof "a bearer token is needed\n" - 1,
	    (void *)"a bearer token is needed\n", MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	MHD_add_response_header(r, "X-Go-Pprof", "1"); /* go tool pprof prints the line */
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, r);
	MHD_destroy_response(r);
	return ok;
}

/* On a loopback address, the Host a request names must be a loopback one:
 * a web page whose name was made to resolve to 127.0.0.1 (DNS rebinding)
 * would otherwise read every profile through the visitor's browser. */
bool listen_host_ok(struct MHD_Connection *c)
{
	if (!S.check_host)
		return true;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	if (h == NULL)
		return true; /* HTTP/1.0 without one: not a browser */
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
void listen_peer(struct MHD_Connection *c, serve_peer_t *p)
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
			return cli_err(HC_EXIT_USAGE,
			           "serve: --listen unix:PATH needs an absolute path of at most %zu bytes",
			           sizeof su.sun_path - 1),
			       -1;
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
		.ai_socktype = SOCK_STREAM },
	                *ai;
	int e = getaddrinfo(host, colon + 1, &hints, &ai);
	if (e)
		return cli_err(HC_EXIT_USAGE, "serve: --listen %s: %s (an IP address and a port number)", spec,
		           gai_strerror(e)),
		       -1;
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

int listen_open(const char *spec, char *shown, size_t len, bool *loopback)
{
	int fd = listen_on(spec, shown, len, loopback);
	if (fd < 0)
		return -1;
	S.open_reads = *loopback;
	S.check_host = *loopback && strncmp(spec, "unix:", 5) != 0;
	S.unix_socket = strncmp(spec, "unix:", 5) == 0;
	return fd;
}

/* The token: the file's first line, at least 16 bytes; the file must not
 * be readable by others. */
int listen_token_file(const char *path)
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
		return cli_err(HC_EXIT_USAGE,
		    "serve: --token-file %s must be a regular file only its owner can read "
		    "(chmod 600)",
		    path);
	}
	ssize_t n = read(fd, S.token, sizeof S.token - 1);
	close(fd);
	S.token[n > 0 ? n : 0] = 0;
	S.token[strcspn(S.token, "\r\n")] = 0;
	if (strlen(S.token) < 16 || strspn(S.token, "\t ") || strchr(S.token, ' ')) {
		S.token[0] = 0;
		return cli_err(HC_EXIT_USAGE,
		    "serve: the token in %s must be one line of at least 16 characters "
		    "and no spaces",
		    path);
	}
	return 0;
}
