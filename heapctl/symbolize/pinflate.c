/*
 * heapctl/symbolize/pinflate.c - one zlib stream inflated by two threads.
 *
 * A big compressed section (libc's .debug_info: 2.3 MiB holding 5.8) is one
 * deflate stream, which zlib inflates from start to end on one core while
 * the other waits for it.  Here the stream is cut in two:
 *
 *   part 0  zlib from the start, stopping at the block boundary where part
 *           1 began (inflate with Z_BLOCK says where each block ends);
 *   part 1  finds a block boundary at about 60% of the input (a dynamic
 *           Huffman block header whose codes are complete and whose block
 *           decodes to its end-of-block code), and inflates from there to
 *           the end with a decoder of its own.  It does not have the 32 KiB
 *           of output before its start, so it writes 16-bit symbols: bytes
 *           it knows, and for each byte copied from before its start, the
 *           position in that window.  Once part 0 is done, the window is
 *           known and the symbols become bytes.
 *
 * Nothing rests on part 1 being right: part 0 confirms the boundary (it
 * must end a block exactly there), and the whole output must match the
 * stream's Adler-32.  Whatever goes wrong (no boundary found, part 0 past
 * it first, a decoding error, a checksum that does not match), part 0's
 * zlib goes on to the end, alone, as if the stream had never been cut.
 *
 * Either part may run first, on any thread; the one that finishes second
 * puts the output together.  Neither waits for the other.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>

#include "report/report.h"
#include "report/rp_internal.h"

#define WINDOW    32768
#define FAST_BITS 11

enum { SPLIT_UNSET = 0, SPLIT_ABORTED = 1 }; /* else: the boundary, in bits, + 2 */

struct rp_split_s {
	const unsigned char *in; /* the deflate data (after the zlib header) */
	size_t inlen;            /* up to the Adler-32 */
	uint32_t adler;          /* the stream's */
	unsigned char *out;
	size_t size; /* what the stream must inflate to */

	uint64_t state; /* SPLIT_* or boundary + 2 (atomic) */
	int done;       /* parts finished (atomic) */
	int result;     /* 0, or -1 */

	/* part 0 */
	z_stream zs;
	bool zs_live;
	int zrc;      /* inflate's last return */
	bool stopped; /* at the boundary */
	size_t a_len; /* its output */
	uint32_t a_adler;

	/* part 1: nsym symbols, then nbytes bytes */
	uint16_t *sym; /* as symbols, while any may be unknown */
	size_t sym_cap, nsym;
	unsigned char *bytes; /* then from zlib (in sym's mapping) */
	size_t nbytes;
	bool b_ok;
};

/* ---- a deflate decoder writing 16-bit symbols ---------------------------- */

typedef struct {
	const unsigned char *start, *p, *end;
	uint64_t bits; /* LSB first */
	int n;         /* valid bits in bits */
	size_t pad;    /* zero bytes fed in past the end */
} bitrd_t;

static void rd_at(bitrd_t *b, const unsigned char *in, size_t len, uint64_t bitpos)
{
	b->start = in;
	b->end = in + len;
	b->p = in + bitpos / 8;
	b->bits = 0;
	b->n = 0;
	b->pad = 0;
	unsigned skip = (unsigned)(bitpos % 8);
	if (skip) {
		b->bits = b->p < b->end ? *b->p >> skip : 0;
		b->n = 8 - (int)skip;
		b->p++;
	}
}

/* At least 56 bits in the buffer; zeros past the end (rd_overrun says). */
static inline void refill(bitrd_t *b)
{
	if (b->end - b->p >= 8) {
		uint64_t v;
		memcpy(&v, b->p, 8);
		b->bits |= v << b->n;
		b->p += (63 - b->n) >> 3;
		b->n |= 56;
		return;
	}
	while (b->n <= 56) {
		if (b->p < b->end)
			b->bits |= (uint64_t)*b->p++ << b->n;
		else
			b->pad++;
		b->n += 8;
	}
}

