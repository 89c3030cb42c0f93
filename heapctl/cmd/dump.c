/*
 * heapctl/cmd/dump.c - `heapctl dump`: have the target write a heap profile
 * now, and make sure the caller can open the file named on the output.
 *
 *   -o FILE / --prefix P   name the caller's files (relative to the caller's
 *                          directory, as the caller's file system sees it)
 *   neither                the target's prof.prefix; a relative one (the
 *                          default, "jeprof") means the caller's directory,
 *                          never the service's working directory
 *   --fetch                also copy a prof.prefix dump into the caller's
 *                          directory
 *
 * The target writes the file itself when it sees the file system as the
 * caller does and runs as the caller's user.  Otherwise (a container, a
 * PrivateTmp= or ProtectSystem= service, another user) it writes into its
 * own /dev/shm, the directory its segment is in and so one it can provably
 * write, under a name with 64 random bits; heapctl copies that file to the
 * caller's name through /proc/PID/root and removes it.  No protocol change
 * is involved: the staging name is an ordinary -o or --prefix to the target.
 *
 * With no option, a process that cannot write into its own prof.prefix
 * (a worker that switched to another user after the directory was made for
 * the service's first one, a chroot in which the directory does not exist)
 * answers EACCES, EPERM, EROFS or ENOENT: its dump is then staged the same
 * way and copied to the prefix's directory as the caller sees it, or into
 * the caller's directory when the caller cannot write there either.  A
 * failed dump uses no sequence number, so the file has the name it would
 * have had.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "cmd/cmd.h"
#include "cli/json.h"
#include "cli/outfile.h"


typedef struct {
	bool peak, fetch;
	const char *prefix, *file;  /* as given                          */
	char dest[HC_SHM_PATH_MAX]; /* absolute: the file or the prefix  */
	bool dest_is_file;
} dump_opts_t;

/* A dump request.  A process of another PID namespace (a container's, pid
 * 1 in each) is told the pid we know it by, which names the file in its
 * place (see make_name in agent/dump.c): dumps of several containers into
 * one directory then have names of their own.  In our own namespace the
 * field stays empty and the name is jemalloc's exactly.  A library older
 * than this ignores the field: its names carry its own pid, and a name
 * that is taken then gives its place to the next number (copy_out). */
static hc_shm_req_t dump_req(const hc_shm_target_t *t, bool peak)
{
	hc_shm_req_t req = { .cmd = HC_CMD_DUMP, .arg = peak };
	if (t->nspid != t->pid)
		snprintf(req.name, sizeof req.name, "%d", t->pid);
	return req;
}

/* The directory of an absolute path must exist and be writable by us. */
static int check_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= sizeof dir)
		return cli_err(HC_EXIT_USAGE, "dump: %s: file name too long", path);
	memcpy(dir, path, n);
	dir[n] = 0;
	struct stat st;
	if (stat(dir, &st) != 0)
		return cli_err(HC_EXIT_FAILED, "cannot write %s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return cli_err(HC_EXIT_FAILED, "cannot write %s: %s", path, strerror(ENOTDIR));
	if (access(dir, W_OK | X_OK) != 0)
		return cli_err(HC_EXIT_FAILED, "cannot write %s: %s", path, strerror(errno));
	return 0;
}

/* Whether the target can be asked to write dest itself. */
static bool direct(const hc_shm_target_t *t, const dump_opts_t *o)
{
	if (!cli_same_view(t) || geteuid() != t->uid)
		return false;
	struct stat st;
	/* a FIFO or /dev/null is written in place by heapctl, never replaced */
	return !o->dest_is_file || lstat(o->dest, &st) != 0 || S_ISREG(st.st_mode);
}

/* Whether uid is the process's effective or file-system uid now: the
 * user a process that switched users after making its segment (memcached
 * -u, nginx's and haproxy's workers) writes its files as. */
static bool process_uid(int pid, uid_t uid)
{
	char v[128];
	unsigned r, e, sv, fs;
	return cli_proc_status_field(pid, "Uid", v, sizeof v) && sscanf(v, "%u %u %u %u", &r, &e, &sv, &fs) == 4 &&
	    (uid == e || uid == fs);
}

