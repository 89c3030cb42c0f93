#!/usr/bin/env bash
# tests/systemd/production.sh BUILD - heapctl installed like a package and
# enabled on real services with `heapctl systemd enable`, under a real
# systemd booted in a container (tests/lib/systemd.sh).
#
# An admin's view runs inside the container (make install, heapctl systemd
# enable/disable/status, doctor, run); an operator's runs on the host
# against the services' host PIDs (dump, report, jeprof).  What it proves:
#   1. make install DESTDIR= puts the command, both libraries and the man
#      pages in place, heapctl finds the library there, make uninstall
#      removes exactly what it installed;
#   2. Debian's redis-server.service, with its shipped hardening
#      (NoExecPaths=/, ProtectSystem=strict, SystemCallFilter=@system-service
#      ~@privileged @resources): enable without --restart makes doctor say
#      "restart", then the service runs with the library, answers redis-cli,
#      is dumped from the host, reported and read by jeprof, and disable
#      takes the library out again;
#   3. postgresql@15-main.service, whose pg_ctlcluster resets the
#      environment: the settings go into the cluster's environment file,
#      every postgres process carries the library, psql works, and disable
#      leaves that file byte for byte as the package shipped it;
#   4. a unit with every hardening option at once (DynamicUser=,
#      NoExecPaths=/ ...), enabled with the command, profiled from the host;
#   5. a template unit with two running instances; 6. a user's unit;
#   7. refusals, each with its reason, and no drop-in left behind;
#   8. heapctl run inside the container.
source "$(dirname "$0")/../lib/systemd.sh"
sd_setup production "$@"

H=$BUILD/heapctl
HC=/usr/local/bin/heapctl
LIBEXEC=/usr/local/libexec/heapctl-test

# the test's programs, built on the host (bookworm's glibc is the host's)
gcc -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -o "$WORK/service" \
    "$SD_REPO/tests/programs/systemd_service.c" 2>"$WORK/cc.log" || die "cannot compile service.c: $(head -3 "$WORK/cc.log")"
printf '#include <unistd.h>\nint main(void) { for (;;) pause(); }\n' >"$WORK/static.c"
gcc -static -o "$WORK/static-sleep" "$WORK/static.c" 2>"$WORK/cc.log" ||
    die "cannot link a static program: $(head -3 "$WORK/cc.log")"

sd_rootfs
sd_boot
sd_install
CT=$(ct_root)
install -D -m 0755 "$WORK/service" "$CT$LIBEXEC/service" &&
    install -m 0755 "$WORK/static-sleep" "$CT$LIBEXEC/static-sleep" || die "cannot copy the test programs in"

# ---- helpers -------------------------------------------------------------------

mainpid() { ct systemctl show -p MainPID --value "$1"; }

# unit_state UNIT: what systemd says of it and its last journal lines, on
# one line, for a failure message
unit_state() {
	echo "$(ct systemctl show -p ActiveState,SubState,MainPID,Result,ExecMainStatus "$1" 2>&1 | tr '\n' ' ')| $(ct journalctl -u "$1" -n 12 --no-pager -o cat 2>&1 | tr '\n' '|')"
}

# carries HOSTPID: libheapctl mapped executable in the process
carries() { grep -qE ' r-xp .*/libheapctl[^/]*\.so' "/proc/$1/maps" 2>/dev/null; }

# jget KEY: a field of the JSON object on stdin
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1" 2>/dev/null; }

# host_dump HOSTPID TAG: heapctl dump from the host; the path it printed,
# copied to $WORK/TAG.heap (it must be a path the host can open)
host_dump() {
	local out path
	if ! out=$("$H" dump "$1" --json 2>"$WORK/$2.dump.err"); then
		fail "$2: heapctl dump $1 from the host: $(cat "$WORK/$2.dump.err")"
		return 1
	fi
	path=$(jget path <<<"$out")
	if ! cp "$path" "$WORK/$2.heap" 2>/dev/null; then
		fail "$2: heapctl dump printed $path, which the host cannot open"
		return 1
	fi
	echo "$path"
}

