# shellcheck shell=bash
# tests/lib/containers.sh - helpers for the tests that run heapctl against
# REAL containers, made by podman from Debian (sourced).
#
# Why podman: most services heapctl is pointed at run in containers, and what
# matters there (another pid and mount namespace, a private /dev/shm, a
# seccomp filter, dropped capabilities, another user) is what the runtime
# builds, so the tests start containers as an operator would and run heapctl
# from the host against the host pid of the containers' processes.
#
# Why this way:
#   - no registry (the only network is Debian's mirror): the image is a
#     minimal bookworm tree made with mmdebstrap and cached by
#     tests/lib/systemd.sh's sd_rootfs (sourced: one cache, one lock, a
#     directory named after a hash of the package list, fail/die/note), and
#     `podman import`ed into podman storage of the tests' own
#     ($CT_CACHE/podman-DRIVER), tagged with the same hash.
#   - the host's podman configuration is never used nor changed: every podman
#     call gets the tests' storage (--root, --runroot), and CONTAINERS_CONF
#     points at a file of the test's own that picks runc (crun cannot set up
#     the cgroups of a host with a cgroup v1 hierarchy like this VM's), the
#     cgroupfs manager (no systemd as pid 1 needed), a file event log, and
#     resource limits root may set without CAP_SYS_RESOURCE.
#   - the build under test is bind-mounted read-only at its own path, so
#     LD_PRELOAD=$BUILD/libheapctl.so and inject's agent path are the same
#     on both sides (bookworm's glibc is the host's).
#   - every container has a name with the test's pid in it, is removed at
#     teardown (a trap on EXIT, INT and TERM), and one left behind is a
#     failure.
#
# A test does:
#     source "$(dirname "$0")/../lib/containers.sh"
#     ct_setup <name> "$@"        # BUILD, WORK, CT_CONF, the teardown trap
#     ct_image                    # CT_IMAGE (cached); podman runs, or SKIP
#     hpid=$(ct_start NAME [podman run options] -- CMD...) || exit 1  # preloaded
#     ... checks, each calling fail "..." on a mismatch ...
#     finish
#
# Failures print "FAIL <name>: <what>" on stderr and are counted.  When
# podman cannot run a container at all on this machine the test prints a
# loud SKIP line with podman's own message and exits 0; HC_CONTAINERS_REQUIRED=1
# makes that a failure.  HC_KEEP=1 keeps $WORK (never the containers).

# The image's packages, in one place: the real programs the tests profile
# (python3, redis-server), and the libraries heapctl's own command and
# engines need to run inside a container (the daemon: libmicrohttpd12 for
# serve, libdw1/libelf1/zlib1g/libunwind8 for report, procps for ps).
CT_PACKAGES="python3 redis-server libunwind8 libdw1 libelf1 zlib1g libmicrohttpd12 procps"
CT_CACHE=${HEAPCTL_TEST_CACHE:-/var/cache/heapctl-test}
CT_RUNROOT=/run/heapctl-test/podman
# shellcheck source=systemd.sh
source "$(dirname "${BASH_SOURCE[0]}")/systemd.sh"

# finish: the containers removed, then the exit status of the checks
finish() {
	ct_teardown
	[ "$FAILS" -gt 0 ] && exit 1
	exit 0
}

# skip <why>: podman cannot run here; loud, on stdout and stderr
skip() {
	local line="SKIP $TEST_NAME: podman cannot run a container on this machine: $*"
	echo "$line"
	echo "$line" >&2
	echo "  (the containers group tests nothing here; HC_CONTAINERS_REQUIRED=1 makes this a failure)" >&2
	[ "${HC_CONTAINERS_REQUIRED:-0}" = 1 ] && exit 1
	exit 0
}

# pm ARGS...: podman with the tests' storage and configuration
pm() {
	CONTAINERS_CONF=$CT_CONF podman --root "$CT_CACHE/podman-$CT_DRIVER" --runroot "$CT_RUNROOT-$CT_DRIVER" \
	    --storage-driver "$CT_DRIVER" "$@"
}

# ct_setup <name> <build dir>
ct_setup() {
	TEST_NAME=$1
	local build=${2:-}
	FAILS=0
	SD_T0=$SECONDS
	CT_TRACKED=() CT_TORN=""
	sd_build "$build"
	[ "$(id -u)" -eq 0 ] || die "needs root (podman with the host's pid namespace view)"
	sd_need podman:podman runc:runc mmdebstrap:mmdebstrap flock:util-linux curl:curl python3:python3
	unset MALLOC_CONF HEAPCTL_CONF LD_PRELOAD
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/hcct-$TEST_NAME.XXXXXX")
	chmod 755 "$WORK"
	trap 'ct_teardown' EXIT
	trap 'ct_teardown; exit 130' INT
	trap 'ct_teardown; exit 143' TERM
	CT_CONF=$WORK/containers.conf
	# podman as root asks for 1048576 open files and 4 M processes, which
	# runc cannot set where root lacks CAP_SYS_RESOURCE (this VM: "error
	# setting rlimit type 7: operation not permitted"): the caller's own
	# open files limit, and at most 16384 processes, which it can
	local nofile nproc
	nofile=$(ulimit -Hn)
	nproc=$(ulimit -Hu)
	[[ $nofile =~ ^[0-9]+$ ]] || nofile=65536
	[[ $nproc =~ ^[0-9]+$ ]] && [ "$nproc" -lt 16384 ] || nproc=16384
	cat >"$CT_CONF" <<-EOF
	[containers]
	log_driver = "k8s-file"
	default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
	[engine]
	runtime = "runc"
	cgroup_manager = "cgroupfs"
	events_logger = "file"
	events_logfile_path = "$WORK/podman-events.log"
	[network]
	network_backend = "cni"
	EOF
	# overlay where the kernel and the cache's file system allow it, else
	# vfs (storage of its own: a storage is made for one driver)
	CT_DRIVER=${HC_CT_DRIVER:-overlay}
	if [ -z "${HC_CT_DRIVER:-}" ] && [ -e "$CT_CACHE/podman-driver" ]; then
		CT_DRIVER=$(cat "$CT_CACHE/podman-driver")
	fi
}

