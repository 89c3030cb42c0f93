/*
 * allocator/lock.c - the lock order check of debug builds (hc_lock.h).
 *
 * Each thread records the locks it holds in a small array in its TLS; no
 * lock, no allocation.  Taking a lock of lower rank than one held writes
 * one line naming both and aborts: the order of hc_lock.h was broken, and
 * two threads doing the same in the other order would deadlock.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hc_alloc.h"
#include "hc_lock.h"

#define MAX_HELD 48 /* every lock at once, in fork's prepare, fits */

static __thread const hc_lockid_t *held[MAX_HELD] __attribute__((tls_model("initial-exec")));
static __thread unsigned nheld __attribute__((tls_model("initial-exec")));

/* One line on stderr, then abort: the parts are strings, a NULL part is
 * followed by a rank to print, and the list ends with two NULLs. */
static __attribute__((noreturn)) void die(const char *const *part)
{
	char line[256];
	size_t n = 0;
	for (; part[0] != NULL || part[1] != NULL; part++) {
		const char *s = *part;
		char d[12];
		if (s == NULL) { /* a rank */
			unsigned v = (unsigned)(uintptr_t) * ++part, k = 0;
			do
				d[k++] = (char)('0' + v % 10);
			while ((v /= 10) != 0);
			while (k && n + 1 < sizeof line)
				line[n++] = d[--k];
			continue;
		}
		for (; *s && n + 1 < sizeof line; s++)
			line[n++] = *s;
	}
	hc_stderr(line, n);
	abort();
}

#define RANK(id) NULL, (const char *)(uintptr_t)(id)->rank

static __attribute__((noreturn)) void order_broken(const hc_lockid_t *want, const hc_lockid_t *have)
{
	const char *parts[] = { "<heapctl>: lock order broken: taking ", want->name, " (rank ", RANK(want),
		") while holding ", have->name, " (rank ", RANK(have), ")\n", NULL, NULL };
	die(parts);
}

void hc_lock_check(const hc_lockid_t *id)
{
	for (unsigned i = 0; i < nheld; i++)
		if (held[i]->rank > id->rank || held[i] == id) /* or itself again */
			order_broken(id, held[i]);
}

/* Every lock ever taken, for the fork check; appended once per lock. */
#define MAX_LOCKS 64
static hc_lockid_t *registry[MAX_LOCKS];
static unsigned nregistry; /* atomic */

void hc_lock_held(hc_lockid_t *id)
{
	if (nheld < MAX_HELD)
		held[nheld++] = id;
	if (!__atomic_load_n(&id->seen, __ATOMIC_RELAXED) && !__atomic_exchange_n(&id->seen, 1, __ATOMIC_ACQ_REL)) {
		unsigned i = __atomic_fetch_add(&nregistry, 1, __ATOMIC_ACQ_REL);
		if (i < MAX_LOCKS)
			__atomic_store_n(&registry[i], id, __ATOMIC_RELEASE);
	}
}

void hc_lock_check_fork(void)
{
	unsigned n = __atomic_load_n(&nregistry, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n && i < MAX_LOCKS; i++) {
		const hc_lockid_t *id = __atomic_load_n(&registry[i], __ATOMIC_ACQUIRE);
		if (id == NULL || id->rank == HC_RANK_INIT)
			continue;
		bool have = false;
		for (unsigned k = 0; k < nheld && !have; k++)
			have = held[k] == id;
		if (!have) {
			const char *parts[] = { "<heapctl>: fork: ", id->name,
				" is not held across fork (allocator/hc_lock.h)\n", NULL, NULL };
			die(parts);
		}
	}
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

void hc_mutex_lock_slow(hc_mutex_t *l)
{
	for (unsigned i = 0; i < HC_MUTEX_SPIN; i++) {
		for (unsigned k = 0; k < HC_MUTEX_PAUSES; k++)
			hc_cpu_pause();
		if (pthread_mutex_trylock(&l->m) == 0)
			return;
	}
	pthread_mutex_lock(&l->m);
}
