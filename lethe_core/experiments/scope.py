"""Checkpoint 18 (statistics and scope): the reference's own table and buckets from its per-query arrays,
our RIF runs looked up (or run) by their parameters, and the views over them the notebook shows.

- `reference_table` / `reproduction_check`: the reference's LongMemEval table (`lethe-lab stats` on its
  per-query file, `lethe_core.measures.stats`) against the figures its CK18 write-up prints (`REFERENCE_TABLE`).
- `schedule_buckets` / `reference_buckets`: the hot / cold-seen / unseen split of those arrays, from the
  reference's burn-in schedule rebuilt with `hot_cold_schedule` (seed 42, 5,000 steps, query order = JSON order).
- `matching_run` / `load_or_run`: an existing RIF results folder made with exactly an experiment's parameters
  (same pools, protocol, seeds, burn-in, constants), else a fresh `RIFExperiment.run()`.
- `bucket_table`, `delta_ci`, `saturation_table`: per-bucket deltas with CIs, family-wise CIs, share of the
  corpus under suppression at the end of burn-in. Our runs' seeds are read as every table reads them
  (`rif.SEED_CONVENTION`): `delta_ci` on each query's seed mean; the buckets, which depend on each seed's
  burn-in stream, on the (query, seed) rows pooled over the seeds, as `rif.summarise` does.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.datasets.splits import PAPER
from lethe_core.util.paths import shared_data_dir
from lethe_core.results.runs import Run, list_runs, load_run
from lethe_core.rif.protocols import hot_cold_schedule
from lethe_core.experiments.rif import PAPER_SEED, RIFExperiment, seed_means
from lethe_core.experiments.setup import DataSpec

REFERENCE_FILE = shared_data_dir() / "lethe_per_query" / "longmemeval_rif_gap_per_query.json"
REFERENCE_ARMS = ("global-original", "global-gap", "clustered30-original", "clustered30-gap")
# The reference's "original" strength (1 - r_init/P) * sigmoid(-x) is our "uniform" rule.
OUR_ARM = {"global-original": "global-uniform", "global-gap": "global-gap",
           "clustered30-original": "clustered30-uniform", "clustered30-gap": "clustered30-gap"}

# CHECKPOINTS.md, CK18 (the reference's results/rif_gap_ci.md): config -> (delta NDCG@10, CI lo, CI hi, p).
REFERENCE_TABLE = {
    "global-original": (0.0032, -0.0097, 0.0161, 0.622),
    "global-gap": (0.0079, -0.0034, 0.0192, 0.175),
    "clustered30-original": (0.0173, 0.0063, 0.0285, 0.0017),
    "clustered30-gap": (0.0192, 0.0102, 0.0292, 0.0001),
}
REFERENCE_RECALL = {"clustered30-gap": (0.0391, 0.0001)}  # delta Recall@30, p
REFERENCE_GAP_VS_ORIG = {"ndcg": (0.0020, 0.548), "recall": (0.0112, 0.055)}  # clustered30-gap vs clustered30-original
# CK18 re-analysis: mean delta NDCG@10 per bucket; counts 100 hot / 390 cold-seen / 10 unseen.
REFERENCE_BUCKETS = {("clustered30-gap", "hot"): 0.0361, ("clustered30-gap", "cold"): 0.0154,
                     ("clustered30-gap", "unseen"): 0.0, ("global-original", "unseen"): -0.083}
REFERENCE_BUCKET_COUNTS = {"hot": 100, "cold": 390, "unseen": 10}
# CK18 NFCorpus (3,000 burn-in, 323 queries): config -> (NDCG@10, delta, p); baseline (NDCG@10, CI).
REFERENCE_NFCORPUS = {"global-original": (0.3198, -0.0264, 0.0001), "global-gap": (0.3341, -0.0121, 0.007),
                      "clustered30-original": (0.3247, -0.0215, 0.0002), "clustered30-gap": (0.3423, -0.0039, 0.199)}
REFERENCE_NFCORPUS_BASELINE = (0.3462, (0.3120, 0.3812))
REFERENCE_NFCORPUS_BUCKETS = {"hot": 0.006, "cold": -0.006, "unseen": -0.016}  # clustered30-gap
REFERENCE_SATURATION = {"nfcorpus": 0.68, "longmemeval": 0.04}  # share of the corpus with non-zero suppression

BUCKETS = ("hot", "cold", "unseen")
SCOPE_ARMS = ["global-uniform", "global-gap", "clustered30-uniform", "clustered30-gap"]  # the reference's four, our names


# --- the reference's own arrays ------------------------------------------------------------------------------

def _row(comparison: str, treatment: str, control: str, t: dict, c: dict, seed: int) -> dict:
    out = {"comparison": comparison, "treatment": treatment, "control": control,
           "ndcg": float(np.mean(t["ndcg"])), "control ndcg": float(np.mean(c["ndcg"]))}
    for metric, prefix in (("ndcg", ""), ("recall", "recall ")):
        d = stats.paired_delta_ci(t[metric], c[metric], seed=seed)
        out.update({f"{prefix}delta": d.mean, f"{prefix}lo": d.lo, f"{prefix}hi": d.hi,
                    f"{prefix}p": stats.paired_permutation_test(t[metric], c[metric], seed=seed)})
    return out


def reference_table(path: str | Path = REFERENCE_FILE, seed: int = 0) -> pd.DataFrame:
    """The reference's LongMemEval table recomputed from its per-query arrays, exactly what `lethe-lab stats`
    computes (`stats.compare_configs`): every arm vs the baseline with Holm over those arms, then the
    rank-gap rule vs the original one (global and clustered30), each a single comparison."""
    configs = stats.load_per_query_file(path)
    table = stats.compare_configs(configs, "baseline", seed=seed)
    rows = []
    for c in table["configs"]:
        if c["name"] == "baseline":
            continue
        d, dr = c["delta_ndcg"], c["delta_recall"]
        rows.append({"comparison": f"{c['name']} vs baseline", "treatment": c["name"], "control": "baseline",
                     "ndcg": c["ndcg"]["mean"], "control ndcg": configs["baseline"]["ndcg"].mean(),
                     "delta": d["mean"], "lo": d["ci"][0], "hi": d["ci"][1], "p": c["p_ndcg"], "p (Holm)": c["p_ndcg_holm"],
                     "recall delta": dr["mean"], "recall lo": dr["ci"][0], "recall hi": dr["ci"][1], "recall p": c["p_recall"]})
    for scope in ("global", "clustered30"):
        gap, orig = f"{scope}-gap", f"{scope}-original"
        if gap in configs and orig in configs:
            rows.append({**_row(f"{gap} vs {orig}", gap, orig, configs[gap], configs[orig], seed), "p (Holm)": None})
    return pd.DataFrame(rows)


def reproduction_check(table: pd.DataFrame, ci_tol: float = 0.002, delta_tol: float = 1e-4, p_tol: float = 0.02) -> pd.DataFrame:
    """Each figure the reference prints against ours: deltas to rounding, CI ends within Monte-Carlo error,
    p within `p_tol` (a printed p at the floor, 0.0001, must be < 0.001 here)."""
    by = table.set_index("comparison")
    rows = []

    def add(what, ours, theirs, tol, kind):
        ok = (ours < 0.001) if kind == "p" and theirs <= 0.0001 else abs(ours - theirs) <= tol
        rows.append({"figure": what, "theirs": theirs, "ours": float(ours), "tolerance": tol, "reproduced": bool(ok)})

    for name, (d, lo, hi, p) in REFERENCE_TABLE.items():
        r = by.loc[f"{name} vs baseline"]
        add(f"{name}: Δ NDCG@10", r["delta"], d, delta_tol, "delta")
        add(f"{name}: CI lo", r["lo"], lo, ci_tol, "ci")
        add(f"{name}: CI hi", r["hi"], hi, ci_tol, "ci")
        add(f"{name}: p", r["p"], p, p_tol, "p")
    for name, (d, p) in REFERENCE_RECALL.items():
        r = by.loc[f"{name} vs baseline"]
        add(f"{name}: Δ Recall@30", r["recall delta"], d, delta_tol, "delta")
        add(f"{name}: Recall p", r["recall p"], p, p_tol, "p")
    r = by.loc["clustered30-gap vs clustered30-original"]
    add("gap vs original (clustered30): Δ NDCG@10", r["delta"], REFERENCE_GAP_VS_ORIG["ndcg"][0], delta_tol, "delta")
    add("gap vs original (clustered30): p", r["p"], REFERENCE_GAP_VS_ORIG["ndcg"][1], p_tol, "p")
    add("gap vs original (clustered30): Δ Recall@30", r["recall delta"], REFERENCE_GAP_VS_ORIG["recall"][0], delta_tol, "delta")
    add("gap vs original (clustered30): Recall p", r["recall p"], REFERENCE_GAP_VS_ORIG["recall"][1], p_tol, "p")
    return pd.DataFrame(rows)


def schedule_buckets(n: int, steps: int, seed: int = PAPER_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Per query position: its bucket under the reference's burn-in schedule (hot: in the hot set; cold: drawn
    at least once; unseen: never drawn) and how many times the burn-in drew it."""
    schedule, hot = hot_cold_schedule(n, steps, seed)
    draws = np.bincount(schedule, minlength=n)
    bucket = np.where(np.isin(np.arange(n), hot), "hot", np.where(draws > 0, "cold", "unseen")).astype(object)
    return bucket, draws


