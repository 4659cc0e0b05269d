"""GC routing index (checkpoint 09; docs/routing.md): per query cluster, routes to turns the reranker liked,
injected into later pools of the same cluster.

What the reference did (`3db6408:src/gc_memory/routing.py`; its benchmark script was never committed):
online query clusters (a query opens a new cluster when its nearest centroid has cosine < 0.7, else the
centroid moves by an EMA with alpha = 0.1); per cluster at most 50 routes; a route (cluster -> turn) is
created only when the cross-encoder's verdict is positive (logit > 0); its affinity is an EMA (alpha = 0.3)
of sigmoid(logit); tiers naive -> gc at 3 hits, gc -> memory at affinity >= 0.6; apoptosis at affinity < 0.1
with more than 500 steps idle; decay x0.99 of every non-memory route; lookup = the top-20 gc/memory routes of
the query's cluster; "explore" adds deep-mined entries with a positive verdict. 0.3680 -> 0.3273 (-11 %).

Here (choices the reference leaves open, all in docs/routing.md):
- the verdict is the pools' `read_logit`: the raw logit (the paper's reading), or under the calibration ablation
  the fold-trained reranker's affine calibration a*x + b fitted on validation conversations, where "logit > 0"
  reads P(relevant) > 0.5 on that reranker;
- what a query observes (updates its cluster's routes from): every member of its reranked pool, injected
  routes included; with `explore`, also the union members below the pool (RRF positions >= P, scored in
  the cached pools, so free) whose verdict is positive;
- a hit is one positive verdict; decay touches the non-memory routes of the query's cluster that were not
  observed in this step; apoptosis is checked for that cluster at each of its steps;
- a full cluster admits a newcomer only by evicting its weakest non-memory route, and only when that
  route's affinity is below the newcomer's;
- injection: the looked-up routes not already in the pool are appended *after* the RRF top-P, in affinity
  order; the reranker then sorts the whole pool (ties keep that order, so an injected turn loses ties).
  Injected turns outside the query's cached union need a reranker score: `InjectedScorer`, through
  `CachedScorer` and the routed fold model (each pair scored once, ever).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

TIERS = ("naive", "gc", "memory")


@dataclass(frozen=True)
class RoutingParams:
    new_cluster_cos: float = 0.7  # a query whose nearest centroid has cosine below this opens a cluster
    centroid_alpha: float = 0.1  # centroid EMA
    max_routes: int = 50  # per cluster
    create_above: float = 0.0  # a route is created only for a verdict (calibrated logit) above this
    affinity_alpha: float = 0.3  # affinity EMA of sigmoid(logit)
    gc_hits: int = 3  # naive -> gc
    memory_affinity: float = 0.6  # gc -> memory
    apoptosis_affinity: float = 0.1
    apoptosis_idle: int = 500  # steps
    decay: float = 0.99  # per step of the cluster, non-memory routes only
    lookup: int = 20  # gc/memory routes returned per lookup

    def __post_init__(self):
        if not -1.0 <= self.new_cluster_cos <= 1.0:
            raise ValueError(f"new_cluster_cos must be a cosine in [-1, 1], got {self.new_cluster_cos}")
        for name in ("centroid_alpha", "affinity_alpha", "decay"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {getattr(self, name)}")
        if self.max_routes < 1 or self.lookup < 0 or self.gc_hits < 1:
            raise ValueError("max_routes and gc_hits must be >= 1 and lookup >= 0")


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


class OnlineClusters:
    """Query clusters grown online: nearest centroid by cosine, a new one below the threshold, EMA centroids
    (renormalised after each move, so cosine stays a dot product)."""

    def __init__(self, dim: int, params: RoutingParams = RoutingParams()):
        self.params = params
        self.centroids = np.zeros((0, dim), dtype=np.float64)

    @property
    def k(self) -> int:
        return len(self.centroids)

    def assign(self, vector: np.ndarray, learn: bool = True) -> int:
        """The query's cluster. learn=False (frozen evaluation): the nearest centroid, never a new one; -1 if none."""
        v = np.asarray(vector, dtype=np.float64)
        v = v / (np.linalg.norm(v) or 1.0)
        if self.k:
            cos = self.centroids @ v
            best = int(np.argmax(cos))
            if not learn or cos[best] >= self.params.new_cluster_cos:
                if learn:
                    a = self.params.centroid_alpha
                    c = (1 - a) * self.centroids[best] + a * v
                    self.centroids[best] = c / (np.linalg.norm(c) or 1.0)
                return best
        if not learn:
            return -1
        self.centroids = np.vstack([self.centroids, v[None, :]])
        return self.k - 1


