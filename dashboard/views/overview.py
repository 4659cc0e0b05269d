import plotly.graph_objects as go
import streamlit as st

import state
from lethe_core.results.analysis import headline
from lethe_core.util.figures import style

run = state.current_run()
st.title("Overview")
state.run_caption(run)

table = headline(run).astype({"p": float, "p (Holm)": float, "Δ vs control": float, "Δc lo": float, "Δc hi": float, "p vs control": float})
st.subheader("Headline table (paper seed)")
st.dataframe(
    table.drop(columns=["Δc lo", "Δc hi"]).style.format({c: "{:.4f}" for c in ["NDCG@10", "NDCG lo", "NDCG hi", "seed sd", "Δ NDCG", "Δ lo", "Δ hi", "Recall@30",
                                              "Δ Recall@30", "Δ vs control"]} | {"p": "{:.4f}", "p (Holm)": "{:.4f}", "p vs control": "{:.4f}"},
                       na_rep="–"),
    hide_index=True, width="stretch",
)

st.subheader("Paired Δ NDCG@10 (95% bootstrap CI)")


def forest(frame, mid, lo, hi, reference):
    colors = ["#2a9d8f" if a > 0 else "#e76f51" if b < 0 else "#8d99ae" for a, b in zip(frame[lo], frame[hi], strict=True)]
    fig = go.Figure(go.Scatter(
        x=frame[mid], y=frame["arm"], mode="markers", marker=dict(size=10, color=colors),
        error_x=dict(type="data", symmetric=False, array=frame[hi] - frame[mid], arrayminus=frame[mid] - frame[lo]),
        hovertemplate="%{y}: Δ %{x:+.4f}<extra></extra>",
    ))
    fig.add_vline(x=0, line_dash="dash", line_color="black")
    style(fig, f"vs {reference}", f"Δ NDCG@10 vs {reference}", "arm", height=80 + 32 * len(frame))
    return fig.update_layout(margin=dict(l=10, r=10, t=40, b=10))


left, right = st.columns(2)
vs_base = table[table["arm"] != "baseline"].iloc[::-1]
left.plotly_chart(forest(vs_base, "Δ NDCG", "Δ lo", "Δ hi", "baseline"), width="stretch")
vs_ctrl = table[table["arm"].ne("control") & table["Δc lo"].notna()].iloc[::-1]
if len(vs_ctrl):
    right.plotly_chart(forest(vs_ctrl, "Δ vs control", "Δc lo", "Δc hi", "control (rerank the whole union)"), width="stretch")
st.caption("Green: CI above zero; red: below; grey: crosses zero. The control arm reranks the whole union without RIF: "
           "an RIF arm that does not beat it buys nothing a larger reranker pool would not.")

with st.expander("Run configuration"):
    st.json(run.config)
