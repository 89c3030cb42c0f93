/*
 * heapctl/report/svg.c - the flame graph of `heapctl report`: folded stacks merged
 * into a call tree and written as one self-contained SVG document (inline
 * style and script, nothing fetched), root at the bottom.
 *
 * Names are interned into alphabetical ranks and the stacks sorted by
 * them; one sweep over the sorted stacks then yields the tree already in
 * drawing order (pre-order, siblings alphabetical, x a running sum), with
 * no per-node hash lookups.  A frame too narrow to draw is dropped as soon
 * as the stacks under it end, so memory holds the drawn frames, one open
 * path and 4 bytes per input frame.  Nothing recurses: depth is free.
 *
 * The picture is complete without script.  The script adds click-to-zoom,
 * regex search and a details line; it reads the geometry back from the
 * rects and the names from the tooltips, so the data is in the file once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "report.h"
#include "rp_internal.h"

enum { WIDTH = 1200, PAD = 10, FRAME_H = 16, HEAD = 60, FOOT = 30 };
#define FRAMES_W (WIDTH - 2 * PAD)
#define MIN_FRAC 0.001 /* frames narrower than this are not drawn */
#define CHAR_W   6.6   /* advance of the 11px monospace labels   */

/* A kept stack, its names as alphabetical ranks. */
typedef struct {
	const uint32_t *id;
	uint32_t n;
	double v;
} item_t;

/* A frame: built in pre-order, which is also the drawing order. */
typedef struct {
	uint32_t name; /* rank; ROOT for "all" */
	uint32_t depth;
	double x;     /* offset from the left, in value units */
	double value; /* inclusive */
} node_t;
#define ROOT UINT32_MAX

/* A distinct name.  id is its first-seen number until ranking, which sorts
 * the array by name and keeps id for the rank lookup. */
typedef struct {
	const char *s;
	uint32_t hash;
	uint32_t id;
} name_t;

/* Callers mostly pass the same pointer for the same name, so a small
 * cache by address skips hashing the string for most frames. */
enum { PCACHE = 16384 };
typedef struct {
	name_t *v;
	uint32_t len, cap;
	rp_index_t ix; /* the engine's index (index.c) */
	struct {
		const char *p;
		uint32_t id;
	} pc[PCACHE];
} names_t;

/* A word at a time: every input frame not in the address cache is hashed. */
static uint32_t fast_hash(const char *s)
{
	size_t len = strlen(s), i = 0;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len, w;
	for (; i + 8 <= len; i += 8) {
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	w = 0;
	memcpy(&w, s + i, len - i);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	return (uint32_t)(h ^ h >> 32);
}

/* Spreads a hash over the table's slots and the colour channels. */
static uint32_t mix(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	return h ^ (h >> 16);
}

typedef struct {
	const names_t *t;
	const char *name;
	uint32_t hash;
} namekey_t;

static bool same_name(const void *ctx, uint32_t id)
{
	const namekey_t *k = ctx;
	const name_t *e = &k->t->v[id];
	return e->hash == k->hash && (e->s == k->name || strcmp(e->s, k->name) == 0);
}

/* The number of name, given one if new; UINT32_MAX when out of memory. */
static uint32_t intern(names_t *t, const char *name)
{
	uintptr_t a = (uintptr_t)name;
	size_t c = (a ^ a >> 12) % PCACHE;
	if (t->pc[c].p == name)
		return t->pc[c].id;
	namekey_t k = { t, name, fast_hash(name) };
	bool added;
	int64_t id = rp_index_find(&t->ix, mix(k.hash), same_name, &k, &added);
	if (id < 0)
		return UINT32_MAX;
	if (added) {
		if (t->len == t->cap) {
			uint32_t cap = t->cap ? t->cap * 2 : 1024;
			name_t *v = cap > (1u << 30) ? NULL : realloc(t->v, cap * sizeof *v);
			if (v == NULL)
				return UINT32_MAX;
			t->v = v;
			t->cap = cap;
		}
		t->v[t->len] = (name_t){ name, k.hash, t->len };
		t->len++;
	}
	t->pc[c].p = name;
	t->pc[c].id = (uint32_t)id;
	return (uint32_t)id;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const name_t *)a)->s, ((const name_t *)b)->s);
}

/* Lexicographic by rank, so siblings come out in alphabetical order.  A
 * stack that ends sorts after the ones that go deeper: a caller's own
 * bytes then lie right of its callees, which start at its left edge.
 * Equal stacks are ordered by value so the sums do not depend on the
 * input's order. */
