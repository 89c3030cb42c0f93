/*
 * heapctl/symbolize/names.c - a symbol's names as a report shows them: the
 * symbol as the ELF file has it, demangled (libstdc++'s demangler, loaded
 * on first use), and short as jeprof's ShortFunctionName makes it.
 *
 * Apart from symbolize.c because the symbol cache (symcache.c) and
 * symbolized profiles (symfile.c) name their frames the same way without
 * libdwfl.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "report/rp_internal.h"

/* Remove the first innermost open...close group (with a " const" after an
 * argument list); false when there is none.  "operator<" and "operator<<"
 * are names, not templates. */
static bool strip_group(char *s, char open, char close)
{
	for (char *c = s; *c; c++) {
		if (*c != open)
			continue;
		char *e = c + 1;
		while (*e && *e != open && *e != close)
			e++;
		if (*e != close)
			continue;
		if (open == '<' && c - s >= 8 && !strncmp(c - 8, "operator", 8))
			continue;
		e++;
		if (open == '(' && !strncmp(e, " const", 6))
			e += 6;
		else if (open == '(' && !strncmp(e, "const", 5))
			e += 5;
		memmove(c, e, strlen(e) + 1);
		return true;
	}
	return false;
}

/* jeprof's ShortFunctionName, except that "(anonymous namespace)" is kept
 * (jeprof turns it into an empty name). */
static char *short_name(const char *full)
{
	char *s = rp_strdup(full);
	char *anon;
	while ((anon = strstr(s, "(anonymous namespace)")) != NULL) {
		/* park its parentheses and space out of the way of the
		 * argument and return-type stripping */
		anon[0] = '\x01';
		anon[10] = '\x03';
		anon[20] = '\x02';
	}
	while (strip_group(s, '(', ')')) /* argument lists, innermost first */
		;
	while (strip_group(s, '<', '>')) /* template arguments */
		;
	/* a leading return type: "void* ns::f" -> "ns::f" */
	char *last_space = NULL;
	for (char *c = s; *c; c++)
		if (*c == ' ' && c[1] && strstr(c + 1, "::") != NULL)
			last_space = c;
	if (last_space && strncmp(s, "operator", 8) != 0) {
		char *w = last_space + 1;
		while (*w && *w != ':' && *w != ' ')
			w++;
		if (w[0] == ':' && w[1] == ':')
			memmove(s, last_space + 1, strlen(last_space + 1) + 1);
	}
	for (char *c = s; *c; c++) {
		if (*c == '\x01')
			*c = '(';
		else if (*c == '\x02')
			*c = ')';
		else if (*c == '\x03')
			*c = ' ';
	}
	return s;
}

/* libstdc++'s demangler, loaded the first time a name needs it: most
 * profiles of C programs never do, and loading the library is a tenth of
 * the time of a report of a few stacks.  Without it names stay mangled. */
typedef char *demangle_fn(const char *mangled, char *buf, size_t *len, int *status);

static demangle_fn *demangler(void)
{
	static demangle_fn *fn;
	static bool tried;
	if (!tried) {
		tried = true;
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			fn = (demangle_fn *)dlsym(h, "__cxa_demangle");
	}
	return fn;
}

void rp_name_frame(rp_frame_t *f, const char *sym)
{
	f->sys = rp_intern(sym);
	char *d = NULL;
	demangle_fn *demangle;
	if (sym[0] == '_' && sym[1] == 'Z' && (demangle = demangler()) != NULL) {
		int status = -1;
		d = demangle(sym, NULL, NULL, &status);
		if (status != 0) {
			free(d);
			d = NULL;
		}
	}
	f->full = rp_intern(d ? d : sym);
	free(d);
	f->func = f->full;
	if (strchr(f->full, '(') || strchr(f->full, '<') || strchr(f->full, ' '))
		f->func = rp_intern(short_name(f->full));
}
