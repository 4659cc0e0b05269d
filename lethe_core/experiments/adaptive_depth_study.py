"""Checkpoint 06: adaptive depth and the rescue cache, measured on queries the system has and has not seen.

Per query the study needs the shallow pool (the paper pipeline: RRF top-30 of 30-deep legs, cached pools) and,
for each deep depth D, the RRF top-D of D-deep legs (pools built with `k_leg = D`, scored once through the
pair-score cache). A usage stream (the reference's hot/cold schedule) mines a rescue cache; then every evaluation
query is answered frozen four ways per depth — shallow or deep pool, with or without rescued turns — so that
any threshold's adaptive system is a per-query choice among them (the threshold sweep costs no scoring).

Protocols: `paper` streams and evaluates all queries (buckets hot / cold / unseen, the reference's setting);
`heldout-within` (`datasets.splits.within_conversation_halves`) splits each conversation's queries into seeded
halves, streams one half and evaluates the other (both directions; its rows carry the bucket `heldout-within`).
The trigger threshold is the `trigger_share` quantile of the *streamed* queries' shallow top-1 scores. Cost: reranker pairs per evaluation query; the control arm (rerank the whole 30-leg union) is
the yardstick for what a deeper pool buys. docs/adaptive_depth.md.
Results: `data/results/adaptive-depth-<dataset>-<reranker>-<hash>/` with config.json, per_query.parquet
(one row per seed, split, query and combination), sweep.parquet and summary.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.mechanisms.adaptive_depth import REFERENCE_TRIGGER_SHARE, threshold_for_share, triggers
from lethe_core.datasets import Dataset
from lethe_core.datasets.splits import HELDOUT_WITHIN, PAPER, train_eval_pairs
from lethe_core.inference.pair_cache import CachedScorer, PairScoreCache, identity_of
from lethe_core.measures.metrics import ndcg_at_k, recall_at_k
from lethe_core.pools.cache import PackedPools
from lethe_core.mechanisms.rescue_cache import RescueCache, RescueParams
from lethe_core.results.store import digest, json_safe, slug, write_json, write_parquet, write_summary
from lethe_core.retrieval.pipeline import query_vectors
from lethe_core.rerankers import route
from lethe_core.rif.protocols import hot_cold_schedule
from lethe_core.mechanisms.score_scale import top1_scores
from lethe_core.retrieval.second_stage import final_order
from lethe_core.experiments.setup import DataStudy, Loaded

PROTOCOLS = (PAPER, HELDOUT_WITHIN)
PAPER_SEED = 42
SWEEP_SHARES = (0.0, 0.2, 0.4, REFERENCE_TRIGGER_SHARE, 0.8, 1.0)


class PairScores:
    """(logit, calibrated) of (query, turn) pairs: read from the pools, the missing ones scored through the pair-score cache."""

    def __init__(self, ds: Dataset, reranker, packs: list[PackedPools], root: Path):
        self.ds, self.reranker, self.root = ds, reranker, root
        self.known: list[dict[int, tuple[float, float]]] = [dict() for _ in ds.queries]
        for p in packs:
            for i in range(len(p.query_ids)):
                r = p.rows(i)
                self.known[i].update(zip(p.doc_idx[r].tolist(), zip(p.logit[r].tolist(), p.read_logit[r].tolist())))
        self.hits = self.scored = 0

    def ensure(self, wanted: dict[int, np.ndarray]) -> None:
        """Score every (query i, turn) in `wanted` not known yet, batched per routed model."""
        todo = {i: [int(d) for d in docs if int(d) not in self.known[i]] for i, docs in wanted.items()}
        todo = {i: d for i, d in todo.items() if d}
        if not todo:
            return
        texts, queries = self.ds.require_corpus().texts, self.ds.queries
        cache = PairScoreCache(self.root / "pair_scores.sqlite")
        try:
            models = {i: route(self.reranker, queries[i]) for i in todo}
            for mid in dict.fromkeys(id(m) for m in models.values()):
                mine = [i for i, m in models.items() if id(m) == mid]
                model = models[mine[0]]
                scorer = CachedScorer(model, cache)
                got = scorer.score_many([(queries[i].text, [texts[d] for d in todo[i]]) for i in mine])
                a, b = getattr(model, "calibration", (1.0, 0.0))
                for i, logits in zip(mine, got):
                    self.known[i].update({d: (float(x), float(a * x + b)) for d, x in zip(todo[i], logits)})
                self.hits += scorer.hits
                self.scored += scorer.scored
            cache.record_build(f"adaptive-depth {self.ds.name} rescued pairs", identity_of(self.reranker), self.hits, self.scored)
        finally:
            cache.close()

    def logits(self, i: int, docs: np.ndarray) -> np.ndarray:
        return np.array([self.known[i][int(d)][0] for d in docs], dtype=np.float64)


@dataclass
class AdaptiveDepthExperiment(DataStudy):
    """Shallow vs deep vs adaptive pools, with and without a rescue cache, under the paper and held-out-within protocols."""

    protocols: tuple[str, ...] = PROTOCOLS
    deep_depths: tuple[int, ...] = (100,)  # the reference: 200 (its own later k_deep sweep found 100 = 200)
    trigger_share: float = REFERENCE_TRIGGER_SHARE  # share of the streamed queries whose shallow top-1 falls below the threshold
    sweep_shares: tuple[float, ...] = SWEEP_SHARES
    accept: float | None = None  # rescue acceptance score; None: the trigger threshold (both on the reranker's calibrated scale)
    rescue: RescueParams = field(default_factory=RescueParams)
    steps: int = 5000  # usage-stream length per seed and split
    seeds: int = 3  # schedule seeds 42, 43, ...
    seed: int = 0  # bootstrap seed

    def __post_init__(self):
        super().__post_init__()
        bad = [p for p in self.protocols if p not in PROTOCOLS]
        if bad or not self.protocols:
            raise ValueError(f"protocols must be among {PROTOCOLS}, got {self.protocols!r}")
        pool_size = self.data.pipeline.pool_size
        if not self.deep_depths or any(d <= pool_size for d in self.deep_depths):
            raise ValueError(f"deep depths must exceed the shallow pool ({pool_size}), got {self.deep_depths!r}")
        if not 0.0 <= self.trigger_share <= 1.0 or any(not 0.0 <= s <= 1.0 for s in self.sweep_shares):
            raise ValueError("trigger shares lie in [0, 1]")
        if self.steps < 0 or self.seeds < 1:
            raise ValueError("steps must be >= 0 and seeds >= 1")

    def deep_builders(self, loaded: Loaded) -> dict[int, object]:
        """Per deep depth D: the builder of the RRF top-D of D-deep legs (nothing is built)."""
        return {D: loaded.builder_for(replace(self.data.pipeline, k_leg=D)) for D in self.deep_depths}

    def config(self, loaded: Loaded) -> dict:
        reranker = loaded.reranker
        return {**self.flat_config(), "reranker_resolved": reranker.name, "reranker_identity": identity_of(reranker),
                "pool_key": loaded.builder.key, "deep_pool_keys": {str(D): b.key for D, b in self.deep_builders(loaded).items()},
                "dataset_fingerprint": loaded.dataset.fingerprint, "seeds": [PAPER_SEED + s for s in range(self.seeds)]}

    def run_id(self, loaded: Loaded, config: dict | None = None) -> str:
        config = config or self.config(loaded)
        hashed = {k: v for k, v in config.items() if k != "progress"}
        return f"adaptive-depth-{loaded.dataset.name}-{slug(loaded.reranker.name)}-{digest(hashed)}"

    def _compute(self, loaded: Loaded, out: Path, config: dict) -> dict:
        from tqdm.auto import tqdm

        d = self.data
        ds, reranker, qids = loaded.dataset, loaded.reranker, loaded.query_ids
        shallow_builder, shallow = loaded.builder, loaded.packed
        deep = {D: b.build().packed(qids, d.calibration) for D, b in self.deep_builders(loaded).items()}
        qvecs = query_vectors(ds.queries, d.pipeline, shallow_builder.root, d.progress)
        scores = PairScores(ds, reranker, [shallow, *deep.values()], shallow_builder.root)
        view = _Views(ds, shallow, deep, d.pipeline.pool_size, d.second_stage)

        rows, sweep_rows, caches = [], [], []
        seeds = config["seeds"]
        n = len(qids)
        conversations = [q.conversation_id or q.id for q in ds.queries]
        jobs = [(protocol, seed, split, train, evaluate) for protocol in self.protocols for seed in seeds
                for train, evaluate, split in train_eval_pairs(protocol, conversations, seed)]
        for protocol, seed, split, train, evaluate in tqdm(jobs, desc=f"adaptive depth {ds.name}", unit="run", disable=not d.progress):
            threshold = threshold_for_share(view.top1[train], self.trigger_share)
            accept = self.accept if self.accept is not None else threshold
            cache, schedule, hot, mined_pairs = self._stream(view, qvecs, qids, train, seed, accept)
            visited = set(schedule.tolist())
            looked = {int(i): cache.lookup(qvecs[i], exclude=view.pool(int(i)))[0] for i in evaluate}
            scores.ensure(looked)
            caches.append({"protocol": protocol, "seed": seed, "split": split, "threshold": threshold, "accept": accept,
                           "entries": len(cache), "evicted": cache.evicted, "aged_out": cache.aged_out,
                           "mining_pairs_per_step": mined_pairs / max(1, len(schedule))})
            for i in evaluate:
                i = int(i)
                bucket = ("hot" if i in hot else "cold" if i in visited else "unseen") if protocol == PAPER else protocol
                base = {"protocol": protocol, "seed": seed, "split": split, "query_id": qids[i], "qtype": ds.queries[i].qtype,
                        "bucket": bucket, "top1": view.top1[i], "threshold": threshold}
                for name, docs, pairs in view.combinations(i, looked[i], scores):
                    ranked = view.ids[docs].tolist()
                    q = ds.queries[i]
                    rows.append({**base, "combination": name, "ndcg@10": ndcg_at_k(ranked, q.qrels, 10),
                                 "recall@10": recall_at_k(ranked, q.qrels, 10), "pairs": pairs})
            for share in self.sweep_shares:
                sweep_rows.append({"protocol": protocol, "seed": seed, "split": split, "share": share,
                                   "threshold": threshold_for_share(view.top1[train], share)})
        per_query = pd.DataFrame(rows)
        systems = adaptive_systems(per_query, self.deep_depths)
        sweep = threshold_sweep(per_query, pd.DataFrame(sweep_rows), self.deep_depths, self.seed)

        summary = summarise(systems, sweep, self.seed)
        summary.update({"dataset": ds.name, "n_queries": n, **ds.dropped_entries(), "reranker": reranker.name,
                        "reranker_identity": identity_of(reranker), "results_dir": str(out), "caches": caches,
                        "rescued_pairs": {"hits": scores.hits, "scored": scores.scored},
                        "union_size": float(np.diff(shallow.offsets).mean()),
                        "deep_union_size": {str(D): float(np.diff(p.offsets).mean()) for D, p in deep.items()}})
        write_json(out / "config.json", config)
        write_parquet(out / "per_query.parquet", systems)
        write_parquet(out / "sweep.parquet", sweep)
        return write_summary(out, summary)

    def _stream(self, view: "_Views", qvecs: np.ndarray, qids: list[str], train: np.ndarray, seed: int, accept: float):
        """The usage stream over `train`: every `mine_every` steps the current query's deep candidates that the
        shallow pool missed are reranked and the accepted ones stored. Returns the cache, schedule, hot set and mined pairs."""
        local, hot_local = hot_cold_schedule(len(train), self.steps, seed)
        schedule, hot = train[local], set(train[hot_local].tolist())
        cache = RescueCache(qvecs.shape[1], replace(self.rescue, accept=accept))
        D = min(view.depths)  # the reference mined its top-100
        mined = 0
        for step, i in enumerate(schedule):
            if step % self.rescue.mine_every:
                continue
            i = int(i)
            docs, conf = view.mined(i, D)
            mined += len(docs)
            cache.mine(step, qids[i], qvecs[i], docs, conf)
        return cache, schedule, hot, mined


class _Views:
    """Per-query pools of the shallow and deep pipelines, in first-stage order, and their answer orders."""

    def __init__(self, ds: Dataset, shallow: PackedPools, deep: dict[int, PackedPools], pool_size: int, mode: str):
        self.ids = np.asarray(ds.require_corpus().ids, dtype=object)
        self.shallow, self.deep, self.P, self.mode = shallow, deep, pool_size, mode
        self.depths = tuple(deep)
        self.top1 = top1_scores(shallow, np.arange(len(shallow.query_ids)), pool_size)

    def _rows(self, p: PackedPools, i: int, depth: int) -> slice:
        r = p.rows(i)
        return slice(r.start, min(r.stop, r.start + depth))

    def pool(self, i: int, depth: int | None = None) -> np.ndarray:
        """Corpus indices of the shallow pool (depth None) or the RRF top-`depth` of the `depth`-deep legs."""
        if depth is None:
            return self.shallow.doc_idx[self._rows(self.shallow, i, self.P)]
        return self.deep[depth].doc_idx[self._rows(self.deep[depth], i, depth)]

    def mined(self, i: int, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """The deep pool's members the shallow pool missed, with their calibrated scores."""
        r = self._rows(self.deep[depth], i, depth)
        docs, conf = self.deep[depth].doc_idx[r], self.deep[depth].read_logit[r]
        new = ~np.isin(docs, self.pool(i))
        return docs[new], conf[new]

    def _answer(self, i: int, docs: np.ndarray, scores: PairScores, fuse_w: float) -> np.ndarray:
        return docs[final_order(scores.logits(i, docs), fuse_w, self.mode)]

    def combinations(self, i: int, rescued: np.ndarray, scores: PairScores):
        """(name, answer order, reranker pairs) for shallow, control, shallow+rescue and, per depth D, deep{D} and deep{D}+rescue.

        `rescued`: the cache's turns for this query (none of them in the shallow pool). Pairs: the shallow pool is paid
        by every combination; a deep pool adds its members the shallow pool lacks; rescued turns not already in the pool
        add themselves (appended after the pool in first-stage order, then everything is reranked).
        """
        fuse_w = float(self.shallow.fuse_w[i])
        shallow = self.pool(i)
        union = self.shallow.doc_idx[self.shallow.rows(i)]
        yield "shallow", self._answer(i, shallow, scores, fuse_w), len(shallow)
        yield "control", self._answer(i, union, scores, fuse_w), len(union)
        yield "shallow+rescue", self._answer(i, np.concatenate([shallow, rescued]), scores, fuse_w), len(shallow) + len(rescued)
        for D in self.depths:
            deep = self.pool(i, D)
            deep_cost = len(shallow) + int((~np.isin(deep, shallow)).sum())
            extra = rescued[~np.isin(rescued, deep)]
            yield f"deep{D}", self._answer(i, deep, scores, fuse_w), deep_cost
            yield f"deep{D}+rescue", self._answer(i, np.concatenate([deep, extra]), scores, fuse_w), deep_cost + len(extra)


