"""Fold training end to end on a tiny budget: folds never see their evaluation conversations."""

import json

import numpy as np
import pytest

from lethe_core.datasets import load_dataset
from lethe_core.pools.cache import PoolBuilder
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rerankers import RerankerUnavailable, load_reranker
from lethe_core.rerankers.recipes import TrainConfig
from lethe_core.rerankers.training import default_model_name, fold_split, recipe_key, train_folds


def test_fold_split_is_disjoint_and_complete():
    convs = [f"c{i}" for i in range(10)]
    folds = fold_split(convs, 3)
    assert sorted(c for _, _, ev in folds for c in ev) == sorted(convs)
    for train, val, ev in folds:
        assert not set(train) & set(ev) and not set(val) & set(ev) and not set(train) & set(val)
        assert len(val) == 1 and len(train) >= 1
    with pytest.raises(ValueError):
        fold_split(convs[:2], 2)  # one conversation cannot be both training and validation


def test_validation_is_a_conversation_that_holds_questions():
    """A conversation without questions cannot choose the fusion weight or fit the calibration (synthetic data has some)."""
    convs = [f"c{i}" for i in range(6)]
    folds = fold_split(convs, 2, questioned={"c3", "c4", "c5"})
    assert [val for _, val, _ in folds] == [["c3"], ["c4"]]
    assert fold_split(convs, 2) == [(["c3", "c5"], ["c1"], ["c0", "c2", "c4"]), (["c2", "c4"], ["c0"], ["c1", "c3", "c5"])]
    with pytest.raises(ValueError, match="holds a question"):
        fold_split(convs, 2, questioned={"c0"})


def test_one_fold_trains_on_every_conversation_but_validation_and_names_its_dataset():
    convs = [f"c{i}" for i in range(10)]
    [(train, val, ev)] = fold_split(convs, 1)
    assert val == ["c0"] and sorted(train + val) == sorted(convs) and ev == []
    with pytest.raises(ValueError, match="2 conversations"):
        fold_split(convs[:1], 1)
    assert default_model_name("locomo", 2) == "minilm-2fold"  # the published recipe keeps its name
    assert default_model_name("realtalk", 1) == "realtalk-all" and default_model_name("realtalk", 2) == "realtalk-2fold"
    assert default_model_name("locomo", 1) == "locomo-all"


def test_a_whole_dataset_model_scores_another_dataset_only(tmp_path, monkeypatch):
    """The cross-dataset teacher: trained on all of one dataset, it refuses that dataset's queries and scores another's."""
    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    cfg = TrainConfig(dataset="synthetic:2000", name="tiny-all", folds=1, max_groups=8, negatives=3, encoder="test:hash", base="test:tiny")
    manifest = train_folds(cfg, progress=False)
    assert manifest["dataset"] == "synthetic-2000" and len(manifest["folds"]) == 1
    assert manifest["folds"][0]["eval_conversations"] == []
    rr = load_reranker("trained:tiny-all", backend="torch")
    own = load_dataset("synthetic:2000")
    with pytest.raises(RerankerUnavailable, match="training side"):
        rr.route(own.queries[0])
    other = load_dataset("locomo", conversations=1, limit_queries=4)
    pools = PoolBuilder(other, rr, PipelineConfig(encoder="test:hash"), progress=False).build()
    assert pools.reranker == "trained:tiny-all" and set(pools.frame["query_id"]) == {q.id for q in other.queries}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    home = tmp_path_factory.mktemp("train_home")
    mp = pytest.MonkeyPatch()
    mp.setenv("LETHE_HOME", str(home))
    cfg = TrainConfig(dataset="synthetic:2000", name="tiny", folds=2, max_groups=8, negatives=3, encoder="test:hash", base="test:tiny")
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


def test_a_resume_that_trains_nothing_leaves_the_manifest_untouched(trained, monkeypatch):
    """`make study` resumed reruns `make teachers`: every fold is done, and an identical manifest rewritten would look
    new to the notebooks' stamps (size + mtime) and re-execute all 18 of them."""
    home, manifest = trained
    monkeypatch.setenv("LETHE_HOME", str(home))
    path = home / "models" / "tiny" / "trained.json"
    before = path.stat().st_mtime_ns
    cfg = TrainConfig(dataset="synthetic:2000", name="tiny", folds=2, max_groups=8, negatives=3, encoder="test:hash", base="test:tiny")
    assert train_folds(cfg, progress=False) == json.loads(json.dumps(manifest)) and path.stat().st_mtime_ns == before


def test_pools_are_scored_by_the_fold_that_never_saw_the_conversation(trained, monkeypatch):
    home, manifest = trained
    monkeypatch.setenv("LETHE_HOME", str(home))
    rr = load_reranker("trained:tiny", backend="torch")  # the ONNX path has its own parity tests
    ds = load_dataset("synthetic:2000")
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
    assert np.array_equal(raw.read_logit, raw.logit)


def test_missing_trained_model_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    with pytest.raises(RerankerUnavailable, match="lethe-lab reranker train"):
        load_reranker("trained:nothing")


def test_systems_report_per_fold_results(trained, monkeypatch):
    from lethe_core.experiments.setup import DataSpec
    from lethe_core.experiments.systems import SystemsExperiment

    home, manifest = trained
    monkeypatch.setenv("LETHE_HOME", str(home))
    s = SystemsExperiment(DataSpec("synthetic:2000", reranker="trained:tiny", pipeline=PipelineConfig(encoder="test:hash"),
                                   backend="torch", progress=False)).run()
    assert s["reranker"] == "trained:tiny" and s["calibrated"] is False and s["logit_reading"] == "raw"
    assert sum(f["n_queries"] for f in s["per_fold"]) == s["n_queries"]
    assert {f["fold"] for f in s["per_fold"]} == {0, 1}
    assert all("p_vs_rrf" in row for row in s["systems"] if row["name"] != "rrf")


