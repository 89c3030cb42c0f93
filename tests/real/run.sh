#!/usr/bin/env bash
# tests/real/run.sh /abs/path/to/libheapctl.so
#
# Runs real programs doing real work twice, without and with
# LD_PRELOAD=<lib>, and requires identical stdout and exit status.  The run
# without the preload must succeed (exit 0, non-empty output), otherwise the
# case itself is broken and counts as failed.
#
# Prints one line per program: "ok <name>" or "FAIL <name>: <reason>", then
# "N passed, N failed" as the last line.  Details of failures (stderr tails,
# first differing lines) go to stderr.  Programs that are not installed are
# skipped with a note on stderr.  Exit status 0 iff nothing failed.
#
# Environment: HC_REAL_TIMEOUT (seconds per run, default 90).

set -u

if [ $# -ne 1 ]; then
	echo "usage: $0 /abs/path/to/libheapctl.so" >&2
	exit 2
fi
lib=$1
case "$lib" in
/*) ;;
*) lib="$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")" ;;
esac

passed=0
failed=0
T=${HC_REAL_TIMEOUT:-90}

ok() {
	echo "ok $1"
	passed=$((passed + 1))
}
fail() {
	echo "FAIL $1: $2"
	failed=$((failed + 1))
}
skip() {
	echo "skip $1: $2" >&2
}
finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit $?
}

if [ ! -f "$lib" ]; then
	fail setup "library $lib not found"
	finish
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/heapctl-real.XXXXXX") || {
	fail setup "mktemp failed"
	finish
}
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# Preload a private copy: a rebuild of the library while this script runs
# must not make single runs fail to load it.
cp "$lib" "$tmp/libheapctl.so" || {
	fail setup "cannot copy $lib"
	finish
}
lib="$tmp/libheapctl.so"

unset LD_PRELOAD
export LC_ALL=C TZ=UTC PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1
export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home/.config"
export GIT_CONFIG_NOSYSTEM=1
export HC_IN="$tmp/in"
mkdir -p "$HOME" "$HC_IN"

have() { command -v "$1" >/dev/null 2>&1; }

PY=
if have python3; then
	PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
fi
export PY

# ---------------------------------------------------------------------------
# runner

# run_case NAME FUNCTION: runs the exported shell function FUNCTION in a fresh
# directory once without and once with the preload, and compares.
run_case() {
	local name=$1 fn=$2
	local d="$tmp/case-$name"
	local t0=$SECONDS
	mkdir -p "$d/base" "$d/pre"
	(cd "$d/base" && exec timeout -k 5 "$T" bash -c "$fn" >"$d/base.out" 2>"$d/base.err" </dev/null)
	local sb=$?
	(cd "$d/pre" && exec timeout -k 5 "$T" env LD_PRELOAD="$lib" bash -c "$fn" >"$d/pre.out" 2>"$d/pre.err" </dev/null)
	local sp=$?
	if [ "$sb" -ne 0 ]; then
		fail "$name" "run without preload failed (status $sb): the test case itself is broken"
		{ echo "--- $name: stderr without preload:"; tail -n 15 "$d/base.err"; } >&2
		rm -rf "$d"
		return
	fi
	if [ ! -s "$d/base.out" ]; then
		fail "$name" "run without preload produced no output"
		rm -rf "$d"
		return
	fi
	if grep -q "ld.so: object .* cannot be preloaded" "$d/pre.err"; then
		fail "$name" "the library was not preloaded: $(grep -m1 'cannot be preloaded' "$d/pre.err")"
		rm -rf "$d"
		return
	fi
	if [ "$sp" -eq 124 ] || [ "$sp" -eq 137 ]; then
		fail "$name" "timed out after ${T}s with LD_PRELOAD (status $sp) but not without"
		{ echo "--- $name: stderr with preload:"; tail -n 15 "$d/pre.err"; } >&2
	elif [ "$sp" -ne "$sb" ]; then
		local sig=""
		[ "$sp" -gt 128 ] && sig=" (signal $((sp - 128)))"
		fail "$name" "exit status $sp$sig with LD_PRELOAD, $sb without"
		{ echo "--- $name: stderr with preload:"; tail -n 15 "$d/pre.err"; } >&2
	elif ! cmp -s "$d/base.out" "$d/pre.out"; then
		local line
		line=$(cmp "$d/base.out" "$d/pre.out" 2>&1 | head -n 1 | sed -e 's/.*differ: //' -e 's/.*EOF on .*pre.out.*/output with preload is shorter/' -e 's/.*EOF on .*base.out.*/output with preload is longer/')
		fail "$name" "stdout differs with LD_PRELOAD ($line)"
		{
			echo "--- $name: diff (without / with preload):"
			diff "$d/base.out" "$d/pre.out" | head -n 20
			echo "--- $name: stderr with preload:"
			tail -n 15 "$d/pre.err"
		} >&2
	else
		ok "$name"
	fi
	[ -n "${HC_REAL_VERBOSE:-}" ] && echo "    $name: $((SECONDS - t0)) s (both runs)" >&2
	rm -rf "$d"
}