def adaptive_systems(per_query: pd.DataFrame, depths) -> pd.DataFrame:
    """Add the adaptive rows (deep pool only when the shallow top-1 is below the run's threshold), per depth, with and
    without rescue, to the per-(seed, split, query) combination rows."""
    key = ["protocol", "seed", "split", "query_id"]
    wide = per_query.pivot_table(index=key, columns="combination", values=["ndcg@10", "recall@10", "pairs"], aggfunc="first")
    meta = per_query.drop_duplicates(key).set_index(key)[["qtype", "bucket", "top1", "threshold"]].reindex(wide.index)
    deep = pd.Series(triggers(meta["top1"].to_numpy(), meta["threshold"].to_numpy()), index=meta.index)
    extra = []
    for D in depths:
        for name, when_deep, when_shallow in ((f"adaptive{D}", f"deep{D}", "shallow"),
                                              (f"adaptive{D}+rescue", f"deep{D}+rescue", "shallow+rescue")):
            part = meta.copy()
            for col in ("ndcg@10", "recall@10", "pairs"):
                part[col] = np.where(deep, wide[(col, when_deep)], wide[(col, when_shallow)])
            part["combination"] = name
            part["deep"] = deep.to_numpy()
            extra.append(part.reset_index())
    out = pd.concat([per_query.assign(deep=per_query["combination"].str.startswith("deep")), *extra], ignore_index=True)
    return out


