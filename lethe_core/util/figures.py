"""One small plotly style shared by the notebooks and the dashboard: titles, axis labels with units, CIs.

`setup_notebook()` picks a renderer that stores each figure as plotly JSON (so tests can count
figures in an executed notebook and the build can draw them as SVG) and as HTML with plotly.js embedded
once and no CDN script (so an exported HTML page stays interactive offline; lethe_core/report/notebooks.py).
`write_static` (`write_svgs` for SVG) draws static copies for the repository (kaleido + the system Chromium of `make browser`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import logging
import os
import re
import secrets
import shutil
import warnings
from pathlib import Path
from typing import Sequence

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.base_renderers import NotebookRenderer
from tqdm import TqdmWarning

TEMPLATE = "plotly_white"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
PLOTLY_MIME = "application/vnd.plotly.v1+json"
_CDN_SCRIPT = re.compile(r'<script src="https?://[^"]*"></script>')


class OfflineNotebookRenderer(NotebookRenderer):
    """plotly's notebook renderer without the MathJax CDN script it puts before every figure: no figure here uses LaTeX."""

    def to_mimebundle(self, fig_dict):
        bundle = super().to_mimebundle(fig_dict)
        bundle["text/html"] = _CDN_SCRIPT.sub("", bundle["text/html"])
        return bundle


def setup_notebook() -> None:
    """The renderer above, the shared template, and no library noise in the outputs: tqdm's "IProgress not found"
    box and sentence-transformers' model-conversion warning both print machine paths and say nothing about the study
    (the executor also turns off the Hugging Face loading bars: lethe_core/report/notebooks.py)."""
    warnings.filterwarnings("ignore", category=TqdmWarning)
    for name in ("sentence_transformers", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    pio.renderers["lethe_notebook"] = OfflineNotebookRenderer()
    pio.renderers.default = "plotly_mimetype+lethe_notebook"
    pio.templates.default = TEMPLATE


def style(fig: go.Figure, title: str, x: str, y: str, height: int = 420) -> go.Figure:
    """Every figure gets a title and both axis labels (with units where there are any)."""
    if not (title and x and y):
        raise ValueError("a figure needs a title and both axis labels")
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, template=TEMPLATE, height=height,
                      colorway=list(PALETTE), legend_title_text="", margin=dict(t=60, l=60, r=20, b=60))
    return fig


def bar_ci(frame: pd.DataFrame, x: str, y: str, lo: str, hi: str, title: str, x_label: str, y_label: str,
           color: str | None = None, reference: float | None = None, reference_label: str = "reference") -> go.Figure:
    """Bars of `y` with asymmetric 95 % CI whiskers from columns `lo`/`hi`; optional dashed reference line."""
    fig = go.Figure()
    groups = [(None, frame)] if color is None else list(frame.groupby(color, sort=False))
    for name, g in groups:
        fig.add_bar(x=g[x], y=g[y], name=str(name) if name is not None else y,
                    error_y=dict(type="data", symmetric=False, array=g[hi] - g[y], arrayminus=g[y] - g[lo]))
    if reference is not None:
        fig.add_hline(y=reference, line_dash="dash", annotation_text=reference_label)
    fig.update_layout(barmode="group", showlegend=color is not None)
    return style(fig, title, x_label, y_label)


def line_ci(frame: pd.DataFrame, x: str, y: str, lo: str, hi: str, title: str, x_label: str, y_label: str,
            color: str | None = None) -> go.Figure:
    """Lines of `y` over `x` with a shaded 95 % CI band per `color` group."""
    fig = go.Figure()
    groups = [(y, frame)] if color is None else list(frame.groupby(color, sort=False))
    for i, (name, g) in enumerate(groups):
        c = PALETTE[i % len(PALETTE)]
        fig.add_scatter(x=list(g[x]) + list(g[x])[::-1], y=list(g[hi]) + list(g[lo])[::-1], fill="toself",
                        line=dict(width=0), fillcolor=c, opacity=0.15, hoverinfo="skip", showlegend=False)
        fig.add_scatter(x=g[x], y=g[y], name=str(name), mode="lines+markers", line=dict(color=c))
    return style(fig, title, x_label, y_label)


