# %% [markdown]
# # Checkpoint 04 — Learned MLP adapter
#
# **Claim.** A small MLP trained online on the cross-encoder's verdicts, writing a bounded additive adapter per
# turn, lifts NDCG@10 of dense top-30 + cross-encoder a little over the static pipeline ("tiny positive, not
# significant").
#
# **Reference.** NFCorpus, 323 queries: MLP adapter (769 → 128 → 384, Adam 5e-3, Δ ≤ 0.01 a step, adapter ≤ 0.5)
# peak 0.3362, +0.6 % at step 400, gone by step 800; "MLP + probability gate + low promotion" 0.3356, +0.4 %,
# +0.35–0.43 % through step 1,250 (its code was never committed); LongMemEval +0.1 %. One seed; the usage stream was
# drawn from the evaluation queries (train = test) and the "peak" is the best checkpoint picked on those same queries.
#
# **Here.** `MLPAdapterStudy` (`lethe_core.mechanisms.mlp_adapter`, docs/mlp_adapter.md) on LoCoMo: the reference's protocol
# (`paper`: stream from the evaluation queries) beside a held-out one (`heldout`: learn on one half of the
# conversations, evaluate frozen on the other, both directions), 3 seeds (42–44), the whole NDCG@10 curve with 95 %
# CI bands, the verdict at the **final step** on held-out data; the reference's peak pick is shown for what it is
# worth on held-out data. Arms: `mlp` (the rule as specified: every scored turn, toward the query on a positive
# verdict, away on a negative one) and `gated` (our approximation of the reference's gates: affinity promotion at
# 0.65 / generation 3, training probability 1 − affinity, acceptance δ = 0.001). One optimiser step per stream step
# on the mean loss of its 30 retrieved turns (the reference stepped once per turn: `update_mode="turn"` exists,
# 30 times the cost). Every cross-encoder score goes through the pair-score cache; the fold-trained reranker
# (`auto`) is routed per question to the fold that never saw its conversation. NFCorpus (full run only): the `mlp`
# arm, 800 steps; the only offline cross-encoder is trained on LoCoMo, so it measures transfer as well.
#
# Cost of the full run (estimated, not yet run at full parameters): LoCoMo (1,536 questions, 5,882 turns) 1,200 steps
# × 3 stream jobs × 3 seeds × 2 arms ≈ 22k stream steps (~5 ms each) plus 13 frozen evaluations per run (a 100-step
# probe with 3 evaluations on full LoCoMo took 3.6 s of CPU), and NFCorpus 800 steps × 3 × 3 — about 4–6 min of CPU
# once the embeddings are cached (NFCorpus's 3,633 documents need embedding once), plus the cross-encoder on the (query,
# turn) pairs the moved turns bring into a top-30 for the first time (scored once, then cached). The small test run
# (`conversations` or `limit_queries` set) runs the `mlp` arm only, 4 evaluations, no NFCorpus.

# %% tags=["parameters"]
dataset = "locomo"
reranker = "auto"
backend = "auto"
conversations = None
limit_queries = None
seeds = 3
burn_in = 1200  # stream steps
update_mode = "step"

# %%
import pandas as pd
import plotly.express as px
from IPython.display import Markdown

from lethe_core.util import figures
from lethe_core.report.checkpoints import Finding, fmt_ci, replay_claim
from lethe_core.experiments.mlp_adapter_study import MLPAdapterStudy
from lethe_core.experiments.setup import DataSpec
from lethe_core.mechanisms.mlp_adapter import MLPParams
from lethe_core.report.prose import delta_ci