@dataclass
class Route:
    affinity: float
    hits: int
    last: int  # step of the last observation
    tier: str = "naive"


@dataclass
class RoutingIndex:
    params: RoutingParams = field(default_factory=RoutingParams)
    routes: dict[int, dict[int, Route]] = field(default_factory=dict)  # cluster -> turn -> route
    created: int = 0
    removed: int = 0

    def _promote(self, r: Route) -> None:
        p = self.params
        if r.tier == "naive" and r.hits >= p.gc_hits:
            r.tier = "gc"
        if r.tier == "gc" and r.affinity >= p.memory_affinity:
            r.tier = "memory"

    def _admit(self, table: dict[int, Route], affinity: float) -> bool:
        if len(table) < self.params.max_routes:
            return True
        mortal = [(r.affinity, t) for t, r in table.items() if r.tier != "memory"]
        if not mortal:
            return False
        weakest, turn = min(mortal)
        if weakest >= affinity:
            return False
        del table[turn]
        self.removed += 1
        return True

    def observe(self, cluster: int, turns, logits, step: int) -> None:
        """One query of `cluster` saw these turns with these verdicts: create, update, promote, decay, apoptosis."""
        p = self.params
        table = self.routes.setdefault(cluster, {})
        seen = set()
        for t, x in zip(np.asarray(turns).tolist(), np.asarray(logits, dtype=np.float64).tolist()):
            if t in seen:
                continue
            seen.add(t)
            a = _sigmoid(x)
            r = table.get(t)
            if r is None:
                if x <= p.create_above or not self._admit(table, a):
                    continue
                r = table[t] = Route(affinity=a, hits=1, last=step)
                self.created += 1
            else:
                r.affinity = (1 - p.affinity_alpha) * r.affinity + p.affinity_alpha * a
                r.hits += int(x > p.create_above)
                r.last = step
            self._promote(r)
        for t in list(table):
            r = table[t]
            if t in seen:
                continue
            if r.tier != "memory":
                r.affinity *= p.decay
            if r.affinity < p.apoptosis_affinity and step - r.last > p.apoptosis_idle:
                del table[t]
                self.removed += 1

    def lookup(self, cluster: int) -> list[int]:
        """The top-`lookup` gc/memory routes of the cluster by affinity (ties: lower turn index)."""
        table = self.routes.get(cluster, {})
        ranked = sorted(((-r.affinity, t) for t, r in table.items() if r.tier != "naive"))
        return [t for _, t in ranked[: self.params.lookup]]

    def counts(self) -> dict:
        tiers = {tier: 0 for tier in TIERS}
        for table in self.routes.values():
            for r in table.values():
                tiers[r.tier] += 1
        return {"routes": sum(tiers.values()), **tiers, "created": self.created, "removed": self.removed,
                "clusters_with_routes": sum(1 for t in self.routes.values() if t)}


