"""The integrity audit's checks fail on the faults they claim to rule out."""

import pytest

from lethe_core.experiments.integrity import audited_run, compare_runs, integrity_checks, margin_over_rest
from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.systems import SystemsExperiment
from lethe_core.retrieval.pipeline import PipelineConfig


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LETHE_HOME", str(tmp_path_factory.mktemp("home")))
        exp = SystemsExperiment(DataSpec(dataset="locomo", reranker="test:lexical", backend="torch", conversations=1,
                                         limit_queries=30, pipeline=PipelineConfig(encoder="test:hash"), progress=False))
        yield audited_run(exp)


def passed(table):
    return dict(zip(table["check"], table["passed"]))


def test_a_clean_run_passes_every_check(run):
    table = integrity_checks(run.per_query, run.dataset, run.ranked, manifest=run.manifest, scope=run.scope)
    ok = passed(table)
    assert ok["same queries for every system"] and ok["every system evaluated"]
    assert ok["same qrels: every metric recomputes from the dataset's labels"]
    assert ok["no turn twice in a list"] and ok["results are corpus turns"] and ok["metrics within [0, 1]"]
    assert (run.ranked["ranked"].map(len) <= 10).all()
    assert set(run.per_query.columns) >= {"hit@1", "hit@5", "hit@10", "recall_all@10", "mrr@10"}


def test_other_qrels_are_caught(run):
    from dataclasses import replace

    q0 = run.dataset.queries[0]
    other = replace(run.dataset, queries=[replace(q0, qrels={"conv-26:D1:1": 1, "conv-26:D1:2": 1}), *run.dataset.queries[1:]])
    table = integrity_checks(run.per_query, other, run.ranked)
    assert not passed(table)["same qrels: every metric recomputes from the dataset's labels"]


def test_missing_query_long_list_and_leak_are_caught(run):
    pq = run.per_query[~((run.per_query["system"] == "bm25") & (run.per_query["query_id"] == run.dataset.queries[0].id))]
    ranked = run.ranked.copy()
    ranked.at[0, "ranked"] = list(ranked.at[0, "ranked"]) + ["conv-26:D1:1"] * 2
    manifest = {"folds": [{"fold": 0, "eval_conversations": ["conv-26"], "train_conversations": ["conv-26"]}]}
    ok = passed(integrity_checks(pq, run.dataset, ranked, manifest=manifest))
    assert not ok["same queries for every system"]
    assert not ok["exactly 10 results each"] and not ok["no turn twice in a list"]
    assert not ok[next(c for c in ok if c.startswith("no tuning"))]


def test_conversation_scope_check(run):
    ranked = run.ranked.copy()
    ranked.at[0, "ranked"] = ["conv-30:D1:1"] + list(ranked.at[0, "ranked"])[1:]
    ok = passed(integrity_checks(run.per_query, run.dataset, ranked, scope="conversation"))
    assert not ok["per-conversation scope: no result from another conversation"]


def test_compare_runs_and_margin(run):
    same = compare_runs(run.per_query, run.per_query)
    assert (same["delta"] == 0).all() and set(same["system"]) == set(run.per_query["system"])
    bumped = run.per_query.assign(**{"ndcg@10": run.per_query["ndcg@10"] + 0.1})
    assert compare_runs(run.per_query, bumped)["delta"].round(9).eq(0.1).all()
    m = margin_over_rest(run.per_query, "full")
    assert m["runner_up"] != "full" and m["ci"][0] <= m["delta"] <= m["ci"][1]
