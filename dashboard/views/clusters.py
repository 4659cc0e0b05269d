import os

import plotly.express as px
import streamlit as st

import state
from lethe_core.results.analysis import cluster_table, rif_arms, seed_rows
from lethe_core.results.runs import regenerate_command
from lethe_core.util.figures import style

DELTA_SCALE = "RdBu"  # diverging: red where the arm loses, blue where it helps, white at zero


@st.cache_data(show_spinner=False, max_entries=16)
def _table(path: str, mtime: float, arm: str, seed: int, _run):
    return cluster_table(_run, arm, seed)


run = state.current_run()
st.title("Query clusters")
state.run_caption(run)
seed = state.current_seed(run)
rif = rif_arms(run)
arms = [a for a in rif if a.startswith("clustered")] + [a for a in rif if not a.startswith("clustered")] or run.arms
default = state.default_arm(run)
arm = st.selectbox("Compare arm", arms, index=arms.index(default) if default in arms else 0)
table = _table(str(run.path), os.path.getmtime(run.path / "summary.json"), arm, seed, run)
split = state.shown_split(run)
if split:
    table = table[table["split"] == split].reset_index(drop=True)
bound = max(float(table["delta"].abs().max()), 1e-9)  # one symmetric colour range for map and bars, matched to the means
by_cluster = table.set_index("cluster")

qmap = run.query_map
if qmap is None:
    st.info("No query map in this run (the paper protocol computes it). Make one with "
            f"`{regenerate_command({**run.config, 'protocol': 'paper'})}`.")
else:
    ctx = state.current_context(run)
    texts = {q.id: q.text for q in ctx.dataset.queries}
    rows = seed_rows(run, seed)
    mine = rows[(rows["arm"] == arm) & ((rows["split"] == split) if split else True)].set_index("query_id")["cluster"].astype(int)
    m = qmap.drop(columns="cluster").merge(mine.rename("cluster"), left_on="query_id", right_index=True)
    m = m.assign(query=m["query_id"].map(texts), delta=m["cluster"].map(by_cluster["delta"]), n=m["cluster"].map(by_cluster["queries"]))
    find = st.text_input("Highlight queries containing", placeholder="a word or a query id", help="Case-insensitive; matches are ringed in black")
    fig = px.scatter(m, x="x", y="y", color="delta", color_continuous_scale=DELTA_SCALE, range_color=(-bound, bound),
                     hover_data={"query": True, "query_id": True, "cluster": True, "n": True, "delta": ":+.3f", "x": False, "y": False},
                     labels={"delta": "cluster Δ"})
    style(fig, f"UMAP of the query embeddings, coloured by their {arm} cluster's Δ NDCG@10", "UMAP 1 (unitless)", "UMAP 2 (unitless)", height=560)
    fig.update_traces(marker=dict(size=6, line=dict(width=0.3, color="#666")))
    centres = m.groupby("cluster")[["x", "y"]].median()
    for c, (x, y) in centres.iterrows():
        fig.add_annotation(x=x, y=y, text=str(c), showarrow=False, font=dict(size=11, color="black"), bgcolor="rgba(255,255,255,0.6)")
    if find.strip():
        hit = m[m["query"].str.contains(find.strip(), case=False, regex=False) | (m["query_id"] == find.strip())]
        fig.add_scatter(x=hit["x"], y=hit["y"], mode="markers", name=f"contains “{find.strip()}” ({len(hit)})", hoverinfo="skip",
                        marker=dict(size=13, color="rgba(0,0,0,0)", line=dict(width=2, color="black")))
        fig.update_layout(legend=dict(orientation="h", y=-0.15))
    st.plotly_chart(fig, width="stretch")
    st.caption("Each point is a query; its colour is its cluster's mean Δ NDCG@10 (shared scale with the bars below), the numbers mark "
               "cluster centres. The colour follows the cluster's Δ, not its id, so it stays readable for any K.")

ordered = table.sort_values("delta", kind="stable").assign(label=lambda f: f["cluster"].astype(str))
fig = px.bar(ordered, x="label", y="delta", color="delta", color_continuous_scale=DELTA_SCALE, range_color=(-bound, bound),
             error_y=ordered["delta hi"] - ordered["delta"], error_y_minus=ordered["delta"] - ordered["delta lo"],
             hover_data={"queries": True, "baseline": ":.3f", "ndcg": ":.3f", "label": False}, labels={"delta": "Δ"})
style(fig, f"Δ NDCG@10 per cluster: {arm} − baseline (95% bootstrap CI; n in the hover)", "cluster (sorted by Δ)",
      "Δ NDCG@10 (mean over the cluster's queries)")
fig.add_hline(y=0, line_color="black", line_width=1)
fig.update_xaxes(type="category")
st.plotly_chart(fig, width="stretch")
st.plotly_chart(style(px.bar(ordered, x="label", y="queries"), f"Cluster sizes ({arm})", "cluster (sorted by Δ)", "queries").update_xaxes(type="category"),
                width="stretch")

state.cluster_picker(sorted(table["cluster"].tolist()))
st.dataframe(table, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%+.4f" if c.startswith("delta") else "%.4f")
                            for c in ("baseline", "ndcg", "delta", "delta lo", "delta hi")})
state.csv_download(table, f"{arm}-s{seed}-clusters", run)
