/*
 * heapctl/serve/access.c - who is asking, and which processes that one may
 * see.  The daemon runs as root and could show every profile to anyone
 * who connects; it shows a requester exactly the processes whose
 * /proc/PID/maps the requester could read itself (the kernel's ptrace
 * read rule), so that a profile, which carries the target's address
 * layout and its paths, is no more visible through the daemon than
 * through /proc.  No token and no configuration: the kernel names the
 * peer.
 *
 *   Unix socket   SO_PEERCRED: the uid and pid of the process that
 *                 connected.
 *   loopback TCP  the peer's own socket, looked up in the kernel's socket
 *                 table (sock_diag, or /proc/net/tcp{,6} where netlink is
 *                 not allowed): the one whose local address:port is our
 *                 connection's remote one and whose remote one is our
 *                 local one.  It gives the uid that created the socket
 *                 and its inode;
 *                 the processes holding that inode (/proc/PID/fd) say
 *                 whether the peer has CAP_SYS_PTRACE, looked up only
 *                 when a decision needs it.
 *
 * What this rests on, and its limits: the uid of a TCP socket is its
 * creator's, kept when the socket is passed to another process or the
 * creator changes uid (a root that opened the connection and then dropped
 * to nobody is still root here; a nobody's socket passed to root is
 * nobody's).  Loopback is per network namespace, so a peer in another one
 * cannot reach a loopback listener; a listener beyond loopback has no such
 * peer to look up and needs the token.  SO_PEERCRED is taken at connect().
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "diagnose/proc.h"
#include "serve.h"

#define CAP_SYS_PTRACE_BIT 19

/* Does pid have CAP_SYS_PTRACE in our user namespace?  CapEff is relative
 * to the process's own user namespace: a container's root has every bit
 * of it there, and none of them here. */
static bool has_ptrace_cap(int pid)
{
	char v[64], a[64];
	struct stat ours, theirs;
	snprintf(a, sizeof a, "/proc/%d/ns/user", pid);
	if (stat("/proc/self/ns/user", &ours) != 0 || stat(a, &theirs) != 0 || ours.st_ino != theirs.st_ino ||
	    ours.st_dev != theirs.st_dev || !cli_proc_status_field(pid, "CapEff", v, sizeof v))
		return false;
	errno = 0;
	char *end;
	unsigned long long caps = strtoull(v, &end, 16);
	return errno == 0 && end != v && (caps >> CAP_SYS_PTRACE_BIT) & 1;
}

uid_t access_owner(int pid)
{
	char v[128];
	unsigned r, e, s;
	if (!cli_proc_status_field(pid, "Uid", v, sizeof v) || sscanf(v, "%u %u %u", &r, &e, &s) != 3 || r != e ||
	    e != s)
		return ACCESS_NOBODY;
	/* a process that is not dumpable has its /proc/PID files owned by
	 * root (the kernel's task_dump_owner): the test the kernel applies
	 * to a reader of its maps who has no CAP_SYS_PTRACE */
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	if (stat(path, &st) != 0 || st.st_uid != r)
		return ACCESS_NOBODY;
	return r;
}

/* ---- the peer of a TCP connection ------------------------------------------------ */

/* An address as /proc/net/tcp and tcp6 print it: the raw 32-bit words of
 * the network-order address, each as the host reads it, in hex. */
static bool hex_addr(const struct sockaddr *sa, char *out, size_t len, unsigned *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)sa;
		snprintf(out, len, "%08X", (unsigned)s4->sin_addr.s_addr);
		*port = ntohs(s4->sin_port);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;
		uint32_t w[4];
		memcpy(w, &s6->sin6_addr, sizeof w);
		snprintf(out, len, "%08X%08X%08X%08X", (unsigned)w[0], (unsigned)w[1], (unsigned)w[2], (unsigned)w[3]);
		*port = ntohs(s6->sin6_port);
		return true;
	}
	return false;
}

/* access_tcp_peer from /proc/net/tcp or tcp6: the line whose local
 * address is peer and remote one us.  Slower (the kernel prints the whole
 * table), for when netlink is not allowed. */