def reference_buckets(path: str | Path = REFERENCE_FILE, seed: int = PAPER_SEED, steps: int | None = None,
                      baseline: str = "baseline", ci_seed: int = 0) -> pd.DataFrame:
    """Mean delta NDCG@10 of every reference config per bucket, with paired bootstrap CIs.

    The schedule is rebuilt from `seed` over the file's query order (its JSON order: the reference drew
    positions of its query list); `steps` defaults to the file's `meta.burn_in` (5,000)."""
    from lethe_core.datasets.errors import read_json

    configs = stats.load_per_query_file(path)
    if steps is None:
        steps = int((read_json(Path(path)).get("meta") or {}).get("burn_in", 5000))
    n = len(configs[baseline]["ndcg"])
    bucket, draws = schedule_buckets(n, steps, seed)
    base = configs[baseline]["ndcg"]
    rows = []
    for name, arrays in configs.items():
        if name == baseline:
            continue
        for b in BUCKETS:
            mask = bucket == b
            if not mask.any():
                continue
            d = stats.paired_delta_ci(arrays["ndcg"][mask], base[mask], seed=ci_seed)
            rows.append({"config": name, "bucket": b, "n": int(mask.sum()), "draws per query": float(draws[mask].mean()),
                         "baseline ndcg": float(base[mask].mean()), "delta": d.mean, "lo": d.lo, "hi": d.hi})
    return pd.DataFrame(rows)


