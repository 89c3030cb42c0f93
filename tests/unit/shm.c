/*
 * shm.c - tests of the segment library (shm/): the settings parser both
 * sides check values with, the reader of small files both use, the seqlock and the event ring under concurrent
 * writers, and the client's open/validate/call against a segment this test
 * makes for itself, served by a thread that plays the control thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/check.h"
#include "../../shm/heapctl_shm.h"

/* ---- settings -------------------------------------------------------------- */

static void test_settings(void)
{
	const hc_shm_setting_t *s;
	hc_shm_value_t v;
	char err[256];

	CHECK(hc_shm_setting_find("prof.nope") == NULL, "unknown name found");
	unsigned runtime = 0;
	for (unsigned i = 0; i < hc_shm_nsettings; i++) {
		const hc_shm_setting_t *o = &hc_shm_settings[i];
		CHECK(hc_shm_option_find(o->option, strlen(o->option)) == o, "%s not found", o->option);
		/* every default is a value its own parser takes */
		CHECK(hc_shm_option_parse(o, o->def, &v, err, sizeof err), "%s: default '%s': %s", o->option, o->def,
		    err);
		if (o->name == NULL)
			continue;
		runtime++;
		CHECK(hc_shm_setting_find(o->name) == o, "%s not found", o->name);
		/* a run-time value goes into the segment and comes back unchanged */
		hc_shm_state_t st;
		char text[HC_SHM_VALUE_MAX], back[HC_SHM_VALUE_MAX];
		hc_shm_value_t w;
		memset(&st, 0x5a, sizeof st);
		CHECK(hc_shm_setting_check(o, &v, err, sizeof err), "%s: default out of range", o->name);
		hc_shm_setting_put(o, &st, &v);
		hc_shm_setting_get(o, &st, &w);
		hc_shm_setting_text(o, &v, text, sizeof text);
		hc_shm_setting_text(o, &w, back, sizeof back);
		CHECK(strcmp(text, back) == 0, "%s: '%s' came back as '%s'", o->name, text, back);
		/* and what the text says parses to the same value */
		CHECK(hc_shm_setting_parse(o, text, &w, err, sizeof err), "%s: '%s': %s", o->name, text, err);
		hc_shm_setting_text(o, &w, back, sizeof back);
		CHECK(strcmp(text, back) == 0, "%s: '%s' parsed back as '%s'", o->name, text, back);
	}
	CHECK(runtime == 12, "%u run-time settings", runtime);
	CHECK(hc_shm_option_find("prof", 4) == &hc_shm_settings[HC_SETTING_prof], "prof");
	CHECK(hc_shm_option_find("pro", 3) == NULL, "a prefix of a name found");

	/* configuration text is jemalloc's: strict booleans, the log2 of an interval */
	s = &hc_shm_settings[HC_SETTING_prof];
	CHECK(!hc_shm_option_parse(s, "yes", &v, err, sizeof err), "prof:yes accepted");
	CHECK(strcmp(err, "expected true or false") == 0, "message: %s", err);
	s = &hc_shm_settings[HC_SETTING_lg_prof_interval];
	CHECK(hc_shm_option_parse(s, "-1", &v, err, sizeof err) && v.u == UINT64_MAX, "-1 -> off");
	CHECK(hc_shm_option_parse(s, "30", &v, err, sizeof err) && v.u == 30, "30");
	CHECK(!hc_shm_option_parse(s, "-2", &v, err, sizeof err), "-2 accepted");
	CHECK(strcmp(err, "expected an integer from -1 to 62") == 0, "message: %s", err);
	s = &hc_shm_settings[HC_SETTING_dirty_decay_ms];
	CHECK(hc_shm_option_parse(s, "0", &v, err, sizeof err) && v.i == 0, "decay 0");
	CHECK(!hc_shm_option_parse(s, "-5", &v, err, sizeof err), "decay -5 accepted");
	s = &hc_shm_settings[HC_SETTING_prof_prefix];
	CHECK(!hc_shm_option_parse(s, "", &v, err, sizeof err) && !strcmp(err, "empty value"), "%s", err);

	/* the range check that mallctl writes go through */
	s = hc_shm_setting_find("prof.gdump_pct");
	v.u = 100001;
	CHECK(!hc_shm_setting_check(s, &v, err, sizeof err), "gdump_pct 100001 passed");
	CHECK(strcmp(err, "'100001' is not a whole number from 0 to 100000") == 0, "message: %s", err);
	v.u = 100000;
	CHECK(hc_shm_setting_check(s, &v, err, sizeof err), "gdump_pct 100000 refused");

	s = hc_shm_setting_find("prof.active");
	CHECK(hc_shm_setting_parse(s, "true", &v, err, sizeof err) && v.b, "true");
	CHECK(hc_shm_setting_parse(s, "off", &v, err, sizeof err) && !v.b, "off");
	CHECK(!hc_shm_setting_parse(s, "maybe", &v, err, sizeof err), "maybe accepted");
	CHECK(strstr(err, "'maybe' is not a boolean") != NULL, "message: %s", err);

	s = hc_shm_setting_find("prof.lg_sample");
	CHECK(hc_shm_setting_parse(s, "62", &v, err, sizeof err) && v.u == 62, "62");
	CHECK(!hc_shm_setting_parse(s, "63", &v, err, sizeof err), "63 accepted");
	CHECK(strstr(err, "from 0 to 62") != NULL, "message: %s", err);
	CHECK(!hc_shm_setting_parse(s, "-1", &v, err, sizeof err), "-1 accepted");
	CHECK(!hc_shm_setting_parse(s, "1x", &v, err, sizeof err), "1x accepted");
	CHECK(!hc_shm_setting_parse(s, "", &v, err, sizeof err), "empty accepted");
	CHECK(!hc_shm_setting_parse(s, "99999999999999999999999", &v, err, sizeof err), "overflow accepted");

	s = hc_shm_setting_find("prof.threshold");
	CHECK(hc_shm_setting_parse(s, "512K", &v, err, sizeof err) && v.u == 512 << 10, "512K");
	CHECK(hc_shm_setting_parse(s, "1GiB", &v, err, sizeof err) && v.u == 1ull << 30, "1GiB");
	CHECK(hc_shm_setting_parse(s, "64MB", &v, err, sizeof err) && v.u == 64ull << 20, "64MB");
	CHECK(hc_shm_setting_parse(s, "4096", &v, err, sizeof err) && v.u == 4096, "4096");
	CHECK(!hc_shm_setting_parse(s, "1Q", &v, err, sizeof err), "1Q accepted");
	CHECK(!hc_shm_setting_parse(s, "99999999999T", &v, err, sizeof err), "overflowing T accepted");

	s = hc_shm_setting_find("prof.interval");
	CHECK(hc_shm_setting_parse(s, "1G", &v, err, sizeof err) && v.u == 30, "1G -> lg 30");
	CHECK(hc_shm_setting_parse(s, "0", &v, err, sizeof err) && v.u == UINT64_MAX, "0 -> off");
	CHECK(!hc_shm_setting_parse(s, "3000", &v, err, sizeof err), "3000 accepted");
	CHECK(strstr(err, "power of two") != NULL, "message: %s", err);

	s = hc_shm_setting_find("prof.unwind");
	CHECK(hc_shm_setting_parse(s, "libgcc", &v, err, sizeof err) && !strcmp(v.s, "libgcc"), "libgcc");
	CHECK(!hc_shm_setting_parse(s, "gdb", &v, err, sizeof err), "gdb accepted");
	CHECK(!strcmp(err, "'gdb' is not an unwinder (fp, libunwind or libgcc)"), "message: %s", err);

	s = hc_shm_option_find("thp", 3);
	CHECK(s != NULL && s->name == NULL, "thp is a start-up option");
	CHECK(hc_shm_option_parse(s, "never", &v, err, sizeof err) && !strcmp(v.s, "never"), "never");
	CHECK(hc_shm_word_index(HC_SET_THP, "always") == 1, "always is word 1");
	CHECK(hc_shm_word_index(HC_SET_THP, "fp") == -1, "fp is not a THP mode");
	CHECK(!hc_shm_option_parse(s, "madvise", &v, err, sizeof err), "madvise accepted");
	CHECK(!strcmp(err, "expected default, always or never"), "message: %s", err);

	s = hc_shm_setting_find("prof.prefix");
	CHECK(hc_shm_setting_parse(s, "/tmp/x", &v, err, sizeof err), "/tmp/x");
	CHECK(!hc_shm_setting_parse(s, "", &v, err, sizeof err), "empty prefix accepted");
	char longv[2000];
	memset(longv, 'a', sizeof longv - 1);
	longv[sizeof longv - 1] = 0;
	CHECK(!hc_shm_setting_parse(s, longv, &v, err, sizeof err), "long prefix accepted");

	char path[64];
	hc_shm_path(path, sizeof path, NULL, 4321);
	CHECK(!strcmp(path, "/dev/shm/heapctl.4321"), "path %s", path);
	hc_shm_path(path, sizeof path, "/proc/7/root", 1);
	CHECK(!strcmp(path, "/proc/7/root/dev/shm/heapctl.1"), "path %s", path);
}

