"""Our sparse-matrix BM25 against rank-bm25's BM25Okapi, the reference semantics."""

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from lethe_core.retrieval.bm25 import BM25Index
from lethe_core.retrieval.text import tokenize


def test_epsilon_floor_on_a_tiny_corpus():
    docs = [["the", "cat"], ["the", "dog"], ["the", "cat", "cat"], ["a", "bird"]]
    ours, ref = BM25Index(docs), BM25Okapi(docs)
    for q in (["the"], ["cat", "cat"], ["bird", "unknown"], ["the", "dog", "cat"]):
        assert np.allclose(ours.scores(q), ref.get_scores(q), atol=1e-12)
    assert ours.idf[ours.vocab["the"]] == pytest.approx(0.25 * ref.average_idf)  # floored negative idf


def test_same_top30_and_scores_as_rank_bm25_on_locomo(locomo):
    toks = [tokenize(t) for t in locomo.corpus.texts]
    ours, ref = BM25Index(toks), BM25Okapi(toks)
    for q in locomo.queries[::5]:  # ~300 queries keeps the reference loop to a few seconds
        qt = tokenize(q.text)
        expected = ref.get_scores(qt)
        idx, scores = ours.search(qt, 30)
        assert np.allclose(scores, expected[idx], atol=1e-9)
        # Same top-30 set: everything we skipped scores no higher than our 30th.
        order = np.argsort(-expected, kind="stable")
        assert set(idx) == set(order[: len(idx)]) or expected[order[len(idx) - 1]] == pytest.approx(scores[-1])
        assert np.all(np.diff(scores) <= 1e-12)