# --- our runs ----------------------------------------------------------------------------------------------------

_COMPARED = ("dataset", "path", "protocol", "ks", "bootstrap", "alpha", "eta", "decay", "eager_decay", "second_stage",
             "calibration", "limit_queries", "conversations", "snapshot_every")  # the pipeline: through the pool key
# Options RIFExperiment gained after runs were published (cap, reinforce, ...): a folder that does not record one
# was made before it existed, i.e. with its default, so it matches only an experiment left at that default.
_OPTIONAL = ("cap", "reinforce")


def _plain(value):
    return json.loads(json.dumps(value, default=str))


def expected_config(exp: RIFExperiment) -> dict:
    """What `exp.run()` would record for the fields that decide its numbers (pool key, burn-in and seeds resolved).
    Loads the dataset and resolves the reranker (no pool is built)."""
    loaded = exp.data.load()
    ds = loaded.dataset
    mine = {k: v for k, v in exp.flat_config().items() if k in _COMPARED or k in _OPTIONAL}
    mine["burn_in"] = exp.resolved_burn_in(ds)
    mine["seeds"] = exp.seed_list()
    mine["pool_key"] = loaded.builder.key
    mine["dataset_fingerprint"] = ds.fingerprint
    return _plain(mine)


def matching_run(exp: RIFExperiment, results_root: str | Path | None = None) -> Run | None:
    """The newest loadable results folder made with `exp`'s parameters and pools, holding at least its arms."""
    runs, _ = list_runs(results_root)
    if not runs:
        return None
    want = expected_config(exp)
    defaults = {f.name: f.default for f in fields(RIFExperiment) if f.name in _OPTIONAL}
    arms = set(a.name for a in exp.arm_list())
    for run in runs:
        c = _plain(run.config)
        c.update({k: _plain(d) for k, d in defaults.items() if k not in c})
        if any(c.get(k) != v for k, v in want.items()):
            continue
        if arms <= set(run.arms):
            return run
    return None


def load_or_run(exp: RIFExperiment, results_root: str | Path | None = None) -> tuple[Run, bool]:
    """(run, reused): an existing matching folder, else `exp.run()` (writes data/results/<run id>/)."""
    found = matching_run(exp, results_root)
    if found is not None:
        return found, True
    summary = exp.run(Path(results_root) if results_root else None)
    return load_run(summary["results_dir"]), False


def nfcorpus_experiment(reranker: str, backend: str, seeds: int, burn_in: int | None, small: bool,
                        small_queries: int = 40) -> RIFExperiment:
    """The reference's four NFCorpus arms (plus baseline) under the paper protocol. `small`: the first
    `small_queries` queries, the hashing encoder and no query map, so a test run costs seconds."""
    from lethe_core.retrieval.pipeline import PipelineConfig

    data = DataSpec(dataset="nfcorpus", reranker=reranker, backend=backend, progress=False)
    if small:
        data = replace(data, limit_queries=small_queries, pipeline=PipelineConfig(encoder="test:hash"))
    return RIFExperiment(data, protocol=PAPER, arms=list(SCOPE_ARMS), seeds=seeds, burn_in=burn_in, map=not small)


