# %% [markdown]
# # Checkpoint 12 — Clustered RIF
#
# **Claim.** Cue-dependent suppression — one suppression list per query cluster — lifts NDCG@10 well above the
# baseline and above global RIF, best near K = 30 (+5.8 %); clusters must come from queries, not from the
# corpus (production: query-based +9.5 % vs entry-based +1.8 %).
#
# **Reference.** LongMemEval S, 500 queries, `rif/run_clustered.py`: `faiss.Kmeans(384, K, niter=20, seed=42)` on
# the query embeddings, uniform rule, 5,000 burn-in. NDCG / R@30: baseline 0.2960/0.4103; global 0.2993 (+1.1 %);
# K=10 0.3113 (+5.2 %); **K=30 0.3132 (+5.8 %)/0.4381**; K=50 0.3067 (+3.6 %); K=100 0.3092 (+4.5 %). The regex + ONNX
# re-run: K10 +4.0 %, K30 +3.4 %. Post-submission note: entry-based clusters +1.8 % vs query-based +9.5 % in
# production. **Flaws**: the centroids are fit on all 500 evaluation queries (transductive) and the burn-in draws
# from them (train = test); K was chosen on the evaluated queries; one seed; the re-run rows are labelled "gap
# formula" but the script never sets it; the paper says the centroids come from the "first 2,000 retrievals", which
# the code does not do.
#
# **Here.** LoCoMo, every question, the fold-trained reranker (`auto`). K ∈ {1, 10, 30, 50, 100} (capped by the
# number of training queries in small runs), both rules, under the paper protocol (the reference's) and the
# held-out protocol (clusters and burn-in on one half of the conversations, frozen evaluation on the other half,
# both ways), several seeds (schedule, k-means and the conversation split: each seed draws its own halves). Query cues (k-means on the training queries, as the reference)
# vs entry cues (k-means on the corpus turn embeddings; a query's cue is its nearest entry centroid).
# CIs: bootstrap over queries of the per-query seed mean; spread: sd of the per-seed mean delta.
#
# Heavy step: the candidate pools (`lethe-lab systems locomo` builds and caches them); the replays need no model.

# %% tags=["parameters"]
dataset = "locomo"
reranker = "auto"
backend = "auto"
conversations = None
limit_queries = None
seeds = 5
burn_in = None
ks = (1, 10, 30, 50, 100)
rules = ("uniform", "gap")
verdict_rule = "uniform"  # the paper's K table uses the original rule
verdict_k = 30

# %%
import pandas as pd

from IPython.display import Markdown

from lethe_core.util import figures
from lethe_core.report.checkpoints import Finding, fmt_ci, relative_effect, replay_claim
from lethe_core.experiments import rif_sweep as rs
from lethe_core.experiments.rif import PAPER_SEED, RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.results.analysis import replay_example

figures.setup_notebook()
data = DataSpec(dataset=dataset, reranker=reranker, backend=backend, conversations=conversations, limit_queries=limit_queries,
                progress=False)
ctx, info = RIFExperiment(data, burn_in=burn_in).context(entries=True)
protocols = ("paper", "heldout")
seed_list = [PAPER_SEED + s for s in range(seeds)]
k_list = rs.feasible_ks(ks, ctx, protocols, seed_list)
arms = rs.cluster_arms(k_list, rules, ("query", "entry"))
replays = rs.replay(ctx, arms, protocols, seed_list, info["burn_in"])
meta = pd.DataFrame([{"arm": a.name, "K": a.k, "rule": a.rule, "cues": "global" if a.k == 1 else a.cues} for a in arms])
table = rs.delta_table(replays.rows).merge(meta, on="arm")
print(f"{len(ctx.pools.query_ids)} queries, reranker {info['reranker']}, burn-in {info['burn_in']}, seeds {seed_list}, K {k_list}")

# %% [markdown]
# ## Δ NDCG@10 against K (query clusters)
#
# K = 1 is global RIF. Each line is one protocol and rule; the band is the 95 % CI over queries.

