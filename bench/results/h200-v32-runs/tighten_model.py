#!/usr/bin/env python3
"""A host-side model of one query's admissions in the gate scan (no GPU): N rows of normal
scores arriving in random order, a strided sample of S = 16384 rows proposing the boundary
at the rank of kernels/proposal.c, 256 bins over [boundary, sample maximum], and the
boundary raised to the highest bin edge whose count reaches k on a schedule: "old" (k, 2k,
4k, ... below max(k, 256), then its multiples: tighten_due), "k/4" (also every k / 4 after
k: tighten_due_warp), "k/16", "each" (after every admission). lag: admissions counted
only that many entries later (entries reserved, not yet counted). Prints the mean
admissions of three seeds for k = 128 and 1024.
usage: tighten_model.py N   (e.g. 1000000; needs numpy)"""
import math, sys
if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) == 2 else 2)
import numpy as np
def brank(r, eps=1e-5):
    before = math.floor(1.25*r + 3*math.sqrt(r) + 2)
    j = int(r)
    while True:
        x = j + 1.0
        lp = -r + x*math.log(r) - math.lgamma(x+1)
        if lp - math.log1p(-r/(x+1)) <= math.log(eps): return max(j, before)
        j += 1
def run(N, k, S, sched, lag, seed):
    rng = np.random.default_rng(seed)
    sc = rng.standard_normal(N).astype(np.float32)
    stride = N // S; off = rng.integers(stride)
    samp = np.sort(sc[off::stride][:S])[::-1]
    j = brank(k*S/N)
    lo = samp[j]; hi = samp[0]; w = (hi - lo)/256
    edges = lo + w*np.arange(256)
    cand_idx = np.nonzero(sc >= lo)[0]
    order = rng.permutation(N)  # arrival position of each row
    cand = cand_idx[np.argsort(order[cand_idx])]
    thr = lo; hist = np.zeros(256, np.int64); pend = []
    n = 0
    for i in cand:
        s = sc[i]
        if s < thr: continue
        n += 1
        b = min(255, max(0, int((s - lo)/w)))
        pend.append(b)
        if len(pend) > lag:
            hist[pend.pop(0)] += 1
        if sched(n, k):
            cum = np.cumsum(hist[::-1])[::-1]
            ok = np.nonzero(cum >= k)[0]
            if len(ok): thr = max(thr, edges[ok[-1]])
    return n
def old(n,k):
    step = max(k,256)
    if n < k: return False
    if n < step: return n % k == 0 and ((n//k) & (n//k - 1)) == 0
    return n % step == 0
def every(s):
    def f(n,k):
        if n < k: return False
        ss = s(k)
        return (n-k) % ss == 0 or old(n,k)
    return f
p2 = lambda v: 1 << (int(v).bit_length()-1)
scheds = {'old': old, 'k/4': every(lambda k: max(p2(k//4),64)), 'k/16': every(lambda k: max(p2(k//16),16)), 'each': every(lambda k: 1)}
N = int(sys.argv[1]); S = 16384
for k in [128, 1024]:
    for lag in [0, 64, 512]:
        res = {name: np.mean([run(N, k, S, f, lag, sd) for sd in range(3)]) for name, f in scheds.items()}
        print(N, k, 'lag', lag, ' '.join('%s %.0f' % kv for kv in res.items()), flush=True)
