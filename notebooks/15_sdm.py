# %% [markdown]
# # Checkpoint 15 — Sparse distributed memory
#
# **Claim.** A Kanerva sparse distributed memory over binary addresses of MiniLM embeddings does not beat plain
# FAISS inner-product search for episodic recall (a negative result): P@1 overall SDM 0.225, SDM + clean-up 0.084,
# FAISS 0.621.
#
# **Reference.** A synthetic episodic benchmark (50 families × 5 siblings over trip / meeting / purchase /
# preference events → 250 events; one query per event and noise mode → 1,000 queries), 512-bit addresses from
# random Gaussian hyperplanes (seed 42), 8,000 hard locations, 10 activated by Hamming distance, int16 counters,
# read-out ranked by Hamming similarity; clean-up re-feeds the read-out up to 3 times. One seed. **Flaws:** the
# generator makes duplicate event texts (233 distinct of 250, so FAISS's 233/250 on the exact-query check is the
# ceiling), partial and fragment queries that cannot tell their target from its siblings (P@1 ceiling ≈ 0.45),
# colliding family keys (sibling confusion judged on merged families) and substring synonym swaps ("on" inside
# "London").
#
# **Here.** The benchmark is regenerated from its description in `lethe_core.datasets.episodic` with the flaws
# repaired (unique texts, whole-word swaps, one key per family) and, beside it, a *faithful* generator that keeps
# them (same random draws otherwise); every score sits next to the **achievable P@1 ceiling** of its queries
# (mean of 1/|C(q)|, C(q) = the events agreeing with the query on every attribute it reveals; docs/sdm.md).
# Methods (`lethe_core.mechanisms.sdm`, `lethe_core.experiments.sdm_study`): FAISS IndexFlatIP, the binary addresses alone
# (no memory), SDM, SDM + clean-up, on the same bundled MiniLM vectors; `seeds` seeds of the generator and the
# hyperplanes, bootstrap CIs over queries and t-intervals over seeds, paired tests SDM − FAISS.
# `dataset`, `reranker`, `backend`, `conversations`, `limit_queries` and `burn_in` are declared for the common
# interface and not used (no cross-encoder, no LoCoMo). Cost of the full run: embedding about 5,400 short
# texts once (2–3 min of CPU here; cached afterwards) plus ≈ 3 s of SDM per seed and generator. With fewer
# than 3 seeds (the tests' small parameters) the notebook runs a smoke configuration: one benchmark of 20 families (100 events, 400
# queries; `benchmark_seeds`, `families` below), whose numbers are not the study's.

# %% tags=["parameters"]
dataset = "episodic"
reranker = "auto"
backend = "auto"
conversations = None
limit_queries = None
seeds = 5
burn_in = None
benchmark_seeds = None  # generator seeds; None: one per seed (with 3 seeds or more), else 1 (the smoke run)
families = None  # None: 50 (the reference's 250 events), 20 in the smoke run (seeds < 3)
faithful = "first"  # also run the reference's flawed generator: "none" | "first" (first seed) | "all"

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown

from lethe_core.util import figures
from lethe_core.report.checkpoints import Claim, Finding, fmt_ci, relative_effect
from lethe_core.datasets.episodic import MODES, SYNONYMS, episodic_benchmark, swap_synonyms
from lethe_core.experiments.sdm_study import SDMExperiment

figures.setup_notebook()
smoke = seeds < 3  # too few seeds for a useful CI over seeds: the tests' small run, on a smaller benchmark
n_bench = benchmark_seeds if benchmark_seeds is not None else (1 if smoke else seeds)
n_families = families if families is not None else (20 if smoke else 50)
summary = SDMExperiment(seeds=seeds, benchmark_seeds=n_bench, n_families=n_families, faithful=faithful,
                        progress=False).run()