def _per_query_mean(frame: pd.DataFrame, col: str = "ndcg@10") -> pd.Series:
    """Mean over seeds (and held-out directions) per query: the unit the bootstrap resamples."""
    return frame.groupby("query_id", sort=True)[col].mean()


def threshold_sweep(per_query: pd.DataFrame, thresholds: pd.DataFrame, depths, seed: int = 0) -> pd.DataFrame:
    """NDCG@10 and pairs per query of the adaptive system at each trigger share, with and without rescue (paired CI vs shallow)."""
    key = ["protocol", "seed", "split", "query_id"]
    wide = per_query.pivot_table(index=key, columns="combination", values=["ndcg@10", "pairs"], aggfunc="first")
    top1 = per_query.drop_duplicates(key).set_index(key)["top1"].reindex(wide.index)
    out = []
    for (protocol, share), runs in thresholds.groupby(["protocol", "share"]):
        t = runs.set_index(["seed", "split"])["threshold"]
        sub = wide.loc[protocol]
        tt = t.reindex(pd.MultiIndex.from_arrays([sub.index.get_level_values("seed"), sub.index.get_level_values("split")])).to_numpy()
        deep = triggers(top1.loc[protocol].to_numpy(), tt)
        shallow = sub[("ndcg@10", "shallow")].groupby(level="query_id").mean()
        for D in depths:
            for rescue in (False, True):
                hi, lo = (f"deep{D}+rescue", "shallow+rescue") if rescue else (f"deep{D}", "shallow")
                ndcg = pd.Series(np.where(deep, sub[("ndcg@10", hi)], sub[("ndcg@10", lo)]), index=sub.index)
                pairs = np.where(deep, sub[("pairs", hi)], sub[("pairs", lo)])
                per_q = ndcg.groupby(level="query_id").mean().reindex(shallow.index)
                d = stats.paired_delta_ci(per_q.to_numpy(), shallow.to_numpy(), seed=seed)
                out.append({"protocol": protocol, "share": float(share), "depth": D, "rescue": rescue,
                            "threshold": float(np.mean(t.to_numpy())), "triggered": float(deep.mean()),
                            "ndcg@10": float(per_q.mean()), "delta": d.mean, "delta_lo": d.lo, "delta_hi": d.hi,
                            "pairs": float(np.mean(pairs))})
    return pd.DataFrame(out)


