"""lethe-lab dashboard: `lethe-lab dashboard` (or `streamlit run dashboard/app.py`).

Pages only read results and cached pools through lethe_core; nothing here runs a model. They live in
`views/`, not `pages/`: Streamlit treats a `pages/` folder beside the entry script as a legacy multipage
app, and a deep link to one of them on a fresh server then ran that file alone, without this frame.
A URL names the page (its path) and the run and seed (`?run=&seed=`, state.py), so it reopens the same view.
The favicon is a local file: a `:material/...` page icon makes the browser fetch it from a font CDN (the
sidebar's material icons come from the font Streamlit ships). `.streamlit/config.toml` beside this file hides
the developer toolbar (Deploy) wherever the server is started from.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `state` beside this file, for every page

import state  # noqa: E402

from lethe_core.results.runs import ResultsError  # noqa: E402

st.set_page_config(page_title="lethe-lab", page_icon=str(Path(__file__).resolve().parent / "static" / "favicon.png"), layout="wide")

PAGES = [
    st.Page("views/overview.py", title="Overview", icon=":material/insights:", default=True),
    st.Page("views/clusters.py", title="Query clusters", icon=":material/scatter_plot:"),
    st.Page("views/suppression.py", title="Suppression heatmap", icon=":material/grid_on:"),
    st.Page("views/chronic.py", title="Chronic false positives", icon=":material/repeat:"),
    st.Page("views/behaviour.py", title="Behaviour decomposition", icon=":material/stacked_bar_chart:"),
    st.Page("views/inspector.py", title="Query inspector", icon=":material/search:"),
    st.Page("views/whatif.py", title="What-if replay", icon=":material/tune:"),
]

nav = st.navigation(PAGES)
state.sidebar()
try:
    nav.run()
except ResultsError as exc:  # a file whose body breaks only when a page reads it (load_run checked its footer)
    st.error(str(exc), icon=":material/error:")
