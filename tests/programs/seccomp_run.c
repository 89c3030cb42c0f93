/*
 * tests/programs/seccomp_run.c - run a command under a seccomp allow-list,
 * the way systemd's SystemCallFilter= does, for tests/prof/seccomp.sh.
 *
 *     seccomp_run [--errno] [--errno-nr NR:ERRNO]... [--arg0-clear NR:MASK]...
 *                 --allow-file FILE -- CMD [ARGS...]
 *
 * Hardened services run with SystemCallFilter=@system-service; one system
 * call outside the list kills the whole process with SIGSYS (or fails with
 * EPERM under SystemCallErrorNumber=EPERM).  libheapctl.so runs inside such
 * services, so everything it does (sampling, unwinding with libunwind, the
 * control thread, dumps, fork handlers, thread exit, exit-time dumps) must
 * stay inside the list.  This program lets `make check` test that in
 * seconds, without systemd: it installs a classic BPF filter that allows
 * exactly the system call numbers listed in FILE (one decimal number per
 * line; the test derives them from `systemd-analyze syscall-filter`) and
 * execs CMD, which inherits the filter.
 *
 *   - the architecture must be AUDIT_ARCH_X86_64 and the number must not
 *     carry the x32 bit (__X32_SYSCALL_BIT); anything else kills the
 *     process in both modes, so the list cannot be bypassed through
 *     another ABI;
 *   - a listed number is allowed;
 *   - anything else: SECCOMP_RET_KILL_PROCESS (systemd's default action),
 *     or SECCOMP_RET_ERRNO | EPERM with --errno.
 *   - before the list, as container profiles do (for tests/cli/
 *     inject_seccomp.bats): --errno-nr NR:ERRNO answers NR with that
 *     errno (Docker's clone3: ENOSYS, 38), and --arg0-clear NR:MASK allows
 *     NR only while its first argument has none of MASK's bits (podman's
 *     and Docker's clone without namespace flags), else the default action.
 *
 * No libseccomp: raw struct sock_filter, PR_SET_NO_NEW_PRIVS, then
 * seccomp(SECCOMP_SET_MODE_FILTER) (prctl(PR_SET_SECCOMP) where that system
 * call is missing) with SECCOMP_FILTER_FLAG_LOG where the kernel has it: the
 * kernel then logs every refused call, also those --errno answers quietly,
 * as an audit record of type 1326 naming the pid and the number, which the
 * test reads back from dmesg.  The flag changes no decision.
 *
 * Not linked to libheapctl.  Exit status: CMD's (this process becomes CMD),
 * 2 for bad usage, 126/127 if CMD cannot be executed, 1 if the filter
 * cannot be installed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "seccomp_run checks for AUDIT_ARCH_X86_64 and is only built on x86-64"
#endif

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif
#ifndef SECCOMP_FILTER_FLAG_LOG
#define SECCOMP_FILTER_FLAG_LOG (1UL << 1)
#endif
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000U
#endif

#define MAX_SYSCALLS 1024 /* numbers 0..1023; x86-64 has ~460 */

static const char *prog = "seccomp_run";
#define USAGE "[--errno] [--errno-nr NR:ERRNO]... [--arg0-clear NR:MASK]... --allow-file FILE -- CMD [ARGS...]"

static void usage(const char *why, const char *arg)
{
	if (arg != NULL)
		fprintf(stderr, "%s: %s '%s' (usage: %s " USAGE ")\n", prog, why, arg, prog);
	else
		fprintf(stderr, "%s: %s (usage: %s " USAGE ")\n", prog, why, prog);
	exit(2);
}

/* Reads FILE into allowed[] (a set indexed by number); returns how many. */
static unsigned read_allow_file(const char *path, unsigned char *allowed)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, "%s: cannot open allow file %s: %s\n", prog, path, strerror(errno));
		exit(2);
	}
	char line[256];
	unsigned lineno = 0, count = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		lineno++;
		size_t len = strlen(line);
		if (len == sizeof line - 1 && line[len - 1] != '\n') {
			fprintf(stderr, "%s: %s:%u: line too long\n", prog, path, lineno);
			exit(2);
		}
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		char *end;
		errno = 0;
		unsigned long n = strtoul(line, &end, 10);
		if (len == 0 || line[0] < '0' || line[0] > '9' || *end != 0 || errno != 0) {
			fprintf(stderr, "%s: %s:%u: not a decimal system call number: '%s'\n", prog, path, lineno,
			    line);
			exit(2);
		}
		if (n >= MAX_SYSCALLS) {
			fprintf(stderr, "%s: %s:%u: system call number %lu out of range (0..%d)\n", prog, path, lineno,
			    n, MAX_SYSCALLS - 1);
			exit(2);
		}
		if (!allowed[n])
			count++;
		allowed[n] = 1;
	}
	if (ferror(f)) {
		fprintf(stderr, "%s: cannot read allow file %s: %s\n", prog, path, strerror(errno));
		exit(2);
	}
	fclose(f);
	if (count == 0) {
		fprintf(stderr, "%s: allow file %s lists no system calls\n", prog, path);
		exit(2);
	}
	return count;
}

typedef struct {
	bool errno_mode;
	const char *allow_file;
	/* --errno-nr and --arg0-clear rules: number, value (errno or mask) */
	unsigned long rule_nr[32], rule_val[32];
	bool rule_arg[32];
	unsigned nrules;
} opts_t;

