"""Statistics on per-query arrays: bootstrap CIs, paired sign-flip permutation tests, Holm / Bonferroni.

Conventions match the paper: 95% percentile bootstrap (10,000 resamples) of a mean or of a
paired mean difference; two-sided paired permutation test by random sign flips (10,000),
p = (#{|perm| >= |obs|} + 1) / (n_perm + 1), so the smallest reportable p is ~0.0001.
Everything is seeded: the same inputs and seed give the same numbers.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.stats import norm

N_RESAMPLES = 10_000
PROGRESS_DELAY = 2.0  # seconds before `compare_configs` shows its progress bar (quick tables print nothing extra)


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


def bootstrap_ci(values, n_resamples: int = N_RESAMPLES, seed: int = 0, level: float = 0.95,
                 on_progress: Callable[[int], None] | None = None) -> Interval:
    """Percentile bootstrap CI of the mean (`on_progress(m)` after each chunk of m resamples)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("bootstrap of an empty array")
    rng = np.random.default_rng(seed)
    parts = []
    for m in _chunks(n_resamples, x.size):
        parts.append(x[rng.integers(0, x.size, size=(m, x.size))].mean(axis=1))
        if on_progress:
            on_progress(m)
    means = np.concatenate(parts)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(x.mean()), float(lo), float(hi))


def paired_delta_ci(treatment, baseline, n_resamples: int = N_RESAMPLES, seed: int = 0, level: float = 0.95,
                    on_progress: Callable[[int], None] | None = None) -> Interval:
    """Bootstrap CI of mean(treatment - baseline) over queries."""
    t, b = np.asarray(treatment, float), np.asarray(baseline, float)
    if t.shape != b.shape:
        raise ValueError(f"paired arrays differ in shape: {t.shape} vs {b.shape}")
    return bootstrap_ci(t - b, n_resamples, seed, level, on_progress)


def hierarchical_paired_ci(treatment, baseline, groups, n_resamples: int = N_RESAMPLES, seed: int = 0,
                           level: float = 0.95) -> Interval:
    """Two-stage bootstrap CI of mean(treatment - baseline): conversations with replacement, then questions within each.

    The questions of one conversation share a user, a haystack and a RIF state, so they are not independent draws:
    resampling the conversations first gives the spread a new user would bring. The statistic of a resample is
    the mean over all its questions (a conversation weighs by its size, as in the query-level mean). Both stages
    add their own noise, so the interval is slightly conservative; with one group it is the plain paired bootstrap.
    """
    d = np.asarray(treatment, float) - np.asarray(baseline, float)
    g = np.asarray(groups)
    if d.ndim != 1 or g.shape != d.shape:
        raise ValueError(f"paired arrays and groups differ in shape: {np.shape(treatment)}, {np.shape(baseline)}, {g.shape}")
    if d.size == 0:
        raise ValueError("bootstrap of an empty array")
    _, label = np.unique(g, return_inverse=True)
    order = np.argsort(label, kind="stable")
    values = d[order]
    sizes = np.bincount(label)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    n_groups = sizes.size
    rng = np.random.default_rng(seed)
    parts = []
    for m in _chunks(n_resamples, d.size):
        picked = rng.integers(0, n_groups, size=(m, n_groups)).ravel()  # stage 1: conversations, per resample
        counts = sizes[picked]
        # stage 2: as many questions as the picked conversation holds, drawn from it (offsets into `values`)
        draws = starts[picked].repeat(counts) + (rng.random(counts.sum()) * sizes[picked].repeat(counts)).astype(np.int64)
        totals = counts.reshape(m, n_groups).sum(axis=1)
        sums = np.bincount(np.arange(m).repeat(totals), weights=values[draws], minlength=m)
        parts.append(sums / totals)
    means = np.concatenate(parts)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(d.mean()), float(lo), float(hi))


@dataclass(frozen=True)
class Trend:
    slope: float  # change of the estimate per unit of x
    lo: float
    hi: float
    p: float  # two-sided, slope = 0


