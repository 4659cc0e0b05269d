"""What every reranker is: `score(query, texts) -> raw logits`, its identity, and the lexical test scorer.

The rerankers wing (docs/architecture.md): `base` (this), `cross_encoder` (a CrossEncoder folder on an
inference backend), `folded` (`trained:<name>`, routed per conversation fold), `recipes` (training
configs and recipe names), `training`, `registry` (`load_reranker` / `resolve_reranker`, `auto`) and
`parity` (backend-vs-torch figures shared by tests and benchmarks).
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from lethe_core.retrieval.text import tokenize

DEFAULT_HUB_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"


class Reranker(Protocol):
    name: str
    identity: str  # name | backend | weights digest: what a cached score was computed by

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Raw logits (no sigmoid), one per text; higher is more relevant."""


class RerankerUnavailable(RuntimeError):
    pass


OFFLINE_ADVICE = (
    "Offline, the MS MARCO weights cannot be downloaded. Use --reranker local:<folder> for a "
    "CrossEncoder saved on disk, or a reranker trained here (see `lethe-lab reranker --help`), "
    "or test:lexical for a quick smoke run."
)


class LexicalReranker:
    """Deterministic test reranker: logit = 8 * (share of distinct query tokens in the text) - 4.

    Fast and reproducible, so tests can exercise the whole pipeline; it is not a cross-encoder
    and its results must never be reported as one.
    """

    name = "test:lexical"
    identity = "test:lexical|v1"

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        q = set(tokenize(query))
        if not q:
            return np.full(len(texts), -4.0, dtype=np.float32)
        return np.array([8.0 * len(q & set(tokenize(t))) / len(q) - 4.0 for t in texts], dtype=np.float32)


def route(reranker: Reranker, query) -> Reranker:
    """The scorer for one query: fold-aware rerankers pick the model that never saw its conversation."""
    pick = getattr(reranker, "route", None)
    return pick(query) if pick else reranker
