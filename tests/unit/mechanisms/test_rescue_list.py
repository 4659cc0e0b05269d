"""Rescue list (lethe_core.mechanisms.rescue_list): admission, cap, every-k, bandit pruning, injection above the RRF range."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from lethe_core.mechanisms.rescue_list import INJECT_SCORE, RescueList, RescueParams, rescued_retrieval, rescued_view
from lethe_core.rif.replay import Arm
from lethe_core.rif.state import RIFParams, SuppressionState


def test_threshold_best_score_and_cap_eviction():
    r = RescueList(RescueParams(threshold=1.0, cap=2))
    r.offer(0, [1, 2, 3], [0.5, 1.5, 2.0])
    assert set(r.items[0]) == {2, 3}  # 0.5 < threshold
    r.offer(0, [2], [3.0])
    assert r.items[0][2][0] == 3.0  # keyed by the best score
    r.offer(0, [4], [1.2])  # lower than every stored score: not admitted at the cap
    assert set(r.items[0]) == {2, 3}
    r.offer(0, [5], [2.5])  # evicts the lowest (3: 2.0)
    assert set(r.items[0]) == {2, 5} and r.evicted == 1
    assert r.injected(0) == [2, 5]
    assert RescueList(RescueParams(threshold=1.0, top_k=1, cap=None)).injected(0) == []


def test_top_k_and_every_k():
    r = RescueList(RescueParams(threshold=0.0, top_k=2, explore_every=5))
    r.offer(3, [10, 11, 12], [1.0, 3.0, 2.0])
    assert r.injected(3) == [11, 12]
    assert [s for s in range(12) if r.explores(s)] == [0, 5, 10]
    with pytest.raises(ValueError):
        RescueParams(explore_every=0)


def test_bandit_pruning_below_the_floor():
    r = RescueList(RescueParams(threshold=0.0, bandit_decay=0.5, prune_floor=0.2))
    r.offer(0, [1, 2], [1.0, 1.0])
    r.feedback(0, [1, 2], [False, True])
    assert r.items[0][1][1] == pytest.approx(0.5) and r.items[0][2][1] == 1.0
    r.feedback(0, [1], [False])  # 0.0 < 0.2: pruned
    assert 1 not in r.items[0] and r.pruned == 1
    soft = RescueList(RescueParams(threshold=0.0, bandit_decay=0.0))
    soft.offer(0, [1], [1.0])
    soft.feedback(0, [1], [False])
    assert soft.items[0][1][1] == 1.0  # no bandit: no decay


def _ctx():
    """One query, a union of 40 turns in RRF order (scores within the RRF range), logits rising with depth."""
    n = 40
    rrf = np.linspace(0.033, 0.011, n)
    pools = SimpleNamespace(query_ids=["q"], offsets=np.array([0, n]), doc_idx=np.arange(n, dtype=np.int32), rrf=rrf,
                            read_logit=np.linspace(-2, 2, n).astype(np.float32), fuse_w=np.array([np.nan], np.float32))
    pools.rows = lambda i: slice(0, n)
    judgements = SimpleNamespace(grade=np.zeros(n), idcg=np.array([1.0]), n_relevant=np.array([1.0]), _disc=1 / np.log2(np.arange(2, 12)))
    judgements.grade[35] = 1  # the relevant turn sits deep, at RRF position 35
    corpus = SimpleNamespace(ids=[f"t{i}" for i in range(60)])
    query = SimpleNamespace(qrels={"t35": 1, "t50": 1})
    return SimpleNamespace(pools=pools, judgements=judgements, queries={"q": query}, dataset=SimpleNamespace(corpus=corpus), mode="ce")


class _Scorer:
    def __init__(self):
        self.asked = []

    def union_positions(self, i):
        return {t: t for t in range(40)}

    def logits(self, i, turns):
        self.asked += list(turns)
        return np.full(len(turns), 5.0)


def test_rescue_injected_above_the_rrf_range_and_enters_the_pool():
    ctx, params = _ctx(), RescueParams(threshold=0.0)
    view, judged, injected, unscored = rescued_view(ctx, 0, [35, 5, 50], params, _Scorer().union_positions(0))
    assert INJECT_SCORE > 2 / 61
    assert view.rrf[35] == INJECT_SCORE and view.rrf[5] == ctx.pools.rrf[5]  # in the top-30 already: left alone
    assert view.doc_idx[40] == 50 and view.rrf[40] == INJECT_SCORE and list(unscored) == [40]
    assert list(injected) == [35, 50] and judged.grade[40] == 1
    arm = Arm("r", "rif", 1, "gap", RIFParams())
    rescue = RescueList(params)
    rescue.offer(0, [35, 50], [1.0, 0.5])
    scorer = _Scorer()
    ret, view, judged, vi, injected = rescued_retrieval(ctx, 0, arm, SuppressionState(1, 60), rescue, 0, 0, scorer)
    pool_docs = view.doc_idx[ret.pool].tolist()
    assert pool_docs[:2] == [35, 50] and 29 not in pool_docs  # both rescues first; the last RRF top-30 member is out
    assert scorer.asked == [50]  # only the appended rescue that reached the pool is scored
    assert view.doc_idx[ret.order[0]] == 50  # logit 5.0: the reranker puts it first
