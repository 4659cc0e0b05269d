import plotly.express as px
import streamlit as st

import state
from lethe_core.util.figures import style
from lethe_core.results.analysis import chronic_false_positives, trajectory

run = state.current_run()
st.title("Chronic false positives")
state.run_caption(run)
rif_arms = [a for a in run.arms if a.startswith(("clustered", "global"))]
if not rif_arms:
    st.info("This run has no RIF arm.")
    st.stop()
arm = st.selectbox("Arm", rif_arms, index=rif_arms.index(state.default_arm(run)) if state.default_arm(run) in rif_arms else 0)
pq = run.per_query
clusters = state.cluster_filter(run, arm) or sorted(pq.loc[pq["arm"] == arm, "cluster"].unique().tolist())
cluster = st.selectbox("Cluster", clusters)
ctx = state.current_context(run)
table = chronic_false_positives(ctx, run, arm, cluster)
st.caption("Rejected = in the baseline reranker pool of this cluster's queries, not in the top-10, not relevant. "
           "Displaced = a relevant turn sat below the pool cut in that query. Ranks are first-stage ranks in the union "
           "without and with the arm's final suppression.")
if table.empty:
    st.info("No rejected entries for this cluster.")
    st.stop()
st.dataframe(table.drop(columns=["queries"]), hide_index=True, width="stretch",
             column_config={"suppression": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="%.3f")})
fig = px.scatter(table, x="rank before", y="rank after", size="rejected", color="suppression", hover_data=["doc_id", "text"],
                 color_continuous_scale="Reds", range_color=(0, 1))
style(fig, "Rank in the union before and after RIF", "first-stage rank without RIF (0-based)", "first-stage rank with the arm's suppression")
fig.add_shape(type="line", x0=0, y0=0, x1=60, y1=60, line=dict(dash="dot", color="grey"))
st.plotly_chart(fig, width="stretch")
traj = trajectory(run, arm, cluster, table["doc_id"].head(8).tolist())
if len(traj):
    st.plotly_chart(style(px.line(traj, x="step", y="value", color="doc_id", markers=True), "Suppression trajectory during burn-in",
                          "burn-in step", "suppression s (0–1)"), width="stretch")
doc = st.selectbox("Queries this entry was rejected for", table["doc_id"].tolist())
texts = {q.id: q.text for q in ctx.dataset.queries}
st.write([texts[q] for q in table.set_index("doc_id").loc[doc, "queries"]])