def weighted_trend(x, estimates, ci_lo, ci_hi, level: float = 0.95) -> Trend:
    """Inverse-variance weighted least-squares slope of per-point estimates on x (a meta-regression trend test).

    Each point brings its own CI (e.g. one corpus size's ΔNDCG@10 and its bootstrap CI); its standard error is read
    back as the half-width over the normal quantile. Comparing only the first and the last point's CIs (do they
    overlap?) throws the middle points away and is not a test; this uses every point, weighted by its precision,
    and gives the slope a CI and a p-value (normal, as the per-point CIs)."""
    x, y = np.asarray(x, float), np.asarray(estimates, float)
    z = norm.ppf(0.5 + level / 2)
    se = (np.asarray(ci_hi, float) - np.asarray(ci_lo, float)) / (2 * z)
    if x.size < 2 or np.unique(x).size < 2:
        raise ValueError("a trend needs at least two distinct x values")
    if not (se > 0).all():
        raise ValueError("every point needs a CI of positive width")
    w = 1 / se**2
    xm = (w * x).sum() / w.sum()
    sxx = (w * (x - xm) ** 2).sum()
    slope = float((w * (x - xm) * (y - (w * y).sum() / w.sum())).sum() / sxx)
    slope_se = float(np.sqrt(1 / sxx))
    return Trend(slope, slope - z * slope_se, slope + z * slope_se, float(2 * norm.sf(abs(slope) / slope_se)))


def conversation_of(query_id: str) -> str:
    """The conversation a query id belongs to: `conv-26:q12` -> `conv-26` (ids without ':' are their own group)."""
    return str(query_id).split(":", 1)[0]


def paired_permutation_test(treatment, baseline, n_permutations: int = N_RESAMPLES, seed: int = 0,
                            on_progress: Callable[[int], None] | None = None) -> float:
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
        if on_progress:
            on_progress(m)
    return (hits + 1) / (n_permutations + 1)


