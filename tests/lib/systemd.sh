# shellcheck shell=bash
# tests/lib/systemd.sh - helpers for the tests that run heapctl under a
# REAL systemd, booted in a container (sourced).
#
# Why a booted container: what broke in the field (a unit with Debian's
# usual hardening killed with SIGSYS once libheapctl.so was preloaded) is
# systemd's own sandbox: its seccomp filter, mount namespaces, DynamicUser=.
# Only the real systemd builds those, so the tests boot Debian bookworm's
# systemd with systemd-nspawn and drive units in it, and run heapctl from
# the host against the host PID of the service, as an operator would.
#
# Why this way:
#   - the root file system is made once with mmdebstrap (about 75 s) and
#     cached under $SD_CACHE in a directory named after a hash of the
#     package list and options, so a change to the list builds a new one.
#     It is built in a temporary directory and renamed into place, so an
#     interrupted build is never used; a lock serialises concurrent builds.
#   - every boot uses --volatile=overlay: / is an overlay on a tmpfs, the
#     cached tree is never written, and nothing of one run reaches the next.
#   - the container keeps the host's user IDs (no --private-users), so the
#     dynamic user's UID and file owners read the same on both sides, and
#     host-built binaries run inside (bookworm's glibc is the host's).
#   - teardown runs from a trap on EXIT, INT and TERM: SIGTERM to
#     systemd-nspawn powers the container off cleanly; after a bounded wait
#     the container is killed, and any process, mount or volatile directory
#     left behind is removed and reported as a failure.
#
# A test does:
#     source "$(dirname "$0")/../lib/systemd.sh"
#     sd_setup <name> "$@"       # BUILD, SD_REPO, WORK; checks the tools
#     sd_rootfs                  # SD_ROOTFS (cached)
#     sd_boot                    # SD_NSPAWN, SD_LEADER; systemd is up
#     sd_install                 # make install into the container
#     ct systemctl ...           # run a command inside
#     hpid=$(sd_host_pid CTPID)  # the host PID of a container PID
#     ... checks, each calling fail "..." on a mismatch ...
#     sd_teardown; finish
#
# Failures print "FAIL <name>: <what>" on stderr and are counted, so one
# run shows every mismatch.  HC_KEEP=1 keeps $WORK (not the container).

# The packages of the root file system, in one place: systemd and what
# booting needs, heapctl's runtime libraries (so heapctl also runs inside),
# real services for the tests that profile them (daemons.sh: nginx,
# memcached and haproxy, whose workers drop privileges), ps/pgrep, and what a
# user's service manager needs (user@UID.service fails without them: "PAM
# unable to dlopen(pam_systemd.so)", "XDG_RUNTIME_DIR is not set").
SD_PACKAGES="systemd systemd-sysv dbus libunwind8 libdw1 libelf1 zlib1g libmicrohttpd12 redis-server postgresql nginx memcached haproxy procps libpam-systemd dbus-user-session"
SD_SUITE=bookworm
SD_VARIANT=minbase
SD_CACHE=${HEAPCTL_TEST_CACHE:-/var/cache/heapctl-test}
SD_BOOT_TIMEOUT=90          # s until systemctl is-system-running answers
SD_STOP_TIMEOUT=30          # s for a clean power-off before SIGKILL
SD_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

fail() {
	echo "FAIL $TEST_NAME: $*" >&2
	FAILS=$((FAILS + 1))
}

# die <what>: a failure after which the test cannot go on
die() {
	fail "$@"
	exit 1
}

finish() {
	[ "$FAILS" -gt 0 ] && exit 1
	exit 0
}

# note <text>: progress on stdout (in the test's log), with the time
note() { printf '[%3ds] %s\n' "$((SECONDS - SD_T0))" "$*"; }

