"""Sweeps of RIF configurations replayed from cached pools, and choosing among them without tuning on the eval queries.

`replay` runs any list of arms under the paper and held-out protocols for several seeds (no results folder, no
summary: the notebooks and `rif sweep` want the per-query rows). The views turn those rows into paired deltas
against the baseline: per query, the delta averaged over seeds (CI: bootstrap over queries), and per seed, the
mean delta (spread: the sd over seeds).

Selection (`select_and_evaluate`): the held-out protocol evaluates side B after a burn-in on side A (`A->B`)
and side A after a burn-in on B (`B->A`). Choosing a configuration by its score on one side and reporting
the chosen configuration's score on the other side never reads an evaluated query's metric during the
choice; the reference chose its sweep winner on the very queries it reported (`tuned_on_eval`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.datasets.splits import HELDOUT, PAPER, PREQUENTIAL
from lethe_core.rif.protocols import ReplayContext, conversation_halves, run_heldout, run_paper, run_prequential
from lethe_core.rif.replay import Arm
from lethe_core.rif.state import RIFParams

# The reference's global-RIF sweep (rif/run_sweep.py; alpha / eta = "rate" / decay / cap = "max"; v3 also relieves
# winners by 0.1 instead of 0.05). "v4 no decay" names only its change: we read it as v1 with lambda = 0.
REFERENCE_SWEEP: dict[str, dict] = {
    "v1": {"alpha": 0.3, "eta": 0.1, "decay": 0.005, "cap": 1.0},
    "v2": {"alpha": 1.0, "eta": 0.1, "decay": 0.005, "cap": 1.0},
    "v3": {"alpha": 1.0, "eta": 0.3, "decay": 0.005, "cap": 2.0, "reinforce": 0.1},
    "v4": {"alpha": 0.3, "eta": 0.1, "decay": 0.0, "cap": 1.0},
    "v5": {"alpha": 2.0, "eta": 0.5, "decay": 0.001, "cap": 3.0},
    "v6": {"alpha": 5.0, "eta": 0.5, "decay": 0.001, "cap": 5.0},
}
# Its NDCG@10 on LongMemEval S (500 queries, 5,000 burn-in, tuned and evaluated on the same queries); baseline 0.2960.
REFERENCE_SWEEP_NDCG = {"v1": 0.2993, "v2": 0.2968, "v3": 0.2906, "v4": 0.2923, "v5": 0.2922, "v6": 0.2917}
REFERENCE_BASELINE = 0.2960

ROW_COLUMNS = ("protocol", "seed", "split", "bucket", "arm", "query_id", "cluster", "ndcg@10", "pool_recall@30")


def config_arms(configs: dict[str, dict], k: int = 1, rule: str = "uniform", base: RIFParams = RIFParams()) -> list[Arm]:
    """One RIF arm per named configuration (fields of RIFParams), on top of `base`."""
    return [Arm(name, "rif", k, rule, replace(base, **cfg)) for name, cfg in configs.items()]


def cluster_arms(ks: Iterable[int], rules: Sequence[str] = ("uniform",), cues: Sequence[str] = ("query",),
                 params: RIFParams = RIFParams()) -> list[Arm]:
    """Arms over K x rule x cue source, named like the standard ones: `global-{rule}` (K = 1, one per rule),
    `clustered{K}-{rule}` (query cues), `entry{K}-{rule}` (entry cues)."""
    arms = []
    for rule in rules:
        for k in ks:
            if k == 1:
                arms.append(Arm(f"global-{rule}", "rif", 1, rule, params))
                continue
            for cue in cues:
                arms.append(Arm(f"{'clustered' if cue == 'query' else 'entry'}{k}-{rule}", "rif", k, rule, params, cues=cue))
    return arms


def feasible_ks(ks: Iterable[int], ctx: ReplayContext, protocols: Sequence[str], seeds: Sequence[int] = (42,)) -> list[int]:
    """The K values query clusters can be fit with: at most the number of training queries of every protocol
    (all queries for paper and prequential's bootstrap aside, the smallest conversation half of the seeds' held-out splits)."""
    n = len(ctx.pools.query_ids)
    if HELDOUT in protocols:
        n = min([n, *(len(half) for seed in seeds for half in conversation_halves(ctx, seed))])
    return [k for k in ks if k <= n]


@dataclass
class Replays:
    rows: pd.DataFrame  # ROW_COLUMNS, one row per (protocol, seed, arm, evaluated query)
    suppressed: pd.DataFrame  # protocol, seed, arm, split, entries, docs (end of burn-in)


def replay(ctx: ReplayContext, arms: list[Arm], protocols: Sequence[str] = (PAPER, HELDOUT), seeds: Sequence[int] = (42,),
           burn_in: int = 5000, bootstrap: int = 200) -> Replays:
    """Every arm (a baseline is added when missing) under every protocol and seed, from the cached pools."""
    if not any(a.kind == "baseline" for a in arms):
        arms = [Arm("baseline", "baseline"), *arms]
    frames, supp = [], []
    for protocol in protocols:
        for seed in seeds:
            if protocol == PAPER:
                res = run_paper(ctx, arms, seed, burn_in, snapshot_every=0)
            elif protocol == HELDOUT:
                res = run_heldout(ctx, arms, seed, burn_in, snapshot_every=0)
            elif protocol == PREQUENTIAL:
                res = run_prequential(ctx, arms, seed, bootstrap, snapshot_every=0)
            else:
                raise ValueError(f"unknown protocol {protocol!r}")
            df = pd.DataFrame(res.rows)
            frames.append(df[[c for c in ROW_COLUMNS if c in df.columns and c != "protocol"]].assign(protocol=protocol))
            supp += [{"protocol": protocol, "seed": seed, "arm": arm, "split": split, **v}
                     for arm, by_split in res.suppressed.items() for split, v in by_split.items()]
    rows = pd.concat(frames, ignore_index=True)[list(ROW_COLUMNS)]
    return Replays(rows, pd.DataFrame(supp, columns=["protocol", "seed", "arm", "split", "entries", "docs"]))


def per_query_delta(rows: pd.DataFrame, baseline: str = "baseline", metric: str = "ndcg@10") -> pd.DataFrame:
    """protocol, arm, seed, split, query_id, value, delta (= value - the baseline's, same protocol, seed, split, query)."""
    keys = ["protocol", "seed", "split", "query_id"]
    base = rows[rows["arm"] == baseline].set_index(keys)[metric]
    out = rows[["protocol", "arm", *keys[1:], metric]].rename(columns={metric: "value"})
    out["delta"] = out["value"].to_numpy() - base.reindex(pd.MultiIndex.from_frame(out[keys])).to_numpy()
    return out


def _summarise(group: pd.DataFrame, n_resamples: int) -> dict:
    per_query = group.groupby("query_id")[["value", "delta"]].mean()  # seed mean per query (a query's side may vary by seed)
    per_seed = group.groupby("seed")["delta"].mean()
    ci = stats.bootstrap_ci(per_query["delta"].to_numpy(), n_resamples=n_resamples)
    level = stats.bootstrap_ci(per_query["value"].to_numpy(), n_resamples=n_resamples)
    return {"value": level.mean, "value_lo": level.lo, "value_hi": level.hi, "delta": ci.mean, "lo": ci.lo, "hi": ci.hi,
            "seed_sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else 0.0,
            "seed_min": float(per_seed.min()), "seed_max": float(per_seed.max()),
            "n_queries": int(len(per_query)), "n_seeds": int(len(per_seed))}


def delta_table(rows: pd.DataFrame, baseline: str = "baseline", metric: str = "ndcg@10", by: Sequence[str] = ("protocol", "arm"),
                n_resamples: int = stats.N_RESAMPLES) -> pd.DataFrame:
    """Per group (protocol, arm by default): the metric's mean, and its paired delta vs the baseline with a 95 %
    bootstrap CI over queries (of the per-query seed mean) and the spread of the per-seed mean delta."""
    d = per_query_delta(rows, baseline, metric)
    out = [{**dict(zip(by, key if isinstance(key, tuple) else (key,))), **_summarise(g, n_resamples)}
           for key, g in d.groupby(list(by), sort=False)]
    return pd.DataFrame(out)


def paired_contrast(rows: pd.DataFrame, a: str, b: str, protocol: str, metric: str = "ndcg@10",
                    n_resamples: int = stats.N_RESAMPLES) -> dict:
    """arm a - arm b on the same queries (seed mean per query): mean, 95 % CI over queries, permutation p, per-seed sd."""
    r = rows[rows["protocol"] == protocol]
    keys = ["seed", "split", "query_id"]
    x = r[r["arm"] == a].set_index(keys)[metric]
    y = r[r["arm"] == b].set_index(keys)[metric].reindex(x.index)
    diff = (x - y).rename("d").reset_index()
    per_query = diff.groupby(["split", "query_id"])["d"].mean().to_numpy()
    per_seed = diff.groupby("seed")["d"].mean()
    ci = stats.bootstrap_ci(per_query, n_resamples=n_resamples)
    return {"a": a, "b": b, "protocol": protocol, "delta": ci.mean, "lo": ci.lo, "hi": ci.hi,
            "p": stats.paired_permutation_test(per_query, np.zeros_like(per_query), n_permutations=n_resamples),
            "seed_sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else 0.0, "n_queries": int(len(per_query))}


def select_and_evaluate(rows: pd.DataFrame, configs: Sequence[str], baseline: str = "baseline", metric: str = "ndcg@10",
                        n_resamples: int = stats.N_RESAMPLES) -> dict:
    """Honest choice among `configs` on held-out rows (protocol `heldout`): in each seed (each its own conversation
    split), chosen by the mean delta on one side and scored on the other side, both ways; beside it the choice tuned on
    the evaluated queries themselves. Choosing per seed keeps a query that tunes in one seed's split from being scored
    with its own choice in another's.

    Returns {"sides": DataFrame (seed, tuned_on, chosen, tuning delta, evaluated_on, evaluated delta), "honest": {delta,
    lo, hi, seed_sd, n_queries} over all queries, each scored with a configuration chosen on the other side of its seed's
    split (seed mean per query), "tuned_on_eval": the same for the configuration with the best all-query delta, with its name}.
    """
    d = per_query_delta(rows[rows["protocol"] == HELDOUT], baseline, metric)
    d = d[d["arm"].isin(configs)]
    if d.empty:
        raise ValueError("select_and_evaluate needs held-out rows of the configurations")
    splits = sorted(d["split"].unique())
    if len(splits) != 2:
        raise ValueError(f"expected two held-out directions, got {splits}")
    sides, picked = [], []
    for seed, rows_seed in d.groupby("seed"):
        side_mean = rows_seed.groupby(["split", "arm"])["delta"].mean()
        for tune, evaluate in (splits, splits[::-1]):
            chosen = side_mean[tune].idxmax()
            sides.append({"seed": seed, "tuned_on": f"side {tune.split('->')[1]} ({tune})", "chosen": chosen,
                          "tuning_delta": float(side_mean[tune][chosen]),
                          "evaluated_on": f"side {evaluate.split('->')[1]} ({evaluate})",
                          "evaluated_delta": float(side_mean[evaluate][chosen])})
            picked.append(rows_seed[(rows_seed["split"] == evaluate) & (rows_seed["arm"] == chosen)])
    honest = _summarise(pd.concat(picked), n_resamples)
    overall = d.groupby("arm")["delta"].mean()
    best = overall.idxmax()
    tuned = _summarise(d[d["arm"] == best], n_resamples)
    return {"sides": pd.DataFrame(sides), "honest": honest, "tuned_on_eval": {"chosen": best, **tuned}}


def tuned_on_eval(table: pd.DataFrame, configs: Sequence[str], protocol: str = PAPER) -> pd.Series:
    """The reference's way: the configuration with the best delta on the queries it is evaluated on (a delta_table row)."""
    t = table[(table["protocol"] == protocol) & (table["arm"].isin(configs))]
    return t.loc[t["delta"].idxmax()]


def one_parameter_sweep(ctx: ReplayContext, param: str, values: Sequence[float], rule: str = "gap", k: int = 30,
                        protocols: Sequence[str] = (PAPER,), seeds: Sequence[int] = (42,), burn_in: int = 5000,
                        base: RIFParams = RIFParams(), n_resamples: int = stats.N_RESAMPLES) -> pd.DataFrame:
    """NDCG@10 delta vs the baseline as one constant varies: `k`, or a RIFParams field (alpha, eta, decay, cap, reinforce).

    Query clusters need K <= the training queries; larger K values are dropped (see `feasible_ks`)."""
    if param == "k":
        ks = feasible_ks([int(v) for v in values], ctx, protocols, seeds)
        arms = [Arm(f"{param}={v}", "rif", v, rule, base) for v in ks]
    else:
        if param not in RIFParams.__dataclass_fields__:
            raise ValueError(f"unknown parameter {param!r}")
        arms = [Arm(f"{param}={v:g}", "rif", k, rule, replace(base, **{param: type(getattr(base, param))(v)})) for v in values]
    table = delta_table(replay(ctx, arms, protocols, seeds, burn_in).rows, n_resamples=n_resamples)
    table = table[table["arm"] != "baseline"].copy()
    table.insert(1, param, [a.split("=", 1)[1] for a in table["arm"]])
    return table.reset_index(drop=True)
