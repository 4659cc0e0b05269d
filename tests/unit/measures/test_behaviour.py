import math
from datetime import datetime

from lethe_core.measures.behaviour import top1_behaviour
from lethe_core.datasets import Corpus, Query, Turn

T = [
    Turn("s1_t0", "old fact", "s1", "c", datetime(2023, 1, 1)),
    Turn("s1_t1", "chit chat", "s1", "c", datetime(2023, 1, 1)),
    Turn("s2_t0", "new fact", "s2", "c", datetime(2023, 3, 1)),
    Turn("s3_t0", "unrelated", "s3", "c", datetime(2023, 2, 1)),
]
CORPUS = Corpus(T)


def flags(top1, qtype="single", logit=1.0, qrels=None):
    q = Query("q", "?", qrels or {"s2_t0": 1, "s1_t0": 1}, qtype=qtype)
    return top1_behaviour(CORPUS.index[top1], logit, q, CORPUS)


def test_three_behaviours_partition():
    for top1, expected in [("s2_t0", "exact_episode"), ("s1_t1", "sibling_confusion"), ("s3_t0", "wrong_family")]:
        f = flags(top1)
        assert f[expected] == 1.0
        assert f["exact_episode"] + f["sibling_confusion"] + f["wrong_family"] == 1.0


def test_stale_fact_reference_definition_only_on_knowledge_updates():
    assert math.isnan(flags("s1_t1")["stale_fact"])
    assert flags("s1_t1", qtype="knowledge-update")["stale_fact"] == 1.0
    assert flags("s2_t0", qtype="knowledge-update")["stale_fact"] == 0.0


def test_temporal_staleness_and_abstention():
    assert flags("s1_t0")["stale_fact_temporal"] == 1.0  # relevant but older than the newest relevant session
    assert flags("s2_t0")["stale_fact_temporal"] == 0.0
    f = flags("s2_t0", logit=1.5)
    assert (f["abstain@0"], f["abstain@2"], f["abstain@4"]) == (0.0, 1.0, 1.0)
