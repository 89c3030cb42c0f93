/*
 * fragment - a process whose memory heapctl explain must account for:
 * small blocks freed in a pattern that leaves their pages nearly empty,
 * large blocks freed (free pages for a purge), an anonymous mapping of its
 * own, shared memory and a second thread's stack.
 *
 *   fragment [size=BYTES] [count=N] [keep=K] [anon_mib=M]
 *
 * Allocates count blocks of size bytes and frees all but every keep-th, so
 * each page keeps about 1/keep of its blocks; maps and writes anon_mib MiB
 * with mmap; writes "ready PID" and sleeps until killed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *volatile *blocks;

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	size_t size = 64, count = 200000, keep = 32, anon_mib = 8;
	for (int i = 1; i < argc; i++) {
		if (sscanf(argv[i], "size=%zu", &size) == 1 || sscanf(argv[i], "count=%zu", &count) == 1 ||
		    sscanf(argv[i], "keep=%zu", &keep) == 1 || sscanf(argv[i], "anon_mib=%zu", &anon_mib) == 1)
			continue;
		fprintf(stderr, "fragment: bad argument %s\n", argv[i]);
		return 2;
	}
	blocks = malloc(count * sizeof *blocks);
	for (size_t i = 0; i < count; i++) {
		blocks[i] = malloc(size);
		memset(blocks[i], 1, size);
	}
	for (size_t i = 0; i < count; i++)
		if (i % keep != 0)
			free(blocks[i]);
	/* 32 MiB of large blocks, written and freed: free pages until decay */
	void *big[32];
	for (int i = 0; i < 32; i++) {
		big[i] = malloc(1 << 20);
		memset(big[i], 2, 1 << 20);
	}
	for (int i = 0; i < 32; i++)
		free(big[i]);
	char *anon = mmap(NULL, anon_mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED)
		return 1;
	memset(anon, 3, anon_mib << 20);
	pthread_t t;
	pthread_create(&t, NULL, idle, NULL);
	printf("ready %d\n", getpid());
	fflush(stdout);
	for (;;)
		pause();
}
