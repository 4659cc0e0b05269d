"""The dashboard's frame under AppTest: the run picker and its URL, the seed selector, the per-run cluster filter, the
overview's verdict and the what-if page's Run button, history and replay gate."""

import os
import shutil
import sys

import pandas as pd
import pytest
import streamlit as st
from dash_support import APP
from streamlit.testing.v1 import AppTest

from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.results.catalog import verdict
from lethe_core.results.runs import load_run
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.util.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "dashboard"))
import state  # noqa: E402
from state import FILTER_KEY, GROUP_WIDGET, RUN_KEY, RUN_WIDGET, SEED_KEY, SEED_WIDGET, WIDGET_KEY  # noqa: E402


def open_app(home, monkeypatch, page: str | None = None, **params) -> AppTest:
    """The app over `home`, opened at a URL with `params` (`?run=...&seed=...`), optionally switched to a page."""
    monkeypatch.setenv("LETHE_HOME", str(home))
    st.cache_data.clear()  # the run listing is cached for 30 s
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(params)
    at.run()
    if page:
        at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def add_run(home, name: str, age_s: float = 0.0) -> str:
    """A copy of the home's first run under another folder name, finished `age_s` seconds before that run."""
    run = sorted((home / "results").glob("rif-*"))[0]
    target = run.with_name(name)
    shutil.copytree(run, target)
    when = os.path.getmtime(run / "summary.json") - age_s
    os.utime(target / "summary.json", (when, when))
    return name


@pytest.fixture
def two_runs(results_home, tmp_path):
    """A copy of the dashboard home (results and caches, which the analysis pages read) with two paper runs: the
    fixture's (newest, the default) and an older copy."""
    home, summary = results_home
    shutil.copytree(home, tmp_path / "two")
    return tmp_path / "two", summary["run_id"], add_run(tmp_path / "two", "rif-locomo-paper-test_lexical-older", age_s=3600)


