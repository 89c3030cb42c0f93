/*
 * heapctl/serve/serve.c - `heapctl serve`: the control daemon.  It finds
 * every process that runs the library (as `heapctl list` does, every
 * half second: targets.c) and serves, over HTTP (libmicrohttpd):
 *
 *   /metrics               the segments' counters for every target, in the
 *                          Prometheus text format or OpenMetrics (by Accept)
 *   /targets               the same as JSON
 *   /sd                    Prometheus's HTTP service discovery (fleet.c)
 *   /debug/pprof/heap      a profile taken now, symbolized, as gzipped
 *   /debug/pprof/allocs    profile.proto (Go's net/http/pprof conventions:
 *                          ?pid=N, ?seconds=S for a delta, ?debug=1 text)
 *
 * and the rest routes.c lists.  This file is the command: its options, the
 * work directory and the symbol cache, the poller thread, and the start
 * and stop of the daemon.  The other files, each one job:
 *
 *   access.c    who a requester is, and which processes she may see
 *   self.c      the daemon's own paths, running itself, scrubbing its paths
 *   limits.c    what one peer may hold of the daemon
 *   listen.c    the listening socket, the token, the Host check
 *   respond.c   how an answer is made
 *   archive.c   the dump archive, /archive
 *   events.c    the event log and /events
 *   targets.c   the process table and the scan that fills it
 *   mem.c       where each process's resident memory goes
 *   leaks.c     leak suspects (--leaks)
 *   metrics.c   /metrics, /targets
 *   profiles.c  /debug/pprof/heap and allocs, /flame, /top
 *   control.c   POST /control/...
 *   page.c      the web page and its plots
 *   fleet.c     /sd
 *   routes.c    the URL table
 *
 * Each calls only files above it in this list (serve.c calls them all).
 * Built as libheapctl-serve.so, which heapctl loads for `serve` alone (the
 * other commands need no HTTP library).  Nothing here runs in a target.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "serve.h"

#define POLL_MS 500

static unsigned parts_every_ms; /* --parts-every: memory parts for the page  */
static bool own_symcache;       /* the symbol cache is in the work directory:
                                 * removed at exit                          */

/* ---- the symbol cache ----------------------------------------------------
 * Every report the daemon runs is given --symcache DIR: a module's frames
 * are kept there by build id, and the next scrape of any process that maps
 * it reads no symbol table or debug file of it (heapctl/symbolize/symcache.c).
 * Once a minute the directory is held under SYMCACHE_MAX, the files least
 * recently written going first (a file is written when it gains addresses). */
#define SYMCACHE_MAX ((uint64_t)256 << 20)

typedef struct {
	char name[200];
	uint64_t bytes;
	struct timespec mtime;
} cfile_t;

static int cfile_older(const void *a, const void *b)
{
	const cfile_t *x = a, *y = b;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : x->mtime.tv_nsec > y->mtime.tv_nsec;
}

