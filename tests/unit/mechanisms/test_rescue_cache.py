"""The rescue cache's update and lookup rules on hand-made vectors."""

from __future__ import annotations

import numpy as np
import pytest

from lethe_core.mechanisms.rescue_cache import RescueCache, RescueParams


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_mine_keeps_only_accepted_scores_and_refreshes_repeats():
    cache = RescueCache(2, RescueParams(accept=0.0))
    assert cache.mine(0, "q", unit(1, 0), np.array([10, 11, 12]), np.array([0.5, -0.1, 0.0])) == 2  # -0.1 rejected, 0.0 kept
    assert sorted(cache.docs.tolist()) == [10, 12]
    assert cache.mine(7, "q", unit(1, 0), np.array([10]), np.array([2.0])) == 0  # same query, same turn: refreshed
    j = cache.docs.tolist().index(10)
    assert cache.steps[j] == 7 and cache.scores[j] == 2.0 and len(cache) == 2
    assert cache.mine(8, "other", unit(1, 0), np.array([10]), np.array([1.0])) == 1  # another query: its own entry


def test_capacity_evicts_the_lowest_score():
    cache = RescueCache(2, RescueParams(accept=0.0, capacity=2))
    cache.mine(0, "a", unit(1, 0), np.array([1, 2]), np.array([0.9, 0.1]))
    cache.mine(1, "b", unit(0, 1), np.array([3]), np.array([0.5]))
    assert sorted(cache.docs.tolist()) == [1, 3] and cache.evicted == 1


def test_entries_age_out():
    cache = RescueCache(2, RescueParams(accept=0.0, age_out=10))
    cache.mine(0, "a", unit(1, 0), np.array([1]), np.array([1.0]))
    cache.mine(11, "b", unit(0, 1), np.array([2]), np.array([1.0]))
    assert cache.docs.tolist() == [2] and cache.aged_out == 1


def test_lookup_needs_similar_queries_ranks_by_similarity_times_score_and_caps():
    cache = RescueCache(2, RescueParams(accept=-10.0, min_similarity=0.5, max_added=2))
    cache.mine(0, "near", unit(1, 0.1), np.array([1, 2, 3]), np.array([3.0, 0.0, -2.0]))
    cache.mine(0, "far", unit(0, 1), np.array([4]), np.array([5.0]))  # cosine to the lookup query ~0.1: never returned
    docs, weights = cache.lookup(unit(1, 0))
    assert docs.tolist() == [1, 2]  # best two by sim x sigmoid(score); turn 3 is cut by max_added
    assert weights[0] > weights[1] > 0
    assert cache.lookup(unit(1, 0), exclude=np.array([1]))[0].tolist() == [2, 3]  # turns already in the pool are skipped
    assert cache.lookup(unit(-1, 0))[0].tolist() == []


def test_bad_parameters_fail_early():
    with pytest.raises(ValueError):
        RescueParams(mine_every=0)
