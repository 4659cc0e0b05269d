"""Execute the checkpoint notebooks (jupytext percent files) and regenerate `notebooks/README.md`.

Each `notebooks/NN_slug.py` runs through papermill with its `parameters` cell overridden:
`SMALL` for the tests, nothing for the full study. Outputs land in `notebooks/_build/`
(executed `.ipynb` + interactive HTML, gitignored). A build is resumable: a notebook is
skipped when its stamp — a hash of its source, its parameters, the `lethe_core` source and
the data and model files it may read — matches the stamp of its last successful run.
The index reads each executed notebook's `Finding` (lethe_core.report.checkpoints) back from its outputs.
A full build also draws every figure of every notebook as SVG into `docs/figures/checkpoints/` (committed, so
the figures are where readers are) and the index's forest figure beside them; docs/notebooks.md.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lethe_core.report.checkpoints import Finding, percent, read_finding, signed
from lethe_core.util.figures import forest, notebook_figures, write_svgs
from lethe_core.util.paths import REPO_ROOT, home_dir, shared_data_dir

NOTEBOOKS = REPO_ROOT / "notebooks"
BUILD = NOTEBOOKS / "_build"
TEMPLATES = Path(__file__).resolve().parent / "templates"  # nbconvert templates, one folder each
FIGURES = REPO_ROOT / "docs" / "figures" / "checkpoints"  # committed SVG copies of a full build's figures
FOREST = "index-forest.svg"
QUIET = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}
IDENTITY = ("reranker", "backend")  # what a row of the index must share with the build to be shown as its result
TIMED = {"08_hybrid"}  # notebooks that time themselves (query latency): a parallel build runs them alone, after the others
# A build with no recorded times (a fresh clone) starts these first: the notebooks a cold pair-score cache makes longest,
# 14 (the rescued pairs its replay scores: py-spy put 98 % of its time in ONNX scoring) first, then those with an NFCorpus part (docs/notebooks.md).
COLD_FIRST = ("14_exploration_rescue", "01_embedding_mutation", "02_adapter_mutation", "04_mlp_adapter", "18_statistics_scope",
              "17_enrichment")

# Parameters every notebook declares; the tests run each notebook with these (a few seconds of work each).
SMALL = {"dataset": "locomo", "conversations": 2, "limit_queries": None, "seeds": 2, "burn_in": 400,
         "reranker": "test:lexical", "backend": "torch"}

TITLES = {
    1: "Embedding mutation", 2: "Adapter mutation", 3: "Cross-encoder rerank of dense top-30", 4: "Learned MLP adapter",
    5: "Recall analysis", 6: "Adaptive depth + rescue cache", 7: "Near-duplicate dedup", 8: "BM25 hybrid",
    9: "GC routing index", 10: "Integrity audit", 11: "Global RIF", 12: "Clustered RIF", 13: "Rank-gap rule",
    14: "Exploration + rescue list", 15: "Sparse distributed memory", 16: "Behaviour decomposition",
    17: "Write-time enrichment", 18: "Statistics and scope",
}


class NotebookError(RuntimeError):
    """A notebook failed to execute; the message names it and the cell's error."""


def discover(names: list[str] | None = None, root: Path = NOTEBOOKS) -> list[Path]:
    """`NN_slug.py` files in checkpoint order; `names` filters by number (`03`) or stem."""
    found = sorted(p for p in root.glob("[0-9][0-9]_*.py"))
    if not names:
        return found
    want = set(names)
    picked = [p for p in found if p.stem in want or p.stem[:2] in want or str(int(p.stem[:2])) in want]
    missing = want - {p.stem for p in picked} - {p.stem[:2] for p in picked} - {str(int(p.stem[:2])) for p in picked}
    if missing:
        raise ValueError(f"no notebook for {sorted(missing)}; have {', '.join(p.stem for p in found)}")
    return picked


def _digest_tree(paths: list[Path], pattern: str = "*") -> str:
    """Content hash of source files; size + mtime of data files (too big to hash on every build)."""
    h = hashlib.sha256()
    for root in paths:
        if not root.exists():
            continue
        files = [root] if root.is_file() else sorted(p for p in root.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts)
        for p in files:
            h.update(str(p).encode())
            if p.suffix == ".py":
                h.update(p.read_bytes())
            else:
                st = p.stat()
                h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def _module_file(name: str) -> Path | None:
    base = REPO_ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def library_closure(source: str) -> list[Path]:
    """The `lethe_core` files a piece of code imports, transitively (static: `import` and `from` statements).

    Package `__init__` files on the way are included, since importing a submodule runs them.
    """
    seen: set[Path] = set()
    todo = [(source, "")]
    while todo:
        text, package = todo.pop()
        for node in ast.walk(ast.parse(text)):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(p for p in [*parts, base] if p)
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            for name in names:
                if not name.startswith("lethe_core"):
                    continue
                parts = name.split(".")
                for i in range(1, len(parts) + 1):
                    f = _module_file(".".join(parts[:i]))
                    if f is not None and f not in seen:
                        seen.add(f)
                        pkg = ".".join(parts[:i]) if f.name == "__init__.py" else ".".join(parts[: i - 1])
                        todo.append((f.read_text(), pkg))
    return sorted(seen)


