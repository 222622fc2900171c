#!/usr/bin/env python3
"""The real qdrant-client (REST) against a real sieve-server.

Starts $SIEVE_BUILD_DIR/server/sieve-server on a free loopback port with a temporary data
directory, then drives it only through qdrant-client: create collections (Cosine float32,
Euclid float16), upsert integer and UUID ids with payloads (PointStruct list and Batch),
query_points, query_batch_points, retrieve, count, filters and delete. Every result is
checked against a numpy brute force over the vectors the server reports it stores: ids in
order (ties broken by the earlier-inserted point, which holds the smaller row) and scores
within float32 tolerance. Exits non-zero on the first failure; ends by stopping the server
with SIGTERM and requiring exit status 0.

Run: SIEVE_BUILD_DIR=build python3 tests/python/test_qdrant_client.py
(SIEVE_TEST_DEVICE=cuda:0 runs the server on a GPU instead of the CPU.)
"""
import os
import sys
import tempfile
import uuid

import numpy as np
from qdrant_client import QdrantClient, models

from sieve_server import start_server, stop_server


class Data:
    """Points as uploaded, in insertion order (insertion order = row order)."""

    def __init__(self, rng, n, dim, with_ties=True):
        self.vectors = rng.standard_normal((n, dim)).astype(np.float32)
        if with_ties:  # exact ties: later points repeat earlier vectors
            self.vectors[n - 1] = self.vectors[3]
            self.vectors[n - 2] = self.vectors[3]
            self.vectors[n - 3] = self.vectors[10]
        self.ids = [i if i % 4 else str(uuid.UUID(int=0xABC0000 + i)) for i in range(n)]
        self.payloads = [{"i": i, "group": ["red", "green", "blue"][i % 3],
                          "score": float(i) / 7.0, "even": i % 2 == 0,
                          "tags": ["t%d" % (i % 5), "all"]} for i in range(n)]
        self.alive = np.ones(n, dtype=bool)
        self.stored = None  # filled from the server

    def row_of(self, point_id):
        return self.ids.index(point_id)


def norm_id(x):
    """qdrant-client returns UUIDs as strings and ints as ints."""
    return str(x) if isinstance(x, str) else int(x)


def brute_force(data, metric, q, mask, limit, offset=0):
    """Expected (ids, scores) best first, ties by row (insertion order)."""
    x = data.stored
    q = q.astype(np.float32)
    if metric == "Cosine":
        q = q / np.linalg.norm(q)
    if metric == "Euclid":
        key = -np.sqrt(np.maximum(((x - q) ** 2).sum(axis=1, dtype=np.float64), 0))
    else:
        key = (x.astype(np.float64) @ q.astype(np.float64))
    rows = np.nonzero(mask & data.alive)[0]
    order = sorted(rows, key=lambda r: (-key[r], r))
    order = order[offset:offset + limit]
    scores = [-key[r] if metric == "Euclid" else key[r] for r in order]
    return [norm_id(data.ids[r]) for r in order], scores


def check(what, points, data, metric, q, mask, limit, offset=0):
    ids, scores = brute_force(data, metric, q, mask, limit, offset)
    got_ids = [norm_id(p.id) for p in points]
    got_scores = [p.score for p in points]
    assert len(got_ids) == len(ids), f"{what}: expected {len(ids)} points, got {len(got_ids)}"
    qq = float(np.dot(q.astype(np.float64), q.astype(np.float64)))
    for j, (gi, ei) in enumerate(zip(got_ids, ids)):
        es, gs = scores[j], got_scores[j]
        if metric == "Euclid":
            # The kernel ranks by 2q.x - |x|^2 in float32, so the distance it reports
            # carries an absolute error in distance^2 of a few ulps of |q|^2 + |x|^2.
            assert abs(gs * gs - es * es) <= 1e-5 * (1 + qq + es * es), \
                f"{what}[{j}]: distance {gs}, expected {es}"
        else:
            assert abs(gs - es) <= 1e-4 * (1 + abs(es)), f"{what}[{j}]: score {gs}, expected {es}"
        if gi != ei:
            # Only a float near-tie may differ from the brute force order.
            other = scores[ids.index(gi)] if gi in ids else None
            assert other is not None and abs(other - es) <= 1e-5 * (1 + abs(es)), \
                f"{what}[{j}]: id {gi}, expected {ei} (scores {gs} vs {es})"