/* The next name of a dump heapctl names from a prefix: after the first
 * fixed bytes of path (the prefix), ".PID.SEQ." with SEQ one higher;
 * false if path is not of that shape or has no room. */
static bool next_name(char *path, size_t len, size_t fixed)
{
	char *p = path + fixed, *seq, *end;
	if (strlen(path) <= fixed || *p != '.' || !isdigit((unsigned char)p[1]))
		return false;
	strtoul(p + 1, &seq, 10);
	if (*seq != '.' || !isdigit((unsigned char)seq[1]))
		return false;
	unsigned long long n = strtoull(seq + 1, &end, 10);
	if (*end != '.' || n == ULLONG_MAX)
		return false;
	char rest[PATH_MAX];
	snprintf(rest, sizeof rest, "%s", end);
	return (size_t)snprintf(seq + 1, len - (size_t)(seq + 1 - path), "%llu%s", n + 1, rest) <
	    len - (size_t)(seq + 1 - path);
}

/* Copy the staged file to dest (the caller's name); the staged file must
 * be a regular file owned by whoever owns the segment, or by the user the
 * process runs as now.  fixed > 0: dest is a name heapctl made from a
 * prefix of that length, which never replaces a file: a name that is
 * taken gives its place to the next number (next_name), and dest is
 * updated (len: its size). */
