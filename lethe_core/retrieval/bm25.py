"""Okapi BM25 with rank-bm25 `BM25Okapi` semantics, as one sparse matrix product per query.

rank-bm25 loops over every document for every query token (seconds per query at
200k turns). Here the per-(term, document) weight is precomputed into a CSR matrix,
so scoring a query is a sparse row gather: identical scores, orders of magnitude
faster. Parity with rank-bm25 is pinned by tests/parity/test_bm25_parity.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from lethe_core.retrieval.topk import top_k


@dataclass(frozen=True)
class BM25Params:
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25


class BM25Index:
    def __init__(self, tokenized_docs: Sequence[Sequence[str]], params: BM25Params = BM25Params()):
        self.params = params
        n = len(tokenized_docs)
        if n == 0:
            raise ValueError("BM25 needs at least one document")
        vocab: dict[str, int] = {}
        rows, cols, tfs = [], [], []
        doc_len = np.empty(n, dtype=np.float64)
        for j, doc in enumerate(tokenized_docs):
            doc_len[j] = len(doc)
            for term, tf in Counter(doc).items():
                rows.append(vocab.setdefault(term, len(vocab)))
                cols.append(j)
                tfs.append(tf)
        rows_a = np.asarray(rows, dtype=np.int64)
        cols_a = np.asarray(cols, dtype=np.int64)
        tf_a = np.asarray(tfs, dtype=np.float64)
        df = np.bincount(rows_a, minlength=len(vocab)).astype(np.float64)

        # rank-bm25: idf = ln(N - df + 0.5) - ln(df + 0.5); negatives floored to eps * mean(idf).
        idf = np.log(n - df + 0.5) - np.log(df + 0.5)
        eps = params.epsilon * idf.mean() if len(idf) else 0.0
        idf = np.where(idf < 0, eps, idf)
        avgdl = doc_len.sum() / n
        norm = params.k1 * (1 - params.b + params.b * doc_len[cols_a] / avgdl) if avgdl > 0 else params.k1
        weights = idf[rows_a] * tf_a * (params.k1 + 1) / (tf_a + norm)
        self.matrix = sp.csr_matrix((weights, (rows_a, cols_a)), shape=(len(vocab), n))
        self.vocab = vocab
        self.idf = idf
        self.n_docs = n

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every document; repeated query tokens count again, as in rank-bm25."""
        counts = Counter(t for t in query_tokens if t in self.vocab)
        if not counts:
            return np.zeros(self.n_docs)
        rows = np.fromiter((self.vocab[t] for t in counts), dtype=np.int64)
        mult = np.fromiter(counts.values(), dtype=np.float64)
        return np.asarray(self.matrix[rows].T @ mult).ravel()

    def search(self, query_tokens: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k documents with a positive score (a document sharing no term is not retrieved).

        Selection runs over the positive scores only: np.partition over a vector of mostly equal zeros
        is slow (docs/haystack.md). `pos` is increasing, so ties still go to the lower index.
        """
        scores = self.scores(query_tokens)
        pos = np.flatnonzero(scores > 0)
        idx = pos[top_k(scores[pos], k)]
        return idx, scores[idx]


__all__ = ["BM25Index", "BM25Params"]