# %%
curve = table[table["cues"] != "entry"].assign(series=lambda f: f["protocol"] + " / " + f["rule"]).sort_values(["series", "K"])
display(curve[["protocol", "rule", "K", "value", "delta", "lo", "hi", "seed_sd"]].round(4))
figures.line_ci(curve, "K", "delta", "lo", "hi", "Clustered RIF: Δ NDCG@10 vs number of query clusters K",
                "K (query clusters; 1 = global)", "Δ NDCG@10 vs baseline (95 % CI over queries)", color="series")

# %% [markdown]
# ## Query cues vs entry cues
#
# Same K, same rule: clusters fit on the training queries vs on the corpus turns. Paired contrasts below are
# query − entry on the same queries and seeds.

# %%
both = table[table["K"] > 1].assign(series=lambda f: f["protocol"] + " / " + f["cues"])
for r in rules:
    display(both[both["rule"] == r].pivot_table(index="K", columns=["protocol", "cues"], values="delta").round(4))
figures.bar_ci(both[both["rule"] == verdict_rule].assign(K=lambda f: f["K"].astype(str)), "K", "delta", "lo", "hi",
               f"Query- vs entry-based clusters ({verdict_rule} rule): Δ NDCG@10", "K (clusters)",
               "Δ NDCG@10 vs baseline (95 % CI over queries)", color="series", reference=0.0, reference_label="baseline")

# %%
contrasts = []
for protocol in protocols:
    for r in rules:
        for k in [k for k in k_list if k > 1]:
            contrasts.append(rs.paired_contrast(replays.rows, f"clustered{k}-{r}", f"entry{k}-{r}", protocol))
            contrasts.append(rs.paired_contrast(replays.rows, f"clustered{k}-{r}", f"global-{r}", protocol))
contrasts = pd.DataFrame(contrasts)
display(contrasts.round(4))

# %% [markdown]
# ## Seed spread and suppression

# %%
per_seed = (rs.per_query_delta(replays.rows).merge(meta, on="arm").groupby(["protocol", "arm", "K", "rule", "cues", "seed"])["delta"]
            .mean().reset_index())
display(per_seed.groupby(["protocol", "rule", "cues", "K"])["delta"].agg(["mean", "std", "min", "max"]).round(4))
supp = (replays.suppressed.groupby(["protocol", "arm", "seed"])["entries"].sum().groupby(["protocol", "arm"]).agg(["mean", "std"])
        .reset_index().merge(meta, on="arm"))
display(supp.round(0))

# %% [markdown]
# Why it differs from the reference: under the paper protocol the clusters and the burn-in both come from the
# evaluated questions, so a cluster's list holds the distractors of exactly those questions; held out, a cluster
# of the other conversations' questions carries their distractors, which are other turns. On LoCoMo the trained
# reranker already ranks most relevant turns in its top 10, so there is less left for suppression to fix than with
# the MS MARCO MiniLM on LongMemEval. Entry cues group turns by content rather than by what questions ask for, the
# post-submission note's explanation of its small entry-based gain.

# %% [markdown]
# ## One question, before and after suppression
#
# The verdict arm held out, first seed: the question whose NDCG@10 it changed most against the baseline. The table
# lists its relevant turns, the turns its cluster's suppression pushed out of (or pulled into) the reranker's pool,
# and the penalised turns that held a baseline pool slot, each with its rank before → after; the sentence follows the
# relevant turn.

# %%
k_v = verdict_k if verdict_k in k_list else max(k for k in k_list if k > 1)
arm_v = f"clustered{k_v}-{verdict_rule}"
example = replay_example(ctx, next(a for a in arms if a.name == arm_v), replays.rows, "heldout", seed_list[0], info["burn_in"])
display(Markdown(example.sentence))
display(example.table)

# %% [markdown]
# ## Verdict

# %%
def row(protocol, arm):
    return table[(table["protocol"] == protocol) & (table["arm"] == arm)].iloc[0]