static void symcache_trim(uint64_t max)
{
	DIR *d = serve_conf.symcache[0] ? opendir(serve_conf.symcache) : NULL;
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

/* ---- the poller ----------------------------------------------------------- */

static void *poller(void *arg)
{
	(void)arg;
	uint64_t parts_last = hc_shm_mono_ns();
	for (unsigned round = 1;; round++) {
		/* where each process's memory goes, for its page's stacked plot:
		 * a point a minute, measured without the targets' lock */
		uint64_t now = hc_shm_mono_ns();
		if (round == 2 || now - parts_last >= (uint64_t)parts_every_ms * 1000000u) {
			mem_sample_all();
			parts_last = now;
		}
		/* as heapctl list: segments of processes, and of containers'
		 * PID namespaces, that are gone; once a minute, from the start */
		if (round % (60000 / POLL_MS) == 1)
			hc_shm_clean_stale(true);
		targets_scan();
		lim_sweep();
		if (round % (60000 / POLL_MS) == 0)
			symcache_trim(SYMCACHE_MAX);
		struct timespec ts = { 0, POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
	return NULL;
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
	unsigned long long unit = *end == 0 || *end == 's' ? 1
	    : *end == 'm'                                  ? 60
	    : *end == 'h'                                  ? 3600
	    : *end == 'd'                                  ? 86400
	                                                   : 0;
	if (unit == 0 || n > UINT64_MAX / unit)
		return false;
	*out = n * unit;
	return true;
}

enum {
	O_LISTEN = 256,
	O_TOKEN,
	O_ARCHIVE,
	O_KEEP,
	O_MAX_BYTES,
	O_MAX_AGE,
	O_MAX_DUMP,
	O_SYMCACHE,
	O_PARTS,
	O_LEAKS,
	O_LEAK_N
};
static const cli_opt_t serve_opts[] = {
	{ "listen", O_LISTEN, "ADDR", "HOST:PORT, [IPV6]:PORT or unix:PATH (default 127.0.0.1:9447; port 0: any)" },
	{ "token-file", O_TOKEN, "FILE",
	    "requests must carry 'Authorization: Bearer TOKEN' (FILE's first "
	    "line); needed to listen beyond loopback" },
	{ NULL, 0, NULL, "the archive:" },
	{ "archive", O_ARCHIVE, "DIR",
	    "copy every dump of every process into DIR/GROUP/ (GROUP: its systemd unit, "
	    "else its program), with a symbolized pprof beside it" },
	{ "keep", O_KEEP, "N", "keep the newest N dumps of each group and user (default 50, 0: all)" },
	{ "max-bytes", O_MAX_BYTES, "SIZE",
	    "keep each user's dumps under SIZE, oldest out first (default 1G, "
	    "0: no limit)" },
	{ "max-dump", O_MAX_DUMP, "SIZE", "archive no dump over SIZE (default 256M)" },
	{ "max-age", O_MAX_AGE, "AGE", "remove dumps older than AGE: 90s, 30m, 12h, 7d (default: none)" },
	{ NULL, 0, NULL, "symbols:" },
	{ "symcache", O_SYMCACHE, "DIR",
	    "keep each module's symbols in DIR by build id between scrapes, "
	    "256 MiB at most (default: in the work directory, gone at exit; 'off': none)" },
	{ NULL, 0, NULL, "the page:" },
	{ "parts-every", O_PARTS, "SECS",
	    "measure where each process's memory goes (its page's stacked plot) "
	    "every SECS seconds (default 60; the plot holds 60 points)" },
	{ NULL, 0, NULL, "leak suspects:" },
	{ "leaks", O_LEAKS, "SECS",
	    "dump each process every SECS seconds and export the sites that grew in "
	    "each of the last --leak-intervals intervals in /metrics (default: off)" },
	{ "leak-intervals", O_LEAK_N, "N", "intervals a site must grow in, in a row (default 5)" },
	{ NULL, 0, NULL, NULL }
};

void hc_serve_help(FILE *f);
void hc_serve_help(FILE *f)
{
	fputs("\noptions:\n", f);
	cli_opts_help(f, serve_opts);
	fprintf(f, "\nendpoints:\n%s", routes_index() + sizeof "heapctl serve\n");
}

/* The work directory at exit, with the symbol cache if it is there. */
static void work_remove(void)
{
	leaks_stop();
	if (own_symcache) {
		symcache_trim(0);
		rmdir(serve_conf.symcache);
	}
	rmdir(serve_conf.work);
}

typedef struct serve_args_s {
	const char *listen, *token_file, *archive, *symcache;
	uint64_t keep, max_bytes, max_age, max_dump;
	unsigned leak_every, leak_n;
} serve_args_t;

/* --parts-every, --leaks and --leak-intervals: whole numbers in a range,
 * read as --keep is */
static int num_option(serve_args_t *o, int id, const char *v)
{
	static const struct {
		const char *name, *what;
		unsigned lo, hi;
	} num[] = {
		{ "parts-every", "seconds", 1, 3600 },
		{ "leaks", "a whole number", 1, 86400 },
		{ "leak-intervals", "a whole number", 2, 30 },
	};
	unsigned k = id == O_PARTS ? 0 : id == O_LEAKS ? 1 : 2;
	uint64_t n;
	if (!parse_count(v, &n) || n < num[k].lo || n > num[k].hi)
		return cli_err(HC_EXIT_USAGE, "serve: --%s %s: want %s from %u to %u", num[k].name, v, num[k].what,
		    num[k].lo, num[k].hi);
	if (k == 0)
		parts_every_ms = (unsigned)n * 1000;
	else
		*(k == 1 ? &o->leak_every : &o->leak_n) = (unsigned)n;
	return 0;
}

/* --keep, --max-bytes, --max-age, --max-dump */
static int archive_option(serve_args_t *o, int id, const char *v)
{
	bool size = id == O_MAX_BYTES || id == O_MAX_DUMP;
	uint64_t *dst = id == O_KEEP ? &o->keep
	    : id == O_MAX_BYTES      ? &o->max_bytes
	    : id == O_MAX_DUMP       ? &o->max_dump
	                             : &o->max_age;
	bool ok = id == O_KEEP ? parse_count(v, dst)
	    : size             ? hc_shm_parse_bytes(v, dst) && (id != O_MAX_DUMP || *dst > 0)
	                       : parse_age(v, dst);
	if (!ok)
		return cli_err(HC_EXIT_USAGE, "serve: --%s %s: want %s",
		    id == O_KEEP            ? "keep"
		        : id == O_MAX_BYTES ? "max-bytes"
		        : id == O_MAX_DUMP  ? "max-dump"
		                            : "max-age",
		    v,
		    id == O_KEEP ? "a whole number"
		        : size   ? "a size like 500M or 2G"
		                 : "an age like 90s, 30m, 12h or 7d");
	return 0;
}

/* The command line into o: 0, or the exit code after its message. */
static int serve_args(cli_args_t *a, serve_args_t *o)
{
	*o = (serve_args_t){ .listen = "127.0.0.1:9447",
		.keep = 50,
		.max_bytes = (uint64_t)1 << 30,
		.max_dump = (uint64_t)256 << 20,
		.leak_n = 5 };
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "serve", serve_opts, false);
	if (code)
		return code;
	const char *v;
	int id;
	while (code == 0 && (id = cli_scan_next(&sc, &v)) > 0) {
		if (id == O_LISTEN)
			o->listen = v;
		else if (id == O_TOKEN)
			o->token_file = v;
		else if (id == O_ARCHIVE)
			o->archive = v;
		else if (id == O_SYMCACHE)
			o->symcache = v;
		else if (id == O_PARTS || id == O_LEAKS || id == O_LEAK_N)
			code = num_option(o, id, v);
		else if (id == O_KEEP || id == O_MAX_BYTES || id == O_MAX_AGE || id == O_MAX_DUMP)
			code = archive_option(o, id, v);
		else
			code = cli_err(HC_EXIT_USAGE, "serve: unexpected argument '%s'%s", v,
			    strspn(v, "0123456789") == strlen(v) ? " (it serves every process; ask for one with ?pid=N)"
			                                         : "");
	}
	cli_scan_end(&sc);
	if (code)
		return code;
	if (id < 0)
		return -id;
	if (a->pid)
		return cli_err(HC_EXIT_USAGE, "serve: it serves every process; ask for one with ?pid=N");
	if (o->token_file && (code = listen_token_file(o->token_file)) != 0)
		return code;
	if (!o->archive &&
	    (o->keep != 50 || o->max_bytes != (uint64_t)1 << 30 || o->max_age || o->max_dump != (uint64_t)256 << 20))
		return cli_err(HC_EXIT_USAGE,
		    "serve: --keep, --max-bytes, --max-age and --max-dump are for --archive DIR");
	return 0;
}

/* The work directory (private, for profiles in flight), and the symbol
 * cache: in it unless symcache names one ("off": none). */
static int work_make(const char *symcache)
{
	const char *rt = getenv("RUNTIME_DIRECTORY"); /* systemd's, else /tmp */
	snprintf(serve_conf.work, sizeof serve_conf.work, "%s/heapctl-serve.XXXXXX", rt && *rt == '/' ? rt : "/tmp");
	if (mkdtemp(serve_conf.work) == NULL)
		return cli_err(HC_EXIT_FAILED, "serve: cannot make a work directory: %s", strerror(errno));
	arch_skip(serve_conf.work);
	int code;
	if (symcache == NULL) {
		if (strlen(serve_conf.work) + sizeof "/symcache" <= sizeof serve_conf.symcache) {
			memcpy(serve_conf.symcache, serve_conf.work, strlen(serve_conf.work));
			strcpy(serve_conf.symcache + strlen(serve_conf.work), "/symcache");
			own_symcache = true;
		}
	} else if (strcmp(symcache, "off") != 0 &&
	    (code = cli_absolute("serve --symcache", symcache, serve_conf.symcache, sizeof serve_conf.symcache)) != 0) {
		rmdir(serve_conf.work);
		return code;
	}
	/* as report checks it: the names in it are shown as the programs' */
	if (serve_conf.symcache[0]) {
		char why[256];
		int dfd = cli_private_dir(serve_conf.symcache, why, sizeof why);
		if (dfd < 0) {
			own_symcache = false;
			work_remove();
			return cli_err(HC_EXIT_USAGE, "serve: --symcache %s: %s", serve_conf.symcache, why);
		}
		close(dfd);
	}
	return 0;
}

/* libmicrohttpd on listening socket fd: a thread a connection (a profile's
 * handler waits on its children); limits.c bounds what each peer holds and
 * for how long, and poll() lets the connections pass FD_SETSIZE */
static struct MHD_Daemon *http_start(int fd)
{
	struct rlimit nf;
	if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_cur < 4096) {
		nf.rlim_cur = nf.rlim_max < 4096 ? nf.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &nf);
	}
	return MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL | MHD_USE_ERROR_LOG, 0, NULL,
	    NULL, routes_handle, NULL, MHD_OPTION_EXTERNAL_LOGGER, lim_log, NULL, /* first: it logs the others */
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, 1000u, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
	    MHD_OPTION_NOTIFY_CONNECTION, lim_connection, NULL, MHD_OPTION_NOTIFY_COMPLETED, lim_completed, NULL,
	    MHD_OPTION_END);
}

