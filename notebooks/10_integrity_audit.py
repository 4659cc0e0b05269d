# %% [markdown]
# # Checkpoint 10 — Integrity audit
#
# **Claim.** Under one evaluation — the same queries, the same qrels, exactly 10 results from every system, nothing
# tuned on the evaluation — hybrid retrieval reranked by the cross-encoder ("hybrid+xenc": both legs' top-30, the
# union reranked) is the best system, and its figure is that system alone.
#
# **Reference.** LongMemEval S, 200 queries sampled with `default_rng(0)`, top-10 from every system, `lower().split()`:
# vector 0.1376, BM25 0.2420, RRF 0.2171, vector+xenc 0.2425, **hybrid+xenc 0.3680** (regex re-run 0.3817). Its
# checks are claimed in prose; the "RRF+xenc also gives 0.3680" check is not in the committed script, and no check
# covers the labels themselves.
#
# **Here.** LoCoMo, every question. The checks are code (`lethe_core.experiments.integrity.integrity_checks`): every
# stored metric is recomputed from each system's returned list and the dataset's own qrels, list lengths and
# duplicates are counted, and the fold manifest is read to confirm that no question was scored by a model that saw
# its conversation. Beside NDCG@10 and Recall@10 we report what LoCoMo papers publish (hit@1/5/10, all-evidence
# recall@10, MRR@10). Two protocol changes that peers make are run on the same questions: a per-conversation pool
# (each question searches only its own conversation, as LoCoMo's own retrieval code does; `PipelineConfig(scope=
# "conversation")`) and audited labels (`locomo-audited`: 156 audited questions, 93 relevant-turn sets corrected,
# one question left without evidence). `control` is the reference's hybrid+xenc (the whole union reranked);
# `full` is the paper's pipeline (RRF top-30 reranked).
#
# Heavy step: three sets of pools (global, per-conversation, audited labels); the audited labels reuse every
# scored pair (same questions, same texts), the per-conversation pools score the new candidates once.

# %% tags=["parameters"]
dataset = "locomo"
reranker = "auto"
backend = "auto"
conversations = None
limit_queries = None
seeds = 5
burn_in = None

# %%
from dataclasses import replace

import pandas as pd

from lethe_core.util import figures

from lethe_core.measures import stats
from lethe_core.report.checkpoints import Finding, fmt_ci, paired_claim, relative_effect
from lethe_core.datasets.audit import changed_qrels
from lethe_core.experiments.integrity import audited_run, compare_runs, integrity_checks, margin_over_rest
from lethe_core.experiments.systems import PEER_METRICS, SYSTEMS, SystemsExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.retrieval.pipeline import PipelineConfig

figures.setup_notebook()
data = DataSpec(dataset=dataset, reranker=reranker, backend=backend, conversations=conversations, limit_queries=limit_queries,
                progress=False)
audited_name = "locomo-audited" if dataset == "locomo" else None
runs = {"global": audited_run(SystemsExperiment(data)),
        "per-conversation": audited_run(SystemsExperiment(replace(data, pipeline=PipelineConfig(scope="conversation"))))}
if audited_name:
    runs["audited labels"] = audited_run(SystemsExperiment(replace(data, dataset=audited_name)))
for name, r in runs.items():
    print(f"{name}: {r.summary['n_queries']} queries, reranker {r.summary['reranker']}, pool key {r.summary['pool_key']}")

# %% [markdown]
# ## The checks, in code

# %%
checks = pd.concat([integrity_checks(r.per_query, r.dataset, r.ranked, manifest=r.manifest, scope=r.scope).assign(run=name)
                    for name, r in runs.items()], ignore_index=True)
display(checks[["run", "check", "passed", "detail"]])
# The evaluation itself must be one evaluation: a run that fails these is not compared at all.
MUST = ["every system evaluated", "same queries for every system", "same qrels: every metric recomputes from the dataset's labels",
        "no turn twice in a list", "results are corpus turns", "metrics within [0, 1]"]