def contrast(protocol, a, b):
    return contrasts[(contrasts["protocol"] == protocol) & (contrasts["a"] == a) & (contrasts["b"] == b)].iloc[0]


# The reference's CK12 table (LongMemEval S, 5,000 burn-in, 500 queries): baseline, global and K = 30 NDCG@10.
REF = {"baseline": 0.2960, "global": 0.2993, "clustered30": 0.3132}
held, paper = row("heldout", arm_v), row("paper", arm_v)
vs_global = contrast("heldout", arm_v, f"global-{verdict_rule}")
vs_entry = contrast("heldout", arm_v, f"entry{k_v}-{verdict_rule}")
best = table[(table["protocol"] == "paper") & (table["K"] > 1)].sort_values("delta").iloc[-1]
base = {p: row(p, arm_v)["value"] - row(p, arm_v)["delta"] for p in protocols}  # the baseline's mean on the same queries
# Primary: clustered RIF against the baseline on held-out questions, at least half the reference's relative gain. Beating
# global RIF is secondary (it can hold while both lose to the baseline); query − entry cues: direction only, the
# reference's +9.5 % vs +1.8 % comes from its production system, another setting.
Finding.from_claims(
    replay_claim(replays.rows, arm_v, "heldout", f"{arm_v} − baseline NDCG@10, held-out",
                 reference=relative_effect(REF["clustered30"], REF["baseline"], base["heldout"])),
    [replay_claim(replays.rows, arm_v, "paper", f"{arm_v} − baseline NDCG@10, paper protocol",
                  reference=relative_effect(REF["clustered30"], REF["baseline"], base["paper"])),
     replay_claim(replays.rows, arm_v, "heldout", f"{arm_v} − global-{verdict_rule} NDCG@10, held-out", baseline=f"global-{verdict_rule}",
                  reference=relative_effect(REF["clustered30"], REF["baseline"], base["heldout"], against=REF["global"])),
     replay_claim(replays.rows, arm_v, "heldout", f"query − entry clusters (K={k_v}) NDCG@10, held-out",
                  baseline=f"entry{k_v}-{verdict_rule}", kind="direction")],
    checkpoint=12, title="Clustered RIF",
    claim=f"Per-cluster suppression (K = {k_v}, {verdict_rule} rule) beats the baseline and global RIF, and query-based clusters beat entry-based ones.",
    reference="LongMemEval S: K=30 0.3132 vs baseline 0.2960 (+5.8 %), global +1.1 %; production: query-based +9.5 % vs entry-based +1.8 %",
    ours=f"{dataset}: {arm_v} Δ {fmt_ci(held['delta'], (held['lo'], held['hi']))} held-out, {fmt_ci(paper['delta'], (paper['lo'], paper['hi']))} "
         f"paper protocol; vs global {vs_global['delta']:+.4f} [{vs_global['lo']:+.4f}, {vs_global['hi']:+.4f}]; query − entry "
         f"{vs_entry['delta']:+.4f} [{vs_entry['lo']:+.4f}, {vs_entry['hi']:+.4f}] (held-out); best paper-protocol arm {best['arm']} {best['delta']:+.4f}",
    numbers={"heldout": held["delta"], "heldout_ci": [held["lo"], held["hi"]], "paper": paper["delta"], "paper_ci": [paper["lo"], paper["hi"]],
             "vs_global": vs_global["delta"], "vs_global_ci": [vs_global["lo"], vs_global["hi"]], "query_minus_entry": vs_entry["delta"],
             "query_minus_entry_ci": [vs_entry["lo"], vs_entry["hi"]], "k": k_v, "ks": k_list, "n_queries": len(ctx.pools.query_ids),
             "reranker": info["reranker"], "deltas": {f"{r.protocol}/{r.arm}": r.delta for r in table.itertuples()}},
    parameters={"dataset": dataset, "reranker": reranker, "backend": backend, "conversations": conversations, "limit_queries": limit_queries,
                "seeds": seeds, "burn_in": info["burn_in"], "ks": list(ks), "rules": list(rules), "verdict_rule": verdict_rule},
)
