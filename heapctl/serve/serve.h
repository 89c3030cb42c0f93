/*
 * heapctl/serve/serve.h - what the daemon's files share: a target as the
 * daemon keeps it, running this heapctl as a child, and the archive.
 */
#ifndef HC_SERVE_H
#define HC_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../cli.h"

typedef struct serve_target_s {
	hc_shm_target_t t;
	char command[256];
	char unit[128];            /* systemd unit from /proc/PID/cgroup, or "" */
	char container[128];       /* machine, docker or podman id, or ""       */
	uint64_t next_ev;          /* the next ring event to read               */
	uint64_t gdumps, dumps_failed;   /* events seen since it was found     */
	bool seen;                 /* in this round's scan                      */
	bool same_view;            /* it sees our files at our paths (its mount
	                            * namespace and root are ours): known while
	                            * it lived, for the final dump after it     */
} serve_target_t;

/* Run this heapctl with args (NULL-terminated, without argv[0]); its
 * stdout into out (may be NULL).  0, or the exit code with the child's
 * first line of stderr in err. */
int serve_run_self(char **args, char *out, size_t outlen, char *err, size_t errlen, uint64_t timeout_ms);

/* archive.c */
typedef struct arch_entry_s {
	char group[256], name[256];     /* name: without .heap                  */
	uint64_t bytes;                 /* .heap and .pb.gz                     */
	int64_t time_s;
} arch_entry_t;

int arch_init(const char *dir, unsigned keep, uint64_t max_bytes, uint64_t max_age_s);
bool arch_enabled(void);
const char *arch_dir(void);
/* Copy the dump that event ev of target x announced into the archive. */
void arch_dump(const serve_target_t *x, const hc_shm_event_t *ev);
/* Every archived dump, oldest first, *n of them (free it); NULL if none. */
arch_entry_t *arch_scan(size_t *n);
/* A group or file name of the archive (no '/', no leading '.'). */
bool arch_name_ok(const char *s);
void arch_counts(uint64_t *archived, uint64_t *failed);

#endif