def payload_mask(data, pred):
    return np.array([pred(p) for p in data.payloads], dtype=bool)


def run_collection(client, rng, name, metric, datatype, n=400, dim=32):
    dist = {"Cosine": models.Distance.COSINE, "Euclid": models.Distance.EUCLID,
            "Dot": models.Distance.DOT}[metric]
    client.create_collection(name, vectors_config=models.VectorParams(
        size=dim, distance=dist, datatype=datatype))
    assert client.collection_exists(name)
    data = Data(rng, n, dim)

    # Upsert: half as PointStruct list, half as a Batch.
    half = n // 2
    client.upsert(name, wait=True, points=[
        models.PointStruct(id=data.ids[i], vector=data.vectors[i].tolist(),
                           payload=data.payloads[i]) for i in range(half)])
    client.upsert(name, wait=True, points=models.Batch(
        ids=data.ids[half:], vectors=data.vectors[half:].tolist(),
        payloads=data.payloads[half:]))

    client.create_payload_index(name, field_name="group",
                                field_schema=models.PayloadSchemaType.KEYWORD)  # a no-op
    info = client.get_collection(name)  # pydantic validation of CollectionInfo
    assert info.points_count == n, f"points_count {info.points_count}"
    assert info.config.params.vectors.size == dim
    assert info.config.params.vectors.distance == dist

    # The vectors as stored (normalised for Cosine, rounded for float16).
    recs = client.retrieve(name, ids=data.ids, with_vectors=True, with_payload=True)
    assert len(recs) == n, f"retrieve returned {len(recs)} of {n}"
    stored = np.zeros((n, dim), dtype=np.float32)
    for r in recs:
        row = data.row_of(norm_id(r.id))
        stored[row] = np.asarray(r.vector, dtype=np.float32)
        assert r.payload == data.payloads[row], f"payload of {r.id}: {r.payload}"
    data.stored = stored
    if metric == "Cosine":
        norms = np.linalg.norm(stored, axis=1)
        assert np.allclose(norms, 1, atol=1e-3), "Cosine vectors should be stored normalised"
    if datatype == models.Datatype.FLOAT16:
        assert np.array_equal(stored, data.vectors.astype(np.float16).astype(np.float32)), \
            "float16 collections should store vectors rounded to float16"

    all_rows = np.ones(n, dtype=bool)
    queries = rng.standard_normal((6, dim)).astype(np.float32)
    queries[5] = data.vectors[3]  # hits the tie group exactly
    for qi, q in enumerate(queries):
        res = client.query_points(name, query=q.tolist(), limit=10, with_payload=True)
        check(f"{name} query {qi}", res.points, data, metric, q, all_rows, 10)
        for p in res.points:
            assert p.payload == data.payloads[data.row_of(norm_id(p.id))]
        res = client.query_points(name, query=q.tolist(), limit=5, offset=3)
        check(f"{name} query {qi} offset", res.points, data, metric, q, all_rows, 5, 3)
    # The tie group (rows 3, n-2, n-1 hold one vector) comes back in row order.
    res = client.query_points(name, query=data.vectors[3].tolist(), limit=3)
    assert [norm_id(p.id) for p in res.points] == \
        [norm_id(data.ids[3]), norm_id(data.ids[n - 2]), norm_id(data.ids[n - 1])], \
        f"tie order: {[p.id for p in res.points]}"

    # Filters.
    filters = [
        (models.Filter(must=[models.FieldCondition(key="group", match=models.MatchValue(value="red"))]),
         lambda p: p["group"] == "red"),
        (models.Filter(must=[models.FieldCondition(key="i", range=models.Range(gte=50, lt=120))]),
         lambda p: 50 <= p["i"] < 120),
        (models.Filter(must_not=[models.FieldCondition(key="even", match=models.MatchValue(value=True))]),
         lambda p: not p["even"]),
        (models.Filter(should=[models.FieldCondition(key="tags", match=models.MatchAny(any=["t1", "t2"])),
                               models.FieldCondition(key="score", range=models.Range(gt=50.0))]),
         lambda p: bool({"t1", "t2"} & set(p["tags"])) or p["score"] > 50.0),
        (models.Filter(must=[models.HasIdCondition(has_id=[data.ids[1], data.ids[4], data.ids[8], 999999])]),
         lambda p: p["i"] in (1, 4, 8)),
        (models.Filter(must=[models.FieldCondition(key="i", match=models.MatchValue(value=7))],
                       must_not=[models.FieldCondition(key="group", match=models.MatchValue(value="red"))]),
         lambda p: p["i"] == 7 and p["group"] != "red"),
    ]
    for fi, (flt, pred) in enumerate(filters):
        mask = payload_mask(data, pred)
        cnt = client.count(name, count_filter=flt, exact=True).count
        assert cnt == int(mask.sum()), f"filter {fi}: count {cnt}, expected {int(mask.sum())}"
        for qi in range(2):
            q = queries[qi]
            res = client.query_points(name, query=q.tolist(), query_filter=flt, limit=15)
            check(f"{name} filter {fi} q{qi}", res.points, data, metric, q, mask, 15)

    # query_batch_points: mixed limits and filters in one request.
    reqs = [models.QueryRequest(query=queries[i].tolist(), limit=4 + i,
                                filter=filters[i % len(filters)][0] if i % 2 else None,
                                with_payload=False)
            for i in range(5)]
    batch = client.query_batch_points(name, requests=reqs)
    assert len(batch) == 5
    for i, res in enumerate(batch):
        mask = payload_mask(data, filters[i % len(filters)][1]) if i % 2 else all_rows
        check(f"{name} batch {i}", res.points, data, metric, queries[i], mask, 4 + i)

    # Delete by ids and by filter; results and counts follow.
    gone = [data.ids[0], data.ids[3], data.ids[5]]
    client.delete(name, points_selector=models.PointIdsList(points=gone), wait=True)
    for g in gone:
        data.alive[data.row_of(norm_id(g))] = False
    red = models.Filter(must=[models.FieldCondition(key="group", match=models.MatchValue(value="red"))])
    client.delete(name, points_selector=models.FilterSelector(filter=red), wait=True)
    data.alive &= ~payload_mask(data, lambda p: p["group"] == "red")
    assert client.count(name, exact=True).count == int(data.alive.sum())
    assert client.retrieve(name, ids=gone) == []
    for qi in range(3):
        q = queries[qi]
        res = client.query_points(name, query=q.tolist(), limit=12)
        check(f"{name} after delete q{qi}", res.points, data, metric, q, all_rows, 12)
    return data


def main():
    build_dir = os.environ.get("SIEVE_BUILD_DIR", "build")
    rng = np.random.default_rng(20261129)
    with tempfile.TemporaryDirectory(prefix="sieve-py-") as tmp:
        log_path = os.path.join(tmp, "server.log")
        proc, port = start_server(build_dir, os.path.join(tmp, "data"), log_path)
        try:
            client = QdrantClient(url=f"http://127.0.0.1:{port}", prefer_grpc=False,
                                  check_compatibility=False, timeout=120)
            run_collection(client, rng, "cosine32", "Cosine", models.Datatype.FLOAT32)
            run_collection(client, rng, "euclid16", "Euclid", models.Datatype.FLOAT16)
            names = sorted(c.name for c in client.get_collections().collections)
            assert names == ["cosine32", "euclid16"], names
            assert client.delete_collection("euclid16")
            assert not client.collection_exists("euclid16")
            client.close()
        except BaseException:
            proc.kill()
            proc.wait()
            sys.stderr.write(open(log_path).read())
            raise
        stop_server(proc, log_path)
    print("qdrant-client test passed")


if __name__ == "__main__":
    main()
