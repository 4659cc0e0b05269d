"""The checkpoint-8/10 systems table, computed from cached pools only.

Systems (all read the same pools, so they differ only in how they order them):
- vector, bm25, rrf: first-stage lists, top-10;
- vector_rerank: dense top-30 reordered by the reranker;
- full: RRF top-P (P = 30) reordered by the reranker (the paper's baseline);
- control: the whole RRF union reordered by the reranker (no RIF, more reranker calls); its
  pool recall is the recall of the whole union (`union_recall`), not of a top-30.

`lme_ndcg@10` is LongMemEval's own scorer, averaged as the official script does: without the
abstention (`_abs`) questions, which have no evidence to retrieve.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lethe_core.measures.behaviour import top1_behaviour
from lethe_core.datasets import Dataset
from lethe_core.measures.metrics import hit_at_k, longmemeval_ndcg, mrr, ndcg_at_k, recall_all_at_k, recall_at_k
from lethe_core.pools.cache import PackedPools
from lethe_core.results.store import slug, write_parquet, write_summary
from lethe_core.retrieval.second_stage import DEFAULT_MODE, final_order
from lethe_core.measures import stats
from lethe_core.experiments.setup import DataStudy, Loaded

SYSTEMS = ("vector", "bm25", "rrf", "vector_rerank", "full", "control")
RERANKED = {"vector_rerank", "full", "control"}
# The metrics LoCoMo / memory papers publish, beside NDCG@10 and Recall@10 (per query, averaged in `summarise`).
PEER_METRICS = ("hit@1", "hit@5", "hit@10", "recall_all@10", "mrr@10")


def peer_metrics(ranked, qrels) -> dict[str, float]:
    return {"hit@1": hit_at_k(ranked, qrels, 1), "hit@5": hit_at_k(ranked, qrels, 5), "hit@10": hit_at_k(ranked, qrels, 10),
            "recall_all@10": recall_all_at_k(ranked, qrels, 10), "mrr@10": mrr(ranked, qrels, 10)}


def system_orders(p: PackedPools, i: int, pool_size: int, mode: str = DEFAULT_MODE) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """For query i: each system's (final order, reranker pool) as positions into its pool rows."""
    rows = p.rows(i)
    n = rows.stop - rows.start
    logit, fuse_w = p.logit[rows], float(p.fuse_w[i])
    bm25, dense = p.bm25_rank[rows], p.dense_rank[rows]

    def by_leg(r):
        return np.flatnonzero(r >= 0)[np.argsort(r[r >= 0], kind="stable")]

    def rerank(pool):  # `pool` is in first-stage order
        return pool[final_order(logit[pool], fuse_w, mode)]

    dense_list, bm25_list, rrf_list = by_leg(dense), by_leg(bm25), np.arange(n)
    top_p, dense_p = rrf_list[:pool_size], dense_list[:pool_size]
    return {
        "vector": (dense_list, dense_list[:30]),
        "bm25": (bm25_list, bm25_list[:30]),
        "rrf": (rrf_list, rrf_list[:30]),
        "vector_rerank": (rerank(dense_p), dense_p),
        "full": (rerank(top_p), top_p),
        "control": (rerank(rrf_list), rrf_list),
    }


def evaluate_systems(dataset: Dataset, p: PackedPools, pool_size: int = 30, mode: str = DEFAULT_MODE) -> pd.DataFrame:
    """One row per (query, system) with NDCG@10, Recall@10, pool Recall@30, `PEER_METRICS` and top-1 behaviour.

    Behaviour and abstention read the top-1's logit as the spec says (raw by default, calibrated as the ablation).
    """
    corpus = dataset.require_corpus()
    queries = {q.id: q for q in dataset.queries}
    ids = np.asarray(corpus.ids, dtype=object)
    rows = []
    for i, qid in enumerate(p.query_ids):
        q = queries[qid]
        doc_idx, conf = p.doc_idx[p.rows(i)], p.read_logit[p.rows(i)]
        for name, (order, pool) in system_orders(p, i, pool_size, mode).items():
            ranked = ids[doc_idx[order]].tolist()
            row = {
                "query_id": qid, "qtype": q.qtype, "system": name,
                "ndcg@10": ndcg_at_k(ranked, q.qrels, 10), "recall@10": recall_at_k(ranked, q.qrels, 10),
                "pool_recall@30": recall_at_k(ids[doc_idx[pool]].tolist(), q.qrels, len(pool)),
                "lme_ndcg@10": np.nan if "abstention" in q.flags else longmemeval_ndcg(ranked, q.qrels, 10),
                **peer_metrics(ranked, q.qrels),
            }
            if name in RERANKED and len(order):
                row["top1_logit"] = float(conf[order[0]])
                row.update(top1_behaviour(int(doc_idx[order[0]]), float(conf[order[0]]), q, corpus))
            rows.append(row)
    return pd.DataFrame(rows)


