"""Checkpoint 09, GC routing index (lethe_core.routing; docs/routing.md): static pipeline vs routing (vs routing with
deep-mined exploration), under the reference's protocol and a held-out one, several seeds.

Protocols (queries and pools from `RIFExperiment.context()`, the same cached pools as the RIF notebooks):
- `paper`: the usage stream is the reference's hot/cold schedule (`rif.protocols.hot_cold_schedule`) drawn from the
  evaluation queries themselves; then every query is evaluated with clusters and routes frozen;
- `heldout`: `rif.protocols.conversation_halves`: learn on one half of the conversations, evaluate frozen on the
  other, both directions.
Every `burn_in / curve_points` steps the evaluation set is also scored frozen (NDCG@10 over steps).

Results: `data/results/routing-<dataset>-<reranker>-<hash>/`: config.json, per_query.parquet (final step, one row
per protocol, seed, split, arm and query), curves.parquet (every evaluated step), summary.json. A run whose
config hash matches a finished one is read back, not recomputed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .. import stats
from ..paths import results_dir
from ..retrieval.pipeline import PipelineConfig
from ..rif.protocols import conversation_halves, hot_cold_schedule
from ..routing import STATIC, InjectedScorer, RoutingParams, replay, static_rows
from ..score_scale import SCALES, matched_threshold, top1_scores
from ..second_stage import DEFAULT_MODE, MODES
from . import rif_sweep
from .rif import PAPER_SEED, RIFExperiment
from .systems import _atomic_write, _slug

PROTOCOLS = ("paper", "heldout")
# The reference (CHECKPOINTS.md, CK9): static hybrid+xenc on its 200-query audit sample, then 2,000 routing steps.
REFERENCE = {"static": 0.3680, "routing": 0.3273, "relative": -0.11, "routes": 4345, "memory": 1763, "steps": 2000}


def splits(ctx, protocol: str, seed: int, burn_in: int):
    """(train positions, eval positions, split name, schedule of query positions) for one protocol and seed."""
    n = len(ctx.pools.query_ids)
    if protocol == "paper":
        pairs = [(np.arange(n), np.arange(n), "all")]
    elif protocol == "heldout":
        a, b = conversation_halves(ctx)
        pairs = [(a, b, "A->B"), (b, a, "B->A")]
    else:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    for train, evaluate, split in pairs:
        sched, _ = hot_cold_schedule(len(train), burn_in, seed)
        yield train, evaluate, split, train[sched]


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


def reuse_or_run(out: Path, config: dict, compute: Callable[[], tuple[dict, dict[str, pd.DataFrame]]]) -> dict:
    """Read back a finished run of the same config (its summary.json), else compute and write config.json,
    every frame as `<name>.parquet` and summary.json (written last: it marks the run finished)."""
    done = out / "summary.json"
    if done.exists() and (out / "config.json").exists():
        if json.loads((out / "config.json").read_text()) == json.loads(json.dumps(config, default=str)):
            return json.loads(done.read_text())
    summary, frames = compute()
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(out / "config.json", lambda p: p.write_text(json.dumps(config, indent=2, default=str)))
    for name, frame in frames.items():
        _atomic_write(out / f"{name}.parquet", lambda p, f=frame: f.to_parquet(p, index=False))
    summary["results_dir"] = str(out)
    _atomic_write(done, lambda p: p.write_text(json.dumps(summary, indent=2, default=str)))
    return summary


def run_id(prefix: str, dataset: str, reranker: str, config: dict) -> str:
    hashed = {k: v for k, v in config.items() if k != "progress"}
    return f"{prefix}-{dataset}-{_slug(reranker)}-" + hashlib.sha256(json.dumps(hashed, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_study(study, prefix: str, results_root: Path | None, **extra) -> dict:
    """The shared `run()` of the routing and rescue studies: the replay context of `RIFExperiment` (same dataset,
    reranker, pools), the config (the study's fields + `extra` + what identifies the pools), then `reuse_or_run`."""
    exp = RIFExperiment(dataset=study.dataset, path=study.path, reranker=study.reranker, backend=study.backend,
                        conversations=study.conversations, limit_queries=study.limit_queries, second_stage=study.second_stage,
                        calibration=study.calibration, pipeline=study.pipeline, progress=study.progress, burn_in=study.burn_in)
    ctx, info = exp.context(entries=False)
    config = {**asdict(study), "pipeline": asdict(study.pipeline), **extra,
              "seed_list": [PAPER_SEED + s for s in range(study.seeds)], "reranker_resolved": info["reranker"],
              "pool_key": info["pool_key"], "dataset_fingerprint": ctx.dataset.fingerprint}
    config.pop("progress")
    out = Path(results_root or results_dir()) / run_id(prefix, ctx.dataset.name, info["reranker"], config)
    return reuse_or_run(out, config, lambda: study._compute(ctx, info))


@dataclass
class RoutingStudy:
    dataset: str = "locomo"
    path: str | None = None
    reranker: str = "auto"
    backend: str = "auto"
    conversations: int | None = None
    limit_queries: int | None = None
    protocols: tuple[str, ...] = PROTOCOLS
    seeds: int = 3  # seeds 42, 43, ... (the schedule's rng)
    burn_in: int = 2000  # routing steps (the reference's 2,000)
    curve_points: int = 4  # frozen evaluations during the burn-in (plus the end)
    explore: bool = True  # also run the arm that mines positive verdicts below the pool
    params: RoutingParams = field(default_factory=RoutingParams)
    # matched: `params.create_above` is the reference's MS MARCO logit (0), mapped per split onto our scale by the
    # share of the training questions' top-1 scores below it (lethe_core.score_scale); raw: read as our score
    scale: str = "matched"
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    second_stage: str = DEFAULT_MODE
    calibration: bool = True
    n_resamples: int = stats.N_RESAMPLES  # bootstrap resamples and permutations
    progress: bool = True

    def __post_init__(self):
        bad = [p for p in self.protocols if p not in PROTOCOLS]
        if bad or not self.protocols:
            raise ValueError(f"protocols must be a non-empty subset of {PROTOCOLS}, got {self.protocols}")
        if self.seeds < 1 or self.burn_in < 0 or self.curve_points < 0 or self.n_resamples < 100:
            raise ValueError("seeds must be >= 1, burn_in and curve_points >= 0, n_resamples >= 100")
        if self.second_stage not in MODES:
            raise ValueError(f"second stage must be one of {MODES}, got {self.second_stage!r}")
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {self.scale!r}")

    def scaled(self, ctx, train: np.ndarray) -> RoutingParams:
        """The routing parameters for one training split: the creation threshold on our scale."""
        if self.scale == "raw":
            return self.params
        t = matched_threshold(self.params.create_above, top1_scores(ctx.pools, train, self.pipeline.pool_size))
        return replace(self.params, create_above=t)

    def arms(self) -> list[tuple[str, bool]]:
        return [("routing", False)] + ([("routing+explore", True)] if self.explore else [])

    def run(self, results_root: Path | None = None) -> dict:
        return run_study(self, "routing", results_root, params=asdict(self.params))

    def _compute(self, ctx, info) -> tuple[dict, dict[str, pd.DataFrame]]:
        from tqdm.auto import tqdm

        scorer = InjectedScorer(ctx, info["builder"].reranker, info["builder"].root / "pair_scores.sqlite", self.calibration)
        P = self.pipeline.pool_size
        eval_at = [round(self.burn_in * k / (self.curve_points + 1)) for k in range(self.curve_points + 1)]
        final, curves, counts = [], [], []
        jobs = [(pr, PAPER_SEED + s) for pr in self.protocols for s in range(self.seeds)]
        try:
            for protocol, seed in tqdm(jobs, desc="routing replays", unit="replay", disable=not self.progress):
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
                   "calibrated": bool((ctx.pools.calibrated != ctx.pools.logit).any())}
        return summary, {"per_query": final_df, "curves": curve_df, "routes": counts_df}
