"""Evaluation protocols over cached pools (docs/protocols.md).

- paper: clusters fit on all evaluation queries; hot/cold burn-in drawn exactly as the
  reference draws it (`hot_cold_schedule`); then every query once with the state frozen.
  Rows carry the bucket: hot / cold (drawn at least once) / unseen (never drawn).
- heldout: queries split in two by conversation; clusters and burn-in on one side, frozen
  evaluation on the other, both directions.
- prequential: queries in arrival order (question dates when every query has one, else a
  seeded shuffle), each scored before its own update; clustered arms run global suppression
  until `bootstrap` queries have arrived, then fit clusters on those and continue with every
  cluster starting from the global state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lethe_core.measures.behaviour import top1_behaviour
from lethe_core.datasets.model import Dataset
from lethe_core.pools.cache import PackedPools
from lethe_core.retrieval.second_stage import DEFAULT_MODE
from lethe_core.datasets import splits
from lethe_core.rif import fast
from lethe_core.rif.clusters import QueryClusters
from lethe_core.rif.replay import Arm, Judgements, learn, retrieve, score
from lethe_core.rif.state import SuppressionState

PROTOCOLS = (splits.PAPER, splits.HELDOUT, splits.PREQUENTIAL)  # the RIF replay's protocols (names: datasets.splits)


@dataclass
class ReplayContext:
    dataset: Dataset
    pools: PackedPools
    query_vectors: np.ndarray  # aligned with pools.query_ids
    mode: str = DEFAULT_MODE
    entry_vectors: np.ndarray | None = None  # corpus turn embeddings, for arms with entry-based clusters (cues="entry")
    judgements: Judgements = field(init=False)

    def __post_init__(self):
        self.judgements = Judgements(self.dataset, self.pools)
        self.queries = {q.id: q for q in self.dataset.queries}
        self.n_entries = len(self.dataset.require_corpus())


@dataclass
class ProtocolResult:
    rows: list[dict] = field(default_factory=list)
    snapshots: list[dict] = field(default_factory=list)
    suppressed: dict[str, dict] = field(default_factory=dict)


def _row(ctx: ReplayContext, arm: Arm, i: int, ret, cluster: int, **extra) -> dict:
    p = ctx.pools
    ndcg, recall, pool_recall = score(p, ctx.judgements, i, ret)
    qid = p.query_ids[i]
    docs = p.doc_idx[ret.rows][ret.order[:10]]
    top1_conf = float(p.read_logit[ret.rows][ret.order[0]])
    return {
        "query_id": qid, "qtype": ctx.queries[qid].qtype, "arm": arm.name, "cluster": int(cluster),
        "ndcg@10": ndcg, "recall@10": recall, "pool_recall@30": pool_recall, "top1_logit": top1_conf,
        "top10": docs.astype(np.int32).tolist(),
        **top1_behaviour(int(docs[0]), top1_conf, ctx.queries[qid], ctx.dataset.corpus), **extra,
    }


def hot_cold_schedule(n: int, steps: int, seed: int, hot_frac: float = 0.2, hot_prob: float = 0.7):
    """The reference's usage schedule, draw for draw (docs/protocols.md): `default_rng(seed)`; a hot set
    of `int(hot_frac * n)` query positions drawn without replacement (kept in draw order); the rest, in
    position order, is cold; then per step one `rng.random()` and one `rng.integers` into the hot list
    (when below hot_prob) or the cold list. Step t of the returned array is step t (0-based)."""
    rng = np.random.default_rng(seed)
    hot = rng.choice(n, size=max(1, int(hot_frac * n)), replace=False)
    cold = np.setdiff1d(np.arange(n), hot)
    schedule = np.empty(steps, dtype=np.int64)
    for t in range(steps):
        pick_hot = rng.random() < hot_prob or len(cold) == 0
        pool = hot if pick_hot else cold
        schedule[t] = pool[rng.integers(len(pool))]
    return schedule, hot


def _burn_in(ctx, arm: Arm, state, clusters_of, schedule, result: ProtocolResult, seed: int, snapshot_every: int, tag: str):
    """Run the schedule in chunks between snapshots, through the compiled kernel when numba is there."""
    chunk = snapshot_every or len(schedule) or 1  # an empty schedule (--burn-in 0) runs no chunk
    for start in range(0, len(schedule), chunk):
        part = schedule[start : start + chunk]
        if not fast.burn_in(ctx.pools, arm, state, clusters_of, part, start):
            for step, i in enumerate(part, start=start):
                c = int(clusters_of[i])
                learn(ctx.pools, arm, state, c, step, retrieve(ctx.pools, i, arm, state, c, step, ctx.mode))
        if snapshot_every and (start + len(part)) % snapshot_every == 0:
            _snapshot(ctx, arm, state, start + len(part), seed, tag, result)
    return len(schedule)


def _snapshot(ctx, arm, state, step, seed, tag, result):
    k, n, v = state.snapshot()
    result.snapshots.append({"arm": arm.name, "seed": seed, "split": tag, "step": step, "cluster": k.astype(np.int16),
                             "doc_idx": n.astype(np.int32), "value": v.astype(np.float32)})


def _clusters(cache: dict, vectors: np.ndarray, k: int, seed: int, ctx: ReplayContext | None = None, cues: str = "query") -> QueryClusters:
    """Query cues: k-means on `vectors` (the training queries). Entry cues: k-means on the corpus turn embeddings
    (known before any query arrives); either way a query's cue is its nearest centroid."""
    if cues == "entry" and k > 1:
        if ctx is None or ctx.entry_vectors is None:
            raise ValueError("entry-based clusters need the corpus embeddings (ReplayContext.entry_vectors)")
        vectors = ctx.entry_vectors
    elif cues not in ("query", "entry"):
        raise ValueError(f"cues must be 'query' or 'entry', got {cues!r}")
    key = (cues if k > 1 else "query", k)
    if key not in cache:
        cache[key] = QueryClusters.fit(vectors, k, seed=seed)
    return cache[key]


