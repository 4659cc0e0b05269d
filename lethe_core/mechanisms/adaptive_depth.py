"""Adaptive depth (checkpoint 06): rerank a deeper pool only when the shallow pass is not confident.

The reference reranked the FAISS top-30 and, when the best cross-encoder logit stayed below 4.0 (on the
MS MARCO model's scale; 59 % of its queries), the FAISS top-200 instead. Here the first stage is the hybrid
pipeline: the shallow pool is the RRF top-30 of 30-deep legs (the paper's `full` system) and the deep pool
is the RRF top-D of D-deep legs (D = 100 or 200). A threshold on one reranker's scale means nothing on
another's, so it is set as a *trigger share*: the quantile of the shallow top-1 scores of the queries the
system learns from (never the ones it is evaluated on in the held-out protocol). docs/adaptive_depth.md.
"""

from __future__ import annotations

import numpy as np

REFERENCE_TRIGGER_SHARE = 0.59  # share of the reference's queries that triggered its deep pass


def threshold_for_share(top_scores: np.ndarray, share: float) -> float:
    """The threshold under which `share` of these shallow top-1 scores fall: the deep pass then fires for that share.

    share 0 never triggers (-inf), share 1 always triggers (+inf).
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"trigger share must lie in [0, 1], got {share}")
    scores = np.asarray(top_scores, dtype=np.float64)
    if share == 0.0 or not len(scores):
        return -np.inf
    if share == 1.0:
        return np.inf
    # the midpoint between the k-th and (k+1)-th smallest score, so exactly k = round(share * n) scores fall below
    s = np.sort(scores)
    k = int(round(share * len(s)))
    if k <= 0:
        return -np.inf
    if k >= len(s):
        return np.inf
    return float((s[k - 1] + s[k]) / 2.0)


def triggers(top_scores: np.ndarray, threshold) -> np.ndarray:
    """Which queries go deep: shallow top-1 score strictly below the threshold (the reference's `max < 4.0`);
    `threshold` is one number or one per query."""
    return np.asarray(top_scores, dtype=np.float64) < threshold
