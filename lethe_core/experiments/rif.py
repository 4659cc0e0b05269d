"""`lethe-lab rif run`: RIF arms x protocol x seeds replayed from cached pools, written to results/<run>/.

Results folder (schema in lethe_core/results/runs.py): config.json, per_query.parquet,
snapshots.parquet (suppression every `snapshot_every` steps, first seed only), summary.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.datasets import Dataset
from lethe_core.datasets.splits import HELDOUT, PAPER, PREQUENTIAL, check_protocol
from lethe_core.results.runs import SCHEMA_VERSION
from lethe_core.results.store import digest, slug, write_json, write_parquet, write_summary
from lethe_core.retrieval.pipeline import corpus_vectors, query_vectors
from lethe_core.rif.protocols import PROTOCOLS, ReplayContext, run_heldout, run_paper, run_prequential
from lethe_core.rif.replay import Arm, entry_arms, standard_arms
from lethe_core.rif.state import CAP, WINNER_RELIEF, RIFParams
from lethe_core.experiments.setup import DataStudy, Loaded
from lethe_core.util.jit import umap_module

PAPER_SEED = 42
# Options added after runs were published: left out of the run-id hash while at their defaults, so every
# earlier run keeps its id (and regenerating it replaces its folder instead of writing a second one).
_HASH_OPTIONAL = {"cap": CAP, "reinforce": WINNER_RELIEF}


@dataclass
class RIFExperiment(DataStudy):
    protocol: str = PAPER
    arms: list[str] | None = None  # names from standard_arms(ks); None = all
    ks: tuple[int, ...] = (10, 30, 50, 100)
    seeds: int = 5  # seeds 42, 43, ...; 42 is the paper's
    burn_in: int | None = None  # default 5,000 (3,000 for nfcorpus)
    bootstrap: int = 200  # prequential: queries before clusters are fit
    alpha: float = 0.3
    eta: float = 0.1
    decay: float = 0.005
    cap: float = CAP  # most suppression an entry can carry (the reference sweep's "max")
    reinforce: float = WINNER_RELIEF  # winner relief per update
    eager_decay: bool = False
    snapshot_every: int = 500
    map: bool = True  # paper protocol: 2-D UMAP of the query embeddings for the dashboard

    def __post_init__(self):
        super().__post_init__()
        check_protocol(self.protocol, PROTOCOLS)
        self.arm_list()  # unknown arm names fail here, before any pool is built

    def params(self) -> RIFParams:
        return RIFParams(alpha=self.alpha, eta=self.eta, decay=self.decay, pool_size=self.data.pipeline.pool_size,
                         eager=self.eager_decay, cap=self.cap, reinforce=self.reinforce)

    def arm_list(self) -> list[Arm]:
        """The standard arms (all of them when `arms` is None); entry-clustered arms `entry{K}-{rule}` only by name."""
        params = self.params()
        arms = standard_arms(self.ks, params)
        if self.arms:
            known = {a.name: a for a in arms + entry_arms(self.ks, params)}
            unknown = [a for a in self.arms if a not in known]
            if unknown:
                raise ValueError(f"unknown arms {unknown}; known: {', '.join(known)}")
            wanted = ["baseline", *[a for a in self.arms if a != "baseline"]]
            arms = [known[a] for a in wanted]
        return arms

    def resolved_burn_in(self, ds: Dataset) -> int:
        return self.burn_in if self.burn_in is not None else (3000 if ds.name == "nfcorpus" else 5000)  # 0: no burn-in

    def context(self, entries: bool | None = None, loaded: Loaded | None = None) -> tuple[ReplayContext, dict]:
        """The replay inputs (dataset, packed pools, query vectors; the corpus embeddings when `entries`, by default when
        an entry-clustered arm is asked for) and what identifies them: {dataset, reranker, pool_key, burn_in, builder, pools}."""
        d = self.data
        loaded = loaded or d.load()
        ds, builder = loaded.dataset, loaded.builder
        qvecs = query_vectors(ds.queries, d.pipeline, builder.root, d.progress)
        if entries is None:
            entries = any(a.cues == "entry" for a in self.arm_list())
        evecs = corpus_vectors(ds.require_corpus(), d.pipeline, builder.root, d.progress) if entries else None
        ctx = ReplayContext(ds, loaded.packed, qvecs, d.second_stage, evecs)
        return ctx, {"dataset": ds.name, "reranker": loaded.pools.reranker, "pool_key": builder.key,
                     "burn_in": self.resolved_burn_in(ds), "builder": builder, "pools": loaded.pools, "qvecs": qvecs}

    def seed_list(self) -> list[int]:
        return [PAPER_SEED + s for s in range(self.seeds)]

    def config(self, loaded: Loaded) -> dict:
        """What config.json records; builds the pools when missing."""
        packed = loaded.packed
        return {**self.flat_config(), "burn_in": self.resolved_burn_in(loaded.dataset), "seeds": self.seed_list(),
                "reranker_resolved": loaded.pools.reranker, "pool_key": loaded.builder.key,
                "dataset_fingerprint": loaded.dataset.fingerprint, "calibrated": bool((packed.read_logit != packed.logit).any()),
                "second_stage_resolved": "ce" if np.isnan(packed.fuse_w).all() else self.data.second_stage,
                "schema_version": SCHEMA_VERSION}

    def run_id(self, loaded: Loaded, config: dict | None = None) -> str:
        """`rif-<dataset>-<protocol>-<reranker>-<digest of the config>`, the config less `schema_version` (a schema bump
        alone keeps the run id, so regenerating replaces the stale folder) and the options at their `_HASH_OPTIONAL` default."""
        config = config or self.config(loaded)
        hashed = {k: v for k, v in config.items()
                  if k != "schema_version" and not (k in _HASH_OPTIONAL and v == _HASH_OPTIONAL[k])}
        return f"rif-{loaded.dataset.name}-{self.protocol}-{slug(loaded.pools.reranker)}-{digest(hashed)}"

    def _compute(self, loaded: Loaded, out: Path, config: dict) -> dict:
        ctx, info = self.context(loaded=loaded)
        ds, pools, qvecs = ctx.dataset, info["pools"], info["qvecs"]
        qids = [q.id for q in ds.queries]
        burn_in = info["burn_in"]
        arms = self.arm_list()
        seeds = self.seed_list()

        rows, snaps, suppressed = [], [], {}
        from tqdm.auto import tqdm

        for seed in tqdm(seeds, desc=f"rif {self.protocol} ({len(arms)} arms)", unit="seed", disable=not self.data.progress):
            if self.protocol == PAPER:
                res = run_paper(ctx, arms, seed, burn_in, self.snapshot_every if seed == PAPER_SEED else 0)
            elif self.protocol == HELDOUT:
                res = run_heldout(ctx, arms, seed, burn_in, self.snapshot_every if seed == PAPER_SEED else 0)
            else:
                res = run_prequential(ctx, arms, seed, self.bootstrap, self.snapshot_every if seed == PAPER_SEED else 0)
            rows.extend(res.rows)
            snaps.extend(res.snapshots)
            suppressed[seed] = res.suppressed

        per_query = pd.DataFrame(rows).assign(protocol=self.protocol)
        summary = summarise(per_query, arms, seeds, suppressed, self.protocol)
        summary.update({"dataset": ds.name, "protocol": self.protocol, "reranker": pools.reranker, "results_dir": str(out),
                        "run_id": out.name, "n_queries": len(qids), **ds.dropped_entries(), "seeds": seeds, "burn_in": burn_in,
                        "reranker_identity": pools.manifest.get("reranker_identity"),
                        "suppressed_by_seed": {str(s): {a: {str(k): v for k, v in splits.items()} for a, splits in by_arm.items()}
                                               for s, by_arm in suppressed.items()},
                        "calibrated": config["calibrated"], "logit_reading": "calibrated" if config["calibrated"] else "raw",
                        "second_stage": config["second_stage_resolved"],
                        "schema_version": SCHEMA_VERSION})
        write_json(out / "config.json", config)
        write_parquet(out / "per_query.parquet", per_query)
        write_parquet(out / "snapshots.parquet", _snapshots_frame(snaps, ds))
        if self.protocol == PAPER and self.map:
            write_parquet(out / "query_map.parquet", query_map(qvecs, qids))
        return write_summary(out, summary, default=None)


def query_map(qvecs: np.ndarray, qids: list[str], k: int = 30, seed: int = PAPER_SEED) -> pd.DataFrame:
    """2-D UMAP coordinates of the query embeddings (cosine, seeded) with their K=30 clusters."""
    from lethe_core.rif.clusters import QueryClusters

    umap = umap_module()
    xy = umap.UMAP(n_components=2, metric="cosine", random_state=seed, n_neighbors=15, min_dist=0.1).fit_transform(qvecs)
    clusters = QueryClusters.fit(qvecs, min(k, len(qids)), seed=seed).assign(qvecs)
    return pd.DataFrame({"query_id": qids, "x": xy[:, 0], "y": xy[:, 1], "cluster": clusters.astype(np.int16)})


def _snapshots_frame(snaps: list[dict], ds: Dataset) -> pd.DataFrame:
    if not snaps:
        return pd.DataFrame({"arm": [], "seed": [], "split": [], "step": [], "cluster": [], "doc_idx": [], "doc_id": [], "value": []})
    frames = [pd.DataFrame({"arm": s["arm"], "seed": s["seed"], "split": s["split"], "step": s["step"], "cluster": s["cluster"],
                            "doc_idx": s["doc_idx"], "value": s["value"]}) for s in snaps]
    frame = pd.concat(frames, ignore_index=True)
    ids = np.asarray(ds.corpus.ids, dtype=object)
    return frame.assign(doc_id=ids[frame["doc_idx"].to_numpy()])


SEED_CONVENTION = "seed mean per query"  # how every table reads several seeds (docs/statistics.md)


def seed_means(rows: pd.DataFrame, col: str) -> pd.Series:
    """Each query's `col` averaged over the seeds (every protocol evaluates a query once per seed): the one reading of
    several seeds in every table, the CLI's, RESULTS.md's and the notebooks' (`report.checkpoints.replay_claim`)."""
    return rows.groupby("query_id")[col].mean()


