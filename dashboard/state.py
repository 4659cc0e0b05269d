"""Shared dashboard state: the run and seed shown (kept in the URL), the cluster filter of each run, cached loaders, CSV
export and the replay gate (Streamlit-specific glue; labels, grouping and verdicts come from lethe_core.results.catalog).

The selected run and seed live under keys no widget owns (RUN_KEY, SEED_KEY) and in the URL (`?run=<folder>&seed=<n>`):
Streamlit drops a widget's state on a run that does not draw it and re-creates a widget whose options change, so a run
written while the page is open would otherwise become the selection without the user asking.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, TypeVar

import pandas as pd
import streamlit as st

from lethe_core.datasets.splits import HELDOUT
from lethe_core.results.catalog import PROTOCOL_NAMES, RunEntry, catalog, default_entry, leaderboard, teacher
from lethe_core.results.runs import ResultsError, Run, list_runs, load_run, logit_reading
from lethe_core.util.paths import results_dir

HOW_TO = "Produce results with `lethe-lab rif run locomo --protocol paper` (or `make run`), then reload."

RUN_PARAM, SEED_PARAM = "run", "seed"
PAGE_PARAMS = ("cluster", "query")  # the analysis pages' URL keys: another run's ids, so dropped when the run changes
RUN_KEY, SEED_KEY, SEEN_KEY = "selected_run", "selected_seed", "seen_runs"
GROUP_WIDGET, RUN_WIDGET, SEED_WIDGET = "run_group_widget", "run_widget", "seed_widget"
# The picked clusters of each run ({run id: [cluster]}) live under FILTER_KEY, which no widget owns; the clusters page's
# widget (WIDGET_KEY) is seeded from the current run's entry and copies into it. Keyed by run: a held-out run's cluster
# ids mean something else than a paper run's.
FILTER_KEY = "cluster_filter"
WIDGET_KEY = "cluster_filter_widget"
REPLAYS_AT_ONCE = 1  # across every session of the server: a replay holds a core for seconds
REPLAY_WAIT_S = 120.0

T = TypeVar("T")


@st.cache_data(ttl=30, show_spinner=False)
def _catalog(root: str) -> tuple[list[RunEntry], list[str], pd.DataFrame]:
    runs, problems = list_runs(root)
    entries = catalog(runs)
    return entries, problems, leaderboard(runs, entries)


@st.cache_resource(show_spinner=False)
def get_run(path: str, mtime: float) -> Run:  # mtime in the key: a rerun invalidates the cache
    return load_run(path)


@st.cache_resource(show_spinner="Loading cached pools…")
def get_context(path: str, mtime: float):
    from lethe_core.results.runs import replay_context

    return replay_context(get_run(path, mtime))


def _root() -> str:
    return str(results_dir())  # in the cache key, so another LETHE_HOME is another listing


def runs_leaderboard() -> pd.DataFrame:
    """The cross-run leaderboard of the listing the picker shows."""
    return _catalog(_root())[2]


def _set_param(key: str, value: str) -> None:
    if st.query_params.get(key) != value:  # an unchanged URL sends nothing to the browser
        st.query_params[key] = value


def _select(run_id: str) -> None:
    """Make `run_id` the shown run; the analysis pages' URL keys name the old run's clusters and queries, so they go."""
    if st.session_state.get(RUN_KEY) not in (None, run_id):
        for key in PAGE_PARAMS:
            st.query_params.pop(key, None)
    st.session_state[RUN_KEY] = run_id
    st.session_state.setdefault(SEEN_KEY, set()).add(run_id)
    _set_param(RUN_PARAM, run_id)


def _pick_run() -> None:
    _select(st.session_state[RUN_WIDGET])


def _pick_group(entries: list[RunEntry]) -> None:
    group = st.session_state[GROUP_WIDGET]
    _select(next(e.run_id for e in entries if e.group == group))  # catalog order: the group's newest run


def _pick_seed() -> None:
    st.session_state[SEED_KEY] = st.session_state[SEED_WIDGET]
    _set_param(SEED_PARAM, str(st.session_state[SEED_KEY]))


def _resolve_run(entries: list[RunEntry]) -> str:
    """The URL's run when it names one on disk, else the session's, else the default; a link to a missing run says so."""
    ids = {e.run_id for e in entries}
    asked, current = st.query_params.get(RUN_PARAM), st.session_state.get(RUN_KEY)
    chosen = asked if asked in ids else current if current in ids else default_entry(entries).run_id
    if asked and asked not in ids:
        st.warning(f"The link's run `{asked}` is not among these results; showing another.", icon=":material/warning:")
    elif current and current not in ids:
        st.warning(f"The run `{current}` is no longer among these results; showing another.", icon=":material/warning:")
    st.session_state.setdefault(SEEN_KEY, set(ids))  # what existed when this session began is not news
    _select(chosen)
    return chosen


def _resolve_seed(seeds: tuple[int, ...]) -> int:
    asked, current = st.query_params.get(SEED_PARAM), st.session_state.get(SEED_KEY)
    seed = int(asked) if asked and asked.lstrip("-").isdigit() and int(asked) in seeds else current if current in seeds else seeds[0]
    st.session_state[SEED_KEY] = seed
    _set_param(SEED_PARAM, str(seed))
    return seed


def sidebar() -> None:
    """Run picker (dataset · protocol, then the run), seed selector and a notice for runs written since the session began;
    broken folders are listed here only when some run loads (else the page itself says it, once)."""
    entries, problems, _ = _catalog(_root())
    with st.sidebar:
        st.markdown("### lethe-lab")
        if not entries:
            return
        by_id = {e.run_id: e for e in entries}
        chosen = by_id[_resolve_run(entries)]
        groups = list(dict.fromkeys(e.group for e in entries))
        sizes = {g: sum(e.group == g for e in entries) for g in groups}
        st.session_state[GROUP_WIDGET] = chosen.group
        st.selectbox("Dataset · protocol", groups, key=GROUP_WIDGET, on_change=_pick_group, args=(entries,),
                     format_func=lambda g: f"{g} ({sizes[g]} run{'s' if sizes[g] > 1 else ''})")
        st.session_state[RUN_WIDGET] = chosen.run_id
        st.selectbox("Results run", [e.run_id for e in entries if e.group == chosen.group], key=RUN_WIDGET, on_change=_pick_run,
                     format_func=lambda r: by_id[r].short_label, help="Teacher (reranker and identity) · logit reading · seeds · "
                     "finished · what differs from the group's other runs. The URL keeps the choice: share it to reopen this run.")
        st.caption(f"{chosen.short_label}  \n`{chosen.run_id}`")  # in full: the picker cuts long labels
        st.session_state[SEED_WIDGET] = _resolve_seed(chosen.seeds)
        st.selectbox("Seed", list(chosen.seeds), key=SEED_WIDGET, on_change=_pick_seed, disabled=len(chosen.seeds) == 1,
                     help="The seed the per-query pages read. The overview's statistics are the summary's: each query's metric averaged over the seeds.")
        fresh = [e for e in entries if e.run_id not in st.session_state[SEEN_KEY]]
        if fresh:
            st.info(f"New run{'s' if len(fresh) > 1 else ''} on disk since this page opened: "
                    + "; ".join(e.label for e in fresh) + ". Still showing the run picked above; pick it to switch.")
        for p in problems:
            st.warning(p, icon=":material/warning:")


def current_run() -> Run:
    """The selected run, or a clear message and a stop when there is none or it is broken."""
    entries, problems, _ = _catalog(_root())
    if not entries:
        if problems:
            for p in problems:
                st.error(p, icon=":material/error:")
        else:
            st.info("No RIF results yet. " + HOW_TO, icon=":material/info:")
        st.stop()
    run_id = st.session_state.get(RUN_KEY) or default_entry(entries).run_id
    path = os.path.join(_root(), run_id)
    try:
        return get_run(path, os.path.getmtime(os.path.join(path, "summary.json")))
    except (ResultsError, OSError) as exc:  # changed on disk since it was listed
        st.error(f"This results folder cannot be read: {exc}", icon=":material/error:")
        st.stop()


def current_seed(run: Run | None = None) -> int:
    """The seed picked in the sidebar (`?seed=`), one of the run's; its first seed by default."""
    seeds = [int(s) for s in (run or current_run()).summary["seeds"]]
    seed = st.session_state.get(SEED_KEY)
    return seed if seed in seeds else seeds[0]


