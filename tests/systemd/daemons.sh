#!/usr/bin/env bash
# tests/systemd/daemons.sh BUILD - `heapctl systemd enable`, `doctor UNIT`
# and `systemd status` on Debian's own daemons as the packages ship them
# (issue 36), under a real systemd booted in a container (tests/lib/systemd.sh), one boot
# for all of it.
#
# nginx (a root master, www-data workers), memcached (-u memcache: the one
# process drops privileges), haproxy (a master and a worker that chroots
# to /var/lib/haproxy and runs as haproxy), redis-server and
# postgresql@15-main: each is enabled with --restart, put under load, and
# dumped from the host with `heapctl dump -p PID` and no option, for its
# main process and for a worker (another process of its cgroup, running as
# the service's user), and with --fetch, -o FILE and -o -: the printed path
# opens for the caller and `heapctl report` of each dump names the program's
# functions.  Then restarted and dumped again, and `disable --restart`
# leaves the unit byte for byte as it was (systemctl cat).
#
# Then what issue 36 found wrong, each with its unit:
#   - a unit whose ConditionCapability= (chrony's) or ConditionPathExists=
#     is not met: enable --restart says so, not "did not come back", and
#     leaves no drop-in (--keep keeps it); a unit that exits by itself
#     (status 0), one that fails without the library too, and one that
#     fails only with it, are told apart;
#   - postgresql.service, the /bin/true umbrella: refused, naming
#     postgresql@15-main.service;
#   - a unit already running the library from its drop-in: "already
#     loaded", exit 0, not restarted;
#   - doctor UNIT and systemd status look at every process of the unit;
#   - the shapes of classic C daemons, units of our own running
#     tests/programs/daemon_shapes.c: a Type=forking daemon with PIDFile= whose
#     grandchild of a double fork only sleeps; a root master whose
#     pre-forked workers switch to nobody and sleep, one of them chrooted
#     into an empty directory with RLIMIT_NPROC 0; a process that
#     LimitNPROC=1 leaves with no control thread, which allocates.  Each
#     process answers heapctl status within 5 s, takes `set`, and is dumped
#     with no option and reported; doctor and systemd status count them.
#
# Every failure prints heapctl's output and the unit's last journal lines.
source "$(dirname "$0")/../lib/systemd.sh" || exit 2
sd_setup daemons "$@"

H=$BUILD/heapctl
HC=/usr/local/bin/heapctl
LIBEXEC=/usr/local/libexec/heapctl-test

# the daemon shapes' program, built on the host (bookworm's glibc is the host's)
gcc -O1 -g -fno-omit-frame-pointer -fno-inline -o "$WORK/shapes" "$SD_REPO/tests/programs/daemon_shapes.c" \
    2>"$WORK/cc.log" || die "cannot compile shapes.c: $(head -3 "$WORK/cc.log")"

sd_rootfs
sd_boot
sd_install
CT=$(ct_root)
install -D -m 0755 "$WORK/shapes" "$CT$LIBEXEC/shapes" || die "cannot copy the shapes program in"

# ---- helpers -------------------------------------------------------------------

mainpid() { ct systemctl show -p MainPID --value "$1"; }

# carries HOSTPID: libheapctl mapped executable in the process
carries() { grep -qE ' r-xp .*/libheapctl[^/]*\.so' "/proc/$1/maps" 2>/dev/null; }

# journal UNIT: its last lines, on one line, for a failure message
journal() { ct journalctl -u "$1" -n 12 --no-pager -o cat 2>&1 | tr '\n' '|'; }

# flat FILE: a file's text on one line
flat() { tr '\n' '|' <"$1"; }

# jget KEY: a field of the JSON object on stdin
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1" 2>/dev/null; }

# cgroup_pids HOSTPID: the host PIDs of every process in HOSTPID's cgroup
# (the unified hierarchy, at /sys/fs/cgroup or, on a hybrid host, at
# /sys/fs/cgroup/unified; or the name=systemd one).  On a hybrid host the
# path is the container's own, which another container booted meanwhile
# (another test) has too: only this container's processes count.
cgroup_pids() {
	local cg sd ns p
	cg=$(sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null)
	sd=$(sed -n 's/^[0-9]*:name=systemd://p' "/proc/$1/cgroup" 2>/dev/null)
	ns=$(readlink "/proc/$SD_LEADER/ns/pid")
	for p in $(cat "/sys/fs/cgroup$cg/cgroup.procs" 2>/dev/null ||
	    cat "/sys/fs/cgroup/unified$cg/cgroup.procs" 2>/dev/null ||
	    cat "/sys/fs/cgroup/systemd$sd/cgroup.procs" 2>/dev/null); do
		[ "$(readlink "/proc/$p/ns/pid" 2>/dev/null)" = "$ns" ] && echo "$p"
	done
}

