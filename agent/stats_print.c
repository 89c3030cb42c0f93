/*
 * agent/stats_print.c - jemalloc's malloc_stats_print, over the allocator's
 * statistics (hc_stats_refresh).
 *
 * It may run anywhere, even in a program whose stdio is broken: the text is
 * built in a fixed buffer and handed to the callback, or written to stderr.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "../allocator/heapctl.h"

/* ---- malloc_stats_print ------------------------------------------------ */

typedef struct {
	void (*cb)(void *, const char *);
	void *opaque;
	char buf[512];
	size_t len;
} out_t;

static void out_flush(out_t *o)
{
	if (o->len == 0)
		return;
	o->buf[o->len] = 0;
	if (o->cb) {
		o->cb(o->opaque, o->buf);
	} else {
		hc_stderr(o->buf, o->len);
	}
	o->len = 0;
}

static void out_str(out_t *o, const char *s)
{
	while (*s) {
		if (o->len + 1 >= sizeof o->buf)
			out_flush(o);
		o->buf[o->len++] = *s++;
	}
}

static void out_u64(out_t *o, uint64_t v)
{
	char num[24];
	hc_fmt_u64(num, v);
	out_str(o, num);
}

static void out_kv(out_t *o, bool json, const char *key, uint64_t v, bool last)
{
	if (json) {
		out_str(o, "\t\t\t\"");
		out_str(o, key);
		out_str(o, "\": ");
		out_u64(o, v);
		out_str(o, last ? "\n" : ",\n");
	} else {
		out_str(o, key);
		out_str(o, ": ");
		out_u64(o, v);
		out_str(o, last ? "\n" : ", ");
	}
}

/*
 * jemalloc's entry point.  opts: 'J' prints JSON; other letters (which in
 * jemalloc omit sections) are accepted and ignored, since the sections here
 * are short.  write_cb NULL writes to stderr.
 */
HC_EXPORT void malloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque, const char *opts)
{
	bool json = opts && strchr(opts, 'J');
	hc_stats_t st;
	hc_stats_refresh(&st);
	out_t o = { .cb = write_cb, .opaque = cbopaque };
	if (json) {
		out_str(&o, "{\n\t\"heapctl\": {\n\t\t\"version\": \"" HC_VERSION "\",\n");
		out_str(&o, "\t\t\"stats\": {\n");
		out_kv(&o, true, "allocated", st.allocated, false);
		out_kv(&o, true, "active", st.active, false);
		out_kv(&o, true, "metadata", st.metadata, false);
		out_kv(&o, true, "resident", st.resident, false);
		out_kv(&o, true, "mapped", st.mapped, false);
		out_kv(&o, true, "retained", st.retained, false);
		out_kv(&o, true, "dirty", st.dirty, false);
		out_kv(&o, true, "small_allocated", st.small_allocated, false);
		out_kv(&o, true, "large_allocated", st.large_allocated, false);
		out_kv(&o, true, "huge_allocated", st.huge_allocated, false);
		out_kv(&o, true, "heaps", st.nheaps, false);
		out_kv(&o, true, "arenas", st.narenas, true);
		out_str(&o, "\t\t}\n\t}\n}\n");
	} else {
		out_str(&o, "___ Begin heapctl statistics ___\nVersion: \"" HC_VERSION "\"\n");
		out_str(&o, "Allocated: ");
		out_u64(&o, st.allocated);
		out_str(&o, ", ");
		out_kv(&o, false, "active", st.active, false);
		out_kv(&o, false, "metadata", st.metadata, false);
		out_kv(&o, false, "resident", st.resident, false);
		out_kv(&o, false, "mapped", st.mapped, false);
		out_kv(&o, false, "retained", st.retained, true);
		out_kv(&o, false, "Dirty (free, not yet purged)", st.dirty, true);
		out_kv(&o, false, "Small allocated", st.small_allocated, false);
		out_kv(&o, false, "large allocated", st.large_allocated, false);
		out_kv(&o, false, "huge allocated", st.huge_allocated, true);
		out_kv(&o, false, "Small chunks", st.nchunks_small, false);
		out_kv(&o, false, "large chunks", st.nchunks_large, false);
		out_kv(&o, false, "cached chunks", st.nchunks_cached, false);
		out_kv(&o, false, "huge objects", st.nhuge, false);
		out_kv(&o, false, "cached huge mappings", st.nhuge_cached, true);
		out_kv(&o, false, "Thread heaps", st.nheaps, false);
		out_kv(&o, false, "arenas", st.narenas, true);
		out_str(&o, "___ End heapctl statistics ___\n");
	}
	out_flush(&o);
}