/* ---- seqlock ------------------------------------------------------------------ */

static hc_shm_t *mem;
static volatile int stop;

static void *seq_writer(void *arg)
{
	(void)arg;
	for (uint64_t i = 1; !stop; i++) {
		hc_shm_state_write_begin(&mem->state);
		mem->state.allocated = i;
		mem->state.mapped = i;
		mem->state.highwater = i;
		memset(mem->state.prefix, (int)('a' + i % 26), 100);
		hc_shm_state_write_end(&mem->state);
	}
	return NULL;
}

static void test_seqlock(void)
{
	pthread_t w;
	stop = 0;
	pthread_create(&w, NULL, seq_writer, NULL);
	unsigned torn = 0, failed = 0;
	for (int i = 0; i < 20000; i++) {
		hc_shm_state_t st;
		if (!hc_shm_state_read(&mem->state, &st)) {
			failed++;
			continue;
		}
		if (st.allocated != st.mapped || st.mapped != st.highwater || st.prefix[0] != st.prefix[99])
			torn++;
	}
	stop = 1;
	pthread_join(w, NULL);
	CHECK(torn == 0, "%u torn snapshots", torn);
	CHECK(failed < 100, "%u reads found no quiet moment", failed);

	/* garbage in seq: an odd value left behind is recovered by the next write */
	mem->state.seq = 0x7fffffff;
	hc_shm_state_t st;
	CHECK(!hc_shm_state_read(&mem->state, &st), "a stuck odd seq was read as consistent");
	hc_shm_state_write_begin(&mem->state);
	mem->state.allocated = 42;
	hc_shm_state_write_end(&mem->state);
	CHECK(hc_shm_state_read(&mem->state, &st) && st.allocated == 42, "no recovery from garbage seq");
}

