#!/usr/bin/env python3
"""sass_top.py: summarises the per-instruction CSV that `bench/gpu/run.sh stalls` exports
(Nsight Compute's source page, SASS): the share of warp samples by stall reason, the
instructions holding the most samples (with their execution counts and top reasons), and,
with --chunks N, the samples per run of N consecutive instructions (to see which part of a
kernel, e.g. the main loop or the epilogue, holds the time).

usage: bench/gpu/sass_top.py stalls_B1024_k8192_sass.csv [--top 30] [--chunks 250]
"""
import argparse
import collections
import csv


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="stalls_*_sass.csv from bench/gpu/run.sh stalls")
    ap.add_argument("--top", type=int, default=30, help="instructions to list (default 30)")
    ap.add_argument("--chunks", type=int, default=0,
                    help="also sum samples over runs of this many instructions")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.reader(f))
    # line 1 names the kernel, line 2 is the header
    hdr_at = next(i for i, r in enumerate(rows) if "Address" in r and "Source" in r)
    hdr, data = rows[hdr_at], rows[hdr_at + 1:]
    src = hdr.index("Source")
    smp = hdr.index("Warp Stall Sampling (All Samples)")
    exe = hdr.index("Instructions Executed")
    reasons = [(i, h[len("stall_"):]) for i, h in enumerate(hdr)
               if h.startswith("stall_") and "Not Issued" not in h]

    def num(r, i):
        try:
            return float(r[i])
        except (ValueError, IndexError):
            return 0.0

    total = sum(num(r, smp) for r in data) or 1.0
    print(f"{rows[0][1] if len(rows[0]) > 1 else ''}")
    print(f"{int(total)} warp samples over {len(data)} instructions")
    by = collections.Counter()
    for r in data:
        for i, name in reasons:
            by[name] += num(r, i)
    print("by reason: " + ", ".join(f"{name} {100 * v / total:.1f}%"
                                     for name, v in by.most_common(10)))
    print(f"\n{'share':>6} {'line':>6} {'executed':>11}  instruction")
    order = sorted(range(len(data)), key=lambda n: -num(data[n], smp))
    for n in order[:a.top]:
        r = data[n]
        top = sorted(((num(r, i), name) for i, name in reasons), reverse=True)[:3]
        why = ", ".join(f"{name} {int(v)}" for v, name in top if v > 0)
        print(f"{100 * num(r, smp) / total:5.1f}% {n:6d} {int(num(r, exe)):11d}  "
              f"{r[src].strip()[:64]:64s} {why}")
    if a.chunks > 0:
        print(f"\nsamples per {a.chunks} instructions (runs holding at least 0.5%)")
        for s in range(0, len(data), a.chunks):
            ch = data[s:s + a.chunks]
            v = sum(num(r, smp) for r in ch)
            if v / total >= 0.005:
                print(f"{s:6d}-{s + len(ch):6d} {100 * v / total:5.1f}%  "
                      f"executed {sum(num(r, exe) for r in ch) / 1e6:9.1f} M  "
                      f"first: {ch[0][src].strip()[:48]}")


if __name__ == "__main__":
    main()