# report_names DUMP HOSTPID TAG ERE: heapctl report on the host names a
# function matching ERE, and jeprof reads the dump (binary BIN in the ct)
report_names() {
	local dump=$1 hp=$2 tag=$3 ere=$4 bin=$5
	if ! "$H" report "$dump" -p "$hp" --top 0 >"$WORK/$tag.report" 2>"$WORK/$tag.report.err"; then
		fail "$tag: heapctl report -p $hp: $(cat "$WORK/$tag.report.err")"
	elif ! grep -qE "$ere" "$WORK/$tag.report"; then
		fail "$tag: heapctl report names nothing like /$ere/: $(head -12 "$WORK/$tag.report" | tr '\n' '|')"
	fi
	if ! jeprof --text "/proc/$hp/root$bin" "$dump" >"$WORK/$tag.jeprof" 2>&1 ||
	    ! grep -q '^Total:' "$WORK/$tag.jeprof"; then
		fail "$tag: jeprof --text $bin did not read the dump: $(tail -3 "$WORK/$tag.jeprof" | tr '\n' '|')"
	fi
}

# no_dropin UNIT: no heapctl drop-in exists for UNIT
no_dropin() { [ ! -e "$CT/etc/systemd/system/$1.d/50-heapctl.conf" ]; }

# ---- 1. installed like a package ------------------------------------------------

for f in bin/heapctl lib/libheapctl.so lib/libheapctl-secure.so include/heapctl.h \
    lib/libheapctl-report.so lib/libheapctl-serve.so lib/systemd/system/heapctl-serve.service \
    share/man/man1/heapctl.1 share/man/man3/libheapctl.3 share/man/man5/heapctl-shm.5 \
    share/doc/heapctl/examples/50-heapctl.conf; do
	[ -f "$CT/usr/local/$f" ] || fail "install: /usr/local/$f missing in the container"
done
grep -q 'LD_PRELOAD=/usr/local/lib/libheapctl.so' "$CT/usr/local/share/doc/heapctl/examples/50-heapctl.conf" ||
    fail "install: the example drop-in does not name /usr/local/lib/libheapctl.so"
ct "$HC" --version >"$WORK/version" 2>&1 || fail "install: heapctl --version inside: $(cat "$WORK/version")"

# ---- 2. redis-server.service, as Debian ships it ----------------------------------------

note "redis: enable without restart, doctor"
if ! ct "$HC" systemd enable redis-server --conf lg_prof_sample:10 >"$WORK/redis.enable" 2>&1; then
	fail "redis: heapctl systemd enable: $(cat "$WORK/redis.enable")"
fi
grep -qx 'ExecPaths=/usr/local/lib' "$CT/etc/systemd/system/redis-server.service.d/50-heapctl.conf" ||
    fail "redis: the drop-in has no ExecPaths=/usr/local/lib (redis-server.service has NoExecPaths=/)"
grep -q 'restart the service' "$WORK/redis.enable" || fail "redis: enable did not say to restart: $(cat "$WORK/redis.enable")"
ct "$HC" doctor redis-server >"$WORK/redis.doctor1" 2>&1
st=$?
[ "$st" -eq 4 ] && grep -q 'written after the main process started' "$WORK/redis.doctor1" ||
    fail "redis: doctor before the restart: exit $st: $(tr '\n' '|' <"$WORK/redis.doctor1")"
ct systemctl restart redis-server || fail "redis: systemctl restart failed"
sleep 1
ct "$HC" doctor redis-server >"$WORK/redis.doctor2" 2>&1 ||
    fail "redis: doctor after the restart: exit $?: $(tr '\n' '|' <"$WORK/redis.doctor2")"
rp=$(sd_host_pid "$(mainpid redis-server)")
[ -n "$rp" ] && carries "$rp" || fail "redis: the new main process (host $rp) does not carry libheapctl.so"
[ "$(ct redis-cli ping 2>&1)" = PONG ] || fail "redis: redis-cli ping does not answer PONG"
for i in $(seq 3000); do printf 'SET key:%d %0200d\r\n' "$i" "$i"; done | ct_t 60 redis-cli --pipe >"$WORK/redis.pipe" 2>&1 ||
    fail "redis: redis-cli --pipe: $(tail -2 "$WORK/redis.pipe")"
