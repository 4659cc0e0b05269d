"""The runs as a person picks and compares them: a label per run, grouped and sorted, the verdict a run's numbers support,
and a cross-run leaderboard.

Runs are told apart by what a reader of the numbers needs: dataset, protocol, the teacher (the reranker and a short form
of its identity, so two trainings of one recipe differ), how its logits are read (raw or calibrated), the seeds, when it
finished and, inside a group, the config values in which its runs differ (what the folder hash alone hid).

The verdict is Holm-adjusted against both references a RIF arm must beat: the baseline (the summary's `p_holm`, over
every arm) and the control that reranks the whole union (`p_vs_control`, adjusted here over the RIF arms). An arm wins
only when both adjusted tests say it is better: an unadjusted CI above zero is not a win.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

import pandas as pd

from lethe_core.datasets.splits import HELDOUT, PAPER, PROTOCOLS
from lethe_core.measures import stats
from lethe_core.rerankers.recipes import fold_teacher_spec
from lethe_core.results.runs import Run, logit_reading

SIGNIFICANCE = 0.05  # family-wise, after Holm
PROTOCOL_NAMES = {PAPER: "paper", HELDOUT: "held-out"}  # the others read as they are spelled
PROTOCOL_NOTES = {
    PAPER: "paper protocol: the burn-in draws from the evaluated queries (train = test)",
    HELDOUT: "held-out protocol: each query evaluated once, on the half of the conversations the state did not learn "
             "from (A->B and B->A pooled)",
}
# Config keys that identify a write or repeat what the label already says: never "what differs" between two runs.
_NOT_A_DIFFERENCE = ("schema_version", "write_id", "pool_key", "dataset_fingerprint", "path", "dataset", "protocol", "seeds",
                     "reranker", "reranker_resolved", "calibration", "calibrated", "second_stage_resolved")


def short_identity(identity: str | None, name: str | None = None) -> str:
    """The identity `name|backend|digest` without the name, digests cut to 7 characters: "torch 3f2a1c9"."""
    if not identity:
        return ""
    parts = [p for p in str(identity).split("|") if p]
    if name is not None and parts and parts[0] == name:
        parts = parts[1:]
    return " ".join(p[:7] if len(p) > 12 and p.isalnum() else p for p in parts)


def teacher(summary: dict) -> str:
    """The reranker's name (its last path part) and, in parentheses, the short form of its identity."""
    name = str(summary.get("reranker") or "?")
    ident = short_identity(summary.get("reranker_identity"), name)
    short = name.rstrip("/").rsplit("/", 1)[-1]
    return f"{short} ({ident})" if ident else short


