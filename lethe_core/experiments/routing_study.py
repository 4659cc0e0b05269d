"""Checkpoint 09, GC routing index (lethe_core.mechanisms.routing; docs/routing.md): static pipeline vs routing (vs routing with
deep-mined exploration), under the reference's protocol and a held-out one, several seeds.

Protocols (queries and pools from `RIFExperiment.context()`, the same cached pools as the RIF notebooks):
- `paper`: the usage stream is the reference's hot/cold schedule (`rif.protocols.hot_cold_schedule`) drawn from the
  evaluation queries themselves; then every query is evaluated with clusters and routes frozen;
- `heldout`: `datasets.splits.conversation_halves`: learn on one half of the conversations, evaluate frozen on the
  other, both directions.
Every `burn_in / curve_points` steps the evaluation set is also scored frozen (NDCG@10 over steps).

Results: `data/results/routing-<dataset>-<reranker>-<hash>/`: config.json, per_query.parquet (final step, one row
per protocol, seed, split, arm and query), curves.parquet (every evaluated step), summary.json. A run whose
config hash matches a finished one is read back, not recomputed (`results.store`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.datasets.splits import HELDOUT, PAPER, check_protocol, train_eval_pairs
from lethe_core.results.store import digest, slug, write_json, write_parquet, write_summary
from lethe_core.rif.protocols import hot_cold_schedule
from lethe_core.mechanisms.routing import STATIC, InjectedScorer, RoutingParams, replay, static_rows
from lethe_core.mechanisms.score_scale import SCALES, matched_threshold, top1_scores
from lethe_core.experiments import rif_sweep
from lethe_core.experiments.rif import PAPER_SEED, RIFExperiment
from lethe_core.experiments.setup import DataStudy, Loaded

PROTOCOLS = (PAPER, HELDOUT)
# The reference (CHECKPOINTS.md, CK9): static hybrid+xenc on its 200-query audit sample, then 2,000 routing steps.
REFERENCE = {"static": 0.3680, "routing": 0.3273, "relative": -0.11, "routes": 4345, "memory": 1763, "steps": 2000}


def train_eval(ctx, protocol: str, split_seed: int | None = None) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """`datasets.splits.train_eval_pairs` over a replay's query positions (conversations in pool order, as the RIF replay);
    `split_seed` draws the held-out conversation halves (None: the fixed split)."""
    qids = ctx.pools.query_ids
    return train_eval_pairs(protocol, [ctx.queries[q].conversation_id for q in qids], query_ids=qids, split_seed=split_seed)


def scheduled(pairs, steps: int, seed: int):
    """Each (train, evaluate, split) with its usage stream: `steps` draws of the reference's hot/cold schedule from train."""
    for train, evaluate, split in pairs:
        sched, _ = hot_cold_schedule(len(train), steps, seed)
        yield train, evaluate, split, train[sched]


def splits(ctx, protocol: str, seed: int, burn_in: int):
    """(train positions, eval positions, split name, schedule of query positions) for one protocol and seed."""
    return scheduled(train_eval(ctx, check_protocol(protocol, PROTOCOLS)), burn_in, seed)


def contrasts(final: pd.DataFrame, baseline: str, protocols: Sequence[str], n_resamples: int = stats.N_RESAMPLES) -> pd.DataFrame:
    """Every arm against `baseline` per protocol (`rif_sweep.delta_table`): the level, the paired delta with its 95 % CI
    over queries (of the seed mean per query), the per-seed spread; plus the sign-flip permutation p on the same
    per-query deltas and the relative change."""
    table = rif_sweep.delta_table(final, baseline=baseline, n_resamples=n_resamples)
    d = rif_sweep.per_query_delta(final, baseline)
    per_query = d.groupby(["protocol", "arm", "split", "query_id"])["delta"].mean()
    ps = {key: (None if key[1] == baseline else stats.paired_permutation_test(g.to_numpy(), np.zeros(len(g)), n_resamples))
          for key, g in per_query.groupby(level=["protocol", "arm"])}
    table["p"] = [ps.get((pr, a)) for pr, a in zip(table["protocol"], table["arm"])]
    table["relative"] = table["delta"] / (table["value"] - table["delta"])
    return table[table["protocol"].isin(protocols)].reset_index(drop=True)


