#!/usr/bin/env bash
# thp: jemalloc's opt.thp.
#
#  * thp:always gives every mapping the heap's objects live in (a small
#    object's chunk, a large object's chunk, a huge mapping, a chunk-aligned
#    one, and a huge object after realloc moved or grew it) the kernel's
#    "hg" flag (MADV_HUGEPAGE), as /proc/self/smaps shows it; thp:never gives
#    them "nh" (MADV_NOHUGEPAGE); default and no setting give neither;
#  * mallctl("opt.thp") reads the mode; HEAPCTL_CONF wins over MALLOC_CONF;
#  * a value that is not default, always or never is refused in one line and
#    leaves the default;
#  * Debian's python3 under thp:always: a 32 MiB ctypes buffer it allocates
#    lies in a mapping with "hg".
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup thp "$@"

cat >"$WORK/prog.c" <<'EOF2'
#include <heapctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "hg", "nh", both, or "-": the THP flags of the mapping holding p */
static const char *flags(const void *p)
{
	static char out[8];
	char line[512];
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");
	strcpy(out, "?");
	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char c;
		/* a mapping's first line; the others begin "Name:" */
		if (sscanf(line, "%lx-%lx %c", &lo, &hi, &c) == 3) {
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			snprintf(out, sizeof out, "%s%s", strstr(line, " hg") ? "hg" : "",
			    strstr(line, " nh") ? "nh" : "");
			if (out[0] == 0)
				strcpy(out, "-");
			break;
		}
	}
	if (f)
		fclose(f);
	return out;
}

int main(void)
{
	const char *mode = "?";
	size_t len = sizeof mode;
	if (mallctl("opt.thp", &mode, &len, NULL, 0) != 0)
		mode = "error";
	char *small = malloc(32), *large = malloc(100000), *huge = malloc(20 << 20);
	char *aligned = aligned_alloc(4 << 20, 9 << 20);
	printf("opt.thp %s\n", mode);
	printf("small %s\n", flags(small));
	printf("large %s\n", flags(large));
	printf("huge %s\n", flags(huge));
	printf("aligned %s\n", flags(aligned));
	/* a 400 MiB hole on either side makes realloc move or grow in place;
	 * the flags go with the pages either way */
	huge = realloc(huge, 400 << 20);
	huge[(400 << 20) - 1] = 1;
	printf("realloc %s\n", flags(huge));
	free(small), free(large), free(huge), free(aligned);
	return 0;
}
EOF2
compile_linked "$WORK/prog" "$WORK/prog.c"

n=0
# expect <opt.thp> <flags of every object> <stderr> [VAR=value...]
expect() {
	local mode=$1 fl=$2 err=$3
	shift 3
	n=$((n + 1))
	run "p$n" "$WORK" "$@" "$WORK/prog"
	check_eq "$*: exit status" "$RC" 0
	check_eq "$*: output" "$(cat "$WORK/p$n.out")" "opt.thp $mode
small $fl
large $fl
huge $fl
aligned $fl
realloc $fl"
	check_eq "$*: stderr" "$(cat "$WORK/p$n.err")" "$err"
}

expect default - ""
expect default - "" MALLOC_CONF=thp:default
expect always hg "" MALLOC_CONF=thp:always
expect never nh "" MALLOC_CONF=thp:never
expect never nh "" MALLOC_CONF=thp:always HEAPCTL_CONF=thp:never
expect always hg "" MALLOC_CONF=thp:always,prof:true,lg_prof_sample:0
expect default - '<heapctl>: MALLOC_CONF: ignoring "thp:sometimes": expected default, always or never' \
    MALLOC_CONF=thp:sometimes
expect always hg '<heapctl>: HEAPCTL_CONF: ignoring "thp:ALWAYS": expected default, always or never' \
    MALLOC_CONF=thp:always HEAPCTL_CONF=thp:ALWAYS

