#!/usr/bin/env bash
# Check the Debian packages that building and testing need.  As root, install
# the missing ones with apt-get; otherwise name them and fail.
set -euo pipefail
need=(gcc g++ make libc6-dev python3 perl git bats libjemalloc-dev libjemalloc2
	libunwind-dev libelf-dev libdw-dev zlib1g-dev golang-go libgoogle-perftools4
	mmdebstrap systemd-container man-db clang libclang-rt-14-dev systemd procps file
	redis-server redis-tools chromium binutils xz-utils debuginfod curl
	libmicrohttpd-dev prometheus libbpf-dev bpftool bpftrace musl-tools elfutils
	podman runc libcap2-bin strace clang-format)
missing=()
for p in "${need[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "heapctl: missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
	exit 1
fi
echo "heapctl: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
