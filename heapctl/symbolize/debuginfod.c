/*
 * heapctl/symbolize/debuginfod.c - where a module's separate debug file is:
 * the paths it is looked up at on this host (by build id, by
 * .gnu_debuglink, under the sysroot's debug directory), and debuginfod
 * servers.
 *
 * With DEBUGINFOD_URLS set, libdwfl asks those servers (elfutils' client,
 * with its cache) for the debug file of a module by build id when none is
 * on the machine, and by_dump_build_id (symbolize.c) asks them for a file
 * of the dump's build id.  A server that does not answer must not hold the
 * report: DEBUGINFOD_TIMEOUT is 10 s and DEBUGINFOD_RETRY_LIMIT 0 unless
 * the user set them, and after one query that ran into the timeout no more
 * are made.  What was asked for and not found is said on one line
 * (rp_profile_t.note, rp_debuginfod_note).
 *
 * The settings go through the environment because that is the only way
 * elfutils 0.188 takes them: its client reads DEBUGINFOD_URLS, _TIMEOUT and
 * _RETRY_LIMIT with getenv at each query, has no setter for them, and the
 * client libdwfl makes for itself is not ours to configure.  debuginfod_env
 * is the one function that changes the environment.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "report/report.h"
#include "report/rp_internal.h"

#define DEBUGINFOD_DEFAULT_TIMEOUT "10"

static const char *debug_root; /* <sysroot>/usr/lib/debug */
static char *missing;          /* "name (build id X), ..." */
static bool server_silent;     /* a query ran into the timeout */
static const char *urls;       /* DEBUGINFOD_URLS as it was */

double rp_debuginfod_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool rp_debuginfod_asking(void)
{
	const char *u = getenv("DEBUGINFOD_URLS");
	return u && *u;
}

/* The environment elfutils' debuginfod client reads (see the opening
 * comment): our defaults where the user set none; with stop, no server is
 * asked again (the client sees no URLs). */
static void debuginfod_env(bool stop)
{
	if (stop) {
		unsetenv("DEBUGINFOD_URLS");
		return;
	}
	if (getenv("DEBUGINFOD_TIMEOUT") == NULL)
		setenv("DEBUGINFOD_TIMEOUT", DEBUGINFOD_DEFAULT_TIMEOUT, 1);
	if (getenv("DEBUGINFOD_RETRY_LIMIT") == NULL)
		setenv("DEBUGINFOD_RETRY_LIMIT", "0", 1); /* its default: two more tries */
}

void rp_debug_begin(const char *root)
{
	debug_root = rp_strcat3(root && *root ? root : "", "/usr/lib/debug", "");
	if (rp_debuginfod_asking()) {
		urls = rp_intern(getenv("DEBUGINFOD_URLS"));
		debuginfod_env(false);
	}
	missing = NULL;
}

bool rp_debug_build_id_path(const char *hex, char *path, size_t len)
{
	int n = snprintf(path, len, "%s/.build-id/%.2s/%s.debug", debug_root, hex, hex + 2);
	return strlen(hex) >= 4 && n > 0 && (size_t)n < len;
}

bool rp_debug_link_path(const char *file, const char *link, int k, char *path, size_t len)
{
	const char *slash = file ? strrchr(file, '/') : NULL;
	if (link == NULL || *link == 0 || strchr(link, '/') || slash == NULL)
		return false;
	int dl = (int)(slash - file);
	int n = k == 0 ? snprintf(path, len, "%.*s/%s", dl, file, link)
	    : k == 1   ? snprintf(path, len, "%.*s/.debug/%s", dl, file, link)
	               : snprintf(path, len, "%s%.*s/%s", debug_root, dl, file, link);
	return n > 0 && (size_t)n < len && strcmp(path, file) != 0;
}

/* Whether a query begun at t0 ran into DEBUGINFOD_TIMEOUT; then no server
 * is asked again for the rest of the files. */
static bool timed_out(double t0)
{
	const char *to = getenv("DEBUGINFOD_TIMEOUT");
	double limit = to && atof(to) > 0 ? atof(to) : 90;
	if (rp_debuginfod_now() - t0 < limit * 0.9)
		return false;
	server_silent = true;
	debuginfod_env(true);
	return true;
}

