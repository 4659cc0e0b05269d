import plotly.graph_objects as go
import streamlit as st

import state
from lethe_core.results.analysis import headline
from lethe_core.results.catalog import PROTOCOL_NOTES, significance, verdict
from lethe_core.util.figures import style

TONE_COLOURS = {"better": "#2a9d8f", "worse": "#e76f51", "unclear": "#8d99ae"}
num = st.column_config.NumberColumn
ROW_PX, NUM_PX = 35, 72  # Streamlit's data-grid row height; a column wide enough for "+0.0000" (the table fits 1280 px)

run = state.current_run()
st.title("Overview")
state.run_caption(run)
first_seed = run.summary["seeds"][0]
sig = significance(run)


def forest(frame, mid, lo, hi, tone, reference):
    """Δ with its 95% CI per arm, coloured by the Holm-adjusted test (not by the unadjusted CI)."""
    fig = go.Figure(go.Scatter(
        x=frame[mid], y=frame["arm"], mode="markers", marker=dict(size=10, color=[TONE_COLOURS[t] for t in frame[tone]]),
        error_x=dict(type="data", symmetric=False, array=frame[hi] - frame[mid], arrayminus=frame[mid] - frame[lo]),
        hovertemplate="%{y}: Δ %{x:+.4f}<extra></extra>",
    ))
    fig.add_vline(x=0, line_dash="dash", line_color="black")
    style(fig, f"vs {reference}", "Δ NDCG@10 (arm − reference)", "arm", height=100 + 22 * len(frame))
    return fig.update_layout(margin=dict(l=10, r=10, b=10))


left, right = st.columns(2)
with left:
    state.plot(forest(sig.iloc[::-1], "Δ NDCG", "Δ lo", "Δ hi", "vs baseline", "baseline"))
vs_ctrl = sig[sig["kind"].eq("rif") & sig["Δc lo"].notna()].iloc[::-1]
if len(vs_ctrl):
    with right:
        state.plot(forest(vs_ctrl, "Δ vs control", "Δc lo", "Δc hi", "vs control", "control (whole union reranked)"))
st.caption(f"Paired Δ NDCG@10 with 95% bootstrap CIs, seed {first_seed}. Green / red: better / worse after Holm (p < 0.05); "
           "grey: not distinguishable. The control reranks the whole union without RIF.")

v = verdict(run, table=sig)
{"win": st.success, "loss": st.error}.get(v.tone, st.info)(v.sentence)
if state.current_seed(run) != first_seed:
    st.caption(f"The verdict and the table are the summary's statistics, on seed {first_seed}; the per-query pages show "
               f"seed {state.current_seed(run)}.")

table = headline(run).merge(sig[["arm", "p vs control (Holm)"]], on="arm", how="left")
st.subheader(f"Headline table (seed {first_seed})")
st.caption(PROTOCOL_NOTES.get(run.summary["protocol"], f"{run.summary['protocol']} protocol") + ". CIs are in the forest "
           "plots and the CSV.")
shown = ["arm", "NDCG@10", "seed sd", "Δ NDCG", "p (Holm)", "Δ vs control", "p vs control (Holm)", "Recall@30", "Δ Recall@30",
         "suppressed (cluster, entry)"]
st.dataframe(
    table[shown], hide_index=True, width="stretch", height=ROW_PX * (len(table) + 1) + 3,  # every arm, no inner scroll
    column_config={
        "arm": st.column_config.TextColumn("arm", pinned=True, width=140),
        "NDCG@10": num(format="%.4f", width=NUM_PX), "seed sd": num("sd (seeds)", format="%.4f", width=NUM_PX,
                                                                  help="NDCG@10's standard deviation across the run's seeds"),
        "Δ NDCG": num(format="%+.4f", width=NUM_PX),
        "p (Holm)": num(format="%.4f", width=NUM_PX, help="paired permutation test vs the baseline, Holm over every arm"),
        "Δ vs control": num("Δ vs ctrl", format="%+.4f", width=NUM_PX),
        "p vs control (Holm)": num("p vs ctrl", format="%.4f", width=NUM_PX, help="vs the control, Holm over the RIF arms"),
        "Recall@30": num("R@30", format="%.4f", width=NUM_PX, help="pool recall@30"),
        "Δ Recall@30": num("Δ R@30", format="%+.4f", width=NUM_PX),
        "suppressed (cluster, entry)": num("suppressed", format="%d", width=NUM_PX, help="(cluster, entry) pairs suppressed at the end"),
    },
)
state.csv_download(table, "headline", run)

with st.expander("All runs: the verdict's arm of each (leaderboard)"):
    board = state.runs_leaderboard()
    st.dataframe(
        board.assign(open=[f"./?run={r}" for r in board["run"]]).drop(columns=["run", "Δ lo", "Δ hi"]), hide_index=True,
        width="stretch",
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open", width="small", help="this run, in a new tab"),
            "finished": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
            "seeds": num(width="small"),
            **{c: num(format="%+.4f", width=NUM_PX) for c in ("Δ NDCG", "Δ vs control")},
            "p (Holm)": num(format="%.4f", width=NUM_PX), "p vs control (Holm)": num("p vs ctrl", format="%.4f", width=NUM_PX),
        },
    )
    st.caption("Per run, the arm its verdict is about (the best arm that beats baseline and control, else the best that "
               "beats the baseline, else the best RIF arm), each query's NDCG@10 averaged over the seeds (the summary's convention); "
               "verdict `win` only when it beats both after Holm.")
    state.csv_download(board, "leaderboard")

with st.expander("Run configuration"):
    st.json(run.config)
