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

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.datasets import Dataset
from lethe_core.mechanisms.dedup import DEFAULT_THRESHOLD, DedupResult, dedup, project_ranking
from lethe_core.measures.metrics import ndcg_at_k, recall_at_k
from lethe_core.pools.cache import PackedPools
from lethe_core.results.store import digest, slug, write_parquet, write_summary
from lethe_core.retrieval.pipeline import corpus_vectors
from lethe_core.retrieval.second_stage import DEFAULT_MODE
from lethe_core.experiments.setup import DataStudy, Loaded
from lethe_core.experiments.systems import SYSTEMS, evaluate_systems, system_orders

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
class DedupExperiment(DataStudy):
    """Dedup counts, example groups and the systems table on the original vs the deduplicated corpus."""

    threshold: float = DEFAULT_THRESHOLD
    scope: str = "corpus"  # corpus: merge across conversations (the reference's one store) | conversation
    sweep: tuple[float, ...] = (0.85, 0.9, 0.95, 0.98, 1.0)  # thresholds whose counts are reported (no pools)
    seed: int = 0

    def deduplicate(self, loaded: Loaded) -> tuple[np.ndarray, DedupResult]:
        """The corpus embeddings (from the embedding cache) and the dedup result at `threshold` (made once per load)."""
        def make():
            vectors = corpus_vectors(loaded.dataset.require_corpus(), self.data.pipeline, loaded.root, self.data.progress)
            return vectors, dedup(loaded.dataset, vectors, self.threshold, self.scope)

        return loaded.once(("dedup", self.threshold, self.scope), make)

    def run_id(self, loaded: Loaded, config: dict | None = None) -> str:
        """`dedup-<dataset>-<threshold %>-<reranker>-<digest of both pool keys and the options>` (builds the original pools)."""
        d, result = self.data, self.deduplicate(loaded)[1]
        key = digest([loaded.builder.key, loaded.builder_for(dataset=result.dataset).key, self.threshold, self.scope,
                      d.second_stage, d.calibration], 12)
        return f"dedup-{loaded.dataset.name}-{round(self.threshold * 100)}-{slug(loaded.pools.reranker)}-{key}"

    def _compute(self, loaded: Loaded, out: Path, config: dict) -> dict:
        d, ds = self.data, loaded.dataset
        vectors, result = self.deduplicate(loaded)
        sweep = threshold_sweep(ds, vectors, self.sweep, self.scope)
        qids = loaded.query_ids
        P = d.pipeline.pool_size
        orig_packed = loaded.packed
        dd_builder = loaded.builder_for(dataset=result.dataset)
        dd_packed = dd_builder.build().packed(qids, d.calibration)
        new_pairs = getattr(dd_builder, "scored", 0)

        frames = [evaluate_systems(ds, orig_packed, P, d.second_stage).assign(arm="original"),
                  evaluate_systems(result.strict, dd_packed, P, d.second_stage).assign(arm="dedup_strict"),
                  evaluate_systems(result.dataset, dd_packed, P, d.second_stage).assign(arm="dedup_remapped"),
                  evaluate_projected(ds, orig_packed, result, P, d.second_stage).assign(arm="original_remapped")]
        per_query = pd.concat(frames, ignore_index=True)
        table = systems_table(per_query, self.seed)

        corpus = ds.require_corpus()
        groups = pd.DataFrame([{"turn_id": t, "representative": r, "group_size": result.group_sizes[r],
                                "kind": result.kind[t], "conversation_id": corpus[corpus.index[t]].conversation_id,
                                "cosine_to_representative": float(vectors[corpus.index[t]] @ vectors[corpus.index[r]]),
                                "text": corpus[corpus.index[t]].text}
                               for t, r in result.representative.items() if result.group_sizes[r] > 1],
                              columns=["turn_id", "representative", "group_size", "kind", "conversation_id",
                                       "cosine_to_representative", "text"])
        summary = {
            "dataset": ds.name, "dedup_dataset": result.dataset.name, "reranker": loaded.pools.reranker,
            "n_queries": len(qids), "threshold": self.threshold, "scope": self.scope, "counts": result.stats,
            "example_groups": example_groups(result, ds, vectors),
            "sweep": json.loads(sweep.to_json(orient="records")),
            "table": json.loads(table.to_json(orient="records")),
            "pool_keys": {"original": loaded.builder.key, "dedup": dd_builder.key}, "new_pairs_scored": int(new_pairs or 0),
            "results_dir": str(out), "config": config,
        }
        write_parquet(out / "per_query.parquet", per_query)
        write_parquet(out / "groups.parquet", groups)
        return write_summary(out, summary, default=None)
