/*
 * shm/shm.c - the part of the segment library both sides link: the settings
 * table and its parser, the seqlock, the event ring and the futexes.
 *
 * It runs inside the target too, so it never allocates, never uses stdio and
 * never blocks on anything a client controls: every loop over segment
 * contents is bounded.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "heapctl_shm.h"

#define EFTYPE_HC EPROTOTYPE /* "not a regular file": no errno of its own */

_Static_assert(sizeof(hc_shm_header_t) == 192, "header layout is ABI");
_Static_assert(offsetof(hc_shm_header_t, size) == 12, "first 16 bytes are forever");
_Static_assert(HC_SHM_EVENTS && (HC_SHM_EVENTS & (HC_SHM_EVENTS - 1)) == 0, "power of two");
_Static_assert(sizeof(hc_shm_t) < UINT32_MAX, "size fits the header");

/* ---- settings ------------------------------------------------------------ */

/* The width of each type's field in hc_shm_state_t. */
#define SHM_SIZE_HC_SET_BOOL   1
#define SHM_SIZE_HC_SET_UINT   4
#define SHM_SIZE_HC_SET_LG     4
#define SHM_SIZE_HC_SET_SSIZE  8
#define SHM_SIZE_HC_SET_BYTES  8
#define SHM_SIZE_HC_SET_POW2   4
#define SHM_SIZE_HC_SET_STR    HC_SHM_PATH_MAX
#define SHM_SIZE_HC_SET_UNWIND 16
#define SHM_SIZE_HC_SET_THP    16
#define FIELD_SIZE(f)          sizeof(((hc_shm_state_t *)0)->f)

