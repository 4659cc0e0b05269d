"""Exploration + rescue list (checkpoint 14; docs/rescue.md): per query cluster, deep candidates the reranker liked,
injected above the RRF range on top of clustered RIF.

What the reference did (`rif/run_explore*.py`): hybrid legs of depth 80 (RRF list up to 160, every member scored by
the cross-encoder); base RIF = clustered30 + rank-gap. Every `explore_every` steps the entries at RRF positions 30+
with a logit >= threshold enter the current cluster's rescue list (capped at 50 per cluster in `run_explore.py` and
the threshold runs; uncapped, keyed by the best score, in the smart and validation runs). Injection: rescues not
already in the pool get the fixed score 0.04 (above the largest RRF score, 2/61 ~ 0.033), then the RIF penalty, the
top-30, the reranker. Smart variant: inject only the top-K by stored score; bandit: a rescue that underperforms
loses `decay` of its weight and is pruned below a floor. Its RIF state kept updating during the evaluation pass
(order-dependent); here the evaluation is frozen.

Here:
- the retrieval and the RIF update are `rif.replay.retrieve` / `learn` unchanged, run on a one-query view of the
  cached pools (`routing.pool_view`) in which the injected rescues carry the 0.04 score;
- "already in the pool" = in the query's RRF top-P (P = 30, before the penalty): such a rescue keeps its own
  score; a rescue deeper in the query's union takes 0.04 in place of its RRF score; one outside the union is
  appended with 0.04 and scored through the pair cache (`routing.InjectedScorer`);
- scores are the pools' `read_logit` (raw by default, calibrated under the ablation), so `threshold` is on that
  scale (`score_scale` maps the reference's thresholds onto it);
- bandit feedback: an injected rescue that the reranker leaves outside its top-`winners` (10) underperformed;
  its weight starts at 1 and loses `bandit_decay`; it is pruned when the weight falls below `prune_floor`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

INJECT_SCORE = 0.04  # > the largest RRF score 1/61 + 1/61 ~ 0.0328


@dataclass(frozen=True)
class RescueParams:
    explore_every: int = 5  # steps between two explorations (1 = every step)
    threshold: float = 1.0  # a deep entry is rescued when its read logit is >= this
    cap: int | None = None  # rescues kept per cluster (None: uncapped, keyed by best score)
    top_k: int | None = None  # inject only the top-K by stored score (None: all)
    bandit_decay: float = 0.0  # weight lost when an injected rescue underperforms (0: no bandit)
    prune_floor: float = 0.0  # a rescue whose weight falls below this is pruned
    inject_score: float = INJECT_SCORE
    deep_from: int = 30  # RRF positions >= this are "deep" (the pool size P)

    def __post_init__(self):
        if self.explore_every < 1:
            raise ValueError(f"explore_every must be >= 1, got {self.explore_every}")
        if self.cap is not None and self.cap < 1:
            raise ValueError(f"cap must be >= 1 or None, got {self.cap}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 or None, got {self.top_k}")
        if self.bandit_decay < 0:
            raise ValueError(f"bandit_decay must be >= 0, got {self.bandit_decay}")


@dataclass
class RescueList:
    """Per cluster: turn -> [best stored score, bandit weight]."""

    params: RescueParams = field(default_factory=RescueParams)
    items: dict[int, dict[int, list[float]]] = field(default_factory=dict)
    pruned: int = 0
    evicted: int = 0

    def explores(self, step: int) -> bool:
        return step % self.params.explore_every == 0

    def offer(self, cluster: int, turns, scores) -> None:
        """Deep candidates of one query with their scores: those >= threshold enter (or refresh) the cluster's list.
        At the cap, a newcomer evicts the lowest stored score when its own is higher."""
        p = self.params
        table = self.items.setdefault(cluster, {})
        for t, x in zip(np.asarray(turns).tolist(), np.asarray(scores, dtype=np.float64).tolist()):
            if x < p.threshold:
                continue
            if t in table:
                table[t][0] = max(table[t][0], x)
                continue
            if p.cap is not None and len(table) >= p.cap:
                low = min(table, key=lambda d: (table[d][0], -d))
                if table[low][0] >= x:
                    continue
                del table[low]
                self.evicted += 1
            table[t] = [x, 1.0]

    def injected(self, cluster: int) -> list[int]:
        """The rescues to inject for a query of `cluster`: by stored score (ties: lower turn), top-K when set."""
        table = self.items.get(cluster, {})
        ranked = [t for _, t in sorted((-v[0], t) for t, v in table.items())]
        return ranked if self.params.top_k is None else ranked[: self.params.top_k]

    def feedback(self, cluster: int, turns, won) -> None:
        """Bandit pruning: every injected rescue that was not a winner loses `bandit_decay` of its weight."""
        p = self.params
        if p.bandit_decay <= 0:
            return
        table = self.items.get(cluster, {})
        for t, w in zip(np.asarray(turns).tolist(), np.asarray(won, dtype=bool).tolist()):
            if t in table and not w:
                table[t][1] -= p.bandit_decay
                if table[t][1] < p.prune_floor:
                    del table[t]
                    self.pruned += 1

    def size(self) -> int:
        return sum(len(t) for t in self.items.values())


def rescued_view(ctx, i: int, rescues, params: RescueParams, positions: dict[int, int]):
    """Query i's union with the rescues injected (docs/rescue.md): the rescue's score becomes `inject_score` unless it is
    in the RRF top-`deep_from`; rescues outside the union are appended with that score and a NaN verdict (scored only
    if they reach the reranker's pool, see `rescued_retrieval`). `positions`: turn -> union position of query i.
    Returns (view, judgements, injected turns, view rows still unscored)."""
    from lethe_core.mechanisms.routing import pool_view

    p = ctx.pools
    rows = p.rows(i)
    n = rows.stop - rows.start
    rrf = p.rrf[rows].copy()
    injected, outside = [], []
    for t in rescues:
        j = positions.get(int(t))
        if j is None:
            outside.append(int(t))
        elif j >= params.deep_from:
            rrf[j] = params.inject_score
        else:
            continue
        injected.append(int(t))
    extra = np.array(outside, dtype=np.int64)
    view, judged = pool_view(ctx, i, np.arange(n), extra, np.full(len(extra), np.nan), params.inject_score, rrf)
    return view, judged, np.array(injected, dtype=np.int64), np.arange(n, n + len(extra))


def rescued_retrieval(ctx, i: int, arm, state, rescue: RescueList | None, cluster: int, step: int, scorer):
    """`rif.replay.retrieve` on the query's view with its cluster's rescues injected (plain `retrieve` on the cached
    pools when `rescue` is None). Appended rescues that the penalised order puts into the top-P are scored first
    (`scorer`: pair cache). Returns (Retrieval, view, judgements, query's index in the view, injected turns)."""
    from lethe_core.rif.replay import retrieve

    if rescue is None:
        return retrieve(ctx.pools, i, arm, state, cluster, step, ctx.mode), ctx.pools, ctx.judgements, i, np.zeros(0, np.int64)
    rescues = rescue.injected(cluster)
    if not rescues:  # nothing to inject: the cached pools as they are
        return retrieve(ctx.pools, i, arm, state, cluster, step, ctx.mode), ctx.pools, ctx.judgements, i, np.zeros(0, np.int64)
    view, judged, injected, unscored = rescued_view(ctx, i, rescues, rescue.params, scorer.union_positions(i))
    if len(unscored):
        prm = arm.params
        adjusted = view.rrf - prm.alpha * state.penalty(cluster, view.doc_idx, step)  # the order `retrieve` cuts its pool from
        need = np.intersect1d(np.argsort(-adjusted, kind="stable")[: prm.pool_size], unscored)
        if len(need):
            view.read_logit[need] = scorer.logits(i, view.doc_idx[need])
    return retrieve(view, 0, arm, state, cluster, step, ctx.mode), view, judged, 0, injected


def learn_step(ctx, i: int, arm, state, rescue: RescueList | None, cluster: int, step: int, scorer) -> None:
    """One burn-in step: retrieve (rescues injected), RIF update (`rif.replay.learn`), bandit feedback on the injected
    rescues that reached the pool, then every `explore_every` steps the deep entries of the query's own union with a
    verdict >= threshold are offered to its cluster's list."""
    from lethe_core.rif.replay import learn

    ret, view, _, _, injected = rescued_retrieval(ctx, i, arm, state, rescue, cluster, step, scorer)
    learn(view, arm, state, cluster, step, ret)
    if rescue is None:
        return
    if len(injected):
        pool_docs = view.doc_idx[ret.pool]
        won = dict(zip(pool_docs.tolist(), (ret.r_final < arm.params.winners).tolist()))
        seen = [t for t in injected.tolist() if t in won]
        rescue.feedback(cluster, seen, [won[t] for t in seen])
    if rescue.explores(step):
        rows = ctx.pools.rows(i)
        deep = slice(rows.start + rescue.params.deep_from, rows.stop)
        rescue.offer(cluster, ctx.pools.doc_idx[deep], ctx.pools.read_logit[deep])
