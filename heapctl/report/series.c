/*
 * heapctl/report/series.c - trends over a series of profiles: which sites kept
 * growing from the first dump to the last (rp_series_rank), and a line
 * chart of them over time (rp_series_svg).
 *
 * A site is what the text view's "flat" column counts: the function (or,
 * with --lines, the function and line) that made the allocation.  A site
 * that went up in every interval is a leak suspect: the memory a leak holds
 * only grows, where a cache or a pool also gives some back or levels off.
 * Suspects are ranked first, by how much they grew.  This is the one rule:
 * watch --leaks and serve --leaks take it from here (only_grew) for the
 * last N + 1 dumps, and the alert rules count on it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "report.h"
#include "rp_internal.h"

static const rp_series_t *rank_s;

static int cmp_trend(const void *a, const void *b)
{
	const rp_trend_t *x = a, *y = b;
	if (x->only_grew != y->only_grew)
		return x->only_grew ? -1 : 1;
	if (x->growth != y->growth)
		return x->growth > y->growth ? -1 : 1;
	if (x->last != y->last)
		return x->last > y->last ? -1 : 1;
	return strcmp(rank_s->site[x->site], rank_s->site[y->site]);
}

rp_trend_t *rp_series_rank(const rp_series_t *s, size_t *n)
{
	rp_trend_t *t = rp_alloc(sizeof *t * (s->nsites + 1));
	size_t k = 0;
	for (size_t i = 0; i < s->nsites; i++) {
		const double *v = &s->v[i * s->ndumps];
		rp_trend_t r = { .site = i, .first = v[0], .last = v[s->ndumps - 1] };
		bool any = false;
		for (size_t d = 0; d < s->ndumps; d++) {
			any |= v[d] != 0;
			if (v[d] > r.peak)
				r.peak = v[d];
			if (d && v[d] > v[d - 1])
				r.grew++;
			else if (d && v[d] < v[d - 1])
				r.shrank++;
		}
		if (!any)
			continue;
		r.growth = r.last - r.first;
		r.only_grew = s->ndumps > 1 && r.grew == s->ndumps - 1;
		t[k++] = r;
	}
	rank_s = s;
	if (k)
		qsort(t, k, sizeof *t, cmp_trend);
	*n = k;
	return t;
}

/* ---- the chart ------------------------------------------------------- */

enum { W = 1200, LEFT = 96, RIGHT = 24, TOP = 64, PLOT_H = 380, LEGEND_ROW = 20 };

static const char *const palette[] = { "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
	"#17becf", "#7f7f7f", "#bcbd22" };
#define NCOLORS (sizeof palette / sizeof palette[0])

