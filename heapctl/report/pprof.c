/*
 * heapctl/report/pprof.c - write a report profile as gzipped profile.proto, the
 * format of github.com/google/pprof/proto/profile.proto that `go tool pprof`
 * and Pyroscope read.
 *
 * The protobuf is encoded by hand; only varints and length-delimited fields
 * are needed.  Each top-level message is built whole in a buffer, so its
 * length is known before it is written, and the buffer goes through deflate
 * to a temporary file whenever it grows past 64 KiB: memory stays small
 * however big the profile is.  Strings and functions are interned as the
 * messages that use them are written, so the string table comes last;
 * decoders take the fields of a message in any order.  The temporary file is
 * renamed over path only once everything has been written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "report.h"
#include "rp_internal.h"

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

typedef struct {
	uint8_t *p;
	size_t n, cap;
	bool oom;
} buf_t;

static bool reserve(buf_t *b, size_t more)
{
	if (b->n + more <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->n + more)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (p == NULL) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* int64 fields take the two's complement, so negatives use all 10 bytes. */
static void put_varint(buf_t *b, uint64_t v)
{
	if (!reserve(b, 10))
		return;
	while (v >= 0x80) {
		b->p[b->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->n++] = (uint8_t)v;
}

static void put_key(buf_t *b, unsigned field, unsigned wire)
{
	put_varint(b, (uint64_t)field << 3 | wire);
}

/* proto3 reads an absent scalar as zero, so zeros are left out. */
static void put_uint(buf_t *b, unsigned field, uint64_t v)
{
	if (v) {
		put_key(b, field, WIRE_VARINT);
		put_varint(b, v);
	}
}

static void put_bytes(buf_t *b, unsigned field, const void *s, size_t n)
{
	put_key(b, field, WIRE_LEN);
	put_varint(b, n);
	if (n && reserve(b, n)) {
		memcpy(b->p + b->n, s, n);
		b->n += n;
	}
}

/* Append the message built in m as a field of b, and empty m for reuse. */
static void put_msg(buf_t *b, unsigned field, buf_t *m)
{
	put_bytes(b, field, m->p, m->n);
	b->oom |= m->oom;
	m->n = 0;
	m->oom = false;
}

static void put_packed(buf_t *b, unsigned field, const uint64_t *v, size_t n)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += varint_len(v[i]);
	put_key(b, field, WIRE_LEN);
	put_varint(b, len);
	for (size_t i = 0; i < n; i++)
		put_varint(b, v[i]);
}

/* ---- interning --------------------------------------------------------- */

/* Ids handed out in order (the string table and the functions are
 * written by id): the keys, ksize bytes each, by id, and the engine's
 * index over them (index.c). */
typedef struct {
	rp_index_t ix;
	uint8_t *keys;
	size_t ksize, cap;
} htab_t;

typedef struct {
	const htab_t *t;
	const void *key;
	bool (*same)(const void *, const void *);
} htkey_t;

static bool ht_same(const void *ctx, uint32_t id)
{
	const htkey_t *k = ctx;
	return k->same(k->t->keys + id * k->t->ksize, k->key);
}

/* The id of the key that same() finds equal to key, added if there is none;
 * -1: out of memory. */
static int64_t ht_intern(htab_t *t, uint64_t h, const void *key, bool (*same)(const void *, const void *))
{
	htkey_t k = { t, key, same };
	bool added;
	int64_t id = rp_index_find(&t->ix, h, ht_same, &k, &added);
	if (id < 0 || !added)
		return id;
	if ((size_t)id >= t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		uint8_t *keys = realloc(t->keys, cap * t->ksize);
		if (keys == NULL)
			return -1;
		t->keys = keys;
		t->cap = cap;
	}
	memcpy(t->keys + (size_t)id * t->ksize, key, t->ksize);
	return id;
}

/* The profile's strings live until exit, so only pointers are kept. */
typedef struct {
	const char *s;
	size_t len;
} str_t;