@pytest.fixture(scope="module")
def heldout_home(results_home, tmp_path_factory):
    """A copy of the dashboard home (results and caches) plus a held-out run of the same small data."""
    home, _ = results_home
    target = tmp_path_factory.mktemp("heldout_home")
    shutil.copytree(home, target, dirs_exist_ok=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("LETHE_HOME", str(target))
    try:
        data = DataSpec(dataset="locomo", conversations=2, reranker="test:lexical", pipeline=PipelineConfig(encoder="test:hash"),
                        progress=False)
        summary = RIFExperiment(data, protocol="heldout", seeds=1, ks=(10,), burn_in=500, map=False).run()
    finally:
        mp.undo()
    return target, summary["run_id"]


def texts(elements) -> list[str]:
    return [e.value for e in elements]


def drawn(node) -> list[str]:
    """The element types under `node` in page order (columns and expanders opened)."""
    out = []
    for child in getattr(node, "children", {}).values():
        out += [child.type] if not getattr(child, "children", None) else drawn(child)
    return out


def test_a_deep_link_opens_its_run_and_seed_and_the_url_keeps_them(two_runs, monkeypatch):
    home, newest, older = two_runs
    at = open_app(home, monkeypatch)
    assert at.session_state[RUN_KEY] == newest and at.query_params["run"] == newest  # no link: the newest paper run
    at = open_app(home, monkeypatch, run=older, seed="43")
    assert at.session_state[RUN_KEY] == older and at.selectbox(key=RUN_WIDGET).value == older
    assert at.selectbox(key=SEED_WIDGET).value == 43 and at.session_state[SEED_KEY] == 43
    assert at.query_params["run"] == older and at.query_params["seed"] == "43"
    assert any(f"`{older}`" in c for c in texts(at.caption))
    at.switch_page("views/whatif.py").run()  # another page: the run and seed stay, and stay in the URL
    assert at.session_state[RUN_KEY] == older and at.query_params["run"] == older and at.query_params["seed"] == "43"


def test_a_link_to_a_missing_run_says_so_and_shows_the_default(two_runs, monkeypatch):
    home, newest, _ = two_runs
    at = open_app(home, monkeypatch, run="rif-gone")
    assert at.session_state[RUN_KEY] == newest
    assert any("`rif-gone` is not among these results" in w for w in texts(at.sidebar.warning))


def test_a_new_run_on_disk_never_replaces_the_selection(two_runs, monkeypatch):
    home, _, older = two_runs
    at = open_app(home, monkeypatch, run=older)
    assert not at.sidebar.info
    newer = add_run(home, "rif-locomo-paper-test_lexical-newer", age_s=-3600)  # written by another command, now
    st.cache_data.clear()
    at.run()
    assert at.session_state[RUN_KEY] == older and at.query_params["run"] == older
    notice = texts(at.sidebar.info)
    assert len(notice) == 1 and notice[0].startswith("New run on disk since this page opened") and "Still showing" in notice[0]
    at.selectbox(key=RUN_WIDGET).set_value(newer).run()  # picked: shown, and no longer news
    assert at.session_state[RUN_KEY] == newer and at.query_params["run"] == newer and not at.sidebar.info


def test_the_seed_selector_feeds_current_seed_and_the_url(results_home, monkeypatch):
    home, summary = results_home
    at = open_app(home, monkeypatch)
    first, second = summary["seeds"][:2]
    assert at.selectbox(key=SEED_WIDGET).value == first and at.query_params["seed"] == str(first)
    at.selectbox(key=SEED_WIDGET).set_value(second).run()
    assert at.session_state[SEED_KEY] == second and at.query_params["seed"] == str(second)
    assert any(f"the per-query pages show seed {second}" in c for c in texts(at.caption))
    assert any(f"seed **{second}** of" in c for c in texts(at.caption))


def test_the_cluster_filter_belongs_to_its_run(two_runs, monkeypatch):
    home, newest, older = two_runs
    at = open_app(home, monkeypatch, "clusters", run=newest)
    at.multiselect(key=WIDGET_KEY).set_value([1]).run()
    assert at.session_state[FILTER_KEY] == {newest: [1]}
    at.selectbox(key=RUN_WIDGET).set_value(older).run()  # same page, other run: its own (empty) filter
    assert at.multiselect(key=WIDGET_KEY).value == []
    at.switch_page("views/suppression.py").run()
    assert not any(c.startswith("Filtered to clusters") for c in texts(at.caption))
    at.selectbox(key=RUN_WIDGET).set_value(newest).run()  # back: the pick made on it is still there
    assert any(c.startswith("Filtered to clusters 1 ") for c in texts(at.caption))
    assert at.session_state[FILTER_KEY] == {newest: [1]}


def test_changing_the_run_drops_the_pages_url_keys_and_only_then(two_runs, monkeypatch):
    home, newest, older = two_runs
    at = open_app(home, monkeypatch, run=newest, cluster="3", query="conv-26:q1")
    assert at.query_params["cluster"] == "3" and at.query_params["query"] == "conv-26:q1"
    at.selectbox(key=RUN_WIDGET).set_value(older).run()
    assert "cluster" not in at.query_params and "query" not in at.query_params and at.query_params["run"] == older


def test_the_overview_states_the_runs_verdict_under_its_forest_plots(results_home, monkeypatch):
    home, summary = results_home
    at = open_app(home, monkeypatch)
    expected = verdict(load_run(home / "results" / summary["run_id"]))
    boxes = {"win": at.success, "loss": at.error, "none": at.info}[expected.tone]
    assert expected.sentence in texts(boxes)
    kinds = drawn(at.main)  # the forest plots come first, the verdict next, then the table
    assert kinds.index("plotly_chart") < kinds.index({"win": "success", "loss": "error", "none": "info"}[expected.tone]) \
        < kinds.index("dataframe")
    assert len(at.get("download_button")) >= 1


def test_a_heldout_run_is_labelled_as_one(heldout_home, results_home, monkeypatch):
    home, run_id = heldout_home
    at = open_app(home, monkeypatch, run=run_id)
    assert at.selectbox(key=GROUP_WIDGET).value == "locomo · held-out"
    assert at.selectbox(key=GROUP_WIDGET).options == ["locomo · paper (1 run)", "locomo · held-out (1 run)"]
    assert any(c.startswith("Held-out run: each direction (A->B, B->A) fits its own clusters") for c in texts(at.caption))
    assert "held-out protocol" in verdict(load_run(home / "results" / run_id)).sentence
    assert any(c.startswith("held-out protocol: each query evaluated once") for c in texts(at.caption))
    at.switch_page("views/whatif.py").run()
    assert at.radio(key=f"protocol-{run_id}").value == "heldout"  # the run's protocol, not the paper's
    at.selectbox(key=GROUP_WIDGET).set_value("locomo · paper").run()  # another group: its newest run
    assert at.session_state[RUN_KEY] == results_home[1]["run_id"] and at.query_params["run"] == results_home[1]["run_id"]


def _run_button(at):
    return next(b for b in at.button if b.label == "Run replay")


def test_whatif_replays_only_on_run_and_keeps_a_history(results_home, monkeypatch):
    home, summary = results_home
    run_id = summary["run_id"]
    at = open_app(home, monkeypatch, "whatif")
    assert not at.metric and any(i.startswith("Recorded on this run") for i in texts(at.info))
    _run_button(at).click().run()
    assert not at.exception, [e.value for e in at.exception]
    pq = pd.read_parquet(home / "results" / run_id / "per_query.parquet")
    pq = pq[pq["seed"] == summary["seeds"][0]]
    arm = state.default_arm(load_run(home / "results" / run_id))
    recorded = pq[pq["arm"] == arm]["ndcg@10"].mean() - pq[pq["arm"] == "baseline"]["ndcg@10"].mean()
    history = at.dataframe[-1].value
    assert len(history) == 1 and history["Δ NDCG@10"].iloc[0] == pytest.approx(recorded, abs=1e-12)  # the defaults replay the arm
    at.slider(key=f"alpha-{run_id}").set_value(0.0).run()  # a knob moved without Run: no replay
    assert len(at.dataframe[-1].value) == 1
    at.slider(key=f"alpha-{run_id}").set_value(0.0)  # a form sends its values with the Run press
    _run_button(at).click().run()
    history = at.dataframe[-1].value
    assert len(history) == 2 and history["alpha"].iloc[0] == 0.0 and history["Δ NDCG@10"].iloc[0] == 0.0  # newest first
    assert at.metric[1].value == at.metric[0].value
    assert len(at.get("download_button")) == 1


def test_a_busy_replay_gate_makes_a_session_wait_then_give_up(results_home, monkeypatch):
    home, _ = results_home
    at = open_app(home, monkeypatch, "whatif")
    monkeypatch.setattr(state, "REPLAY_WAIT_S", 0.2)
    gate = state._replay_gate()  # one per server: the test holds it as another session's replay would
    assert gate.acquire(blocking=False)
    try:
        _run_button(at).click().run()
    finally:
        gate.release()
    assert any(w.startswith("Still busy after") for w in texts(at.warning)) and not at.metric
    _run_button(at).click().run()  # free again
    assert at.metric and not any(w.startswith("Still busy") for w in texts(at.warning))
