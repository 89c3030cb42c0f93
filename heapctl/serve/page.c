/*
 * heapctl/serve/page.c - the daemon's web page: every process with its
 * counters and a plot of its last hour, links to its profile (text top,
 * flame graph, pprof), buttons for on, off and dump, and the archive with
 * the difference between two of its dumps; a page of each process
 * (/?pid=N): the same row, its user and unit, its archived dumps and its
 * recent events.  Everything is in the page (no
 * file from elsewhere: a production host reaches nothing outside), the
 * tables and plots are there without JavaScript, and the script only
 * refreshes the counters and sends the buttons' POSTs with the token.
 * The plots (/plot?pid=N, and &parts=1 for where its resident memory goes,
 * mem.c) are SVG in one frame (plot_begin, plot_end).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

/* Text for HTML: <>&"' escaped, and only valid UTF-8 (out_safe). */
static void esc(FILE *f, const char *s)
{
	char safe[2048];
	for (s = out_safe(s, safe, sizeof safe); *s; s++)
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
}

static const char style[] = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
                            "h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.15em;margin:1.5em 0 .4em}"
                            "table{border-collapse:collapse;margin:.5em 0}th,td{padding:.25em .6em;text-align:left;"
                            "border-bottom:1px solid #ddd;vertical-align:top}th{background:#f3f3f3}"
                            "td.n{text-align:right;font-variant-numeric:tabular-nums}"
                            "tr.plot td{border-bottom:2px solid #bbb}button{margin-right:.3em}"
                            "#status{margin-left:1em;color:#06c}.off{color:#a00}.on{color:#080}"
                            "code{font-size:.95em}";

/* The script: the token kept for this tab, the buttons' POSTs, the
 * counters refreshed from /targets every 2 s and the plots every 30 s. */
static const char script[] =
    "const tok=document.getElementById('token'),st=document.getElementById('status');"
    "tok.value=sessionStorage.getItem('heapctl-token')||'';"
    "tok.addEventListener('input',()=>sessionStorage.setItem('heapctl-token',tok.value));"
    /* out_bytes_f (heapctl/cli/out.c) again: the same step before rounding and
     * printf's ties to even (toFixed takes 1.25 to 1.3, printf to 1.2), so
     * that a refreshed cell reads as the server wrote it; v*10 is exact,
     * v being bytes over a power of two */
    "function fmt(v){const u=['B','KiB','MiB','GiB','TiB','PiB'];let i=0;"
    "while(i<5&&v>=(i?1023.95:1023.5)){v/=1024;i++}if(!i)return v.toFixed(0)+' B';"
    "let t=Math.floor(v*10);const r=v*10-t;if(r>.5||(r==.5&&t%2))t++;return (t/10).toFixed(1)+' '+u[i]}"
    "for(const b of document.querySelectorAll('button[data-act]'))"
    "b.addEventListener('click',async()=>{st.textContent=b.dataset.act+' '+b.dataset.pid+'...';"
    "try{const r=await fetch('/control/'+b.dataset.act+'?pid='+b.dataset.pid,{method:'POST',"
    "headers:tok.value?{Authorization:'Bearer '+tok.value}:{}});"
    "st.textContent=(await r.text()).trim();st.dataset.code=r.status;refresh()}"
    "catch(e){st.textContent=String(e)}});"
    "async function refresh(){try{const t=await(await fetch('/targets')).json();"
    "for(const x of t){const r=document.querySelector('tr[data-pid=\"'+x.pid+'\"]');if(!r)continue;"
    "const p=r.querySelector('.prof');p.textContent=x.prof_active?'on':'off';p.className='prof '+p.textContent;"
    "for(const k of ['allocated','resident','highwater'])r.querySelector('.'+k).textContent=fmt(x[k]);"
    "for(const k of ['samples','dumps'])r.querySelector('.'+k).textContent=x[k]}}catch(e){}}"
    "setInterval(refresh,2000);"
    "setInterval(()=>{for(const i of document.querySelectorAll('img.plot'))"
    "i.src=i.src.replace(/&t=.*|$/,'&t='+Date.now())},30000);";