def _metric_block(mine: pd.Series, ref: pd.Series, seed: int) -> tuple[dict, dict, float | None]:
    """Level CI, paired Δ with its query-level and conversation-level CIs, and the permutation p, on seed means."""
    ref = ref.reindex(mine.index)
    level = stats.bootstrap_ci(mine.to_numpy(), seed=seed).as_dict()
    delta = stats.paired_delta_ci(mine.to_numpy(), ref.to_numpy(), seed=seed).as_dict()
    ids = [str(q) for q in mine.index]
    conversations = [stats.conversation_of(q) for q in ids] if all(":" in q for q in ids) else None
    if conversations is not None and len(set(conversations)) > 1:
        h = stats.hierarchical_paired_ci(mine.to_numpy(), ref.to_numpy(), conversations, seed=seed)
        delta["conversation_ci"] = [h.lo, h.hi]
    else:
        delta["conversation_ci"] = None
    return level, delta, stats.paired_permutation_test(mine.to_numpy(), ref.to_numpy(), seed=seed)


def _mean_suppressed(suppressed: dict, seeds: list[int], arm: str) -> dict:
    """An arm's suppression counts per split (entries, docs), averaged over the seeds."""
    per_split: dict[str, list[dict]] = {}
    for seed in seeds:
        for split, counts in suppressed[seed].get(arm, {}).items():
            per_split.setdefault(str(split), []).append(counts)
    return {split: {k: float(np.mean([c[k] for c in counts])) for k in counts[0]} for split, counts in per_split.items()}