static bool same_str(const void *a, const void *b)
{
	const str_t *x = a, *y = b;
	return x->len == y->len && memcmp(x->s, y->s, x->len) == 0;
}

static bool same_fn(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(uint32_t[3])) == 0;
}

typedef struct {
	int fd;
	z_stream z;
	buf_t out;       /* encoded, not yet deflated */
	buf_t msg, sub;  /* a message being built, and one inside it */
	htab_t str;      /* str_t: the string table */
	htab_t fn;       /* uint32_t[3]: name, system name, file */
	int err;         /* errno of the first failure */
	const char *why; /* or what was wrong with the profile */
} writer_t;

/* The index of s in the string table; NULL reads as "". */
static uint32_t intern(writer_t *w, const char *s)
{
	str_t k = { s ? s : "", 0 };
	k.len = strlen(k.s);
	int64_t id = ht_intern(&w->str, rp_hash_bytes(k.s, k.len), &k, same_str);
	if (id < 0)
		w->err = ENOMEM;
	return id < 0 ? 0 : (uint32_t)id;
}

/* Functions are the same when name, system name and file are. */
static uint64_t function_id(writer_t *w, const rp_frame_t *f)
{
	uint32_t k[3] = { intern(w, f->func), intern(w, f->sys ? f->sys : f->func), intern(w, f->file) };
	int64_t id = ht_intern(&w->fn, rp_hash_u64(k[0] ^ rp_hash_u64(k[1] ^ rp_hash_u64(k[2]))), k, same_fn);
	if (id < 0)
		w->err = ENOMEM;
	return id < 0 ? 1 : (uint64_t)id + 1;
}

/* ---- output ------------------------------------------------------------ */

static void deflate_out(writer_t *w, int mode)
{
	uint8_t chunk[1 << 16];
	w->z.next_in = w->out.p;
	w->z.avail_in = (uInt)w->out.n;
	do {
		w->z.next_out = chunk;
		w->z.avail_out = sizeof chunk;
		if (deflate(&w->z, mode) == Z_STREAM_ERROR) {
			w->err = EIO;
			return;
		}
		if ((w->err = rp_write_all(w->fd, chunk, sizeof chunk - w->z.avail_out)) != 0)
			return;
	} while (w->z.avail_out == 0 || w->z.avail_in);
	w->out.n = 0;
}

/* Called between top-level fields, where the stream may be cut. */
static bool flush(writer_t *w, bool last)
{
	if (w->out.oom && !w->err)
		w->err = ENOMEM;
	if (!w->err && (last || w->out.n >= (1 << 16)))
		deflate_out(w, last ? Z_FINISH : Z_NO_FLUSH);
	return w->err == 0;
}

/* Append w->msg to the profile as a top-level field. */
static bool emit(writer_t *w, unsigned field)
{
	put_msg(&w->out, field, &w->msg);
	return flush(w, false);
}

/* llround(), except that out-of-range values saturate (llround's result
 * is unspecified there) and NaN gives 0. */
static int64_t round_value(double v)
{
	if (v != v)
		return 0;
	if (v >= 0x1p63)
		return INT64_MAX;
	if (v <= -0x1p63)
		return INT64_MIN;
	int64_t i = (int64_t)v;
	double frac = v - (double)i; /* exact: nonzero only below 2^52 */
	return frac >= 0.5 ? i + 1 : frac <= -0.5 ? i - 1 : i;
}

/* Go's heap profile order and names, which pprof and Pyroscope recognise. */
static const struct {
	const char *type, *unit;
	int index;
} sample_types[RP_NTYPES] = {
	{ "alloc_objects", "count", RP_ALLOC_OBJECTS },
	{ "alloc_space", "bytes", RP_ALLOC_SPACE },
	{ "inuse_objects", "count", RP_INUSE_OBJECTS },
	{ "inuse_space", "bytes", RP_INUSE_SPACE },
};