# ---------------------------------------------------------------------------
# shared inputs (generated once, without the preload)

gen_inputs() {
	# ~8 MB of text lines "word number word"
	awk 'BEGIN {
        srand(12345);
        for (i = 0; i < 300000; i++) {
            w = "";
            n = 3 + int(rand() * 9);
            for (j = 0; j < n; j++) w = w sprintf("%c", 97 + int(rand() * 26));
            printf "%s %d %s%d\n", w, int(rand() * 1000000), substr(w, 1, 2), i % 977;
        }
    }' >"$HC_IN/lines.txt"

	# a generated C program of a few thousand lines
	awk 'BEGIN {
        print "#include <stdio.h>";
        print "#include <stdint.h>";
        print "#include <string.h>";
        print "#include <stdlib.h>";
        print "static uint64_t mix(uint64_t x) { x ^= x >> 31; x *= 0x9e3779b97f4a7c15ull; x ^= x >> 29; return x; }";
        N = 150;
        for (f = 0; f < N; f++) {
            printf "struct s%d { int a[%d]; uint64_t b; char name[%d]; };\n", f, 4 + f % 13, 8 + f % 24;
            printf "static uint64_t f%d(uint64_t x) {\n", f;
            printf "    struct s%d v;\n", f;
            printf "    memset(&v, 0, sizeof v);\n";
            printf "    char *heap = malloc(%d);\n", 16 + f * 29;
            printf "    for (int i = 0; i < %d; i++) {\n", 4 + f % 13;
            printf "        v.a[i] = (int)(mix(x + i) %% %d);\n", 1000 + f;
            printf "        switch ((v.a[i] + %d) %% 4) {\n", f;
            printf "        case 0: v.b += (uint64_t)v.a[i] * %d; break;\n", f + 3;
            printf "        case 1: v.b ^= mix(v.b + %d); break;\n", f;
            printf "        case 2: v.b -= (uint64_t)i << (%d %% 17); break;\n", f;
            printf "        default: v.b = v.b * 31 + %d; break;\n", f * 7;
            printf "        }\n";
            printf "    }\n";
            printf "    snprintf(v.name, sizeof v.name, \"f%d-%%d\", (int)(v.b %% 1000));\n", f;
            printf "    for (int i = 0; i < %d; i++) heap[i] = (char)(v.name[i %% sizeof v.name] + i);\n", 16 + f * 29;
            printf "    uint64_t h = 0;\n";
            printf "    for (int i = 0; i < %d; i++) h = h * 131 + (unsigned char)heap[i];\n", 16 + f * 29;
            printf "    free(heap);\n";
            printf "    return v.b ^ h ^ %s;\n", (f > 0 ? "f" (f - 1) "(x >> 1)" : "0");
            printf "}\n";
        }
        print "int main(void) {";
        print "    uint64_t s = 0;";
        print "    for (uint64_t k = 0; k < 40; k++) {";
        for (f = 0; f < N; f += 10) printf "        s = s * 3 + f%d(k * %d + s %% 7);\n", f, f + 1;
        print "    }";
        print "    printf(\"%llu\\n\", (unsigned long long)s);";
        print "    return 0;";
        print "}";
    }' >"$HC_IN/gen.c"
}

