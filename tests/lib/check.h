/*
 * check.h - minimal failure-counting check macro shared by the heapctl tests.
 *
 *   CHECK(cond, fmt, ...)   on failure prints one line to stderr:
 *                             FAIL <file>:<line>: <message>
 *                           and increments a process-wide (thread-safe) counter.
 *   hc_check_failures()     number of failed checks so far.
 *   hc_check_finish(name)   prints a one-line summary and returns the exit code
 *                           (0 if no check failed, 1 otherwise).
 *
 * Usable from C (gnu11) and C++ (gnu++17).  Failure reporting formats into a
 * stack buffer and uses write(2), so it never allocates.  After
 * HC_CHECK_MAX_PRINT failure lines, further lines are suppressed (they are still
 * counted).
 */
#ifndef HC_TESTS_CHECK_H
#define HC_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef HC_CHECK_MAX_PRINT
#define HC_CHECK_MAX_PRINT 200
#endif

static int hc_check_failed_count __attribute__((unused));

static inline void hc_check_write_all(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(2, buf, len);
		if (w <= 0)
			return;
		buf += w;
		len -= (size_t)w;
	}
}

static void hc_check_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noinline, cold, unused));

static void hc_check_fail(const char *file, int line, const char *fmt, ...)
{
	int n = __atomic_add_fetch(&hc_check_failed_count, 1, __ATOMIC_SEQ_CST);
	char buf[1024];
	int len;
	if (n > HC_CHECK_MAX_PRINT) {
		if (n == HC_CHECK_MAX_PRINT + 1) {
			len = snprintf(buf, sizeof buf,
			    "FAIL %s:%d: (too many failures, further FAIL lines suppressed)\n", file, line);
			hc_check_write_all(buf, (size_t)len);
		}
		return;
	}
	len = snprintf(buf, sizeof buf, "FAIL %s:%d: ", file, line);
	if (len < 0)
		len = 0;
	if ((size_t)len < sizeof buf - 2) {
		va_list ap;
		va_start(ap, fmt);
		int m = vsnprintf(buf + len, sizeof buf - 2 - (size_t)len, fmt, ap);
		va_end(ap);
		if (m > 0)
			len += m;
		if ((size_t)len > sizeof buf - 2)
			len = (int)(sizeof buf - 2);
	}
	buf[len++] = '\n';
	hc_check_write_all(buf, (size_t)len);
}

#define CHECK(cond, fmt, ...)                                                  \
	do {                                                                   \
		if (__builtin_expect(!(cond), 0))                              \
			hc_check_fail(__FILE__, __LINE__, fmt, ##__VA_ARGS__); \
	} while (0)

static inline int hc_check_failures(void)
{
	return __atomic_load_n(&hc_check_failed_count, __ATOMIC_SEQ_CST);
}

/* Print a summary line and return the process exit code. */
static inline int hc_check_finish(const char *name)
{
	int n = hc_check_failures();
	char buf[256];
	int len;
	if (n == 0) {
		len = snprintf(buf, sizeof buf, "%s: all checks passed\n", name);
		if (len > 0)
			(void)!write(1, buf, (size_t)len);
		return 0;
	}
	len = snprintf(buf, sizeof buf, "%s: %d check(s) FAILED\n", name, n);
	if (len > 0)
		hc_check_write_all(buf, (size_t)len);
	return 1;
}

#endif /* HC_TESTS_CHECK_H */
