"""Statistics on per-query arrays: bootstrap CIs, paired sign-flip permutation tests, Holm / Bonferroni.

Conventions match the paper: 95% percentile bootstrap (10,000 resamples) of a mean or of a
paired mean difference; two-sided paired permutation test by random sign flips (10,000),
p = (#{|perm| >= |obs|} + 1) / (n_perm + 1), so the smallest reportable p is ~0.0001.
Everything is seeded: the same inputs and seed give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    mean: float
    lo: float
    hi: float

    def as_dict(self) -> dict:
        return {"mean": self.mean, "ci": [self.lo, self.hi]}


def _chunks(total: int, n: int, budget: int = 4_000_000):
    step = max(1, budget // max(n, 1))
    for start in range(0, total, step):
        yield min(step, total - start)


def bootstrap_ci(values, n_resamples: int = N_RESAMPLES, seed: int = 0, level: float = 0.95) -> Interval:
    """Percentile bootstrap CI of the mean."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("bootstrap of an empty array")
    rng = np.random.default_rng(seed)
    means = np.concatenate([x[rng.integers(0, x.size, size=(m, x.size))].mean(axis=1) for m in _chunks(n_resamples, x.size)])
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(x.mean()), float(lo), float(hi))


def paired_delta_ci(treatment, baseline, n_resamples: int = N_RESAMPLES, seed: int = 0, level: float = 0.95) -> Interval:
    """Bootstrap CI of mean(treatment - baseline) over queries."""
    t, b = np.asarray(treatment, float), np.asarray(baseline, float)
    if t.shape != b.shape:
        raise ValueError(f"paired arrays differ in shape: {t.shape} vs {b.shape}")
    return bootstrap_ci(t - b, n_resamples, seed, level)


def paired_permutation_test(treatment, baseline, n_permutations: int = N_RESAMPLES, seed: int = 0) -> float:
    """Two-sided sign-flip permutation test of mean(treatment - baseline) = 0."""
    d = np.asarray(treatment, float) - np.asarray(baseline, float)
    if d.size == 0:
        raise ValueError("permutation test of empty arrays")
    observed = abs(d.mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for m in _chunks(n_permutations, d.size):
        signs = rng.integers(0, 2, size=(m, d.size)) * 2 - 1
        hits += int((np.abs((signs * d).mean(axis=1)) >= observed - 1e-12).sum())
    return (hits + 1) / (n_permutations + 1)


def adjust(pvalues, method: str = "holm") -> np.ndarray:
    """Family-wise correction (statsmodels): 'holm' or 'bonferroni'."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=float)
    if p.size == 0:
        return p
    return multipletests(p, method=method)[1]