int hc_serve_main(cli_args_t *a);
int hc_serve_main(cli_args_t *a)
{
	serve_args_t o;
	int code = serve_args(a, &o);
	if (code)
		return code;
	serve_conf.timeout_ns = a->timeout_ns;
	if (parts_every_ms == 0)
		parts_every_ms = 60000;
	ssize_t n = readlink("/proc/self/exe", serve_conf.exe, sizeof serve_conf.exe - 1);
	if (n <= 0)
		return cli_err(HC_EXIT_FAILED, "serve: cannot tell where heapctl is: %s", strerror(errno));
	serve_conf.exe[n] = 0;
	if (o.archive &&
	    (code = arch_init(o.archive, o.keep > UINT_MAX ? UINT_MAX : (unsigned)o.keep, o.max_bytes, o.max_age,
	         o.max_dump)) != 0)
		return code;
	if (arch_enabled()) /* scrubbed from answers as the daemon's own */
		snprintf(serve_conf.archive, sizeof serve_conf.archive, "%s", arch_dir());
	if ((code = work_make(o.symcache)) != 0)
		return code;

	char shown[PATH_MAX + 16];
	bool loopback = false;
	int fd = listen_open(o.listen, shown, sizeof shown, &loopback);
	if (fd < 0) {
		work_remove();
		return HC_EXIT_USAGE;
	}
	if (!loopback && !listen_has_token()) {
		close(fd);
		work_remove();
		return cli_err(HC_EXIT_USAGE, "serve: --listen %s reaches beyond this host: give --token-file FILE",
		    o.listen);
	}
	if (!targets_init())
		return cli_err(HC_EXIT_FAILED, "out of memory");

	/* signals go to sigwait below, not to the server's threads */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	targets_scan();
	pthread_t th;
	if (pthread_create(&th, NULL, poller, NULL) != 0)
		return cli_err(HC_EXIT_FAILED, "serve: cannot start a thread");
	char why[PATH_MAX + 128];
	if (leaks_start(serve_conf.work, o.leak_every, o.leak_n, why, sizeof why) != 0) {
		work_remove();
		return cli_err(HC_EXIT_FAILED, "serve: %s", why);
	}
	struct MHD_Daemon *d = http_start(fd);
	if (d == NULL) {
		close(fd);
		work_remove();
		return cli_err(HC_EXIT_FAILED, "serve: libmicrohttpd would not start on %s", shown);
	}
	printf("heapctl serve: listening on %s\n", shown);
	fflush(stdout);
	int sig = 0;
	sigwait(&sigs, &sig);
	events_stop(); /* /events readers end their streams */
	/* within systemd's stop timeout whatever is in flight: the children
	 * are killed, and a thread that still will not end is left to exit() */
	if (!lim_stop(d, 3000))
		fprintf(stderr, "heapctl serve: requests still in flight after 3 s were cut off\n");
	if (strncmp(o.listen, "unix:", 5) == 0)
		unlink(o.listen + 5);
	work_remove();
	return 0;
}
