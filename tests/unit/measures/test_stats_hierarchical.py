"""The conversation-level (hierarchical) paired bootstrap: seeded, the plain bootstrap with one group, wider when
questions of one conversation move together, and fast at the study's size."""

import time

import numpy as np
import pytest

from lethe_core.measures import stats


def _pairs(n=1500, groups=10, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(size=n)
    return base + rng.normal(0.01, 0.1, n), base, np.repeat(np.arange(groups), n // groups)


def test_seeded_and_brackets_the_mean():
    t, b, g = _pairs()
    a = stats.hierarchical_paired_ci(t, b, g, n_resamples=2000, seed=3)
    assert a == stats.hierarchical_paired_ci(t, b, g, n_resamples=2000, seed=3)
    assert a.lo < a.mean < a.hi and a.mean == pytest.approx(np.mean(t - b))


def test_one_group_is_the_plain_paired_bootstrap():
    t, b, _ = _pairs()
    one = stats.hierarchical_paired_ci(t, b, np.zeros(t.size), seed=1)
    plain = stats.paired_delta_ci(t, b, seed=2)
    assert one.hi - one.lo == pytest.approx(plain.hi - plain.lo, rel=0.08)
    assert one.lo == pytest.approx(plain.lo, abs=0.002) and one.hi == pytest.approx(plain.hi, abs=0.002)


def test_independent_groups_change_little():
    """When the conversation carries no shared effect, resampling it first only adds a little spread (both stages resample
    the within-group noise)."""
    t, b, g = _pairs()
    h, plain = stats.hierarchical_paired_ci(t, b, g, seed=1), stats.paired_delta_ci(t, b, seed=1)
    assert 0.95 < (h.hi - h.lo) / (plain.hi - plain.lo) < 1.6


def test_a_shared_effect_per_conversation_widens_the_ci_to_the_spread_of_conversations():
    rng = np.random.default_rng(4)
    groups = np.repeat(np.arange(10), 150)
    shift = rng.normal(0.01, 0.03, 10)
    base = rng.uniform(size=groups.size)
    treat = base + shift[groups]  # every question of a conversation moves by the same amount
    h, plain = stats.hierarchical_paired_ci(treat, base, groups, seed=0), stats.paired_delta_ci(treat, base, seed=0)
    assert plain.hi - plain.lo < 0.2 * (h.hi - h.lo)  # the query-level CI counts 1,500 draws where there are 10
    clusters = stats.bootstrap_ci(shift, seed=0)  # equal sizes, no within-group noise: the bootstrap of the 10 means
    assert h.hi - h.lo == pytest.approx(clusters.hi - clusters.lo, rel=0.1)


def test_unequal_groups_and_string_labels():
    rng = np.random.default_rng(5)
    labels = np.array([f"conv-{k}" for k in rng.integers(0, 7, 900)])
    d = rng.normal(0.02, 0.1, 900)
    h = stats.hierarchical_paired_ci(d, np.zeros(900), labels, n_resamples=2000)
    assert h.lo < d.mean() < h.hi and h.mean == pytest.approx(d.mean())


def test_shapes_must_match():
    with pytest.raises(ValueError, match="shape"):
        stats.hierarchical_paired_ci([0.1, 0.2], [0.1, 0.2], ["a"])
    with pytest.raises(ValueError, match="empty"):
        stats.hierarchical_paired_ci([], [], [])


def test_fast_at_the_study_size():
    t, b, g = _pairs()
    start = time.perf_counter()
    stats.hierarchical_paired_ci(t, b, g, n_resamples=2000)
    assert time.perf_counter() - start < 2.0  # 1,500 questions x 2,000 resamples (about 0.1 s on one core)


def test_conversation_of_reads_the_query_id_prefix():
    assert stats.conversation_of("conv-26:q12") == "conv-26"
    assert stats.conversation_of("PLAIN-1") == "PLAIN-1"
