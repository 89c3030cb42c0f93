/*
 * agent/events.h - how the rest of the agent reaches the watchers of the
 * control segment: the one interface between the files that make events
 * (dump.c: dumps, high-water marks) and the control thread (control.c),
 * which owns the segment.  Implemented by events.c, which calls neither.
 */
#ifndef HC_EVENTS_H
#define HC_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "agent.h"

/* ---- for every file: the events (each a no-op without a segment) ------- */

/* A dump was written (err 0) or failed; path may be NULL. */
void hc_event_dump(hc_dump_kind_t kind, const char *path, uint64_t size, int err);
/* A new high-water mark of mapped memory; path is its u dump, or NULL. */
void hc_event_gdump(size_t mapped, size_t previous, const char *path);
/* This process's /proc/self/maps, to read with pread: opened now (*own:
 * the caller closes it) or, for a fork child that chrooted since, the one
 * it kept (hc_event_maps_open); -1 if neither. */
int hc_event_maps(bool *own);

/* ---- for control.c, the segment's owner ---------------------------------- */

/* The segment events go to: NULL, or the one control.c made (atomic). */
extern hc_shm_t *hc_event_seg;
void hc_event_publish(hc_shm_event_t *ev);
/* The path of the last dump written (the state block's last_dump). */
void hc_event_last_dump(char out[HC_SHM_PATH_MAX]);
void hc_event_forget_dump(void); /* a new injection: none yet */
/* A fork child's maps, opened at dirfd and path if not yet: the program's,
 * or, for the control thread in its own descriptor table (hc_fd_own), that
 * thread's (the timer thread carries a copy of the program's into its
 * table instead). */
void hc_event_maps_open(int dirfd, const char *path);
/* For a thread of the agent about to leave the program's table (the timer
 * thread): the program's kept maps, or -1 (hc_event_maps_kept); then, in
 * its own table, that copy checked and kept for its dumps, or closed
 * (hc_event_maps_keep). */
int hc_event_maps_kept(void);
void hc_event_maps_keep(int fd);
void hc_event_fork_prepare(void), hc_event_fork_parent(void);
/* In a fork child: the lock fresh; then, once it is a new process with no
 * segment yet, the parent's last dump and maps forgotten. */
void hc_event_fork_child(void), hc_event_fork_forget(void);

#endif
