/*
 * heapctl/serve/metrics.c - /metrics and /targets: the segments' counters
 * of every target (Prometheus's text format, or OpenMetrics by Accept),
 * where each one's resident memory goes (mem.c), the leak suspects of
 * serve --leaks to those who may see its profiles, the daemon's own
 * counts; and the same counters as JSON.  Every series of a process
 * carries the same labels (put_target_labels).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/json.h"
#include "serve.h"

typedef serve_target_t target_t;

/* A label value: valid UTF-8 (out_safe's rendering of anything else),
 * with \ " and newlines escaped. */
static void put_label(FILE *f, const char *name, const char *v, bool *first)
{
	if (v == NULL || *v == 0)
		return;
	char safe[1024];
	v = out_safe(v, safe, sizeof safe);
	fprintf(f, "%s%s=\"", *first ? "" : ",", name);
	*first = false;
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
	fputc('"', f);
}

/* A process's labels, in braces: pid, command, unit, container, then
 * extra (a part, a site; none if NULL) with value, then user. */
static void put_target_labels(FILE *f, int pid, const char *command, const char *unit, const char *container,
    const char *extra, const char *value, const char *user)
{
	char num[16];
	snprintf(num, sizeof num, "%d", pid);
	bool first = true;
	fputc('{', f);
	put_label(f, "pid", num, &first);
	put_label(f, "command", command, &first);
	put_label(f, "unit", unit, &first);
	put_label(f, "container", container, &first);
	if (extra)
		put_label(f, extra, value, &first);
	put_label(f, "user", user, &first);
	fputc('}', f);
}

typedef struct metric_s {
	const char *name; /* without _total                            */
	bool counter;
	const char *unit; /* OpenMetrics UNIT, or NULL                  */
	const char *help;
} metric_t;

static const metric_t metrics[] = {
	{ "heapctl_allocated_bytes", false, "bytes", "Bytes in allocated objects (stats.allocated)." },
	{ "heapctl_active_bytes", false, "bytes", "Bytes in pages holding objects (stats.active)." },
	{ "heapctl_resident_bytes", false, "bytes", "Allocator bytes resident in memory (stats.resident)." },
	{ "heapctl_mapped_bytes", false, "bytes", "Bytes the allocator has mapped (stats.mapped)." },
	{ "heapctl_metadata_bytes", false, "bytes", "Allocator and profiler metadata (stats.metadata)." },
	{ "heapctl_retained_bytes", false, "bytes", "Address space kept but given back (stats.retained)." },
	{ "heapctl_highwater_bytes", false, "bytes", "Highest stats.mapped so far (the high-water mark)." },
	{ "heapctl_threads", false, NULL, "Thread heaps in use." },
	{ "heapctl_prof_active", false, NULL, "1 while sampling is on (prof.active)." },
	{ "heapctl_sample_period_bytes", false, "bytes", "Mean bytes between samples (2^prof.lg_sample)." },
	{ "heapctl_samples", true, NULL, "Sampled allocations." },
	{ "heapctl_dumps", true, NULL, "Heap profiles written." },
	{ "heapctl_commands", true, NULL, "Control commands executed." },
	{ "heapctl_highwater_events", true, NULL, "High-water (gdump) events seen by this daemon." },
	{ "heapctl_dump_failures", true, NULL, "Failed dumps seen by this daemon." },
};
#define NMETRICS (sizeof metrics / sizeof metrics[0])

static double metric_value(unsigned i, const target_t *x, const hc_shm_state_t *st)
{
	switch (i) {
	case 0: return (double)st->allocated;
	case 1: return (double)st->active_bytes;
	case 2: return (double)st->resident;
	case 3: return (double)st->mapped;
	case 4: return (double)st->metadata;
	case 5: return (double)st->retained;
	case 6: return (double)st->highwater;
	case 7: return (double)st->threads;
	case 8: return st->active ? 1 : 0;
	case 9: return st->lg_sample < 63 ? (double)((uint64_t)1 << st->lg_sample) : 0;
	case 10: return (double)st->samples;
	case 11: return (double)st->dumps;
	case 12: return (double)st->commands;
	case 13: return (double)x->gdumps;
	default: return (double)x->dumps_failed;
	}
}

