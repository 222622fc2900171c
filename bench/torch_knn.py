#!/usr/bin/env python3
"""torch_knn.py: the PyTorch baseline for exact k-NN (cuBLAS matmul, then torch.topk; each
line also has the matmul alone, matmul_ms), and the GPU's measured ceilings (device copy
bandwidth, GEMM rates), as JSON lines.

Run on the GPU machine beside sieve-bench so both are measured in the same run:
    python3 bench/torch_knn.py --n 1m,5m --batch 1,64 --k 128 --json torch.json
On the same rows and queries as `sieve-bench knn --base FILE --queries FILE` (numpy needed):
    python3 bench/torch_knn.py --base passages.fbin --queries q.fbin --n 1m,all --k 128
"""
import argparse
import json
import sys


def parse_list(s, kilo=1000):
    """Comma-separated sizes; k = kilo and m = kilo^2 (torch_attention.py passes 1024)."""
    out = []
    for t in s.split(","):
        t = t.strip().lower()
        mult = 1
        if t.endswith("k"):
            mult, t = kilo, t[:-1]
        elif t.endswith("m"):
            mult, t = kilo * kilo, t[:-1]
        out.append(int(round(float(t) * mult)))
    return out


def cuda_times(torch, fn, repeat, warmup=3):
    """Sorted ms of `repeat` runs of fn after `warmup` untimed ones, CUDA events around each
    (torch_attention.py uses it too)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts


def open_rows(path):
    """A read-only (n, d) view of a .npy (float32/float16, 2-D) or .fbin file."""
    import numpy as np
    if path.endswith(".npy"):
        a = np.load(path, mmap_mode="r")
        if a.ndim != 2 or a.dtype not in (np.float32, np.float16):
            raise SystemExit(f"{path}: expected a 2-D float32 or float16 array, got {a.dtype} {a.shape}")
        return a
    if path.endswith(".fbin"):
        n, d = (int(x) for x in np.fromfile(path, dtype="<u4", count=2))
        return np.memmap(path, dtype="<f4", mode="r", offset=8, shape=(n, d))
    raise SystemExit(f"{path}: unsupported format (use .npy or .fbin)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="1m", help="stored rows, comma separated (1m = 1000000; 'all' = every row of --base)")
    ap.add_argument("--base", help="stored rows from this .npy/.fbin file (--n takes its first rows)")
    ap.add_argument("--queries", help="queries from this .npy/.fbin file (a batch of B = its first B rows)")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--dtype", default="float16", help="float16,bfloat16,float32")
    ap.add_argument("--batch", default="1,64")
    ap.add_argument("--k", default="128")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--ceilings", action="store_true", help="also measure copy bandwidth and GEMM rates")
    ap.add_argument("--json", help="append one JSON object per line to this file")
    a = ap.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    out = open(a.json, "a") if a.json else None

    def emit(obj):
        line = json.dumps(obj)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    def bench(fn, repeat):
        ts = cuda_times(torch, fn, repeat)
        return ts[len(ts) // 2]

    name = torch.cuda.get_device_name(0)
    if a.ceilings:
        x = torch.randn(3_840_000_000 // 2, device=dev, dtype=torch.float16)  # 3.84 GB
        y = torch.empty_like(x)
        ms = bench(lambda: y.copy_(x), 10)
        emit({"mode": "ceiling", "what": "copy_TBps", "device": name, "value": 2 * x.numel() * 2 / ms / 1e9})
        ms = bench(lambda: x.sum(dtype=torch.float32), 10)
        emit({"mode": "ceiling", "what": "read_TBps", "device": name, "value": x.numel() * 2 / ms / 1e9})
        del x, y
        for dt, tname in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16"), (torch.float32, "float32")):
            m = 8192
            A = torch.randn(m, m, device=dev, dtype=dt)
            B = torch.randn(m, m, device=dev, dtype=dt)
            ms = bench(lambda: A @ B, 10)
            emit({"mode": "ceiling", "what": f"gemm_{tname}_TFLOPs", "device": name, "value": 2 * m ** 3 / ms / 1e9})
            if dt == torch.float16:
                # the same product back to back for about 4 s: the rate once the board
                # reaches its power limit (compute-bound batches of a server run there; the
                # short burst above runs at the boost clock)
                n = max(1, int(4000 / ms))
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(n):
                    A @ B
                e.record()
                torch.cuda.synchronize()
                emit({"mode": "ceiling", "what": "gemm_float16_sustained_TFLOPs", "device": name,
                      "value": 2 * m ** 3 * n / s.elapsed_time(e) / 1e9})
            del A, B
        torch.cuda.empty_cache()

    dts = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    base = open_rows(a.base) if a.base else None
    qfile = open_rows(a.queries) if a.queries else None
    if base is not None:
        a.dim = base.shape[1]
    ns = [base.shape[0] if t.strip() == "all" else parse_list(t)[0] for t in a.n.split(",")]
    if base is None and any(t.strip() == "all" for t in a.n.split(",")):
        raise SystemExit("--n all needs --base")
    if base is not None and max(ns) > base.shape[0]:
        raise SystemExit(f"--n {max(ns)} is more than the {base.shape[0]} rows of {a.base}")
    if qfile is not None and (qfile.shape[1] != a.dim or qfile.shape[0] < max(parse_list(a.batch))):
        raise SystemExit(f"{a.queries}: {qfile.shape} queries; need at least {max(parse_list(a.batch))} rows of dimension {a.dim}")
    data_label = ("file:" + a.base.rsplit("/", 1)[-1]) if base is not None else "normal"

    def load(n, dt):
        """The first n rows of --base on the device as dt, copied in chunks."""
        import numpy as np
        X = torch.empty(n, a.dim, device=dev, dtype=dt)
        step = 1 << 18
        for i in range(0, n, step):
            j = min(n, i + step)
            X[i:j] = torch.from_numpy(np.ascontiguousarray(base[i:j])).to(dev).to(dt)
        return X

    for tname in a.dtype.split(","):
        dt = dts[tname]
        for n in ns:
            X = load(n, dt) if base is not None else torch.randn(n, a.dim, device=dev, dtype=dt)
            for b in parse_list(a.batch):
                if qfile is not None:
                    import numpy as np
                    Q = torch.from_numpy(np.array(qfile[:b], dtype=np.float32)).to(dev).to(dt)
                else:
                    Q = torch.randn(b, a.dim, device=dev, dtype=dt)
                # the scoring GEMM alone (no selection), timed the same way: what the fused
                # kernel's time compares with where the batch is compute bound
                try:
                    mm = bench(lambda: Q @ X.T, a.repeat)
                except torch.cuda.OutOfMemoryError:
                    torch.cuda.empty_cache()
                    mm = None
                for k in parse_list(a.k):
                    if k > n:
                        continue
                    try:
                        ms = bench(lambda: torch.topk(Q @ X.T, k, dim=1), a.repeat)
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                        emit({"mode": "torch", "n": n, "dim": a.dim, "dtype": tname, "data": data_label, "batch": b, "k": k, "error": "out of memory"})
                        continue
                    emit({"mode": "torch", "device": name, "n": n, "dim": a.dim, "dtype": tname, "data": data_label, "batch": b, "k": k, "torch_ms": ms,
                          "matmul_ms": mm})
                del Q
            del X
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
