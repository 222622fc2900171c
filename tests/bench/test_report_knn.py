#!/usr/bin/env python3
"""bench/report_knn.py on JSON lines with known values: the Markdown table and the summary
against the retrieval targets (within 1.2x of the floor, the named shapes, the cost of
large k) say what the numbers imply, shape by shape; --help describes the summary.

Run: python3 tests/bench/test_report_knn.py
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_check import SRC, check, failures  # noqa: E402

REPORT = os.path.join(SRC, "bench", "report_knn.py")


def row(n, dtype, b, k, fused, floor, results="pageable", scan=None):
    return {"mode": "knn", "n": n, "dtype": dtype, "dim": 768, "results": results, "batch": b,
            "k": k, "fused_ms": fused, "materialized_ms": None, "floor_ms": floor, "exact": "yes",
            "admitted_per_query": 10.0 * k, "paths": [b, 0, 0, 0, 0], "download_ms": 0.01,
            "scan_ms": fused - 0.1 if scan is None else scan}


def main():
    rows = [
        row(5_000_000, "float16", 64, 128, 2.0, 1.8),        # 1.11x; named shape: met
        row(5_000_000, "float16", 64, 8192, 2.4, 1.8, scan=2.1),     # 1.33x; +20% over k = 128
        row(5_000_000, "float16", 1024, 128, 14.5, 11.1, scan=14.2), # 1.31x; named shape: missed
        row(8_841_823, "float16", 64, 10, 3.5, 3.2),         # 1.09x; named shape: met
        row(5_000_000, "float32", 16, 128, 4.0, 3.6),        # 1.11x
        row(5_000_000, "float32", 16, 1024, 4.2, 3.6),       # 1.17x; +5% over k = 128
        row(1_000_000, "float16", 1024, 128, 3.0, 2.2, scan=2.9),    # 1.36x, compute-bound
        row(1_000_000, "float16", 1024, 8192, 7.5, 2.2, scan=5.0),   # 3.41x; +150% over k = 128
    ]
    # a speculated call: its download has no time of its own ("in scan"); a missed one does
    rows[4].update(select_speculated=1, speculation_missed=0)
    rows[5].update(select_speculated=1, speculation_missed=1)
    tmp = tempfile.mkdtemp(prefix="test-report-knn-")
    src = os.path.join(tmp, "knn.json")
    with open(src, "w") as f:
        f.write("# a comment line is skipped\n")
        for r in rows:
            f.write(json.dumps(r) + "\n")
    md = os.path.join(tmp, "out.md")
    p = subprocess.run([sys.executable, REPORT, "--sieve", src, "--md", md], capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, "report_knn.py exits 0", (p.returncode, p.stderr[-500:]), 0)
    text = open(md).read() if os.path.exists(md) else ""
    lines = text.splitlines()

    def has(line):
        check(line in lines, f"the report has: {line.strip()}", [x for x in lines if x.strip()][-12:], line)

    # the main table keeps one line per shape, with the percent of floor
    check(sum(1 for x in lines if x.startswith("| 5,000,000 | float16 |") and "| yes |" in x) == 3,
          "three float16 5M lines in the table", text[:400], 3)
    has("| 5,000,000 | float16 | pageable | 64 | 128 | 2.000 | 0.010 | - | - | 1.800 | 90% | - | 1280 | yes | 64/0/0/0/0 |")
    has("| 5,000,000 | float32 | pageable | 16 | 128 | 4.000 | in scan | - | - | 3.600 | 90% | - | 1280 | yes | 16/0/0/0/0 |")
    has("| 5,000,000 | float32 | pageable | 16 | 1024 | 4.200 | 0.010 | - | - | 3.600 | 86% | - | 10240 | yes | 16/0/0/0/0 |")
    # cost of large k
    has("| 5,000,000 | float16 | pageable | 64 | 2.000 | - | +20% |")
    # the summary against the targets
    has("- Within 1.2x of the floor: 4 of 8 shapes.")
    has("  | 1,000,000 | float16 | pageable | 2 | 0 | B = 1024, k = 8192, 3.41x |")
    has("  | 5,000,000 | float16 | pageable | 3 | 1 | B = 64, k = 8192, 1.33x |")
    has("  | 5,000,000 | float32 | pageable | 2 | 2 | B = 16, k = 1024, 1.17x |")
    has("  | 8,841,823 | float16 | pageable | 1 | 1 | B = 64, k = 10, 1.09x |")
    # the misses by phase: the scan alone within 1.2x at B = 64 (the time is outside it), not
    # at B = 1024; which side of the floor binds (5M float16 read once: 1.807 ms at 4250 GB/s);
    # the results over the bus (B x k x 8 bytes at 55 GB/s) and the measured bound (without
    # torch's lines: the floor plus the bus); at 1M B = 1024 k = 8192 the bus alone puts the
    # bound over 1.2x of the floor
    has("  | 5,000,000 | float16 | pageable | 64 | 8192 | 1.33x | memory | 1.17x | 0.300 | 0.240 | "
        "0.076 | 1.04x (floor + bus) |")
    has("  | 5,000,000 | float16 | pageable | 1024 | 128 | 1.31x | compute | 1.28x | 0.300 | 1.180 | "
        "0.019 | 1.00x (floor + bus) |")
    has("  | 1,000,000 | float16 | pageable | 1024 | 128 | 1.36x | compute | 1.32x | 0.100 | 0.360 | "
        "0.019 | 1.01x (floor + bus) |")
    has("  | 1,000,000 | float16 | pageable | 1024 | 8192 | 3.41x | compute | 2.27x | 2.500 | 4.860 | "
        "1.220 | 1.55x (floor + bus) |")
    has("  Of these 4, the scan phase alone is within 1.2x in 1: their time over the floor is "
        "outside the scan.")
    has("  In 1 of them the measured bound is itself over 1.2x of the floor (0 with the GEMM alone, "
        "1 with the floor): no search reaches the line there at the rates measured on that machine.")
    has("- 5,000,000 float16 pageable B = 64 k = 128: 2.000 ms (target 2.2 ms): met")
    has("- 8,841,823 float16 pageable B = 64 k = 10: 3.500 ms (target 3.9 ms): met")
    has("- 5,000,000 float16 pageable B = 1024 k = 128: 14.500 ms (target 14.0 ms): missed")
    has("- k up to 8192 at most 15% over k = 128: 1 of 3 shapes; the largest cost of each:")
    # a miss where the extra results' transfer alone exceeds the allowance says so; one where
    # it does not (B = 64: +4%) does not
    has("  - 1,000,000 float16 pageable B = 1024: +150% at k = 8192: missed (the extra results "
        "over the bus alone: +40%)")
    has("  - 5,000,000 float16 pageable B = 64: +20% at k = 8192: missed")
    has("  - 5,000,000 float32 pageable B = 16: +5% at k = 1024: met")
    # a shape that is not named is not judged against a named limit
    check(not any("float32" in x and "target" in x for x in lines), "no named target for float32 lines",
          [x for x in lines if "target" in x], [])
    # without torch's lines there is no comparison with torch
    check(not any(x.startswith("- Against torch") for x in lines), "no torch summary without --torch",
          [x for x in lines if "torch" in x], [])

    def with_torch(torch_rows, what):
        """The report's lines with torch_knn.py lines (5M float16: batch, k, torch_ms and,
        where given, matmul_ms) beside the sieve lines."""
        tj = os.path.join(tmp, "torch.json")
        with open(tj, "w") as f:
            for b, k, t, mm in torch_rows:
                r = {"mode": "torch", "n": 5_000_000, "dim": 768, "dtype": "float16", "batch": b,
                     "k": k, "torch_ms": t}
                if mm is not None:
                    r["matmul_ms"] = mm
                f.write(json.dumps(r) + "\n")
        p = subprocess.run([sys.executable, REPORT, "--sieve", src, "--torch", tj, "--md", md],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, f"report_knn.py --torch ({what}) exits 0",
              (p.returncode, p.stderr[-500:]), 0)
        return open(md).read().splitlines() if os.path.exists(md) else []

    # with torch's lines: the scoring GEMM alone (matmul_ms) beside the named shape it was
    # measured for, and torch's matmul + topk in the table
    lines = with_torch([(1024, 128, 52.5, 13.35), (64, 128, 4.4, None)], "the GEMM alone")
    has("- 5,000,000 float16 pageable B = 1024 k = 128: 14.500 ms (target 14.0 ms; the GEMM alone "
        "(torch, no selection) 13.350 ms): missed")
    has("- 5,000,000 float16 pageable B = 64 k = 128: 2.000 ms (target 2.2 ms): met")
    has("| 5,000,000 | float16 | pageable | 1024 | 128 | 14.500 | 0.010 | - | 52.500 | 11.100 | 77% | 3.62x | 1280 | yes | 1024/0/0/0/0 |")
    # the GEMM alone (13.35 ms, slower than the floor, not slower than the scan's 14.2) is the
    # bound of the compute-bound shape it was measured for: 13.369 / 11.1 = 1.20x, over the line
    has("  | 5,000,000 | float16 | pageable | 1024 | 128 | 1.31x | compute | 1.28x | 0.300 | 1.180 | "
        "0.019 | 1.20x (GEMM alone + bus) |")
    has("  In 2 of them the measured bound is itself over 1.2x of the floor (1 with the GEMM alone, "
        "1 with the floor): no search reaches the line there at the rates measured on that machine.")

    # against torch: the geometric mean of torch's time over sieve's (52.5 / 14.5, 4.4 / 2.0,
    # 2.0 / 2.4: 1.88x), the range, and the shape where torch's call was faster, named
    lines = with_torch([(1024, 128, 52.5, None), (64, 128, 4.4, None), (64, 8192, 2.0, None)],
                       "slower than torch")
    has("- Against torch's matmul + topk (its results left on the GPU; sieve's calls include the "
        "query upload and the results' copy to the host): 1.88x over 3 shapes (geometric mean), "
        "from 3.62x (5,000,000 float16 pageable B = 1024 k = 128) to 0.83x (5,000,000 float16 "
        "pageable B = 64 k = 8192).")
    has("  Slower than torch's call at 1: 5,000,000 float16 pageable B = 64 k = 8192 (0.83x).")

    # a GEMM slower than the search's scan bounds nothing: the floor stays the bound
    lines = with_torch([(1024, 128, 52.5, 20.0)], "a GEMM slower than the scan")
    has("  | 5,000,000 | float16 | pageable | 1024 | 128 | 1.31x | compute | 1.28x | 0.300 | 1.180 | "
        "0.019 | 1.00x (floor + bus) |")

    p = subprocess.run([sys.executable, REPORT, "--help"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "targets" in p.stdout and "1.2x" in p.stdout,
          "--help describes the summary against the targets", p.stdout[:300], "targets, 1.2x")

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