static int copy_out(const hc_shm_target_t *t, const char *staged, char *dest, size_t len, size_t fixed)
{
	struct stat seg, st;
	int in = open(staged, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return cli_err(HC_EXIT_FAILED, "cannot read the profile process %d wrote, %s: %s", t->pid, staged,
		    strerror(errno));
	if (fstat(in, &st) != 0 || stat(t->path, &seg) != 0 || !S_ISREG(st.st_mode) ||
	    (st.st_uid != seg.st_uid && !process_uid(t->pid, st.st_uid))) {
		close(in);
		return cli_err(HC_EXIT_FAILED, "%s is not the profile process %d wrote: not trusted", staged, t->pid);
	}
	rp_out_t out;
	char err[PATH_MAX + 128];
	if (rp_out_open(&out, dest, err, sizeof err) != 0) {
		close(in);
		return cli_err(HC_EXIT_FAILED, "%s", err);
	}
	int e = rp_copy_fd(in, out.fd);
	close(in);
	if (close(out.fd) != 0 && e == 0)
		e = errno;
	/* 1000 taken names in a row: someone fills the directory */
	for (int i = 0; e == 0 && fixed > 0; i++) {
		const char *base = strrchr(dest, '/');
		e = rp_out_place_new(&out, base ? base + 1 : dest);
		if (e != EEXIST || i == 1000 || !next_name(dest, len, fixed))
			break;
		e = 0;
	}
	if (rp_out_finish(&out, e, NULL, err, sizeof err) != 0)
		return cli_err(HC_EXIT_FAILED, "%s", err);
	return 0;
}

/* A process whose root has no /dev/shm (a chroot made after its segment
 * was) stages into a directory heapctl makes at the top of that root, of
 * the process's user, mode 0700, named with the same random bits, and
 * removes after; only root can make it there.  Returns the directory's
 * fd (O_PATH) or -1 after saying why; name gets its name. */
static int chroot_stage_dir(const hc_shm_target_t *t, const char *rnd, char *name, size_t len)
{
	char root[64], v[128];
	unsigned r, e = 0, sv, fs, gr, ge = 0;
	snprintf(root, sizeof root, "/proc/%d/root", t->pid);
	snprintf(name, len, ".%s%s", CLI_STAGE_BASE, rnd);
	if (!cli_proc_status_field(t->pid, "Uid", v, sizeof v) || sscanf(v, "%u %u %u %u", &r, &e, &sv, &fs) != 4 ||
	    !cli_proc_status_field(t->pid, "Gid", v, sizeof v) || sscanf(v, "%u %u %u %u", &gr, &ge, &sv, &fs) != 4) {
		cli_err(HC_EXIT_NOPROC, "process %d exited", t->pid);
		return -1;
	}
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0 || mkdirat(rfd, name, 0700) != 0) {
		cli_err(HC_EXIT_FAILED,
		    "process %d has no /dev/shm in its root directory (a chroot), and "
		    "heapctl cannot make a directory there to take its dump: %s (run heapctl as root)",
		    t->pid, strerror(errno));
		if (rfd >= 0)
			close(rfd);
		return -1;
	}
	int dfd = openat(rfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fchownat(dfd, "", e, ge, AT_EMPTY_PATH) != 0) {
		cli_err(HC_EXIT_FAILED, "cannot prepare %s/%s for process %d: %s", root, name, t->pid, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		unlinkat(rfd, name, AT_REMOVEDIR);
		close(rfd);
		return -1;
	}
	close(rfd);
	return dfd;
}

/* The target writes into its /dev/shm; we move the file to o->dest. */
static int staged_dump(cli_args_t *a, hc_shm_target_t *t, const dump_opts_t *o, char *path, size_t pathlen,
    uint64_t *bytes)
{
	unsigned char rnd[8];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return cli_err(HC_EXIT_FAILED, "dump: no random bytes: %s", strerror(errno));
	char hex[17], stage[128], cdir[64] = "", in_root[PATH_MAX];
	for (unsigned i = 0; i < sizeof rnd; i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	int cfd = -1;
	snprintf(in_root, sizeof in_root, "/proc/%d/root" HC_SHM_DIR, t->pid);
	struct stat dst;
	if (stat(in_root, &dst) != 0 && errno == ENOENT) {
		if ((cfd = chroot_stage_dir(t, hex, cdir, sizeof cdir)) < 0)
			return HC_EXIT_FAILED;
		snprintf(stage, sizeof stage, "/%s/%s", cdir, CLI_STAGE_BASE);
	} else {
		snprintf(stage, sizeof stage, "%s/" CLI_STAGE_BASE "%s", HC_SHM_DIR, hex);
	}
	hc_shm_req_t req = dump_req(t, o->peak);
	if (o->dest_is_file)
		snprintf(req.text2, sizeof req.text2, "%s.heap", stage);
	else
		snprintf(req.text, sizeof req.text, "%s", stage);
	hc_shm_rep_t rep = { 0 };
	int code = cli_call(a, t, &req, &rep);
	/* the reply names the staged file: believe it only inside our name */
	const char *tail = rep.text + strlen(stage);
	if (code == 0 && (strncmp(rep.text, stage, strlen(stage)) != 0 || strchr(tail, '/') || strstr(tail, "..")))
		code = cli_err(HC_EXIT_ABI, "process %d answered with a file heapctl did not ask for: %s", t->pid,
		    rep.text);
	char staged[PATH_MAX + 64];
	const char *segdir_end = strrchr(t->path, '/');
	if (cfd >= 0)
		snprintf(staged, sizeof staged, "/proc/%d/root%s", t->pid, rep.text);
	else
		snprintf(staged, sizeof staged, "%.*s/%s", (int)(segdir_end - t->path), t->path,
		    rep.text + strlen(HC_SHM_DIR "/"));
	if (code == 0 && o->dest_is_file)
		snprintf(path, pathlen, "%s", o->dest);
	else if (code == 0 && (size_t)snprintf(path, pathlen, "%s%s", o->dest, tail) >= pathlen)
		code = cli_err(HC_EXIT_USAGE, "dump: --prefix %s: file name too long", o->dest);
	if (code == 0)
		code = copy_out(t, staged, path, pathlen, o->dest_is_file ? 0 : strlen(o->dest));
	if (cfd >= 0) {
		/* only the file we asked for, in the directory we made */
		const char *base = strrchr(rep.text, '/');
		if (code == 0 && base)
			unlinkat(cfd, base + 1, 0);
		close(cfd);
		char root[64];
		snprintf(root, sizeof root, "/proc/%d/root", t->pid);
		int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (rfd >= 0) {
			unlinkat(rfd, cdir, AT_REMOVEDIR);
			close(rfd);
		}
	} else if (code == 0 || strncmp(rep.text, stage, strlen(stage)) == 0) {
		unlink(staged);
	}
	*bytes = rep.value;
	return code;
}

/* Errors of a process that cannot write into its prof.prefix's directory. */
static bool unwritable(uint64_t err)
{
	return err == EACCES || err == EPERM || err == EROFS || err == ENOENT;
}

static bool writable_dir(const char *dir)
{
	struct stat st;
	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, W_OK | X_OK) == 0;
}

/* Where the caller gets the dump of a process that cannot write its
 * prof.prefix (absolute, as the process sees it): the prefix's directory
 * as the caller reaches it (cli_local_path: through /proc/PID/root where
 * that is another view; through its master's root for a worker chrooted in
 * a container; by its own path for a chroot on this host, whose root lacks
 * it), else the caller's directory; o->dest gets the prefix. */
static int fallback_prefix(const hc_shm_target_t *t, const char *prefix, bool here, dump_opts_t *o)
{
	const char *base = strrchr(prefix, '/');
	char dir[PATH_MAX], root[64], views[3][PATH_MAX + 64];
	snprintf(dir, sizeof dir, "%.*s", base == prefix ? 1 : (int)(base - prefix), prefix);
	cli_local_path(t, dir, views[0], sizeof views[0]);
	if (hc_shm_proc_root(t->pid, root, sizeof root) != 0)
		snprintf(root, sizeof root, "/proc/%d/root", t->pid);
	cli_path_under(root, dir, views[1], sizeof views[1]);
	snprintf(views[2], sizeof views[2], "%s", dir);
	for (unsigned i = 0; i < 3 && !here; i++) {
		if (writable_dir(views[i]) &&
		    (size_t)snprintf(o->dest, 1024, "%s%s", strcmp(views[i], "/") ? views[i] : "", base) < 1024)
			return 0;
	}
	if (!here)
		fprintf(stderr,
		    "%s: process %d cannot write into its prof.prefix %s, nor can you: "
		    "the dump goes into the current directory\n",
		    cli_prog, t->pid, prefix);
	return cli_absolute("dump: prof.prefix", base + 1, o->dest, 1024);
}

enum { D_PEAK = 256, D_FETCH, D_PREFIX };
static const cli_opt_t dump_opts[] = {
	{ "prefix", D_PREFIX, "P", "write the dump as P.<pid>.<seq>.m<n>.heap (the target writes it)" },
	{ "output", 'o', "FILE", "write it to FILE (- standard output), fetched by heapctl" },
	{ "fetch", D_FETCH, NULL,
	    "fetch it into the current directory (a target that cannot write "
	    "where you can read)" },
	{ "peak", D_PEAK, NULL, "the samples of the high-water mark (prof.peak) instead of now" },
	{ 0 },
};

static int parse(cli_args_t *a, dump_opts_t *o)
{
	cli_scan_t sc;
	int code = cli_scan_begin(&sc, a, "dump", dump_opts, false);
	const char *v;
	for (int id; code == 0 && (id = cli_scan_next(&sc, &v)) != 0;) {
		switch (id) {
		case D_PEAK: o->peak = true; break;
		case D_FETCH: o->fetch = true; break;
		case D_PREFIX: o->prefix = v; break;
		case 'o': o->file = v; break;
		case CLI_OPERAND: code = cli_err(HC_EXIT_USAGE, "dump: unexpected argument '%s'", v); break;
		default: code = -id;
		}
	}
	cli_scan_end(&sc);
	if (code)
		return code;
	if (o->prefix && o->file)
		return cli_err(HC_EXIT_USAGE, "dump: give --prefix or -o, not both");
	/* paths below are used with a tail appended by the target: keep room */
	if (o->prefix)
		return cli_absolute("dump: --prefix", o->prefix, o->dest, 1024);
	if (o->file) {
		o->dest_is_file = true;
		if (!strcmp(o->file, "-")) {
			strcpy(o->dest, "-");
			return 0;
		}
		return cli_absolute("dump: -o", o->file, o->dest, sizeof o->dest);
	}
	return 0;
}

const cli_help_t cmd_help_dump = {
	.usage = "[PID] [--prefix P | -o FILE | --fetch] [--peak] [--json]",
	.line = "write a heap profile now and print a path you can open",
	.opts = dump_opts,
};

int cmd_dump(cli_args_t *a)
{
	dump_opts_t o = { 0 };
	int code = parse(a, &o);
	if (code)
		return code;
	hc_shm_target_t t;
	if ((code = cli_target(a, &t)) != 0)
		return code;
	hc_shm_state_t st;
	if (o.prefix == NULL && o.file == NULL) {
		if (!hc_shm_state_read(&t.seg->state, &st)) {
			hc_shm_close(&t);
			return cli_err(HC_EXIT_ABI,
			    "process %d: the settings in %s never held still "
			    "(corrupt segment?)",
			    t.pid, t.path);
		}
		/* jemalloc's default prefix is relative to the service's working
		 * directory, where nobody would look: use ours instead */
		if (st.prefix[0] != '/' && (code = cli_absolute("dump: prof.prefix", st.prefix, o.dest, 1024)) != 0) {
			hc_shm_close(&t);
			return code;
		}
	}
	char path[PATH_MAX + HC_SHM_PATH_MAX], target_path[HC_SHM_PATH_MAX] = "";
	uint64_t bytes = 0;
	bool fetched = false;
	if (o.dest[0] == 0) {
		/* the target's own absolute prof.prefix */
		hc_shm_req_t req = dump_req(&t, o.peak);
		hc_shm_rep_t rep;
		code = cli_call_raw(a, &t, &req, &rep);
		if (code == 0 && rep.code == HC_REP_FAILED && unwritable(rep.value)) {
			/* a worker that dropped privileges, a chroot: staged instead */
			code = fallback_prefix(&t, st.prefix, o.fetch, &o);
			if (code == 0)
				code = staged_dump(a, &t, &o, path, sizeof path, &bytes);
			fetched = true;
		} else if (code == 0 && (code = cli_reply(&t, &rep)) == 0) {
			bytes = rep.value;
			hc_shm_strlcpy(target_path, rep.text, sizeof target_path);
			cli_local_path(&t, rep.text, path, sizeof path);
			if (o.fetch) {
				char here[PATH_MAX + HC_SHM_PATH_MAX];
				const char *base = strrchr(rep.text, '/');
				code = cli_absolute("dump --fetch", base ? base + 1 : rep.text, here, sizeof here);
				/* the prefix's own name ends where the target's tail starts */
				const char *pbase = strrchr(st.prefix, '/');
				size_t fixed = strlen(here) - strlen(base ? base + 1 : rep.text) +
				    strlen(pbase ? pbase + 1 : st.prefix);
				if (code == 0 && (code = copy_out(&t, path, here, sizeof here, fixed)) == 0) {
					strcpy(path, here);
					fetched = true;
				}
			}
		}
	} else if (strcmp(o.dest, "-") != 0 && (code = check_dir(o.dest)) != 0) {
		/* nothing asked of the target */
	} else if (strcmp(o.dest, "-") != 0 && direct(&t, &o)) {
		hc_shm_req_t req = dump_req(&t, o.peak);
		snprintf(o.dest_is_file ? req.text2 : req.text, sizeof req.text, "%s", o.dest);
		hc_shm_rep_t rep;
		if ((code = cli_call(a, &t, &req, &rep)) == 0) {
			bytes = rep.value;
			snprintf(path, sizeof path, "%s", rep.text);
			hc_shm_strlcpy(target_path, rep.text, sizeof target_path);
		}
	} else {
		code = staged_dump(a, &t, &o, path, sizeof path, &bytes);
		fetched = true;
	}
	uint64_t since = t.seg ? __atomic_load_n(&t.seg->hdr.counts_since_ns, __ATOMIC_RELAXED) : 0;
	if (code == 0 && since) {
		char when[64];
		fprintf(stderr,
		    "%s: process %d was injected (heapctl inject): the profile counts what was allocated "
		    "from %s on, not before\n",
		    cli_prog, t.pid, out_time(since, when, sizeof when));
	}
	if (code == 0 && strcmp(path, "-") != 0) {
		if (a->json) {
			json_t j;
			json_begin(&j, stdout, JSON_LINE);
			json_obj(&j, NULL);
			json_i64(&j, "pid", t.pid);
			json_i64(&j, "nspid", t.nspid);
			json_str(&j, "path", path);
			json_str(&j, "target_path", target_path[0] ? target_path : NULL);
			json_bool(&j, "fetched", fetched);
			json_u64(&j, "bytes", bytes);
			json_u64(&j, "counts_since_ns", since);
			json_end(&j);
		} else {
			char safe[4 * sizeof path];
			printf("%s\n", out_safe(path, safe, sizeof safe));
		}
	}
	hc_shm_close(&t);
	return code;
}
