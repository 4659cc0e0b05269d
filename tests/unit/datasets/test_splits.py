"""The protocol vocabulary (`lethe_core.datasets.splits`): one name per split, and each split pinned to the
implementation the studies used before it moved here (rif.protocols, usage_stream, adaptive_depth_study)."""

import numpy as np
import pytest

from lethe_core.datasets import splits

CONVS = ["c2", "c1", "c1", "c3", "c2", "c4", "c1", "c4", "c3", "c3"]


def test_protocol_names_are_distinct_and_heldout_within_is_its_own():
    assert len(set(splits.PROTOCOLS)) == len(splits.PROTOCOLS)
    assert splits.HELDOUT == "heldout" and splits.HELDOUT_WITHIN == "heldout-within"
    assert splits.check_protocol("heldout", ("paper", "heldout")) == "heldout"
    with pytest.raises(ValueError, match="one of"):
        splits.check_protocol("heldout-within", ("paper", "heldout"))


def test_conversation_halves_are_sorted_conversation_halves():
    a, b = splits.conversation_halves(CONVS)
    assert {CONVS[i] for i in a} == {"c1", "c2"} and {CONVS[i] for i in b} == {"c3", "c4"}
    assert sorted([*a, *b]) == list(range(len(CONVS)))
    # a query without a conversation is its own conversation, named by its id (as rif.protocols did)
    a, b = splits.conversation_halves(["c1", None, "c2", None], ["q0", "a-query", "q2", "z-query"])
    assert a.tolist() == [0, 1] and b.tolist() == [2, 3]  # sorted: a-query, c1 | c2, z-query
    with pytest.raises(ValueError, match="two conversations"):
        splits.conversation_halves(["c1", "c1"])


def test_heldout_falls_back_to_seeded_halves_without_conversations():
    a, b = splits.heldout_halves(CONVS)
    assert (a.tolist(), b.tolist()) == tuple(x.tolist() for x in splits.conversation_halves(CONVS))
    x, y = splits.heldout_halves([None] * 12, seed=4)
    assert len(x) + len(y) == 12 and not set(x) & set(y)
    assert splits.heldout_halves([None] * 12, seed=4)[0].tolist() == x.tolist()
    assert splits.heldout_halves([None] * 12, seed=5)[0].tolist() != x.tolist()
    with pytest.raises(ValueError, match="two queries"):
        splits.seeded_halves(1, 0)


def test_within_conversation_halves_ask_about_every_conversation():
    a, b = splits.within_conversation_halves(CONVS, seed=3)
    assert {CONVS[i] for i in a} == {CONVS[i] for i in b} == set(CONVS)
    assert sorted([*a, *b]) == list(range(len(CONVS)))
    # the adaptive-depth study's former `query_halves`, written out: per sorted conversation, a seeded permutation
    rng, ref_a = np.random.default_rng(3), []
    conv = np.asarray(CONVS, dtype=object)
    for c in sorted(set(CONVS)):
        idx = rng.permutation(np.flatnonzero(conv == c))
        ref_a += idx[: len(idx) // 2].tolist()
    assert a.tolist() == sorted(ref_a)


def test_train_eval_pairs_name_their_splits():
    assert [s for *_, s in splits.train_eval_pairs("paper", CONVS)] == ["all"]
    held = splits.train_eval_pairs("heldout", CONVS)
    assert [s for *_, s in held] == ["A->B", "B->A"] and held[0][0].tolist() == held[1][1].tolist()
    within = splits.train_eval_pairs("heldout-within", CONVS, seed=3)
    assert within[0][0].tolist() == splits.within_conversation_halves(CONVS, 3)[0].tolist()
    with pytest.raises(ValueError, match="prequential"):
        splits.train_eval_pairs("prequential", CONVS)


def test_seeded_conversation_halves_are_whole_conversations_drawn_per_seed():
    convs = [f"c{i}" for i in range(10) for _ in range(3)]
    drawn = set()
    for seed in range(42, 47):
        a, b = splits.conversation_halves(convs, seed=seed)
        side_a, side_b = {convs[i] for i in a}, {convs[i] for i in b}
        assert not side_a & side_b and len(side_a) == 5 and len(side_b) == 5, "whole conversations, half on each side"
        assert (a.tolist(), b.tolist()) == tuple(x.tolist() for x in splits.conversation_halves(convs, seed=seed)), "deterministic"
        drawn.add(frozenset(side_a))
    assert len(drawn) > 1, "several seeds give several splits"
    pairs = splits.train_eval_pairs(splits.HELDOUT, convs, split_seed=42)
    assert pairs[0][0].tolist() == splits.conversation_halves(convs, seed=42)[0].tolist()
