"""`lethe-lab rif report`: RESULTS.md from the newest result folders (every number read from disk)."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pandas as pd

from lethe_core.experiments.scope import REFERENCE_FILE
from lethe_core.experiments.systems import pool_recall as pool_recall_value
from lethe_core.measures import stats
from lethe_core.report.checkpoints import signed
from lethe_core.rerankers.recipes import fold_teacher_spec
from lethe_core.rerankers.registry import trained_on
from lethe_core.util.paths import REPO_ROOT, results_dir
from lethe_core.results.runs import LOGIT_READINGS, Run, is_standard, latest_runs, list_runs, logit_reading, replay_context
from lethe_core.rif.protocols import PROTOCOLS
from lethe_core.util.figures import forest, static_export_problem, write_svgs

PROTOCOL_TEXT = {
    "paper": "the paper's protocol: clusters fit on all queries, 5,000-step hot/cold burn-in, every query evaluated once, frozen (train = test)",
    "heldout": "held-out: clusters and burn-in on one half of the conversations, frozen evaluation on the other half, both directions",
    "prequential": "prequential: queries in a seeded arrival order, each scored before its own update; clusters fit after 200 queries",
}


# Headline numbers of the first release (commit 8a57c23: RESULTS.md and RERANKER.md of 2026-11-30), before the
# audit fixes: reranker negatives mined over the global corpus, RIF learning from the fused order, second stage
# `fused`, a vectorised schedule. (protocol, arm) -> (NDCG@10 or Δ NDCG@10 vs baseline, p); systems rows are levels.
FIRST_RELEASE = {
    ("systems", "rrf"): (0.3728, None), ("systems", "full"): (0.5012, 0.0001), ("systems", "control"): (0.5127, 0.0001),
    ("paper", "control"): (0.0115, 0.0003), ("paper", "global-gap"): (-0.0069, 0.1448),
    ("paper", "clustered30-uniform"): (-0.0138, 0.0093), ("paper", "clustered30-gap"): (0.0083, 0.0354),
    ("heldout", "control"): (0.0115, 0.0006), ("heldout", "global-gap"): (-0.0113, 0.0261),
    ("heldout", "clustered30-uniform"): (-0.0078, 0.0774), ("heldout", "clustered30-gap"): (0.0071, 0.0198),
    ("prequential", "control"): (0.0115, 0.0005), ("prequential", "global-gap"): (0.0012, 0.7796),
    ("prequential", "clustered30-uniform"): (-0.0126, 0.0132), ("prequential", "clustered30-gap"): (0.0078, 0.0681),
}
# The first release's reranker (negatives mined over the global corpus): (second stage, system) -> NDCG@10.
RERANKER_FIRST_RELEASE = {("fused", "rrf"): 0.3728, ("fused", "full"): 0.5012, ("fused", "control"): 0.5127,
                          ("ce", "full"): 0.4994, ("ce", "control"): 0.4988}


def reranker_changes(systems: list[dict]) -> list[str]:
    """RERANKER.md's before → after: the first release's model against this one, per second stage."""
    after = {(s["second_stage"], r["name"]): r["ndcg@10"] for s in systems for r in s["systems"]}
    ci = {(s["second_stage"], r["name"]): r["ndcg@10_ci"] for s in systems for r in s["systems"]}
    lines = ["## Changes since the first release", "",
             "Before: the first release's model, whose hard negatives were mined over the global corpus (16 % of them turns of "
             "the fold's evaluation and validation conversations). After: this model, negatives from the training conversations "
             "only; validation pools search the training and validation conversations only.", "",
             "| second stage | system | NDCG@10 before | after [95% CI] | before inside the CI |", "|---|---|---|---|---|"]
    for (stage, name), before in RERANKER_FIRST_RELEASE.items():
        a, (lo, hi) = after.get((stage, name)), ci.get((stage, name), (None, None))
        if a is None:
            lines.append(f"| {stage} | {name} | {before:.4f} | not run | – |")
            continue
        lines.append(f"| {stage} | {name} | {before:.4f} | {a:.4f} [{lo:.4f}, {hi:.4f}] | {'yes' if lo <= before <= hi else 'no'} |")
    return lines + [""]


WHAT_MOVED = (
    "What moved them: (1) the reranker was retrained with hard negatives mined over each fold's training conversations only "
    "(before, 16 % of its negatives were turns of the evaluation and validation conversations); (2) RIF now learns from the "
    "cross-encoder's own order in every mode (before, `fused` pulled r_final back toward r_init and changed 2.3 of 10 winners); "
    "(3) the default second stage is `ce`, the paper's pipeline (the first release reported `fused`); (4) the paper protocol's "
    "schedule is the reference's draw for draw (per-step draws instead of vectorised ones, 0-based steps; int(0.2 n) instead of "
    "round(0.2 n) hot queries, the same 307 on LoCoMo), so every seed realises another schedule than before."
)


def changes_section(runs: dict[str, Run], systems: dict | None) -> list[str]:
    """Before → after for each headline number, read from the runs this report is made of."""
    lines = ["## Changes since the first release", "",
             "Before: the first release (second stage `fused`). After: this report (second stage as stated in each section).", "",
             "| where | number | before | after |", "|---|---|---|---|"]
    after_sys = {r["name"]: r for r in (systems or {}).get("systems", [])}
    for (where, name), (before, p_before) in FIRST_RELEASE.items():
        if where == "systems":
            row = after_sys.get(name)
            after = f"{row['ndcg@10']:.4f}" + (f" (p vs rrf {_p(row.get('p_vs_rrf'))})" if "p_vs_rrf" in row else "") if row else "not run"
            lines.append(f"| systems | NDCG@10 {name} | {before:.4f}" + (f" (p vs rrf {_p(p_before)})" if p_before else "") + f" | {after} |")
            continue
        a = _arm(runs[where], name) if where in runs else None
        after = f"{a['delta_ndcg']['mean']:+.4f} (p {_p(a['p'])})" if a else "not run"
        lines.append(f"| {where} | Δ NDCG@10 {name} vs baseline | {before:+.4f} (p {_p(p_before)}) | {after} |")
    return lines + ["", WHAT_MOVED, ""]


def pool_recall(row: dict) -> str:
    """A systems row's pool recall, marked ᵘ where it is the recall of the whole union (control)."""
    return f"{pool_recall_value(row):.4f}" + ("ᵘ" if "union_recall" in row else "")


