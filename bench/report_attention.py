#!/usr/bin/env python3
"""report_attention.py: turns `sieve-bench attention` and `bench/torch_attention.py indexer`
JSON lines (measured in the same run) into a Markdown table of the indexer top-k (fused,
in-house materialized, torch in both head-sum forms, the floor, percent of floor, speedups,
recovery paths), a summary against the attention targets of targets.md (at least 10x
torch's reference, at least 1.7x the materialized path at L >= 64K), and PNG plots of time
against the keys L and against the query tokens T. With `sieve-bench attention sparse`
lines (--sparse, or among --sieve's), also a table of grouped against per-query sparse
attention, the summary against its target (at least 1.5x where 16 neighbouring tokens
overlap heavily: a group's union at most twice one token's set) and a plot of the speedup
against the union's size (PREFIX-sparse.png). With `sieve-bench attention dense` lines (--dense,
or among --sieve's) and `torch_attention.py dense` lines (--torch), a table of the in-house
dense causal attention beside torch's flash and cuDNN backends. With `sieve-bench attention
prefill` lines (--prefill, or among --sieve's), a table of block-sparse prefill with mean
correction (corrected) and without it (dropped) against the in-house dense attention and,
where --torch has dense lines of the same length and heads, against torch's flash and cuDNN
backends; the summary against its target (at 128K: at least 20x torch flash, 10x cuDNN; mean
correction closer to dense than dropping) and a plot of time against the length
(PREFIX-prefill.png).

usage: bench/report_attention.py --sieve attn.json [--torch torch.json] [--sparse s.json]
                                 [--dense d.json] [--prefill p.json] [--md out.md]
                                 [--plots PREFIX]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_knn import load  # noqa: E402  (JSON lines of a file)

TORCH_X = 10.0   # at least 10x faster than the torch reference (targets.md)
MAT_X = 1.7      # at least 1.7x faster than the materialized path ...
MAT_MIN_L = 65536  # ... at L >= 64K
GROUP_X = 1.5    # grouped sparse attention at least 1.5x over per query ...
HEAVY_UNION = 2.0  # ... where 16 neighbours overlap heavily: union <= 2 x one set
FLASH_X = 20.0   # block-sparse prefill at least 20x torch flash ...
CUDNN_X = 10.0   # ... and 10x cuDNN dense ...
PREFILL_L = 131072  # ... at 128K (targets.md, about 5% density)


def pyplot():
    """matplotlib's pyplot on the Agg backend, or None (saying so) where it is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots", file=sys.stderr)
        return None
    return plt


def key(r):
    return (r["T"], r["H"], r["D"], r["L"], r["k"])


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sieve", required=True, help="sieve-bench attention --json lines")
    ap.add_argument("--torch", help="torch_attention.py indexer --json lines (same run)")
    ap.add_argument("--sparse", help="sieve-bench attention sparse --json lines")
    ap.add_argument("--dense", help="sieve-bench attention dense --json lines")
    ap.add_argument("--prefill", help="sieve-bench attention prefill --json lines")
    ap.add_argument("--md", help="also write the Markdown here")
    ap.add_argument("--plots", help="write PREFIX-vs-L.png and PREFIX-vs-T.png")
    a = ap.parse_args(argv)

    sieve, sparse, dense, prefill = {}, {}, {}, {}
    failed = []  # lines of a shape whose run failed (no time): reported, and the exit is 1
    for r in load(a.sieve) + load(a.sparse) + load(a.dense) + load(a.prefill):
        t = {"indexer": "fused_ms", "sparse": "grouped_ms", "dense": "ms",
             "prefill": "corrected_ms"}.get(r.get("kernel"))
        if r.get("mode") == "attention" and t and r.get(t) is None:
            failed.append(r)
        if r.get("mode") == "attention" and r.get("kernel") == "prefill" and r.get("corrected_ms") is not None:
            prefill[pkey(r)] = r
        if r.get("mode") == "attention" and r.get("kernel") == "dense" and r.get("ms") is not None:
            dense[(r["T"], r["Hq"], r["Hkv"], r["D"])] = r
        if r.get("mode") == "attention" and r.get("kernel") == "indexer" and r.get("fused_ms") is not None:
            sieve[key(r)] = r  # the last line of a shape wins
        if r.get("mode") == "attention" and r.get("kernel") == "sparse" and r.get("grouped_ms") is not None:
            sparse[skey(r)] = r
    torch, tdense = {}, {}
    for r in load(a.torch):
        if r.get("mode") == "indexer" and "ms" in r:
            torch[(key(r), r.get("backend", "torch"))] = r["ms"]
        if r.get("mode") == "dense" and "ms" in r:
            tdense[((r["T"], r["H"], r["H_kv"], r["D"]), r.get("backend"))] = r["ms"]
    if not sieve and not sparse and not dense and not prefill and not failed:
        print("no sieve-bench attention lines", file=sys.stderr)
        return 1

    out = []
    bad = []
    if sieve:
        bad = indexer_report(sieve, torch, out, a.plots)
    sbad = sparse_report(sparse, out, a.plots) if sparse else []
    dbad = dense_report(dense, tdense, out) if dense else []
    pbad = prefill_report(prefill, tdense, out, a.plots) if prefill else []
    if failed:
        out.append("")
        out.append(f"- {len(failed)} shape(s) failed to run (no time): " + "; ".join(
            f"{r['kernel']} T={r.get('T')} L={r.get('L')}"
            + (f" alpha={r.get('alpha')}" if r.get("kernel") == "prefill" else "") for r in failed[:8]) + ".")
    text = "\n".join(out)
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")
    return 1 if bad or sbad or dbad or pbad or failed else 0