# ---------------------------------------------------------------------------
# cases (each runs in a fresh empty working directory)

case_preload_active() {
	# verifies that LD_PRELOAD really maps the library into the process
	if [ -n "$PY" ]; then
		"$PY" -c 'import sys, os
b = os.path.basename(sys.argv[1])
print("mapped" if any(b in l for l in open("/proc/self/maps")) else "not mapped")' "$HC_LIB"
	else
		if grep -q "$(basename "$HC_LIB")" /proc/self/maps; then echo mapped; else echo "not mapped"; fi
	fi
}

case_python_data() {
	"$PY" - <<'EOF'
import json, hashlib, random, collections, zlib, re, sys
random.seed(12345)
d = {f"key{i:06d}": {"n": i, "s": "x" * (i % 50), "l": list(range(i % 6))} for i in range(200000)}
s = json.dumps(d, sort_keys=True)
d2 = json.loads(s)
assert d2 == d
print("json", len(s), hashlib.sha256(s.encode()).hexdigest())
items = sorted(d2.items(), key=lambda kv: (-len(kv[1]["s"]), kv[0]))
print("sorted", items[0][0], items[-1][0], len(items))
words = ["".join(random.choice("abcdefghij") for _ in range(random.randint(2, 8))) for _ in range(100000)]
c = collections.Counter(words)
print("counter", len(c), c.most_common(3))
text = " ".join(words)
print("regex", len(re.findall(r"\b(a\w*b)\b", text)), hashlib.md5(re.sub(r"[aeiou]+", "-", text).encode()).hexdigest())
comp = zlib.compress(text.encode(), 6)
assert zlib.decompress(comp) == text.encode()
print("zlib", len(comp), hashlib.sha1(comp).hexdigest())
nums = [random.random() for _ in range(500000)]
nums.sort()
print("floats", repr(nums[0]), repr(nums[250000]), repr(sum(nums)))
# growth of big mutable objects (realloc paths)
b = bytearray()
for i in range(20000):
    b += bytes([i % 251]) * (i % 700)
print("bytearray", len(b), hashlib.sha256(b).hexdigest())
lst = []
for i in range(1000000):
    lst.append(i * 3)
del lst[::2]
print("list", len(lst), sum(lst))
big = b"z" * (64 << 20)
print("big", len(big), hashlib.md5(big).hexdigest())
del big, d, d2, items
EOF
}

