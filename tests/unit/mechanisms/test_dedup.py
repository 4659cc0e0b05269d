"""Build-time dedup on a hand-made corpus with known exact and near duplicates (hand-made vectors, no model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lethe_core.datasets.model import Corpus, Dataset, Query, Turn
from lethe_core.mechanisms.dedup import UnionFind, dedup, near_pairs, normalise, project_ranking, remap_qrels
from lethe_core.measures.metrics import ndcg_at_k


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def angle(deg):  # a unit vector in the (x, y) plane at `deg` degrees from x
    r = np.deg2rad(deg)
    return unit(np.cos(r), np.sin(r), 0.0, 0.0)


# cos(15 deg) = 0.966 >= 0.95, cos(30 deg) = 0.866 < 0.95: 0 ~ 1 ~ 2 is transitive, 0 and 2 are not direct neighbours.
TEXTS = ["A: hello there", "A: hello  there!", "A: hello there!!", "B: Bye!", "C: something else", "b:  bye!",
         "D: unrelated", "E: twin"]
VECTORS = np.stack([angle(0), angle(15), angle(30), unit(0, 0, 1, 0), unit(0, 0, 0, 1), unit(0, 0.3, 0.1, -1),
                    unit(1, -1, 1, 1), unit(-1, 1, 1, 1)])


def make_dataset(convs=None):
    convs = convs or ["c1"] * len(TEXTS)
    turns = [Turn(f"t{i}", t, f"{convs[i]}:s", convs[i], position=i) for i, t in enumerate(TEXTS)]
    queries = [
        Query("q0", "hello", {"t1": 1, "t2": 2}, conversation_id="c1"),  # both merge into t0: grade 2 kept
        Query("q1", "bye", {"t5": 1}, conversation_id="c1"),  # exact duplicate of t3
        Query("q2", "else", {"t4": 1, "t0": 1}, conversation_id="c1"),  # representatives only
    ]
    return Dataset("tiny", Path("."), Corpus(turns), queries)


def test_normalise_and_union_find_root_is_smallest():
    assert normalise("  B:\tBye! ") == normalise("b: bye!")
    uf = UnionFind(5)
    uf.union(4, 2)
    uf.union(2, 3)
    uf.union(3, 1)
    assert uf.roots().tolist() == [0, 1, 1, 1, 1]


def test_near_pairs_blockwise_matches_full_matrix():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(20, 8))
    v = np.concatenate([base, base[:7] + 0.05 * rng.normal(size=(7, 8))])
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    sims = v @ v.T
    want = {(i, j) for i in range(len(v)) for j in range(i + 1, len(v)) if sims[i, j] >= 0.95 - 1e-6}
    for block in (1, 3, 8, 100):
        assert {tuple(p) for p in near_pairs(v, 0.95, block=block).tolist()} == want
    assert len(want) >= 7


def test_exact_near_and_transitive_groups():
    r = dedup(make_dataset(), VECTORS, 0.95)
    assert r.representative == {"t0": "t0", "t1": "t0", "t2": "t0", "t3": "t3", "t4": "t4", "t5": "t3",
                                "t6": "t6", "t7": "t7"}
    assert r.group_sizes["t0"] == 3 and r.group_sizes["t3"] == 2 and r.group_sizes["t4"] == 1
    assert r.kind["t5"] == "exact"  # same normalised text, different vector
    assert r.kind["t1"] == "near" and r.kind["t2"] == "near"  # t2 only reaches t0 through t1
    assert r.groups() == {"t0": ["t0", "t1", "t2"], "t3": ["t3", "t5"]}
    assert r.dataset.corpus.ids == ["t0", "t3", "t4", "t6", "t7"]
    assert r.dataset.name == "tiny-dedup95" and r.strict.name == r.dataset.name
    assert r.stats["merged"] == 3 and r.stats["exact"] == 1 and r.stats["near"] == 2
    assert r.stats["queries_with_merged_qrels"] == 2 and r.stats["qrels_merged"] == 3


def test_qrels_remapped_keep_max_grade_and_strict_keeps_originals():
    r = dedup(make_dataset(), VECTORS, 0.95)
    remapped = {q.id: q.qrels for q in r.queries("remapped")}
    strict = {q.id: q.qrels for q in r.queries("strict")}
    assert remapped == {"q0": {"t0": 2}, "q1": {"t3": 1}, "q2": {"t4": 1, "t0": 1}}
    assert strict == {q.id: q.qrels for q in make_dataset().queries}
    # Strict: a merged-away relevant turn is lost; remapped: retrieving the representative counts.
    ranked = ["t0", "t3", "t4"]
    assert ndcg_at_k(ranked, strict["q0"], 10) == 0.0
    assert ndcg_at_k(ranked, remapped["q0"], 10) == pytest.approx(1.0)
    assert remap_qrels({"a": 1, "b": 3, "c": 2}, {"a": "a", "b": "a", "c": "c"}) == {"a": 3, "c": 2}
    with pytest.raises(ValueError):
        r.queries("other")


def test_threshold_and_scope():
    high = dedup(make_dataset(), VECTORS, 0.99)  # only the exact duplicate survives as a merge
    assert high.stats["merged"] == 1 and high.representative["t5"] == "t3"
    assert high.dataset.name == "tiny-dedup99"
    convs = ["c1", "c1", "c1", "c1", "c1", "c2", "c1", "c1"]  # t5 lives in another conversation
    scoped = dedup(make_dataset(convs), VECTORS, 0.95, scope="conversation")
    assert scoped.representative["t5"] == "t5" and scoped.representative["t2"] == "t0"
    with pytest.raises(ValueError):
        dedup(make_dataset(), VECTORS[:3])


def test_project_ranking_keeps_first_occurrence():
    rep = {"t0": "t0", "t1": "t0", "t2": "t0", "t3": "t3"}
    assert project_ranking(["t1", "t3", "t0", "t2", "x"], rep) == ["t0", "t3", "x"]


def test_study_projects_original_rankings_and_tables_paired_deltas():
    import pandas as pd

    from lethe_core.experiments.dedup_study import evaluate_projected, systems_table
    from lethe_core.pools.cache import PackedPools

    ds = make_dataset()
    r = dedup(ds, VECTORS, 0.95)
    # One pool per query, in RRF order: positions of t2, t1, t4, t3 (dense and BM25 agree; logits reverse nothing).
    doc = np.array([2, 1, 4, 3], np.int32)
    n, qids = len(doc), [q.id for q in ds.queries]
    p = PackedPools(qids, np.arange(0, n * len(qids) + 1, n), np.tile(doc, len(qids)), np.tile(1.0 / (60 + np.arange(n)), 3),
                    np.tile(np.array([4.0, 3.0, 2.0, 1.0], np.float32), 3), np.tile(np.array([4.0, 3.0, 2.0, 1.0], np.float32), 3),
                    np.full(3, np.nan, np.float32), np.tile(np.arange(n, dtype=np.int16), 3), np.tile(np.arange(n, dtype=np.int16), 3))
    proj = evaluate_projected(ds, p, r)
    # q0: t2, t1 both project onto t0 at rank 1 -> remapped qrels {t0: 2} are found at rank 1.
    assert set(proj["system"]) >= {"vector", "full"}
    assert proj[(proj.query_id == "q0") & (proj.system == "vector")]["ndcg@10"].item() == pytest.approx(1.0)
    per_query = pd.concat([proj.assign(arm="original"), proj.assign(arm="dedup_remapped", **{"ndcg@10": proj["ndcg@10"] + 0.0})])
    table = systems_table(per_query)
    row = table[(table.system == "full") & (table.arm == "dedup_remapped")].iloc[0]
    assert row["delta"] == pytest.approx(0.0) and row["n_queries"] == 3
