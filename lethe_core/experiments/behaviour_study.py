"""Checkpoint 16, behaviour decomposition: each top-1 behaviour of a RIF arm against the baseline, with paired CIs.

`analysis.behaviour_table` gives the means; this adds what a verdict needs: per metric (NDCG@10, the
three top-1 behaviours, both stale-fact definitions, abstain@0/2/4), overall and per question type,
the paired difference arm − baseline over the same queries with its bootstrap CI and permutation p,
and the spread of that difference over the burn-in seeds. Several seeds are read as every table reads
them (`experiments.rif.SEED_CONVENTION`, "seed mean per query"): each query's value averaged over the
seeds, then paired and resampled over queries. NaN rows (stale_fact off knowledge-update questions,
stale_fact_temporal without timestamps) are left out pair by pair before that mean, and `n` says how
many queries a figure rests on (0: the metric is undefined on that slice).
"""

from __future__ import annotations

import math

import pandas as pd

from lethe_core.measures import stats
from lethe_core.results.runs import Run

METRICS = ("ndcg@10", "exact_episode", "sibling_confusion", "wrong_family", "stale_fact", "stale_fact_temporal",
           "abstain@0", "abstain@2", "abstain@4")
ALL = "all"


def _paired(per_query: pd.DataFrame, arm: str, baseline: str, metric: str, by: str | None = None) -> pd.DataFrame:
    """Arm and baseline values of each (seed, query) where both are defined: queries pair up only within a seed."""
    key = ["seed", "query_id", "split"]
    a = per_query[per_query["arm"] == arm].set_index(key)
    b = per_query[per_query["arm"] == baseline].set_index(key)[metric].reindex(a.index)
    pairs = pd.DataFrame({"arm": a[metric], "baseline": b}).dropna()
    if by:
        pairs[by] = a[by].reindex(pairs.index)
    return pairs.reset_index()


def _query_means(per_query: pd.DataFrame, arm: str, baseline: str, metric: str, by: str | None) -> pd.DataFrame:
    """Each query's arm and baseline value averaged over the seeds where both are defined (`SEED_CONVENTION`)."""
    pairs = _paired(per_query, arm, baseline, metric, by)
    cols = {"arm": ("arm", "mean"), "baseline": ("baseline", "mean"), **({by: (by, "first")} if by else {})}
    return pairs.groupby("query_id", sort=True).agg(**cols).reset_index()


def behaviour_deltas(per_query: pd.DataFrame, arm: str, baseline: str = "baseline", by: str | None = "qtype",
                     metrics=METRICS, seed: int = 0) -> pd.DataFrame:
    """One row per (group, metric): n queries, baseline and arm means, delta with 95 % CI and permutation p.

    `per_query` may hold several seeds: each query's value is their mean (`SEED_CONVENTION`), so the paired bootstrap
    and the permutation test resample queries, not (query, seed) rows that share a question. Groups are `all` plus
    each value of `by`.
    """
    rows = []
    for metric in metrics:
        pairs = _query_means(per_query, arm, baseline, metric, by)
        groups = [(ALL, pairs)] + (list(pairs.groupby(by, sort=True)) if by else [])
        if by:  # a type where the metric is undefined everywhere still gets its (empty) row
            seen = {g for g, _ in groups}
            groups += [(t, pairs.iloc[0:0]) for t in sorted(per_query[by].unique()) if t not in seen]
        for group, g in groups:
            row = {"group": group, "metric": metric, "n": int(len(g))}
            if len(g):
                d = stats.paired_delta_ci(g["arm"], g["baseline"], seed=seed)
                row.update(baseline=float(g["baseline"].mean()), arm=float(g["arm"].mean()), delta=d.mean, lo=d.lo, hi=d.hi,
                           p=stats.paired_permutation_test(g["arm"], g["baseline"], seed=seed))
            else:
                row.update(baseline=math.nan, arm=math.nan, delta=math.nan, lo=math.nan, hi=math.nan, p=math.nan)
            rows.append(row)
    return pd.DataFrame(rows)


def seed_spread(per_query: pd.DataFrame, arm: str, baseline: str = "baseline", metrics=METRICS) -> pd.DataFrame:
    """Per metric: the overall delta arm − baseline in each seed, and its mean and SD over the seeds (how far one
    seed's reading strays from the seed-mean table)."""
    rows = []
    for metric in metrics:
        pairs = _paired(per_query, arm, baseline, metric)
        by_seed = (pairs["arm"] - pairs["baseline"]).groupby(pairs["seed"]).mean()
        rows.append({"metric": metric, "seeds": int(len(by_seed)), "delta_seed_mean": float(by_seed.mean()) if len(by_seed) else math.nan,
                     "delta_seed_sd": float(by_seed.std(ddof=1)) if len(by_seed) > 1 else math.nan,
                     **{f"seed {s}": float(v) for s, v in by_seed.items()}})
    return pd.DataFrame(rows)


def coverage(per_query: pd.DataFrame, by: str = "qtype", metrics=("stale_fact", "stale_fact_temporal")) -> pd.DataFrame:
    """Queries per question type, and how many of them define each metric (NaN-free): which slices a metric can speak for."""
    one = per_query[(per_query["arm"] == per_query["arm"].iloc[0]) & (per_query["seed"] == per_query["seed"].iloc[0])]
    metrics = [m for m in metrics if m in one]
    out = one.groupby(by).agg(queries=("query_id", "size"), **{f"{m} defined": (m, lambda s: int(s.notna().sum())) for m in metrics})
    return out.reset_index()


def behaviour_study(run: Run, arm: str = "clustered30-gap", by: str = "qtype", seed: int = 0) -> dict[str, pd.DataFrame]:
    """The notebook's three tables from one RIF run: deltas on each query's seed mean (`SEED_CONVENTION`), the seed
    spread, metric coverage."""
    if arm not in set(run.per_query["arm"]):
        raise ValueError(f"arm {arm!r} is not in run {run.path.name}; it has {sorted(run.per_query['arm'].unique())}")
    pq = run.per_query
    return {"deltas": behaviour_deltas(pq, arm, by=by, seed=seed), "seeds": seed_spread(pq, arm), "coverage": coverage(pq, by)}


__all__ = ["ALL", "METRICS", "behaviour_deltas", "behaviour_study", "coverage", "seed_spread"]
