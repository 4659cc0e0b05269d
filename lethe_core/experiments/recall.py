"""Checkpoint 05, recall analysis: how deep do the relevant turns sit in each first-stage list, and what
does that cost the reranker?

For every query (docs/recall.md):
- the dense leg, the BM25 leg and the hybrid list (RRF of the two legs, each `max(depths)` deep), and
  the paper pipeline's reranker pool (RRF top-P of the `k_leg`-deep legs, what the cross-encoder sees,
  from `HybridRetriever.candidates` itself);
- recall@k of each list for k in `depths`, and the 1-based rank of every relevant turn in each list
  (NaN: not in the top `max(depths)`), for histograms and ECDFs;
- the oracle-rerank ceiling: NDCG@10 if a perfect reranker reordered the top-k of the hybrid / dense list;
- with a reranker, the reference's k_fetch experiment: dense top-k reranked for k in `k_fetch`, and the
  reference's "oracle + xenc" as we read it: the dense top-30 with every missing relevant turn added, reranked.

Nothing here rebuilds a pool: the legs come from the first stage (`HybridRetriever`), and every
(query, turn) pair goes through the pair-score cache with the routed (fold-aware) scorer, so pairs
already in the pools are read back and new ones are stored for later studies.
Results: `data/results/recall-<dataset>-<reranker>-<hash>/` with per_query.parquet (one row per query,
one column per measure), ranks.parquet (one row per relevant turn and list) and summary.json.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Mapping, Sequence

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.datasets import Dataset
from lethe_core.inference.pair_cache import CachedScorer, PairScoreCache, identity_of
from lethe_core.measures.metrics import ndcg_at_k, recall_at_k
from lethe_core.results.store import digest, slug, write_parquet, write_summary
from lethe_core.retrieval.fusion import fused_order, rrf
from lethe_core.retrieval.pipeline import HybridRetriever
from lethe_core.rerankers import route
from lethe_core.retrieval.second_stage import final_order
from lethe_core.experiments.setup import DataStudy, Loaded

LISTS = ("dense", "bm25", "hybrid")
RANK_EDGES = (1, 3, 10, 30, 60, 100, 500)  # bucket upper bounds (1-based ranks) for the rank histogram


def oracle_ndcg(ranked: Sequence[str], qrels: Mapping[str, int], k: int, at: int = 10) -> float:
    """NDCG@`at` if a perfect reranker reordered the top `k` of `ranked`: the relevant turns found there, best grade first."""
    found = sorted((d for d in ranked[:k] if qrels.get(d, 0) > 0), key=lambda d: -qrels[d])
    return ndcg_at_k(found, qrels, at)


def relevant_ranks(ranked: Sequence[str], qrels: Mapping[str, int]) -> dict[str, float]:
    """1-based rank of each relevant turn in `ranked`; NaN where it is absent."""
    pos = {d: i + 1 for i, d in enumerate(ranked)}
    return {d: float(pos.get(d, math.nan)) for d, g in qrels.items() if g > 0}


def rank_buckets(ranks: pd.DataFrame, edges: Sequence[int] = RANK_EDGES, depth: int | None = None) -> pd.DataFrame:
    """Share of relevant turns per rank bucket and list; one bucket for those never in the top `depth`.

    `ranks` has columns `list` and `rank` (1-based, NaN = not retrieved), as in ranks.parquet.
    """
    depth = depth or edges[-1]
    edges = [e for e in edges if e <= depth]
    if edges[-1] != depth:
        edges.append(depth)
    labels, lo = [], 1
    for e in edges:
        labels.append(f"{lo}" if lo == e else f"{lo}–{e}")
        lo = e + 1
    never = f"not in top {depth}"
    rows = []
    for name, g in ranks.groupby("list", sort=False):
        r = g["rank"].to_numpy(float)
        n = len(r)
        lo = 0
        for label, e in zip(labels, edges):
            rows.append({"list": name, "bucket": label, "share": float(((r > lo) & (r <= e)).sum() / n), "n": n})
            lo = e
        rows.append({"list": name, "bucket": never, "share": float((np.isnan(r) | (r > depth)).sum() / n), "n": n})
    return pd.DataFrame(rows)


def rank_ecdf(ranks: pd.DataFrame, depth: int) -> pd.DataFrame:
    """Per list: share of all relevant turns found at rank <= r, for r = 1..depth (the never-found ones keep it below 1)."""
    out = []
    for name, g in ranks.groupby("list", sort=False):
        r = g["rank"].to_numpy(float)
        counts = np.bincount(r[~np.isnan(r) & (r <= depth)].astype(int), minlength=depth + 1)[1:]
        out.append(pd.DataFrame({"list": name, "rank": np.arange(1, depth + 1), "share": np.cumsum(counts) / len(r)}))
    return pd.concat(out, ignore_index=True)


@dataclass
class RecallExperiment(DataStudy):
    """Recall of the first-stage lists, the oracle-rerank ceiling, and (with a reranker) the k_fetch experiment.
    `data.reranker` None: first-stage measures only (no reranker needed, e.g. NFCorpus)."""

    unused_data: ClassVar[tuple[str, ...]] = ("calibration",)
    needs_reranker: ClassVar[bool] = False
    depths: tuple[int, ...] = (30, 100, 500)
    oracle_depths: tuple[int, ...] = (30, 60, 100)
    k_fetch: tuple[int, ...] = (30, 100)
    batch: int = 32
    seed: int = 0

    def config(self, loaded: Loaded) -> dict:
        reranker = loaded.reranker
        return {**self.flat_config(), "depth": min(max(self.depths), len(loaded.dataset.require_corpus())),
                "reranker_resolved": reranker.name if reranker else None,
                "reranker_identity": identity_of(reranker) if reranker else None, "dataset_fingerprint": loaded.dataset.fingerprint}

    def run_id(self, loaded: Loaded, config: dict | None = None) -> str:
        config = config or self.config(loaded)
        hashed = {k: v for k, v in config.items() if k != "progress"}
        return f"recall-{loaded.dataset.name}-{slug(config['reranker_resolved'] or 'first-stage')}-{digest(hashed)}"

    def _compute(self, loaded: Loaded, out: Path, config: dict) -> dict:
        d, ds, root = self.data, loaded.dataset, loaded.root
        corpus = ds.require_corpus()
        retriever = HybridRetriever(corpus, d.pipeline, cache_root=root, progress=d.progress)
        depth = config["depth"]
        ids = corpus.ids
        qvecs = retriever.embed_queries(ds.queries)
        dense_idx, dense_scores = retriever.dense.search(qvecs, depth)
        P = d.pipeline.pool_size
        pools = retriever.candidates(ds.queries)  # the pipeline's own union: what the reranker pool is cut from

        rows, rank_rows, lists = [], [], []
        for qi, q in enumerate(ds.queries):
            keep = dense_idx[qi] >= 0
            di, ds_ = dense_idx[qi][keep], dense_scores[qi][keep]
            dl = di[np.lexsort((di, -ds_))].tolist()  # ties by the lower index, as BM25's top_k (FAISS leaves them open)
            b = [int(x) for x in retriever.bm25_search(q, depth)[0]]
            hybrid = fused_order(rrf([list(b), list(dl)], d.pipeline.rrf_k), ids)[:depth]
            pool = pools[qi].doc_idx[:P].tolist()
            named = {"dense": [ids[i] for i in dl], "bm25": [ids[i] for i in b], "hybrid": [ids[i] for i in hybrid]}
            row = {"query_id": q.id, "qtype": q.qtype, "n_relevant": sum(g > 0 for g in q.qrels.values())}
            for name, ranked in named.items():
                for k in self.depths:
                    row[f"recall@{k}_{name}"] = recall_at_k(ranked, q.qrels, k)
                for d_id, r in relevant_ranks(ranked, q.qrels).items():
                    rank_rows.append({"query_id": q.id, "qtype": q.qtype, "doc_id": d_id, "list": name, "rank": r})
            row["ndcg@10_dense"] = ndcg_at_k(named["dense"], q.qrels, 10)
            row["ndcg@10_hybrid"] = ndcg_at_k(named["hybrid"], q.qrels, 10)
            pool_ids = [ids[i] for i in pool]
            row["pool_recall"] = recall_at_k(pool_ids, q.qrels, len(pool_ids))  # RRF top-P of the k_leg legs
            row["pool_found"] = sum(q.qrels.get(x, 0) > 0 for x in pool_ids)
            row["dense30_found"] = sum(q.qrels.get(x, 0) > 0 for x in named["dense"][:30])
            for k in self.oracle_depths:
                row[f"oracle@{k}_hybrid"] = oracle_ndcg(named["hybrid"], q.qrels, k)
                row[f"oracle@{k}_dense"] = oracle_ndcg(named["dense"], q.qrels, k)
            rows.append(row)
            lists.append(dl)
        per_query = pd.DataFrame(rows)
        ranks = pd.DataFrame(rank_rows, columns=["query_id", "qtype", "doc_id", "list", "rank"])

        counts = {}
        if loaded.reranker is not None:
            reranked, counts = self._rerank(ds, loaded.reranker, lists, root)
            per_query = per_query.assign(**reranked)

        summary = summarise(per_query, ranks, self, depth, self.seed)
        summary.update({"dataset": ds.name, "n_queries": len(ds.queries), **ds.dropped_entries(), "depth": depth,
                        "reranker": config["reranker_resolved"], "reranker_identity": config["reranker_identity"], "pairs": counts,
                        "results_dir": str(out), "config": config})
        write_parquet(out / "per_query.parquet", per_query)
        write_parquet(out / "ranks.parquet", ranks)
        return write_summary(out, summary)

    def _rerank(self, ds: Dataset, reranker, dense_lists: list[list[int]], root: Path) -> tuple[dict, dict]:
        """Dense top-k reranked (k in k_fetch) and the oracle pool reranked, every pair through the pair-score cache."""
        from tqdm.auto import tqdm

        corpus = ds.require_corpus()
        ids, texts = corpus.ids, corpus.texts
        deepest = max(self.k_fetch)
        out = {f"ndcg@10_dense{k}_rerank": [] for k in self.k_fetch}
        out["ndcg@10_oracle_pool_rerank"] = []
        cache = PairScoreCache(root / "pair_scores.sqlite")
        scorers: dict[int, CachedScorer] = {}
        queries = ds.queries
        try:
            for start in tqdm(range(0, len(queries), self.batch), desc=f"rerank dense top-{deepest} {ds.name} [{reranker.name}]",
                              unit="batch", disable=not self.data.progress):
                chunk = list(range(start, min(start + self.batch, len(queries))))
                cands = []
                for qi in chunk:
                    q = queries[qi]
                    cand = dense_lists[qi][:deepest]
                    in_cand = set(cand)
                    relevant = [corpus.index[x] for x in sorted(q.qrels) if q.qrels[x] > 0 and x in corpus.index]
                    extra = [i for i in relevant if i not in in_cand]  # relevant turns below the deep list: scored for the oracle pool
                    cands.append((cand, extra))
                models = [route(reranker, queries[qi]) for qi in chunk]
                logits_of: dict[int, np.ndarray] = {}
                for mid in dict.fromkeys(id(m) for m in models):
                    mine = [j for j, m in enumerate(models) if id(m) == mid]
                    scorer = scorers.setdefault(mid, CachedScorer(models[mine[0]], cache))
                    got = scorer.score_many([(queries[chunk[j]].text, [texts[i] for i in cands[j][0] + cands[j][1]]) for j in mine])
                    logits_of.update(zip(mine, got))
                for j, qi in enumerate(chunk):
                    q, (cand, extra), model = queries[qi], cands[j], models[j]
                    logits = logits_of[j]
                    fuse_w = float(getattr(model, "fuse_w", math.nan))
                    for k in self.k_fetch:
                        n = min(k, len(cand))
                        order = final_order(logits[:n], fuse_w, self.data.second_stage)
                        out[f"ndcg@10_dense{k}_rerank"].append(ndcg_at_k([ids[cand[i]] for i in order], q.qrels, 10))
                    # oracle pool: the dense top-30, then every relevant turn it misses (from deeper in the list, then beyond it)
                    n30 = min(30, len(cand))
                    rel = {corpus.index[x] for x, g in q.qrels.items() if g > 0 and x in corpus.index}
                    members = list(range(n30)) + [p for p in range(n30, len(cand)) if cand[p] in rel]
                    members += list(range(len(cand), len(cand) + len(extra)))
                    scored = cand + extra
                    pool_docs = [scored[m] for m in members]
                    order = final_order(logits[np.array(members, dtype=int)], fuse_w, self.data.second_stage)
                    out["ndcg@10_oracle_pool_rerank"].append(ndcg_at_k([ids[pool_docs[i]] for i in order], q.qrels, 10))
        finally:
            hits, scored = sum(s.hits for s in scorers.values()), sum(s.scored for s in scorers.values())
            if hits or scored:
                cache.record_build(f"recall {ds.name} dense top-{deepest}", identity_of(reranker), hits, scored)
            cache.close()
        return out, {"hits": hits, "scored": scored}


def summarise(per_query: pd.DataFrame, ranks: pd.DataFrame, cfg: RecallExperiment, depth: int, seed: int = 0) -> dict:
    """Means with bootstrap CIs over queries, the paired deltas the notebook judges, and the share never reranked."""
    def ci(col):
        return stats.bootstrap_ci(per_query[col], seed=seed).as_dict()

    def delta(a, b):
        return stats.paired_delta_ci(per_query[a], per_query[b], seed=seed).as_dict()

    recall = {name: {str(k): ci(f"recall@{k}_{name}") for k in cfg.depths} for name in LISTS}
    oracle = {name: {str(k): ci(f"oracle@{k}_{name}") for k in cfg.oracle_depths} for name in ("hybrid", "dense")}
    lo, hi = min(cfg.oracle_depths), max(cfg.oracle_depths)
    relevant = int(per_query["n_relevant"].sum())
    out = {
        "recall": recall, "oracle": oracle,
        "oracle_deeper": {name: delta(f"oracle@{hi}_{name}", f"oracle@{lo}_{name}") for name in ("hybrid", "dense")},
        "first_stage_ndcg@10": {"dense": ci("ndcg@10_dense"), "hybrid": ci("ndcg@10_hybrid")},
        "pool_recall": ci("pool_recall"),
        "never_reranked": {  # share of all relevant (query, turn) pairs outside what the cross-encoder sees
            "pool": 1 - per_query["pool_found"].sum() / relevant if relevant else None,
            "dense30": 1 - per_query["dense30_found"].sum() / relevant if relevant else None,
            "per_query_pool": 1 - float(per_query["pool_recall"].mean()),
            "per_query_dense30": 1 - float(per_query["recall@30_dense"].mean()) if 30 in cfg.depths else None,
        },
        "relevant_pairs": relevant,
        "rank_buckets": rank_buckets(ranks, depth=depth).to_dict("records") if len(ranks) else [],
    }
    rerank_cols = [f"ndcg@10_dense{k}_rerank" for k in cfg.k_fetch]
    if rerank_cols[0] in per_query:
        out["k_fetch"] = {str(k): ci(c) for k, c in zip(cfg.k_fetch, rerank_cols)}
        out["oracle_pool_rerank"] = ci("ndcg@10_oracle_pool_rerank")
        if len(cfg.k_fetch) > 1:
            a, b = rerank_cols[-1], rerank_cols[0]
            out["k_fetch_delta"] = {**delta(a, b), "p": stats.paired_permutation_test(per_query[a], per_query[b], seed=seed)}
    return out
