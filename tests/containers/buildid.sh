#!/usr/bin/env bash
# containers/buildid: a container whose binary differs from the host's at
# the same path gets the right names or a clear refusal, never the host's.
#
# A program is built twice with different code (variant 1 and 2: other
# functions, other build ids).  The host has variant 2 at $WORK/bin/prog;
# a preloaded container has variant 1 at the same path (a bind mount over
# it).  The container's process is dumped from the host:
#   - report FILE (no -p) reads the host's file at that path, sees its build
#     id differ from the one in the dump, names none of variant 2's
#     functions and says on stderr which module and why;
#   - report FILE -p PID names variant 1's functions (the container's own
#     file, through the process);
#   - --sysroot of a copy of the container's tree names them too.
source "$(dirname "$0")/../lib/containers.sh"
ct_setup buildid "$@"
ct_image

mkdir -p "$WORK/bin" "$WORK/c" "$WORK/root$WORK/bin"
cat >"$WORK/v.c" <<'SRC'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
void *keep[4000];
#if VARIANT == 1
__attribute__((noinline)) void container_build_alloc(void)
{
	for (int i = 0; i < 2000; i++)
		memset(keep[i] = malloc(4096), 1, 4096);
}
#define CALL container_build_alloc
#else
__attribute__((noinline)) void host_build_pad(void) { __asm__ volatile("nop; nop; nop; nop; nop; nop"); }
__attribute__((noinline)) void host_build_alloc(void)
{
	for (int i = 0; i < 10; i++)
		memset(keep[i] = malloc(128), 2, 128);
	host_build_pad();
}
#define CALL host_build_alloc
#endif
int main(void)
{
	CALL();
	for (;;)
		pause();
}
SRC
gcc -O1 -g -fno-omit-frame-pointer -Wl,--build-id -DVARIANT=1 -o "$WORK/c/prog" "$WORK/v.c" || die "gcc variant 1"
gcc -O1 -g -fno-omit-frame-pointer -Wl,--build-id -DVARIANT=2 -o "$WORK/bin/prog" "$WORK/v.c" || die "gcc variant 2"
cp "$WORK/c/prog" "$WORK/root$WORK/bin/prog"
chmod 755 "$WORK" "$WORK/bin" "$WORK/c"

note "a container running its own build of a program at the host build's path"
CT_MALLOC_CONF=prof:true,lg_prof_sample:12 pid=$(ct_start prog -v "$WORK/c:$WORK/bin:ro" -- "$WORK/bin/prog") || exit 1
cd "$WORK" || die "no $WORK"
"$BUILD/heapctl" dump "$pid" -o "$WORK/c.heap" >/dev/null 2>"$WORK/dump.err" ||
    fail "dump of the container: $(cat "$WORK/dump.err")"
grep -q " $WORK/bin/prog (@" "$WORK/c.heap" || fail "the dump has no build id line for $WORK/bin/prog"

note "report without -p: never the host build's names"
"$BUILD/heapctl" report "$WORK/c.heap" --top 40 >"$WORK/plain.out" 2>"$WORK/plain.err" ||
    fail "report without -p failed: $(head -3 "$WORK/plain.err")"
grep -q host_build "$WORK/plain.out" && fail "report without -p names the host build's functions: $(grep host_build "$WORK/plain.out" | head -2)"
grep -q "$WORK/bin/prog: build id [0-9a-f]* in the dump, [0-9a-f]* on this host: not used for names" "$WORK/plain.err" ||
    fail "report without -p does not say why the program is unnamed: $(head -3 "$WORK/plain.err")"

note "report -p PID: the container's own build"
"$BUILD/heapctl" report "$WORK/c.heap" -p "$pid" --top 40 >"$WORK/p.out" 2>"$WORK/p.err" ||
    fail "report -p failed: $(head -3 "$WORK/p.err")"
grep -q container_build_alloc "$WORK/p.out" || fail "report -p does not name container_build_alloc: $(head -8 "$WORK/p.out" | tr '\n' '|')"
grep -q host_build "$WORK/p.out" && fail "report -p names the host build's functions"

note "report --sysroot of the container's files"
"$BUILD/heapctl" report "$WORK/c.heap" --sysroot "$WORK/root" --top 40 >"$WORK/s.out" 2>"$WORK/s.err" ||
    fail "report --sysroot failed: $(head -3 "$WORK/s.err")"
grep -q container_build_alloc "$WORK/s.out" || fail "report --sysroot does not name container_build_alloc"

note "done"
finish
