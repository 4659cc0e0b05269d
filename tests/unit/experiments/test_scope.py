"""Checkpoint 18 views: the reference's table and buckets from its own arrays; finding and reading our runs."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from lethe_core.experiments import scope
from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.retrieval.pipeline import PipelineConfig
from tests.conftest import REFERENCE


def test_schedule_buckets_match_the_reference_split():
    bucket, draws = scope.schedule_buckets(500, 5000, seed=42)
    counts = {b: int((bucket == b).sum()) for b in scope.BUCKETS}
    assert counts == scope.REFERENCE_BUCKET_COUNTS  # 100 hot, 390 cold-seen, 10 unseen (CHECKPOINTS.md, CK18)
    assert draws.sum() == 5000 and (draws[bucket == "unseen"] == 0).all() and (draws[bucket == "cold"] > 0).all()
    assert draws[bucket == "hot"].mean() == pytest.approx(35, abs=1)  # ~35 exposures per hot query
    assert draws[bucket == "cold"].mean() == pytest.approx(3.7, abs=0.2)


def test_schedule_buckets_small_and_seeded():
    a, da = scope.schedule_buckets(20, 0, seed=1)
    assert set(a) == {"hot", "unseen"} and (a == "hot").sum() == 4 and da.sum() == 0
    b1, _ = scope.schedule_buckets(50, 200, seed=3)
    b2, _ = scope.schedule_buckets(50, 200, seed=3)
    assert (b1 == b2).all()


def test_reference_buckets_reproduce_ck18():
    df = scope.reference_buckets(REFERENCE).set_index(["config", "bucket"])
    for key, value in scope.REFERENCE_BUCKETS.items():
        assert df.loc[key, "delta"] == pytest.approx(value, abs=6e-4), key
    assert df.loc[("clustered30-gap", "hot"), "n"] == 100
    lo, hi = df.loc[("clustered30-gap", "cold"), ["lo", "hi"]]
    assert lo < 0.0154 < hi and lo > 0


def test_reference_table_is_reproduced():
    table = scope.reference_table(REFERENCE)
    assert set(table["comparison"]) >= {f"{a} vs baseline" for a in scope.REFERENCE_ARMS}
    check = scope.reproduction_check(table)
    assert check["reproduced"].all(), check[~check["reproduced"]]
    row = table.set_index("comparison").loc["clustered30-gap vs baseline"]
    assert row["p (Holm)"] >= row["p"]


def test_reproduction_check_flags_a_wrong_figure():
    table = scope.reference_table(REFERENCE)
    table.loc[table["comparison"] == "clustered30-gap vs baseline", "delta"] += 0.01
    check = scope.reproduction_check(table).set_index("figure")
    assert not check.loc["clustered30-gap: Δ NDCG@10", "reproduced"] and check.loc["global-gap: Δ NDCG@10", "reproduced"]


@pytest.fixture
def small_exp(tmp_path):
    """LoCoMo's first conversation, hashing encoder, lexical test reranker: seconds."""
    data = DataSpec(dataset="locomo", conversations=1, reranker="test:lexical", pipeline=PipelineConfig(encoder="test:hash"), progress=False)
    return RIFExperiment(data, arms=["global-gap", "clustered10-gap"], seeds=1, burn_in=100, snapshot_every=50, map=False)


def test_load_or_run_reuses_only_a_matching_run(small_exp, tmp_path):
    root = tmp_path / "results"
    run, reused = scope.load_or_run(small_exp, root)
    assert not reused and set(run.arms) == {"baseline", "global-gap", "clustered10-gap"}
    again, reused = scope.load_or_run(small_exp, root)
    assert reused and again.path == run.path
    # a subset of the arms is served by the same folder; other seeds, burn-in or constants are not
    assert scope.matching_run(replace(small_exp, arms=["global-gap"]), root).path == run.path
    for change in ({"seeds": 2}, {"burn_in": 120}, {"alpha": 0.5}, {"protocol": "prequential"}, {"arms": ["global-uniform"]}):
        assert scope.matching_run(replace(small_exp, **change), root) is None, change


