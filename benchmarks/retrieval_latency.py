"""Build time and per-query latency of BM25, dense and hybrid search on synthetic turns.

Prints one JSON object. `bm25_ratio_vs_rank_bm25` is rank-bm25's get_scores time over ours,
measured in the same run on the same queries (the baseline our BM25 replaces).
Embeddings are cached under data/cache, so the first run at 200,000 turns pays the
encoding once (about 15-25 minutes on 2 cores) and later runs only time the searches.
`--smoke`: 1,000 turns, 20 queries, the hashing encoder: seconds, what tests/benchmarks/test_benchmarks_smoke.py runs.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from lethe_core.datasets import generate_synthetic
from lethe_core.util.paths import cache_dir
from lethe_core.retrieval.bm25 import BM25Index
from lethe_core.retrieval.dense import DenseIndex, EmbeddingCache, LazyEncoder
from lethe_core.retrieval.fusion import rrf
from lethe_core.retrieval.text import tokenize


def percentiles(samples: list[float]) -> dict:
    ms = np.array(samples) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p95_ms": round(float(np.percentile(ms, 95)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--baseline-queries", type=int, default=5, help="queries timed on rank-bm25 (slow at scale)")
    ap.add_argument("--smoke", action="store_true", help="tiny size, seconds: the test suite's run")
    args = ap.parse_args()
    if args.smoke:
        args.turns, args.queries, args.encoder, args.baseline_queries = 1000, 20, "test:hash", 5

    t0 = time.perf_counter()
    ds = generate_synthetic(args.turns, seed=0)
    gen_s = time.perf_counter() - t0
    texts = ds.corpus.texts
    queries = [q.text for q in ds.queries[: args.queries]]

    t0 = time.perf_counter()
    toks = [tokenize(t) for t in texts]
    bm25 = BM25Index(toks)
    bm25_build = time.perf_counter() - t0

    encoder = LazyEncoder(args.encoder)
    cache = EmbeddingCache(cache_dir(), encoder.name)
    to_embed = cache.count_missing(texts)
    t0 = time.perf_counter()
    vecs = cache.embed(encoder, texts, progress=not args.smoke)
    embed_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    dense = DenseIndex(vecs)
    faiss_build = time.perf_counter() - t0

    qtoks = [tokenize(q) for q in queries]
    bm25_t, dense_t, hybrid_t = [], [], []
    encoder.encode(["warm-up"])  # load the model before timing
    for q, qt in zip(queries, qtoks):
        t0 = time.perf_counter()
        b_idx, _ = bm25.search(qt, 30)
        t1 = time.perf_counter()
        qv = encoder.encode([q])
        d_idx, _ = dense.search(qv, 30)
        t2 = time.perf_counter()
        fused = rrf([b_idx.tolist(), d_idx[0].tolist()])
        sorted(fused, key=lambda d: -fused[d])
        t3 = time.perf_counter()
        bm25_t.append(t1 - t0)
        dense_t.append(t2 - t1)
        hybrid_t.append(t3 - t0)

    from rank_bm25 import BM25Okapi

    t0 = time.perf_counter()
    ref = BM25Okapi(toks)
    ref_build = time.perf_counter() - t0
    ref_t, ours_t = [], []
    for qt in qtoks[: args.baseline_queries]:
        t0 = time.perf_counter()
        ref.get_scores(qt)
        ref_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        bm25.scores(qt)
        ours_t.append(time.perf_counter() - t0)

    print(json.dumps({
        "turns": len(texts), "queries": len(queries), "encoder": encoder.name,
        "generate_s": round(gen_s, 2), "bm25_build_s": round(bm25_build, 2),
        "embed_s": round(embed_s, 2), "texts_embedded_now": to_embed, "faiss_build_s": round(faiss_build, 3),
        "bm25": percentiles(bm25_t), "dense": percentiles(dense_t), "hybrid": percentiles(hybrid_t),
        "rank_bm25_build_s": round(ref_build, 2),
        "bm25_ratio_vs_rank_bm25": round(float(np.median(ref_t) / np.median(ours_t)), 1),
    }))


if __name__ == "__main__":
    main()