# sd_setup <name> <build dir>: BUILD (absolute), SD_REPO (the repository
# this script belongs to), WORK (a scratch directory), the cleanup trap,
# and a check of everything the test needs.
sd_setup() {
	TEST_NAME=$1
	local build=${2:-}
	FAILS=0
	SD_T0=$SECONDS
	SD_NSPAWN="" SD_LEADER="" SD_MACHINE="" SD_TORN="" SD_TRACKED=()
	sd_build "$build"
	SD_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	[ "$(id -u)" -eq 0 ] || die "needs root (systemd-nspawn boots the container)"
	sd_need systemd-nspawn:systemd-container mmdebstrap:mmdebstrap nsenter:util-linux \
	    gcc:gcc jeprof:libjemalloc-dev python3:python3 flock:util-linux
	[ -d /sys/fs/cgroup ] || die "no /sys/fs/cgroup: systemd-nspawn cannot run here"
	# nothing from the caller's environment may configure the host's heapctl
	unset MALLOC_CONF HEAPCTL_CONF LD_PRELOAD
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/hcsd-$TEST_NAME.XXXXXX")
	trap 'sd_teardown' EXIT
	trap 'sd_teardown; exit 130' INT
	trap 'sd_teardown; exit 143' TERM
}

# sd_build <build dir>: BUILD, its absolute path, which must hold the
# library and the command (tests/lib/containers.sh uses it too)
sd_build() {
	if [ -z "${1:-}" ]; then
		echo "usage: $0 /abs/path/to/build" >&2
		exit 2
	fi
	BUILD=$(cd "$1" && pwd) || die "no build directory $1"
	[[ -f $BUILD/libheapctl.so && -x $BUILD/heapctl ]] ||
	    die "$BUILD/libheapctl.so or $BUILD/heapctl missing (run make)"
}

# sd_need PROGRAM:PACKAGE...: each program on PATH, or die naming its package
sd_need() {
	local t
	for t in "$@"; do
		command -v "${t%%:*}" >/dev/null 2>&1 ||
		    die "${t%%:*} not found (Debian package ${t#*:}; tests/deps.sh installs it)"
	done
}

# ---- the root file system ------------------------------------------------

# sd_rootfs: SD_ROOTFS, the cached tree for $SD_PACKAGES, built if missing.
# A tree is whole once $SD_ROOTFS_PROBE (a program it must have) is in it;
# tests/lib/containers.sh builds its image's tree here too, with its own list.
sd_rootfs() {
	local probe=${SD_ROOTFS_PROBE:-usr/lib/systemd/systemd}
	local opts=(--variant="$SD_VARIANT" --include="${SD_PACKAGES// /,}"
	            --aptopt='Acquire::Retries "3"')
	local hash
	hash=$(printf '%s\n' "$SD_SUITE" "${opts[@]}" | sha256sum | cut -c1-16)
	SD_ROOTFS=$SD_CACHE/rootfs-$SD_SUITE-$hash
	mkdir -p "$SD_CACHE" || die "cannot create $SD_CACHE"
	local lockfd
	exec {lockfd}>"$SD_CACHE/.lock"
	if ! flock -w 900 "$lockfd"; then
		exec {lockfd}>&-
		die "another build of the root file system holds $SD_CACHE/.lock for over 900 s"
	fi
	if [ -x "$SD_ROOTFS/$probe" ] && [ -e "$SD_ROOTFS/.heapctl-complete" ]; then
		touch "$SD_ROOTFS"       # in use: not pruned below
		exec {lockfd}>&-
		note "root file system $SD_ROOTFS (cached)"
		return 0
	fi
	# under the lock every temporary tree is a leftover of a killed build
	rm -rf "$SD_CACHE"/.tmp-rootfs-* "$SD_ROOTFS"
	# trees for other package lists unused for a week
	find "$SD_CACHE" -mindepth 1 -maxdepth 1 -name 'rootfs-*' -mtime +7 \
	    -exec rm -rf {} + 2>/dev/null
	local tmp=$SD_CACHE/.tmp-rootfs-$hash.$$ t0=$SECONDS rc=0
	note "building the root file system ($SD_PACKAGES) in $tmp"
	mmdebstrap "${opts[@]}" "$SD_SUITE" "$tmp" >"$WORK/mmdebstrap.log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ] || [ ! -x "$tmp/$probe" ]; then
		rm -rf "$tmp"
		exec {lockfd}>&-
		local why
		why=$(grep -E '^E: |^Err:' "$WORK/mmdebstrap.log" | head -1)
		echo "--- last lines of the mmdebstrap log:" >&2
		tail -n 15 "$WORK/mmdebstrap.log" | sed 's/^/    /' >&2
		die "mmdebstrap $SD_SUITE failed (exit $rc), first error: ${why:-none printed, see the log above}"
	fi
	touch "$tmp/.heapctl-complete"
	mv -T "$tmp" "$SD_ROOTFS" || { rm -rf "$tmp"; exec {lockfd}>&-; die "cannot rename $tmp to $SD_ROOTFS"; }
	exec {lockfd}>&-
	note "root file system built in $((SECONDS - t0)) s: $SD_ROOTFS"
}

