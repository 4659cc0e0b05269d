"""lethe-lab core: datasets -> retrieval -> rerankers -> cached pools -> RIF and mechanisms -> experiments -> results -> report.

Thin public API; heavy modules (torch, sentence-transformers) load only when used.
"""

from lethe_core.datasets import Corpus, Dataset, DatasetError, Query, Turn, load_dataset
from lethe_core.measures.metrics import longmemeval_ndcg, ndcg_at_k, recall_at_k
from lethe_core.pools.cache import PackedPools, PoolBuilder, Pools, build_pools
from lethe_core.rerankers import load_reranker, resolve_reranker
from lethe_core.retrieval import HybridRetriever, PipelineConfig, load_encoder

__version__ = "0.1.0"

__all__ = [
    "Corpus", "Dataset", "DatasetError", "HybridRetriever", "PackedPools", "PipelineConfig", "PoolBuilder", "Pools",
    "Query", "Turn", "build_pools", "load_dataset", "load_encoder", "load_reranker", "resolve_reranker", "longmemeval_ndcg",
    "ndcg_at_k", "recall_at_k",
]