case_python_threads() {
	PYTHONMALLOC=malloc "$PY" - <<'EOF'
import threading, queue, hashlib, json
import concurrent.futures as cf

def task(i):
    d = {}
    for j in range(20000):
        d.setdefault(f"{i}-{j % 997}", []).append(j * i)
    s = json.dumps(d, sort_keys=True)
    lst = sorted(d.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    b = bytearray()
    for j in range(2000):
        b += s[j * 10:j * 10 + 50].encode()
    return hashlib.sha256(s.encode() + bytes(b)).hexdigest()[:16] + f" {len(lst)}"

with cf.ThreadPoolExecutor(max_workers=4) as ex:
    res = list(ex.map(task, range(40)))
for r in res:
    print(r)

q = queue.Queue(maxsize=100)
out = {}
lock = threading.Lock()

def consumer():
    while True:
        item = q.get()
        if item is None:
            break
        k, payload = item
        h = hashlib.md5(payload * 3).hexdigest()
        with lock:
            out[k] = h

threads = [threading.Thread(target=consumer) for _ in range(4)]
for t in threads:
    t.start()
for k in range(30000):
    q.put((k, (str(k) * (k % 100 + 1)).encode()))
for _ in threads:
    q.put(None)
for t in threads:
    t.join()
print(len(out), hashlib.sha256("".join(out[k] for k in range(30000)).encode()).hexdigest())
EOF
}

case_perl() {
	perl - <<'EOF'
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
srand(42);
my @words = map { join '', map { chr(97 + int(rand(26))) } 1 .. (3 + int(rand(8))) } 1 .. 5000;
my @lines;
for my $i (1 .. 100000) {
    push @lines, join(' ', map { $words[int(rand(@words))] } 1 .. (5 + int(rand(10)))) . " id=$i val=" . int(rand(1e6));
}
my (%count, %bylen, %rev);
my $matches = 0;
my $out = '';
for (@lines) {
    $count{$1}++ while /\b([a-z]{4,7})\b/g;
    $bylen{length($1)} += $2 if /id=(\d+) val=(\d+)/;
    $matches++ if /^(\w+) .*\b\1\b/;
    (my $t = $_) =~ s/([aeiou])/uc $1/ge;
    $t =~ tr/a-z/n-za-m/;
    $rev{ reverse(substr($t, 0, 12)) } .= substr($t, -3);
    $out .= $t if length($out) < 2_000_000;
}
my %h;
$h{"key$_"} = [ $_, "v" x ($_ % 17), { n => $_ } ] for 1 .. 100000;
delete $h{"key$_"} for grep { $_ % 3 == 0 } 1 .. 100000;
my $hsum = 0;
$hsum += $h{$_}[0] + length($h{$_}[1]) for keys %h;
my $res = join("\n", map { "$_=$count{$_}" } sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count);
print md5_hex($res), "\n";
print join(",", map { "$_:$bylen{$_}" } sort { $a <=> $b } keys %bylen), "\n";
print "matches $matches\n";
print "hash ", scalar(keys %h), " $hsum\n";
print "rev ", scalar(keys %rev), " ", md5_hex(join("|", map { "$_=$rev{$_}" } sort keys %rev)), "\n";
print "out ", length($out), " ", md5_hex($out), "\n";
my @sorted = sort { $a cmp $b } @lines;
print "sorted ", md5_hex(join("\n", @sorted)), "\n";
EOF
}

case_git() {
	export GIT_AUTHOR_NAME="Heap Tester" GIT_AUTHOR_EMAIL="heap@example.invalid"
	export GIT_COMMITTER_NAME="Heap Tester" GIT_COMMITTER_EMAIL="heap@example.invalid"
	git init -q -b main repo || return 1
	cd repo || return 1
	git config gc.auto 0
	git config pack.threads 2
	git config core.autocrlf false
	mkdir -p d0 d1 d2 d3 d4 d5 d6 d7 d8 d9
	for c in 1 2 3 4 5 6; do
		awk -v c=$c 'BEGIN {
            for (f = 0; f < 300; f++) {
                if (c > 1 && (f + c) % 3 != 0) continue;
                fn = "d" (f % 10) "/f" f ".txt";
                for (l = 0; l < 60; l++)
                    print "line", l, "of file", f, "revision", c, "value", (l * f * c + c) % 9973 > fn;
                close(fn);
            }
        }'
		[ $c -ge 4 ] && rm -f d$c/f${c}0.txt d$c/f${c}1.txt
		git add -A || return 1
		GIT_AUTHOR_DATE="2020-01-0${c}T12:00:00Z" GIT_COMMITTER_DATE="2020-01-0${c}T12:00:00Z" \
		    git commit -q -m "commit $c" -m "body of commit $c" || return 1
	done
	git branch side HEAD~2
	echo "rev $(git rev-parse HEAD)"
	echo "log $(git log --stat | md5sum | cut -d' ' -f1)"
	echo "diff $(git diff --stat HEAD~3 HEAD | tail -n 1)"
	echo "blame $(git blame d3/f3.txt | md5sum | cut -d' ' -f1)"
	git gc -q || return 1
	git fsck --full --strict --no-progress 2>&1 || return 1
	git count-objects -v | grep -E '^(count|in-pack|packs):'
	echo "objects $(git cat-file --batch-all-objects --batch-check | sort | md5sum | cut -d' ' -f1)"
	echo "archive $(git archive --format=tar HEAD | md5sum | cut -d' ' -f1)"
	git repack -adfq --window=20 || return 1
	git fsck --full --no-progress 2>&1 || return 1
	echo "log2 $(git log --format='%H %an %s' side | md5sum | cut -d' ' -f1)"
}

case_gcc() {
	gcc -O2 -o prog "$HC_IN/gen.c" || return 1
	./prog || return 1
	echo "compiled $(wc -l <"$HC_IN/gen.c") lines"
}

case_cxx_threads() {
	"$HC_IN/mt" 6 || return 1
}

