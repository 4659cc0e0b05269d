"""Checkpoint 16 behaviour decomposition: paired deltas per question type on seed means, NaN handling, seed spread, a real run."""

import math

import numpy as np
import pandas as pd
import pytest

from lethe_core.experiments.behaviour_study import behaviour_deltas, behaviour_study, coverage, seed_spread
from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.results.runs import load_run
from lethe_core.retrieval.pipeline import PipelineConfig


def frame(seed=42):
    # four queries, two types; the arm turns q1's wrong_family top-1 into an exact one
    base = {"exact_episode": [1, 0, 0, 1], "wrong_family": [0, 1, 1, 0], "stale_fact": [np.nan, np.nan, 0.0, np.nan]}
    arm = {"exact_episode": [1, 1, 0, 1], "wrong_family": [0, 0, 1, 0], "stale_fact": [np.nan, np.nan, 1.0, np.nan]}
    rows = []
    for name, vals in (("baseline", base), ("rif", arm)):
        for i in range(4):
            rows.append({"seed": seed, "query_id": f"q{i}", "split": "all", "arm": name, "qtype": "a" if i < 2 else "b",
                         **{m: float(v[i]) for m, v in vals.items()}})
    return pd.DataFrame(rows)


def test_deltas_by_hand():
    d = behaviour_deltas(frame(), "rif", metrics=("exact_episode", "wrong_family", "stale_fact")).set_index(["group", "metric"])
    assert d.loc[("all", "exact_episode"), "delta"] == pytest.approx(0.25)
    assert d.loc[("all", "exact_episode"), ["baseline", "arm"]].tolist() == pytest.approx([0.5, 0.75])
    assert d.loc[("a", "exact_episode"), "delta"] == pytest.approx(0.5) and d.loc[("b", "exact_episode"), "delta"] == 0.0
    assert d.loc[("all", "wrong_family"), "delta"] == pytest.approx(-0.25)
    assert d.loc[("b", "exact_episode"), ["lo", "hi"]].tolist() == [0.0, 0.0]  # no change, no spread
    # stale_fact is defined on one query only (type b); type a keeps an empty row
    assert d.loc[("all", "stale_fact"), "n"] == 1 and d.loc[("all", "stale_fact"), "delta"] == 1.0
    assert d.loc[("a", "stale_fact"), "n"] == 0 and math.isnan(d.loc[("a", "stale_fact"), "delta"])


def test_seeds_and_coverage():
    two = pd.concat([frame(42), frame(43).assign(exact_episode=lambda f: np.where(f["arm"] == "rif", 1.0, f["exact_episode"]))])
    s = seed_spread(two, "rif", metrics=("exact_episode",)).iloc[0]
    assert s["seed 42"] == pytest.approx(0.25) and s["seed 43"] == pytest.approx(0.5)
    assert s["delta_seed_mean"] == pytest.approx(0.375) and s["delta_seed_sd"] == pytest.approx(np.std([0.25, 0.5], ddof=1))
    c = coverage(two).set_index("qtype")  # queries are counted once, whatever the number of seeds
    assert c.loc["a", "queries"] == 2 and c.loc["a", "stale_fact defined"] == 0 and c.loc["b", "stale_fact defined"] == 1


def test_deltas_read_the_seed_mean_per_query():
    # seed 43: the arm also hits q2 exactly, and q2's stale_fact is undefined there (NaN-aware: its mean is seed 42's)
    second = frame(43)
    second.loc[(second["arm"] == "rif") & (second["query_id"] == "q2"), "exact_episode"] = 1.0
    second.loc[second["query_id"] == "q2", "stale_fact"] = np.nan
    two = pd.concat([frame(42), second], ignore_index=True)
    d = behaviour_deltas(two, "rif", metrics=("exact_episode", "stale_fact")).set_index(["group", "metric"])
    first = behaviour_deltas(frame(42), "rif", metrics=("exact_episode",)).set_index(["group", "metric"])
    # per query, arm − baseline averaged over the seeds: q1 +1, q2 +0.5, the others 0; n counts queries, not rows
    assert d.loc[("all", "exact_episode"), "n"] == 4 and d.loc[("all", "exact_episode"), "delta"] == pytest.approx(0.375)
    assert first.loc[("all", "exact_episode"), "delta"] == pytest.approx(0.25)  # the first seed alone reads otherwise
    assert d.loc[("all", "exact_episode"), "arm"] == pytest.approx(0.875)
    assert d.loc[("b", "exact_episode"), "delta"] == pytest.approx(0.25)
    assert d.loc[("all", "stale_fact"), "n"] == 1 and d.loc[("all", "stale_fact"), "delta"] == 1.0


def test_study_of_a_real_run(tmp_path):
    data = DataSpec(dataset="locomo", conversations=1, reranker="test:lexical", progress=False, pipeline=PipelineConfig(encoder="test:hash"))
    summary = RIFExperiment(data, arms=["clustered30-gap"], seeds=2, burn_in=300, map=False).run(tmp_path)
    run = load_run(summary["results_dir"])
    out = behaviour_study(run, "clustered30-gap")
    d = out["deltas"].set_index(["group", "metric"])
    pq, first = run.per_query, run.per_query[run.per_query["seed"] == 42]
    for m in ("exact_episode", "wrong_family", "ndcg@10"):  # every query in both seeds: the seed mean per query is the pooled mean
        means = pq.groupby("arm")[m].mean()
        assert d.loc[("all", m), "delta"] == pytest.approx(means["clustered30-gap"] - means["baseline"])
    assert set(out["deltas"]["group"]) == {"all", *first["qtype"].unique()}
    assert (d.xs("stale_fact", level="metric")["n"] == 0).all()  # LoCoMo has no knowledge-update questions
    assert d.loc[("all", "stale_fact_temporal"), "n"] == len(first) // 2
    assert out["seeds"].set_index("metric").loc["exact_episode", "seeds"] == 2
    with pytest.raises(ValueError, match="not in run"):
        behaviour_study(run, "clustered10-gap")
