"""How RIF acts, update by update: the penalty of one update against the RRF range of the query's union, and
where rank-gap's fewer suppressions come from (docs/method.md, "A property worth knowing").

`update_log` replays a burn-in through the readable numpy path (`replay.retrieve` + the same update as
`replay.learn`) and records every pool member of every update. Its final state equals the replay's
(tests/unit/rif/test_rif_mechanism.py), so the views below describe the runs the tables report.

- One update's penalty is `alpha * (s_after - s_decayed)`. The RRF scores of a union span about 0.011-0.033,
  so an increment at least the union's range (max - min RRF) drops the entry below every unpenalised member:
  out of the top-P after a single rejection. `out_after` checks that directly: the entry's rank in the
  union re-sorted with the updated state (what the same query would see next) is P or worse.
- Rank-gap gives zero strength to a loser the reranker kept at or above its first-stage rank
  (`r_final <= r_init`); uniform gives it `(1 - r_init / P) * sigmoid(-x)`. `gap_decomposition` splits a uniform
  run's loser updates and its suppressed (cluster, entry) pairs by that condition.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lethe_core.rif.protocols import ReplayContext, _clusters, hot_cold_schedule
from lethe_core.rif.replay import Arm, retrieve
from lethe_core.rif.rules import strength
from lethe_core.rif.state import SuppressionState

LOG_COLUMNS = ("step", "query", "cluster", "entry", "r_init", "r_final", "winner", "strength", "strength_uniform",
               "strength_gap", "s_before", "s_after", "increment", "rrf", "rrf_range", "out_after")


def update_log(ctx: ReplayContext, arm: Arm, clusters_of: np.ndarray, schedule: np.ndarray, first_step: int = 0,
               state: SuppressionState | None = None) -> tuple[pd.DataFrame, SuppressionState]:
    """Replay `schedule` (query positions) for one RIF arm; one row per pool member per update (LOG_COLUMNS).

    s_before: the stored value decayed to this step (what the update starts from); increment: alpha * (s_after -
    s_before), the change of this entry's penalty for this cluster (> 0 for losers with positive strength, <= 0
    for winners); rrf_range: max - min RRF of the query's union; out_after: outside the top-P of the union
    re-sorted with the updated state.
    """
    if arm.kind != "rif":
        raise ValueError("update_log needs a RIF arm")
    p, prm = ctx.pools, arm.params
    n_clusters = int(np.max(clusters_of)) + 1 if len(clusters_of) else 1
    state = state or SuppressionState(max(n_clusters, arm.k), ctx.n_entries, prm)
    cols: dict[str, list] = {c: [] for c in LOG_COLUMNS}
    for t, i in enumerate(np.asarray(schedule, dtype=np.int64)):
        step, i, c = first_step + t, int(i), int(clusters_of[i])
        ret = retrieve(p, i, arm, state, c, step, ctx.mode)
        rows = ret.rows
        docs, rrf = p.doc_idx[rows], p.rrf[rows]
        pool = ret.pool
        entries = docs[pool]
        conf = p.read_logit[rows][pool]
        r_init = np.arange(len(pool))
        s_rule = strength(arm.rule, r_init, ret.r_final, conf, prm.pool_size)
        before = state.values[c, entries] * np.exp(-prm.decay * (step - state.last[c, entries]))
        winner = ret.r_final < prm.winners
        state.update(c, step, entries, s_rule, winner)
        after = state.values[c, entries]
        adjusted = rrf - prm.alpha * state.penalty(c, docs, step)
        rank = np.empty(len(docs), dtype=np.int64)
        rank[np.argsort(-adjusted, kind="stable")] = np.arange(len(docs))
        m = len(pool)
        for name, values in (("step", np.full(m, step)), ("query", np.full(m, i)), ("cluster", np.full(m, c)), ("entry", entries),
                             ("r_init", r_init), ("r_final", ret.r_final), ("winner", winner), ("strength", s_rule),
                             ("strength_uniform", strength("uniform", r_init, ret.r_final, conf, prm.pool_size)),
                             ("strength_gap", strength("gap", r_init, ret.r_final, conf, prm.pool_size)),
                             ("s_before", before), ("s_after", after), ("increment", prm.alpha * (after - before)),
                             ("rrf", rrf[pool]), ("rrf_range", np.full(m, float(rrf.max() - rrf.min()))),
                             ("out_after", rank[pool] >= prm.pool_size)):
            cols[name].append(np.asarray(values))
    frame = pd.DataFrame({k: np.concatenate(v) if v else np.array([]) for k, v in cols.items()})
    return frame, state


def paper_burn_in_log(ctx: ReplayContext, arm: Arm, seed: int = 42, burn_in: int = 5000) -> tuple[pd.DataFrame, SuppressionState]:
    """`update_log` of the paper protocol's burn-in for one arm and seed (clusters fit as `run_frozen` fits them)."""
    idx = np.arange(len(ctx.pools.query_ids))
    schedule, _ = hot_cold_schedule(len(idx), burn_in, seed)
    cl = _clusters({}, ctx.query_vectors, arm.k, seed, ctx, arm.cues)
    return update_log(ctx, arm, cl.assign(ctx.query_vectors), schedule)


