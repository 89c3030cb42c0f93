#!/usr/bin/env bats
# tests/serve/serve_symbols.bats - symbols come from what the process really
# mapped (issue 37, attack 2).  An unprivileged user (nobody) runs a program
# of hers whose dumps name, in MAPPED_LIBRARIES, a binary in a root-only
# (0700) directory instead of her own: an LD_PRELOAD shim in front of
# libheapctl.so hands the library an edited /proc/self/maps.  The root-only
# binary is her program built from a copy of its source with other function
# names, 1000 lines lower, so its code lies where hers does: read, it would
# name her addresses.  Through the root daemon (live profiles, archived ones,
# the pprof beside them) none of its names, its file or its build id may come
# back, and her own names still do where her binary is read.

load ../lib/helpers

# the helpers' teardown, after unmounting what a test mounted
teardown() {
	# shellcheck disable=SC2086 # a list of mount points
	[ -z "${MOUNTED:-}" ] || umount -l $MOUNTED || true
	helpers_teardown
}

# the daemon on a free loopback port, as root; sets URL
start_serve() {
	"$HEAPCTL" serve --listen 127.0.0.1:0 "$@" >"$T/serve.out" 2>"$T/serve.err" &
	track $!
	wait_for 5 grep -q "listening on http://" "$T/serve.out" || { cat "$T/serve.err" >&2; return 1; }
	URL=$(sed -n 's/^heapctl serve: listening on //p' "$T/serve.out")
}

as_her() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

# her_get PATH: as nobody, GET PATH from the daemon into $T/body; its status
her_get() {
	rm -f "$T/her/body"
	as_her curl -s -o "$T/her/body" -w '%{http_code}' --max-time 60 "$URL$1"
	cp "$T/her/body" "$T/body"
}

