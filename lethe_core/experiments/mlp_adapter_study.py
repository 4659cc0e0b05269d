"""Checkpoint 04: the learned MLP adapter against the static pipeline over a usage stream, under the reference's
protocol and a held-out one (docs/mlp_adapter.md).

The same shape as `mutation_study`, whose run loop (`StreamStudy`), splits and `summarise` are reused: for each
protocol, split, seed and arm, `usage_stream.run_stream` drives an `mlp_adapter.MLPAdapter` for `steps` queries and
evaluates the frozen state every `eval_every` steps (NDCG@10 of the dense top-30 reranked by the cross-encoder, and
of the dense order); static is evaluated once per split. `paper`: the schedule draws from the evaluation queries (train = test);
`heldout`: the stream runs on one half of the queries (by conversation on LoCoMo, seeded elsewhere) and the other
half is evaluated, both directions. Curves, final-step paired tests and Holm p come from `mutation_study.summarise`;
the verdict is read at the final step. `summary["peak"]` shows what the reference's pick (the step of the best
paper-protocol Δ, chosen on the evaluation queries) is worth on held-out data at that same step.

Results: `data/results/mlp-adapter-<dataset>-<reranker>-<hash>/` with config.json, curves.parquet, final.parquet,
trace.parquet (the adapter's diagnostics per evaluation: adapter norms, drift, loss, counts) and summary.json.
A finished run with the same config is read back instead of recomputed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from lethe_core.inference.pair_cache import identity_of
from lethe_core.datasets.splits import HELDOUT, PAPER
from lethe_core.mechanisms.mlp_adapter import ARMS, UPDATES, MLPAdapter, MLPParams
from lethe_core.experiments.mutation_study import StreamStudy, StudyRun


@dataclass
class MLPAdapterStudy(StreamStudy):
    """Static vs the MLP adapter arms over a usage stream; `run()` writes data/results/mlp-adapter-.../ and returns the summary."""

    arms: tuple[str, ...] = ARMS  # mlp (the rule as specified) | gated (our approximation of the reference's gates)
    steps: int = 1200
    eval_every: int = 100
    update_mode: str = "step"  # step (one Adam step per stream step) | turn (the reference's: one per retrieved turn)
    params: MLPParams = field(default_factory=MLPParams)

    def __post_init__(self):
        super().__post_init__()
        self.arms = tuple(self.arms)
        if not self.arms or any(a not in ARMS for a in self.arms):
            raise ValueError(f"arms must be among {ARMS}, got {self.arms!r}")
        if self.update_mode not in UPDATES:
            raise ValueError(f"update_mode must be one of {UPDATES}, got {self.update_mode!r}")

    def prefix(self) -> str:
        return "mlp-adapter"

    def config_extra(self) -> dict:
        return {"params": asdict(self.params)}

    def label(self) -> str:
        return "mlp adapter"

    def make(self, vectors, arm: str, seed: int):
        return MLPAdapter(vectors, arm, self.params, seed=seed, update_mode=self.update_mode)

    def describe(self, summary: dict, run: StudyRun) -> None:
        summary["peak"] = peak_pick(summary["curves"], list(self.arms), list(self.protocols))
        summary.update({"mechanism": "mlp-adapter", "dataset": run.ds.name, "reranker": run.reranker.name,
                        "reranker_identity": identity_of(run.reranker), "n_queries": len(run.ds.queries),
                        "n_turns": len(run.data.ids), "n_parameters": self.params.n_parameters, "seeds": run.seeds,
                        "steps": self.steps, "eval_every": self.eval_every, "eval_steps": run.checkpoints,
                        "update_mode": self.update_mode, "pairs": run.counts, "results_dir": str(run.out),
                        "config": run.config})


def peak_pick(curve_rows: list[dict], arms: list[str], protocols: list[str]) -> list[dict]:
    """The reference's pick: per arm, the step (> 0) with the best mean rerank Δ vs static under the paper protocol —
    chosen on the evaluation queries — and the held-out Δ (with its CI) at that same step."""
    rows = pd.DataFrame([r for r in curve_rows if r["system"] == "rerank" and r["arm"] != "static" and r["step"] > 0])
    out = []
    if rows.empty or PAPER not in protocols:
        return out
    for arm in arms:
        paper = rows[(rows["protocol"] == PAPER) & (rows["arm"] == arm)]
        if paper.empty:
            continue
        best = paper.loc[paper["delta"].idxmax()]
        item = {"arm": arm, "step": int(best["step"]), "paper_delta": float(best["delta"]),
                "paper_ci": [float(best["delta_lo"]), float(best["delta_hi"])],
                "paper_relative": float(best["delta"] / (best["ndcg@10"] - best["delta"])) if best["ndcg@10"] != best["delta"] else float("nan")}
        held = rows[(rows["protocol"] == HELDOUT) & (rows["arm"] == arm) & (rows["step"] == best["step"])]
        if len(held):
            h = held.iloc[0]
            item.update(heldout_delta=float(h["delta"]), heldout_ci=[float(h["delta_lo"]), float(h["delta_hi"])])
        out.append(item)
    return out