table = pd.DataFrame(summary["table"])
paired = pd.DataFrame(summary["paired"])
print(f"{seeds} seeds ({n_bench} generator seeds), {n_families} families ({5 * n_families} events, "
      f"{20 * n_families} queries){' — SMOKE RUN, not the study' if smoke else ''}; results folder {Path(summary['results_dir']).name}")

# %% [markdown]
# ## The benchmark: the reference's flaws, measured
#
# Counts for the first seed (42, the reference's), fixed vs faithful generator. `ceiling` is the achievable P@1
# (mean 1/|C(q)|); `text ceiling` is the weaker bound from identical query texts alone (the reference's
# "113 distinct texts for 250 targets").

# %%
audit = []
for name, b in summary["benchmarks"].items():
    variant, seed = name.rsplit("-", 1)
    row = {"generator": variant, "seed": int(seed), "distinct event texts": b["distinct_event_texts"],
           "duplicate groups": b["duplicate_groups"], "events in them": b["events_in_duplicate_groups"],
           "family keys": b["family_keys"], "largest key (events)": b["largest_family_key"]}
    for mode in MODES:
        m = b["modes"][mode]
        row[f"{mode}: distinct / ceiling / text ceiling"] = f"{m['distinct_texts']} / {m['ceiling']:.3f} / {m['text_ceiling']:.3f}"
    audit.append(row)
display(pd.DataFrame(audit).sort_values(["seed", "generator"]).set_index(["generator", "seed"]).T)
print("reference (faithful, seed 42): 233 distinct event texts (16 groups, 33 events), 45 family keys "
      "(sizes up to 20), partial and fragment 113 distinct query texts (ceiling ≈ 0.452)")

# %% [markdown]
# Substring synonym swaps (the faithful generator) against whole-word swaps, on texts where they differ:

# %%
fixed0, faithful0 = episodic_benchmark(42, n_families), episodic_benchmark(42, n_families, faithful=True)
broken = [(a.text, b.text) for a, b in zip(fixed0.queries, faithful0.queries)
          if a.mode == "paraphrase" and a.target == b.target and a.text != b.text
          and fixed0.events[fixed0.event_index()[a.target]].text == faithful0.events[faithful0.event_index()[b.target]].text]
display(pd.DataFrame(broken[:6], columns=["whole-word swaps (fixed)", "substring swaps (faithful)"]))
print(f"{len(broken)} of {len(fixed0.events)} paraphrase queries differ only by the substring bug; e.g. "
      f"{swap_synonyms('I had a meeting in London', SYNONYMS, faithful=True)!r}")

# %% [markdown]
# ## The reference's figures

# %%
reference = pd.DataFrame({"mode": ["partial", "paraphrase", "fragment", "noisy", "overall"],
                          "sdm": [0.132, 0.476, 0.088, 0.204, 0.225], "sdm_cleanup": [0.064, 0.176, 0.036, 0.060, 0.084],
                          "faiss": [0.344, 0.900, 0.348, 0.892, 0.621]})
display(reference.set_index("mode"))
print("exact-query sanity (hits of 250): SDM 206, SDM + clean-up 65, FAISS 233")

# %% [markdown]
# ## Ours: P@1 per noise mode and method, with the ceiling beside each
#
# Fixed generator, every seed. `p@1_lo/hi`: bootstrap over query positions (each position's mean over seeds);
# `p@1_seed_lo/hi`: t-interval over the seeds' means (NaN with one seed); `share_of_ceiling` = P@1 / ceiling.

# %%
fixed = table[table["variant"] == "fixed"]
cols = ["mode", "method", "p@1", "p@1_lo", "p@1_hi", "p@1_seed_lo", "p@1_seed_hi", "ceiling", "share_of_ceiling",
        "text_ceiling", "r@5", "r@10", "sibling_confusion", "n_queries", "n_seeds"]
display(fixed[cols].round(3))