/* The options before "--": the index of the command after it. */
static int parse(int argc, char **argv, opts_t *o)
{
	int i = 1;
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if (strcmp(argv[i], "--errno") == 0) {
			o->errno_mode = true;
		} else if (strcmp(argv[i], "--errno-nr") == 0 || strcmp(argv[i], "--arg0-clear") == 0) {
			char *end;
			if (i + 1 >= argc || o->nrules == 32)
				usage("too many rules, or no NR:VALUE after", argv[i]);
			o->rule_arg[o->nrules] = argv[i][2] == 'a';
			o->rule_nr[o->nrules] = strtoul(argv[i + 1], &end, 10);
			if (*end != ':' || o->rule_nr[o->nrules] >= MAX_SYSCALLS)
				usage("not NR:VALUE", argv[i + 1]);
			o->rule_val[o->nrules] = strtoul(end + 1, &end, 0);
			if (*end != 0 || o->rule_val[o->nrules] > (o->rule_arg[o->nrules] ? 0xffffffffUL : 4095UL))
				usage("not NR:VALUE", argv[i + 1]);
			o->nrules++;
			i++;
		} else if (strcmp(argv[i], "--allow-file") == 0) {
			if (i + 1 >= argc)
				usage("--allow-file needs a FILE", NULL);
			o->allow_file = argv[++i];
		} else if (strncmp(argv[i], "--allow-file=", 13) == 0) {
			o->allow_file = argv[i] + 13;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			printf("usage: %s " USAGE "\n", prog);
			exit(0);
		} else if (argv[i][0] == '-') {
			usage("unknown option", argv[i]);
		} else {
			usage("missing '--' before the command", argv[i]);
		}
	}
	if (o->allow_file == NULL)
		usage("--allow-file FILE is required", NULL);
	if (i >= argc)
		usage("no command given after '--'", NULL);
	return i;
}

/* The filter: the options' rules, then every allowed number. */
static struct sock_fprog make_filter(const opts_t *o, const unsigned char *allowed, unsigned count)
{
	/* 6 header instructions, 2 per --errno-nr rule and 6 per --arg0-clear
	 * one, 2 per number (jeq, then ret allow: no jump offset ever exceeds
	 * the 8 bits BPF has, however long the list), and the default action. */
	unsigned deflt = o->errno_mode ? SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA) : SECCOMP_RET_KILL_PROCESS;
	unsigned n = 0, cap = 6 + 2 * count + 1;
	for (unsigned r = 0; r < o->nrules; r++)
		cap += o->rule_arg[r] ? 6 : 2;
	struct sock_filter *f = calloc(cap, sizeof *f);
	if (f == NULL) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	/* architecture: x86-64 only */
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	/* the number; the x32 ABI sets __X32_SYSCALL_BIT in it */
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, __X32_SYSCALL_BIT, 0, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	for (unsigned r = 0; r < o->nrules; r++) {
		if (!o->rule_arg[r]) {
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, o->rule_nr[r], 0, 1);
			f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | o->rule_val[r]);
			continue;
		}
		/* the low word of args[0] (x86-64 is little-endian), then the
		 * number back in A for the rules after */
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, o->rule_nr[r], 0, 4);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, o->rule_val[r], 1, 0);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, deflt);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	}
	for (unsigned nr = 0; nr < MAX_SYSCALLS; nr++) {
		if (!allowed[nr])
			continue;
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, deflt);
	if (n != cap || n > BPF_MAXINSNS) {
		fprintf(stderr, "%s: internal error: filter of %u instructions (expected %u, max %d)\n", prog, n, cap,
		    BPF_MAXINSNS);
		exit(1);
	}
	return (struct sock_fprog){ .len = (unsigned short)n, .filter = f };
}

static void install(const struct sock_fprog *fprog)
{
	/* unprivileged filters need no_new_privs; systemd sets it too */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		fprintf(stderr, "%s: prctl(PR_SET_NO_NEW_PRIVS): %s\n", prog, strerror(errno));
		exit(1);
	}
	/* SECCOMP_FILTER_FLAG_LOG: the kernel also logs what --errno refuses
	 * (audit type 1326, in dmesg without auditd), not only the kills */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_LOG, fprog) != 0 &&
	    (errno != EINVAL || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, fprog) != 0)) {
		if (errno != ENOSYS || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0) != 0) {
			fprintf(stderr, "%s: cannot install the seccomp filter: %s\n", prog, strerror(errno));
			exit(1);
		}
	}
}

int main(int argc, char **argv)
{
	opts_t o = { 0 };
	int i = parse(argc, argv, &o);
	static unsigned char allowed[MAX_SYSCALLS];
	unsigned count = read_allow_file(o.allow_file, allowed);
	if (!allowed[SYS_execve]) {
		fprintf(stderr, "%s: %s does not allow execve (%d): the command could not be started\n", prog,
		    o.allow_file, SYS_execve);
		return 2;
	}

	struct sock_fprog fprog = make_filter(&o, allowed, count);
	install(&fprog);
	free(fprog.filter);

	execvp(argv[i], argv + i);
	/* write(2) and exit_group are in every list worth testing; under
	 * --errno execve itself may have been refused */
	int e = errno;
	fprintf(stderr, "%s: cannot execute %s: %s\n", prog, argv[i], strerror(e));
	return e == ENOENT ? 127 : 126;
}
