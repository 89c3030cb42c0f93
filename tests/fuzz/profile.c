/*
 * tests/fuzz/profile.c - libFuzzer target: heapctl's heap profile reader
 * (heapctl/report/read.c, rp_read) on any bytes.  A profile is untrusted input:
 * anyone can hand one to `heapctl report`.  Every input must end in a
 * profile or a one-line error, with no crash, no undefined behaviour and no
 * read out of bounds (built with ASan and UBSan by `make fuzz`).
 *
 * The reader takes a path, so the bytes go into a memfd opened by name.
 * Everything the reader allocated is given back after each input
 * (rp_reset), so the fuzzer's memory stays flat.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../heapctl/report/rp_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("profile", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	char path[64], err[4096];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	rp_raw_t raw;
	if (rp_read(path, &raw, RP_READ_TEXT, err, sizeof err) == 0) {
		/* what the views walk: every stack's locations and counts */
		double sum = 0;
		for (size_t i = 0; i < raw.nstacks; i++)
			for (int t = 0; t < RP_NTYPES; t++)
				sum += raw.stacks[i].all.c[t];
		for (size_t i = 0; i < raw.prof.nmaps; i++)
			sum += (double)(raw.prof.maps[i].limit - raw.prof.maps[i].start);
		(void)sum;
	} else {
		/* one line, and it names the file */
		if (strchr(err, '\n') || strstr(err, path) == NULL)
			__builtin_trap();
	}
	close(fd);
	rp_reset();
	return 0;
}
