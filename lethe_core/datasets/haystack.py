"""`locomo-haystack[:N]`: LoCoMo's conversations in a pool of real human chit-chat (docs/haystack.md).

LongMemEval was built by mixing evidence sessions with filler chat; this does the same offline with the
BYU PCC Chit-Chat corpus shipped by the `chitchat-dataset` package. Filler conversations are drawn whole
in a seeded order until the pool holds exactly N turns (LoCoMo's included; the last filler conversation
keeps only its first turns). Queries and qrels stay LoCoMo's, so a filler turn is never relevant.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from lethe_core.datasets.errors import DatasetError, check_text, require
from lethe_core.datasets.model import Corpus, Dataset, Turn

HAYSTACK_NAME = "locomo-haystack"
HAYSTACK_FORM = ("locomo-haystack[:N] or locomo-haystack-msg[:N] (one message per turn), N the pool's number of "
                 "turns, LoCoMo's included")
INSTALL_HINT = "pip install chitchat-dataset==0.9.0"
FILLER_PREFIX = "cc-"  # filler conversation, session and turn ids start with it; LoCoMo's are `conv-<n>`
GRANULARITIES = ("turn", "message")
_NAME = re.compile(r"locomo-haystack(-msg)?(?::([0-9]+))?")


@dataclass(frozen=True)
class HaystackConfig:
    """What to build: `turns` is the pool size with LoCoMo's turns counted (None: every filler conversation)."""

    turns: int | None = None
    granularity: str = "turn"  # "turn": a sender's consecutive messages joined; "message": one message each
    seed: int = 0

    @property
    def name(self) -> str:
        base = HAYSTACK_NAME + ("-msg" if self.granularity == "message" else "")
        base += "" if self.turns is None else f"-{self.turns}"
        return base if self.seed == 0 else f"{base}-seed{self.seed}"  # the names the loader accepts draw with seed 0


def parse_haystack_name(name: str) -> HaystackConfig:
    """`locomo-haystack`, `locomo-haystack:100000`, `locomo-haystack-msg[:N]` -> its config."""
    m = _NAME.fullmatch(name)
    if m is None:
        raise ValueError(f"dataset {name!r}: expected {HAYSTACK_FORM}")
    return HaystackConfig(turns=int(m.group(2)) if m.group(2) else None, granularity="message" if m.group(1) else "turn")


def is_filler(turn_id: str) -> bool:
    return turn_id.startswith(FILLER_PREFIX)


def load_chitchat() -> tuple[dict, Path]:
    """The package's conversations (uuid -> record) and the file they came from."""
    try:
        import chitchat_dataset
    except ImportError:
        raise DatasetError("chitchat_dataset", f"the filler corpus of locomo-haystack is not installed: {INSTALL_HINT}") from None
    data = chitchat_dataset.Dataset()  # a dict of uuid -> conversation, read from the package's JSON file
    return data, Path(data.path)


def _speaker(k: int, i: int) -> str:
    """`cc<k>a`, `cc<k>b`: one token to the regex tokenizer (a `cc12-a` label would add the word "a" to every turn)."""
    return f"cc{k}{string.ascii_lowercase[i] if i < 26 else f'_{i}'}"


def _filler_conversation(record, uuid: str, k: int, granularity: str, path: Path) -> tuple[list[Turn], int]:
    """The turns of one chit-chat conversation as the k-th filler conversation, and how many empty messages it skipped.

    A turn text is `speaker: text`, as LoCoMo's (see locomo.py); one session per conversation.
    """
    rec = uuid
    blocks = require(record, "messages", list, path, rec)
    units: list[list[dict]] = []  # the messages behind each turn
    for bi, block in enumerate(blocks):
        if not isinstance(block, list):
            raise DatasetError(path, f"expected a list of messages, got {type(block).__name__}", record=rec, field=f"messages[{bi}]")
        for mi, msg in enumerate(block):
            if not (type(msg) is dict and type(msg.get("text")) is str and type(msg.get("timestamp")) is str
                    and type(msg.get("sender")) is str):  # the fast check; `require` then names the problem
                for key in ("text", "timestamp", "sender"):
                    require(msg, key, str, path, f"{rec} messages[{bi}][{mi}]")
        units.extend([[m] for m in block] if granularity == "message" else [block])
    senders: dict[str, str] = {}
    conv = f"{FILLER_PREFIX}{k}"
    session = f"{conv}:S1"
    tag = "m" if granularity == "message" else "t"
    turns, empty = [], 0
    for msgs in units:
        parts = [m["text"].strip() for m in msgs]
        empty += parts.count("")
        text = " ".join(p for p in parts if p)
        if not text:
            continue
        check_text(text, path, record=rec, field="messages")  # a lone surrogate fails here, naming the conversation
        first = msgs[0]
        try:
            stamp = datetime.fromisoformat(first["timestamp"].removesuffix("Z"))  # UTC, naive like LoCoMo's dates
        except ValueError:
            raise DatasetError(path, f"unparseable timestamp {first['timestamp']!r}", record=rec, field="timestamp") from None
        if stamp.tzinfo is not None:
            stamp = stamp.astimezone(timezone.utc).replace(tzinfo=None)
        if first["sender"] not in senders:
            senders[first["sender"]] = _speaker(k, len(senders))
        speaker = senders[first["sender"]]
        n = len(turns)
        turns.append(Turn(id=f"{conv}:{tag}{n}", text=f"{speaker}: {text}", session_id=session,
                          conversation_id=conv, timestamp=stamp, speaker=speaker, position=n))
    return turns, empty


