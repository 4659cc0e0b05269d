"""One small plotly style shared by the notebooks and the dashboard: titles, axis labels with units, CIs.

`setup_notebook()` picks a renderer that stores each figure as plotly JSON (so tests can count
figures in an executed notebook) and as HTML with plotly.js embedded once and no CDN script
(so an exported HTML page stays interactive offline; lethe_core/report/notebooks.py).
"""

from __future__ import annotations

import re
from typing import Sequence

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.base_renderers import NotebookRenderer

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


def count_figures(outputs: Sequence[dict]) -> int:
    """How many plotly figures a list of executed-notebook outputs holds."""
    return sum(PLOTLY_MIME in o.get("data", {}) for o in outputs)
