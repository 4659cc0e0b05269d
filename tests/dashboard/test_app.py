"""Every dashboard page under streamlit.testing AppTest, on small results produced here."""

import json
import os
import shutil

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from lethe_core.paths import REPO_ROOT

APP = str(REPO_ROOT / "dashboard" / "app.py")
PAGES = ["overview", "clusters", "suppression", "chronic", "behaviour", "inspector", "whatif"]


def app_at(home, page=None):
    os.environ["LETHE_HOME"] = str(home)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    if page and page != "overview":
        at.switch_page(f"pages/{page}.py")
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_without_errors(results_home, page):
    home, _ = results_home
    at = app_at(home, page)
    assert not at.error, [e.value for e in at.error]
    assert at.title and at.title[0].value
    charts = at.get("plotly_chart")
    expected_charts = {"overview": 2, "clusters": 3, "suppression": 2, "chronic": 1, "behaviour": 3, "inspector": 0, "whatif": 1}
    assert len(charts) >= expected_charts[page]


def test_overview_table_lists_every_arm(results_home):
    home, summary = results_home
    at = app_at(home)
    frame = at.dataframe[0].value
    assert list(frame["arm"]) == [a["name"] for a in summary["arms"]]
    assert any("lexical *test* reranker" in w.value for w in at.warning)


def test_cluster_filter_rerenders_other_pages(results_home):
    home, _ = results_home
    at = app_at(home, "clusters")
    at.multiselect(key="cluster_filter").set_value([1]).run()
    at.switch_page("pages/inspector.py").run()
    assert not at.exception
    picker = {s.label: s for s in at.selectbox}
    qids = set(picker["Query (sorted by Δ NDCG@10, worst first)"].options)
    qids = {o.rsplit("(", 1)[-1].rstrip(")") for o in qids}
    pq = pd.read_parquet(next(home.glob("results/rif-*/per_query.parquet")))
    in_cluster = set(pq[(pq["arm"] == picker["RIF arm"].value) & (pq["cluster"] == 1) & (pq["seed"] == 42)]["query_id"])
    assert qids and qids == in_cluster


def test_whatif_replays_on_widget_change(results_home):
    home, _ = results_home
    at = app_at(home, "whatif")
    before = at.metric[1].value
    at.slider[0].set_value(0.0).run()  # alpha = 0: the what-if arm equals the baseline
    assert not at.exception
    assert at.metric[1].value == at.metric[0].value and before is not None


def test_no_results_says_what_to_run(tmp_path):
    at = app_at(tmp_path)
    assert any("lethe-lab rif run" in i.value for i in at.info)


def test_corrupt_results_give_a_clear_message(results_home, tmp_path):
    home, _ = results_home
    bad_home = tmp_path / "bad"
    shutil.copytree(home / "results", bad_home / "results")
    run = next((bad_home / "results").glob("rif-*"))
    (run / "summary.json").write_text("{ not json")
    at = app_at(bad_home)
    assert any("corrupt" in w.value for w in at.warning) or any("corrupt" in e.value for e in at.error)
    assert not at.exception
    # A partial folder (no per-query file) is reported too.
    (run / "summary.json").write_text(json.dumps({"dataset": "x"}))
    os.remove(run / "per_query.parquet")
    st.cache_data.clear()  # the run listing is cached for 30 s in the app
    at = app_at(bad_home)
    assert any("partial" in w.value for w in at.warning)
