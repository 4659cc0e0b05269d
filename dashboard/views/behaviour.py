import os

import streamlit as st

import state
from lethe_core.results.analysis import BEHAVIOURS, abstention, behaviour_table, paired_deltas, seed_rows
from lethe_core.util.figures import bar_ci


@st.cache_data(show_spinner="Bootstrapping paired differences…", max_entries=32)
def _deltas(path: str, mtime: float, seed: int, metrics: tuple[str, ...], by: str | None, arms: tuple[str, ...] | None, _run):
    return paired_deltas(_run, list(metrics), seed, by, list(arms) if arms is not None else None)


run = state.current_run()
st.title("Behaviour decomposition")
state.run_caption(run)
seed = state.current_seed(run)
key = (str(run.path), os.path.getmtime(run.path / "summary.json"), seed)
st.caption("Top-1 of the second stage: exact_episode (relevant), sibling_confusion (same session as a relevant turn), "
           "wrong_family (a session with no relevant turn); the three shares sum to 1, so their differences sum to 0. Each bar is "
           "an arm's share minus the baseline's over the same queries, with a 95% paired bootstrap CI.")
if len(run.arms) < 2:
    st.info("This run has only the baseline: there is no difference to draw.", icon=":material/info:")
    st.stop()
overall = _deltas(*key, BEHAVIOURS, None, None, run)
st.plotly_chart(bar_ci(overall, "arm", "delta", "lo", "hi", "Top-1 behaviour: arm − baseline", "arm", "Δ share of queries (paired)",
                       color="metric", reference=0.0, reference_label="baseline"), width="stretch")
levels = behaviour_table(run, seed=seed)
with st.expander("Shares per arm (the levels behind the differences)"):
    st.dataframe(levels, hide_index=True, width="stretch")
    state.csv_download(levels, f"s{seed}-behaviour-shares", run)
state.csv_download(overall, f"s{seed}-behaviour-deltas", run)

others = [a for a in run.arms if a != "baseline"]
default = state.default_arm(run)
arm = st.selectbox("Arm by question type", others, index=others.index(default) if default in others else 0)
by_type = _deltas(*key, BEHAVIOURS, "qtype", (arm,), run)
st.plotly_chart(bar_ci(by_type, "qtype", "delta", "lo", "hi", f"Top-1 behaviour per question type: {arm} − baseline", "question type",
                       "Δ share of queries (paired)", color="metric", reference=0.0, reference_label="baseline"), width="stretch")
st.caption("n per question type: " + ", ".join(f"{t} {n}" for t, n in by_type.drop_duplicates("qtype")[["qtype", "n"]].itertuples(index=False)))
state.csv_download(by_type, f"s{seed}-{arm}-behaviour-by-type", run)

shares, note = abstention(run, seed)
thresholds = [c for c in shares.columns if c.startswith("abstain@")]
if not thresholds:
    st.info(note, icon=":material/info:")
else:
    ab = _deltas(*key, tuple(thresholds), None, None, run)
    st.plotly_chart(bar_ci(ab, "arm", "delta", "lo", "hi", "Abstention (top-1 score below T): arm − baseline", "arm",
                           "Δ share of queries abstained on (paired)", color="metric", reference=0.0, reference_label="baseline"),
                    width="stretch")
    base = shares.set_index("arm").loc["baseline", thresholds]
    st.caption("Baseline abstains on " + ", ".join(f"{v:.1%} at T = {c.split('@', 1)[1]}" for c, v in base.items()) + "."
               + (f" {note}" if note else ""))
    state.csv_download(shares, f"s{seed}-abstention", run)

rows = seed_rows(run, seed)
if "bucket" in rows.columns and rows["bucket"].isin(["hot", "cold", "unseen"]).any():
    buckets = _deltas(*key, ("ndcg@10",), "bucket", None, run)
    st.plotly_chart(bar_ci(buckets, "arm", "delta", "lo", "hi", "Δ NDCG@10 by burn-in bucket (hot / cold / unseen)", "arm",
                           "Δ NDCG@10 vs baseline (paired)", color="bucket", reference=0.0, reference_label="baseline"), width="stretch")
    st.caption("Hot: drawn often during burn-in; cold: drawn at least once; unseen: never drawn. n: "
               + ", ".join(f"{b} {n}" for b, n in buckets.drop_duplicates("bucket")[["bucket", "n"]].itertuples(index=False)) + ".")
    state.csv_download(buckets, f"s{seed}-ndcg-by-bucket", run)
