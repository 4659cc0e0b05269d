"""The tokenizer ablation: one pool per tokenizer, paired against regex, with cost and a Pareto flag."""

import json
from pathlib import Path

import pandas as pd
import pytest

from lethe_core.datasets import load_dataset
from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.tokenizers import TokenizerExperiment, bm25_cost, pareto_front
from lethe_core.pools.cache import pool_key
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rerankers import resolve_reranker


def test_pareto_front_hand_made():
    frame = pd.DataFrame({"q": [0.30, 0.34, 0.31, 0.34], "build": [1.0, 2.0, 3.0, 2.5], "ms": [0.1, 0.2, 0.3, 0.2]})
    # row 2 is beaten by row 1 (better and cheaper); row 3 by row 1 (same quality, slower build)
    assert pareto_front(frame, "q", ["build", "ms"]).tolist() == [True, True, False, False]


def test_bm25_cost_reports_positive_times():
    c = bm25_cost(["Alice: the dog ran", "Bob: cats sleep all day"], ["dog", "cat"], "regex-porter", repeats=2)
    assert c["index_build_s"] > 0 and c["query_ms"] > 0 and c["vocabulary"] > 0


def test_experiment_runs_every_tokenizer_on_the_same_queries(tmp_path):
    exp = TokenizerExperiment(DataSpec(dataset="locomo", reranker="test:lexical", backend="torch", conversations=1,
                                       limit_queries=25, pipeline=PipelineConfig(encoder="test:hash"), progress=False),
                              timing_repeats=1)
    summary = exp.run(results_root=tmp_path)
    rows = pd.DataFrame(summary["rows"])
    assert set(rows["tokenizer"]) == {"split", "regex", "regex-stop", "regex-porter"}
    assert set(rows["system"]) == {"bm25", "rrf", "full"}
    assert (rows["n_queries"] == 25).all()
    assert rows.loc[rows["tokenizer"] == "regex", "delta_vs_regex"].isna().all()
    assert rows.loc[rows["tokenizer"] != "regex", "p_vs_regex"].notna().all()
    assert rows.groupby("system")["pareto"].any().all()  # every system has a non-dominated tokenizer
    assert len(set(summary["pool_keys"].values())) == 4
    # regex is the default pipeline: its pools are the ones `lethe-lab systems` builds
    ds = load_dataset("locomo", None, 1, 25)
    assert summary["pool_keys"]["regex"] == pool_key(ds, PipelineConfig(encoder="test:hash"), resolve_reranker("test:lexical"))
    per_query = pd.read_parquet(Path(summary["results_dir"]) / "per_query.parquet")
    counts = per_query.groupby(["tokenizer", "system"])["query_id"].nunique()
    assert (counts == 25).all()
    json.loads((Path(summary["results_dir"]) / "summary.json").read_text())
    assert exp.run(results_root=tmp_path) == json.loads((Path(summary["results_dir"]) / "summary.json").read_text())  # reused
    # a recomputed run reads every pool back: nothing is scored again
    again = exp.run(results_root=tmp_path, mode="overwrite")
    assert all(v["scored"] == 0 for v in again["pairs_scored"].values())
