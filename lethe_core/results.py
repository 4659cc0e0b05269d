"""Reading experiment results: the one place the dashboard and the notebooks get their data from.

Schema of a RIF run folder `data/results/rif-<dataset>-<protocol>-<reranker>-<hash>/`:

- `config.json`    the RIFExperiment config plus `reranker_resolved`, `pool_key`, `dataset_fingerprint`,
                   `burn_in`, `seeds`, `calibrated`, `second_stage_resolved`.
- `summary.json`   `{dataset, protocol, reranker, run_id, n_queries, seeds, burn_in, calibrated, second_stage,
                   arms: [{name, kind, k, rule, ndcg@10: {mean, ci, seed_mean, seed_sd}, delta_ndcg: {...},
                   p, p_holm, recall@30: {...}, delta_recall, p_recall, p_recall_holm, delta_vs_control,
                   p_vs_control, suppressed_entries: {split: {entries, docs}}, behaviour: {...},
                   buckets (paper protocol)}], learning_curve (prequential)}`
- `per_query.parquet` one row per (seed, arm, query[, split]): query_id, qtype, arm, seed, split, bucket,
                   cluster, ndcg@10, recall@10, pool_recall@30, top1_logit, top10 (list of corpus
                   positions), exact_episode, sibling_confusion, wrong_family, stale_fact,
                   stale_fact_temporal, abstain@0/2/4, position (prequential), protocol.
- `snapshots.parquet` suppression every 500 steps for the paper seed: arm, seed, split, step, cluster,
                   doc_idx, doc_id, value (only entries with value > 0).
- `query_map.parquet` (paper protocol) query_id, x, y (2-D UMAP of the query embeddings), cluster (K=30).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from .paths import results_dir

REQUIRED_FILES = ("config.json", "summary.json", "per_query.parquet")
PER_QUERY_COLUMNS = ("query_id", "arm", "seed", "ndcg@10", "recall@10", "pool_recall@30", "top10", "cluster",
                     "exact_episode", "sibling_confusion", "wrong_family")


class ResultsError(RuntimeError):
    """A results folder is missing, partial or corrupt; the message says which file and what to run."""


@dataclass
class Run:
    path: Path
    config: dict
    summary: dict
    _frames: dict = field(default_factory=dict, repr=False)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def label(self) -> str:
        s = self.summary
        return f"{s['dataset']} / {s['protocol']} / {s['reranker']} / seeds {len(s['seeds'])} ({self.run_id[-10:]})"

    def _parquet(self, name: str, required: tuple[str, ...] = ()) -> pd.DataFrame:
        if name not in self._frames:
            path = self.path / name
            if not path.exists():
                raise ResultsError(f"{path} is missing: rerun `lethe-lab rif run {self.summary['dataset']} --protocol {self.summary['protocol']}`")
            try:
                frame = pd.read_parquet(path)
            except Exception as exc:
                raise ResultsError(f"{path} is unreadable ({type(exc).__name__}); delete the folder and rerun the experiment") from None
            missing = [c for c in required if c not in frame.columns]
            if missing:
                raise ResultsError(f"{path} lacks columns {missing}: it was written by another version; rerun the experiment")
            self._frames[name] = frame
        return self._frames[name]

    @property
    def per_query(self) -> pd.DataFrame:
        return self._parquet("per_query.parquet", PER_QUERY_COLUMNS)

    @property
    def snapshots(self) -> pd.DataFrame:
        return self._parquet("snapshots.parquet", ("arm", "step", "cluster", "doc_idx", "value"))

    @property
    def query_map(self) -> pd.DataFrame | None:
        if not (self.path / "query_map.parquet").exists():
            return None
        return self._parquet("query_map.parquet", ("query_id", "x", "y", "cluster"))

    @cached_property
    def arms(self) -> list[str]:
        return [a["name"] for a in self.summary["arms"]]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path} is missing: the run did not finish; rerun it") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path} is corrupt (invalid JSON at line {exc.lineno}); rerun the experiment") from None


def load_run(path: str | Path) -> Run:
    path = Path(path)
    if not path.is_dir():
        raise ResultsError(f"no results folder at {path}")
    missing = [f for f in REQUIRED_FILES if not (path / f).exists()]
    if missing:
        raise ResultsError(f"{path} is partial: {', '.join(missing)} missing. Rerun the experiment that wrote it.")
    summary = _read_json(path / "summary.json")
    for key in ("dataset", "protocol", "reranker", "arms", "seeds"):
        if key not in summary:
            raise ResultsError(f"{path / 'summary.json'} lacks '{key}': rerun the experiment")
    return Run(path, _read_json(path / "config.json"), summary)


def list_runs(root: str | Path | None = None, prefix: str = "rif-") -> tuple[list[Run], list[str]]:
    """Every loadable run under the results folder, newest first, and a message per broken folder."""
    root = Path(root or results_dir())
    runs, problems = [], []
    if not root.exists():
        return runs, problems
    for d in sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith(prefix)), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            runs.append(load_run(d))
        except ResultsError as exc:
            problems.append(str(exc))
    return runs, problems


def replay_context(run: Run):
    """Rebuild the replay inputs (dataset, packed pools, query vectors) of a run from the caches, without models."""
    from .datasets import load_dataset
    from .paths import cache_dir
    from .pools import load_pools, pools_dir
    from .retrieval.bm25 import BM25Params
    from .retrieval.dense import EmbeddingCache, LazyEncoder
    from .retrieval.pipeline import PipelineConfig, query_vectors
    from .rif.protocols import ReplayContext

    c = run.config
    pipeline = PipelineConfig(**{**c["pipeline"], "bm25": BM25Params(**c["pipeline"]["bm25"])})
    ds = load_dataset(c["dataset"], c["path"], c["conversations"], c["limit_queries"])
    directory = pools_dir(ds.name, c["pool_key"])
    if not (directory / "manifest.json").exists():
        raise ResultsError(f"the pools of this run are not cached at {directory}; rerun `lethe-lab rif run {ds.name}`")
    pools = load_pools(directory, ds.queries)
    if EmbeddingCache(cache_dir(), LazyEncoder(pipeline.encoder).name).count_missing([q.text for q in ds.queries]):
        raise ResultsError("the query embeddings of this run are not cached; rerun the experiment")
    return ReplayContext(ds, pools.packed([q.id for q in ds.queries], c.get("calibration", True)), query_vectors(ds.queries, pipeline),
                         c.get("second_stage", "fused"))