class InjectedScorer:
    """Verdicts for turns injected into a query's pool: the cached pool row when the turn is in the query's
    union, else the routed reranker through the pair-score cache (scored once, ever), read like the
    pools (raw, or `a * x + b` of the routed fold model when `calibration`). `scored` / `cached` count pairs that
    came from the model / the pair cache (pool rows count as neither)."""

    def __init__(self, ctx, reranker, cache_path=None, calibration: bool = True):
        from lethe_core.inference.pair_cache import PairScoreCache
        from lethe_core.util.paths import cache_dir

        self.ctx = ctx
        self.reranker = reranker
        self.calibration = calibration
        self.cache = PairScoreCache(cache_path or cache_dir() / "pair_scores.sqlite")
        self._scorers: dict[int, object] = {}
        self._memo: dict[tuple[int, int], float] = {}
        self._rows: dict[int, dict[int, int]] = {}
        self.scored = 0
        self.cached = 0

    def union_positions(self, i: int) -> dict[int, int]:
        """turn -> position in query i's cached union (RRF order)."""
        if i not in self._rows:
            rows = self.ctx.pools.rows(i)
            self._rows[i] = {int(d): j for j, d in enumerate(self.ctx.pools.doc_idx[rows])}
        return self._rows[i]

    def logits(self, i: int, turns) -> np.ndarray:
        from lethe_core.inference.pair_cache import CachedScorer
        from lethe_core.rerankers import route

        p = self.ctx.pools
        pos = self.union_positions(i)
        start = p.offsets[i]
        out = np.empty(len(turns), dtype=np.float64)
        missing = []
        for k, t in enumerate(turns):
            t = int(t)
            if t in pos:
                out[k] = p.read_logit[start + pos[t]]
            elif (i, t) in self._memo:
                out[k] = self._memo[(i, t)]
            else:
                missing.append(k)
        if missing:
            query = self.ctx.queries[p.query_ids[i]]
            model = route(self.reranker, query)
            scorer = self._scorers.setdefault(id(model), CachedScorer(model, self.cache))
            texts = self.ctx.dataset.require_corpus().texts
            hits, scored = scorer.hits, scorer.scored
            raw = scorer.score(query.text, [texts[int(turns[k])] for k in missing]).astype(np.float64)
            self.cached += scorer.hits - hits
            self.scored += scorer.scored - scored
            a, b = getattr(model, "calibration", (1.0, 0.0)) if self.calibration else (1.0, 0.0)
            for k, x in zip(missing, a * raw + b):
                out[k] = self._memo[(i, int(turns[k]))] = float(x)
        return out

    def close(self) -> None:
        self.cache.close()


def pool_view(ctx, i: int, keep: np.ndarray, extra: np.ndarray, extra_logits: np.ndarray, extra_rrf: float | None = None,
              rrf: np.ndarray | None = None):
    """A one-query `PackedPools` (+ its `Judgements`) made of query i's union positions `keep` followed by the
    injected turns `extra`, so `rif.replay.retrieve` / `learn` / `score` run on it unchanged.

    `rrf`: first-stage scores of the kept rows (default: their cached RRF); `extra_rrf`: the injected turns'
    score (default: below every kept row, so the first-stage order puts them last)."""
    from types import SimpleNamespace

    from lethe_core.pools.cache import PackedPools

    p, j = ctx.pools, ctx.judgements
    rows = p.rows(i)
    keep = np.asarray(keep, dtype=np.int64)
    extra = np.asarray(extra, dtype=np.int64)
    kept_rrf = p.rrf[rows][keep] if rrf is None else np.asarray(rrf, dtype=np.float64)
    conf = p.read_logit[rows][keep]
    docs = p.doc_idx[rows][keep]
    grade = j.grade[rows][keep]
    if len(extra):
        if extra_rrf is None:
            extra_rrf = (float(kept_rrf.min()) if len(kept_rrf) else 0.0) - 1e-9
        query = ctx.queries[p.query_ids[i]]
        ids = ctx.dataset.corpus.ids
        kept_rrf = np.concatenate([kept_rrf, np.full(len(extra), extra_rrf)])
        conf = np.concatenate([conf, np.asarray(extra_logits, dtype=np.float32)])
        docs = np.concatenate([docs, extra.astype(np.int32)])
        grade = np.concatenate([grade, [query.qrels.get(ids[int(t)], 0) for t in extra]])
    n = len(docs)
    conf = conf.astype(np.float32)  # a copy: verdicts filled in later never touch the cached pools
    empty = np.empty(n, np.int16)
    view = PackedPools([p.query_ids[i]], np.array([0, n], dtype=np.int64), docs, kept_rrf, conf, conf,
                       p.fuse_w[i : i + 1], empty, empty)
    judged = SimpleNamespace(grade=grade.astype(np.float64), idcg=j.idcg[i : i + 1], n_relevant=j.n_relevant[i : i + 1], _disc=j._disc)
    return view, judged


STATIC = "static"


