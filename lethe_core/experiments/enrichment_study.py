"""Checkpoint 17's study: per-query NDCG@10 under each write-time enrichment arm (notebook 17).

The enrichment wing (`lethe_core.enrichment`) makes enriched datasets; this module indexes them and
scores them: `pool_builder` hands `PoolBuilder` a first stage over the enriched texts while the reranker
reads the original ones, and `evaluate_arms` runs every arm.
"""

from __future__ import annotations

import pandas as pd

from lethe_core.datasets import Dataset
from lethe_core.enrichment.base import relevant_sessions, covered_queries, enrich, is_enriched, original_view
from lethe_core.enrichment.heuristic import HeuristicEnricher
from lethe_core.enrichment.observations import ObservationEnricher
from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.systems import evaluate_systems
from lethe_core.pools.cache import PoolBuilder
from lethe_core.rerankers import resolve_reranker
from lethe_core.retrieval.dense import LazyEncoder
from lethe_core.retrieval.pipeline import HybridRetriever, PipelineConfig

ARMS = ("none", "observations", "heuristic", "leak", "twin")


def pool_builder(dataset: Dataset, reranker, config=None, root=None, progress: bool = True, encoder=None):
    """A PoolBuilder whose first stage indexes the enriched texts and whose reranker scores the original texts.

    `PoolBuilder._score` hands the reranker `self.dataset` corpus texts and takes candidates from
    `self.retriever`: the builder gets `original_view(dataset)` (same name, so the cache folder is the
    enriched dataset's own) and a retriever over `dataset.corpus` (the index texts). Turn order is identical,
    so candidate positions mean the same turn in both. For an unenriched dataset it is a plain PoolBuilder.
    """
    config = config or PipelineConfig()
    if not is_enriched(dataset):
        retriever = None if encoder is None else HybridRetriever(dataset.require_corpus(), config, encoder=encoder,
                                                                 cache_root=root, progress=progress)
        return PoolBuilder(dataset, reranker, config, root=root, progress=progress, retriever=retriever)
    retriever = HybridRetriever(dataset.require_corpus(), config, encoder=encoder, cache_root=root, progress=progress)
    return PoolBuilder(original_view(dataset), reranker, config, root=root, retriever=retriever, progress=progress)


def evaluate_arms(data: DataSpec, seeds: int = 5, leak_enricher: str = "observations", leak_share: float | None = 0.1,
                  system: str = "full", root=None) -> dict:
    """Per-query NDCG@10 of `system` (default: the paper's RRF top-30 reranked) under each enrichment arm.

    Arms: `none`; `observations` and `heuristic` on every turn (honest); `leak` = `leak_enricher` on the
    sessions that hold a qrels-relevant turn (the reference's selection); `twin` = the same enricher on as many
    sessions per conversation drawn at random, averaged per query over `seeds` draws (`twin-sK` each draw).
    `leak_share` caps the leak at that share of the corpus's turns (whole sessions in corpus order, as the
    reference's `--max 1000` cut its list; it enriched 0.5 % of its corpus): on LoCoMo nearly every session holds
    some query's evidence, so an uncapped leak (`None`) is the `all` arm again.
    Each arm has its own pools (`pool_builder`: the first stage indexes the enriched text, the reranker reads
    the original). Returns `per_query` (query_id, qtype, arm, ndcg@10, covered: the query has an enriched
    qrels turn in the leak arm — the reference's label-defined bucket), `arms` (one dict per arm) and counts.
    """
    config, progress = data.pipeline, data.progress
    ds = data.load_dataset()
    model = resolve_reranker(data.reranker, backend=data.backend)
    has_obs = bool(ds.extra_queries.get("observations"))
    make = {"heuristic": lambda: HeuristicEnricher.from_dataset(ds)}
    if has_obs:
        make["observations"] = lambda: ObservationEnricher.from_dataset(ds)
    if leak_enricher not in make:
        raise ValueError(f"leak_enricher {leak_enricher!r} is not available for {ds.name}; choose one of {', '.join(make)}")
    cap = None if leak_share is None else max(1, int(round(leak_share * len(ds.require_corpus()))))
    variants: list[tuple[str, Dataset]] = [("none", ds)]
    if has_obs:
        variants.append(("observations", enrich(ds, make["observations"]())))
    variants.append(("heuristic", enrich(ds, make["heuristic"]())))
    leak = enrich(ds, make[leak_enricher](), select="relevant_sessions", max_turns=cap)
    variants.append(("leak", leak))
    variants += [(f"twin-s{s}", enrich(ds, make[leak_enricher](), select="random_sessions", seed=s,
                                         max_turns=cap)) for s in range(seeds)]
    covered = set(covered_queries(leak))
    encoder = LazyEncoder(config.encoder, config.encoder_backend)  # one model load for every arm
    sessions = len({t.session_id for t in ds.require_corpus().turns})
    frames, arms = [], []
    for arm, variant in variants:
        builder = pool_builder(variant, model, config, root=root, progress=progress, encoder=encoder)
        pools = builder.build()
        per = evaluate_systems(original_view(variant), pools.packed([q.id for q in variant.queries]), config.pool_size)
        per = per[per["system"] == system][["query_id", "qtype", "ndcg@10"]].assign(arm=arm)
        frames.append(per)
        info = variant.annotations.get("enrichment", {})
        arms.append({"arm": arm, "dataset": variant.name, "enricher": info.get("enricher", ""),
                     "selector": info.get("selector", ""), "enriched_turns": info.get("enriched", 0),
                     "share_enriched": info.get("enriched", 0) / len(ds.require_corpus()),
                     "share_sessions_selected": info.get("selected_sessions", 0) / sessions if info else 0.0,
                     "pool_key": builder.key})
    per_query = pd.concat(frames, ignore_index=True)
    twins = per_query[per_query["arm"].str.startswith("twin-s")]
    if len(twins):
        mean = twins.groupby(["query_id", "qtype"], as_index=False, sort=False)["ndcg@10"].mean().assign(arm="twin")
        per_query = pd.concat([per_query, mean], ignore_index=True)
    per_query["covered"] = per_query["query_id"].isin(covered)
    return {"per_query": per_query, "arms": arms, "n_queries": len(ds.queries), "n_turns": len(ds.require_corpus()),
            "n_covered": len(covered), "reranker": getattr(model, "name", str(data.reranker)), "system": system,
            "leak_enricher": leak_enricher, "leak_max_turns": cap, "dataset": ds.name,
            "uncapped_leak_share_sessions": len(relevant_sessions(ds)) / sessions}
