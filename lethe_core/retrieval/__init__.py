"""First stage (BM25, dense, RRF) and second stage (rerankers)."""

from .bm25 import BM25Index, BM25Params
from .dense import DenseIndex, EmbeddingCache, HashingEncoder, SentenceTransformerEncoder, load_encoder
from .fusion import rrf
from .pipeline import Candidates, HybridRetriever, PipelineConfig
from .rerank import CrossEncoderReranker, LexicalReranker, Reranker, RerankerUnavailable, load_reranker

__all__ = [
    "BM25Index", "BM25Params", "Candidates", "CrossEncoderReranker", "DenseIndex", "EmbeddingCache",
    "HashingEncoder", "HybridRetriever", "LexicalReranker", "PipelineConfig", "Reranker",
    "RerankerUnavailable", "SentenceTransformerEncoder", "load_encoder", "load_reranker", "rrf",
]
