"""The first stage as one object: BM25 top-k and dense top-k fused by RRF into a candidate union.

`scope="conversation"` restricts each query's two searches to the turns of its own conversation
(LoCoMo's own retrieval code, and most published LoCoMo figures, search one conversation at a time):
BM25 runs on a per-conversation sub-index (its IDF and average length are the conversation's),
dense search on the conversation's vectors. Ranks and RRF are computed as in the global scope.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from lethe_core.datasets.model import Corpus, Query
from lethe_core.util.paths import cache_dir
from lethe_core.retrieval.text import DEFAULT_TOKENIZER, get_tokenizer
from lethe_core.retrieval.bm25 import BM25Index, BM25Params
from lethe_core.retrieval.dense import DEFAULT_ENCODER, DenseIndex, EmbeddingCache, Encoder, LazyEncoder
from lethe_core.retrieval.fusion import RRF_K, fused_order, rrf


SCOPES = ("global", "conversation")


@dataclass(frozen=True)
class PipelineConfig:
    """First-stage settings (docs/method.md, "First stage"). `k_leg` is the depth of each leg (30; 80 as an option)."""

    k_leg: int = 30
    rrf_k: int = RRF_K
    pool_size: int = 30  # P: how many of the union the reranker sees in the paper's pipeline
    encoder: str = DEFAULT_ENCODER
    encoder_backend: str = "torch"  # torch | onnx | onnx-int8 (lethe_core.inference)
    bm25: BM25Params = field(default_factory=BM25Params)
    tokenizer: str = DEFAULT_TOKENIZER  # BM25 tokenizer of corpus and queries (lethe_core.retrieval.text.TOKENIZERS)
    scope: str = "global"  # global: search every turn | conversation: only the query's own conversation

    def __post_init__(self):
        get_tokenizer(self.tokenizer)
        if self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}; choose one of {', '.join(SCOPES)}")

    def key(self) -> str:
        fields = asdict(self)
        # Fields at their default are left out, so pools cached before the field existed keep their key.
        for name, default in (("encoder_backend", "torch"), ("tokenizer", DEFAULT_TOKENIZER), ("scope", "global")):
            if fields[name] == default:
                del fields[name]
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


def corpus_vectors(corpus: Corpus, config: PipelineConfig, cache_root: Path | None = None, progress: bool = False) -> np.ndarray:
    """The corpus turns' bi-encoder embeddings through the same cache (a pool build has usually stored them already)."""
    encoder = LazyEncoder(config.encoder, config.encoder_backend)
    return EmbeddingCache(cache_root or cache_dir(), encoder.name).embed(encoder, corpus.texts, progress=progress)


class HybridRetriever:
    def __init__(self, corpus: Corpus, config: PipelineConfig = PipelineConfig(), encoder: Encoder | None = None,
                 cache_root: Path | None = None, progress: bool = True):
        self.corpus = corpus
        self.config = config
        self.progress = progress
        self.encoder = encoder or LazyEncoder(config.encoder, config.encoder_backend)
        self.embeddings = EmbeddingCache(cache_root or cache_dir(), self.encoder.name)
        self.tokenize = get_tokenizer(config.tokenizer)
        self.doc_tokens = [self.tokenize(t) for t in corpus.texts]
        self.bm25 = BM25Index(self.doc_tokens, config.bm25) if config.scope == "global" else None
        self.doc_vectors = self.embeddings.embed(self.encoder, corpus.texts, progress=progress)
        self.dense = DenseIndex(self.doc_vectors) if config.scope == "global" else None
        self._members: dict[str, np.ndarray] = {}
        self._sub: dict[str, tuple[BM25Index, DenseIndex]] = {}

    def embed_queries(self, queries: Sequence[Query]) -> np.ndarray:
        return self.embeddings.embed(self.encoder, [q.text for q in queries], progress=self.progress)

    def members(self, conversation_id: str) -> np.ndarray:
        """Corpus positions of one conversation's turns, in corpus order."""
        if not self._members:
            groups: dict[str, list[int]] = {}
            for i, t in enumerate(self.corpus.turns):
                groups.setdefault(t.conversation_id, []).append(i)
            self._members = {c: np.asarray(v, dtype=np.int64) for c, v in groups.items()}
        if conversation_id not in self._members:
            raise ValueError(f"scope 'conversation': no turn belongs to conversation {conversation_id!r}")
        return self._members[conversation_id]

    def _scope_of(self, query: Query) -> str:
        if query.conversation_id is None:
            raise ValueError(f"scope 'conversation' needs each query's conversation; query {query.id!r} has none "
                             "(use scope 'global' for this dataset)")
        return query.conversation_id

    def _sub_index(self, conversation_id: str) -> tuple[BM25Index, DenseIndex]:
        if conversation_id not in self._sub:
            m = self.members(conversation_id)
            self._sub[conversation_id] = (BM25Index([self.doc_tokens[i] for i in m], self.config.bm25),
                                          DenseIndex(self.doc_vectors[m]))
        return self._sub[conversation_id]

    def bm25_search(self, query: Query, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        k = k or self.config.k_leg
        tokens = self.tokenize(query.text)
        if self.config.scope == "global":
            return self.bm25.search(tokens, k)
        conv = self._scope_of(query)
        idx, scores = self._sub_index(conv)[0].search(tokens, k)
        return self.members(conv)[idx], scores

    def dense_search(self, queries: Sequence[Query], qvecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k corpus positions (-1 = none) and scores per query, within each query's scope."""
        if self.config.scope == "global":
            return self.dense.search(qvecs, k)
        idx = np.full((len(queries), k), -1, np.int64)
        scores = np.full((len(queries), k), np.nan, np.float32)
        by_conv: dict[str, list[int]] = {}
        for qi, q in enumerate(queries):
            by_conv.setdefault(self._scope_of(q), []).append(qi)
        for conv, qis in by_conv.items():
            sub_idx, sub_scores = self._sub_index(conv)[1].search(qvecs[qis], k)
            mapped = np.where(sub_idx >= 0, self.members(conv)[np.maximum(sub_idx, 0)], -1)
            idx[qis, : mapped.shape[1]], scores[qis, : mapped.shape[1]] = mapped, sub_scores
        return idx, scores

    def candidates(self, queries: Sequence[Query]) -> list[Candidates]:
        k = self.config.k_leg
        qvecs = self.embed_queries(queries)
        dense_idx, dense_scores = self.dense_search(queries, qvecs, k)
        ids = self.corpus.ids
        out = []
        for qi, query in enumerate(queries):
            b_idx, b_scores = self.bm25_search(query, k)
            d_idx, d_scores = dense_idx[qi], dense_scores[qi]
            keep = d_idx >= 0
            d_idx, d_scores = d_idx[keep], d_scores[keep]
            fused = rrf([b_idx.tolist(), d_idx.tolist()], self.config.rrf_k)
            order = fused_order(fused, ids)
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
