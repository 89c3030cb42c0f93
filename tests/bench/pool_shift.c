/*
 * pool_shift — work that moves from thread to thread of a pool.  Each worker
 * in turn allocates a burst (`mib` MiB of objects of 16-4096 bytes, each
 * written), checks and frees it, and then waits until the program ends, as a
 * pool's worker waits for work that went to another thread; the next worker
 * starts `pause_ms` later.  Nothing allocates during the pauses.
 *
 * What shows is what an allocator does with the freed memory of a thread
 * that has gone quiet: returned to the system, or reused by the next worker,
 * the peak RSS is about one burst; kept until that thread allocates again,
 * it is every worker's burst.  The time is mostly the pauses.
 *
 * fork=1: after the last burst the process forks at once, and the child
 * (a pre-forked worker) waits `pause_ms` and then makes a burst of its own
 * in its only thread, where the parent's workers are not.  The peak RSS
 * that wait4 reports is the child's if it is the higher: what it kept of
 * the freed memory it inherited, plus its own burst.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static long mib;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int bursts_done, finish;

struct worker {
	pthread_t tid;
	uint64_t seed, sum, errors;
};

/* One burst: allocate, write, check and free mib MiB of objects. */
static void burst(struct worker *w)
{
	size_t budget = (size_t)mib << 20, used = 0;
	size_t cap = budget / 16 + 1, n = 0;
	struct bench_churn_slot *s = bench_xmalloc(cap * sizeof *s);
	while (used < budget && n < cap) {
		s[n].size = (uint32_t)bench_range(&w->seed, 16, 4096);
		s[n].tag = (uint32_t)bench_rand(&w->seed);
		s[n].p = bench_xmalloc(s[n].size);
		bench_churn_fill(s[n].p, s[n].size, s[n].tag);
		used += s[n].size;
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		w->sum += bench_churn_check(&s[i], &w->errors);
		free(s[i].p);
	}
	free(s);
}

static void pause_for(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	burst(w);
	pthread_mutex_lock(&lock);
	bursts_done++;
	pthread_cond_broadcast(&cond);
	while (!finish)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_opt o[] = {
		{ "threads", 3, "workers, one burst each, one after the other" },
		{ "mib", 64, "MiB each burst allocates" },
		{ "pause_ms", 3000, "quiet time after each burst" },
		{ "seed", 29, "random seed" },
		{ "fork", 0, "1: then a fork child waits and makes a burst of its own" },
	};
	bench_parse(argc, argv, "Bursts that move from thread to thread of a pool.", o, BENCH_NOPTS(o));
	long nthreads = o[0].value < 1 ? 1 : o[0].value > 64 ? 64 : o[0].value;
	mib = o[1].value < 1 ? 1 : o[1].value;
	struct worker w[64];
	for (long i = 0; i < nthreads; i++) {
		w[i] = (struct worker){ 0, bench_seed((uint64_t)o[3].value, (uint64_t)i), 0, 0 };
		if (pthread_create(&w[i].tid, NULL, work, &w[i]) != 0) {
			fprintf(stderr, "pool_shift: cannot create a thread\n");
			return 1;
		}
		pthread_mutex_lock(&lock);
		while (bursts_done <= i)
			pthread_cond_wait(&cond, &lock);
		pthread_mutex_unlock(&lock);
		if (!(o[4].value && i == nthreads - 1))
			pause_for(o[2].value);
	}
	uint64_t sum = 0, errors = 0;
	if (o[4].value) {
		/* the child's checksum and errors come back through a pipe */
		int fd[2];
		struct worker c = { 0, bench_seed((uint64_t)o[3].value, (uint64_t)nthreads), 0, 0 };
		pid_t pid;
		if (pipe(fd) != 0 || (pid = fork()) < 0) {
			fprintf(stderr, "pool_shift: cannot fork\n");
			return 1;
		}
		if (pid == 0) {
			close(fd[0]);
			pause_for(o[2].value);
			burst(&c);
			uint64_t out[2] = { c.sum, c.errors };
			_exit(write(fd[1], out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
		}
		close(fd[1]); /* a child that dies is an end of file */
		uint64_t in[2] = { 0, 1 };
		int st = 0;
		if (read(fd[0], in, sizeof in) != (ssize_t)sizeof in || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			fprintf(stderr, "pool_shift: the fork child failed\n");
			return 1;
		}
		sum += in[0];
		errors += in[1];
	}
	pthread_mutex_lock(&lock);
	finish = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (long i = 0; i < nthreads; i++) {
		pthread_join(w[i].tid, NULL);
		sum += w[i].sum;
		errors += w[i].errors;
	}
	return bench_finish("pool_shift", sum, errors);
}