# %%
def bars(frame, title, y="p@1"):
    fig = figures.bar_ci(frame, "mode", y, f"{y}_lo", f"{y}_hi", title, "noise mode",
                         f"{y.upper()} (mean over queries and seeds, 95 % CI)", color="method")
    ceil = frame.drop_duplicates("mode")
    fig.add_scatter(x=ceil["mode"], y=ceil["ceiling"], mode="markers", name="achievable P@1 ceiling",
                    marker=dict(symbol="line-ew", size=70, line=dict(width=3, color="black")))
    return fig


bars(fixed, "P@1 by noise mode: FAISS vs binary addresses vs SDM (fixed benchmark)")

# %%
figures.bar_ci(fixed, "mode", "sibling_confusion", "sibling_confusion_lo", "sibling_confusion_hi",
               "Sibling confusion: top-1 is another event of the target's family", "noise mode",
               "share of queries (95 % CI)", color="method")

# %% [markdown]
# ## Paired tests: each memory method minus FAISS (P@1, fixed benchmark)

# %%
display(paired.round(4))
figures.bar_ci(paired, "mode", "delta", "lo", "hi", "Paired P@1 difference against FAISS", "noise mode",
               "ΔP@1 vs FAISS (paired, 95 % CI)", color="method")

# %% [markdown]
# ## The exact-query sanity check and the faithful generator
#
# Events found at rank 1 from their own text (of 250 in the full run), against the reference's 233 / 206 / 65. On the faithful
# benchmark the ceiling is the number of distinct texts: FAISS's "233/250" was the ceiling, not a miss.

# %%
exact = pd.DataFrame(summary["exact"])
display(exact.pivot_table(index=["variant", "seed_index"], columns="method", values="hits").join(
    exact.drop_duplicates(["variant", "seed_index"]).set_index(["variant", "seed_index"])["ceiling"]))

# %%
first = table[table["variant"] == "faithful"]
if len(first):
    view = first[first["method"].isin(["faiss", "sdm", "sdm_cleanup"])].pivot(index="mode", columns="method", values="p@1")
    display(view.join(reference.set_index("mode").add_suffix(" (reference)")).join(
        first.drop_duplicates("mode").set_index("mode")["ceiling"]).round(3))
    display(bars(first, "P@1 on the faithful (flawed) generator, first seed"))

# %% [markdown]
# ## Clean-up convergence
#
# Reads per query (the plain read counts as one; at most 3) and the share of queries whose read-out settled
# (≤ 5 bits changed) before the cap.

# %%
display(pd.DataFrame(summary["cleanup"]))

# %% [markdown]
# **Reading.** The SDM's read-out sums the counters of the few activated hard locations (their numbers are in the
# header), which other memories written to the same locations share, so it can land farther from its own address
# than the cue itself was, and each clean-up re-feed can drift further (the convergence table above). The binary
# addresses alone, ranked by Hamming distance with no memory in between, separate the binarisation from the memory's
# read. Partial and fragment queries cannot tell their target from its siblings, so P@1 there is read against the
# ceiling, not against 1. The lines below state where each method stands in this run. On the faithful generator,
# duplicate texts lower every ceiling and merged family keys inflate sibling confusion (the tables above).

# %%
pv = fixed.pivot(index="mode", columns="method", values="p@1")
ceiling = fixed.drop_duplicates("mode").set_index("mode")["ceiling"]
modes = [m for m in MODES if m in pv.index]
below = [m for m in modes if pv.loc[m, "sdm"] < pv.loc[m, "faiss"]]
worse = [m for m in modes if pv.loc[m, "sdm_cleanup"] < pv.loc[m, "sdm"]]
at_ceiling = [m for m in modes if pv.loc[m, "faiss"] >= ceiling[m] - 0.01]
display(Markdown(
    f"SDM is below FAISS in {len(below)} of {len(modes)} noise modes, and the clean-up below the plain SDM read in {len(worse)}. "
    f"The binary addresses alone stay within {(pv.loc[modes, 'faiss'] - pv.loc[modes, 'binary']).abs().max():.3f} of FAISS's P@1 "
    f"in every mode, while the SDM read is {(pv.loc[modes, 'faiss'] - pv.loc[modes, 'sdm']).min():+.3f} to "
    f"{(pv.loc[modes, 'faiss'] - pv.loc[modes, 'sdm']).max():+.3f} below it. FAISS is within 0.01 of the achievable ceiling on "
    f"{', '.join(at_ceiling) or 'no mode'}; ceilings: " + ", ".join(f"{m} {ceiling[m]:.2f}" for m in modes) + "."))