figures.setup_notebook()
full = conversations is None and limit_queries is None
arms = ("mlp", "gated") if full else ("mlp",)
eval_every = max(burn_in // 12, 1) if full else max(burn_in // 4, 1)
data = DataSpec(dataset=dataset, reranker=reranker, backend=backend, conversations=conversations, limit_queries=limit_queries,
                progress=False)
summary = MLPAdapterStudy(data, arms=arms, steps=burn_in, eval_every=eval_every, seeds=seeds, update_mode=update_mode).run()
nf = (MLPAdapterStudy(DataSpec(dataset="nfcorpus", reranker=reranker, backend=backend, progress=False), arms=("mlp",),
                      steps=800, eval_every=100, seeds=seeds, update_mode=update_mode).run() if full else None)
trace = pd.read_parquet(f"{summary['results_dir']}/trace.parquet")
print(f"{summary['n_queries']} queries, {summary['n_turns']} turns, reranker {summary['reranker']}, "
      f"{summary['n_parameters']:,} MLP parameters, seeds {summary['seeds']}, {summary['steps']} steps; "
      f"pairs read from the cache {summary['pairs']['hits']}, newly scored {summary['pairs']['scored']}")

# %% [markdown]
# ## The final step: each arm against static, per protocol
#
# Paired Δ of NDCG@10 (dense top-30 reranked by the cross-encoder) over the evaluation queries (seed-mean per
# query), a CI over queries and seeds, permutation p and Holm-adjusted p across the arms and protocols.

# %%
def final_table(s):
    rows = [{"protocol": r["protocol"], "arm": r["arm"], "static": r["static"], "ndcg@10": r["ndcg@10"], "delta": r["delta"],
             "lo": r["ci"][0], "hi": r["ci"][1], "lo (seeds+queries)": r["ci_seeds_queries"][0],
             "hi (seeds+queries)": r["ci_seeds_queries"][1], "relative": r["relative"], "p": r["p"], "p_holm": r.get("p_holm"),
             "per-seed Δ": [round(x, 4) for x in r["per_seed_delta"]]}
            for r in s["final"] if r["system"] == "rerank"]
    return pd.DataFrame(rows)


final = final_table(summary)
display(final.round(4))

# %% [markdown]
# ## The whole curve: Δ vs static over the stream, per protocol

# %%
curves = pd.DataFrame(summary["curves"])
deltas = curves[(curves["system"] == "rerank") & (curves["arm"] != "static")].assign(
    line=lambda f: f["arm"] + " · " + f["protocol"])
fig = figures.line_ci(deltas, "step", "delta", "delta_lo", "delta_hi",
                      f"MLP adapter − static, NDCG@10 of dense top-30 + cross-encoder ({dataset})",
                      "stream step (queries issued)", "Δ NDCG@10 vs static (95 % CI over queries)", color="line")
fig.add_hline(y=0, line_dash="dot")
fig

# %%
levels = curves[curves["system"] == "rerank"].assign(line=lambda f: f["arm"] + " · " + f["protocol"])
figures.line_ci(levels, "step", "ndcg@10", "lo", "hi", f"NDCG@10 over the usage stream ({dataset})",
                "stream step (queries issued)", "NDCG@10 (mean over queries, 95 % CI)", color="line")

# %% [markdown]
# ## How far the adapters move
#
# Mean norm of the adapters of the turns that moved (the cap is the adapter norm `clip`, printed below), over seeds
# and splits; the band is the range over seeds × splits.

# %%
norms = (trace.groupby(["protocol", "arm", "step"])["mean_adapter_norm"].agg(["mean", "min", "max"]).reset_index()
         .assign(line=lambda f: f["arm"] + " · " + f["protocol"]))
print(f"clip = {MLPParams().clip} (maximum adapter norm)")
figures.line_ci(norms, "step", "mean", "min", "max", f"Adapter norm over the usage stream ({dataset})",
                "stream step (queries issued)", "mean adapter norm of moved turns (L2; band: seed × split range)", color="line")

# %%
display(trace.groupby(["protocol", "arm"])[["touched", "anchor_cos", "nn_overlap", "max_adapter_norm", "at_clip", "applied",
                                            "rejected", "skipped"]].last().round(4))

# %% [markdown]
# ## The reference's peak pick, and what it is worth on held-out data
#
# The step with the best paper-protocol Δ (picked on the evaluation queries, as the reference did) and the held-out
# Δ at that same step. A pick made on the test queries is not evidence; it is shown only to place the reference's
# peak (see the header).

# %%
display(pd.DataFrame(summary["peak"]).round(4))

# %%
reference = pd.DataFrame([
    {"run": "reference NFCorpus, MLP (peak, step 400, picked on eval)", "static": 0.3362 / 1.006, "ndcg@10": 0.3362, "relative": 0.006},
    {"run": "reference NFCorpus, MLP + gate + low promotion", "static": 0.3356 / 1.004, "ndcg@10": 0.3356, "relative": 0.004},
    {"run": "reference LongMemEval, MLP", "static": float("nan"), "ndcg@10": float("nan"), "relative": 0.001},
])
ours = [{"run": f"ours {dataset}, {r['arm']}, {r['protocol']}, final step", "static": r["static"], "ndcg@10": r["ndcg@10"],
         "relative": r["relative"]} for _, r in final.iterrows()]
if nf:
    ours += [{"run": f"ours nfcorpus, {r['arm']}, {r['protocol']}, final step", "static": r["static"], "ndcg@10": r["ndcg@10"],
              "relative": r["relative"]} for _, r in final_table(nf).iterrows()]
display(pd.concat([reference, pd.DataFrame(ours)], ignore_index=True).round(4))

# %% [markdown]
# ## NFCorpus (full run only)

# %%
if nf:
    nf_curves = pd.DataFrame(nf["curves"])
    nf_d = nf_curves[(nf_curves["system"] == "rerank") & (nf_curves["arm"] != "static")].assign(
        line=lambda f: f["arm"] + " · " + f["protocol"])
    fig = figures.line_ci(nf_d, "step", "delta", "delta_lo", "delta_hi", "MLP adapter − static on NFCorpus (323 queries)",
                          "stream step (queries issued)", "Δ NDCG@10 vs static (95 % CI over queries)", color="line")
    fig.add_hline(y=0, line_dash="dot")
    display(final_table(nf).round(4))
    display(pd.DataFrame(nf["peak"]).round(4))
else:
    fig = None
    print("NFCorpus skipped (small run: conversations / limit_queries set)")
fig

# %% [markdown]
# **Reading.** Under the reference's protocol the adapter learns on the very queries it is scored on, so any gain
# there is partly memorisation of those queries' verdicts; the held-out protocol asks whether what it learns
# carries to questions it never saw. The verdict is the held-out Δ at the final step of the `mlp` arm. Memorisation
# would show as a gain under the reference's protocol that does not carry to held-out questions, and as a peak step
# that is worth nothing held out. This run:

# %%
by_protocol = final[final["arm"] == "mlp"].set_index("protocol")
line = (f"At step {summary['steps']} the `mlp` arm changes NDCG@10 by "
        + " and by ".join(f"{delta_ci(r['delta'], r['lo'], r['hi'])} under the {p} protocol" for p, r in by_protocol.iterrows()))
mlp_peak = next((p for p in summary["peak"] if p["arm"] == "mlp"), None)
if mlp_peak and "heldout_delta" in mlp_peak:
    line += (f"; the step the reference's peak rule picks (step {mlp_peak['step']}, paper Δ {mlp_peak['paper_delta']:+.4f}) "
             f"is worth {delta_ci(mlp_peak['heldout_delta'], *mlp_peak['heldout_ci'])} held out")
display(Markdown(line + "."))

# %% [markdown]
# ## Verdict

# %%
held = final[(final["protocol"] == "heldout") & (final["arm"] == "mlp")].iloc[0]
paper = final[(final["protocol"] == "paper") & (final["arm"] == "mlp")].iloc[0]
peak = next((p for p in summary["peak"] if p["arm"] == "mlp"), {})
# One effect claim (primary): the held-out gain of the `mlp` arm at the final step is at least half the reference's
# relative gain, the gated arm's +0.4 % it held through step 1,250 (its peak pick, +0.6 %, was chosen on the evaluation
# queries), scaled to our static. Secondary: the same under the reference's protocol.
REF_GAIN = 0.004
final_rows = pd.read_parquet(f"{summary['results_dir']}/final.parquet").query("system == 'rerank'")
claims = [replay_claim(final_rows, "mlp", protocol, f"{protocol} MLP adapter − static NDCG@10 at step {summary['steps']}",
                       baseline="static", reference=REF_GAIN * r["static"]) for protocol, r in (("heldout", held), ("paper", paper))]
Finding.from_claims(
    claims[0], claims[1:],
    checkpoint=4, title="Learned MLP adapter",
    claim="An online-trained MLP adapter over the turn vectors gives a small NDCG@10 gain over static dense top-30 + "
          "cross-encoder (tiny positive, not significant).",
    reference="NFCorpus MLP peak 0.3362 (+0.6 %, step 400, picked on the eval queries, gone by step 800); gated 0.3356 "
              "(+0.4 %); LongMemEval +0.1 %; one seed, train = test",
    ours=f"{dataset}, {summary['n_queries']} questions, {len(summary['seeds'])} seeds, step {summary['steps']}: held-out "
         f"static {held['static']:.4f} → {held['ndcg@10']:.4f}, Δ {fmt_ci(held['delta'], (held['lo'], held['hi']))} "
         f"({held['relative']:+.2%}, p = {held['p']:.3f}); "
         f"paper protocol Δ {paper['delta']:+.4f} [{paper['lo']:+.4f}, {paper['hi']:+.4f}] ({paper['relative']:+.2%}); "
         f"the reference's peak pick (step {peak.get('step')}) is worth {peak.get('heldout_delta', float('nan')):+.4f} held out",
    numbers={"heldout": held.to_dict(), "paper": paper.to_dict(), "peak": summary["peak"], "n_queries": summary["n_queries"],
             "steps": summary["steps"], "seeds": summary["seeds"], "reranker": summary["reranker"],
             "nfcorpus": [r for r in nf["final"] if r["system"] == "rerank"] if nf else None},
    parameters={"dataset": dataset, "reranker": reranker, "backend": backend, "conversations": conversations,
                "limit_queries": limit_queries, "seeds": seeds, "burn_in": burn_in, "update_mode": update_mode,
                "arms": list(arms), "eval_every": eval_every},
)
