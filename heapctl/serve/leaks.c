/*
 * heapctl/serve/leaks.c - leak suspects, live, in the daemon (serve --leaks
 * SECS): every SECS seconds each process writes a dump into the daemon's
 * work directory; once --leak-intervals N + 1 of them are there, `heapctl
 * report --series` of those (the binaries as the process maps them, with
 * its user's rights, as every report of the daemon) says which sites grew
 * in each of the N intervals: what a leak holds only grows, where a cache
 * or a pool gives some back.  /metrics exports them with their growth per
 * hour to those who may see the process's profiles.
 *
 * One thread does it, a process after the other, outside the targets'
 * lock; each process pays one dump per SECS seconds (the dump costs
 * milliseconds: under 0.1% at SECS 60, tests/bench/prof.sh's dump row).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define LEAK_MAX_INTERVALS 30
#define LEAK_MAX_SUSPECTS  20

typedef struct lproc_s {
	int pid;
	unsigned round, have; /* dumps taken; files kept        */
	char files[LEAK_MAX_INTERVALS + 1][64];
	leak_t sus[LEAK_MAX_SUSPECTS];
	size_t nsus;
	bool seen; /* still a target this round      */
} lproc_t;

static struct {
	pthread_mutex_t lock; /* v, n and what they hold        */
	lproc_t *v;
	size_t n;
	unsigned every_s, intervals;
	char dir[PATH_MAX];
} L = { .lock = PTHREAD_MUTEX_INITIALIZER };

size_t leaks_of(int pid, leak_t *out, size_t max)
{
	size_t k = 0;
	pthread_mutex_lock(&L.lock);
	for (size_t i = 0; i < L.n; i++)
		if (L.v[i].pid == pid)
			for (; k < L.v[i].nsus && k < max; k++)
				out[k] = L.v[i].sus[k];
	pthread_mutex_unlock(&L.lock);
	return k;
}

bool leaks_enabled(void)
{
	return L.every_s != 0;
}

/* The value after "key": in one site object of report's JSON (json.c's
 * layout: "key": value, ...), or -1 if it is not there. */
