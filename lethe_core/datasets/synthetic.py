"""A seeded generator of one user's long-term memory, with planted chronic distractors.

The user has recurring information *families* (topics). Each family owns a few
facts ("needles": the turn that answers a need) and a few *chronic distractors*:
turns that share the family's vocabulary and every need's entity words but never
the answer. Queries name a family's topic words and a need's entity, so the
distractors keep coming back as lexical and semantic near-misses: the pattern
clustered RIF is meant to learn. `annotations["distractors"]` records which
distractor hurts which family, so a study can check what RIF suppressed.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from lethe_core.datasets.model import Corpus, Dataset, Query, Turn

SYNTHETIC_FORM = "synthetic[:N] with N an integer number of turns, 100 <= N <= 1,000,000"
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def _lexicon(rng: np.random.Generator, n: int) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < n:
        k = rng.integers(2, 4)
        words.setdefault("".join(rng.choice(_SYLLABLES, size=k)), None)
    return list(words)


def synthetic_conversations(n_turns: int) -> int:
    """How many conversations `generate_synthetic(n_turns)` cuts its turns into (1 to 10, one per 200 turns)."""
    return max(1, min(10, n_turns // 200))


def generate_synthetic(n_turns: int = 2000, seed: int = 0, distractors_per_family: int = 2) -> Dataset:
    if not 100 <= n_turns <= 1_000_000:
        raise ValueError(f"synthetic:{n_turns}: expected {SYNTHETIC_FORM}")
    rng = np.random.default_rng(seed)
    n_families = int(np.clip(n_turns // 400, 3, 300))
    needs_per_family = 3
    vocab = _lexicon(rng, 6000 + n_families * (6 + 2 * needs_per_family))
    general, special = vocab[:6000], vocab[6000:]

    families = []
    for f in range(n_families):
        base = special[f * (6 + 2 * needs_per_family) : (f + 1) * (6 + 2 * needs_per_family)]
        topic, rest = base[:6], base[6:]
        needs = [(rest[2 * i], rest[2 * i + 1]) for i in range(needs_per_family)]  # (entity, answer)
        families.append((topic, needs))

    # Planted turns: one needle per need, `distractors_per_family` distractors per family.
    planted: list[tuple[str, int, int | None]] = []  # (text, family, need or None)
    for f, (topic, needs) in enumerate(families):
        for i, (entity, answer) in enumerate(needs):
            words = list(rng.choice(topic, size=3, replace=False)) + [entity, "is", answer]
            planted.append((" ".join(words), f, i))
        for _ in range(distractors_per_family):
            words = list(topic) + [e for e, _ in needs] + list(rng.choice(general, size=3))
            rng.shuffle(words)
            planted.append((" ".join(words), f, None))

    n_filler = max(n_turns - len(planted), 0)
    lengths = rng.integers(8, 20, size=n_filler)
    filler_words = rng.integers(0, len(general), size=int(lengths.sum()))
    filler, pos = [], 0
    for length in lengths:
        filler.append(" ".join(general[j] for j in filler_words[pos : pos + length]))
        pos += length

    slots = rng.permutation(n_filler + len(planted))[: len(planted)]
    texts: list[str | None] = [None] * (n_filler + len(planted))
    planted_at = {}
    for slot, (text, f, need) in zip(slots, planted):
        texts[slot] = text
        planted_at[int(slot)] = (f, need)
    it = iter(filler)
    texts = [t if t is not None else next(it) for t in texts]

    turns: list[Turn] = []
    needle_ids: dict[tuple[int, int], str] = {}
    distractors: dict[str, int] = {}
    n_conversations = synthetic_conversations(len(texts))
    day = datetime(2023, 1, 1, 9, 0)
    session, position = 0, 0
    session_len = int(rng.integers(10, 20))
    for i, text in enumerate(texts):
        if position == session_len:
            session, position = session + 1, 0
            session_len = int(rng.integers(10, 20))
            day += timedelta(days=int(rng.integers(1, 4)))
        conv = f"syn-c{min(i * n_conversations // len(texts), n_conversations - 1)}"
        tid = f"syn-s{session}-t{position}"
        speaker = "user" if position % 2 == 0 else "assistant"
        turns.append(Turn(tid, f"{speaker}: {text}", f"syn-s{session}", conv, day, speaker, position))
        if i in planted_at:
            f, need = planted_at[i]
            if need is None:
                distractors[tid] = f
            else:
                needle_ids[(f, need)] = tid
        position += 1

    conv_of = {t.id: t.conversation_id for t in turns}
    queries = []
    for f, (topic, needs) in enumerate(families):
        for i, (entity, _) in enumerate(needs):
            for p in range(2):  # two paraphrases per need: the information need recurs
                words = list(rng.choice(topic, size=3, replace=False)) + [entity]
                rng.shuffle(words)
                needle = needle_ids[(f, i)]
                queries.append(
                    Query(
                        id=f"syn-f{f}-n{i}-p{p}",
                        text="what about " + " ".join(words),
                        qrels={needle: 1},
                        qtype=f"family-{f}",
                        conversation_id=conv_of[needle],
                    )
                )
    return Dataset(
        name=f"synthetic-{n_turns}",
        source=Path(f"synthetic:{n_turns}:seed{seed}"),
        corpus=Corpus(turns),
        queries=queries,
        annotations={"distractors": distractors, "families": n_families, "seed": seed},
    )
