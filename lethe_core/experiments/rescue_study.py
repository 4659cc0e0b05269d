"""Checkpoint 14, exploration + rescue list (lethe_core.mechanisms.rescue_list; docs/rescue.md): the reference's variants on top of
clustered30 + rank-gap RIF, from pools whose legs go 80 deep (`PipelineConfig(k_leg=80)`: every union member scored).

Protocols (clusters and burn-in on the training queries, evaluation frozen: RIF state and rescue lists untouched):
- `sample100`: the reference's "fast benchmark": 100 queries drawn with `default_rng(7 + seed index)` (the first
  seed is the reference's sample), a burn-in of `sample_burn_in` (800) steps drawn from those 100, evaluated on them;
- `paper`: the reference's validation run: all queries, `burn_in` (3,000) steps drawn from them, evaluated on them;
- `heldout`: `datasets.splits.conversation_halves`, learn on one half, evaluate frozen on the other, both directions;
  each seed draws its own conversation split, as the RIF replay does.
The reference kept updating its RIF state during the evaluation pass (its numbers depend on the query order); ours
never do.

Results: `data/results/rescue-<dataset>-<reranker>-<hash>/`: config.json, per_query.parquet, curves.parquet
(frozen evaluations during the burn-in, for `curve_arms`), lists.parquet (rescue-list sizes at the end), summary.json.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import ClassVar

import numpy as np
import pandas as pd

from lethe_core.mechanisms.rescue_list import RescueList, RescueParams, learn_step, rescued_retrieval
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rif import fast
from lethe_core.rif.clusters import QueryClusters
from lethe_core.rif.replay import Arm, score
from lethe_core.rif.state import RIFParams, SuppressionState
from lethe_core.mechanisms.routing import InjectedScorer
from lethe_core.mechanisms.score_scale import matched_threshold, top1_scores
from lethe_core.datasets.splits import HELDOUT, PAPER, SAMPLE100
from lethe_core.experiments.rif import PAPER_SEED
from lethe_core.experiments.routing_study import ReplayStudy, contrasts, curve_table, scheduled, train_eval
from lethe_core.experiments.setup import DataSpec

PROTOCOLS = (SAMPLE100, PAPER, HELDOUT)
BASE = "clustered30-gap"
RESCUE_PIPELINE = PipelineConfig(k_leg=80)  # the study's first stage: legs 80 deep, every union member scored
CAP = 50  # run_explore.py and the threshold runs

# The reference's variants (CHECKPOINTS.md, CK14), name -> rescue parameters.
VARIANTS: dict[str, RescueParams] = {
    "every1": RescueParams(explore_every=1, threshold=1.0, cap=CAP),
    "every5": RescueParams(explore_every=5, threshold=1.0, cap=CAP),
    "every20": RescueParams(explore_every=20, threshold=1.0, cap=CAP),
    "every20-t0": RescueParams(explore_every=20, threshold=0.0, cap=CAP),
    "every20-t2": RescueParams(explore_every=20, threshold=2.0, cap=CAP),
    "top3": RescueParams(explore_every=5, threshold=1.0, top_k=3),
    "top5": RescueParams(explore_every=5, threshold=1.0, top_k=5),
    "top10": RescueParams(explore_every=5, threshold=1.0, top_k=10),
    "all": RescueParams(explore_every=5, threshold=1.0),
    "bandit-soft": RescueParams(explore_every=5, threshold=1.0, bandit_decay=0.3),
    "bandit-hard": RescueParams(explore_every=5, threshold=1.0, bandit_decay=0.5, prune_floor=0.2),
}
# Its NDCG@10 (LongMemEval S). Fast benchmark: 100 queries (default_rng(7)), 800 burn-in; validation: 500, 3,000.
REFERENCE_FAST = {"baseline": 0.3029, "clustered30-gap": 0.3061, "every20": 0.3082, "every5": 0.3078, "every1": 0.3004,
                  "top3": 0.3104, "top5": 0.3065, "top10": 0.3078, "all": 0.3028, "bandit-soft": 0.3067, "bandit-hard": 0.3068}
REFERENCE_VALIDATION = {"baseline": 0.2926, "clustered30-gap": 0.3124, "top3": 0.3049, "top5": 0.3011, "top10": 0.3003,
                        "rescued": 1006}


def sample_positions(n: int, size: int, seed_index: int, base_seed: int = 7) -> np.ndarray:
    """The reference's small sample: `size` query positions drawn without replacement with default_rng(7 + index), sorted."""
    return np.sort(np.random.default_rng(base_seed + seed_index).choice(n, size=min(size, n), replace=False))


