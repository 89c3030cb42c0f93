/*
 * heapctl/cli/json.c - the JSON writer (json.h).
 */
#include <inttypes.h>
#include <math.h>

#include "cli/cli.h"
#include "cli/json.h"

void json_begin(json_t *j, FILE *f, int style)
{
	*j = (json_t){ .f = f, .style = style };
}

/* The separator and the key before a value at the current level. */
static void member(json_t *j, const char *key)
{
	if (j->depth > 0) {
		int d = j->depth;
		bool pretty = j->style == JSON_PRETTY && d == 1;
		if (j->any[d - 1])
			fputs(pretty ? ",\n" : j->style == JSON_COMPACT ? "," : ", ", j->f);
		else if (pretty)
			fputc('\n', j->f);
		if (pretty)
			fprintf(j->f, "%*s", 2 * d, "");
		j->any[d - 1] = true;
	}
	if (key) {
		out_json_str(j->f, key);
		fputs(j->style == JSON_COMPACT ? ":" : ": ", j->f);
	}
}

static void nest(json_t *j, const char *key, bool array)
{
	member(j, key);
	fputc(array ? '[' : '{', j->f);
	if (j->depth < JSON_DEPTH) {
		j->any[j->depth] = false;
		j->array[j->depth] = array;
	}
	j->depth++;
}

void json_obj(json_t *j, const char *key)
{
	nest(j, key, false);
}

void json_arr(json_t *j, const char *key)
{
	nest(j, key, true);
}

void json_end(json_t *j)
{
	if (j->depth == 0)
		return;
	int d = --j->depth;
	bool array = d < JSON_DEPTH && j->array[d];
	if (j->style == JSON_PRETTY && d == 0 && j->any[0])
		fputc('\n', j->f);
	fputc(array ? ']' : '}', j->f);
	if (d == 0)
		fputc('\n', j->f);
}

void json_str(json_t *j, const char *key, const char *v)
{
	member(j, key);
	if (v)
		out_json_str(j->f, v);
	else
		fputs("null", j->f);
}

void json_u64(json_t *j, const char *key, uint64_t v)
{
	member(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void json_i64(json_t *j, const char *key, int64_t v)
{
	member(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void json_int(json_t *j, const char *key, double v)
{
	member(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.0f", trunc(v) + 0.0); /* +0.0: no "-0" */
	else
		fputs("null", j->f);
}

void json_bool(json_t *j, const char *key, bool v)
{
	member(j, key);
	fputs(v ? "true" : "false", j->f);
}

void json_raw(json_t *j, const char *key, const char *v)
{
	member(j, key);
	fputs(v, j->f);
}

void json_null(json_t *j, const char *key)
{
	member(j, key);
	fputs("null", j->f);
}