static void mem_families(FILE *f, bool om, const mem_t *mem, size_t nmem)
{
	for (int heap = 0; heap < 2; heap++) {
		const char *name = heap ? "heapctl_heap_part_bytes" : "heapctl_rss_part_bytes";
		fprintf(f, "# HELP %s %s\n", name,
		    heap
		        ? "The allocator's heap by its own count (heapctl explain): "
		          "live objects the profile attributes, other live objects, sampled objects' pages, free space "
		          "in pages in use, free pages not yet returned, metadata."
		        : "Resident memory by where it is (heapctl explain): the allocator's heap, other anonymous memory, "
		          "thread stacks, mapped files, shared memory, kernel mappings; they add up to the resident set.");
		fprintf(f, "# TYPE %s gauge\n", name);
		if (om)
			fprintf(f, "# UNIT %s bytes\n", name);
		size_t nt;
		const target_t *all = targets_lock(&nt);
		for (size_t k = 0; k < nt; k++) {
			const target_t *x = &all[k];
			const mem_t *m = NULL;
			for (size_t i = 0; i < nmem && m == NULL; i++)
				if (mem[i].pid == x->t.pid && mem[i].ok)
					m = &mem[i];
			if (m == NULL || (heap && !m->x.heapctl))
				continue;
			for (unsigned i = 0; i < 6; i++) {
				fputs(name, f);
				put_target_labels(f, x->t.pid, x->command, x->unit, x->container, "part",
				    mem_part(heap, i), x->user);
				fprintf(f, " %llu\n", (unsigned long long)mem_value(&m->x, heap, i));
			}
		}
		targets_unlock();
	}
}

/* serve --leaks: each process's suspects, to those who may see its
 * profiles (a site is a function of its code: part of a profile) */
static void leak_families(FILE *f, bool om, struct MHD_Connection *c)
{
	serve_peer_t peer;
	listen_peer(c, &peer);
	size_t n;
	serve_row_t *rows = serve_rows(&n);
	for (int growth = 0; growth < 2; growth++) {
		const char *name = growth ? "heapctl_leak_growth_bytes_per_hour" : "heapctl_leak_suspect_bytes";
		fprintf(f, "# HELP %s %s\n", name,
		    growth ? "Growth per hour of a site that grew in each of the last "
		             "--leak-intervals intervals (serve --leaks)."
		           : "In-use bytes of a site that grew in each of the "
		             "last --leak-intervals intervals (serve --leaks).");
		fprintf(f, "# TYPE %s gauge\n", name);
		if (om)
			fprintf(f, "# UNIT %s %s\n", name, growth ? "bytes_per_hour" : "bytes");
		for (size_t i = 0; rows && i < n; i++) {
			leak_t l[20];
			size_t k = leaks_of(rows[i].pid, l, 20);
			char why[256];
			if (k == 0 || !access_may(&peer, rows[i].pid, why, sizeof why))
				continue;
			for (size_t j = 0; j < k; j++) {
				fputs(name, f);
				put_target_labels(f, rows[i].pid, rows[i].command, rows[i].unit, rows[i].container,
				    "site", l[j].site, rows[i].user);
				fprintf(f, " %.17g\n", growth ? l[j].per_hour : l[j].bytes);
			}
		}
	}
	free(rows);
}

/* The daemon's own: how many targets it sees (n), the archive's counts. */
static void own_families(FILE *f, bool om, size_t n)
{
	fprintf(f,
	    "# HELP heapctl_targets Processes running the library that this daemon sees.\n"
	    "# TYPE heapctl_targets gauge\nheapctl_targets %zu\n",
	    n);
	if (arch_enabled()) {
		uint64_t archived, failed;
		arch_counts(&archived, &failed);
		fprintf(f,
		    "# HELP heapctl_archived_dumps%s Dumps copied into the archive.\n"
		    "# TYPE heapctl_archived_dumps%s counter\nheapctl_archived_dumps_total %llu\n",
		    om ? "" : "_total", om ? "" : "_total", (unsigned long long)archived);
		fprintf(f,
		    "# HELP heapctl_archive_failures%s Dumps that could not be archived.\n"
		    "# TYPE heapctl_archive_failures%s counter\nheapctl_archive_failures_total %llu\n",
		    om ? "" : "_total", om ? "" : "_total", (unsigned long long)failed);
	}
}

/* pid > 0: that process's series alone (a target of /sd), without the
 * daemon's own (heapctl_targets, the archive's), which would otherwise come
 * once per process scraped */
