"""The RIF run's table reads every seed one way: each query's metric averaged over the seeds, CIs over queries."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lethe_core.experiments.rif import SEED_CONVENTION, seed_means, summarise
from lethe_core.measures import stats
from lethe_core.rif.replay import Arm

BEHAVIOUR = ("exact_episode", "sibling_confusion", "wrong_family", "abstain@0", "abstain@2", "abstain@4")


def _rows(rng):
    queries = [f"conv-{c}:q{i}" for c in range(4) for i in range(6)]
    rows = []
    for seed in (42, 43):
        for arm, shift in (("baseline", 0.0), ("control", 0.01), ("clustered30-gap", 0.03 if seed == 42 else -0.01)):
            for q in queries:
                rows.append({"query_id": q, "arm": arm, "seed": seed, "split": "all", "bucket": "hot" if seed == 42 else "cold",
                             "ndcg@10": float(np.clip(rng.random() * 0.5 + shift, 0, 1)), "pool_recall@30": float(rng.random()),
                             **{c: float(rng.random() < 0.5) for c in BEHAVIOUR}})
    return pd.DataFrame(rows)


def test_the_table_is_the_seed_mean_per_query_with_a_conversation_level_ci():
    rows = _rows(np.random.default_rng(3))
    arms = [Arm("baseline", "baseline"), Arm("control", "control"), Arm("clustered30-gap", "rif", 30, "gap")]
    suppressed = {42: {"clustered30-gap": {"all": {"entries": 10, "docs": 4}}}, 43: {"clustered30-gap": {"all": {"entries": 20, "docs": 6}}}}
    summary = summarise(rows, arms, [42, 43], suppressed, "paper")
    assert summary["seed_convention"] == SEED_CONVENTION
    gap = next(a for a in summary["arms"] if a["name"] == "clustered30-gap")
    mine = seed_means(rows[rows["arm"] == "clustered30-gap"], "ndcg@10")
    base = seed_means(rows[rows["arm"] == "baseline"], "ndcg@10").reindex(mine.index)
    expected = stats.paired_delta_ci(mine.to_numpy(), base.to_numpy(), seed=42)
    assert np.isclose(gap["delta_ndcg"]["mean"], expected.mean) and np.allclose(gap["delta_ndcg"]["ci"], [expected.lo, expected.hi])
    first = rows[(rows["seed"] == 42)]
    seed42 = first[first["arm"] == "clustered30-gap"]["ndcg@10"].mean() - first[first["arm"] == "baseline"]["ndcg@10"].mean()
    assert not np.isclose(gap["delta_ndcg"]["mean"], seed42), "not the first seed's delta"
    conv = stats.hierarchical_paired_ci(mine.to_numpy(), base.to_numpy(), [q.split(":")[0] for q in mine.index], seed=42)
    assert np.allclose(gap["delta_ndcg"]["conversation_ci"], [conv.lo, conv.hi])
    assert gap["suppressed_entries"] == {"all": {"entries": 15.0, "docs": 5.0}}, "suppression counts: the seeds' mean"
    assert gap["buckets"]["hot"]["n"] == 24 and gap["buckets"]["cold"]["n"] == 24, "buckets pool (query, seed) rows"