static double json_num(const char *obj, const char *end, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\": ", key);
	const char *p = memmem(obj, (size_t)(end - obj), pat, strlen(pat));
	return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* The sites report --series --json calls leak suspects (only_grew: up in
 * every interval, rp_series_rank's rule). */
static size_t parse_suspects(const char *json, double hours, leak_t *out, size_t max)
{
	size_t n = 0;
	const char *p = strstr(json, "\"sites\": [");
	while (p && n < max && (p = strstr(p, "{\"name\": \"")) != NULL) {
		p += 10;
		leak_t s = { .site = "" };
		size_t k = 0;
		for (; *p && *p != '"' && k + 1 < sizeof s.site; p++) {
			if (*p == '\\' && p[1])
				p++; /* the escaped character itself */
			s.site[k++] = *p;
		}
		s.site[k] = 0;
		const char *end = strchr(p, '}');
		if (end == NULL)
			break;
		const char *yes = memmem(p, (size_t)(end - p), "\"only_grew\": true", 17);
		double growth = json_num(p, end, "growth");
		if (yes != NULL && growth > 0) {
			s.bytes = json_num(p, end, "last");
			s.per_hour = growth / hours;
			out[n++] = s;
		}
		p = end;
	}
	return n;
}

static void drop(lproc_t *x)
{
	for (unsigned i = 0; i < x->have; i++) {
		char path[PATH_MAX + 80];
		snprintf(path, sizeof path, "%s/%s", L.dir, x->files[i]);
		unlink(path);
	}
	x->have = 0;
}

/* One round for one process: a dump, and the suspects once there are
 * enough.  x is this thread's copy; the caller stores it back. */
static void one(lproc_t *x, uid_t uid)
{
	char pids[16], tmo[32], file[64], path[PATH_MAX + 80], err[1024];
	snprintf(pids, sizeof pids, "%d", x->pid);
	snprintf(tmo, sizeof tmo, "%u", 10);
	snprintf(file, sizeof file, "leak.%d.%u.heap", x->pid, x->round++);
	snprintf(path, sizeof path, "%s/%s", L.dir, file);
	char *dump[] = { "dump", pids, "-o", path, "--timeout", tmo, NULL };
	if (serve_run_self(dump, NULL, 0, err, sizeof err, 30000) != 0)
		return; /* gone, or not answering: next time */
	if (x->have == L.intervals + 1) {
		char old[PATH_MAX + 80];
		snprintf(old, sizeof old, "%s/%s", L.dir, x->files[0]);
		unlink(old);
		memmove(x->files, x->files + 1, sizeof x->files[0] * L.intervals);
		x->have--;
	}
	snprintf(x->files[x->have++], sizeof x->files[0], "%s", file);
	if (x->have < L.intervals + 1)
		return;
	char *rep[LEAK_MAX_INTERVALS + 16], uids[16];
	char paths[LEAK_MAX_INTERVALS + 1][PATH_MAX + 80];
	int n = 0;
	snprintf(uids, sizeof uids, "%u", (unsigned)uid);
	rep[n++] = "report";
	rep[n++] = "--series";
	for (unsigned i = 0; i < x->have; i++) {
		snprintf(paths[i], sizeof paths[i], "%s/%s", L.dir, x->files[i]);
		rep[n++] = paths[i];
	}
	rep[n++] = "-p";
	rep[n++] = pids;
	rep[n++] = "--mapped";
	rep[n++] = "--as-user";
	rep[n++] = uids;
	rep[n++] = "--json";
	rep[n] = NULL;
	enum { OUT_MAX = 1 << 20 };
	char *out = malloc(OUT_MAX);
	if (out == NULL)
		return;
	out[0] = 0;
	if (serve_run_self(rep, out, OUT_MAX, err, sizeof err, 120000) == 0)
		x->nsus = parse_suspects(out, (double)L.every_s * L.intervals / 3600.0, x->sus, LEAK_MAX_SUSPECTS);
	free(out);
}

static void *leaks_thread(void *arg)
{
	(void)arg;
	for (;;) {
		size_t nr;
		serve_row_t *rows = serve_rows(&nr);
		pthread_mutex_lock(&L.lock);
		for (size_t i = 0; i < L.n; i++)
			L.v[i].seen = false;
		pthread_mutex_unlock(&L.lock);
		for (size_t r = 0; r < nr && !lim_stopping(); r++) {
			/* this thread's copy of the process's state while it works */
			lproc_t x = { .pid = rows[r].pid };
			pthread_mutex_lock(&L.lock);
			size_t k = 0;
			while (k < L.n && L.v[k].pid != rows[r].pid)
				k++;
			if (k < L.n)
				x = L.v[k];
			pthread_mutex_unlock(&L.lock);
			one(&x, rows[r].uid);
			x.seen = true;
			pthread_mutex_lock(&L.lock);
			for (k = 0; k < L.n && L.v[k].pid != x.pid; k++)
				;
			if (k == L.n) {
				lproc_t *g = realloc(L.v, (L.n + 1) * sizeof *g);
				if (g != NULL) {
					L.v = g;
					L.n++;
				} else {
					k = SIZE_MAX;
				}
			}
			if (k != SIZE_MAX)
				L.v[k] = x;
			pthread_mutex_unlock(&L.lock);
		}
		free(rows);
		/* processes that are gone: their dumps go with them */
		pthread_mutex_lock(&L.lock);
		for (size_t i = 0; i < L.n;) {
			if (L.v[i].seen) {
				i++;
				continue;
			}
			drop(&L.v[i]);
			L.v[i] = L.v[--L.n];
		}
		pthread_mutex_unlock(&L.lock);
		for (unsigned s = 0; s < L.every_s * 10 && !lim_stopping(); s++) {
			struct timespec ts = { 0, 100000000L };
			nanosleep(&ts, NULL);
		}
		if (lim_stopping())
			return NULL;
	}
}

int leaks_start(const char *work, unsigned every_s, unsigned intervals, char *err, size_t len)
{
	if (every_s == 0)
		return 0;
	L.every_s = every_s;
	L.intervals = intervals;
	snprintf(L.dir, sizeof L.dir, "%s/leaks", work);
	if (mkdir(L.dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, len, "cannot make %s: %s", L.dir, strerror(errno));
		return -1;
	}
	pthread_t t;
	int e = pthread_create(&t, NULL, leaks_thread, NULL);
	if (e) {
		snprintf(err, len, "cannot start the leak watcher: %s", strerror(e));
		return -1;
	}
	pthread_detach(t);
	return 0;
}

/* At exit: the dumps it kept (the work directory goes after). */
void leaks_stop(void)
{
	pthread_mutex_lock(&L.lock);
	for (size_t i = 0; i < L.n; i++)
		drop(&L.v[i]);
	L.n = 0;
	pthread_mutex_unlock(&L.lock);
	if (L.every_s)
		rmdir(L.dir);
}