broken = checks[checks["check"].isin(MUST) & ~checks["passed"]]
assert broken.empty, f"integrity checks failed:\n{broken.to_string()}"
ten = checks[checks["check"] == "exactly 10 results each"].set_index("run")["passed"]
print("exactly 10 results from every system:", {k: bool(v) for k, v in ten.items()})

# %% [markdown]
# ## Every system, the metrics peers publish (global pool, original labels)

# %%
g = runs["global"]
metric_cols = ["ndcg@10", "recall@10", *PEER_METRICS]
table = g.per_query.groupby("system", sort=False)[metric_cols].mean().reindex(list(SYSTEMS))
cis = {s: stats.bootstrap_ci(g.per_query.loc[g.per_query["system"] == s, "ndcg@10"]) for s in SYSTEMS}
table["ndcg@10 CI"] = [f"[{cis[s].lo:.4f}, {cis[s].hi:.4f}]" for s in SYSTEMS]
display(table.round(4))

# %%
long = g.per_query.melt(id_vars=["query_id", "system"], value_vars=metric_cols, var_name="metric")
rows = []
for (s, m), grp in long.groupby(["system", "metric"], sort=False):
    ci = stats.bootstrap_ci(grp["value"])
    rows.append({"system": s, "metric": m, "mean": ci.mean, "lo": ci.lo, "hi": ci.hi})
metric_frame = pd.DataFrame(rows)
figures.bar_ci(metric_frame, "metric", "mean", "lo", "hi", "Every system under one evaluation: the metrics peers publish",
               "metric (top 10)", "mean over questions (95 % CI)", color="system")

# %% [markdown]
# ## Global pool vs per-conversation pool
#
# Each question's searches restricted to its own conversation (one conversation's turns instead of the whole
# corpus; the sizes are printed below): the setting of LoCoMo's own retrieval code and of most published LoCoMo
# figures. Paired over the same questions.

# %%
corpus = runs["global"].dataset.require_corpus()
sizes = pd.Series([corpus[d].conversation_id for d in range(len(corpus))]).value_counts()
print(f"global pool: {len(corpus):,} turns; one conversation: {sizes.mean():,.0f} turns on average ({sizes.min():,}–{sizes.max():,})")
scope_shift = compare_runs(runs["global"].per_query, runs["per-conversation"].per_query)
display(scope_shift.round(4))
figures.bar_ci(scope_shift, "system", "delta", "lo", "hi", "NDCG@10 change: per-conversation pool − global pool",
               "system", "ΔNDCG@10 (paired, 95 % CI)")

# %% [markdown]
# ## Original vs audited labels
#
# The same questions (one drops out: the audit leaves it without evidence), scored against the corrected evidence.
# All questions, then only the questions whose relevant-turn set changed.

# %%
if audited_name:
    changed = changed_qrels(runs["global"].dataset, runs["audited labels"].dataset)
    label_shift = compare_runs(runs["global"].per_query, runs["audited labels"].per_query)
    label_shift_changed = compare_runs(runs["global"].per_query, runs["audited labels"].per_query, query_ids=changed)
    print(f"{len(changed)} questions with a changed relevant-turn set in this run")
    display(label_shift.round(4))
    display(label_shift_changed.round(4))
    both = pd.concat([label_shift.assign(questions="all"), label_shift_changed.assign(questions="changed only")])
    fig = figures.bar_ci(both, "system", "delta", "lo", "hi", "NDCG@10 change: audited labels − original labels",
                         "system", "ΔNDCG@10 (paired, 95 % CI)", color="questions")
else:
    label_shift = label_shift_changed = pd.DataFrame()
    fig = None
fig

# %% [markdown]
# ## Is hybrid+xenc the best system, under each protocol?
#
# `control` (the reference's hybrid+xenc) and `full` (RRF top-30 reranked), each against the best *other* system of
# all six (the runner-up is computed, so `full` is control's runner-up wherever it is ahead of the rest), paired
# over questions.

