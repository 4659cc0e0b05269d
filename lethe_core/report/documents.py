"""Generated blocks in the hand-written documents (README.md, docs/*.md): what they show is read from results
folders, never typed, so a document cannot disagree with the run it describes (tests/docs/test_typed_numbers.py).

A block is two marker lines; everything between them belongs to its generator:

    <!-- generated: NAME · source: WHAT IT IS GENERATED FROM -->
    ...
    <!-- /generated: NAME -->

`refresh` (`lethe-lab docs refresh`) rewrites every block of a document from `GENERATORS[NAME]`. A generator returns
None when its source run is absent on this machine: the block is then kept as it is (an empty one gets a one-line
note naming the command that generates it), because a checkout without the run knows nothing newer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lethe_core.experiments.haystack_study import STUDY_DIR, behaviour_table, size_curve_table, verdicts
from lethe_core.experiments.learning_curve import LearningCurveConfig, markdown_table
from lethe_core.results.store import SUMMARY, write_text
from lethe_core.util import timing
from lethe_core.util.paths import REPO_ROOT, results_dir

OPEN = re.compile(r"<!-- generated: (?P<name>\S+) · source: (?P<source>.*?) -->")
CLOSE = re.compile(r"<!-- /generated: (?P<name>\S+) -->")
MARKER = re.compile(r"<!-- */?generated\b")  # a line that means to be a marker: it must match OPEN or CLOSE exactly
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)

# The steps of README.md's timing table, in its order, with what each one runs.
TIMED_STEPS = {
    "make-setup": "`make setup`",
    "reranker-ensure": "`lethe-lab reranker ensure`",
    "systems-locomo": "`lethe-lab systems locomo`",
    "rif-paper": "`lethe-lab rif run locomo --protocol paper`",
    "make-run": "**`make run`**",
    "make-teachers": "`make teachers`",
    "make-matrix": "`make matrix` (after make teachers)",
    "make-study": "`make study`: make run, make teachers, make matrix, the deep pools, the notebook build",
    "pools-deep": "`lethe-lab pools build locomo --k-leg 100` (make study's deep pools)",
    "notebooks-build": "`lethe-lab notebooks build`",
    "make-test": "`make test`",
}


class DocumentError(ValueError):
    """A document's markers cannot be read: one line naming the file, the block and its line."""


@dataclass(frozen=True)
class Block:
    name: str
    start: int  # 0-based index of the opening marker's line
    end: int  # 0-based index of the closing marker's line


@dataclass(frozen=True)
class Generator:
    source: str  # what the block is generated from, written into its opening marker
    command: str  # what writes that source
    render: Callable[[Path], str | None]  # results root -> markdown, None when the source run is absent


def _minutes(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m} min {s} s" if h else f"{m} min {s} s" if m else f"{s} s"


def timings(root: Path) -> str | None:
    """The latest record of each timed step (`lethe_core.util.timing`), in TIMED_STEPS' order; a rerun inside a
    resumed chain (`rerun_in`) is not a measurement of the step, so it never replaces one."""
    latest = {e["name"]: e for e in timing.read(root) if not e.get("rerun_in")}
    rows = [latest[name] for name in TIMED_STEPS if name in latest]
    if not rows:
        return None
    lines = ["| step | wall time | commit | finished (UTC) | cores | fresh clone or cached |", "|---|---|---|---|---|---|"]
    for e in rows:
        notes = [*([f"{e['segments']} resumed segments summed; work a stop lost was redone"] if e.get("segments") else []),
                 *([f"{_minutes(e['paused_seconds'])} held with SIGSTOP left out"] if e.get("paused_seconds") else []),
                 *([e["note"]] if e.get("note") else [])]
        step = TIMED_STEPS[e["name"]] + (f" ({'; '.join(notes)})" if notes else "")
        commits = ", ".join(e.get("commits") or [e.get("commit") or "–"])
        lines.append(f"| {step} | {_minutes(e['seconds'])} | {commits} | {e['finished'][:10]} "
                     f"| {e.get('cpu_count') or '–'} | {'fresh clone' if e.get('fresh_clone') else 'cached'} |")
    return "\n".join(lines) + "\n"


def _summary(folder: Path) -> dict | None:
    path = folder / SUMMARY
    return json.loads(path.read_text()) if path.exists() else None


def learning_curve(root: Path) -> str | None:
    """The table `lethe-lab reranker curve` wrote, read from its summary."""
    summary = _summary(root / LearningCurveConfig.name)
    if summary is None:
        return None
    return (f"Dataset `{summary['dataset']}`, training precision `{summary['precision']}`, second stage "
            f"`{summary['second_stage']}`, evaluation backend `{summary['config']['backend']}`:\n\n" + markdown_table(summary["points"]))


def haystack_study(root: Path) -> str | None:
    """The size-curve table, the behaviour decomposition and the computed verdicts (RESULTS.md's section, no charts)."""
    summary = _summary(root / STUDY_DIR)
    if summary is None:
        return None
    parts = [size_curve_table(summary), *([behaviour_table(summary)] if "behaviour" in summary else []),
             "\n".join(f"- {v}" for v in verdicts(summary)) + "\n"]
    return "\n".join(parts)


