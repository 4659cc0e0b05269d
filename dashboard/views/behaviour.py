import plotly.express as px
import streamlit as st

import state
from lethe_core.util.figures import style
from lethe_core.results.analysis import BEHAVIOURS, behaviour_table, first_seed

run = state.current_run()
st.title("Behaviour decomposition")
state.run_caption(run)
st.caption("Top-1 of the second stage: exact_episode (relevant), sibling_confusion (same session as a relevant turn), "
           "wrong_family (a session with no relevant turn). The three sum to 1.")
table = behaviour_table(run)
long = table.melt(id_vars="arm", value_vars=list(BEHAVIOURS), var_name="behaviour", value_name="share")
st.plotly_chart(style(px.bar(long, x="arm", y="share", color="behaviour"), "Top-1 behaviour per arm", "arm", "share of queries"), width="stretch")

by_type = behaviour_table(run, "qtype")
arms = st.multiselect("Arms by question type", run.arms, default=[a for a in ("baseline", state.default_arm(run)) if a in run.arms])
lt = by_type[by_type["arm"].isin(arms)].melt(id_vars=["arm", "qtype"], value_vars=list(BEHAVIOURS), var_name="behaviour", value_name="share")
st.plotly_chart(style(px.bar(lt, x="arm", y="share", color="behaviour", facet_col="qtype"), "Top-1 behaviour per question type", "arm", "share of queries"),
                width="stretch")

ab = table.melt(id_vars="arm", value_vars=["abstain@0", "abstain@2", "abstain@4"], var_name="threshold", value_name="share")
st.plotly_chart(style(px.bar(ab, x="arm", y="share", color="threshold", barmode="group"), "Abstention: top-1 logit below T", "arm", "share of queries"),
                width="stretch")

pq = first_seed(run)
if "bucket" in pq.columns and pq["bucket"].isin(["hot", "cold", "unseen"]).any():
    b = pq.groupby(["arm", "bucket"])["ndcg@10"].mean().reset_index()
    st.plotly_chart(style(px.bar(b, x="arm", y="ndcg@10", color="bucket", barmode="group"),
                          "NDCG@10 by burn-in bucket (hot / cold / unseen)", "arm", "NDCG@10 (mean over queries)"), width="stretch")
