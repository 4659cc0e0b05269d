"""lethe-lab core: datasets -> retrieval -> cached pools -> experiments -> results.

Thin public API; heavy modules (torch, sentence-transformers) load only when used.
"""

from .datasets import Corpus, Dataset, DatasetError, Query, Turn, load_dataset
from .metrics import longmemeval_ndcg, ndcg_at_k, recall_at_k
from .pools import PackedPools, PoolBuilder, Pools, build_pools
from .retrieval import HybridRetriever, PipelineConfig, load_encoder, load_reranker

__version__ = "0.1.0"

__all__ = [
    "Corpus", "Dataset", "DatasetError", "HybridRetriever", "PackedPools", "PipelineConfig", "PoolBuilder", "Pools",
    "Query", "Turn", "build_pools", "load_dataset", "load_encoder", "load_reranker", "longmemeval_ndcg",
    "ndcg_at_k", "recall_at_k",
]
