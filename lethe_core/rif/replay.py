"""RIF replay over cached pools: no search and no reranker call, only numpy over the pool arrays.

One retrieval (paper algorithm 1; docs/method.md, "Clustered RIF"): adjusted = rrf - alpha * s[cluster, entry]
over the whole union, re-sorted (ties keep the RRF order); the top P form the reranker's pool
(r_init = rank there); sorting the pool by the cross-encoder gives r_final and the winners (its
top 10); every pool member is then updated. The second-stage mode (`ce` or `fused`) decides
only the answer list that is evaluated, never what RIF learns (docs/method.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lethe_core.datasets.model import Dataset
from lethe_core.pools.cache import PackedPools
from lethe_core.retrieval.second_stage import DEFAULT_MODE, final_order, teacher_order
from lethe_core.rif.rules import strength
from lethe_core.rif.state import RIFParams, SuppressionState


@dataclass(frozen=True)
class Arm:
    """One configuration of the study. kind: baseline (rerank top-P), control (rerank the union), rif."""

    name: str
    kind: str = "rif"
    k: int = 1
    rule: str = "uniform"
    params: RIFParams = field(default_factory=RIFParams)
    cues: str = "query"  # clusters from k-means on query embeddings ("query") or on the corpus turns ("entry")


def entry_arms(ks=(10, 30, 50, 100), params: RIFParams = RIFParams()) -> list[Arm]:
    """Clustered arms whose clusters are fit on the corpus turn embeddings: `entry{K}-{rule}`."""
    return [Arm(f"entry{k}-{rule}", "rif", k, rule, params, cues="entry") for k in ks for rule in ("uniform", "gap")]


def standard_arms(ks=(10, 30, 50, 100), params: RIFParams = RIFParams()) -> list[Arm]:
    arms = [Arm("baseline", "baseline", params=params), Arm("control", "control", params=params)]
    for rule in ("uniform", "gap"):
        arms.append(Arm(f"global-{rule}", "rif", 1, rule, params))
    for k in ks:
        for rule in ("uniform", "gap"):
            arms.append(Arm(f"clustered{k}-{rule}", "rif", k, rule, params))
    return arms


class Judgements:
    """Per-row relevance of the packed pools and per-query ideal DCG@10, for fast metrics."""

    def __init__(self, dataset: Dataset, p: PackedPools):
        corpus = dataset.require_corpus()
        qrels = {q.id: q.qrels for q in dataset.queries}
        self.grade = np.zeros(len(p.doc_idx), dtype=np.float64)
        self.n_relevant = np.zeros(len(p.query_ids))
        self.idcg = np.zeros(len(p.query_ids))
        disc = 1.0 / np.log2(np.arange(2, 12))
        for i, qid in enumerate(p.query_ids):
            rel = qrels[qid]
            rows = p.rows(i)
            self.grade[rows] = [rel.get(corpus.ids[d], 0) for d in p.doc_idx[rows]]
            gains = np.sort(2.0 ** np.array(list(rel.values()), dtype=float) - 1)[::-1][:10]
            self.idcg[i] = float((gains * disc[: len(gains)]).sum())
            self.n_relevant[i] = sum(1 for g in rel.values() if g > 0)
        self._disc = disc


@dataclass
class Retrieval:
    rows: slice
    order: np.ndarray  # union positions in answer order (the pool reordered by the second stage)
    pool: np.ndarray  # union positions in the reranker's pool, in adjusted first-stage order
    r_final: np.ndarray  # per pool member: rank in the cross-encoder's own order (what RIF learns from)


def retrieve(p: PackedPools, i: int, arm: Arm, state: SuppressionState | None, cluster: int, step: int,
             mode: str = DEFAULT_MODE) -> Retrieval:
    rows = p.rows(i)
    n = rows.stop - rows.start
    prm = arm.params
    if arm.kind == "control":
        pool = np.arange(n)
    elif state is not None and arm.kind == "rif":
        adjusted = p.rrf[rows] - prm.alpha * state.penalty(cluster, p.doc_idx[rows], step)
        pool = np.argsort(-adjusted, kind="stable")[: prm.pool_size]
    else:
        pool = np.arange(min(n, prm.pool_size))
    conf = p.read_logit[rows][pool]
    r_final = np.empty(len(pool), dtype=np.int64)
    r_final[teacher_order(conf)] = np.arange(len(pool))
    return Retrieval(rows, pool[final_order(conf, float(p.fuse_w[i]), mode)], pool, r_final)


def learn(p: PackedPools, arm: Arm, state: SuppressionState, cluster: int, step: int, ret: Retrieval) -> None:
    prm = arm.params
    pool = ret.pool
    conf = p.read_logit[ret.rows][pool]
    s = strength(arm.rule, np.arange(len(pool)), ret.r_final, conf, prm.pool_size)
    state.update(cluster, step, p.doc_idx[ret.rows][pool], s, ret.r_final < prm.winners)


def score(p: PackedPools, j: Judgements, i: int, ret: Retrieval) -> tuple[float, float, float]:
    """NDCG@10, Recall@10 and pool Recall@30 (recall of the reranker's pool) of one retrieval."""
    g = j.grade[ret.rows]
    top = g[ret.order[:10]]
    ndcg = float(((2.0**top - 1) * j._disc[: len(top)]).sum() / j.idcg[i]) if j.idcg[i] > 0 else 0.0
    nrel = j.n_relevant[i]
    recall = float((top > 0).sum() / nrel) if nrel else 0.0
    pool_recall = float((g[ret.pool] > 0).sum() / nrel) if nrel else 0.0
    return ndcg, recall, pool_recall
