# Summarises an Nsight Compute per-SASS-line CSV (ncu --page source --csv --print-source sass):
# stall reasons over the kernel, the executed instruction mix, the top lines by samples.
# usage: python3 stalls_summary.py FILE.csv [TOP]
import csv, sys, collections
f = sys.argv[1]; top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
rows = list(csv.reader(open(f)))
hdr = rows[1]; data = [r for r in rows[2:] if len(r) == len(hdr)]
si = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
S = hdr.index("Warp Stall Sampling (All Samples)"); E = hdr.index("Instructions Executed"); src = hdr.index("Source")
tot = sum(float(r[S] or 0) for r in data)
agg = collections.Counter()
ops = collections.Counter()
for r in data:
    for i in si: agg[hdr[i][6:]] += float(r[i] or 0)
    op = r[src].split()[0] if r[src].split() else ''
    if op.startswith('@'): op = r[src].split()[1]
    ops[op.split('.')[0]] += float(r[E].replace(',', '') or 0)
print("total samples", tot)
print([(round(100 * v / tot, 1), k) for k, v in agg.most_common(10)])
te = sum(ops.values()); print("executed warp instructions %.3g" % te, [(k, round(100 * v / te, 1)) for k, v in ops.most_common(12)])
data.sort(key=lambda r: -float(r[S] or 0))
for r in data[:top]:
    st = sorted(((float(r[i] or 0), hdr[i][6:]) for i in si), reverse=True)[:3]
    print("%5.1f%% %s %-60s %s" % (100 * float(r[S] or 0) / tot, r[0][-5:], r[src].strip()[:60], st))