static int by_stack(const void *pa, const void *pb)
{
	const item_t *a = pa, *b = pb;
	uint32_t n = a->n < b->n ? a->n : b->n;
	for (uint32_t i = 0; i < n; i++)
		if (a->id[i] != b->id[i])
			return a->id[i] < b->id[i] ? -1 : 1;
	if (a->n != b->n)
		return a->n > b->n ? -1 : 1;
	return (a->v > b->v) - (a->v < b->v);
}

/* The frames worth drawing, in pre-order, from the sorted stacks.  A frame
 * is open while consecutive stacks share its prefix; when it closes too
 * narrow, it and everything after it (its subtree) are dropped, so memory
 * stays at the drawn frames plus one open path.  Returns the count, or
 * (size_t)-1 when out of memory. */
static size_t sweep(const item_t *it, size_t n, uint32_t maxn, double min, node_t **out)
{
	uint32_t *path = malloc(((size_t)maxn + 1) * sizeof *path);
	size_t len = 1, cap = 1024;
	node_t *v = malloc(cap * sizeof *v);
	if (path == NULL || v == NULL)
		goto fail;
	v[0] = (node_t){ .name = ROOT };
	path[0] = 0;
	uint32_t open = 0;
	double cum = 0;
	for (size_t i = 0; i <= n; i++) {
		uint32_t l = 0;
		if (i > 0 && i < n)
			while (l < it[i - 1].n && l < it[i].n && it[i - 1].id[l] == it[i].id[l])
				l++;
		for (; open > l; open--)
			if (v[path[open]].value < min)
				len = path[open];
		if (i == n)
			break;
		for (uint32_t d = l + 1; d <= it[i].n; d++) {
			if (len == cap) {
				node_t *nv = realloc(v, 2 * cap * sizeof *nv);
				if (nv == NULL)
					goto fail;
				v = nv;
				cap *= 2;
			}
			v[len] = (node_t){ .name = it[i].id[d - 1], .depth = d, .x = cum };
			path[d] = (uint32_t)len++;
		}
		open = it[i].n;
		for (uint32_t d = 0; d <= open; d++)
			v[path[d]].value += it[i].v;
		cum += it[i].v;
	}
	free(path);
	*out = v;
	return len;
fail:
	free(path);
	free(v);
	return (size_t)-1;
}

/* Length of the UTF-8 sequence at s if it is well formed and a character
 * XML 1.0 allows, else 0. */
static int u8_seq(const unsigned char *s)
{
	unsigned c = s[0];
	int len;
	uint32_t cp, min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f, min = 0x80;
	else if ((c & 0xf0) == 0xe0)
		len = 3, cp = c & 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07, min = 0x10000;
	else
		return 0;
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
		return 0;
	return len;
}

static size_t u8_chars(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = 0;
	for (; *s; n++) {
		int len = u8_seq(s);
		s += len ? len : 1;
	}
	return n;
}

/* Write at most max characters of str as XML character data (safe in
 * attributes too).  Control characters (C0, DEL, C1) and bytes that are not
 * UTF-8 become U+FFFD: XML 1.0 cannot carry most of them even as references. */
void rp_xml_esc(FILE *f, const char *str, size_t max)
{
	const unsigned char *s = (const unsigned char *)str;
	for (; *s && max; max--) {
		int len = u8_seq(s);
		if (len == 0 || *s < 0x20 || *s == 0x7f || (*s == 0xc2 && s[1] < 0xa0)) {
			fputs("\xef\xbf\xbd", f);
			s += len ? len : 1;
			continue;
		}
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: fwrite(s, 1, (size_t)len, f);
		}
		s += len;
	}
}

static void fmt_value(char *buf, size_t len, double v, bool bytes)
{
	if (bytes)
		out_bytes_f(v, buf, len);
	else
		snprintf(buf, len, "%.0f objects", v);
}

static void put_frame(FILE *f, const node_t *c, const char *name, double total, int base_y, bool bytes)
{
	double scale = FRAMES_W / total;
	double x = PAD + c->x * scale, w = c->value * scale;
	int y = base_y - (int)c->depth * FRAME_H;
	uint32_t h = mix(fast_hash(name));
	/* Warm: strong red, green a fraction of it (red to yellow), little blue. */
	unsigned r = 205 + h % 51, g = r * (35 + (h >> 8) % 55) / 100, b = (h >> 16) % 55;
	char v[64];
	fmt_value(v, sizeof v, c->value, bytes);
	fputs("<g><title>", f);
	rp_xml_esc(f, name, SIZE_MAX);
	fprintf(f,
	    ": %s (%.1f%%)</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
	    "fill=\"rgb(%u,%u,%u)\"/>",
	    v, 100 * c->value / total, x, y, w, FRAME_H - 1, r, g, b);
	double fit = (w - 6) / CHAR_W;
	if (fit >= 3) {
		size_t n = (size_t)fit, len = u8_chars(name);
		fprintf(f, "<text x=\"%.2f\" y=\"%d\">", x + 3, y + 11);
		rp_xml_esc(f, name, len <= n ? len : n - 2);
		fputs(len <= n ? "</text>" : "..</text>", f);
	}
	fputs("</g>\n", f);
}

