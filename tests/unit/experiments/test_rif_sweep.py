"""Sweeps and honest selection (lethe_core.experiments.rif_sweep) on the tiny packed pool of test_rif."""

import numpy as np
import pandas as pd
import pytest

from lethe_core.experiments import rif_sweep as rs
from tests.unit.rif.test_rif import tiny_context


def test_reference_sweep_configs_are_the_references():
    arms = rs.config_arms(rs.REFERENCE_SWEEP)
    p = {a.name: a.params for a in arms}
    assert (p["v1"].alpha, p["v1"].eta, p["v1"].decay, p["v1"].cap, p["v1"].reinforce) == (0.3, 0.1, 0.005, 1.0, 0.05)
    assert (p["v3"].alpha, p["v3"].eta, p["v3"].cap, p["v3"].reinforce) == (1.0, 0.3, 2.0, 0.1)
    assert p["v4"].decay == 0.0 and (p["v6"].alpha, p["v6"].cap) == (5.0, 5.0)
    assert all(a.k == 1 and a.rule == "uniform" for a in arms)


def test_cluster_arms_and_feasible_ks():
    names = [a.name for a in rs.cluster_arms([1, 2, 5], ("uniform", "gap"), ("query", "entry"))]
    assert names == ["global-uniform", "clustered2-uniform", "entry2-uniform", "clustered5-uniform", "entry5-uniform",
                     "global-gap", "clustered2-gap", "entry2-gap", "clustered5-gap", "entry5-gap"]
    ctx = tiny_context()  # 6 queries, 3 per conversation
    assert rs.feasible_ks([1, 3, 4, 6, 7], ctx, ["paper"]) == [1, 3, 4, 6]
    assert rs.feasible_ks([1, 3, 4, 6, 7], ctx, ["paper", "heldout"]) == [1, 3]


def test_replay_and_delta_table():
    ctx = tiny_context(seed=2)
    arms = rs.config_arms({"a": {"alpha": 0.0}, "b": {"alpha": 0.3}})
    r = rs.replay(ctx, arms, ("paper", "heldout"), seeds=(1, 2), burn_in=100)
    assert set(r.rows["arm"]) == {"baseline", "a", "b"} and len(r.rows) == 2 * 2 * 3 * 6
    t = rs.delta_table(r.rows, n_resamples=200)
    a = t[(t["arm"] == "a")]
    assert np.allclose(a["delta"], 0) and (a["n_queries"] == 6).all() and (a["n_seeds"] == 2).all()  # alpha 0 = baseline
    b = t[(t["protocol"] == "paper") & (t["arm"] == "b")].iloc[0]
    rows = r.rows[r.rows["protocol"] == "paper"]
    w = rows.pivot_table(index=["seed", "query_id"], columns="arm", values="ndcg@10")
    assert b["delta"] == pytest.approx((w["b"] - w["baseline"]).mean())
    per_seed = (w["b"] - w["baseline"]).groupby("seed").mean()
    assert b["seed_sd"] == pytest.approx(per_seed.std(ddof=1))
    assert set(r.suppressed["split"]) == {"all", "A->B", "B->A"}
    c = rs.paired_contrast(r.rows, "b", "a", "paper", n_resamples=200)
    assert c["delta"] == pytest.approx(b["delta"])


def _fake_heldout(deltas: dict) -> pd.DataFrame:
    """Held-out rows where config -> {split: delta per query} and the baseline scores 0.5."""
    rows = []
    for split, qs in (("A->B", ["b1", "b2"]), ("B->A", ["a1", "a2"])):
        for q in qs:
            rows.append({"protocol": "heldout", "seed": 42, "split": split, "arm": "baseline", "query_id": q, "ndcg@10": 0.5})
            for cfg, by_split in deltas.items():
                rows.append({"protocol": "heldout", "seed": 42, "split": split, "arm": cfg, "query_id": q, "ndcg@10": 0.5 + by_split[split]})
    return pd.DataFrame(rows)


def test_selection_never_reads_the_evaluated_side():
    # x is best on side B (A->B) only, y best on side A (B->A) only: each side is scored with the other's winner.
    rows = _fake_heldout({"x": {"A->B": 0.2, "B->A": -0.1}, "y": {"A->B": -0.3, "B->A": 0.1}})
    sel = rs.select_and_evaluate(rows, ["x", "y"], n_resamples=100)
    sides = sel["sides"].set_index("chosen")
    assert sides.loc["x", "evaluated_delta"] == pytest.approx(-0.1) and sides.loc["y", "evaluated_delta"] == pytest.approx(-0.3)
    assert sel["honest"]["delta"] == pytest.approx(-0.2)
    assert sel["tuned_on_eval"]["chosen"] == "x" and sel["tuned_on_eval"]["delta"] == pytest.approx(0.05)


def test_one_parameter_sweep():
    ctx = tiny_context(seed=4)
    t = rs.one_parameter_sweep(ctx, "alpha", [0.0, 0.3], rule="gap", k=1, seeds=(1,), burn_in=100, n_resamples=100)
    assert list(t["alpha"]) == ["0", "0.3"] and t.loc[0, "delta"] == pytest.approx(0.0)
    k = rs.one_parameter_sweep(ctx, "k", [1, 2, 50], rule="gap", seeds=(1,), burn_in=100, n_resamples=100)
    assert list(k["k"]) == ["1", "2"]  # 50 clusters cannot be fit on 6 queries
    with pytest.raises(ValueError):
        rs.one_parameter_sweep(ctx, "nope", [1.0])
