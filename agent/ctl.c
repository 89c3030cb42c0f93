/*
 * agent/ctl.c - jemalloc's mallctl namespace: mallctl, mallctlnametomib,
 * mallctlbymib.
 *
 * One table holds every name with its type and handler, so lookups by name
 * and by MIB share one path.  A MIB here is the entry's index in the table
 * followed by one placeholder per further name component, which is the
 * shape jemalloc callers expect (they only pass back what nametomib gave).
 *
 * Errors follow jemalloc: ENOENT for an unknown name, EINVAL for a wrong
 * *oldlenp or newlen, EPERM for writing a read-only name.  Statistics are a
 * snapshot taken when "epoch" is written, as in jemalloc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>
#include <unistd.h>

#include "agent.h"
#include "../allocator/heapctl.h"


typedef enum { T_BOOL, T_UNSIGNED, T_SIZE, T_SSIZE, T_U64, T_STR, T_WRITER } ctl_type_t;

typedef union {
	bool b;
	unsigned u;
	size_t z;
	ssize_t sz;
	uint64_t u64;
	const char *s;
	struct { /* T_WRITER: jemalloc's write_cb_t and its arg */
		void (*cb)(void *, const char *);
		void *opaque;
	} w;
} ctl_val_t;

typedef struct ctl_entry_s ctl_entry_t;
/* read: fill *out; write: apply *in.  Return 0 or an errno value. */
typedef int (*ctl_read_fn)(const ctl_entry_t *e, ctl_val_t *out);
typedef int (*ctl_write_fn)(const ctl_entry_t *e, const ctl_val_t *in);

struct ctl_entry_s {
	const char *name;
	ctl_type_t type;
	ctl_read_fn read;
	ctl_write_fn write; /* NULL: read-only */
	intptr_t arg;
};

static size_t type_size(ctl_type_t t)
{
	switch (t) {
	case T_BOOL: return sizeof(bool);
	case T_UNSIGNED: return sizeof(unsigned);
	case T_SIZE: return sizeof(size_t);
	case T_SSIZE: return sizeof(ssize_t);
	case T_U64: return sizeof(uint64_t);
	case T_WRITER: return 2 * sizeof(void *);
	case T_STR: return sizeof(const char *);
	}
	return 0;
}

/* ---- statistics snapshot ----------------------------------------------- */

static hc_stats_t snapshot;
static uint64_t epoch_value = 1;
static hc_mutex_t snapshot_lock HC_FORK_DATA = HC_MUTEX_INIT(HC_RANK_SNAPSHOT, "snapshot_lock");
static bool snapshot_taken;

static void snapshot_refresh(void)
{
	hc_stats_t st;
	hc_stats_refresh(&st);
	hc_mutex_lock(&snapshot_lock);
	snapshot = st;
	snapshot_taken = true;
	epoch_value++;
	hc_mutex_unlock(&snapshot_lock);
}

/* fork: the snapshot lock is a leaf (nothing is taken under it), so it is
 * taken last before fork and released first after. */
void hc_ctl_fork_prepare(void)
{
	hc_mutex_lock(&snapshot_lock);
}
void hc_ctl_fork_parent(void)
{
	hc_mutex_unlock(&snapshot_lock);
}
void hc_ctl_fork_child(void)
{
	hc_mutex_reinit(&snapshot_lock);
}

static int rd_epoch(const ctl_entry_t *e, ctl_val_t *out)
{
	(void)e;
	hc_mutex_lock(&snapshot_lock);
	out->u64 = epoch_value;
	hc_mutex_unlock(&snapshot_lock);
	return 0;
}

static int wr_epoch(const ctl_entry_t *e, const ctl_val_t *in)
{
	(void)e;
	(void)in;
	snapshot_refresh();
	return 0;
}

static int rd_stat(const ctl_entry_t *e, ctl_val_t *out)
{
	if (!__atomic_load_n(&snapshot_taken, __ATOMIC_ACQUIRE))
		snapshot_refresh();
	hc_mutex_lock(&snapshot_lock);
	out->z = *(const size_t *)((const char *)&snapshot + e->arg);
	hc_mutex_unlock(&snapshot_lock);
	return 0;
}

