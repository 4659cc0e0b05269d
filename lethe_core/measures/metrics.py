"""Ranking metrics on one query's ranked list of turn ids (docs/method.md, "Metrics").

All return per-query floats; aggregate with numpy / `lethe_core.measures.stats` so that every
mean comes with the per-query array it was computed from.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int = 10) -> float:
    """Gain 2^rel - 1, discount 1/log2(i + 2) for 0-based i, ideal DCG from all qrels."""
    if not qrels:
        return 0.0
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    gains = np.array([2.0 ** qrels.get(d, 0) - 1.0 for d in ranked[:k]])
    ideal = np.sort(np.array([2.0**g - 1.0 for g in qrels.values()]))[::-1][:k]
    idcg = float((ideal * disc[: len(ideal)]).sum())
    return float((gains * disc[: len(gains)]).sum()) / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Share of the relevant turns (rel > 0) found in the top k."""
    relevant = {d for d, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def longmemeval_ndcg(ranked: Sequence[str], qrels: Mapping[str, int], k: int = 10) -> float:
    """LongMemEval's own scorer: binary relevance, DCG = rel_1 + sum_{i>=2} rel_i / log2(i) (1-based i).

    It differs from `ndcg_at_k`: ranks 1 and 2 are not discounted, and grades are ignored.
    """
    def dcg(rels: np.ndarray) -> float:
        rels = rels[:k]
        if rels.size == 0:
            return 0.0
        return float(rels[0] + np.sum(rels[1:] / np.log2(np.arange(2, rels.size + 1))))

    relevant = {d for d, g in qrels.items() if g > 0}
    ideal = dcg(np.ones(len(relevant)))
    return dcg(np.array([1.0 if d in relevant else 0.0 for d in ranked])) / ideal if ideal > 0 else 0.0


def _relevant(qrels: Mapping[str, int]) -> set[str]:
    return {d for d, g in qrels.items() if g > 0}


def hit_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """1.0 if any relevant turn (rel > 0) is in the top k, else 0.0 (LoCoMo papers' "hit@k" / "accuracy@k")."""
    relevant = _relevant(qrels)
    return 1.0 if relevant and relevant.intersection(ranked[:k]) else 0.0


def recall_all_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """1.0 only if every relevant turn is in the top k (all the evidence retrieved), else 0.0."""
    relevant = _relevant(qrels)
    return 1.0 if relevant and relevant.issubset(ranked[:k]) else 0.0


def mrr(ranked: Sequence[str], qrels: Mapping[str, int], k: int | None = None) -> float:
    """Reciprocal 1-based rank of the first relevant turn within the top k (all of `ranked` when k is None); 0 if none."""
    relevant = _relevant(qrels)
    for i, d in enumerate(ranked if k is None else ranked[:k]):
        if d in relevant:
            return 1.0 / (i + 1)
    return 0.0