# %% [markdown]
# ## Verdict
#
# The claim is negative, an effect of a stated size: SDM's P@1 below FAISS's (overall, the four noise modes pooled) by at
# least half the reference's relative shortfall, scaled to our FAISS P@1. Primary: the plain read; secondary: the
# clean-up. The CI is over query positions (P@1 averaged over seeds); the benchmark has no conversations.

# %%
p = paired.set_index(["method", "mode"])
rows = fixed.set_index(["mode", "method"])
ov = {m: rows.loc[("overall", m)] for m in ("faiss", "binary", "sdm", "sdm_cleanup")}
ref_overall = reference.set_index("mode").loc["overall"]
claims = [Claim(f"{m} − FAISS overall P@1", p.loc[(m, "overall"), "delta"], (p.loc[(m, "overall"), "lo"], p.loc[(m, "overall"), "hi"]),
                direction=-1, reference=relative_effect(ref_overall[m], ref_overall["faiss"], ov["faiss"]["p@1"]),
                unit="query positions (mean over seeds)") for m in ("sdm", "sdm_cleanup")]
Finding.from_claims(
    claims[0], claims[1:], checkpoint=15, title="Sparse distributed memory",
    claim="A Kanerva SDM over 512-bit hyperplane addresses of MiniLM embeddings (with or without clean-up) does not "
          "beat FAISS inner product on episodic recall: its P@1 is lower.",
    reference="synthetic episodic benchmark (flawed generator, one seed): P@1 overall SDM 0.225, + clean-up 0.084, "
              "FAISS 0.621; exact-query hits SDM 206, clean-up 65, FAISS 233 of 250",
    ours=f"fixed benchmark ({5 * n_families} events), {seeds} seeds{' (smoke run)' if smoke else ''}: P@1 overall " + ", ".join(
        f"{m} {fmt_ci(ov[m]['p@1'], (ov[m]['p@1_lo'], ov[m]['p@1_hi']), 3)}" for m in ov)
         + f" (achievable ceiling {ov['faiss']['ceiling']:.3f}); SDM − FAISS {p.loc[('sdm', 'overall'), 'delta']:+.3f} "
         f"[{p.loc[('sdm', 'overall'), 'lo']:+.3f}, {p.loc[('sdm', 'overall'), 'hi']:+.3f}], p (Holm) = "
         f"{p.loc[('sdm', 'overall'), 'p_holm']:.4f}",
    numbers={"overall": {m: {k: ov[m][k] for k in ("p@1", "p@1_lo", "p@1_hi", "r@10", "sibling_confusion", "ceiling")}
                         for m in ov},
             "per_mode_p1": {f"{mode}/{m}": rows.loc[(mode, m), "p@1"] for mode in MODES for m in ov},
             "ceilings": {mode: rows.loc[(mode, "faiss"), "ceiling"] for mode in (*MODES, "exact")},
             "paired": paired.to_dict(orient="records"), "exact": exact.to_dict(orient="records"),
             "benchmark_seeds": n_bench, "n_families": n_families, "smoke": smoke},
    parameters={"dataset": dataset, "reranker": reranker, "backend": backend, "seeds": seeds,
                "benchmark_seeds": n_bench, "families": n_families, "faithful": faithful},
)
