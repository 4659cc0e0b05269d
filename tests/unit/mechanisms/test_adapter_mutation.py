"""Adapter mutation on hand-made vectors: the norm clip, the guided rule's directions, acceptance, the centroid arm."""

from __future__ import annotations

import numpy as np
import pytest

from lethe_core.mechanisms.adapter_mutation import AdapterMutation, AdapterParams, clip_norm, direction
from lethe_core.mechanisms.usage_stream import normalize

Q = normalize(np.array([1.0, 0, 0, 0], dtype=np.float32))
BASE = np.stack([normalize(np.array(v, dtype=np.float32)) for v in ([0.5, 0.866, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0])])


def test_norm_clip_at_half():
    a = clip_norm(np.array([3.0, 4.0, 0, 0]), 0.5)
    assert np.linalg.norm(a) == pytest.approx(0.5) and a[0] / a[1] == pytest.approx(0.75)
    small = np.array([0.1, 0.2, 0, 0])
    assert np.allclose(clip_norm(small, 0.5), small)
    m = AdapterMutation(BASE, "random", AdapterParams(random_sigma=10.0), seed=0)
    for _ in range(20):
        m.adapter[0] = m.propose(0, Q, +1)
        assert np.linalg.norm(m.adapter[0]) <= 0.5 + 1e-6


def test_guided_direction_toward_away_skip():
    assert direction(0.1) == 1 and direction(-4.1) == -1
    assert direction(0.0) == 0 and direction(-4.0) == 0 and direction(-2.0) == 0


def test_guided_update_moves_toward_away_and_skips():
    m = AdapterMutation(BASE, "guided", seed=1)
    m.affinity[:] = 0.0  # σ = σ0 = 0.05: large enough to move
    before = m.eff.copy()
    for step in range(30):
        m.update(step, Q, np.array([0, 1, 2]), np.array([5.0, -6.0, -1.0]))
    assert m.eff[0] @ Q > before[0] @ Q + 0.005  # positive verdict: toward
    assert m.eff[1] @ Q < before[1] @ Q - 0.005  # below -4: away
    assert np.array_equal(m.eff[2], before[2]) and m.generation[2] == 0  # in between: skipped
    assert m.counts["skip"] == 30 and m.counts["toward"] == 30 and m.counts["away"] == 30
    assert np.allclose(np.linalg.norm(m.eff, axis=1), 1)
    assert np.allclose(m.eff[0], normalize(m.base[0] + m.adapter[0]))


def test_acceptance_requires_a_gain_above_delta():
    tiny = AdapterParams(sigma0=1e-6)  # proposals too small to gain 0.005
    m2 = AdapterMutation(BASE, "guided", tiny, seed=0)
    assert not any(m2.step_turn(0, Q, +1) for _ in range(10)) and m2.generation[0] == 0
    assert not m2.adapter.any()  # rejected proposals leave the adapter as it was
    m3 = AdapterMutation(BASE, "guided", AdapterParams(sigma0=1e-6, delta=0.0), seed=0)
    assert m3.step_turn(0, Q, +1) and m3.adapter.any()  # the same proposal passes once δ allows it


def test_random_arm_moves_toward_the_query_whatever_the_verdict():
    m = AdapterMutation(BASE, "random", seed=2)
    before = m.eff.copy()
    for step in range(40):
        m.update(step, Q, np.array([0]), np.array([-9.0]))
    assert m.eff[0] @ Q > before[0] @ Q and m.counts["away"] == 0


def test_centroid_arm_pulls_co_retrieved_turns_together():
    m = AdapterMutation(BASE, "centroid", seed=3)
    m.affinity[:] = 0.0
    spread = lambda e: float(np.mean(e[[0, 1, 2]] @ normalize(e[[0, 1, 2]].mean(axis=0))))
    s0 = spread(m.eff)
    for step in range(40):
        m.update(step, Q, np.array([0, 1, 2]), np.array([1.0, 2.0, 3.0]))
    assert spread(m.eff) > s0
    assert m.diagnostics()["anchor_cos"] < 1.0


def test_bad_arm_rejected():
    with pytest.raises(ValueError):
        AdapterMutation(BASE, "nope")
