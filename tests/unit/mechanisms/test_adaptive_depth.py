"""The deep-pass trigger, its threshold from a trigger share, and the adaptive systems of the study, on hand-made pools."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lethe_core.mechanisms.adaptive_depth import threshold_for_share, triggers
from lethe_core.datasets.splits import within_conversation_halves
from lethe_core.experiments.adaptive_depth_study import adaptive_systems


def test_threshold_for_share_puts_that_share_below():
    scores = np.array([-3.0, -1.0, 0.5, 2.0, 4.0])
    t = threshold_for_share(scores, 0.4)
    assert t == pytest.approx(-0.25)  # between the 2nd and 3rd smallest
    assert triggers(scores, t).sum() == 2
    assert threshold_for_share(scores, 0.0) == -np.inf and not triggers(scores, -np.inf).any()
    assert threshold_for_share(scores, 1.0) == np.inf and triggers(scores, np.inf).all()
    with pytest.raises(ValueError):
        threshold_for_share(scores, 1.5)


def test_trigger_is_strictly_below_the_threshold():
    assert triggers(np.array([3.9, 4.0, 4.1]), 4.0).tolist() == [True, False, False]  # the reference's `max < 4.0`


def test_adaptive_systems_pick_the_deep_row_per_query_below_threshold():
    rows = []
    for qid, top1 in (("q1", -2.0), ("q2", 3.0)):
        for comb, ndcg, pairs in (("shallow", 0.1, 30), ("deep100", 0.9, 100), ("shallow+rescue", 0.2, 32), ("deep100+rescue", 0.8, 101)):
            rows.append({"protocol": "paper", "seed": 42, "split": "all", "query_id": qid, "qtype": "x", "bucket": "hot",
                         "top1": top1, "threshold": 0.0, "combination": comb, "ndcg@10": ndcg, "recall@10": ndcg, "pairs": pairs})
    out = adaptive_systems(pd.DataFrame(rows), (100,)).set_index(["combination", "query_id"])
    assert out.loc[("adaptive100", "q1"), "ndcg@10"] == 0.9 and out.loc[("adaptive100", "q1"), "pairs"] == 100
    assert out.loc[("adaptive100", "q2"), "ndcg@10"] == 0.1 and out.loc[("adaptive100", "q2"), "pairs"] == 30
    assert out.loc[("adaptive100+rescue", "q1"), "ndcg@10"] == 0.8 and out.loc[("adaptive100+rescue", "q2"), "ndcg@10"] == 0.2
    assert bool(out.loc[("adaptive100", "q1"), "deep"]) and not bool(out.loc[("adaptive100", "q2"), "deep"])


def test_within_conversation_halves_split_every_conversation_and_are_seeded():
    convs = ["a"] * 4 + ["b"] * 6
    a, b = within_conversation_halves(convs, 1)
    assert sorted(np.concatenate([a, b]).tolist()) == list(range(10)) and not set(a) & set(b)
    assert sum(convs[i] == "a" for i in a) == 2 and sum(convs[i] == "b" for i in a) == 3
    assert [x.tolist() for x in within_conversation_halves(convs, 1)] == [a.tolist(), b.tolist()]
    assert [x.tolist() for x in within_conversation_halves(convs, 2)] != [a.tolist(), b.tolist()]
