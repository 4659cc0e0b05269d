"""The BM25 tokenizer ablation (checkpoint 8): quality and cost of each tokenizer, on the same queries.

For every tokenizer in `lethe_core.retrieval.text.TOKENIZERS` the first stage is rebuilt with that tokenizer
(`PipelineConfig.tokenizer`) and its pools go through `PoolBuilder`, so a union member that another
tokenizer's pool already holds is read from the pair-score cache, and only new members are scored.
Reported per tokenizer: BM25-only, RRF and `full` (reranked RRF top-30) NDCG@10 / Recall@10 with
bootstrap CIs, the paired difference against `regex` (the default) with its CI and permutation p,
and the BM25 cost: index build time (tokenising the corpus + building the index) and mean query
latency (tokenising + searching), median over `timing_repeats` runs on this machine. `pareto` marks
the tokenizers no other tokenizer beats on quality without costing more.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from lethe_core.measures import stats
from lethe_core.results.store import digest, slug, write_parquet, write_summary
from lethe_core.retrieval.bm25 import BM25Index, BM25Params
from lethe_core.retrieval.text import DEFAULT_TOKENIZER, TOKENIZERS, clear_caches, get_tokenizer
from lethe_core.experiments.setup import DataStudy, Loaded
from lethe_core.experiments.systems import evaluate_systems

ABLATED = ("bm25", "rrf", "full")  # the systems a tokenizer can change (vector does not read BM25)


def bm25_cost(texts: Sequence[str], queries: Sequence[str], tokenizer: str, params: BM25Params = BM25Params(),
              k: int = 30, repeats: int = 3) -> dict:
    """Median wall-clock seconds to tokenise and index `texts`, and mean milliseconds per query (tokenise + top-k)."""
    tok = get_tokenizer(tokenizer)
    builds, per_query = [], []
    for _ in range(max(1, repeats)):
        clear_caches()  # every repeat stems from scratch
        tok = get_tokenizer(tokenizer)
        t0 = time.perf_counter()
        index = BM25Index([tok(t) for t in texts], params)
        builds.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for q in queries:
            index.search(tok(q), k)
        per_query.append((time.perf_counter() - t0) / max(1, len(queries)) * 1000)
    return {"index_build_s": float(np.median(builds)), "query_ms": float(np.median(per_query)),
            "vocabulary": len(index.vocab), "tokens_per_turn": float(np.mean([len(tok(t)) for t in texts]))}


def pareto_front(frame: pd.DataFrame, quality: str, costs: Sequence[str]) -> pd.Series:
    """True for rows no other row dominates (quality >= and every cost <=, one of them strictly)."""
    q = frame[quality].to_numpy()
    c = frame[list(costs)].to_numpy()
    out = []
    for i in range(len(frame)):
        dominated = any(q[j] >= q[i] and (c[j] <= c[i]).all() and (q[j] > q[i] or (c[j] < c[i]).any())
                        for j in range(len(frame)) if j != i)
        out.append(not dominated)
    return pd.Series(out, index=frame.index)


def summarise_tokenizers(per_query: pd.DataFrame, cost: dict[str, dict], baseline: str = DEFAULT_TOKENIZER,
                         seed: int = 0) -> list[dict]:
    """One row per (tokenizer, system): NDCG@10 / Recall@10 with CIs, paired delta and p against `baseline`."""
    rows = []
    for system in ABLATED:
        sub = per_query[per_query["system"] == system]
        wide = sub.pivot(index="query_id", columns="tokenizer", values="ndcg@10")
        for tok in dict.fromkeys(sub["tokenizer"]):
            mine = sub[sub["tokenizer"] == tok]
            row = {"tokenizer": tok, "system": system, "n_queries": int(len(mine)),
                   "ndcg@10": float(mine["ndcg@10"].mean()),
                   "ndcg@10_ci": stats.bootstrap_ci(mine["ndcg@10"], seed=seed).as_dict()["ci"],
                   "recall@10": float(mine["recall@10"].mean()),
                   "recall@10_ci": stats.bootstrap_ci(mine["recall@10"], seed=seed).as_dict()["ci"],
                   **cost[tok]}
            if tok != baseline and baseline in wide:
                row["delta_vs_" + baseline] = stats.paired_delta_ci(wide[tok], wide[baseline], seed=seed).as_dict()
                row["p_vs_" + baseline] = stats.paired_permutation_test(wide[tok], wide[baseline], seed=seed)
            rows.append(row)
    table = pd.DataFrame(rows)
    for system in ABLATED:
        mask = table["system"] == system
        table.loc[mask, "pareto"] = pareto_front(table[mask], "ndcg@10", ["index_build_s", "query_ms"])
    table["pareto"] = table["pareto"].astype(bool)
    return table.to_dict("records")


@dataclass
class TokenizerExperiment(DataStudy):
    """Every tokenizer through the same first stage and reranker; writes results/tokenizers-<dataset>-.../.
    `data.pipeline`'s tokenizer is replaced by each of `tokenizers`."""

    tokenizers: tuple[str, ...] = tuple(TOKENIZERS)
    timing_repeats: int = 3
    seed: int = 0

    def __post_init__(self):
        super().__post_init__()
        for t in self.tokenizers:
            get_tokenizer(t)

    def pools(self, loaded: Loaded) -> dict[str, tuple]:
        """Per tokenizer: (pool builder, pools) of the spec's pipeline with that tokenizer, built once per load (a member
        another tokenizer's pool holds is read from the pair-score cache)."""
        def build():
            builders = {tok: loaded.builder_for(replace(self.data.pipeline, tokenizer=tok)) for tok in self.tokenizers}
            return {tok: (b, b.build()) for tok, b in builders.items()}

        return loaded.once(("tokenizers", self.tokenizers), build)

    def run_id(self, loaded: Loaded, config: dict | None = None) -> str:
        """`tokenizers-<dataset>-<reranker>-<second stage>-<digest of every tokenizer's pool key>` (builds the pools)."""
        built = self.pools(loaded)
        keys = {tok: b.key for tok, (b, _) in built.items()}
        return f"tokenizers-{loaded.dataset.name}-{slug(_reranker(built))}-{self.data.second_stage}-{digest(keys)}"

    def _compute(self, loaded: Loaded, out: Path, config: dict) -> dict:
        d, ds, built = self.data, loaded.dataset, self.pools(loaded)
        corpus = ds.require_corpus()
        frames, cost, keys, scored = [], {}, {}, {}
        for tok, (builder, pools) in built.items():
            pipeline = builder.config
            keys[tok] = builder.key
            scored[tok] = {"scored": int(getattr(builder, "scored", 0)), "cached": int(getattr(builder, "hits", 0))}
            per_query = evaluate_systems(ds, pools.packed(loaded.query_ids, d.calibration), pipeline.pool_size, d.second_stage)
            frames.append(per_query[per_query["system"].isin(ABLATED + ("vector",))].assign(tokenizer=tok))
            cost[tok] = bm25_cost(corpus.texts, [q.text for q in ds.queries], tok, pipeline.bm25, pipeline.k_leg, self.timing_repeats)
        per_query = pd.concat(frames, ignore_index=True)
        summary = {
            "dataset": ds.name, "reranker": _reranker(built), "n_queries": len(ds.queries), "n_turns": len(corpus),
            "baseline": DEFAULT_TOKENIZER if DEFAULT_TOKENIZER in self.tokenizers else self.tokenizers[0],
            "rows": summarise_tokenizers(per_query, cost, DEFAULT_TOKENIZER, self.seed),
            "pool_keys": keys, "pairs_scored": scored, "results_dir": str(out), "config": config,
        }
        write_parquet(out / "per_query.parquet", per_query)
        return write_summary(out, summary, default=_plain)


def _reranker(built: dict) -> str:
    """The reranker the pools name (the last tokenizer's, as the study always recorded it)."""
    return list(built.values())[-1][1].reranker


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    return str(value)
