"""The second stage: how a reranker's logits turn a first-stage pool into the final order.

- `ce`: sort the pool by the cross-encoder logit (the paper's setting).
- `fused`: weighted reciprocal-rank fusion of the pool's first-stage order and the
  cross-encoder's order, score = w / (60 + r_first) + (1 - w) / (60 + r_ce), with the
  weight w validated per fold on training conversations only (see `lethe_core.training`).
  w = NaN means "no fusion weight": the pool is ordered by the logit alone.

Ties keep the first-stage order, so the result is deterministic. The *confidence* that
RIF and abstention read is always the (optionally calibrated) logit of each candidate;
`r_final` is its rank in the order returned here.
"""

from __future__ import annotations

import math

import numpy as np

FUSION_K = 60.0
MODES = ("ce", "fused")


def final_order(logits: np.ndarray, fuse_w: float = math.nan, mode: str = "fused") -> np.ndarray:
    """Positions of the pool (given in first-stage order) sorted into the final order."""
    n = len(logits)
    ce_order = np.argsort(-logits, kind="stable")
    if mode == "ce" or math.isnan(fuse_w):
        return ce_order
    if mode != "fused":
        raise ValueError(f"second stage must be one of {MODES}, got {mode!r}")
    r_ce = np.empty(n, dtype=np.float64)
    r_ce[ce_order] = np.arange(n)
    score = fuse_w / (FUSION_K + np.arange(n)) + (1.0 - fuse_w) / (FUSION_K + r_ce)
    return np.argsort(-score, kind="stable")