def summarise(per_query: pd.DataFrame, seed: int = 0) -> list[dict]:
    """Means with bootstrap CIs, and each system's paired permutation p against rrf."""
    wide = per_query.pivot(index="query_id", columns="system", values="ndcg@10")
    out = []
    for name in SYSTEMS:
        sub = per_query[per_query["system"] == name]
        lme = sub["lme_ndcg@10"].dropna()
        entry = {
            "name": name,
            "ndcg@10": float(sub["ndcg@10"].mean()),
            "recall@10": float(sub["recall@10"].mean()),
            "union_recall" if name == "control" else "pool_recall@30": float(sub["pool_recall@30"].mean()),
            "lme_ndcg@10": float(lme.mean()) if len(lme) else None,
            "ndcg@10_ci": stats.bootstrap_ci(sub["ndcg@10"], seed=seed).as_dict()["ci"],
            **{m: float(sub[m].mean()) for m in PEER_METRICS if m in sub},
        }
        if name != "rrf":
            entry["delta_vs_rrf"] = stats.paired_delta_ci(wide[name], wide["rrf"], seed=seed).as_dict()
            entry["p_vs_rrf"] = stats.paired_permutation_test(wide[name], wide["rrf"], seed=seed)
        if name in RERANKED:
            for col in ("exact_episode", "sibling_confusion", "wrong_family", "abstain@0", "abstain@2", "abstain@4"):
                entry[col] = float(sub[col].mean())
        out.append(entry)
    return out


def pool_recall(row: dict) -> float:
    """A summary row's recall of what its system reorders: `union_recall` for control, else `pool_recall@30`."""
    return row["union_recall"] if "union_recall" in row else row["pool_recall@30"]


def per_fold(per_query: pd.DataFrame, ds: Dataset, manifest: dict, seed: int = 0) -> list[dict]:
    conv = {q.id: q.conversation_id for q in ds.queries}
    out = []
    for f in manifest["folds"]:
        mine = per_query[per_query["query_id"].map(conv).isin(f["eval_conversations"])]
        if mine.empty:
            continue
        wide = mine.pivot(index="query_id", columns="system", values="ndcg@10")
        out.append({"fold": f["fold"], "eval_conversations": f["eval_conversations"], "n_queries": int(len(wide)),
                    **{f"ndcg@10_{s}": float(wide[s].mean()) for s in ("rrf", "full", "control")},
                    "p_full_vs_rrf": stats.paired_permutation_test(wide["full"], wide["rrf"], seed=seed),
                    "fuse_w": f["fuse_w"], "calibration": f["calibration"]})
    return out


@dataclass
class SystemsExperiment(DataStudy):
    """`lethe-lab systems`: build or reuse pools, evaluate every system, write results/<name>/."""

    seed: int = 0

    def run_id(self, loaded: Loaded, config: dict | None = None) -> str:
        """`systems-<dataset>-<reranker>-<second stage>-<cal|raw>-<pool key>` (builds the pools when missing)."""
        d = self.data
        return f"systems-{loaded.dataset.name}-{slug(loaded.pools.reranker)}-{d.second_stage}-{'cal' if d.calibration else 'raw'}-{loaded.builder.key}"

    def _compute(self, loaded: Loaded, out: Path, config: dict) -> dict:
        ds, pools, packed, d = loaded.dataset, loaded.pools, loaded.packed, self.data
        per_query = evaluate_systems(ds, packed, d.pipeline.pool_size, d.second_stage)
        summary = {
            "dataset": ds.name, "reranker": pools.reranker, "reranker_identity": pools.manifest.get("reranker_identity"),
            "n_queries": len(ds.queries), **ds.dropped_entries(),
            "second_stage": d.second_stage if not np.isnan(packed.fuse_w).all() else "ce",
            "calibrated": bool((packed.read_logit != packed.logit).any()),
            "logit_reading": "calibrated" if (packed.read_logit != packed.logit).any() else "raw",
            "systems": summarise(per_query, self.seed), "pool_key": loaded.builder.key, "results_dir": str(out),
            "config": config,
        }
        manifest = getattr(loaded.reranker, "manifest", None)
        if manifest:  # fold-trained reranker: each fold's queries were scored by a model that never saw them
            summary["per_fold"] = per_fold(per_query, ds, manifest, self.seed)
        write_parquet(out / "per_query.parquet", per_query)
        return write_summary(out, summary, default=None)
