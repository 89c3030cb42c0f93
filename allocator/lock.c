/*
 * allocator/lock.c - the lock order check of debug builds (hc_lock.h).
 *
 * Each thread records the locks it holds in a small array in its TLS; no
 * lock, no allocation.  Taking a lock of lower rank than one held writes
 * one line naming both and aborts: the order of hc_lock.h was broken, and
 * two threads doing the same in the other order would deadlock.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hc_lock.h"

#define MAX_HELD 48     /* every lock at once, in fork's prepare, fits */

static __thread const hc_lockid_t *held[MAX_HELD] __attribute__((tls_model("initial-exec")));
static __thread unsigned nheld __attribute__((tls_model("initial-exec")));

static void put(char *buf, size_t *n, size_t cap, const char *s)
{
	for (; *s && *n + 1 < cap; s++)
		buf[(*n)++] = *s;
}

static void put_rank(char *buf, size_t *n, size_t cap, unsigned v)
{
	char d[12];
	int k = 0;
	do d[k++] = (char)('0' + v % 10); while ((v /= 10) != 0);
	while (k && *n + 1 < cap)
		buf[(*n)++] = d[--k];
}

static __attribute__((noreturn)) void order_broken(const hc_lockid_t *want, const hc_lockid_t *have)
{
	char line[256];
	size_t n = 0;
	put(line, &n, sizeof line, "<heapctl>: lock order broken: taking ");
	put(line, &n, sizeof line, want->name);
	put(line, &n, sizeof line, " (rank ");
	put_rank(line, &n, sizeof line, want->rank);
	put(line, &n, sizeof line, ") while holding ");
	put(line, &n, sizeof line, have->name);
	put(line, &n, sizeof line, " (rank ");
	put_rank(line, &n, sizeof line, have->rank);
	put(line, &n, sizeof line, ")\n");
	ssize_t r = write(STDERR_FILENO, line, n);
	(void)r;
	abort();
}

void hc_lock_check(const hc_lockid_t *id)
{
	for (unsigned i = 0; i < nheld; i++)
		if (held[i]->rank > id->rank || held[i] == id)   /* or itself again */
			order_broken(id, held[i]);
}

void hc_lock_held(const hc_lockid_t *id)
{
	if (nheld < MAX_HELD)
		held[nheld++] = id;
}

void hc_lock_released(const hc_lockid_t *id)
{
	for (unsigned i = nheld; i-- > 0;) {
		if (held[i] == id) {
			memmove(&held[i], &held[i + 1], (nheld - i - 1) * sizeof held[0]);
			nheld--;
			return;
		}
	}
}
