#!/usr/bin/env python3
"""torch_attention.py: the PyTorch baselines for sieve's attention workload, as JSON lines.

indexer: the DeepSeek-style indexer top-k done the straightforward torch way. Query t sits at
position pos0 + t with pos0 = L - T (the queries are the last T tokens) and sees keys s <= pos0 + t:
    I[t,s] = sum_h w[t,h] * relu(q[t,h] . keys[s]),  then torch.topk(I, k, dim=-1) (sorted)
q [T,H,D] and keys [L,D] bfloat16, w [T,H] float32 (standard normal, w / sqrt(H)), made on the GPU
from --seed. einsum('thd,ld->thl') is one cuBLAS GEMM (float32 accumulation: the reduced precision
bf16 reduction is turned off; bf16 output), then relu, * w (float32), sum over h, causal mask, topk,
over chunks of the T queries (--chunk; auto keeps the [chunk,H,L] float32 product under --chunk-gb).
ms times every chunk as one measurement; score_ms is the same without the topk.
    python3 bench/torch_attention.py indexer --json attn.json          # H=64 D=128 L=128k T=2048 k=2048
    python3 bench/torch_attention.py indexer --keys 16k,64k,128k --queries 1,64,2048
    python3 bench/torch_attention.py indexer --check                   # self test against float64
dense: causal scaled_dot_product_attention, one backend at a time (sdpa_kernel), GQA 32/8 heads,
head dim 128, bfloat16, batch 1; a backend that cannot run a shape gets a "skipped" reason.
    python3 bench/torch_attention.py dense --seq 8k,32k,128k --backends flash,cudnn --json attn.json
Sizes take k = 1024 and m = 1048576 (sequence lengths are powers of two; torch_knn.py's k is 1000).
Reference (H200): indexer H=64 D=128 L=131072 T=2048 k=2048: 114 ms; dense 8K / 32K / 128K:
flash 1.76 / 25.5 / 429 ms, cuDNN 0.96 / 15.0 / 250 ms.
"""
import argparse
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_knn  # noqa: E402  (its size parser and timer; torch itself is imported in main)

REFERENCE_MS = {("indexer", 64, 128, 131072, 2048, 2048): 114.0,
                ("flash", 8192): 1.76, ("flash", 32768): 25.5, ("flash", 131072): 429.0,
                ("cudnn", 8192): 0.96, ("cudnn", 32768): 15.0, ("cudnn", 131072): 250.0}
# (T, L, H, D, k, chunk) of --check: an uneven chunking, the full causal triangle (the first
# queries see fewer than k keys), and the default head shape
CHECK_SHAPES = [(16, 4096, 8, 64, 64, 5), (256, 256, 8, 64, 64, 48), (8, 2048, 64, 128, 128, 3)]


def parse_list(s):
    """Comma-separated sizes with k = 1024 and m = 1048576 (torch_knn.py's parser)."""
    return torch_knn.parse_list(s, 1024)