def _paired(run: Run, arm: str, baseline: str = "baseline") -> pd.DataFrame:
    """The arm's (query, seed) rows beside the baseline's NDCG@10 on the same query, seed and split."""
    pq = run.per_query
    key = ["seed", "query_id", "split"]
    mine = pq[pq["arm"] == arm].set_index(key)
    base = pq[pq["arm"] == baseline].set_index(key)["ndcg@10"].reindex(mine.index)
    return mine.assign(baseline=base.to_numpy()).reset_index()


def delta_ci(run: Run, arm: str, level: float = 0.95, baseline: str = "baseline") -> stats.Interval:
    """Paired bootstrap CI at `level` of the arm's delta NDCG@10 vs the baseline over queries, each query's NDCG@10
    averaged over the seeds (`rif.SEED_CONVENTION`, as the run's summary); a family-wise level (1 - 0.05 / m,
    Bonferroni) makes it the interval that matches a correction over m arms."""
    pq = run.per_query
    mine = seed_means(pq[pq["arm"] == arm], "ndcg@10")
    base = seed_means(pq[pq["arm"] == baseline], "ndcg@10").reindex(mine.index)
    return stats.paired_delta_ci(mine.to_numpy(), base.to_numpy(), seed=run.summary["seeds"][0], level=level)


def bucket_table(run: Run, arms: list[str] | None = None, baseline: str = "baseline") -> pd.DataFrame:
    """Per arm and bucket (paper protocol: hot / cold / unseen): rows, queries, delta NDCG@10 with a paired 95 % CI.

    A query's bucket depends on its seed's burn-in stream, so a query has no one bucket to average its seeds in: the
    (query, seed) rows are pooled over the seeds (the mean `rif.summarise` reports), and the CI resamples queries with
    their rows in the bucket (`stats.hierarchical_paired_ci` grouped by query), since one query's seeds are not
    independent draws."""
    arms = arms or [a for a in run.arms if a != baseline]
    rows = []
    for arm in arms:
        df = _paired(run, arm, baseline)
        for b in BUCKETS:
            g = df[df["bucket"] == b]
            if g.empty:
                continue
            d = stats.hierarchical_paired_ci(g["ndcg@10"].to_numpy(), g["baseline"].to_numpy(), g["query_id"].astype(str).to_numpy(),
                                             seed=run.summary["seeds"][0])
            rows.append({"arm": arm, "bucket": b, "n": len(g), "queries": int(g["query_id"].nunique()),
                         "baseline ndcg": float(g["baseline"].mean()), "delta": d.mean, "lo": d.lo, "hi": d.hi})
    return pd.DataFrame(rows)


def corpus_size(run: Run) -> int:
    from lethe_core.datasets import load_dataset

    c = run.config
    return len(load_dataset(c["dataset"], c["path"], c["conversations"], c["limit_queries"]).require_corpus())


def saturation_table(run: Run, n_entries: int | None = None) -> pd.DataFrame:
    """Per RIF arm (and split): share of the corpus with non-zero suppression in at least one cluster at the end of
    burn-in (`docs` / corpus size, the seeds' mean as the experiment's summary records it), its (cluster, entry) pairs,
    and the same share at the last snapshot (`analysis.saturation`; the snapshots are the first seed's, so it equals
    that seed's share when the burn-in is a multiple of the snapshot step)."""
    from lethe_core.results.analysis import saturation

    n_entries = n_entries or corpus_size(run)
    rows = [{"arm": a["name"], "split": split, "docs": float(v["docs"]), "entries": float(v["entries"]), "share_of_corpus": v["docs"] / n_entries}
            for a in run.summary["arms"] for split, v in (a["suppressed_entries"] or {}).items()]
    out = pd.DataFrame(rows, columns=["arm", "split", "docs", "entries", "share_of_corpus"])
    sat = saturation(run, n_entries)
    if sat.empty:
        return out.assign(snapshot_step=pd.NA, snapshot_share=float("nan"))
    last = sat.loc[sat.groupby(["arm", "split"])["step"].idxmax(), ["arm", "split", "step", "share_of_corpus"]]
    last = last.rename(columns={"step": "snapshot_step", "share_of_corpus": "snapshot_share"})
    out = out.merge(last, on=["arm", "split"], how="left")
    out["snapshot_share"] = out["snapshot_share"].astype(float)
    return out