# thp:default where the system's setting is madvise: the dense mode for huge
# objects once the program has written two fresh ones whole, never for one
# that writes them every 64 KiB, as mallctl("experimental.thp_dense") says.
# In huge pages (where a fresh small page is dear) every 32nd fresh mapping
# of the mode is a probe in small pages; in small pages every one is.  A
# probe written in part ends the mode.
cat >"$WORK/dense.c" <<'EOF2'
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
EOF2
sed -n '/^\/\* "hg", "nh"/,/^}$/p' "$WORK/prog.c" >>"$WORK/dense.c"
cat >>"$WORK/dense.c" <<'EOF2'
/* mallctl("experimental.thp_dense"), heapctl's when it is preloaded */
static const char *mode(void)
{
	int (*ctl)(const char *, void *, size_t *, void *, size_t);
	*(void **)&ctl = dlsym(RTLD_DEFAULT, "mallctl");
	const char *m = "?";
	size_t len = sizeof m;
	if (ctl == NULL || ctl("experimental.thp_dense", &m, &len, NULL, 0) != 0)
		return "error";
	return m;
}
enum { SIZE = 12 << 20 };
/* a fresh SIZE object (the cache holds none that fits), written whole
 * or every 64 KiB */
static char *get(int whole)
{
	char *p = malloc(SIZE);
	if (whole)
		memset(p, 1, SIZE);
	else
		for (size_t o = 0; o < SIZE; o += 65536)
			p[o] = 1;
	return p;
}
int main(int argc, char **argv)
{
	int whole = strcmp(argv[1], "whole") == 0;
	char *a = get(whole), *b = get(whole);
	free(a);
	free(b);
	/* c takes the cached one; d, e[] are fresh */
	char *c = get(whole), *d = get(whole), *e[31];
	printf("after two: %s %s\n", flags(d), mode());
	for (int i = 0; i < 30; i++)
		e[i] = get(whole);
	printf("31st: %s, ", flags(e[29]));
	/* the probe, written in part: its free ends the mode */
	e[30] = get(0);
	printf("32nd: %s\n", flags(e[30]));
	free(e[30]);
	char *x = get(whole), *y = get(whole); /* x takes the probe's mapping */
	printf("after a sparse probe: %s %s\n", flags(y), mode());
	free(c), free(d), free(x), free(y);
	for (int i = 0; i < 30; i++)
		free(e[i]);
	return 0;
}
EOF2
compile "$WORK/dense" "$WORK/dense.c"
run dense_whole "$WORK" LD_PRELOAD="$LIB" "$WORK/dense" whole
check_eq "written whole: exit status" "$RC" 0
# which pages the mode took is the machine's (the cost of a small page):
# the flags follow from it
fl=- dmode=off
if grep -q '\[madvise\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then
	dmode=$(sed -n '1s/^after two: [^ ]* //p' "$WORK/dense_whole.out")
	case $dmode in
	huge) fl=hg ;;
	small) fl=- ;;
	*) fl=- dmode="small or huge" ;;
	esac
fi
check_eq "written whole, system THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)" \
    "$(cat "$WORK/dense_whole.out")" "after two: $fl $dmode
31st: $fl, 32nd: -
after a sparse probe: - off"
check_stderr_empty dense_whole
run dense_sparse "$WORK" LD_PRELOAD="$LIB" "$WORK/dense" sparse
check_eq "written every 64 KiB: exit status" "$RC" 0
check_eq "written every 64 KiB" "$(cat "$WORK/dense_sparse.out")" "after two: - off
31st: -, 32nd: -
after a sparse probe: - off"
run dense_never "$WORK" LD_PRELOAD="$LIB" MALLOC_CONF=thp:never "$WORK/dense" whole
check_eq "written whole under thp:never" "$(sed -n 1p "$WORK/dense_never.out")" "after two: nh off"

# a program nobody here wrote
if command -v python3 >/dev/null 2>&1; then
	cat >"$WORK/buf.py" <<'EOF2'
import ctypes
buf = (ctypes.c_char * (32 << 20))()
addr = ctypes.addressof(buf)
flags = "?"
with open("/proc/self/smaps") as f:
    inside = False
    for line in f:
        head = line.split()
        if "-" in head[0] and ":" not in head[0]:
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            inside = lo <= addr < hi
        elif inside and line.startswith("VmFlags:"):
            flags = " ".join(x for x in head[1:] if x in ("hg", "nh")) or "-"
            break
print(flags)
EOF2
	for m in always never default; do
		run "py$m" "$WORK" MALLOC_CONF=thp:$m LD_PRELOAD="$LIB" python3 "$WORK/buf.py"
		want=$(case $m in always) echo hg ;; never) echo nh ;; *) echo - ;; esac)
		check_eq "python3 under thp:$m: exit status" "$RC" 0
		check_eq "python3 under thp:$m: its 32 MiB buffer's mapping" "$(cat "$WORK/py$m.out")" "$want"
		check_stderr_empty "py$m"
	done
else
	fail "python3 not installed"
fi
finish