def run_frozen(ctx: ReplayContext, arms: list[Arm], seed: int, burn_in: int, train_idx: np.ndarray, eval_idx: np.ndarray,
               split: str, snapshot_every: int = 500, result: ProtocolResult | None = None, buckets: bool = False) -> ProtocolResult:
    """Fit clusters and burn in on `train_idx`, then evaluate `eval_idx` frozen (paper and held-out protocols)."""
    result = result or ProtocolResult()
    sched_local, hot_local = hot_cold_schedule(len(train_idx), burn_in, seed)
    schedule, hot = train_idx[sched_local], set(train_idx[hot_local].tolist())
    visited = set(schedule.tolist())
    fitted: dict[int, QueryClusters] = {}
    for arm in arms:
        if arm.kind == "rif":
            cl = _clusters(fitted, ctx.query_vectors[train_idx], arm.k, seed, ctx, arm.cues)
            clusters_of = cl.assign(ctx.query_vectors)
            state = SuppressionState(cl.k, ctx.n_entries, arm.params)
            step = _burn_in(ctx, arm, state, clusters_of, schedule, result, seed, snapshot_every, split)
            result.suppressed.setdefault(arm.name, {})[split] = {"entries": state.suppressed_entries(), "docs": state.suppressed_docs()}
        else:
            state, clusters_of, step = None, np.zeros(len(ctx.pools.query_ids), dtype=np.int64), burn_in
        for i in eval_idx:
            ret = retrieve(ctx.pools, int(i), arm, state, int(clusters_of[i]), step, ctx.mode)
            bucket = ("hot" if i in hot else "cold" if i in visited else "unseen") if buckets else "heldout"
            result.rows.append(_row(ctx, arm, int(i), ret, clusters_of[i], seed=seed, split=split, bucket=bucket))
    return result


def run_paper(ctx: ReplayContext, arms: list[Arm], seed: int = 42, burn_in: int = 5000, snapshot_every: int = 500) -> ProtocolResult:
    idx = np.arange(len(ctx.pools.query_ids))
    return run_frozen(ctx, arms, seed, burn_in, idx, idx, "all", snapshot_every, buckets=True)


def conversation_halves(ctx: ReplayContext, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The `heldout` split (`datasets.splits.conversation_halves`) of a replay's query positions; seeded: a random half."""
    qids = ctx.pools.query_ids
    return splits.conversation_halves([ctx.queries[q].conversation_id for q in qids], qids, seed)


def run_heldout(ctx: ReplayContext, arms: list[Arm], seed: int = 42, burn_in: int = 5000, snapshot_every: int = 500) -> ProtocolResult:
    """Learn on one half of the conversations, evaluate frozen on the other, both ways; every seed draws its own
    conversation split as well as its own burn-in stream, so several seeds are several splits."""
    a, b = conversation_halves(ctx, seed)
    result = ProtocolResult()
    run_frozen(ctx, arms, seed, burn_in, a, b, "A->B", snapshot_every, result)
    run_frozen(ctx, arms, seed, burn_in, b, a, "B->A", snapshot_every, result)
    return result


def arrival_order(ctx: ReplayContext, seed: int) -> np.ndarray:
    dates = [ctx.queries[q].date for q in ctx.pools.query_ids]
    if all(d is not None for d in dates):
        return np.array(sorted(range(len(dates)), key=lambda i: (dates[i], ctx.pools.query_ids[i])))
    return np.random.default_rng(seed).permutation(len(dates))


def run_prequential(ctx: ReplayContext, arms: list[Arm], seed: int = 42, bootstrap: int = 200, snapshot_every: int = 500) -> ProtocolResult:
    result = ProtocolResult()
    order = arrival_order(ctx, seed)
    n = len(order)
    fitted: dict[int, QueryClusters] = {}  # arms with the same K share one fit, as in run_frozen
    for arm in arms:
        state = SuppressionState(1, ctx.n_entries, arm.params) if arm.kind == "rif" else None
        clusters_of = np.zeros(len(ctx.pools.query_ids), dtype=np.int64)
        for t, i in enumerate(order):  # step t (0-based): the (t + 1)-th query to arrive
            # query cues wait for `bootstrap` queries; entry cues are fit on the corpus before the first query
            fit_at = 0 if arm.cues == "entry" else min(bootstrap, n)
            if arm.kind == "rif" and arm.k > 1 and t == fit_at:
                cl = _clusters(fitted, ctx.query_vectors[order[:t]], arm.k, seed, ctx, arm.cues)
                clusters_of = cl.assign(ctx.query_vectors)
                grown = SuppressionState(cl.k, ctx.n_entries, arm.params)
                grown.values[:], grown.last[:] = state.values[0], state.last[0]
                state = grown
            c = int(clusters_of[i])
            ret = retrieve(ctx.pools, int(i), arm, state, c, t, ctx.mode)
            result.rows.append(_row(ctx, arm, int(i), ret, c, seed=seed, split="stream", bucket="stream", position=t + 1))
            if state is not None:
                learn(ctx.pools, arm, state, c, t, ret)
                if snapshot_every and (t + 1) % snapshot_every == 0:
                    _snapshot(ctx, arm, state, t + 1, seed, "stream", result)
        if state is not None:
            result.suppressed.setdefault(arm.name, {})["stream"] = {"entries": state.suppressed_entries(), "docs": state.suppressed_docs()}
    return result
