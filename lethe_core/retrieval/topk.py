"""Deterministic top-k: highest score first, ties broken by the lower index."""

from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    n = len(scores)
    if k >= n:
        cand = np.arange(n)
    else:
        # Everything scoring at least the k-th value, so tie-breaking by index is exact.
        kth = np.partition(scores, n - k)[n - k]
        cand = np.flatnonzero(scores >= kth)
    order = np.lexsort((cand, -scores[cand]))
    return cand[order][:k]