# ---- the container ---------------------------------------------------------

# _sd_status_field FILE KEY: REPLY = the value of "KEY:" in a
# /proc/PID/status (no fork: this runs for every process on the host)
_sd_status_field() {
	local k v
	REPLY=""
	while read -r k v; do
		if [ "$k" = "$2:" ]; then
			REPLY=$v
			return 0
		fi
	done 2>/dev/null <"$1"
	return 0
}

# _sd_find_leader: the child of systemd-nspawn that is PID 1 of a new PID
# namespace, or nothing yet
_sd_find_leader() {
	local s
	for s in /proc/[0-9]*/status; do
		_sd_status_field "$s" PPid
		[ "$REPLY" = "$SD_NSPAWN" ] || continue
		_sd_status_field "$s" NSpid
		if [ "${REPLY##*[[:space:]]}" = 1 ]; then
			s=${s%/status}
			echo "${s#/proc/}"
			return 0
		fi
	done
	return 0
}

# sd_boot: boot systemd in a container on $SD_ROOTFS and wait until it is
# up.  SD_NSPAWN is the systemd-nspawn process, SD_LEADER the container's
# PID 1 (systemd) as the host sees it, SD_MACHINE its unique name.
sd_boot() {
	local name=${TEST_NAME//[^a-zA-Z0-9]/-}
	SD_MACHINE="hc-$name-$$"
	SD_VOLATILE=""
	systemd-nspawn -D "$SD_ROOTFS" --volatile=overlay -b --register=no --keep-unit \
	    --console=read-only --private-network -M "$SD_MACHINE" \
	    </dev/null >"$WORK/nspawn.log" 2>&1 &
	SD_NSPAWN=$!
	local t0=$SECONDS state=""
	while [ -z "$SD_LEADER" ]; do
		if ! kill -0 "$SD_NSPAWN" 2>/dev/null; then
			_sd_boot_failed "systemd-nspawn exited before the container started"
		fi
		[ $((SECONDS - t0)) -ge "$SD_BOOT_TIMEOUT" ] &&
		    _sd_boot_failed "no container PID 1 under systemd-nspawn ($SD_NSPAWN) after $SD_BOOT_TIMEOUT s"
		SD_LEADER=$(_sd_find_leader)
		[ -n "$SD_LEADER" ] || sleep 0.2
	done
	while :; do
		if ! kill -0 "$SD_NSPAWN" 2>/dev/null; then
			_sd_boot_failed "systemd-nspawn exited while the container booted"
		fi
		state=$(ct_t 10 systemctl is-system-running 2>/dev/null)
		case $state in running | degraded) break ;; esac
		[ $((SECONDS - t0)) -ge "$SD_BOOT_TIMEOUT" ] &&
		    _sd_boot_failed "systemctl is-system-running says '${state:-nothing}' after $SD_BOOT_TIMEOUT s, not running or degraded"
		sleep 0.5
	done
	# this container's volatile directory (the overlay's upper layer), so
	# that teardown looks for exactly this one, not for other containers'
	SD_VOLATILE=$(grep -o 'upperdir=/tmp/nspawn-volatile-[^/,]*' "/proc/$SD_LEADER/mountinfo" | head -1)
	SD_VOLATILE=${SD_VOLATILE#upperdir=}
	[ -n "$SD_VOLATILE" ] || die "boot: / of the container is no overlay on /tmp/nspawn-volatile-*: $(grep ' / / ' "/proc/$SD_LEADER/mountinfo")"
	note "container $SD_MACHINE booted in $((SECONDS - t0)) s: systemd-nspawn $SD_NSPAWN, PID 1 = host $SD_LEADER, $state"
	if [ "$state" = degraded ]; then
		note "units that failed at boot (not this test's):"
		ct_t 10 systemctl --failed --no-legend --plain | sed 's/^/    /'
	fi
}

_sd_boot_failed() {
	echo "--- last lines of the systemd-nspawn log ($WORK/nspawn.log):" >&2
	tail -n 25 "$WORK/nspawn.log" | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^/    /' >&2
	if [ -n "$SD_LEADER" ] && kill -0 "$SD_LEADER" 2>/dev/null; then
		echo "--- jobs and failed units inside:" >&2
		ct_t 10 systemctl list-jobs --no-legend 2>&1 | head -15 | sed 's/^/    /' >&2
		ct_t 10 systemctl --failed --no-legend 2>&1 | head -15 | sed 's/^/    /' >&2
	fi
	die "boot: $*"
}

# ct_root: the container's / as the host sees it (writes land in the overlay)
ct_root() { echo "/proc/$SD_LEADER/root"; }

# ct CMD...: run CMD inside the container (every namespace of its PID 1),
# with a clean environment and a 60 s limit.  ct_t SECS CMD...: another limit.
ct() { ct_t 60 "$@"; }
ct_t() {
	local secs=$1
	shift
	timeout -k 5 "$secs" nsenter -t "$SD_LEADER" -a \
	    env -i PATH="$SD_PATH" LANG=C.UTF-8 SYSTEMD_PAGER=cat SYSTEMD_COLORS=0 "$@"
}

# sd_install: the build under test, installed into the container with the
# project's own `make install` (PREFIX=/usr/local).  -o all: install exactly
# this build, never rebuild any of it from sources that changed since.
sd_install() {
	if ! make -s -C "$SD_REPO" -o all install DESTDIR="$(ct_root)" PREFIX=/usr/local BUILD="$BUILD" \
	    >"$WORK/install.log" 2>&1; then
		sed 's/^/    /' "$WORK/install.log" >&2
		die "make -C $SD_REPO install DESTDIR=$(ct_root) PREFIX=/usr/local BUILD=$BUILD failed"
	fi
	local f
	for f in bin/heapctl lib/libheapctl.so lib/libheapctl-secure.so; do
		cmp -s "$BUILD/${f#*/}" "$(ct_root)/usr/local/$f" ||
		    die "make install: /usr/local/$f in the container is not $BUILD/${f#*/}"
	done
	# the installed command runs inside with the container's own libraries
	ct /usr/local/bin/heapctl list >"$WORK/ct-heapctl-list.out" 2>&1 ||
	    fail "heapctl does not run inside the container: $(head -3 "$WORK/ct-heapctl-list.out")"
}

# sd_host_pid CTPID: the host PID of the process that is CTPID in the
# container's PID namespace (nothing if there is none after 5 s of looking:
# a unit's process that systemctl had just named was missed by one pass
# over /proc in make check, while its journal showed it up and running).
sd_host_pid() {
	local i
	case $1 in '' | 0) return 0 ;; esac
	for ((i = 0; i < 25; i++)); do
		_sd_host_pid_once "$1" && return 0
		sleep 0.2
	done
	return 0
}

