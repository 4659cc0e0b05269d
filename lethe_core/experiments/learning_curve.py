"""Learning curve of the fold-trained reranker: held-out NDCG@10 against training budget.

Each point is one training recipe (share of each fold's groups, epochs, hard negatives per
positive), trained as `trained:lc-b{budget%}-e{epochs}-n{negatives}-{precision}` with the fold
protocol of `lethe_core.rerankers.training` (every query is scored by the fold model that never saw its
conversation), then evaluated by the systems table with second stage `ce`. Beside `full` (RRF
top-30 reranked) the curve reports `control` (the whole union reranked) and control - full with a
paired CI: whether a better-trained teacher uses deeper candidates decides what RIF can learn from
it. Training minutes are the training loops' own wall time on this machine (sum over folds);
points already trained are read back from their manifests, so the curve resumes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from lethe_core.measures import stats
from lethe_core.results.store import run_dir, write_summary, write_text
from lethe_core.util.paths import models_dir
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rerankers.recipes import TrainConfig, point_name, resolve_precision
from lethe_core.rerankers.training import train_folds
from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.systems import SystemsExperiment

# (budget, epochs, negatives): the curve up to today's recipe (budget 1, 1 epoch, 7 negatives) and past it.
DEFAULT_POINTS = ((0.1, 1, 7), (0.25, 1, 7), (0.5, 1, 7), (1.0, 1, 7), (1.0, 2, 7))


@dataclass
class LearningCurveConfig:
    dataset: str = "locomo"
    folds: int = 2
    points: tuple = DEFAULT_POINTS
    precision: str = "auto"  # resolved once: every point of one curve trains at the same precision
    backend: str = "auto"  # inference backend of the evaluation
    name: str = "learning_curve"
    encoder: str = "minilm"  # first-stage bi-encoder (hard negatives and pools; tests use test:hash)
    max_groups: int | None = None  # cap per fold on top of the budget (tests)
    base: str = "minilm"  # the cross-encoder's starting weights (recipes.BASES; tests use test:tiny)
    progress: bool = True

    def run(self, results_root: Path | None = None, models_root: Path | None = None) -> dict:
        precision = resolve_precision(self.precision)
        for budget, epochs, negatives in self.points:  # validate every point before the first training
            if not 0 < budget <= 1 or epochs < 1 or negatives < 1:
                raise ValueError(f"bad learning-curve point (budget {budget}, epochs {epochs}, negatives {negatives})")
        rows = []
        for budget, epochs, negatives in self.points:
            name = point_name(budget, epochs, negatives, precision)
            cfg = TrainConfig(dataset=self.dataset, name=name, folds=self.folds, epochs=epochs, negatives=negatives,
                              budget=budget, precision=precision, encoder=self.encoder, max_groups=self.max_groups, base=self.base)
            manifest = train_folds(cfg, progress=self.progress, root=models_root)
            data = DataSpec(self.dataset, reranker=f"trained:{name}", pipeline=PipelineConfig(encoder=self.encoder),
                            second_stage="ce", backend=self.backend, progress=self.progress)
            systems = SystemsExperiment(data).run(results_root)
            wide = pd.read_parquet(Path(systems["results_dir"]) / "per_query.parquet").pivot(
                index="query_id", columns="system", values="ndcg@10")
            by = {s["name"]: s for s in systems["systems"]}
            folds = manifest["folds"]
            rows.append({
                "point": name, "budget": budget, "epochs": epochs, "negatives": negatives, "precision": precision,
                "steps_per_fold": [f["train_steps"] for f in folds], "groups_per_fold": [f["train_groups"] for f in folds],
                "train_minutes": round(sum(f["train_seconds"] for f in folds) / 60, 1),
                "fold_minutes": round(sum(f["fold_seconds"] for f in folds) / 60, 1) if all("fold_seconds" in f for f in folds) else None,
                "train_pairs_per_s": [f["train_pairs_per_s"] for f in folds],
                "full": by["full"]["ndcg@10"], "full_ci": by["full"]["ndcg@10_ci"],
                "control": by["control"]["ndcg@10"], "control_ci": by["control"]["ndcg@10_ci"],
                "rrf": by["rrf"]["ndcg@10"],
                "control_minus_full": stats.paired_delta_ci(wide["control"], wide["full"]).as_dict(),
                "full_minus_rrf": stats.paired_delta_ci(wide["full"], wide["rrf"]).as_dict(),
                "reranker_identity": systems["reranker_identity"], "systems_dir": systems["results_dir"],
            })
        out_dir = run_dir(self.name, results_root)
        out_dir.mkdir(parents=True, exist_ok=True)
        summary = {"dataset": self.dataset, "precision": precision, "second_stage": "ce", "points": rows,
                   "config": {**asdict(self), "points": [list(p) for p in self.points]},
                   "models_root": str(models_root or models_dir())}
        write_text(out_dir / "curve.md", markdown_table(rows))
        return write_summary(out_dir, summary, default=None)


def markdown_table(rows: list[dict]) -> str:
    head = ("| budget (share of groups) | epochs | negatives | steps per fold | training min (2 cores) | `full` NDCG@10 [95% CI] "
            "| `control` NDCG@10 [95% CI] | control − full [95% CI] | full − rrf |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        cf, fr = r["control_minus_full"], r["full_minus_rrf"]
        lines.append(
            f"| {r['budget']:.0%} | {r['epochs']} | {r['negatives']} | {' / '.join(map(str, r['steps_per_fold']))} | {r['train_minutes']} "
            f"| {r['full']:.4f} [{r['full_ci'][0]:.4f}, {r['full_ci'][1]:.4f}] "
            f"| {r['control']:.4f} [{r['control_ci'][0]:.4f}, {r['control_ci'][1]:.4f}] "
            f"| {cf['mean']:+.4f} [{cf['ci'][0]:+.4f}, {cf['ci'][1]:+.4f}] | {fr['mean']:+.4f} |")
    return "\n".join(lines) + "\n"