static inline uint32_t take(bitrd_t *b, int k)
{
	uint32_t v = (uint32_t)(b->bits & ((1ull << k) - 1));
	b->bits >>= k;
	b->n -= k;
	return v;
}

static uint64_t rd_pos(const bitrd_t *b)
{
	return (uint64_t)(b->p - b->start + b->pad) * 8 - (uint64_t)b->n;
}

static bool rd_overrun(const bitrd_t *b)
{
	return rd_pos(b) > (uint64_t)(b->end - b->start) * 8;
}

/* A canonical Huffman code: a table of the codes up to FAST_BITS long,
 * and counts and symbols for the longer ones. */
typedef struct {
	uint32_t fast[1 << FAST_BITS]; /* sym << 4 | length; 0: longer */
	uint16_t count[16];
	uint16_t sym[320];
} huff_t;

/* -1 for an over-subscribed code, or an incomplete one (zlib takes those
 * only as a single code of length 1, or no code at all). */
static int huff_build(huff_t *h, const uint8_t *len, int n)
{
	memset(h->count, 0, sizeof h->count);
	for (int i = 0; i < n; i++)
		h->count[len[i]]++;
	h->count[0] = 0;
	int left = 1, ncodes = 0, max = 0;
	for (int l = 1; l <= 15; l++) {
		left = (left << 1) - h->count[l];
		if (left < 0)
			return -1;
		ncodes += h->count[l];
		if (h->count[l])
			max = l;
	}
	if (left > 0 && ncodes > 0 && !(ncodes == 1 && max == 1))
		return -1; /* (none at all: a block without matches) */
	uint16_t offs[17];
	offs[1] = 0;
	for (int l = 1; l < 16; l++)
		offs[l + 1] = (uint16_t)(offs[l] + h->count[l]);
	for (int i = 0; i < n; i++)
		if (len[i])
			h->sym[offs[len[i]]++] = (uint16_t)i;
	memset(h->fast, 0, sizeof h->fast);
	unsigned code = 0, k = 0;
	for (int l = 1; l <= FAST_BITS; l++, code <<= 1)
		for (unsigned c = 0; c < h->count[l]; c++, code++, k++) {
			unsigned rev = 0;
			for (int i = 0; i < l; i++)
				rev |= ((code >> i) & 1) << (l - 1 - i);
			for (unsigned i = rev; i < (1u << FAST_BITS); i += 1u << l)
				h->fast[i] = (uint32_t)h->sym[k] << 4 | (uint32_t)l;
		}
	return 0;
}

/* The next symbol (at least 15 bits in the buffer), or -1. */
static inline int decode(bitrd_t *b, const huff_t *h)
{
	uint32_t e = h->fast[b->bits & ((1u << FAST_BITS) - 1)];
	if (e & 15) {
		take(b, (int)(e & 15));
		return (int)(e >> 4);
	}
	uint64_t bits = b->bits;
	int code = 0, first = 0, index = 0;
	for (int l = 1; l <= 15; l++) {
		code |= (int)(bits & 1);
		bits >>= 1;
		int count = h->count[l];
		if (code - count < first) {
			take(b, l);
			return h->sym[index + (code - first)];
		}
		index += count;
		first = (first + count) << 1;
		code <<= 1;
	}
	return -1;
}

static const uint16_t len_base[29] = { 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83,
	99, 115, 131, 163, 195, 227, 258 };
static const uint8_t len_extra[29] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5,
	5, 0 };
static const uint16_t dist_base[30] = { 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769,
	1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577 };
static const uint8_t dist_extra[30] = { 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11,
	11, 12, 12, 13, 13 };

typedef struct {
	huff_t lit, dist;
	uint16_t *out;
	size_t cap, n; /* out's room and what is in it */
} dec_t;

/* A dynamic block's header into d->lit and d->dist (BFINAL and BTYPE
 * already read). */
