"""RERANKER.md: the card of a fold-trained reranker, read from its `trained.json` and finished systems summaries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lethe_core.report.results_md import pool_recall, reranker_changes
from lethe_core.rerankers.recipes import FUSION_GRID
from lethe_core.util.paths import models_dir


def reranker_report(name: str, systems: list[dict], root: Path | None = None) -> str:
    """Markdown: recipe, per-fold training cost and validation choices, logit distributions, evaluation tables.

    `systems` are `lethe-lab systems --json` summaries of this reranker (e.g. second stage fused and ce).
    Every trained model under data/models/ is listed as a recipe tried, with its validation scores.
    """
    base = Path(root or models_dir())
    manifest = json.loads((base / name / "trained.json").read_text())
    cfg = manifest["config"]
    lines = [f"# Offline reranker `trained:{name}`", "",
             f"Base model {manifest['base_model']}; loss: {manifest['loss']}; {cfg['folds']} folds by conversation; "
             f"{cfg['epochs']} epoch(s), lr {cfg['lr']}, {cfg['negatives']} hard negatives per positive (from the query's hybrid "
             f"union over the training conversations' turns only), {cfg['groups_per_batch']} groups per step, max length {cfg['max_length']}, observations as pseudo-queries: "
             f"{cfg['observations']}. Each fold holds one training conversation back for validation: the fusion weight and the "
             "logit calibration are chosen there, never on the evaluation fold.", "",
             "## Folds", "",
             "| fold | evaluation conversations | validation | training groups | train time | train pairs/s | scoring pairs/s | fusion weight w | calibration a·x+b |",
             "|---|---|---|---|---|---|---|---|---|"]
    for f in manifest["folds"]:
        lines.append(f"| {f['fold']} | {', '.join(f['eval_conversations'])} | {', '.join(f['validation_conversations'])} | {f['train_groups']:,} | "
                     f"{f['train_seconds'] / 60:.1f} min | {f['train_pairs_per_s']} | {f['score_pairs_per_s']} | {f['fuse_w']} | "
                     f"a={f['calibration'][0]:.3f}, b={f['calibration'][1]:.3f} |")
    lines += ["", "Validation NDCG@10 of the reranked RRF top-30 by fusion weight (w = 1: first stage only, w = 0: cross-encoder only):", "",
              "| fold | " + " | ".join(f"w={w}" for w in FUSION_GRID) + " |", "|---" * (len(FUSION_GRID) + 1) + "|"]
    for f in manifest["folds"]:
        v = f["validation_ndcg_by_w"]
        lines.append(f"| {f['fold']} | " + " | ".join(f"{v[str(w)] if str(w) in v else v[w]:.4f}" for w in FUSION_GRID) + " |")
    lines += ["", "## Logit distributions (validation pools, raw logits)", "",
              "| fold | class | n | mean | p5 | p25 | median | p75 | p95 |", "|---|---|---|---|---|---|---|---|---|"]
    for f in manifest["folds"]:
        for cls in ("relevant", "non_relevant"):
            d = f["logits"][cls]
            lines.append(f"| {f['fold']} | {cls} | {d['n']:,} | {d['mean']:.3f} | {d['p5']:.3f} | {d['p25']:.3f} | {d['median']:.3f} | {d['p75']:.3f} | {d['p95']:.3f} |")
    lines += ["", "Calibration: a logistic fit of P(relevant | logit) on the validation pool; the calibrated logit a·x+b is the log-odds "
              "of relevance, so sigmoid(−x) in the RIF strength is P(not relevant) and abstain@{0,2,4} mean P(relevant) below "
              "0.5 / 0.88 / 0.98. `--no-calibration` reads the raw logit instead. Calibration never changes an order, only RIF strengths and abstention.", ""]
    for s in systems:
        lines += [f"## Evaluation: `lethe-lab systems {s['dataset']} --reranker {s['reranker']} --second-stage {s['second_stage']}`", "",
                  f"{s['n_queries']:,} queries, each reranked by the fold that never saw its conversation or its turns "
                  f"(identity `{s.get('reranker_identity')}`); calibration "
                  f"{'on' if s['calibrated'] else 'off'}. Pool recall is the recall of the candidates the reranker sees: the "
                  "RRF (or dense) top-30, and for `control` the whole union (marked ᵘ).", "",
                  "| system | NDCG@10 [95% CI] | Recall@10 | pool recall | Δ vs rrf [95% CI] | p vs rrf |", "|---|---|---|---|---|---|"]
        for row in s["systems"]:
            d = row.get("delta_vs_rrf")
            delta = f"{d['mean']:+.4f} [{d['ci'][0]:+.4f}, {d['ci'][1]:+.4f}]" if d else "–"
            p = f"{row['p_vs_rrf']:.4f}" if "p_vs_rrf" in row else "–"
            lines.append(f"| {row['name']} | {row['ndcg@10']:.4f} [{row['ndcg@10_ci'][0]:.4f}, {row['ndcg@10_ci'][1]:.4f}] | "
                         f"{row['recall@10']:.4f} | {pool_recall(row)} | {delta} | {p} |")
        if s.get("per_fold"):
            lines += ["", "| fold | queries | NDCG@10 rrf | full | control | p full vs rrf |", "|---|---|---|---|---|---|"]
            for f in s["per_fold"]:
                lines.append(f"| {f['fold']} | {f['n_queries']} | {f['ndcg@10_rrf']:.4f} | {f['ndcg@10_full']:.4f} | {f['ndcg@10_control']:.4f} | {f['p_full_vs_rrf']:.4f} |")
        lines.append("")
    lines += reranker_changes(systems)
    lines += ["## Recipes tried (every model trained under data/models/)", "",
              "| model | folds | epochs | lr | negatives | observations | groups/fold | mean validation NDCG@10: w=1 (first stage) | best w | at best w |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for path in sorted(base.glob("*/trained.json")):
        m = json.loads(path.read_text())
        c = m["config"]
        first = np.mean([f["validation_ndcg_by_w"]["1.0"] for f in m["folds"]])
        best = np.mean([f["validation_ndcg_by_w"][str(float(f["fuse_w"]))] for f in m["folds"]])
        lines.append(f"| {m['name']} | {c['folds']} | {c['epochs']} | {c['lr']} | {c['negatives']} | {c['observations']} | "
                     f"{int(np.mean([f['train_groups'] for f in m['folds']])):,} | {first:.4f} | {[f['fuse_w'] for f in m['folds']]} | {best:.4f} |")
    return "\n".join(lines) + "\n"
