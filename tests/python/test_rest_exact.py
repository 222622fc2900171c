#!/usr/bin/env python3
"""Exactness of sieve-server's search over REST, against numpy full sorts, on adversarial data.

Starts $SIEVE_BUILD_DIR/server/sieve-server (device $SIEVE_TEST_DEVICE, default cpu) on a
free loopback port with a temporary data directory; for each data set below creates a
collection, loads it with the binary upsert (rows already in the collection's dtype, so the
server stores exactly what numpy holds; a payload {"g": row % 7} on every point), and asks
/points/search/batch for 8 queries at every limit of LIMITS (those above N skipped), and
/points/search for two of them alone at limits 10 and 1024 (kernel calls of one query), with
and without a payload filter, before and after deleting a random 1% of the points. Each
answer is compared with a full sort of float64-exact keys of the same rows:

- the count is min(limit, eligible rows); ids are unique, live and pass the filter;
- position by position the id is the reference's, or its key is within the stated tolerance
  of the reference key there (near ties may come in either order): tol = 1e-5 (1 + |key|)
  + 2 u sum_d |q_d x_d| for both rows, u = 2^-11 (float16: the GPU rounds queries to the
  storage type), 2^-8 (bfloat16), 2^-20 (float32: float32 accumulation over dim terms);
- scores are the reference's within the same tolerance (Euclid: squared distances);
- ties are strict: rows with identical stored vectors have identical keys on every device,
  so within each group of identical rows the answer must hold the group's smallest eligible
  rows, in row order (ties, dups, and neighbours of sorted rows that round alike).

Data sets (N rows of DIM): normal (Dot float16, Euclid bfloat16), ties (every row the same;
Dot float16, Cosine bfloat16), dups (1000 distinct rows repeated; Euclid float16, Dot
float32), sorted_asc (rows a growing multiple of one direction, Dot float16), outlier (one
row 1000 times longer, Dot bfloat16), band (every row within 1e-3 of one direction: all
scores in a narrow band, Cosine float32).

Run: SIEVE_BUILD_DIR=build python3 tests/python/test_rest_exact.py [--n N] [--dim D]
(SIEVE_TEST_DEVICE=cuda:0 runs the server on a GPU; on the GPU machine bench/gpu/run.sh rest
runs it at 300,000 x 128.)
Exits non-zero on the first failure, after printing it; ends by stopping the server with
SIGTERM and requiring exit status 0.
"""
import argparse
import json
import os
import struct
import sys
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np

from sieve_server import start_server, stop_server

LIMITS = [1, 10, 128, 1024, 8192, 16384]
SINGLE_LIMITS = (10, 1024)  # also asked one query a request (the first two queries)
NQ = 8
GROUPS = 7  # payload g = row % GROUPS; the filter keeps g == 3
U = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -20}
WIRE = {"float32": 0, "float16": 1, "bfloat16": 2}


class Api:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method, path, body=None, ctype="application/json"):
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": ctype})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise SystemExit(f"{method} {path}: HTTP {e.code}: {e.read()[:500]!r}")


