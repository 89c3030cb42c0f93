/*
 * allocator/os.c - every system call the allocator makes, and its one
 * diagnostic writer.
 *
 * Nothing here allocates or uses stdio; every function preserves errno, so a
 * successful malloc never changes it even when a purge or trim fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* dirty_decay_ms; set once by the agent at start-up */
static uint64_t decay_ms = 1000;

void hc_alloc_set_decay_ms(uint64_t ms)
{
	decay_ms = ms;
}
uint64_t hc_alloc_decay_ms(void)
{
	return decay_ms;
}

/* madvise, errno kept; 0 or the call's errno */
static int advise(void *p, size_t size, int advice)
{
	int saved = errno, err = madvise(p, size, advice) != 0 ? errno : 0;
	errno = saved;
	return err;
}

/* thp; set by the agent at start-up (atomic) */
static unsigned thp_mode = HC_THP_DEFAULT;

void hc_os_thp_mode(unsigned mode)
{
	__atomic_store_n(&thp_mode, mode, __ATOMIC_SEQ_CST);
}

int hc_os_thp(void *p, size_t size)
{
	unsigned mode = __atomic_load_n(&thp_mode, __ATOMIC_SEQ_CST);
	if (mode == HC_THP_DEFAULT)
		return 0;
	return advise(p, size, mode == HC_THP_ALWAYS ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
}

void hc_os_nohuge(void *p, size_t size)
{
	(void)advise(p, size, MADV_NOHUGEPAGE);
}

/* The system's transparent_hugepage setting is madvise: 1, not: 0, not
 * read yet: -1 (atomic; two threads that read it at once read the same) */
static int thp_sys_madvise = -1;

bool hc_os_thp_adaptive(void)
{
	if (__atomic_load_n(&thp_mode, __ATOMIC_RELAXED) != HC_THP_DEFAULT)
		return false;
	int v = __atomic_load_n(&thp_sys_madvise, __ATOMIC_RELAXED);
	if (v < 0) {
		char buf[128];
		ssize_t n = -1;
		int saved = errno,
		    fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			n = read(fd, buf, sizeof buf - 1);
			close(fd);
		}
		errno = saved;
		buf[n > 0 ? n : 0] = 0;
		v = strstr(buf, "[madvise]") != NULL;
		__atomic_store_n(&thp_sys_madvise, v, __ATOMIC_RELAXED);
	}
	return v == 1;
}

void hc_os_hugepage(void *p, size_t size)
{
	(void)advise(p, size, MADV_HUGEPAGE);
}

/* Whether size bytes at p (page-aligned) were written whole: of up to
 * eight windows of 16 pages spread over them, 7 pages in 8 present in
 * /proc/self/pagemap (bit 63; 62 is swapped).  Not mincore(2): systemd's
 * @system-service filter kills a service that calls it (seccomp.c of the
 * command's doctor lists what the library calls).  Presence is not a write:
 * pages an earlier object of a reused mapping wrote count too, so the
 * caller asks of fresh mappings only.  -1 when pagemap cannot be read. */
int hc_os_written_whole(const void *p, size_t size)
{
	enum { WINDOWS = 8, WINDOW = 16 };
	uint64_t ent[WINDOW];
	size_t pages = size / HC_PAGE, seen = 0, present = 0;
	int saved = errno, fd = open("/proc/self/pagemap", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		errno = saved;
		return -1;
	}
	for (size_t w = 0; w < WINDOWS && pages > 0; w++) {
		size_t first = pages * w / WINDOWS, n = pages - first < WINDOW ? pages - first : WINDOW;
		off_t at = (off_t)(((uintptr_t)p / HC_PAGE + first) * sizeof *ent);
		ssize_t got = pread(fd, ent, n * sizeof *ent, at);
		if (got != (ssize_t)(n * sizeof *ent))
			break;
		for (size_t i = 0; i < n; i++)
			present += (ent[i] >> 62) != 0;
		seen += n;
	}
	close(fd);
	errno = saved;
	if (seen == 0)
		return -1;
	return present * 8 >= seen * 7;
}

/* mmap at a hint (a suggestion, never MAP_FIXED: a range in use is left
 * alone and the kernel places the mapping elsewhere); errno kept */