def _p(p) -> str:
    return "–" if p is None else f"{p:.4f}"


def _conversation_ci(delta: dict) -> str:
    """The conversation-level CI of a Δ (runs of schema 3 on datasets with conversations), else a dash."""
    ci = delta.get("conversation_ci")
    return "–" if not ci else f"[{ci[0]:+.4f}, {ci[1]:+.4f}]"


def protocol_table(run: Run) -> str:
    lines = ["| arm | NDCG@10 [95% CI] | mean ± sd over seeds | Δ NDCG [95% CI] | Δ by conversation [95% CI] | p | p (Holm) | pool Recall@30 (ᵘ: whole union) | Δ pool recall | Δ vs control (p) | suppressed (cluster, entry; seed mean) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for a in run.summary["arms"]:
        n, d, r = a["ndcg@10"], a["delta_ndcg"], a["recall@30"]
        ctrl = a.get("delta_vs_control")
        supp = sum(v["entries"] for v in a["suppressed_entries"].values()) if a["suppressed_entries"] else 0
        lines.append(
            f"| {a['name']} | {n['mean']:.4f} [{n['ci'][0]:.4f}, {n['ci'][1]:.4f}] | {n['seed_mean']:.4f} ± {n['seed_sd']:.4f} | "
            f"{d['mean']:+.4f} [{d['ci'][0]:+.4f}, {d['ci'][1]:+.4f}] | {_conversation_ci(d)} | {_p(a['p'])} | {_p(a['p_holm'])} | "
            f"{r['mean']:.4f}{'ᵘ' if a['kind'] == 'control' else ''} | {a['delta_recall']['mean']:+.4f} | "
            + (f"{ctrl['mean']:+.4f} ({_p(a['p_vs_control'])})" if ctrl else "–") + f" | {supp:,.0f} |")
    return "\n".join(lines)


def _arm(run: Run, name: str) -> dict | None:
    return next((a for a in run.summary["arms"] if a["name"] == name), None)


def answers(runs: dict[str, Run], n_entries: int) -> list[str]:
    """Section-8 questions answered from the numbers, one bullet each, per protocol."""
    out = []
    for protocol, run in sorted(runs.items(), key=lambda kv: PROTOCOLS.index(kv[0])):
        clustered = [a for a in run.summary["arms"] if a["name"].startswith("clustered")]
        glob = [a for a in run.summary["arms"] if a["name"].startswith("global")]
        sig_up = [a["name"] for a in clustered if a["p_holm"] is not None and a["p_holm"] < 0.05 and a["delta_ndcg"]["mean"] > 0]
        sig_down = [a["name"] for a in clustered + glob if a["p_holm"] is not None and a["p_holm"] < 0.05 and a["delta_ndcg"]["mean"] < 0]
        g_up = [a["name"] for a in glob if a["p_holm"] is not None and a["p_holm"] < 0.05 and a["delta_ndcg"]["mean"] > 0]
        best = max(clustered + glob, key=lambda a: a["delta_ndcg"]["mean"])
        out.append(f"- **{protocol}** — clustered arms significantly above the baseline (Holm p < 0.05): "
                   f"{', '.join(sig_up) or 'none'}; global arms significantly above: {', '.join(g_up) or 'none'}; "
                   f"arms significantly below: {', '.join(sig_down) or 'none'}. Largest point estimate among the RIF arms, picked post hoc "
                   f"on these evaluation queries (so its unadjusted p overstates it; the Holm p is the one to read): {best['name']} "
                   f"(Δ {best['delta_ndcg']['mean']:+.4f}, p {_p(best['p'])}, Holm p {_p(best['p_holm'])}).")
        ctrl = _arm(run, "control")
        if ctrl:
            beat_ctrl = [a["name"] for a in clustered + glob if a.get("delta_vs_control") and a["delta_vs_control"]["mean"] > 0
                         and (a.get("p_vs_control") or 1) < 0.05]
            out.append(f"  - control arm (rerank the whole union, no RIF): Δ {ctrl['delta_ndcg']['mean']:+.4f} vs baseline "
                       f"(p {_p(ctrl['p'])}); RIF arms significantly above the control: {', '.join(beat_ctrl) or 'none'}.")
        for k in sorted({a["k"] for a in clustered}):
            u, g = _arm(run, f"clustered{k}-uniform"), _arm(run, f"clustered{k}-gap")
            if u and g and u["suppressed_entries"] and g["suppressed_entries"]:
                su = sum(v["entries"] for v in u["suppressed_entries"].values())
                sg = sum(v["entries"] for v in g["suppressed_entries"].values())
                out.append(f"  - K={k}: rank-gap suppresses {sg:,.0f} (cluster, entry) pairs vs {su:,.0f} for uniform (seed means) "
                           f"({(1 - sg / su) * 100 if su else 0:.0f}% fewer), NDCG@10 {g['ndcg@10']['mean']:.4f} vs {u['ndcg@10']['mean']:.4f}.")
        for a in glob:
            docs = max((v["docs"] for v in a["suppressed_entries"].values()), default=0)
            out.append(f"  - saturation: {a['name']} ends burn-in with {docs:,.0f} of {n_entries:,} turns (seed mean) ({docs / n_entries:.0%}) under suppression.")
    return out


def read_teacher_study(dataset: str, reranker: str) -> pd.DataFrame | None:
    """The finished teacher study of `dataset` (`lethe-lab rif teacher`), if it was run with this reranker."""
    folder = results_dir() / f"teacher-{dataset}"
    try:
        config = json.loads((folder / "config.json").read_text())
        table = pd.read_parquet(folder / "teacher_curve.parquet")
    except (OSError, ValueError):
        return None
    return table if config.get("reranker") == reranker else None


def teacher_section(runs: dict[str, Run], study_rows: pd.DataFrame | None) -> str:
    if study_rows is None or study_rows.empty:
        dataset = next(iter(runs.values())).summary["dataset"]
        return f"_Teacher study not run for this reranker: `lethe-lab rif teacher {dataset}` (a step of `make reproduce`)._"
    lines = ["| teacher | teacher NDCG@10 (reranked top-30) | noise σ | held-out gain clustered30-gap [95% CI] | p | paper-protocol gain | p | control-arm gain |",
             "|---|---|---|---|---|---|---|---|"]
    for _, r in study_rows.sort_values("teacher_ndcg@10").iterrows():
        held = "–" if pd.isna(r.get("heldout_gain")) else f"{r['heldout_gain']:+.4f} [{r['heldout_gain_lo']:+.4f}, {r['heldout_gain_hi']:+.4f}]"
        paper = "–" if pd.isna(r.get("paper_gain")) else f"{r['paper_gain']:+.4f}"
        name = "simulated" if r["teacher"] == "simulated" else f"**{r['teacher']}** (real)"
        sigma = "–" if pd.isna(r["sigma"]) else f"{r['sigma']:.2f}"
        lines.append(f"| {name} | {r['teacher_ndcg@10']:.4f} | {sigma} | {held} | {_p(r.get('heldout_p')) if not pd.isna(r.get('heldout_p', float('nan'))) else '–'} | "
                     f"{paper} | {_p(r.get('paper_p')) if not pd.isna(r.get('paper_p', float('nan'))) else '–'} | "
                     + ("–" if pd.isna(r.get("control_gain", float("nan"))) else f"{r['control_gain']:+.4f}") + " |")
    return "\n".join(lines)


def interpretation(paper: Run, study: pd.DataFrame) -> list[str]:
    """Mechanism-level reading of the paper-protocol run and the teacher study, every figure computed here."""
    ctrl = _arm(paper, "control")
    gap = [a for a in paper.summary["arms"] if a["name"].startswith("clustered") and a["rule"] == "gap"]
    uni = [a for a in paper.summary["arms"] if a["name"].startswith("clustered") and a["rule"] == "uniform"]
    n, b = paper.summary["n_queries"], paper.summary["burn_in"]
    out = []
    if gap and ctrl:
        dr = sum(a["delta_recall"]["mean"] for a in gap) / len(gap)
        dn = sum(a["delta_ndcg"]["mean"] for a in gap) / len(gap)
        above = [a["name"] for a in paper.summary["arms"] if a["kind"] == "rif" and (a.get("delta_vs_control") or {}).get("mean", 0) > 0
                 and (a.get("p_vs_control") or 1) < 0.05]
        out.append(f"- Suppression acts as a per-cluster block list: one rejection can add up to eta x 1 = 0.1 to s, i.e. a penalty of "
                   f"alpha x 0.1 = 0.03, more than the whole RRF range of a union (0.011 to 0.033). Blocked entries leave the pool and "
                   f"deeper union members take their place, so the clustered rank-gap arms raise the reranker pool's Recall@30 by "
                   f"{dr:+.4f} on average (NDCG@10 {dn:+.4f}). The control arm gets the whole union into the reranker at once: "
                   f"union recall {ctrl['delta_recall']['mean']:+.4f}, NDCG@10 {ctrl['delta_ndcg']['mean']:+.4f} (p {_p(ctrl['p'])}). RIF is a "
                   "cheaper, partial version of the control arm (it reranks P = 30 per query instead of the whole union), so it can only "
                   "help where the teacher ranks the deeper union members better than the top-30 it already sees; RIF arms significantly "
                   f"above the control (p < 0.05): {', '.join(above) or 'none'}.")
    if uni:
        out.append(f"- The uniform rule penalises every loser, close races included; its clustered arms average "
                   f"{sum(a['delta_ndcg']['mean'] for a in uni) / len(uni):+.4f} NDCG@10. With {n:,} queries and {b:,} burn-in steps "
                   f"every query is drawn {b / n:.1f} times on average and a hot one {0.7 * b / max(1, int(0.2 * n)):.0f} times; on a corpus "
                   "this small suppression spreads over most turns (the saturation lines above), as the paper saw on NFCorpus.")
    real = study[study["teacher"] != "simulated"] if study is not None and len(study) else pd.DataFrame()
    sim = study[study["teacher"] == "simulated"] if study is not None and len(study) else pd.DataFrame()
    if len(real) and len(sim):
        r = real.iloc[0]
        near = sim.iloc[(sim["teacher_ndcg@10"] - r["teacher_ndcg@10"]).abs().argsort()[:1]].iloc[0]
        out.append(f"- Teacher quality: a simulated teacher as good as {r['teacher']} on the top-30 "
                   f"(NDCG@10 {near['teacher_ndcg@10']:.4f} vs {r['teacher_ndcg@10']:.4f}) gives a paper-protocol gain of "
                   f"{near['paper_gain']:+.4f} and a control-arm gain of {near['control_gain']:+.4f}, where the real teacher gives "
                   f"{r['paper_gain']:+.4f} and {r['control_gain']:+.4f}. Gaussian noise makes a teacher reward deep irrelevant "
                   "candidates at random; the trained cross-encoder rejects them confidently. What RIF needs is a teacher that is "
                   "right about the candidates *beyond* the pool it sees (what the control arm measures), not only a good top-30 "
                   "NDCG: the top-30 NDCG alone does not predict RIF's gain.")
    return out


# The RIF constants a run must keep to enter the teacher x reading table (a sweep's other constants would not compare).
MATRIX_ARMS = ("clustered30-gap", "clustered30-uniform", "global-gap")
READING_ORDER = ("raw", "calibrated")


def teacher_kind(reranker: str, dataset: str) -> str:
    """"fold (in-domain)", "cross-dataset (trained on X)", or "" for a reranker not trained here."""
    origin = trained_on(reranker)
    if origin is None:
        return ""
    return "fold (in-domain)" if origin == dataset else f"cross-dataset (trained on {origin})"


def standard_runs(datasets: tuple[str, ...]) -> dict[tuple[str, str, str, str], Run]:
    """The newest full run with every arm and the standard constants, second stage `ce`, of each (dataset, reranker
    identity, logit reading, protocol): another backend or another training of a teacher is another row."""
    chosen: dict[tuple[str, str, str, str], Run] = {}
    for r in list_runs()[0]:  # newest first
        s = r.summary
        if s["dataset"] not in datasets or s.get("second_stage") != "ce" or not is_standard(r):
            continue
        chosen.setdefault((s["dataset"], s.get("reranker_identity") or s["reranker"], logit_reading(s), s["protocol"]), r)
    return chosen


def teacher_cell(identity: str, dataset: str) -> str:
    """`trained:x` (onnx) — fold (in-domain): the reranker, its inference backend and what kind of teacher it is."""
    name, _, rest = identity.partition("|")
    backend = rest.partition("|")[0].split(".")[0]
    kind = teacher_kind(name, dataset)
    return f"`{name}`" + (f" ({backend})" if backend else "") + (f" — {kind}" if kind else "")


def _delta_cell(arm: dict | None, key: str = "delta_ndcg", p_key: str = "p_holm") -> str:
    if not arm or not arm.get(key):
        return "–"
    d = arm[key]
    p = arm.get(p_key)
    return f"{d['mean']:+.4f} [{d['ci'][0]:+.4f}, {d['ci'][1]:+.4f}]" + (f" (p {_p(p)})" if p is not None else "")


def inputs_section(datasets: tuple[str, ...], runs: dict | None = None) -> list[str]:
    """One table answering: does the teacher's origin or the logit reading change RIF's effect and its gap to the
    control arm? One row per (dataset, teacher, reading, protocol) found finished on disk (`runs`: standard_runs')."""
    runs = standard_runs(datasets) if runs is None else runs
    if not runs:
        return []
    order = sorted(runs, key=lambda k: (datasets.index(k[0]), not teacher_kind(k[1].partition("|")[0], k[0]).startswith("fold"), k[1],
                                        READING_ORDER.index(k[2]), PROTOCOLS.index(k[3])))
    lines = ["## Teacher origin and logit reading", "",
             "Does where the teacher was trained, or which logit RIF reads, change RIF's effect and its gap to the control arm? "
             "Each row is one finished run (`lethe-lab rif run`, 5 seeds): Δ NDCG@10 vs baseline (each query's seed mean) with its 95 % bootstrap "
             "CI and Holm-adjusted permutation p (over the arms vs baseline); the last column is clustered30-gap − control with its "
             "unadjusted p. *Fold* teachers score each query with the fold model that never saw its conversation; a *cross-dataset* "
             "teacher was trained on all of the other dataset (docs/method.md, \"Teachers\"). The raw logit is the paper's reading; "
             "the calibrated rows are the `--calibration` ablation.", "",
             "| dataset | teacher | reading | protocol | control | " + " | ".join(MATRIX_ARMS) + " | clustered30-gap − control |",
             "|---" * (6 + len(MATRIX_ARMS)) + "|"]
    for key in order:
        dataset, identity, reading, protocol = key
        arms = {a["name"]: a for a in runs[key].summary["arms"]}
        lines.append(f"| {dataset} | {teacher_cell(identity, dataset)} | {reading}"
                     + (" (ablation)" if reading == "calibrated" else "") + f" | {protocol} | {_delta_cell(arms.get('control'))} | "
                     + " | ".join(_delta_cell(arms.get(a)) for a in MATRIX_ARMS) + " | "
                     + _delta_cell(arms.get("clustered30-gap"), "delta_vs_control", "p_vs_control") + " |")
    return lines + ["", *inputs_reading(runs, order), ""]


def inputs_reading(runs: dict, order: list) -> list[str]:
    """The table read per (dataset, teacher), every figure from it: the held-out effect of each reading, and whether
    clustered30-gap is above the baseline and the control arm (Holm p, then the unadjusted p against control)."""
    out = []
    for dataset, identity in dict.fromkeys((k[0], k[1]) for k in order):
        def arm(reading, protocol, name):
            run = runs.get((dataset, identity, reading, protocol))
            return next((a for a in run.summary["arms"] if a["name"] == name), None) if run else None

        parts = []
        for name in ("clustered30-uniform", "clustered30-gap"):
            raw, cal = arm("raw", "heldout", name), arm("calibrated", "heldout", name)
            if raw and cal:
                parts.append(f"{name} {cal['delta_ndcg']['mean']:+.4f} calibrated → {raw['delta_ndcg']['mean']:+.4f} raw")
        above = [p for p in PROTOCOLS if (a := arm("raw", p, "clustered30-gap")) and a["p_holm"] is not None
                 and a["p_holm"] < 0.05 and a["delta_ndcg"]["mean"] > 0]
        below_ctrl = [p for p in PROTOCOLS if (a := arm("raw", p, "clustered30-gap")) and a.get("delta_vs_control")
                      and (a.get("p_vs_control") or 1) < 0.05 and a["delta_vs_control"]["mean"] < 0]
        ctrl = [p for p in PROTOCOLS if (a := arm("raw", p, "control")) and a["p_holm"] is not None and a["p_holm"] < 0.05
                and a["delta_ndcg"]["mean"] > 0]
        out.append(f"- **{dataset}**, {teacher_cell(identity, dataset)}: held out, " + ("; ".join(parts) or "no calibrated ablation run")
                   + f". Raw reading: clustered30-gap above the baseline (Holm p < 0.05) under {', '.join(above) or 'no protocol'}; "
                   f"the control arm above it under {', '.join(ctrl) or 'no protocol'}; clustered30-gap significantly below the "
                   f"control arm (p < 0.05) under {', '.join(below_ctrl) or 'no protocol'}.")
    return out


FOREST_ARMS = ("control", "clustered30-gap", "clustered30-uniform", "global-gap")
FIGURES = REPO_ROOT / "docs" / "figures" / "results"


def reference_effect(arm: str = "clustered30-gap", path: Path = REFERENCE_FILE) -> float:
    """The reference's Δ NDCG@10 of `arm` vs its baseline, from its own per-query arrays (LongMemEval, train = test)."""
    configs = stats.load_per_query_file(path)
    return float((configs[arm]["ndcg"] - configs["baseline"]["ndcg"]).mean())


def _either(protocols: list[str]) -> str:
    return " and ".join(protocols) if protocols else "no protocol"


def forest_frame(runs: dict, dataset: str) -> pd.DataFrame:
    """One row per (teacher, protocol, arm) of the raw reading: Δ NDCG@10 vs baseline (seed mean per query) and its 95 % CI."""
    rows = []
    keys = sorted((k for k in runs if k[0] == dataset and k[2] == "raw"),
                  key=lambda k: (not teacher_kind(k[1].partition("|")[0], dataset).startswith("fold"), k[1], PROTOCOLS.index(k[3])))
    for _, identity, _, protocol in keys:
        arms = {a["name"]: a for a in runs[(dataset, identity, "raw", protocol)].summary["arms"]}
        name = identity.partition("|")[0].removeprefix("trained:")
        for arm in FOREST_ARMS:
            if arm in arms and arms[arm].get("delta_ndcg"):
                d = arms[arm]["delta_ndcg"]
                rows.append({"row": f"{arm} · {protocol}", "teacher": f"{name} ({teacher_kind(identity.partition('|')[0], dataset) or 'teacher'})",
                             "delta": d["mean"], "lo": d["ci"][0], "hi": d["ci"][1], "protocol": protocol, "arm": arm})
    return pd.DataFrame(rows)


def summary_section(datasets: tuple[str, ...], runs: dict, figures: Path, doc_dir: Path) -> list[str]:
    """RESULTS.md's opening: five generated lines and a forest plot per dataset (raw reading, every teacher; `runs`:
    standard_runs')."""
    ref = reference_effect()
    lines = ["## Summary", "",
             f"- The claim: clustered RIF (K = 30, rank-gap) lifts NDCG@10 by {signed(ref)} on LongMemEval (the reference's own "
             "per-query arrays, paper protocol: clusters and burn-in on the evaluated queries)."]
    frames = {d: forest_frame(runs, d) for d in datasets}
    for d, frame in frames.items():
        if frame.empty:
            continue
        for teacher, g in frame.groupby("teacher", sort=False):
            gap = g[g["arm"] == "clustered30-gap"].set_index("protocol")
            ctrl = g[g["arm"] == "control"].set_index("protocol")
            parts = [f"{p} {signed(r.delta)} [{signed(r.lo)}, {signed(r.hi)}]" for p, r in gap.iterrows()]
            clears = [p for p, r in gap.iterrows() if r.lo > 0]
            reach = [p for p, r in gap.iterrows() if r.hi >= ref]
            same = len({signed(x) for x in ctrl["delta"]}) == 1
            control = (f"{signed(ctrl['delta'].iloc[0])} under every protocol ({ctrl.index[0]} CI [{signed(ctrl['lo'].iloc[0])}, {signed(ctrl['hi'].iloc[0])}])"
                       if same else "; ".join(f"{p} {signed(r.delta)} [{signed(r.lo)}, {signed(r.hi)}]" for p, r in ctrl.iterrows()))
            lines.append(f"- **{d}**, teacher {teacher}: clustered30-gap " + "; ".join(parts)
                         + f". Its CI clears zero under {_either(clears)}, and is compatible with the reference's {signed(ref)} "
                         f"under {_either(reach)}. The control arm (the cross-encoder reranks the whole candidate union, no "
                         f"suppression) moves NDCG@10 by {control}.")
    problem = static_export_problem()  # once: it looks for kaleido and a Chromium on PATH
    drawn = {}
    for d, frame in frames.items():
        if frame.empty:
            continue
        fig = forest(frame, "row", "delta", "lo", "hi", f"{d}: Δ NDCG@10 vs the baseline, raw logit, seed mean per query",
                     "Δ NDCG@10 vs baseline (95 % bootstrap CI over queries)", "arm · protocol", color="teacher",
                     references={f"reference clustered30-gap {signed(ref)}": ref})
        drawn[figures / f"forest-{d}.svg"] = fig
    if drawn and not problem:
        write_svgs(drawn)
    lines += [""]
    for path in drawn:
        lines += ([f"![{path.stem}]({os.path.relpath(path, doc_dir)})", ""] if not problem
                  else [f"_Figure {path.name} not drawn here: {problem}._", ""])
    return lines


def other_runs_section(datasets: tuple[str, ...], shown: tuple[str, str], runs: dict | None = None) -> list[str]:
    """The full protocol tables of every other (dataset, teacher) under the raw reading, folded away."""
    runs = standard_runs(datasets) if runs is None else runs
    pairs = sorted({(d, i) for d, i, reading, _ in runs if reading == "raw" and (d, i) != shown},
                   key=lambda k: (datasets.index(k[0]), k[1]))
    out = []
    for dataset, identity in pairs:
        reranker = identity.partition("|")[0]
        out += [f"<details><summary><b>{dataset}</b> · {teacher_cell(identity, dataset)} · raw reading: the three protocols</summary>", ""]
        for protocol in PROTOCOLS:
            run = runs.get((dataset, identity, "raw", protocol))
            if run is None:
                out += [f"_{protocol}: not run (`lethe-lab rif run {dataset} --reranker {reranker} --protocol {protocol} --seeds 5`)._", ""]
                continue
            out += [f"**{protocol}** ({run.summary['n_queries']:,} queries, results folder `{run.run_id}`)", "", protocol_table(run), ""]
        out += ["</details>", ""]
    return (["## Every dataset and teacher (raw reading)", ""] + out) if out else []


def write_report(dataset: str = "locomo", reranker: str | None = None, out: Path | None = None,
                 also: tuple[str, ...] = ("realtalk",)) -> Path:
    """RESULTS.md from one teacher's newest finished runs under the raw reading, and the teacher study's folder when
    `lethe-lab rif teacher` wrote one; the teacher x reading table and the other datasets' runs (`also`) when on disk.
    The teacher defaults to the dataset's fold teacher, not the newest run's (`make matrix` ends with another)."""
    reranker = reranker or fold_teacher_spec(dataset)
    runs = latest_runs(dataset, reranker, reading="raw")
    if "paper" not in runs:
        raise ValueError(f"no full paper-protocol run for {dataset} with {reranker} under the raw reading; "
                         f"run `lethe-lab rif run {dataset} --reranker {reranker} --protocol paper` first")
    paper = runs["paper"]
    reranker = paper.summary["reranker"]
    runs = latest_runs(dataset, reranker, paper.summary["second_stage"], reading="raw", identity=paper.summary.get("reranker_identity"))
    datasets = (dataset, *[d for d in also if d != dataset])
    ctx = replay_context(paper)
    study = read_teacher_study(dataset, reranker)
    systems = sorted(results_dir().glob(f"systems-{dataset}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    # the systems table of the RIF runs' own pools: same dataset (the glob also matches e.g. locomo-audited), teacher
    # identity, reading and first-stage pipeline (a notebook's tokenizer or depth variant is another table)
    wanted = {"dataset": dataset, "reranker": reranker, "reranker_identity": paper.summary.get("reranker_identity"),
              "n_queries": paper.summary["n_queries"], "calibrated": paper.summary["calibrated"]}
    summaries = [json.loads((p / "summary.json").read_text()) for p in systems if (p / "summary.json").exists()]
    by_stage = {}
    for x in summaries:  # newest first: the newest systems table of each second stage
        if all(x.get(k) == v for k, v in wanted.items()) and x.get("config", {}).get("pipeline") == paper.config.get("pipeline"):
            by_stage.setdefault(x["second_stage"], x)
    sys_summary = by_stage.get(paper.summary["second_stage"])

    s = paper.summary
    doc = [f"# RESULTS — {dataset}", "",
           f"Generated by `lethe-lab rif report` on {date.today().isoformat()} from `data/results/` (the runs of `make matrix`, "
           "and of `make reproduce` for the full recipe). "
           f"Reranker (teacher): **{reranker}**" + (f" ({teacher_kind(reranker, dataset)})" if teacher_kind(reranker, dataset) else "")
           + f", second stage **{s['second_stage']}**, RIF reads the **{LOGIT_READINGS[logit_reading(s)]}**; "
           f"{s['n_queries']:,} answerable queries over one global pool of {len(ctx.dataset.corpus):,} turns; seeds {s['seeds']} "
           "(tables: each query's metric averaged over the seeds, then 95% bootstrap CIs over queries and paired permutation p, 10,000 each; Holm over the arms vs baseline; "
           "'mean ± sd over seeds' varies the schedule and k-means seeds).", ""]
    if by_stage:
        stages = sorted(by_stage, key=lambda st: st != s["second_stage"])
        doc += ["## First and second stage (systems table)", "",
                "Second stage `ce` sorts the pool by the cross-encoder (the paper's pipeline); `fused` fuses that order with the "
                "first stage's by the fold's validated weight. The RIF tables below use the first column's second stage.", "",
                "| system | " + " | ".join(f"NDCG@10 ({st})" for st in stages) + " | Recall@10 | pool recall (ᵘ: whole union) | p vs rrf |",
                "|---" * (len(stages) + 4) + "|"]
        for row in by_stage[stages[0]]["systems"]:
            levels = " | ".join(f"{next(x for x in by_stage[st]['systems'] if x['name'] == row['name'])['ndcg@10']:.4f}" for st in stages)
            doc.append(f"| {row['name']} | {levels} | {row['recall@10']:.4f} | {pool_recall(row)} | {_p(row.get('p_vs_rrf'))} |")
        doc.append("")
    finished = standard_runs(datasets)  # read once for the three sections below
    doc[4:4] = summary_section(datasets, finished, FIGURES if out is None else Path(out).parent / "figures", (out or REPO_ROOT / "RESULTS.md").parent)
    doc += inputs_section(datasets, finished)
    for protocol in ("paper", "heldout", "prequential"):
        if protocol not in runs:
            doc += [f"## Protocol: {protocol}", "", f"_Not run: `lethe-lab rif run {dataset} --protocol {protocol}`._", ""]
            continue
        r = runs[protocol]
        doc += [f"## Protocol: {protocol}", "", f"{PROTOCOL_TEXT[protocol]}. Second stage `{r.summary['second_stage']}`; "
                f"results folder `{r.run_id}`.", "", protocol_table(r), ""]
        if protocol == "paper":
            doc += ["Hot / cold / never-drawn buckets (Δ NDCG@10 vs baseline; a query's bucket depends on the seed's burn-in stream, so (query, seed) rows are pooled over the seeds, n counts them):", "", "| arm | hot | cold | unseen |", "|---|---|---|---|"]
            for a in r.summary["arms"]:
                b = a.get("buckets", {})
                doc.append(f"| {a['name']} | " + " | ".join(f"{b[k]['delta_ndcg']:+.4f} (n={b[k]['n']})" if k in b else "–" for k in ("hot", "cold", "unseen")) + " |")
            doc.append("")
        if protocol == "prequential" and "learning_curve" in r.summary:
            lc = r.summary["learning_curve"]
            arms = [a for a in ("global-gap", "clustered30-gap", "clustered30-uniform") if a in lc]
            doc += ["Learning curve: running mean of Δ NDCG@10 vs baseline by stream position (mean over the seeds):", "",
                    "| position | " + " | ".join(arms) + " |", "|---" * (len(arms) + 1) + "|"]
            for idx, pos in enumerate(lc["position"]):
                if idx % 4 == 0 or idx == len(lc["position"]) - 1:
                    doc.append(f"| {pos} | " + " | ".join(f"{lc[a][idx]:+.4f}" for a in arms) + " |")
            doc.append("")
    path = out or REPO_ROOT / "RESULTS.md"
    haystack = results_dir() / "haystack_study" / "summary.json"
    if haystack.exists():  # `make haystack` (docs/haystack_study.md)
        from lethe_core.experiments.haystack_study import FIGURES_DIR, results_section

        summary = json.loads(haystack.read_text())
        images = {n: os.path.relpath(FIGURES_DIR / f"{n}.svg", path.parent) for n in summary["charts"] if (FIGURES_DIR / f"{n}.svg").exists()}
        doc += [results_section(summary, images=images)]
    doc += other_runs_section(datasets, (dataset, s.get("reranker_identity") or reranker), finished)
    doc += [*changes_section(runs, sys_summary),
            "## Answers, read off the tables above", "", *answers(runs, len(ctx.dataset.corpus)), "",
            "## Reading the numbers", "", *interpretation(paper, study), "",
            "## Teacher quality (simulated teachers are labelled; never read them as cross-encoder results)", "",
            "A simulated teacher gives every pool member logit = 3·[relevant] − 1.5 + σ·N(0,1) (seeded); σ is set by bisection so that "
            "the reranked top-30 reaches each target NDCG@10, from the first stage's own level to the oracle. The real reranker is placed "
            "by its own baseline NDCG@10 and its measured gains.", "", teacher_section(runs, study), ""]
    path.write_text("\n".join(doc))
    return path
