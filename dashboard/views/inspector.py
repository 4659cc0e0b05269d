import os

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import state
from lethe_core.results.analysis import (ANSWER, ARM_MEANING, arm_kinds, candidate_table, explain, paper_seed,
                                         query_deltas, rif_arms, scored_with_final_state, seed_rows,
                                         suppression_states)
from lethe_core.util.figures import PALETTE, style

QUERY_KEY = "inspector_query"
LINKED = "inspector_linked_query"  # the `query` URL value last applied, so a new link (not our own write) moves the picker


@st.cache_resource(show_spinner="Replaying this seed's burn-in from the cached pools…", max_entries=16)
def _states(path: str, mtime: float, arm: str, seed: int, _ctx, _run):
    return suppression_states(_ctx, _run, arm, seed)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def rank_figure(table, pool: int, kind: str):
    """Each candidate's union rank before and after suppression, then its place in the answer: the pool cut is the dashed
    line, so a relevant turn (coloured) crossing it is the story of the query."""
    stages = ["union rank", "adjusted rank", "final rank"]
    names = ["union (no RIF)", "after the penalty", "answer"]
    fig = go.Figure()
    for relevant, colour, width in ((False, "#c8ccd4", 1), (True, PALETTE[1], 3)):
        xs, ys, text = [], [], []
        for _, row in table[table["relevant"] == relevant].iterrows():
            ranks = [row[s] for s in stages]
            points = [(n, int(r)) for n, r in zip(names, ranks) if pd.notna(r)]
            xs += [p[0] for p in points] + [None]
            ys += [p[1] for p in points] + [None]
            text += [row["doc_id"]] * len(points) + [None]
        fig.add_scatter(x=xs, y=ys, text=text, mode="lines+markers", line=dict(color=colour, width=width),
                        marker=dict(size=4 + 2 * width), name="relevant turn" if relevant else "other candidate",
                        hovertemplate="%{text}: rank %{y}<extra></extra>")
    if kind != "control":
        fig.add_hline(y=pool + 0.5, line_dash="dash", line_color="black",
                      annotation_text=f"pool cut ({pool}): below it the reranker never sees a candidate", annotation_position="bottom left")
    fig.add_hline(y=ANSWER + 0.5, line_dash="dot", line_color="grey", annotation_text=f"top {ANSWER}", annotation_position="top right")
    style(fig, "Where each candidate went", "stage", "rank (1 = top)", height=360)
    fig.update_yaxes(autorange="reversed")
    return fig.update_layout(margin=dict(t=40, l=60, r=20, b=40))


run = state.current_run()
st.title("Query inspector")
state.run_caption(run)
seed = state.current_seed(run)
ctx = state.current_context(run)
kinds = arm_kinds(run)
rif = rif_arms(run)
controls = [a for a, kind in kinds.items() if kind == "control"]
choices = (["RIF arm"] if rif else []) + controls
if not choices:
    st.info("This run has no arm besides the baseline to inspect.", icon=":material/info:")
    st.stop()
P = run.config["pipeline"]["pool_size"]
c_what, c_arm, c_query = st.columns([2, 2, 5])
what = choices[0]
if len(choices) > 1:
    what = c_what.radio("Compare the baseline with", choices, horizontal=True,
                        format_func=lambda c: c if c == "RIF arm" else f"{c} ({ARM_MEANING['control']})")
if what == "RIF arm":
    default = state.default_arm(run)
    arm = c_arm.selectbox("RIF arm", rif, index=rif.index(default) if default in rif else 0)
else:
    arm = what
    c_arm.caption(f"`{arm}` is not RIF: the reranker orders the whole first-stage union (no {P}-entry pool cut, no "
                  "suppression), so its final ranks can run past the pool size.")
texts = {q.id: q.text for q in ctx.dataset.queries}
deltas = query_deltas(run, arm, seed)
clusters = state.cluster_filter(run, arm)
linked = st.query_params.get("query")
shown = deltas[deltas["cluster"].isin(clusters) | (deltas["query_id"] == linked)] if clusters else deltas
by_id = shown.set_index("query_id")
options = by_id.index.tolist()
if linked in by_id.index and linked != st.session_state.get(LINKED):
    st.session_state[QUERY_KEY] = linked  # a link (or a typed URL) asks for this query
qid = c_query.selectbox("Query (sorted by Δ NDCG@10, worst first)", options, key=QUERY_KEY,
                        format_func=lambda q: f"Δ {by_id.at[q, 'delta']:+.3f} · {_short(texts[q], 80)}  ({q})")
if qid is None:
    st.info("No query of this arm in the picked clusters.", icon=":material/info:")
    st.stop()
