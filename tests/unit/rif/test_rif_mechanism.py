"""The update log (lethe_core.rif.mechanism) is the replay itself, and its views count what they say."""

import numpy as np
import pandas as pd
import pytest

from lethe_core.rif import mechanism as mech
from lethe_core.rif.protocols import hot_cold_schedule
from lethe_core.rif.replay import Arm, learn, retrieve
from lethe_core.rif.state import RIFParams, SuppressionState
from tests.unit.rif.test_rif import tiny_context


@pytest.mark.parametrize("rule", ["uniform", "gap"])
def test_update_log_replays_exactly_the_burn_in(rule):
    ctx = tiny_context(seed=3)
    arm = Arm("a", "rif", 2, rule, RIFParams(alpha=0.3, eta=0.2))
    clusters_of = np.array([0, 1, 0, 1, 1, 0])
    schedule, _ = hot_cold_schedule(6, 300, seed=7)
    slow = SuppressionState(2, 40, arm.params)
    for step, i in enumerate(schedule):
        c = int(clusters_of[i])
        learn(ctx.pools, arm, slow, c, step, retrieve(ctx.pools, int(i), arm, slow, c, step, "ce"))
    log, state = mech.update_log(ctx, arm, clusters_of, schedule)
    np.testing.assert_allclose(state.values, slow.values, atol=1e-12)
    assert len(log) == 300 * 30 and set(log.columns) == set(mech.LOG_COLUMNS)
    losers = log[~log["winner"]]
    assert (losers["increment"] >= -1e-12).all() and (log[log["winner"]]["increment"] <= 1e-12).all()
    # increment = alpha * (s_after - s_before), s_after = min(s_before + eta * strength, cap) for losers
    expected = 0.3 * (np.minimum(losers["s_before"] + 0.2 * losers["strength"], 1.0) - losers["s_before"])
    np.testing.assert_allclose(losers["increment"], expected, atol=1e-12)
    strength_col = "strength_gap" if rule == "gap" else "strength_uniform"
    np.testing.assert_allclose(log["strength"], log[strength_col])
    assert (log[log["r_final"] <= log["r_init"]]["strength_gap"] == 0).all()


def test_one_large_penalty_is_a_block():
    ctx = tiny_context(seed=1)
    arm = Arm("a", "rif", 1, "uniform", RIFParams(alpha=1.0, eta=1.0))  # one increment up to 1 >> RRF range (~0.01)
    log, state = mech.update_log(ctx, arm, np.zeros(6, dtype=int), np.array([0]))
    view = mech.block_list_view(log)
    pos = log[(~log["winner"]) & (log["increment"] > 0)]
    assert view["positive_updates"] == len(pos) > 0
    big = pos["increment"] >= pos["rrf_range"]
    assert view["share_increment_ge_range"] == pytest.approx(big.mean()) and big.any()
    p = ctx.pools
    docs, rrf = p.doc_idx[p.rows(0)], p.rrf[p.rows(0)]
    adjusted = rrf - 1.0 * state.values[0, docs]
    rank = np.empty(len(docs), dtype=int)
    rank[np.argsort(-adjusted, kind="stable")] = np.arange(len(docs))
    unpenalised = rank[state.values[0, docs] == 0]
    blocked = rank[np.isin(docs, pos[big]["entry"])]
    assert blocked.min() > unpenalised.max()  # a penalty of at least the range sinks it below every unpenalised member
    where = [int(np.flatnonzero(docs == e)[0]) for e in log["entry"]]
    np.testing.assert_array_equal(log["out_after"], rank[where] >= 30)
    assert view["share_first_out_after"] == pytest.approx(pos["out_after"].mean())  # one step: every update is a first


def test_gap_decomposition_counts_pairs_and_mass():
    log = pd.DataFrame({
        "step": [0, 0, 0, 1], "query": 0, "cluster": [0, 0, 0, 0], "entry": [1, 2, 3, 2],
        "r_init": [0, 15, 20, 5], "r_final": [12, 12, 11, 3], "winner": [False, False, False, True],
        "strength_uniform": [0.5, 0.4, 0.1, 0.0], "strength_gap": [0.2, 0.0, 0.0, 0.0],
        "s_before": 0.0, "s_after": [0.05, 0.04, 0.01, 0.0], "increment": [0.015, 0.012, 0.003, -0.012],
    })
    d = mech.gap_decomposition(log).set_index("class")
    assert d.loc["dropped", "loser_updates"] == 1 and d.loc["held or rose", "loser_updates"] == 2
    assert d.loc["dropped", "share_of_uniform_mass"] == pytest.approx(0.5)
    assert d.loc["held or rose", "gap_mass"] == 0
    # entry 2 ends at 0 (relieved as a winner): suppressed pairs are entry 1 (dropped) and entry 3 (held)
    assert d.loc["dropped", "pairs"] == 1 and d.loc["held or rose", "pairs"] == 1


def test_rrf_ranges():
    r = mech.rrf_ranges(tiny_context())
    assert len(r) == 6 and np.allclose(r["rrf_range"], 1 / 60 - 1 / 94)
