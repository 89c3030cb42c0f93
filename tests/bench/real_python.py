# real_python — a real program under the preload: Debian's /usr/bin/python3
# run with PYTHONMALLOC=malloc, so every object, string, dict, list and
# frame it creates goes through malloc/realloc/free instead of pymalloc.
# It builds a large list of small dicts of strings, sorts it, groups it and
# serialises the result.
#
# Deterministic: a fixed LCG makes the data, output is sorted, and run.sh sets
# PYTHONHASHSEED=0 so even the allocation order repeats. Prints one line,
# "checksum=<hex>". Argument: number of records.
import os
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 40000

pre = os.environ.get("LD_PRELOAD")
if pre:  # prove the preload took effect
    with open("/proc/self/maps") as maps:
        if os.path.basename(pre) not in maps.read():
            print(f"real_python: {pre} not mapped", file=sys.stderr)
            sys.exit(4)

seed = 12345


def rnd():
    global seed
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed >> 4


SYLL = "ka lo mi nu pe ra si to vu xe za bo cy de fu".split()


def word():
    return "".join(SYLL[rnd() % len(SYLL)] for _ in range(1 + rnd() % 5))


recs = []
for i in range(n):
    tags = [word() for _ in range(1 + rnd() % 4)]
    recs.append({"id": i, "name": word() + " " + word(), "city": word(),
                 "score": rnd() % 1000, "tags": tags,
                 "note": ",".join(tags) * (1 + rnd() % 3)})
    if i % 7 == 6:  # churn: drop a random earlier record
        k = rnd() % len(recs)
        recs[k] = recs[-1]
        recs.pop()

recs.sort(key=lambda r: (r["city"], -r["score"], r["id"]))
bycity = {}
for r in recs:
    bycity.setdefault(r["city"], []).append(r["name"])
out = [f"{c}\t{len(v)}\t{'|'.join(v[:10])}" for c, v in sorted(bycity.items())]
words = {}
for r in recs:
    for w in r["name"].split(" "):
        words[w] = words.get(w, 0) + 1
out.extend(f"{w}={words[w]}" for w in sorted(words))
data = "\n".join(out).encode()
print("checksum=%08x%08x" % (len(data), sum(data) & 0xFFFFFFFF))
