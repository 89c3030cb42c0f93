# tests/bench/lib.sh - what the make bench scripts share (sourced).

# median: the median of the numbers on standard input, one a line
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# machine_line: the machine the numbers come from, as the tables' first line
machine_line() {
	echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r), $(date -u +%F)"
}

# bench_tmp: tmp= a directory of the script's own, removed at exit with
# every program the script still runs
bench_tmp() {
	tmp=$(mktemp -d)
	trap 'pkill -P $$ 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
}

# peer_libs: lib[] and pkg[] (associative arrays the caller declared) for
# the allocators compared with heapctl: glibc as it is, the others the
# Debian packages' libraries, preloaded
peer_libs() {
	local d=/usr/lib/x86_64-linux-gnu
	lib[glibc]=
	lib[jemalloc]=$d/libjemalloc.so.2
	pkg[jemalloc]=libjemalloc2
	lib[mimalloc]=$d/libmimalloc.so.2
	pkg[mimalloc]=libmimalloc2.0
	lib[tcmalloc]=$d/libtcmalloc_minimal.so.4
	pkg[tcmalloc]=libtcmalloc-minimal4
}
