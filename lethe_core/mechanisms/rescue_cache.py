"""Rescue cache (checkpoint 06): deep candidates the reranker accepted, found again through similar queries.

The reference, every 5 steps, reranked positions 30–100 of the current query's FAISS top-100 and stored each
one scoring at least 0.0 together with the query's embedding (at most 5,000 entries, the lowest score evicted
first, entries older than 5,000 steps aged out). A later query looks the cache up by the cosine of its embedding
to the stored queries (≥ 0.5) and adds the best ≤ 20 turns, ranked by similarity × score, to its pool. Here the
mined candidates are the deep pool's members that the shallow pool missed, and the ranking weight is
similarity × sigmoid(score) so that it stays positive on any reranker scale. docs/adaptive_depth.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RescueParams:
    mine_every: int = 5  # mine the current query's deep candidates every this many steps
    accept: float = 0.0  # keep a mined candidate whose score is at least this (the reference: logit >= 0.0)
    capacity: int = 5000  # most entries; the lowest-scoring are evicted first
    min_similarity: float = 0.5  # cosine of the looking-up query to a stored query
    max_added: int = 20  # turns added to a pool per lookup
    age_out: int = 5000  # entries not refreshed for this many steps are dropped

    def __post_init__(self):
        if self.mine_every < 1 or self.capacity < 1 or self.max_added < 0 or self.age_out < 1:
            raise ValueError(f"rescue parameters out of range: {self}")


class RescueCache:
    """Entries (stored query key and vector, turn, score, step of the last sighting), one per (query key, turn)."""

    def __init__(self, dim: int, params: RescueParams = RescueParams()):
        self.params = params
        self.vectors = np.zeros((0, dim), dtype=np.float32)
        self.keys: list[str] = []
        self.docs = np.zeros(0, dtype=np.int64)
        self.scores = np.zeros(0, dtype=np.float64)
        self.steps = np.zeros(0, dtype=np.int64)
        self.evicted = 0
        self.aged_out = 0

    def __len__(self) -> int:
        return len(self.docs)

    def mine(self, step: int, key: str, qvec: np.ndarray, docs: np.ndarray, scores: np.ndarray) -> int:
        """Store the accepted (score >= accept) candidates of one query; a (key, turn) already stored is refreshed
        (step, best score). Returns how many new entries were stored."""
        self.expire(step)
        docs, scores = np.asarray(docs, dtype=np.int64), np.asarray(scores, dtype=np.float64)
        ok = scores >= self.params.accept
        mine = np.flatnonzero(np.array([k == key for k in self.keys], dtype=bool)) if self.keys else np.zeros(0, dtype=np.int64)
        where = {int(self.docs[j]): j for j in mine}
        new_docs, new_scores = [], []
        for d, s in zip(docs[ok], scores[ok]):
            j = where.get(int(d))
            if j is None:
                new_docs.append(int(d))
                new_scores.append(float(s))
            else:
                self.steps[j] = step
                self.scores[j] = max(self.scores[j], float(s))
        if new_docs:
            n = len(new_docs)
            self.vectors = np.vstack([self.vectors, np.repeat(np.asarray(qvec, np.float32)[None, :], n, axis=0)])
            self.keys.extend([key] * n)
            self.docs = np.concatenate([self.docs, new_docs])
            self.scores = np.concatenate([self.scores, new_scores])
            self.steps = np.concatenate([self.steps, np.full(n, step, dtype=np.int64)])
            self._evict()
        return len(new_docs)

    def expire(self, step: int) -> None:
        old = (step - self.steps) > self.params.age_out
        if old.any():
            self.aged_out += int(old.sum())
            self._keep(~old)

    def _evict(self) -> None:
        over = len(self.docs) - self.params.capacity
        if over > 0:
            # lowest score first; among equal scores the oldest sighting goes first (stable order)
            order = np.lexsort((self.steps, self.scores))
            keep = np.ones(len(self.docs), dtype=bool)
            keep[order[:over]] = False
            self.evicted += over
            self._keep(keep)

    def _keep(self, mask: np.ndarray) -> None:
        self.vectors, self.docs, self.scores, self.steps = self.vectors[mask], self.docs[mask], self.scores[mask], self.steps[mask]
        self.keys = [k for k, m in zip(self.keys, mask) if m]

    def lookup(self, qvec: np.ndarray, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Up to `max_added` turns not in `exclude`, best first by max over entries of similarity × sigmoid(score),
        from entries whose stored query has cosine >= min_similarity. Returns (turns, weights)."""
        if not len(self.docs) or self.params.max_added == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        sims = self.vectors @ np.asarray(qvec, np.float32)
        hit = sims >= self.params.min_similarity
        if exclude is not None and len(exclude):
            hit &= ~np.isin(self.docs, exclude)
        if not hit.any():
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        weight = sims[hit].astype(np.float64) / (1.0 + np.exp(-self.scores[hit]))
        docs = self.docs[hit]
        best: dict[int, float] = {}
        for d, w in zip(docs.tolist(), weight.tolist()):
            if w > best.get(d, -np.inf):
                best[d] = w
        ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[: self.params.max_added]
        return np.array([d for d, _ in ranked], dtype=np.int64), np.array([w for _, w in ranked])
