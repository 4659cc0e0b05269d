"""The inspector's final ranks agree with the top-10 the replay scored, for every kind of arm (issue #23, item 3).

`control` reranks the whole RRF union, not a 30-entry pool; the inspector used to rank only the top-P for every arm,
so its "final rank" contradicted the control top-10 printed below it. per_query.parquet's `top10` (corpus positions
in answer order, per arm) is the ground truth.
"""

import numpy as np
import pandas as pd
import pytest

from dash_support import messages

from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.results import analysis
from lethe_core.results.analysis import arm_kinds, candidate_table, first_seed, rif_arms, seed_rows, suppression_states
from lethe_core.results.runs import list_runs, replay_context
from lethe_core.retrieval.pipeline import PipelineConfig


@pytest.fixture(scope="module")
def loaded(results_home):
    home, _ = results_home
    mp = pytest.MonkeyPatch()
    mp.setenv("LETHE_HOME", str(home))
    try:
        runs, problems = list_runs(home / "results")
        assert runs and not problems, problems
        run = runs[0]
        ctx = replay_context(run)
    finally:
        mp.undo()
    return run, ctx


def _disagreements(table: pd.DataFrame, top10: list[str]) -> list[str]:
    ranks = table.set_index("doc_id")["final rank"]
    out = [f"{d}: top-10 position {i + 1}, final rank {ranks.get(d)}" for i, d in enumerate(top10)
           if pd.isna(ranks.get(d)) or ranks.get(d) != i + 1]
    out += [f"{d}: not in the top-10, final rank {r}" for d, r in ranks.items() if d not in top10 and not (pd.isna(r) or r > 10)]
    return out


def test_arm_kinds_and_rif_arms(loaded):
    run, _ = loaded
    kinds = arm_kinds(run)
    assert kinds["baseline"] == "baseline" and kinds["control"] == "control"
    assert rif_arms(run) == [a for a in run.arms if a not in ("baseline", "control")] and rif_arms(run)


@pytest.mark.parametrize("arm", ["control", "baseline", "clustered10-gap", "global-uniform"])
def test_final_rank_matches_the_recorded_top10(loaded, arm):
    run, ctx = loaded
    assert arm in run.arms
    ids = ctx.dataset.corpus.ids
    rows = first_seed(run)
    rows = rows[rows["arm"] == arm]
    assert len(rows) > 100
    bad, shape = {}, []
    for qid, top in zip(rows["query_id"], rows["top10"]):
        table = candidate_table(ctx, run, arm, qid)
        wrong = _disagreements(table, [ids[int(d)] for d in top])
        if wrong:
            bad[qid] = wrong
        if arm == "control":  # the whole union is reranked: every member has a rank, none is cut
            ok = table["in pool"].all() and sorted(table["final rank"]) == list(range(1, len(table) + 1))
        else:
            ok = (table["in pool"].sum() == min(len(table), run.config["pipeline"]["pool_size"])
                  and (table["final rank"].notna() == table["in pool"]).all())
        if not ok:
            shape.append(qid)
    assert not bad, f"{len(bad)} of {len(rows)} queries disagree with top10, e.g. {next(iter(bad.items()))}"
    assert not shape, f"ranked members do not match the reranker's pool in {len(shape)} queries, e.g. {shape[0]}"


def test_control_really_differs_from_the_pool_cut(loaded):
    """Guards the test above: in this run control's answer reaches below the pool cut for some query."""
    run, ctx = loaded
    pool = run.config["pipeline"]["pool_size"]
    rows = first_seed(run)
    below = 0
    for qid in rows.loc[rows["arm"] == "control", "query_id"]:
        t = candidate_table(ctx, run, "control", qid)
        below += bool(((t["adjusted rank"] > pool) & (t["final rank"] <= 10)).any())
    assert below > 0


def test_inspector_page_offers_rif_arms_only_and_control_as_control(results_home, app_at):
    home, _ = results_home
    at = app_at(home, "inspector")
    run = list_runs(home / "results")[0][0]
    picker = {s.label: s for s in at.selectbox}
    assert picker["RIF arm"].options == rif_arms(run)
    assert "control" not in picker["RIF arm"].options and "baseline" not in picker["RIF arm"].options
    radio = {r.label: r for r in at.radio}["Compare the baseline with"]
    assert radio.options[0] == "RIF arm" and any(o.startswith("control (") and "no RIF" in o for o in radio.options)
    radio.set_value("control").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "RIF arm" not in {s.label for s in at.selectbox}
    table = at.dataframe[0].value
    # The right column prints control's top-10 as "✅ **1.** `doc_id` text": the table must agree with it.
    shown = [m.value.split("`")[1] for m in at.markdown if "**" in m.value and "`" in m.value and m.value[:1] in "✅▫"]
    assert len(shown) == 20  # baseline's ten, then control's ten
    assert _disagreements(table, shown[10:]) == []
    assert table["final rank"].notna().all()


def test_inspector_page_without_a_control_arm(app_at, tmp_path, monkeypatch):
    """A real run without `control`: no arm-kind radio, the RIF arm picker alone, ranks still agree with top10."""
    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    RIFExperiment(DataSpec(dataset="synthetic:2000", reranker="test:lexical", pipeline=PipelineConfig(encoder="test:hash"),
                           progress=False), arms=["clustered10-gap"], seeds=1, burn_in=500, map=False).run()
    at = app_at(tmp_path, "inspector")
    assert not [m for m in messages(at) if "test* reranker" not in m], messages(at)
    assert not at.radio
    assert {s.label: s for s in at.selectbox}["RIF arm"].options == ["clustered10-gap"]
    shown = [m.value.split("`")[1] for m in at.markdown if "**" in m.value and "`" in m.value and m.value[:1] in "✅▫"]
    assert _disagreements(at.dataframe[0].value, shown[len(shown) // 2:]) == []


@pytest.mark.parametrize("arm", ["clustered10-gap", "global-uniform"])
def test_another_seeds_replayed_suppression_gives_its_recorded_top10(loaded, arm):
    """Snapshots hold the paper seed only; the inspector replays another seed's burn-in, which must land on what that seed scored."""
    run, ctx = loaded
    seed = run.summary["seeds"][1]
    states = suppression_states(ctx, run, arm, seed)
    ids = ctx.dataset.corpus.ids
    rows = seed_rows(run, seed)
    rows = rows[rows["arm"] == arm]
    bad = [qid for qid, top in zip(rows["query_id"], rows["top10"])
           if _disagreements(candidate_table(ctx, run, arm, qid, seed, states), [ids[int(d)] for d in top])]
    assert not bad, f"{len(bad)} of {len(rows)} queries of seed {seed} disagree with its top10, e.g. {bad[0]}"
    assert not np.array_equal(states["all"], suppression_states(ctx, run, arm)["all"])  # not the paper seed's state read again


def test_replaying_the_paper_seed_reproduces_its_snapshots(loaded, monkeypatch):
    run, ctx = loaded
    recorded = suppression_states(ctx, run, "clustered30-gap")
    monkeypatch.setattr(analysis, "paper_seed", lambda run: -1)  # no seed is "recorded": every state is replayed
    replayed = suppression_states(ctx, run, "clustered30-gap", run.summary["seeds"][0])
    assert recorded.keys() == replayed.keys() == {"all"}
    k = recorded["all"].shape[0]
    assert recorded["all"].any() and np.array_equal(recorded["all"], replayed["all"][:k]) and not replayed["all"][k:].any()
