"""Fold training end to end on a tiny budget: folds never see their evaluation conversations."""

import json

import numpy as np
import pytest

from lethe_core.datasets import load_dataset
from lethe_core.pools import PoolBuilder
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.retrieval.rerank import RerankerUnavailable, load_reranker
from lethe_core.training import TrainConfig, fold_split, train_folds


def test_fold_split_is_disjoint_and_complete():
    convs = [f"c{i}" for i in range(10)]
    folds = fold_split(convs, 3)
    assert sorted(c for _, _, ev in folds for c in ev) == sorted(convs)
    for train, val, ev in folds:
        assert not set(train) & set(ev) and not set(val) & set(ev) and not set(train) & set(val)
        assert len(val) == 1 and len(train) >= 1
    with pytest.raises(ValueError):
        fold_split(convs[:2], 2)  # one conversation cannot be both training and validation


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    home = tmp_path_factory.mktemp("train_home")
    mp = pytest.MonkeyPatch()
    mp.setenv("LETHE_HOME", str(home))
    cfg = TrainConfig(dataset="synthetic:3000", name="tiny", folds=2, max_groups=8, negatives=3, encoder="test:hash")
    manifest = train_folds(cfg, progress=False)
    yield home, manifest
    mp.undo()


def test_manifest_records_protocol_and_choices(trained):
    home, manifest = trained
    assert json.loads((home / "models" / "tiny" / "trained.json").read_text()) == json.loads(json.dumps(manifest))
    for f in manifest["folds"]:
        assert f["train_groups"] == 8 and f["train_pairs"] == 8 * 4
        assert f["fuse_w"] in [round(x, 2) for x in np.linspace(0, 1, 11)]
        assert len(f["calibration"]) == 2 and "relevant" in f["logits"] and "non_relevant" in f["logits"]
        assert not set(f["eval_conversations"]) & set(f["train_conversations"] + f["validation_conversations"])


def test_pools_are_scored_by_the_fold_that_never_saw_the_conversation(trained, monkeypatch):
    home, manifest = trained
    monkeypatch.setenv("LETHE_HOME", str(home))
    rr = load_reranker("trained:tiny")
    ds = load_dataset("synthetic:3000")
    for q in ds.queries[:5]:
        fold = rr.route(q)
        info = manifest["folds"][int(fold.name.rsplit("-", 1)[1])]
        assert q.conversation_id in info["eval_conversations"]
    pools = PoolBuilder(ds.limit_queries(6), rr, PipelineConfig(encoder="test:hash"), progress=False).build()
    f = pools.frame
    a, b = manifest["folds"][int(rr.route(ds.queries[0]).name[-1])]["calibration"]
    first = f[f["query_id"] == ds.queries[0].id]
    assert np.allclose(first["calibrated"], a * first["logit"] + b, atol=1e-4)
    assert pools.reranker == "trained:tiny" and not f["fuse_w"].isna().any()
    raw = pools.packed([q.id for q in ds.queries[:6]], calibration=False)
    assert np.array_equal(raw.calibrated, raw.logit)


def test_missing_trained_model_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    with pytest.raises(RerankerUnavailable, match="lethe-lab reranker train"):
        load_reranker("trained:nothing")


def test_systems_report_per_fold_results(trained, monkeypatch):
    from lethe_core.experiments.systems import SystemsExperiment

    home, manifest = trained
    monkeypatch.setenv("LETHE_HOME", str(home))
    s = SystemsExperiment("synthetic:3000", reranker="trained:tiny", pipeline=PipelineConfig(encoder="test:hash"), progress=False).run()
    assert s["reranker"] == "trained:tiny" and s["calibrated"] is True
    assert sum(f["n_queries"] for f in s["per_fold"]) == s["n_queries"]
    assert {f["fold"] for f in s["per_fold"]} == {0, 1}
    assert all("p_vs_rrf" in row for row in s["systems"] if row["name"] != "rrf")