/* The script runs last, when every element it looks up exists.  It must
 * agree with the C on PAD, FRAMES_W, CHAR_W and the label offsets. */
static const char script[] =
    "(function () {\n"
    "'use strict';\n"
    "var PAD = 10, FW = 1180, CW = 6.6, EPS = 0.03, HI = 'rgb(220,40,220)';\n"
    "var doc = document, NS = doc.documentElement.namespaceURI;\n"
    "var box = doc.getElementById('frames'), details = doc.getElementById('details');\n"
    "var unzoom = doc.getElementById('unzoom'), search = doc.getElementById('search');\n"
    "var matched = doc.getElementById('matched');\n"
    "var frames = [], re = null, gs = box.getElementsByTagName('g');\n"
    "for (var i = 0; i < gs.length; i++) {\n"
    "  var g = gs[i], r = g.getElementsByTagName('rect')[0];\n"
    "  var tip = g.getElementsByTagName('title')[0].textContent;\n"
    "  g.hcFrame = i;\n"
    "  frames.push({ g: g, r: r, t: g.getElementsByTagName('text')[0], tip: tip,\n"
    "    name: tip.substring(0, tip.lastIndexOf(': ')), fill: r.getAttribute('fill'),\n"
    "    x: +r.getAttribute('x'), y: +r.getAttribute('y'), w: +r.getAttribute('width') });\n"
    "}\n"
    "search.removeAttribute('display');\n"
    "function label(fr, x, w) {\n"
    "  var n = Math.floor((w - 6) / CW), s = '', cs = Array.from(fr.name);\n"
    "  if (n >= 3) s = cs.length <= n ? fr.name : cs.slice(0, n - 2).join('') + '..';\n"
    "  if (!fr.t) {\n"
    "    if (!s) return;\n"
    "    fr.t = fr.g.appendChild(doc.createElementNS(NS, 'text'));\n"
    "    fr.t.setAttribute('y', fr.y + 11);\n"
    "  }\n"
    "  fr.t.setAttribute('x', (x + 3).toFixed(2));\n"
    "  fr.t.textContent = s;\n"
    "}\n"
    "function place(fr, x, w, fade) {\n"
    "  fr.g.removeAttribute('display');\n"
    "  if (fade) fr.g.setAttribute('opacity', '0.6'); else fr.g.removeAttribute('opacity');\n"
    "  fr.r.setAttribute('x', x.toFixed(2));\n"
    "  fr.r.setAttribute('width', w.toFixed(2));\n"
    "  label(fr, x, w);\n"
    "}\n"
    "function reset() {\n"
    "  for (var i = 0; i < frames.length; i++) place(frames[i], frames[i].x, frames[i].w, false);\n"
    "  unzoom.setAttribute('display', 'none');\n"
    "}\n"
    "/* Geometry tells kin: an ancestor is lower and spans z, a descendant is\n"
    "   higher (or z itself) and lies within it.  The clamp is for the file's\n"
    "   rounding, which grows with the zoom. */\n"
    "function zoom(z) {\n"
    "  var end = z.x + z.w, k = FW / z.w;\n"
    "  for (var i = 0; i < frames.length; i++) {\n"
    "    var fr = frames[i], fend = fr.x + fr.w;\n"
    "    if (fr.y > z.y && fr.x <= z.x + EPS && fend >= end - EPS) {\n"
    "      place(fr, PAD, FW, true);\n"
    "    } else if (fr.y <= z.y && fr.x >= z.x - EPS && fend <= end + EPS) {\n"
    "      var x0 = Math.max(PAD, PAD + (fr.x - z.x) * k), x1 = Math.min(PAD + FW, PAD + (fend - z.x) * k);\n"
    "      place(fr, x0, x1 - x0, false);\n"
    "    } else {\n"
    "      fr.g.setAttribute('display', 'none');\n"
    "    }\n"
    "  }\n"
    "  unzoom.removeAttribute('display');\n"
    "}\n"
    "function clearSearch() {\n"
    "  for (var i = 0; i < frames.length; i++) frames[i].r.setAttribute('fill', frames[i].fill);\n"
    "  re = null;\n"
    "  matched.textContent = '';\n"
    "  search.textContent = 'Search';\n"
    "}\n"
    "function find() {\n"
    "  var term = window.prompt('Highlight functions matching (regular expression):', '');\n"
    "  if (!term) return;\n"
    "  try { re = new RegExp(term); } catch (e) { window.alert(e.message); return; }\n"
    "  var hits = [], sum = 0, end = -1;\n"
    "  for (var i = 0; i < frames.length; i++)\n"
    "    if (re.test(frames[i].name)) { frames[i].r.setAttribute('fill', HI); hits.push(frames[i]); }\n"
    "  /* A match inside a counted match is already in its width. */\n"
    "  hits.sort(function (a, b) { return a.x - b.x || b.w - a.w; });\n"
    "  for (i = 0; i < hits.length; i++)\n"
    "    if (hits[i].x >= end - EPS) { sum += hits[i].w; end = hits[i].x + hits[i].w; }\n"
    "  matched.textContent = 'Matched: ' + (100 * sum / FW).toFixed(1) + '%';\n"
    "  search.textContent = 'Clear search';\n"
    "}\n"
    "function frameOf(e) {\n"
    "  var g = e.target.parentNode;\n"
    "  return g && g.hcFrame !== undefined ? frames[g.hcFrame] : null;\n"
    "}\n"
    "box.addEventListener('click', function (e) {\n"
    "  var fr = frameOf(e);\n"
    "  if (fr) { if (fr.w >= FW - EPS) reset(); else zoom(fr); }\n"
    "});\n"
    "box.addEventListener('mouseover', function (e) {\n"
    "  var fr = frameOf(e);\n"
    "  if (fr) details.textContent = fr.tip;\n"
    "});\n"
    "box.addEventListener('mouseout', function () { details.textContent = ''; });\n"
    "unzoom.addEventListener('click', reset);\n"
    "search.addEventListener('click', function () { if (re) clearSearch(); else find(); });\n"
    "doc.addEventListener('keydown', function (e) {\n"
    "  if (e.key === 'Escape') { reset(); clearSearch(); }\n"
    "  else if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); clearSearch(); find(); }\n"
    "});\n"
    "})();\n";