case_sort_parallel() {
	sort --parallel=4 -S 32M -T . -k2,2n -k1,1 "$HC_IN/lines.txt" | md5sum
	sort --parallel=4 -S 16M -T . -u -k3,3 "$HC_IN/lines.txt" | md5sum
	sort --parallel=2 -r "$HC_IN/lines.txt" | head -n 3
}

case_xz_threads() {
	head -c 4000000 "$HC_IN/lines.txt" >in.txt
	xz -T2 -1 --block-size=1MiB -c in.txt >lines.xz || return 1
	echo "xz $(sha256sum <lines.xz | cut -d' ' -f1)"
	echo "unxz $(xz -T2 -dc lines.xz | sha256sum | cut -d' ' -f1)"
	echo "orig $(sha256sum <in.txt | cut -d' ' -f1)"
	xz -t lines.xz || return 1
}

case_zstd_threads() {
	zstd -q -T2 -6 -c "$HC_IN/lines.txt" >lines.zst || return 1
	echo "zstd $(sha256sum <lines.zst | cut -d' ' -f1)"
	echo "unzstd $(zstd -q -T2 -dc lines.zst | sha256sum | cut -d' ' -f1)"
}

case_sqlite() {
	sqlite3 db.sqlite <<'EOF'
PRAGMA cache_size = -65536;
CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INT, c REAL);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 200000)
INSERT INTO t SELECT i, printf('name-%d-%s', i % 9973, substr(hex(i * 7919), 1, 6)), (i * 2654435761) % 100000, i * 0.5 FROM s;
CREATE INDEX ta ON t(a);
CREATE INDEX tb ON t(b);
SELECT count(*), sum(b), max(a) FROM t;
SELECT a, count(*) AS c FROM t GROUP BY a ORDER BY c DESC, a LIMIT 5;
SELECT b % 100 AS k, avg(c), count(*) FROM t GROUP BY k ORDER BY k LIMIT 5;
UPDATE t SET a = a || '-x' || id WHERE id % 7 = 0;
DELETE FROM t WHERE b < 30000;
CREATE TABLE u AS SELECT b % 1000 AS k, group_concat(id) AS ids FROM t GROUP BY k;
SELECT count(*), sum(length(ids)) FROM u;
SELECT count(*) FROM t JOIN u ON t.b % 1000 = u.k WHERE length(u.ids) > 100;
VACUUM;
SELECT count(*), sum(length(a)) FROM t;
SELECT group_concat(id) FROM (SELECT id FROM t ORDER BY b, id LIMIT 20);
PRAGMA integrity_check;
EOF
}

case_awk() {
	awk 'BEGIN {
        srand(7);
        for (i = 0; i < 200000; i++) {
            k = "k" int(rand() * 50000);
            cnt[k]++;
            s[k] = s[k] substr("abcdefghij", 1 + i % 10, 3);
            if (length(s[k]) > 60) s[k] = substr(s[k], 10);
        }
        n = 0;
        for (k in cnt) { n++; tot += cnt[k]; len += length(s[k]); }
        print "summary", n, tot, len;
        for (k in cnt) print k, cnt[k], s[k];
    }' | sort | md5sum
	awk '{ c[$3]++; w[$1] = w[$1] " " $2 } END { for (k in c) print k, c[k]; for (k in w) print k, length(w[k]) }' \
	    "$HC_IN/lines.txt" | sort | md5sum
}

export -f case_preload_active case_python_data case_python_threads case_perl case_git case_gcc \
    case_cxx_threads case_sort_parallel case_xz_threads case_zstd_threads case_sqlite case_awk
export HC_LIB="$lib"

# ---------------------------------------------------------------------------

start=$SECONDS
gen_inputs || {
	fail setup "generating inputs failed"
	finish
}

# the preload really takes effect (a missing or unloadable library would make
# every comparison pass vacuously)
out=$(env LD_PRELOAD="$lib" bash -c case_preload_active 2>"$tmp/preload.err")
if [ "$out" = "mapped" ]; then
	ok preload-active
else
	fail preload-active "libheapctl is not mapped into a process run with LD_PRELOAD ($out; $(head -c 300 "$tmp/preload.err" | tr '\n' ' '))"
