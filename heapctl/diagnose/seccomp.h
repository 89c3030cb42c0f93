/*
 * heapctl/diagnose/seccomp.h - would a process's seccomp filter let `heapctl inject`
 * load the agent and the agent run?  (seccomp.c; inject and doctor ask.)
 */
#ifndef HC_SECCOMP_H
#define HC_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

enum {
	CLI_SC_NONE,    /* no filter                                  */
	CLI_SC_OK,      /* a filter, which allows every call needed   */
	CLI_SC_REFUSED, /* a filter refuses one, or kills for it      */
	CLI_SC_UNKNOWN, /* a filter that could not be read            */
};

typedef struct cli_seccomp_s {
	int verdict;         /* CLI_SC_*                                   */
	int filters;         /* how many are stacked (Seccomp_filters:)    */
	unsigned insns;      /* their instructions, in all                 */
	const char *call;    /* REFUSED: the first call refused            */
	const char *by;      /* REFUSED: who makes it, and when            */
	char what[128];      /* REFUSED: "would kill the process at CALL..."*/
	char why[256];       /* UNKNOWN: why it could not be read          */
	char tolerated[256]; /* OK: calls that fail in a way the agent
	                        copes with, and how ("" if none)           */
} cli_seccomp_t;

/* Reads the filters of process pid (seizing and stopping its main thread
 * for the moment it takes; CAP_SYS_ADMIN is needed) and evaluates them for
 * every call in the table of what the agent's load and run make. */
void cli_seccomp_check(int pid, cli_seccomp_t *s);

/* What to do about a REFUSED or UNKNOWN verdict, in one sentence. */
void cli_seccomp_fix(const cli_seccomp_t *s, char *out, size_t len);

/* The classic BPF program f[0..n) run over d as the kernel runs a seccomp
 * filter.  Returns false (why filled in) for an instruction seccomp does
 * not allow, a load outside seccomp_data, or a jump out of the program. */
bool cli_bpf_run(const struct sock_filter *f, unsigned n, const struct seccomp_data *d, uint32_t *ret, char *why,
    size_t wlen);

#endif
