import plotly.express as px
import streamlit as st

import state
from lethe_core.util.figures import style
from lethe_core.results.analysis import saturation, snapshot_steps, suppression_matrix
from lethe_core.results.runs import regenerate_command

run = state.current_run()
st.title("Suppression heatmap")
state.run_caption(run)
rif_arms = [a for a in run.arms if a.startswith(("clustered", "global"))]
if run.snapshots.empty or not rif_arms:
    st.info("This run saved no suppression snapshots (it has no RIF arm). Make a run with them with "
            f"`{regenerate_command({**run.config, 'arms': None})}`.")
    st.stop()
arm = st.selectbox("Arm", rif_arms, index=rif_arms.index(state.default_arm(run)) if state.default_arm(run) in rif_arms else 0)
steps = snapshot_steps(run, arm)
step = st.select_slider("Step", options=steps, value=steps[-1])
top = st.slider("Entries shown", 10, 60, 25, step=5)
clusters = state.cluster_filter(run, arm)
matrix = suppression_matrix(run, arm, step, top, clusters or None)
if matrix.empty:
    st.info("No suppression at this step for the selected clusters.")
else:
    ctx = state.current_context(run)
    corpus = ctx.dataset.corpus
    hover = [[corpus[corpus.index[d]].text[:120] for d in matrix.columns] for _ in matrix.index]
    fig = px.imshow(matrix.to_numpy(), x=[d.split(":", 1)[-1] if ":" in d else d for d in matrix.columns],
                    y=[f"cluster {c}" for c in matrix.index], color_continuous_scale="Reds", zmin=0, zmax=float(matrix.to_numpy().max()), aspect="auto",
                    labels=dict(color="suppression"))
    style(fig, "Suppression per cluster and entry", "entry (turn id)", "query cluster", height=120 + 18 * len(matrix.index))
    fig.update_traces(customdata=hover, hovertemplate="%{y} · %{x}<br>s = %{z:.3f}<br>%{customdata}<extra></extra>")
    st.plotly_chart(fig, width="stretch")
    st.caption("One strong rejection moves an entry by more than the whole RRF range of a union (0.011–0.033), "
               "so any visible cell acts as a block for that cluster.")

ctx = state.current_context(run)
sat = saturation(run, ctx.n_entries)
fig = style(px.line(sat, x="step", y="share_of_corpus", color="arm", line_dash="split", markers=True),
            "Saturation: share of the corpus suppressed in at least one cluster", "burn-in step", "share of the corpus (%)")
fig.update_yaxes(tickformat=".0%")
st.plotly_chart(fig, width="stretch")
