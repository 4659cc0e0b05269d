"""lethe-lab dashboard: `lethe-lab dashboard` (or `streamlit run dashboard/app.py`).

Pages only read results and cached pools through lethe_core; nothing here runs a model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `state` beside this file, for every page

import state  # noqa: E402

st.set_page_config(page_title="lethe-lab", page_icon=":material/psychology:", layout="wide")

PAGES = [
    st.Page("pages/overview.py", title="Overview", icon=":material/insights:", default=True),
    st.Page("pages/clusters.py", title="Query clusters", icon=":material/scatter_plot:"),
    st.Page("pages/suppression.py", title="Suppression heatmap", icon=":material/grid_on:"),
    st.Page("pages/chronic.py", title="Chronic false positives", icon=":material/repeat:"),
    st.Page("pages/behaviour.py", title="Behaviour decomposition", icon=":material/stacked_bar_chart:"),
    st.Page("pages/inspector.py", title="Query inspector", icon=":material/search:"),
    st.Page("pages/whatif.py", title="What-if replay", icon=":material/tune:"),
]

nav = st.navigation(PAGES)
state.sidebar()
nav.run()
