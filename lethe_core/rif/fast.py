"""Compiled burn-in (numba): the same update as `replay.retrieve` + `replay.learn`, one loop, no per-step Python.

Burn-in never needs the answer list, only what RIF learns: r_final is the rank in the
cross-encoder's own order whatever the second-stage mode, so the kernel has no mode.

A step touches ~50 candidates, so the numpy path is dominated by call overhead (~100 us per
step); this kernel does a whole schedule in one call. `tests/unit/rif/test_rif_fast.py` pins it to
the readable numpy path (same suppression state to 1e-12). Set LETHE_NO_NUMBA=1 to use the
numpy path everywhere.
"""

from __future__ import annotations

import math
import os

import numpy as np

try:
    if os.environ.get("LETHE_NO_NUMBA"):
        raise ImportError
    from numba import njit
except ImportError:  # pragma: no cover - numba ships with umap-learn
    njit = None



def _burn_in(offsets, doc_idx, rrf, conf, schedule, clusters_of, values, last, alpha, eta, decay, pool_size,
             winners, gap, eager, first_step, cap, reinforce):
    for t in range(schedule.shape[0]):
        step = first_step + t
        i = schedule[t]
        c = clusters_of[i]
        s0 = offsets[i]
        n = offsets[i + 1] - s0
        adjusted = np.empty(n)
        for j in range(n):
            d = doc_idx[s0 + j]
            pen = values[c, d]
            if eager:
                pen = pen * math.exp(-decay * (step - last[c, d]))
            adjusted[j] = rrf[s0 + j] - alpha * pen
        order = np.argsort(-adjusted, kind="mergesort")
        m = min(pool_size, n)
        pool = order[:m]
        cp = np.empty(m)
        for r in range(m):
            cp[r] = conf[s0 + pool[r]]
        fin = np.argsort(-cp, kind="mergesort")
        r_final = np.empty(m, dtype=np.int64)
        for r in range(m):
            r_final[fin[r]] = r
        for r in range(m):
            d = doc_idx[s0 + pool[r]]
            doubt = 1.0 / (1.0 + math.exp(cp[r]))
            if pool_size <= 1:
                strength = 0.0
            elif gap:
                strength = max(0, r_final[r] - r) / pool_size * doubt
            else:
                strength = (1.0 - r / pool_size) * doubt
            s = values[c, d] * math.exp(-decay * (step - last[c, d]))
            if r_final[r] < winners:
                s = max(0.0, s - reinforce)
            else:
                s = min(s + eta * strength, cap)
            values[c, d] = s
            last[c, d] = step


burn_in_kernel = njit(cache=True, nogil=True)(_burn_in) if njit else None


def burn_in(pools, arm, state, clusters_of: np.ndarray, schedule: np.ndarray, first_step: int) -> bool:
    """Run `schedule` through the compiled kernel; False when numba is unavailable (caller falls back)."""
    if burn_in_kernel is None or len(schedule) == 0:
        return burn_in_kernel is not None
    p = arm.params
    burn_in_kernel(pools.offsets, pools.doc_idx.astype(np.int64), pools.rrf, pools.read_logit.astype(np.float64),
                   np.asarray(schedule, dtype=np.int64), np.asarray(clusters_of, dtype=np.int64),
                   state.values, state.last, p.alpha, p.eta, p.decay, p.pool_size, p.winners, arm.rule == "gap", p.eager,
                   first_step, float(p.cap), float(p.reinforce))
    return True
