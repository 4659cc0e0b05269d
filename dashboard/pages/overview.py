import plotly.graph_objects as go
import streamlit as st

import state
from lethe_core.analysis import headline

run = state.current_run()
st.title("Overview")
state.run_caption(run)

table = headline(run).astype({"p": float, "p (Holm)": float, "Δ vs control": float, "p vs control": float})
st.subheader("Headline table (paper seed)")
st.dataframe(
    table.style.format({c: "{:.4f}" for c in ["NDCG@10", "NDCG lo", "NDCG hi", "seed sd", "Δ NDCG", "Δ lo", "Δ hi", "Recall@30",
                                              "Δ Recall@30", "Δ vs control"]} | {"p": "{:.4f}", "p (Holm)": "{:.4f}", "p vs control": "{:.4f}"},
                       na_rep="–"),
    hide_index=True, width="stretch",
)

st.subheader("Paired Δ NDCG@10 vs the baseline (95% bootstrap CI)")
t = table[table["arm"] != "baseline"].iloc[::-1]
colors = ["#2a9d8f" if lo > 0 else "#e76f51" if hi < 0 else "#8d99ae" for lo, hi in zip(t["Δ lo"], t["Δ hi"])]
fig = go.Figure(go.Scatter(
    x=t["Δ NDCG"], y=t["arm"], mode="markers", marker=dict(size=10, color=colors),
    error_x=dict(type="data", symmetric=False, array=t["Δ hi"] - t["Δ NDCG"], arrayminus=t["Δ NDCG"] - t["Δ lo"]),
    hovertemplate="%{y}: Δ %{x:+.4f}<extra></extra>",
))
control = table.loc[table["arm"] == "control", "Δ NDCG"]
fig.add_vline(x=0, line_dash="dash", line_color="black", annotation_text="baseline", annotation_position="bottom right")
if len(control):
    fig.add_vline(x=float(control.iloc[0]), line_dash="dot", line_color="#264653", annotation_text="control (rerank the union)", annotation_position="top left")
fig.update_layout(height=80 + 32 * len(t), margin=dict(l=10, r=10, t=30, b=10), xaxis_title="Δ NDCG@10")
st.plotly_chart(fig, width="stretch")
st.caption("Green: CI above zero; red: below; grey: crosses zero. The dotted line is the control arm, "
           "which reranks the whole union without RIF: an RIF arm left of it does not pay for itself.")

with st.expander("Run configuration"):
    st.json(run.config)