[ "$(ct redis-cli get key:1234 2>&1)" = "$(printf '%0200d' 1234)" ] || fail "redis: GET does not return what SET stored"
ct "$HC" systemd status >"$WORK/status" 2>&1
grep -qE '^redis-server\.service +active +[0-9]+ +loaded \(1 of 1\)' "$WORK/status" ||
    fail "redis: systemd status: $(tr '\n' '|' <"$WORK/status")"
if [ -n "$rp" ] && path=$(host_dump "$rp" redis); then
	ct test -f "/var/lib/heapctl/redis-server/$(basename "$path")" ||
	    fail "redis: the dump is not in /var/lib/heapctl/redis-server inside: $path"
	report_names "$WORK/redis.heap" "$rp" redis 'zmalloc|createStringObject|sdsnew|dictAdd|redis' /usr/bin/redis-server
fi
# ---- 2b. the daemon as a unit, scraping the hardened redis ----------------------------
# heapctl-serve.service as make install put it, under the container's
# systemd with its own hardening; the container has a network of its own,
# so the requests go from inside, through bash's /dev/tcp.

# ct_http PATH: GET http://127.0.0.1:9447PATH inside; the response, headers first
ct_http() {
	ct_t 120 bash -c 'exec 3<>/dev/tcp/127.0.0.1/9447 || exit 1
printf "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" "$1" >&3; cat <&3' _ "$1"
}

note "heapctl-serve.service: the daemon under systemd, scraping redis"
if [ ! -f "$CT/usr/local/lib/systemd/system/heapctl-serve.service" ]; then
	fail "install: /usr/local/lib/systemd/system/heapctl-serve.service missing"
elif ! ct systemctl daemon-reload || ! ct systemctl start heapctl-serve; then
	fail "serve: systemctl start heapctl-serve: $(ct systemctl status heapctl-serve 2>&1 | tail -5 | tr '\n' '|')"