def to_bf16(x):
    """float32 -> bfloat16 bits (round to nearest even), and the values as float32."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return r, (r.astype(np.uint32) << 16).view(np.float32)


def stored(rows, dtype):
    """(wire bytes of the rows in dtype, their exact float32 values)."""
    if dtype == "float16":
        h = rows.astype(np.float16)
        return h.tobytes(), h.astype(np.float32)
    if dtype == "bfloat16":
        bits, vals = to_bf16(rows)
        return bits.tobytes(), vals
    f = rows.astype(np.float32)
    return f.tobytes(), f


def make_data(kind, n, dim, rng):
    """Rows (float32) of a data set."""
    if kind == "normal":
        x = rng.standard_normal((n, dim), dtype=np.float32)
    elif kind == "ties":
        x = np.repeat(rng.standard_normal((1, dim), dtype=np.float32), n, axis=0)
    elif kind == "dups":
        base = rng.standard_normal((1000, dim), dtype=np.float32)
        x = base[np.arange(n) % 1000]
    elif kind == "sorted_asc":
        d = rng.standard_normal(dim).astype(np.float32)
        d /= np.linalg.norm(d)
        x = np.outer(np.linspace(0.01, 4.0, n, dtype=np.float32), d).astype(np.float32)
    elif kind == "outlier":
        x = rng.standard_normal((n, dim), dtype=np.float32)
        x[n // 3] *= 1000.0
    elif kind == "band":
        d = rng.standard_normal(dim).astype(np.float32)
        d /= np.linalg.norm(d)
        x = d[None, :] + 1e-3 * rng.standard_normal((n, dim), dtype=np.float32)
    else:
        raise ValueError(kind)
    return np.ascontiguousarray(x, dtype=np.float32)


def upload(api, name, wire, vals, dtype, chunk):
    n, dim = vals.shape
    size = {"float32": 4, "float16": 2, "bfloat16": 2}[dtype]
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        ids = np.arange(s + 1, e + 1, dtype=np.uint64)  # id = row + 1
        pay = json.dumps([{"g": int(r % GROUPS)} for r in range(s, e)]).encode()
        head = b"SVPT" + struct.pack("<HHIIQQ", 1, WIRE[dtype], 1, dim, e - s, len(pay))
        body = head + ids.tobytes() + wire[s * dim * size:e * dim * size] + pay
        r = api.call("PUT", f"/collections/{name}/points?wait=true", body,
                     "application/x-sieve-points")
        if r.get("status") != "ok":
            raise SystemExit(f"upsert {name} [{s}, {e}): {r}")


def keys_of(metric, vals, qs):
    """float64 keys (larger is better) of every row for each query (n x nq), and per row and
    query sum_d |q_d x_d| (the scale of the rounding errors)."""
    v = vals.astype(np.float64)
    qq = qs.astype(np.float64)
    if metric == "Cosine":
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-300)
        qq /= np.maximum(np.linalg.norm(qq, axis=1, keepdims=True), 1e-300)
    dot = v @ qq.T
    mag = np.abs(v) @ np.abs(qq).T
    if metric == "Euclid":
        return 2.0 * dot - np.einsum("ij,ij->i", v, v)[:, None], 2.0 * mag
    return dot, mag


def score_of(metric, key, q):
    if metric == "Euclid":
        qq = float(np.dot(q.astype(np.float64), q.astype(np.float64)))
        return qq - key  # squared distance
    return key


def full_sort(keys, eligible):
    """The eligible rows by key descending, then row ascending."""
    order = np.flatnonzero(eligible)
    return order[np.lexsort((order, -keys[order]))]


def check_answer(what, pts, metric, dtype, keys, mag, eligible, order, groups, ties, q, limit):
    want = min(limit, order.size)
    got_ids = [p["id"] for p in pts]
    if len(got_ids) != want:
        raise SystemExit(f"{what}: {len(got_ids)} points, expected {want}")
    rows = np.array(got_ids, dtype=np.int64) - 1
    if want and (rows.min() < 0 or rows.max() >= keys.size):
        raise SystemExit(f"{what}: an id outside the collection: {got_ids[:20]}")
    if np.unique(rows).size != rows.size:
        raise SystemExit(f"{what}: duplicate ids")
    if want and not eligible[rows].all():
        bad = rows[~eligible[rows]][0]
        raise SystemExit(f"{what}: id {bad + 1} is deleted or fails the filter")
    u = U[dtype]
    ref = order[:want]
    tol = 1e-5 * (1 + np.abs(keys[ref])) + 2 * u * (mag[ref] + mag[rows])
    off = (rows != ref) & (np.abs(keys[rows] - keys[ref]) > tol)
    if off.any():
        j = int(np.flatnonzero(off)[0])
        raise SystemExit(f"{what}[{j}]: id {rows[j] + 1} key {keys[rows[j]]:.9g}, reference id "
                         f"{ref[j] + 1} key {keys[ref[j]]:.9g} (tolerance {tol[j]:.3g})")
    got_sc = np.array([p["score"] for p in pts], dtype=np.float64)
    exp_sc = np.array([score_of(metric, k, q) for k in keys[rows]])
    if metric == "Euclid":
        bad = np.abs(got_sc ** 2 - exp_sc) > 1e-5 * (1 + np.abs(exp_sc)) + 4 * u * mag[rows] + 1e-6
    else:
        bad = np.abs(got_sc - exp_sc) > 1e-5 * (1 + np.abs(exp_sc)) + 2 * u * mag[rows]
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise SystemExit(f"{what}[{j}]: id {rows[j] + 1} score {got_sc[j]:.9g}, expected "
                         f"{exp_sc[j]:.9g}")
    if want and ties is not None:
        # identical rows have identical keys on every device: within each group of identical
        # rows the answer holds the group's smallest eligible rows, in row order
        rank, multi = ties
        sel = np.flatnonzero(multi[rows])
        if sel.size:
            g = groups[rows[sel]]
            o = np.argsort(g, kind="stable")
            gs = g[o]
            first = np.r_[0, np.flatnonzero(gs[1:] != gs[:-1]) + 1]
            occ = np.arange(gs.size) - np.repeat(first, np.diff(np.r_[first, gs.size]))
            bad = np.flatnonzero(rank[rows[sel][o]] != occ)
            if bad.size:
                j = sel[o[bad[0]]]
                grp = groups[rows[j]]
                members = np.flatnonzero(eligible & (groups == grp))
                mine = rows[groups[rows] == grp]
                raise SystemExit(f"{what}: rows with identical vectors came back as "
                                 f"{(mine[:8] + 1).tolist()}, expected the group's first eligible "
                                 f"rows in order {(members[:8] + 1).tolist()}")


def tie_ranks(groups, multi, eligible):
    """Each eligible row's rank among the eligible rows of its group (row order); -1 else."""
    er = np.flatnonzero(eligible & multi)
    o = er[np.argsort(groups[er], kind="stable")]
    g = groups[o]
    rank = np.full(groups.size, -1, dtype=np.int64)
    if o.size:
        first = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
        rank[o] = np.arange(o.size) - np.repeat(first, np.diff(np.r_[first, g.size]))
    return rank


