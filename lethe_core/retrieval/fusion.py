"""Reciprocal rank fusion (Cormack et al. 2009) with 0-based ranks, as the reference runs it."""

from __future__ import annotations

from typing import Hashable, Sequence

RRF_K = 60


def rrf(ranked_lists: Sequence[Sequence[Hashable]], k: int = RRF_K) -> dict[Hashable, float]:
    """score(d) = sum over lists of 1 / (k + rank), rank 0-based; returns the unsorted union."""
    scores: dict[Hashable, float] = {}
    for lst in ranked_lists:
        for rank, doc in enumerate(lst):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return scores


def fused_order(fused: dict[int, float], ids: Sequence[str]) -> list[int]:
    """An `rrf` union of corpus positions, best first, ties broken by turn id (`ids[position]`)."""
    return sorted(fused, key=lambda d: (-fused[d], ids[d]))
