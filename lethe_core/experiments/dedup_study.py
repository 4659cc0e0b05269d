"""Checkpoint 07, near-duplicate dedup: how much of the corpus is duplicated, and what merging it does to
the systems table.

Arms (every system of `systems.SYSTEMS`, the same queries throughout):
- `original`: the original corpus and qrels (the systems table itself);
- `dedup_strict`: pools rebuilt on the deduplicated corpus, scored with the original qrels (a relevant
  turn merged into another one is lost);
- `dedup_remapped`: the same rankings scored with qrels moved to the representatives (max grade kept);
- `original_remapped`: what remapping does to the metric itself — the *original* ranking read through
  the turn -> representative map (`dedup.project_ranking`: duplicates collapse onto their
  representative, first occurrence kept) and scored with the remapped qrels. Against `original` it
  changes only the scoring; against `dedup_remapped` only the retrieval.

Embeddings come from the embedding cache (the turns are already embedded by any earlier pool build);
pools come from `PoolBuilder`, whose reranker pairs go through the pair-score cache, so the
deduplicated corpus only scores the pairs that entered a union because a duplicate left it.
Results: `data/results/dedup-<dataset>-<threshold>-<reranker>-<key>/` with per_query.parquet (one row
per query, system and arm), groups.parquet (one row per turn of a group of two or more) and summary.json.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import stats
from ..datasets import Dataset, load_dataset
from ..dedup import DEFAULT_THRESHOLD, DedupResult, dedup, project_ranking
from ..metrics import ndcg_at_k, recall_at_k
from ..paths import cache_dir, results_dir
from ..pools import PackedPools, PoolBuilder
from ..retrieval.pipeline import PipelineConfig, corpus_vectors
from ..retrieval.rerank import resolve_reranker
from ..second_stage import DEFAULT_MODE
from .systems import SYSTEMS, _atomic_write, _slug, evaluate_systems, system_orders

ARMS = ("original", "dedup_strict", "dedup_remapped", "original_remapped")


def evaluate_projected(dataset: Dataset, p: PackedPools, result: DedupResult, pool_size: int = 30,
                       mode: str = DEFAULT_MODE) -> pd.DataFrame:
    """Each system's original ranking projected onto representatives, scored with the remapped qrels."""
    ids = np.asarray(dataset.require_corpus().ids, dtype=object)
    remapped = {q.id: q for q in result.queries("remapped")}
    rows = []
    for i, qid in enumerate(p.query_ids):
        q = remapped[qid]
        doc_idx = p.doc_idx[p.rows(i)]
        for name, (order, _pool) in system_orders(p, i, pool_size, mode).items():
            ranked = project_ranking(ids[doc_idx[order]].tolist(), result.representative)
            rows.append({"query_id": qid, "qtype": q.qtype, "system": name,
                         "ndcg@10": ndcg_at_k(ranked, q.qrels, 10), "recall@10": recall_at_k(ranked, q.qrels, 10)})
    return pd.DataFrame(rows)