/* The beginning of a page titled title (escaped here). */
static void page_head(FILE *f, const char *title)
{
	fputs("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	      "<meta name=\"viewport\" content=\"width=device-width\"><title>",
	    f);
	esc(f, title);
	fprintf(f, "</title><style>%s</style></head><body>\n", style);
}

static void target_rows(FILE *f, const serve_row_t *r, size_t n)
{
	fputs("<table id=\"targets\"><thead><tr><th>PID</th><th>Command</th><th>Unit</th><th>Sampling</th>"
	      "<th>Allocated</th><th>Resident</th><th>High-water</th><th>Samples</th><th>Dumps</th>"
	      "<th>Profile now</th><th>Control</th></tr></thead><tbody>\n",
	    f);
	for (size_t i = 0; i < n; i++) {
		char b1[32], b2[32], b3[32];
		const hc_shm_state_t *st = &r[i].st;
		fprintf(f, "<tr data-pid=\"%d\"><td class=\"n\"><a href=\"/?pid=%d\">%d</a></td><td><code>", r[i].pid,
		    r[i].pid, r[i].pid);
		esc(f, r[i].command);
		fputs("</code></td><td>", f);
		esc(f, r[i].unit[0] ? r[i].unit : r[i].container);
		fprintf(f,
		    "</td><td class=\"prof %s\">%s</td>"
		    "<td class=\"n allocated\">%s</td><td class=\"n resident\">%s</td><td class=\"n highwater\">%s</td>"
		    "<td class=\"n samples\">%llu</td><td class=\"n dumps\">%llu</td>",
		    st->active ? "on" : "off", st->active ? "on" : "off", out_bytes(st->allocated, b1, sizeof b1),
		    out_bytes(st->resident, b2, sizeof b2), out_bytes(st->highwater, b3, sizeof b3),
		    (unsigned long long)st->samples, (unsigned long long)st->dumps);
		fprintf(f,
		    "<td><a href=\"/debug/pprof/heap?pid=%d&amp;debug=1\">top</a> "
		    "<a href=\"/flame?pid=%d\">flame graph</a> <a href=\"/debug/pprof/heap?pid=%d\">pprof</a> "
		    "<a href=\"/debug/pprof/allocs?pid=%d\">allocs</a></td>"
		    "<td><button data-act=\"on\" data-pid=\"%d\">on</button><button data-act=\"off\" data-pid=\"%d\">off"
		    "</button><button data-act=\"dump\" data-pid=\"%d\">dump</button></td></tr>\n",
		    r[i].pid, r[i].pid, r[i].pid, r[i].pid, r[i].pid, r[i].pid, r[i].pid);
		fprintf(f,
		    "<tr class=\"plot\"><td colspan=\"11\"><img class=\"plot\" src=\"/plot?pid=%d&amp;t=0\" "
		    "width=\"720\" height=\"150\" alt=\"allocated, resident and high-water of process %d over the "
		    "last hour\"></td></tr>\n",
		    r[i].pid, r[i].pid);
	}
	fputs("</tbody></table>\n", f);
}

/* The archive's dumps the reader may see; with pid > 0 only those of that
 * pid and uid (a process's page: an earlier process that had its pid was
 * another program, or another user's). */
