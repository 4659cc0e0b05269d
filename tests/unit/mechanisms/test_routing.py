"""GC routing index (lethe_core.mechanisms.routing): the update rule on hand-made inputs."""

from __future__ import annotations

import numpy as np
import pytest

from lethe_core.mechanisms.routing import OnlineClusters, RoutingIndex, RoutingParams


def test_route_created_only_for_a_positive_verdict():
    idx = RoutingIndex()
    idx.observe(0, [1, 2, 3], [2.0, 0.0, -1.5], step=0)
    assert set(idx.routes[0]) == {1}
    assert idx.routes[0][1].affinity == pytest.approx(1 / (1 + np.exp(-2.0)))
    assert idx.routes[0][1].tier == "naive"


def test_tier_promotion_naive_gc_memory_and_lookup():
    idx = RoutingIndex()
    idx.observe(0, [7], [3.0], 0)
    idx.observe(0, [7], [3.0], 1)
    assert idx.routes[0][7].tier == "naive" and idx.lookup(0) == []  # naive routes are never looked up
    idx.observe(0, [7], [3.0], 2)  # third hit: gc, and affinity ~0.95 >= 0.6: memory
    assert idx.routes[0][7].tier == "memory"
    assert idx.lookup(0) == [7]
    low = RoutingIndex(RoutingParams(memory_affinity=0.99))
    for s in range(3):
        low.observe(0, [7], [0.5], s)
    assert low.routes[0][7].tier == "gc"


def test_affinity_ema_and_decay_spare_memory_routes():
    idx = RoutingIndex()
    idx.observe(0, [1], [1.0], 0)
    a0 = idx.routes[0][1].affinity
    idx.observe(0, [1], [-3.0], 1)
    expected = 0.7 * a0 + 0.3 / (1 + np.exp(3.0))
    assert idx.routes[0][1].affinity == pytest.approx(expected)
    idx.observe(0, [2], [1.0], 2)  # route 1 not observed: decays x0.99
    assert idx.routes[0][1].affinity == pytest.approx(expected * 0.99)
    for s in range(3, 6):
        idx.observe(0, [9], [5.0], s)
    assert idx.routes[0][9].tier == "memory"
    before = idx.routes[0][9].affinity
    idx.observe(0, [2], [1.0], 6)
    assert idx.routes[0][9].affinity == before  # memory routes do not decay


def test_apoptosis_needs_low_affinity_and_idleness():
    idx = RoutingIndex(RoutingParams(decay=0.5))
    idx.observe(0, [1], [0.1], 0)
    for s in range(1, 10):
        idx.observe(0, [2], [1.0], s)  # affinity of 1 falls below 0.1 quickly, but it is not idle > 500 yet
    assert 1 in idx.routes[0]
    idx.observe(0, [2], [1.0], 600)
    assert 1 not in idx.routes[0] and idx.removed == 1


def test_cluster_cap_evicts_the_weakest_non_memory_route():
    idx = RoutingIndex(RoutingParams(max_routes=2))
    idx.observe(0, [1, 2], [0.5, 1.0], 0)
    idx.observe(0, [3], [0.1], 1)  # weaker than both (after decay too): not admitted
    assert set(idx.routes[0]) == {1, 2}
    idx.observe(0, [3], [4.0], 2)
    assert set(idx.routes[0]) == {2, 3}


def test_cluster_creation_threshold_and_frozen_assignment():
    cl = OnlineClusters(2)
    assert cl.assign(np.array([1.0, 0.0]), learn=False) == -1  # frozen: never creates
    assert cl.assign(np.array([1.0, 0.0])) == 0
    assert cl.assign(np.array([np.cos(0.5), np.sin(0.5)])) == 0  # cosine 0.88 >= 0.7: joins, centroid moves
    assert cl.centroids[0][1] > 0 and np.linalg.norm(cl.centroids[0]) == pytest.approx(1.0)
    assert cl.assign(np.array([0.0, 1.0])) == 1  # cosine < 0.7: a new cluster
    assert cl.k == 2
    assert cl.assign(np.array([0.1, 1.0]), learn=False) == 1 and cl.k == 2
    with pytest.raises(ValueError):
        RoutingParams(new_cluster_cos=1.5)
