"""Reading the reference's MS MARCO logit thresholds on another reranker's scale, by quantile matching.

The reference's thresholds (route creation at logit > 0, rescue at logit >= 1.0, adaptive depth below 4.0) are
on `cross-encoder/ms-marco-MiniLM-L-6-v2`'s logit scale. Our fold-trained reranker's scores, raw or calibrated, live
elsewhere (its calibrated best score for a LoCoMo question stays below 0), so the same number means something else.
The reference reported, for its baseline top-1 answers on LongMemEval, the share below 0, 2 and 4
(abstain@T in checkpoint 16: 0.180, 0.324, 0.512). A reference threshold T is mapped to the score that
the same share of *our* streamed questions' top-1 scores fall below (linear between the reported points).
docs/adaptive_depth.md ("Thresholds on another scale").
"""

from __future__ import annotations

import numpy as np

from lethe_core.mechanisms.adaptive_depth import threshold_for_share
from lethe_core.pools.cache import PackedPools

REFERENCE_TOP1_BELOW = {0.0: 0.180, 2.0: 0.324, 4.0: 0.512}  # share of the reference's top-1 logits below T (CK16)
SCALES = ("matched", "raw")  # matched: map the reference's thresholds by quantile; raw: read them as our scores


def reference_share_below(logit: float) -> float:
    """Share of the reference's top-1 answers whose MS MARCO logit is below `logit` (interpolated; 0..4 only)."""
    xs = np.array(sorted(REFERENCE_TOP1_BELOW))
    if not xs[0] <= logit <= xs[-1]:
        raise ValueError(f"the reference reported top-1 shares for logits {xs[0]:g} to {xs[-1]:g} only, not {logit:g}")
    return float(np.interp(logit, xs, [REFERENCE_TOP1_BELOW[x] for x in xs]))


def top1_scores(pools: PackedPools, positions: np.ndarray, pool_size: int) -> np.ndarray:
    """Best read logit (`PackedPools.read_logit`) of each query's reranked pool (the RRF top-`pool_size`)."""
    out = np.empty(len(positions))
    for j, i in enumerate(positions):
        r = pools.rows(int(i))
        conf = pools.read_logit[r.start : min(r.stop, r.start + pool_size)]
        out[j] = float(conf.max()) if len(conf) else -np.inf
    return out


def matched_threshold(reference_logit: float, top1: np.ndarray) -> float:
    """Our score below which the same share of top-1 answers falls as below `reference_logit` in the reference."""
    return threshold_for_share(top1, reference_share_below(reference_logit))