def _seeds(seeds: Iterable[int]) -> str:
    seeds = sorted(int(s) for s in seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}–{seeds[-1]}"
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def _flat(config: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        elif key not in _NOT_A_DIFFERENCE:
            out[name] = tuple(value) if isinstance(value, list) else value
    return out


def differences(configs: dict[str, dict]) -> dict[str, str]:
    """Per run id, the config values in which it differs from the other runs given (one group), as "key value, ...";
    empty for a run alone or for runs whose configs agree."""
    flat = {rid: _flat(c) for rid, c in configs.items()}
    keys = sorted({k for f in flat.values() for k in f})
    varying = [k for k in keys if len({repr(f.get(k)) for f in flat.values()}) > 1]

    def show(v) -> str:
        return ",".join(map(str, v)) if isinstance(v, tuple) else "–" if v is None else str(v)

    return {rid: ", ".join(f"{k} {show(f.get(k))}" for k in varying) for rid, f in flat.items()}


@dataclass(frozen=True)
class RunEntry:
    """One run as the picker shows it."""

    run_id: str
    dataset: str
    protocol: str
    teacher: str
    reading: str
    seeds: tuple[int, ...]
    finished: datetime
    differs: str = ""
    reranker: str = ""  # the summary's reranker spec, e.g. trained:NAME (`teacher` is its display form)

    @property
    def group(self) -> str:
        return f"{self.dataset} · {PROTOCOL_NAMES.get(self.protocol, self.protocol)}"

    @property
    def short_label(self) -> str:
        """Inside its group: teacher, logit reading, seeds, date and what differs from the group's other runs."""
        parts = [self.teacher, f"{self.reading} logits", _seeds(self.seeds), f"{self.finished:%Y-%m-%d %H:%M}"]
        return " · ".join(parts + ([self.differs] if self.differs else []))

    @property
    def label(self) -> str:
        return f"{self.group} · {self.short_label}"


def finished_at(run: Run) -> datetime:
    """When the run finished: its summary.json is written last (results.store), so that file's modification time."""
    return datetime.fromtimestamp((run.path / "summary.json").stat().st_mtime)


def _order(entry: RunEntry) -> tuple:
    rank = PROTOCOLS.index(entry.protocol) if entry.protocol in PROTOCOLS else len(PROTOCOLS)
    return entry.dataset, rank, -entry.finished.timestamp(), entry.run_id


def catalog(runs: Iterable[Run]) -> list[RunEntry]:
    """Every run as a RunEntry, sorted by dataset, then protocol (paper, held-out, ...), then newest first."""
    runs = list(runs)
    groups: dict[tuple[str, str], dict[str, dict]] = {}
    for r in runs:
        groups.setdefault((r.summary["dataset"], r.summary["protocol"]), {})[r.run_id] = r.config
    differs = {rid: d for configs in groups.values() for rid, d in differences(configs).items()}
    entries = [RunEntry(r.run_id, str(r.summary["dataset"]), str(r.summary["protocol"]), teacher(r.summary), logit_reading(r.summary),
                        tuple(int(s) for s in r.summary["seeds"]), finished_at(r), differs.get(r.run_id, ""),
                        str(r.summary.get("reranker") or "")) for r in runs]
    return sorted(entries, key=_order)


def default_entry(entries: list[RunEntry]) -> RunEntry | None:
    """The run shown when none is asked for: the newest paper-protocol run (the reproduction) of LoCoMo's fold teacher
    under the raw reading, the run RESULTS.md and the notebooks are about (`make matrix` finishes other teachers' runs
    after it); else the newest paper-protocol run; else the newest run."""
    if not entries:
        return None
    papers = [e for e in entries if e.protocol == PAPER]
    main = [e for e in papers if e.dataset == "locomo" and e.reranker == fold_teacher_spec("locomo") and e.reading == "raw"]
    return max(main or papers or entries, key=lambda e: e.finished)


def _tone(delta: float | None, p: float | None, alpha: float) -> str:
    if delta is None or p is None or pd.isna(delta) or pd.isna(p) or p >= alpha:
        return "unclear"
    return "better" if delta > 0 else "worse" if delta < 0 else "unclear"


def significance(run: Run, alpha: float = SIGNIFICANCE) -> pd.DataFrame:
    """Per arm but the baseline: Δ NDCG@10 vs the baseline with its CI and Holm p (the summary's, over every arm), Δ vs
    the control with its CI, raw p and Holm p (adjusted here over the RIF arms, the family that is compared with the
    control), the tone of each comparison ("better", "worse", "unclear" after Holm) and `wins`: better than both."""
    arms = [a for a in run.summary["arms"] if a["name"] != "baseline"]
    has_control = any(a["name"] == "control" for a in run.summary["arms"])
    rows = []
    for a in arms:
        d, c = a["delta_ndcg"], a.get("delta_vs_control") or {}
        rows.append({"arm": a["name"], "kind": a.get("kind", "rif"), "Δ NDCG": d["mean"], "Δ lo": d["ci"][0], "Δ hi": d["ci"][1],
                     "p (Holm)": a["p_holm"], "Δ vs control": c.get("mean"), "Δc lo": (c.get("ci") or [None, None])[0],
                     "Δc hi": (c.get("ci") or [None, None])[1], "p vs control": a.get("p_vs_control")})
    frame = pd.DataFrame(rows, columns=["arm", "kind", "Δ NDCG", "Δ lo", "Δ hi", "p (Holm)", "Δ vs control", "Δc lo", "Δc hi",
                                        "p vs control"]).astype({c: float for c in ["Δ NDCG", "Δ lo", "Δ hi", "p (Holm)", "Δ vs control",
                                                                                     "Δc lo", "Δc hi", "p vs control"]})
    family = frame.index[(frame["kind"] == "rif") & frame["p vs control"].notna()]
    frame["p vs control (Holm)"] = float("nan")
    if len(family):
        frame.loc[family, "p vs control (Holm)"] = stats.adjust(frame.loc[family, "p vs control"].to_numpy(), "holm")
    frame["vs baseline"] = [_tone(d, p, alpha) for d, p in zip(frame["Δ NDCG"], frame["p (Holm)"])]
    frame["vs control"] = [_tone(d, p, alpha) for d, p in zip(frame["Δ vs control"], frame["p vs control (Holm)"])]
    frame["wins"] = (frame["kind"] == "rif") & (frame["vs baseline"] == "better") & has_control & (frame["vs control"] == "better")
    return frame


@dataclass(frozen=True)
class Verdict:
    """What the run says about RIF, in one sentence; `tone` "win" (green) only when `arm` beats baseline and control."""

    tone: str  # "win" | "loss" | "none"
    arm: str | None
    sentence: str


def _ci(mid: float, lo: float, hi: float) -> str:
    return f"{mid:+.4f} NDCG@10 [{lo:+.4f}, {hi:+.4f}]"


def _p(p: float) -> str:
    return "n/a" if pd.isna(p) else f"{p:.4f}" if p >= 1e-4 else "< 0.0001"


def best_rif_arm(table: pd.DataFrame) -> pd.Series | None:
    """The arm a verdict is about: the best winner by Δ; else the best arm better than the baseline; else the best RIF arm."""
    rif = table[table["kind"] == "rif"]
    for pool in (rif[rif["wins"]], rif[rif["vs baseline"] == "better"], rif):
        if len(pool):
            return pool.loc[pool["Δ NDCG"].idxmax()]
    return None


def verdict(run: Run, alpha: float = SIGNIFICANCE, table: pd.DataFrame | None = None) -> Verdict:
    """The run's verdict on RIF, computed from its summary (seed `seeds[0]`): Holm-adjusted against baseline and control.
    `table`: the run's `significance` when the caller has it already."""
    table = significance(run, alpha) if table is None else table
    best = best_rif_arm(table)
    s = run.summary
    scope = f"Seed {s['seeds'][0]}, {s['n_queries']:,} queries, {PROTOCOL_NOTES.get(s['protocol'], s['protocol'] + ' protocol')}."
    if best is None:
        return Verdict("none", None, f"This run has no RIF arm, so there is nothing to judge. {scope}")
    arm = str(best["arm"])
    vs_base = f"{_ci(best['Δ NDCG'], best['Δ lo'], best['Δ hi'])}, Holm p = {_p(best['p (Holm)'])}"
    has_control = bool(table["arm"].eq("control").any())
    vs_ctrl = (f"{_ci(best['Δ vs control'], best['Δc lo'], best['Δc hi'])}, Holm p = {_p(best['p vs control (Holm)'])}"
               if has_control and pd.notna(best["Δ vs control"]) else "")
    if best["wins"]:
        return Verdict("win", arm, f"RIF helps here: {arm} beats the baseline ({vs_base}) and the control that reranks the "
                                   f"whole union ({vs_ctrl}). {scope}")
    if best["vs baseline"] == "better":
        if not vs_ctrl:
            text = (f"{arm} beats the baseline ({vs_base}), but this run has no control arm, so whether reranking the whole "
                    f"union does as well without RIF is untested. {scope}")
        else:
            text = (f"{arm} beats the baseline ({vs_base}) but not the control that reranks the whole union ({vs_ctrl}): "
                    f"a larger reranker pool does as well without RIF. {scope}")
        return Verdict("none", arm, text)
    if best["vs baseline"] == "worse":
        return Verdict("loss", arm, f"RIF hurts here: even the best RIF arm, {arm}, is worse than the baseline ({vs_base}). {scope}")
    control = f"; against the control: {vs_ctrl}" if vs_ctrl else ""
    return Verdict("none", arm, f"No RIF arm beats the baseline after Holm correction: the best, {arm}, moves it by {vs_base}"
                                f"{control}. {scope}")


def leaderboard(runs: Iterable[Run], entries: list[RunEntry] | None = None, alpha: float = SIGNIFICANCE) -> pd.DataFrame:
    """One row per run: its verdict's arm with Δ vs baseline and vs control (CIs, Holm p) and the verdict's tone, in
    catalog order (dataset, protocol, newest first)."""
    runs = {r.run_id: r for r in runs}
    entries = entries if entries is not None else catalog(runs.values())
    rows = []
    for e in entries:
        run = runs[e.run_id]
        table = significance(run, alpha)
        best = best_rif_arm(table)
        v = verdict(run, alpha, table)
        row = {"dataset": e.dataset, "protocol": PROTOCOL_NAMES.get(e.protocol, e.protocol), "teacher": e.teacher, "logits": e.reading,
               "seeds": len(e.seeds), "finished": e.finished, "best RIF arm": v.arm, "verdict": v.tone, "run": e.run_id}
        if best is not None:
            row.update({k: best[k] for k in ("Δ NDCG", "Δ lo", "Δ hi", "p (Holm)", "Δ vs control", "p vs control (Holm)")})
        rows.append(row)
    cols = ["dataset", "protocol", "teacher", "logits", "seeds", "finished", "best RIF arm", "Δ NDCG", "Δ lo", "Δ hi", "p (Holm)",
            "Δ vs control", "p vs control (Holm)", "verdict", "run"]
    return pd.DataFrame(rows, columns=cols)