void rp_debuginfod_missed(Dwfl_Module *mod, const char *modname, double t0)
{
	timed_out(t0);
	const unsigned char *id;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &id, &vaddr);
	char hex[2 * 64 + 1] = "";
	for (int i = 0; i < len && i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	const char *b = strrchr(modname, '/');
	char one[1024];
	snprintf(one, sizeof one, "%s (build id %s)", b ? b + 1 : modname, len > 0 ? hex : "none");
	if (missing && strstr(missing, one))
		return; /* libdwfl asks once for each kind of data */
	missing = (char *)rp_strcat3(missing ? missing : "", missing ? ", " : "", one);
}

/* libdebuginfod, loaded when a server is to be asked (as libdwfl loads it):
 * the executable by build id, else its debug file; an fd or -1. */
int rp_debuginfod_by_id(const char *hex, char **name)
{
	static void *h;
	static debuginfod_client *(*begin)(void);
	static int (*find_exe)(debuginfod_client *, const unsigned char *, int, char **);
	static int (*find_debug)(debuginfod_client *, const unsigned char *, int, char **);
	static debuginfod_client *client;
	if (!rp_debuginfod_asking())
		return -1;
	if (h == NULL && (h = dlopen("libdebuginfod.so.1", RTLD_LAZY | RTLD_LOCAL)) != NULL) {
		begin = (debuginfod_client * (*)(void)) dlsym(h, "debuginfod_begin");
		find_exe = (int (*)(debuginfod_client *, const unsigned char *, int, char **))dlsym(h,
		    "debuginfod_find_executable");
		find_debug = (int (*)(debuginfod_client *, const unsigned char *, int, char **))dlsym(h,
		    "debuginfod_find_debuginfo");
		client = begin ? begin() : NULL;
	}
	if (client == NULL || find_exe == NULL || find_debug == NULL)
		return -1;
	/* a build id given as hex: length 0; a server that did not answer is
	 * not asked again, as in find_debuginfo */
	double t0 = rp_debuginfod_now();
	int fd = find_exe(client, (const unsigned char *)hex, 0, name);
	if (fd < 0 && !timed_out(t0))
		fd = find_debug(client, (const unsigned char *)hex, 0, name);
	if (fd < 0)
		timed_out(t0);
	return fd >= 0 ? fd : -1;
}

const char *rp_debuginfod_note(void)
{
	if (missing == NULL)
		return NULL;
	const char *to = getenv("DEBUGINFOD_TIMEOUT");
	char head[1024];
	if (server_silent)
		snprintf(head, sizeof head,
		    "debuginfod (%s) did not answer within %s s, and was not asked again; "
		    "no debug info for: ",
		    urls, to ? to : "?");
	else
		snprintf(head, sizeof head, "debuginfod (%s) gave no debug info for: ", urls);
	return rp_strcat3(head, missing, "");
}

static bool stat_file(const char *path, struct stat *st)
{
	return stat(path, st) == 0 && S_ISREG(st->st_mode);
}

bool rp_debug_source(Elf *e, const char *file, const char *hex, char *what, size_t len)
{
	struct stat st;
	char path[4096];
	if (rp_debug_build_id_path(hex, path, sizeof path) && stat_file(path, &st)) {
		snprintf(what, len, "debug file by build id: %lld bytes, %lld.%09ld", (long long)st.st_size,
		    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
		return true;
	}
	GElf_Word crc = 0;
	const char *link = dwelf_elf_gnu_debuglink(e, &crc);
	for (int k = 0; k < 3; k++)
		if (rp_debug_link_path(file, link, k, path, sizeof path) && stat_file(path, &st)) {
			snprintf(what, len, "debuglink %.200s %08x: %lld bytes, %lld.%09ld", link, (unsigned)crc,
			    (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
			return true;
		}
	if (!rp_debuginfod_asking()) {
		snprintf(what, len, "no debug file");
		return true;
	}
	/* where elfutils' client keeps what servers sent */
	const char *c = getenv("DEBUGINFOD_CACHE_PATH"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	char dir[2048] = "";
	if (c && *c)
		snprintf(dir, sizeof dir, "%s", c);
	else if (x && *x)
		snprintf(dir, sizeof dir, "%s/debuginfod_client", x);
	else if (h && *h)
		snprintf(dir, sizeof dir, "%s/.cache/debuginfod_client", h);
	snprintf(path, sizeof path, "%s/%s/debuginfo", dir, hex);
	if (dir[0] && stat_file(path, &st)) {
		snprintf(what, len, "debuginfod: %lld bytes, %lld.%09ld", (long long)st.st_size,
		    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
		return true;
	}
	return false; /* a server may still send one: not cached */
}
