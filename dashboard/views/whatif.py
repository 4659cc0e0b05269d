import time

import pandas as pd
import plotly.express as px
import streamlit as st

import state
from lethe_core.results.analysis import what_if
from lethe_core.results.catalog import teacher
from lethe_core.results.runs import logit_reading
from lethe_core.util.figures import style

PROTOCOLS = ["paper", "heldout", "prequential"]  # what `what_if` replays
K_OPTIONS = [1, 5, 10, 20, 30, 50, 100]
HISTORY_KEY, LAST_KEY = "whatif_history", "whatif_last"  # {run id: [row, ...]}, {run id: last result}

run = state.current_run()
st.title("What-if replay")
state.run_caption(run)
s, c = run.summary, run.config
seed = state.current_seed(run)
arm = state.default_arm(run)
recorded = next(a for a in s["arms"] if a["name"] == arm)
st.caption(f"Replays one custom arm next to the baseline from this run's cached pools (no model call): teacher "
           f"**{teacher(s)}**, {logit_reading(s)} logits, second stage {s['second_stage']}, seed {seed} (the sidebar's). "
           f"The defaults are this run's {arm} arm (its alpha, eta, K, rule, protocol and burn-in; the other RIF constants at "
           "their defaults), so Run with them replays that arm.")

ctx = state.current_context(run)  # loaded on the visit: a run that cannot be replayed says so before Run is pressed
with st.form(f"whatif-{run.run_id}"):
    c1, c2, c3 = st.columns(3)
    alpha = c1.slider("alpha (penalty weight)", 0.0, 1.0, min(max(float(c.get("alpha", 0.3)), 0.0), 1.0), 0.05, key=f"alpha-{run.run_id}")
    eta = c1.slider("eta (learning rate)", 0.0, 0.5, min(max(float(c.get("eta", 0.1)), 0.0), 0.5), 0.01, key=f"eta-{run.run_id}")
    k_default = int(recorded.get("k") or 1)
    k = c2.select_slider("K (clusters; 1 = global)", options=sorted({*K_OPTIONS, k_default}), value=k_default, key=f"k-{run.run_id}")
    rules = ["gap", "uniform"]
    rule = c2.radio("Rule", rules, index=rules.index(recorded["rule"]) if recorded.get("rule") in rules else 0, horizontal=True,
                    key=f"rule-{run.run_id}")
    protocol = c3.radio("Protocol", PROTOCOLS, index=PROTOCOLS.index(s["protocol"]) if s["protocol"] in PROTOCOLS else 0,
                        horizontal=True, key=f"protocol-{run.run_id}", help="The run's own protocol by default")
    burn_in = c3.number_input("Burn-in steps", 0, 20000, min(max(int(s["burn_in"]), 0), 20000), step=500, key=f"burn-{run.run_id}")
    submitted = st.form_submit_button("Run replay", type="primary")

history = st.session_state.setdefault(HISTORY_KEY, {}).setdefault(run.run_id, [])
last = st.session_state.setdefault(LAST_KEY, {})
if submitted:
    t0 = time.perf_counter()
    try:
        res = state.gated_replay(lambda: what_if(ctx, alpha, eta, int(k), rule, protocol, seed=seed, burn_in=int(burn_in)))
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    if res is not None:
        lo, hi = res["delta"]["ci"]
        history.append({"alpha": alpha, "eta": eta, "K": int(k), "rule": rule, "protocol": protocol, "burn-in": int(burn_in),
                        "seed": seed, "baseline": res["baseline"], "what-if": res["what_if"], "Δ NDCG@10": res["delta"]["mean"],
                        "Δ lo": lo, "Δ hi": hi,
                        "suppressed pairs": sum(v["entries"] for v in res["suppressed"].values()) if res["suppressed"] else 0,
                        "seconds": round(time.perf_counter() - t0, 2)})
        last[run.run_id] = res

res = last.get(run.run_id)
if res is None:
    pq = run.per_query
    mine = pq[(pq["seed"] == seed)].pivot_table(index=["query_id", "split"], columns="arm", values="ndcg@10")
    wide = pd.DataFrame({"delta": mine[arm] - mine["baseline"]})
    st.info(f"Recorded on this run: {arm} moves NDCG@10 by {wide['delta'].mean():+.4f} on seed {seed}. Set the knobs and "
            "press **Run replay** to replay another arm.")
    title = f"Per-query Δ NDCG@10, recorded {arm} (queries that changed)"
else:
    entry = history[-1]
    m1, m2, m3 = st.columns(3)
    m1.metric("baseline NDCG@10", f"{res['baseline']:.4f}")
    m2.metric("what-if NDCG@10", f"{res['what_if']:.4f}", f"{res['delta']['mean']:+.4f}")
    m3.metric("replay time", f"{entry['seconds']:.2f} s")
    st.write(f"Paired Δ 95% CI [{entry['Δ lo']:+.4f}, {entry['Δ hi']:+.4f}]; suppressed (cluster, entry) pairs: "
             f"{entry['suppressed pairs']:,}")
    mine = res["rows"].pivot_table(index="query_id", columns="arm", values="ndcg@10")
    wide = pd.DataFrame({"delta": mine["what-if"] - mine["baseline"]})
    title = "Per-query Δ NDCG@10, last replay (queries that changed)"
state.plot(style(px.histogram(wide[wide["delta"] != 0], x="delta", nbins=40), title, "Δ NDCG@10 (arm − baseline)", "queries"))

if history:
    st.subheader("Tried settings")
    frame = pd.DataFrame(history[::-1])
    num = st.column_config.NumberColumn
    st.dataframe(frame, hide_index=True, width="stretch", column_config={
        **{col: num(format="%.4f") for col in ("baseline", "what-if")},
        **{col: num(format="%+.4f") for col in ("Δ NDCG@10", "Δ lo", "Δ hi")},
    })
    state.csv_download(frame, "whatif-history", run)