def dense_report(dense, tdense, out):
    """Appends the dense causal attention table; returns the shapes whose check was off."""
    if out:
        out.append("")
    out.append("Dense causal attention (prefill), in-house against torch in the same run:")
    out.append("")
    out.append("| seq | q / kv heads | D | sieve ms | TFLOP/s | torch flash ms | torch cuDNN ms | "
               "flash / sieve | cuDNN / sieve | floor ms | checked |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for kk in sorted(dense):
        r = dense[kk]
        fl, cu = tdense.get((kk, "flash")), tdense.get((kk, "cudnn"))
        ms = r["ms"]
        out.append(f"| {r['T']} | {r['Hq']} / {r['Hkv']} | {r['D']} | {fmt(ms)} | {fmt(r.get('tflops'), '.0f')} | "
                   f"{fmt(fl, '.2f')} | {fmt(cu, '.2f')} | {fmt(fl / ms if fl else None, '.2f')} | "
                   f"{fmt(cu / ms if cu else None, '.2f')} | {fmt(r.get('floor_ms'))} | {r.get('ok', '-')} |")
    off = [k for k, r in dense.items() if r.get("ok") not in ("yes", "-")]
    out.append("")
    out.append(f"- Dense against float64 on the checked tokens: {'every shape' if not off else f'{len(off)} OFF'}.")
    return off


def pkey(r):
    """A prefill run's identity: runs that differ in any setting stay separate rows."""
    return (r["T"], r["Hq"], r["Hkv"], r["D"], r["DV"], r.get("block"), r.get("alpha"), r.get("sink"),
            r.get("window"), r.get("hot"), r.get("dtype"))


def prefill_report(prefill, tdense, out, plots):
    """Appends the block-sparse prefill table and summary, writes its plot; returns the
    shapes whose check was off."""
    if out:
        out.append("")
    r0 = next(iter(prefill.values()))
    out.append(f"Block-sparse prefill with mean correction ({r0.get('dtype', '')}), corrected and dropped "
               f"against the in-house dense attention and torch in the same run:")
    out.append("")
    out.append("| seq | q / kv heads | D | block | alpha | density | dense ms | corrected ms | dropped ms | "
               "corrected over dense | dropped over dense | torch flash ms | torch cuDNN ms | corrected over flash | "
               "corrected over cuDNN | dropped over flash | dropped over cuDNN | error corrected | error dropped | "
               "corrected closer | checked | sink / window blocks | hot |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    met_fl, met_cu, closer = [], [], []
    for kk in sorted(prefill, key=lambda x: tuple(v if isinstance(v, (int, float)) else 0 for v in x[:10])):
        r = prefill[kk]
        fl, cu = tdense.get(((r["T"], r["Hq"], r["Hkv"], r["D"]), "flash")), \
            tdense.get(((r["T"], r["Hq"], r["Hkv"], r["D"]), "cudnn"))
        c, dr, dn = r["corrected_ms"], r.get("dropped_ms"), r.get("dense_ms")
        x_dn = dn / c if dn else None
        xd_dn = dn / dr if dn and dr else None
        x_fl = fl / c if fl else None
        x_cu = cu / c if cu else None
        xd_fl = fl / dr if fl and dr else None
        xd_cu = cu / dr if cu and dr else None
        ec, ed = r.get("rel_l2_corrected"), r.get("rel_l2_dropped")
        if r["L"] >= PREFILL_L and x_fl is not None:
            met_fl.append(x_fl >= FLASH_X)
        if r["L"] >= PREFILL_L and x_cu is not None:
            met_cu.append(x_cu >= CUDNN_X)
        if ec is not None and ed is not None:
            closer.append(ec < ed)
        out.append(f"| {r['T']} | {r['Hq']} / {r['Hkv']} | {r['D']} | {r.get('block', '-')} | {fmt(r.get('alpha'), 'g')} | "
                   f"{fmt(r.get('density'), '.4f')} | {fmt(dn)} | {fmt(c)} | {fmt(dr)} | "
                   f"{fmt(x_dn, '.2f')}{'x' if x_dn else ''} | {fmt(xd_dn, '.2f')}{'x' if xd_dn else ''} | "
                   f"{fmt(fl, '.2f')} | {fmt(cu, '.2f')} | {fmt(x_fl, '.1f')}{'x' if x_fl else ''} | "
                   f"{fmt(x_cu, '.1f')}{'x' if x_cu else ''} | {fmt(xd_fl, '.1f')}{'x' if xd_fl else ''} | "
                   f"{fmt(xd_cu, '.1f')}{'x' if xd_cu else ''} | "
                   f"{fmt(ec, '.2e')} | {fmt(ed, '.2e')} | {fmt(r.get('corrected_closer'), '.3f')} | "
                   f"{r.get('ok', '-')} | {r.get('sink', '-')} / {r.get('window', '-')} | "
                   f"{fmt(r.get('hot'), 'g')} |")
    out.append("")
    out.append(f"- Corrected at least {FLASH_X:g}x faster than torch flash at L >= {PREFILL_L}: "
               f"{sum(met_fl)} of {len(met_fl)} shapes with a flash line; at least {CUDNN_X:g}x faster "
               f"than cuDNN: {sum(met_cu)} of {len(met_cu)} shapes with a cuDNN line.")
    out.append(f"- Mean correction closer to dense than dropping (relative L2 over the rows): "
               f"{sum(closer)} of {len(closer)} shapes.")
    # FlashPrefill V2's own test (test_mean_correction.py): the kernel against its float64
    # reference given the index, mean absolute error < 8e-3 and max < 0.15 in bfloat16
    # (2e-2 / 0.3 otherwise); corrected against dense, mean absolute error below 0.9 x that
    # of plain sparse attention
    fp_ok, fp_n = 0, 0
    for r in prefill.values():
        cm, cx = r.get("check_mean_abs"), r.get("check_max_err")
        mc, md = r.get("mean_abs_corrected"), r.get("mean_abs_dropped")
        if None in (cm, cx, mc, md):
            continue
        bf = str(r.get("dtype", "")).startswith("b")
        fp_n += 1
        fp_ok += cm < (8e-3 if bf else 2e-2) and cx < (0.15 if bf else 0.3) and mc < 0.9 * md
    if fp_n:
        out.append(f"- FlashPrefill V2's test tolerances (kernel against float64 given the selection: "
                   f"mean |error| < 8e-3, max < 0.15 in bfloat16; corrected against dense: mean |error| "
                   f"under 0.9 x dropped's): {fp_ok} of {fp_n} shapes.")
    off = [k for k, r in prefill.items() if r.get("ok") not in ("yes", "-")]
    out.append(f"- Block-sparse against float64 given its own selection, forced blocks kept: "
               f"{'every shape' if not off else f'{len(off)} OFF'}.")
    if plots:
        plt = pyplot()
        if plt is None:
            return off
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        heads = {}
        for r in prefill.values():  # one set of curves per head shape; dense once per length
            heads.setdefault((r["Hq"], r["Hkv"], r["D"], r["DV"]), []).append(r)
        ci = 0
        for (hq, hkv, d, dv), rs in sorted(heads.items()):
            tag = f" {hq}/{hkv} D={d}" if len(heads) > 1 else ""
            seqs = sorted({r["T"] for r in rs})
            dn = {r["T"]: r.get("dense_ms") for r in rs}
            pts = [(s, dn[s]) for s in seqs if dn[s] is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color="black", label="sieve dense" + tag)
            for name, mk in (("flash", "^:"), ("cudnn", "v:")):
                pts = [(s, tdense.get(((s, hq, hkv, d), name))) for s in seqs]
                pts = [p for p in pts if p[1] is not None]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], mk, color="grey", label=f"torch {name}" + tag)
            for alpha in sorted({r.get("alpha") for r in rs}, key=lambda x: x or 0):
                col = f"C{ci % 10}"
                ci += 1
                ar = sorted((r for r in rs if r.get("alpha") == alpha), key=lambda r: r["T"])
                ax.plot([r["T"] for r in ar], [r["corrected_ms"] for r in ar], "o-", color=col,
                        label=f"corrected alpha={alpha:g}" + tag)
                dp = [(r["T"], r.get("dropped_ms")) for r in ar if r.get("dropped_ms") is not None]
                if dp:
                    ax.plot([p[0] for p in dp], [p[1] for p in dp], "s--", color=col, alpha=0.6,
                            label=f"dropped alpha={alpha:g}" + tag)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("prefill length (queries = keys)")
        ax.set_ylabel("ms (whole call)")
        ax.set_title(f"block-sparse prefill, {r0.get('dtype', '')} Hq {r0['Hq']} / Hkv {r0['Hkv']} D {r0['D']}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(f"{plots}-prefill.png", dpi=110)
        plt.close(fig)
    return off


def skey(r):
    return (r["T"], r["Hq"], r["Hkv"], r["D"], r["DV"], r["L"], r["k"], r["group"], r["share"])


def sparse_report(sparse, out, plots):
    """Appends the grouped-vs-per-query table and summary; returns the shapes off."""
    if out:
        out.append("")
    r0 = next(iter(sparse.values()))
    out.append(f"Grouped sparse attention ({r0.get('dtype', '')}, q heads {r0['Hq']}, kv heads "
               f"{r0['Hkv']}, D {r0['D']}, v_dim {r0['DV']}):")
    out.append("")
    out.append("| T | L | k | group | share | union / set | per-query ms | grouped ms | speedup | "
               "floor ms | % of floor | checked |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    heavy, n_heavy = [], 0
    for kk in sorted(sparse, key=lambda x: (x[5], x[0], x[6], x[7], -x[8])):
        r = sparse[kk]
        pq, g, fl, u = r.get("per_query_ms"), r["grouped_ms"], r.get("floor_ms"), r.get("union_over_set")
        sp = pq / g if pq else None
        pct = 100.0 * fl / g if fl else None
        if r["group"] == 16 and u is not None and u <= HEAVY_UNION and sp is not None:
            n_heavy += 1
            heavy.append(sp >= GROUP_X)
        out.append(f"| {r['T']} | {r['L']} | {r['k']} | {r['group']} | {r['share']:.2f} | {fmt(u, '.2f')} | "
                   f"{fmt(pq)} | {fmt(g)} | {fmt(sp, '.2f')}{'x' if sp else ''} | {fmt(fl)} | "
                   f"{fmt(pct, '.0f')} | {r.get('ok', '-')} |")
    out.append("")
    out.append(f"- Grouped at least {GROUP_X:g}x over per query where 16 neighbours overlap heavily "
               f"(union at most {HEAVY_UNION:g}x one set): {sum(heavy)} of {n_heavy} shapes.")
    off = [k for k, r in sparse.items() if r.get("ok") not in ("yes", "-")]
    out.append(f"- Grouped == per query and float64 within the stated bound: "
               f"{'every shape' if not off else f'{len(off)} OFF'}.")
    if plots:
        plt = pyplot()
        if plt is None:
            return off
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        series = {}
        for r in sparse.values():
            if r.get("per_query_ms") and r.get("union_over_set"):
                series.setdefault((r["T"], r["L"], r["k"], r["group"]), []).append(r)
        for i, ((T, L, k, g), rs) in enumerate(sorted(series.items())):
            rs.sort(key=lambda r: r["union_over_set"])
            ax.plot([r["union_over_set"] for r in rs], [r["per_query_ms"] / r["grouped_ms"] for r in rs],
                    "o-", color=f"C{i % 10}", label=f"group {g}, T={T} L={L} k={k}")
        ax.axhline(GROUP_X, color="grey", ls="--", lw=1, label=f"target {GROUP_X:g}x")
        ax.axhline(1.0, color="black", lw=0.6)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("a group's union / one token's set (1 = identical sets)")
        ax.set_ylabel("speedup over per-query (x)")
        ax.set_title(f"grouped sparse attention, {r0.get('dtype', '')} Hq {r0['Hq']} / Hkv {r0['Hkv']}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(f"{plots}-sparse.png", dpi=110)
        plt.close(fig)
    return off


def indexer_report(sieve, torch, out, plots):
    """Appends the indexer's table and summary, writes its plots; returns the mismatches."""
    out.append("| T | L | k | fused ms | materialized ms | torch ms | torch (GEMV head sum) ms | "
               "floor ms | % of floor | vs torch | vs materialized | exact | paths (c/u/o/f/d) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    met_torch, met_mat, n_torch, n_mat = [], [], 0, 0
    for kk in sorted(sieve, key=lambda x: (x[3], x[0], x[4])):
        r = sieve[kk]
        f, m, fl = r["fused_ms"], r.get("materialized_ms"), r.get("floor_ms")
        t1, t2 = torch.get((kk, "torch")), torch.get((kk, "torch-bmm"))
        vs_t = t1 / f if t1 else None
        vs_m = m / f if m else None
        if vs_t is not None:
            n_torch += 1
            met_torch.append(vs_t >= TORCH_X)
        if vs_m is not None and r["L"] >= MAT_MIN_L:
            n_mat += 1
            met_mat.append(vs_m >= MAT_X)
        pct = 100.0 * fl / f if fl else None
        out.append(f"| {r['T']} | {r['L']} | {r['k']} | {fmt(f)} | {fmt(m)} | {fmt(t1, '.2f')} | "
                   f"{fmt(t2, '.2f')} | {fmt(fl)} | {fmt(pct, '.0f')} | "
                   f"{fmt(vs_t, '.1f')}{'x' if vs_t else ''} | {fmt(vs_m, '.2f')}{'x' if vs_m else ''} | "
                   f"{r.get('exact', '-')} | {'/'.join(str(x) for x in r.get('paths', []))} |")
    out.append("")
    out.append(f"- At least {TORCH_X:g}x faster than torch's reference form: "
               f"{sum(met_torch)} of {n_torch} shapes with a torch line.")
    out.append(f"- At least {MAT_X:g}x faster than the materialized path at L >= {MAT_MIN_L}: "
               f"{sum(met_mat)} of {n_mat} shapes.")
    bad = [k for k, r in sieve.items() if r.get("exact") not in ("yes", "-")]
    out.append(f"- Fused == materialized bit for bit: "
               f"{'every checked shape' if not bad else f'{len(bad)} MISMATCH'}.")
    if plots:
        plt = pyplot()
        if plt is None:
            return bad
        for axis, other, name in (("L", "T", "vs-L"), ("T", "L", "vs-T")):
            fig, ax = plt.subplots(figsize=(6.4, 4.2))
            groups = {}
            for r in sieve.values():
                groups.setdefault((r[other], r["k"]), []).append(r)
            ci = 0
            for (ov, kv), rs in sorted(groups.items()):
                rs.sort(key=lambda r: r[axis])
                if len(rs) < 2:
                    continue
                col = f"C{ci % 10}"  # one colour a group: fused solid, materialized dashed
                ci += 1
                xs = [r[axis] for r in rs]
                ax.plot(xs, [r["fused_ms"] for r in rs], "o-", color=col, label=f"fused {other}={ov} k={kv}")
                ms = [r.get("materialized_ms") for r in rs]
                if all(x is not None for x in ms):
                    ax.plot(xs, ms, "s--", color=col, alpha=0.6, label=f"materialized {other}={ov}")
                ts = [torch.get((key(r), "torch")) for r in rs]
                if sum(t is not None for t in ts) >= 2:
                    pts = [(x, t) for x, t in zip(xs, ts) if t is not None]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "^:", color=col, label=f"torch {other}={ov}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel({"L": "keys L", "T": "query tokens T"}[axis])
            ax.set_ylabel("ms (whole call)")
            r0 = next(iter(sieve.values()))
            ax.set_title(f"indexer top-k, H={r0['H']} D={r0['D']} {r0.get('dtype', '')}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(f"{plots}-{name}.png", dpi=110)
            plt.close(fig)
    return bad


if __name__ == "__main__":
    sys.exit(main())
