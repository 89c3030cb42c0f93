#!/usr/bin/env bats
# tests/serve/serve_archive.bats - heapctl serve --archive on a shared host:
# a root daemon, and an unprivileged user (nobody) who owns her process's
# segment and forges "dump written" events in it naming what she likes: a
# sparse 3 GiB file, a file with a hole, root's files, another user's, a
# symlinked directory, a FIFO, a path with "..".  None is archived, and
# none of root's or the other user's files is opened by the daemon (a
# fanotify watch on each names who opens them).  Another user's archived dumps
# survive her flood (each user's share of --keep and --max-bytes), and her
# own legitimate dump is archived.

load ../lib/helpers

setup_file() {
	# forge SEGMENT KIND PATH: publish a "dump written" event in SEGMENT's
	# ring, as the library would (shm.c's hc_shm_event_publish), from the
	# header the library was built with
	local src
	src=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)/shm
	cc -I"$src" -o "$BATS_FILE_TMPDIR/forge" -x c - <<'EOF'
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "heapctl_shm.h"
int main(int argc, char **argv)
{
	int fd = argc == 4 ? open(argv[1], O_RDWR) : -1;
	hc_shm_t *s = fd >= 0 ? mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
	if (s == MAP_FAILED) {
		perror("forge");
		return 1;
	}
	hc_shm_ring_t *r = &s->ring;
	uint64_t n = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	hc_shm_event_t *e = &r->ev[n & (HC_SHM_EVENTS - 1)];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	__atomic_store_n(&e->seq, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	e->time_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	e->type = HC_EV_DUMP;
	e->kind = (uint32_t)argv[2][0];
	e->value = e->value2 = 0;
	memset(e->name, 0, sizeof e->name);
	memset(e->path, 0, sizeof e->path);
	memset(e->text, 0, sizeof e->text);
	snprintf(e->path, sizeof e->path, "%s", argv[3]);
	__atomic_store_n(&e->seq, n + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&r->head, n + 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&r->futex, 1, __ATOMIC_RELEASE);
	return 0;
}
EOF
}

# start_serve [ARGS...]: serve.bats's (the daemon on a free loopback port;
# sets URL, SPID)
eval "$(sed -n '/^start_serve() {/,/^}/p; /^in_metrics() /p' "$BATS_TEST_DIRNAME/serve.bats")"

# forge PID KIND PATH: as nobody, in her process PID's segment
forge() { as_nobody "$BATS_FILE_TMPDIR/forge" "$(seg "$1")" "$2" "$3"; }

# watch_opens FILE...: every open of each FILE, "open PID PATH" (fanotify
# FAN_OPEN, which names the opening process) into $T/opens until the test
# ends; started before the forged events.  The daemon's opens are those of
# $SPID: other daemons on this host may open them too.
watch_opens() {
	: >"$T/opens"
	python3 - "$T/opens" "$@" <<-'PY' &
	import ctypes, os, struct, sys
	libc = ctypes.CDLL(None, use_errno=True)
	fd = libc.fanotify_init(0, os.O_RDONLY | os.O_NONBLOCK | os.O_LARGEFILE)   # FAN_CLASS_NOTIF
	assert fd >= 0, ctypes.get_errno()
	for p in sys.argv[2:]:
	    # FAN_MARK_ADD, FAN_OPEN
	    assert libc.fanotify_mark(fd, 1, ctypes.c_uint64(0x20), -100, p.encode()) == 0, p
	os.set_blocking(fd, True)
	out = open(sys.argv[1], "a", buffering=1)
	out.write("watching\n")
	while True:
	    buf = os.read(fd, 65536)
	    i = 0
	    while i < len(buf):
	        ln, _, _, _, _, efd, pid = struct.unpack_from("IBBHQii", buf, i)
	        path = os.readlink("/proc/self/fd/%d" % efd) if efd >= 0 else "?"
	        if efd >= 0:
	            os.close(efd)
	        out.write("open %d %s\n" % (pid, path))
	        i += ln
	PY
	track $!
	wait_for 5 grep -q '^watching' "$T/opens"
}