fi

if [ -n "$PY" ]; then
	run_case python-data case_python_data
	run_case python-threads case_python_threads
else
	skip python "python3 not installed"
fi

if have perl && perl -MDigest::MD5 -e 1 2>/dev/null; then
	run_case perl case_perl
else
	skip perl "perl with Digest::MD5 not installed"
fi

if have git; then run_case git case_git; else skip git "git not installed"; fi

if have gcc; then run_case gcc case_gcc; else skip gcc "gcc not installed"; fi

if have g++; then
	cat >"$HC_IN/mt.cc" <<'EOF'
// threaded C++ workload: a mutex/condvar work queue, per-task containers,
// exceptions, results combined in task order (deterministic output)
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

static uint64_t work(int task) {
    std::map<std::string, std::vector<int>> m;
    std::unordered_map<int, std::string> u;
    uint64_t x = 88172645463325252ull + (uint64_t)task;
    uint64_t sum = 0;
    for (int i = 0; i < 30000; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        std::string k = "k" + std::to_string(x % 3000);
        m[k].push_back((int)(x % 1000));
        if (m[k].size() > 30) m.erase(k);
        u[(int)(x % 5000)] = std::string(x % 200, (char)('a' + x % 26));
        if (i % 1000 == 0) {
            try {
                if (x % 3 == 0) throw std::runtime_error(std::string(x % 500, 'e'));
                std::vector<char> big((size_t)(x % (4u << 20)) + 1, 'b');
                sum += big.size();
            } catch (const std::exception &e) {
                sum += std::string(e.what()).size();
            }
        }
    }
    for (auto &kv : m) { sum = sum * 31 + kv.first.size(); for (int v : kv.second) sum += (uint64_t)v; }
    for (auto &kv : u) sum += (uint64_t)kv.first * kv.second.size();
    return sum;
}

int main(int argc, char **argv) {
    int nthreads = argc > 1 ? std::atoi(argv[1]) : 4;
    const int ntasks = 64;
    std::deque<int> q;
    for (int i = 0; i < ntasks; i++) q.push_back(i);
    std::vector<uint64_t> res(ntasks);
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::unique_ptr<std::string>> handoff;
    std::vector<std::thread> th;
    for (int t = 0; t < nthreads; t++)
        th.emplace_back([&] {
            for (;;) {
                int task;
                {
                    std::unique_lock<std::mutex> g(mu);
                    if (q.empty()) return;
                    task = q.front();
                    q.pop_front();
                }
                uint64_t r = work(task);
                std::unique_ptr<std::string> s(new std::string(std::to_string(r)));
                std::lock_guard<std::mutex> g(mu);
                res[task] = r;
                handoff.push_back(std::move(s));
                if (handoff.size() > 10) handoff.erase(handoff.begin()); // freed by another thread
                cv.notify_all();
            }
        });
    for (auto &t : th) t.join();
    uint64_t total = 0;
    for (int i = 0; i < ntasks; i++) {
        total = total * 1000003 + res[i];
        if (i % 16 == 0) std::printf("task %d %llu\n", i, (unsigned long long)res[i]);
    }
    std::printf("total %llu\n", (unsigned long long)total);
    return 0;
}
EOF
	if g++ -std=gnu++17 -O2 -pthread -o "$HC_IN/mt" "$HC_IN/mt.cc" 2>"$tmp/mt.err"; then
		run_case cxx-threads case_cxx_threads
	else
		fail cxx-threads "compiling the C++ program failed: $(head -n 3 "$tmp/mt.err" | tr '\n' ' ')"
	fi
else
	skip cxx-threads "g++ not installed"
fi

run_case sort-parallel case_sort_parallel
if have xz; then run_case xz-threads case_xz_threads; else skip xz-threads "xz not installed"; fi
if have zstd; then run_case zstd-threads case_zstd_threads; else skip zstd-threads "zstd not installed"; fi
if have sqlite3; then run_case sqlite case_sqlite; else skip sqlite "sqlite3 not installed"; fi
if have awk; then run_case awk case_awk; else skip awk "awk not installed"; fi

echo "real programs: $((SECONDS - start)) s" >&2
finish
