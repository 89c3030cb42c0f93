# report.awk — turn run.sh's raw results into the Markdown table.
#
# Input (tab-separated, one line per run):
#   bench alloc rep wall_s rss_kib status checksum tight_ns batch_ns
#   user_s sys_s minor_faults
# Variables: allocs, benches (space-separated, in display order), base (the
# allocator ratios are taken to), header (lines printed first).
# Writes the report on stdout and one loud line per problem on stderr.
#
# A cell is valid when every run of it exited 0 and printed the reference
# checksum of its benchmark: the checksum most runs of that benchmark (over
# all allocators) printed, ties going to the allocator listed first. Only
# valid cells enter the ratios' geometric means.

function median(list,    n, v, i, j, t) {
	n = split(list, v, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
			t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
		}
	if (n == 0) return ""
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

# (max - min) / median of a list, in percent: how noisy the runs were.
function spread(list,    n, v, i, lo, hi, m) {
	n = split(list, v, " ")
	if (n < 2) return 0
	lo = hi = v[1] + 0
	for (i = 2; i <= n; i++) {
		if (v[i] + 0 < lo) lo = v[i] + 0
		if (v[i] + 0 > hi) hi = v[i] + 0
	}
	m = median(list)
	return m > 0 ? 100 * (hi - lo) / m : 0
}

# Row b's cells: valid[a] for those that ran, finished and checked out,
# with their median time in vt[a] and median peak RSS in vr[a].
function row_cells(b,    a, k) {
	for (a = 1; a <= na; a++) {
		k = B[b] SUBSEP A[a]
		valid[a] = runs[k] && !failed[k] && !bad[k] && walls[k] != ""
		if (valid[a]) { vt[a] = median(walls[k]); vr[a] = median(rsss[k]) }
	}
}

# The head of a table with one column per allocator.
function table_head(    a) {
	printf "| benchmark |"
	for (a = 1; a <= na; a++) printf " %s |", A[a]
	printf "\n|---|"
	for (a = 1; a <= na; a++) printf "---:|"
	printf "\n"
}

function why(st) {
	if (st == 124) return "TIMEOUT"
	if (st > 128) return "CRASH sig" (st - 128)
	if (st == 3) return "CORRUPT"
	if (st == 4) return "NOT PRELOADED"
	if (st == 127) return "EXEC FAILED"
	return "EXIT " st
}

function warn(msg) {
	printf "!!! %s\n", msg > "/dev/stderr"
	problems[++nproblems] = msg
}

BEGIN { FS = "\t" }

{
	k = $1 SUBSEP $2
	runs[k]++
	if ($6 != 0) {
		failed[k]++
		failwhy[k] = why($6)
		warn(sprintf("%s under %s, rep %s: %s (status %s)",
			     $1, $2, $3, why($6), $6))
		next
	}
	walls[k] = walls[k] " " $4
	cpus[k] = cpus[k] " " ($10 + $11)
	if ($12 != "") faults[k] = faults[k] " " $12
	rsss[k] = rsss[k] " " $5
	if ($8 != "") { tights[k] = tights[k] " " $8; batches[k] = batches[k] " " $9 }
	sum[k, $3] = $7
	votes[$1, $7]++
	cands[$1] = cands[$1] " " $7
}

END {
	na = split(allocs, A, " ")
	nb = split(benches, B, " ")
	for (a = 1; a <= na; a++) order[A[a]] = a

	# reference checksum per benchmark
	for (b = 1; b <= nb; b++) {
		n = split(cands[B[b]], c, " ")
		best = ""
		for (i = 1; i <= n; i++)
			if (best == "" || votes[B[b], c[i]] > votes[B[b], best])
				best = c[i]
		ref[B[b]] = best
	}
	# mismatches
	for (b = 1; b <= nb; b++)
		for (a = 1; a <= na; a++) {
			k = B[b] SUBSEP A[a]
			for (r = 1; r <= runs[k]; r++)
				if ((k, r) in sum && sum[k, r] != ref[B[b]]) {
					bad[k] = 1
					warn(sprintf("CHECKSUM MISMATCH: %s under %s, rep %d: %s, others print %s",
						     B[b], A[a], r, sum[k, r], ref[B[b]]))
				}
		}

	print header
	print ""
	printf "Time: median wall seconds (ratio to %s). RSS: median peak RSS in MiB (ratio to %s). Lower is better. Spread: the largest (max-min)/median of one cell's run times in that row.\n\n", base, base
	printf "| benchmark |"
	for (a = 1; a <= na; a++) printf " %s time | %s RSS |", A[a], A[a]
	printf " spread |\n|---|"
	for (a = 1; a <= na; a++) printf "---:|---:|"
	printf "---:|\n"

	for (b = 1; b <= nb; b++) {
		kb = B[b] SUBSEP base
		bt = median(walls[kb]); br = median(rsss[kb])
		basevalid = !failed[kb] && !bad[kb] && bt != ""
		printf "| %s |", B[b]
		worst = 0
		for (a = 1; a <= na; a++) {
			k = B[b] SUBSEP A[a]
			if (!runs[k]) { printf " - | - |"; continue }
			if (failed[k]) {
				printf " **%s** (%d/%d runs) | - |", failwhy[k], failed[k], runs[k]
				continue
			}
			t = median(walls[k]); m = median(rsss[k])
			if (spread(walls[k]) > worst) worst = spread(walls[k])
			mark = bad[k] ? " **!!CHECKSUM**" : ""
			if (basevalid && !bad[k] && bt > 0 && br > 0) {
				tr = t / bt; rr = m / br
				printf " %.3f (%.2f)%s | %.1f (%.2f)%s |", t, tr, mark, m / 1024, rr, mark
				lt[A[a]] += log(tr > 0 ? tr : 1e-9); lr[A[a]] += log(rr); ng[A[a]]++
			} else
				printf " %.3f%s | %.1f%s |", t, mark, m / 1024, mark
		}
		printf " %.0f%% |\n", worst
	}
	printf "| **geomean ratio** |"
	for (a = 1; a <= na; a++) {
		if (!ng[A[a]]) { printf " - | - |"; continue }
		note = ng[A[a]] < nb ? sprintf(" (%d of %d)", ng[A[a]], nb) : ""
		printf " **%.2f**%s | **%.2f**%s |", exp(lt[A[a]] / ng[A[a]]), note,
		       exp(lr[A[a]] / ng[A[a]]), note
	}
	printf " |\n"

	# CPU time: less disturbed by other load than wall time.
	printf "\nCPU time: median user+sys seconds (ratio to %s). Less sensitive than wall time to other load on the machine, but blind to time spent waiting (locks, sleeping threads).\n\n", base
	table_head()
	for (b = 1; b <= nb; b++) {
		kb = B[b] SUBSEP base
		bc = median(cpus[kb])
		basevalid = !failed[kb] && !bad[kb] && bc > 0
		printf "| %s |", B[b]
		for (a = 1; a <= na; a++) {
			k = B[b] SUBSEP A[a]
			if (!runs[k] || failed[k]) { printf " - |"; continue }
			cv = median(cpus[k])
			if (basevalid && !bad[k]) {
				printf " %.3f (%.2f) |", cv, cv / bc
				lc[A[a]] += log(cv > 0 ? cv / bc : 1e-9); nc[A[a]]++
			} else
				printf " %.3f%s |", cv, bad[k] ? " **!!CHECKSUM**" : ""
		}
		printf "\n"
	}
	printf "| **geomean ratio** |"
	for (a = 1; a <= na; a++)
		printf "%s", nc[A[a]] ? sprintf(" **%.2f** |", exp(lc[A[a]] / nc[A[a]])) : " - |"
	printf "\n"

	# Page faults: on a machine where a fault is dear (the header quotes
	# its cost) they are much of the fixed-cost rows' time.
	printf "\nPage faults: median minor faults of a run (ratio to %s); times the header's cost of one, an estimate of the time they took.\n\n", base
	table_head()
	for (b = 1; b <= nb; b++) {
		kb = B[b] SUBSEP base
		bf = median(faults[kb])
		printf "| %s |", B[b]
		for (a = 1; a <= na; a++) {
			k = B[b] SUBSEP A[a]
			if (!runs[k] || failed[k] || faults[k] == "") { printf " - |"; continue }
			fv = median(faults[k])
			if (!failed[kb] && bf > 0)
				printf " %.0f (%.2f) |", fv, fv / bf
			else
				printf " %.0f |", fv
		}
		printf "\n"
	}

	# Against the best peer: each row's best median time and best median
	# RSS among the allocators that are not heapctl, and every allocator's
	# ratio to them.  The goal "within 1.1x of the best peer's time and RSS
	# on every row" asks, where one peer wins time and another RSS, for
	# both at once: the count of such rows tells how often any allocator
	# gets there.
	printf "\nAgainst the best peer: each allocator's median time and peak RSS over the best of the allocators that are not heapctl, row by row (a peer's own best reads 1.00). \"Both <= 1.1\" counts the rows where it is within 1.1x of the best peer's time and of the best peer's RSS at once; \"worst\" is its largest ratio on either.\n\n"
	table_head()
	for (b = 1; b <= nb; b++) {
		pt = pr = ""
		row_cells(b)
		for (a = 1; a <= na; a++) {
			if (!valid[a] || A[a] ~ /^heapctl/) continue
			if (pt == "" || vt[a] < pt) pt = vt[a]
			if (pr == "" || vr[a] < pr) pr = vr[a]
		}
		printf "| %s |", B[b]
		for (a = 1; a <= na; a++) {
			if (!valid[a] || pt == "" || pt <= 0 || pr <= 0) { printf " - |"; continue }
			tr = vt[a] / pt; rr = vr[a] / pr
			ok = tr <= 1.1 && rr <= 1.1
			printf " %s%.2f, %.2f%s |", ok ? "**" : "", tr, rr, ok ? "**" : ""
			nrows[a]++; nok[a] += ok
			if (tr > wst[a]) wst[a] = tr
			if (rr > wst[a]) wst[a] = rr
		}
		printf "\n"
	}
	printf "| **both <= 1.1** |"
	for (a = 1; a <= na; a++) printf "%s", nrows[a] ? sprintf(" %d of %d |", nok[a], nrows[a]) : " - |"
	printf "\n| **worst** |"
	for (a = 1; a <= na; a++) printf "%s", nrows[a] ? sprintf(" %.2f |", wst[a]) : " - |"
	printf "\n"

	# Dominated: with two measures, the best time and the best RSS of a row
	# can belong to two peers, and then "within 1.1x of both" is out of
	# every allocator's reach (the table above shows how often).  A row is
	# lost outright where a single peer is faster by more than 10% and
	# smaller by more than 10% at once: such an allocator is listed, with
	# the row's time and RSS over its.  heapctl's builds are not set
	# against each other.
	printf "\nDominated: the allocators that beat one on a row by more than 1.1x on time and on RSS at once, each with the one's median time and peak RSS over theirs (heapctl's builds are not set against each other); \"none\" where no allocator does. \"Not dominated\" counts those rows.\n\n"
	table_head()
	for (b = 1; b <= nb; b++) {
		row_cells(b)
		printf "| %s |", B[b]
		for (a = 1; a <= na; a++) {
			if (!valid[a] || vt[a] <= 0 || vr[a] <= 0) { printf " - |"; continue }
			dom = ""
			for (pc = 1; pc <= na; pc++) {
				if (pc == a || !valid[pc] || vt[pc] <= 0 || vr[pc] <= 0 ||
				    (A[pc] ~ /^heapctl/ && A[a] ~ /^heapctl/)) continue
				if (vt[pc] * 1.1 < vt[a] && vr[pc] * 1.1 < vr[a])
					dom = dom (dom == "" ? "" : "; ") sprintf("%s %.2f, %.2f", A[pc], vt[a] / vt[pc], vr[a] / vr[pc])
			}
			printf " %s |", dom == "" ? "none" : dom
			drows[a]++; dfree[a] += dom == ""
		}
		printf "\n"
	}
	printf "| **not dominated** |"
	for (a = 1; a <= na; a++) printf "%s", drows[a] ? sprintf(" %d of %d |", dfree[a], drows[a]) : " - |"
	printf "\n"

	hasfast = 0
	for (a = 1; a <= na; a++) if (tights["fastpath" SUBSEP A[a]] != "") hasfast = 1
	if (hasfast) {
		printf "\nFast path (fastpath, malloc(32)+free, median ns per pair):\n\n"
		printf "| allocator | tight loop | batch of 100 |\n|---|---:|---:|\n"
		for (a = 1; a <= na; a++) {
			k = "fastpath" SUBSEP A[a]
			if (tights[k] == "") continue
			printf "| %s | %.2f%s | %.2f |\n", A[a], median(tights[k]),
			       bad[k] ? " **!!CHECKSUM**" : "", median(batches[k])
		}
	}

	if (nproblems) {
		printf "\n**PROBLEMS (%d)** — a checksum mismatch or a failed run means an allocator bug:\n\n", nproblems
		for (i = 1; i <= nproblems; i++) printf "- %s\n", problems[i]
	}
}