def forest(frame: pd.DataFrame, label: str, delta: str, lo: str, hi: str, title: str, x_label: str, y_label: str,
           color: str | None = None, references: dict[str, float] | None = None, zero: bool = True) -> go.Figure:
    """A forest plot: one row per `label` (first row on top), the estimate with its 95 % CI as a horizontal whisker,
    a solid line at 0 and a dashed line per `references` entry (name -> x)."""
    fig = go.Figure()
    groups = [(None, frame)] if color is None else list(frame.groupby(color, sort=False))
    for i, (name, g) in enumerate(groups):
        fig.add_scatter(x=g[delta], y=g[label], mode="markers", orientation="h", name=str(name) if name is not None else delta,
                        marker=dict(color=PALETTE[i % len(PALETTE)], size=9, symbol="diamond"),
                        error_x=dict(type="data", symmetric=False, array=g[hi] - g[delta], arrayminus=g[delta] - g[lo]))
    if zero:
        fig.add_vline(x=0, line_color="#444", line_width=1)
    for j, (name, x) in enumerate((references or {}).items()):
        fig.add_vline(x=x, line_dash="dash", line_color="#888",
                      annotation_text=name, annotation_position="top" if j % 2 == 0 else "bottom")
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=list(dict.fromkeys(frame[label])))
    fig.update_layout(showlegend=color is not None, scattermode="group", scattergap=0.5)  # groups side by side within a row
    fig = style(fig, title, x_label, y_label, height=max(260, (22 + 12 * len(groups)) * frame[label].nunique() + 160))
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.12, xanchor="left", x=0))
    return fig


def static_export_problem() -> str | None:
    """Why SVG copies cannot be drawn here (no kaleido, no Chromium), or None when they can."""
    if importlib.util.find_spec("kaleido") is None:
        return "kaleido is not installed (`make setup` installs it)"
    if not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome")) and not os.environ.get("BROWSER_PATH"):
        return "no Chromium on PATH (`make browser` installs the Debian package; or set BROWSER_PATH)"
    return None


_PLOT_UID = re.compile(r'id="defs-([0-9a-f]+)"')
_TRACE_UID = re.compile(r'(class="trace [^"]*? trace)([0-9a-f]+)"')


def stable_svg(svg: str, name: str) -> str:
    """The SVG with plotly's random per-draw ids (the plot's, on its defs, clip paths and legend; each trace's, in its
    class) replaced by ones derived from the file's name: the same figure drawn again is the same bytes, so a rebuild
    commits only the figures that changed."""
    def derived(key: str, n: int) -> str:
        return hashlib.sha256(f"{name}:{key}".encode()).hexdigest()[:n]

    found = _PLOT_UID.search(svg)
    if found:
        svg = re.sub(rf"(defs-|clip|legend){found.group(1)}", rf"\g<1>{derived('plot', len(found.group(1)))}", svg)
    count = itertools.count()
    return _TRACE_UID.sub(lambda m: f'{m.group(1)}{derived(f"trace{next(count)}", len(m.group(2)))}"', svg)


def write_svgs(figures: dict[Path, go.Figure], width: int = 1000) -> list[Path]:
    """Draw every figure as SVG (`write_static`)."""
    return write_static(figures, "svg", width)


def write_static(figures: dict[Path, go.Figure], format: str, width: int = 1000, height: int | None = None) -> list[Path]:
    """Draw every figure in one kaleido session (one Chromium start for all of them: a start costs seconds); each
    file is written beside its target and renamed onto it, so an interrupted export leaves the previous copy, not half
    of one."""
    problem = static_export_problem()
    if problem:
        raise RuntimeError(f"cannot draw static figures: {problem}")
    targets = [Path(p) for p in figures]
    tmps = [t.with_name(f".tmp-{os.getpid()}-{secrets.token_hex(4)}-{t.name}") for t in targets]
    for t in targets:
        t.parent.mkdir(parents=True, exist_ok=True)
    try:
        pio.write_images(list(figures.values()), tmps, format=format, width=width, height=height)
        for tmp, target in zip(tmps, targets):
            if format == "svg":
                tmp.write_text(stable_svg(tmp.read_text(encoding="utf-8"), target.name), encoding="utf-8")
            os.replace(tmp, target)
    finally:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
    return targets


def notebook_figures(outputs: Sequence[dict]) -> list[go.Figure]:
    """The plotly figures of an executed notebook's outputs, in the order they were shown."""
    return [go.Figure(o["data"][PLOTLY_MIME]) for o in outputs if PLOTLY_MIME in o.get("data", {})]


def count_figures(outputs: Sequence[dict]) -> int:
    """How many plotly figures a list of executed-notebook outputs holds."""
    return sum(PLOTLY_MIME in o.get("data", {}) for o in outputs)
