/*
 * tests/fuzz/segment.c - libFuzzer target: a control segment as the command
 * sees it.  The bytes of a segment are written by the target process, which
 * may be anyone's (or corrupt), so everything heapctl does with one must
 * hold up: open and check it (shm/client.c), read the counters through the
 * seqlock, read every event of the ring, post a command and wait for a
 * reply that never comes, and print what it read (escaped for a terminal,
 * as JSON).
 *
 * The input is a list of patches over a valid segment of this very process
 * (so that the identity checks pass and the rest is reached): each patch is
 * a 3-byte little-endian offset, a length byte and that many bytes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t start_time_of_self(void)
{
	bool ended;
	return hc_shm_proc_start_time(getpid(), &ended);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static hc_shm_t base;
	static FILE *null;
	if (null == NULL)
		null = fopen("/dev/null", "w");
	memset(&base, 0, sizeof base);
	base.hdr.magic = HC_SHM_MAGIC;
	base.hdr.abi = HC_SHM_ABI;
	base.hdr.size = sizeof(hc_shm_t);
	base.hdr.pid = getpid();
	base.hdr.uid = getuid();
	base.hdr.start_time = start_time_of_self();
	base.hdr.pidns = hc_shm_pidns();
	base.hdr.control = 1;
	base.hdr.ready = 1;
	uint8_t *raw = (uint8_t *)&base;
	for (size_t i = 0; i + 4 <= size;) {
		size_t off = data[i] | (size_t)data[i + 1] << 8 | (size_t)data[i + 2] << 16;
		size_t len = data[i + 3];
		i += 4;
		if (len > size - i)
			len = size - i;
		off %= sizeof base;
		if (len > sizeof base - off)
			len = sizeof base - off;
		memcpy(raw + off, data + i, len);
		i += len;
	}
	char path[64];
	hc_shm_path(path, sizeof path, NULL, getpid());
	unlink(path);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	hc_shm_t *seg = MAP_FAILED;
	if (ftruncate(fd, sizeof base) == 0)
		seg = mmap(NULL, sizeof base, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (seg == MAP_FAILED) {
		unlink(path);
		return 0;
	}
	memcpy(seg, &base, sizeof base);
	hc_shm_target_t t;
	char err[512], safe[4 * HC_SHM_PATH_MAX];
	if (hc_shm_open(getpid(), &t, err, sizeof err) == HC_EXIT_OK) {
		hc_shm_state_t st;
		if (hc_shm_state_read(&t.seg->state, &st)) {
			fprintf(null, "%s %s %s", out_safe(st.prefix, safe, sizeof safe), st.unwind, st.last_dump);
			out_json_str(null, st.prefix);
			out_json_str(null, st.last_dump);
		}
		uint64_t head = __atomic_load_n(&t.seg->ring.head, __ATOMIC_ACQUIRE);
		for (uint64_t n = head > HC_SHM_EVENTS ? head - HC_SHM_EVENTS : 0; n < head; n++) {
			hc_shm_event_t e;
			if (hc_shm_event_read(&t.seg->ring, n, &e) == 1) {
				const char *type = hc_shm_event_name(e.type), *kind = hc_shm_dump_kind_name(e.kind);
				fprintf(null, "%s %s %s", type ? type : "?", kind ? kind : "?",
				    out_safe(e.path, safe, sizeof safe));
				out_json_str(null, e.name);
				out_json_str(null, e.text);
			}
		}
		/* no control thread answers: the call must give up in time, and
		 * never leave garbage it found in a slot as its own */
		hc_shm_req_t req = { .cmd = HC_CMD_PING };
		hc_shm_rep_t rep;
		hc_shm_call(&t, &req, &rep, 2000000ull, err, sizeof err);
		hc_shm_close(&t);
	}
	munmap(seg, sizeof base);
	unlink(path);
	return 0;
}
