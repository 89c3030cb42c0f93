# mimalloc_bench.awk — the table of mimalloc_bench.sh, from its results.tsv
# (row, allocator, rep, wall s, peak RSS KiB, exit status, throughput or -).
#
#   awk -F'\t' -v allocs="glibc jemalloc ..." -v rows="cfrac ..." -f mimalloc_bench.awk results.tsv
#
# Per row and allocator: the median wall time (or, for the rows that run
# for a fixed time, the median throughput they printed) and the median peak
# RSS, both as ratios to the best peer's (the best of the allocators that
# are not heapctl; a throughput ratio is inverted so that every ratio reads
# like a time: 1.25 = a quarter slower or smaller than the best). Then the
# bar of `make bench` (report.awk): the allocators that beat a column by
# more than 1.1x on time and on RSS at once. Problems go to stderr.

function median(s,   v, n, i, j, x) {
	n = split(s, v, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

# fixed[]: the rows that run for a fixed time and print a throughput
BEGIN {
	na = split(allocs, A, " ")
	nr = split(rows, R, " ")
	split("larsonN larsonN-sized rptestN xmalloc-testN glibc-thread", f, " ")
	for (i in f) fixed[f[i]] = 1
}

{
	k = $1 SUBSEP $2
	if ($6 != 0) { failed[k] = failed[k] " " $6; next }
	if ($7 != "-") tp[k] = tp[k] " " $7
	else if (fixed[$1]) { notp[k]++; next }
	wall[k] = wall[k] " " $4
	rss[k] = rss[k] " " $5
}

END {
	printf "Each cell: time (or 1/throughput, rows marked *) and peak RSS over the best peer's (the best of"
	for (a = 1; a <= na; a++) if (A[a] !~ /^heapctl/) printf " %s", A[a]
	printf "), medians; **bold** where both are within 1.1x. \"Dominated\" names the allocators that another beats by more than 1.1x on time and on RSS at once (the bar `make bench` prints), with its time and RSS over theirs.\n\n"
	printf "| row | best peer |"
	for (a = 1; a <= na; a++) printf " %s |", A[a]
	printf " dominated |\n|---|---|"
	for (a = 1; a <= na; a++) printf "---|"
	printf "---|\n"
	for (r = 1; r <= nr; r++) {
		row = R[r]
		pt = pr = ""
		delete vt; delete vr; delete ok
		for (a = 1; a <= na; a++) {
			k = row SUBSEP A[a]
			if (failed[k] != "") {
				printf "!!! %s under %s: exit status%s\n", row, A[a], failed[k] > "/dev/stderr"
				continue
			}
			if (notp[k]) {
				printf "!!! %s under %s: %d runs printed no throughput\n", row, A[a], notp[k] > "/dev/stderr"
				continue
			}
			if (wall[k] == "") continue
			vt[a] = fixed[row] ? 1 / median(tp[k]) : median(wall[k])
			vr[a] = median(rss[k])
			ok[a] = vt[a] > 0 && vr[a] > 0
			if (!ok[a] || A[a] ~ /^heapctl/) continue
			if (pt == "" || vt[a] < pt) { pt = vt[a]; bt = A[a] }
			if (pr == "" || vr[a] < pr) { pr = vr[a]; br = A[a] }
		}
		if (pt == "") {
			printf "| %s | no peer ran |", row
			for (a = 1; a <= na; a++) printf " - |"
			printf " - |\n"
			continue
		}
		if (fixed[row])
			printf "| %s* | %s %.4g/s, %s %.1f MiB |", row, bt, 1 / pt, br, pr / 1024
		else
			printf "| %s | %s %.3g s, %s %.1f MiB |", row, bt, pt, br, pr / 1024
		dom = ""
		for (a = 1; a <= na; a++) {
			if (!ok[a]) { printf " %s |", (row SUBSEP A[a]) in failed ? "FAILED" : "-"; continue }
			tr = vt[a] / pt; rr = vr[a] / pr
			both = tr <= 1.1 && rr <= 1.1
			printf " %s%.2f, %.2f%s |", both ? "**" : "", tr, rr, both ? "**" : ""
			nrow[a]++; nboth[a] += both
			lt[a] += log(tr); lr[a] += log(rr)
			by = ""
			for (b = 1; b <= na; b++)
				if (b != a && ok[b] && vt[b] * 1.1 < vt[a] && vr[b] * 1.1 < vr[a])
					by = by (by == "" ? "" : " and ") sprintf("%s (%.2f, %.2f)", A[b], vt[a] / vt[b], vr[a] / vr[b])
			if (by != "") dom = dom (dom == "" ? "" : "; ") A[a] " by " by
			else nfree[a]++
		}
		printf " %s |\n", dom == "" ? "none" : dom
	}
	printf "| **both <= 1.1** | |"
	for (a = 1; a <= na; a++) printf "%s", nrow[a] ? sprintf(" %d of %d |", nboth[a], nrow[a]) : " - |"
	printf " |\n| **not dominated** | |"
	for (a = 1; a <= na; a++) printf "%s", nrow[a] ? sprintf(" %d of %d |", nfree[a], nrow[a]) : " - |"
	printf " |\n| **geomean** | |"
	for (a = 1; a <= na; a++) printf "%s", nrow[a] ? sprintf(" %.2f, %.2f |", exp(lt[a] / nrow[a]), exp(lr[a] / nrow[a])) : " - |"
	printf " |\n"
}
