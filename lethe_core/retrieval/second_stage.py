"""The second stage: how a reranker's logits turn a first-stage pool into the *answer* order.

- `ce` (default, the paper's pipeline): sort the pool by the cross-encoder logit.
- `fused`: weighted reciprocal-rank fusion of the pool's first-stage order and the
  cross-encoder's order, score = w / (60 + r_first) + (1 - w) / (60 + r_ce), with the
  weight w validated per fold on training conversations only (see `lethe_core.rerankers.training`).
  w = NaN means "no fusion weight": the pool is ordered by the logit alone.

Ties keep the first-stage order, so the result is deterministic. The mode changes only
the list that is evaluated: RIF always learns from the teacher itself — `r_final` is the
rank in the cross-encoder's own order and the winners are its top-10 (`teacher_order`),
whatever the mode (docs/method.md, "Second stage").
"""

from __future__ import annotations

import math

import numpy as np

FUSION_K = 60.0
MODES = ("ce", "fused")
DEFAULT_MODE = "ce"


def teacher_order(logits: np.ndarray) -> np.ndarray:
    """Positions of the pool sorted by the cross-encoder alone (ties keep the first-stage order)."""
    return np.argsort(-logits, kind="stable")


def final_order(logits: np.ndarray, fuse_w: float = math.nan, mode: str = DEFAULT_MODE) -> np.ndarray:
    """Positions of the pool (given in first-stage order) sorted into the answer order."""
    if mode not in MODES:
        raise ValueError(f"second stage must be one of {MODES}, got {mode!r}")
    n = len(logits)
    ce_order = teacher_order(logits)
    if mode == "ce" or math.isnan(fuse_w):
        return ce_order
    r_ce = np.empty(n, dtype=np.float64)
    r_ce[ce_order] = np.arange(n)
    score = fuse_w / (FUSION_K + np.arange(n)) + (1.0 - fuse_w) / (FUSION_K + r_ce)
    return np.argsort(-score, kind="stable")
