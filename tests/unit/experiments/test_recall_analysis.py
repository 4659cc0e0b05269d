"""Checkpoint 05 recall analysis: oracle ceiling by hand, rank buckets, and the experiment against the pools."""

import math

import numpy as np
import pandas as pd
import pytest

from lethe_core.datasets import load_dataset
from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.recall import RecallExperiment, oracle_ndcg, rank_buckets, rank_ecdf, relevant_ranks
from lethe_core.experiments.systems import evaluate_systems
from lethe_core.pools.cache import PoolBuilder
from lethe_core.retrieval.fusion import fused_order, rrf
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rerankers import LexicalReranker

CONFIG = PipelineConfig(encoder="test:hash")
DATASET = "synthetic:600"


def test_oracle_ceiling_by_hand():
    qrels = {"c": 1, "e": 2}
    ranked = ["a", "b", "c", "d", "e"]
    idcg = 3.0 + 1.0 / math.log2(3)  # grade 2 at rank 1, grade 1 at rank 2
    assert oracle_ndcg(ranked, qrels, 2) == 0.0  # nothing relevant in the top 2
    assert oracle_ndcg(ranked, qrels, 3) == pytest.approx(1.0 / idcg)  # c alone, moved to rank 1
    assert oracle_ndcg(ranked, qrels, 5) == pytest.approx(1.0)  # both found, best grade first
    assert oracle_ndcg(["e", "x"], {"e": 1, "f": 1}, 30) == pytest.approx(1.0 / (1.0 + 1.0 / math.log2(3)))
    assert oracle_ndcg(["c"] + ["x"] * 20, {"c": 1}, 1, at=10) == 1.0


def test_relevant_ranks_and_buckets():
    assert relevant_ranks(["a", "b", "c"], {"c": 1, "z": 1}) == {"c": 3.0, "z": pytest.approx(float("nan"), nan_ok=True)}
    ranks = pd.DataFrame({"list": ["dense"] * 5, "rank": [1, 2, 25, 400, np.nan]})
    b = rank_buckets(ranks, edges=(1, 10, 30, 500), depth=500).set_index("bucket")["share"]
    assert list(b.index) == ["1", "2–10", "11–30", "31–500", "not in top 500"]
    assert b.tolist() == pytest.approx([0.2, 0.2, 0.2, 0.2, 0.2])
    small = rank_buckets(ranks, edges=(1, 10, 30, 500), depth=100).set_index("bucket")["share"]  # a shallower depth is its own cap
    assert list(small.index) == ["1", "2–10", "11–30", "31–100", "not in top 100"]
    assert small["not in top 100"] == pytest.approx(0.4)
    e = rank_ecdf(ranks, 500).set_index("rank")["share"]
    assert e[1] == pytest.approx(0.2) and e[24] == pytest.approx(0.4) and e[25] == pytest.approx(0.6) and e[500] == pytest.approx(0.8)


def test_fused_order_by_hand():
    ids = ["t0", "t1", "t2", "t3"]
    # t1: 1/60 + 1/61 (both legs); t0: 1/60; t2: 1/61; t3: 1/62 in the dense leg only; t0 vs t2 no tie
    assert fused_order(rrf([[1, 2], [0, 1, 3]], 60), ids) == [1, 0, 2, 3]
    assert fused_order(rrf([[2], [3]], 60), ids) == [2, 3]  # a tie on score is broken by turn id


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("recall")
    ds = load_dataset(DATASET)
    pools = PoolBuilder(ds, LexicalReranker(), CONFIG, root=root, progress=False).build()
    systems = evaluate_systems(ds, pools.packed([q.id for q in ds.queries]))
    exp = RecallExperiment(DataSpec(dataset=DATASET, reranker="test:lexical", pipeline=CONFIG, progress=False))
    first = exp.run(results_root=root / "results", cache_root=root)
    assert exp.run(results_root=root / "results", cache_root=root) == first  # a finished run is read back
    second = exp.run(results_root=root / "results", cache_root=root, mode="overwrite")
    first_stage = RecallExperiment(DataSpec(dataset=DATASET, reranker=None, pipeline=CONFIG, progress=False)).run(
        results_root=root / "results", cache_root=root)
    return ds, systems, first, second, first_stage