def build_haystack(locomo: Dataset, chitchat: dict, cfg: HaystackConfig, chitchat_path: Path) -> Dataset:
    """LoCoMo's corpus followed by seeded whole filler conversations, cut to exactly `cfg.turns` turns."""
    if cfg.granularity not in GRANULARITIES:
        raise ValueError(f"granularity {cfg.granularity!r}: choose one of {', '.join(GRANULARITIES)}")
    base = locomo.require_corpus()
    if cfg.turns is not None and cfg.turns < len(base):
        raise ValueError(f"{cfg.name}: N must be at least LoCoMo's {len(base):,} turns ({HAYSTACK_FORM})")
    keys = sorted(chitchat)  # the file's order plays no part: the draw is a permutation of the sorted uuids
    order = np.random.default_rng(cfg.seed).permutation(len(keys))
    room = None if cfg.turns is None else cfg.turns - len(base)
    filler: list[Turn] = []
    sources: dict[str, str] = {}
    empty = 0
    issues = []
    for j in order:
        if room is not None and len(filler) == room:
            break
        k = len(sources)
        turns, skipped = _filler_conversation(chitchat[keys[j]], keys[j], k, cfg.granularity, chitchat_path)
        if not turns:
            continue
        if room is not None and len(filler) + len(turns) > room:
            kept = room - len(filler)
            issues.append({"kind": "filler_cut", "conversation": f"{FILLER_PREFIX}{k}", "kept": kept, "of": len(turns)})
            turns = turns[:kept]
        sources[f"{FILLER_PREFIX}{k}"] = keys[j]
        empty += skipped
        filler.extend(turns)
    if room is not None and len(filler) < room:
        total = len(base) + len(filler)
        raise ValueError(f"{cfg.name}: the full haystack holds {total:,} turns at {cfg.granularity} granularity; "
                         f"ask for at most that ({HAYSTACK_FORM})")
    if empty:  # counted over the drawn conversations, the cut one whole
        issues.append({"kind": "filler_empty_messages", "messages": empty})
    return replace(
        locomo,
        name=cfg.name,
        corpus=Corpus([*base.turns, *filler]),
        issues=[*locomo.issues, *issues],
        annotations={**locomo.annotations, "filler": {
            "source": str(chitchat_path), "granularity": cfg.granularity, "seed": cfg.seed,
            "conversations": len(sources), "turns": len(filler), "uuids": sources}},
    )


def load_locomo_haystack(locomo: Dataset, cfg: HaystackConfig) -> Dataset:
    """`build_haystack` over the installed chitchat-dataset package."""
    chitchat, path = load_chitchat()
    return build_haystack(locomo, chitchat, cfg, path)


def body(turn: Turn) -> str:
    """The turn's text without its `speaker: ` label."""
    label = f"{turn.speaker}: "
    return turn.text[len(label):] if turn.speaker and turn.text.startswith(label) else turn.text


@dataclass(frozen=True)
class DuplicateReport:
    """Filler turns whose exact text (label removed) occurs in more than one turn of the pool."""

    filler_turns: int
    duplicated_turns: int
    distinct_texts: int  # how many different texts those turns carry
    most_common: tuple[tuple[str, int], ...]
    duplicate_ids: frozenset[str]

    def as_dict(self) -> dict:
        return {"filler_turns": self.filler_turns, "duplicated_turns": self.duplicated_turns,
                "share": self.duplicated_turns / self.filler_turns if self.filler_turns else 0.0,
                "distinct_texts": self.distinct_texts, "most_common": [list(x) for x in self.most_common]}


def duplicate_report(corpus: Corpus, top: int = 10) -> DuplicateReport:
    counts = Counter(body(t) for t in corpus.turns)
    dup = [t for t in corpus.turns if is_filler(t.id) and counts[body(t)] > 1]
    texts = Counter(body(t) for t in dup)
    return DuplicateReport(
        filler_turns=sum(is_filler(t.id) for t in corpus.turns), duplicated_turns=len(dup), distinct_texts=len(texts),
        most_common=tuple(texts.most_common(top)), duplicate_ids=frozenset(t.id for t in dup))


def duplicate_share(ranked: Iterable[Sequence[str]], duplicate_ids: frozenset[str] | set[str], k: int = 30) -> dict:
    """How much of the top-k of ranked id lists (pools, search results) duplicated filler turns occupy."""
    lists = slots = hits = touched = 0
    for ids in ranked:
        head = list(ids)[:k]
        n = sum(d in duplicate_ids for d in head)
        lists += 1
        slots += len(head)
        hits += n
        touched += n > 0
    return {"lists": lists, "k": k, "slots": slots, "duplicate_slots": hits, "share": hits / slots if slots else 0.0,
            "lists_with_any": touched}


__all__ = [
    "DuplicateReport", "FILLER_PREFIX", "GRANULARITIES", "HAYSTACK_FORM", "HAYSTACK_NAME", "HaystackConfig", "INSTALL_HINT",
    "body", "build_haystack", "duplicate_report", "duplicate_share", "is_filler", "load_chitchat", "load_locomo_haystack",
    "parse_haystack_name",
]
