"""Run labels, grouping and the verdict (lethe_core.results.catalog) on hand-made summaries: what the dashboard's run
picker, overview and leaderboard say, pinned without Streamlit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from lethe_core.measures import stats
from lethe_core.rerankers.recipes import fold_teacher
from lethe_core.results import catalog
from lethe_core.results.runs import Run

IDENTITY = "cross-encoder/ms-marco-MiniLM-L-6-v2|torch|0123456789abcdef"


def arm(name: str, kind: str = "rif", delta=(0.0, -0.01, 0.01), p_holm: float | None = 0.5, control=None, p_control=None) -> dict:
    """One summary arm: Δ NDCG (mean, lo, hi) vs the baseline with its Holm p; Δ vs control (mean, lo, hi) and its raw p."""
    a = {"name": name, "kind": kind, "k": 30, "rule": "gap", "delta_ndcg": {"mean": delta[0], "ci": [delta[1], delta[2]]},
         "p_holm": p_holm}
    if control is not None:
        a["delta_vs_control"], a["p_vs_control"] = {"mean": control[0], "ci": [control[1], control[2]]}, p_control
    return a


def make_run(tmp_path: Path, run_id: str, arms: list[dict], *, dataset="locomo", protocol="paper", mtime: float = 1.7e9,
             config: dict | None = None, **summary) -> Run:
    path = tmp_path / run_id
    path.mkdir(parents=True)
    s = {"dataset": dataset, "protocol": protocol, "reranker": "cross-encoder/ms-marco-MiniLM-L-6-v2", "reranker_identity": IDENTITY,
         "seeds": [42, 43, 44], "n_queries": 1986, "calibrated": False,
         "arms": [{"name": "baseline", "kind": "baseline", "delta_ndcg": {"mean": 0.0, "ci": [0.0, 0.0]}, "p_holm": None}, *arms],
         **summary}
    (path / "summary.json").write_text(json.dumps(s))
    os.utime(path / "summary.json", (mtime, mtime))
    return Run(path, {"dataset": dataset, "protocol": protocol, "burn_in": 5000, "alpha": 0.3, **(config or {})}, s)


CONTROL = arm("control", "control", (0.01, 0.005, 0.015), 0.001)


def test_teacher_names_the_reranker_and_a_short_identity():
    assert catalog.short_identity(IDENTITY, "cross-encoder/ms-marco-MiniLM-L-6-v2") == "torch 0123456"
    assert catalog.short_identity("test:lexical|v1", "test:lexical") == "v1"
    assert catalog.short_identity(None) == ""
    assert catalog.teacher({"reranker": "cross-encoder/ms-marco-MiniLM-L-6-v2", "reranker_identity": IDENTITY}) == \
        "ms-marco-MiniLM-L-6-v2 (torch 0123456)"


def test_label_carries_dataset_protocol_teacher_reading_seeds_and_date(tmp_path):
    old = make_run(tmp_path, "rif-old", [], calibrated=True)  # written before `logit_reading`: the boolean decides
    new = make_run(tmp_path, "rif-new", [], dataset="realtalk", protocol="heldout", logit_reading="raw", seeds=[42])
    by_id = {e.run_id: e for e in catalog.catalog([old, new])}
    assert by_id["rif-old"].label.startswith("locomo · paper · ms-marco-MiniLM-L-6-v2 (torch 0123456) · calibrated logits · "
                                             "seeds 42–44 · ")
    assert by_id["rif-new"].group == "realtalk · held-out" and "raw logits · seed 42 · " in by_id["rif-new"].label
    assert by_id["rif-old"].finished.timestamp() == pytest.approx(1.7e9)


def test_catalog_sorts_by_dataset_then_protocol_then_newest(tmp_path):
    runs = [make_run(tmp_path, "a", [], dataset="realtalk", mtime=5e8), make_run(tmp_path, "b", [], protocol="heldout", mtime=9e8),
            make_run(tmp_path, "c", [], mtime=1e8), make_run(tmp_path, "d", [], mtime=7e8), make_run(tmp_path, "e", [], protocol="prequential")]
    assert [e.run_id for e in catalog.catalog(runs)] == ["d", "c", "b", "e", "a"]
    assert catalog.default_entry(catalog.catalog(runs)).run_id == "d"  # the newest paper run, whatever its dataset
    assert catalog.default_entry([]) is None


def test_the_default_run_is_locomos_fold_teacher_paper_run_when_there_is_one(tmp_path):
    """After `make matrix` the newest paper runs are other teachers' (and REALTALK's): the dashboard still opens on
    the run RESULTS.md and the notebooks are about."""
    fold = f"trained:{fold_teacher('locomo')}"
    runs = [make_run(tmp_path, "fold", [], reranker=fold, logit_reading="raw", mtime=1e8),
            make_run(tmp_path, "fold-cal", [], reranker=fold, logit_reading="calibrated", calibrated=True, mtime=8e8),
            make_run(tmp_path, "fold-heldout", [], protocol="heldout", reranker=fold, logit_reading="raw", mtime=8e8),
            make_run(tmp_path, "cross", [], reranker="trained:realtalk-all", logit_reading="raw", mtime=9e8),
            make_run(tmp_path, "realtalk", [], dataset="realtalk", reranker="trained:realtalk-2fold", logit_reading="raw", mtime=9.5e8)]
    assert catalog.default_entry(catalog.catalog(runs)).run_id == "fold"
    assert catalog.default_entry(catalog.catalog(runs[1:])).run_id == "realtalk"  # none: the newest paper run, whatever its dataset


def test_runs_of_one_group_are_told_apart_by_what_differs_in_their_config(tmp_path):
    a = make_run(tmp_path, "a", [], config={"burn_in": 3000, "pipeline": {"pool_size": 30}, "write_id": "x"})
    b = make_run(tmp_path, "b", [], config={"burn_in": 5000, "pipeline": {"pool_size": 50}, "write_id": "y"})
    alone = make_run(tmp_path, "c", [], protocol="heldout", config={"burn_in": 1})
    by_id = {e.run_id: e for e in catalog.catalog([a, b, alone])}
    assert by_id["a"].differs == "burn_in 3000, pipeline.pool_size 30" and by_id["b"].differs == "burn_in 5000, pipeline.pool_size 50"
    assert by_id["a"].short_label.endswith(" · burn_in 3000, pipeline.pool_size 30")
    assert by_id["c"].differs == ""  # alone in its group: nothing to tell apart


def test_a_winner_beats_baseline_and_control_after_holm(tmp_path):
    run = make_run(tmp_path, "r", [CONTROL, arm("clustered30-gap", delta=(0.03, 0.02, 0.04), p_holm=0.001,
                                                 control=(0.02, 0.01, 0.03), p_control=0.002),
                                   arm("global-gap", delta=(0.01, -0.001, 0.02), p_holm=0.2, control=(0.0, -0.01, 0.01), p_control=0.9)])
    v = catalog.verdict(run)
    assert v.tone == "win" and v.arm == "clustered30-gap"
    assert v.sentence.startswith("RIF helps here: clustered30-gap beats the baseline (+0.0300 NDCG@10 [+0.0200, +0.0400], "
                                 "Holm p = 0.0010) and the control")
    assert "Seed 42, 1,986 queries, paper protocol" in v.sentence


def test_holm_against_the_control_is_over_the_rif_arms(tmp_path):
    """Raw p vs control 0.03 and 0.04 over two RIF arms: each alone is below 0.05, neither after Holm, so no win."""
    run = make_run(tmp_path, "r", [CONTROL, arm("a", delta=(0.03, 0.02, 0.04), p_holm=0.001, control=(0.01, 0.001, 0.02), p_control=0.03),
                                   arm("b", delta=(0.02, 0.01, 0.03), p_holm=0.001, control=(0.005, 0.001, 0.01), p_control=0.04)])
    table = catalog.significance(run).set_index("arm")
    expected = stats.adjust(np.array([0.03, 0.04]), "holm")
    assert table.loc[["a", "b"], "p vs control (Holm)"].tolist() == pytest.approx(expected.tolist())
    assert np.isnan(table.loc["control", "p vs control (Holm)"])  # the control is not compared with itself
    v = catalog.verdict(run)
    assert v.tone == "none" and v.arm == "a"
    assert "beats the baseline" in v.sentence and "but not the control" in v.sentence
    assert "a larger reranker pool does as well without RIF" in v.sentence


def test_an_unadjusted_ci_above_zero_is_not_green(tmp_path):
    """The issue's held-out case: CI above zero, Holm p = 0.29, not better than the control."""
    run = make_run(tmp_path, "r", [CONTROL, arm("clustered30-gap", delta=(0.005, 0.0004, 0.01), p_holm=0.29, control=(-0.001, -0.006, 0.004),
                                                 p_control=0.7)], protocol="heldout")
    table = catalog.significance(run)
    assert table.set_index("arm").loc["clustered30-gap", "vs baseline"] == "unclear"
    v = catalog.verdict(run)
    assert v.tone == "none" and v.sentence.startswith("No RIF arm beats the baseline after Holm correction: the best, clustered30-gap")
    assert "held-out protocol" in v.sentence


