/*
 * ctl_rtt - time command round trips to a running target through its
 * segment, the way heapctl makes them (shm/client.c): from posting the
 * request to reading the answer.
 *
 *   ctl_rtt PID set N           N times "set prof.lg_sample=<current>"
 *   ctl_rtt PID dump N DIR      N dumps into DIR (the dump is written in
 *                               the target before it answers)
 *   ctl_rtt 0 sweep N           N sweeps of /dev/shm for stale segments,
 *                               as a process that starts with the library
 *                               makes them (only pids that no process has)
 *   ctl_rtt 0 sweep-all N       the same as heapctl list makes them (pids
 *                               taken since by another process too)
 *
 * Prints "median_us=… p90_us=… max_us=…" (and bytes= for dumps).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../shm/heapctl_shm.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Sort the n times and print their median, p90 and worst (no newline). */
static void print_times(double *us, int n)
{
	qsort(us, (size_t)n, sizeof *us, cmp);
	printf("median_us=%.1f p90_us=%.1f max_us=%.1f", us[n / 2], us[n * 9 / 10], us[n - 1]);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: ctl_rtt PID set|dump N [DIR]\n");
		return 2;
	}
	int pid = atoi(argv[1]), n = atoi(argv[3]);
	bool dump = !strcmp(argv[2], "dump");
	if (n < 1) {
		fprintf(stderr, "ctl_rtt: N must be 1 or more\n");
		return 2;
	}
	if (!strncmp(argv[2], "sweep", 5)) {
		double *us = calloc((size_t)n, sizeof *us);
		if (us == NULL)
			return 1;
		for (int i = 0; i < n; i++) {
			uint64_t t0 = hc_shm_mono_ns();
			hc_shm_clean_stale(!strcmp(argv[2], "sweep-all"));
			us[i] = (double)(hc_shm_mono_ns() - t0) / 1e3;
		}
		print_times(us, n);
		printf("\n");
		return 0;
	}
	hc_shm_target_t t;
	char err[512];
	if (hc_shm_open(pid, &t, err, sizeof err)) {
		fprintf(stderr, "ctl_rtt: %s\n", err);
		return 1;
	}
	hc_shm_state_t st;
	hc_shm_state_read(&t.seg->state, &st);
	double *us = calloc((size_t)n, sizeof *us);
	uint64_t bytes = 0;
	for (int i = 0; i < n; i++) {
		hc_shm_req_t req = { .cmd = dump ? HC_CMD_DUMP : HC_CMD_SET };
		if (dump) {
			snprintf(req.text2, sizeof req.text2, "%s/rtt.%d.heap", argc > 4 ? argv[4] : "/tmp", i);
		} else {
			strcpy(req.name, "prof.lg_sample");
			snprintf(req.text, sizeof req.text, "%u", st.lg_sample);
		}
		hc_shm_rep_t rep;
		uint64_t t0 = hc_shm_mono_ns();
		int code = hc_shm_call(&t, &req, &rep, 10000000000ull, err, sizeof err);
		uint64_t t1 = hc_shm_mono_ns();
		if (code || rep.code) {
			fprintf(stderr, "ctl_rtt: %s%s\n", code ? err : "", code ? "" : rep.text);
			return 1;
		}
		us[i] = (double)(t1 - t0) / 1e3;
		bytes = rep.value;
	}
	print_times(us, n);
	if (dump)
		printf(" bytes=%llu", (unsigned long long)bytes);
	printf("\n");
	hc_shm_close(&t);
	return 0;
}
