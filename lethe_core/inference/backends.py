"""Batching shared by every inference backend: length-sorted batches, padding to each batch's longest input."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Row indices grouped into batches of similar token length (longest first): less padding."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def padded(encoded: dict[str, list[list[int]]], rows: np.ndarray, names: Sequence[str] = INPUTS) -> dict[str, np.ndarray]:
    """int64 arrays of the chosen rows (the tokenizer's outputs among `names`), right-padded with zeros."""
    width = max(len(encoded["input_ids"][r]) for r in rows)
    out = {}
    for name in (n for n in names if n in encoded):
        arr = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            seq = encoded[name][r]
            arr[i, : len(seq)] = seq
        out[name] = arr
    return out


def run_sorted(encoded: dict[str, list[list[int]]], batch_size: int, forward: Callable[[dict[str, np.ndarray]], np.ndarray]) -> np.ndarray:
    """`forward` over length-sorted, padded batches; rows come back in the input order."""
    n = len(encoded["input_ids"])
    batches = length_sorted_batches([len(x) for x in encoded["input_ids"]], batch_size)
    parts = [(rows, np.asarray(forward(padded(encoded, rows)), dtype=np.float32)) for rows in batches]
    out = np.empty((n,) + parts[0][1].shape[1:], dtype=np.float32)
    for rows, values in parts:
        out[rows] = values
    return out


CHARS_PER_TOKEN = 20  # the first cut: max_tokens x this many characters (checked against the tokenizer, never trusted)


def clip_long_texts(texts: Sequence[str], tokenizer, max_tokens: int) -> list[str]:
    """`texts` with every text longer than `max_tokens * CHARS_PER_TOKEN` characters cut to a prefix whose first
    `max_tokens` tokens are exactly the whole text's, so truncating either to `max_tokens` gives the same input.

    A tokenizer truncates only after tokenising a text in full: a 1 MB turn cost 1.4 s to embed and a
    100,000-character query 1.3 s per scored pair before. The cut is exact: the prefix is tokenised, the tokens
    of its last (possibly cut) word are ignored, and the prefix is used only when the tokens before that word
    number at least `max_tokens`; otherwise the cut is widened (x8) until they do or the text is whole. Texts under
    the bound, all of LoCoMo's and nearly every real turn, are passed through untouched, so no score of theirs
    changes. A tokenizer without word ids (not a fast tokenizer) gets the texts unchanged.
    """
    bound = max_tokens * CHARS_PER_TOKEN
    if not any(len(t) > bound for t in texts) or not getattr(tokenizer, "is_fast", False):
        return list(texts)
    clipped: dict[str, str] = {}  # a query repeated once per pair is cut once
    return [(clipped.get(t) or clipped.setdefault(t, clip_text(t, tokenizer, max_tokens, bound))) if len(t) > bound else t
            for t in texts]


def clip_text(text: str, tokenizer, max_tokens: int, bound: int | None = None) -> str:
    """One text of `clip_long_texts` (see there)."""
    bound = bound or max_tokens * CHARS_PER_TOKEN
    while len(text) > bound:
        prefix = text[:bound]
        words = tokenizer(prefix, add_special_tokens=False, truncation=False, verbose=False).word_ids()
        if words and words[-1] is not None:
            whole = sum(1 for w in words if w is not None and w < words[-1])  # tokens of the words the cut left whole
            if whole >= max_tokens:
                return prefix
        bound *= 8
    return text
