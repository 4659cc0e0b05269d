"""Embedding mutation on hand-made vectors: accepted and rejected mutants (δ, anchor), tiers, apoptosis, decay."""

from __future__ import annotations

import numpy as np
import pytest

from lethe_core.mechanisms.embedding_mutation import APOPTOTIC, GC, MEMORY, NAIVE, EmbeddingMutation, MutationParams
from lethe_core.mechanisms.usage_stream import normalize


def unit(*x):
    return normalize(np.array(x, dtype=np.float32))


Q = unit(1, 0, 0)
E = unit(0.6, 0.8, 0)  # cos to Q = 0.6


def mech(arm="adaptive", **kw):
    return EmbeddingMutation(np.stack([E, unit(0, 0, 1)]), arm, MutationParams(**kw), seed=0)


def test_best_mutant_accepted_when_it_gains_more_than_delta_within_the_anchor():
    m = mech()
    mutants = np.stack([unit(0.7, 0.714, 0), unit(0.65, 0.76, 0)])  # gains 0.1 and 0.05, anchors 0.99+
    assert m.accept(0, Q, mutants) == 0


def test_gain_below_delta_rejected():
    m = mech()
    mutants = np.stack([unit(0.605, 0.796, 0)])  # cos to Q 0.605: gain 0.005 < δ = 0.01
    assert m.accept(0, Q, mutants) is None


def test_anchor_below_threshold_rejected_even_with_a_large_gain():
    m = mech()
    far = unit(1, -0.3, 0)  # cos to Q 0.958 (gain 0.36) but cos to the original 0.35 < 0.7
    assert float(far @ E) < 0.7
    assert m.accept(0, Q, np.stack([far])) is None
    assert mech(anchor=0.3).accept(0, Q, np.stack([far])) == 0  # the anchor is what rejected it


def test_random_arm_skips_the_fitness_test_but_keeps_the_anchor():
    m = mech("random")
    worse = unit(0.5, 0.86, 0)  # loses cosine to Q, stays near the original
    assert m.accept(0, Q, np.stack([worse])) == 0
    assert m.accept(0, Q, np.stack([unit(1, -0.3, 0)])) is None


def test_adaptive_sigma_shrinks_with_affinity_random_is_fixed():
    m = mech()
    m.affinity[0] = 0.5
    assert m.sigma(0) == pytest.approx(0.05 * 0.25)
    m.affinity[0] = 1.0
    assert m.sigma(0) == 0.0
    assert mech("random").sigma(0) == 0.025
    assert m.propose(1).shape == (5, 3) and np.allclose(np.linalg.norm(m.propose(1), axis=1), 1)


def test_tier_promotion_naive_gc_memory():
    m = mech()
    logits = np.array([8.0, -8.0])
    for step in range(3):
        m.update(step, Q, np.array([0, 1]), logits)
    assert m.tier[0] == GC and m.tier[1] == GC  # 3 retrievals each
    m.generation[0] = 5
    m.affinity[0] = 0.8
    m.transitions(3)
    assert m.tier[0] == MEMORY and m.weights()[0] == pytest.approx(1.15)
    m.generation[1] = 5  # affinity of the -8 turn is far below 0.75: stays gc
    m.transitions(3)
    assert m.tier[1] == GC


def test_apoptosis_needs_low_affinity_and_long_idleness():
    m = mech()
    m.tier[:] = GC
    m.affinity[:] = [0.1, 0.1]
    m.last[:] = [0, 500]
    m.transitions(1001)
    assert m.tier[0] == APOPTOTIC and m.tier[1] == GC  # turn 1 idle only 501 steps
    assert m.weights()[0] == 0.0
    m.affinity[1] = 0.2
    m.transitions(5000)
    assert m.tier[1] == GC  # affinity 0.2 >= 0.15


def test_decay_only_idle_non_memory_affinities():
    m = mech()
    m.affinity[:] = 0.5
    m.tier[:] = [MEMORY, NAIVE]
    m.decay(100)
    assert m.affinity[0] == 0.5 and m.affinity[1] == pytest.approx(0.5 * np.exp(-0.01))
    m.last[1] = 50
    m.decay(100)  # idle 50 < 100: untouched
    assert m.affinity[1] == pytest.approx(0.5 * np.exp(-0.01))


def test_update_moves_only_gc_turns_and_records_drift():
    m = mech()
    m.tier[0] = GC
    before = m.vectors.copy()
    m.update(1, Q, np.array([0, 1]), np.array([-2.0, 1.0]))  # affinity EMA of sigmoid(logit)
    assert m.affinity[0] == pytest.approx(0.8 * 0.5 + 0.2 / (1 + np.exp(2.0)))
    assert np.array_equal(m.vectors[1], before[1])  # naive turn: never mutated
    d = m.diagnostics()
    assert d["mutations_tried"] == 1 and d["tier_gc"] == 1
    if m.generation[0]:
        assert m.vectors[0] @ Q > before[0] @ Q + 0.01 and d["anchor_cos"] >= 0.7
    else:
        assert np.array_equal(m.vectors[0], before[0]) and d["touched"] == 0
