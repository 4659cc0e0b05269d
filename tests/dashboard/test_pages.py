"""The analysis pages' interactions under AppTest (issue #23): the chronic page's harm table selects a cluster on click,
a URL reopens the same cluster and query, the inspector states why a query lost, every page reads the picked seed and
offers its tables as CSV."""

import json

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dash_support import APP
from test_inspector_ranks import _disagreements

from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.results import analysis
from lethe_core.results.runs import list_runs, replay_context
from lethe_core.retrieval.pipeline import PipelineConfig

ARM = "clustered30-gap"  # the pages' default arm in the fixture's run


@pytest.fixture(scope="module")
def loaded(results_home):
    home, _ = results_home
    mp = pytest.MonkeyPatch()
    mp.setenv("LETHE_HOME", str(home))
    try:
        run = list_runs(home / "results")[0][0]
        ctx = replay_context(run)
    finally:
        mp.undo()
    return home, run, ctx


@pytest.fixture
def open_page(monkeypatch):
    """The app on one page, opened from a URL carrying `params` (as a shared link would); fails on any uncaught exception."""

    def run(home, page: str, **params) -> AppTest:
        monkeypatch.setenv("LETHE_HOME", str(home))
        st.cache_data.clear()
        at = AppTest.from_file(APP, default_timeout=120)
        for key, value in params.items():
            at.query_params[key] = str(value)
        at.run()
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return run


def _picked(at: AppTest, label: str):
    return {s.label: s for s in at.selectbox}[label].value


def _explanation(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith(":material/lightbulb:"))


def test_harm_table_ranks_clusters_and_a_row_click_opens_one(loaded, open_page):
    home, run, ctx = loaded
    at = open_page(home, "chronic")
    harm = at.dataframe[0].value
    queries, rejections = analysis.pool_audit(ctx, run, ARM)
    expected = analysis.harm_ranking(queries, rejections)
    assert harm["cluster"].tolist() == expected["cluster"].tolist()
    assert harm["harm"].tolist() == sorted(harm["harm"], reverse=True) and harm["harm"].iloc[0] > 0
    assert harm["rejected for"].iloc[0] == f"{expected['rejected for'].iloc[0]} of {expected['queries'].iloc[0]}"
    assert _picked(at, "Cluster") == str(harm["cluster"].iloc[0])  # the most harmed cluster is open before any click
    want = str(harm["cluster"].iloc[2])
    at.session_state[f"chronic_harm_{ARM}"] = {"selection": {"rows": [2], "columns": [], "cells": []}}
    at.run()
    assert not at.exception
    assert _picked(at, "Cluster") == want and at.query_params["cluster"] == want
    assert any(h.value.startswith(f"Cluster {want}: ") for h in at.subheader)
    entries = at.dataframe[1].value
    mine = analysis.chronic_entries(queries, rejections, "all", int(want))
    assert entries["doc_id"].tolist() == mine["doc_id"].tolist()
    assert entries["rejected for"].iloc[0] == f"{mine['rejected'].iloc[0]} of {mine['of'].iloc[0]}"


def test_an_entrys_queries_link_to_the_inspector(loaded, open_page):
    home, run, _ = loaded
    at = open_page(home, "chronic")
    entry = _picked(at, "Entry")
    links = [p.proto for p in at.get("page_link")]
    assert links and {p.page for p in links} == {"inspector"}
    params = [dict(pair.split("=", 1) for pair in p.query_string.split("&")) for p in links]
    assert all(p["run"] == run.run_id and p["seed"] == str(run.summary["seeds"][0]) for p in params)
    linked = [p["query"].replace("%3A", ":") for p in params]
    assert entry and len(linked) == len(set(linked)) and all(f"({q})" in p.label for q, p in zip(linked, links))