static void archive_rows(FILE *f, serve_peer_t *peer, int pid, uid_t uid)
{
	if (!arch_enabled()) {
		fputs("<p>No archive: start <code>heapctl serve --archive DIR</code> to keep every dump.</p>\n", f);
		return;
	}
	size_t n;
	arch_entry_t *v = arch_scan(&n);
	size_t kept = 0; /* the dumps of processes the reader may see */
	for (size_t i = 0; i < n; i++) {
		long long u;
		int p = 0;
		char kind[32];
		if (pid > 0 &&
		    (!arch_name_parse(v[i].name, &u, &p, kind, sizeof kind) || p != pid || u != (long long)uid))
			continue;
		if (access_owner_ok(peer, v[i].owner))
			v[kept++] = v[i];
	}
	if (kept == 0) {
		fputs(pid > 0 ? "<p id=\"no-archive\">The archive holds no dump of this process.</p>\n"
		        : n   ? "<p>The archive holds no dump of a process you may read.</p>\n"
		              : "<p>The archive is empty.</p>\n",
		    f);
		free(v);
		return;
	}
	n = kept;
	/* two dumps' difference: a form, so it needs no script */
	fputs("<form action=\"/top\" method=\"get\">Difference: <select name=\"file\" id=\"diff-file\">", f);
	for (size_t i = n; i-- > 0;) {
		fputs("<option>", f);
		esc(f, v[i].group);
		fputc('/', f);
		esc(f, v[i].name);
		fputs(".heap</option>", f);
	}
	fputs("</select> minus <select name=\"base\" id=\"diff-base\">", f);
	for (size_t i = n; i-- > 0;) {
		fprintf(f, "<option%s>", i + 2 == n ? " selected" : "");
		esc(f, v[i].group);
		fputc('/', f);
		esc(f, v[i].name);
		fputs(".heap</option>", f);
	}
	fputs("</select> <button type=\"submit\">show</button></form>\n", f);
	fputs("<table id=\"archive\"><thead><tr><th>Dump</th><th>Group</th><th>Size</th><th>Read it</th></tr>"
	      "</thead><tbody>\n",
	    f);
	size_t shown = 0;
	for (size_t i = n; i-- > 0 && shown < 200; shown++) {
		char b[32], rel[600];
		snprintf(rel, sizeof rel, "%s/%s.heap", v[i].group, v[i].name);
		fputs("<tr><td><code>", f);
		esc(f, v[i].name);
		fputs("</code></td><td>", f);
		esc(f, v[i].group);
		fprintf(f, "</td><td class=\"n\">%s</td><td>", out_bytes(v[i].bytes, b, sizeof b));
		/* names are [A-Za-z0-9._@-] (arch_name_ok): safe in a URL and in HTML */
		fprintf(f,
		    "<a href=\"/top?file=%s\">top</a> <a href=\"/flame?file=%s\">flame graph</a> "
		    "<a href=\"/archive/%s\">heap</a> <a href=\"/archive/%s/%s.pb.gz\">pprof</a></td></tr>\n",
		    rel, rel, rel, v[i].group, v[i].name);
	}
	fputs("</tbody></table>\n", f);
	free(v);
}