static bool tcp_peer_proc(const struct sockaddr *peer, const struct sockaddr *us, uid_t *uid, unsigned long *inode)
{
	char pa[40], ua[40];
	unsigned pport, uport;
	if (!hex_addr(peer, pa, sizeof pa, &pport) || !hex_addr(us, ua, sizeof ua, &uport))
		return false;
	FILE *f = fopen(peer->sa_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", "re");
	if (f == NULL)
		return false;
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	while (!found && getline(&line, &cap, f) > 0) {
		char la[40], ra[40];
		unsigned lp, rp, u;
		unsigned long ino;
		if (sscanf(line, " %*u: %39[0-9A-Fa-f]:%x %39[0-9A-Fa-f]:%x %*x %*x:%*x %*x:%*x %*x %u %*u %lu", la,
		        &lp, ra, &rp, &u, &ino) != 6)
			continue;
		if (lp == pport && rp == uport && strcasecmp(la, pa) == 0 && strcasecmp(ra, ua) == 0) {
			*uid = u;
			*inode = ino;
			found = true;
		}
	}
	free(line);
	fclose(f);
	return found;
}

bool access_tcp_peer(int fd, const struct sockaddr *peer, uid_t *uid, unsigned long *inode)
{
	struct sockaddr_storage us;
	socklen_t ul = sizeof us;
	if (getsockname(fd, (struct sockaddr *)&us, &ul) != 0 || us.ss_family != peer->sa_family ||
	    (us.ss_family != AF_INET && us.ss_family != AF_INET6))
		return false;
	/* sock_diag looks up the one socket whose local end is the peer's
	 * address and whose remote end is ours */
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
		.nlh = { .nlmsg_len = sizeof req, .nlmsg_type = SOCK_DIAG_BY_FAMILY, .nlmsg_flags = NLM_F_REQUEST },
		.r = { .sdiag_family = (uint8_t)us.ss_family,
		    .sdiag_protocol = IPPROTO_TCP,
		    .idiag_states = ~0u,
		    .id.idiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE } },
	};
	if (us.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)peer, *b = (const void *)&us;
		req.r.id.idiag_sport = a->sin_port;
		req.r.id.idiag_dport = b->sin_port;
		memcpy(req.r.id.idiag_src, &a->sin_addr, 4);
		memcpy(req.r.id.idiag_dst, &b->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *a = (const void *)peer, *b = (const void *)&us;
		req.r.id.idiag_sport = a->sin6_port;
		req.r.id.idiag_dport = b->sin6_port;
		memcpy(req.r.id.idiag_src, &a->sin6_addr, 16);
		memcpy(req.r.id.idiag_dst, &b->sin6_addr, 16);
	}
	int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return tcp_peer_proc(peer, (struct sockaddr *)&us, uid, inode);
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	union {
		struct nlmsghdr h;
		char b[1024];
	} ans;
	ssize_t n = -1;
	if (sendto(nl, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)sizeof req)
		n = recv(nl, &ans, sizeof ans, 0);
	close(nl);
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) || !NLMSG_OK(&ans.h, (size_t)n) ||
	    ans.h.nlmsg_type != SOCK_DIAG_BY_FAMILY)
		return false; /* NLMSG_ERROR: no such socket */
	const struct inet_diag_msg *m = NLMSG_DATA(&ans.h);
	*uid = m->idiag_uid;
	*inode = m->idiag_inode;
	return true;
}

/* Does pid hold the socket named want ("socket:[INODE]")? */
static bool holds(int pid, const char *want)
{
	char fdp[64];
	snprintf(fdp, sizeof fdp, "/proc/%d/fd", pid);
	DIR *fds = opendir(fdp);
	if (fds == NULL)
		return false;
	struct dirent *d;
	bool found = false;
	while (!found && (d = readdir(fds)) != NULL) {
		char link[64];
		ssize_t n = readlinkat(dirfd(fds), d->d_name, link, sizeof link - 1);
		found = n > 0 && (link[n] = 0, strcmp(link, want) == 0);
	}
	closedir(fds);
	return found;
}