@dataclass
class RescueStudy(ReplayStudy):
    prefix: ClassVar[str] = "rescue"
    supported: ClassVar[tuple[str, ...]] = PROTOCOLS
    data: DataSpec = field(default_factory=lambda: DataSpec(pipeline=RESCUE_PIPELINE))
    protocols: tuple[str, ...] = PROTOCOLS
    burn_in: int = 3000  # paper and held-out (the reference's validation run)
    curve_points: int = 2
    variants: tuple[str, ...] = tuple(VARIANTS)  # matched scale: each variant's threshold is mapped per split
    sample_size: int = 100
    sample_burn_in: int = 800  # the reference's fast benchmark
    k: int = 30  # query clusters of the base RIF arm
    curve_arms: tuple[str, ...] = (BASE, "every5", "top3")
    rif: RIFParams = field(default_factory=RIFParams)

    def __post_init__(self):
        super().__post_init__()
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown:
            raise ValueError(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
        if self.sample_burn_in < 0 or self.sample_size < 1 or self.k < 1:
            raise ValueError("sample_size and k must be >= 1 and sample_burn_in >= 0")
        if self.rif.pool_size != self.data.pipeline.pool_size:
            raise ValueError("the RIF pool size must be the pipeline's pool size")

    def arms(self) -> list[tuple[Arm, RescueParams | None]]:
        base = Arm(BASE, "rif", self.k, "gap", self.rif)
        out = [(Arm("baseline", "baseline", params=self.rif), None), (base, None)]
        return out + [(Arm(v, "rif", self.k, "gap", self.rif), VARIANTS[v]) for v in self.variants]

    def splits(self, ctx, protocol: str, seed_index: int):
        """(train, evaluate, split, schedule) of one protocol and seed: `sample100` its own sample, else `routing_study.train_eval`."""
        if protocol == SAMPLE100:
            s = sample_positions(len(ctx.pools.query_ids), self.sample_size, seed_index)
            return scheduled([(s, s, "sample")], self.sample_burn_in, PAPER_SEED + seed_index)
        return scheduled(train_eval(ctx, protocol, PAPER_SEED + seed_index), self.burn_in, PAPER_SEED + seed_index)

    def config_extra(self) -> dict:
        return {"rif": asdict(self.rif), "variant_params": {v: asdict(VARIANTS[v]) for v in self.variants}}

    def replay_split(self, ctx, scorer, train, evaluate, schedule, seed: int, tag: dict) -> tuple[list, list, list]:
        """Every arm on one (train, evaluate, schedule): final frozen rows, curve rows, rescue-list sizes."""
        clusters_of = QueryClusters.fit(ctx.query_vectors[train], min(self.k, len(train)), seed=seed).assign(ctx.query_vectors)
        steps = len(schedule)
        at = {round(steps * c / (self.curve_points + 1)) for c in range(1, self.curve_points + 1)} - {steps}
        final, curves, lists = [], [], []
        top1 = top1_scores(ctx.pools, train, self.data.pipeline.pool_size) if self.scale == "matched" else None

        def evaluate_all(arm, state, rescue, step, sink):
            for i in evaluate:
                i = int(i)
                c = int(clusters_of[i])
                ret, view, judged, vi, injected = rescued_retrieval(ctx, i, arm, state, rescue, c, step, scorer)
                ndcg, rec, pool_rec = score(view, judged, vi, ret)
                in_top = int(np.isin(view.doc_idx[ret.order[:10]], injected).sum()) if len(injected) else 0
                sink.append({**tag, "arm": arm.name, "step": step, "query_id": ctx.pools.query_ids[i], "cluster": c,
                             "ndcg@10": ndcg, "recall@10": rec, "pool_recall@30": pool_rec, "injected": len(injected),
                             "injected_in_top10": in_top})

        for arm, rp in self.arms():
            if arm.kind == "baseline":
                evaluate_all(arm, None, None, steps, final)
                continue
            state = SuppressionState(int(clusters_of.max()) + 1, ctx.n_entries, arm.params)
            if rp is not None and top1 is not None:
                rp = replace(rp, threshold=matched_threshold(rp.threshold, top1))
            rescue = RescueList(rp) if rp is not None else None
            marks = sorted(at) if arm.name in self.curve_arms else []
            start = 0
            for stop in [*marks, steps]:
                part = schedule[start:stop]
                if rescue is not None or not fast.burn_in(ctx.pools, arm, state, clusters_of, part, start):
                    for step, i in enumerate(part, start=start):
                        learn_step(ctx, int(i), arm, state, rescue, int(clusters_of[i]), step, scorer)
                start = stop
                evaluate_all(arm, state, rescue, stop, final if stop == steps else curves)
            if rescue is not None:
                lists.append({**tag, "arm": arm.name, "threshold": rp.threshold, "rescues": rescue.size(), "pruned": rescue.pruned, "evicted": rescue.evicted,
                              "clusters_with_rescues": sum(1 for t in rescue.items.values() if t)})
        return final, curves, lists

    def _replay(self, ctx, info) -> tuple[dict, dict[str, pd.DataFrame]]:
        from tqdm.auto import tqdm

        scorer = InjectedScorer(ctx, info["builder"].reranker, info["builder"].root / "pair_scores.sqlite", self.data.calibration)
        final, curves, lists = [], [], []
        jobs = [(pr, s) for pr in self.protocols for s in range(self.seeds)]
        try:
            for protocol, s in tqdm(jobs, desc=f"rescue replays ({len(self.arms())} arms)", unit="replay", disable=not self.data.progress):
                for train, evaluate, split, schedule in self.splits(ctx, protocol, s):
                    tag = {"protocol": protocol, "seed": PAPER_SEED + s, "split": split}
                    f, c, l = self.replay_split(ctx, scorer, train, evaluate, schedule, PAPER_SEED + s, tag)
                    final, curves, lists = final + f, curves + c, lists + l
        finally:
            scorer.close()
        final_df = pd.DataFrame(final)
        curve_df = pd.concat([pd.DataFrame(curves, columns=final_df.columns), final_df[final_df["arm"].isin(self.curve_arms)]],
                             ignore_index=True)
        lists_df = pd.DataFrame(lists)
        n = self.n_resamples
        vs_baseline = contrasts(final_df, "baseline", self.protocols, n)
        vs_rif = contrasts(final_df[final_df["arm"] != "baseline"], BASE, self.protocols, n)
        curve = curve_table(curve_df[curve_df["arm"] != BASE], final_df, BASE, n)
        base_curve = curve_table(curve_df[curve_df["arm"] == BASE], final_df, "baseline", n)
        summary = {"dataset": ctx.dataset.name, "reranker": info["reranker"], "n_queries": len(ctx.pools.query_ids),
                   "burn_in": self.burn_in, "sample_burn_in": self.sample_burn_in, "seeds": [PAPER_SEED + s for s in range(self.seeds)],
                   "vs_baseline": json.loads(vs_baseline.to_json(orient="records")),
                   "vs_rif": json.loads(vs_rif.to_json(orient="records")),
                   "curve_vs_rif": json.loads(curve.to_json(orient="records")),
                   "curve_rif_vs_baseline": json.loads(base_curve.to_json(orient="records")),
                   "lists": json.loads(lists_df.groupby(["protocol", "arm"]).mean(numeric_only=True).drop(columns="seed")
                                       .reset_index().to_json(orient="records")) if len(lists_df) else [],
                   "pairs": {"scored": scorer.scored, "from_pair_cache": scorer.cached},
                   "reference": {"fast": REFERENCE_FAST, "validation": REFERENCE_VALIDATION},
                   "calibrated": bool((ctx.pools.read_logit != ctx.pools.logit).any())}
        return summary, {"per_query": final_df, "curves": curve_df, "lists": lists_df}
