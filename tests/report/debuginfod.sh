#!/usr/bin/env bash
# debuginfod: with DEBUGINFOD_URLS, the debug information of a stripped
# program comes from a debuginfod server (elfutils' client and cache), here
# Debian's debuginfod serving a directory of separate debug files.
#  * Without the server: the static function is sub_START@p, with no line.
#  * With it: build_cache and p.c:LINE come back; the client's cache holds
#    the file.
#  * A server that is down: the report is the same as without one, and one
#    line on stderr names what was missing (program and build id).
#  * A server that accepts and never answers: the report still comes out,
#    after DEBUGINFOD_TIMEOUT, saying the server did not answer.
set -euo pipefail
source "$(dirname "$0")/../lib/report.sh"
hr_setup report_debuginfod "$@"
hr_need debuginfod objcopy strip python3 curl

mkdir -p "$WORK/srv" "$WORK/bin" "$WORK/d"
cat >"$WORK/p.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
void *keep[5000];
int nkeep;
static __attribute__((noinline)) void build_cache(int n)
{
	for (int i = 0; i < n; i++)
		memset(keep[nkeep++] = malloc(1024), 1, 1024);
}
int main(void)
{
	build_cache(2000);
	return 0;
}
EOF
gcc -O1 -g -fno-omit-frame-pointer -Wl,--build-id -o "$WORK/p.full" "$WORK/p.c"
objcopy --only-keep-debug "$WORK/p.full" "$WORK/srv/p.debug"
strip -o "$WORK/bin/p" "$WORK/p.full"
id=$(readelf -n "$WORK/bin/p" | awk '/Build ID/ { print $3 }')
[ -n "$id" ] || fail "no build id in p"
run prog "$WORK" LD_PRELOAD="$BUILD/libheapctl.so" \
	HEAPCTL_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:"$WORK/d/p" "$WORK/bin/p"
check_eq "program exit" "$RC" 0
dump=$(ls "$WORK"/d/p.*.f.heap | head -1)
line=$(awk '/memset\(keep/ { print NR; exit }' "$WORK/p.c")

HR_DFD_PID=
stop() { [ -z "$HR_DFD_PID" ] || kill "$HR_DFD_PID" 2>/dev/null || true; [ -z "${hole:-}" ] || kill "$hole" 2>/dev/null || true; }
trap 'stop; [ -n "${HC_KEEP:-}" ] || rm -rf "$WORK"' EXIT
hr_debuginfod "$WORK/srv" "$id" debuginfo || finish

unset DEBUGINFOD_URLS DEBUGINFOD_TIMEOUT DEBUGINFOD_RETRY_LIMIT
hr_ok none "$dump" --lines --bytes --top 0
grep -q "build_cache" "$WORK/none.out" && fail "build_cache named without the server: the test proves nothing"
grep -q "sub_[0-9a-f]*@p ??:0$" "$WORK/none.out" || fail "without the server: no sub_START@p row: $(head -3 "$WORK/none.out")"

export DEBUGINFOD_CACHE_PATH=$WORK/cache
DEBUGINFOD_URLS=$HR_DFD_URL hr_ok srv "$dump" --lines --bytes --top 0
grep -q "^ *2048000 .* build_cache $WORK/p.c:$line\$" "$WORK/srv.out" ||
	fail "with the server: no 'build_cache p.c:$line' row of 2048000: $(head -3 "$WORK/srv.out")"
[ ! -s "$WORK/srv.err" ] || fail "with the server: stderr: $(cat "$WORK/srv.err")"
[ -s "$WORK/cache/$id/debuginfo" ] || fail "the client's cache has no $id/debuginfo: $(ls -R "$WORK/cache" | head)"

# down: a port nobody listens on
down=$(hr_free_port)
export DEBUGINFOD_CACHE_PATH=$WORK/cache-down
DEBUGINFOD_URLS=http://127.0.0.1:$down hr_ok down "$dump" --lines --bytes --top 0
check_eq "server down: the report is the one without a server" "$(cat "$WORK/down.out")" "$(cat "$WORK/none.out")"
check_eq "server down: one line on stderr" "$(wc -l <"$WORK/down.err")" 1
grep -q "^heapctl: debuginfod (http://127.0.0.1:$down) gave no debug info for: p (build id $id)\$" "$WORK/down.err" ||
	fail "server down: stderr: $(cat "$WORK/down.err")"

# silent: accepts connections, never answers
silent=$(hr_free_port)
python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
open(sys.argv[2], "w").close()
held = []
while True:
    held.append(s.accept()[0])' "$silent" "$WORK/silent.listening" &
hole=$!
# listening before the client asks (a fixed sleep lost that race on a
# busy machine, and the client was refused as by a server that is down)
for _ in $(seq 150); do [ -e "$WORK/silent.listening" ] && break; sleep 0.1; done
[ -e "$WORK/silent.listening" ] || fail "the silent server did not listen within 15 s"
export DEBUGINFOD_CACHE_PATH=$WORK/cache-silent
DEBUGINFOD_URLS=http://127.0.0.1:$silent DEBUGINFOD_TIMEOUT=2 hr_ok silent "$dump" --lines --bytes --top 0
check_eq "silent server: the report is the one without a server" "$(cat "$WORK/silent.out")" "$(cat "$WORK/none.out")"
grep -q "^heapctl: debuginfod (http://127.0.0.1:$silent) did not answer within 2 s, and was not asked again; no debug info for: p (build id $id)\$" \
	"$WORK/silent.err" || fail "silent server: stderr: $(cat "$WORK/silent.err")"
stop
finish