/* ---- event ring ------------------------------------------------------------------ */

static void *ring_writer(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg;
	for (uint64_t i = 0; i < n; i++) {
		hc_shm_event_t ev = { .type = HC_EV_DUMP, .value = i, .value2 = i * 3 };
		memset(ev.path, (int)('a' + i % 26), 200);
		hc_shm_event_publish(&mem->ring, &ev);
	}
	return NULL;
}

static void test_ring(void)
{
	memset(&mem->ring, 0, sizeof mem->ring);
	hc_shm_event_t e;
	CHECK(hc_shm_event_read(&mem->ring, 0, &e) == 0, "event 0 before any");
	ring_writer((void *)(uintptr_t)3);
	for (uint64_t i = 0; i < 3; i++)
		CHECK(hc_shm_event_read(&mem->ring, i, &e) == 1 && e.value == i, "event %llu", (unsigned long long)i);
	CHECK(hc_shm_event_read(&mem->ring, 3, &e) == 0, "event 3 not yet");
	ring_writer((void *)(uintptr_t)HC_SHM_EVENTS);
	CHECK(hc_shm_event_read(&mem->ring, 0, &e) == -1, "overwritten event 0 not reported missed");
	CHECK(hc_shm_event_read(&mem->ring, 3 + HC_SHM_EVENTS - 1, &e) == 1, "newest event");

	/* a reader racing a writer gets whole events or "missed", never a torn one */
	memset(&mem->ring, 0, sizeof mem->ring);
	pthread_t w;
	uint64_t total = 200000;
	pthread_create(&w, NULL, ring_writer, (void *)(uintptr_t)total);
	uint64_t next = 0, got = 0, missed = 0, torn = 0;
	while (next < total) {
		uint64_t head = __atomic_load_n(&mem->ring.head, __ATOMIC_ACQUIRE);
		if (head - next > HC_SHM_EVENTS) {
			missed += head - HC_SHM_EVENTS - next;
			next = head - HC_SHM_EVENTS;
		}
		if (next >= head)
			continue;
		int r = hc_shm_event_read(&mem->ring, next, &e);
		if (r == 0)
			continue;
		if (r > 0) {
			got++;
			if (e.value != next || e.value2 != next * 3 || e.path[0] != e.path[199] || e.path[200])
				torn++;
		} else {
			missed++;
		}
		next++;
	}
	pthread_join(w, NULL);
	CHECK(torn == 0, "%llu torn events", (unsigned long long)torn);
	CHECK(got + missed == total, "got %llu + missed %llu != %llu", (unsigned long long)got,
	    (unsigned long long)missed, (unsigned long long)total);
	CHECK(got > 0, "no event read");
}

