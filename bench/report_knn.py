#!/usr/bin/env python3
"""report_knn.py: turns sieve-bench knn and torch_knn.py JSON lines (measured in the same run)
into a Markdown table (fused vs in-house materialized vs torch, floor, percent of floor,
speedup, recovery paths), the cost of large k, a summary against the retrieval targets
(bench/RESULTS.md quotes them: every shape within 1.2x of its floor; 5M float16 B = 64
k = 128 at or under 2.2 ms; 8,841,823 rows B = 64 under 3.9 ms; 5M B = 1024 under 14 ms;
k up to 8192 at most 15% over k = 128; beside the named shapes, torch's scoring GEMM alone
where torch_knn.py measured it; for each shape over 1.2x, where its time goes and a bound from
what was measured: the floor or the GEMM alone, plus the results over the bus, and for each
k-cost miss whether the extra results' transfer alone exceeds the 15%; and, with --torch,
sieve against torch's matmul + topk over every shape both measured, naming each shape where
torch's call was faster: torch leaves its results on the GPU, sieve's calls bring them to
the host) and PNG plots of time vs N and time vs k.

usage: bench/report_knn.py --sieve knn.json --torch torch.json [--ceilings c.json]
                           [--md out.md] [--plots PREFIX]
"""
import argparse
import json
import math
import sys


def load(path):
    rows = []
    if not path:
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def res(r):
    return r.get("results", "pageable")


FLOOR_RATIO = 1.2      # every shape within 1.2x of its floor
BW_GBS = 4250          # sieve-bench's default --bw: the memory side of its floor
DSIZE = {"float16": 2, "bfloat16": 2, "float32": 4}
# The device-to-host rate of page-locked copies measured on the H200 machine (100 MiB in
# 1.913 ms: bench/results/h200-v27-runs/probe.txt), and the fewest bytes a result can cross
# the bus in (a 32-bit row and a float32 score): the results' transfer after the select is a
# cost the floor leaves out.
BUS_GBS = 55
RESULT_BYTES = 8
K_COST = 0.15          # k up to K_MAX at most 15% over k = 128
K_MAX = 8192
# (N, batch, limit ms): the named shapes (float16; every k of the run up to 1024 is judged)
NAMED = [(5_000_000, 64, 2.2, (128,)), (8_841_823, 64, 3.9, (10, 128)),
         (5_000_000, 1024, 14.0, (10, 128, 1024))]


def verdict(ok):
    return "met" if ok else "missed"


def bound(r):
    """Which side of max(bytes / bandwidth, FLOPs / rate) the shape's floor is."""
    mem_ms = r["n"] * r.get("dim", 768) * DSIZE.get(r["dtype"], 2) / (BW_GBS * 1e6)
    return "memory" if r["floor_ms"] <= mem_ms * 1.001 else "compute"


def bus_ms(r):
    """The results' transfer to the host at the least: batch x k x RESULT_BYTES at BUS_GBS."""
    return r["batch"] * r["k"] * RESULT_BYTES / (BUS_GBS * 1e6)


def measured_bound(r, gemm):
    """A lower bound on the shape's call from what was measured, in ms, and what it is made
    of: the floor, or where the floor is compute-bound and torch's scoring GEMM alone was
    measured slower than the floor but faster than the search's scan phase, that GEMM (the
    machine's sustained matrix rate: the floor's rate is a short burst at the boost clock;
    a GEMM slower than the scan bounds nothing); plus the results over the bus, which follow
    the scan."""
    g = gemm.get((r["n"], r["dtype"], r["batch"]))
    if bound(r) == "compute" and g and r["floor_ms"] < g <= r.get("scan_ms", r["fused_ms"]):
        return g + bus_ms(r), "GEMM alone + bus"
    return r["floor_ms"] + bus_ms(r), "floor + bus"