def run_set(api, kind, metric, dtype, n, dim, rng, chunk):
    name = f"{kind}_{metric}_{dtype}".lower()
    t0 = time.time()
    api.call("PUT", f"/collections/{name}",
             {"vectors": {"size": dim, "distance": metric, "datatype": dtype}})
    x = make_data(kind, n, dim, rng)
    wire, vals = stored(x, dtype)
    # groups of identical stored rows (ties, dups; neighbours of sorted rows in 16 bits)
    _, groups = np.unique(vals.view(np.dtype((np.void, dim * 4))).ravel(), return_inverse=True)
    groups = groups.ravel()
    multi = np.bincount(groups)[groups] > 1  # rows that have an identical twin
    upload(api, name, wire, vals, dtype, chunk)
    qs = rng.standard_normal((NQ, dim), dtype=np.float32)
    if kind in ("sorted_asc", "band", "ties"):
        qs[: NQ // 2] = np.abs(qs[: NQ // 2]) * np.sign(x[-1] + 1e-30)  # aligned with the rows
    kall, mall = keys_of(metric, vals, qs)
    kq = [(np.ascontiguousarray(kall[:, i]), np.ascontiguousarray(mall[:, i]))
          for i in range(NQ)]
    live = np.ones(n, dtype=bool)
    flt = {"must": [{"key": "g", "match": {"value": 3}}]}
    in_g = (np.arange(n) % GROUPS) == 3
    checked = 0
    for phase in ("all", "after deletes"):
        if phase == "after deletes":
            dead = rng.choice(n, size=max(1, n // 100), replace=False)
            for s in range(0, dead.size, 20000):
                ids = [int(r) + 1 for r in dead[s:s + 20000]]
                api.call("POST", f"/collections/{name}/points/delete?wait=true", {"points": ids})
            live[dead] = False
        for filtered in (False, True):
            eligible = live & in_g if filtered else live
            ties = (tie_ranks(groups, multi, eligible), multi) if multi.any() else None
            orders = [full_sort(kq[i][0], eligible) for i in range(NQ)]
            for limit in LIMITS:
                if limit > n and limit != LIMITS[0]:
                    continue
                searches = []
                for q in qs:
                    s = {"vector": [float(v) for v in q], "limit": limit}
                    if filtered:
                        s["filter"] = flt
                    searches.append(s)
                res = api.call("POST", f"/collections/{name}/points/search/batch",
                               {"searches": searches})["result"]
                for i, pts in enumerate(res):
                    what = f"{name} {phase}{' filtered' if filtered else ''} limit {limit} q{i}"
                    check_answer(what, pts, metric, dtype, kq[i][0], kq[i][1], eligible,
                                 orders[i], groups, ties, qs[i], limit)
                    checked += 1
                if limit in SINGLE_LIMITS:
                    # one query a request, one after another: kernel calls of one query
                    # (other loops than the batch's on both devices)
                    for i, q in enumerate(qs[:2]):
                        body = dict(searches[i])
                        pts = api.call("POST", f"/collections/{name}/points/search",
                                       body)["result"]
                        what = (f"{name} {phase}{' filtered' if filtered else ''} limit "
                                f"{limit} q{i} alone")
                        check_answer(what, pts, metric, dtype, kq[i][0], kq[i][1], eligible,
                                     orders[i], groups, ties, q, limit)
                        checked += 1
    api.call("DELETE", f"/collections/{name}")
    print(f"  {name}: {n} rows x {dim} ({int(multi.sum())} with an identical twin), {checked} "
          f"answers exact ({time.time() - t0:.1f} s)",
          flush=True)
    return checked


SETS = [("normal", "Dot", "float16"), ("normal", "Euclid", "bfloat16"),
        ("ties", "Dot", "float16"), ("ties", "Cosine", "bfloat16"),
        ("dups", "Euclid", "float16"), ("dups", "Dot", "float32"),
        ("sorted_asc", "Dot", "float16"), ("outlier", "Dot", "bfloat16"),
        ("band", "Cosine", "float32")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20000, help="rows per data set (default 20000)")
    ap.add_argument("--dim", type=int, default=32, help="dimension (default 32)")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    build_dir = os.environ.get("SIEVE_BUILD_DIR", "build")
    rng = np.random.default_rng(a.seed)
    chunk = max(1, min(50000, (16 << 20) // (a.dim * 4 + 40)))
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "server.log")
        proc, port = start_server(build_dir, os.path.join(tmp, "data"), log)
        try:
            api = Api(port)
            dev = os.environ.get("SIEVE_TEST_DEVICE") or "cpu"
            print(f"sieve-server on {dev}, port {port}", flush=True)
            total = sum(run_set(api, k, m, d, a.n, a.dim, rng, chunk) for k, m, d in SETS)
        except BaseException:
            proc.kill()
            proc.wait()
            sys.stderr.write("server log (tail):\n" + open(log).read()[-3000:])
            raise
        stop_server(proc, log)
    print(f"test_rest_exact: {total} answers over {len(SETS)} data sets, all exact")


if __name__ == "__main__":
    main()