/* ---- client against a segment of our own ---------------------------------------------- */

static uint64_t my_start_time(void)
{
	bool ended;
	uint64_t t = hc_shm_proc_start_time(getpid(), &ended);
	CHECK(t != 0 && !ended, "our own start time: %llu ended %d", (unsigned long long)t, ended);
	return t;
}

/* plays the control thread: answers PING with OK, anything else with an error */
static void *server(void *arg)
{
	(void)arg;
	while (!stop) {
		uint32_t bell = __atomic_load_n(&mem->box.doorbell, __ATOMIC_ACQUIRE);
		for (int i = 0; i < HC_SHM_SLOTS; i++) {
			hc_shm_slot_t *sl = &mem->box.slot[i];
			uint32_t st = HC_SLOT_POSTED;
			if (!__atomic_compare_exchange_n(&sl->state, &st, HC_SLOT_BUSY, false, __ATOMIC_ACQUIRE,
			        __ATOMIC_RELAXED))
				continue;
			sl->rep.code = sl->req.cmd == HC_CMD_PING ? HC_REP_OK : HC_REP_FAILED;
			strcpy(sl->rep.text, sl->req.cmd == HC_CMD_PING ? "pong" : "nope");
			__atomic_store_n(&sl->state, HC_SLOT_DONE, __ATOMIC_RELEASE);
			hc_shm_futex_wake(&sl->state, 100);
		}
		hc_shm_futex_wait(&mem->box.doorbell, bell, 50000000);
	}
	return NULL;
}

/* Our own segment, made by hand (as the library would publish it), at
 * path; NULL when it cannot be made. */
