#!/usr/bin/env python3
"""torch_knn.py: the PyTorch baseline for exact k-NN (cuBLAS matmul, then torch.topk), and the
GPU's measured ceilings (device copy bandwidth, GEMM rates), as JSON lines.

Run on the GPU machine beside sieve-bench so both are measured in the same run:
    python3 bench/torch_knn.py --n 1m,5m --batch 1,64 --k 128 --json torch.json
"""
import argparse
import json
import sys


def parse_list(s):
    out = []
    for t in s.split(","):
        t = t.strip().lower()
        mult = 1
        if t.endswith("k"):
            mult, t = 1000, t[:-1]
        elif t.endswith("m"):
            mult, t = 1000000, t[:-1]
        out.append(int(round(float(t) * mult)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="1m", help="stored rows, comma separated (1m = 1000000)")
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
        for _ in range(3):
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
            del A, B
        torch.cuda.empty_cache()

    dts = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    for tname in a.dtype.split(","):
        dt = dts[tname]
        for n in parse_list(a.n):
            X = torch.randn(n, a.dim, device=dev, dtype=dt)
            for b in parse_list(a.batch):
                Q = torch.randn(b, a.dim, device=dev, dtype=dt)
                for k in parse_list(a.k):
                    if k > n:
                        continue
                    try:
                        ms = bench(lambda: torch.topk(Q @ X.T, k, dim=1), a.repeat)
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                        emit({"mode": "torch", "n": n, "dim": a.dim, "dtype": tname, "batch": b, "k": k, "error": "out of memory"})
                        continue
                    emit({"mode": "torch", "device": name, "n": n, "dim": a.dim, "dtype": tname, "batch": b, "k": k, "torch_ms": ms})
                del Q
            del X
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
