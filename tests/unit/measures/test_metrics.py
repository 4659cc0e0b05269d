import math

import pytest

from lethe_core.measures.metrics import longmemeval_ndcg, ndcg_at_k, recall_at_k


def test_ndcg_hand_computed():
    qrels = {"a": 2, "b": 1}
    # gains: a at rank 1 -> 3/log2(2); b at rank 3 -> 1/log2(4)
    dcg = 3 / 1 + 1 / 2
    idcg = 3 / 1 + 1 / math.log2(3)
    assert ndcg_at_k(["a", "x", "b"], qrels, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(["a", "b"], qrels, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], qrels, 10) == 0.0
    assert ndcg_at_k(["x", "a"], qrels, 1) == 0.0  # cut at k


def test_ideal_uses_all_qrels_even_beyond_k():
    qrels = {f"d{i}": 1 for i in range(20)}
    assert ndcg_at_k([f"d{i}" for i in range(10)], qrels, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["d0"], qrels, 10) == pytest.approx(1 / sum(1 / math.log2(i + 2) for i in range(10)))


def test_recall():
    assert recall_at_k(["a", "x", "b"], {"a": 1, "b": 2, "c": 1}, 2) == pytest.approx(1 / 3)
    assert recall_at_k(["a", "x", "b"], {"a": 1, "b": 2, "c": 1}, 3) == pytest.approx(2 / 3)


def test_longmemeval_official_formula():
    # Pinned to LongMemEval's dcg(): rel_1 + sum_{i>=2} rel_i / log2(i), binary grades.
    qrels = {"a": 1, "b": 2}
    ranked = ["x", "a", "y", "b"]
    dcg = 0 + 1 / math.log2(2) + 0 + 1 / math.log2(4)
    idcg = 1 + 1 / math.log2(2)
    assert longmemeval_ndcg(ranked, qrels, 10) == pytest.approx(dcg / idcg)
    # Differs from the standard NDCG: rank 2 is not discounted.
    assert longmemeval_ndcg(["x", "a"], {"a": 1}, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "a"], {"a": 1}, 10) == pytest.approx(1 / math.log2(3))


def test_hit_at_k_hand_computed():
    from lethe_core.measures.metrics import hit_at_k

    qrels = {"a": 1, "b": 1}
    assert hit_at_k(["x", "b", "y"], qrels, 1) == 0.0
    assert hit_at_k(["x", "b", "y"], qrels, 2) == 1.0
    assert hit_at_k(["x", "y"], qrels, 10) == 0.0
    assert hit_at_k(["a"], {}, 10) == 0.0
    assert hit_at_k(["a"], {"a": 0}, 10) == 0.0  # grade 0 is not relevant


def test_recall_all_at_k_needs_every_relevant_turn():
    from lethe_core.measures.metrics import recall_all_at_k

    qrels = {"a": 1, "b": 2}
    assert recall_all_at_k(["a", "x", "b"], qrels, 2) == 0.0
    assert recall_all_at_k(["a", "x", "b"], qrels, 3) == 1.0
    assert recall_all_at_k(["b", "a"], {"a": 1}, 10) == 1.0
    assert recall_all_at_k(["a"], {}, 10) == 0.0


def test_mrr_first_relevant_rank():
    from lethe_core.measures.metrics import mrr

    qrels = {"a": 1, "b": 1}
    assert mrr(["x", "y", "b", "a"], qrels) == pytest.approx(1 / 3)
    assert mrr(["a", "b"], qrels) == 1.0
    assert mrr(["x", "y", "b"], qrels, k=2) == 0.0
    assert mrr(["x", "y"], qrels) == 0.0
    assert mrr(["x"] * 10 + ["a"], qrels, k=10) == 0.0
    assert mrr(["x"] * 10 + ["a"], qrels) == pytest.approx(1 / 11)