static void put_head(FILE *f, int height, const char *title)
{
	title = title ? title : "Flame graph";
	fprintf(f,
	    "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
	    "viewBox=\"0 0 %d %d\">\n<title>",
	    WIDTH, height, WIDTH, height);
	rp_xml_esc(f, title, SIZE_MAX); /* a browser's tab, a file manager */
	fprintf(f,
	    "</title>\n<style type=\"text/css\"><![CDATA[\n"
	    "text { font-family: monospace; font-size: 11px; fill: #000; }\n"
	    "#frames text { pointer-events: none; }\n"
	    "#frames rect { cursor: pointer; }\n"
	    "#frames g:hover rect { stroke: #000; stroke-width: 0.5; }\n"
	    ".h1 { font-size: 17px; text-anchor: middle; }\n"
	    ".sub { fill: #555; text-anchor: middle; }\n"
	    ".ctl { font-size: 12px; fill: #1a55b0; cursor: pointer; }\n"
	    "]]></style>\n"
	    "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f7f5ee\"/>\n"
	    "<text class=\"h1\" x=\"%d\" y=\"24\">",
	    WIDTH, height, WIDTH / 2);
	rp_xml_esc(f, title, SIZE_MAX);
	fputs("</text>\n", f);
}

/* errno is read right after the stdio call that failed, before anything
 * else can change it. */