/* ---- constants --------------------------------------------------------- */

static int rd_const_bool(const ctl_entry_t *e, ctl_val_t *out)
{
	out->b = e->arg != 0;
	return 0;
}
static int rd_const_size(const ctl_entry_t *e, ctl_val_t *out)
{
	out->z = (size_t)e->arg;
	return 0;
}
static int rd_const_str(const ctl_entry_t *e, ctl_val_t *out)
{
	out->s = (const char *)e->arg;
	return 0;
}

static int rd_thp_dense(const ctl_entry_t *e, ctl_val_t *out)
{
	(void)e;
	out->s = hc_alloc_thp_dense();
	return 0;
}

static int rd_narenas(const ctl_entry_t *e, ctl_val_t *out)
{
	(void)e;
	if (!__atomic_load_n(&snapshot_taken, __ATOMIC_ACQUIRE))
		snapshot_refresh();
	hc_mutex_lock(&snapshot_lock);
	out->u = (unsigned)snapshot.narenas;
	hc_mutex_unlock(&snapshot_lock);
	return 0;
}

/* ---- the settings of shm/hc_settings.def ------------------------------- */

/* The mallctl type of opt.<option> and of the run-time name. */
#define OPT_T_HC_SET_BOOL   T_BOOL
#define OPT_T_HC_SET_UINT   T_UNSIGNED
#define OPT_T_HC_SET_LG     T_SIZE
#define OPT_T_HC_SET_SSIZE  T_SSIZE
#define OPT_T_HC_SET_BYTES  T_U64
#define OPT_T_HC_SET_POW2   T_SSIZE /* opt.lg_prof_interval: the log2 */
#define OPT_T_HC_SET_STR    T_STR
#define OPT_T_HC_SET_UNWIND T_STR
#define OPT_T_HC_SET_THP    T_STR
#define RT_T_HC_SET_BOOL    T_BOOL
#define RT_T_HC_SET_UINT    T_UNSIGNED
#define RT_T_HC_SET_LG      T_SIZE
#define RT_T_HC_SET_SSIZE   T_SSIZE
#define RT_T_HC_SET_BYTES   T_U64
#define RT_T_HC_SET_POW2    T_U64 /* prof.interval: bytes, 0 off */
#define RT_T_HC_SET_STR     T_STR
#define RT_T_HC_SET_UNWIND  T_STR
#define RT_T_HC_SET_THP     T_STR

static void to_ctl(const hc_shm_setting_t *s, bool runtime, const hc_shm_value_t *v, ctl_val_t *out)
{
	switch (s->type) {
	case HC_SET_BOOL: out->b = v->b; return;
	case HC_SET_UINT: out->u = (unsigned)v->u; return;
	case HC_SET_LG: out->z = (size_t)v->u; return;
	case HC_SET_SSIZE: out->sz = (ssize_t)v->i; return;
	case HC_SET_BYTES: out->u64 = v->u; return;
	case HC_SET_POW2:
		if (runtime)
			out->u64 = v->u >= 64 ? 0 : (uint64_t)1 << v->u;
		else
			out->sz = v->u >= 64 ? -1 : (ssize_t)v->u;
		return;
	case HC_SET_STR:
	case HC_SET_UNWIND:
	case HC_SET_THP: out->s = v->s; return;
	}
}

static int from_ctl(const hc_shm_setting_t *s, const ctl_val_t *in, hc_shm_value_t *v)
{
	memset(v, 0, sizeof *v);
	switch (s->type) {
	case HC_SET_BOOL: v->b = in->b; return 0;
	case HC_SET_UINT: v->u = in->u; return 0;
	case HC_SET_LG: v->u = in->z; return 0;
	case HC_SET_SSIZE: v->i = in->sz; return 0;
	case HC_SET_BYTES: v->u = in->u64; return 0;
	case HC_SET_POW2: /* bytes, a power of two, or 0 for off */
		if (in->u64 & (in->u64 - 1))
			return EINVAL;
		v->u = in->u64 ? (uint64_t)__builtin_ctzll(in->u64) : UINT64_MAX;
		return 0;
	case HC_SET_STR:
	case HC_SET_UNWIND:
	case HC_SET_THP: v->s = in->s; return in->s ? 0 : EINVAL;
	}
	return EINVAL;
}

