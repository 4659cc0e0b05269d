"""Checkpoint 07, build-time deduplication: exact duplicates by SHA-256 of normalised text plus
near-duplicates at cosine >= threshold over the turn embeddings, merged transitively.

- Exact: SHA-256 of the text after NFKC, case folding and whitespace collapsing (the reference
  hashes the text with SHA-256 too; our normalisation only makes "Bye!" and "bye! " one text).
- Near: every pair with cosine >= `threshold` (0.95, the reference's) over L2-normalised
  vectors, found by blockwise matrix products (`block` x `block` tiles of the upper triangle),
  so memory stays O(block^2 + N) and no N x N matrix is ever built (200k turns fit).
- Groups are the connected components of both relations (union-find): a ~ b and b ~ c puts a and
  c in one group even when cos(a, c) < threshold.
- Representative: the earliest turn of the group in corpus order. Corpus order is the order the
  memory was written, so the representative is the entry a write-time dedup would already hold
  when the later copies arrive (they are the ones dropped); it is also deterministic and
  independent of the embedding model, and keeps the original timestamp of the fact.

Qrels, two flavours (`DedupResult.queries`):
- strict: the original qrels, unchanged. A relevant turn that was merged away is no longer in the
  corpus, so it can never be retrieved and counts as lost (it stays in the ideal DCG), unless it
  is its own representative.
- remapped: each relevant turn is replaced by its representative; when several relevant turns
  land on one representative it keeps the maximum grade (so the ideal DCG can shrink).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from lethe_core.datasets.model import Corpus, Dataset, Query

DEFAULT_THRESHOLD = 0.95
SCOPES = ("corpus", "conversation")
_EPS = 1e-6  # float32 products of vectors whose cosine is exactly the threshold land within ~1e-7 of it


def normalise(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed and stripped."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()


def text_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


class UnionFind:
    """Disjoint sets over 0..n-1 whose root is always the smallest member (the earliest turn)."""

    def __init__(self, n: int):
        self.parent = np.arange(n, dtype=np.int64)

    def find(self, i: int) -> int:
        p = self.parent
        root = i
        while p[root] != root:
            root = p[root]
        while p[i] != root:  # path compression
            p[i], i = root, p[i]
        return int(root)

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            lo, hi = (ra, rb) if ra < rb else (rb, ra)
            self.parent[hi] = lo

    def roots(self) -> np.ndarray:
        return np.array([self.find(i) for i in range(len(self.parent))], dtype=np.int64)


def near_pairs(vectors: np.ndarray, threshold: float = DEFAULT_THRESHOLD, block: int = 2048,
               codes: np.ndarray | None = None) -> np.ndarray:
    """All pairs (i, j), i < j, with cosine >= threshold, as an (m, 2) array; blockwise, never N x N.

    `vectors` must be L2-normalised. With `codes` (one integer per row), only pairs with equal codes count.
    """
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    n = len(v)
    out: list[np.ndarray] = []
    for s in range(0, n, block):
        e = min(s + block, n)
        for t in range(s, n, block):
            u = min(t + block, n)
            sims = v[s:e] @ v[t:u].T
            i, j = np.nonzero(sims >= threshold - _EPS)
            i, j = i + s, j + t
            keep = i < j
            if codes is not None:
                keep &= codes[i] == codes[j]
            if keep.any():
                out.append(np.stack([i[keep], j[keep]], axis=1))
    return np.concatenate(out) if out else np.zeros((0, 2), dtype=np.int64)


def remap_qrels(qrels: Mapping[str, int], representative: Mapping[str, str]) -> dict[str, int]:
    """Each relevant turn moved to its representative, the maximum grade kept."""
    out: dict[str, int] = {}
    for d, g in qrels.items():
        r = representative.get(d, d)
        out[r] = max(out.get(r, g), g)
    return out


def project_ranking(ranked: Sequence[str], representative: Mapping[str, str]) -> list[str]:
    """A ranking over the original corpus read through the turn -> representative map (first occurrence kept)."""
    return list(dict.fromkeys(representative.get(d, d) for d in ranked))


@dataclass
class DedupResult:
    """The deduplicated dataset and everything needed to score against it."""

    dataset: Dataset  # corpus = representatives, remapped qrels, name `<name>-dedup<threshold*100>`
    strict: Dataset  # the same corpus and name with the original (strict) qrels
    representative: dict[str, str]  # every original turn id -> its representative's id
    kind: dict[str, str]  # turn id -> "kept" | "exact" (same normalised text as an earlier group member) | "near"
    group_sizes: dict[str, int]  # representative id -> members (itself included)
    threshold: float
    scope: str
    n_pairs: int = 0  # near pairs found (before the transitive closure)
    stats: dict = field(default_factory=dict)

    def queries(self, qrels: str = "remapped") -> list[Query]:
        if qrels not in ("strict", "remapped"):
            raise ValueError(f"qrels must be 'strict' or 'remapped', got {qrels!r}")
        return (self.dataset if qrels == "remapped" else self.strict).queries

    def groups(self) -> dict[str, list[str]]:
        """Representative -> member ids in corpus order, for groups of two or more."""
        out: dict[str, list[str]] = {}
        for d, r in self.representative.items():
            if self.group_sizes[r] > 1:
                out.setdefault(r, []).append(d)
        return out


def dedup(dataset: Dataset, vectors: np.ndarray, threshold: float = DEFAULT_THRESHOLD, scope: str = "corpus",
          block: int = 2048, name: str | None = None) -> DedupResult:
    """Merge exact and near duplicates of `dataset`'s corpus (rows of `vectors` = its turns, in order).

    `scope="conversation"` merges only turns of the same conversation (separate users' memories stay apart).
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    corpus = dataset.require_corpus()
    n = len(corpus)
    if len(vectors) != n:
        raise ValueError(f"{len(vectors)} vectors for {n} turns")
    codes = None
    if scope == "conversation":
        conv: dict[str, int] = {}
        codes = np.array([conv.setdefault(t.conversation_id, len(conv)) for t in corpus.turns], dtype=np.int64)

    uf = UnionFind(n)
    hashes = [text_hash(t) for t in corpus.texts]
    first: dict[tuple, int] = {}
    for i, h in enumerate(hashes):
        key = (h, int(codes[i])) if codes is not None else (h,)
        if key in first:
            uf.union(first[key], i)
        else:
            first[key] = i
    pairs = near_pairs(vectors, threshold, block, codes) if n else np.zeros((0, 2), dtype=np.int64)
    for i, j in pairs:
        uf.union(int(i), int(j))

    roots = uf.roots()
    ids = corpus.ids
    representative = {ids[i]: ids[int(r)] for i, r in enumerate(roots)}
    sizes = np.bincount(roots, minlength=n)
    group_sizes = {ids[i]: int(sizes[i]) for i in range(n) if roots[i] == i}
    kind: dict[str, str] = {}
    seen_hash: dict[tuple, None] = {}
    for i in range(n):
        key = (int(roots[i]), hashes[i])
        if roots[i] == i:
            kind[ids[i]] = "kept"
        else:
            kind[ids[i]] = "exact" if key in seen_hash else "near"
        seen_hash.setdefault(key, None)

    kept = Corpus([t for i, t in enumerate(corpus.turns) if roots[i] == i])
    tag = name or f"{dataset.name}-dedup{round(threshold * 100):d}" + ("-conv" if scope == "conversation" else "")

    def remapped(qs: list[Query]) -> list[Query]:
        return [replace(q, qrels=remap_qrels(q.qrels, representative)) for q in qs]

    deduped = replace(dataset, name=tag, corpus=kept, queries=remapped(dataset.queries),
                      extra_queries={k: remapped(v) for k, v in dataset.extra_queries.items()})
    strict = replace(dataset, name=tag, corpus=kept)
    n_exact = sum(k == "exact" for k in kind.values())
    n_near = sum(k == "near" for k in kind.values())
    lost = [q.id for q in dataset.queries if any(kind.get(d, "kept") != "kept" for d in q.qrels)]
    stats = {
        "turns": n, "kept": len(kept), "merged": n - len(kept), "exact": n_exact, "near": n_near,
        "merged_share": (n - len(kept)) / n if n else 0.0, "exact_share": n_exact / n if n else 0.0,
        "near_share": n_near / n if n else 0.0, "groups": sum(s > 1 for s in group_sizes.values()),
        "largest_group": max(group_sizes.values(), default=0), "near_pairs": int(len(pairs)),
        "queries_with_merged_qrels": len(lost),
        "qrels_merged": sum(kind.get(d, "kept") != "kept" for q in dataset.queries for d in q.qrels),
        "qrels": sum(len(q.qrels) for q in dataset.queries),
    }
    return DedupResult(deduped, strict, representative, kind, group_sizes, threshold, scope, int(len(pairs)), stats)