def summarise(per_query: pd.DataFrame, arms: list[Arm], seeds: list[int], suppressed: dict, protocol: str) -> dict:
    """The run's table, every seed read one way (`SEED_CONVENTION`): each query's NDCG@10 and R@30 averaged over the
    seeds, then CIs (query-level and, where query ids name conversations, conversation-level), paired Δ, permutation p
    and Holm-adjusted p over queries; the spread of the seeds' means beside it."""
    means = {col: {a: seed_means(per_query[per_query["arm"] == a], col) for a in per_query["arm"].unique()}
             for col in ("ndcg@10", "pool_recall@30")}
    base = per_query[per_query["arm"] == "baseline"]
    has_control = "control" in means["ndcg@10"]
    out_arms = []
    for arm in arms:
        df = per_query[per_query["arm"] == arm.name]
        ndcg, d_ndcg, p = _metric_block(means["ndcg@10"][arm.name], means["ndcg@10"]["baseline"], seeds[0])
        rec, d_rec, p_rec = _metric_block(means["pool_recall@30"][arm.name], means["pool_recall@30"]["baseline"], seeds[0])
        entry = {"name": arm.name, "kind": arm.kind, "k": arm.k, "rule": arm.rule, "ndcg@10": ndcg, "delta_ndcg": d_ndcg,
                 "p": None if arm.name == "baseline" else p, "recall@30": rec, "delta_recall": d_rec,
                 "p_recall": None if arm.name == "baseline" else p_rec,
                 "suppressed_entries": _mean_suppressed(suppressed, seeds, arm.name)}
        if has_control and arm.name != "control":
            _, d_ctrl, p_ctrl = _metric_block(means["ndcg@10"][arm.name], means["ndcg@10"]["control"], seeds[0])
            entry["delta_vs_control"], entry["p_vs_control"] = d_ctrl, p_ctrl
        by_seed = df.groupby("seed")["ndcg@10"].mean()
        base_by_seed = base.groupby("seed")["ndcg@10"].mean()
        entry["ndcg@10"]["seed_mean"] = float(by_seed.mean())
        entry["ndcg@10"]["seed_sd"] = float(by_seed.std(ddof=1)) if len(by_seed) > 1 else 0.0
        entry["delta_ndcg"]["seed_mean"] = float((by_seed - base_by_seed).mean())
        entry["delta_ndcg"]["seed_sd"] = float((by_seed - base_by_seed).std(ddof=1)) if len(by_seed) > 1 else 0.0
        entry["behaviour"] = {c: float(df[c].mean()) for c in ("exact_episode", "sibling_confusion", "wrong_family", "abstain@0", "abstain@2", "abstain@4")}
        if protocol == PAPER:  # hot/cold/unseen depend on each seed's burn-in stream: (query, seed) rows pooled over the seeds
            entry["buckets"] = {b: {"n": int(len(g)), "ndcg@10": float(g["ndcg@10"].mean()),
                                    "delta_ndcg": float(g["ndcg@10"].mean() - base[base["bucket"] == b]["ndcg@10"].mean())}
                                for b, g in df.groupby("bucket")}
        out_arms.append(entry)
    others = [a for a in out_arms if a["p"] is not None]
    for key, holm_key in (("p", "p_holm"), ("p_recall", "p_recall_holm")):
        adj = stats.adjust([a[key] for a in others], "holm")
        for a, v in zip(others, adj):
            a[holm_key] = float(v)
    for a in out_arms:
        a.setdefault("p_holm", None)
        a.setdefault("p_recall_holm", None)
    result = {"arms": out_arms, "seed_convention": SEED_CONVENTION}
    if protocol == PREQUENTIAL:
        result["learning_curve"] = learning_curve(per_query)
    return result


def learning_curve(rows: pd.DataFrame, points: int = 20) -> dict:
    """Running mean of each arm's NDCG@10 minus the baseline's, by stream position (each position's mean over the seeds)."""
    wide = rows.pivot_table(index="position", columns="arm", values="ndcg@10").sort_index()
    delta = wide.sub(wide["baseline"], axis=0).cumsum().div(np.arange(1, len(wide) + 1), axis=0)
    at = np.unique(np.linspace(1, len(wide), points).astype(int))
    return {"position": at.tolist(), **{arm: delta[arm].iloc[at - 1].round(5).tolist() for arm in delta.columns if arm != "baseline"}}