# build_apps: $T/her/app (nobody's, functions herfn_*, from app.c), the
# root-only $T/vault/app (secfn_*, from rootsecret.c; same code and layout)
# and the shim $T/forge.so; SECRET_ID is the root-only binary's build id
build_apps() {
	mkdir -p "$T/her" "$T/vault"
	cat >"$T/app.c" <<-'C'
	#include <stdio.h>
	#include <stdlib.h>
	#include <unistd.h>
	#define CAT2(a, b) a##b
	#define CAT(a, b) CAT2(a, b)
	#define FN(x) CAT(P, x)
	static void *volatile keep[256];
	__attribute__((noinline)) static void FN(leaf)(int i) { keep[i] = malloc(1 << 16); }
	__attribute__((noinline)) static void FN(middle)(int i) { FN(leaf)(i); __asm__ volatile(""); }
	int main(void)
	{
		for (int i = 0; i < 256; i++)
			FN(middle)(i);
		printf("ready %d\n", getpid());
		fflush(stdout);
		sleep(60);
		return 0;
	}
	C
	cat >"$T/forge.c" <<-'C'
	/* /proc/self/maps as the library reads it, FORGE_FROM replaced by FORGE_TO */
	#define _GNU_SOURCE
	#include <fcntl.h>
	#include <stdarg.h>
	#include <stdlib.h>
	#include <string.h>
	#include <sys/mman.h>
	#include <sys/syscall.h>
	#include <unistd.h>
	int open(const char *path, int flags, ...)
	{
		va_list ap;
		va_start(ap, flags);
		int mode = flags & O_CREAT ? va_arg(ap, int) : 0;
		va_end(ap);
		const char *from = getenv("FORGE_FROM"), *to = getenv("FORGE_TO");
		int fd = (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
		if (fd < 0 || !from || !to || strcmp(path, "/proc/self/maps") != 0)
			return fd;
		static char buf[1 << 20];
		size_t n = 0;
		ssize_t r;
		while (n + 1 < sizeof buf && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
			n += (size_t)r;
		close(fd);
		buf[n] = 0;
		int out = memfd_create("maps", MFD_CLOEXEC);
		char *p = buf;
		for (char *q; (q = strstr(p, from)) != NULL; p = q + strlen(from)) {
			(void)!write(out, p, (size_t)(q - p));
			(void)!write(out, to, strlen(to));
		}
		(void)!write(out, p, strlen(p));
		return out;
	}
	C
	gcc -O2 -shared -fPIC -o "$T/forge.so" "$T/forge.c"
	local link=(-Wl,--no-as-needed -L"$HEAPCTL_BUILD" -lheapctl -Wl,-rpath,"$HEAPCTL_BUILD")
	gcc -O1 -g -DP=herfn_ -o "$T/her/app" "$T/app.c" "${link[@]}"
	{ for _ in $(seq 1000); do echo; done; cat "$T/app.c"; } >"$T/rootsecret.c"
	gcc -O1 -g -DP=secfn_ -o "$T/vault/app" "$T/rootsecret.c" "${link[@]}"
	# the same code at the same offsets: read, the secret names her addresses
	cmp <(objcopy -O binary --only-section=.text "$T/her/app" /dev/stdout) \
	    <(objcopy -O binary --only-section=.text "$T/vault/app" /dev/stdout)
	SECRET_ID=$(readelf -n "$T/vault/app" | awk '/Build ID/ { print $3 }')
	HER_ID=$(readelf -n "$T/her/app" | awk '/Build ID/ { print $3 }')
	[ -n "$SECRET_ID" ] && [ "$SECRET_ID" != "$HER_ID" ]
	chown -R nobody:nogroup "$T/her"
	chmod 700 "$T/vault"
	# (the last command: a negated one elsewhere could not fail the test)
	! as_her cat "$T/vault/app" >/dev/null 2>&1
}

# start_her [forge]: her program, as nobody in $T/her, its dumps under
# $T/her/jp; with forge, every dump names $T/vault/app for her binary.
# Sets HPID.
start_her() {
	local env=(env -u LD_PRELOAD -u MALLOC_CONF
	    "HEAPCTL_CONF=prof:true,lg_prof_sample:0,control_refresh_ms:100,prof_prefix:$T/her/jp")
	[ "${1:-}" = forge ] && env+=(LD_PRELOAD="$T/forge.so" FORGE_FROM="$T/her/app" FORGE_TO="$T/vault/app")
	(cd "$T/her" && exec setpriv --reuid=nobody --regid=nogroup --clear-groups "${env[@]}" "$T/her/app") \
	    >"$T/her.out" 2>"$T/her.err" &
	track $!
	wait_for 5 grep -q '^ready ' "$T/her.out" || { cat "$T/her.err" >&2; return 1; }
	HPID=$(awk '/^ready /{ print $2; exit }' "$T/her.out")
	wait_for 5 control_running "$HPID"
}

# no_secret FILE: nothing of the root-only binary in FILE (a gzipped pprof
# is read unzipped): its function names, its source file, its build id
no_secret() {
	local f=$1
	if gzip -t "$f" 2>/dev/null; then gzip -dc "$f" >"$f.raw"; f=$f.raw; fi
	! grep -a -e secfn_ -e rootsecret -e "$SECRET_ID" "$f"
}

@test "serve_symbols: a live process's dump naming a root-only binary: heap (text and pprof) and /flame carry none of its names, file, line or build id, and her own names" {
	build_apps
	start_her forge
	# the dump really names the root-only binary, and not hers
	as_her "$HEAPCTL" dump "$HPID" -o "$T/her/check.heap" >/dev/null
	grep -q " $T/vault/app\$" "$T/her/check.heap"
	[ "$(grep -c " $T/her/app\$" "$T/her/check.heap")" = 0 ]
	start_serve
	[ "$(her_get "/debug/pprof/heap?pid=$HPID&debug=1")" = 200 ]
	cat "$T/body"
	no_secret "$T/body"
	grep -q 'herfn_leaf' "$T/body"         # read through her process's own mapping
	[ "$(her_get "/debug/pprof/heap?pid=$HPID")" = 200 ]
	no_secret "$T/body"
	gzip -dc "$T/body" | grep -a -q -e herfn_leaf
	gzip -dc "$T/body" | grep -a -q -e "$HER_ID"
	[ "$(her_get "/flame?pid=$HPID")" = 200 ]
	no_secret "$T/body"
	grep -q 'herfn_leaf' "$T/body"
	# the same through seconds= (a base and a delta, each symbolized)
	[ "$(her_get "/debug/pprof/heap?pid=$HPID&seconds=1&debug=1")" = 200 ]
	no_secret "$T/body"
}

# sees the whole machine (tests/run.sh gives it namespaces of its own): root's daemon archives every preloaded process's dumps and makes a pprof of each, one at a time: under make check's pool her two waited behind the other suites' for over 20 s
# bats test_tags=machine
@test "serve_symbols: an archived dump naming a root-only binary: /top, /flame?file= and the pprof beside it carry none of it; an honest one keeps her names, and loses them once her path holds another build" {
	build_apps
	start_serve --archive "$T/arch"
	start_her forge
	local forged=$HPID honest
	as_her "$HEAPCTL" dump "$forged" >/dev/null
	start_her
	honest=$HPID
	as_her "$HEAPCTL" dump "$honest" >/dev/null
	wait_for 20 eval 'ls "$T"/arch/app/*."$forged".manual.pb.gz "$T"/arch/app/*."$honest".manual.pb.gz >/dev/null 2>&1'
	local f h
	f=$(basename "$(ls "$T"/arch/app/*."$forged".manual.heap)")
	h=$(basename "$(ls "$T"/arch/app/*."$honest".manual.heap)")
	grep -q " $T/vault/app\$" "$T/arch/app/$f"
	[ "$(her_get "/top?file=app/$f")" = 200 ]
	cat "$T/body"
	grep -q '^Total: ' "$T/body"
	no_secret "$T/body"
	[ "$(her_get "/flame?file=app/$f")" = 200 ]
	no_secret "$T/body"
	# the pprof beside it, made while the process lived: its own mapping
	no_secret "$T/arch/app/${f%.heap}.pb.gz"
	gzip -dc "$T/arch/app/${f%.heap}.pb.gz" | grep -a -q herfn_leaf
	# her honest dump: her binary, which she can read, names her addresses
	[ "$(her_get "/top?file=app/$h")" = 200 ]
	grep -q 'herfn_leaf' "$T/body"
	no_secret "$T/body"
	# the archived copies are their user's: reports on them read with that user's rights
	[ "$(stat -c %U "$T/arch/app/$f")" = nobody ]
	[ "$(stat -c %U "$T/arch/app/$h")" = nobody ]
	# her path given another build since, one she can read: never used for
	# the names of the dump, which records her program's build id (issue
	# 38); nor is the daemon's symbol cache by that build id, which a dump
	# of hers could name for any binary the daemon has read
	cp "$T/vault/app" "$T/her/app.new"
	chown nobody:nogroup "$T/her/app.new"
	mv "$T/her/app.new" "$T/her/app"
	[ "$(her_get "/top?file=app/$h")" = 200 ]
	grep -q '^Total: ' "$T/body"
	no_secret "$T/body"
	[ "$(grep -c herfn_ "$T/body")" = 0 ]
}

@test "serve_symbols: report --mapped reads the file mapped, not a file put at its path since; --as-user reads only what the user can; the command line as the caller, but not a file of another build id" {
	build_apps
	start_her forge
	as_her "$HEAPCTL" dump "$HPID" -o "$T/her/d.heap" >/dev/null
	# as root, the way the daemon runs it
	run "$HEAPCTL" report "$T/her/d.heap" -p "$HPID" --mapped
	[ "$status" -eq 0 ]
	[[ "$output" == *herfn_leaf* ]]
	[[ "$output" != *secfn_* ]]
	run "$HEAPCTL" report "$T/her/d.heap" --as-user nobody --lines
	[ "$status" -eq 0 ]
	[[ "$output" != *secfn_* ]]
	[[ "$output" != *rootsecret* ]]
	# by uid, as the daemon gives it
	run "$HEAPCTL" report "$T/her/d.heap" --as-user "$(id -u nobody)"
	[ "$status" -eq 0 ]
	[[ "$output" != *secfn_* ]]
	# the command line reads what its caller can (root, the dump's path),
	# but never a file of another build than the one the dump records
	# (issue 38): the forged path's binary is not her program's build
	run "$HEAPCTL" report "$T/her/d.heap"
	[ "$status" -eq 0 ]
	[[ "$output" != *secfn_* ]]
	[[ "$output" == *"heapctl: report: $T/vault/app: build id $HER_ID in the dump, $SECRET_ID on this host: not used for names"* ]]
	# unprivileged (no map_files): by the path the kernel lists, while it
	# is the mapped file; a file renamed over it since is not read
	run as_her "$HEAPCTL" report "$T/her/d.heap" -p "$HPID" --mapped
	[ "$status" -eq 0 ]
	[[ "$output" == *herfn_leaf* ]]
	as_her cp "$T/vault/app" "$T/her/app.new" 2>/dev/null || cp "$T/vault/app" "$T/her/app.new"
	chown nobody:nogroup "$T/her/app.new"
	mv "$T/her/app.new" "$T/her/app"
	run as_her "$HEAPCTL" report "$T/her/d.heap" -p "$HPID" --mapped
	[ "$status" -eq 0 ]
	[[ "$output" != *secfn_* ]]
	[[ "$output" != *herfn_* ]]
	# root reads the mapped (deleted) file itself through map_files
	run "$HEAPCTL" report "$T/her/d.heap" -p "$HPID" --mapped
	[[ "$output" == *herfn_leaf* ]]
	[[ "$output" != *secfn_* ]]
	# --as-user with --mapped: that user's process, not another with its pid
	run "$HEAPCTL" report "$T/her/d.heap" -p "$HPID" --mapped --as-user daemon
	[ "$status" -eq 5 ]
	[ "$output" = "heapctl: --mapped: process $HPID is not daemon's" ]
	run "$HEAPCTL" report "$T/her/d.heap" -p "$HPID" --mapped --as-user nobody
	[ "$status" -eq 0 ]
	[[ "$output" == *herfn_leaf* ]]
	run "$HEAPCTL" report "$T/her/d.heap" --mapped
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: --mapped reads the binaries of a live process: give -p PID" ]
	run "$HEAPCTL" report "$T/her/d.heap" --as-user no-such-user-37
	[ "$status" -eq 2 ]
	[ "$output" = "heapctl: --as-user no-such-user-37: no such user" ]
}

@test "serve_symbols: report --mapped on overlayfs (a container's root) without map_files: the mapped file by its inode, a file put there since refused" {
	build_apps
	# her program run from an overlay mount, as a container's is
	mkdir -p "$T/lower" "$T/up" "$T/ovl"
	mount -t tmpfs tmpfs "$T/up"
	MOUNTED="$T/up"
	mkdir "$T/up/u" "$T/up/w"
	cp -p "$T/her/app" "$T/lower/app"
	mount -t overlay overlay -o "lowerdir=$T/lower,upperdir=$T/up/u,workdir=$T/up/w" "$T/ovl"
	MOUNTED="$T/ovl $T/up"
	chmod 755 "$T/ovl"
	cp "$T/her/app" "$T/her/app.orig"
	rm "$T/her/app"
	ln -s "$T/ovl/app" "$T/her/app"
	start_her
	grep -q " $T/ovl/app\$" "/proc/$HPID/maps"
	# the kernel's maps line gives the layer's inode and a device of neither
	as_her "$HEAPCTL" dump "$HPID" -o "$T/her/d.heap" >/dev/null
	run as_her "$HEAPCTL" report "$T/her/d.heap" -p "$HPID" --mapped
	[ "$status" -eq 0 ]
	[[ "$output" == *herfn_leaf* ]]
	# another file at that path (a copy up of a new one) is not the mapped one
	cp "$T/vault/app" "$T/ovl/app.new"
	mv "$T/ovl/app.new" "$T/ovl/app"
	run as_her "$HEAPCTL" report "$T/her/d.heap" -p "$HPID" --mapped
	[ "$status" -eq 0 ]
	[[ "$output" != *secfn_* ]]
	[[ "$output" != *herfn_* ]]
}
