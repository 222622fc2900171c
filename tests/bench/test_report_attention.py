#!/usr/bin/env python3
"""bench/report_attention.py on JSON lines with known values: the table's speedups and the
summary against the attention targets (10x torch's reference, 1.7x the materialized path at
L >= 64K; grouped sparse attention 1.5x over per query at heavy overlap; block-sparse prefill
20x torch flash and 10x cuDNN at 128K, mean correction closer to dense than dropping) say
what the numbers imply; a mismatch between fused and materialized, a grouped or block-sparse
output off, or a shape that failed to run fails the report; the plots are written where
matplotlib is importable.

Run: python3 tests/bench/test_report_attention.py
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_check import SRC, check, failures  # noqa: E402

REPORT = os.path.join(SRC, "bench", "report_attention.py")


def srow(T, L, k, fused, mat, exact="yes"):
    return {"mode": "attention", "kernel": "indexer", "dtype": "bfloat16", "T": T, "H": 64,
            "D": 128, "L": L, "k": k, "causal": 1, "fused_ms": fused, "materialized_ms": mat,
            "floor_ms": 1.0, "exact": exact, "paths": [T, 0, 0, 0, 0]}


def trow(T, L, k, ms, backend="torch"):
    return {"mode": "indexer", "backend": backend, "T": T, "H": 64, "D": 128, "L": L, "k": k,
            "ms": ms}


def sprow(group, share, union, perq, grouped, ok="yes"):
    return {"mode": "attention", "kernel": "sparse", "dtype": "bfloat16", "T": 2048, "Hq": 32,
            "Hkv": 8, "D": 128, "DV": 128, "L": 131072, "k": 2048, "group": group, "share": share,
            "union_over_set": union, "per_query_ms": perq, "grouped_ms": grouped, "floor_ms": 0.2,
            "ok": ok}


def prow(T, alpha, dense, corr, drop, ec, ed, ok="yes", density=0.05):
    return {"mode": "attention", "kernel": "prefill", "dtype": "bfloat16", "T": T, "L": T, "Hq": 32, "Hkv": 8,
            "D": 128, "DV": 128, "causal": 1, "block": 64, "alpha": alpha, "sink": 4, "window": 8, "hot": 0.04,
            "dense_ms": dense, "corrected_ms": corr, "dropped_ms": drop, "density": density,
            "rel_l2_corrected": ec, "rel_l2_dropped": ed, "corrected_closer": 0.97, "ok": ok}


def tdrow(T, backend, ms):
    return {"mode": "dense", "backend": backend, "T": T, "H": 32, "H_kv": 8, "D": 128, "L": T, "ms": ms}


def write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def main():
    tmp = tempfile.mkdtemp(prefix="test-report-attention-")
    s, t = os.path.join(tmp, "s.json"), os.path.join(tmp, "t.json")
    write(s, [srow(2048, 131072, 2048, 10.0, 18.0),   # 12x torch, 1.8x materialized: both met
              srow(64, 131072, 2048, 0.5, 0.6),       # 8x torch, 1.2x: both missed
              srow(64, 16384, 2048, 0.2, 0.1),        # L < 64K: not counted for the 1.7x
              srow(2048, 65536, 2048, 5.0, 9.0)])     # no torch line; 1.8x met
    write(t, [trow(2048, 131072, 2048, 120.0), trow(2048, 131072, 2048, 100.0, "torch-bmm"),
              trow(64, 131072, 2048, 4.0)])
    md = os.path.join(tmp, "r.md")
    r = subprocess.run([sys.executable, REPORT, "--sieve", s, "--torch", t, "--md", md,
                        "--plots", os.path.join(tmp, "p")], capture_output=True, text=True)
    check(r.returncode == 0, "a report of exact shapes exits 0", (r.returncode, r.stderr[-300:]), 0)
    out = r.stdout
    check("| 2048 | 131072 | 2048 | 10.000 | 18.000 | 120.00 | 100.00 | 1.000 | 10 | 12.0x | 1.80x | yes |" in out,
          "the target shape's row: both torch forms, % of floor, speedups", out[:600], "row")
    check("| 64 | 131072 | 2048 | 0.500 | 0.600 | 4.00 | - |" in out, "a shape without a GEMV line shows -",
          out[:800], "row")
    check("10x faster than torch's reference form: 1 of 2 shapes" in out,
          "the 10x summary counts the shapes with a torch line", out[-400:], "1 of 2")
    check("1.7x faster than the materialized path at L >= 65536: 2 of 3 shapes" in out,
          "the 1.7x summary counts L >= 64K only", out[-400:], "2 of 3")
    check("every checked shape" in out, "exactness summarised", out[-200:], "every checked shape")
    check(os.path.exists(md) and open(md).read().strip() == out.strip(), "--md writes the same Markdown",
          os.path.exists(md), True)
    try:
        import matplotlib  # noqa: F401
        have_mpl = True
    except ImportError:
        have_mpl = False
    if have_mpl:
        for name in ("p-vs-L.png", "p-vs-T.png"):
            f = os.path.join(tmp, name)
            check(os.path.exists(f) and os.path.getsize(f) > 1000, f"plot {name} written",
                  os.path.exists(f), True)

    # grouped sparse attention: the heavy-overlap summary counts group 16 with a union of at
    # most 2 sets only; a shape whose check is OFF fails the report
    sp = os.path.join(tmp, "sp.json")
    write(sp, [sprow(16, 0.95, 1.79, 3.0, 0.8),    # 3.75x: met
               sprow(16, 1.0, 1.0, 3.0, 2.5),      # 1.2x: missed
               sprow(16, 0.5, 8.5, 3.0, 3.0),      # not heavy overlap: not counted
               sprow(8, 0.95, 1.4, 3.0, 1.0)])     # group 8: not counted
    r = subprocess.run([sys.executable, REPORT, "--sieve", s, "--sparse", sp, "--plots",
                        os.path.join(tmp, "q")], capture_output=True, text=True)
    out = r.stdout
    check(r.returncode == 0, "a report with sparse lines exits 0", (r.returncode, r.stderr[-300:]), 0)
    check("| 2048 | 131072 | 2048 | 16 | 0.95 | 1.79 | 3.000 | 0.800 | 3.75x | 0.200 | 25 | yes |" in out,
          "the sparse row: union, both times, speedup, % of floor", out[-1500:], "row")
    check("overlap heavily (union at most 2x one set): 1 of 2 shapes" in out,
          "the 1.5x summary counts group 16 with heavy overlap only", out[-600:], "1 of 2")
    if have_mpl:
        f = os.path.join(tmp, "q-sparse.png")
        check(os.path.exists(f) and os.path.getsize(f) > 1000, "plot q-sparse.png written",
              os.path.exists(f), True)
    write(sp, [sprow(16, 0.95, 1.79, 3.0, 0.8, ok="OFF")])
    r = subprocess.run([sys.executable, REPORT, "--sieve", sp], capture_output=True, text=True)
    check(r.returncode == 1 and "1 OFF" in r.stdout, "sparse lines alone; an OFF check fails the report",
          (r.returncode, r.stdout[-200:]), (1, "1 OFF"))

    # dense causal attention beside torch's flash and cuDNN lines of the same shape
    dn = os.path.join(tmp, "dn.json")
    write(dn, [{"mode": "attention", "kernel": "dense", "dtype": "bfloat16", "T": 8192, "L": 8192, "Hq": 32,
                "Hkv": 8, "D": 128, "DV": 128, "ms": 2.0, "tflops": 275.0, "floor_ms": 0.75, "ok": "yes"}])
    write(t, [{"mode": "dense", "backend": "flash", "T": 8192, "H": 32, "H_kv": 8, "D": 128, "L": 8192, "ms": 1.6},
              {"mode": "dense", "backend": "cudnn", "T": 8192, "H": 32, "H_kv": 8, "D": 128, "L": 8192, "ms": 1.0}])
    r = subprocess.run([sys.executable, REPORT, "--sieve", dn, "--torch", t, "--dense", dn],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "| 8192 | 32 / 8 | 128 | 2.000 | 275 | 1.60 | 1.00 | 0.80 | 0.50 | 0.750 | yes |" in r.stdout,
          "the dense row: sieve, both torch backends, their ratios", (r.returncode, r.stdout[-600:]), "row")

    # block-sparse prefill beside sieve's dense and torch's flash and cuDNN lines of the same
    # length: the 20x / 10x summary counts 128K only; correction closer where its error is lower
    pf = os.path.join(tmp, "pf.json")
    write(pf, [prow(131072, 0.1, 580.0, 20.0, 16.0, 0.02, 0.25),     # 21.5x flash, 12.5x cuDNN: met
               prow(131072, 0.05, 580.0, 40.0, 32.0, 0.01, 0.2),     # 10.75x flash, 6.25x cuDNN: missed
               prow(32768, 0.1, 36.0, 3.0, 2.5, 0.03, 0.02, density=0.09)])  # not 128K; dropped closer
    write(t, [tdrow(131072, "flash", 430.0), tdrow(131072, "cudnn", 250.0), tdrow(32768, "flash", 25.0),
              tdrow(32768, "cudnn", 13.5)])
    r = subprocess.run([sys.executable, REPORT, "--sieve", s, "--torch", t, "--prefill", pf, "--plots",
                        os.path.join(tmp, "r")], capture_output=True, text=True)
    out = r.stdout
    check(r.returncode == 0, "a report with prefill lines exits 0", (r.returncode, r.stderr[-300:], out[-300:]), 0)
    check("| 131072 | 32 / 8 | 128 | 64 | 0.1 | 0.0500 | 580.000 | 20.000 | 16.000 | 29.00x | 36.25x | 430.00 | "
          "250.00 | 21.5x | 12.5x | 26.9x | 15.6x | 2.00e-02 | 2.50e-01 | 0.970 | yes |" in out,
          "the prefill row: times, speedups over dense, flash and cuDNN, errors", out[-2500:], "row")
    check("| 32768 | 32 / 8 | 128 | 64 | 0.1 | 0.0900 | 36.000 | 3.000 | 2.500 | 12.00x | 14.40x | 25.00 | 13.50 | "
          "8.3x | 4.5x | 10.0x | 5.4x |" in out, "the 32K row beside its own torch lines", out[-2500:], "row")
    check("20x faster than torch flash at L >= 131072: 1 of 2 shapes with a flash line; at least 10x faster "
          "than cuDNN: 1 of 2 shapes" in out, "the 20x / 10x summary counts 128K only", out[-800:], "1 of 2")
    check("closer to dense than dropping (relative L2 over the rows): 2 of 3 shapes" in out,
          "the correction summary counts the shapes where it is closer", out[-800:], "2 of 3")
    check("own selection, forced blocks kept: every shape" in out, "the prefill check summarised", out[-400:],
          "every shape")
    # runs that differ only in the data's target share (or sink / window) stay separate rows
    write(pf, [prow(131072, 0.1, 580.0, 20.0, 16.0, 0.02, 0.25),
               {**prow(131072, 0.1, 580.0, 30.0, 26.0, 0.02, 0.25, density=0.09), "hot": 0.08},
               {**prow(131072, 0.1, 580.0, 18.0, 15.0, 0.02, 0.25), "block": 128, "sink": 2, "window": 4}])
    r2 = subprocess.run([sys.executable, REPORT, "--sieve", pf], capture_output=True, text=True)
    check(r2.returncode == 0 and "| yes | 4 / 8 | 0.04 |" in r2.stdout and "| yes | 4 / 8 | 0.08 |" in r2.stdout
          and "| 131072 | 32 / 8 | 128 | 128 | 0.1 |" in r2.stdout and "| yes | 2 / 4 | 0.04 |" in r2.stdout,
          "prefill runs differing in hot, block, sink or window are separate rows", r2.stdout[-1200:], "3 rows")
    if have_mpl:
        f = os.path.join(tmp, "r-prefill.png")
        check(os.path.exists(f) and os.path.getsize(f) > 1000, "plot r-prefill.png written", os.path.exists(f), True)
    # without torch lines: the torch columns show -; prefill lines alone through --sieve
    write(pf, [prow(131072, 0.1, 580.0, 20.0, 16.0, 0.02, 0.25)])
    r = subprocess.run([sys.executable, REPORT, "--sieve", pf], capture_output=True, text=True)
    check(r.returncode == 0 and "| 29.00x | 36.25x | - | - | - | - | - | - | 2.00e-02 |" in r.stdout
          and "0 of 0 shapes with a flash line" in r.stdout,
          "prefill lines alone: no torch columns, nothing counted", (r.returncode, r.stdout[-600:]), "-")
    write(pf, [prow(131072, 0.1, 580.0, 20.0, 16.0, 0.02, 0.25, ok="OFF")])
    r = subprocess.run([sys.executable, REPORT, "--sieve", pf], capture_output=True, text=True)
    check(r.returncode == 1 and "1 OFF" in r.stdout, "a prefill check OFF fails the report",
          (r.returncode, r.stdout[-200:]), (1, "1 OFF"))
    write(pf, [prow(131072, 0.1, 580.0, 20.0, 16.0, 0.02, 0.25), prow(131072, 0.05, 580.0, None, None, None, None)])
    r = subprocess.run([sys.executable, REPORT, "--sieve", s, "--prefill", pf], capture_output=True, text=True)
    check(r.returncode == 1 and "1 shape(s) failed to run (no time): prefill T=131072 L=131072 alpha=0.05" in r.stdout
          and "| 131072 | 32 / 8 | 128 | 64 | 0.1 |" in r.stdout,
          "a failed prefill shape is named and fails the report; the others still listed",
          (r.returncode, r.stdout[-400:]), (1, "failed to run"))

    # a shape whose run failed (no time) is named and fails the report
    write(sp, [sprow(16, 0.95, 1.79, 3.0, 0.8), {**sprow(16, 0.5, 8.5, 3.0, None)}])
    r = subprocess.run([sys.executable, REPORT, "--sieve", sp], capture_output=True, text=True)
    check(r.returncode == 1 and "1 shape(s) failed to run" in r.stdout, "a failed shape is reported and fails",
          (r.returncode, r.stdout[-300:]), (1, "failed to run"))

    write(s, [srow(2048, 131072, 2048, 10.0, 18.0, exact="MISMATCH")])
    r = subprocess.run([sys.executable, REPORT, "--sieve", s], capture_output=True, text=True)
    check(r.returncode == 1 and "1 MISMATCH" in r.stdout, "a mismatch fails the report",
          (r.returncode, r.stdout[-200:]), (1, "1 MISMATCH"))
    write(s, [])
    r = subprocess.run([sys.executable, REPORT, "--sieve", s], capture_output=True, text=True)
    check(r.returncode == 1 and "no sieve-bench attention lines" in r.stderr,
          "no lines: exit 1 saying so", (r.returncode, r.stderr), 1)
    r = subprocess.run([sys.executable, REPORT, "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--torch" in r.stdout and "1.7x" in r.stdout, "--help describes it",
          r.returncode, 0)

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