def rrf_ranges(ctx: ReplayContext) -> pd.DataFrame:
    """Per query: the union's RRF min, max and range, and the RRF of the last pool slot (rank P - 1)."""
    p = ctx.pools
    out = []
    for i in range(len(p.query_ids)):
        r = p.rrf[p.rows(i)]
        out.append({"query_id": p.query_ids[i], "rrf_min": float(r.min()), "rrf_max": float(r.max()), "rrf_range": float(r.max() - r.min()),
                    "n_union": int(len(r))})
    return pd.DataFrame(out)


def block_list_view(log: pd.DataFrame) -> dict:
    """How often one rejection is a block: among loser updates with a positive increment, the share whose increment
    is at least the union's RRF range, the share that leaves the entry outside the top-P, and the same share for
    an entry's first rejection in its cluster (nothing stored before)."""
    losers = log[~log["winner"].astype(bool)]
    pos = losers[losers["increment"] > 0]
    first = pos[pos["s_before"] == 0]
    ratio = pos["increment"] / pos["rrf_range"]
    return {
        "loser_updates": int(len(losers)), "positive_updates": int(len(pos)),
        "zero_updates": int((losers["increment"] <= 0).sum()),
        "median_increment": float(pos["increment"].median()) if len(pos) else 0.0,
        "median_range": float(log["rrf_range"].median()) if len(log) else 0.0,
        "median_ratio": float(ratio.median()) if len(pos) else 0.0,
        "share_increment_ge_range": float((ratio >= 1).mean()) if len(pos) else 0.0,
        "share_out_after": float(pos["out_after"].mean()) if len(pos) else 0.0,
        "first_updates": int(len(first)),
        "share_first_out_after": float(first["out_after"].mean()) if len(first) else 0.0,
    }


def gap_decomposition(log: pd.DataFrame) -> pd.DataFrame:
    """Split a run's loser updates by what rank-gap would give them: `dropped` (r_final > r_init, positive under both
    rules) vs `held or rose` (r_final <= r_init: zero under rank-gap). Columns: loser updates, their uniform and gap
    strength mass, and the (cluster, entry) pairs suppressed at the end whose every positive update was of that class
    (`pairs`; a pair touched by both classes counts as `dropped`)."""
    losers = log[~log["winner"].astype(bool)].copy()
    losers["class"] = np.where(losers["r_final"] > losers["r_init"], "dropped", "held or rose")
    end = log.groupby(["cluster", "entry"])["s_after"].last()
    suppressed = end[end > 0].index
    pos = losers[losers["increment"] > 0]
    ever_dropped = pos[pos["class"] == "dropped"].groupby(["cluster", "entry"]).size().index
    n_dropped = int(len(suppressed.intersection(ever_dropped)))
    pairs = {"dropped": n_dropped, "held or rose": int(len(suppressed)) - n_dropped}
    out = losers.groupby("class").agg(loser_updates=("step", "size"), uniform_mass=("strength_uniform", "sum"),
                                      gap_mass=("strength_gap", "sum")).reindex(["dropped", "held or rose"], fill_value=0)
    out["share_of_updates"] = out["loser_updates"] / max(1, out["loser_updates"].sum())
    out["share_of_uniform_mass"] = out["uniform_mass"] / max(1e-12, out["uniform_mass"].sum())
    out["pairs"] = [pairs[c] for c in out.index]
    return out.reset_index()