def routed_retrieval(ctx, i: int, index: RoutingIndex | None, cluster: int, scorer: InjectedScorer | None, step: int,
                     pool_size: int = 30):
    """Query i's pool: its RRF top-P, then (when `index`) the cluster's looked-up routes not already in it, appended
    in affinity order; reranked by `rif.replay.retrieve` on that view. Returns (Retrieval, view, judgements, injected)."""
    from lethe_core.rif.replay import Arm, retrieve

    p = ctx.pools
    n = int(p.offsets[i + 1] - p.offsets[i])
    keep = np.arange(min(n, pool_size))
    injected = np.zeros(0, dtype=np.int64)
    logits = np.zeros(0)
    if index is not None and cluster >= 0:
        in_pool = set(p.doc_idx[p.rows(i)][keep].tolist())
        injected = np.array([t for t in index.lookup(cluster) if t not in in_pool], dtype=np.int64)
        logits = scorer.logits(i, injected) if len(injected) else logits
    view, judged = pool_view(ctx, i, keep, injected, logits)
    return retrieve(view, 0, Arm("routing", "control"), None, 0, step, ctx.mode), view, judged, len(injected)


def observe(ctx, index: RoutingIndex, cluster: int, i: int, view, ret, step: int, explore: bool, pool_size: int = 30) -> None:
    """Learn from one retrieval: every reranked pool member, plus (explore) the positive union members below the pool."""
    turns, logits = view.doc_idx[ret.pool], view.read_logit[ret.pool]
    if explore:
        rows = ctx.pools.rows(i)
        deep = np.arange(pool_size, rows.stop - rows.start)
        deep = deep[ctx.pools.read_logit[rows][deep] > index.params.create_above]
        turns = np.concatenate([turns, ctx.pools.doc_idx[rows][deep]])
        logits = np.concatenate([logits, ctx.pools.read_logit[rows][deep]])
    index.observe(cluster, turns, logits, step)


def replay(ctx, scorer: InjectedScorer, schedule: np.ndarray, eval_idx: np.ndarray, params: RoutingParams = RoutingParams(),
           explore: bool = False, eval_at=(), pool_size: int = 30, name: str = "routing") -> tuple[list[dict], dict]:
    """Burn in on `schedule` (query positions), learning clusters and routes online; at every step in `eval_at`
    (and at the end) evaluate `eval_idx` with everything frozen (no new cluster, no route update).

    Rows: arm, step, query_id, cluster, ndcg@10, recall@10, pool_recall@30, injected. Returns (rows, counts at the end)."""
    from lethe_core.rif.replay import score

    clusters = OnlineClusters(ctx.query_vectors.shape[1], params)
    index = RoutingIndex(params)
    rows: list[dict] = []
    checkpoints = sorted({int(s) for s in eval_at if 0 <= s <= len(schedule)} | {len(schedule)})

    def evaluate(at: int):
        for i in eval_idx:
            c = clusters.assign(ctx.query_vectors[i], learn=False)
            ret, view, judged, k = routed_retrieval(ctx, int(i), index, c, scorer, at, pool_size)
            ndcg, rec, pool_rec = score(view, judged, 0, ret)
            rows.append({"arm": name, "step": at, "query_id": ctx.pools.query_ids[i], "cluster": c, "ndcg@10": ndcg,
                         "recall@10": rec, "pool_recall@30": pool_rec, "injected": k})

    for step, i in enumerate(schedule):
        if step in checkpoints:
            evaluate(step)
        i = int(i)
        c = clusters.assign(ctx.query_vectors[i], learn=True)
        ret, view, _, _ = routed_retrieval(ctx, i, index, c, scorer, step, pool_size)
        observe(ctx, index, c, i, view, ret, step, explore, pool_size)
    evaluate(len(schedule))
    return rows, {**index.counts(), "clusters": clusters.k}


def static_rows(ctx, eval_idx: np.ndarray, pool_size: int = 30) -> list[dict]:
    """The static pipeline (RRF top-P reranked, nothing injected) on `eval_idx`, rows shaped like `replay`'s."""
    from lethe_core.rif.replay import score

    out = []
    for i in eval_idx:
        ret, view, judged, _ = routed_retrieval(ctx, int(i), None, -1, None, 0, pool_size)
        ndcg, rec, pool_rec = score(view, judged, 0, ret)
        out.append({"arm": STATIC, "step": 0, "query_id": ctx.pools.query_ids[i], "cluster": -1, "ndcg@10": ndcg,
                    "recall@10": rec, "pool_recall@30": pool_rec, "injected": 0})
    return out
