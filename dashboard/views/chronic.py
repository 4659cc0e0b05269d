import os

import pandas as pd
import plotly.express as px
import streamlit as st

import state
from lethe_core.results.analysis import (chronic_entries, cluster_table, harm_ranking, paper_seed, pool_audit, rif_arms,
                                         suppression_states, trajectory)
from lethe_core.util.figures import style

CLUSTER_KEY = "chronic_cluster"
LINKED = "chronic_linked_cluster"  # the `cluster` URL value last applied, so a new link (not our own write) moves the picker
APPLIED = "chronic_applied_rows"  # the table selection last applied, so an unchanged selection does not override the picker
TEXT = 90  # characters of an entry's text shown in a table cell; the full text is one click away


@st.cache_resource(show_spinner="Replaying this seed's burn-in from the cached pools…", max_entries=16)
def _states(path: str, mtime: float, arm: str, seed: int, _ctx, _run):
    return suppression_states(_ctx, _run, arm, seed)


@st.cache_data(show_spinner="Auditing the reranker pools…", max_entries=16)
def _audit(path: str, mtime: float, arm: str, seed: int, _ctx, _run):
    return pool_audit(_ctx, _run, arm, seed, _states(path, mtime, arm, seed, _ctx, _run))


@st.cache_data(show_spinner=False, max_entries=16)
def _deltas(path: str, mtime: float, arm: str, seed: int, _run):
    return cluster_table(_run, arm, seed)


def _short(text: str, n: int = TEXT) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


run = state.current_run()
st.title("Chronic false positives")
state.run_caption(run)
seed = state.current_seed(run)
rif = rif_arms(run)
if not rif:
    st.info("This run has no RIF arm.")
    st.stop()
default = state.default_arm(run)
arm = st.columns([1, 2])[0].selectbox("Arm", rif, index=rif.index(default) if default in rif else 0)
ctx = state.current_context(run)
path, mtime = str(run.path), os.path.getmtime(run.path / "summary.json")
try:
    queries, rejections = _audit(path, mtime, arm, seed, ctx, run)
except ValueError as exc:  # a prequential run's other seeds: no state to read
    st.info(f"{exc}. Pick seed {paper_seed(run)} to see this arm's chronic false positives.", icon=":material/info:")
    st.stop()
P = run.config["pipeline"]["pool_size"]
harm = harm_ranking(queries, rejections).merge(_deltas(path, mtime, arm, seed, run)[["split", "cluster", "delta", "delta lo", "delta hi"]],
                                               on=["split", "cluster"], how="left")
picked = state.cluster_filter(run, arm)
if picked:  # the filter names clusters of the split one-split views show (held-out runs)
    shown = state.shown_split(run)
    harm = harm[harm["cluster"].isin(picked) & ((harm["split"] == shown) if shown else True)].reset_index(drop=True)
multi = run.per_query["split"].nunique() > 1
keys = [f"{s}:{c}" if multi else str(c) for s, c in zip(harm["split"], harm["cluster"])]
if not keys:
    st.info("No query of this arm in the picked clusters.", icon=":material/info:")
    st.stop()

st.subheader("Clusters ranked by harm")
st.caption(f"**Displaced**: queries whose relevant turn sat below the baseline's {P}-entry pool cut while entries that were neither "
           "relevant nor in the reranker's top 10 held pool slots; **harm** = displaced / the cluster's queries; **still displaced**: "
           f"a relevant turn is outside {arm}'s pool too. Click a row to open its cluster below."
           + (" Held-out runs fit clusters per direction: a cluster is named `split:id`." if multi else ""))
corpus = ctx.dataset.corpus
view = harm.assign(
    **{"95% CI": [f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in zip(harm["delta lo"], harm["delta hi"])],
       "rejected for": [f"{r} of {n}" if pd.notna(r) else "" for r, n in zip(harm["rejected for"], harm["queries"])],
       "worst entry text": [_short(corpus[corpus.index[d]].text) if isinstance(d, str) else "" for d in harm["worst entry"]]})
view = view[(["split"] if multi else []) + ["cluster", "queries", "displaced", "harm", "worst entry", "rejected for", "displaced with it",
                                           "worst entry text", "still displaced", "delta", "95% CI"]]
event = st.dataframe(view, hide_index=True, width="stretch", height=min(420, 38 + 35 * len(view)), on_select="rerun",
                     selection_mode="single-row", key=f"chronic_harm_{arm}",
                     column_config={"harm": st.column_config.ProgressColumn("harm", min_value=0.0, max_value=1.0, format="percent",
                                                                            help="Displaced queries / the cluster's queries"),
                                    "delta": st.column_config.NumberColumn("Δ NDCG@10", format="%+.3f", help=f"{arm} − baseline over the cluster's queries"),
                                    "worst entry": st.column_config.TextColumn(help="The entry present in the most displaced queries"),
                                    "rejected for": st.column_config.TextColumn(help="Queries of the cluster whose pool it held without being useful"),
                                    "worst entry text": st.column_config.TextColumn(help="Cut with …; the full text is in the entry list below")})
state.csv_download(harm, f"{arm}-s{seed}-harm", run)
rows = list(event.selection.rows)
if rows and rows != st.session_state.get(APPLIED):
    st.session_state[CLUSTER_KEY] = keys[rows[0]]