char *page_html(size_t *len, serve_peer_t *peer)
{
	char *buf = NULL;
	*len = 0;
	FILE *f = open_memstream(&buf, len);
	if (f == NULL)
		return NULL;
	size_t n;
	serve_row_t *r = serve_rows(&n);
	page_head(f, "heapctl serve");
	fputs("<h1>heapctl serve</h1>\n", f);
	fprintf(f,
	    "<p id=\"summary\">%zu process%s run%s libheapctl.so. "
	    "<a href=\"/metrics\">metrics</a> · <a href=\"/targets\">targets</a> · <a href=\"/events\">events</a> · "
	    "<a href=\"/archive\">archive</a> (JSON)</p>\n",
	    n, n == 1 ? "" : "es", n == 1 ? "s" : "");
	fputs("<p><label>Token for the buttons <input type=\"password\" id=\"token\" autocomplete=\"off\" "
	      "size=\"24\"></label><span id=\"status\" role=\"status\"></span></p>\n",
	    f);
	target_rows(f, r, n);
	free(r);
	fputs("<h2>Archive</h2>\n", f);
	archive_rows(f, peer, 0, 0);
	fprintf(f, "<script>%s</script>\n</body></html>\n", script);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *page_process(int pid, size_t *len, serve_peer_t *peer, bool *found)
{
	size_t n, i;
	serve_row_t *r = serve_rows(&n);
	for (i = 0; i < n && r[i].pid != pid; i++)
		;
	*found = i < n;
	*len = 0;
	char *buf = NULL;
	FILE *f = *found ? open_memstream(&buf, len) : NULL;
	if (f == NULL) {
		free(r);
		return NULL;
	}
	const serve_row_t *x = &r[i];
	char title[400], user[256], pwbuf[1024];
	struct passwd pw, *pwp = NULL;
	serve_program(x->command, user, sizeof user);
	snprintf(title, sizeof title, "%.300s (pid %d)", user, pid);
	if (getpwuid_r(x->uid, &pw, pwbuf, sizeof pwbuf, &pwp) == 0 && pwp)
		snprintf(user, sizeof user, "%s", pw.pw_name);
	else
		snprintf(user, sizeof user, "uid %u", (unsigned)x->uid);
	page_head(f, title);
	fputs("<p><a href=\"/\">heapctl serve</a>: every process</p>\n<h1 id=\"process\">", f);
	esc(f, title);
	fputs("</h1>\n<p id=\"facts\"><code class=\"command\">", f);
	esc(f, x->command);
	fputs("</code><br>User <b class=\"user\">", f);
	esc(f, user);
	fprintf(f, "</b> (uid %u)", (unsigned)x->uid);
	if (x->unit[0]) {
		fputs(" · unit <b class=\"unit\">", f);
		esc(f, x->unit);
		fputs("</b>", f);
	}
	if (x->container[0]) {
		fputs(" · container <b class=\"container\">", f);
		esc(f, x->container);
		fputs("</b>", f);
	}
	fprintf(f, " · sampling every %s on average</p>\n",
	    x->st.lg_sample < 63 ? out_bytes((uint64_t)1 << x->st.lg_sample, pwbuf, sizeof pwbuf) : "?");
	fputs("<p><label>Token for the buttons <input type=\"password\" id=\"token\" autocomplete=\"off\" "
	      "size=\"24\"></label><span id=\"status\" role=\"status\"></span></p>\n",
	    f);
	target_rows(f, x, 1);
	fprintf(f,
	    "<h2>Where its memory goes</h2>\n<p>Its resident memory in parts, a point a minute, as "
	    "<code>heapctl explain %d</code> gives them now.</p>\n<img class=\"plot\" id=\"parts\" "
	    "src=\"/plot?pid=%d&amp;parts=1&amp;t=0\" width=\"720\" height=\"170\" alt=\"the parts of the resident "
	    "memory of process %d over the last hour\">\n",
	    pid, pid, pid);
	fputs("<h2>Archived dumps</h2>\n", f);
	archive_rows(f, peer, pid, x->uid);
	fputs("<h2>Recent events</h2>\n", f);
	size_t ne;
	char **ev = serve_events_of(pid, peer, 50, &ne);
	if (ne == 0)
		fputs("<p id=\"no-events\">No event of this process since the daemon found it.</p>\n", f);
	else {
		fputs("<ol id=\"events\">", f);
		for (size_t k = 0; k < ne; k++) {
			fputs("<li><code>", f);
			ev[k][strcspn(ev[k], "\n")] = 0;
			esc(f, ev[k]);
			fputs("</code></li>\n", f);
		}
		fputs("</ol>\n", f);
	}
	for (size_t k = 0; k < ne; k++)
		free(ev[k]);
	free(ev);
	free(r);
	fprintf(f, "<script>%s</script>\n</body></html>\n", script);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *page_error(const char *line, size_t *len)
{
	char *buf = NULL;
	*len = 0;
	FILE *f = open_memstream(&buf, len);
	if (f == NULL)
		return NULL;
	page_head(f, "heapctl serve");
	fputs("<p id=\"error\">", f);
	esc(f, line);
	fputs("</p>\n</body></html>\n", f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---- the plots ----------------------------------------------------------- */

/* An SVG plot of the last hour in the making: its size and margins (as
 * its <img> on the page says), its left edge's time and its top value. */
typedef struct plot_s {
	FILE *f;
	char *buf;
	int w, h, l, r, t, b;
	int64_t t0;
	uint64_t max;
} plot_t;

/* The frame both plots share: the SVG titled "process PID" and what, on
 * white, with axes if asked, the scale (max at the top, 0) and the hour
 * along the bottom.  false when memory runs out. */
static bool plot_begin(plot_t *p, size_t *len, int pid, const char *what, bool axes)
{
	p->buf = NULL;
	*len = 0;
	if ((p->f = open_memstream(&p->buf, len)) == NULL)
		return false;
	p->t0 = time(NULL) - 3600;
	FILE *f = p->f;
	char b[32];
	fprintf(f,
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
	    "font-family=\"sans-serif\" font-size=\"11\"><title>process %d%s</title>"
	    "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>",
	    p->w, p->h, p->w, p->h, pid, what, p->w, p->h);
	if (axes) {
		fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", p->l, p->h - p->b,
		    p->w - p->r, p->h - p->b);
		fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", p->l, p->t, p->l,
		    p->h - p->b);
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", p->l - 4, p->t + 8,
	    out_bytes(p->max, b, sizeof b));
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>", p->l - 4, p->h - p->b);
	fprintf(f, "<text x=\"%d\" y=\"%d\">an hour ago</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">now</text>",
	    p->l, p->h - 8, p->w - p->r, p->h - 8);
	return true;
}

/* A point at time t of value v, " x,y" (without the space first) */
static void plot_point(const plot_t *p, bool first, int64_t t, uint64_t v)
{
	double x = p->l + (double)(t - p->t0) * (p->w - p->l - p->r) / 3600.0;
	double y = (p->h - p->b) - (double)v * (p->h - p->b - p->t) / (double)p->max;
	fprintf(p->f, "%s%.1f,%.1f", first ? "" : " ", x < p->l ? p->l : x, y);
}

/* The end of a plot of n points: that it is collecting them (every: how
 * often) while it has fewer than two.  The SVG, NULL when memory ran out. */
static char *plot_end(plot_t *p, unsigned n, const char *every)
{
	if (n < 2)
		fprintf(p->f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#777\">collecting: %s</text>",
		    (p->l + p->w) / 2, p->h / 2, every);
	fputs("</svg>\n", p->f);
	if (fclose(p->f) != 0) {
		free(p->buf);
		return NULL;
	}
	return p->buf;
}

/* /plot?pid=N: allocated, resident and high-water over the last hour (h:
 * the caller holds the targets' lock) */
static char *plot_counters(const serve_hist_t *h, int pid, size_t *len)
{
	plot_t p = { .w = 720, .h = 150, .l = 70, .r = 10, .t = 10, .b = 24, .max = 1 };
	unsigned n = h ? h->n : 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned k = (h->head + HIST_N - n + i) % HIST_N;
		uint64_t v[3] = { h->p[k].allocated, h->p[k].resident, h->p[k].highwater };
		for (int j = 0; j < 3; j++)
			if (v[j] > p.max)
				p.max = v[j];
	}
	if (!plot_begin(&p, len, pid, ", the last hour", true))
		return NULL;
	static const char *const name[3] = { "allocated", "resident", "high-water" };
	static const char *const color[3] = { "#1f77b4", "#2ca02c", "#d62728" };
	for (int j = 0; j < 3; j++) {
		fprintf(p.f, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
		    name[j], color[j]);
		for (unsigned i = 0; i < n; i++) {
			unsigned k = (h->head + HIST_N - n + i) % HIST_N;
			uint64_t v = j == 0 ? h->p[k].allocated : j == 1 ? h->p[k].resident : h->p[k].highwater;
			plot_point(&p, i == 0, h->p[k].t, v);
		}
		fprintf(p.f, "\"/><text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>", p.l + 10 + j * 90, p.t + 10, color[j],
		    name[j]);
	}
	char every[64];
	snprintf(every, sizeof every, "a point every %d s", HIST_STEP_S);
	return plot_end(&p, n, every);
}

/* /plot?pid=N&parts=1: the parts of its resident memory over the last
 * hour, stacked (a point a minute: mem.c) */
static char *plot_parts(int pid, size_t *len)
{
	static const char *const color[6] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#7f7f7f" };
	plot_t p = { .w = 720, .h = 170, .l = 70, .r = 10, .t = 22, .b = 24, .max = 1 };
	memh_t h;
	mem_history(pid, &h);
	for (unsigned i = 0; i < h.n; i++) {
		uint64_t sum = 0;
		for (unsigned j = 0; j < 6; j++)
			sum += h.p[(h.head + MEMH_N - h.n + i) % MEMH_N].v[j];
		p.max = sum > p.max ? sum : p.max;
	}
	if (!plot_begin(&p, len, pid, ": where its resident memory goes, the last hour", false))
		return NULL;
	/* each part an area between the running sums below and with it */
	for (unsigned j = 0; j < 6 && h.n >= 2; j++) {
		fprintf(p.f, "<polygon class=\"%s\" fill=\"%s\" fill-opacity=\"0.75\" points=\"", mem_part(false, j),
		    color[j]);
		for (int pass = 0; pass < 2; pass++)
			for (unsigned i = 0; i < h.n; i++) {
				unsigned q = pass ? h.n - 1 - i : i;
				unsigned k = (h.head + MEMH_N - h.n + q) % MEMH_N;
				uint64_t below = 0;
				for (unsigned m = 0; m < j + (pass == 0); m++)
					below += h.p[k].v[m];
				plot_point(&p, !pass && !i, h.p[k].t, below);
			}
		fprintf(p.f, "\"/>");
	}
	for (unsigned j = 0; j < 6; j++)
		fprintf(p.f, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>", p.l + 10 + j * 100, 14, color[j],
		    mem_part(false, j));
	return plot_end(&p, h.n, "a point a minute");
}

/* ---- the routes ----------------------------------------------------------- */

/* / (every process), /?pid=N (one: its page, else one line, 404 or 403
 * as for its profile) */
enum MHD_Result page_serve(struct MHD_Connection *c, serve_peer_t *peer)
{
	size_t len;
	char *html, why[1024];
	unsigned status = MHD_HTTP_OK;
	bool found = true;
	if (MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pid") == NULL)
		html = page_html(&len, peer);
	else {
		int pid = targets_request_pid(c, peer, &status, why, sizeof why);
		html = pid < 0 ? NULL : page_process(pid, &len, peer, &found);
		if (pid > 0 && !found) { /* gone since */
			status = MHD_HTTP_NOT_FOUND;
			snprintf(why, sizeof why, "process %d is not running libheapctl.so (see /targets)", pid);
		}
		if (pid < 0 || !found)
			html = page_error(why, &len);
		else
			status = MHD_HTTP_OK;
	}
	if (html == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	return respond_html(c, status, html, len);
}

enum MHD_Result page_serve_plot(struct MHD_Connection *c)
{
	long pid = query_num(c, "pid", INT_MAX);
	if (pid <= 0)
		return respond_err(c, MHD_HTTP_BAD_REQUEST, "pid must be a process id");
	const char *parts = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "parts");
	size_t n, len = 0;
	targets_lock(&n);
	const serve_target_t *x = targets_find_locked((int)pid);
	bool found = x != NULL;
	char *svg = x && !parts ? plot_counters(x->hist, (int)pid, &len) : NULL;
	targets_unlock();
	if (found && parts)
		svg = plot_parts((int)pid, &len);
	if (!found)
		return respond_err(c, MHD_HTTP_NOT_FOUND, "process %ld is not running libheapctl.so (see /targets)",
		    pid);
	if (svg == NULL)
		return respond_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	enum MHD_Result ok = respond_buf(c, MHD_HTTP_OK, "image/svg+xml", svg, len);
	free(svg);
	return ok;
}
