"""How far a backend's scores are from torch's, on one fixed sample of real (query, candidate) pairs.

Shared by the parity tests and benchmarks/reranker_speed.py so both report the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class PairSample:
    """Queries with their BM25 candidates (turn texts), in a fixed seeded order."""

    queries: list[str]
    candidates: list[list[str]]

    @property
    def n_pairs(self) -> int:
        return sum(len(c) for c in self.candidates)


def locomo_pair_sample(dataset, n_queries: int, k: int = 30, seed: int = 0) -> PairSample:
    """`n_queries` seeded LoCoMo questions, each with its BM25 top-`k` turns (the shape a pool scores)."""
    from lethe_core.retrieval.bm25 import BM25Index
    from lethe_core.retrieval.text import tokenize

    texts = dataset.corpus.texts
    bm25 = BM25Index([tokenize(t) for t in texts])
    picks = np.random.default_rng(seed).choice(len(dataset.queries), size=min(n_queries, len(dataset.queries)), replace=False)
    queries, candidates = [], []
    for i in sorted(picks.tolist()):
        q = dataset.queries[i].text
        idx, _ = bm25.search(tokenize(q), k)
        queries.append(q)
        candidates.append([texts[j] for j in idx])
    return PairSample(queries, candidates)


def logit_parity(reference: list[np.ndarray], other: list[np.ndarray], top: int = 10) -> dict[str, float]:
    """max |logit difference|, mean per-query Spearman and Kendall of the orders, share of identical top-`top` sets."""
    from scipy.stats import kendalltau, spearmanr

    ref, oth = np.concatenate(reference), np.concatenate(other)
    spearman = [spearmanr(a, b).statistic for a, b in zip(reference, other)]
    kendall = [kendalltau(a, b).statistic for a, b in zip(reference, other)]
    same_top = [set(np.argsort(-a, kind="stable")[:top]) == set(np.argsort(-b, kind="stable")[:top]) for a, b in zip(reference, other)]
    return {
        "max_abs_diff": float(np.abs(ref - oth).max()),
        "spearman_mean": float(np.mean(spearman)),
        "spearman_min": float(np.min(spearman)),
        "kendall_mean": float(np.mean(kendall)),
        f"top{top}_identical_share": float(np.mean(same_top)),
    }


def cosine_parity(reference: np.ndarray, other: np.ndarray) -> dict[str, float]:
    """Row-wise cosine between two backends' embeddings of the same texts."""
    cos = np.sum(reference * other, axis=1) / (np.linalg.norm(reference, axis=1) * np.linalg.norm(other, axis=1))
    return {"cosine_min": float(cos.min()), "cosine_mean": float(cos.mean())}
