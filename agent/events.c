/*
 * agent/events.c - events for the watchers of the control segment, made by
 * any thread (dumps, high-water marks, configuration changes, the exit) and
 * published into the segment's ring under a lock private to this process;
 * the path of the last dump, which the control thread mirrors; and the
 * descriptor of /proc/self/maps a fork child keeps for its dumps.
 *
 * dump.c and control.c both come here and this file calls neither: the
 * control thread makes the segment and says so in hc_event_seg, every other
 * thread only publishes (events.h).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "events.h"

hc_shm_t *hc_event_seg HC_FORK_DATA; /* NULL: no segment in this process */
static hc_mutex_t ev_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_EVENTS, "ev_lock"); /* private */
static char last_dump[HC_SHM_PATH_MAX];                                            /* under ev_lock                 */
/* /proc/self/maps, for after a chroot: one in the program's descriptor
 * table, for its threads' dumps, and one in the control thread's own */
static int maps_fd HC_FORK_DATA = -1;
static dev_t maps_dev HC_FORK_DATA;
static ino_t maps_ino HC_FORK_DATA;
/* a thread of the agent in a table of its own (hc_fd_own): the one kept
 * there, opened by the control thread or carried in by the timer thread;
 * a new thread starts without one (its predecessor's went with its table) */
static __thread int table_maps_fd __attribute__((tls_model("initial-exec"))) = -1;

void hc_event_publish(hc_shm_event_t *ev)
{
	hc_shm_t *s = __atomic_load_n(&hc_event_seg, __ATOMIC_ACQUIRE);
	if (s == NULL)
		return;
	ev->time_ns = hc_shm_now_ns();
	/* what the target publishes is always well formed (a client may write
	 * anything into the ring; that is the client's side to check) */
	HC_ASSERT(hc_shm_event_name(ev->type) != NULL);
	HC_ASSERT((ev->type != HC_EV_DUMP && ev->type != HC_EV_DUMP_FAILED) || hc_shm_dump_kind_name(ev->kind) != NULL);
	HC_ASSERT(hc_shm_strvalid(ev->name, sizeof ev->name) && hc_shm_strvalid(ev->path, sizeof ev->path) &&
	    hc_shm_strvalid(ev->text, sizeof ev->text));
	hc_mutex_lock(&ev_lock);
	hc_shm_event_publish(&s->ring, ev);
	hc_mutex_unlock(&ev_lock);
}

void hc_event_dump(hc_dump_kind_t kind, const char *path, uint64_t size, int err)
{
	if (hc_event_seg == NULL)
		return;
	hc_shm_event_t ev = { .type = err ? HC_EV_DUMP_FAILED : HC_EV_DUMP, .kind = (uint32_t)kind, .value = size };
	hc_shm_strlcpy(ev.path, path ? path : "", sizeof ev.path);
	if (err)
		hc_shm_strlcpy(ev.text, strerrordesc_np(err), sizeof ev.text);
	hc_event_publish(&ev);
	/* a staged dump is heapctl's to copy out and remove: not ours to name */
	if (!err && path && !hc_shm_staged_path(path)) {
		hc_mutex_lock(&ev_lock);
		hc_shm_strlcpy(last_dump, path, sizeof last_dump);
		hc_mutex_unlock(&ev_lock);
	}
}

void hc_event_gdump(size_t mapped, size_t previous, const char *path)
{
	if (hc_event_seg == NULL)
		return;
	hc_shm_event_t ev = { .type = HC_EV_GDUMP, .kind = 'u', .value = mapped, .value2 = previous };
	if (path)
		hc_shm_strlcpy(ev.path, path, sizeof ev.path);
	hc_event_publish(&ev);
}

void hc_event_last_dump(char out[HC_SHM_PATH_MAX])
{
	hc_mutex_lock(&ev_lock);
	memcpy(out, last_dump, sizeof last_dump);
	hc_mutex_unlock(&ev_lock);
}

void hc_event_forget_dump(void)
{
	hc_mutex_lock(&ev_lock);
	last_dump[0] = 0;
	hc_mutex_unlock(&ev_lock);
}

int hc_event_maps(bool *own)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	*own = fd >= 0;
	if (fd >= 0)
		return fd;
	if (hc_fd_own) /* chrooted since: the one kept in the thread's table */
		return table_maps_fd;
	return hc_event_maps_kept(); /* chrooted since, away from /proc */
}

int hc_event_maps_kept(void)
{
	struct stat st;
	int fd = __atomic_load_n(&maps_fd, __ATOMIC_ACQUIRE);
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_dev != maps_dev || st.st_ino != maps_ino)
		return -1;
	return fd;
}

void hc_event_maps_keep(int fd)
{
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_dev == maps_dev && st.st_ino == maps_ino)
		table_maps_fd = fd;
	else /* not the one checked before the table was left */
		close(fd);
}

/* a fork child keeps its maps open for its dumps, for the workers that
 * chroot after the fork (haproxy's, postfix's, sshd's): a file, not a
 * directory, so nothing outside the chroot is reached through it but this
 * process's own maps.  A process that was not forked keeps no descriptor.
 * The program's is moved to a number from HC_FD_HIGH up: opened in the
 * fork, it must not take the lowest free number, which a child that
 * closed its standard input expects its next open to give it. */
void hc_event_maps_open(int dirfd, const char *path)
{
	if (hc_fd_own) {
		if (table_maps_fd < 0)
			table_maps_fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
		return;
	}
	struct stat nst;
	if (maps_fd >= 0)
		return;
	int fd = hc_fd_high(openat(dirfd, path, O_RDONLY | O_CLOEXEC));
	if (fd >= 0 && fstat(fd, &nst) == 0) {
		maps_dev = nst.st_dev;
		maps_ino = nst.st_ino;
		maps_fd = fd;
	} else if (fd >= 0) {
		close(fd);
	}
}

void hc_event_fork_prepare(void)
{
	hc_mutex_lock(&ev_lock);
}
void hc_event_fork_parent(void)
{
	hc_mutex_unlock(&ev_lock);
}
void hc_event_fork_child(void)
{
	hc_mutex_reinit(&ev_lock);
}

/* the parent's last dump, and its maps (the parent's /proc/PID/maps): a
 * copy of ours to close */
void hc_event_fork_forget(void)
{
	if (last_dump[0]) /* a write only where needed: the page is copied */
		last_dump[0] = 0;
	if (maps_fd >= 0) {
		struct stat mst;
		if (fstat(maps_fd, &mst) == 0 && mst.st_dev == maps_dev && mst.st_ino == maps_ino)
			close(maps_fd);
		maps_fd = -1;
	}
}
