import streamlit as st

import state
from lethe_core.results.analysis import candidate_table, first_seed

run = state.current_run()
st.title("Query inspector")
state.run_caption(run)
ctx = state.current_context(run)
arm = st.selectbox("RIF arm", [a for a in run.arms if a != "baseline"], index=max(0, [a for a in run.arms if a != "baseline"].index(state.default_arm(run))) if state.default_arm(run) in run.arms else 0)
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
                            "penalty": st.column_config.NumberColumn(format="%.4f"), "logit": st.column_config.NumberColumn(format="%.2f")})
left, right = st.columns(2)
corpus = ctx.dataset.corpus
for col, name in ((left, "baseline"), (right, arm)):
    top = pq[(pq["arm"] == name) & (pq["query_id"] == qid)]["top10"].iloc[0]
    with col:
        st.subheader(name)
        for rank, d in enumerate(top, 1):
            t = corpus[int(d)]
            mark = "✅" if t.id in q.qrels else "▫️"
            st.markdown(f"{mark} **{rank}.** `{t.id}` {t.text[:160]}")
