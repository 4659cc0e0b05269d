"""Quantile matching of the reference's logit thresholds onto another reranker's scores."""

from __future__ import annotations

import numpy as np
import pytest

from lethe_core.mechanisms.score_scale import matched_threshold, reference_share_below


def test_reference_shares_interpolate_between_the_reported_points():
    assert reference_share_below(0.0) == pytest.approx(0.180)
    assert reference_share_below(1.0) == pytest.approx(0.252)
    assert reference_share_below(4.0) == pytest.approx(0.512)
    with pytest.raises(ValueError):
        reference_share_below(5.0)


def test_matched_threshold_puts_the_same_share_of_our_top1_scores_below():
    ours = np.linspace(-6.0, -1.0, 1000)  # a reranker whose every top-1 is negative
    t = matched_threshold(0.0, ours)
    assert (ours < t).mean() == pytest.approx(0.180, abs=0.001)
    assert t < 0 < 1  # "logit > 0" would never fire on these scores; the matched threshold does for 82 %
    assert matched_threshold(2.0, ours) > t