def test_bucket_table_and_saturation(small_exp, tmp_path):
    run, _ = scope.load_or_run(replace(small_exp, seeds=2), tmp_path / "results")  # two seeds: the summary's seed convention
    buckets = scope.bucket_table(run)
    assert set(buckets["arm"]) == {"global-gap", "clustered10-gap"}
    assert set(buckets["bucket"]) <= set(scope.BUCKETS)
    summary = {a["name"]: a for a in run.summary["arms"]}
    for _, r in buckets.iterrows():  # the same means the experiment's own summary reports
        assert r["delta"] == pytest.approx(summary[r["arm"]]["buckets"][r["bucket"]]["delta_ndcg"], abs=1e-12)
        assert r["lo"] <= r["delta"] <= r["hi"]
    wide = scope.delta_ci(run, "global-gap", level=1 - 0.05 / 2)
    narrow = scope.delta_ci(run, "global-gap")
    assert wide.lo <= narrow.lo and wide.hi >= narrow.hi
    assert narrow.mean == pytest.approx(summary["global-gap"]["delta_ndcg"]["mean"])
    sat = scope.saturation_table(run)
    assert set(sat["arm"]) == {"global-gap", "clustered10-gap"}
    assert ((sat["share_of_corpus"] > 0) & (sat["share_of_corpus"] <= 1)).all()
    n = scope.corpus_size(run)
    assert np.allclose(sat["share_of_corpus"], sat["docs"] / n)
    # burn-in 100 is a multiple of the snapshot step (50): the last snapshot (first seed) is that seed's end of burn-in
    first = run.summary["suppressed_by_seed"]["42"]
    assert (sat["snapshot_step"] == 100).all()
    assert np.allclose(sat["snapshot_share"], [first[a][s]["docs"] / n for a, s in zip(sat["arm"], sat["split"])])


def two_seed_run():
    """Four queries of two conversations, two seeds; the arm gains on q0 in seed 42 only and on q1 in seed 43 only, and
    q1 moves from the hot bucket (seed 42) to the cold one (seed 43)."""
    rows = []
    for seed, gains, buckets in ((42, [0.4, 0.0, 0.0, 0.0], ["hot", "hot", "cold", "cold"]),
                                 (43, [0.0, 0.2, 0.0, 0.0], ["hot", "cold", "cold", "cold"])):
        for i in range(4):
            for arm, gain in (("baseline", 0.0), ("clustered30-gap", gains[i])):
                rows.append({"seed": seed, "query_id": f"c{i // 2}:q{i}", "split": "all", "arm": arm, "bucket": buckets[i],
                             "ndcg@10": 0.5 + gain})
    return SimpleNamespace(per_query=pd.DataFrame(rows), arms=["baseline", "clustered30-gap"], summary={"seeds": [42, 43]})


def test_tables_read_the_seed_mean_per_query():
    run = two_seed_run()
    d = scope.delta_ci(run, "clustered30-gap")
    assert d.mean == pytest.approx((0.2 + 0.1) / 4)  # per query, the mean over seeds: 0.2, 0.1, 0, 0; seed 42 alone: 0.1
    b = scope.bucket_table(run).set_index("bucket")
    # buckets pool the (query, seed) rows: hot holds q0 twice and q1 in seed 42, cold q1 in seed 43 and q2, q3 in both
    assert b.loc["hot", "n"] == 3 and b.loc["hot", "queries"] == 2 and b.loc["hot", "delta"] == pytest.approx(0.4 / 3)
    assert b.loc["cold", "n"] == 5 and b.loc["cold", "queries"] == 3 and b.loc["cold", "delta"] == pytest.approx(0.2 / 5)
    assert (b["lo"] <= b["delta"]).all() and (b["delta"] <= b["hi"]).all()


def test_nfcorpus_experiment_small_is_cheap():
    exp = scope.nfcorpus_experiment("test:lexical", "torch", 2, 400, small=True)
    assert exp.data.limit_queries == 40 and exp.data.pipeline.encoder == "test:hash" and not exp.map
    full = scope.nfcorpus_experiment("auto", "torch", 5, None, small=False)
    assert full.data.limit_queries is None and full.burn_in is None and full.arms == scope.SCOPE_ARMS