# %%
REFERENCE_SET = ("vector", "bm25", "rrf", "vector_rerank", "control")
margins = []
for name, r in runs.items():
    for s in ("control", "full"):
        m = margin_over_rest(r.per_query, s, among=SYSTEMS)
        margins.append({"run": name, "system": s, "ndcg@10": m["mean"], "runner-up": m["runner_up"],
                        "runner-up ndcg@10": m["runner_up_mean"], "delta": m["delta"], "lo": m["ci"][0], "hi": m["ci"][1],
                        "p": m["p"], "best of all six": r.per_query.groupby("system")["ndcg@10"].mean().idxmax()})
margins = pd.DataFrame(margins)
display(margins.round(4))

# %% [markdown]
# Why ours may differ from the reference: LoCoMo's questions name the speakers and the events, and the fold-trained
# reranker learned LoCoMo's style; the reference's hybrid+xenc figure is a 200-query LongMemEval sample reranked by
# the MS MARCO model. A per-conversation pool is an easier task (ten times fewer distractors), so published per-conversation
# LoCoMo figures are not comparable with a global-pool figure.

# %% [markdown]
# ## Verdict

# %%
# "Best system" is a direction claim against the strongest other system of all six, `full` included (control and
# full are both a hybrid pool reranked; no size is claimed between them). Primary: the global pool; secondary: the
# per-conversation pool and the audited labels, and, as an effect, control against the best of the reference's own
# other four systems by at least half its relative margin (hybrid+xenc 0.3680 vs vector+xenc 0.2425), scaled.
def best_claim(name, among=SYSTEMS, sized=False):
    per_query = runs[name].per_query
    wide = per_query.pivot(index="query_id", columns="system", values="ndcg@10")
    m = margin_over_rest(per_query, "control", among=among)
    kind = {"reference": relative_effect(0.3680, 0.2425, m["runner_up_mean"])} if sized else {"kind": "direction"}
    return paired_claim(f"{name}: control − {m['runner_up']} NDCG@10 (the best other of {', '.join(s for s in among if s != 'control')})",
                        wide["control"] - wide[m["runner_up"]], [stats.conversation_of(q) for q in wide.index], **kind), m


best = {n: best_claim(n) for n in runs}
gsys = table["ndcg@10"]
Finding.from_claims(
    best["global"][0], [c for n, (c, _) in best.items() if n != "global"] + [best_claim("global", REFERENCE_SET, sized=True)[0]],
    checkpoint=10, title="Integrity audit",
    claim="Under one evaluation (same queries, same qrels, 10 results each, nothing tuned on it), hybrid+xenc is the best system.",
    reference="LongMemEval S, 200 q: hybrid+xenc 0.3680 vs vector 0.1376, BM25 0.2420, RRF 0.2171, vector+xenc 0.2425 "
              "(regex re-run 0.3817); checks claimed in prose",
    ours=f"{dataset}: checks in code, {int(checks['passed'].sum())}/{len(checks)} pass "
         f"(exactly 10 results: {', '.join(f'{k} {v}' for k, v in ten.items())}); global control {gsys['control']:.4f}, "
         f"full {gsys['full']:.4f}, vector_rerank {gsys['vector_rerank']:.4f}, rrf {gsys['rrf']:.4f}, bm25 {gsys['bm25']:.4f}, "
         f"vector {gsys['vector']:.4f}; control − the best other system: "
         + "; ".join(f"{n} {fmt_ci(c.delta, c.ci)} vs {m['runner_up']}" for n, (c, m) in best.items()),
    numbers={"checks": checks[["run", "check", "passed"]].to_dict("records"), "global": gsys.to_dict(),
             "peer_metrics_global": table[metric_cols].to_dict(), "margins": margins.to_dict("records"),
             "scope_shift": scope_shift.to_dict("records"), "label_shift": label_shift.to_dict("records"),
             "label_shift_changed": label_shift_changed.to_dict("records"),
             "n_queries": {n: r.summary["n_queries"] for n, r in runs.items()}, "reranker": runs["global"].summary["reranker"]},
    parameters={"dataset": dataset, "reranker": reranker, "backend": backend, "conversations": conversations,
                "limit_queries": limit_queries},
)