def main():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repeat", type=int, default=10, help="timed runs; the median is reported")
    common.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    common.add_argument("--seed", type=int, default=0)
    common.add_argument("--json", help="append one JSON object per line to this file")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", metavar="{indexer,dense}")
    sub.required = True
    ix = sub.add_parser("indexer", parents=[common], help="indexer scores + torch.topk")
    ix.add_argument("--heads", type=int, default=64)
    ix.add_argument("--head-dim", type=int, default=128)
    ix.add_argument("--keys", default="128k", help="L, comma separated (128k = 131072)")
    ix.add_argument("--queries", default="2048", help="T, comma separated (the last T of the L tokens)")
    ix.add_argument("--k", default="2048", help="comma separated")
    ix.add_argument("--chunk", type=int, default=0, help="queries per chunk (0: auto from --chunk-gb)")
    ix.add_argument("--chunk-gb", type=float, default=16.0, help="auto chunk: the [chunk,H,L] float32 product under this")
    ix.add_argument("--head-sum", default="both", choices=["elementwise", "matmul", "both"],
                    help="the heads' weighted sum: relu(s) * w summed over h (the form targets.md timed; "
                         "backend 'torch'), a batched float32 GEMV (faster; backend 'torch-bmm'), or both")
    ix.add_argument("--check", action="store_true", help="self test on small shapes against float64, then exit")
    de = sub.add_parser("dense", parents=[common], help="causal SDPA, flash / cuDNN backends")
    de.add_argument("--seq", default="8k,32k,128k", help="sequence lengths, comma separated")
    de.add_argument("--q-heads", type=int, default=32)
    de.add_argument("--kv-heads", type=int, default=8)
    de.add_argument("--head-dim", type=int, default=128)
    de.add_argument("--batch", type=int, default=1)
    de.add_argument("--backends", default="flash,cudnn", help="of flash,cudnn,efficient,math")
    a = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    dev = torch.device("cuda")
    out = open(a.json, "a") if a.json else None
    base = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}

    def emit(obj, summary):
        line = json.dumps({**obj, **base})
        print(line, flush=True)
        print(summary, file=sys.stderr, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    def bench(fn):
        """(median, min) ms of --repeat runs after --warmup, CUDA events around each run."""
        ts = torch_knn.cuda_times(torch, fn, a.repeat, a.warmup)
        return ts[len(ts) // 2], ts[0]

    def ref_note(key, ms):
        r = REFERENCE_MS.get(key)
        return f" (reference {r:g} ms, x{ms / r:.2f})" if r else ""

    def free():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    if a.mode == "indexer":
        return run_indexer(a, torch, dev, emit, bench, ref_note, free)
    return run_dense(a, torch, dev, emit, bench, ref_note, free)


def indexer_topk(torch, q, keys, w, k, chunk, select=True, head_sum="elementwise"):
    """Causal indexer scores over chunks of the queries; with select, the sorted top k of each
    query (values float32 [T,k], indices int64 [T,k]; a query seeing fewer than k keys gets
    -inf values at arbitrary masked indices)."""
    T, L = q.shape[0], keys.shape[0]
    pos0 = L - T
    cols = torch.arange(L, device=q.device)
    vals = torch.empty(T, k, device=q.device, dtype=torch.float32) if select else None
    idx = torch.empty(T, k, device=q.device, dtype=torch.int64) if select else None
    for t0 in range(0, T, chunk):
        t1 = min(T, t0 + chunk)
        s = torch.einsum("thd,ld->thl", q[t0:t1], keys)  # bf16 [c,H,L]
        if head_sum == "matmul":  # the heads' weighted sum as a batched GEMV (float32)
            I = torch.bmm(w[t0:t1, None, :], torch.relu(s).float()).squeeze(1)  # float32 [c,L]
        else:
            I = (torch.relu(s) * w[t0:t1, :, None]).sum(dim=1)  # float32 [c,L]
        del s
        last = torch.arange(pos0 + t0, pos0 + t1, device=q.device)  # last visible key of each query
        I.masked_fill_(cols[None, :] > last[:, None], float("-inf"))
        if select:
            vals[t0:t1], idx[t0:t1] = torch.topk(I, k, dim=-1)
    return vals, idx


def make_inputs(torch, dev, seed, T, H, D, L):
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    keys = torch.randn(L, D, device=dev, dtype=torch.bfloat16, generator=g)
    q = torch.randn(T, H, D, device=dev, dtype=torch.bfloat16, generator=g)
    w = torch.randn(T, H, device=dev, dtype=torch.float32, generator=g) / H ** 0.5
    return q, keys, w


def auto_chunk(T, H, L, chunk, gb):
    if chunk > 0:
        return min(chunk, T)
    c = max(1, int(gb * 1e9 // (H * L * 4)))
    return min(T, 1 << (c.bit_length() - 1))  # a power of two


def run_check(a, torch, dev, emit):
    """The chunked bf16 path against float64 scores of the same inputs. A top-k difference is
    a near-tie when every key in one set and not the other scores (float64) within tol of the
    k-th best, tol = 1e-2 times the query's score scale max_s sum_h |w[t,h] * q[t,h].keys[s]|
    over its visible keys (what the bf16 roundings of the dots act on; about 2^-9 of it is
    their error); anything else (a masked key returned, a count that differs, a value off by
    more than tol) fails."""
    bad = 0
    for T, L, H, D, k, chunk in CHECK_SHAPES:
        q, keys, w = make_inputs(torch, dev, a.seed, T, H, D, L)
        vals, idx = indexer_topk(torch, q, keys, w, k, chunk)
        dots, w64 = torch.einsum("thd,ld->thl", q.double(), keys.double()), w.double()[:, :, None]
        ref, mag = (torch.relu(dots) * w64).sum(1), (dots.abs() * w64.abs()).sum(1)
        masked = torch.arange(L, device=dev)[None, :] > torch.arange(L - T, L, device=dev)[:, None]
        ref.masked_fill_(masked, float("-inf"))
        scales = mag.masked_fill_(masked, 0).amax(dim=1).clamp_min(1e-30).tolist()
        rvals, ridx = torch.topk(ref, k, dim=-1)
        ref_l, vals_l, idx_l, rvals_l, ridx_l = (x.tolist() for x in (ref, vals, idx, rvals, ridx))
        differ = unexplained = 0
        max_rel = 0.0
        for t in range(T):
            got = {i for v, i in zip(vals_l[t], idx_l[t]) if v != float("-inf")}
            want = {i for v, i in zip(rvals_l[t], ridx_l[t]) if v != float("-inf")}
            kth, scale = min(v for v in rvals_l[t] if v != float("-inf")), scales[t]
            tol = 1e-2 * scale
            for v, i in zip(vals_l[t], idx_l[t]):
                if v != float("-inf"):
                    max_rel = max(max_rel, abs(v - ref_l[t][i]) / scale)
            if got != want:
                differ += 1
                extra, missed = got - want, want - got
                if (len(got) != len(want) or any(ref_l[t][i] == float("-inf") or kth - ref_l[t][i] > tol for i in extra)
                        or any(ref_l[t][i] - kth > tol for i in missed)):
                    unexplained += 1
        bad += unexplained + (max_rel > 1e-2)
        emit({"mode": "indexer-check", "backend": "torch", "T": T, "H": H, "D": D, "L": L, "k": k, "chunk": chunk,
              "dtype": "bfloat16", "queries_differ": differ, "unexplained": unexplained, "max_value_rel_err": max_rel},
             f"check T={T} L={L} H={H} D={D} k={k} chunk={chunk}: {differ}/{T} top-k sets differ from float64, "
             f"{unexplained} not near-ties; value error <= {max_rel:.2e} of the score scale")
        del q, keys, w, vals, idx, dots, ref, mag, rvals, ridx
    print("check " + ("FAILED" if bad else "passed"), file=sys.stderr)
    return 1 if bad else 0


def run_indexer(a, torch, dev, emit, bench, ref_note, free):
    if a.check:
        return run_check(a, torch, dev, emit)
    H, D = a.heads, a.head_dim
    for L in parse_list(a.keys):
        for T in parse_list(a.queries):
            for k in parse_list(a.k):
                row = {"mode": "indexer", "backend": "torch", "T": T, "H": H, "D": D, "L": L, "k": k, "dtype": "bfloat16"}
                if T > L or k > L:
                    emit({**row, "skipped": "needs T <= L and k <= L"}, f"indexer T={T} L={L} k={k}: skipped")
                    continue
                c = auto_chunk(T, H, L, a.chunk, a.chunk_gb)
                row["chunk"] = c
                q = keys = w = None
                for hs in (["elementwise", "matmul"] if a.head_sum == "both" else [a.head_sum]):
                    r = {**row, "backend": "torch" if hs == "elementwise" else "torch-bmm", "head_sum": hs}
                    try:
                        if q is None:
                            q, keys, w = make_inputs(torch, dev, a.seed, T, H, D, L)
                        sms, sms_min = bench(lambda: indexer_topk(torch, q, keys, w, k, c, False, hs))
                        ms, ms_min = bench(lambda: indexer_topk(torch, q, keys, w, k, c, True, hs))
                    except torch.cuda.OutOfMemoryError:
                        q = keys = w = None
                        free()
                        emit({**r, "error": "out of memory"}, f"indexer T={T} L={L} k={k} chunk={c} {hs}: out of memory")
                        continue
                    emit({**r, "ms": ms, "ms_min": ms_min, "score_ms": sms, "score_ms_min": sms_min, "repeat": a.repeat},
                         f"indexer ({hs} head sum) H={H} D={D} L={L} T={T} k={k} chunk={c}: {ms:.2f} ms (scores "
                         f"{sms:.2f} ms, topk {ms - sms:.2f} ms){ref_note(('indexer', H, D, L, T, k), ms) if hs == 'elementwise' else ''}")
                del q, keys, w
                free()
    return 0


def run_dense(a, torch, dev, emit, bench, ref_note, free):
    import torch.nn.functional as F
    missing = None
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3
    except ImportError as e:
        SDPBackend = sdpa_kernel = None
        missing = f"torch.nn.attention: {e}"
    names = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}
    Hq, Hkv, D, B = a.q_heads, a.kv_heads, a.head_dim, a.batch
    for S in parse_list(a.seq):
        row0 = {"mode": "dense", "T": S, "H": Hq, "H_kv": Hkv, "D": D, "L": S, "batch": B, "dtype": "bfloat16", "causal": True}
        g = torch.Generator(device=dev)
        g.manual_seed(a.seed)
        q = torch.randn(B, Hq, S, D, device=dev, dtype=torch.bfloat16, generator=g)
        k = torch.randn(B, Hkv, S, D, device=dev, dtype=torch.bfloat16, generator=g)
        v = torch.randn(B, Hkv, S, D, device=dev, dtype=torch.bfloat16, generator=g)
        for name in a.backends.split(","):
            name = name.strip()
            row = {**row0, "backend": name}
            backend = getattr(SDPBackend, names.get(name, "?"), None) if SDPBackend else None
            if backend is None:
                why = missing if SDPBackend is None else f"no SDPBackend for '{name}' in this torch"
                emit({**row, "skipped": why}, f"dense {name} S={S}: skipped ({why})")
                continue
            # GQA by enable_gqa (torch >= 2.5) where the backend takes it, else K/V repeated to
            # the query heads once, outside the timing
            reasons, done = [], False
            for gqa in (("enable_gqa", "repeat_interleave") if Hq != Hkv else ("none",)):
                kk = vv = fn = None
                with warnings.catch_warnings(record=True) as wl:
                    warnings.simplefilter("always")  # sdpa_kernel says why a backend declined
                    try:
                        kw = {"enable_gqa": True} if gqa == "enable_gqa" else {}
                        kk, vv = (k, v) if gqa != "repeat_interleave" else (
                            k.repeat_interleave(Hq // Hkv, dim=1), v.repeat_interleave(Hq // Hkv, dim=1))
                        fn = lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True, **kw)
                        with sdpa_kernel(backend):
                            ms, ms_min = bench(fn)
                    except (RuntimeError, TypeError, ValueError) as e:  # OutOfMemoryError is a RuntimeError
                        msg = (str(e).strip() or type(e).__name__).splitlines()[0]
                        hints = "; ".join(str(x.message).strip().splitlines()[0] for x in wl if str(x.message).strip())
                        reasons.append(f"{gqa}: {type(e).__name__}: {msg}" + (f" [{hints}]" if hints else ""))
                        kk = vv = fn = None
                        free()
                        continue
                tflops = 4 * B * Hq * S * S * D / 2 / ms / 1e9  # two GEMMs, causal half
                emit({**row, "gqa": gqa, "ms": ms, "ms_min": ms_min, "tflops": tflops, "repeat": a.repeat},
                     f"dense {name} S={S} Hq={Hq} Hkv={Hkv} D={D} ({gqa}): {ms:.2f} ms, {tflops:.0f} TFLOP/s"
                     f"{ref_note((name, S), ms)}")
                kk = vv = fn = None
                done = True
                break
            if not done:
                why = " | ".join(reasons)[:1000]
                emit({**row, "skipped": why}, f"dense {name} S={S}: skipped ({why})")
            free()
        del q, k, v
        free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
