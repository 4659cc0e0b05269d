import streamlit as st

import state
from lethe_core.results.analysis import ARM_MEANING, arm_kinds, candidate_table, first_seed, rif_arms

run = state.current_run()
st.title("Query inspector")
state.run_caption(run)
ctx = state.current_context(run)
kinds = arm_kinds(run)
rif = rif_arms(run)
controls = [a for a, kind in kinds.items() if kind == "control"]
choices = (["RIF arm"] if rif else []) + controls
if not choices:
    st.info("This run has no arm besides the baseline to inspect.", icon=":material/info:")
    st.stop()
what = choices[0]
if len(choices) > 1:
    what = st.radio("Compare the baseline with", choices, horizontal=True,
                    format_func=lambda c: c if c == "RIF arm" else f"{c} ({ARM_MEANING['control']})")
if what == "RIF arm":
    default = state.default_arm(run)
    arm = st.selectbox("RIF arm", rif, index=rif.index(default) if default in rif else 0)
else:
    arm = what
    st.caption(f"`{arm}` is not RIF: the reranker orders the whole first-stage union (no {run.config['pipeline']['pool_size']}-entry "
               "pool cut, no suppression), so its final ranks can run past the pool size.")
pq = first_seed(run)
rows = pq[pq["arm"] == arm]
clusters = state.cluster_filter(run, arm)
if clusters:
    rows = rows[rows["cluster"].isin(clusters)]
texts = {q.id: q.text for q in ctx.dataset.queries}
base = pq[pq["arm"] == "baseline"].drop_duplicates("query_id").set_index("query_id")["ndcg@10"]
options = rows.assign(delta=rows["ndcg@10"].to_numpy() - base.reindex(rows["query_id"]).to_numpy()).sort_values("delta")
qid = st.selectbox("Query (sorted by Δ NDCG@10, worst first)", options["query_id"].tolist(),
                   format_func=lambda q: f"{texts[q][:90]}  ({q})")
q = ctx.queries[qid]
st.markdown(f"**{q.text}** · type `{q.qtype}` · relevant: {', '.join(q.qrels)}" + (f" · answer: {q.answer}" if q.answer else ""))
table = candidate_table(ctx, run, arm, qid)
st.dataframe(table, hide_index=True, width="stretch", height=380,
             column_config={"relevant": st.column_config.CheckboxColumn(), "rrf": st.column_config.NumberColumn(format="%.4f"),
                            "in pool": st.column_config.CheckboxColumn(help="Went to the reranker under this arm"),
                            "final rank": st.column_config.NumberColumn(help=f"Rank in {arm}'s answer (1 = top); empty: cut from the reranker's pool"),
                            "penalty": st.column_config.NumberColumn(format="%.4f"), "logit": st.column_config.NumberColumn(format="%.2f")})
st.caption("Ranks are 1-based; an empty rank means not ranked there (not retrieved by that leg, or cut from the reranker's pool).")
left, right = st.columns(2)
corpus = ctx.dataset.corpus
for col, name in ((left, "baseline"), (right, arm)):
    top = pq[(pq["arm"] == name) & (pq["query_id"] == qid)]["top10"].iloc[0]
    with col:
        st.subheader(name)
        st.caption(ARM_MEANING.get(kinds.get(name, "rif"), ""))
        for rank, d in enumerate(top, 1):
            t = corpus[int(d)]
            mark = "✅" if t.id in q.qrels else "▫️"
            st.markdown(f"{mark} **{rank}.** `{t.id}` {t.text[:160]}")
