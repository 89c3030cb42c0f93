/*
 * faultcost — what this machine charges for a page fault: the first write
 * to each page of a fresh anonymous mapping (small pages only), in
 * microseconds per page, the median of several trials.
 *
 * The fixed-cost rows (startup, fork_small, thread_churn) are mostly page
 * faults: a process under an allocator that keeps a page per size class
 * touches more pages than one that carves every size from one run.  How
 * much that costs differs by a factor of ten or more between bare metal
 * and a virtual machine, so the report's header quotes it.
 *   us_per_fault=<median>
 */
#include <sys/mman.h>
#include <time.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "pages", 4096, "pages touched per trial" },
		{ "trials", 7, "trials (the median is printed)" },
	};
	bench_parse(argc, argv, "the cost of a first-touch page fault.", o, BENCH_NOPTS(o));
	size_t pages = (size_t)o[0].value, len = pages * 4096;
	long trials = o[1].value < 1 ? 1 : o[1].value > 99 ? 99 : o[1].value;
	double us[99];
	for (long t = 0; t < trials; t++) {
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("faultcost: mmap");
			return 1;
		}
		madvise(p, len, MADV_NOHUGEPAGE); /* a page fault each, whatever THP says */
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (size_t i = 0; i < pages; i++)
			((volatile char *)p)[i * 4096] = 1;
		clock_gettime(CLOCK_MONOTONIC, &b);
		us[t] = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 / (double)pages;
		munmap(p, len);
	}
	qsort(us, (size_t)trials, sizeof us[0], cmp_double);
	printf("us_per_fault=%.2f\n", us[trials / 2]);
	return 0;
}