static int rd_option(const ctl_entry_t *e, ctl_val_t *out)
{
	hc_shm_value_t v;
	hc_setting_option((unsigned)e->arg, &v);
	to_ctl(&hc_shm_settings[e->arg], false, &v, out);
	return 0;
}

static int rd_setting(const ctl_entry_t *e, ctl_val_t *out)
{
	hc_shm_value_t v;
	hc_setting_get((unsigned)e->arg, &v, NULL, 0);
	to_ctl(&hc_shm_settings[e->arg], true, &v, out);
	return 0;
}

static int wr_setting(const ctl_entry_t *e, const ctl_val_t *in)
{
	hc_shm_value_t v;
	int err = from_ctl(&hc_shm_settings[e->arg], in, &v);
	return err ? err : hc_setting_set((unsigned)e->arg, &v);
}

/* A string setting is write-only at run time, as jemalloc's prof.prefix:
 * a pointer to it would not stay valid. */
#define RT_READ_HC_SET_BOOL   rd_setting
#define RT_READ_HC_SET_UINT   rd_setting
#define RT_READ_HC_SET_LG     rd_setting
#define RT_READ_HC_SET_SSIZE  rd_setting
#define RT_READ_HC_SET_BYTES  rd_setting
#define RT_READ_HC_SET_POW2   rd_setting
#define RT_READ_HC_SET_STR    NULL
#define RT_READ_HC_SET_UNWIND rd_setting
#define RT_READ_HC_SET_THP    rd_setting