#define HC_OPTION(o, t, mn, mx, d, h) [HC_SETTING_##o] = { NULL, #o, t, mn, mx, d, h, 0, 0 },
#define HC_RUNTIME(o, t, mn, mx, d, n, f, h) \
	[HC_SETTING_##o] = { n, #o, t, mn, mx, d, h, offsetof(hc_shm_state_t, f), FIELD_SIZE(f) },
const hc_shm_setting_t hc_shm_settings[HC_NSETTINGS] = {
#include "hc_settings.def"
};
#undef HC_OPTION
#undef HC_RUNTIME
const unsigned hc_shm_nsettings = HC_NSETTINGS;

/* A run-time setting's segment field has its type's width, and lies in the
 * run of settings that the target copies as one block. */
#define HC_OPTION(o, t, mn, mx, d, h)
#define HC_RUNTIME(o, t, mn, mx, d, n, f, h)                                                        \
	_Static_assert(FIELD_SIZE(f) == SHM_SIZE_##t, "segment field " #f " has the width of " #t); \
	_Static_assert(offsetof(hc_shm_state_t, f) >= offsetof(hc_shm_state_t, prof) &&             \
	        offsetof(hc_shm_state_t, f) + FIELD_SIZE(f) <= offsetof(hc_shm_state_t, allocated), \
	    #f " is among the settings");
#include "hc_settings.def"
#undef HC_OPTION
#undef HC_RUNTIME

const hc_shm_setting_t *hc_shm_setting_find(const char *name)
{
	for (unsigned i = 0; i < HC_NSETTINGS; i++)
		if (hc_shm_settings[i].name && strcmp(hc_shm_settings[i].name, name) == 0)
			return &hc_shm_settings[i];
	return NULL;
}

const hc_shm_setting_t *hc_shm_option_find(const char *option, size_t len)
{
	for (unsigned i = 0; i < HC_NSETTINGS; i++)
		if (strlen(hc_shm_settings[i].option) == len && memcmp(hc_shm_settings[i].option, option, len) == 0)
			return &hc_shm_settings[i];
	return NULL;
}

/* decimal digits of v, NUL-terminated, into buf (24 bytes is enough) */
static char *fmt_u64(char *buf, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		*buf++ = tmp[--n];
	*buf = 0;
	return buf;
}

/* err = a + b + c, truncated */
static void say(char *err, size_t len, const char *a, const char *b, const char *c)
{
	if (len == 0)
		return;
	err[0] = 0;
	const char *parts[3] = { a, b, c };
	size_t n = 0;
	for (int i = 0; i < 3; i++)
		for (const char *p = parts[i]; p && *p && n + 1 < len; p++)
			err[n++] = *p;
	err[n] = 0;
}

static bool parse_u64(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*out = v;
	*end = p;
	return true;
}

/* 4096, 512K, 1G, 1GiB, 64MB: binary multiples */
bool hc_shm_parse_bytes(const char *s, uint64_t *out)
{
	const char *p;
	uint64_t v;
	if (!parse_u64(s, &v, &p))
		return false;
	unsigned shift = 0;
	switch (*p) {
	case 'k':
	case 'K':
		shift = 10;
		p++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		p++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		p++;
		break;
	case 't':
	case 'T':
		shift = 40;
		p++;
		break;
	}
	if (shift && *p == 'i')
		p++;
	if (*p == 'B' || (*p == 'b' && shift))
		p++;
	if (*p)
		return false;
	if (shift && v > (UINT64_MAX >> shift))
		return false;
	*out = v << shift;
	return true;
}

/* decimal digits of a signed v */
static char *fmt_i64(char *buf, int64_t v)
{
	if (v < 0) {
		*buf++ = '-';
		return fmt_u64(buf, (uint64_t)0 - (uint64_t)v);
	}
	return fmt_u64(buf, (uint64_t)v);
}

static bool parse_i64(const char *s, int64_t *out)
{
	const char *end;
	uint64_t u;
	bool neg = *s == '-';
	if (!parse_u64(s + neg, &u, &end) || *end || u > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? -(int64_t)u : (int64_t)u;
	return true;
}

static const char *const unwind_words[] = { "fp", "libunwind", "libgcc", NULL };
static const char *const thp_words[] = { "default", "always", "never", NULL };

const char *const *hc_shm_words(hc_set_type_t t)
{
	return t == HC_SET_UNWIND ? unwind_words : t == HC_SET_THP ? thp_words : NULL;
}

int hc_shm_word_index(hc_set_type_t t, const char *w)
{
	const char *const *words = hc_shm_words(t);
	for (int i = 0; words != NULL && words[i] != NULL; i++)
		if (strcmp(w, words[i]) == 0)
			return i;
	return -1;
}

/* "a, b or c" */
static void word_list(const char *const *words, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; words[i] != NULL; i++) {
		const char *sep = i == 0 ? "" : words[i + 1] == NULL ? " or " : ", ";
		say(buf + n, len - n, sep, words[i], NULL);
		n = strlen(buf);
	}
}

/* What a value of s has to be, for a message: "a whole number from 0 to 62". */
static void noun(const hc_shm_setting_t *s, bool conf, char *buf, size_t len)
{
	char lo[24], hi[24], words[64];
	switch (s->type) {
	case HC_SET_BOOL: say(buf, len, conf ? "true or false" : "a boolean (true or false)", NULL, NULL); return;
	case HC_SET_UINT:
	case HC_SET_LG:
	case HC_SET_SSIZE:
	case HC_SET_POW2: {
		fmt_i64(lo, s->min);
		fmt_i64(hi, s->max);
		say(buf, len, conf ? "an integer from " : "a whole number from ", lo, " to ");
		size_t n = strlen(buf);
		say(buf + n, len - n, hi, NULL, NULL);
		return;
	}
	case HC_SET_BYTES: say(buf, len, "a byte count (like 4096, 512K, 1G)", NULL, NULL); return;
	case HC_SET_UNWIND:
	case HC_SET_THP:
		word_list(hc_shm_words(s->type), words, sizeof words);
		if (conf)
			say(buf, len, words, NULL, NULL);
		else
			say(buf, len, s->type == HC_SET_UNWIND ? "an unwinder (" : "a THP mode (", words, ")");
		return;
	case HC_SET_STR: break;
	}
	say(buf, len, "a value", NULL, NULL);
}

/* err = the reason v is not a value of s, in the form of its front end */
static bool refuse(const hc_shm_setting_t *s, bool conf, const char *v, char *err, size_t errlen)
{
	char what[96];
	noun(s, conf, what, sizeof what);
	if (conf)
		say(err, errlen, "expected ", what, NULL);
	else {
		say(err, errlen, "'", v, "' is not ");
		size_t n = strlen(err);
		say(err + n, errlen - n, what, NULL, NULL);
	}
	return false;
}

static bool in_range(const hc_shm_setting_t *s, int64_t x)
{
	return x >= s->min && x <= s->max;
}

static bool parse_value(const hc_shm_setting_t *s, const char *v, bool conf, hc_shm_value_t *out, char *err,
    size_t errlen)
{
	memset(out, 0, sizeof *out);
	const char *end;
	int64_t x;
	switch (s->type) {
	case HC_SET_BOOL:
		if (!strcmp(v, "true") || (!conf && (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "yes"))))
			out->b = true;
		else if (!strcmp(v, "false") || (!conf && (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "no"))))
			out->b = false;
		else
			return refuse(s, conf, v, err, errlen);
		return true;
	case HC_SET_UINT:
	case HC_SET_LG:
		if (!parse_u64(v, &out->u, &end) || *end || out->u > (uint64_t)s->max || !in_range(s, (int64_t)out->u))
			return refuse(s, conf, v, err, errlen);
		return true;
	case HC_SET_SSIZE:
		if (!parse_i64(v, &out->i) || !in_range(s, out->i))
			return refuse(s, conf, v, err, errlen);
		return true;
	case HC_SET_BYTES:
		if (!hc_shm_parse_bytes(v, &out->u))
			return refuse(s, conf, v, err, errlen);
		return true;
	case HC_SET_POW2:
		if (conf) { /* jemalloc's lg_prof_interval: the log2 */
			if (!parse_i64(v, &x) || !in_range(s, x))
				return refuse(s, conf, v, err, errlen);
			out->u = x < 0 ? UINT64_MAX : (uint64_t)x;
			return true;
		}
		if (!hc_shm_parse_bytes(v, &out->u)) {
			say(err, errlen, "'", v, "' is not a byte count (like 1G, or 0 for off)");
			return false;
		}
		if (out->u == 0) {
			out->u = UINT64_MAX; /* off */
			return true;
		}
		if (out->u & (out->u - 1)) {
			say(err, errlen, "'", v, "' is not a power of two (like 64M or 1G)");
			return false;
		}
		out->u = (uint64_t)__builtin_ctzll(out->u);
		if (!in_range(s, (int64_t)out->u)) {
			say(err, errlen, "'", v, "' is too large");
			return false;
		}
		return true;
	case HC_SET_STR:
		if (!in_range(s, (int64_t)strnlen(v, (size_t)s->max + 1))) {
			char max[24];
			fmt_u64(max, (uint64_t)s->max);
			if (v[0] == 0)
				say(err, errlen, conf ? "empty value" : "the value is empty", NULL, NULL);
			else
				say(err, errlen, conf ? "value too long (at most " : "the value is too long (at most ",
				    max, " bytes)");
			return false;
		}
		out->s = v;
		return true;
	case HC_SET_UNWIND:
	case HC_SET_THP:
		if (hc_shm_word_index(s->type, v) < 0)
			return refuse(s, conf, v, err, errlen);
		out->s = v;
		return true;
	}
	say(err, errlen, "unknown setting type", NULL, NULL);
	return false;
}

bool hc_shm_setting_parse(const hc_shm_setting_t *s, const char *v, hc_shm_value_t *out, char *err, size_t errlen)
{
	return parse_value(s, v, false, out, err, errlen);
}

bool hc_shm_option_parse(const hc_shm_setting_t *s, const char *v, hc_shm_value_t *out, char *err, size_t errlen)
{
	return parse_value(s, v, true, out, err, errlen);
}

bool hc_shm_setting_check(const hc_shm_setting_t *s, const hc_shm_value_t *v, char *err, size_t errlen)
{
	char text[HC_SHM_VALUE_MAX];
	hc_shm_value_t back;
	hc_shm_setting_text(s, v, text, sizeof text);
	switch (s->type) {
	case HC_SET_UINT:
	case HC_SET_LG:
		if (v->u > (uint64_t)s->max || !in_range(s, (int64_t)v->u))
			return refuse(s, false, text, err, errlen);
		return true;
	case HC_SET_SSIZE: return in_range(s, v->i) || refuse(s, false, text, err, errlen);
	case HC_SET_POW2:
		return v->u == UINT64_MAX || in_range(s, (int64_t)v->u) || refuse(s, false, text, err, errlen);
	case HC_SET_STR:
	case HC_SET_UNWIND:
	case HC_SET_THP: return v->s != NULL && parse_value(s, v->s, false, &back, err, errlen);
	default: return true;
	}
}

void hc_shm_setting_get(const hc_shm_setting_t *s, const hc_shm_state_t *st, hc_shm_value_t *out)
{
	memset(out, 0, sizeof *out);
	const char *f = (const char *)st + s->shm_offset;
	uint32_t u32;
	int32_t i32;
	switch (s->type) {
	case HC_SET_BOOL: out->b = *(const uint8_t *)f != 0; return;
	case HC_SET_UINT:
	case HC_SET_LG:
		memcpy(&u32, f, 4);
		out->u = u32;
		return;
	case HC_SET_SSIZE: memcpy(&out->i, f, 8); return;
	case HC_SET_BYTES: memcpy(&out->u, f, 8); return;
	case HC_SET_POW2:
		memcpy(&i32, f, 4);
		out->u = i32 < 0 ? UINT64_MAX : (uint64_t)i32;
		return;
	case HC_SET_STR:
	case HC_SET_UNWIND:
	case HC_SET_THP: out->s = hc_shm_strvalid(f, s->shm_size) ? f : ""; return;
	}
}

void hc_shm_setting_put(const hc_shm_setting_t *s, hc_shm_state_t *st, const hc_shm_value_t *v)
{
	char *f = (char *)st + s->shm_offset;
	uint32_t u32 = (uint32_t)v->u;
	int32_t i32 = v->u == UINT64_MAX || v->u > INT32_MAX ? -1 : (int32_t)v->u;
	switch (s->type) {
	case HC_SET_BOOL: *(uint8_t *)f = v->b; return;
	case HC_SET_UINT:
	case HC_SET_LG: memcpy(f, &u32, 4); return;
	case HC_SET_SSIZE: memcpy(f, &v->i, 8); return;
	case HC_SET_BYTES: memcpy(f, &v->u, 8); return;
	case HC_SET_POW2: memcpy(f, &i32, 4); return;
	case HC_SET_STR:
	case HC_SET_UNWIND:
	case HC_SET_THP: hc_shm_strlcpy(f, v->s ? v->s : "", s->shm_size); return;
	}
}

void hc_shm_setting_text(const hc_shm_setting_t *s, const hc_shm_value_t *v, char *buf, size_t len)
{
	char num[24];
	switch (s->type) {
	case HC_SET_BOOL: hc_shm_strlcpy(buf, v->b ? "true" : "false", len); return;
	case HC_SET_SSIZE: fmt_i64(num, v->i); break;
	case HC_SET_POW2: fmt_u64(num, v->u >= 64 ? 0 : (uint64_t)1 << v->u); break;
	case HC_SET_STR:
	case HC_SET_UNWIND:
	case HC_SET_THP: hc_shm_strlcpy(buf, v->s ? v->s : "", len); return;
	default: fmt_u64(num, v->u); break;
	}
	hc_shm_strlcpy(buf, num, len);
}

/* ---- names, strings, clocks ------------------------------------------------ */

void hc_shm_path(char *buf, size_t len, const char *root, int pid)
{
	char tail[24];
	fmt_u64(tail, (unsigned)pid);
	size_t o = 0;
	const char *parts[4] = { root ? root : "", HC_SHM_DIR "/", HC_SHM_BASENAME, tail };
	for (int i = 0; i < 4; i++)
		for (const char *p = parts[i]; *p && o + 1 < len; p++)
			buf[o++] = *p;
	if (len)
		buf[o] = 0;
}

ssize_t hc_shm_read_file(const char *path, char *buf, size_t len)
{
	return hc_shm_read_file_at(AT_FDCWD, path, buf, len);
}

ssize_t hc_shm_read_file_at(int dfd, const char *path, char *buf, size_t len)
{
	int fd = openat(dfd, path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, len - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	int e = errno;
	close(fd);
	buf[n] = 0;
	errno = e;
	return (ssize_t)n;
}

void hc_shm_strlcpy(char *dst, const char *src, size_t len)
{
	size_t n = strnlen(src, len - 1);
	memcpy(dst, src, n);
	dst[n] = 0;
}

bool hc_shm_strvalid(const char *s, size_t len)
{
	return memchr(s, 0, len) != NULL;
}

uint64_t hc_shm_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hc_shm_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *hc_shm_event_name(uint32_t type)
{
	switch (type) {
	case HC_EV_GDUMP: return "gdump";
	case HC_EV_DUMP: return "dump";
	case HC_EV_DUMP_FAILED: return "dump_failed";
	case HC_EV_CONFIG: return "config";
	case HC_EV_EXIT: return "exit";
	case HC_EV_START: return "start";
	}
	return NULL;
}

const char *hc_shm_dump_kind_name(uint32_t kind)
{
	switch (kind) {
	case 'f': return "final";
	case 'i': return "interval";
	case 'm': return "manual";
	case 'u': return "gdump";
	case 't': return "timer";
	case 's': return "threshold";
	case 'p': return "peak";
	}
	return NULL;
}

/* ---- processes ------------------------------------------------------------ */

uint64_t hc_shm_proc_start_time(int pid, bool *ended)
{
	char path[40] = "/proc/";
	strcpy(fmt_u64(path + 6, (unsigned)pid), "/stat");
	return hc_shm_proc_start_time_at(AT_FDCWD, path, ended);
}

uint64_t hc_shm_proc_start_time_at(int dfd, const char *path, bool *ended)
{
	char buf[1024];
	*ended = true;
	if (hc_shm_read_file_at(dfd, path, buf, sizeof buf) <= 0)
		return 0;
	/* the command (field 2) may hold spaces and parentheses: count from
	 * the last ")" */
	char *p = strrchr(buf, ')');
	if (p == NULL || p[1] != ' ')
		return 0;
	*ended = p[2] == 'Z' || p[2] == 'X' || p[2] == 'x';
	for (int field = 2; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	uint64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v;
}

uint64_t hc_shm_pidns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* "heapctl.<pid>" or "heapctl.<pid>.<16 hex digits>": the pid, else -1. */
int hc_shm_name_pid(const char *name)
{
	if (strncmp(name, HC_SHM_BASENAME, sizeof HC_SHM_BASENAME - 1) != 0)
		return -1;
	const char *digits = name + sizeof HC_SHM_BASENAME - 1, *p = digits;
	long pid = 0;
	for (; *p >= '0' && *p <= '9' && pid < INT_MAX / 10; p++)
		pid = pid * 10 + (*p - '0');
	if (p == digits || pid <= 0 || (*digits == '0'))
		return -1;
	if (*p == 0)
		return (int)pid;
	if (*p != '.')
		return -1;
	const char *hex = ++p;
	for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
		;
	return *p == 0 && p - hex == 16 ? (int)pid : -1;
}

/* Read the header of a file in dfd without trusting it to be one: never
 * through a symlink, never blocking on a FIFO, regular files only. */
int hc_shm_header_at(int dfd, const char *name, hc_shm_header_t *h, struct stat *st)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int err = 0;
	if (fstat(fd, st) != 0)
		err = errno;
	else if (!S_ISREG(st->st_mode))
		err = EFTYPE_HC;
	else if (pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h)
		err = EINVAL;
	close(fd);
	return err;
}

bool hc_shm_unfinished_own(int err, const hc_shm_header_t *h, const struct stat *st, int age_s)
{
	if ((err != 0 && err != EINVAL) || !S_ISREG(st->st_mode) || st->st_uid != geteuid())
		return false;
	if (err == EINVAL ? st->st_size >= (off_t)sizeof *h
	                  : h->ready != 0 || (h->magic != 0 && h->magic != HC_SHM_MAGIC))
		return false;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return st->st_mtim.tv_sec + age_s < now.tv_sec;
}

/* A segment is stale when it says it belongs to this PID namespace and the
 * process it names is gone, or its pid now belongs to a later process.  A
 * segment of another PID namespace is never judged by its pid (the same
 * pid means another process there); with reused (heapctl's sweep), one
 * whose namespace is gone goes (clean_foreign).  Unfinished files of our
 * own go too.
 *
 * Without reused, a file whose pid some process has (a live one, another
 * user's, or one of another namespace's) is passed over after one kill(2)
 * and never opened.  Every process that starts with the library sweeps
 * this way; it used to open each such file and read /proc/PID/stat (500
 * live processes: 6-9 ms a sweep, 0.3-0.6 ms this way; tests/bench/ctl.sh).
 * A file it leaves (its pid reused since) is removed by heapctl, which
 * makes the whole sweep, or by that pid's next process with the library,
 * which removes its own name at start-up.  Staged dumps of our own user
 * left for over a minute go too (clean_staged), not counted among the
 * segments removed. */
/* The initial PID namespace's inode (the kernel's PROC_PID_INIT_INO,
 * fixed since Linux 3.8). */
#define INIT_PIDNS_INO 0xEFFFFFFCull

typedef struct {
	char name[64];
	uint64_t ino, pidns;
} foreign_t;

/* Remove the foreign segments (of other PID namespaces, in our /dev/shm:
 * containers run with --ipc=host) whose namespace is gone: no process
 * anywhere has it (every process of a namespace is also in those above
 * it, so a namespace with a live process has a process whose innermost
 * namespace it is, and the initial namespace's /proc shows them all).
 * Only from the initial namespace (elsewhere a sibling container's
 * processes are out of sight), and only if every process's
 * /proc/PID/ns/pid could be read, but for those its status shows in the
 * initial namespace (root's view: another user's cannot prove anything).  The file must be the one whose header was
 * read (the library never replaces a file, so the same inode is the same segment). */
/* Whether the process of path ("<pid>/ns/pid", the pid's l digits) is in
 * the initial PID namespace, by its status's NSpid (one pid: no
 * namespace below ours), which anyone may read where its ns link needs
 * ptrace's access (a process manager's pid 1, other users'). */
static bool top_level(int pfd, char *path, size_t l)
{
	memcpy(path + l, "/status", 8);
	char b[4096];
	if (hc_shm_read_file_at(pfd, path, b, sizeof b) <= 0)
		return false;
	const char *ns = strstr(b, "\nNSpid:");
	if (ns == NULL)
		return false;
	unsigned fields = 0;
	for (const char *q = ns + 7; *q && *q != '\n'; q++)
		fields += (*q >= '0' && *q <= '9') && (q[-1] == '\t' || q[-1] == ' ');
	return fields == 1 && strchr(ns + 1, '\n') != NULL;
}

static int clean_foreign(int dfd, const foreign_t *f, unsigned nf)
{
	bool alive[64] = { false };
	int pfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return 0;
	char buf[4096];
	long n;
	bool complete = true;
	while (complete && (n = syscall(SYS_getdents64, pfd, buf, sizeof buf)) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			off += d->d_reclen;
			if (d->d_name[0] < '1' || d->d_name[0] > '9')
				continue;
			char path[64] = "";
			size_t l = strnlen(d->d_name, 20);
			memcpy(path, d->d_name, l);
			memcpy(path + l, "/ns/pid", 8);
			struct stat st;
			if (fstatat(pfd, path, &st, 0) != 0) {
				if (errno == ENOENT || errno == ESRCH)
					continue; /* it exited meanwhile */
				if ((errno == EACCES || errno == EPERM) && top_level(pfd, path, l))
					continue; /* in our own namespace */
				complete = false; /* cannot tell */
				break;
			}
			for (unsigned i = 0; i < nf; i++)
				alive[i] |= st.st_ino == f[i].pidns;
		}
	}
	close(pfd);
	int removed = 0;
	for (unsigned i = 0; complete && i < nf; i++) {
		struct stat st;
		if (!alive[i] && fstatat(dfd, f[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == f[i].ino &&
		    unlinkat(dfd, f[i].name, 0) == 0)
			removed++;
	}
	return removed;
}

/* A staged dump (HC_SHM_STAGE_BASE) of our own user that nobody has
 * written for a minute: its client copies one out within the control
 * thread's 2 s lease or gives up, and the control thread removes what a
 * client gave up on; a file older than that was left by a process that
 * ended before its lease did (its client killed, then the process).  A
 * minute, so that a writer stopped for a while (SIGSTOP, a debugger) keeps
 * its file. */
#define STAGE_STALE_S 60

static void clean_staged(int dfd, const char *name)
{
	struct stat st;
	struct timespec now;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    clock_gettime(CLOCK_REALTIME, &now) != 0 || now.tv_sec - st.st_mtim.tv_sec < STAGE_STALE_S)
		return;
	(void)unlinkat(dfd, name, 0);
}

int hc_shm_clean_stale(bool reused)
{
	uint64_t pidns = hc_shm_pidns();
	int dfd = open(HC_SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || pidns == 0) {
		if (dfd >= 0)
			close(dfd);
		return 0;
	}
	char buf[4096];
	unsigned seen = 0, nforeign = 0;
	int removed = 0;
	long n;
	foreign_t foreign[64];
	bool init_ns = pidns == INIT_PIDNS_INO;
	while (seen < 4096 && (n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
		for (long off = 0; off < n && seen < 4096;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			off += d->d_reclen;
			const char *name = d->d_name;
			if (hc_shm_staged_path(name)) {
				seen++;
				clean_staged(dfd, name); /* not a segment: not counted */
				continue;
			}
			int pid = hc_shm_name_pid(name);
			if (pid < 0)
				continue;
			seen++;
			if (pid == getpid())
				continue;
			if (!reused && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
				continue;
			hc_shm_header_t h;
			struct stat st;
			int err = hc_shm_header_at(dfd, name, &h, &st);
			if (hc_shm_unfinished_own(err, &h, &st, 10)) {
				if (unlinkat(dfd, name, 0) == 0)
					removed++;
				continue;
			}
			if (err == 0 && h.magic == HC_SHM_MAGIC && h.ready && h.pidns != pidns && h.pidns != 0 &&
			    reused && init_ns && nforeign < 64 && strlen(name) < 64 &&
			    (st.st_uid == geteuid() || geteuid() == 0)) {
				memcpy(foreign[nforeign].name, name, strlen(name) + 1);
				foreign[nforeign].ino = st.st_ino;
				foreign[nforeign++].pidns = h.pidns;
				continue;
			}
			if (err != 0 || h.magic != HC_SHM_MAGIC || h.pidns != pidns || h.pid != pid)
				continue;
			/* asked again also without reused: a process that took the
			 * pid since the first look may have made this file, and its
			 * start time is what tells */
			bool gone = kill((pid_t)pid, 0) != 0 && errno == ESRCH;
			if (!gone) {
				bool ended;
				uint64_t stt = hc_shm_proc_start_time(pid, &ended);
				gone = stt != 0 && stt != h.start_time;
			}
			if (gone && unlinkat(dfd, name, 0) == 0)
				removed++;
		}
	}
	if (nforeign)
		removed += clean_foreign(dfd, foreign, nforeign);
	close(dfd);
	return removed;
}

/* ---- slots ------------------------------------------------------------------- */

_Static_assert(offsetof(hc_shm_slot_t, state) == 0 && offsetof(hc_shm_slot_t, gen) == 4, "state and gen are one word");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "state is the word's low half");
_Static_assert(offsetof(hc_shm_mailbox_t, slot) % 8 == 0 && sizeof(hc_shm_slot_t) % 8 == 0, "slot words are aligned");

static uint64_t *slot_word(hc_shm_slot_t *sl)
{
	return (uint64_t *)(void *)&sl->state;
}

uint64_t hc_shm_slot_load(hc_shm_slot_t *sl)
{
	return __atomic_load_n(slot_word(sl), __ATOMIC_ACQUIRE);
}

bool hc_shm_slot_cas(hc_shm_slot_t *sl, uint32_t state, uint32_t gen, uint32_t nstate, uint32_t ngen)
{
	uint64_t expect = HC_SLOT_WORD(state, gen);
	return __atomic_compare_exchange_n(slot_word(sl), &expect, HC_SLOT_WORD(nstate, ngen), false, __ATOMIC_ACQ_REL,
	    __ATOMIC_ACQUIRE);
}

/* ---- futexes --------------------------------------------------------------- */

int hc_shm_futex_wait(uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
	struct timespec ts = { (time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull) };
	long r = syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
	return r == 0 ? 0 : errno;
}

void hc_shm_futex_wake(uint32_t *addr, int n)
{
	int saved = errno;
	syscall(SYS_futex, addr, FUTEX_WAKE, n, NULL, NULL, 0);
	errno = saved;
}

/* ---- the seqlock ----------------------------------------------------------- */

/* The writer derives the odd value from what it finds, so garbage written
 * into seq cannot invert the protocol for more than one write. */
void hc_shm_state_write_begin(hc_shm_state_t *st)
{
	uint32_t s = __atomic_load_n(&st->seq, __ATOMIC_RELAXED) & ~1u;
	__atomic_store_n(&st->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

void hc_shm_state_write_end(hc_shm_state_t *st)
{
	uint32_t s = __atomic_load_n(&st->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&st->seq, (s | 1u) + 1, __ATOMIC_RELEASE);
}

bool hc_shm_state_read(const hc_shm_state_t *st, hc_shm_state_t *out)
{
	for (int i = 0; i < 20000; i++) {
		uint32_t s1 = __atomic_load_n(&st->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1) {
			if (i > 100) {
				struct timespec ts = { 0, 20000 };
				nanosleep(&ts, NULL);
			}
			continue;
		}
		memcpy(out, (const void *)st, sizeof *out);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&st->seq, __ATOMIC_RELAXED) == s1) {
			out->prefix[sizeof out->prefix - 1] = 0;
			out->unwind[sizeof out->unwind - 1] = 0;
			out->last_dump[sizeof out->last_dump - 1] = 0;
			return true;
		}
	}
	return false;
}

/* ---- the event ring -------------------------------------------------------- */

/* Each slot carries the number of the event in it (plus one), cleared while
 * it is rewritten; a reader checks it before and after copying, so it either
 * gets the event whole or learns it was overwritten. */
void hc_shm_event_publish(hc_shm_ring_t *r, const hc_shm_event_t *ev)
{
	uint64_t n = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	hc_shm_event_t *e = &r->ev[n & (HC_SHM_EVENTS - 1)];
	__atomic_store_n(&e->seq, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy((char *)e + sizeof e->seq, (const char *)ev + sizeof ev->seq, sizeof *e - sizeof e->seq);
	__atomic_store_n(&e->seq, n + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&r->head, n + 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&r->futex, 1, __ATOMIC_RELEASE);
	hc_shm_futex_wake(&r->futex, INT_MAX);
}

int hc_shm_event_read(const hc_shm_ring_t *r, uint64_t n, hc_shm_event_t *out)
{
	const hc_shm_event_t *e = &r->ev[n & (HC_SHM_EVENTS - 1)];
	uint64_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	if (s1 != n + 1) {
		uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		return head > n ? -1 : 0;
	}
	memcpy(out, (const void *)e, sizeof *out);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s1)
		return -1;
	out->name[sizeof out->name - 1] = 0;
	out->path[sizeof out->path - 1] = 0;
	out->text[sizeof out->text - 1] = 0;
	return 1;
}