def test_a_link_reopens_the_same_cluster_and_query(loaded, open_page):
    home, run, ctx = loaded
    cluster = str(analysis.harm_ranking(*analysis.pool_audit(ctx, run, ARM))["cluster"].iloc[-1])  # not the default
    deltas = analysis.query_deltas(run, ARM)
    qid = deltas["query_id"].iloc[len(deltas) // 2]  # not the default (the worst) either
    at = open_page(home, "chronic", cluster=cluster, query=qid)
    assert _picked(at, "Cluster") == cluster
    at = open_page(home, "inspector", cluster=cluster, query=qid)
    assert _picked(at, "Query (sorted by Δ NDCG@10, worst first)") == qid and at.query_params["query"] == qid
    assert _explanation(at)


def test_the_inspector_says_why_the_worst_query_lost(loaded, open_page):
    home, run, ctx = loaded
    at = open_page(home, "inspector")
    worst = analysis.query_deltas(run, ARM).iloc[0]
    assert worst["delta"] < 0 and _picked(at, "Query (sorted by Δ NDCG@10, worst first)") == worst["query_id"]
    qid = worst["query_id"]
    table = analysis.candidate_table(ctx, run, ARM, qid)
    sentence = analysis.explain(table, "rif", run.config["pipeline"]["pool_size"], int(worst["cluster"]),
                                (worst["baseline"], worst["ndcg"]), len(ctx.queries[qid].qrels), analysis.candidate_table(ctx, run, "baseline", qid))
    text = _explanation(at)
    assert "Lost." in text and text.endswith(sentence)
    assert sentence.startswith(f"NDCG@10 {worst['baseline']:.3f} → {worst['ndcg']:.3f}: ") and "relevant turn" in sentence
    shown = at.dataframe[0].value
    assert shown["relevant"].iloc[: int(table["relevant"].sum())].all()  # relevant turns pinned on top
    assert {m.label: m.value for m in at.metric}["query cluster"] == str(int(worst["cluster"]))


def test_the_inspector_reads_the_picked_seed(loaded, open_page):
    home, run, ctx = loaded
    seed = run.summary["seeds"][1]
    rows = analysis.seed_rows(run, seed)
    rows = rows[rows["arm"] == ARM].set_index("query_id")
    deltas = analysis.query_deltas(run, ARM, seed)
    qid = deltas["query_id"].iloc[0]
    at = open_page(home, "inspector", seed=seed, query=qid)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[f"NDCG@10 {ARM}"] == f"{rows.at[qid, 'ndcg@10']:.3f}" and metrics["query cluster"] == str(rows.at[qid, "cluster"])
    assert any(f"Suppression of seed {seed} replayed" in c.value for c in at.caption)
    shown = [m.value.split("`")[1] for m in at.markdown if "**" in m.value and "`" in m.value and m.value[:1] in "✅▫"]
    ids = ctx.dataset.corpus.ids
    assert shown[10:] == [ids[int(d)] for d in rows.at[qid, "top10"]]
    assert _disagreements(at.dataframe[0].value, shown[10:]) == []


@pytest.mark.parametrize("page", ["chronic", "inspector", "clusters", "suppression", "behaviour"])
def test_every_table_can_be_downloaded(results_home, open_page, page):
    at = open_page(results_home[0], page)
    assert len(at.get("download_button")) >= len(at.dataframe)


def _figures(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_charts_show_differences_and_keep_ids(loaded, open_page):
    home, run, _ = loaded
    behaviour = _figures(open_page(home, "behaviour"))
    assert behaviour[0]["layout"]["yaxis"]["title"]["text"].startswith("Δ share")  # paired differences, not 0–1 shares
    assert all("error_y" in trace for trace in behaviour[0]["data"] if trace["type"] == "bar")
    clusters = _figures(open_page(home, "clusters"))
    assert "coloured by their" in clusters[0]["layout"]["title"]["text"] and "coloraxis" in clusters[0]["layout"]
    assert "error_y" in clusters[1]["data"][0]
    heatmap = _figures(open_page(home, "suppression"))[0]
    columns = heatmap["data"][0]["x"]
    assert len(columns) == len(set(columns)) and all(c.startswith("conv-") for c in columns)


def test_held_out_clusters_are_named_with_their_split(tmp_path, monkeypatch, open_page):
    """Each direction of a held-out run fits its own clusters: the chronic page names them `split:id`, a link reopens one of
    the second split, and the inspector replays another seed's two burn-ins to the ranks that seed scored."""
    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    RIFExperiment(DataSpec(dataset="synthetic:2000", reranker="test:lexical", pipeline=PipelineConfig(encoder="test:hash"),
                           progress=False), protocol="heldout", arms=["clustered10-gap"], seeds=2, burn_in=500, map=False).run()
    at = open_page(tmp_path, "chronic")
    keys = {s.label: s for s in at.selectbox}["Cluster"].options
    assert {k.split(":", 1)[0] for k in keys} == {"A->B", "B->A"}
    other = next(k for k in keys if k.startswith("B->A"))
    at = open_page(tmp_path, "chronic", cluster=other)
    assert _picked(at, "Cluster") == other and at.subheader[1].value.startswith(f"Cluster {other}: ")
    at = open_page(tmp_path, "inspector", seed=43)
    shown = [m.value.split("`")[1] for m in at.markdown if "**" in m.value and "`" in m.value and m.value[:1] in "✅▫"]
    assert _disagreements(at.dataframe[0].value, shown[10:]) == []
    assert pd.notna(at.dataframe[0].value["final rank"]).any()