# ---- the image -----------------------------------------------------------

# ct_image: CT_IMAGE, the image of $CT_PACKAGES, built and imported if missing.
# Then a first container proves podman can run at all (else skip).
ct_image() {
	SD_PACKAGES=$CT_PACKAGES SD_ROOTFS_PROBE=usr/bin/python3 sd_rootfs
	local tree=$SD_ROOTFS hash=${SD_ROOTFS##*-}
	CT_IMAGE=localhost/heapctl-test:$hash
	local lockfd
	exec {lockfd}>"$CT_CACHE/.ct-lock"
	flock -w 300 "$lockfd" || die "another import of the image holds $CT_CACHE/.ct-lock for over 300 s"
	if ! pm image exists "$CT_IMAGE" 2>/dev/null; then
		local t0=$SECONDS
		if ! ct_import "$tree"; then
			if [ "$CT_DRIVER" = overlay ] && [ -z "${HC_CT_DRIVER:-}" ] &&
			    grep -qi 'overlay' "$WORK/import.log"; then
				# this file system or kernel has no overlay for podman
				echo vfs >"$CT_CACHE/podman-driver"
				CT_DRIVER=vfs
				ct_import "$tree" || skip "podman import: $(tail -1 "$WORK/import.log")"
			else
				exec {lockfd}>&-
				skip "podman import: $(tail -1 "$WORK/import.log")"
			fi
		fi
		note "image $CT_IMAGE imported in $((SECONDS - t0)) s (storage driver $CT_DRIVER)"
	fi
	exec {lockfd}>&-
	local out
	if ! out=$(pm run --rm --name "hc-probe-$$" "$CT_IMAGE" /bin/true 2>&1); then
		skip "podman run $CT_IMAGE /bin/true: $(echo "$out" | tail -2 | tr '\n' ' ')"
	fi
}

# ct_import TREE: the tree as the image $CT_IMAGE (podman's log in import.log)
ct_import() {
	tar -C "$1" --exclude=./.heapctl-complete -c . 2>"$WORK/tar.log" |
	    pm import --change 'CMD ["/bin/sh"]' - "$CT_IMAGE" >"$WORK/import.log" 2>&1
}

# ---- containers ----------------------------------------------------------

# ct_run NAME [podman run options...] -- CMD...: a detached container of the
# image, named hc-NAME-<our pid>, the build mounted read-only at its path.
# Prints nothing; the container's name is in CT_LAST.
ct_run() {
	local name="hc-$1-$$"
	shift
	local opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	# in a file, not a variable: ct_start runs in a command substitution
	echo "$name" >>"$WORK/containers"
	CT_LAST=$name
	pm run -d --name "$name" -v "$BUILD:$BUILD:ro" -e PATH="$SD_PATH" "${opts[@]}" "$CT_IMAGE" "$@" \
	    >"$WORK/run-$name.log" 2>&1 ||
	    die "podman run $name: $(tail -2 "$WORK/run-$name.log" | tr '\n' ' ')"
}

# ct_pid [NAME]: the host pid of the container's first process (CT_LAST's)
ct_pid() {
	pm inspect -f '{{.State.Pid}}' "${1:-$CT_LAST}" 2>/dev/null
}

# ct_start NAME [podman run options...] -- CMD...: a container whose command
# runs with libheapctl.so preloaded (and sampling on); prints its host pid
# once the library's control segment answers (heapctl status from the host).
# Meant for $(...): a failure is printed and the subshell exits 1.
ct_start() {
	local name=$1
	shift
	local opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	ct_run "$name" -e LD_PRELOAD="$BUILD/libheapctl.so" -e MALLOC_CONF="${CT_MALLOC_CONF:-prof:true}" \
	    "${opts[@]}" -- "$@"
	local pid
	pid=$(ct_pid) || die "podman inspect $CT_LAST: no pid"
	ct_wait_status "$pid" || die "container $CT_LAST (host pid $pid): heapctl status never answered"
	echo "$pid"
}

# ct_wait_status PID: true once heapctl status PID answers (30 s at most)
ct_wait_status() {
	local i
	for ((i = 0; i < 300; i++)); do
		"$BUILD/heapctl" status "$1" >/dev/null 2>&1 && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# ct_track PID...: host processes to kill at teardown
ct_track() { CT_TRACKED+=("$@"); }

# ct_teardown: every container of this test removed (force), the tracked
# processes killed, $WORK removed.  Runs once.
ct_teardown() {
	[ -n "${CT_TORN:-}" ] && return 0
	CT_TORN=1
	local p n
	for p in "${CT_TRACKED[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${CT_TRACKED[@]}"; do wait "$p" 2>/dev/null; done
	local names=()
	[ -f "$WORK/containers" ] && mapfile -t names <"$WORK/containers"
	# --ignore: a test may have removed one itself (names.sh)
	[ ${#names[@]} -gt 0 ] && pm rm -f --ignore -t 2 "${names[@]}" >/dev/null 2>&1
	for n in "${names[@]}"; do
		if pm container exists "$n" 2>/dev/null; then
			fail "teardown: container $n is still there after podman rm -f"
		fi
	done
	if [ "${HC_KEEP:-0}" = 1 ]; then
		echo "kept $WORK" >&2
	else
		rm -rf "$WORK"
	fi
}
