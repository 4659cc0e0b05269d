"""Query clusters for cue-dependent suppression: faiss k-means on query embeddings, frozen after fitting."""

from __future__ import annotations

import numpy as np


class QueryClusters:
    def __init__(self, centroids: np.ndarray):
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)

    @property
    def k(self) -> int:
        return len(self.centroids)

    @classmethod
    def fit(cls, query_vectors: np.ndarray, k: int, seed: int = 42, niter: int = 20) -> "QueryClusters":
        """k = 1 is global RIF (one cue for everything). Needs at least k queries."""
        if k == 1:
            return cls(np.zeros((1, query_vectors.shape[1]), dtype=np.float32))
        if len(query_vectors) < k:
            raise ValueError(f"cannot fit {k} clusters on {len(query_vectors)} queries")
        import faiss

        # min_points_per_centroid=1: faiss otherwise prints "please provide at least N training points" for every fit
        # with fewer than 39 queries per centroid (K = 50, 100 on LoCoMo's halves); the centroids are the same. How many
        # queries each centroid has is the studies' to report beside K.
        km = faiss.Kmeans(query_vectors.shape[1], k, niter=niter, seed=seed, verbose=False, min_points_per_centroid=1)
        km.train(np.ascontiguousarray(query_vectors, dtype=np.float32))
        return cls(km.centroids)

    def assign(self, query_vectors: np.ndarray) -> np.ndarray:
        """The cue: argmax of the dot product with the centroids."""
        if self.k == 1:
            return np.zeros(len(query_vectors), dtype=np.int64)
        return np.argmax(query_vectors @ self.centroids.T, axis=1)
