"""Tokenizer shared by BM25 and the lexical test reranker (docs/method.md, "First stage")."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Za-z0-9_]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased ASCII word tokens: the reference's regex tokenizer."""
    return _TOKEN.findall(text.lower())