def test_a_significantly_worse_best_arm_is_a_loss(tmp_path):
    run = make_run(tmp_path, "r", [CONTROL, arm("clustered30-gap", delta=(-0.02, -0.03, -0.01), p_holm=0.001, control=(-0.03, -0.04, -0.02),
                                                 p_control=0.001)])
    v = catalog.verdict(run)
    assert v.tone == "loss" and "worse than the baseline" in v.sentence
    assert catalog.significance(run).set_index("arm").loc["clustered30-gap", "vs control"] == "worse"


def test_without_a_control_arm_a_better_arm_is_not_a_win(tmp_path):
    run = make_run(tmp_path, "r", [arm("clustered30-gap", delta=(0.03, 0.02, 0.04), p_holm=0.001)])
    v = catalog.verdict(run)
    assert v.tone == "none" and "no control arm" in v.sentence


def test_a_run_without_rif_arms_has_nothing_to_judge(tmp_path):
    v = catalog.verdict(make_run(tmp_path, "r", [CONTROL]))
    assert v.tone == "none" and v.arm is None and "no RIF arm" in v.sentence


def test_leaderboard_has_one_row_per_run_in_catalog_order(tmp_path):
    win = make_run(tmp_path, "win", [CONTROL, arm("c30", delta=(0.03, 0.02, 0.04), p_holm=0.001, control=(0.02, 0.01, 0.03), p_control=0.002)],
                   mtime=2e9)
    flat = make_run(tmp_path, "flat", [CONTROL, arm("c10", delta=(0.001, -0.01, 0.01), p_holm=0.9, control=(0.0, -0.01, 0.01), p_control=0.9)],
                    protocol="heldout")
    board = catalog.leaderboard([flat, win])
    assert board["run"].tolist() == ["win", "flat"]
    assert board["best RIF arm"].tolist() == ["c30", "c10"] and board["verdict"].tolist() == ["win", "none"]
    assert board["Δ NDCG"].tolist() == pytest.approx([0.03, 0.001]) and board["protocol"].tolist() == ["paper", "held-out"]
