"""The first stage (BM25, dense, RRF fusion, the hybrid pipeline), the tokenizers it shares, and the second
stage's ordering rule (`second_stage`); the rerankers themselves are their own wing (`lethe_core.rerankers`)."""

from lethe_core.retrieval.bm25 import BM25Index, BM25Params
from lethe_core.retrieval.dense import DenseIndex, EmbeddingCache, HashingEncoder, SentenceTransformerEncoder, load_encoder
from lethe_core.retrieval.fusion import rrf
from lethe_core.retrieval.pipeline import Candidates, HybridRetriever, PipelineConfig

__all__ = ["BM25Index", "BM25Params", "Candidates", "DenseIndex", "EmbeddingCache", "HashingEncoder", "HybridRetriever",
           "PipelineConfig", "SentenceTransformerEncoder", "load_encoder", "rrf"]