# _sd_host_pid_once CTPID: one pass over /proc; false if none was found
_sd_host_pid_once() {
	local want s ns
	want=$(readlink "/proc/$SD_LEADER/ns/pid") || return 1
	for s in /proc/[0-9]*/status; do
		_sd_status_field "$s" NSpid
		[ "${REPLY##*[[:space:]]}" = "$1" ] || continue
		s=${s%/status}
		ns=$(readlink "$s/ns/pid" 2>/dev/null) || continue
		if [ "$ns" = "$want" ]; then
			echo "${s#/proc/}"
			return 0
		fi
	done
	return 1
}

# sd_track PID...: host processes (background clients) to kill at teardown
sd_track() { SD_TRACKED+=("$@"); }

# ---- teardown ----------------------------------------------------------------

# _sd_wait_gone PID SECS: true once PID is gone (reaped if it is our child)
_sd_wait_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
		sleep 0.1
	done
	! kill -0 "$1" 2>/dev/null
}

# sd_teardown: kill the tracked clients, power the container off, remove
# whatever it left behind (a failure if anything was), remove $WORK.  Runs
# once; called by the test before finish and from the trap.
sd_teardown() {
	[ -n "${SD_TORN:-}" ] && return 0
	SD_TORN=1
	local p
	for p in "${SD_TRACKED[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${SD_TRACKED[@]}"; do
		_sd_wait_gone "$p" 5 || kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	if [ -n "$SD_NSPAWN" ]; then
		local t0=$SECONDS
		# SIGTERM: systemd-nspawn asks the container's systemd to power off
		kill -TERM "$SD_NSPAWN" 2>/dev/null
		if ! _sd_wait_gone "$SD_NSPAWN" "$SD_STOP_TIMEOUT"; then
			fail "teardown: the container did not power off within $SD_STOP_TIMEOUT s of SIGTERM; killed"
			[ -n "$SD_LEADER" ] && kill -KILL "$SD_LEADER" 2>/dev/null
			kill -KILL "$SD_NSPAWN" 2>/dev/null
			_sd_wait_gone "$SD_NSPAWN" 10
		fi
		wait "$SD_NSPAWN" 2>/dev/null
		if [ -n "$SD_LEADER" ] && kill -0 "$SD_LEADER" 2>/dev/null; then
			fail "teardown: the container's PID 1 ($SD_LEADER) outlived systemd-nspawn; killed"
			kill -KILL "$SD_LEADER" 2>/dev/null
			_sd_wait_gone "$SD_LEADER" 10
		fi
		note "container powered off in $((SECONDS - t0)) s"
		_sd_leftovers
	fi
	if [ -n "${HC_KEEP:-}" ]; then
		echo "$TEST_NAME: work dir $WORK" >&2
	elif [ -n "${WORK:-}" ]; then
		rm -rf "$WORK"
	fi
	return 0
}

