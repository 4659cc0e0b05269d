import time

import plotly.express as px
import streamlit as st

import state
from lethe_core.util.figures import style
from lethe_core.results.analysis import what_if

run = state.current_run()
st.title("What-if replay")
state.run_caption(run)
st.caption("Replays one custom arm next to the baseline from the cached pools (no model call).")
ctx = state.current_context(run)
c1, c2, c3 = st.columns(3)
alpha = c1.slider("alpha (penalty weight)", 0.0, 1.0, 0.3, 0.05)
eta = c1.slider("eta (learning rate)", 0.0, 0.5, 0.1, 0.01)
k = c2.select_slider("K (clusters; 1 = global)", options=[1, 5, 10, 20, 30, 50, 100], value=30)
rule = c2.radio("Rule", ["gap", "uniform"], horizontal=True)
protocol = c3.radio("Protocol", ["paper", "heldout", "prequential"], horizontal=True)
burn_in = c3.number_input("Burn-in steps", 500, 20000, min(max(int(run.summary["burn_in"]), 500), 20000), step=500)  # inside the bounds, or Streamlit raises
t0 = time.perf_counter()
try:
    res = what_if(ctx, alpha, eta, int(k), rule, protocol, burn_in=int(burn_in))
except ValueError as exc:
    st.error(str(exc))
    st.stop()
elapsed = time.perf_counter() - t0
m1, m2, m3 = st.columns(3)
m1.metric("baseline NDCG@10", f"{res['baseline']:.4f}")
m2.metric("what-if NDCG@10", f"{res['what_if']:.4f}", f"{res['delta']['mean']:+.4f}")
m3.metric("replay time", f"{elapsed:.2f} s")
lo, hi = res["delta"]["ci"]
st.write(f"Paired Δ 95% CI [{lo:+.4f}, {hi:+.4f}]; suppressed (cluster, entry) pairs: "
         f"{sum(v['entries'] for v in res['suppressed'].values()) if res['suppressed'] else 0:,}")
df = res["rows"]
wide = df.pivot_table(index="query_id", columns="arm", values="ndcg@10")
wide = wide.assign(delta=wide["what-if"] - wide["baseline"])
st.plotly_chart(style(px.histogram(wide[wide["delta"] != 0], x="delta", nbins=40), "Per-query Δ NDCG@10 (queries that changed)",
                      "Δ NDCG@10 (what-if − baseline)", "queries"), width="stretch")
