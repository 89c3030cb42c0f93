# tests/bench/lib.sh - what the make bench scripts share (sourced).

# median: the median of the numbers on standard input, one a line
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# machine_line: the machine the numbers come from, as the tables' first line
machine_line() {
	echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r), $(date -u +%F)"
}