st.session_state[APPLIED] = rows
linked = st.query_params.get("cluster")
if linked in keys and linked != st.session_state.get(LINKED):
    st.session_state[CLUSTER_KEY] = linked  # a link (or a typed URL) asks for this cluster
if st.session_state.get(CLUSTER_KEY) not in keys:
    st.session_state[CLUSTER_KEY] = keys[0]  # the most harmed cluster first
key = st.selectbox("Cluster", keys, key=CLUSTER_KEY, help="Click a row of the table above, or pick it here")
st.query_params["cluster"] = key
st.session_state[LINKED] = key
row = harm.iloc[keys.index(key)]
split, cluster = row["split"], int(row["cluster"])

entries = chronic_entries(queries, rejections, split, cluster, corpus)
st.subheader(f"Cluster {key}: {row['displaced']} of {row['queries']} queries displaced ({row['harm']:.0%})")
st.markdown(f"Δ NDCG@10 {row['delta']:+.3f} (95% CI [{row['delta lo']:+.3f}, {row['delta hi']:+.3f}], n = {row['queries']}); "
            f"{row['still displaced']} of its queries still have a relevant turn outside {arm}'s pool.")
if entries.empty:
    st.info("No rejected entries for this cluster.")
    st.stop()
top = entries.iloc[0]
st.container(border=True).markdown(f":material/repeat: Worst entry **{top['doc_id']}** held a pool slot in **{top['rejected']} of {top['of']}** of the cluster's queries, "
        f"{top['displaced']} of them displaced; {arm} moved it from union rank {top['rank before']:.1f} to {top['rank after']:.1f} "
        f"on average (suppression {top['suppression']:.3f}). Its text: “{top['text']}”")
st.caption("Rejected = in the baseline reranker pool of one of this cluster's queries, not in the reranker's top 10, not relevant. "
           "Displaced = that query had a relevant turn below the pool cut. Ranks are 1-based first-stage (RRF) ranks in the union, "
           "without and with the arm's final suppression, averaged over the queries.")
table = entries.assign(**{"rejected for": [f"{r} of {n}" for r, n in zip(entries["rejected"], entries["of"])],
                          "text": [_short(t) for t in entries["text"]]})
st.dataframe(table[["doc_id", "rejected for", "displaced", "rank before", "rank after", "suppression", "conversation", "session", "text"]],
             hide_index=True, width="stretch",
             column_config={"suppression": st.column_config.ProgressColumn(min_value=0.0, max_value=max(float(entries["suppression"].max()), 1e-9),
                                                                           format="%.3f", help="Scaled to this cluster's largest value"),
                            "rank before": st.column_config.NumberColumn(format="%.1f"), "rank after": st.column_config.NumberColumn(format="%.1f"),
                            "text": st.column_config.TextColumn(help="Cut with …; pick the entry below for its full text")})
state.csv_download(entries.assign(queries=entries["queries"].map("; ".join)), f"{arm}-s{seed}-cluster-{key}-entries", run)

hi = float(entries["suppression"].max())
fig = px.scatter(entries, x="rank before", y="rank after", size="rejected", color="suppression", hover_data=["doc_id", "rejected", "displaced"],
                 color_continuous_scale="Reds", range_color=(0, hi if hi > 0 else 1))
style(fig, "Rank in the union before and after RIF", "union rank without RIF (mean, 1 = top)", "union rank with the arm's suppression (mean)")
top_rank = float(max(entries["rank before"].max(), entries["rank after"].max())) + 1
fig.add_shape(type="line", x0=1, y0=1, x1=top_rank, y1=top_rank, line=dict(dash="dot", color="grey"))
fig.add_hline(y=P + 0.5, line_dash="dash", line_color="black", annotation_text=f"pool cut ({P}): below it, out of the reranker's pool",
              annotation_position="bottom right")
fig.update_yaxes(autorange="reversed")
st.plotly_chart(fig, width="stretch")

if seed == paper_seed(run):
    traj = trajectory(run, arm, cluster, entries["doc_id"].head(8).tolist(), split)
    if len(traj):
        st.plotly_chart(style(px.line(traj, x="step", y="value", color="doc_id", markers=True), "Suppression trajectory during burn-in",
                              "burn-in step", "suppression s (0–1)"), width="stretch")
else:
    st.caption(f"Suppression of seed {seed} replayed from the cached pools; its trajectory is recorded for seed {paper_seed(run)} only.")

st.subheader("An entry and the queries it was rejected for")
doc = st.selectbox("Entry", entries["doc_id"].tolist(), format_func=lambda d: f"{d} · {_short(corpus[corpus.index[d]].text, 70)}")
entry = entries.set_index("doc_id").loc[doc]
st.markdown(f"> {entry['text']}")
displaced_q = set(queries.loc[queries["displaced"], "query_id"])
texts = {q.id: q.text for q in ctx.dataset.queries}
st.caption(f"Rejected for {entry['rejected']} of the cluster's {entry['of']} queries; ⚠ marks a query whose relevant turn sat below the pool "
           "cut. Each opens in the query inspector.")
carry = {k: v for k, v in st.query_params.to_dict().items() if k != "query"}
for qid in entry["queries"]:
    st.page_link("views/inspector.py", label=f"{'⚠ ' if qid in displaced_q else ''}{texts[qid]}  ({qid})", icon=":material/search:",
                 query_params={**carry, "query": qid})
