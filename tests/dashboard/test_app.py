"""Every dashboard page under streamlit.testing AppTest, on small results produced here."""

import shutil
import sys

import pandas as pd
import pytest
from dash_support import PAGES, messages

from lethe_core.util.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "dashboard"))
from state import FILTER_KEY, WIDGET_KEY  # noqa: E402


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_without_errors(results_home, app_at, page):
    home, _ = results_home
    at = app_at(home, page)
    assert not at.error, [e.value for e in at.error]
    assert at.title and at.title[0].value
    charts = at.get("plotly_chart")
    expected_charts = {"overview": 2, "clusters": 3, "suppression": 2, "chronic": 1, "behaviour": 3, "inspector": 0, "whatif": 1}
    assert len(charts) >= expected_charts[page]


def test_overview_table_lists_every_arm(results_home, app_at):
    home, summary = results_home
    at = app_at(home)
    frame = at.dataframe[0].value
    assert list(frame["arm"]) == [a["name"] for a in summary["arms"]]
    assert any("lexical *test* reranker" in w.value for w in at.warning)


def _inspector_queries(at) -> tuple[set[str], str]:
    picker = {s.label: s for s in at.selectbox}
    options = picker["Query (sorted by Δ NDCG@10, worst first)"].options
    return {o.rsplit("(", 1)[-1].rstrip(")") for o in options}, picker["RIF arm"].value


def test_cluster_filter_outlives_its_widget(results_home, app_at):
    """Two page visits without the widget: Streamlit has dropped the widget's own state by the second."""
    home, _ = results_home
    at = app_at(home, "clusters")
    at.multiselect(key=WIDGET_KEY).set_value([1]).run()
    at.switch_page("views/suppression.py").run()
    assert any(c.value.startswith("Filtered to clusters 1 ") for c in at.caption)
    at.switch_page("views/inspector.py").run()
    assert not at.exception
    run_id = next(home.glob("results/rif-*")).name
    assert WIDGET_KEY not in at.session_state and at.session_state[FILTER_KEY] == {run_id: [1]}  # kept per run
    assert any(c.value.startswith("Filtered to clusters 1 ") for c in at.caption)
    qids, arm = _inspector_queries(at)
    pq = pd.read_parquet(next(home.glob("results/rif-*/per_query.parquet")))
    in_cluster = set(pq[(pq["arm"] == arm) & (pq["cluster"] == 1) & (pq["seed"] == 42)]["query_id"])
    assert qids and qids == in_cluster
    at.switch_page("views/chronic.py").run()
    assert {s.label: s for s in at.selectbox}["Cluster"].options == ["1"]
    at.switch_page("views/clusters.py").run()  # back on its page, the widget shows the kept pick
    assert at.multiselect(key=WIDGET_KEY).value == [1]
    at.multiselect(key=WIDGET_KEY).set_value([]).run()
    at.switch_page("views/inspector.py").run()
    assert not any(c.value.startswith("Filtered to clusters") for c in at.caption)
    assert _inspector_queries(at)[0] > in_cluster


def test_no_results_says_what_to_run(app_at, tmp_path):
    at = app_at(tmp_path)
    assert any("lethe-lab rif run" in i.value for i in at.info)


def test_broken_folder_beside_a_good_one_is_named_once_in_the_sidebar(results_home, copy_results, app_at):
    home, _ = results_home
    bad_home, run = copy_results()
    shutil.copytree(run, run.with_name("rif-good-copy"))
    (run / "summary.json").write_text("{ not json")
    at = app_at(bad_home, "behaviour")
    assert at.title[0].value == "Behaviour decomposition"  # the good run is shown
    corrupt = [m for m in messages(at) if "corrupt" in m]
    assert len(corrupt) == 1 and corrupt == [w.value for w in at.sidebar.warning if "corrupt" in w.value]
