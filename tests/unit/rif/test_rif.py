"""RIF engine invariants (docs/method.md, "Clustered RIF"): strengths, caps, floors, decay, cluster isolation, alpha = 0."""

import math

import numpy as np
import pandas as pd
import pytest

from lethe_core.datasets import Corpus, Dataset, Query, Turn
from lethe_core.pools.cache import PackedPools
from lethe_core.rif.clusters import QueryClusters
from lethe_core.rif.protocols import ReplayContext, hot_cold_schedule, run_heldout, run_paper, run_prequential
from lethe_core.rif.replay import Arm, learn, retrieve, standard_arms
from lethe_core.rif.rules import sigmoid, strength
from lethe_core.rif.state import RIFParams, SuppressionState


def test_strengths_at_listed_points():
    x = np.array([0.0, 0.0, 2.0])
    assert np.allclose(strength("uniform", np.array([0, 15, 29]), np.array([0, 0, 0]), x, 30),
                       [0.5, 0.25, (1 / 30) * sigmoid(-2.0)])
    # rank-gap: only drops count, proportional to the drop.
    assert np.allclose(strength("gap", np.array([2, 5, 0]), np.array([20, 4, 0]), np.zeros(3), 30), [18 / 30 * 0.5, 0, 0])
    assert np.all(strength("uniform", np.array([0]), np.array([0]), np.array([-5.0]), 1) == 0)
    assert np.all(strength("gap", np.array([0]), np.array([3]), np.array([-5.0]), 1) == 0)
    with pytest.raises(ValueError):
        strength("other", np.array([0]), np.array([0]), np.array([0.0]), 30)


def test_update_caps_floors_and_decays_lazily():
    st = SuppressionState(2, 5, RIFParams(eta=0.1, decay=0.005))
    pool = np.array([0, 1, 2])
    for step in range(1, 40):
        st.update(0, step, pool, np.array([1.0, 1.0, 1.0]), np.array([False, False, True]))
    assert st.values[0, 0] <= 1.0 and st.values[0, 0] > 0.9  # capped at 1
    assert st.values[0, 2] == 0.0  # winners are floored at 0
    before = st.values[0, 0]
    st.update(0, 140, np.array([0]), np.array([0.0]), np.array([False]))  # touched 101 steps later, no new strength
    assert st.values[0, 0] == pytest.approx(before * math.exp(-0.005 * 101))
    assert st.values[1].sum() == 0  # another cluster is untouched: cue-dependent isolation
    st.values[0, 3], st.last[0, 3] = 0.5, 0
    assert st.penalty(0, np.array([3]), 1000)[0] == 0.5  # lazy: an entry out of the pool never decays


def test_eager_decay_reads_the_decayed_value():
    st = SuppressionState(1, 2, RIFParams(eager=True, decay=0.01))
    st.values[0, 1], st.last[0, 1] = 0.8, 10
    assert st.penalty(0, np.array([1]), 110)[0] == pytest.approx(0.8 * math.exp(-1.0))


def test_winners_are_relieved_by_005():
    st = SuppressionState(1, 2)
    st.values[0, 0], st.last[0, 0] = 0.3, 5
    st.update(0, 5, np.array([0]), np.array([1.0]), np.array([True]))
    assert st.values[0, 0] == pytest.approx(0.25)


# ---- a tiny packed pool: 3 queries over 40 entries -------------------------------------------------