def current_context(run: Run):
    try:
        return get_context(str(run.path), os.path.getmtime(run.path / "summary.json"))
    except ResultsError as exc:
        st.error(str(exc), icon=":material/error:")
        st.stop()


def shown_split(run: Run) -> str | None:
    """On a held-out run, the split (direction) whose clusters a one-split view shows: the first in the results; else None."""
    if run.summary["protocol"] != HELDOUT:
        return None
    splits = run.per_query["split"]
    return str(splits.iloc[0]) if len(splits) else None


def run_caption(run: Run) -> None:
    s = run.summary
    seed = current_seed(run)
    st.caption(f"**{s['dataset']}** · {PROTOCOL_NAMES.get(s['protocol'], s['protocol'])} protocol · teacher **{teacher(s)}**, "
               f"{logit_reading(s)} logits · second stage {s['second_stage']} · {s['n_queries']:,} queries · "
               f"seed **{seed}** of {len(s['seeds'])} · burn-in {s['burn_in']} · `{run.run_id}`")
    split = shown_split(run)
    if split:
        others = sorted(set(run.per_query["split"].unique()) - {split})
        st.caption(f"Held-out run: each direction ({', '.join([split, *others])}) fits its own clusters, so cluster ids "
                   f"differ between them; one-split views show **{split}**.")
    if str(s["reranker"]).startswith("test:"):
        st.warning("These numbers come from the lexical *test* reranker, a stand-in, not a cross-encoder.", icon=":material/warning:")


