#!/usr/bin/env python3
"""sieve-bench knn, attention, attention sparse, attention dense and attention prefill on the CPU backend: their
options, JSON lines and input errors.

Runs the real binary of $SIEVE_BUILD_DIR. Asserts that --help documents every option the
sweeps use; that a run with --sample-rows and --results pinned takes the sampled (fused)
path, agrees with the materialized full sort on every shape and records both options in the
JSON lines; that without --sample-rows the same small collection takes the direct path (so
the option really reaches the search); that attention prefill's structured data gives the
density it plans (the forced blocks and the targets, every target found, no other block at
alpha 0.1; every block at alpha 0), that mean correction is closer to dense than dropping,
and that both calls match float64 given their own selection; and that bad values exit with
status 2 and a message naming the option. Exits 77 (skipped) when sieve-bench is not built.

Run: SIEVE_BUILD_DIR=build python3 tests/bench/test_sieve_bench.py
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_check import BUILD, check, failures  # noqa: E402

BENCH = os.path.join(BUILD, "bench", "sieve-bench")

# path_count order of sieve_search_stats (sieve_kernels.h): certified, underfill, overflow,
# full, direct
CERTIFIED, DIRECT = 0, 4


def run(args, timeout=600):
    r = subprocess.run([BENCH] + args, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.startswith("{")]


def main():
    if not os.path.exists(BENCH):
        print(f"SKIP: bench/sieve-bench is not built in {BUILD}")
        return 77
    tmp = tempfile.mkdtemp(prefix="test-sieve-bench-")

    rc, so, se = run(["knn", "--help"])
    check(rc == 0, "knn --help exits 0", rc, 0)
    for opt in ("--results KIND", "--sample-rows S", "--no-materialized", "--json FILE"):
        check(opt in so, f"knn --help documents {opt}", so[:200], opt)

    # 30,000 rows with a 2,048-row sample: N > 2 S, so every query is sampled and scanned
    base = ["knn", "--device", "cpu", "--n", "30k", "--dim", "64", "--batch", "1,7", "--k", "1,10,100",
            "--repeat", "2", "--warmup", "0", "--mat-repeat", "1"]
    js = os.path.join(tmp, "sampled.json")
    rc, so, se = run(base + ["--sample-rows", "2048", "--results", "pinned", "--json", js])
    if rc != 0:
        print(so[-3000:], se[-3000:])
    check(rc == 0, "a run with --sample-rows and --results pinned exits 0", rc, 0)
    check("pinned query and result arrays" in so, "the header names the query and result arrays",
          so[:300], "pinned query and result arrays")
    rows = lines(js) if os.path.exists(js) else []
    check(len(rows) == 6, "one JSON line per (batch, k)", len(rows), 6)
    for r in rows:
        tag = f"B={r['batch']} k={r['k']}"
        check(r["exact"] == "yes", f"{tag}: fused == materialized", r["exact"], "yes")
        check(r["results"] == "pinned" and r["sample_rows"] == 2048, f"{tag}: options in the JSON line",
              (r["results"], r["sample_rows"]), ("pinned", 2048))
        check(r["paths"][DIRECT] == 0 and r["paths"][CERTIFIED] == r["batch"],
              f"{tag}: every query sampled and certified", r["paths"], f"{r['batch']} certified")
        check(r["admitted_per_query"] >= r["k"], f"{tag}: at least k admissions per query",
              r["admitted_per_query"], f">= {r['k']}")
        # the CPU selects without the GPU's segmented sort
        check(r.get("select_segmented") == 0, f"{tag}: select_segmented in the JSON line, 0 on the CPU",
              r.get("select_segmented"), 0)
        # nor speculates on its select (the CUDA path's one wait for the device)
        check(r.get("select_speculated") == 0 and r.get("speculation_missed") == 0,
              f"{tag}: select_speculated and speculation_missed in the JSON line, 0 on the CPU",
              (r.get("select_speculated"), r.get("speculation_missed")), (0, 0))
        # nor chains kernels
        check(r.get("launches_chained") == 0, f"{tag}: launches_chained in the JSON line, 0 on the CPU",
              r.get("launches_chained"), 0)

    # the default sample (max(16384, 8k) rows) covers more than half of 30,000 rows: direct
    js2 = os.path.join(tmp, "default.json")
    rc, so, se = run(base + ["--json", js2])
    check(rc == 0, "a run with the default sample exits 0", rc, 0)
    rows = lines(js2) if os.path.exists(js2) else []
    check(len(rows) == 6 and all(r["paths"][DIRECT] == r["batch"] and r["exact"] == "yes" for r in rows),
          "without --sample-rows every query takes the direct path, exactly",
          [(r["paths"], r["exact"]) for r in rows], "direct, yes")
    check(all(r["results"] == "pageable" and r["sample_rows"] == 0 for r in rows),
          "defaults in the JSON lines: pageable arrays, the library's sample", [(r["results"], r["sample_rows"]) for r in rows],
          ("pageable", 0))

    for bad, opt in ((["--results", "fast"], "--results"), (["--sample-rows", "0"], "--sample-rows"),
                     (["--sample-rows", "12x"], "--sample-rows"), (["--sample-rows"], "--sample-rows")):
        rc, so, se = run(["knn", "--device", "cpu"] + bad)
        check(rc == 2 and opt in se, f"{' '.join(bad)}: exit 2 naming {opt}", (rc, se.strip()[:120]), (2, opt))

    # sieve-bench attention (the indexer top-k) on the CPU: 20,000 keys with a 2,048-key
    # sample, so every query is sampled and certified or recovered, exactly
    rc, so, se = run(["attention", "--help"])
    check(rc == 0, "attention --help exits 0", rc, 0)
    for opt in ("--keys LIST", "--queries LIST", "--sample-keys S", "--no-causal", "--json FILE"):
        check(opt in so, f"attention --help documents {opt}", so[:200], opt)
    js3 = os.path.join(tmp, "attention.json")
    rc, so, se = run(["attention", "--device", "cpu", "--heads", "8", "--head-dim", "64", "--keys", "20000",
                      "--queries", "4,16", "--k", "16,100", "--sample-keys", "2048", "--repeat", "1",
                      "--warmup", "0", "--mat-repeat", "1", "--json", js3])
    if rc != 0:
        print(so[-3000:], se[-3000:])
    check(rc == 0, "an attention run on the CPU exits 0", rc, 0)
    rows = lines(js3) if os.path.exists(js3) else []
    check(len(rows) == 4, "one JSON line per (T, k)", len(rows), 4)
    for r in rows:
        tag = f"attention T={r['T']} k={r['k']}"
        check(r["mode"] == "attention" and r["kernel"] == "indexer" and r["H"] == 8 and r["D"] == 64
              and r["L"] == 20000 and r["causal"] == 1, f"{tag}: shape in the JSON line",
              (r["mode"], r["kernel"], r["H"], r["D"], r["L"], r["causal"]), ("attention", "indexer", 8, 64, 20000, 1))
        check(r["exact"] == "yes", f"{tag}: fused == materialized", r["exact"], "yes")
        check(sum(r["paths"]) == r["T"] and r["paths"][CERTIFIED] > 0 and r["paths"][DIRECT] == 0,
              f"{tag}: every query sampled, some certified", r["paths"], f"{r['T']} queries")
        check(r["admitted_per_query"] >= r["k"] * r["paths"][CERTIFIED] / r["T"],
              f"{tag}: the certified queries kept at least k", r["admitted_per_query"], f">= k")
    # without a shape the CPU runs a small one, and says so
    rc, so, se = run(["attention", "--device", "cpu", "--heads", "8", "--head-dim", "64", "--repeat", "1",
                      "--warmup", "0", "--mat-repeat", "1"])
    check(rc == 0 and "smaller default shape" in so and " 16    16384    256 " in so,
          "attention on the CPU without --keys/--queries/--k: the small default shape, announced",
          (rc, so[-300:]), "L 16384, T 16, k 256")
    for bad, opt in ((["--k", "0"], "--k"), (["--heads", "x"], "--heads"), (["--keys"], "--keys"),
                     (["--dtype", "int8"], "--dtype")):
        rc, so, se = run(["attention", "--device", "cpu"] + bad)
        check(rc == 2 and opt in se, f"attention {' '.join(bad)}: exit 2 naming {opt}", (rc, se.strip()[:120]), (2, opt))

    # sieve-bench attention sparse (grouped vs per-query sparse attention) on the CPU: share 1
    # gives every token of a group the same set (the union is one set), share 0 nearly
    # disjoint sets (the union about group x set); both calls agree with each other and with
    # the float64 reference on the checked tokens
    rc, so, se = run(["attention", "sparse", "--help"])
    check(rc == 0, "attention sparse --help exits 0", rc, 0)
    for opt in ("--q-heads H", "--kv-heads H", "--group LIST", "--share LIST", "--check-tokens N",
                "--json FILE"):
        check(opt in so, f"attention sparse --help documents {opt}", so[:200], opt)
    js4 = os.path.join(tmp, "sparse.json")
    rc, so, se = run(["attention", "sparse", "--device", "cpu", "--q-heads", "8", "--kv-heads", "2",
                      "--head-dim", "64", "--v-dim", "32", "--keys", "4096", "--queries", "40",
                      "--k", "128", "--group", "8,16", "--share", "1,0", "--repeat", "1", "--warmup", "0",
                      "--check-tokens", "3", "--json", js4])
    if rc != 0:
        print(so[-3000:], se[-3000:])
    check(rc == 0, "an attention sparse run on the CPU exits 0", rc, 0)
    rows = lines(js4) if os.path.exists(js4) else []
    check(len(rows) == 4, "one JSON line per (group, share)", len(rows), 4)
    for r in rows:
        tag = f"attention sparse group={r['group']} share={r['share']}"
        check(r["kernel"] == "sparse" and (r["Hq"], r["Hkv"], r["D"], r["DV"], r["L"], r["T"], r["k"])
              == (8, 2, 64, 32, 4096, 40, 128), f"{tag}: shape in the JSON line",
              (r["kernel"], r["Hq"], r["Hkv"], r["D"], r["DV"]), ("sparse", 8, 2, 64, 32))
        check(r["ok"] == "yes" and r["max_diff_grouped_per_query"] == 0.0,
              f"{tag}: grouped == per query on the CPU, both near float64",
              (r["ok"], r["max_diff_grouped_per_query"], r["max_err_reference"]), ("yes", 0.0))
        check(0 < r["members_per_token"] <= 128, f"{tag}: distinct keys a token reads",
              r["members_per_token"], "(0, 128]")
        if r["share"] == 1.0:
            check(abs(r["union_over_set"] - 1.0) < 1e-6, f"{tag}: one shared set, union == set",
                  r["union_over_set"], 1.0)
        else:
            # 40 tokens in groups of 8 or 16: the groups hold 8 or 16 (the last 8) nearly
            # disjoint sets of 128 among 4,096 keys
            check(r["union_over_set"] > 0.8 * min(r["group"], 8) - 0.5, f"{tag}: disjoint sets, union ~ group x set",
                  r["union_over_set"], f"> {0.8 * min(r['group'], 8) - 0.5}")
    for bad, opt in ((["--group", "33"], "--group"), (["--share", "1.5"], "--share"),
                     (["--q-heads", "x"], "--q-heads"), (["--kv-heads"], "--kv-heads")):
        rc, so, se = run(["attention", "sparse", "--device", "cpu"] + bad)
        check(rc == 2 and opt in se, f"attention sparse {' '.join(bad)}: exit 2 naming {opt}",
              (rc, se.strip()[:120]), (2, opt))
    rc, so, se = run(["attention", "sparse", "--device", "cpu", "--q-heads", "6", "--kv-heads", "4"])
    check(rc == 2 and "--q-heads" in se, "attention sparse: q heads not a multiple of kv heads, exit 2",
          (rc, se.strip()[:120]), (2, "--q-heads"))

    # sieve-bench attention dense (the in-house dense causal attention) on the CPU: sampled
    # tokens against float64, one JSON line per length
    rc, so, se = run(["attention", "dense", "--help"])
    check(rc == 0 and "--seq LIST" in so and "--check-tokens N" in so, "attention dense --help documents its options",
          (rc, so[:200]), 0)
    js5 = os.path.join(tmp, "dense.json")
    rc, so, se = run(["attention", "dense", "--device", "cpu", "--q-heads", "4", "--kv-heads", "2", "--head-dim", "32",
                      "--v-dim", "16", "--seq", "100,257", "--repeat", "1", "--warmup", "0", "--check-tokens", "3",
                      "--json", js5])
    if rc != 0:
        print(so[-3000:], se[-3000:])
    check(rc == 0, "an attention dense run on the CPU exits 0", rc, 0)
    rows = lines(js5) if os.path.exists(js5) else []
    check([(r["kernel"], r["T"], r["L"], r["Hq"], r["Hkv"], r["D"], r["DV"]) for r in rows]
          == [("dense", 100, 100, 4, 2, 32, 16), ("dense", 257, 257, 4, 2, 32, 16)],
          "one JSON line per length, the shape in it", [(r["T"], r["D"]) for r in rows], "100, 257")
    for r in rows:
        check(r["ok"] == "yes" and r["max_err"] < 1e-4 and r["ms"] > 0,
              f"attention dense S={r['T']}: sampled tokens near float64, a time",
              (r["ok"], r["max_err"], r["ms"]), "yes")
    for bad, opt in ((["--seq", "0"], "--seq"), (["--v-dim", "x"], "--v-dim")):
        rc, so, se = run(["attention", "dense", "--device", "cpu"] + bad)
        check(rc == 2 and opt in se, f"attention dense {' '.join(bad)}: exit 2 naming {opt}",
              (rc, se.strip()[:120]), (2, opt))

    # sieve-bench attention prefill (block-sparse prefill with mean correction against dense)
    # on the CPU: two lengths (the forced blocks dominate at 512 tokens, the targets begin to
    # count at 1,000; a partial last tile), three thresholds
    rc, so, se = run(["attention", "prefill", "--help"])
    check(rc == 0, "attention prefill --help exits 0", rc, 0)
    for opt in ("--seq LIST", "--alpha LIST", "--block B", "--sink N", "--window N", "--hot F",
                "--q-heads H", "--kv-heads H", "--check-tokens N", "--json FILE"):
        check(opt in so, f"attention prefill --help documents {opt}", so[:200], opt)
    rc, so, se = run(["attention", "--help"])
    check("attention prefill" in so, "attention --help names the prefill mode", so[:400], "attention prefill")
    js6 = os.path.join(tmp, "prefill.json")
    rc, so, se = run(["attention", "prefill", "--device", "cpu", "--q-heads", "4", "--kv-heads", "2",
                      "--head-dim", "64", "--v-dim", "32", "--seq", "512,1000", "--block", "16",
                      "--sink", "4", "--window", "8",
                      "--alpha", "0.1,0.01,0", "--repeat", "1", "--warmup", "0", "--check-tokens", "3",
                      "--json", js6])
    if rc != 0:
        print(so[-3000:], se[-3000:])
    check(rc == 0, "an attention prefill run on the CPU exits 0", rc, 0)
    rows = lines(js6) if os.path.exists(js6) else []
    check([(r["T"], r["alpha"]) for r in rows] == [(T, a) for T in (512, 1000) for a in (0.1, 0.01, 0.0)],
          "one JSON line per (length, alpha), in order", [(r["T"], r["alpha"]) for r in rows], "6 lines")
    keys = ("mode", "kernel", "device", "dtype", "T", "L", "Hq", "Hkv", "D", "DV", "causal", "block", "alpha",
            "sink", "window", "hot", "seed", "gen_s", "dense_ms", "dense_device_ms", "corrected_ms",
            "corrected_select_ms", "corrected_attend_ms", "dropped_ms", "dropped_select_ms", "dropped_attend_ms",
            "speedup_corrected", "speedup_dropped", "dense_tflops", "corrected_tflops", "dropped_tflops",
            "density", "planned_density", "visible_blocks", "kept_blocks", "corrected_blocks",
            "dropped_kept_blocks", "target_recall", "extra_blocks", "selections_equal", "rel_l2_corrected",
            "rel_l2_dropped", "corrected_closer", "pruned_rows", "err_rows", "err_tile_stride", "pruned_mass",
            "corrected_mass", "check_tokens", "check_max_err", "check_tol", "check_rel_l2", "check_mean_abs",
            "mean_abs_corrected", "mean_abs_dropped", "ok", "repeat")
    for r in rows:
        tag = f"attention prefill S={r['T']} alpha={r['alpha']}"
        missing = [k for k in keys if k not in r]
        check(not missing, f"{tag}: every key in the JSON line", missing, [])
        if missing:
            continue
        check((r["mode"], r["kernel"], r["L"], r["Hq"], r["Hkv"], r["D"], r["DV"], r["block"], r["sink"],
               r["window"], r["hot"]) == ("attention", "prefill", r["T"], 4, 2, 64, 32, 16, 4, 8, 0.04),
              f"{tag}: shape and options in the JSON line", (r["kernel"], r["L"], r["Hq"], r["block"]), "as run")
        check(all(r[k] > 0 for k in ("dense_ms", "corrected_ms", "dropped_ms", "speedup_corrected",
                                     "speedup_dropped", "corrected_tflops")),
              f"{tag}: times and speedups", (r["dense_ms"], r["corrected_ms"], r["dropped_ms"]), "> 0")
        check(abs(r["speedup_corrected"] - r["dense_ms"] / r["corrected_ms"]) < 1e-3 * r["speedup_corrected"] + 1e-3,
              f"{tag}: speedup = dense / corrected", r["speedup_corrected"], r["dense_ms"] / r["corrected_ms"])
        tiles = (r["T"] + 15) // 16
        check(r["visible_blocks"] == 2 * tiles * (tiles + 1) // 2,
              f"{tag}: visible blocks, every kv head's causal triangle", r["visible_blocks"], tiles * (tiles + 1))
        check(0 < r["density"] <= 1 and abs(r["density"] - r["kept_blocks"] / r["visible_blocks"]) < 1e-5,
              f"{tag}: density = kept / visible in (0, 1]", (r["density"], r["kept_blocks"]), "(0, 1]")
        check(r["corrected_blocks"] == r["visible_blocks"] - r["kept_blocks"]
              and r["dropped_kept_blocks"] == r["kept_blocks"] and r["selections_equal"] == 1,
              f"{tag}: every pruned block corrected; both calls select alike",
              (r["corrected_blocks"], r["dropped_kept_blocks"], r["selections_equal"]), "visible - kept")
        check(r["ok"] == "yes" and r["check_rel_l2"] <= 1e-4 and r["check_max_err"] <= r["check_tol"]
              and r["check_tokens"] == 3,
              f"{tag}: both calls match float64 given their selection",
              (r["ok"], r["check_rel_l2"], r["check_max_err"]), "yes")
        check(r["err_rows"] == r["T"] * 4 and r["err_tile_stride"] == 1,
              f"{tag}: the errors over every row at this size", (r["err_rows"], r["err_tile_stride"]), r["T"] * 4)
        check(r["target_recall"] == 1, f"{tag}: every target block of the data kept", r["target_recall"], 1)
        if r["alpha"] == 0.0:
            check(r["density"] == 1 and r["corrected_blocks"] == 0 and r["rel_l2_corrected"] < 1e-5
                  and r["rel_l2_dropped"] < 1e-5,
                  f"{tag}: alpha 0 keeps every block, both outputs dense",
                  (r["density"], r["rel_l2_corrected"], r["rel_l2_dropped"]), (1, "< 1e-5"))
            continue
        if r["alpha"] == 0.1:
            check(r["extra_blocks"] == 0 and abs(r["density"] - r["planned_density"]) < 1e-9,
                  f"{tag}: kept = the forced blocks and the data's targets (the planned density)",
                  (r["density"], r["planned_density"], r["extra_blocks"]), r["planned_density"])
        check(r["density"] < 0.7 and r["corrected_blocks"] > 0 and r["pruned_rows"] > 0,
              f"{tag}: some blocks pruned", (r["density"], r["corrected_blocks"], r["pruned_rows"]), "< 0.7")
        check(0 < r["pruned_mass"] < 0.5, f"{tag}: the pruned blocks hold some of the mass, not most",
              r["pruned_mass"], "(0, 0.5)")
        check(r["rel_l2_corrected"] < 0.5 * r["rel_l2_dropped"] and r["rel_l2_dropped"] > 1e-3,
              f"{tag}: mean correction well closer to dense than dropping",
              (r["rel_l2_corrected"], r["rel_l2_dropped"]), "corrected < dropped / 2")
        check(r["check_mean_abs"] <= r["check_max_err"] and r["mean_abs_corrected"] < 0.9 * r["mean_abs_dropped"],
              f"{tag}: FlashPrefill V2's metric, mean |error| against dense, corrected under 0.9 x dropped",
              (r["check_mean_abs"], r["mean_abs_corrected"], r["mean_abs_dropped"]), "corrected < 0.9 dropped")
        check(r["corrected_closer"] > 0.9, f"{tag}: corrected closer on most rows with pruned blocks",
              r["corrected_closer"], "> 0.9")
    by = {(r["T"], r["alpha"]): r for r in rows}
    if (1000, 0.1) in by and (1000, 0.01) in by and (512, 0.1) in by:
        check(by[(1000, 0.01)]["kept_blocks"] >= by[(1000, 0.1)]["kept_blocks"],
              "attention prefill: a lower alpha keeps at least as many blocks",
              (by[(1000, 0.01)]["kept_blocks"], by[(1000, 0.1)]["kept_blocks"]), ">=")
        check(by[(1000, 0.1)]["density"] < by[(512, 0.1)]["density"],
              "attention prefill: the forced share, so the density, falls with the length",
              (by[(1000, 0.1)]["density"], by[(512, 0.1)]["density"]), "1000 < 512")
    # without --seq the CPU runs a small prefill, and says so
    rc, so, se = run(["attention", "prefill", "--device", "cpu", "--q-heads", "2", "--kv-heads", "1",
                      "--head-dim", "16", "--v-dim", "16", "--repeat", "1", "--warmup", "0"])
    check(rc == 0 and "smaller default prefill (1k tokens)" in so and "\n    1024  0.100 " in so,
          "attention prefill on the CPU without --seq: 1k tokens, announced", (rc, so[-400:]), "1024")
    for bad, opt in ((["--alpha", "1.5"], "--alpha"), (["--alpha", "0.1,x"], "--alpha"), (["--hot", "0"], "--hot"),
                     (["--block", "0"], "--block"), (["--seq", "0"], "--seq"), (["--window", "x"], "--window"),
                     (["--sink"], "--sink"), (["--dtype", "int8"], "--dtype"), (["--frobnicate", "1"], "--frobnicate")):
        rc, so, se = run(["attention", "prefill", "--device", "cpu"] + bad)
        check(rc == 2 and opt in se, f"attention prefill {' '.join(bad)}: exit 2 naming {opt}",
              (rc, se.strip()[:120]), (2, opt))
    rc, so, se = run(["attention", "prefill", "--device", "cpu", "--q-heads", "6", "--kv-heads", "4"])
    check(rc == 2 and "--q-heads" in se, "attention prefill: q heads not a multiple of kv heads, exit 2",
          (rc, se.strip()[:120]), (2, "--q-heads"))

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