def summarise(systems: pd.DataFrame, sweep: pd.DataFrame, seed: int = 0) -> dict:
    """Per protocol and combination: NDCG@10 with CI (queries), Δ vs shallow with paired CI and permutation p,
    pairs per query, the trigger share; the same per bucket (paper protocol); and the sweep records."""
    out: dict = {"protocols": {}, "sweep": json_safe(sweep.to_dict("records"))}  # thresholds of share 0 / 1 are ∓inf
    for protocol, part in systems.groupby("protocol"):
        base = _per_query_mean(part[part["combination"] == "shallow"])
        table = {}
        for name, g in part.groupby("combination", sort=False):
            m = _per_query_mean(g).reindex(base.index)
            ci = stats.bootstrap_ci(m.to_numpy(), seed=seed)
            d = stats.paired_delta_ci(m.to_numpy(), base.to_numpy(), seed=seed)
            p = stats.paired_permutation_test(m.to_numpy(), base.to_numpy(), seed=seed) if name != "shallow" else 1.0
            table[name] = {"ndcg@10": ci.mean, "ci": [ci.lo, ci.hi], "delta": d.mean, "delta_ci": [d.lo, d.hi], "p": p,
                           "pairs": float(g["pairs"].mean()), "deep_share": float(g["deep"].mean()),
                           "recall@10": float(g["recall@10"].mean())}
        buckets = {}
        for bucket, g in part.groupby("bucket"):
            b0 = _per_query_mean(g[g["combination"] == "shallow"])
            buckets[bucket] = {"n_queries": int(len(b0))}
            for name, gg in g.groupby("combination", sort=False):
                m = _per_query_mean(gg).reindex(b0.index)
                d = stats.paired_delta_ci(m.to_numpy(), b0.to_numpy(), seed=seed)
                buckets[bucket][name] = {"ndcg@10": float(m.mean()), "delta": d.mean, "delta_ci": [d.lo, d.hi],
                                         "pairs": float(gg["pairs"].mean())}
        out["protocols"][protocol] = {"systems": table, "buckets": buckets, "n_queries": int(len(base))}
    return out