static int dynamic_header(bitrd_t *b, dec_t *d)
{
	static const uint8_t order[19] = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15 };
	refill(b);
	int hlit = (int)take(b, 5) + 257, hdist = (int)take(b, 5) + 1, hclen = (int)take(b, 4) + 4;
	if (hlit > 286 || hdist > 30)
		return -1;
	uint8_t cl[19] = { 0 };
	for (int i = 0; i < hclen; i++) {
		if (i % 16 == 0)
			refill(b);
		cl[order[i]] = (uint8_t)take(b, 3);
	}
	if (huff_build(&d->lit, cl, 19) != 0) /* the code-length code, for now */
		return -1;
	uint8_t len[320];
	int i = 0;
	while (i < hlit + hdist) {
		refill(b);
		int s = decode(b, &d->lit), rep = 0;
		uint8_t v = 0;
		if (s < 0)
			return -1;
		if (s < 16) {
			len[i++] = (uint8_t)s;
			continue;
		}
		if (s == 16) {
			if (i == 0)
				return -1;
			v = len[i - 1];
			rep = 3 + (int)take(b, 2);
		} else if (s == 17) {
			rep = 3 + (int)take(b, 3);
		} else {
			rep = 11 + (int)take(b, 7);
		}
		if (i + rep > hlit + hdist)
			return -1;
		while (rep--)
			len[i++] = v;
	}
	if (len[256] == 0 || huff_build(&d->lit, len, hlit) != 0 || huff_build(&d->dist, len + hlit, hdist) != 0)
		return -1;
	return 0;
}

