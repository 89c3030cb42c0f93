/*
 * mailbox - the command mailbox of a real target under many clients, and
 * the window between a client's claim of a slot and its post.
 *
 * It starts the CLI suites' target (build/tests/programs/target, which links
 * libheapctl.so) with control_refresh_ms:50, so the control thread runs its
 * reclaim pass every 50 ms, and talks to it through shm/client.c as heapctl
 * does.
 *
 *  1. The window, made deterministic: a slot's stamp is left at a time long
 *     past (a command of long ago), the slot is claimed the way a client
 *     claims it, and the post comes 400 ms later.  The claim must hold (no
 *     reclaim pass may free it: it was claimed well within the lease), a
 *     second client must get another slot, and both commands must be
 *     answered.  A target that judged the claim by the stale stamp freed the
 *     slot and let two clients share it.
 *  2. A client that claims and dies: its slot is free again after the lease.
 *  3. 16 client processes, 1,500 commands each (set, ping, a dump every
 *     150), every reply counted: 0 lost, 0 failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/check.h"
#include "../../shm/heapctl_shm.h"

enum { CLIENTS = 16, COMMANDS = 1500 };

static pid_t target;
static char dir[PATH_MAX];

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void start_target(void)
{
	char exe[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;
	*strrchr(exe, '/') = 0; /* build/tests/stress */
	snprintf(path, sizeof path, "%s/../programs/target", exe);
	int fds[2];
	if (pipe(fds) != 0)
		exit(1);
	target = fork();
	if (target == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		setenv("HEAPCTL_CONF", "prof:true,control_refresh_ms:50", 1);
		unsetenv("MALLOC_CONF");
		unsetenv("LD_PRELOAD");
		execl(path, path, "seconds=120", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char line[64] = "";
	FILE *f = fdopen(fds[0], "r");
	if (f == NULL || fgets(line, sizeof line, f) == NULL || strncmp(line, "ready ", 6) != 0) {
		fprintf(stderr, "mailbox: %s did not start\n", path);
		kill(target, SIGKILL);
		exit(1);
	}
}

static int open_target(hc_shm_target_t *t)
{
	char err[512];
	for (int i = 0; i < 100; i++) {
		int code = hc_shm_open(target, t, err, sizeof err);
		if (code == 0 && __atomic_load_n(&t->seg->hdr.control, __ATOMIC_ACQUIRE))
			return 0;
		if (code == 0)
			hc_shm_close(t);
		sleep_ms(50);
	}
	fprintf(stderr, "mailbox: cannot open the target: %s\n", err);
	return -1;
}

/* ---- 1 and 2: the claim window, and a client that dies -------------------------------- */

static void test_window(hc_shm_target_t *t)
{
	hc_shm_slot_t *sl = &t->seg->box.slot[3];
	/* a command of long ago left its stamp */
	__atomic_store_n(&sl->stamp_ns, 1, __ATOMIC_RELAXED);
	uint64_t w = hc_shm_slot_load(sl);
	uint32_t g = (uint32_t)(w >> 32);
	CHECK((uint32_t)w == HC_SLOT_FREE, "slot 3 not free at the start (%u)", (uint32_t)w);
	CHECK(hc_shm_slot_cas(sl, HC_SLOT_FREE, g, HC_SLOT_CLAIMED, g + 1), "claim slot 3");
	/* claim slots 0..2 and 4..7 too, so a second client has only what the
	 * target frees: a wrong reclaim hands it slot 3 */
	hc_shm_slot_t *box = t->seg->box.slot;
	uint32_t others[HC_SHM_SLOTS];
	for (unsigned i = 0; i < HC_SHM_SLOTS; i++) {
		if (i == 3)
			continue;
		uint64_t x = hc_shm_slot_load(&box[i]);
		others[i] = (uint32_t)(x >> 32) + 1;
		CHECK(hc_shm_slot_cas(&box[i], HC_SLOT_FREE, others[i] - 1, HC_SLOT_CLAIMED, others[i]),
		    "claim slot %u", i);
	}
	uint64_t claimed = hc_shm_mono_ns();
	sleep_ms(400); /* eight reclaim passes; the lease is 2 s */
	w = hc_shm_slot_load(sl);
	CHECK((uint32_t)w == HC_SLOT_CLAIMED && (uint32_t)(w >> 32) == g + 1,
	    "a slot claimed 400 ms ago was taken back (state %u gen %u, expected %u %u)", (uint32_t)w,
	    (uint32_t)(w >> 32), HC_SLOT_CLAIMED, g + 1);
	/* a second client now finds every slot busy: it must not get ours */
	hc_shm_req_t req = { .cmd = HC_CMD_PING };
	hc_shm_rep_t rep;
	char err[512];
	int code = hc_shm_call(t, &req, &rep, 300000000ull, err, sizeof err);
	CHECK(code == HC_EXIT_TIMEOUT && strstr(err, "slots busy"), "second client while every slot is held: %d %s",
	    code, err);
	/* post ours as a client would, and get the answer */
	memset(&sl->req, 0, sizeof sl->req);
	sl->req.cmd = HC_CMD_PING;
	CHECK(hc_shm_slot_cas(sl, HC_SLOT_CLAIMED, g + 1, HC_SLOT_POSTED, g + 1), "post slot 3");
	__atomic_add_fetch(&t->seg->box.doorbell, 1, __ATOMIC_RELEASE);
	hc_shm_futex_wake(&t->seg->box.doorbell, 1);
	for (int i = 0; i < 200 && (uint32_t)hc_shm_slot_load(sl) != HC_SLOT_DONE; i++)
		sleep_ms(10);
	w = hc_shm_slot_load(sl);
	CHECK((uint32_t)w == HC_SLOT_DONE && (uint32_t)(w >> 32) == g + 1 && sl->rep.code == HC_REP_OK,
	    "the held slot's command: state %u gen %u code %u", (uint32_t)w, (uint32_t)(w >> 32), sl->rep.code);
	CHECK(hc_shm_slot_cas(sl, HC_SLOT_DONE, g + 1, HC_SLOT_FREE, g + 1), "free slot 3");

	/* 2: the other seven were claimed by a "client" that never posts: the
	 * target frees them after the lease, by its own clock */
	bool all = false;
	while (!all && hc_shm_mono_ns() - claimed < 6000000000ull) {
		all = true;
		for (unsigned i = 0; i < HC_SHM_SLOTS; i++)
			all &= (uint32_t)hc_shm_slot_load(&box[i]) == HC_SLOT_FREE;
		sleep_ms(50);
	}
	double secs = (double)(hc_shm_mono_ns() - claimed) / 1e9;
	CHECK(all, "slots of a client that died were not freed within 6 s of the claim");
	CHECK(secs >= 2.0, "slots of a silent client freed %.2f s after the claim, before the 2 s lease", secs);
	printf("mailbox: a dead client's slots freed %.2f s after the claim\n", secs);
	code = hc_shm_call(t, &req, &rep, 2000000000ull, err, sizeof err);
	CHECK(code == 0 && rep.code == HC_REP_OK, "a call after the reclaim: %d %s", code, err);
}

/* ---- 3: many clients ------------------------------------------------------------------------- */

static int client(int id)
{
	hc_shm_target_t t;
	if (open_target(&t) != 0)
		return 1 << 20;
	int bad = 0;
	char err[512];
	for (int i = 0; i < COMMANDS; i++) {
		hc_shm_req_t req = { 0 };
		hc_shm_rep_t rep;
		if (i % 150 == 0) {
			req.cmd = HC_CMD_DUMP;
			snprintf(req.text2, sizeof req.text2, "%.200s/c%d.%d.heap", dir, id, i);
		} else if (i % 2) {
			req.cmd = HC_CMD_SET;
			snprintf(req.name, sizeof req.name, "prof.lg_sample");
			snprintf(req.text, sizeof req.text, "%d", 14 + (id + i) % 6);
		} else {
			req.cmd = HC_CMD_PING;
		}
		int code = hc_shm_call(&t, &req, &rep, 20000000000ull, err, sizeof err);
		if (code != 0 || rep.code != HC_REP_OK) {
			if (bad++ < 3)
				fprintf(stderr, "client %d command %d: %d %s / %u %s\n", id, i, code, err, rep.code,
				    rep.text);
		} else if (req.cmd == HC_CMD_DUMP && strcmp(rep.text, req.text2) != 0) {
			if (bad++ < 3)
				fprintf(stderr, "client %d command %d: the reply names %s, not %s\n", id, i, rep.text,
				    req.text2);
		}
	}
	hc_shm_close(&t);
	return bad;
}

/* What the target counts of a client's commands: every one but the
 * pings, which it answers (each client checks every reply) without
 * counting them, as status and doctor send them to see if it answers. */
static uint64_t counted(void)
{
	uint64_t n = 0;
	for (int i = 0; i < COMMANDS; i++)
		n += i % 150 == 0 || i % 2;
	return n * CLIENTS;
}

static void test_clients(void)
{
	pid_t kids[CLIENTS];
	uint64_t t0 = hc_shm_mono_ns();
	for (int i = 0; i < CLIENTS; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			_exit(client(i) ? 1 : 0);
	}
	int failed = 0;
	for (int i = 0; i < CLIENTS; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	CHECK(failed == 0, "%d of %d clients saw a lost or failed command", failed, CLIENTS);
	hc_shm_target_t t;
	if (open_target(&t) == 0) {
		hc_shm_state_t st;
		/* the counters are mirrored after each command: wait for the last */
		for (int i = 0; i < 100; i++) {
			if (hc_shm_state_read(&t.seg->state, &st) && st.commands >= counted())
				break;
			sleep_ms(20);
		}
		printf("mailbox: %d clients x %d commands in %.2f s; the target counted %llu (pings are not)\n",
		    CLIENTS, COMMANDS, (double)(hc_shm_mono_ns() - t0) / 1e9, (unsigned long long)st.commands);
		CHECK(st.commands == counted(), "the target counted %llu commands, not the %llu sent other than pings",
		    (unsigned long long)st.commands, (unsigned long long)counted());
		hc_shm_close(&t);
	}
}

int main(void)
{
	snprintf(dir, sizeof dir, "/tmp/hcmailbox.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	start_target();
	hc_shm_target_t t;
	if (open_target(&t) == 0) {
		test_window(&t);
		hc_shm_close(&t);
		test_clients();
	} else {
		CHECK(0, "no target");
	}
	kill(target, SIGTERM);
	waitpid(target, NULL, 0);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "mailbox: could not remove %s\n", dir);
	return hc_check_finish("mailbox");
}
