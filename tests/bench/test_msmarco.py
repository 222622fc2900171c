#!/usr/bin/env python3
"""bench/msmarco end to end at a tiny scale on the CPU backend, plus its input errors.

Runs the real script against the binaries of $SIEVE_BUILD_DIR: generates a 20,000-row
surrogate, starts sieve-server --device cpu, ingests over HTTP with `sieve ingest`, queries
at concurrency 1, 8 and 64, checks every list against the float64 brute force, runs the CPU
comparison (sieve-bench --device cpu and FAISS when importable) and writes the report.
Asserts recall 1.0 with no mismatch, an answer for every request, identical MRR@10, every
output file written and non-empty, and that bad inputs exit with status 2 and a message that
names the problem. Exits 77 (skipped) when the server or client binaries are not built.

Run: SIEVE_BUILD_DIR=build python3 tests/bench/test_msmarco.py
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_check import BUILD, SRC, check, failures  # noqa: E402

SCRIPT = os.path.join(SRC, "bench", "msmarco")


def run(args, timeout=900):
    r = subprocess.run([sys.executable, SCRIPT, "--bin", BUILD] + args, capture_output=True, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def checker_cases():
    """The tie rule itself, on data with known answers: it must reject wrong lists."""
    import importlib.machinery
    import types
    import numpy as np
    loader = importlib.machinery.SourceFileLoader("msmarco_bench", SCRIPT)
    mod = types.ModuleType(loader.name)
    mod.__file__ = SCRIPT
    loader.exec_module(mod)
    rng = np.random.default_rng(3)
    n, d, k = 2000, 64, 10
    X = rng.standard_normal((n, d)).astype(np.float32)
    Q = rng.standard_normal((1, d)).astype(np.float32)
    S = X.astype(np.float16).astype(np.float64) @ Q[0].astype(np.float64)
    order = np.argsort(-S, kind="stable")
    tenth = int(order[k - 1])
    X[n - 1] = X[tenth]  # an exact copy of the k-th row: a tie at the boundary
    S[n - 1] = S[tenth]
    ref = [int(r) for r in np.argsort(-S, kind="stable")[:k]]
    rows, keys = mod.brute_force(X, Q.astype(np.float64), k, "float16", "Dot", False, "test")
    check([int(r) for r in rows[0]] == ref, "brute force equals a full sort (ties by row)", list(rows[0]), ref)
    ids = lambda r: int(r) + 100  # ids differ from rows
    c = mod.Checker(X, Q, rows, keys, k, "float16", "Dot", ids,
                    lambda i: int(i) - 100 if 100 <= int(i) < n + 100 else None)
    sc = lambda rs: [float(np.float32(S[r])) for r in rs]
    good = [ids(r) for r in ref]
    res = c.check(0, good, sc(ref))
    check(res == (k, k, 0, []), "the exact list passes", res, (k, k, 0, []))
    tied = ref[:-1] + [n - 1]
    res = c.check(0, [ids(r) for r in tied], sc(tied))
    check(res == (k, k - 1, 1, []), "the tied copy of the k-th row counts as a hit", res, (k, k - 1, 1, []))
    worst = int(order[-1])
    bad = ref[1:] + [worst]
    h, st, sub, prob = c.check(0, [ids(r) for r in bad], sc(bad))
    check(h == k - 1 and len(prob) == 2 and "not in the exact top" in prob[0] and "missing id" in prob[1],
          "a wrong row and the missing top row are both reported", prob, "2 problems")
    h, st, sub, prob = c.check(0, good[:-1], sc(ref[:-1]))
    check(any("expected 10" in p for p in prob), "a short list is reported", prob, "expected 10")
    wrong = sc(ref)
    wrong[2] = wrong[0] + 1.0
    h, st, sub, prob = c.check(0, good, wrong)
    check(any("scores increase" in p for p in prob) and any("tau" in p for p in prob),
          "a wrong score is reported", prob, "score problems")
    h, st, sub, prob = c.check(0, good[:-1] + [99999], sc(ref))
    check(any("not a stored id" in p for p in prob), "an unknown id is reported", prob, "not a stored id")
    h, st, sub, prob = c.check(0, good[:-1] + [good[0]], sc(ref))
    check(any("duplicate" in p for p in prob), "a repeated id is reported", prob, "duplicate ids")
    # a row one float16 step below the k-th: outside the float32-accumulation band, inside the
    # band of a searcher that rounds the query to float16 (CUDA's tensor-core path)
    j = int(np.argmax(np.abs(Q[0])))
    x16 = X[tenth].astype(np.float16)
    x16[j] = np.nextafter(x16[j], np.float16(-np.inf) if Q[0, j] > 0 else np.float16(np.inf))
    X[n - 2] = x16.astype(np.float32)
    S = X.astype(np.float16).astype(np.float64) @ Q[0].astype(np.float64)
    rows, keys = mod.brute_force(X, Q.astype(np.float64), k, "float16", "Dot", False, "test")
    ref = [int(r) for r in rows[0]]
    near = ref[:-1] + [n - 2]
    c = mod.Checker(X, Q, rows, keys, k, "float16", "Dot", ids,
                    lambda i: int(i) - 100 if 100 <= int(i) < n + 100 else None)
    h, st, sub, prob = c.check(0, [ids(r) for r in near], sc(near))
    check(n - 2 not in ref and h == k - 1 and any("not in the exact top" in p for p in prob),
          "one float16 step below the k-th score fails the float32 band", (h, prob), "rejected")
    h, st, sub, prob = c.check(0, [ids(r) for r in near], sc(near), query_rounding=True)
    check((h, sub, prob) == (k, 1, []), "... and passes the band of a query-rounding searcher", (h, sub, prob),
          (k, 1, []))


def main():
    checker_cases()
    for sub, name in (("server", "sieve-server"), ("client", "sieve"), ("datasets", "sieve-datagen"),
                      ("bench", "sieve-bench")):
        if not os.path.exists(os.path.join(BUILD, sub, name)):
            print(f"SKIP: {sub}/{name} is not built in {BUILD}; bench/msmarco needs it "
                  f"(the tie-rule cases above ran: {len(failures)} failed)")
            return 1 if failures else 77
    tmp = tempfile.mkdtemp(prefix="test-msmarco-")
    out = os.path.join(tmp, "out")

    # ---- the whole path at 20,000 rows
    rc, so, se = run(["--count", "20000", "--num-queries", "100", "--device", "cpu", "--concurrency", "1,8,64",
                      "--cpu-repeat", "2", "--out", out, "--work", os.path.join(tmp, "work")])
    if rc != 0:
        print(so[-6000:])
        print(se[-3000:])
    check(rc == 0, "bench/msmarco exits 0", rc, 0)
    check("SURROGATE" in so, "the output says the surrogate was used", so[:300], "...SURROGATE...")
    js = os.path.join(out, "results.json")
    check(os.path.isfile(js), "results.json written", os.path.exists(js), True)
    if not os.path.isfile(js):
        return 1
    res = json.load(open(js))
    ch = res["check"]
    check(ch.get("lists") == 300, "every list of 3 levels x 100 queries checked", ch.get("lists"), 300)
    check(ch.get("recall") == 1.0, "recall@10 is 1.0 (near-ties counted as hits)", ch.get("recall"), 1.0)
    check(ch.get("mismatches") == 0, "no mismatch", ch.get("mismatch_samples"), [])
    check(res["data"]["kind"] == "surrogate" and res["data"]["rows"] == 20000, "data is the 20,000-row surrogate",
          res["data"], "kind surrogate, rows 20000")
    ing = res["ingest"]
    check(ing.get("rows") == 20000 and ing.get("route") == "http" and ing.get("vectors_per_s", 0) > 0,
          "ingest over HTTP timed", ing, "rows 20000, route http, vectors_per_s > 0")
    levels = [(r["concurrency"], r["answered"], r["errors"]) for r in res["rest"]]
    check(levels == [(1, 100, 0), (8, 100, 0), (64, 100, 0)], "every request answered at 1, 8, 64 clients",
          levels, [(1, 100, 0), (8, 100, 0), (64, 100, 0)])
    check(all(r["qps"] > 0 and 0 < r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"] for r in res["rest"]),
          "queries/s positive and p50 <= p95 <= p99", res["rest"], "ordered percentiles")
    mrr = res["mrr"]
    check(mrr.get("identical") is True and len(mrr.get("methods", {})) >= 4, "MRR@10 identical for every exact method",
          mrr, "identical, >= 4 methods")
    check(res["payload_check"].get("checked", 0) > 0 and res["payload_check"].get("different") == 0,
          "payload text returned as ingested", res["payload_check"], "different 0")
    cpu = res["cpu_table"]
    check(len(cpu) == 4 and all(r["sieve_f32_ms"] for r in cpu), "CPU backend timed at batch 1/64 x k 10/100",
          cpu, "4 rows with sieve times")
    if importlib.util.find_spec("faiss"):
        check(all(r["faiss_ms"] for r in cpu), "FAISS timed on the same shapes", cpu, "faiss_ms everywhere")
        fc = res["faiss_check"]
        check(fc.get("recall") == 1.0 and fc.get("mismatches") == 0, "FAISS answers pass the same check", fc,
              "recall 1.0")
    if importlib.util.find_spec("matplotlib"):
        want = ["results.json", "results.md", "latency_vs_n.png", "speedup_vs_k.png", "qps_vs_concurrency.png"]
    else:
        want = ["results.json", "results.md"]
        check(any("matplotlib" in n for n in res["notes"]), "a note says matplotlib is missing", res["notes"], "note")
    for f in want:
        p = os.path.join(out, f)
        check(os.path.isfile(p) and os.path.getsize(p) > 100, f"{f} written", os.path.exists(p), True)
    check(sorted(os.path.basename(p) for p in res["files"]) == sorted(want), "results.json lists the files",
          res["files"], want)
    md = open(os.path.join(out, "results.md")).read()
    check("recall@10 (near-ties count as hits): **1.000000**" in md and "Surrogate" in md.replace("surrogate", "Surrogate"),
          "results.md reports recall and the data kind", md[:400], "recall line")

    # ---- inputs that must be refused with a clear message (status 2)
    bad = os.path.join(tmp, "bad.fbin")
    with open(bad, "wb") as f:
        f.write((1000).to_bytes(4, "little") + (768).to_bytes(4, "little") + b"\0" * 100)
    cases = [
        (["--vectors", os.path.join(tmp, "missing.npy"), "--queries", bad], "no such file"),
        (["--vectors", bad, "--queries", bad], "truncated"),
        (["--vectors", bad], "--vectors needs --queries"),
        (["--vectors", bad, "--queries", bad, "--qrels", bad], "--qrels needs --query-ids"),
        (["--scale", "2"], "--scale must be in (0, 1]"),
        (["--concurrency", "1,x"], "not a count"),
        (["--ids", bad], "--ids needs --vectors"),
    ]
    for args, msg in cases:
        rc, so, se = run(args + ["--out", os.path.join(tmp, "bad-out")], timeout=120)
        check(rc == 2 and msg in se, f"refused: {' '.join(args[:2])} ... -> '{msg}'", (rc, se.strip()[-200:]), (2, msg))
    rc, so, se = run(["--help"], timeout=60)
    check(rc == 0 and "Tie rule" in so and "--concurrency" in so, "--help describes the tie rule and options", rc, 0)

    if failures:
        print(f"\n{len(failures)} failed; files kept in {tmp}")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("\nall passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
