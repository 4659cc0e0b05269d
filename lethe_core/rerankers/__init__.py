"""Rerankers: one interface (`score(query, texts) -> raw logits`), loaded by name (`registry`), trained here
(`training`, `recipes`, `folded`). See docs/architecture.md for the wing's modules."""

from lethe_core.rerankers.base import DEFAULT_HUB_MODEL, LexicalReranker, Reranker, RerankerUnavailable, route
from lethe_core.rerankers.cross_encoder import CrossEncoderReranker
from lethe_core.rerankers.folded import FoldedReranker
from lethe_core.rerankers.registry import auto_candidates, auto_entries, load_reranker, resolve_reranker

__all__ = ["DEFAULT_HUB_MODEL", "CrossEncoderReranker", "FoldedReranker", "LexicalReranker", "Reranker", "RerankerUnavailable",
           "auto_candidates", "auto_entries", "load_reranker", "resolve_reranker", "route"]