enum MHD_Result metrics_serve(struct MHD_Connection *c, long pid)
{
	/* the processes' memory parts first, without the targets' lock */
	size_t np;
	int *pids = targets_pids(pid, &np);
	mem_t *mem = calloc(np ? np : 1, sizeof *mem);
	if (pids && mem)
		mem_measure(pids, np, mem);
	free(pids);

	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	bool om = accept && strstr(accept, "application/openmetrics-text");
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	size_t n;
	const target_t *all = targets_lock(&n);
	hc_shm_state_t *st = calloc(n ? n : 1, sizeof *st);
	bool *ok = calloc(n ? n : 1, sizeof *ok);
	bool found = false;
	for (size_t k = 0; st && ok && k < n; k++) {
		if (pid > 0 && all[k].t.pid != pid)
			continue;
		ok[k] = hc_shm_state_read(&all[k].t.seg->state, &st[k]);
		found = true;
	}
	for (unsigned i = 0; st && ok && i < NMETRICS; i++) {
		const metric_t *m = &metrics[i];
		/* the text format names a counter with its _total; OpenMetrics
		 * names the family without it and the sample with it */
		const char *sfx = m->counter ? "_total" : "";
		const char *fam_sfx = om ? "" : sfx;
		fprintf(f, "# HELP %s%s %s\n", m->name, fam_sfx, m->help);
		fprintf(f, "# TYPE %s%s %s\n", m->name, fam_sfx, m->counter ? "counter" : "gauge");
		if (om && m->unit)
			fprintf(f, "# UNIT %s %s\n", m->name, m->unit);
		for (size_t k = 0; k < n; k++) {
			if (!ok[k])
				continue;
			const target_t *x = &all[k];
			fprintf(f, "%s%s", m->name, sfx);
			put_target_labels(f, x->t.pid, x->command, x->unit, x->container, NULL, NULL, x->user);
			fprintf(f, " %.17g\n", metric_value(i, x, &st[k]));
		}
	}
	targets_unlock();
	bool oom = st == NULL || ok == NULL;
	free(st);
	free(ok);
	if (oom || (pid > 0 && !found)) {
		free(mem);
		fclose(f);
		free(buf);
		return oom ? respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory")
		           : respond_err(c, MHD_HTTP_NOT_FOUND,
		                 "process %ld is not running libheapctl.so (see /targets)", pid);
	}
	if (mem)
		mem_families(f, om, mem, np);
	free(mem);
	if (leaks_enabled())
		leak_families(f, om, c);
	if (pid <= 0)
		own_families(f, om, n);
	if (om)
		fputs("# EOF\n", f);
	return respond_stream(c,
	    om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
	       : "text/plain; version=0.0.4; charset=utf-8",
	    f, &buf, &len);
}

enum MHD_Result metrics_targets(struct MHD_Connection *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	json_t j;
	json_begin(&j, f, JSON_PRETTY);
	json_arr(&j, NULL);
	size_t n;
	const target_t *all = targets_lock(&n);
	for (size_t k = 0; k < n; k++) {
		const target_t *x = &all[k];
		hc_shm_state_t st;
		if (!hc_shm_state_read(&x->t.seg->state, &st))
			continue;
		json_obj(&j, NULL);
		json_i64(&j, "pid", x->t.pid);
		json_i64(&j, "nspid", x->t.nspid);
		json_u64(&j, "uid", x->t.uid);
		json_str(&j, "command", x->command);
		json_str(&j, "unit", x->unit[0] ? x->unit : NULL);
		json_str(&j, "container", x->container[0] ? x->container : NULL);
		char ver[sizeof x->t.seg->hdr.version + 1];
		memcpy(ver, x->t.seg->hdr.version, sizeof ver - 1);
		ver[sizeof ver - 1] = 0;
		json_str(&j, "version", ver);
		json_bool(&j, "prof_active", st.active);
		json_u64(&j, "lg_sample", st.lg_sample);
		json_u64(&j, "allocated", st.allocated);
		json_u64(&j, "resident", st.resident);
		json_u64(&j, "mapped", st.mapped);
		json_u64(&j, "highwater", st.highwater);
		json_u64(&j, "samples", st.samples);
		json_u64(&j, "dumps", st.dumps);
		json_u64(&j, "threads", st.threads);
		json_end(&j);
	}
	targets_unlock();
	json_end(&j);
	return respond_stream(c, "application/json", f, &buf, &len);
}
