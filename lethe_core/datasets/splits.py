"""The protocol vocabulary: every study's protocol names and the query splits behind them, in one place.

- `paper`          every query both trains the mechanism and is evaluated (the reference's protocol; leaky).
- `heldout`        conversation halves: sorted conversation ids, first half vs second half, run both ways (A->B, B->A);
                   a dataset without conversations (NFCorpus) falls back to a seeded split of its queries.
- `heldout-within` seeded halves of the questions *within* each conversation, run both ways: both halves ask
                   about every conversation (a rescue cache only helps inside one conversation, checkpoint 06).
                   A different protocol from `heldout`, so it never carries that name.
- `prequential`    the stream in arrival order, each query evaluated before it updates the mechanism (RIF only).
- `sample100`      the reference's 100-query audit sample, trained and evaluated on itself (the rescue list only).

Split functions take the query positions' conversation ids and return sorted position arrays.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

PAPER, HELDOUT, HELDOUT_WITHIN, PREQUENTIAL, SAMPLE100 = "paper", "heldout", "heldout-within", "prequential", "sample100"
PROTOCOLS = (PAPER, HELDOUT, HELDOUT_WITHIN, PREQUENTIAL, SAMPLE100)


def check_protocol(protocol: str, allowed: Sequence[str]) -> str:
    """`protocol` if a study supports it, else a ValueError naming the ones it does."""
    if protocol not in allowed:
        raise ValueError(f"protocol must be one of {tuple(allowed)}, got {protocol!r}")
    return protocol


def conversation_halves(conversations: Sequence[str | None], query_ids: Sequence[str] | None = None,
                        seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`heldout`: positions of one half of the conversations vs the rest. `seed=None`: the first half of the sorted
    conversation ids (one fixed split); a seed draws the half at random, so that a held-out result repeated over seeds
    is repeated over conversation splits too, not only over burn-in streams (docs/protocols.md). A query without a
    conversation counts as its own (by `query_ids`), so a split never silently merges them."""
    conv = np.array([c if c else (query_ids[i] if query_ids is not None else f"#{i}") for i, c in enumerate(conversations)],
                    dtype=object)
    convs = sorted(set(conv))
    if len(convs) < 2:
        raise ValueError("the held-out protocol needs queries from at least two conversations")
    if seed is not None:
        convs = [convs[i] for i in np.random.default_rng(seed).permutation(len(convs))]
    first = set(convs[: len(convs) // 2])
    mask = np.array([c in first for c in conv], dtype=bool)
    return np.flatnonzero(mask), np.flatnonzero(~mask)


def seeded_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`heldout` on a dataset without conversations: a seeded random half of the n query positions vs the rest."""
    if n < 2:
        raise ValueError("the held-out protocol needs at least two queries")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])


def heldout_halves(conversations: Sequence[str | None], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`heldout`: conversation halves when every query has a conversation and there are two or more, else seeded halves."""
    if None not in set(conversations) and len(set(conversations)) >= 2:
        return conversation_halves(conversations)
    return seeded_halves(len(conversations), seed)


def within_conversation_halves(conversations: Sequence[str], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`heldout-within`: seeded halves of the query positions, split within each conversation."""
    rng = np.random.default_rng(seed)
    a, b = [], []
    conv = np.asarray(conversations, dtype=object)
    for c in sorted(set(conversations)):
        idx = rng.permutation(np.flatnonzero(conv == c))
        a.extend(idx[: len(idx) // 2].tolist())
        b.extend(idx[len(idx) // 2 :].tolist())
    if not a or not b:
        raise ValueError("the held-out-within protocol needs at least two queries")
    return np.sort(np.array(a, dtype=np.int64)), np.sort(np.array(b, dtype=np.int64))


def train_eval_pairs(protocol: str, conversations: Sequence[str | None], seed: int = 0,
                     query_ids: Sequence[str] | None = None, split_seed: int | None = None) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """(train positions, evaluation positions, split name) for `paper`, `heldout` and `heldout-within`; `split_seed`
    draws the held-out conversation halves (`conversation_halves`; None: the fixed sorted split)."""
    n = len(conversations)
    if protocol == PAPER:
        return [(np.arange(n), np.arange(n), "all")]
    if protocol == HELDOUT:
        a, b = conversation_halves(conversations, query_ids, split_seed)
    elif protocol == HELDOUT_WITHIN:
        a, b = within_conversation_halves(conversations, seed)
    else:
        raise ValueError(f"no train/evaluation split for protocol {protocol!r}")
    return [(a, b, "A->B"), (b, a, "B->A")]