static int pid_newer(const void *a, const void *b)
{
	return *(const int *)b - *(const int *)a;
}

/* CAP_SYS_PTRACE of the processes that hold socket inode, made by uid:
 * every one of them must have it (one that has not could be the one
 * asking).  The first holder without it ends the search, so the newest
 * processes of uid are looked at first (the client that just connected);
 * a grant reads every process's descriptors (6-12 ms with 124 processes
 * on this project's 2-core VM: tests/bench/serve.sh). */
static bool holders_have_cap(unsigned long inode, uid_t uid)
{
	char want[48];
	snprintf(want, sizeof want, "socket:[%lu]", inode);
	DIR *proc = opendir("/proc");
	if (proc == NULL)
		return false;
	int *pids = NULL;
	size_t n = 0, cap = 0;
	struct dirent *p;
	while ((p = readdir(proc)) != NULL) {
		if (p->d_name[0] < '1' || p->d_name[0] > '9')
			continue;
		if (n == cap) {
			int *np = realloc(pids, (cap = cap ? cap * 2 : 512) * sizeof *pids);
			if (np == NULL)
				break;
			pids = np;
		}
		pids[n++] = atoi(p->d_name);
	}
	closedir(proc);
	qsort(pids, n, sizeof *pids, pid_newer);
	bool any = false, all = true;
	for (int pass = 0; pass < 2 && all; pass++)
		for (size_t i = 0; i < n && all; i++) {
			char dir[32];
			struct stat st;
			snprintf(dir, sizeof dir, "/proc/%d", pids[i]);
			bool its = stat(dir, &st) == 0 && st.st_uid == uid;
			if (pids[i] == getpid() || its != (pass == 0) || !holds(pids[i], want))
				continue;
			any = true;
			all = has_ptrace_cap(pids[i]);
		}
	free(pids);
	return any && all;
}

/* ---- the requester ---------------------------------------------------------------- */

void access_peer(serve_peer_t *p, int fd, const struct sockaddr *remote)
{
	memset(p, 0, sizeof *p);
	struct sockaddr_storage us;
	socklen_t ul = sizeof us;
	if (fd < 0 || getsockname(fd, (struct sockaddr *)&us, &ul) != 0) {
		snprintf(p->why, sizeof p->why, "the connection's socket cannot be read");
		return;
	}
	if (us.ss_family == AF_UNIX) {
		struct ucred cr;
		socklen_t cl = sizeof cr;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
			snprintf(p->why, sizeof p->why, "no peer credentials on the socket: %s", strerror(errno));
			return;
		}
		p->known = true;
		p->uid = cr.uid;
		p->pid = cr.pid;
		p->all = cr.pid > 0 && has_ptrace_cap(cr.pid);
		p->cap_known = true;
		return;
	}
	/* a socket no process holds (inode 0: its owner closed it) is no
	 * one's to look up, and a time-wait one reads as root's */
	if (remote == NULL || !access_tcp_peer(fd, remote, &p->uid, &p->inode) || p->inode == 0) {
		snprintf(p->why, sizeof p->why,
		    "the peer's socket is not in this host's socket table: not a local process");
		return;
	}
	p->known = true;
}

bool access_owner_ok(serve_peer_t *p, uid_t owner)
{
	if (p->all)
		return true;
	if (!p->known)
		return false;
	if (owner != ACCESS_NOBODY && owner == p->uid)
		return true;
	if (!p->cap_known) { /* a TCP peer: its processes, once */
		p->cap_known = true;
		p->all = holders_have_cap(p->inode, p->uid);
	}
	return p->all;
}

bool access_may(serve_peer_t *p, int pid, char *why, size_t len)
{
	if (p->all)
		return true;
	uid_t owner = access_owner(pid);
	if (access_owner_ok(p, owner))
		return true;
	if (!p->known)
		snprintf(why, len, "process %d: who is asking cannot be told (%s): give the bearer token", pid, p->why);
	else
		snprintf(why, len, "process %d is not yours: uid %u cannot read its /proc/%d/maps", pid,
		    (unsigned)p->uid, pid);
	return false;
}
