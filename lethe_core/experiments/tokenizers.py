"""The BM25 tokenizer ablation (checkpoint 8): quality and cost of each tokenizer, on the same queries.

For every tokenizer in `lethe_core.text.TOKENIZERS` the first stage is rebuilt with that tokenizer
(`PipelineConfig.tokenizer`) and its pools go through `PoolBuilder`, so a union member that another
tokenizer's pool already holds is read from the pair-score cache, and only new members are scored.
Reported per tokenizer: BM25-only, RRF and `full` (reranked RRF top-30) NDCG@10 / Recall@10 with
bootstrap CIs, the paired difference against `regex` (the default) with its CI and permutation p,
and the BM25 cost: index build time (tokenising the corpus + building the index) and mean query
latency (tokenising + searching), median over `timing_repeats` runs on this machine. `pareto` marks
the tokenizers no other tokenizer beats on quality without costing more.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .. import stats
from ..datasets import Dataset, load_dataset
from ..paths import results_dir
from ..pools import PoolBuilder
from ..retrieval.bm25 import BM25Index, BM25Params
from ..retrieval.pipeline import PipelineConfig
from ..retrieval.rerank import resolve_reranker
from ..second_stage import DEFAULT_MODE
from ..text import DEFAULT_TOKENIZER, TOKENIZERS, clear_caches, get_tokenizer
from .systems import _atomic_write, _slug, evaluate_systems

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
class TokenizerExperiment:
    """Every tokenizer through the same first stage and reranker; writes results/tokenizers-<dataset>-.../."""

    dataset: str = "locomo"
    path: str | None = None
    reranker: str = "auto"
    backend: str = "auto"
    conversations: int | None = None
    limit_queries: int | None = None
    tokenizers: tuple[str, ...] = tuple(TOKENIZERS)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)  # its tokenizer is replaced by each of `tokenizers`
    second_stage: str = DEFAULT_MODE
    calibration: bool = True
    timing_repeats: int = 3
    seed: int = 0
    progress: bool = True

    def run(self, results_root: Path | None = None) -> dict:
        for t in self.tokenizers:
            get_tokenizer(t)
        ds: Dataset = load_dataset(self.dataset, self.path, self.conversations, self.limit_queries)
        reranker = resolve_reranker(self.reranker, backend=self.backend)
        corpus = ds.require_corpus()
        frames, cost, keys, scored = [], {}, {}, {}
        for tok in self.tokenizers:
            config = replace(self.pipeline, tokenizer=tok)
            builder = PoolBuilder(ds, reranker, config, progress=self.progress)
            pools = builder.build()
            keys[tok] = builder.key
            scored[tok] = {"scored": int(getattr(builder, "scored", 0)), "cached": int(getattr(builder, "hits", 0))}
            packed = pools.packed([q.id for q in ds.queries], self.calibration)
            per_query = evaluate_systems(ds, packed, config.pool_size, self.second_stage)
            frames.append(per_query[per_query["system"].isin(ABLATED + ("vector",))].assign(tokenizer=tok))
            cost[tok] = bm25_cost(corpus.texts, [q.text for q in ds.queries], tok, config.bm25, config.k_leg,
                                  self.timing_repeats)
        per_query = pd.concat(frames, ignore_index=True)
        digest = hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:10]
        name = f"tokenizers-{ds.name}-{_slug(pools.reranker)}-{self.second_stage}-{digest}"
        out_dir = Path(results_root or results_dir()) / name
        out_dir.mkdir(parents=True, exist_ok=True)
        summary = {
            "dataset": ds.name, "reranker": pools.reranker, "n_queries": len(ds.queries), "n_turns": len(corpus),
            "baseline": DEFAULT_TOKENIZER if DEFAULT_TOKENIZER in self.tokenizers else self.tokenizers[0],
            "rows": summarise_tokenizers(per_query, cost, DEFAULT_TOKENIZER, self.seed),
            "pool_keys": keys, "pairs_scored": scored, "results_dir": str(out_dir),
            "config": {**asdict(self), "pipeline": asdict(self.pipeline)},
        }
        _atomic_write(out_dir / "per_query.parquet", lambda p: per_query.to_parquet(p, index=False))
        _atomic_write(out_dir / "summary.json", lambda p: p.write_text(json.dumps(summary, indent=2, default=_plain)))
        return summary


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    return str(value)