# archived PID: the archive's dumps of that process, oldest first
archived() { ls "$T"/arch/*/*".$1."*.heap 2>/dev/null; }

@test "serve --archive: forged dump events naming huge, sparse, foreign, root-only, symlinked and FIFO files: none archived, none opened as root; her own dump is" {
	need_root
	mkdir -m 755 "$T/eve" "$T/eve/sub"
	chown nobody:nogroup "$T/eve" "$T/eve/sub"
	mkdir -m 700 "$T/root"
	local dump='heap_v2/524288\n  t*: 1: 4096 [0: 0]\n'
	printf "$dump" >"$T/root/secret.heap"
	chmod 600 "$T/root/secret.heap"
	# root's and another user's files in her directory (she cannot read them)
	printf "$dump" >"$T/eve/jp.root.heap"
	printf "$dump" >"$T/eve/jp.other.heap"
	chmod 600 "$T/eve/jp.root.heap" "$T/eve/jp.other.heap"
	chown daemon:daemon "$T/eve/jp.other.heap"
	mkfifo -m 600 "$T/eve/jp.rootfifo.heap"
	start_serve --archive "$T/arch"
	start_target -u nobody -d "$T/eve" -c "prof:true,lg_prof_sample:12,prof_prefix:$T/eve/jp,control_refresh_ms:100"
	local pid=$TPID
	wait_for 3 in_metrics "$pid"
	# hers: a 3 GiB sparse file that begins as a dump (4 KB of her disk),
	# and a small one whose hole reads as NUL bytes
	as_nobody sh -c "printf '$dump' >'$T/eve/jp.big.heap' && truncate -s 3G '$T/eve/jp.big.heap'"
	as_nobody sh -c "printf '$dump' >'$T/eve/jp.hole.heap' && truncate -s 1M '$T/eve/jp.hole.heap' &&
	    printf '$dump' >>'$T/eve/jp.hole.heap'"
	# her symlinks: to root's file, and a directory of root's
	as_nobody ln -s "$T/root/secret.heap" "$T/eve/jp.link.heap"
	as_nobody ln -s "$T/root" "$T/eve/sub/jp"
	as_nobody mkfifo "$T/eve/jp.fifo.heap"
	watch_opens "$T/root/secret.heap" "$T/eve/jp.root.heap" "$T/eve/jp.other.heap" "$T/eve/jp.rootfifo.heap"
	# outside her prof.prefix's directory: not touched, not logged (as a
	# dump written elsewhere on request); read before the events after them
	forge "$pid" m "$T/root/secret.heap"
	forge "$pid" m "$T/eve/../root/secret.heap"
	forge "$pid" m "$T/eve/jp.big.heap"
	forge "$pid" m "$T/eve/jp.hole.heap"
	forge "$pid" m "$T/eve/jp.root.heap"
	forge "$pid" m "$T/eve/jp.other.heap"
	forge "$pid" m "$T/eve/jp.link.heap"
	forge "$pid" m "$T/eve/jp.fifo.heap"
	forge "$pid" m "$T/eve/jp.rootfifo.heap"
	seven() { [ "$(grep -c "of process $pid not archived" "$T/serve.err")" -ge 7 ]; }
	wait_for 10 seven || { cat "$T/serve.err"; false; }
	# she may point her own prof.prefix anywhere: through her symlink to
	# root's directory, the file is opened with her rights and refused
	as_nobody "$HEAPCTL" set "$pid" "prof.prefix=$T/eve/sub/jp/secret" >/dev/null
	wait_for 5 eval '"$HEAPCTL" status "$pid" | grep -q "$T/eve/sub/jp/secret"'
	forge "$pid" m "$T/eve/sub/jp/secret.heap"
	# the daemon still answers, and every forged event has been read
	read_all() { [ "$(grep -c "of process $pid not archived" "$T/serve.err")" -ge 8 ]; }
	wait_for 10 read_all || { cat "$T/serve.err"; false; }
	[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/metrics")" = 200 ]
	cat "$T/serve.err"
	# nothing of hers archived, nothing of root's or the other user's opened
	[ -z "$(archived "$pid")" ]
	[ "$(du -sk "$T/arch" | cut -f1)" -lt 100 ]
	cat "$T/opens"
	! grep -q "^open $SPID " "$T/opens"
	grep -q "jp.big.heap of process $pid not archived: 3221225472 bytes by its size, over --max-dump" "$T/serve.err"
	grep -q "jp.hole.heap of process $pid not archived: holds a NUL byte" "$T/serve.err"
	grep -q "jp.root.heap of process $pid not archived: Permission denied" "$T/serve.err"
	grep -q "jp.other.heap of process $pid not archived: Permission denied" "$T/serve.err"
	grep -q "jp.link.heap of process $pid not archived: Too many levels of symbolic links" "$T/serve.err"
	grep -q "jp.fifo.heap of process $pid not archived: not a regular file" "$T/serve.err"
	# root's FIFO: opened as root (and then refused) by the code before; now not at all
	grep -q "jp.rootfifo.heap of process $pid not archived: Permission denied" "$T/serve.err"
	grep -q "jp/secret.heap of process $pid not archived: Permission denied" "$T/serve.err"
	! grep -q "$T/root/secret.heap of process\|/\.\./root/secret.heap of process" "$T/serve.err"
	# her own legitimate dump, asked for by her, is archived byte for byte
	as_nobody "$HEAPCTL" set "$pid" "prof.prefix=$T/eve/jp" >/dev/null
	as_nobody "$HEAPCTL" dump "$pid" >"$T/dumped"
	wait_for 5 eval '[ -n "$(archived "$pid")" ]' || { cat "$T/serve.err"; false; }
	cmp "$(archived "$pid")" "$(cat "$T/dumped")"
	[[ $(archived "$pid") == *".u65534.$pid.manual.heap" ]]
	[ "$(stat -c %s "$T/eve/jp.big.heap")" = 3221225472 ]
}

@test "serve --archive: another user's archived dumps survive her flood of forged dumps in the same group (each user's share of --keep and --max-bytes)" {
	need_root
	mkdir -m 755 "$T/eve" "$T/bob"
	chown nobody:nogroup "$T/eve"
	chown daemon:daemon "$T/bob"
	start_serve --archive "$T/arch" --keep 5 --max-bytes 300K
	# bob's process (the same program: the same group, "target") and three dumps of it
	start_target -u daemon -d "$T/bob" -c "prof:true,lg_prof_sample:12,prof_prefix:$T/bob/jp,control_refresh_ms:100"
	local bob=$TPID i
	start_target -u nobody -d "$T/eve" -c "prof:true,lg_prof_sample:12,prof_prefix:$T/eve/jp,control_refresh_ms:100"
	local eve=$TPID
	wait_for 3 in_metrics "$bob"
	wait_for 3 in_metrics "$eve"
	for i in 1 2 3; do "$HEAPCTL" dump "$bob" >/dev/null; sleep 0.05; done
	wait_for 5 eval '[ "$(archived "$bob" | wc -l)" -eq 3 ]' || { cat "$T/serve.err"; false; }
	archived "$bob" >"$T/bob.before"
	# her flood: twelve real dump-shaped files of hers, 60 KB each, in her
	# prefix directory (720 KB: over --max-bytes, and over --keep)
	as_nobody /usr/bin/python3 - "$T/eve" <<-'PY'
	import sys
	for i in range(12):
	    with open("%s/jp.flood%d.heap" % (sys.argv[1], i), "w") as f:
	        f.write("heap_v2/524288\n" + "  t*: 1: 4096 [0: 0]\n" * 3000)
	PY
	for i in $(seq 0 11); do forge "$eve" m "$T/eve/jp.flood$i.heap"; sleep 0.01; done
	flooded() { [ "$(curl -s --max-time 5 "$URL/metrics" | sed -n 's/^heapctl_archived_dumps_total //p')" -ge 15 ]; }
	wait_for 10 flooded || { cat "$T/serve.err"; ls -lR "$T/arch"; false; }
	ls -l "$T"/arch/target
	# bob's three are all still there
	archived "$bob" | cmp - "$T/bob.before"
	# hers are held to her own share: at most --keep, under --max-bytes
	[ "$(archived "$eve" | wc -l)" -le 5 ]
	[ "$(cat $(archived "$eve") | wc -c)" -le $((300 * 1024)) ]
	# her newest is kept
	cmp "$(archived "$eve" | tail -n1)" "$T/eve/jp.flood11.heap"
	# /archive names each dump's user
	curl -s "$URL/archive" | python3 -c '
import json, sys
a = json.load(sys.stdin)
assert {e["uid"] for e in a} >= {1, 65534}, a'
}

@test "serve --archive --max-dump: a dump over it is not archived and the log says why; the flag is checked" {
	start_serve --archive "$T/arch" --max-dump 2K
	start_target -c "prof:true,lg_prof_sample:10,prof_prefix:$T/jp,control_refresh_ms:100" grow=200000
	wait_for 3 in_metrics "$TPID"
	local f
	f=$("$HEAPCTL" dump "$TPID")
	[ "$(stat -c %s "$f")" -gt 2048 ]
	wait_for 5 grep -q "$f of process $TPID not archived: $(stat -c %s "$f") bytes by its size, over --max-dump (2048)" \
	    "$T/serve.err" || { cat "$T/serve.err"; false; }
	[ -z "$(archived "$TPID")" ]
	run "$HEAPCTL" serve --max-dump 1M
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: serve: --keep, --max-bytes, --max-age and --max-dump are for --archive DIR" ]
	run "$HEAPCTL" serve --archive "$T/arch" --max-dump 0
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: serve: --max-dump 0: want a size like 500M or 2G" ]
}

@test "serve --archive: with more processes at its start than one scan opens (64), one started after it is archived from its first dump" {
	# the daemon read a process found in a later round of its start as one
	# that was there before it, from then on: a dump it wrote first was lost.
	# 150: the rounds before and just after "listening" both full (64 each)
	local i np many=()
	for i in $(seq 150); do
		LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" sleep 60 &
		many+=($!)
	done
	track "${many[@]}"
	segments() { for i in "$@"; do [ -e "/dev/shm/heapctl.$i" ] || return 1; done; }
	wait_for 10 segments "${many[@]}"
	start_serve --archive "$T/arch"
	LD_PRELOAD="$HEAPCTL_BUILD/libheapctl.so" sleep 60 &
	np=$!
	track "$np"
	wait_for 5 "$HEAPCTL" status "$np"
	"$HEAPCTL" dump "$np" >/dev/null
	wait_for 20 eval '[ -n "$(archived "$np")" ]' || { cat "$T/serve.err"; false; }
	# killed, they leave their segments: heapctl list sweeps them, as it
	# does those of any process that is gone
	kill "${many[@]}" "$np"
	wait "${many[@]}" "$np" 2>/dev/null || true
	"$HEAPCTL" list >/dev/null 2>&1 || true
	[ -z "$(ls /dev/shm | grep -E "^heapctl\.($(IFS='|'; echo "${many[*]}|$np"))\$")" ]
}