def tiny_context(seed=0):
    rng = np.random.default_rng(seed)
    turns = [Turn(f"c{i % 2}:t{i}", f"text {i}", f"c{i % 2}:s{i // 10}", f"c{i % 2}") for i in range(40)]
    corpus = Corpus(turns)
    queries, rows = [], []
    for qi in range(6):
        docs = rng.permutation(40)[:35]
        rel = corpus.ids[docs[rng.integers(0, 35)]]
        queries.append(Query(f"q{qi}", f"query {qi}", {rel: 1}, conversation_id=f"c{qi % 2}"))
        for r, d in enumerate(docs):
            rows.append({"query_id": f"q{qi}", "doc_idx": int(d), "rrf_rank": r, "rrf": 1 / (60 + r), "logit": float(rng.normal()),
                         "bm25_rank": r, "dense_rank": -1})
    frame = pd.DataFrame(rows).assign(calibrated=lambda f: f["logit"], fuse_w=np.nan)
    ds = Dataset("tiny", "tiny", corpus, queries)
    packed = PackedPools.from_frame(frame, [q.id for q in queries])
    vecs = rng.normal(size=(6, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return ReplayContext(ds, packed, vecs, "ce")


def test_alpha_zero_changes_nothing():
    ctx = tiny_context()
    arms = [Arm("baseline", "baseline"), Arm("global-uniform", "rif", 1, "uniform", RIFParams(alpha=0.0)),
            Arm("clustered2-gap", "rif", 2, "gap", RIFParams(alpha=0.0))]
    res = run_paper(ctx, arms, seed=1, burn_in=300, snapshot_every=0)
    df = pd.DataFrame(res.rows)
    base = df[df["arm"] == "baseline"].set_index("query_id")["top10"]
    for arm in ("global-uniform", "clustered2-gap"):
        assert df[df["arm"] == arm].set_index("query_id")["top10"].equals(base)
    assert res.suppressed["global-uniform"]["all"]["entries"] > 0  # state still learned, just never applied


def test_penalty_reorders_the_union_before_the_cut():
    ctx = tiny_context()
    arm = Arm("global-uniform", "rif", 1, "uniform", RIFParams(alpha=0.3))
    st = SuppressionState(1, 40, arm.params)
    top = ctx.pools.doc_idx[ctx.pools.rows(0)][0]
    st.values[0, top] = 1.0  # one strong suppression outweighs the whole RRF range
    ret = retrieve(ctx.pools, 0, arm, st, 0, 1, "ce")
    assert 0 not in ret.pool and len(ret.pool) == 30
    learn(ctx.pools, arm, st, 0, 2, ret)
    assert (st.last[0, ctx.pools.doc_idx[ctx.pools.rows(0)][ret.pool]] == 2).all()


def test_control_reranks_the_whole_union_and_baseline_the_top_p():
    ctx = tiny_context()
    assert len(retrieve(ctx.pools, 0, Arm("control", "control"), None, 0, 0, "ce").pool) == 35
    assert list(retrieve(ctx.pools, 0, Arm("baseline", "baseline"), None, 0, 0, "ce").pool) == list(range(30))


def test_protocols_are_deterministic_and_complete():
    ctx = tiny_context()
    arms = standard_arms(ks=(2,))
    a = pd.DataFrame(run_paper(ctx, arms, seed=3, burn_in=200, snapshot_every=100).rows)
    b = pd.DataFrame(run_paper(ctx, arms, seed=3, burn_in=200, snapshot_every=100).rows)
    assert a.equals(b)
    assert set(a["bucket"]) <= {"hot", "cold", "unseen"} and len(a) == 6 * len(arms)
    h = pd.DataFrame(run_heldout(ctx, arms, seed=3, burn_in=100, snapshot_every=0).rows)
    assert set(h["split"]) == {"A->B", "B->A"} and sorted(h[h["arm"] == "baseline"]["query_id"]) == [f"q{i}" for i in range(6)]
    p = run_prequential(ctx, arms, seed=3, bootstrap=3, snapshot_every=2)
    pq = pd.DataFrame(p.rows)
    assert sorted(pq[pq["arm"] == "clustered2-gap"]["position"]) == list(range(1, 7))
    assert p.snapshots and {s["step"] for s in p.snapshots} == {2, 4, 6}


def test_schedule_is_the_references_draw_for_draw():
    """n = 500, seed 42, by hand: hot = int(0.2 n) = 100 positions from rng.choice (draw order kept), cold = the
    other 400 in position order; then per step one rng.random() and one rng.integers into the hot or cold list."""
    sched, hot = hot_cold_schedule(500, 12, seed=42)
    rng = np.random.default_rng(42)
    hot_by_hand = rng.choice(500, size=100, replace=False)
    cold_by_hand = [i for i in range(500) if i not in set(hot_by_hand.tolist())]
    by_hand = []
    for _ in range(12):
        if rng.random() < 0.7:
            by_hand.append(int(hot_by_hand[rng.integers(len(hot_by_hand))]))
        else:
            by_hand.append(cold_by_hand[rng.integers(len(cold_by_hand))])
    assert list(hot) == list(hot_by_hand) and len(hot) == 100
    assert sched.tolist() == by_hand == [480, 475, 127, 125, 335, 151, 45, 432, 98, 199, 85, 244]
    assert len(hot_cold_schedule(323, 1, seed=42)[1]) == 64  # int(), not round(): NFCorpus has 64 hot queries


def test_rif_learns_from_the_teacher_in_every_second_stage_mode():
    """`fused` changes only the evaluated answer list: r_final and the winners are the cross-encoder's own."""
    ctx = tiny_context(seed=2)
    ctx.pools.fuse_w[:] = 0.6
    arm = Arm("a", "rif", 1, "gap", RIFParams())
    states, answers = {}, {}
    for mode in ("ce", "fused"):
        st = SuppressionState(1, 40, arm.params)
        ret = retrieve(ctx.pools, 0, arm, st, 0, 0, mode)
        conf = ctx.pools.read_logit[ret.rows][ret.pool]
        assert list(np.argsort(ret.r_final)) == list(np.argsort(-conf, kind="stable"))
        learn(ctx.pools, arm, st, 0, 0, ret)
        states[mode], answers[mode] = st.values.copy(), ret.order
    np.testing.assert_array_equal(states["ce"], states["fused"])
    assert list(answers["ce"]) != list(answers["fused"])


def test_schedule_hot_share_and_seed():
    sched, hot = hot_cold_schedule(1000, 20000, seed=42)
    assert len(hot) == 200
    assert np.isin(sched, hot).mean() == pytest.approx(0.7 + 0.3 * 0, abs=0.02)
    assert np.array_equal(sched, hot_cold_schedule(1000, 20000, seed=42)[0])


def test_clusters_global_and_kmeans():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(3, 16)) * 5
    pts = np.vstack([c + rng.normal(size=(50, 16)) for c in centers]).astype(np.float32)
    assert QueryClusters.fit(pts, 1).assign(pts).max() == 0
    labels = QueryClusters.fit(pts, 3, seed=42).assign(pts)
    assert len(set(labels[:50])) == 1 and len(set(labels)) == 3
    with pytest.raises(ValueError):
        QueryClusters.fit(pts[:2], 3)


def test_fast_replay_metrics_match_the_reference_metrics():
    from lethe_core.measures.metrics import ndcg_at_k, recall_at_k
    from lethe_core.rif.replay import score

    ctx = tiny_context(seed=5)
    ids = ctx.dataset.corpus.ids
    for arm in (Arm("baseline", "baseline"), Arm("control", "control")):
        for i, qid in enumerate(ctx.pools.query_ids):
            ret = retrieve(ctx.pools, i, arm, None, 0, 0, "ce")
            docs = ctx.pools.doc_idx[ret.rows]
            ranked = [ids[d] for d in docs[ret.order]]
            qrels = ctx.queries[qid].qrels
            ndcg, recall, pool_recall = score(ctx.pools, ctx.judgements, i, ret)
            assert ndcg == pytest.approx(ndcg_at_k(ranked, qrels, 10))
            assert recall == pytest.approx(recall_at_k(ranked, qrels, 10))
            assert pool_recall == pytest.approx(recall_at_k([ids[d] for d in docs[ret.pool]], qrels, len(ret.pool)))


def test_cap_and_reinforce_defaults_are_the_papers_and_can_be_changed():
    assert RIFParams().cap == 1.0 and RIFParams().reinforce == 0.05
    st = SuppressionState(1, 3, RIFParams(eta=1.0, decay=0.0, cap=2.5, reinforce=0.1))
    for step in range(5):
        st.update(0, step, np.array([0, 1]), np.array([1.0, 1.0]), np.array([False, False]))
    assert st.values[0, 0] == pytest.approx(2.5)  # capped at `cap`, not at 1
    st.update(0, 5, np.array([0]), np.array([1.0]), np.array([True]))
    assert st.values[0, 0] == pytest.approx(2.4)  # winners relieved by `reinforce`


def test_entry_clusters_are_fit_on_the_corpus_and_need_its_vectors():
    ctx = tiny_context(seed=1)
    arm = Arm("entry2-gap", "rif", 2, "gap", RIFParams(), cues="entry")
    with pytest.raises(ValueError, match="entry_vectors"):
        run_paper(ctx, [Arm("baseline", "baseline"), arm], seed=1, burn_in=50, snapshot_every=0)
    rng = np.random.default_rng(4)
    ev = rng.normal(size=(40, 8)).astype(np.float32)
    ctx.entry_vectors = ev / np.linalg.norm(ev, axis=1, keepdims=True)
    query_arm = Arm("clustered2-gap", "rif", 2, "gap", RIFParams())
    res = run_paper(ctx, [Arm("baseline", "baseline"), arm, query_arm], seed=1, burn_in=200, snapshot_every=0)
    df = pd.DataFrame(res.rows)
    expected = QueryClusters.fit(ctx.entry_vectors, 2, seed=1).assign(ctx.query_vectors)
    got = df[df["arm"] == "entry2-gap"].set_index("query_id")["cluster"].reindex(ctx.pools.query_ids).to_numpy()
    np.testing.assert_array_equal(got, expected)
    assert res.suppressed["entry2-gap"]["all"]["entries"] > 0
    pre = pd.DataFrame(run_prequential(ctx, [Arm("baseline", "baseline"), arm], seed=1, bootstrap=3, snapshot_every=0).rows)
    assert set(pre[pre["arm"] == "entry2-gap"]["cluster"]) <= {0, 1}  # entry cues are fit before the first query


def test_experiment_run_ids_ignore_new_options_at_their_defaults():
    """Runs published before `cap` / `reinforce` existed keep their ids (and still load)."""
    from lethe_core.experiments.rif import _HASH_OPTIONAL, RIFExperiment

    assert _HASH_OPTIONAL == {"cap": RIFExperiment().cap, "reinforce": RIFExperiment().reinforce}
    e = RIFExperiment(arms=["entry30-gap", "global-uniform"])
    assert [a.name for a in e.arm_list()] == ["baseline", "entry30-gap", "global-uniform"]
    assert e.arm_list()[1].cues == "entry"
    assert all(a.cues == "query" for a in RIFExperiment().arm_list())  # the default table is unchanged


def test_the_default_reading_is_the_raw_logit_so_a_confident_positive_is_barely_penalised():
    """The paper's reading (DESIGN.md section 14): sigmoid(-x) of the raw logit. Our teacher's calibration moves every
    logit below 0, which made a confident positive (raw +8) as suppressible as a rejection; by default it is not."""
    from lethe_core.experiments.setup import DataSpec
    from lethe_core.rif.rules import strength

    frame = pd.DataFrame({"query_id": ["q", "q"], "doc_idx": [0, 1], "rrf_rank": [0, 1], "rrf": [1 / 60, 1 / 61],
                          "logit": [8.0, -6.0], "calibrated": [-0.5, -9.0], "fuse_w": np.nan, "bm25_rank": [0, 1], "dense_rank": [0, 1]})
    r_init = np.array([0, 1])
    raw = PackedPools.from_frame(frame, ["q"], DataSpec().calibration)
    assert DataSpec().calibration is False and np.array_equal(raw.read_logit, raw.logit)
    s = strength("uniform", r_init, r_init, raw.read_logit, pool_size=30)
    assert s[0] == pytest.approx(3.35e-4, rel=1e-2) and s[1] > 0.9  # sigmoid(-8) vs a rejection's sigmoid(6)
    cal = PackedPools.from_frame(frame, ["q"], calibration=True)  # the ablation
    assert strength("uniform", r_init, r_init, cal.read_logit, pool_size=30)[0] > 0.6