else
	rcp=$(mainpid redis-server)
	got=""
	for _ in $(seq 50); do
		got=$(ct_http /metrics 2>/dev/null) && [[ $got == *"heapctl_allocated_bytes{pid=\"$rcp\""* ]] && break
		sleep 0.2
	done
	[[ $got == *"heapctl_allocated_bytes{pid=\"$rcp\",command=\""*'",unit="redis-server.service",user="redis"} '* ]] ||
	    fail "serve: /metrics has no line for redis ($rcp) with its unit: $(head -c 800 <<<"$got" | tr '\n' '|')"
	top=$(ct_http "/debug/pprof/heap?pid=$rcp&debug=1")
	{ [[ $top == "HTTP/1."?" 200"* ]] && grep -qE 'zmalloc|createStringObject|sdsnew|dictAdd' <<<"$top"; } ||
	    fail "serve: /debug/pprof/heap?debug=1 for redis: $(head -c 800 <<<"$top" | tr '\n' '|')"
	ct_http "/debug/pprof/heap?pid=$rcp" >"$WORK/serve.pprof.http" 2>&1
	head -c 12 "$WORK/serve.pprof.http" | grep -q '^HTTP/1.. 200' && [ "$(wc -c <"$WORK/serve.pprof.http")" -gt 500 ] ||
	    fail "serve: /debug/pprof/heap for redis: $(head -c 300 "$WORK/serve.pprof.http" | tr '\n' '|')"
	# a dump of redis's lands in the archive, under its unit
	ct "$HC" dump "$rcp" >"$WORK/serve.dump" 2>&1 || fail "serve: heapctl dump $rcp inside: $(cat "$WORK/serve.dump")"
	for _ in $(seq 50); do
		ls "$CT"/var/lib/heapctl/archive/redis-server.service/*.manual.pb.gz >/dev/null 2>&1 && break
		sleep 0.2
	done
	ls "$CT"/var/lib/heapctl/archive/redis-server.service/*.manual.heap >/dev/null 2>&1 ||
	    fail "serve: no archived redis dump: $(ls -R "$CT/var/lib/heapctl/archive" 2>&1 | tr '\n' ' ')"
	ls "$CT"/var/lib/heapctl/archive/redis-server.service/*.manual.pb.gz >/dev/null 2>&1 ||
	    fail "serve: no pprof beside the archived redis dump: $(ct journalctl -u heapctl-serve --no-pager 2>&1 | tail -5 | tr '\n' '|')"
	[ "$(ct systemctl is-active heapctl-serve)" = active ] || fail "serve: the daemon is not active after all that"
	if ct journalctl -u heapctl-serve --no-pager 2>&1 | grep -qiE 'SIGSYS|core-dump|not archived|no pprof'; then
		fail "serve: its journal: $(ct journalctl -u heapctl-serve --no-pager | tail -5 | tr '\n' '|')"
	fi
	ct systemctl stop heapctl-serve
fi

note "redis: disable"
ct "$HC" systemd disable redis-server --restart >"$WORK/redis.disable" 2>&1 ||
    fail "redis: disable: $(cat "$WORK/redis.disable")"
no_dropin redis-server.service || fail "redis: the drop-in is still there after disable"
sleep 1
rp=$(sd_host_pid "$(mainpid redis-server)")
[ -n "$rp" ] && ! carries "$rp" || fail "redis: after disable the main process (host $rp) still carries the library"
[ "$(ct redis-cli ping 2>&1)" = PONG ] || fail "redis: redis-cli ping after disable"

# ---- 3. postgresql@15-main.service (pg_ctlcluster resets the environment) -------------

note "postgres: enable --restart"
ct_t 120 "$HC" systemd enable postgresql@15-main --restart --conf lg_prof_sample:12 >"$WORK/pg.enable" 2>&1 ||
    fail "postgres: enable: $(cat "$WORK/pg.enable")"
grep -qE 'main process [0-9]+ runs with libheapctl.so \(([0-9]+) of the unit.s \1 processes\)' "$WORK/pg.enable" ||
    fail "postgres: not every process of the unit carries the library: $(tr '\n' '|' <"$WORK/pg.enable")"
grep -q "^LD_PRELOAD = '/usr/local/lib/libheapctl.so'$" "$CT/etc/postgresql/15/main/environment" ||
    fail "postgres: no LD_PRELOAD line in /etc/postgresql/15/main/environment"
ct runuser -u postgres -- psql -tAc 'select 40 + 2' >"$WORK/psql" 2>&1
[ "$(cat "$WORK/psql")" = 42 ] || fail "postgres: psql: $(cat "$WORK/psql")"
ct runuser -u postgres -- psql -qc 'create table t as select g, repeat($$x$$, 100) s from generate_series(1, 20000) g' \
    >"$WORK/psql2" 2>&1 || fail "postgres: create table: $(cat "$WORK/psql2")"
pp=$(sd_host_pid "$(mainpid postgresql@15-main)")
if [ -n "$pp" ] && carries "$pp" && host_dump "$pp" pg >/dev/null; then
	report_names "$WORK/pg.heap" "$pp" pg 'AllocSet|palloc|PostmasterMain|MemoryContext|postgres' \
	    /usr/lib/postgresql/15/bin/postgres
	[ -d "$CT/var/lib/heapctl/postgresql@15-main" ] &&
	    [ "$(stat -c %U "$CT/var/lib/heapctl/postgresql@15-main")" = "$(stat -c %U "$CT/var/lib/postgresql/15/main")" ] ||
	    fail "postgres: /var/lib/heapctl/postgresql@15-main is missing or not the cluster owner's"
else
	fail "postgres: the postmaster (host $pp) does not carry the library"
fi
note "postgres: disable --restart"
ct_t 120 "$HC" systemd disable postgresql@15-main --restart >"$WORK/pg.disable" 2>&1 ||
    fail "postgres: disable: $(cat "$WORK/pg.disable")"
cmp -s "$CT/etc/postgresql/15/main/environment" "$SD_ROOTFS/etc/postgresql/15/main/environment" ||
    fail "postgres: the environment file is not as the package shipped it: $(diff "$SD_ROOTFS/etc/postgresql/15/main/environment" "$CT/etc/postgresql/15/main/environment" | tr '\n' '|')"
sleep 1
for p in $(ct pgrep -x postgres); do
	hp=$(sd_host_pid "$p")
	[ -n "$hp" ] && carries "$hp" && { fail "postgres: after disable, postgres $p still carries the library"; break; }
done

# ---- 4. every hardening option, enabled with the command ----------------------------------

note "hardened unit: enable --restart"
cat >"$CT/etc/systemd/system/hc-hard.service" <<EOF
[Service]
ExecStart=$LIBEXEC/service seconds=600
DynamicUser=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
NoNewPrivileges=yes
MemoryDenyWriteExecute=yes
RestrictNamespaces=yes
SystemCallFilter=@system-service
ProtectProc=invisible
RestrictAddressFamilies=AF_UNIX AF_INET
LockPersonality=yes
ProtectKernelTunables=yes
CapabilityBoundingSet=
NoExecPaths=/
ExecPaths=/usr/bin /usr/lib /lib $LIBEXEC
EOF
ct systemctl daemon-reload
ct systemctl start hc-hard || fail "hardened: the unit does not start without heapctl"
ct "$HC" systemd enable hc-hard --restart >"$WORK/hard.enable" 2>&1 ||
    fail "hardened: enable --restart: $(cat "$WORK/hard.enable")"
mp=$(mainpid hc-hard)
hp=$(sd_host_pid "$mp")
if [ -n "$hp" ] && carries "$hp"; then
	"$H" on "$hp" >/dev/null 2>&1 || fail "hardened: heapctl on $hp from the host"
	sleep 1.5
	# the service keeps little: this early a dump may hold no live sampled
	# object, or only main's own array of kept blocks, so dump again (a
	# second apart) until one holds the service's functions
	path=
	for _ in $(seq 10); do
		path=$(host_dump "$hp" hard) || break
		"$H" report "$WORK/hard.heap" -p "$hp" --top 0 2>/dev/null | grep -qE 'svc_keep|svc_churn|svc_worker' && break
		sleep 1
	done
	if [ -n "$path" ]; then
		report_names "$WORK/hard.heap" "$hp" hard 'svc_keep|svc_churn|svc_worker' "$LIBEXEC/service"
		[ -n "$(ls "$CT/var/lib/private/heapctl/hc-hard/" 2>/dev/null)" ] ||
		    fail "hardened: no dump in /var/lib/private/heapctl/hc-hard (the dynamic user's StateDirectory)"
		[ -e "$path" ] && [[ $path != /proc/* ]] ||
		    note "hardened: dump path $path (through /proc: the host path is not the same file)"
	fi
else
	fail "hardened: the main process ($mp, host $hp) does not carry the library: $(tr '\n' '|' <"$WORK/hard.enable") unit: $(unit_state hc-hard)"
fi
ct "$HC" systemd disable hc-hard --restart >/dev/null 2>&1 || fail "hardened: disable"
no_dropin hc-hard.service || fail "hardened: the drop-in is still there after disable"

# ---- 5. a template with two instances ---------------------------------------------------

note "template: enable test@.service --restart"
printf '[Service]\nExecStart=/usr/bin/sleep 1000\n' >"$CT/etc/systemd/system/hctest@.service"
ct systemctl daemon-reload
ct systemctl start hctest@a hctest@b || fail "template: instances do not start"
ct "$HC" systemd enable hctest@.service --restart >"$WORK/tmpl.enable" 2>&1 ||
    fail "template: enable --restart: $(cat "$WORK/tmpl.enable")"
for i in a b; do
	hp=$(sd_host_pid "$(mainpid "hctest@$i")")
	[ -n "$hp" ] && carries "$hp" || fail "template: hctest@$i (host $hp) does not carry the library"
done
ct "$HC" systemd status >"$WORK/tmpl.status" 2>&1
[ "$(grep -cE '^hctest@[ab]\.service +active +[0-9]+ +loaded' "$WORK/tmpl.status")" = 2 ] ||
    fail "template: status does not list both instances as loaded: $(tr '\n' '|' <"$WORK/tmpl.status")"
ct "$HC" systemd disable hctest@.service >/dev/null 2>&1 || fail "template: disable"
no_dropin hctest@.service || fail "template: the drop-in is still there after disable"

# ---- 6. a user's unit -------------------------------------------------------------------

note "user unit: enable --user --restart"
ct useradd -m tester && ct loginctl enable-linger tester || fail "user: cannot make a lingering user"
for _ in $(seq 50); do [ "$(ct systemctl is-active user@1000.service)" = active ] && break; sleep 0.2; done
mkdir -p "$CT/home/tester/.config/systemd/user"
printf '[Service]\nExecStart=/usr/bin/sleep 1000\n' >"$CT/home/tester/.config/systemd/user/grow.service"
ct chown -R tester: /home/tester/.config
asuser() { ct runuser -u tester -- env XDG_RUNTIME_DIR=/run/user/1000 HOME=/home/tester "$@"; }
asuser systemctl --user daemon-reload
asuser systemctl --user start grow || fail "user: grow.service does not start"
asuser "$HC" systemd enable grow --user --restart >"$WORK/user.enable" 2>&1 ||
    fail "user: enable --user --restart: $(cat "$WORK/user.enable")"
asuser "$HC" dump --json >"$WORK/user.dump" 2>&1
[[ "$(jget path <"$WORK/user.dump")" == /home/tester/.local/state/heapctl/grow.* ]] ||
    fail "user: the dump is not in ~/.local/state/heapctl: $(cat "$WORK/user.dump")"
asuser "$HC" systemd disable grow --user --restart >/dev/null 2>&1 || fail "user: disable"
[ ! -e "$CT/home/tester/.config/systemd/user/grow.service.d/50-heapctl.conf" ] ||
    fail "user: the drop-in is still there after disable"

# ---- 7. what is refused -----------------------------------------------------------------

note "refusals"
mkdir -p "$CT/etc/default"
echo 'LD_PRELOAD=/usr/lib/other.so' >"$CT/etc/default/hc-envfile"
unit() { printf '[Service]\nExecStart=%s\n%s\n' "$2" "${3:-}" >"$CT/etc/systemd/system/$1.service"; }
unit hc-static "$LIBEXEC/static-sleep"
unit hc-inacc /usr/bin/sleep\ 1000 InaccessiblePaths=/usr/local/lib
unit hc-envfile /usr/bin/sleep\ 1000 EnvironmentFile=/etc/default/hc-envfile
unit hc-envi "/usr/bin/env -i /usr/bin/sleep 1000"
unit hc-ptmp /usr/bin/sleep\ 1000 PrivateTmp=yes
unit hc-dyn /usr/bin/sleep\ 1000 DynamicUser=yes
unit hc-plain /usr/bin/sleep\ 1000
ct systemctl daemon-reload
# refuse UNIT EXIT WANT [OPTIONS...]
refuse() {
	local u=$1 want_exit=$2 want=$3
	shift 3
	ct "$HC" systemd enable "$u" "$@" >"$WORK/refuse.$u" 2>&1
	local st=$?
	[ "$st" -eq "$want_exit" ] && grep -q "$want" "$WORK/refuse.$u" ||
	    fail "refusal $u: exit $st (expected $want_exit), expected '$want': $(cat "$WORK/refuse.$u")"
	no_dropin "$u.service" || fail "refusal $u: a drop-in was written anyway"
}
refuse hc-static 1 'statically linked'
refuse hc-inacc 1 'InaccessiblePaths=/usr/local/lib hides'
refuse hc-envfile 1 'EnvironmentFile /etc/default/hc-envfile sets LD_PRELOAD'
refuse hc-envi 1 'with an environment of its own'
refuse hc-ptmp 1 'PrivateTmp=' --dump-dir /tmp/dumps
refuse hc-dyn 1 'dynamic user' --dump-dir /srv/dumps
refuse hc-plain 2 'bogus' --conf bogus:1

# ---- 8. heapctl run --------------------------------------------------------------------------

ct_t 30 sh -c "$HC run -- /usr/bin/sleep 5 & p=\$!; sleep 1;
    grep -q 'r-xp .*libheapctl.so' /proc/\$p/maps && echo mapped;
    $HC list | grep -q '/usr/bin/sleep 5' && echo listed; wait" >"$WORK/run.out" 2>&1
[ "$(tr '\n' ' ' <"$WORK/run.out")" = "mapped listed " ] || fail "run: $(tr '\n' '|' <"$WORK/run.out")"

# ---- 1 again: uninstall --------------------------------------------------------------------

make -s -C "$SD_REPO" uninstall DESTDIR="$CT" PREFIX=/usr/local BUILD="$BUILD" >"$WORK/uninstall.log" 2>&1 ||
    fail "make uninstall: $(cat "$WORK/uninstall.log")"
left=$(cd "$CT/usr/local" && find . -type f -not -path "./libexec/heapctl-test/*" | grep -E 'heapctl' || true)
[ -z "$left" ] || fail "make uninstall left: $left"

note "done"
sd_teardown
finish