def systems_table(per_query: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Mean NDCG@10 / Recall@10 per system and arm with bootstrap CIs, and paired deltas vs `original`."""
    out = []
    wide = per_query.pivot_table(index="query_id", columns=["system", "arm"], values="ndcg@10")
    for name in SYSTEMS:
        for arm in ARMS:
            sub = per_query[(per_query["system"] == name) & (per_query["arm"] == arm)]
            if sub.empty:
                continue
            ci = stats.bootstrap_ci(sub["ndcg@10"], seed=seed)
            row = {"system": name, "arm": arm, "ndcg@10": ci.mean, "lo": ci.lo, "hi": ci.hi,
                   "recall@10": float(sub["recall@10"].mean()), "n_queries": int(len(sub))}
            if arm != "original":
                t, b = wide[(name, arm)], wide[(name, "original")]
                d = stats.paired_delta_ci(t, b, seed=seed)
                row.update(delta=d.mean, delta_lo=d.lo, delta_hi=d.hi,
                           relative=d.mean / b.mean() if b.mean() else float("nan"),
                           p=stats.paired_permutation_test(t, b, seed=seed))
            out.append(row)
    return pd.DataFrame(out)


def threshold_sweep(dataset: Dataset, vectors: np.ndarray, thresholds=(0.85, 0.9, 0.95, 0.98, 1.0),
                    scope: str = "corpus") -> pd.DataFrame:
    """Dedup counts at each threshold (no pools): how sensitive the share of merged turns is to 0.95."""
    return pd.DataFrame([{"threshold": t, **dedup(dataset, vectors, t, scope).stats} for t in thresholds])


def example_groups(result: DedupResult, dataset: Dataset, vectors: np.ndarray, n: int = 10) -> list[dict]:
    """The `n` largest groups (ties: earliest representative) with member texts and cosine to the representative."""
    corpus = dataset.require_corpus()
    groups = sorted(result.groups().items(), key=lambda kv: (-len(kv[1]), corpus.index[kv[0]]))[:n]
    out = []
    for rep, members in groups:
        r = vectors[corpus.index[rep]]
        out.append({"representative": rep, "size": len(members), "members": [
            {"id": d, "text": corpus[corpus.index[d]].text, "kind": result.kind[d],
             "cosine": float(vectors[corpus.index[d]] @ r)} for d in members]})
    return out


@dataclass
class DedupExperiment:
    """Dedup counts, example groups and the systems table on the original vs the deduplicated corpus."""

    dataset: str = "locomo"
    path: str | None = None
    reranker: str = "auto"
    backend: str = "auto"
    conversations: int | None = None
    limit_queries: int | None = None
    threshold: float = DEFAULT_THRESHOLD
    scope: str = "corpus"  # corpus: merge across conversations (the reference's one store) | conversation
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    second_stage: str = DEFAULT_MODE
    calibration: bool = True
    sweep: tuple[float, ...] = (0.85, 0.9, 0.95, 0.98, 1.0)  # thresholds whose counts are reported (no pools)
    seed: int = 0
    progress: bool = True

    def run(self, results_root: Path | None = None, cache_root: Path | None = None) -> dict:
        ds = load_dataset(self.dataset, self.path, self.conversations, self.limit_queries)
        root = Path(cache_root or cache_dir())
        vectors = corpus_vectors(ds.require_corpus(), self.pipeline, root, self.progress)
        result = dedup(ds, vectors, self.threshold, self.scope)
        sweep = threshold_sweep(ds, vectors, self.sweep, self.scope)
        reranker = resolve_reranker(self.reranker, backend=self.backend)
        qids = [q.id for q in ds.queries]
        P = self.pipeline.pool_size

        orig_builder = PoolBuilder(ds, reranker, self.pipeline, root=root, progress=self.progress)
        orig_pools = orig_builder.build()
        orig_packed = orig_pools.packed(qids, self.calibration)
        dd_builder = PoolBuilder(result.dataset, reranker, self.pipeline, root=root, progress=self.progress)
        dd_packed = dd_builder.build().packed(qids, self.calibration)
        new_pairs = getattr(dd_builder, "scored", 0)

        frames = [evaluate_systems(ds, orig_packed, P, self.second_stage).assign(arm="original"),
                  evaluate_systems(result.strict, dd_packed, P, self.second_stage).assign(arm="dedup_strict"),
                  evaluate_systems(result.dataset, dd_packed, P, self.second_stage).assign(arm="dedup_remapped"),
                  evaluate_projected(ds, orig_packed, result, P, self.second_stage).assign(arm="original_remapped")]
        per_query = pd.concat(frames, ignore_index=True)
        table = systems_table(per_query, self.seed)

        key = hashlib.sha256(json.dumps([orig_builder.key, dd_builder.key, self.threshold, self.scope, self.second_stage,
                                         self.calibration], sort_keys=True).encode()).hexdigest()[:12]
        name = f"dedup-{ds.name}-{round(self.threshold * 100)}-{_slug(orig_pools.reranker)}-{key}"
        out_dir = Path(results_root or results_dir()) / name
        out_dir.mkdir(parents=True, exist_ok=True)
        corpus = ds.require_corpus()
        groups = pd.DataFrame([{"turn_id": d, "representative": r, "group_size": result.group_sizes[r],
                                "kind": result.kind[d], "conversation_id": corpus[corpus.index[d]].conversation_id,
                                "cosine_to_representative": float(vectors[corpus.index[d]] @ vectors[corpus.index[r]]),
                                "text": corpus[corpus.index[d]].text}
                               for d, r in result.representative.items() if result.group_sizes[r] > 1],
                              columns=["turn_id", "representative", "group_size", "kind", "conversation_id",
                                       "cosine_to_representative", "text"])
        summary = {
            "dataset": ds.name, "dedup_dataset": result.dataset.name, "reranker": orig_pools.reranker,
            "n_queries": len(qids), "threshold": self.threshold, "scope": self.scope, "counts": result.stats,
            "example_groups": example_groups(result, ds, vectors),
            "sweep": json.loads(sweep.to_json(orient="records")),
            "table": json.loads(table.to_json(orient="records")),
            "pool_keys": {"original": orig_builder.key, "dedup": dd_builder.key}, "new_pairs_scored": int(new_pairs or 0),
            "results_dir": str(out_dir), "config": {**asdict(self), "pipeline": asdict(self.pipeline)},
        }
        _atomic_write(out_dir / "per_query.parquet", lambda p: per_query.to_parquet(p, index=False))
        _atomic_write(out_dir / "groups.parquet", lambda p: groups.to_parquet(p, index=False))
        _atomic_write(out_dir / "summary.json", lambda p: p.write_text(json.dumps(summary, indent=2)))
        return summary