def haystack_stages(root: Path) -> str | None:
    """Seconds per stage of each size, as its record stored them when it was computed (a later run reads it back)."""
    summary = _summary(root / STUDY_DIR)
    if summary is None:
        return None
    protocols = summary["protocols"]
    head = ["dataset", "turns", "load", "pools", "systems", *[f"RIF {p} ({len(summary['seeds'])} seeds)" for p in protocols]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summary["sizes"]:
        sec = s.get("seconds", {})
        cells = [sec.get(k) for k in ("load", "pools", "systems", *[f"rif_{p}" for p in protocols])]
        lines.append("| " + " | ".join([s["dataset"], f"{s['turns']:,}", *["–" if c is None else _minutes(c) for c in cells]]) + " |")
    return "\n".join(lines) + "\n"


GENERATORS: dict[str, Generator] = {
    "timings": Generator("data/results/timings.jsonl (`python -m lethe_core.util.timing`, the Makefile's timed steps)",
                         "make run", timings),
    "learning-curve": Generator("data/results/learning_curve/ (`lethe-lab reranker curve locomo`)",
                                "lethe-lab reranker curve locomo", learning_curve),
    "haystack-study": Generator("data/results/haystack_study/ (`make haystack`)", "make haystack", haystack_study),
    "haystack-stages": Generator("data/results/haystack_study/ (`make haystack`)", "make haystack", haystack_stages),
}


def not_generated(name: str) -> str:
    """What an empty block holds on a checkout without its source run."""
    return f"_not generated on this checkout: run `{GENERATORS[name].command}`_\n"


def blocks(text: str, where: str = "<text>") -> list[Block]:
    """The generated blocks of a document, checked: every marker well formed, every name known, every block closed
    before the next opens. Markers inside fenced code are text (a document may show the syntax)."""
    out, open_, fenced = [], None, False
    for i, line in enumerate(text.split("\n")):
        if FENCE.match(line):
            fenced = not fenced
        if fenced or not MARKER.match(line.strip()):
            continue
        at = f"{where}, line {i + 1}"
        if m := OPEN.fullmatch(line.strip()):
            if open_ is not None:
                raise DocumentError(f"{where}, line {open_[1] + 1}: generated block {open_[0]!r} is not closed before "
                                    f"block {m['name']!r} opens at line {i + 1}")
            if m["name"] not in GENERATORS:
                raise DocumentError(f"{at}: unknown generated block {m['name']!r} (known: {', '.join(GENERATORS)})")
            open_ = (m["name"], i)
        elif m := CLOSE.fullmatch(line.strip()):
            if open_ is None or m["name"] != open_[0]:
                inside = "no block is open" if open_ is None else f"block {open_[0]!r} (line {open_[1] + 1}) is open"
                raise DocumentError(f"{at}: closing marker of block {m['name']!r}, but {inside}")
            out.append(Block(open_[0], open_[1], i))
            open_ = None
        else:
            raise DocumentError(f"{at}: malformed generated-block marker {line.strip()!r} (expected "
                                "'<!-- generated: NAME · source: ... -->' or '<!-- /generated: NAME -->')")
    if open_ is not None:
        raise DocumentError(f"{where}, line {open_[1] + 1}: generated block {open_[0]!r} is not closed")
    return out


def refresh(path: str | Path, results_root: Path | None = None) -> list[tuple[str, str]]:
    """Rewrite the generated blocks of one document (atomically, and only when something changed); returns
    (block name, status) per block: 'generated', 'unchanged', or 'kept: ...' when its source run is absent."""
    path = Path(path)
    root = Path(results_root or results_dir())
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    found = blocks(text, _shown(path))
    out, statuses, at = [], [], 0
    for b in found:
        gen = GENERATORS[b.name]
        body = gen.render(root)
        old = "\n".join(lines[b.start + 1:b.end]).strip("\n")
        if body is None:
            body = old or not_generated(b.name)
            status = f"kept: its source is absent here (run `{gen.command}`)"
        else:
            status = "unchanged" if body.strip("\n") == old else "generated"
        out += lines[at:b.start] + [f"<!-- generated: {b.name} · source: {gen.source} -->", "", body.strip("\n"), "",
                                     f"<!-- /generated: {b.name} -->"]
        statuses.append((b.name, status))
        at = b.end + 1
    new = "\n".join(out + lines[at:])
    if new != text:
        write_text(path, new)
    return statuses


def hand_written(text: str, where: str = "<text>") -> str:
    """`text` without its fenced code, inline code spans and generated blocks: the prose a person typed."""
    lines = text.split("\n")
    for b in reversed(blocks(text, where)):
        del lines[b.start:b.end + 1]
    kept, fenced = [], False
    for line in lines:
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(line)
    return CODE_SPAN.sub("", "\n".join(kept))


def _shown(path: Path) -> str:
    """A document's path as the user knows it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)