def adjust(pvalues, method: str = "holm") -> np.ndarray:
    """Family-wise correction (statsmodels): 'holm' or 'bonferroni'."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=float)
    if p.size == 0:
        return p
    return multipletests(p, method=method)[1]


METRICS = ("ndcg", "recall")
METRIC_RANGE = (0.0, 1.0)  # NDCG@k and Recall@k both live in [0, 1]


def _bad_value(values) -> str | None:
    """Why a per-query array is unusable (None when it is fine): the test would otherwise report garbage as significant.

    One NaN makes every permuted mean NaN, which the `>=` comparison counts as never extreme, so p collapses to
    its floor; a JSON `true` would count as 1.0; 7.5 cannot be an NDCG.
    """
    if not isinstance(values, (list, tuple, np.ndarray)):
        return f"expected a list of numbers, got {type(values).__name__}"
    if len(values) == 0:
        return "is empty"
    lo, hi = METRIC_RANGE
    for k, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            return f"expected a list of numbers, value [{k}] is {type(v).__name__} {v!r:.40}"
        if isinstance(v, (float, np.floating)) and not math.isfinite(v):
            return f"value [{k}] is {v}; per-query metrics must be finite"
        if not lo <= v <= hi:
            return f"value [{k}] = {v!r:.40} is outside [{lo:g}, {hi:g}]"
    return None


def load_per_query_file(path) -> dict[str, dict[str, np.ndarray]]:
    """{config name: {metric: per-query array}} from the reference's per-query JSON layout.

    Everything `compare_configs` needs is checked here, so a bad file is one DatasetError naming the file,
    the record (`configs[i] (name)`) and the field, never a misleading table.
    """
    from lethe_core.datasets.errors import DatasetError, read_json

    path = Path(path)
    data = read_json(path)
    configs = data.get("configs") if isinstance(data, dict) else None
    if not isinstance(configs, list) or not configs:
        raise DatasetError(path, "expected an object with a non-empty 'configs' list", field="configs")
    out: dict[str, dict[str, np.ndarray]] = {}
    where: dict[str, str] = {}  # name -> record that defined it
    n = None
    for i, c in enumerate(configs):
        rec = f"configs[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
            raise DatasetError(path, "missing, empty or not a string", record=rec, field="name")
        rec = f"{rec} ({c['name']})"
        if c["name"] in where:
            raise DatasetError(path, f"duplicate config name: {where[c['name']]} has the same name", record=rec, field="name")
        where[c["name"]] = rec
        arrays = {}
        for metric in METRICS:
            values = c.get(metric)
            problem = "missing" if values is None else _bad_value(values)
            if problem:
                raise DatasetError(path, problem, record=rec, field=metric)
            if n is not None and len(values) != n:
                raise DatasetError(path, f"has {len(values)} values, {n} in {next(iter(where.values()))}: arrays must be paired",
                                   record=rec, field=metric)
            n = len(values)
            arrays[metric] = np.asarray(values, dtype=float)
        out[c["name"]] = arrays
    return out


def compare_configs(configs: dict[str, dict[str, np.ndarray]], baseline: str, seed: int = 0,
                    progress: bool | None = None) -> dict:
    """The paper's table: per config, mean + CI, paired delta + CI, permutation p, Holm / Bonferroni.

    The work grows with queries x configs x 10,000 resamples (a 200 MB file of per-query arrays runs about an
    hour): a progress bar on stderr shows it, resamples done of the total with an ETA. `progress=None` shows it
    only for a run still going after `PROGRESS_DELAY` seconds, so a quick table prints nothing extra; False: never.
    """
    if baseline not in configs:
        raise ValueError(f"baseline {baseline!r} not among the configs: {', '.join(configs)}")
    n = len(configs[baseline].get("ndcg", ()))
    for name, arrays in configs.items():  # the same checks as the file loader, for callers passing arrays
        for metric in METRICS:
            values = arrays.get(metric)
            problem = "missing" if values is None else _bad_value(values)
            if problem is None and len(values) != n:
                problem = f"has {len(values)} values, the baseline {n}: arrays must be paired"
            if problem:
                raise ValueError(f"config {name!r}, metric {metric!r}: {problem}")
    base = configs[baseline]
    rows = []
    from tqdm.auto import tqdm

    total = N_RESAMPLES * (2 * len(configs) + 4 * (len(configs) - 1))
    bar = tqdm(total=total, desc=f"stats ({n:,} queries x {len(configs)} configs)", unit="resample", unit_scale=True,
               file=sys.stderr, disable=progress is False, delay=0 if progress else PROGRESS_DELAY, mininterval=1.0)
    try:
        for name, arrays in configs.items():
            row = {"name": name}
            for metric in ("ndcg", "recall"):
                row[metric] = bootstrap_ci(arrays[metric], seed=seed, on_progress=bar.update).as_dict()
                if name == baseline:
                    row[f"delta_{metric}"], row[f"p_{metric}"] = None, None
                else:
                    row[f"delta_{metric}"] = paired_delta_ci(arrays[metric], base[metric], seed=seed, on_progress=bar.update).as_dict()
                    row[f"p_{metric}"] = paired_permutation_test(arrays[metric], base[metric], seed=seed, on_progress=bar.update)
            rows.append(row)
    finally:
        bar.close()
    others = [r for r in rows if r["name"] != baseline]
    for metric in ("ndcg", "recall"):
        for method in ("holm", "bonferroni"):
            adj = adjust([r[f"p_{metric}"] for r in others], method)
            for r, v in zip(others, adj):
                r[f"p_{metric}_{method}"] = float(v)
        for r in rows:
            r.setdefault(f"p_{metric}_holm", None)
            r.setdefault(f"p_{metric}_bonferroni", None)
    return {"baseline": baseline, "n_queries": int(len(base["ndcg"])), "configs": rows}
