import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from lethe_core import stats


def test_bootstrap_is_seeded_and_brackets_the_mean():
    x = np.random.default_rng(0).normal(0.3, 0.2, 400)
    a, b = stats.bootstrap_ci(x, seed=7), stats.bootstrap_ci(x, seed=7)
    assert a == b and a.lo < a.mean < a.hi
    se = x.std(ddof=1) / np.sqrt(x.size)
    assert a.hi - a.lo == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_permutation_test_null_and_strong_effect():
    rng = np.random.default_rng(1)
    base = rng.uniform(size=300)
    assert stats.paired_permutation_test(base, base) == 1.0
    assert stats.paired_permutation_test(base + 0.05 + rng.normal(0, 0.01, 300), base) == pytest.approx(1 / 10_001)


def test_permutation_p_agrees_with_scipy():
    from scipy.stats import permutation_test

    rng = np.random.default_rng(2)
    base = rng.uniform(size=200)
    treat = base + rng.normal(0.01, 0.08, 200)
    ours = stats.paired_permutation_test(treat, base, seed=3)
    ref = permutation_test((treat, base), lambda a, b: np.mean(a - b), permutation_type="samples",
                           n_resamples=10_000, random_state=4).pvalue
    assert 0.01 < ref < 0.5  # a borderline effect, where the comparison means something
    assert ours == pytest.approx(ref, abs=0.02)


def test_corrections_match_statsmodels():
    p = [0.01, 0.04, 0.03, 0.5]
    assert np.allclose(stats.adjust(p, "holm"), multipletests(p, method="holm")[1])
    assert np.allclose(stats.adjust(p, "bonferroni"), np.minimum(np.array(p) * 4, 1))


def test_paired_arrays_must_match():
    with pytest.raises(ValueError):
        stats.paired_delta_ci([1, 2], [1, 2, 3])