def curve_table(curves: pd.DataFrame, final: pd.DataFrame, baseline: str, n_resamples: int = stats.N_RESAMPLES) -> pd.DataFrame:
    """NDCG@10 over burn-in steps: per protocol, arm and step the mean and its delta vs the baseline with 95 % CIs."""
    base = final[final["arm"] == baseline]
    out = []
    for step, g in curves.groupby("step"):
        t = rif_sweep.delta_table(pd.concat([base, g.drop(columns="step")], ignore_index=True), baseline=baseline, n_resamples=n_resamples)
        out.append(t[t["arm"] != baseline].assign(step=int(step)))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


@dataclass
class ReplayStudy(DataStudy):
    """What the routing and rescue studies share: protocols, seeds, the burn-in and its frozen evaluations, the score
    scale, the resamples; the replay inputs of `RIFExperiment.context()` (same dataset, reranker, pools), their config
    and run id. A subclass sets `prefix`, `supported` (its protocols, named in `datasets.splits`) and its defaults, and
    implements `_replay(ctx, info)` -> (summary, {name: frame written as <name>.parquet})."""

    prefix: ClassVar[str] = ""
    supported: ClassVar[tuple[str, ...]] = ()
    protocols: tuple[str, ...] = ()
    seeds: int = 3  # seeds 42, 43, ... (the schedule's rng)
    burn_in: int = 0
    curve_points: int = 0  # frozen evaluations during the burn-in (plus the end)
    # matched: the reference's MS MARCO logit thresholds are mapped per split onto our scale by the share of the training
    # questions' top-1 scores below them (lethe_core.mechanisms.score_scale); raw: read as our score
    scale: str = "matched"
    n_resamples: int = stats.N_RESAMPLES  # bootstrap resamples and permutations

    def __post_init__(self):
        super().__post_init__()
        bad = [p for p in self.protocols if p not in self.supported]
        if bad or not self.protocols:
            raise ValueError(f"protocols must be a non-empty subset of {self.supported}, got {self.protocols}")
        if self.seeds < 1 or self.burn_in < 0 or self.curve_points < 0 or self.n_resamples < 100:
            raise ValueError("seeds must be >= 1, burn_in and curve_points >= 0, n_resamples >= 100")
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {self.scale!r}")

    def config(self, loaded: Loaded) -> dict:
        """The study's fields (progress aside), `config_extra()`, the seeds and what identifies the pools (builds them when missing)."""
        return {**self.flat_config(progress=False), **self.config_extra(), "seed_list": [PAPER_SEED + s for s in range(self.seeds)],
                "reranker_resolved": loaded.pools.reranker, "pool_key": loaded.builder.key,
                "dataset_fingerprint": loaded.dataset.fingerprint}

    def run_id(self, loaded: Loaded, config: dict | None = None) -> str:
        """`<prefix>-<dataset>-<reranker>-<digest of the config>`."""
        return f"{self.prefix}-{loaded.dataset.name}-{slug(loaded.pools.reranker)}-{digest(config or self.config(loaded))}"

    def _compute(self, loaded: Loaded, out: Path, config: dict) -> dict:
        ctx, info = RIFExperiment(data=self.data, burn_in=self.burn_in).context(entries=False, loaded=loaded)
        summary, frames = self._replay(ctx, info)
        write_json(out / "config.json", config)
        for name, frame in frames.items():
            write_parquet(out / f"{name}.parquet", frame)
        summary["results_dir"] = str(out)
        return write_summary(out, summary)

    def _replay(self, ctx, info) -> tuple[dict, dict[str, pd.DataFrame]]:
        raise NotImplementedError