def misses(timed, gemm=None):
    """Markdown lines: where each shape over 1.2x of its floor spends its time. The scan
    phase is sieve-bench's scan_ms (with the select and the download when the call queued
    them behind the scan: "in scan" in the table above); outside it, the query upload and
    sample, the select and the results' download to the host. Beside it the measured bound
    (measured_bound): where it is itself over 1.2x of the floor, the line cannot be reached
    on that machine."""
    gemm = gemm or {}
    missed = [r for r in timed if r["fused_ms"] > FLOOR_RATIO * r["floor_ms"]]
    if not missed or not all("scan_ms" in r for r in missed):
        return []
    out = ["", f"  Where the {len(missed)} shapes over {FLOOR_RATIO}x spend their time (scan: the "
           "fused scan phase, with the select and download where they were queued behind it; "
           "outside: query upload and sample, select, result download; the phases are those of "
           "the last timed call, the time the median; floor bound: the side of the floor's max "
           f"at {BW_GBS} GB/s; bus: batch x k results of {RESULT_BYTES} bytes at {BUS_GBS} GB/s, "
           "the device-to-host rate measured; measured bound: the floor, or torch's scoring "
           "GEMM alone where the floor is compute-bound and the GEMM took longer than the floor "
           "but not longer than the scan, plus the bus):",
           "",
           "  | N | dtype | results | B | k | time / floor | floor bound | scan / floor | "
           "outside the scan, ms | over 1.2x by, ms | bus, ms | measured bound / floor |",
           "  |---|---|---|---|---|---|---|---|---|---|---|---|"]
    scan_ok = 0
    beyond = []
    for r in missed:
        scan = min(r["scan_ms"], r["fused_ms"])
        scan_ok += scan <= FLOOR_RATIO * r["floor_ms"]
        mb, what = measured_bound(r, gemm)
        if mb > FLOOR_RATIO * r["floor_ms"]:
            beyond.append(what)
        out.append(f"  | {r['n']:,} | {r['dtype']} | {res(r)} | {r['batch']} | {r['k']} | "
                   f"{r['fused_ms'] / r['floor_ms']:.2f}x | {bound(r)} | {scan / r['floor_ms']:.2f}x | "
                   f"{r['fused_ms'] - scan:.3f} | {r['fused_ms'] - FLOOR_RATIO * r['floor_ms']:.3f} | "
                   f"{bus_ms(r):.3f} | {mb / r['floor_ms']:.2f}x ({what}) |")
    out.append("")
    out.append(f"  Of these {len(missed)}, the scan phase alone is within {FLOOR_RATIO}x in {scan_ok}: "
               "their time over the floor is outside the scan.")
    if beyond:
        n_g = sum(1 for w in beyond if w.startswith("GEMM"))
        out.append(f"  In {len(beyond)} of them the measured bound is itself over {FLOOR_RATIO}x of "
                   f"the floor ({n_g} with the GEMM alone, {len(beyond) - n_g} with the floor): "
                   "no search reaches the line there at the rates measured on that machine.")
    return out


def against_torch(timed, torch):
    """Markdown lines: sieve against torch's matmul + topk over the shapes both measured (the
    geometric mean of torch's time over sieve's, the range, and every shape where torch's
    call was faster). torch's time (CUDA events around matmul + topk) leaves the results on
    the GPU; sieve's whole call also uploads the queries and copies the results into the
    caller's host arrays, which at large k is a visible part of it."""
    pairs = [(torch[shape_key(r)] / r["fused_ms"], r) for r in timed if torch.get(shape_key(r))]
    if not pairs:
        return []
    geo = math.exp(sum(math.log(x) for x, _ in pairs) / len(pairs))
    lo, hi = min(pairs, key=lambda p: p[0]), max(pairs, key=lambda p: p[0])

    def name(r):
        return f"{r['n']:,} {r['dtype']} {res(r)} B = {r['batch']} k = {r['k']}"
    out = [f"- Against torch's matmul + topk (its results left on the GPU; sieve's calls include "
           f"the query upload and the results' copy to the host): {geo:.2f}x over {len(pairs)} "
           f"shapes (geometric mean), from {hi[0]:.2f}x ({name(hi[1])}) to {lo[0]:.2f}x "
           f"({name(lo[1])})."]
    slower = [(x, r) for x, r in pairs if x < 1.0]
    if slower:
        out.append(f"  Slower than torch's call at {len(slower)}: " +
                   "; ".join(f"{name(r)} ({x:.2f}x)" for x, r in slower) + ".")
    return out


def shape_key(r):
    """A shape as torch_knn.py's lines name it: (N, dtype, batch, k)."""
    return (r["n"], r["dtype"], r["batch"], r["k"])


