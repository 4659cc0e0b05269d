"""The usage stream on a hand-made corpus: deterministic, curves of the right shape, the static mechanism is the
baseline exactly, each pair scored once, weights remove turns, held-out splits."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from lethe_core.datasets.model import Corpus, Dataset, Query, Turn
from lethe_core.measures.metrics import ndcg_at_k
from lethe_core.rerankers import LexicalReranker
from lethe_core.datasets.splits import heldout_halves
from lethe_core.mechanisms.usage_stream import (Mechanism, StaticMechanism, StreamData, Verdicts, dense_topk, eval_steps, normalize,
                                     run_stream)

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]


def make_data(n_turns=45, seed=0, n_conv=2):
    rng = np.random.default_rng(seed)
    turns, queries = [], []
    for i in range(n_turns):
        conv = f"c{i % n_conv}"
        words = rng.choice(WORDS, size=3, replace=False)
        turns.append(Turn(f"t{i}", f"A: {' '.join(words)} {i}", f"{conv}:s", conv, position=i))
    for j in range(12):
        conv = f"c{j % n_conv}"
        words = rng.choice(WORDS, size=2, replace=False)
        rel = {f"t{k}": 1 for k in rng.choice(n_turns, size=3, replace=False)}
        queries.append(Query(f"q{j}", " ".join(words), rel, conversation_id=conv))
    ds = Dataset("tiny", Path("."), Corpus(turns), queries)
    return StreamData(ds, normalize(rng.normal(size=(12, 8))), normalize(rng.normal(size=(n_turns, 8))))


class Drift:
    """A test mechanism: each retrieved turn with a positive logit moves a seeded random step toward the query."""

    name = "drift"

    def __init__(self, vectors, seed):
        self.v = np.array(vectors, dtype=np.float32)
        self.rng = np.random.default_rng(seed)

    def effective(self):
        return self.v

    def update(self, step, qvec, doc_idx, logits):
        for j, lg in zip(doc_idx, logits):
            if lg > 0:
                self.v[j] = normalize(self.v[j] + 0.3 * qvec + 0.1 * self.rng.normal(size=self.v.shape[1]))


class Counting(LexicalReranker):
    identity = "test:counting|v1"

    def __init__(self):
        self.pairs = []

    def score(self, query, texts):
        self.pairs += [(query, t) for t in texts]
        return super().score(query, texts)


def test_dense_topk_orders_ties_and_drops_zero_weights():
    v = np.array([[1, 0], [1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
    assert dense_topk(v, np.array([1.0, 0.0]), k=3).tolist() == [[0, 1, 3]]  # tie 0/1 -> lower position first
    assert dense_topk(v, np.array([1.0, 0.0]), k=3, weights=np.array([0, 1, 1, 1.0])).tolist() == [[1, 3, 2]]
    assert dense_topk(v, np.array([1.0, 0.0]), k=4, weights=np.array([0, 0, 1, 1.0])).tolist() == [[3, 2, -1, -1]]


def test_static_mechanism_is_the_baseline_exactly(tmp_path):
    data = make_data()
    assert isinstance(StaticMechanism(data.turn_vectors), Mechanism)
    verdicts = Verdicts(data, LexicalReranker(), tmp_path / "pairs.sqlite")
    idx = np.arange(len(data.dataset.queries))
    frame = run_stream(data, verdicts, StaticMechanism(data.turn_vectors), idx, idx, steps=20, eval_every=7, seed=3).frame()
    lex = LexicalReranker()
    expected_rerank, expected_dense = [], []
    for qi, q in enumerate(data.dataset.queries):  # independent: full argsort, reranker called directly
        s = data.turn_vectors @ data.query_vectors[qi]
        top = sorted(range(len(s)), key=lambda j: (-s[j], j))[:30]
        lg = lex.score(q.text, [data.texts[j] for j in top])
        reranked = [top[i] for i in np.argsort(-lg, kind="stable")]
        expected_dense.append(ndcg_at_k([f"t{j}" for j in top], q.qrels, 10))
        expected_rerank.append(ndcg_at_k([f"t{j}" for j in reranked], q.qrels, 10))
    for step, g in frame.groupby("step"):
        assert g[g.system == "rerank"]["ndcg@10"].tolist() == pytest.approx(expected_rerank, abs=1e-12)
        assert g[g.system == "dense"]["ndcg@10"].tolist() == pytest.approx(expected_dense, abs=1e-12)
    assert max(expected_rerank) > 0  # the check is not vacuous


def test_curve_shape_and_determinism(tmp_path):
    data = make_data()
    a, b = heldout_halves([q.conversation_id for q in data.dataset.queries])

    def once():
        verdicts = Verdicts(data, LexicalReranker(), tmp_path / "pairs.sqlite")
        res = run_stream(data, verdicts, Drift(data.turn_vectors, seed=5), a, b, steps=12, eval_every=5, seed=1)
        return res.frame(), res.trace

    (f1, t1), (f2, t2) = once(), once()
    assert eval_steps(12, 5) == [0, 5, 10, 12]
    assert sorted(f1["step"].unique()) == [0, 5, 10, 12] and [t["step"] for t in t1] == [0, 5, 10, 12]
    assert len(f1) == 4 * len(b) * 2 and set(f1["system"]) == {"rerank", "dense"}
    assert f1.equals(f2) and t1 == t2
    mech = Drift(data.turn_vectors, seed=5)
    run_stream(data, Verdicts(data, LexicalReranker(), tmp_path / "p2.sqlite"), mech, a, a, steps=12, eval_every=12, seed=1)
    assert not np.allclose(mech.v, data.turn_vectors)  # the stream did drive the mechanism


def test_every_pair_scored_once_ever(tmp_path):
    data = make_data()
    idx = np.arange(len(data.dataset.queries))
    counting = Counting()
    v1 = Verdicts(data, counting, tmp_path / "pairs.sqlite")
    run_stream(data, v1, Drift(data.turn_vectors, seed=2), idx, idx, steps=30, eval_every=10, seed=0)
    assert counting.pairs and len(counting.pairs) == len(set(counting.pairs))
    assert v1.counts["scored"] == len(counting.pairs)
    v1.close()
    again = Counting()
    v2 = Verdicts(data, again, tmp_path / "pairs.sqlite")
    run_stream(data, v2, Drift(data.turn_vectors, seed=2), idx, idx, steps=30, eval_every=10, seed=0)
    assert again.pairs == [] and v2.counts["hits"] > 0  # a second run reads every pair back from the cache


def test_bad_parameters_fail_early(tmp_path):
    data = make_data()
    idx = np.arange(3)
    v = Verdicts(data, LexicalReranker(), tmp_path / "pairs.sqlite")
    with pytest.raises(ValueError):
        run_stream(data, v, StaticMechanism(data.turn_vectors), idx, idx, steps=5, eval_every=0, seed=0)
    with pytest.raises(ValueError):
        run_stream(data, v, StaticMechanism(data.turn_vectors), idx[:0], idx, steps=5, eval_every=1, seed=0)