@dataclass
class RoutingStudy(ReplayStudy):
    prefix: ClassVar[str] = "routing"
    supported: ClassVar[tuple[str, ...]] = PROTOCOLS
    protocols: tuple[str, ...] = PROTOCOLS
    burn_in: int = 2000  # routing steps (the reference's 2,000)
    curve_points: int = 4
    explore: bool = True  # also run the arm that mines positive verdicts below the pool
    params: RoutingParams = field(default_factory=RoutingParams)  # matched scale: `params.create_above` is mapped per split

    def scaled(self, ctx, train: np.ndarray) -> RoutingParams:
        """The routing parameters for one training split: the creation threshold on our scale."""
        if self.scale == "raw":
            return self.params
        t = matched_threshold(self.params.create_above, top1_scores(ctx.pools, train, self.data.pipeline.pool_size))
        return replace(self.params, create_above=t)

    def arms(self) -> list[tuple[str, bool]]:
        return [("routing", False)] + ([("routing+explore", True)] if self.explore else [])

    def config_extra(self) -> dict:
        return {"params": asdict(self.params)}

    def _replay(self, ctx, info) -> tuple[dict, dict[str, pd.DataFrame]]:
        from tqdm.auto import tqdm

        scorer = InjectedScorer(ctx, info["builder"].reranker, info["builder"].root / "pair_scores.sqlite", self.data.calibration)
        P = self.data.pipeline.pool_size
        eval_at = [round(self.burn_in * k / (self.curve_points + 1)) for k in range(self.curve_points + 1)]
        final, curves, counts = [], [], []
        jobs = [(pr, PAPER_SEED + s) for pr in self.protocols for s in range(self.seeds)]
        try:
            for protocol, seed in tqdm(jobs, desc="routing replays", unit="replay", disable=not self.data.progress):
                for train, evaluate, split, schedule in splits(ctx, protocol, seed, self.burn_in):
                    tag = {"protocol": protocol, "seed": seed, "split": split}
                    final += [{**r, **tag} for r in static_rows(ctx, evaluate, P)]
                    params = self.scaled(ctx, train)
                    for name, explore in self.arms():
                        rows, c = replay(ctx, scorer, schedule, evaluate, params, explore, eval_at, P, name)
                        for r in rows:
                            (final if r["step"] == self.burn_in else curves).append({**r, **tag})
                        counts.append({**tag, "arm": name, "create_above": params.create_above, **c})
        finally:
            scorer.close()
        final_df, curve_df = pd.DataFrame(final), pd.DataFrame(curves)
        if curve_df.empty:
            curve_df = final_df.iloc[0:0]
        curve_df = pd.concat([curve_df, final_df[final_df["arm"] != STATIC]], ignore_index=True)
        counts_df = pd.DataFrame(counts)
        table = contrasts(final_df, STATIC, self.protocols, self.n_resamples)
        curve = curve_table(curve_df, final_df, STATIC, self.n_resamples)
        summary = {"dataset": ctx.dataset.name, "reranker": info["reranker"], "n_queries": len(ctx.pools.query_ids),
                   "burn_in": self.burn_in, "seeds": [PAPER_SEED + s for s in range(self.seeds)],
                   "table": json.loads(table.to_json(orient="records")), "curve": json.loads(curve.to_json(orient="records")),
                   "routes": json.loads(counts_df.groupby(["protocol", "arm"]).mean(numeric_only=True).drop(columns="seed")
                                        .reset_index().to_json(orient="records")),
                   "pairs": {"scored": scorer.scored, "from_pair_cache": scorer.cached}, "reference": REFERENCE,
                   "calibrated": bool((ctx.pools.read_logit != ctx.pools.logit).any())}
        return summary, {"per_query": final_df, "curves": curve_df, "routes": counts_df}