/* a braced initializer as a macro body, which clang-format 14 takes for a block */
/* clang-format off */
#define OPTION_ENTRY(o, t) { "opt." #o, OPT_T_##t, rd_option, NULL, HC_SETTING_##o },
#define HC_OPTION(o, t, mn, mx, d, h) OPTION_ENTRY(o, t)
#define HC_RUNTIME(o, t, mn, mx, d, n, f, h) OPTION_ENTRY(o, t) \
	{ n, RT_T_##t, RT_READ_##t, wr_setting, HC_SETTING_##o },
/* clang-format on */

/* ---- profiling ---------------------------------------------------------- */

/* jemalloc answers EFAULT when the dump cannot be written. */
static int wr_dump(const ctl_entry_t *e, const ctl_val_t *in)
{
	hc_dump_kind_t kind = e->arg ? HC_DUMP_PEAK : HC_DUMP_MANUAL;
	const char *path = in ? in->s : NULL;
	if (!hc_opt.prof && !__atomic_load_n(&hc_prof.active, __ATOMIC_RELAXED) && hc_prof_samples_total() == 0)
		return ENOENT; /* as jemalloc without opt.prof */
	return hc_dump(kind, path, NULL, 0) ? EFAULT : 0;
}

/* experimental.prof_recent.*: the last sampled allocations (recent.c) */
static int rd_recent_max(const ctl_entry_t *e, ctl_val_t *out)
{
	(void)e;
	out->sz = hc_recent_max();
	return 0;
}
static int wr_recent_max(const ctl_entry_t *e, const ctl_val_t *in)
{
	(void)e;
	return hc_recent_set_max(in->sz);
}
static int wr_recent_dump(const ctl_entry_t *e, const ctl_val_t *in)
{
	(void)e;
	return hc_recent_dump(in ? in->w.cb : NULL, in ? in->w.opaque : NULL);
}

/* arena.<i>.purge and arena.<i>.decay: heapctl's arenas share one decay
 * clock, so either returns every arena's dirty pages now (jemalloc's purge
 * of MALLCTL_ARENAS_ALL; its decay of unexpired pages does less). */
static int wr_purge(const ctl_entry_t *e, const ctl_val_t *in)
{
	(void)e;
	(void)in;
	hc_purge_all();
	return 0;
}

/* thread.tcache.flush: the calling thread's cache (blocks it freed and
 * keeps for its next allocations) goes back to the pages */
static int wr_tcache_flush(const ctl_entry_t *e, const ctl_val_t *in)
{
	(void)e;
	(void)in;
	hc_thread_cache_flush();
	return 0;
}

static int wr_reset(const ctl_entry_t *e, const ctl_val_t *in)
{
	(void)e;
	if (in != NULL && in->z > 62)
		return EINVAL;
	hc_prof_reset(in ? (int)in->z : -1);
	return 0;
}

static int rd_samples(const ctl_entry_t *e, ctl_val_t *out)
{
	(void)e;
	out->u64 = hc_prof_samples_total();
	return 0;
}
static int rd_dumps(const ctl_entry_t *e, ctl_val_t *out)
{
	(void)e;
	out->u64 = hc_dumps_written();
	return 0;
}
static int rd_tname(const ctl_entry_t *e, ctl_val_t *out)
{
	(void)e;
	out->s = hc_prof_thread_name_get();
	return 0;
}

static int wr_tname(const ctl_entry_t *e, const ctl_val_t *in)
{
	(void)e;
	if (in->s == NULL)
		return EINVAL;
	return hc_prof_thread_name_set(in->s) ? 0 : EFAULT;
}

static int rd_tactive(const ctl_entry_t *e, ctl_val_t *out)
{
	(void)e;
	out->b = hc_prof_thread_active_get();
	return 0;
}
static int wr_tactive(const ctl_entry_t *e, const ctl_val_t *in)
{
	(void)e;
	hc_prof_thread_active_set(in->b);
	return 0;
}


/* a braced initializer as a macro body, which clang-format 14 takes for a block */
/* clang-format off */
#define STAT(n, field) { "stats." n, T_SIZE, rd_stat, NULL, offsetof(hc_stats_t, field) }
#define CONFIG(n, v) { "config." n, T_BOOL, rd_const_bool, NULL, (v) }
/* clang-format on */

static const ctl_entry_t table[] = {
	{ "version", T_STR, rd_const_str, NULL, (intptr_t)HC_VERSION },
	{ "epoch", T_U64, rd_epoch, wr_epoch, 0 },
	STAT("allocated", allocated),
	STAT("active", active),
	STAT("metadata", metadata),
	STAT("resident", resident),
	STAT("mapped", mapped),
	STAT("retained", retained),
	CONFIG("cache_oblivious", 0),
	CONFIG("debug", HC_DEBUG_BUILD),
	CONFIG("fill", HC_DEBUG_BUILD),
	CONFIG("lazy_lock", 0),
	{ "config.malloc_conf", T_STR, rd_const_str, NULL, (intptr_t) "" },
	CONFIG("opt_safety_checks", 1),
	CONFIG("prof", 1),
	CONFIG("prof_libgcc", 1),
	CONFIG("prof_libunwind", 1),
	CONFIG("stats", 1),
	CONFIG("utrace", 0),
	CONFIG("xmalloc", 0),
	{ "arenas.narenas", T_UNSIGNED, rd_narenas, NULL, 0 },
	{ "arena.<i>.purge", T_BOOL, NULL, wr_purge, 0 },
	{ "arena.<i>.decay", T_BOOL, NULL, wr_purge, 0 },
	{ "thread.tcache.flush", T_BOOL, NULL, wr_tcache_flush, 0 },
	{ "arenas.page", T_SIZE, rd_const_size, NULL, 4096 },
	{ "arenas.quantum", T_SIZE, rd_const_size, NULL, 16 },
#include "../shm/hc_settings.def"
	/* jemalloc's name for it */
	{ "opt.prof_sys_thread_name", T_BOOL, rd_option, NULL, HC_SETTING_prof_thread_names },
	{ "prof.dump", T_STR, NULL, wr_dump, 0 },
	{ "prof.dump_peak", T_STR, NULL, wr_dump, 1 },
	{ "prof.reset", T_SIZE, NULL, wr_reset, 0 },
	{ "prof.samples", T_U64, rd_samples, NULL, 0 },
	{ "prof.dumps", T_U64, rd_dumps, NULL, 0 },
	{ "experimental.thp_dense", T_STR, rd_thp_dense, NULL, 0 },
	{ "experimental.prof_recent.alloc_max", T_SSIZE, rd_recent_max, wr_recent_max, 0 },
	{ "experimental.prof_recent.alloc_dump", T_WRITER, NULL, wr_recent_dump, 0 },
	{ "thread.prof.name", T_STR, rd_tname, wr_tname, 0 },
	{ "thread.prof.active", T_BOOL, rd_tactive, wr_tactive, 0 },
};
#define NENTRIES (sizeof table / sizeof table[0])

static size_t components(const char *name)
{
	size_t n = 1;
	for (; *name; name++)
		n += *name == '.';
	return n;
}

#define ARENAS_ALL 4096 /* jemalloc's MALLCTL_ARENAS_ALL */

/* An arena index of arena.<i>.*: one that exists, or all of them, which
 * jemalloc spells MALLCTL_ARENAS_ALL or (as redis does) arenas.narenas. */
static bool arena_index_ok(size_t i)
{
	ctl_val_t n;
	rd_narenas(NULL, &n);
	return i <= n.u || i == ARENAS_ALL;
}

/* The entry for name; *index is the <i> of an arena.<i>.* name. */
static const ctl_entry_t *lookup(const char *name, size_t *index)
{
	if (name == NULL)
		return NULL;
	*index = 0;
	for (size_t i = 0; i < NENTRIES; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	if (strncmp(name, "arena.", 6) != 0 || name[6] < '0' || name[6] > '9')
		return NULL;
	char *end;
	errno = 0;
	unsigned long long i = strtoull(name + 6, &end, 10);
	if (errno != 0 || *end != '.' || !arena_index_ok((size_t)i))
		return NULL;
	for (size_t k = 0; k < NENTRIES; k++)
		if (strncmp(table[k].name, "arena.<i>.", 10) == 0 && strcmp(table[k].name + 10, end + 1) == 0) {
			*index = (size_t)i;
			return &table[k];
		}
	return NULL;
}

static int ctl_do(const ctl_entry_t *e, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
	size_t sz = type_size(e->type);
	ctl_val_t v;
	if (oldp != NULL && oldlenp != NULL) {
		if (e->read == NULL)
			return EPERM; /* write-only name, as jemalloc's purge */
		if (*oldlenp != sz)
			return EINVAL;
	}
	if (newp != NULL || newlen != 0) {
		if (e->write == NULL)
			return EPERM;
		if (newlen != sz || (newp == NULL && e->type != T_BOOL))
			return EINVAL;
	}
	if (oldp != NULL && oldlenp != NULL) {
		int err = e->read(e, &v);
		if (err)
			return err;
		memcpy(oldp, &v, sz);
	}
	if (e->write != NULL && (newp != NULL || newlen != 0)) {
		ctl_val_t in;
		memset(&in, 0, sizeof in);
		if (newp)
			memcpy(&in, newp, sz);
		return e->write(e, &in);
	}
	if (e->write != NULL && e->read == NULL && newp == NULL && oldp == NULL)
		return e->write(e, NULL); /* purge, dump, reset: no value */
	return 0;
}

HC_EXPORT int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
	hc_init();
	size_t index;
	const ctl_entry_t *e = lookup(name, &index);
	if (e == NULL)
		return ENOENT;
	return ctl_do(e, oldp, oldlenp, newp, newlen);
}

HC_EXPORT int mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp)
{
	hc_init();
	size_t index;
	const ctl_entry_t *e = lookup(name, &index);
	if (e == NULL)
		return ENOENT;
	if (mibp == NULL || miblenp == NULL)
		return EINVAL;
	size_t k = components(name);
	if (*miblenp < k)
		return EINVAL;
	mibp[0] = (size_t)(e - table);
	for (size_t i = 1; i < k; i++)
		mibp[i] = 0;
	if (strncmp(e->name, "arena.<i>.", 10) == 0)
		mibp[1] = index; /* callers set it to other arenas */
	*miblenp = k;
	return 0;
}

HC_EXPORT int mallctlbymib(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
	hc_init();
	if (mib == NULL || miblen == 0 || mib[0] >= NENTRIES)
		return ENOENT;
	const ctl_entry_t *e = &table[mib[0]];
	if (miblen != components(e->name))
		return ENOENT;
	if (strncmp(e->name, "arena.<i>.", 10) == 0 && !arena_index_ok(mib[1]))
		return ENOENT;
	return ctl_do(e, oldp, oldlenp, newp, newlen);
}
