"""Our sparse BM25 against `bm25s` on the locomo-haystack corpus with LoCoMo's questions, top-30, one thread.

Both engines index the same token lists (lethe_core.retrieval.text.tokenize) and score the same query token lists,
timed per query side by side in one run (the order alternates per query). The parity block checks our
top-30 against rank-bm25's BM25Okapi, the reference semantics (as tests/parity/test_bm25_parity.py does),
on a sample of queries; bm25s (Robertson variant) is compared with the same reference for information.
Prints one JSON object; docs/haystack.md holds the measured figures.
`--smoke`: 7,000 turns, 40 questions, 5 parity questions: seconds, what tests/benchmarks/test_benchmarks_smoke.py runs.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread, set before numpy loads

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from lethe_core.datasets import load_dataset  # noqa: E402
from lethe_core.datasets.haystack import duplicate_report, duplicate_share, is_filler  # noqa: E402
from lethe_core.retrieval.bm25 import BM25Index, BM25Params  # noqa: E402
from lethe_core.retrieval.text import tokenize  # noqa: E402


def percentiles(samples: list[float]) -> dict:
    ms = np.array(samples) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p95_ms": round(float(np.percentile(ms, 95)), 3),
            "mean_ms": round(float(ms.mean()), 3)}


def same_top(idx: np.ndarray, scores: np.ndarray, expected: np.ndarray) -> bool:
    """The parity test's rule: equal scores, and the same set unless the reference ties at our last place."""
    if not np.allclose(scores, expected[idx], atol=1e-9):
        return False
    order = np.argsort(-expected, kind="stable")
    return set(idx) == set(order[: len(idx)]) or bool(np.isclose(expected[order[len(idx) - 1]], scores[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=None, help="haystack size (default: the full haystack)")
    ap.add_argument("--granularity", choices=("turn", "message"), default="turn")
    ap.add_argument("--k", type=int, default=30)
    ap.add_argument("--queries", type=int, default=None, help="first N questions (default: all)")
    ap.add_argument("--parity-queries", type=int, default=60, help="questions checked against rank-bm25 (slow at scale)")
    ap.add_argument("--smoke", action="store_true", help="tiny size, seconds: the test suite's run")
    args = ap.parse_args()
    if args.smoke:
        args.turns, args.queries, args.parity_queries = 7000, 40, 5

    import bm25s

    name = "locomo-haystack" + ("-msg" if args.granularity == "message" else "") + (f":{args.turns}" if args.turns else "")
    t0 = time.perf_counter()
    ds = load_dataset(name, limit_queries=args.queries)
    load_s = time.perf_counter() - t0
    texts = ds.require_corpus().texts

    t0 = time.perf_counter()
    toks = [tokenize(t) for t in texts]
    tokenize_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = BM25Index(toks)
    ours_build = time.perf_counter() - t0
    params = BM25Params()
    t0 = time.perf_counter()
    other = bm25s.BM25(k1=params.k1, b=params.b, method="robertson")
    other.index(toks, show_progress=False)
    other_build = time.perf_counter() - t0

    qtoks = [tokenize(q.text) for q in ds.queries]
    qtoks = [q for q in qtoks if any(t in ours.vocab for t in q)]  # bm25s needs one known token; both skip the rest

    def run_ours(q):
        return ours.search(q, args.k)

    def run_other(q):
        return other.retrieve([q], k=args.k, n_threads=0, show_progress=False)

    for q in qtoks[:20]:  # warm-up, untimed
        run_ours(q), run_other(q)
    ours_t, other_t = [], []
    for i, q in enumerate(qtoks):
        for fn, out in ((run_ours, ours_t), (run_other, other_t))[:: 1 if i % 2 == 0 else -1]:
            t0 = time.perf_counter()
            fn(q)
            out.append(time.perf_counter() - t0)

    corpus = ds.require_corpus()
    ranked = [[corpus.ids[i] for i in ours.search(q, args.k)[0]] for q in qtoks]
    dups = duplicate_report(corpus)
    filler_slots = sum(is_filler(d) for r in ranked for d in r)

    # Where our time goes: the postings a query touches, and the two halves of `search`.
    from lethe_core.retrieval.topk import top_k

    nnz_per_term = np.diff(ours.matrix.indptr)
    postings = [int(sum(nnz_per_term[ours.vocab[t]] for t in set(q) if t in ours.vocab)) for q in qtoks]
    score_t, topk_t = [], []
    for q in qtoks:
        t0 = time.perf_counter()
        s = ours.scores(q)
        t1 = time.perf_counter()
        top_k(s, args.k)
        topk_t.append(time.perf_counter() - t1)
        score_t.append(t1 - t0)

    from rank_bm25 import BM25Okapi

    t0 = time.perf_counter()
    ref = BM25Okapi(toks)
    ref_build = time.perf_counter() - t0
    step = max(1, len(qtoks) // max(1, args.parity_queries))
    sample = qtoks[::step][: args.parity_queries]
    ours_ok, other_same, other_overlap = 0, 0, []
    for q in sample:
        expected = ref.get_scores(q)
        idx, scores = ours.search(q, args.k)
        ours_ok += same_top(idx, scores, expected)
        order = np.argsort(-expected, kind="stable")[: args.k]
        ref_top = set(order[expected[order] > 0].tolist())
        docs, sc = other.retrieve([q], k=args.k, n_threads=0, show_progress=False)
        got = set(docs[0][sc[0] > 0].tolist())
        other_same += got == ref_top
        other_overlap.append(len(got & ref_top) / max(1, len(ref_top)))

    o, b = percentiles(ours_t), percentiles(other_t)
    print(json.dumps({
        "dataset": ds.name, "turns": len(texts), "queries": len(qtoks), "k": args.k, "threads": 1,
        "tokenizer": "lethe_core.retrieval.text.tokenize (regex [A-Za-z0-9_]+, lower-cased) for both engines",
        "load_s": round(load_s, 2), "tokenize_s": round(tokenize_s, 2),
        "ours": {"build_s": round(ours_build, 2), **o},
        "bm25s": {"version": bm25s.__version__, "method": "robertson", "build_s": round(other_build, 2), **b},
        "ratio_p50_ours_over_bm25s": round(o["p50_ms"] / b["p50_ms"], 3),
        "ratio_p95_ours_over_bm25s": round(o["p95_ms"] / b["p95_ms"], 3),
        "ours_breakdown": {"scores": percentiles(score_t), "top_k": percentiles(topk_t),
                           "postings_touched_p50": int(np.percentile(postings, 50)),
                           "postings_touched_p95": int(np.percentile(postings, 95))},
        "duplicates": {**dups.as_dict(), "in_bm25_top_k": duplicate_share(ranked, dups.duplicate_ids, args.k),
                       "filler_share_of_bm25_top_k": round(filler_slots / max(1, sum(map(len, ranked))), 4)},
        "parity": {"reference": "rank_bm25.BM25Okapi", "queries": len(sample), "reference_build_s": round(ref_build, 2),
                   "ours_same_top_k": ours_ok, "bm25s_same_top_k_set": other_same,
                   "bm25s_mean_overlap": round(float(np.mean(other_overlap)), 4)},
    }))


if __name__ == "__main__":
    main()
