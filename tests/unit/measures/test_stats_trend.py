"""The trend test across sizes (`stats.weighted_trend`): the inverse-variance weighted slope, as statsmodels' WLS
with a known scale computes it."""

import numpy as np
import pytest
import statsmodels.api as sm

from lethe_core.measures import stats


def test_weighted_trend_is_wls_with_known_variances():
    x = np.log10([5882, 25000, 50000, 100000, 144607])
    y = np.array([0.002, 0.004, 0.009, 0.011, 0.016])
    half = np.array([0.008, 0.009, 0.007, 0.010, 0.012])
    t = stats.weighted_trend(x, y, y - half, y + half)
    se = half / 1.959963984540054
    fit = sm.WLS(y, sm.add_constant(x), weights=1 / se**2).fit(cov_type="fixed scale", cov_kwds={"scale": 1.0})
    assert t.slope == pytest.approx(fit.params[1])
    lo, hi = fit.conf_int()[1]
    assert (t.lo, t.hi) == (pytest.approx(lo), pytest.approx(hi)) and t.p == pytest.approx(fit.pvalues[1])


def test_a_flat_curve_has_no_trend_and_bad_input_says_why():
    t = stats.weighted_trend([1, 2, 3], [0.01, 0.0, 0.01], [-0.01, -0.02, -0.01], [0.03, 0.02, 0.03])
    assert t.lo < 0 < t.hi and t.p > 0.5
    with pytest.raises(ValueError, match="two distinct"):
        stats.weighted_trend([1, 1], [0.0, 0.1], [-0.1, 0.0], [0.1, 0.2])
    with pytest.raises(ValueError, match="positive width"):
        stats.weighted_trend([1, 2], [0.0, 0.1], [0.0, 0.0], [0.0, 0.2])
