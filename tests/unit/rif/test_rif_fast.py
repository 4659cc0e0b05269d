"""The compiled burn-in kernel gives the same suppression state as the readable numpy path."""

import numpy as np
import pytest

from lethe_core.rif import fast
from lethe_core.rif.protocols import hot_cold_schedule
from lethe_core.rif.replay import Arm, learn, retrieve
from lethe_core.rif.state import RIFParams, SuppressionState
from tests.unit.rif.test_rif import tiny_context

pytestmark = pytest.mark.skipif(fast.burn_in_kernel is None, reason="numba not installed")


@pytest.mark.parametrize("rule", ["uniform", "gap"])
@pytest.mark.parametrize("eager", [False, True])
@pytest.mark.parametrize("mode, fuse_w", [("ce", np.nan), ("fused", 0.6)])
@pytest.mark.parametrize("cap, reinforce", [(1.0, 0.05), (3.0, 0.1)])
def test_kernel_matches_numpy_path(rule, eager, mode, fuse_w, cap, reinforce):
    ctx = tiny_context(seed=3)
    ctx.pools.fuse_w[:] = fuse_w
    eta = 0.2 if cap == 1.0 else 1.5  # a large rate so that the larger cap is reached
    arm = Arm("a", "rif", 2, rule, RIFParams(alpha=0.3, eta=eta, eager=eager, cap=cap, reinforce=reinforce))
    clusters_of = np.array([0, 1, 0, 1, 1, 0])
    schedule, _ = hot_cold_schedule(6, 400, seed=7)
    slow = SuppressionState(2, 40, arm.params)
    for step, i in enumerate(schedule):
        c = int(clusters_of[i])
        learn(ctx.pools, arm, slow, c, step, retrieve(ctx.pools, int(i), arm, slow, c, step, mode))
    quick = SuppressionState(2, 40, arm.params)
    assert fast.burn_in(ctx.pools, arm, quick, clusters_of, schedule[:150], 0)
    assert fast.burn_in(ctx.pools, arm, quick, clusters_of, schedule[150:], 150)  # resumes across chunks
    assert slow.values.any()
    if cap > 1.0:
        assert slow.values.max() > 1.0  # the cap parameter is exercised, not just passed
    np.testing.assert_allclose(quick.values, slow.values, atol=1e-12)
    np.testing.assert_array_equal(quick.last, slow.last)
