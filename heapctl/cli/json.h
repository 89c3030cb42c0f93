/*
 * heapctl/cli/json.h - the one JSON writer every --json output goes through
 * (the commands' and the report engine's).
 *
 *   json_t j;
 *   json_begin(&j, stdout, JSON_LINE);      one line: {"a": 1, "b": "x"}
 *   json_obj(&j, NULL);                     the top object
 *   json_str(&j, "type", "dump");           "key": value, commas as needed
 *   json_arr(&j, "rows");  ... json_end(&j);
 *   json_end(&j);                           closes the top, ends the line
 *
 * JSON_PRETTY puts each member of the top object or array on its own
 * line, indented by two spaces, and what is inside them on that line
 * (heapctl status --json, heapctl list --json).  JSON_COMPACT is JSON_LINE
 * without the spaces after ',' and ':' (heapctl trace's events,
 * heapctl inject --json).  Strings
 * are always valid UTF-8 (out_json_str); numbers that are not finite are
 * written as null.
 */
#ifndef HC_JSON_H
#define HC_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { JSON_LINE, JSON_PRETTY, JSON_COMPACT };
#define JSON_DEPTH 16

typedef struct json_s {
	FILE *f;
	int style;
	int depth;
	bool any[JSON_DEPTH]; /* a member already written at this level */
	bool array[JSON_DEPTH];
} json_t;

void json_begin(json_t *j, FILE *f, int style);
void json_obj(json_t *j, const char *key); /* key NULL: in an array, or the top */
void json_arr(json_t *j, const char *key);
void json_end(json_t *j);                                 /* the innermost; the top ends the line */
void json_str(json_t *j, const char *key, const char *v); /* NULL: null */
void json_u64(json_t *j, const char *key, uint64_t v);
void json_i64(json_t *j, const char *key, int64_t v);
void json_int(json_t *j, const char *key, double v); /* rounded toward zero */
void json_bool(json_t *j, const char *key, bool v);
void json_null(json_t *j, const char *key);
void json_raw(json_t *j, const char *key, const char *v); /* v is JSON already */

#endif