st.query_params["query"] = qid
st.session_state[LINKED] = qid
mine = by_id.loc[qid]
kind = kinds.get(arm, "rif")
try:
    states = _states(str(run.path), os.path.getmtime(run.path / "summary.json"), arm, seed, ctx, run) if kind == "rif" else {}
except ValueError as exc:  # a prequential run's other seeds: no state to read
    st.info(f"{exc}. Pick seed {paper_seed(run)} to inspect this arm.", icon=":material/info:")
    st.stop()
table = candidate_table(ctx, run, arm, qid, seed, states)
q = ctx.queries[qid]
cluster = int(mine["cluster"]) if kind == "rif" else None
sentence = explain(table, kind, P, cluster, (float(mine["baseline"]), float(mine["ndcg"])), len(q.qrels),
                   candidate_table(ctx, run, "baseline", qid, seed))
verdict = ":red[**Lost.**]" if mine["delta"] < 0 else ":green[**Gained.**]" if mine["delta"] > 0 else "**Unchanged.**"
with st.container(border=True):
    st.markdown(f":material/lightbulb: {verdict} {sentence}")
m = st.columns(5)
m[0].metric("NDCG@10 baseline", f"{mine['baseline']:.3f}")
m[1].metric(f"NDCG@10 {arm}", f"{mine['ndcg']:.3f}", f"{mine['delta']:+.3f}")
m[2].metric("query cluster", str(cluster) if cluster is not None else "–",
            help=None if cluster is not None else f"{arm} has no clusters")
m[3].metric("relevant turns in the union", f"{int(table['relevant'].sum())} of {len(q.qrels)}")
m[4].metric("pool / union", f"{P if kind != 'control' else len(table)} / {len(table)}")
st.markdown(f"**{q.text}** · type `{q.qtype}` · relevant: {', '.join(q.qrels)}" + (f" · answer: {q.answer}" if q.answer else "")
            + (f" · seed {seed}" if seed != paper_seed(run) else ""))
if kind == "rif" and seed != paper_seed(run):
    st.caption(f"Suppression of seed {seed} replayed from the cached pools (the run's snapshots hold seed {paper_seed(run)} only).")
if kind == "rif" and not scored_with_final_state(run):
    st.caption("Prequential run: penalties are the state at the end of the stream; the query itself was scored with the state "
               "of its arrival, so its ranks here can differ from the answer below.")

pinned = table.assign(_pin=~table["relevant"]).sort_values(["_pin", "adjusted rank"], kind="stable").drop(columns="_pin")
highlight = pinned["relevant"].map({True: "background-color: #fde2e1", False: ""})
st.dataframe(pinned.style.apply(lambda _: highlight.tolist(), axis=0).format({"rrf": "{:.4f}", "penalty": "{:.4f}", "logit": "{:.2f}"}, na_rep="–"),
             hide_index=True, width="stretch", height=300,
             column_config={"relevant": st.column_config.CheckboxColumn(help="Relevant turns are pinned to the top and shaded"),
                            "union rank": st.column_config.NumberColumn(help="First-stage (RRF) rank before any suppression"),
                            "adjusted rank": st.column_config.NumberColumn(help=f"First-stage rank after the penalty; above {P} = in the reranker's pool"),
                            "in pool": st.column_config.CheckboxColumn(help="Went to the reranker under this arm"),
                            "final rank": st.column_config.NumberColumn(help=f"Rank in {arm}'s answer (1 = top); empty: cut from the reranker's pool"),
                            "text": st.column_config.TextColumn(width="large")})
st.caption(f"Ranks are 1-based; an empty rank means not ranked there (not retrieved by that leg, or cut from the {P}-entry pool). "
           "Relevant turns are pinned first; the rest follow in adjusted first-stage order.")
state.csv_download(table, f"{arm}-s{seed}-{qid}-candidates", run)
st.plotly_chart(rank_figure(table, P, kind), width="stretch")

left, right = st.columns(2)
corpus = ctx.dataset.corpus
rows = seed_rows(run, seed)
for col, name in ((left, "baseline"), (right, arm)):
    top = rows[(rows["arm"] == name) & (rows["query_id"] == qid)]["top10"].iloc[0]
    with col:
        st.subheader(name)
        st.caption(ARM_MEANING.get(kinds.get(name, "rif"), ""))
        for rank, d in enumerate(top, 1):
            t = corpus[int(d)]
            mark = "✅" if t.id in q.qrels else "▫️"
            st.markdown(f"{mark} **{rank}.** `{t.id}` {_short(t.text, 160)}", help=t.text if len(t.text) > 160 else None)