def test_recall_experiment_agrees_with_the_pools(runs):
    ds, systems, first, _, _ = runs
    pq = pd.read_parquet(f"{first['results_dir']}/per_query.parquet").set_index("query_id")
    assert len(pq) == len(ds.queries)
    wide = systems.pivot(index="query_id", columns="system", values="ndcg@10").reindex(pq.index)
    pool = systems[systems["system"] == "full"].set_index("query_id")["pool_recall@30"].reindex(pq.index)
    # dense top-30 reranked = the systems' vector_rerank wherever the deep dense list's head is the 30-deep leg (the hash
    # encoder of the tests makes exact score ties, which FAISS cuts in no fixed order)
    same = np.isclose(pq["ndcg@10_dense"], wide["vector"])
    assert same.mean() > 0.8
    assert np.allclose(pq.loc[same, "ndcg@10_dense30_rerank"], wide.loc[same, "vector_rerank"])
    assert np.allclose(pq["pool_recall"], pool)  # RRF top-30 of the 30-deep legs = the reranker pool
    for name in ("dense", "bm25", "hybrid"):  # recall never falls with depth
        assert (pq[f"recall@100_{name}"] >= pq[f"recall@30_{name}"]).all()
        assert (pq[f"recall@500_{name}"] >= pq[f"recall@100_{name}"]).all()
    for name in ("dense", "hybrid"):  # a perfect reranker of a deeper pool is never worse, and beats the list itself
        assert (pq[f"oracle@60_{name}"] >= pq[f"oracle@30_{name}"] - 1e-12).all()
        assert (pq[f"oracle@100_{name}"] >= pq[f"oracle@60_{name}"] - 1e-12).all()
        assert (pq[f"oracle@30_{name}"] >= pq[f"ndcg@10_{name}"] - 1e-12).all()
    s = first
    assert s["recall"]["dense"]["30"]["mean"] == pytest.approx(pq["recall@30_dense"].mean())
    assert set(s["k_fetch"]) == {"30", "100"} and "p" in s["k_fetch_delta"]
    assert s["never_reranked"]["per_query_pool"] == pytest.approx(1 - pq["pool_recall"].mean())


def test_scores_go_through_the_pair_cache(runs):
    ds, _, first, second, _ = runs
    # every dense top-30 pair of every query is in the pools already: read back, not rescored
    assert first["pairs"]["hits"] >= 30 * len(ds.queries) * 0.5
    assert first["pairs"]["scored"] > 0
    assert second["pairs"] == {"hits": first["pairs"]["hits"] + first["pairs"]["scored"], "scored": 0}
    a = pd.read_parquet(f"{first['results_dir']}/per_query.parquet")
    b = pd.read_parquet(f"{second['results_dir']}/per_query.parquet")
    pd.testing.assert_frame_equal(a, b)


def test_ranks_and_first_stage_only_run(runs):
    ds, _, first, _, first_stage = runs
    ranks = pd.read_parquet(f"{first['results_dir']}/ranks.parquet")
    n_rel = sum(sum(g > 0 for g in q.qrels.values()) for q in ds.queries)
    assert ranks.groupby("list").size().to_dict() == {"bm25": n_rel, "dense": n_rel, "hybrid": n_rel}
    pq = pd.read_parquet(f"{first['results_dir']}/per_query.parquet").set_index("query_id")
    dense = ranks[ranks["list"] == "dense"]
    found30 = dense.assign(hit=dense["rank"] <= 30).groupby("query_id")["hit"].sum()
    assert (found30.reindex(pq.index) == pq["dense30_found"]).all()
    assert first_stage["reranker"] is None and "k_fetch" not in first_stage
    assert first_stage["recall"] == first["recall"] and first_stage["results_dir"] != first["results_dir"]
    shares = pd.DataFrame(first["rank_buckets"]).groupby("list")["share"].sum()
    assert np.allclose(shares, 1.0)