static hc_shm_t *client_segment(char *path, size_t len)
{
	hc_shm_path(path, len, NULL, getpid());
	unlink(path);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	if (fd < 0)
		return NULL;
	CHECK(ftruncate(fd, sizeof(hc_shm_t)) == 0, "ftruncate");
	hc_shm_t *s = mmap(NULL, sizeof(hc_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	s->hdr.magic = HC_SHM_MAGIC;
	s->hdr.abi = HC_SHM_ABI;
	s->hdr.size = sizeof(hc_shm_t);
	s->hdr.pid = getpid();
	s->hdr.uid = getuid();
	s->hdr.start_time = my_start_time();
	s->hdr.pidns = hc_shm_pidns();
	s->hdr.control = 1;
	s->hdr.ready = 1;
	mem = s;
	return s;
}

/* Calls: none answered, a thousand answered, a refusal, every slot busy;
 * false when the segment could not be opened. */
static bool client_calls(hc_shm_t *s)
{
	char err[512];
	hc_shm_target_t t;
	int code = hc_shm_open(getpid(), &t, err, sizeof err);
	CHECK(code == HC_EXIT_OK, "open own segment: %d %s", code, err);
	if (code)
		return false;
	CHECK(hc_shm_alive(&t), "we are alive");

	hc_shm_req_t req = { .cmd = HC_CMD_PING };
	hc_shm_rep_t rep;
	code = hc_shm_call(&t, &req, &rep, 300000000ull, err, sizeof err);
	CHECK(code == HC_EXIT_TIMEOUT, "no server: %d", code);
	CHECK(strstr(err, "did not answer within 0.3 s") != NULL, "message: %s", err);
	for (int i = 0; i < HC_SHM_SLOTS; i++)
		CHECK(s->box.slot[i].state == HC_SLOT_FREE, "slot %d left %u after a timeout", i, s->box.slot[i].state);

	pthread_t srv;
	stop = 0;
	pthread_create(&srv, NULL, server, NULL);
	for (int i = 0; i < 1000; i++) {
		code = hc_shm_call(&t, &req, &rep, 2000000000ull, err, sizeof err);
		if (code != HC_EXIT_OK || rep.code != HC_REP_OK || strcmp(rep.text, "pong")) {
			CHECK(0, "call %d: %d %s / %u %s", i, code, err, rep.code, rep.text);
			break;
		}
	}
	req.cmd = HC_CMD_DUMP;
	code = hc_shm_call(&t, &req, &rep, 2000000000ull, err, sizeof err);
	CHECK(code == HC_EXIT_OK && rep.code == HC_REP_FAILED && !strcmp(rep.text, "nope"), "refusal");
	/* every slot taken by someone else: the call waits, then times out */
	for (int i = 0; i < HC_SHM_SLOTS; i++)
		s->box.slot[i].state = HC_SLOT_CLAIMED;
	code = hc_shm_call(&t, &req, &rep, 200000000ull, err, sizeof err);
	CHECK(code == HC_EXIT_TIMEOUT && strstr(err, "slots busy"), "busy: %d %s", code, err);
	for (int i = 0; i < HC_SHM_SLOTS; i++)
		s->box.slot[i].state = HC_SLOT_FREE;
	stop = 1;
	pthread_join(srv, NULL);
	hc_shm_close(&t);
	return true;
}

/* What the client refuses to believe: another ABI, a bad magic, a segment
 * never ready, no control thread, another PID namespace, a stale one. */
static void client_refusals(hc_shm_t *s, const char *path)
{
	char err[512];
	hc_shm_target_t t;
	hc_shm_req_t req;
	hc_shm_rep_t rep;
	int code;
	/* what the client refuses to believe */
	s->hdr.abi = 99;
	code = hc_shm_open(getpid(), &t, err, sizeof err);
	CHECK(code == HC_EXIT_ABI && strstr(err, "ABI 99"), "abi: %d %s", code, err);
	s->hdr.abi = HC_SHM_ABI;
	s->hdr.magic = 0x1234;
	code = hc_shm_open(getpid(), &t, err, sizeof err);
	CHECK(code == HC_EXIT_ABI && strstr(err, "bad magic"), "magic: %d %s", code, err);
	s->hdr.magic = HC_SHM_MAGIC;
	s->hdr.ready = 0;
	code = hc_shm_open(getpid(), &t, err, sizeof err);
	CHECK(code == HC_EXIT_ABI && strstr(err, "never ready"), "ready: %d %s", code, err);
	s->hdr.ready = 1;
	s->hdr.control = 0;
	code = hc_shm_open(getpid(), &t, err, sizeof err);
	CHECK(code == HC_EXIT_OK, "open without control: %d %s", code, err);
	if (code == 0) {
		req.cmd = HC_CMD_PING;
		code = hc_shm_call(&t, &req, &rep, 200000000ull, err, sizeof err);
		CHECK(code == HC_EXIT_NOLIB && strstr(err, "no control thread"), "no control: %d %s", code, err);
		hc_shm_close(&t);
	}
	/* a segment of another PID namespace sharing /dev/shm, with our pid in
	 * its namespace: not ours, and never removed from here */
	s->hdr.pidns += 1;
	s->hdr.start_time += 1;
	code = hc_shm_open(getpid(), &t, err, sizeof err);
	CHECK(code == HC_EXIT_NOLIB && !strstr(err, "stale"), "other pidns: %d %s", code, err);
	struct stat sb;
	CHECK(stat(path, &sb) == 0, "a segment of another PID namespace was removed");
	s->hdr.pidns -= 1;
	/* an earlier process's segment of our namespace: the start time does
	 * not match, so the process with this pid is a later one */
	code = hc_shm_open(getpid(), &t, err, sizeof err);
	CHECK(code == HC_EXIT_NOLIB && strstr(err, "removed the stale segment"), "stale: %d %s", code, err);
	CHECK(stat(path, &sb) != 0, "stale segment not removed");
}

/* The fallback name (behind a FIFO, behind a directory), a FIFO alone,
 * name forms, a PID with no process. */
static void client_names(hc_shm_t *s, const char *path)
{
	char err[512];
	hc_shm_target_t t;
	int code;
	/* a segment under the fallback name (heapctl.<pid> held by another
	 * file) is found through the directory, and through maps */
	s->hdr.start_time -= 1;
	char alt[96];
	snprintf(alt, sizeof alt, "%s.0123456789abcdef", path);
	int afd = open(alt, O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(afd >= 0 && ftruncate(afd, sizeof(hc_shm_t)) == 0, "create %s", alt);
	hc_shm_t *a = afd >= 0 ? mmap(NULL, sizeof(hc_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, afd, 0) : MAP_FAILED;
	if (afd >= 0)
		close(afd);
	if (a != MAP_FAILED) {
		memcpy(a, s, sizeof(hc_shm_t));
		CHECK(mkfifo(path, 0666) == 0, "mkfifo %s: %s", path, strerror(errno));
		code = hc_shm_open(getpid(), &t, err, sizeof err);
		CHECK(code == HC_EXIT_OK && strstr(t.path, ".0123456789abcdef"),
		    "fallback name behind a FIFO: %d %s %s", code, err, t.path);
		if (code == HC_EXIT_OK)
			hc_shm_close(&t);
		unlink(path);
		CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
		code = hc_shm_open(getpid(), &t, err, sizeof err);
		CHECK(code == HC_EXIT_OK && strstr(t.path, ".0123456789abcdef"),
		    "fallback name behind a directory: %d %s %s", code, err, t.path);
		if (code == HC_EXIT_OK)
			hc_shm_close(&t);
		rmdir(path);
		int pids[64];
		int n = hc_shm_scan(pids, 64), found = 0;
		for (int i = 0; i < n; i++)
			found += pids[i] == getpid();
		CHECK(found == 1, "scan finds the fallback name once (%d)", found);
		munmap(a, sizeof(hc_shm_t));
	}
	unlink(alt);
	/* only a FIFO at the name: no hang, not running the library */
	munmap(s, sizeof(hc_shm_t));
	CHECK(mkfifo(path, 0666) == 0, "mkfifo");
	code = hc_shm_open(getpid(), &t, err, sizeof err);
	CHECK(code == HC_EXIT_NOLIB, "FIFO only: %d %s", code, err);
	CHECK(hc_shm_clean_stale(true) >= 0 && hc_shm_clean_stale(false) >= 0, "clean_stale over a FIFO");
	unlink(path);
	CHECK(hc_shm_name_pid("heapctl.12") == 12 && hc_shm_name_pid("heapctl.12.0123456789abcdef") == 12,
	    "name forms");
	CHECK(hc_shm_name_pid("heapctl.012") < 0 && hc_shm_name_pid("heapctl.12.x") < 0 &&
	        hc_shm_name_pid("heapctl.12.0123456789abcde") < 0 && hc_shm_name_pid("heapctl.") < 0,
	    "bad name forms");

	code = hc_shm_open(0x3ffffff0, &t, err, sizeof err);
	CHECK(code == HC_EXIT_NOPROC && strstr(err, "no process with PID"), "noproc: %d %s", code, err);
}

static void test_client(void)
{
	char path[64];
	hc_shm_t *s = client_segment(path, sizeof path);
	if (s == NULL || !client_calls(s))
		return;
	client_refusals(s, path);
	client_names(s, path);
}

/* A process caught publishing its segment: the file is there but not yet
 * mapped or ready when the client reads its maps, and both are a moment
 * later (a fork child starting its own segment looks like this to a daemon
 * that scans every half second).  The client must take it, not delete it
 * as a stale file. */
static void test_publishing(void)
{
	int go[2], done[2];
	CHECK(pipe(go) == 0 && pipe(done) == 0, "pipes");
	pid_t child = fork();
	if (child == 0) {
		char path[64];
		hc_shm_path(path, sizeof path, NULL, getpid());
		unlink(path);
		int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		hc_shm_header_t h = { .magic = HC_SHM_MAGIC,
			.abi = HC_SHM_ABI,
			.size = sizeof(hc_shm_t),
			.pid = getpid(),
			.uid = getuid(),
			.pidns = hc_shm_pidns(),
			.control = 1 };
		bool ended;
		h.start_time = hc_shm_proc_start_time(getpid(), &ended);
		if (fd < 0 || ftruncate(fd, sizeof(hc_shm_t)) != 0 || pwrite(fd, &h, sizeof h, 0) != sizeof h)
			_exit(2);
		char b = 1;
		if (write(go[1], &b, 1) != 1)
			_exit(2);
		usleep(20000); /* the client reads our maps meanwhile */
		hc_shm_t *m = mmap(NULL, sizeof(hc_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			_exit(2);
		__atomic_store_n(&m->hdr.ready, 1, __ATOMIC_RELEASE);
		if (read(done[0], &b, 1) != 1)
			_exit(2);
		unlink(path);
		_exit(0);
	}
	char b, path[64], err[512];
	CHECK(read(go[0], &b, 1) == 1, "the child created its file");
	hc_shm_path(path, sizeof path, NULL, child);
	hc_shm_target_t t;
	int code = hc_shm_open(child, &t, err, sizeof err);
	CHECK(code == HC_EXIT_OK, "a segment published while we looked: %d %s", code, err);
	CHECK(access(path, F_OK) == 0, "and its file is still there");
	if (code == HC_EXIT_OK)
		hc_shm_close(&t);
	b = 1;
	CHECK(write(done[1], &b, 1) == 1, "tell the child");
	int st;
	CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}

/* ---- hc_shm_read_file ----------------------------------------------------- */

/* The reader of small files that the agent and the command share: bounded,
 * NUL-terminated, refusing a symlink, not blocking on a FIFO. */
static void test_read_file(void)
{
	char dir[] = "/tmp/heapctl-readfile.XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	char path[256], link[256], fifo[256], buf[16];
	snprintf(path, sizeof path, "%s/file", dir);
	snprintf(link, sizeof link, "%s/link", dir);
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0 && write(fd, "hello, world\n", 13) == 13, "writing %s", path);
	close(fd);

	memset(buf, 'x', sizeof buf);
	CHECK(hc_shm_read_file(path, buf, sizeof buf) == 13 && strcmp(buf, "hello, world\n") == 0, "whole file: %s",
	    buf);
	CHECK(hc_shm_read_file(path, buf, 6) == 5 && strcmp(buf, "hello") == 0, "cut to len - 1: %s", buf);
	CHECK(hc_shm_read_file(path, buf, 1) == 0 && buf[0] == 0, "len 1: nothing but the NUL");

	CHECK(symlink(path, link) == 0, "symlink: %s", strerror(errno));
	errno = 0;
	CHECK(hc_shm_read_file(link, buf, sizeof buf) == -1 && errno == ELOOP, "a symlink is followed (errno %d)",
	    errno);
	errno = 0;
	char missing[300];
	snprintf(missing, sizeof missing, "%s/none", dir);
	CHECK(hc_shm_read_file(missing, buf, sizeof buf) == -1 && errno == ENOENT, "a missing file (errno %d)", errno);

	/* the openat form: relative to a directory, a symlink refused there too */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0, "open %s: %s", dir, strerror(errno));
	CHECK(hc_shm_read_file_at(dfd, "file", buf, sizeof buf) == 13 && strcmp(buf, "hello, world\n") == 0,
	    "at a directory: %s", buf);
	errno = 0;
	CHECK(hc_shm_read_file_at(dfd, "link", buf, sizeof buf) == -1 && errno == ELOOP,
	    "at a directory, a symlink is followed (errno %d)", errno);
	close(dfd);

	/* a FIFO with no writer: opened without waiting for one, read as empty */
	CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
	CHECK(hc_shm_read_file(fifo, buf, sizeof buf) == 0 && buf[0] == 0, "a FIFO blocked or gave bytes");

	unlink(fifo);
	unlink(link);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	test_settings();
	test_read_file();
	mem = mmap(NULL, sizeof(hc_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	test_seqlock();
	test_ring();
	munmap(mem, sizeof(hc_shm_t));
	test_client();
	test_publishing();
	return hc_check_finish("shm");
}
