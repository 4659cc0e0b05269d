"""Shared dashboard state: run selection, cluster filter and cached loaders (Streamlit-specific glue)."""

from __future__ import annotations

import os

import streamlit as st

from lethe_core.util.paths import results_dir
from lethe_core.results.runs import ResultsError, Run, list_runs, load_run

HOW_TO = "Produce results with `lethe-lab rif run locomo --protocol paper` (or `make run`), then reload."

# Streamlit deletes a widget's state on any run that does not draw it, so the picked clusters live under
# FILTER_KEY, which no widget owns; the clusters page's widget (WIDGET_KEY) is seeded from it and copies into it.
FILTER_KEY = "cluster_filter"
WIDGET_KEY = "cluster_filter_widget"


@st.cache_data(ttl=30, show_spinner=False)
def _runs(root: str) -> tuple[list[tuple[str, str]], list[str]]:
    runs, problems = list_runs(root)
    runs.sort(key=lambda r: r.summary["protocol"] != "paper")  # stable: newest paper-protocol run first, as the default
    return [(str(r.path), r.label) for r in runs], problems


@st.cache_resource(show_spinner=False)
def get_run(path: str, mtime: float) -> Run:  # mtime in the key: a rerun invalidates the cache
    return load_run(path)


@st.cache_resource(show_spinner="Loading cached pools…")
def get_context(path: str, mtime: float):
    from lethe_core.results.runs import replay_context

    return replay_context(get_run(path, mtime))


def _root() -> str:
    return str(results_dir())  # in the cache key, so another LETHE_HOME is another listing


def sidebar() -> None:
    """The run picker; broken folders are listed here only when some run loads (else the page itself says it, once)."""
    runs, problems = _runs(_root())
    with st.sidebar:
        st.markdown("### lethe-lab")
        if runs:
            labels = {p: label for p, label in runs}
            st.selectbox("Results run", list(labels), format_func=labels.get, key="run_path")
            for p in problems:
                st.warning(p, icon=":material/warning:")


def current_run() -> Run:
    """The selected run, or a clear message and a stop when there is none or it is broken."""
    path = st.session_state.get("run_path")
    if not path:
        runs, problems = _runs(_root())
        if not runs:
            if problems:
                for p in problems:
                    st.error(p, icon=":material/error:")
            else:
                st.info("No RIF results yet. " + HOW_TO, icon=":material/info:")
            st.stop()
        path = runs[0][0]
    try:
        return get_run(path, os.path.getmtime(os.path.join(path, "summary.json")))
    except (ResultsError, OSError) as exc:  # changed on disk since it was listed
        st.error(f"This results folder cannot be read: {exc}", icon=":material/error:")
        st.stop()


def current_context(run: Run):
    try:
        return get_context(str(run.path), os.path.getmtime(run.path / "summary.json"))
    except ResultsError as exc:
        st.error(str(exc), icon=":material/error:")
        st.stop()


def run_caption(run: Run) -> None:
    s = run.summary
    st.caption(f"**{s['dataset']}** · protocol **{s['protocol']}** · reranker **{s['reranker']}** "
               f"(second stage {s['second_stage']}, calibration {'on' if s['calibrated'] else 'off'}) · "
               f"{s['n_queries']:,} queries · seeds {s['seeds']} · burn-in {s['burn_in']} · `{run.run_id}`")
    if str(s["reranker"]).startswith("test:"):
        st.warning("These numbers come from the lexical *test* reranker, a stand-in, not a cross-encoder.", icon=":material/warning:")


def _keep_filter() -> None:
    st.session_state[FILTER_KEY] = list(st.session_state[WIDGET_KEY])


def cluster_picker(clusters: list[int]) -> None:
    """The clusters page's multiselect, showing the persisted pick when the page is drawn again."""
    shown = st.session_state.get(WIDGET_KEY, st.session_state.get(FILTER_KEY, []))
    st.session_state[WIDGET_KEY] = [c for c in shown if c in clusters]  # another run may have other clusters
    st.multiselect("Filter the other pages to clusters", clusters, key=WIDGET_KEY, on_change=_keep_filter)


def cluster_filter(run: Run, arm: str) -> list[int]:
    """The clusters picked on the clusters page that exist for `arm`; says so on the page when there are any."""
    pq = run.per_query
    clusters = set(pq.loc[pq["arm"] == arm, "cluster"].unique().tolist())
    picked = [c for c in st.session_state.get(FILTER_KEY, []) if c in clusters]
    if picked:
        st.caption(f"Filtered to clusters {', '.join(map(str, picked))} (picked on the Query clusters page).")
    return picked


def default_arm(run: Run) -> str:
    arms = run.arms
    return "clustered30-gap" if "clustered30-gap" in arms else next((a for a in arms if a.startswith("clustered")), arms[-1])
