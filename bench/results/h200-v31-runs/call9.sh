# Call 9 (device call 10): a build with call9_timing.patch (not on main): with SIEVE_CUDA_CTA_TIMES set, each
# CTA of the TMA gate scan records the global timer (ns) at entry, when its consumers have
# the first chunk, and when each consumer warpgroup leaves, with its SM and its tile count
# (in unused rows of the tile log), and the search prints them after the scan. 1M and 5M
# rows, B = 1, 16 and 64, k = 10 and 128, one warm-up and three timed calls.
D=$OUT/c9; . bench/results/h200-v31-runs/common.sh
for n in 1m 5m; do for b in 1 16 64; do for k in 10 128; do
  SIEVE_CUDA_CTA_TIMES=1 timeout 120 $SB knn --n $n --batch $b --k $k --repeat 3 --warmup 1 \
    --no-materialized > $D/cta_${n}_b${b}_k$k.log 2>&1
  python3 - $D/cta_${n}_b${b}_k$k.log "$n B=$b k=$k" <<'PY'
import re, sys, statistics as st
runs, cur = [], []
for l in open(sys.argv[1]):
    if l.startswith("CTA "):
        m = re.match(r"CTA (\d+) sm (\d+) start ([-\d.]+) first ([-\d.]+) end0 ([-\d.]+) end1 ([-\d.]+) tiles (\d+)", l)
        v = [float(x) for x in m.groups()]
        if v[0] == 0 and cur: runs.append(cur); cur = []
        cur.append(v)
if cur: runs.append(cur)
for i, r in enumerate(runs[1:], 1):  # the warm-up left out
    ends = [max(x[4], x[5]) for x in r]; tiles = [x[6] for x in r]
    med = st.median(ends); late = sorted(ends)[-3:]
    slow = max(r, key=lambda x: max(x[4], x[5]))
    print("%s run %d: %d CTAs, start max %.1f, first chunk med %.1f, end min %.1f med %.1f max %.1f (latest three %s), tiles %d-%d; the last CTA sm %d with %d tiles" % (
        sys.argv[2], i, len(r), max(x[2] for x in r), st.median(x[3] for x in r), min(ends), med, max(ends),
        ", ".join("%.1f" % e for e in late), min(tiles), max(tiles), slow[1], slow[6]))
PY
done; done; done
tar czf $OUT/call9.tar.gz -C $OUT c9 && rm -rf $D
