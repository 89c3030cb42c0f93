/*
 * service - the example daemon `make demo` profiles (tests/demo/demo.sh).
 *
 * A toy HTTP-ish service with a memory problem, written the way real ones
 * are, so that a heap profile of it tells a story:
 *
 *   - two "http-worker" threads make up requests, parse them
 *     (parse_request, parse_headers: short-lived copies, all freed),
 *     look the session up in a shared cache and render a response
 *     (render_response: a temporary buffer, freed);
 *   - a request without a known session creates one:
 *     session_cache_insert() keeps it in a hash table that nothing ever
 *     evicts, and the table itself grows (session_cache_rehash).  This is
 *     the leak: in-use memory grows with every new visitor;
 *   - one "bufpool" thread lends I/O buffers.  Demand creeps up, and when
 *     the pool runs dry grow_buffer_pool() adds buffers it never gives
 *     back: memory that is in use, grows, but is not lost.
 *
 * So in-use space is mostly session_cache_insert, then grow_buffer_pool;
 * allocated space (everything ever allocated) is dominated by
 * parse_request and render_response, whose memory is all freed again.
 *
 *   service [seconds=N]      (default 60: a safety net for the demo)
 *
 * Prints "ready PID" on stdout once its threads run, and exits 0 on
 * SIGTERM or SIGINT, or after N seconds, with one line of totals.
 * Build: gcc -O1 -g -fno-omit-frame-pointer -pthread (the functions are
 * noinline so each one keeps its own frame at -O1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile int stopping; /* set by main on a signal or timeout */
static void *volatile sink;   /* keeps the compiler from dropping work */

static void nap_us(long us)
{
	struct timespec t = { us / 1000000, (us % 1000000) * 1000 };
	while (nanosleep(&t, &t) == -1 && errno == EINTR)
		;
}

static uint64_t rng_next(uint64_t *s) /* xorshift64*: a per-thread PRNG */
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* malloc that gives up when memory runs out.  A macro, so that the
 * allocation site in a profile is the caller, not a wrapper. */
