# %% [markdown]
# # Checkpoint 01 — Embedding mutation
#
# **Claim.** Affinity-adaptive Gaussian mutation of the stored embeddings (germinal-centre style) does not improve
# retrieval over time: both mutation arms end *below* the static index (reference: random −5.9 %, GC −2.8 %).
#
# **Reference.** NFCorpus (3,633 documents, 323 test queries), 10,000 usage steps, NDCG@10 every 500: static
# 0.3165, random (fixed σ = 0.025) 0.2978 (−5.9 %), GC (σ = 0.05·(1 − affinity)², best of 5 mutants, cosine gain
# > 0.01, anchor cosine ≥ 0.7, tiers/decay/apoptosis) 0.3076 (−2.8 %), after a decay fix (before it: −31.6 % / −32.1 %
# with ~75 % apoptosis). **Flaw:** train = test — the usage stream is drawn from the 323 evaluation queries; one seed;
# no CIs; the code lives only in old commits (13e7f43).
#
# **Here.** `lethe_core.mechanisms.embedding_mutation` with the reference's constants; the affinity signal is the
# cross-encoder's verdict, sigmoid(raw logit) of each retrieved pair (the reference's CK1 used the
# bi-encoder cosine). The usage stream (`lethe_core.mechanisms.usage_stream`): each step a query from the reference's hot/cold
# schedule → dense top-30 over the *current* vectors → cross-encoder verdicts (every pair through the pair-score
# cache, each fold-trained model routed to the conversations it never saw) → update. Every `eval_every` steps the
# frozen state is evaluated: dense top-30 reranked by the cross-encoder (the reference's "static" system) and the
# dense order alone. Two protocols side by side: **paper** (stream drawn from the evaluation queries) and
# **held-out** (stream on one half of the conversations, evaluation on the other, both directions). 3 seeds
# (schedules 42, 43, 44), 95 % CIs over queries and over queries × seeds, permutation tests against static at the
# **final** step (the whole curve is shown; no peak is picked). LoCoMo always; NFCorpus (the reference's setting,
# seeded query split for held-out) at full parameters only.
#
# Cost at full parameters: 1,000 steps per stream (the reference ran 10,000), evaluation every 250 steps,
# 3 seeds × 2 arms × 3 stream runs (paper, and the two held-out directions) per dataset. The loop itself is cheap
# (measured with the lexical scorer on all of LoCoMo: ≈ 12 s CPU per seed for both arms at 1,000 steps). What costs is the
# cross-encoder: every turn a mutation moves into some query's top-30 is a new pair, scored once and then cached.
# Measured on LoCoMo (lexical scorer, one seed, both embedding arms, 1,000 steps): ≈ 29k new pairs beyond the 46k
# static dense top-30 pairs that the pools already hold (the adapter arms, clipped, move far fewer: ≈ 8k for three
# arms at 2,000 steps). With the fold-trained cross-encoder on 2 cores (assumed ≈ 150 pairs/s, not measured here) the *first* full build can
# therefore spend several minutes scoring (NFCorpus adds its own), possibly past the 8-minute budget; every later
# build reads them from the pair-score cache and takes ≈ 2 min CPU. The steps were halved from 2,000 for this
# reason. The small test run (400 steps, 2 seeds, LoCoMo 2 conversations, lexical scorer) takes ≈ 10 s CPU.

# %% tags=["parameters"]
dataset = "locomo"
reranker = "auto"
backend = "auto"
conversations = None
limit_queries = None
seeds = 3
burn_in = None
eval_every = None

# %% [markdown]
# `burn_in` is the number of usage-stream steps (None: the full study's length, see the header); `eval_every` None
# evaluates every steps / 4.

# %%
import pandas as pd

from lethe_core.util import figures
from lethe_core.report.checkpoints import Finding, relative_effect, replay_claim
from lethe_core.experiments.setup import DataSpec
from lethe_core.mechanisms.embedding_mutation import MutationParams
from lethe_core.experiments.mutation_study import (MutationStudy, curve_figures, curve_table, drift_figures, drift_table,
                                                   final_figure, final_table)

