/*
 * heapctl/trace/dump.c - the heap_v2 dumps of `heapctl trace`: the stack
 * table's sums as jeprof reads them back, and the process's maps with
 * each object's build id, as the agent's dumps have them; named as the
 * agent names its own, written whole or not at all (rp_out_stream).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/outfile.h"
#include "tr_internal.h"

static uint64_t seq, seq_i; /* the dumps' numbers: every one, --interval's */

/* The counts jeprof turns back into the unbiased sums (agent/dump.c says
 * why: it divides each line by 1 - exp(-mean size / period)). */
static void put_counts(FILE *f, double c, double s, double ac, double as)
{
	double v[4] = { 0, 0, 0, 0 }, in[2][2] = { { c, s }, { ac, as } };
	for (int k = 0; k < 2; k++) {
		double objs = in[k][0], bytes = in[k][1];
		if (!(objs > 0.5) || !(bytes > 0))
			continue;
		double x = bytes / objs, y = bytes * -expm1(-x / T.period);
		v[2 * k] = floor(y / x + 0.5);
		v[2 * k + 1] = floor(y + 0.5);
	}
	fprintf(f, "%.0f: %.0f [%.0f: %.0f]", v[0], v[1], v[2], v[3]);
}

static int write_dump(FILE *f, const void *arg)
{
	double c = 0, s = 0, ac = 0, as = 0;
	for (stack_t_ *st = tr_stacks(); st; st = st->all_next) {
		c += st->w_curobjs;
		s += st->w_curbytes;
		ac += st->w_accumobjs;
		as += st->w_accumbytes;
	}
	fprintf(f, "heap_v2/%.0f\n  t*: ", T.period);
	put_counts(f, c, s, ac, as);
	fputc('\n', f);
	for (stack_t_ *st = tr_stacks(); st; st = st->all_next) {
		if (!(st->w_accumobjs > 0.5))
			continue;
		fputc('@', f);
		for (unsigned i = 0; i < st->n; i++)
			fprintf(f, " 0x%" PRIx64, st->frames[i]);
		fputs("\n  t*: ", f);
		put_counts(f, st->w_curobjs, st->w_curbytes, st->w_accumobjs, st->w_accumbytes);
		fputc('\n', f);
	}
	fputs("\nMAPPED_LIBRARIES:\n", f);
	if (T.maps)
		tr_put_maps(f);
	fflush(f);
	return ferror(f) ? EIO : 0;
}

/* P.<pid>.<seq>.<kind><n>.heap, or FILE; prints the path written. */
int tr_dump(char kind)
{
	char path[PATH_MAX], err[PATH_MAX + 128];
	if (kind == 'f' && T.o.output) {
		snprintf(path, sizeof path, "%s", T.o.output);
	} else {
		char n[24] = "";
		if (kind != 'f')
			snprintf(n, sizeof n, "%" PRIu64, seq_i++);
		/* the pid as we see it (a container's pid 1 has another here);
		 * a name that is taken is skipped for the next number, never
		 * replaced (1000 in a row: someone fills the directory) */
		struct stat st;
		for (int i = 0;; i++, seq++) {
			if ((size_t)snprintf(path, sizeof path, "%s.%d.%" PRIu64 ".%c%s.heap", T.o.prefix, T.pid, seq,
			        kind, n) >= sizeof path)
				return cli_err(HC_EXIT_USAGE, "trace: --prefix is too long");
			if (lstat(path, &st) != 0)
				break;
			if (i == 1000)
				return cli_err(HC_EXIT_FAILED,
				    "trace: %s and the 1000 names before it are taken: "
				    "not replaced",
				    path);
		}
	}
	seq++;
	tr_read_maps();
	if (rp_out_stream(path, write_dump, NULL, err, sizeof err) != 0)
		return cli_err(HC_EXIT_FAILED, "%s", err);
	if (T.json) {
		json_t j;
		tr_json_event(&j, "dump");
		json_str(&j, "path", path);
		json_end(&j);
	} else if (strcmp(path, "-") != 0) {
		printf("%s\n", path);
	}
	fflush(stdout);
	return 0;
}