/* ValueType { type = 1, unit = 2 } */
static void put_value_type(writer_t *w, unsigned field, const char *type, const char *unit)
{
	put_uint(&w->sub, 1, intern(w, type));
	put_uint(&w->sub, 2, intern(w, unit));
	put_msg(&w->out, field, &w->sub);
}

/* Sample { location_id = 1 (packed), value = 2 (packed), label = 3 }
 * Label { key = 1, num = 3, num_unit = 4 } */
static bool write_samples(writer_t *w, const rp_profile_t *p)
{
	uint64_t thread = intern(w, "thread");
	uint64_t *ids = NULL;
	size_t cap = 0;
	for (size_t i = 0; i < p->nsamples && !w->err; i++) {
		const rp_sample_t *s = &p->samples[i];
		if (s->nloc > cap) {
			free(ids);
			if ((ids = malloc((cap = s->nloc) * sizeof *ids)) == NULL)
				w->err = ENOMEM;
		}
		for (uint32_t j = 0; j < s->nloc && !w->err; j++) {
			if (s->loc[j] >= p->nlocs) {
				w->err = EINVAL;
				w->why = "a sample refers to a location that does not exist";
			} else
				ids[j] = (uint64_t)s->loc[j] + 1;
		}
		if (w->err)
			break;
		if (s->nloc)
			put_packed(&w->msg, 1, ids, s->nloc);
		uint64_t v[RP_NTYPES];
		for (int k = 0; k < RP_NTYPES; k++)
			v[k] = (uint64_t)round_value(s->v[sample_types[k].index]);
		put_packed(&w->msg, 2, v, RP_NTYPES);
		if (s->thread >= 0) {
			put_uint(&w->sub, 1, thread);
			put_uint(&w->sub, 3, (uint64_t)s->thread);
			/* pprof drops a label whose num is 0 when it has no
			 * unit, which would lose thread 0. */
			put_uint(&w->sub, 4, thread);
			put_msg(&w->msg, 3, &w->sub);
		}
		emit(w, 2);
	}
	free(ids);
	return w->err == 0;
}

static bool mapped(const rp_profile_t *p, const rp_loc_t *l)
{
	return l->map >= 0 && (size_t)l->map < p->nmaps;
}

/* Mapping { id = 1, memory_start = 2, memory_limit = 3, file_offset = 4,
 *           filename = 5, build_id = 6, has_functions = 7,
 *           has_filenames = 8, has_line_numbers = 9, has_inline_frames = 10 } */
static bool write_mappings(writer_t *w, const rp_profile_t *p)
{
	/* Addresses outside every mapping get one of their own: Pyroscope
	 * wants a mapping on each location.  pprof does not look on disk for
	 * a file whose name starts with '['. */
	rp_map_t none = { .start = UINT64_MAX, .path = "[unknown]" };
	bool unmapped = false;
	for (size_t i = 0; i < p->nlocs; i++) {
		const rp_loc_t *l = &p->locs[i];
		if (mapped(p, l))
			continue;
		unmapped = true;
		none.has_functions |= l->nframes > 0;
		if (l->addr < none.start)
			none.start = l->addr;
		if (l->addr >= none.limit) /* limit is exclusive */
			none.limit = l->addr == UINT64_MAX ? l->addr : l->addr + 1;
	}
	for (size_t i = 0; i < p->nmaps + unmapped && !w->err; i++) {
		const rp_map_t *m = i < p->nmaps ? &p->maps[i] : &none;
		put_uint(&w->msg, 1, i + 1);
		put_uint(&w->msg, 2, m->start);
		put_uint(&w->msg, 3, m->limit);
		put_uint(&w->msg, 4, m->offset);
		put_uint(&w->msg, 5, intern(w, m->path));
		if (m->build_id)
			put_uint(&w->msg, 6, intern(w, m->build_id));
		put_uint(&w->msg, 7, m->has_functions);
		put_uint(&w->msg, 8, m->has_lines);
		put_uint(&w->msg, 9, m->has_lines);
		put_uint(&w->msg, 10, m->has_inlines);
		emit(w, 3);
	}
	return w->err == 0;
}