# euid HOSTPID: the effective uid of a process
euid() { awk '/^Uid:/ { print $3 }' "/proc/$1/status" 2>/dev/null; }

# worker HOSTPID USER: a process of HOSTPID's cgroup other than HOSTPID
# that runs as USER (of the container), the first in the cgroup's order
worker() {
	local uid p
	uid=$(ct id -u "$2") || return 0
	for p in $(cgroup_pids "$1"); do
		[ "$p" != "$1" ] && [ "$(euid "$p")" = "$uid" ] && { echo "$p"; return 0; }
	done
	return 0
}

# check_report DUMP HOSTPID TAG ERE: heapctl report of DUMP names a
# function matching ERE
check_report() {
	if ! "$H" report "$1" -p "$2" --top 0 >"$WORK/$3.report" 2>"$WORK/$3.report.err"; then
		fail "$3: heapctl report $1 -p $2: $(flat "$WORK/$3.report.err")"
	elif ! grep -qE "$4" "$WORK/$3.report"; then
		fail "$3: heapctl report of $1 names nothing like /$4/: $(head -12 "$WORK/$3.report" | tr '\n' '|')"
	fi
}

# dumps UNIT HOSTPID TAG ERE: heapctl dump -p HOSTPID with no option (the
# printed path opens for us), --fetch, -o FILE and -o -, each reported
dumps() {
	local unit=$1 hp=$2 tag=$3 ere=$4 out path st
	out=$("$H" dump -p "$hp" 2>"$WORK/$tag.dump.err")
	st=$?
	if [ "$st" -ne 0 ]; then
		fail "$tag: heapctl dump -p $hp: exit $st: $(flat "$WORK/$tag.dump.err") (journal: $(journal "$unit"))"
	else
		path=${out%%$'\n'*}
		if [ -r "$path" ] && cp "$path" "$WORK/$tag.heap" 2>/dev/null; then
			check_report "$WORK/$tag.heap" "$hp" "$tag" "$ere"
		else
			fail "$tag: heapctl dump -p $hp printed '$path', which the caller cannot open"
		fi
	fi
	mkdir -p "$WORK/fetch.$tag"
	if ! out=$(cd "$WORK/fetch.$tag" && "$H" dump -p "$hp" --fetch 2>"$WORK/$tag.fetch.err"); then
		fail "$tag: heapctl dump -p $hp --fetch: $(flat "$WORK/$tag.fetch.err")"
	else
		path=${out%%$'\n'*}
		[[ $path == /* ]] || path=$WORK/fetch.$tag/$path
		if [ -r "$path" ]; then
			check_report "$path" "$hp" "$tag.fetch" "$ere"
		else
			fail "$tag: heapctl dump -p $hp --fetch printed '$out', which the caller cannot open"
		fi
	fi
	if ! "$H" dump -p "$hp" -o "$WORK/$tag.o.heap" >"$WORK/$tag.o.out" 2>&1; then
		fail "$tag: heapctl dump -p $hp -o FILE: $(flat "$WORK/$tag.o.out")"
	else
		check_report "$WORK/$tag.o.heap" "$hp" "$tag.o" "$ere"
	fi
	if ! "$H" dump -p "$hp" -o - >"$WORK/$tag.stdout.heap" 2>"$WORK/$tag.stdout.err"; then
		fail "$tag: heapctl dump -p $hp -o -: $(flat "$WORK/$tag.stdout.err")"
	elif [ "$(head -c 8 "$WORK/$tag.stdout.heap")" != heap_v2/ ]; then
		fail "$tag: heapctl dump -p $hp -o - wrote no heap profile: $(head -c 200 "$WORK/$tag.stdout.heap" | tr '\n' '|')"
	else
		check_report "$WORK/$tag.stdout.heap" "$hp" "$tag.stdout" "$ere"
	fi
}

# http PORT N: N requests GET / to 127.0.0.1:PORT inside; how many got 200
http() {
	ct_t 120 bash -c 'ok=0; for ((i = 0; i < $2; i++)); do
		exec 3<>/dev/tcp/127.0.0.1/$1 || continue
		printf "GET /?n=%d HTTP/1.0\r\nHost: localhost\r\nUser-Agent: heapctl-test-%d\r\n\r\n" $i $i >&3
		head -1 <&3 | grep -q " 200 " && ok=$((ok + 1))
		exec 3>&-
	done; echo $ok' _ "$1" "$2"
}

# ---- the daemons, as shipped ----------------------------------------------------

# haproxy ships with no frontend: one in front of nginx
cat >>"$CT/etc/haproxy/haproxy.cfg" <<'EOF'

frontend hc_front
	bind 127.0.0.1:8080
	default_backend hc_nginx

backend hc_nginx
	server nginx 127.0.0.1:80
EOF
ct systemctl restart haproxy || fail "haproxy: does not restart with a frontend: $(journal haproxy)"

load_nginx() {
	local ok
	ok=$(http 80 300)
	[ "$ok" = 300 ] || fail "nginx: $ok of 300 requests answered 200 (journal: $(journal nginx))"
}
load_haproxy() {
	local ok
	ok=$(http 8080 300)
	[ "$ok" = 300 ] || fail "haproxy: $ok of 300 requests through it answered 200 (journal: $(journal haproxy))"
}
load_memcached() {
	# Type=simple: started is not yet listening
	ct_t 60 bash -c 'for ((i = 0; i < 50; i++)); do exec 3<>/dev/tcp/127.0.0.1/11211 && break; sleep 0.1; done 2>/dev/null
		[ -e /dev/fd/3 ] || exit 1
		for ((i = 0; i < 2000; i++)); do printf "set key%d 0 0 %d\r\n%0*d\r\n" $i 100 100 $i >&3; done
		printf "get key1234\r\nquit\r\n" >&3; cat <&3' >"$WORK/memcached.load" 2>&1
	[ "$(grep -c '^STORED' "$WORK/memcached.load")" = 2000 ] && grep -q "^$(printf '%0100d' 1234)" "$WORK/memcached.load" ||
	    fail "memcached: 2000 sets and a get: $(tail -3 "$WORK/memcached.load" | tr '\n' '|') (journal: $(journal memcached))"
}
load_redis() {
	ct_t 120 redis-benchmark -q -n 50000 -r 100000 -d 100 -t set,lpush,sadd >"$WORK/redis.load" 2>&1 ||
	    fail "redis: redis-benchmark: $(tail -3 "$WORK/redis.load" | tr '\n' '|')"
}
load_pg() {
	ct runuser -u postgres -- psql -qc 'create temporary table t as select g, repeat($$x$$, 200) s from generate_series(1, 20000) g; create index on t (s)' \
	    >"$WORK/pg.load" 2>&1 || fail "postgres: psql: $(flat "$WORK/pg.load")"
}

# daemon UNIT TAG USER ERE: the whole round for one daemon
daemon() {
	local unit=$1 tag=$2 user=$3 ere=$4 hp wp
	note "$unit: enable --restart, load, dumps"
	ct systemctl cat "$unit" >"$WORK/$tag.cat.before" 2>&1
	if ! ct_t 120 "$HC" systemd enable "$unit" --restart $CONF >"$WORK/$tag.enable" 2>&1; then
		fail "$unit: enable --restart: $(flat "$WORK/$tag.enable") (journal: $(journal "$unit"))"
		return
	fi
	"load_$tag"
	hp=$(sd_host_pid "$(mainpid "$unit")")
	if [ -z "$hp" ] || ! carries "$hp"; then
		fail "$unit: the main process (host ${hp:-none}) does not carry the library: $(flat "$WORK/$tag.enable")"
		return
	fi
	dumps "$unit" "$hp" "$tag.main" "$ere"
	wp=$(worker "$hp" "$user")
	if [ "$tag" = memcached ] || [ "$tag" = redis ]; then
		# one process: the main one is the one that runs as the user
		[ "$(euid "$hp")" = "$(ct id -u "$user")" ] ||
		    fail "$unit: the main process (host $hp) does not run as $user"
	elif [ -z "$wp" ]; then
		fail "$unit: no process of the unit other than the main one runs as $user: $(for p in $(cgroup_pids "$hp"); do echo "$p uid $(euid "$p")"; done | tr '\n' ' ')"
	else
		carries "$wp" || fail "$unit: the worker (host $wp) does not carry the library"
		dumps "$unit" "$wp" "$tag.worker" "$ere"
	fi

	note "$unit: restart, dump again"
	ct_t 120 systemctl restart "$unit" || fail "$unit: systemctl restart: $(journal "$unit")"
	"load_$tag"
	hp=$(sd_host_pid "$(mainpid "$unit")")
	if [ -n "$hp" ] && carries "$hp"; then
		local out path
		if ! out=$("$H" dump -p "$hp" 2>"$WORK/$tag.again.err"); then
			fail "$unit: after the restart, heapctl dump -p $hp: $(flat "$WORK/$tag.again.err")"
		elif path=${out%%$'\n'*} && [ -r "$path" ]; then
			check_report "$path" "$hp" "$tag.again" "$ere"
		else
			fail "$unit: after the restart, heapctl dump -p $hp printed '$out', which the caller cannot open"
		fi
	else
		fail "$unit: after the restart the main process (host ${hp:-none}) does not carry the library"
	fi
}

# undo UNIT TAG: disable --restart; the unit is as it was
undo() {
	local unit=$1 tag=$2 hp
	ct_t 120 "$HC" systemd disable "$unit" --restart >"$WORK/$tag.disable" 2>&1 ||
	    fail "$unit: disable --restart: $(flat "$WORK/$tag.disable")"
	ct systemctl cat "$unit" >"$WORK/$tag.cat.after" 2>&1
	cmp -s "$WORK/$tag.cat.before" "$WORK/$tag.cat.after" ||
	    fail "$unit: after disable, systemctl cat differs: $(diff "$WORK/$tag.cat.before" "$WORK/$tag.cat.after" | tr '\n' '|')"
	if [ "$tag" = pg ]; then
		cmp -s "$CT/etc/postgresql/15/main/environment" "$SD_ROOTFS/etc/postgresql/15/main/environment" ||
		    fail "$unit: after disable the cluster's environment file is not as shipped: $(diff "$SD_ROOTFS/etc/postgresql/15/main/environment" "$CT/etc/postgresql/15/main/environment" | tr '\n' '|')"
	fi
	[ ! -e "$CT/etc/systemd/system/$unit.service.d" ] ||
	    fail "$unit: /etc/systemd/system/$unit.service.d is still there: $(ls "$CT/etc/systemd/system/$unit.service.d")"
	sleep 0.5
	hp=$(sd_host_pid "$(mainpid "$unit")")
	[ -n "$hp" ] && ! carries "$hp" || fail "$unit: after disable --restart the main process (host ${hp:-none}) carries the library"
}

# a sample every 4 KiB on average: a postmaster or an haproxy master holds
# only a MiB or two, which at the default 512 KiB may be no sample at all
CONF="--conf lg_prof_sample:12"
daemon nginx nginx www-data 'ngx_'
daemon memcached memcached memcache 'memcached'
daemon haproxy haproxy haproxy 'ring_new|sink_|pool_|trash_|hlua_|sess_|stream_|cfg_|init_|listener'
daemon redis-server redis redis 'sdsnew|createObject|dictAdd|lpInsert|_sdsnewlen'
daemon postgresql@15-main pg postgres 'AllocSet|palloc|MemoryContext|PostmasterMain|PostgresMain|sub_[0-9a-f]+@postgres'

# ---- a unit already running the library from its drop-in -----------------------

note "nginx: enable again: already loaded"
before=$(mainpid nginx)
ct_t 120 "$HC" systemd enable nginx --restart $CONF >"$WORK/nginx.again" 2>&1
st=$?
[ "$st" -eq 0 ] && grep -q 'already loaded' "$WORK/nginx.again" ||
    fail "nginx: enable --restart of a unit that runs the library from it: exit $st: $(flat "$WORK/nginx.again")"
grep -q 'restart the service' "$WORK/nginx.again" && fail "nginx: enable again says to restart: $(flat "$WORK/nginx.again")"
[ "$(mainpid nginx)" = "$before" ] || fail "nginx: enable again restarted it (main $before, now $(mainpid nginx))"

# ---- doctor UNIT and systemd status: every process -------------------------------

# every_process UNIT TAG USERS: doctor UNIT examines each process of the
# unit (USERS: their users, sorted), systemd status counts them truly.  A
# unit whose processes changed while it was being looked at (postgres
# starts autovacuum workers when it likes) is looked at again, up to four
# times; what failed on a try when they changed is not counted.
every_process() {
	local unit=$1 hp try f
	hp=$(sd_host_pid "$(mainpid "$unit")")
	for try in 1 2 3 4; do
		EP_FAILS=() EP_SEEN=()
		EP_SEEN+=("$(unit_nspids "$hp")")
		every_process_once "$hp" "$@"
		EP_SEEN+=("$(unit_nspids "$hp")")
		if [ "${#EP_FAILS[@]}" -gt 0 ] && [ "$(printf '%s\n' "${EP_SEEN[@]}" | sort -u | wc -l)" -gt 1 ] &&
		    [ "$try" -lt 4 ]; then
			note "$unit: its processes changed while it was looked at ($(printf '%s\n' "${EP_SEEN[@]}" | sort -u | sed 's/ *$//' | paste -sd '|')); again"
			sleep 2
			continue
		fi
		break
	done
	for f in "${EP_FAILS[@]}"; do fail "$f"; done
}

# unit_nspids HOSTPID: the pids, as the container numbers them, of the
# processes of HOSTPID's unit, sorted, on one line
unit_nspids() {
	local p
	for p in $(cgroup_pids "$1"); do
		awk '/^NSpid:/ { print $NF }' "/proc/$p/status" 2>/dev/null
	done | sort -n | tr '\n' ' '
}

# ep_fail <message>: a failure of every_process_once, counted once its
# try stands; EP_SEEN: the unit's pids as each look saw them, one line of
# them per look (the try stands if every line is the same)
ep_fail() { EP_FAILS+=("$*"); }

every_process_once() {
	local hp=$1 unit=$2 tag=$3 users=$4 want got carriers answering p
	ct "$HC" doctor "$unit" --json >"$WORK/$tag.doctor.json" 2>"$WORK/$tag.doctor.err"
	ct "$HC" doctor "$unit" >"$WORK/$tag.doctor" 2>&1
	want=$(cgroup_pids "$hp" | wc -l)
	EP_SEEN+=("$(unit_nspids "$hp")"
	    "$(python3 -c 'import json,sys
print(" ".join(str(p["pid"]) for p in sorted(json.load(open(sys.argv[1]))["processes"], key=lambda p: p["pid"])))' \
	    "$WORK/$tag.doctor.json" 2>/dev/null) ")
	# pid, user and command of each process, and findings for each
	got=$(python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
ps = d["processes"]
assert all(p["user"] and p["command"] and p["findings"] for p in ps), ps
print(len(ps), " ".join(sorted(set(p["user"] for p in ps))))' "$WORK/$tag.doctor.json" 2>&1)
	[ "${got%% *}" = "$want" ] ||
	    ep_fail "$unit: doctor --json examined '${got}' processes, the unit has $want: $(flat "$WORK/$tag.doctor.err")"
	[ "${got#* }" = "$users" ] || ep_fail "$unit: doctor names the users '${got#* }', not '$users'"
	[ "$(grep -c '^process [0-9]* (' "$WORK/$tag.doctor")" = "$want" ] ||
	    ep_fail "$unit: doctor's text does not list its $want processes: $(flat "$WORK/$tag.doctor")"
	# status counts what is true of each process: the library mapped (read
	# here from its maps) and an answer (heapctl status PID from the host
	# pings it; a process with no control thread answers while it
	# allocates)
	ct "$HC" systemd status --json >"$WORK/status.json" 2>&1
	carriers=0 answering=0
	for p in $(cgroup_pids "$hp"); do
		carries "$p" || continue
		carriers=$((carriers + 1))
		[ "$("$H" status "$p" --json 2>/dev/null | jget answers)" = True ] && answering=$((answering + 1))
	done
	got=$(python3 -c 'import json,sys
for u in json.load(open(sys.argv[1])):
    if u["unit"] == sys.argv[2] + ".service" or u["unit"] == sys.argv[2]:
        print(u["processes"], u["loaded"], u["answering"], len(u["each"]))' "$WORK/status.json" "$unit" 2>&1)
	[ "$got" = "$want $carriers $answering $want" ] ||
	    ep_fail "$unit: systemd status --json says processes, loaded, answering, listed '$got'; true: '$want $carriers $answering $want': $(flat "$WORK/status.json")"
	ct "$HC" systemd status >"$WORK/status.txt" 2>&1
	[ "$(grep -c '^  process .*not answering' "$WORK/status.txt")" -ge $((carriers - answering)) ] ||
	    ep_fail "$unit: systemd status names fewer processes than the $((carriers - answering)) that do not answer: $(flat "$WORK/status.txt")"
	# a process without /dev/shm (haproxy's chrooted worker) is not told it
	# publishes its segment "when it next allocates": it never can
	for p in $(cgroup_pids "$hp"); do
		[ -d "/proc/$p/root/dev/shm" ] && continue
		"$H" status "$p" >"$WORK/$tag.noshm" 2>&1 && continue
		grep -q 'when it next allocates' "$WORK/$tag.noshm" &&
		    ep_fail "$unit: process $p has no /dev/shm, and heapctl status says it publishes a segment when it next allocates: $(flat "$WORK/$tag.noshm")"
	done
	note "$unit: doctor $(grep -c '^process' "$WORK/$tag.doctor") processes, exit $(jget exit <"$WORK/$tag.doctor.json"); status: $(grep "^$unit" "$WORK/status.txt")"
}

note "doctor and status, per process"
every_process nginx nginx "root www-data"
every_process haproxy haproxy "haproxy root"
every_process postgresql@15-main pg postgres

for t in nginx:nginx memcached:memcached haproxy:haproxy redis-server:redis postgresql@15-main:pg; do
	note "${t%%:*}: disable --restart"
	undo "${t%%:*}" "${t#*:}"
done

# ---- the shapes of classic C daemons, as units of our own -----------------------
#
# tests/programs/daemon_shapes.c: a Type=forking daemon that double-forks, a root
# master with pre-forked workers (nobody; the last one chrooted, with
# RLIMIT_NPROC 0), each then only sleeping, and a busy process that
# LimitNPROC=1 leaves with no control thread.  Every process is controlled
# from the host: status (within 5 s: the library publishes a fork child's
# segment 20 ms after the fork, which is not asserted), set, dump with no
# option and report.

# reachable HOSTPID: heapctl status answers for it within 5 s; else its output
reachable() {
	local out i
	for ((i = 0; i < 50; i++)); do
		out=$("$H" status "$1" --json 2>&1) && [[ $out == *"\"pid\": $1,"* ]] && return 0
		sleep 0.1
	done
	echo "$out"
	return 1
}

# controlled UNIT HOSTPID TAG LG: status answers, `set prof.lg_sample=LG`
# shows in status, and dump -p with no option prints a path we open,
# whose report (-p: the binary is the container's) names shapes_keep
controlled() {
	local unit=$1 hp=$2 tag=$3 lg=$4 out path
	if ! carries "$hp"; then
		fail "$tag: process $hp does not carry the library (journal: $(journal "$unit"))"
		return
	fi
	if ! out=$(reachable "$hp"); then
		fail "$tag: heapctl status $hp does not answer within 5 s: $out"
		return
	fi
	"$H" set "$hp" "prof.lg_sample=$lg" >"$WORK/$tag.set" 2>&1 ||
	    fail "$tag: heapctl set $hp prof.lg_sample=$lg: $(flat "$WORK/$tag.set")"
	out=$("$H" status "$hp" --json 2>&1 | jget prof.lg_sample)
	[ "$out" = "$lg" ] || fail "$tag: after set prof.lg_sample=$lg, status says '$out'"
	if ! out=$("$H" dump -p "$hp" 2>"$WORK/$tag.dump.err"); then
		fail "$tag: heapctl dump -p $hp: $(flat "$WORK/$tag.dump.err") (journal: $(journal "$unit"))"
	elif path=${out%%$'\n'*} && [ -r "$path" ] && cp "$path" "$WORK/$tag.heap" 2>/dev/null; then
		check_report "$WORK/$tag.heap" "$hp" "$tag" 'shapes_keep'
	else
		fail "$tag: heapctl dump -p $hp printed '$out', which the caller cannot open"
	fi
}

# shape_unit UNIT BODY: write /etc/systemd/system/UNIT.service, start it,
# enable the library with --restart; its systemctl cat before
shape_unit() {
	printf '%s\n' "[Service]" "$2" >"$CT/etc/systemd/system/$1.service"
	ct systemctl daemon-reload
	ct_t 60 systemctl start "$1" || fail "$1: does not start without the library: $(journal "$1")"
	ct systemctl cat "$1" >"$WORK/$1.cat.before" 2>&1
	ct_t 120 "$HC" systemd enable "$1" --restart $CONF >"$WORK/$1.enable" 2>&1 ||
	    fail "$1: enable --restart: $(flat "$WORK/$1.enable") (journal: $(journal "$1"))"
}

# The thread-less unit's user is one of its own, with a uid no process on
# the host has: RLIMIT_NPROC counts every process of the uid, on the host
# too (the container shares its user IDs), and with nobody's pre-forked
# workers above, or a concurrent test's, running as nobody, execve after
# systemd's setuid would fail with EAGAIN and the unit would never start.
for ((nproc_uid = 64000; nproc_uid < 64100; nproc_uid++)); do
	ps -eo uid= | grep -qx " *$nproc_uid" || getent passwd "$nproc_uid" >/dev/null ||
	    grep -q "^[^:]*:[^:]*:$nproc_uid:" "$CT/etc/passwd" || break
done
ct useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
    --uid "$nproc_uid" --user-group hcnproc >"$WORK/useradd.log" 2>&1 ||
    fail "cannot add the user hcnproc (uid $nproc_uid): $(flat "$WORK/useradd.log")"
mkdir -m 0755 "$CT/var/lib/hc-empty"

note "hc-double, hc-prefork, hc-nproc: enable --restart"
shape_unit hc-double "Type=forking
PIDFile=/run/hc-double.pid
ExecStart=$LIBEXEC/shapes double /run/hc-double.pid"
shape_unit hc-prefork "ExecStart=$LIBEXEC/shapes prefork 3 /var/lib/hc-empty"
shape_unit hc-nproc "User=hcnproc
LimitNPROC=1
ExecStart=$LIBEXEC/shapes busy"

note "hc-double: the grandchild of a double fork, idle"
hp=$(sd_host_pid "$(mainpid hc-double)")
[ -n "$hp" ] && [ "$(cat "/proc/$hp/comm" 2>/dev/null)" = shapes ] ||
    fail "hc-double: no main process from the PID file (host ${hp:-none}): $(journal hc-double)"
[ "$(ct cat /run/hc-double.pid)" = "$(mainpid hc-double)" ] || fail "hc-double: MainPID is not the PID file's"
controlled hc-double "$hp" double 13

note "hc-prefork: a root master, two idle workers as nobody, one chrooted with RLIMIT_NPROC 0"
hp=$(sd_host_pid "$(mainpid hc-prefork)")
[ -n "$hp" ] || fail "hc-prefork: no main process: $(journal hc-prefork)"
controlled hc-prefork "$hp" prefork.master 14
nobody=$(ct id -u nobody) workers=0 chrooted=""
for p in $(cgroup_pids "$hp"); do
	[ "$p" = "$hp" ] && continue
	[ "$(euid "$p")" = "$nobody" ] || fail "hc-prefork: worker $p runs as uid $(euid "$p"), not nobody"
	case $(cat "/proc/$p/comm") in
	shapes-worker)
		workers=$((workers + 1))
		controlled hc-prefork "$p" "prefork.worker$workers" 15
		;;
	shapes-chroot)
		chrooted=$p
		[ "$(awk '/^Max processes/ { print $3 }' "/proc/$p/limits")" = 0 ] ||
		    fail "hc-prefork: the chrooted worker $p has no RLIMIT_NPROC 0: $(grep '^Max processes' "/proc/$p/limits")"
		[ ! -e "/proc/$p/root/usr" ] || fail "hc-prefork: the worker $p is not chrooted into an empty directory"
		controlled hc-prefork "$p" prefork.chroot 16
		;;
	*) fail "hc-prefork: process $p of the unit is '$(cat "/proc/$p/comm")'" ;;
	esac
done
[ "$workers" = 2 ] && [ -n "$chrooted" ] ||
    fail "hc-prefork: $workers workers and chrooted '${chrooted}' in the cgroup, not 2 and one: $(journal hc-prefork)"
[ -z "$(ls -A "$CT/var/lib/hc-empty")" ] || fail "hc-prefork: files left in the chroot: $(ls -A "$CT/var/lib/hc-empty")"

note "hc-nproc: LimitNPROC=1, no control thread, served while it allocates"
hp=$(sd_host_pid "$(mainpid hc-nproc)")
[ -n "$hp" ] && [ "$(euid "$hp")" = "$nproc_uid" ] ||
    fail "hc-nproc: no main process running as hcnproc (host ${hp:-none}): $(journal hc-nproc)"
controlled hc-nproc "$hp" nproc 17
"$H" status "$hp" >"$WORK/nproc.status" 2>&1
grep -q '^control        no thread (pthread_create: Resource temporarily unavailable): served while the program allocates' "$WORK/nproc.status" ||
    fail "hc-nproc: status does not say it has no control thread and why: $(flat "$WORK/nproc.status")"
journal hc-nproc | grep -q 'cannot start the control thread: Resource temporarily unavailable' ||
    fail "hc-nproc: the library did not tell the journal why it has no control thread: $(journal hc-nproc)"
ct "$HC" doctor hc-nproc >"$WORK/nproc.doctor" 2>&1
grep -q 'the control thread could not be started (pthread_create: Resource temporarily unavailable; max processes 1)' "$WORK/nproc.doctor" ||
    fail "hc-nproc: doctor does not name the thread limit: $(flat "$WORK/nproc.doctor")"

note "doctor and status of the shapes"
every_process hc-double double root
every_process hc-prefork prefork "nobody root"
every_process hc-nproc nproc hcnproc

for u in hc-double hc-prefork hc-nproc; do
	note "$u: disable --restart"
	undo "$u" "$u"
done

# ---- units that do not start for reasons of their own -----------------------------

note "conditions not met, failures with and without the library"
cat >"$CT/etc/systemd/system/hc-chrony.service" <<'EOF'
[Unit]
Description=like chrony.service: needs CAP_SYS_TIME, which systemd-nspawn does not give
ConditionCapability=CAP_SYS_TIME
[Service]
ExecStart=/usr/bin/sleep 1000
EOF
cat >"$CT/etc/systemd/system/hc-path.service" <<'EOF'
[Unit]
ConditionPathExists=/etc/hc-not-there
[Service]
ExecStart=/usr/bin/sleep 1000
EOF
cat >"$CT/etc/systemd/system/hc-fails.service" <<'EOF'
[Service]
ExecStart=/bin/sh -c 'exit 3'
EOF
cat >"$CT/etc/systemd/system/hc-exits.service" <<'EOF'
[Service]
ExecStart=/bin/sh -c 'exit 0'
EOF
cat >"$CT/etc/systemd/system/hc-broken.service" <<'EOF'
[Service]
ExecStart=/bin/sh -c 'case "$LD_PRELOAD" in *libheapctl*) exit 7 ;; esac; exec /usr/bin/sleep 1000'
EOF
ct systemctl daemon-reload
# not_started UNIT EXIT WANT [OPTIONS]: enable --restart fails with EXIT
# and WANT, and (without --keep) leaves the unit as it was
not_started() {
	local u=$1 want_exit=$2 want=$3 st
	shift 3
	ct systemctl cat "$u" >"$WORK/$u.cat.before" 2>&1
	ct_t 120 "$HC" systemd enable "$u" --restart "$@" >"$WORK/$u.enable" 2>&1
	st=$?
	[ "$st" -eq "$want_exit" ] && grep -qE "$want" "$WORK/$u.enable" ||
	    fail "$u: enable --restart $*: exit $st (expected $want_exit), expected /$want/: $(flat "$WORK/$u.enable") (journal: $(journal "$u"))"
	grep -q 'did not come back' "$WORK/$u.enable" && fail "$u: enable says 'did not come back': $(flat "$WORK/$u.enable")"
	if [ "${1:-}" = --keep ]; then
		[ -e "$CT/etc/systemd/system/$u.service.d/50-heapctl.conf" ] || fail "$u: --keep did not keep the drop-in"
		ct "$HC" systemd disable "$u" >/dev/null 2>&1 || fail "$u: disable after --keep"
	else
		[ ! -e "$CT/etc/systemd/system/$u.service.d" ] || fail "$u: the drop-in was left behind: $(flat "$WORK/$u.enable")"
		[ -z "$(ct systemctl show -p DropInPaths --value "$u")" ] ||
		    fail "$u: systemd still has a drop-in for it (no daemon-reload?): $(ct systemctl show -p DropInPaths --value "$u")"
		ct systemctl cat "$u" >"$WORK/$u.cat.after" 2>&1
		cmp -s "$WORK/$u.cat.before" "$WORK/$u.cat.after" || fail "$u: systemctl cat differs after the refused enable"
	fi
}
not_started hc-chrony 1 'ConditionCapability=CAP_SYS_TIME is not met.*removed /etc/systemd/system/hc-chrony.service.d/50-heapctl.conf'
not_started hc-path 1 'ConditionPathExists=/etc/hc-not-there is not met'
not_started hc-path 1 'ConditionPathExists=/etc/hc-not-there is not met.*kept /etc/systemd/system/hc-path.service.d/50-heapctl.conf' --keep
not_started hc-fails 1 'reason of its own.*fails without it too \(Result=exit-code, exit status 3'
not_started hc-exits 1 'did not stay up, for a reason of its own: it is inactive \(dead\), its main process exited with status 0.*removed'
not_started hc-broken 4 'failed with the library .*exit status 7.* runs without it'
[ "$(ct systemctl is-active hc-broken)" = active ] || fail "hc-broken: not running again without the library"
hp=$(sd_host_pid "$(mainpid hc-broken)")
[ -n "$hp" ] && ! carries "$hp" || fail "hc-broken: the process running again (host ${hp:-none}) carries the library"

# ---- the umbrella postgresql.service -------------------------------------------------

note "postgresql.service: refused, naming postgresql@15-main"
ct "$HC" systemd enable postgresql --restart >"$WORK/umbrella.enable" 2>&1
st=$?
[ "$st" -eq 1 ] && grep -q 'runs /bin/true, no program of its own' "$WORK/umbrella.enable" &&
    grep -q 'heapctl systemd enable postgresql@15-main.service' "$WORK/umbrella.enable" ||
    fail "postgresql: enable of the umbrella unit: exit $st: $(flat "$WORK/umbrella.enable")"
[ ! -e "$CT/etc/systemd/system/postgresql.service.d" ] || fail "postgresql: a drop-in was written for the umbrella unit"

note "done"
sd_teardown
finish
