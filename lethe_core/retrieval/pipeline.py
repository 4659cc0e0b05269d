"""The first stage as one object: BM25 top-k and dense top-k fused by RRF into a candidate union."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..datasets.model import Corpus, Query
from ..paths import cache_dir
from ..text import tokenize
from .bm25 import BM25Index, BM25Params
from .dense import DEFAULT_ENCODER, DenseIndex, EmbeddingCache, Encoder, LazyEncoder
from .fusion import RRF_K, rrf


@dataclass(frozen=True)
class PipelineConfig:
    """First-stage settings (docs/method.md, "First stage"). `k_leg` is the depth of each leg (30; 80 as an option)."""

    k_leg: int = 30
    rrf_k: int = RRF_K
    pool_size: int = 30  # P: how many of the union the reranker sees in the paper's pipeline
    encoder: str = DEFAULT_ENCODER
    encoder_backend: str = "torch"  # torch | onnx | onnx-int8 (lethe_core.inference)
    bm25: BM25Params = field(default_factory=BM25Params)

    def key(self) -> str:
        fields = asdict(self)
        if fields["encoder_backend"] == "torch":  # pools cached before the field existed keep their key
            del fields["encoder_backend"]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class Candidates:
    """One query's union, sorted by RRF (ties by turn id). Ranks are 0-based; -1 = absent from that leg."""

    doc_idx: np.ndarray
    bm25_rank: np.ndarray
    bm25_score: np.ndarray
    dense_rank: np.ndarray
    dense_score: np.ndarray
    rrf: np.ndarray


def query_vectors(queries: Sequence[Query], config: PipelineConfig, cache_root: Path | None = None, progress: bool = False) -> np.ndarray:
    """The queries' bi-encoder embeddings through the on-disk cache (the model loads only for texts not cached)."""
    encoder = LazyEncoder(config.encoder, config.encoder_backend)
    return EmbeddingCache(cache_root or cache_dir(), encoder.name).embed(encoder, [q.text for q in queries], progress=progress)


class HybridRetriever:
    def __init__(self, corpus: Corpus, config: PipelineConfig = PipelineConfig(), encoder: Encoder | None = None,
                 cache_root: Path | None = None, progress: bool = True):
        self.corpus = corpus
        self.config = config
        self.progress = progress
        self.encoder = encoder or LazyEncoder(config.encoder, config.encoder_backend)
        self.embeddings = EmbeddingCache(cache_root or cache_dir(), self.encoder.name)
        self.bm25 = BM25Index([tokenize(t) for t in corpus.texts], config.bm25)
        self.doc_vectors = self.embeddings.embed(self.encoder, corpus.texts, progress=progress)
        self.dense = DenseIndex(self.doc_vectors)

    def embed_queries(self, queries: Sequence[Query]) -> np.ndarray:
        return self.embeddings.embed(self.encoder, [q.text for q in queries], progress=self.progress)

    def bm25_search(self, query: Query, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        return self.bm25.search(tokenize(query.text), k or self.config.k_leg)

    def candidates(self, queries: Sequence[Query]) -> list[Candidates]:
        k = self.config.k_leg
        qvecs = self.embed_queries(queries)
        dense_idx, dense_scores = self.dense.search(qvecs, k)
        ids = self.corpus.ids
        out = []
        for qi, query in enumerate(queries):
            b_idx, b_scores = self.bm25_search(query, k)
            d_idx, d_scores = dense_idx[qi], dense_scores[qi]
            keep = d_idx >= 0
            d_idx, d_scores = d_idx[keep], d_scores[keep]
            fused = rrf([b_idx.tolist(), d_idx.tolist()], self.config.rrf_k)
            order = sorted(fused, key=lambda d: (-fused[d], ids[d]))
            pos = {d: i for i, d in enumerate(order)}
            n = len(order)
            bm25_rank = np.full(n, -1, np.int16)
            bm25_score = np.full(n, np.nan, np.float32)
            dense_rank = np.full(n, -1, np.int16)
            dense_score = np.full(n, np.nan, np.float32)
            for r, (d, s) in enumerate(zip(b_idx.tolist(), b_scores)):
                bm25_rank[pos[d]], bm25_score[pos[d]] = r, s
            for r, (d, s) in enumerate(zip(d_idx.tolist(), d_scores)):
                dense_rank[pos[d]], dense_score[pos[d]] = r, s
            out.append(Candidates(np.array(order, np.int32), bm25_rank, bm25_score, dense_rank, dense_score,
                                  np.array([fused[d] for d in order])))
        return out