static char *map_at(void *hint, size_t size)
{
	int saved = errno;
	void *p = mmap(hint, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	errno = saved;
	return p == MAP_FAILED ? NULL : p;
}

void *hc_os_map(size_t size)
{
	return map_at(NULL, size);
}

/* The start of the last aligned mapping (atomic; a race only costs the
 * loser the slow way below). */
static uintptr_t map_last;

/* Map size bytes aligned to align (a power of two >= the page size).  First
 * one chunk below the last such mapping, where Linux's top-down placement
 * would put it anyway but for the gap: one system call.  The gap keeps the
 * kernel from merging the two into one VMA, which it does by growing the
 * VMA already there under its write lock: every thread faulting in pages
 * of it waited for the mmap (and the munmap of a huge mapping that had
 * merged so split the heap's VMA as well).  Chunks are mapped in batches
 * (chunk.c), so the VMAs stay few: six for fork_cost's 112 MiB, and a heap
 * of 256 GiB (vm.max_map_count's 65,530 VMAs, were each chunk its own) in
 * about 4,000.  Only the hint itself is taken (a chunk-aligned place
 * elsewhere may be a gap between two mappings).  Otherwise map an
 * alignment more than needed and keep the lowest aligned range: what is
 * unmapped above it keeps it from the mapping next to it there.  Chunks
 * and huge mappings come from here, and get the thp mode before anything
 * touches them: a 2 MiB region with a small page faulted in stays in small
 * pages. */
void *hc_os_map_aligned(size_t size, size_t align)
{
	if (size > SIZE_MAX - align)
		return NULL;
	uintptr_t last = __atomic_load_n(&map_last, __ATOMIC_RELAXED);
	char *a = NULL;
	if (last > size + 2 * align) {
		char *want = (char *)(((last - size) & ~(uintptr_t)(align - 1)) - align);
		char *p = map_at(want, size);
		if (p == want)
			a = p;
		else if (p != NULL)
			hc_os_unmap(p, size);
	}
	if (a == NULL) {
		char *p = map_at(NULL, size + align);
		if (p == NULL)
			return NULL;
		a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
		if (a > p)
			hc_os_unmap(p, (size_t)(a - p));
		size_t tail = (size_t)((p + size + align) - (a + size));
		if (tail > 0)
			hc_os_unmap(a + size, tail);
	}
	__atomic_store_n(&map_last, (uintptr_t)a, __ATOMIC_RELAXED);
	(void)hc_os_thp(a, size);
	return a;
}

void hc_os_unmap(void *p, size_t size)
{
	int saved = errno;
	if (munmap(p, size) != 0)
		hc_diag_ptr("munmap failed; address space leaked at", p);
	errno = saved;
}

void hc_os_purge(void *p, size_t size)
{
	(void)advise(p, size, MADV_DONTNEED);
}

/* A process-private futex on *word: wait while it holds val (any wake-up,
 * a signal's too, returns), and wake one waiter; errno kept. */
void hc_os_futex_wait(uint32_t *word, uint32_t val)
{
	int saved = errno;
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
	errno = saved;
}

void hc_os_futex_wake(uint32_t *word)
{
	int saved = errno;
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = saved;
}

uint64_t hc_os_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Decay works in epochs of half the decay time: dirty memory is purged once
 * it has stayed free for a whole epoch, so between 1/2 and 1 decay time. */
uint64_t hc_decay_epoch(void)
{
	uint64_t half = decay_ms / 2;
	return hc_os_now_ms() / (half ? half : 1);
}

char *hc_fmt_u64(char *buf, uint64_t v)
{
	char tmp[21];
	int i = 0;
	do {
		tmp[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i)
		*buf++ = tmp[--i];
	*buf = 0;
	return buf;
}

static char *fmt_hex(char *buf, uintptr_t v)
{
	static const char dig[] = "0123456789abcdef";
	char tmp[17];
	int i = 0;
	do {
		tmp[i++] = dig[v & 15];
		v >>= 4;
	} while (v);
	*buf++ = '0';
	*buf++ = 'x';
	while (i)
		*buf++ = tmp[--i];
	*buf = 0;
	return buf;
}

__thread bool hc_fd_own __attribute__((tls_model("initial-exec")));

/* A seccomp filter is in force, or may be: /proc/self/status says so (or
 * cannot be read).  Asked at each message, since a program may install a
 * filter at any time. */
static bool seccomp_filtered(void)
{
	char st[2048];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, st, sizeof st - 1);
	close(fd);
	st[n > 0 ? n : 0] = 0;
	const char *f = strstr(st, "\nSeccomp:");
	if (f == NULL)
		return true;
	for (f += 9; *f == ' ' || *f == '\t'; f++)
		;
	return *f != '0';
}

void hc_stderr(const void *buf, size_t len)
{
	int saved = errno, fd = STDERR_FILENO;
	if (hc_fd_own) {
		fd = seccomp_filtered() ? -1 : (int)syscall(SYS_pidfd_getfd, 0, STDERR_FILENO, 0);
		if (fd < 0) /* a socket (the journal) cannot be opened again */
			fd = open("/proc/self/fd/2", O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	}
	if (fd < 0) {
		errno = saved; /* no standard error: nowhere to write */
		return;
	}
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, (const char *)buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	if (fd != STDERR_FILENO)
		close(fd);
	errno = saved;
}

/* One write(2) per message so lines from several threads do not interleave. */
static void diag_write(const char *msg, const void *p, bool with_ptr)
{
	char line[256];
	size_t len = strlen(msg);
	if (len > 200)
		len = 200;
	memcpy(line, "<heapctl>: ", 11);
	memcpy(line + 11, msg, len);
	char *e = line + 11 + len;
	if (with_ptr) {
		*e++ = ' ';
		e = fmt_hex(e, (uintptr_t)p);
	}
	*e++ = '\n';
	hc_stderr(line, (size_t)(e - line));
}

void hc_diag(const char *msg)
{
	diag_write(msg, NULL, false);
}
void hc_diag_ptr(const char *msg, const void *p)
{
	diag_write(msg, p, true);
}

void hc_assert_fail(const char *cond, const char *file, int line)
{
	char msg[200], num[24];
	size_t n = 0;
	const char *parts[] = { "assertion failed: ", cond, " at ", file, ":", num };
	hc_fmt_u64(num, (uint64_t)line);
	for (unsigned i = 0; i < sizeof parts / sizeof parts[0]; i++)
		for (const char *c = parts[i]; *c && n + 1 < sizeof msg; c++)
			msg[n++] = *c;
	msg[n] = 0;
	diag_write(msg, NULL, false);
	abort();
}

void hc_fatal_ptr(const char *msg, const void *p)
{
	diag_write(msg, p, true);
	abort();
}