static int finish(FILE *f, int err)
{
	if (err == 0 && ferror(f))
		err = errno ? errno : EIO;
	if (err == 0 && fflush(f) != 0)
		err = errno ? errno : EIO;
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* The drawn frames of stacks (see sweep), with the names by rank in *names
 * and the total in *total.  Returns the frame count: 0 when no stack has a
 * positive value, (size_t)-1 when out of memory. */
static size_t build(const rp_stack_t *stacks, size_t n, node_t **out, name_t **names, double *total, size_t *used)
{
	size_t kept = 0, frames = 0, len = (size_t)-1;
	uint32_t maxn = 0;
	for (size_t i = 0; i < n; i++)
		if (stacks[i].value > 0 && isfinite(stacks[i].value)) {
			kept++;
			frames += stacks[i].n;
			maxn = stacks[i].n > maxn ? stacks[i].n : maxn;
		}
	*used = kept;
	*names = NULL;
	if (kept == 0)
		return 0;

	/* Names become alphabetical ranks, so sorting and merging the stacks
	 * compares integers, not strings.  The ids take 4 bytes a frame; the
	 * stacks themselves take at least 8. */
	names_t *nt = calloc(1, sizeof *nt);
	item_t *it = malloc(kept * sizeof *it);
	uint32_t *ids = malloc((frames + 1) * sizeof *ids), *rank = NULL;
	if (nt == NULL || it == NULL || ids == NULL)
		goto out;
	uint32_t *p = ids;
	for (size_t i = 0, k = 0; i < n; i++) {
		const rp_stack_t *s = &stacks[i];
		if (!(s->value > 0) || !isfinite(s->value))
			continue;
		it[k++] = (item_t){ p, s->n, s->value };
		for (uint32_t j = 0; j < s->n; j++)
			if ((*p++ = intern(nt, s->names[j] ? s->names[j] : "[unknown]")) == UINT32_MAX)
				goto out;
	}
	rank = malloc((nt->len + 1) * sizeof *rank);
	if (rank == NULL)
		goto out;
	if (nt->len > 0) /* qsort wants a valid pointer even for none */
		qsort(nt->v, nt->len, sizeof *nt->v, by_name);
	for (uint32_t r = 0; r < nt->len; r++)
		rank[nt->v[r].id] = r;
	for (size_t i = 0; i < frames; i++)
		ids[i] = rank[ids[i]];
	qsort(it, kept, sizeof *it, by_stack);

	/* Summed in sorted order, so the same stacks give the same bits. */
	double sum = 0;
	for (size_t i = 0; i < kept; i++)
		sum += it[i].v;
	*total = sum;
	len = sweep(it, kept, maxn, sum * MIN_FRAC, out);
out:
	free(it);
	free(ids);
	free(rank);
	if (nt != NULL) {
		if (len == (size_t)-1)
			free(nt->v);
		else
			*names = nt->v;
		rp_index_free(&nt->ix);
		free(nt);
	}
	return len;
}

int rp_svg_write(FILE *f, const rp_stack_t *stacks, size_t n, const char *title, const char *unit)
{
	bool bytes = unit != NULL && strcmp(unit, "bytes") == 0;
	node_t *v = NULL;
	name_t *names = NULL;
	double total = 0;
	size_t used, len;
	int err = 0;

	errno = 0; /* so a failed write's errno is its own */
	len = build(stacks, n, &v, &names, &total, &used);
	if (len == (size_t)-1) {
		errno = ENOMEM;
		return -1;
	}
	if (len == 0) {
		put_head(f, 110, title);
		fprintf(f,
		    "<text class=\"sub\" x=\"%d\" y=\"70\">The profile is empty: no stack has a "
		    "positive value.</text>\n</svg>\n",
		    WIDTH / 2);
		return finish(f, 0);
	}

	uint32_t maxdepth = 0;
	for (size_t i = 0; i < len; i++)
		maxdepth = v[i].depth > maxdepth ? v[i].depth : maxdepth;
	int base_y = HEAD + (int)maxdepth * FRAME_H;
	int height = base_y + FRAME_H + FOOT;
	char tot[64];
	fmt_value(tot, sizeof tot, total, bytes);

	put_head(f, height, title);
	fprintf(f,
	    "<text class=\"sub\" x=\"%d\" y=\"44\">Total: %s in %zu stack%s; frames under "
	    "0.1%% are not drawn</text>\n"
	    "<text id=\"unzoom\" class=\"ctl\" x=\"%d\" y=\"24\" display=\"none\">Reset zoom</text>\n"
	    "<text id=\"search\" class=\"ctl\" x=\"%d\" y=\"24\" text-anchor=\"end\" "
	    "display=\"none\">Search</text>\n<g id=\"frames\">\n",
	    WIDTH / 2, tot, used, used == 1 ? "" : "s", PAD, WIDTH - PAD);
	for (size_t i = 0; i < len; i++) {
		put_frame(f, &v[i], v[i].name == ROOT ? "all" : names[v[i].name].s, total, base_y, bytes);
		if (ferror(f)) {
			err = errno ? errno : EIO;
			break;
		}
	}
	fprintf(f,
	    "</g>\n<text id=\"details\" x=\"%d\" y=\"%d\"></text>\n"
	    "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"></text>\n"
	    "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n",
	    PAD, height - 10, WIDTH - PAD, height - 10, script);
	free(v);
	free(names);
	return finish(f, err);
}