def stamp(path: Path, parameters: dict) -> str:
    """What a notebook's output depends on: its source, its parameters, the library code it imports, the HTML template, data and models."""
    h = hashlib.sha256()
    source = path.read_bytes()
    h.update(source)
    h.update(json.dumps(parameters, sort_keys=True).encode())
    import jupytext

    code = jupytext.writes(jupytext.reads(source.decode(), fmt="py:percent"), fmt="py:percent")
    for f in [*library_closure(_code_only(code)), *sorted(p for p in TEMPLATES.rglob("*") if p.is_file())]:
        h.update(str(f.relative_to(REPO_ROOT)).encode())
        h.update(f.read_bytes())
    h.update(_digest_tree([shared_data_dir()]).encode())
    h.update(_digest_tree([home_dir() / "models"], "*.json").encode())
    return h.hexdigest()[:20]


def _code_only(text: str) -> str:
    """Python source without IPython-only lines (magics, shell escapes), so `ast` can parse a notebook."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("%", "!")))


def execute(path: Path, out_dir: Path, parameters: dict, html: bool = True, timeout: int | None = None) -> Path:
    """Run one notebook into `out_dir/<stem>.ipynb` (+ `.html`); raise NotebookError naming the failing cell."""
    import jupytext
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    out_dir.mkdir(parents=True, exist_ok=True)
    for var in QUIET:  # the kernel inherits them: no model-loading bars in the outputs
        os.environ.setdefault(var, QUIET[var])
    nb = jupytext.read(path)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    target = out_dir / f"{path.stem}.ipynb"
    tmp = out_dir / f".tmp-{path.stem}.ipynb"
    try:
        pm.execute_notebook(nb, str(tmp), parameters=parameters, kernel_name="python3", language="python", cwd=str(path.parent),
                            progress_bar=False, execution_timeout=timeout)
    except PapermillExecutionError as exc:
        raise NotebookError(f"{path.name}: cell {exc.exec_count} raised {exc.ename}: {exc.evalue} "
                            f"(executed copy with the traceback: {tmp})") from None
    executed = json.loads(tmp.read_text())
    executed["metadata"].get("papermill", {}).update(input_path=path.name, output_path=target.name)  # no machine paths
    tmp.write_text(json.dumps(executed, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, target)
    if html:
        export_html(target, out_dir / f"{path.stem}.html")
    return target


def export_html(notebook: Path, html: Path) -> Path:
    """A self-contained page: JupyterLab's look without its CDN scripts (templates/lethe_offline), figures interactive offline."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lethe_offline", extra_template_basedirs=[str(TEMPLATES)])
    body, _ = exporter.from_filename(str(notebook))
    html.write_text(body)
    return html


def export_figures(executed: Path, dest: Path = FIGURES) -> list[Path]:
    """`<stem>-<i>.svg` for every figure an executed notebook shows, in order; older copies of that notebook's figures
    that this build did not redraw are removed."""
    nb = json.loads(Path(executed).read_text())
    figs = notebook_figures([o for c in nb["cells"] for o in c.get("outputs", [])])
    written = write_svgs({dest / f"{executed.stem}-{i}.svg": f for i, f in enumerate(figs, 1)}) if figs else []
    for old in dest.glob(f"{executed.stem}-*.svg"):
        if old not in written:
            old.unlink()
    return written


def run_order(stem: str, state: dict) -> tuple:
    """Longest first, so the workers finish together: by the last recorded time; notebooks never timed here come first
    of all, in `COLD_FIRST` order."""
    if stem in state and "seconds" in state[stem]:
        return (1, -state[stem]["seconds"], 0)
    return (0, 0.0, COLD_FIRST.index(stem) if stem in COLD_FIRST else len(COLD_FIRST))


