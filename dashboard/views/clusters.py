import plotly.express as px
import streamlit as st

import state
from lethe_core.util.figures import style
from lethe_core.results.analysis import cluster_table
from lethe_core.results.runs import regenerate_command

run = state.current_run()
st.title("Query clusters")
state.run_caption(run)
qmap = run.query_map
if qmap is None:
    st.info("No query map in this run (the paper protocol computes it). Make one with "
            f"`{regenerate_command({**run.config, 'protocol': 'paper'})}`.")
    st.stop()

arm = st.selectbox("Compare arm", [a for a in run.arms if a.startswith("clustered")] or run.arms,
                   index=0 if "clustered30-gap" not in run.arms else [a for a in run.arms if a.startswith("clustered")].index("clustered30-gap"))
table = cluster_table(run, arm)
ctx = state.current_context(run)
texts = {q.id: q.text for q in ctx.dataset.queries}
m = qmap.assign(cluster=qmap["cluster"].astype(str), query=qmap["query_id"].map(texts))
order = sorted(m["cluster"].unique(), key=int)
fig = style(px.scatter(m, x="x", y="y", color="cluster", hover_data={"query": True, "x": False, "y": False},
                       category_orders={"cluster": order}),
            "UMAP of the query embeddings, coloured by K=30 cluster", "UMAP 1 (unitless)", "UMAP 2 (unitless)", height=560)
fig.update_traces(marker=dict(size=5))
st.plotly_chart(fig, width="stretch")

col1, col2 = st.columns(2)
with col1:
    st.plotly_chart(style(px.bar(table, x="cluster", y="queries"), f"Cluster sizes ({arm})", "cluster", "queries"), width="stretch")
with col2:
    fig = px.bar(table, x="cluster", y="delta", color="delta", color_continuous_scale="RdYlGn", color_continuous_midpoint=0,
                 )
    style(fig, f"Δ NDCG@10 per cluster: {arm} − baseline", "cluster", "Δ NDCG@10 (mean over the cluster's queries)")
    st.plotly_chart(fig, width="stretch")

state.cluster_picker(sorted(table["cluster"].tolist()))
st.dataframe(table, hide_index=True, width="stretch")