/* A step of 1, 2 or 5 times a power of ten giving about five ticks up to max. */
static double nice_step(double max)
{
	double raw = max / 5, mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static void fmt_val(char *buf, size_t len, double v, bool bytes)
{
	if (bytes)
		out_bytes_f(v, buf, len);
	else
		snprintf(buf, len, "%.0f", v);
}

static void fmt_secs(char *buf, size_t len, double s, double span)
{
	if (span < 20)
		snprintf(buf, len, "+%.1f s", s);
	else if (s < 120)
		snprintf(buf, len, "+%.0f s", s);
	else if (s < 7200)
		snprintf(buf, len, "+%.1f min", s / 60);
	else
		snprintf(buf, len, "+%.1f h", s / 3600);
}

int rp_series_svg(FILE *f, const rp_series_t *s, const rp_trend_t *t, size_t n, size_t top, const char *title,
    bool bytes)
{
	size_t k = n < top ? n : top;
	if (k > NCOLORS)
		k = NCOLORS;
	int height = TOP + PLOT_H + 56 + (int)k * LEGEND_ROW + 16;
	double pw = W - LEFT - RIGHT;
	double t0 = (double)s->time_ns[0], t1 = (double)s->time_ns[s->ndumps - 1];
	bool by_time = t1 > t0;
	double max = 0;
	for (size_t i = 0; i < k; i++)
		if (t[i].peak > max)
			max = t[i].peak;
	if (!(max > 0))
		max = 1;
	/* bytes step in round numbers of the unit the labels use (KiB, MiB, ...) */
	double unit = 1;
	while (bytes && max / unit >= 1024 && unit < 1125899906842624.0)
		unit *= 1024;
	double step = nice_step(max / unit) * unit;
	double ymax = ceil(max / step) * step;
	char buf[64];

	fprintf(f,
	    "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
	    "viewBox=\"0 0 %d %d\">\n"
	    "<style type=\"text/css\"><![CDATA[\n"
	    "text { font-family: monospace; font-size: 11px; fill: #000; }\n"
	    ".h1 { font-size: 17px; text-anchor: middle; }\n"
	    ".sub { fill: #555; text-anchor: middle; }\n"
	    ".axis { stroke: #888; stroke-width: 1; }\n"
	    ".grid { stroke: #ddd; stroke-width: 1; }\n"
	    ".ylab { text-anchor: end; }\n"
	    ".xlab { text-anchor: middle; }\n"
	    ".site polyline { fill: none; stroke-width: 2; }\n"
	    ".site:hover polyline { stroke-width: 4; }\n"
	    "]]></style>\n"
	    "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f7f5ee\"/>\n"
	    "<text class=\"h1\" x=\"%d\" y=\"24\">",
	    W, height, W, height, W, height, W / 2);
	rp_xml_esc(f, title, SIZE_MAX);
	fprintf(f,
	    "</text>\n<text class=\"sub\" x=\"%d\" y=\"44\">%zu dumps; the %zu sites that grew most, "
	    "leak suspects (only grew) first</text>\n",
	    W / 2, s->ndumps, k);

	/* the axes, the value grid and its labels */
	fputs("<g id=\"axes\">\n", f);
	for (double y = 0; y <= ymax * 1.0000001; y += step) {
		double py = TOP + PLOT_H - y / ymax * PLOT_H;
		fmt_val(buf, sizeof buf, y, bytes);
		fprintf(f,
		    "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
		    "<text class=\"ylab\" x=\"%d\" y=\"%.1f\">%s</text>\n",
		    LEFT, py, W - RIGHT, py, LEFT - 6, py + 4, buf);
	}
	fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", LEFT, TOP, LEFT, TOP + PLOT_H);
	fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", LEFT, TOP + PLOT_H, W - RIGHT,
	    TOP + PLOT_H);
	/* time (or dump number) along the bottom: five labels */
	for (int i = 0; i <= 4; i++) {
		double frac = i / 4.0;
		if (by_time)
			fmt_secs(buf, sizeof buf, frac * (t1 - t0) / 1e9, (t1 - t0) / 1e9);
		else
			snprintf(buf, sizeof buf, "dump %.0f", 1 + frac * (double)(s->ndumps - 1));
		fprintf(f, "<text class=\"xlab\" x=\"%.1f\" y=\"%d\">%s</text>\n", LEFT + frac * pw, TOP + PLOT_H + 18,
		    buf);
	}
	fputs("</g>\n<g id=\"lines\">\n", f);

	/* one line per site, its value at each dump (a title on each point) */
	for (size_t i = k; i-- > 0;) { /* the top site drawn last, on top */
		const rp_trend_t *r = &t[i];
		const double *v = &s->v[r->site * s->ndumps];
		fprintf(f, "<g class=\"site\" id=\"site%zu\"><title>", i + 1);
		rp_xml_esc(f, s->site[r->site], 2000);
		fprintf(f, "</title><polyline stroke=\"%s\" points=\"", palette[i]);
		for (size_t d = 0; d < s->ndumps; d++) {
			double frac = by_time ? ((double)s->time_ns[d] - t0) / (t1 - t0)
			    : s->ndumps > 1   ? (double)d / (double)(s->ndumps - 1)
			                      : 0.5;
			fprintf(f, "%s%.1f,%.1f", d ? " " : "", LEFT + frac * pw, TOP + PLOT_H - v[d] / ymax * PLOT_H);
		}
		fputs("\"/></g>\n", f);
	}
	fputs("</g>\n<g id=\"legend\">\n", f);
	for (size_t i = 0; i < k; i++) {
		const rp_trend_t *r = &t[i];
		int y = TOP + PLOT_H + 48 + (int)i * LEGEND_ROW;
		char g[64], l[64];
		fmt_val(g, sizeof g, fabs(r->growth), bytes);
		fmt_val(l, sizeof l, r->last, bytes);
		fprintf(f,
		    "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" fill=\"%s\"/>"
		    "<text x=\"%d\" y=\"%d\">%s%s (now %s, grew in %u of %zu intervals)%s ",
		    LEFT, y - 9, palette[i], LEFT + 22, y, r->growth < 0 ? "-" : "+", g, l, r->grew, s->ndumps - 1,
		    r->only_grew ? " *" : "");
		fprintf(f, "<tspan class=\"name\">");
		rp_xml_esc(f, s->site[r->site], 160);
		fputs("</tspan></text>\n", f);
	}
	fputs("</g>\n</svg>\n", f);
	fflush(f);
	return ferror(f) ? -1 : 0;
}