def _filters() -> dict[str, list[int]]:
    return st.session_state.setdefault(FILTER_KEY, {})


def _keep_filter() -> None:
    _filters()[st.session_state[RUN_KEY]] = list(st.session_state[WIDGET_KEY])


def cluster_picker(clusters: list[int]) -> None:
    """The clusters page's multiselect, showing the current run's kept pick when the page is drawn again."""
    kept = _filters().get(st.session_state.get(RUN_KEY), [])
    st.session_state[WIDGET_KEY] = [c for c in kept if c in clusters]
    st.multiselect("Filter the other pages to clusters", clusters, key=WIDGET_KEY, on_change=_keep_filter)


def cluster_filter(run: Run, arm: str) -> list[int]:
    """The clusters picked for this run on the clusters page that exist for `arm`; says so on the page when there are any."""
    pq = run.per_query
    clusters = set(pq.loc[pq["arm"] == arm, "cluster"].unique().tolist())
    picked = [c for c in _filters().get(run.run_id, []) if c in clusters]
    if picked:
        split = shown_split(run)
        where = f"; clusters of split {split}" if split else ""
        st.caption(f"Filtered to clusters {', '.join(map(str, picked))} (picked on the Query clusters page{where}).")
    return picked


def default_arm(run: Run) -> str:
    arms = run.arms
    return "clustered30-gap" if "clustered30-gap" in arms else next((a for a in arms if a.startswith("clustered")), arms[-1])


PLOTLY_CONFIG = {"displayModeBar": "hover", "displaylogo": False}


def plot(fig, **kwargs) -> None:
    """A plotly chart whose title sits just above the plot area, below the mode bar (which shows on hover only), so the
    bar never covers the title however narrow the column."""
    top = max((fig.layout.margin.t or 0), 70)
    fig.update_layout(title=dict(yref="paper", y=1, yanchor="bottom", pad=dict(b=12)), margin=dict(t=top))
    st.plotly_chart(fig, width="stretch", config=PLOTLY_CONFIG, **kwargs)


def csv_download(frame: pd.DataFrame, name: str, run: Run | None = None) -> None:
    """A button that saves `frame` as `<run id>-<name>.csv`, without rerunning the page."""
    stem = f"{run.run_id}-{name}" if run is not None else name
    st.download_button("Download CSV", frame.to_csv(index=False).encode("utf-8"), file_name=f"{stem}.csv", mime="text/csv",
                       key=f"csv-{name}", on_click="ignore")


@st.cache_resource(show_spinner=False)
def _replay_gate() -> threading.BoundedSemaphore:
    """One gate per server process (cache_resource is shared by every session)."""
    return threading.BoundedSemaphore(REPLAYS_AT_ONCE)


def gated_replay(replay: Callable[[], T]) -> T | None:
    """Run `replay` once a slot is free, so one session stepping through settings cannot starve the others' page loads;
    says that it waits, and gives up (None, with a warning) after REPLAY_WAIT_S."""
    gate = _replay_gate()
    if not gate.acquire(blocking=False):
        note = st.empty()
        note.info("Another session is replaying; this replay starts when that one ends…")
        acquired = gate.acquire(timeout=REPLAY_WAIT_S)
        note.empty()
        if not acquired:
            st.warning(f"Still busy after {REPLAY_WAIT_S:.0f} s; press Run again later.")
            return None
    try:
        return replay()
    finally:
        gate.release()
