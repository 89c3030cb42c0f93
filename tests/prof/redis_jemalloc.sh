#!/usr/bin/env bash
# redis_jemalloc: Debian's redis-server (linked with libjemalloc.so.2) under
# the preload uses one allocator, heapctl, for everything.
#
#  * Every jemalloc symbol redis imports (malloc, free, mallctl, nallocx,
#    malloc_usable_size, malloc_stats_print) binds to libheapctl.so, not to
#    libjemalloc (LD_DEBUG=bindings); before, nallocx came from jemalloc.
#  * MEMORY PURGE answers OK (redis asks for arena.<narenas>.purge, which
#    jemalloc takes for "all arenas"; before: "ERR Error purging dirty
#    pages"), and redis works: SET/GET, INFO memory, MEMORY USAGE.
set -euo pipefail
source "$(dirname "$0")/../lib/prof.sh"
hc_setup redis_jemalloc "$@"

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
	fail "redis-server or redis-cli missing (Debian redis-server, redis-tools)"
	finish
fi
port=$((20000 + RANDOM % 12000))   # below the ephemeral range (32768 up)
LD_DEBUG=bindings LD_DEBUG_OUTPUT="$WORK/bindings" LD_PRELOAD="$LIB" \
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --dir "$WORK" >"$WORK/redis.out" 2>&1 &
redis=$!
trap 'kill $redis 2>/dev/null; wait $redis 2>/dev/null; rm -rf "$WORK"' EXIT
cli() { redis-cli -p "$port" "$@" 2>&1; }
for _ in $(seq 100); do
	[ "$(cli PING)" = PONG ] && break
	sleep 0.1
done
check_eq "PING" "$(cli PING)" PONG

check_eq "MEMORY PURGE" "$(cli MEMORY PURGE)" OK
for i in $(seq 200); do echo "SET key$i value-$i-$(printf '%0200d' "$i")"; done | cli >/dev/null
check_eq "GET key77" "$(cli GET key77)" "value-77-$(printf '%0200d' 77)"
u=$(cli MEMORY USAGE key77)
[[ "$u" =~ ^[0-9]+$ && "$u" -ge 200 ]] || fail "MEMORY USAGE key77: '$u'"
check_eq "INFO memory: mem_allocator" "$(cli INFO memory | tr -d '\r' | sed -n 's/^mem_allocator://p')" "jemalloc-5.3.0"
um=$(cli INFO memory | tr -d '\r' | sed -n 's/^used_memory://p')
[[ "$um" =~ ^[0-9]+$ && "$um" -gt 0 ]] || fail "INFO memory: used_memory '$um'"
check_eq "MEMORY PURGE after SETs" "$(cli MEMORY PURGE)" OK
m=$(cli MEMORY MALLOC-STATS | head -3)
[ -n "$m" ] || fail "MEMORY MALLOC-STATS printed nothing"

# which object each of redis's jemalloc imports binds to
for sym in malloc free mallctl nallocx malloc_usable_size malloc_stats_print; do
	b=$(cat "$WORK"/bindings.* 2>/dev/null | grep -E "binding file (/usr/bin/)?redis-server " | grep "\`$sym'" | head -1 || true)
	case "$b" in
	*/libheapctl.so*) ;;
	"") fail "LD_DEBUG=bindings shows no binding of $sym for redis-server" ;;
	*) fail "redis-server's $sym binds elsewhere: $b" ;;
	esac
done
finish
