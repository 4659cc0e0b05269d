import os

import numpy as np
import plotly.express as px
import streamlit as st

import state
from lethe_core.results.analysis import (cluster_table, paper_seed, rif_arms, saturation, snapshot_steps, state_matrix,
                                         suppression_matrix, suppression_states)
from lethe_core.results.runs import regenerate_command
from lethe_core.util.figures import style


@st.cache_resource(show_spinner="Replaying this seed's burn-in from the cached pools…", max_entries=16)
def _states(path: str, mtime: float, arm: str, seed: int, _ctx, _run):
    return suppression_states(_ctx, _run, arm, seed)


@st.cache_data(show_spinner=False, max_entries=16)
def _clusters(path: str, mtime: float, arm: str, seed: int, _run):
    return cluster_table(_run, arm, seed)


run = state.current_run()
st.title("Suppression heatmap")
state.run_caption(run)
seed = state.current_seed(run)
rif = [a for a in rif_arms(run) if snapshot_steps(run, a)]
if run.snapshots.empty or not rif:
    st.info("This run saved no suppression snapshots (it has no RIF arm). Make a run with them with "
            f"`{regenerate_command({**run.config, 'arms': None})}`.")
    st.stop()
default = state.default_arm(run)
c_arm, c_top, c_step = st.columns(3)
arm = c_arm.selectbox("Arm", rif, index=rif.index(default) if default in rif else 0)
path, mtime = str(run.path), os.path.getmtime(run.path / "summary.json")
ctx = state.current_context(run)
split = state.shown_split(run) or "all"
recorded = seed == paper_seed(run)
top = c_top.slider("Entries shown", 10, 60, 25, step=5)
clusters = state.cluster_filter(run, arm)
if recorded:
    steps = snapshot_steps(run, arm)
    step = c_step.select_slider("Step", options=steps, value=steps[-1])
    matrix = suppression_matrix(run, arm, step, top, clusters or None, state.shown_split(run))
else:
    try:
        values = _states(path, mtime, arm, seed, ctx, run).get(split)
    except ValueError as exc:  # a prequential run's other seeds: only the recorded snapshots exist
        st.info(f"{exc}. Pick seed {paper_seed(run)} to see this arm's suppression.", icon=":material/info:")
        st.stop()
    c_step.caption(f"Seed {seed}: its end of burn-in, replayed from the cached pools (snapshots along the way hold seed {paper_seed(run)} only).")
    matrix = state_matrix(values, ctx.dataset.corpus.ids, top, clusters or None) if values is not None else None
if matrix is None or matrix.empty:
    st.info("No suppression at this step for the selected clusters.")
else:
    corpus = ctx.dataset.corpus
    info = _clusters(path, mtime, arm, seed, run)
    info = info[info["split"] == split].set_index("cluster")
    rows = [f"cluster {c} · n={info.at[c, 'queries']} · Δ {info.at[c, 'delta']:+.3f} [{info.at[c, 'delta lo']:+.3f}, {info.at[c, 'delta hi']:+.3f}]"
            if c in info.index else f"cluster {c} · no query" for c in matrix.index]
    hover = [[corpus[corpus.index[d]].text for d in matrix.columns] for _ in matrix.index]
    fig = px.imshow(matrix.to_numpy(), x=list(matrix.columns), y=rows, color_continuous_scale="Reds", zmin=0,
                    zmax=float(matrix.to_numpy().max()), aspect="auto", labels=dict(color="suppression"))
    style(fig, "Suppression per cluster and entry", "entry (conversation:session:turn)", "query cluster (n queries · Δ NDCG@10 [95% CI])",
          height=160 + 22 * len(matrix.index))
    fig.update_traces(customdata=hover, hovertemplate="%{y}<br>%{x}: s = %{z:.3f}<br>%{customdata}<extra></extra>")
    fig.update_xaxes(type="category", tickangle=-60)
    st.plotly_chart(fig, width="stretch")
    p, alpha = ctx.pools, run.config.get("alpha", 0.3)
    spread = float(np.median([np.ptp(p.rrf[p.rows(i)]) for i in range(len(p.query_ids))]))
    st.caption(f"The penalty is alpha × s (alpha = {alpha}); a union's RRF scores span {spread:.3f} at the median, so a cell above "
               f"{spread / alpha:.3f} can carry an entry from the top of its union to the bottom. Each row names the cluster's "
               "query count and its Δ NDCG@10.")
    state.csv_download(matrix.reset_index(), f"{arm}-s{seed}-suppression", run)

sat = saturation(run, ctx.n_entries)
fig = style(px.line(sat, x="step", y="share_of_corpus", color="arm", line_dash="split", markers=True),
            f"Saturation: share of the corpus suppressed in at least one cluster (seed {paper_seed(run)})", "burn-in step",
            "share of the corpus (%)")
fig.update_yaxes(tickformat=".0%")
st.plotly_chart(fig, width="stretch")
state.csv_download(sat, "saturation", run)