static void fixed_codes(dec_t *d)
{
	uint8_t len[320];
	for (int i = 0; i < 288; i++)
		len[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
	for (int i = 0; i < 32; i++)
		len[288 + i] = 5; /* 30 and 31 complete it; they decode as errors */
	huff_build(&d->lit, len, 288);
	huff_build(&d->dist, len + 288, 32);
}

/* The symbols of one Huffman block, up to its end-of-block code.  The
 * bit reader is copied into locals, where the compiler keeps it in
 * registers (out could alias it otherwise). */
static int codes(bitrd_t *rd, dec_t *d)
{
	bitrd_t b = *rd;
	uint16_t *out = d->out;
	size_t n = d->n, cap = d->cap;
	int rc = -1;
	for (;;) {
		refill(&b);
		int s = decode(&b, &d->lit);
		if (s < 256) {
			if (s < 0 || n == cap)
				goto out;
			out[n++] = (uint16_t)s;
			continue;
		}
		if (s == 256)
			break;
		s -= 257;
		if (s >= 29)
			goto out;
		size_t len = len_base[s] + take(&b, len_extra[s]);
		int ds = decode(&b, &d->dist);
		if (ds < 0 || ds >= 30)
			goto out;
		size_t dist = dist_base[ds] + take(&b, dist_extra[ds]);
		if (len > cap - n || dist > n + WINDOW)
			goto out;
		uint16_t *o = out + n;
		if (dist >= len && dist <= n) {
			memcpy(o, o - dist, len * sizeof *o);
		} else if (dist <= n) {
			const uint16_t *from = o - dist; /* overlapping: a run */
			for (size_t k = 0; k < len; k++)
				o[k] = from[k];
		} else {
			/* from before the start: the window's position, as a symbol */
			for (size_t k = 0; k < len; k++) {
				ptrdiff_t at = (ptrdiff_t)(n + k) - (ptrdiff_t)dist;
				o[k] = at >= 0 ? out[at] : (uint16_t)(256 + WINDOW + at);
			}
		}
		n += len;
	}
	rc = 0;
out:
	d->n = n;
	*rd = b;
	return rc;
}

/* One block at b.  1 when it was the last, 0 when more follow, -1. */
static int block(bitrd_t *b, dec_t *d)
{
	refill(b);
	if (rd_overrun(b))
		return -1;
	int last = (int)take(b, 1), type = (int)take(b, 2);
	if (type == 0) {
		/* stored: from the next byte, LEN and its complement */
		take(b, b->n % 8);
		uint64_t at = rd_pos(b) / 8, inlen = (uint64_t)(b->end - b->start);
		if (at + 4 > inlen)
			return -1;
		const unsigned char *p = b->start + at;
		unsigned len = (unsigned)(p[0] | p[1] << 8), nlen = (unsigned)(p[2] | p[3] << 8);
		if ((len ^ 0xffff) != nlen || inlen - at - 4 < len || len > d->cap - d->n)
			return -1;
		for (unsigned k = 0; k < len; k++)
			d->out[d->n++] = p[4 + k];
		b->p = p + 4 + len;
		b->bits = 0;
		b->n = 0;
		b->pad = 0;
	} else if (type == 1) {
		fixed_codes(d);
		if (codes(b, d) != 0)
			return -1;
	} else if (type == 2) {
		if (dynamic_header(b, d) != 0 || codes(b, d) != 0)
			return -1;
	} else {
		return -1;
	}
	return rd_overrun(b) ? -1 : last;
}

/* ---- part 1: a boundary, and the rest of the stream ---------------------- */

/* Where part 1 looks from: zlib is the faster decoder, so part 0 gets
 * 60% of the input. */
static uint64_t split_from(const rp_split_t *sp)
{
	return (uint64_t)sp->inlen * 8 / 100 * 60;
}

/* The first bit at or after from where a dynamic block starts that
 * decodes to its end (at least 256 bytes), followed by another block that
 * does too; or UINT64_MAX. */
static uint64_t find_boundary(const rp_split_t *sp, uint64_t from, dec_t *d)
{
	uint64_t end = (uint64_t)sp->inlen * 8;
	uint64_t limit = from + ((uint64_t)1 << 21); /* 256 KiB of input: blocks are smaller */
	for (uint64_t q = from; q < end && q < limit; q++) {
		const unsigned char *p = sp->in + q / 8;
		/* BFINAL 0, BTYPE 2: three bits 0,0,1 from bit q */
		unsigned v = (unsigned)(p[0] | (p + 1 < sp->in + sp->inlen ? p[1] << 8 : 0)) >> (q % 8);
		if ((v & 7) != 4)
			continue;
		if (__atomic_load_n(&sp->state, __ATOMIC_RELAXED) == SPLIT_ABORTED)
			return UINT64_MAX;
		bitrd_t b;
		rd_at(&b, sp->in, sp->inlen, q);
		d->n = 0;
		if (block(&b, d) != 0 || d->n < 256)
			continue;
		if (block(&b, d) >= 0) /* and the next one too */
			return q;
	}
	return UINT64_MAX;
}

/* Whether the last WINDOW symbols are all bytes: then nothing after them
 * can refer to before part 1's start. */
static bool window_known(const dec_t *d)
{
	if (d->n < WINDOW)
		return false;
	for (size_t i = d->n; i-- > d->n - WINDOW;) /* from the end: most often one is close */
		if (d->out[i] >= 256)
			return false;
	return true;
}

/* The rest of the stream from bit pos (a block boundary) with zlib,
 * given the window before it: into sp->bytes.  false if it fails. */
static bool zlib_rest(rp_split_t *sp, const dec_t *d, uint64_t pos)
{
	unsigned char dict[WINDOW];
	for (size_t i = 0; i < WINDOW; i++)
		dict[i] = (unsigned char)d->out[d->n - WINDOW + i];
	z_stream zs = { 0 };
	if (inflateInit2(&zs, -15) != Z_OK)
		return false;
	const unsigned char *p = sp->in + pos / 8;
	bool ok = inflateSetDictionary(&zs, dict, WINDOW) == Z_OK;
	if (ok && pos % 8) {
		ok = inflatePrime(&zs, 8 - (int)(pos % 8), *p >> (pos % 8)) == Z_OK;
		p++;
	}
	zs.next_in = (Bytef *)(uintptr_t)p;
	zs.avail_in = (uInt)(sp->in + sp->inlen - p);
	zs.next_out = sp->bytes;
	zs.avail_out = (uInt)(sp->size - d->n);
	ok = ok && inflate(&zs, Z_FINISH) == Z_STREAM_END;
	sp->nbytes = zs.total_out;
	inflateEnd(&zs);
	return ok;
}

/* From the boundary: this decoder while symbols from before the start
 * can still be copied, then zlib with the window this decoder made. */
static void part1(rp_split_t *sp)
{
	dec_t *d = calloc(1, sizeof *d);
	size_t cap = sp->size; /* it makes less than all of it */
	void *m = mmap(NULL, cap * sizeof(uint16_t) + cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (d == NULL || m == MAP_FAILED) {
		free(d);
		if (m != MAP_FAILED)
			munmap(m, cap * sizeof(uint16_t) + cap);
		uint64_t unset = SPLIT_UNSET;
		__atomic_compare_exchange_n(&sp->state, &unset, SPLIT_ABORTED, false, __ATOMIC_ACQ_REL,
		    __ATOMIC_ACQUIRE);
		return;
	}
	(void)madvise(m, cap * sizeof(uint16_t), MADV_HUGEPAGE); /* fewer faults, where it is on */
	sp->sym = m;
	sp->sym_cap = cap;
	sp->bytes = (unsigned char *)(sp->sym + cap);
	d->out = sp->sym;
	d->cap = cap;
	uint64_t q = find_boundary(sp, split_from(sp), d);
	uint64_t unset = SPLIT_UNSET;
	if (q == UINT64_MAX ||
	    !__atomic_compare_exchange_n(&sp->state, &unset, q + 2, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (q == UINT64_MAX)
			__atomic_compare_exchange_n(&sp->state, &unset, SPLIT_ABORTED, false, __ATOMIC_ACQ_REL,
			    __ATOMIC_ACQUIRE);
		free(d);
		return;
	}
	bitrd_t b;
	rd_at(&b, sp->in, sp->inlen, q);
	d->n = 0;
	int rc;
	while ((rc = block(&b, d)) == 0 && !window_known(d))
		;
	sp->nsym = d->n;
	sp->b_ok = rc == 1 || (rc == 0 && zlib_rest(sp, d, rd_pos(&b)));
	free(d);
}

/* ---- part 0: zlib, to the boundary or to the end ---------------------------- */

static void part0(rp_split_t *sp)
{
	z_stream *zs = &sp->zs;
	memset(zs, 0, sizeof *zs);
	if (inflateInit2(zs, -15) != Z_OK) {
		sp->zrc = Z_MEM_ERROR;
		uint64_t unset = SPLIT_UNSET;
		__atomic_compare_exchange_n(&sp->state, &unset, SPLIT_ABORTED, false, __ATOMIC_ACQ_REL,
		    __ATOMIC_ACQUIRE);
		return;
	}
	sp->zs_live = true;
	zs->next_in = (Bytef *)(uintptr_t)sp->in;
	zs->avail_in = (uInt)sp->inlen;
	zs->next_out = sp->out;
	zs->avail_out = (uInt)sp->size;
	uint64_t from = split_from(sp);
	bool alone = false;
	for (;;) {
		int rc = inflate(zs, alone ? Z_FINISH : Z_BLOCK);
		sp->zrc = rc;
		if (rc != Z_OK || alone)
			break;
		if (!(zs->data_type & 128))
			continue;
		/* at the end of a block: where the next one starts */
		uint64_t pos = (uint64_t)(zs->next_in - sp->in) * 8 - (uint64_t)(zs->data_type & 7);
		uint64_t st = __atomic_load_n(&sp->state, __ATOMIC_ACQUIRE);
		/* there before part 1 chose a boundary: it is too late for one
		 * (if the exchange fails, part 1 chose one just now: st has it) */
		if (st == SPLIT_UNSET && pos >= from &&
		    __atomic_compare_exchange_n(&sp->state, &st, SPLIT_ABORTED, false, __ATOMIC_ACQ_REL,
		        __ATOMIC_ACQUIRE))
			st = SPLIT_ABORTED;
		if (st == SPLIT_UNSET)
			continue;
		if (st == SPLIT_ABORTED) {
			alone = true; /* (or part 1 found none) */
		} else if (pos == st - 2) {
			sp->stopped = true;
			break;
		} else {
			alone = pos > st - 2; /* not a boundary after all */
		}
	}
	sp->a_len = zs->total_out;
	if (sp->stopped)
		sp->a_adler = (uint32_t)adler32(adler32(0, NULL, 0), sp->out, (uInt)sp->a_len);
}

/* Part 1's symbols made bytes, and the whole checked; else part 0's zlib
 * goes on from where it stopped. */
static void finish(rp_split_t *sp)
{
	bool ok = false;
	size_t b_len = sp->nsym + sp->nbytes;
	if (sp->stopped && sp->b_ok && sp->a_len >= WINDOW && sp->a_len + b_len == sp->size) {
		const unsigned char *win = sp->out + sp->a_len - WINDOW;
		unsigned char *o = sp->out + sp->a_len;
		for (size_t i = 0; i < sp->nsym; i++) {
			uint16_t v = sp->sym[i];
			o[i] = v < 256 ? (unsigned char)v : win[v - 256];
		}
		memcpy(o + sp->nsym, sp->bytes, sp->nbytes);
		uint32_t b_adler = (uint32_t)adler32(adler32(0, NULL, 0), o, (uInt)b_len);
		ok = adler32_combine(sp->a_adler, b_adler, (z_off_t)b_len) == sp->adler;
		if (ok) {
			sp->result = sp->nbytes ? 2 : 1;
			return;
		}
	}
	if (!ok && sp->stopped && sp->zs_live) {
		sp->zrc = inflate(&sp->zs, Z_FINISH);
		sp->a_len = sp->zs.total_out;
		ok = sp->zrc == Z_STREAM_END && sp->a_len == sp->size;
	} else if (!ok && !sp->stopped) {
		ok = sp->zrc == Z_STREAM_END && sp->a_len == sp->size;
	}
	sp->result = ok ? 0 : -1;
}

/* ---- the interface -------------------------------------------------------- */

rp_split_t *rp_split_new(const unsigned char *z, size_t zlen, unsigned char *out, size_t size)
{
	/* a zlib stream: deflate (CM 8), no preset dictionary, Adler-32 last */
	if (zlen < 6 + 4 || (z[0] & 0x0f) != 8 || (z[1] & 0x20) || ((z[0] << 8) | z[1]) % 31 || size > UINT32_MAX)
		return NULL;
	rp_split_t *sp = calloc(1, sizeof *sp);
	if (sp == NULL)
		return NULL;
	sp->in = z + 2;
	sp->inlen = zlen - 2 - 4;
	const unsigned char *t = z + zlen - 4;
	sp->adler = (uint32_t)t[0] << 24 | (uint32_t)t[1] << 16 | (uint32_t)t[2] << 8 | t[3];
	sp->out = out;
	sp->size = size;
	return sp;
}

void rp_split_run(rp_split_t *sp, int part)
{
	if (part == 0)
		part0(sp);
	else
		part1(sp);
	if (__atomic_add_fetch(&sp->done, 1, __ATOMIC_ACQ_REL) == 2)
		finish(sp);
}

int rp_split_end(rp_split_t *sp)
{
	if (sp == NULL)
		return -1;
	int rc = __atomic_load_n(&sp->done, __ATOMIC_ACQUIRE) == 2 ? sp->result : -1;
	if (sp->zs_live)
		inflateEnd(&sp->zs);
	if (sp->sym)
		munmap(sp->sym, sp->sym_cap * sizeof(uint16_t) + sp->sym_cap);
	free(sp);
	return rc;
}
