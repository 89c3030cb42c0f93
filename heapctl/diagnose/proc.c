/*
 * heapctl/diagnose/proc.c - what target selection, run, systemd, doctor and
 * the engines need to know about processes and programs (proc.h): whether
 * a process has libheapctl.so mapped, what its environment, auxiliary
 * vector, status and mounts say, who it is and when it started, whether a
 * program can be preloaded at all, and running a helper program with its
 * output captured.
 *
 * Everything read from /proc of another process is untrusted text: every
 * read is bounded and every parse tolerates garbage.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "elf/elf.h"

extern char **environ;

/* ---- the library ----------------------------------------------------------- */

/* DIR made (mode 700) if missing, and opened: it must be a directory (not
 * a symlink) of this user's that no one else can write, since what is in
 * it is trusted.  Returns the fd; -1 with why set to the system's reason,
 * or -2 when DIR breaks that rule. */
int cli_private_dir(const char *dir, char *why, size_t len)
{
	struct stat st;
	int fd = -1;
	if ((mkdir(dir, 0700) != 0 && errno != EEXIST) ||
	    ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 && errno != ENOTDIR &&
	        errno != ELOOP) ||
	    (fd >= 0 && fstat(fd, &st) != 0)) {
		snprintf(why, len, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (fd < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		snprintf(why, len, "not a directory of this user's that others cannot write");
		if (fd >= 0)
			close(fd);
		return -2;
	}
	return fd;
}

bool cli_is_library(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return strncmp(b, "libheapctl", 10) == 0 && strstr(b, ".so") != NULL;
}

/* ---- one process ------------------------------------------------------------ */

/* What cli_proc_maps_library looks for and finds. */
typedef struct lib_find_s {
	char *path;
	size_t len;
	bool found;
} lib_find_t;

static bool find_library(const el_map_t *m, void *arg)
{
	lib_find_t *l = arg;
	/* an executable mapping: a load the loader gave up on (a noexec
	 * mount) leaves its first, read-only mapping behind */
	if (el_map_exec_file(m) && cli_is_library(m->path)) {
		l->found = true;
		if (l->path)
			snprintf(l->path, l->len, "%s", m->path);
	}
	return !l->found;
}

bool cli_proc_maps_library(int pid, char *path, size_t len, bool *readable)
{
	lib_find_t l = { path, len, false };
	*readable = el_maps_each(pid, find_library, &l) == 0;
	return l.found;
}

bool cli_proc_fork_pending(int pid, int *ppid)
{
	char v[32], path[64], pexe[64];
	int parent = cli_proc_status_field(pid, "PPid", v, sizeof v) ? atoi(v) : 0;
	if (parent <= 1)
		return false;
	struct stat a, b;
	snprintf(path, sizeof path, "/proc/%d/exe", pid);
	snprintf(pexe, sizeof pexe, "/proc/%d/exe", parent);
	bool readable;
	if (stat(path, &a) != 0 || stat(pexe, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino ||
	    !cli_proc_maps_library(pid, NULL, 0, &readable))
		return false;
	*ppid = parent;
	return true;
}


/* The environment is NUL-separated; -1: unreadable, 0: not set, 1: set. */
int cli_proc_getenv(int pid, const char *name, char *out, size_t len)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/environ", pid);
	static char buf[1 << 18];
	ssize_t n = hc_shm_read_file(p, buf, sizeof buf);
	if (n < 0)
		return -1;
	size_t nl = strlen(name);
	for (char *s = buf; s < buf + n; s += strlen(s) + 1) {
		if (strncmp(s, name, nl) == 0 && s[nl] == '=') {
			snprintf(out, len, "%s", s + nl + 1);
			return 1;
		}
	}
	return 0;
}

bool cli_proc_conf_has(int pid, const char *pair)
{
	char v[4096];
	const char *names[] = { "MALLOC_CONF", "HEAPCTL_CONF" };
	bool last = false, seen = false;
	/* HEAPCTL_CONF wins; within one string the last pair wins */
	for (int i = 0; i < 2; i++) {
		if (cli_proc_getenv(pid, names[i], v, sizeof v) != 1)
			continue;
		char *save = NULL;
		size_t nl = strcspn(pair, ":");
		for (char *t = strtok_r(v, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			if (strncmp(t, pair, nl) == 0 && t[nl] == ':') {
				seen = true;
				last = strcmp(t, pair) == 0;
			}
		}
	}
	return seen && last;
}

/* The rest of the line of /proc/PID/FILE that starts with key and then
 * sep, blanks skipped, into out. */
static bool proc_line(int pid, const char *file, const char *key, char sep, char *out, size_t len)
{
	char p[64], buf[8192];
	snprintf(p, sizeof p, "/proc/%d/%s", pid, file);
	if (hc_shm_read_file(p, buf, sizeof buf) <= 0)
		return false;
	size_t kl = strlen(key);
	for (char *line = buf; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (strncmp(line, key, kl) == 0 && line[kl] == sep) {
			char *v = line + kl + 1;
			v += strspn(v, " \t");
			snprintf(out, len, "%s", v);
			return true;
		}
		line = next;
	}
	return false;
}

/* One "Key:\tvalue" line of /proc/PID/status. */
bool cli_proc_status_field(int pid, const char *key, char *out, size_t len)
{
	return proc_line(pid, "status", key, ':', out, len);
}

bool cli_proc_limit(int pid, const char *name, char *out, size_t len)
{
	char v[128];
	if (!proc_line(pid, "limits", name, ' ', v, sizeof v))
		return false;
	v[strcspn(v, " ")] = 0; /* the soft limit, first of the columns */
	snprintf(out, len, "%s", v);
	return true;
}

/* AT_SECURE of the process: 1 secure execution, 0 not, -1 unknown. */
char cli_proc_state(int pid)
{
	char v[64];
	return cli_proc_status_field(pid, "State", v, sizeof v) ? v[0] : 0;
}

int cli_proc_secure(int pid)
{
	char p[64];
	unsigned long av[256];
	snprintf(p, sizeof p, "/proc/%d/auxv", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, av, sizeof av);
	close(fd);
	for (ssize_t i = 0; i + 1 < n / (ssize_t)sizeof av[0]; i += 2) {
		if (av[i] == AT_NULL)
			break;
		if (av[i] == AT_SECURE)
			return av[i + 1] != 0;
	}
	return -1;
}

bool cli_same_file(const char *a, const char *b)
{
	struct stat x, y;
	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* 1: process pid is in heapctl's mount namespace, 0: in another, -1:
 * unknown (its /proc/PID/ns/mnt cannot be read: another user's). */
int cli_proc_same_mntns(int pid)
{
	char ns[64];
	snprintf(ns, sizeof ns, "/proc/%d/ns/mnt", pid);
	struct stat x;
	if (stat(ns, &x) != 0)
		return -1;
	return cli_same_file("/proc/self/ns/mnt", ns);
}

/* What the paths in /proc/PID/maps are relative to, as heapctl opens them.
 * The kernel writes a mapped file's path from the reader's root (d_path)
 * when the file is reachable from there, which every file of a process in
 * heapctl's mount namespace is, chrooted or not: a chroot's libc shows as
 * /srv/jail/lib/.../libc.so.6, and /proc/PID/root/srv/jail/... is no
 * file.  A process in another mount namespace (a container) has its paths
 * written from that namespace's root, which /proc/PID/root is.  So "" for
 * the first and "/proc/PID/root" for the second (and when it is unknown,
 * as before). */
void cli_proc_maps_root(int pid, char *out, size_t len)
{
	if (cli_proc_same_mntns(pid) == 1)
		snprintf(out, len, "%s", "");
	else
		snprintf(out, len, "/proc/%d/root", pid);
}

/* Where to open a file that process pid maps (path as its maps show it):
 * under cli_proc_maps_root(), else, where that is no file (a namespace
 * unknown, a chroot inside a container), as the maps show it. */
void cli_proc_object_path(int pid, const char *path, char *out, size_t len)
{
	char root[64];
	cli_proc_maps_root(pid, root, sizeof root);
	snprintf(out, len, "%s%s", root, path);
	if (root[0] && access(out, R_OK) != 0)
		snprintf(out, len, "%s", path);
}

/* The unwind table of the ELF object whose first page a process has at
 * base, read from its memory (memfd: its /proc/PID/mem) rather than from
 * a file: the loader maps PT_GNU_EH_FRAME with the text, so the table is
 * there whatever the process's root, its mount namespace, or a file
 * deleted since.  Only the encoding every toolchain writes is taken
 * (version 1; eh_frame_ptr pcrel|sdata4; fde_count udata4; table
 * datarel|sdata4); another leaves nfde 0.  false: no 64-bit ELF object
 * with a loadable segment there. */
bool cli_proc_eh_table(int memfd, uint64_t base, cli_eh_table_t *t)
{
	memset(t, 0, sizeof *t);
	Elf64_Ehdr eh;
	Elf64_Phdr ph[255];
	int nph = el_phdrs(memfd, base, &eh, ph, 255);
	uint64_t first_load = UINT64_MAX, hdr_vaddr = 0;
	for (int i = 0; i < nph; i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first_load)
			first_load = ph[i].p_vaddr & ~(uint64_t)4095;
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			hdr_vaddr = ph[i].p_vaddr;
	}
	if (first_load == UINT64_MAX)
		return false;
	t->bias = eh.e_type == ET_DYN ? base - first_load : 0;
	unsigned char h[12];
	if (hdr_vaddr == 0)
		return true;
	t->hdr = t->bias + hdr_vaddr;
	if (pread(memfd, h, sizeof h, (off_t)t->hdr) == (ssize_t)sizeof h && h[0] == 1 && h[1] == 0x1b &&
	    h[2] == 0x03 && h[3] == 0x3b) {
		uint32_t n;
		memcpy(&n, h + 8, sizeof n);
		t->table = t->hdr + 12;
		t->nfde = n;
	}
	return true;
}

/* heapctl inject's agent in process pid, when it has no segment: its mark
 * (shm/heapctl_shm.h), found by its magic in the agent's writable
 * mappings.  false: no agent mapped, or its memory may not be read. */
typedef struct mark_find_s {
	int mem; /* the process's /proc/PID/mem */
	hc_inject_mark_t *mark;
	bool found;
} mark_find_t;

static bool find_mark(const el_map_t *m, void *arg)
{
	mark_find_t *f = arg;
	const char *b = strrchr(m->path, '/');
	if (m->perms[1] != 'w' || m->hi - m->lo > (1u << 20) || b == NULL ||
	    strncmp(b + 1, "libheapctl-agent", 16) != 0)
		return true;
	static char buf[1u << 20];
	ssize_t n = pread(f->mem, buf, (size_t)(m->hi - m->lo), (off_t)m->lo);
	for (ssize_t o = 0; !f->found && o + (ssize_t)sizeof *f->mark <= n; o += 8) {
		if (memcmp(buf + o, HC_INJECT_MARK_MAGIC, 16) == 0) {
			memcpy(f->mark, buf + o, sizeof *f->mark);
			f->found = true;
		}
	}
	return !f->found;
}

bool cli_proc_inject_mark(int pid, hc_inject_mark_t *mark)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mem", pid);
	mark_find_t f = { open(path, O_RDONLY | O_CLOEXEC), mark, false };
	if (f.mem < 0)
		return false;
	el_maps_each(pid, find_mark, &f);
	close(f.mem);
	return f.found;
}

/* Whether heapctl inject's agent in process pid is inert, from its mark:
 * CLI_AGENT_EJECTED (when gets the time of the eject), CLI_AGENT_UNARMED,
 * or 0 (armed, none, or its memory may not be read). */
int cli_proc_agent_inert(int pid, char *when, size_t len)
{
	hc_inject_mark_t m;
	if (!cli_proc_inject_mark(pid, &m) || m.armed)
		return 0;
	if (m.ejected_ns == 0)
		return CLI_AGENT_UNARMED;
	out_time(m.ejected_ns, when, len);
	return CLI_AGENT_EJECTED;
}

/* The options of the mount that holds path, as the process pid sees it:
 * the per-mount ones (ro, noexec, ...).  false if unknown. */
bool cli_proc_mount_opts(int pid, const char *path, char *opts, size_t len)
{
	char p[64], line[8192];
	snprintf(p, sizeof p, "/proc/%d/mountinfo", pid);
	FILE *f = fopen(p, "re");
	if (f == NULL)
		return false;
	size_t best = 0;
	bool found = false;
	while (fgets(line, sizeof line, f)) {
		/* id parent major:minor root mountpoint options ... */
		char *save = NULL, *fld[6];
		int k = 0;
		for (char *t = strtok_r(line, " ", &save); t && k < 6; t = strtok_r(NULL, " ", &save))
			fld[k++] = t;
		if (k < 6)
			continue;
		const char *mp = fld[4];
		size_t ml = strlen(mp);
		bool under = !strcmp(mp, "/") || (strncmp(path, mp, ml) == 0 && (path[ml] == '/' || path[ml] == 0));
		/* the last of equal mount points is the one on top */
		if (under && ml >= best) {
			best = !strcmp(mp, "/") ? 1 : ml;
			snprintf(opts, len, "%s", fld[5]);
			found = true;
		}
	}
	fclose(f);
	return found;
}

bool cli_opt_has(const char *opts, const char *opt)
{
	size_t l = strlen(opt);
	for (const char *s = opts; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
		if (strncmp(s, opt, l) == 0 && (s[l] == ',' || s[l] == 0 || s[l] == '\n'))
			return true;
	return false;
}

/* ---- programs ------------------------------------------------------------------ */

/* 1: statically linked (no PT_INTERP: the dynamic loader never runs, so
 * nothing is preloaded), 0: dynamic, -1: not an ELF program we can read. */
int cli_elf_static(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	Elf64_Phdr ph[255];
	int n = el_phdrs(fd, 0, &eh, ph, 255);
	close(fd);
	int r = n < 0 ? -1 : 1;
	for (int i = 0; i < n; i++)
		if (ph[i].p_type == PT_INTERP)
			r = 0;
	return r;
}

/* Why the dynamic loader would ignore LD_PRELOAD for this program when
 * started by a user that is not its owner, or NULL. */
const char *cli_program_secure(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return NULL;
	if (st.st_mode & S_ISUID)
		return "set-user-ID";
	if ((st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP))
		return "set-group-ID";
	if (getxattr(path, "security.capability", NULL, 0) > 0)
		return "given file capabilities";
	return NULL;
}

/* ---- running a helper ------------------------------------------------------------ */

/* Run argv (envp NULL: ours) with stdin from /dev/null, capture stdout and
 * stderr (each truncated to its buffer), wait at most timeout_ms.  Returns
 * the exit status (128+signal if killed), or -1 with errno if it could
 * not be run. */
int cli_spawn(char *const argv[], char *const envp[], char *out, size_t outlen, char *err, size_t errlen,
    int timeout_ms)
{
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(pe, O_CLOEXEC) != 0) {
		close(po[0]);
		close(po[1]);
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	pid_t pid;
	int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp ? envp : environ);
	posix_spawn_file_actions_destroy(&fa);
	close(po[1]);
	close(pe[1]);
	if (e) {
		close(po[0]);
		close(pe[0]);
		errno = e;
		return -1;
	}
	size_t no = 0, ne = 0;
	struct pollfd pf[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool killed = false;
	while (pf[0].fd >= 0 || pf[1].fd >= 0) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = timeout_ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0) {
			kill(pid, SIGKILL);
			killed = true;
			break;
		}
		if (poll(pf, 2, (int)left) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			char tmp[4096];
			ssize_t r = read(pf[i].fd, tmp, sizeof tmp);
			if (r <= 0) {
				close(pf[i].fd);
				pf[i].fd = -1;
				continue;
			}
			char *dst = i ? err : out;
			size_t *used = i ? &ne : &no, cap = i ? errlen : outlen;
			size_t take = cap > *used + 1 ? cap - *used - 1 : 0;
			if ((size_t)r < take)
				take = (size_t)r;
			if (dst && take) {
				memcpy(dst + *used, tmp, take);
				*used += take;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	if (out && outlen)
		out[no] = 0;
	if (err && errlen)
		err[ne] = 0;
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (killed) {
		errno = ETIMEDOUT;
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Check a configuration string with the library's own parser: it is loaded
 * into true(1) (with no control thread) and whatever it says on stderr is a
 * mistake in conf.  Returns 0, or prints the first
 * complaint and returns HC_EXIT_USAGE. */
int cli_check_conf(const char *lib, const char *conf)
{
	/* any small dynamic program: the library reads its configuration in
	 * its constructor, whatever the program then does */
	const char *exe = access("/usr/bin/true", X_OK) == 0 ? "/usr/bin/true" : "/bin/true";
	char *pre = NULL, *hc = NULL;
	if (asprintf(&pre, "LD_PRELOAD=%s", lib) < 0 || asprintf(&hc, "HEAPCTL_CONF=%s,control:false", conf) < 0)
		return cli_err(HC_EXIT_FAILED, "out of memory");
	char *envp[] = { pre, hc, NULL };
	char *argv[] = { (char *)exe, NULL };
	char err[2048];
	int st = cli_spawn(argv, envp, NULL, 0, err, sizeof err, 10000);
	free(pre);
	free(hc);
	if (st != 0)
		return cli_err(HC_EXIT_FAILED, "%s could not be loaded to check the configuration (exit %d)", lib, st);
	if (err[0]) {
		err[strcspn(err, "\n")] = 0;
		const char *msg = strncmp(err, "<heapctl>: ", 11) ? err : err + 11;
		return cli_err(HC_EXIT_USAGE, "--conf: %s", msg);
	}
	return 0;
}

/* When a process started, in ns of CLOCK_REALTIME (0: unknown): its start
 * in clock ticks since boot (/proc/PID/stat, field 22, CLOCK_BOOTTIME),
 * plus when the system booted.  10 ms precise, where /proc/stat's btime is
 * whole seconds: a drop-in written and the unit restarted within the same
 * second are told apart. */
int64_t cli_proc_started_ns(int pid)
{
	char line[1024], path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if (hc_shm_read_file(path, line, sizeof line) <= 0)
		return 0;
	char *p = strrchr(line, ')');
	for (int f = 2; p && *p && f < 22; p++)
		if (*p == ' ')
			f++;
	if (p == NULL || *p == 0)
		return 0;
	unsigned long long ticks = strtoull(p, NULL, 10);
	struct timespec rt, bt;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_BOOTTIME, &bt);
	int64_t boot = ((int64_t)rt.tv_sec - bt.tv_sec) * 1000000000 + (rt.tv_nsec - bt.tv_nsec);
	return boot + (int64_t)(ticks * 1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
}

/* The n-th number of a status line such as "Uid:\t0\t0\t0\t0". */
long cli_proc_status_num(int pid, const char *key, int n)
{
	char v[256];
	if (!cli_proc_status_field(pid, key, v, sizeof v))
		return -1;
	char *p = v;
	for (int i = 0; i < n && p; i++) {
		p += strcspn(p, " \t");
		p += strspn(p, " \t");
	}
	return p && *p ? strtol(p, NULL, 10) : -1;
}

/* Who a process of a unit is: its user's name (the uid where it has none)
 * and its command line, as it set it (nginx: "nginx: worker process"). */
void cli_proc_who(int pid, char *user, size_t ulen, char *cmd, size_t clen)
{
	long uid = cli_proc_status_num(pid, "Uid", 1);
	struct passwd *pw = uid >= 0 ? getpwuid((uid_t)uid) : NULL;
	if (pw)
		snprintf(user, ulen, "%s", pw->pw_name);
	else
		snprintf(user, ulen, "%ld", uid);
	char raw[1024];
	out_cmdline(pid, NULL, raw, sizeof raw);
	out_safe(raw, cmd, clen);
}