@dataclass
class NotebookBuild:
    """`make notebooks` / `lethe-lab notebooks build`: execute, skip what is up to date, write the index."""

    names: list[str] | None = None
    small: bool = False  # the tests' parameters (SMALL) instead of each notebook's full-study defaults
    parameters: dict = field(default_factory=dict)  # build-wide overrides, e.g. one teacher and one backend for every notebook
    force: bool = False
    out: Path | None = None
    html: bool = True
    timeout: int | None = None
    progress: bool = True
    jobs: int = 1  # notebooks executed at once (`_run_parallel`)
    root: Path = NOTEBOOKS
    log: list[dict] = field(default_factory=list)

    def run(self) -> list[dict]:
        paths = discover(self.names, self.root)
        out = Path(self.out or (BUILD / "small" if self.small else BUILD))
        params = {**(SMALL if self.small else {}), **self.parameters}
        publish = not self.small and self.out is None  # only the canonical build draws the committed figures
        state_file = out / "build.json"
        state = json.loads(state_file.read_text()) if state_file.exists() else {}
        from tqdm.auto import tqdm

        todo = []
        for path in paths:
            key = stamp(path, params)
            prev = state.get(path.stem, {})
            if not self.force and prev.get("stamp") == key and (out / f"{path.stem}.ipynb").exists():
                self.log.append({**prev, "notebook": path.stem, "skipped": True})
                if publish and not any(FIGURES.glob(f"{path.stem}-*.svg")):
                    export_figures(out / f"{path.stem}.ipynb")
            else:
                todo.append((path, key))
        todo.sort(key=lambda item: run_order(item[0].stem, state))
        failures = []

        def done(path: Path, key: str, seconds: float, target: Path) -> None:
            if publish:
                export_figures(target)
            entry = {"notebook": path.stem, "stamp": key, "seconds": round(seconds, 1),
                     "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "skipped": False}
            state[path.stem] = {k: v for k, v in entry.items() if k != "skipped"}
            state_file.write_text(json.dumps(state, indent=2))
            self.log.append(entry)
            if self.progress:
                tqdm.write(f"{path.stem}: {entry['seconds']:.0f} s -> {target}")

        bar = tqdm(total=len(todo), desc="notebooks", unit="nb", disable=not self.progress)
        alone = [item for item in todo if item[0].stem in TIMED] if self.jobs > 1 else []
        shared = [item for item in todo if item not in alone]
        if self.jobs > 1 and len(shared) > 1:
            failures += self._run_parallel(shared, out, params, done, bar)
        else:
            alone = shared + alone
        for path, key in alone:
            bar.set_postfix_str(path.stem)
            try:
                target, seconds = _timed_execute(path, out, params, self.html, self.timeout)
            except NotebookError as exc:
                failures.append(str(exc))
            else:
                done(path, key, seconds, target)
            bar.update()
        bar.close()
        if failures:  # every other notebook ran and is recorded: a rerun executes only these
            raise NotebookError("; ".join(failures))
        if publish:
            write_index(out, state, parameters=params, figures=FIGURES)
        return self.log

    def _run_parallel(self, todo: list, out: Path, params: dict, done, bar) -> list[str]:
        """`jobs` notebooks at a time, each kernel held to its share of the cores (OMP/MKL/OpenBLAS threads, which torch
        and ONNX Runtime read): most notebooks spend much of their time in single-threaded Python (the rescue replay,
        pandas), so two kernels on two cores finish sooner than one kernel that owns both. Caches and run folders are
        locked per writer (`util.locking`), so two notebooks asking for the same pools or run compute them once."""
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from multiprocessing import get_context

        threads = str(max(1, (os.cpu_count() or 1) // self.jobs))
        failures = []
        with ProcessPoolExecutor(self.jobs, mp_context=get_context("spawn"), initializer=_share_cores, initargs=(threads,)) as pool:
            running = {pool.submit(_timed_execute, path, out, params, self.html, self.timeout): (path, key) for path, key in todo}
            while running:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    path, key = running.pop(future)
                    try:
                        target, seconds = future.result()
                    except NotebookError as exc:
                        failures.append(str(exc))
                    else:
                        done(path, key, seconds, target)
                    bar.update()
        return failures


def _share_cores(threads: str) -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = threads


def _timed_execute(path: Path, out: Path, params: dict, html: bool, timeout: int | None) -> tuple[Path, float]:
    t0 = time.perf_counter()
    target = execute(path, out, params, html, timeout)
    return target, time.perf_counter() - t0


def _minus(text) -> str:
    """Typographic minus signs in numbers (−0.0090, not -0.0090), as the rest of the generated documents."""
    return re.sub(r"(?<![\w\])])-(?=\.?\d)", "−", str(text))


def _num(x: float | None) -> str:
    return "—" if x is None else signed(x)


def identity(parameters: dict) -> str:
    """The teacher and backend a row was computed with (`auto` when the build left them to resolution)."""
    return " · ".join(f"`{parameters[k]}`" if k in parameters else "—" for k in IDENTITY)


def headline(primary: dict) -> str:
    """The primary claim's estimate with its CI, and the conversation-level CI where the rows have conversations."""
    lo, hi = primary["ci"]
    text = f"{_num(primary['delta'])} [{_num(lo)}, {_num(hi)}] ({percent(primary['level'])}, {primary['unit']})"
    if primary.get("conversation_ci"):
        clo, chi = primary["conversation_ci"]
        if clo is not None and chi is not None:
            text += f"; by conversation [{_num(clo)}, {_num(chi)}]"
    return text


def polarity(primary: dict) -> str:
    """What replicating the claim means: a gain, or a negative result (no difference, or a loss) that the reference reports."""
    if primary["kind"] == "null" or (primary["kind"] != "null" and primary["direction"] < 0):
        return "negative result replicated" if primary["outcome"] == "holds" else "negative result claimed"
    return "gain replicated" if primary["outcome"] == "holds" else "gain claimed"


def scaled(primary: dict) -> tuple[float, float, float] | None:
    """The primary claim's estimate and CI in units of its bound, signed so that the claimed side is positive:
    1 is the reference's effect (an effect claim) or the equivalence margin (a null claim). None for a direction-only
    claim, which has no scale of its own."""
    bound = primary.get("bound")
    if not bound or primary["kind"] == "direction":
        return None
    sign = primary["direction"] if primary["kind"] == "effect" else 1
    scale = abs(primary["reference"]) if primary["kind"] == "effect" else bound
    lo, hi = sorted((sign * primary["ci"][0] / scale, sign * primary["ci"][1] / scale))
    return sign * primary["delta"] / scale, lo, hi


def index_forest(findings: dict[int, Finding]):
    """One row per checkpoint: our primary estimate and CI in units of what was claimed (1 = the reference's effect
    for an effect claim, ±1 = the equivalence margin for a null claim); direction-only claims are left out."""
    rows = []
    for n, f in sorted(findings.items()):
        primary = f.claims[0] if f.claims else None
        point = scaled(primary) if primary else None
        if point is None:
            continue
        rows.append({"row": f"{n:02d} {f.title}", "x": point[0], "lo": point[1], "hi": point[2],
                     "kind": f"{primary['kind']} claim: {'reference effect = 1' if primary['kind'] == 'effect' else 'margin = ±1'}"})
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    fig = forest(frame, "row", "x", "lo", "hi", "Each checkpoint's primary claim: ours against what the reference claimed",
                 "our estimate ÷ the claim's scale (effect: the reference's effect; null: the equivalence margin), 95 % / 90 % CI",
                 "checkpoint", color="kind", references={"reference / margin": 1.0})
    fig.add_vline(x=-1.0, line_dash="dot", line_color="#bbb")
    return fig


def write_index(build: Path = BUILD, state: dict | None = None, target: Path = NOTEBOOKS / "README.md",
                parameters: dict | None = None, figures: Path | None = None) -> Path:
    """`notebooks/README.md`: one row per checkpoint, filled from the executed notebooks' Findings.

    `parameters`: the build's own (its teacher and backend): a row computed with another identity is marked, and a
    row kept from the previous index (not executed into this build folder) is kept only when its identity is the
    build's. `figures`: where the SVG copies are (the forest figure is drawn there and each row links its figures).
    """
    state = state if state is not None else json.loads((build / "build.json").read_text())
    build_id = identity(parameters) if parameters and all(k in parameters for k in IDENTITY) else None
    sources = {int(p.stem[:2]): p for p in discover()}
    previous = _previous_rows(target)
    rows, total, kept, findings, others = [], 0.0, [], {}, []
    for n, title in TITLES.items():
        src = sources.get(n)
        link = f"[{src.name}]({src.name})" if src else "—"
        try:
            finding: Finding | None = read_finding(build / f"{src.stem}.ipynb") if src and (build / f"{src.stem}.ipynb").exists() else None
        except ValueError as exc:  # executed before the verdict words changed: its verdict means something else now
            rows.append(f"| {n:02d} | {title} | — | — | — | not built yet (rebuild: {_cell(exc)}) | — | — | {link} |")
            continue
        if finding is None and src and n in previous and (build_id is None or previous[n][2] == build_id):
            row, seconds, _ = previous[n]  # built earlier (e.g. on another machine) with this identity
            rows.append(row)
            total += seconds
            kept.append(f"{n:02d}")
            continue
        if finding is None or not finding.claims:
            rows.append(f"| {n:02d} | {title} | — | — | — | not built yet | — | — | {link} |")
            continue
        seconds = state.get(src.stem, {}).get("seconds", 0.0)
        total += seconds
        findings[n] = finding
        primary = finding.claims[0]
        row_id = identity(finding.parameters)
        shown_id = row_id if build_id is None or row_id == build_id else f"⚠ {row_id} (not this build's {build_id})"
        if build_id is not None and row_id != build_id:
            others.append(f"{n:02d}")
        figs = sorted(figures.glob(f"{src.stem}-*.svg"), key=lambda p: int(p.stem.rsplit("-", 1)[1])) if figures else []
        fig_links = " ".join(f"[{i}]({os.path.relpath(p, target.parent)})" for i, p in enumerate(figs, 1))
        rows.append(
            f"| {n:02d} | {title} | {_cell(_minus(primary['what']))} | {_cell(_minus(finding.reference))} | {_cell(headline(primary))} | "
            f"**{finding.verdict}** · {polarity(primary)} | {_cell(_minus(finding.why))} | {shown_id} | "
            f"{link} · {seconds:.0f} s" + (f" · figures {fig_links}" if fig_links else "") + " |")
    forest_line = ""
    if figures is not None:
        fig = index_forest(findings)
        if fig is not None:
            write_svgs({figures / FOREST: fig})
            forest_line = (f"![Each checkpoint's primary claim against the reference's]({os.path.relpath(figures / FOREST, target.parent)})\n\n"
                           "Ours against what the reference claimed, one row per checkpoint (its primary claim): 1 is the reference's "
                           "effect for an effect claim, ±1 the equivalence margin for a null claim; direction-only claims are not drawn.\n\n")
    text = (
        "# Checkpoint notebooks\n\n"
        "Generated by `make notebooks` (`lethe-lab notebooks build`) from the executed notebooks' verdict cells; "
        "do not edit by hand. Each notebook states a claim of the reference, re-runs it with `lethe_core`, and computes "
        "its verdict from the numbers. The verdict is its primary claim's outcome (holds, smaller than claimed, inconclusive, "
        "does not hold, untestable; \"fragile\" when only the query-level CI, not the conversation-level one, excludes zero): "
        "the rule is in docs/statistics.md; the secondary claims and every other number are in each notebook. "
        + (f"Every row was computed with one teacher and backend: {build_id}. " if build_id and not others else "")
        + (f"Rows {', '.join(others)} were computed with another teacher or backend than this build's ({build_id}) and are marked ⚠. "
           if others else "")
        + "The figures' SVG copies are committed in `docs/figures/checkpoints/` and linked from each row; a build writes the "
        "executed copies (`.ipynb`, interactive HTML) to `notebooks/_build/`, which is not committed (it holds outputs of "
        "this machine's run), so the rows link the notebooks' sources.\n\n"
        + forest_line +
        "| # | Checkpoint | Primary claim, as measured | Reference | Ours: estimate [CI] | Verdict | Why | Teacher · backend | Notebook · run time · figures |\n"
        "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"Execution time of the notebooks as last built: {total / 60:.1f} min on this machine, summed over the notebooks "
        "(each reads cached pools and results; a cold build, which also scores the pairs no earlier run scored, takes "
        "longer: README's timing table has its measured wall time).\n\n"
        + (f"Rows {', '.join(kept)} are kept from the previous index (same teacher and backend): those notebooks were not "
           "executed into this build folder (`lethe-lab notebooks build --only ...` rebuilt the others).\n\n" if kept else "")
        +
        "Re-run one notebook with other parameters: `.venv/bin/lethe-lab notebooks build --only 12 --force`, or open the "
        "`.py` file in Jupyter (jupytext) and edit its `parameters` cell.\n"
    )
    target.write_text(text)
    return target


def _previous_rows(target: Path) -> dict[int, tuple[str, float, str | None]]:
    """The built rows of an existing index, by checkpoint number, with their run time in seconds and identity cell."""
    if not target.exists():
        return {}
    out = {}
    for line in target.read_text().splitlines():
        m = re.match(r"\| (\d\d) \|", line)
        if m and "not built yet" not in line:
            t = re.search(r"· (\d+) s( · figures[^|]*)? \|$", line)
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            out[int(m.group(1))] = (line, float(t.group(1)) if t else 0.0, cells[7] if len(cells) == 9 else None)
    return out


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
