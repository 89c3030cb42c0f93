/*
 * tests/engine/seccomp_bpf.c - heapctl/diagnose/seccomp.c's classic BPF interpreter
 * (cli_bpf_run) against the kernel's.
 *
 * inject decides from what cli_bpf_run says a filter does, so it must say
 * what the kernel does.  A filter that uses every instruction seccomp
 * accepts (loads of args words, BPF_LEN and immediates, scratch memory,
 * each ALU operation, each jump, TAX/TXA, RET A and K) and answers with a
 * distinct errno per branch is run here over argument vectors, and each
 * verdict compared with the kernel's: a child installs the same filter,
 * makes the call (getppid, with the vector in its argument registers) and
 * exits with the errno it got.  Programs seccomp would refuse to load
 * (a load outside seccomp_data, a jump past the end, no return, BPF_MOD,
 * RET X) are refused by the interpreter too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/check.h"
#include "diagnose/seccomp.h"

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#define ARG_HI(i) (ARG_LO(i) + 4)
#define ERR(e)    (SECCOMP_RET_ERRNO | (e))

/* getppid: A = (arg0 + arg1) & 0xff via M[0] and X; > 100: 1; >= 50: 2;
 * bit 0: 3; arg2's high word (x86-64: little-endian) ^ 5, times 3, minus
 * 9, shifted, divided, negated: the errno 10 + (result & 7); len 64 and
 * arg3 0: ALLOW; else 4 (RET A of an ERRNO built in A). */
static const struct sock_filter prog[] = {
	/* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 1, 0),
	/* 2 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	/* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
	/* 4 */ BPF_STMT(BPF_ST, 0),
	/* 5 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)),
	/* 6 */ BPF_STMT(BPF_MISC | BPF_TAX, 0),
	/* 7 */ BPF_STMT(BPF_LD | BPF_MEM, 0),
	/* 8 */ BPF_STMT(BPF_ALU | BPF_ADD | BPF_X, 0),
	/* 9 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff),
	/* 10 */ BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 100, 0, 1),
	/* 11 */ BPF_STMT(BPF_RET | BPF_K, ERR(1)),
	/* 12 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 50, 0, 1),
	/* 13 */ BPF_STMT(BPF_RET | BPF_K, ERR(2)),
	/* 14 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 1, 0, 1),
	/* 15 */ BPF_STMT(BPF_RET | BPF_K, ERR(3)),
	/* 16 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HI(2)),
	/* 17 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 12, 0),
	/* 18 */ BPF_STMT(BPF_ALU | BPF_XOR | BPF_K, 5),
	/* 19 */ BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, 3),
	/* 20 */ BPF_STMT(BPF_ALU | BPF_SUB | BPF_K, 9),
	/* 21 */ BPF_STMT(BPF_ALU | BPF_LSH | BPF_K, 4),
	/* 22 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 2),
	/* 23 */ BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 3),
	/* 24 */ BPF_STMT(BPF_ALU | BPF_NEG, 0),
	/* 25 */ BPF_STMT(BPF_ALU | BPF_OR | BPF_K, 0),
	/* 26 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 7),
	/* 27 */ BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 10),
	/* 28 */ BPF_STMT(BPF_ALU | BPF_OR | BPF_K, SECCOMP_RET_ERRNO),
	/* 29 */ BPF_STMT(BPF_RET | BPF_A, 0),
	/* 30 */ BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
	/* 31 */ BPF_STMT(BPF_LDX | BPF_W | BPF_LEN, 0),
	/* 32 */ BPF_STMT(BPF_MISC | BPF_TXA, 0),
	/* 33 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, sizeof(struct seccomp_data), 0, 3),
	/* 34 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(3)),
	/* 35 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
	/* 36 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	/* 37 */ BPF_STMT(BPF_LD | BPF_IMM, ERR(4)),
	/* 38 */ BPF_STMT(BPF_RET | BPF_A, 0),
};
#define NPROG (sizeof prog / sizeof prog[0])