# _sd_leftovers: anything of this container that outlived systemd-nspawn:
# mounts of the cached tree or of its volatile directory in the host's
# mount table, the volatile directory itself, its propagation directory
# (systemd-nspawn cannot remove that where /run is no tmpfs and says so),
# a systemd-nspawn process for its name.  Removed, and a failure.
_sd_leftovers() {
	local m left=() prop=/run/systemd/nspawn/propagate/$SD_MACHINE
	while read -r m; do
		left+=("mount $m")
		umount -l "$m" 2>/dev/null
	done < <(awk -v r="$SD_ROOTFS" -v v="$SD_VOLATILE" \
	    '$5 == r || index($5, r "/") == 1 || (v != "" && ($5 == v || index($5, v "/") == 1)) { print $5 }' \
	    /proc/self/mountinfo | sort -r)
	if [ -n "$SD_VOLATILE" ] && [ -e "$SD_VOLATILE" ]; then
		left+=("directory $SD_VOLATILE")
		rm -rf --one-file-system "$SD_VOLATILE"
	fi
	if [ -e "$prop" ]; then
		left+=("directory $prop")
		rm -rf --one-file-system "$prop"
	fi
	if pgrep -f "systemd-nspawn .*-M $SD_MACHINE( |\$)" >/dev/null 2>&1; then
		left+=("a systemd-nspawn process for $SD_MACHINE")
	fi
	[ ${#left[@]} -eq 0 ] || fail "teardown: left behind and removed: ${left[*]}"
}