/* Location { id = 1, mapping_id = 2, address = 3, line = 4 }
 * Line { function_id = 1, line = 2 }
 * Function { id = 1, name = 2, system_name = 3, filename = 4 } */
static bool write_locations(writer_t *w, const rp_profile_t *p)
{
	for (size_t i = 0; i < p->nlocs && !w->err; i++) {
		const rp_loc_t *l = &p->locs[i];
		put_uint(&w->msg, 1, i + 1);
		put_uint(&w->msg, 2, mapped(p, l) ? (uint64_t)l->map + 1 : p->nmaps + 1);
		put_uint(&w->msg, 3, l->addr);
		for (int j = 0; l->frames && j < l->nframes; j++) {
			put_uint(&w->sub, 1, function_id(w, &l->frames[j]));
			put_uint(&w->sub, 2, (uint64_t)(int64_t)l->frames[j].line);
			put_msg(&w->msg, 4, &w->sub);
		}
		emit(w, 4);
	}
	const uint32_t(*fn)[3] = (const void *)w->fn.keys;
	for (size_t i = 0; i < w->fn.ix.n && !w->err; i++) {
		put_uint(&w->msg, 1, i + 1);
		for (int k = 0; k < 3; k++)
			put_uint(&w->msg, 2 + k, fn[i][k]);
		emit(w, 5);
	}
	return w->err == 0;
}

/* Profile { sample_type = 1, sample = 2, mapping = 3, location = 4,
 *           function = 5, string_table = 6, time_nanos = 9,
 *           period_type = 11, period = 12, comment = 13 (packed),
 *           default_sample_type = 14 } */
static void encode(writer_t *w, const rp_profile_t *p, int type)
{
	intern(w, ""); /* string_table[0] must be "" */
	for (int i = 0; i < RP_NTYPES; i++)
		put_value_type(w, 1, sample_types[i].type, sample_types[i].unit);
	if (!write_samples(w, p) || !write_mappings(w, p) || !write_locations(w, p))
		return;

	put_uint(&w->out, 9, (uint64_t)p->time_ns);
	put_value_type(w, 11, "space", "bytes");
	put_uint(&w->out, 12, p->period);
	const char *path = p->path ? p->path : "";
	char *comment = malloc(strlen(path) + sizeof "heapctl report ");
	if (comment == NULL) {
		w->err = ENOMEM;
		return;
	}
	uint64_t id = intern(w, strcat(strcpy(comment, "heapctl report "), path));
	put_packed(&w->out, 13, &id, 1);
	put_uint(&w->out, 14, intern(w, rp_type_name[type]));

	const str_t *s = (const void *)w->str.keys;
	for (size_t i = 0; i < w->str.ix.n && flush(w, false); i++)
		put_bytes(&w->out, 6, s[i].s, s[i].len);
	flush(w, true);
	free(comment);
}

int rp_pprof_write(const rp_profile_t *p, int type, const char *path, char *err, size_t errlen)
{
	rp_out_t out;
	if (rp_out_open(&out, path, err, errlen) != 0)
		return -1;
	writer_t w = { .fd = out.fd, .str.ksize = sizeof(str_t), .fn.ksize = sizeof(uint32_t[3]) };

	/* Fastest, as Go's runtime/pprof does: deflate is most of the time. */
	if (deflateInit2(&w.z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		w.err = ENOMEM;
	else {
		encode(&w, p, type);
		deflateEnd(&w.z);
	}
	if (close(w.fd) < 0 && !w.err)
		w.err = errno;
	int rc = rp_out_finish(&out, w.err, w.why, err, errlen);
	buf_t *bufs[] = { &w.out, &w.msg, &w.sub };
	for (int i = 0; i < 3; i++)
		free(bufs[i]->p);
	htab_t *tabs[] = { &w.str, &w.fn };
	for (int i = 0; i < 2; i++) {
		rp_index_free(&tabs[i]->ix);
		free(tabs[i]->keys);
	}
	return rc;
}