static NOINLINE void *alloc_check(void *p, size_t n)
{
	if (!p) {
		fprintf(stderr, "service: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}
#define xmalloc(n)                           \
	({                                   \
		size_t n_ = (n);             \
		alloc_check(malloc(n_), n_); \
	})

/* ---- requests ---------------------------------------------------------- */

struct header {
	char *name;
	char *value;
	struct header *next;
};

struct request {
	char method[8];
	char *path;
	char *session_id; /* from the Cookie header, NULL if none */
	char *user_agent;
	struct header *headers;
	size_t body_len;
};

/* A raw request as a client would send it.  One in eight comes from a new
 * visitor, whom the server gives session w<worker>-<n>; the others bring
 * the cookie of one of the sessions handed out so far. */
static NOINLINE char *make_request(uint64_t *rng, unsigned worker, unsigned long *visitors, char *buf, size_t len)
{
	static const char *const paths[] = { "/", "/api/items", "/api/cart", "/login", "/static/app.js" };
	static const char *const agents[] = {
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
		"curl/7.88.1",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15",
	};
	uint64_t r = rng_next(rng);
	char cookie[64] = "";
	if (r % 8 != 0 && *visitors > 0) /* a returning visitor */
		snprintf(cookie, sizeof cookie, "Cookie: sid=w%u-%lu\r\n", worker,
		    (unsigned long)((r >> 8) % *visitors));
	else /* a new one */
		snprintf(cookie, sizeof cookie, "X-New-Session: w%u-%lu\r\n", worker, (*visitors)++);
	snprintf(buf, len,
	    "GET %s?id=%lu HTTP/1.1\r\nHost: shop.example.com\r\nUser-Agent: %s\r\n"
	    "Accept: text/html,application/json\r\nAccept-Language: en-GB,en;q=0.9\r\n%s"
	    "Content-Length: %u\r\n\r\n",
	    paths[(r >> 16) % 5], (unsigned long)(r >> 32) % 100000, agents[(r >> 24) % 3], cookie,
	    (unsigned)((r >> 40) % 4096));
	return buf;
}

static NOINLINE struct header *parse_headers(const char *p)
{
	struct header *head = NULL, **tail = &head;
	while (*p && !(p[0] == '\r' && p[1] == '\n')) {
		const char *colon = strchr(p, ':'), *eol = strstr(p, "\r\n");
		if (!colon || !eol || colon > eol)
			break;
		struct header *h = xmalloc(sizeof *h);
		h->name = strndup(p, (size_t)(colon - p));
		const char *v = colon + 1;
		while (*v == ' ')
			v++;
		h->value = strndup(v, (size_t)(eol - v));
		h->next = NULL;
		*tail = h;
		tail = &h->next;
		p = eol + 2;
	}
	return head;
}

static NOINLINE struct request *parse_request(const char *raw)
{
	struct request *req = xmalloc(sizeof *req);
	memset(req, 0, sizeof *req);
	const char *sp = strchr(raw, ' ');
	size_t mlen = sp ? (size_t)(sp - raw) : 0;
	if (mlen >= sizeof req->method)
		mlen = sizeof req->method - 1;
	memcpy(req->method, raw, mlen);
	const char *path = sp ? sp + 1 : raw;
	const char *end = strchr(path, ' ');
	req->path = strndup(path, end ? (size_t)(end - path) : strlen(path));
	const char *eol = strstr(raw, "\r\n");
	req->headers = parse_headers(eol ? eol + 2 : "");
	for (struct header *h = req->headers; h; h = h->next) {
		if (!strcmp(h->name, "Cookie") && !strncmp(h->value, "sid=", 4))
			req->session_id = strdup(h->value + 4);
		else if (!strcmp(h->name, "X-New-Session"))
			req->session_id = strdup(h->value);
		else if (!strcmp(h->name, "User-Agent"))
			req->user_agent = strdup(h->value);
		else if (!strcmp(h->name, "Content-Length"))
			req->body_len = strtoul(h->value, NULL, 10);
	}
	return req;
}

static NOINLINE void free_request(struct request *req)
{
	for (struct header *h = req->headers, *n; h; h = n) {
		n = h->next;
		free(h->name);
		free(h->value);
		free(h);
	}
	free(req->path);
	free(req->session_id);
	free(req->user_agent);
	free(req);
}

/* ---- the session cache: the leak ---------------------------------------- */

struct session {
	char *id;
	char *user_agent;
	char *state; /* per-visitor state blob ("the cart"), 1-3 KiB */
	size_t state_len;
	unsigned long hits;
	struct session *next;
};

static struct {
	pthread_mutex_t lock;
	struct session **buckets;
	size_t nbuckets, count;
} cache = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0 };

static size_t hash_str(const char *s)
{
	size_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

/* Called with the lock held.  The old array is freed; the new one is live. */
static NOINLINE void session_cache_rehash(void)
{
	size_t n = cache.nbuckets ? cache.nbuckets * 2 : 1024;
	struct session **b = calloc(n, sizeof *b);
	if (!b) {
		fprintf(stderr, "service: out of memory (session table)\n");
		exit(1);
	}
	for (size_t i = 0; i < cache.nbuckets; i++)
		for (struct session *s = cache.buckets[i], *next; s; s = next) {
			next = s->next;
			size_t k = hash_str(s->id) & (n - 1);
			s->next = b[k];
			b[k] = s;
		}
	free(cache.buckets);
	cache.buckets = b;
	cache.nbuckets = n;
}

/* Called with the lock held. */
static NOINLINE struct session *session_cache_lookup(const char *id)
{
	if (!cache.nbuckets)
		return NULL;
	for (struct session *s = cache.buckets[hash_str(id) & (cache.nbuckets - 1)]; s; s = s->next)
		if (!strcmp(s->id, id))
			return s;
	return NULL;
}

/* Every new visitor gets a session, and no session is ever evicted. */
static NOINLINE struct session *session_cache_insert(const struct request *req)
{
	struct session *s = xmalloc(sizeof *s);
	s->id = strdup(req->session_id);
	s->user_agent = strdup(req->user_agent ? req->user_agent : "-");
	s->state_len = 1024 + req->body_len / 2;
	s->state = xmalloc(s->state_len);
	memset(s->state, 0, s->state_len);
	s->hits = 0;
	if (cache.count + 1 > cache.nbuckets * 2)
		session_cache_rehash();
	size_t k = hash_str(s->id) & (cache.nbuckets - 1);
	s->next = cache.buckets[k];
	cache.buckets[k] = s;
	cache.count++;
	return s;
}

/* ---- responses ------------------------------------------------------------ */

static NOINLINE size_t render_response(const struct request *req, const struct session *s)
{
	size_t cap = 4096 + req->body_len * 2;
	char *out = xmalloc(cap);
	size_t n = (size_t)snprintf(out, cap,
	    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nSet-Cookie: sid=%s\r\n\r\n"
	    "<html><body><h1>%s</h1><p>visit %lu, agent %s</p>",
	    s->id, req->path, s->hits, s->user_agent);
	while (n + 64 < cap) { /* the page body */
		memcpy(out + n, "<div class=\"item\">lorem ipsum dolor sit amet</div>\n", 52);
		n += 52;
	}
	sink = out;
	free(out);
	return n;
}

static NOINLINE size_t handle_request(const char *raw)
{
	struct request *req = parse_request(raw);
	size_t sent = 0;
	if (req->session_id) {
		pthread_mutex_lock(&cache.lock);
		struct session *s = session_cache_lookup(req->session_id);
		if (!s)
			s = session_cache_insert(req);
		s->hits++;
		pthread_mutex_unlock(&cache.lock);
		sent = render_response(req, s); /* s is never freed: safe without the lock */
	}
	free_request(req);
	return sent;
}

static unsigned long requests_served[2];

static NOINLINE void *http_worker_main(void *arg)
{
	unsigned worker = (unsigned)(uintptr_t)arg;
	char name[16], raw[1024];
	snprintf(name, sizeof name, "http-worker-%u", worker);
	pthread_setname_np(pthread_self(), name);
	uint64_t rng = 0x9e3779b97f4a7c15ull * (worker + 1);
	unsigned long seq = 0, visitors = 0;
	while (!stopping) {
		for (int i = 0; i < 40; i++, seq++) /* a burst of requests */
			handle_request(make_request(&rng, worker, &visitors, raw, sizeof raw));
		requests_served[worker] = seq;
		nap_us(10000); /* ~4,000 requests/s per worker */
	}
	return NULL;
}

/* ---- the buffer pool: grows, never shrinks -------------------------------- */

#define POOL_BUF_SIZE (32 * 1024)

static struct {
	char **free_bufs; /* buffers not lent out */
	size_t nfree, cap, total;
} pool;

static NOINLINE void grow_buffer_pool(size_t more)
{
	if (pool.total + more > pool.cap) {
		size_t cap = pool.cap ? pool.cap * 2 : 16;
		while (cap < pool.total + more)
			cap *= 2;
		char **a = realloc(pool.free_bufs, cap * sizeof *a);
		if (!a) {
			fprintf(stderr, "service: out of memory (buffer pool)\n");
			exit(1);
		}
		pool.free_bufs = a;
		pool.cap = cap;
	}
	for (size_t i = 0; i < more; i++) {
		char *b = xmalloc(POOL_BUF_SIZE);
		memset(b, 0, POOL_BUF_SIZE);
		pool.free_bufs[pool.nfree++] = b;
	}
	pool.total += more;
}

static NOINLINE char *buffer_pool_get(void)
{
	if (pool.nfree == 0)
		grow_buffer_pool(pool.total / 4 + 4);
	return pool.free_bufs[--pool.nfree];
}

static NOINLINE void buffer_pool_put(char *b)
{
	pool.free_bufs[pool.nfree++] = b;
}

static NOINLINE void *bufpool_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "bufpool");
	char **lent = NULL;
	size_t demand = 8;
	while (!stopping) {
		/* more connections in flight every tick: the pool has to follow */
		char **l = realloc(lent, demand * sizeof *l);
		if (!l) {
			fprintf(stderr, "service: out of memory (connections)\n");
			exit(1);
		}
		lent = l;
		for (size_t i = 0; i < demand; i++) {
			lent[i] = buffer_pool_get();
			lent[i][i % POOL_BUF_SIZE] = (char)i; /* "fill it from a socket" */
		}
		for (size_t i = 0; i < demand; i++)
			buffer_pool_put(lent[i]);
		demand += 3;
		nap_us(100000);
	}
	free(lent);
	return NULL;
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
	long seconds = 60;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "seconds=", 8) && atol(argv[i] + 8) > 0) {
			seconds = atol(argv[i] + 8);
		} else {
			fprintf(stderr, "usage: %s [seconds=N]\n", argv[0]);
			return 2;
		}
	}
	/* Signals go to main only (sigtimedwait below); the threads inherit
	 * the blocked mask. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	pthread_t th[3];
	int rc = pthread_create(&th[0], NULL, http_worker_main, (void *)0);
	if (!rc)
		rc = pthread_create(&th[1], NULL, http_worker_main, (void *)1);
	if (!rc)
		rc = pthread_create(&th[2], NULL, bufpool_main, NULL);
	if (rc) {
		fprintf(stderr, "service: pthread_create: %s\n", strerror(rc));
		return 1;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);

	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += seconds;
	const char *why = "time limit";
	for (;;) {
		struct timespec now, wait = { 0, 200 * 1000000 };
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
			break;
		int sig = sigtimedwait(&sigs, NULL, &wait);
		if (sig == SIGTERM) {
			why = "SIGTERM";
			break;
		}
		if (sig == SIGINT) {
			why = "SIGINT";
			break;
		}
	}
	stopping = 1;
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	printf("stopped (%s): %lu requests, %zu sessions kept, %zu pool buffers (%zu KiB)\n", why,
	    requests_served[0] + requests_served[1], cache.count, pool.total, pool.total * POOL_BUF_SIZE / 1024);
	return 0;
}