/* The kernel's verdict: the errno getppid failed with, 0 if it ran. */
static int kernel_errno(const struct sock_filter *f, unsigned n, const uint64_t a[4])
{
	pid_t pid = fork();
	if (pid == 0) {
		struct sock_fprog fp = { .len = (unsigned short)n, .filter = (struct sock_filter *)f };
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp))
			_exit(200);
		long r = syscall(SYS_getppid, a[0], a[1], a[2], a[3]);
		_exit(r < 0 ? errno : 0);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void test_against_kernel(const struct sock_filter *f)
{
	static const uint64_t vec[][4] = {
		{ 60, 50, 0, 0 },                                                     /* 110: > 100          */
		{ 30, 25, 0, 0 },                                                     /* 55: >= 50           */
		{ 50, 50, 0, 0 },                                                     /* 100: the edges      */
		{ 51, 50, 0, 0 }, { 25, 25, 0, 0 }, { 24, 25, 0, 0 }, { 1, 2, 0, 0 }, /* 3: bit 0            */
		{ 2, 2, 0, 0 },                                                       /* 4: len, arg3 0      */
		{ 2, 2, 0, 9 },                                                       /* 4: len, arg3 9      */
		{ 0x100, 0x200, 0, 0 },                                               /* masked: 0           */
		{ 2, 0, 7ull << 32, 0 },                                              /* the ALU chain       */
		{ 2, 0, 0xfffffff0ull << 32, 0 },                                     /* its wrap-arounds    */
		{ 2, 0, 3ull << 32, 0 }, { 0xffffffff, 1, 0, 0 },                     /* the sum wraps       */
	};
	for (size_t v = 0; v < sizeof vec / sizeof vec[0]; v++) {
		struct seccomp_data d = { .nr = SYS_getppid, .arch = AUDIT_ARCH_X86_64 };
		for (int i = 0; i < 4; i++)
			d.args[i] = vec[v][i];
		uint32_t ret = 0;
		char why[160] = "";
		bool ok = cli_bpf_run(f, NPROG, &d, &ret, why, sizeof why);
		CHECK(ok, "vector %zu: the interpreter refused the program: %s", v, why);
		int mine = (ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ALLOW ? 0
		    : (ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO      ? (int)(ret & SECCOMP_RET_DATA)
		                                                                : -2;
		int kernel = kernel_errno(f, NPROG, vec[v]);
		CHECK(kernel >= 0 && kernel != 200, "vector %zu: the kernel did not run the filter (%d)", v, kernel);
		CHECK(mine == kernel, "vector %zu: the interpreter says %d (ret %#x), the kernel %d", v, mine, ret,
		    kernel);
	}
}

static void test_refused(void)
{
	struct seccomp_data d = { .nr = 1, .arch = AUDIT_ARCH_X86_64 };
	uint32_t ret;
	char why[160];
	struct sock_filter outside[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, sizeof(struct seccomp_data)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	CHECK(!cli_bpf_run(outside, 2, &d, &ret, why, sizeof why) && strstr(why, "outside"),
	    "a load past seccomp_data was run: %s", why);
	struct sock_filter unaligned[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	CHECK(!cli_bpf_run(unaligned, 2, &d, &ret, why, sizeof why), "an unaligned load was run");
	struct sock_filter past[] = {
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 5, 5),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	CHECK(!cli_bpf_run(past, 2, &d, &ret, why, sizeof why) && strstr(why, "jumps out"),
	    "a jump past the end was run: %s", why);
	struct sock_filter no_ret[] = { BPF_STMT(BPF_LD | BPF_IMM, 0) };
	CHECK(!cli_bpf_run(no_ret, 1, &d, &ret, why, sizeof why), "a program without a return was run");
	/* what classic BPF has and seccomp refuses to load */
	struct sock_filter mod[] = {
		BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, 3),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	CHECK(!cli_bpf_run(mod, 2, &d, &ret, why, sizeof why), "BPF_MOD, which seccomp refuses, was run");
	struct sock_filter retx[] = { BPF_STMT(BPF_RET | BPF_X, 0) };
	CHECK(!cli_bpf_run(retx, 1, &d, &ret, why, sizeof why), "RET X, which seccomp refuses, was run");
	/* division by zero: the kernel's classic BPF returns 0, KILL_THREAD */
	struct sock_filter div0[] = {
		BPF_STMT(BPF_LDX | BPF_IMM, 0),
		BPF_STMT(BPF_ALU | BPF_DIV | BPF_X, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	CHECK(cli_bpf_run(div0, 3, &d, &ret, why, sizeof why) && ret == 0, "division by zero: ret %#x", ret);
}

int main(void)
{
	test_against_kernel(prog);
	test_refused();
	return hc_check_finish("seccomp_bpf");
}