def test_no_training_group_holds_a_turn_of_a_validation_or_evaluation_conversation(locomo):
    """The real LoCoMo folds: every positive and every hard negative comes from the fold's training conversations."""
    from lethe_core.rerankers.training import fold_groups

    cfg = TrainConfig(encoder="test:hash")
    conv_of = {t.id: t.conversation_id for t in locomo.corpus.turns}
    for i, (train_c, val_c, eval_c) in enumerate(fold_split(locomo.conversation_ids(), 2)):
        _, groups, n_all = fold_groups(locomo, train_c, cfg, np.random.default_rng(cfg.seed + i))
        assert n_all == len(groups) > 1000
        seen = {conv_of[d] for _, pos, negs in groups for d in [pos, *negs]}
        assert seen <= set(train_c) and not seen & set(val_c + eval_c)
        assert all(len(negs) == cfg.negatives and pos not in negs for _, pos, negs in groups)


def test_retraining_under_the_same_name_rebuilds_the_pools(tmp_path, monkeypatch):
    """The pool key reads the reranker's weights, not its name: a new model under an old name gets new pools."""
    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    ds = load_dataset("synthetic:2000").limit_queries(4)
    keys, identities = [], []
    for seed in (1, 2):
        train_folds(TrainConfig(dataset="synthetic:2000", name="same", folds=2, max_groups=4, negatives=3, encoder="test:hash",
                                base="test:tiny", seed=seed), progress=False)
        rr = load_reranker("trained:same", backend="torch")
        builder = PoolBuilder(ds, rr, PipelineConfig(encoder="test:hash"), progress=False)
        builder.build()
        keys.append(builder.key)
        identities.append(rr.identity)
        assert builder.scored > 0 and builder.hits == 0  # the second model's pairs are scored afresh, not read back
    assert keys[0] != keys[1] and identities[0] != identities[1]


def test_precision_is_validated_resolved_and_recorded(tmp_path, monkeypatch):
    from lethe_core.rerankers.recipes import resolve_precision

    assert resolve_precision("auto") in {"bf16", "fp32"} and resolve_precision("bf16") == "bf16"
    with pytest.raises(ValueError, match="precision"):
        resolve_precision("fp8")
    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    with pytest.raises(ValueError, match="precision"):  # before any work
        train_folds(TrainConfig(dataset="synthetic:2000", name="bad", precision="half", encoder="test:hash"), progress=False)
    assert not (tmp_path / "models" / "bad").exists()
    m = train_folds(TrainConfig(dataset="synthetic:2000", name="bf", folds=2, max_groups=4, negatives=3, encoder="test:hash",
                                precision="bf16"), progress=False)  # MiniLM's real weights, as the first-run recipe
    assert {f["precision"] for f in m["folds"]} == {"bf16"} and m["base_model"].startswith("all-MiniLM-L6-v2")
    assert all(np.isfinite(f["final_loss"]) for f in m["folds"])


def test_learning_curve_trains_and_evaluates_each_point(tmp_path, monkeypatch):
    from lethe_core.experiments.learning_curve import LearningCurveConfig, point_name

    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    cfg = LearningCurveConfig(dataset="synthetic:2000", points=((0.5, 1, 3), (1.0, 1, 3)), precision="fp32", backend="torch",
                              encoder="test:hash", base="test:tiny", max_groups=6, progress=False)
    with pytest.raises(ValueError, match="bad learning-curve point"):
        LearningCurveConfig(dataset="synthetic:2000", points=((0.0, 1, 3),), encoder="test:hash").run()
    s = cfg.run()
    assert [r["point"] for r in s["points"]] == [point_name(0.5, 1, 3, "fp32"), point_name(1.0, 1, 3, "fp32")]
    half, whole = s["points"]
    assert all(g <= 6 for g in half["groups_per_fold"]) and whole["groups_per_fold"] == [6, 6]
    for r in s["points"]:
        assert 0 <= r["full"] <= 1 and r["full_ci"][0] <= r["full"] <= r["full_ci"][1]
        assert abs(r["control_minus_full"]["mean"] - (r["control"] - r["full"])) < 1e-9
    table = (tmp_path / "results" / "learning_curve" / "curve.md").read_text()
    assert table.count("\n") == 2 + len(s["points"])
    again = cfg.run()  # resumes: nothing retrained, same numbers
    assert [r["full"] for r in again["points"]] == [r["full"] for r in s["points"]]


def test_a_base_is_validated_and_the_default_keeps_the_key_folds_were_trained_under(tmp_path, monkeypatch):
    """Adding an option must not retrain finished folds: the first-run recipe on LoCoMo keeps the key its folds
    recorded before `base` existed (40a65f98eeb3ffa6, in a fold.json trained at 57efc20)."""
    first_run = TrainConfig(name="lc-b100-e1-n7-bf16", precision="bf16", negatives=7, budget=1.0)
    assert recipe_key(first_run, load_dataset("locomo").fingerprint) == "40a65f98eeb3ffa6"
    assert recipe_key(TrainConfig(base="test:tiny"), "x") != recipe_key(TrainConfig(), "x")
    monkeypatch.setenv("LETHE_HOME", str(tmp_path))
    with pytest.raises(ValueError, match="base must be one of"):
        train_folds(TrainConfig(dataset="synthetic:2000", name="bad", base="bert-large", encoder="test:hash"), progress=False)