def targets(sv, gemm=None, torch=None):
    """Markdown lines judging the sieve rows `sv` against the retrieval targets. gemm: (N,
    dtype, batch) -> torch's scoring GEMM alone in ms (torch_knn.py's matmul_ms), printed
    beside the named shapes it is known for; torch: (N, dtype, batch, k) -> torch's matmul +
    topk in ms, summarised by against_torch."""
    gemm = gemm or {}
    out = ["", "Against the targets:", ""]
    timed = [r for r in sv if r.get("fused_ms") and r.get("floor_ms")]
    within = [r for r in timed if r["fused_ms"] <= FLOOR_RATIO * r["floor_ms"]]
    out.append(f"- Within {FLOOR_RATIO}x of the floor: {len(within)} of {len(timed)} shapes.")
    out.append("")
    out.append("  | N | dtype | results | shapes | within 1.2x | worst (B, k, time / floor) |")
    out.append("  |---|---|---|---|---|---|")
    groups = {}
    for r in timed:
        groups.setdefault((r["n"], r["dtype"], res(r)), []).append(r)
    for (n, d, rs), g in sorted(groups.items()):
        w = max(g, key=lambda r: r["fused_ms"] / r["floor_ms"])
        ok = sum(1 for r in g if r["fused_ms"] <= FLOOR_RATIO * r["floor_ms"])
        out.append(f"  | {n:,} | {d} | {rs} | {len(g)} | {ok} | B = {w['batch']}, k = {w['k']}, "
                   f"{w['fused_ms'] / w['floor_ms']:.2f}x |")
    out.extend(misses(timed, gemm))
    out.append("")
    for n, b, limit, ks in NAMED:
        for r in timed:
            if (r["n"], r["dtype"], r["batch"]) == (n, "float16", b) and r["k"] in ks:
                g = gemm.get((n, "float16", b))
                also = f"; the GEMM alone (torch, no selection) {g:.3f} ms" if g else ""
                out.append(f"- {n:,} float16 {res(r)} B = {b} k = {r['k']}: {r['fused_ms']:.3f} ms "
                           f"(target {limit} ms{also}): {verdict(r['fused_ms'] <= limit)}")
    base = {(r["n"], r["dtype"], res(r), r["batch"]): r["fused_ms"] for r in timed if r["k"] == 128}
    costs = {}
    for r in timed:
        key = (r["n"], r["dtype"], res(r), r["batch"])
        if 128 < r["k"] <= K_MAX and key in base:
            c = r["fused_ms"] / base[key] - 1.0
            if key not in costs or c > costs[key][0]:
                costs[key] = (c, r["k"])
    if costs:
        ok = sum(1 for c, _ in costs.values() if c <= K_COST)
        out.append(f"- k up to {K_MAX} at most {K_COST:.0%} over k = 128: {ok} of {len(costs)} shapes; "
                   "the largest cost of each:")
        for (n, d, rs, b), (c, k) in sorted(costs.items()):
            # the k results more than at k = 128 cross the bus after the select: where that
            # alone costs more than the allowance, no search meets it on this machine
            extra = b * (k - 128) * RESULT_BYTES / (BUS_GBS * 1e6) / base[(n, d, rs, b)]
            why = (f" (the extra results over the bus alone: {extra:+.0%})"
                   if c > K_COST and extra > K_COST else "")
            out.append(f"  - {n:,} {d} {rs} B = {b}: {c:+.0%} at k = {k}: {verdict(c <= K_COST)}{why}")
    out.extend(against_torch(timed, torch or {}))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sieve", required=True, help="sieve-bench knn --json output")
    ap.add_argument("--torch", help="bench/torch_knn.py --json output from the same run")
    ap.add_argument("--ceilings", help="bench/torch_knn.py --ceilings output from the same run")
    ap.add_argument("--md", help="write the Markdown table here (default: stdout)")
    ap.add_argument("--plots", help="write PREFIX-vs-n.png and PREFIX-vs-k.png")
    a = ap.parse_args()
    allsv = load(a.sieve)
    tq = {shape_key(r): r.get("torch_ms") for r in load(a.torch) if r.get("mode") == "torch"}
    ceil = {r["what"]: r["value"] for r in load(a.ceilings) if r.get("mode") == "ceiling"}
    gemm = {(r["n"], r["dtype"], r["batch"]): r["matmul_ms"] for r in load(a.torch)
            if r.get("mode") == "torch" and r.get("matmul_ms")}
    out = []
    sv = allsv
    if ceil:
        out.append("Measured ceilings in this run: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(ceil.items())) + "\n")
    # "of which download": copying the results to the caller's host arrays, part of the
    # fused time (torch's time, CUDA events around matmul + topk, has no such copy); "in
    # scan" where the call speculated on its select (select_speculated): the download was
    # queued behind the scan and waited for with it, so it has no time of its own
    # "results": where the caller's query and result arrays live (sieve-bench --results;
    # pinned ones are read and written by the copy engine directly, pageable ones through a
    # staging buffer)
    out.append("| N | dtype | results | B | k | fused ms | of which download | materialized ms | torch ms | floor ms | % of floor | vs torch | admitted/query | exact | paths c/u/o/f/d |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sv:
        t = tq.get(shape_key(r))
        pct = 100.0 * r["floor_ms"] / r["fused_ms"] if r["fused_ms"] else 0
        vs = f"{t / r['fused_ms']:.2f}x" if t else "-"
        def num(v, fmt):
            return format(v, fmt) if isinstance(v, (int, float)) else "-"

        def dl(r):
            if r.get("select_speculated") and not r.get("speculation_missed"):
                return "in scan"
            return num(r.get("download_ms"), ".3f")
        out.append(
            f"| {r['n']:,} | {r['dtype']} | {res(r)} | {r['batch']} | {r['k']} | {num(r['fused_ms'], '.3f')} | "
            f"{dl(r)} | {num(r['materialized_ms'], '.2f')} | {num(t, '.3f')} | {num(r['floor_ms'], '.3f')} | "
            f"{pct:.0f}% | {vs} | {r['admitted_per_query']:.0f} | {r['exact']} | "
            f"{'/'.join(str(x) for x in r['paths'])} |")
    # what large k costs: fused time at k over the same shape's time at k = 128
    base = {(r["n"], r["dtype"], res(r), r["batch"]): r["fused_ms"] for r in sv if r["k"] == 128 and r["fused_ms"]}
    big = sorted({r["k"] for r in sv if r["k"] > 128})
    lines = []
    for (n, d, rs, b), t128 in sorted(base.items()):
        cells = []
        for k in big:
            t = next((r["fused_ms"] for r in sv if (r["n"], r["dtype"], res(r), r["batch"], r["k"]) == (n, d, rs, b, k)), None)
            cells.append(f"{100.0 * (t / t128 - 1):+.0f}%" if t else "-")
        if any(c != "-" for c in cells):
            lines.append(f"| {n:,} | {d} | {rs} | {b} | {t128:.3f} | " + " | ".join(cells) + " |")
    if lines:
        out.append("")
        out.append("Cost of large k (fused time over the same shape at k = 128):")
        out.append("")
        out.append("| N | dtype | results | B | k=128 ms | " + " | ".join(f"k={k}" for k in big) + " |")
        out.append("|---|---|---|---|---|" + "---|" * len(big))
        out.extend(lines)
    out.extend(targets(sv, gemm, tq))
    text = "\n".join(out) + "\n"
    if a.md:
        open(a.md, "w").write(text)
    else:
        sys.stdout.write(text)
    if a.plots:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib not installed: no plots", file=sys.stderr)
            return 0
        sv = [r for r in allsv if res(r) == "pageable"]  # the plots compare like with like
        # time vs N at k=128 per batch (fp16)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, b in enumerate(sorted({r["batch"] for r in sv})):
            color = f"C{i}"
            pts = sorted((r["n"], r["fused_ms"]) for r in sv if r["batch"] == b and r["k"] == 128 and r["dtype"] == "float16")
            if len(pts) > 1:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=f"sieve B={b}")
            tp = sorted((n, v) for (n, d, bb, k), v in tq.items() if bb == b and k == 128 and d == "float16" and v)
            if len(tp) > 1:
                ax.plot([p[0] for p in tp], [p[1] for p in tp], "x--", color=color, alpha=0.6, label=f"torch B={b}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("stored vectors (N), d=768 float16")
        ax.set_ylabel("ms per batch (k=128)")
        ax.set_title("exact k-NN on the H200: time vs N")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(a.plots + "-vs-n.png", dpi=110)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        # the N with the most float16 (batch, k) shapes, the largest on a tie
        counts = {}
        for r in sv:
            if r["dtype"] == "float16":
                counts[r["n"]] = counts.get(r["n"], 0) + 1
        nmax = max(counts, key=lambda n: (counts[n], n)) if counts else max(r["n"] for r in sv)
        for i, b in enumerate(sorted({r["batch"] for r in sv})):
            color = f"C{i}"
            pts = sorted((r["k"], r["fused_ms"]) for r in sv if r["batch"] == b and r["n"] == nmax and r["dtype"] == "float16")
            if len(pts) > 1:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=f"sieve B={b}")
            tp = sorted((k, v) for (n, d, bb, k), v in tq.items() if bb == b and n == nmax and d == "float16" and v)
            if len(tp) > 1:
                ax.plot([p[0] for p in tp], [p[1] for p in tp], "x--", color=color, alpha=0.6, label=f"torch B={b}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("k")
        ax.set_ylabel(f"ms per batch (N={nmax:,})")
        ax.set_title("exact k-NN on the H200: time vs k")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(a.plots + "-vs-k.png", dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