figures.setup_notebook()
steps = burn_in or 1000
every = eval_every or max(1, steps // 4)
data = DataSpec(dataset=dataset, reranker=reranker, backend=backend, conversations=conversations, limit_queries=limit_queries,
                progress=False)
common = dict(mechanism="embedding", steps=steps, eval_every=every, seeds=seeds)
summary = MutationStudy(data, **common).run()
run_nfcorpus = conversations is None and limit_queries is None  # the small test run skips NFCorpus (3,633 documents)
nf_data = DataSpec(dataset="nfcorpus", reranker=reranker, backend=backend, progress=False)
nf = MutationStudy(nf_data, **common).run() if run_nfcorpus else None
print(f"{summary['dataset']}: {summary['n_queries']} queries, {summary['n_turns']} turns, reranker {summary['reranker']}, "
      f"{steps} steps, eval every {every}, seeds {summary['seeds']}; pairs read {summary['pairs']['hits']}, "
      f"newly scored {summary['pairs']['scored']}")

# %% [markdown]
# ## The reference's figures
#
# NFCorpus, one seed, the usage stream drawn from the evaluation queries.

# %%
REFERENCE = pd.DataFrame([{"arm": "static", "ndcg@10": 0.3165, "relative": 0.0},
                          {"arm": "random (σ = 0.025)", "ndcg@10": 0.2978, "relative": -0.059},
                          {"arm": "GC (adaptive)", "ndcg@10": 0.3076, "relative": -0.028}])
display(REFERENCE)

# %% [markdown]
# ## NDCG@10 over the usage stream
#
# Dense top-30 reranked by the cross-encoder, evaluated frozen every `eval_every` steps; bands: 95 % CI over queries
# (of each query's mean over seeds). Static is flat by construction (its vectors never move).

# %%
curve_figs = curve_figures(summary)
for fig in curve_figs[:-2]:
    fig.show()

# %% [markdown]
# The same runs, paired change against static at each evaluation step (CI over queries), and the dense order alone
# (mutation moves the first stage; the cross-encoder only reorders what the top-30 lets through).

# %%
for fig in curve_figs[-2:]:
    fig.show()

# %% [markdown]
# ## At the final step
#
# `lo`/`hi`: paired bootstrap over queries of the seed-averaged Δ; `lo_seeds`/`hi_seeds`: resampling queries and
# seeds; `p`: paired permutation test; `p_holm`: Holm over the reranked rows; `per_seed_delta`: the spread over
# schedules.

# %%
final = final_table(summary)
display(final.round(4))
final_figure(summary)

# %% [markdown]
# ## Drift off the encoder's manifold
#
# For the turns mutated at least once: mean cosine to their original embedding (`anchor`, printed below, bounds it
# per accepted mutant), and the share of their 10 nearest neighbours that are the same as under the original vectors.
# Averaged over seeds (and the two held-out directions); bands: min–max over seeds.

# %%
for fig in drift_figures(summary):
    fig.show()
print(f"anchor = {MutationParams().anchor} (minimum cosine of an accepted mutant to the original vector)")
drift = drift_table(summary)
display(drift[drift["step"] == steps][["protocol", "arm", "touched", "mutations_tried", "mutations_accepted", "tier_naive",
                                       "tier_gc", "tier_memory", "tier_apoptotic", "anchor_cos", "nn_overlap"]].round(3))

# %% [markdown]
# ## NFCorpus (the reference's setting)
#
# Full parameters only; held-out is a seeded half split of the queries (NFCorpus has no conversations). The
# reference's static NDCG@10 is dense retrieval without a reranker, so the figure and the verdict read our dense
# system here (the reranked rows are in the table).

# %%
if nf:
    nf_final = final_table(nf)
    display(nf_final.round(4))
    nf_curves = curve_table(nf, "dense").assign(label=lambda f: f["arm"] + " / " + f["protocol"])
    fig = figures.line_ci(nf_curves, "step", "ndcg@10", "lo", "hi", "NFCorpus: dense retrieval (the reference's system) over the usage stream",
                          "usage-stream step (queries issued)", "NDCG@10 (mean, 95 % CI)", color="label")
    fig.add_hline(y=0.3165, line_dash="dash", annotation_text="reference static 0.3165")
else:
    nf_final, fig = None, None
    print("NFCorpus skipped (small run: conversations / limit_queries set)")
fig

# %% [markdown]
# **Reading.** Which way the final Δ goes, and whether it is the same in both protocols, is the result; the
# reference's protocol lets the stream tune the very queries it is scored on, so a gain there that vanishes in
# held-out is memorisation, not better memory. Under the held-out protocol on LoCoMo the stream and the evaluation
# queries come from different conversations, so they touch mostly different turns: mutation can only matter there
# through the turns that both halves retrieve (the corpus is one index). The drift plots show how far the accepted
# mutants take the vectors (the anchor bounds each accepted mutant against the original, not the walk's endpoint
# against the encoder's neighbourhood structure, which the neighbour overlap measures).
#
# On NFCorpus compare like with like: the reference's static NDCG@10 is the *dense* system (our dense static is in
# the final-step table), while the reranked rows use our cross-encoder, trained on LoCoMo chat, which is out of domain
# on medical abstracts and ranks well below dense retrieval there. A mutation that perturbs the dense top-30 can then
# "help" the reranked system merely by feeding a poor teacher different candidates. So on NFCorpus the verdict reads
# the dense rows (the reference's own system); on LoCoMo, where the teacher is in domain, the reranked rows.

# %% [markdown]
# ## Verdict

# %%
# Each row is an effect claim: the arm ends below static by at least half the reference's relative loss (NFCorpus,
# dense: static 0.3165, random 0.2978, GC 0.3076), scaled to our static. Primary: LoCoMo, the reference's protocol, the
# affinity-adaptive (GC) arm, reranked; every other protocol, arm and dataset is secondary. The CIs are over queries
# (seed mean per query), with the conversation-level CI on LoCoMo.
REF = {"static": 0.3165, "random": 0.2978, "adaptive": 0.3076}
claims, ours = {}, []
for result in [summary] + ([nf] if nf else []):
    f = final_table(result)
    system = "dense" if result["dataset"] == "nfcorpus" else "rerank"  # the reference's system on NFCorpus is dense-only
    rows = pd.read_parquet(f"{result['results_dir']}/final.parquet").query("system == @system")
    for _, r in f[f["system"] == system].iterrows():
        what = f"{result['dataset']} {r['protocol']} ({system}): {r['arm']} − static NDCG@10 at step {steps}"
        claims[(result["dataset"], r["protocol"], r["arm"])] = replay_claim(
            rows, r["arm"], r["protocol"], what, baseline="static", direction=-1,
            reference=relative_effect(REF[r["arm"]], REF["static"], r["static"]))
        ours.append(f"{result['dataset']} {r['protocol']} {system} {r['arm']}: static {r['static']:.4f} → {r['ndcg@10']:.4f} "
                    f"(Δ {r['delta']:+.4f} [{r['lo']:+.4f}, {r['hi']:+.4f}], {r['relative']:+.1%}, p = {r['p']:.3f})")
primary = claims.pop((summary["dataset"], "paper", "adaptive"))
Finding.from_claims(
    primary, list(claims.values()), checkpoint=1, title="Embedding mutation",
    claim="Mutating the stored embeddings (random or affinity-adaptive) does not help: both arms end below the static index.",
    reference="NFCorpus, 10,000 steps, train = test, one seed: static 0.3165, random 0.2978 (−5.9 %), GC 0.3076 (−2.8 %)",
    ours="; ".join(ours),
    numbers={"final": summary["final"], "nfcorpus_final": nf["final"] if nf else None, "steps": steps, "eval_every": every,
             "seeds": summary["seeds"], "n_queries": summary["n_queries"], "reranker": summary["reranker"],
             "pairs": summary["pairs"]},
    parameters={"dataset": dataset, "reranker": reranker, "backend": backend, "conversations": conversations,
                "limit_queries": limit_queries, "seeds": seeds, "burn_in": burn_in, "eval_every": eval_every},
)
