"""The one data model every loader produces: a corpus of turns and sets of queries with graded qrels."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np


@dataclass(frozen=True)
class Turn:
    id: str
    text: str
    session_id: str
    conversation_id: str
    timestamp: datetime | None = None
    speaker: str = ""
    position: int = 0  # index of the turn inside its session


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    qrels: dict[str, int]  # turn id -> graded relevance (> 0)
    qtype: str = ""
    conversation_id: str | None = None
    date: datetime | None = None
    answer: str | None = None
    flags: frozenset[str] = frozenset()


class Corpus:
    """An ordered, immutable collection of turns with O(1) id lookup."""

    def __init__(self, turns: Sequence[Turn]):
        self.turns: tuple[Turn, ...] = tuple(turns)
        self.index: dict[str, int] = {t.id: i for i, t in enumerate(self.turns)}
        if len(self.index) != len(self.turns):
            raise ValueError("turn ids must be unique")

    def __len__(self) -> int:
        return len(self.turns)

    def __getitem__(self, i: int) -> Turn:
        return self.turns[i]

    @cached_property
    def ids(self) -> list[str]:
        return [t.id for t in self.turns]

    @cached_property
    def texts(self) -> list[str]:
        return [t.text for t in self.turns]

    @cached_property
    def session_codes(self) -> np.ndarray:
        """Integer code of each turn's session (same code = same session)."""
        codes: dict[str, int] = {}
        return np.array([codes.setdefault(t.session_id, len(codes)) for t in self.turns], dtype=np.int32)

    @cached_property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for t in self.turns:
            h.update(t.id.encode())
            h.update(b"\0")
            h.update(t.text.encode())
            h.update(b"\1")
        return h.hexdigest()[:16]


# Dataset.dropped() key -> the `issues` kind it counts (unknown_qrel_docs counts documents, the rest records).
_DROPPED_KEYS = {
    "queries_without_qrels": "dropped_query",
    "qrels_to_unknown_turns": "unknown_qrel_docs",
    "qrels_without_queries": "qrels_without_query",
    "unresolved_evidence_ids": "unresolved_evidence",
    "normalised_evidence_ids": "normalised_evidence",
    "empty_conversations": "empty_conversation",
    "missing_answer_sessions": "missing_answer_session",
    "qrels_fallback_queries": "qrels_fallback",
}
# Kinds about the file as a whole even when they name a query id (qrels for a query the file does not have).
_FILE_WIDE_KINDS = frozenset({"qrels_without_query"})


def _scope(issue: dict) -> tuple[str | None, str | None]:
    """(query id, conversation id) an issue is about; (None, None) for a file-wide one."""
    if issue.get("kind") in _FILE_WIDE_KINDS:
        return None, None
    return issue.get("query"), issue.get("conversation")


@dataclass
class Dataset:
    """A corpus plus its evaluation queries.

    `extra_queries` holds query sets that are not part of the default evaluation
    (e.g. LoCoMo's adversarial category 5); `issues` lists input problems that were
    tolerated, one dict per problem with a `kind` (see `_DROPPED_KEYS`), so reports can show them.

    Issues are scoped, so a subset counts its own: an issue about one question names it (`query`, the id it
    has or would have had), one about a conversation names that (`conversation`), and `order` gives the file
    position of every question id (kept, dropped or extra) and of every conversation id (the position of its
    first question). `restrict_conversations` and `limit_queries` keep the issues of what they keep, and keep the
    whole file's issues in `whole_file_issues` (`dropped(whole_file=True)`). An issue naming neither is about the
    whole file and stays in every subset.
    """

    name: str
    source: Path
    corpus: Corpus | None
    queries: list[Query]
    extra_queries: dict[str, list[Query]] = field(default_factory=dict)
    issues: list[dict] = field(default_factory=list)
    corpus_hint: str = ""  # where to put the corpus when it is missing
    annotations: dict = field(default_factory=dict)  # loader-specific ground truth (e.g. synthetic distractors)
    order: dict[str, int] = field(default_factory=dict)  # question / conversation id -> position in the file
    whole_file_issues: list[dict] | None = None  # the issues of the whole file, once this is a subset of it

    def require_corpus(self) -> Corpus:
        if self.corpus is None:
            from lethe_core.datasets.errors import DatasetError

            raise DatasetError(self.source, f"the corpus is missing. {self.corpus_hint}".strip())
        return self.corpus

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self.require_corpus().fingerprint.encode())
        for q in self.queries:
            h.update(f"{q.id}\0{q.text}\0{sorted(q.qrels.items())}\1".encode())
        return h.hexdigest()[:16]

    @property
    def is_subset(self) -> bool:
        return self.whole_file_issues is not None

    def _subset(self, issues: list[dict], **changes) -> "Dataset":
        whole = self.issues if self.whole_file_issues is None else self.whole_file_issues
        return replace(self, issues=issues, whole_file_issues=whole, **changes)

    def limit_queries(self, n: int | None) -> "Dataset":
        """The first n queries (deterministic); the corpus is kept whole.

        The issues kept are those of the questions up to the n-th query in file order (dropped ones between
        them included), of the conversations those questions start in, and the file-wide ones.
        """
        if n is None or n >= len(self.queries):
            return self
        queries = self.queries[:n]
        kept = {q.id for q in queries}
        cut = self.order.get(queries[-1].id)

        def keep(issue: dict) -> bool:
            qid, conv = _scope(issue)
            if qid is None and conv is None:
                return True
            if cut is not None:
                at = self.order.get(qid if qid is not None else conv)
                if at is not None:
                    return at <= cut
            if qid is not None:  # no file order recorded: the kept queries' own issues only
                return qid in kept
            return conv in {q.conversation_id for q in queries}

        return self._subset([i for i in self.issues if keep(i)], queries=queries)

    def restrict_conversations(self, conversation_ids: Iterable[str]) -> "Dataset":
        """Keep only the turns, queries and issues of the given conversations (and the file-wide issues)."""
        keep = set(conversation_ids)
        corpus = self.require_corpus()

        def in_scope(issue: dict) -> bool:
            qid, conv = _scope(issue)
            if conv is not None:
                return conv in keep
            return qid is None  # file-wide: kept; a question of no conversation: dropped, as its query is

        return self._subset(
            [i for i in self.issues if in_scope(i)],
            corpus=Corpus([t for t in corpus.turns if t.conversation_id in keep]),
            queries=[q for q in self.queries if q.conversation_id in keep],
            extra_queries={k: [q for q in v if q.conversation_id in keep] for k, v in self.extra_queries.items()},
        )

    def first_conversations(self, n: int) -> "Dataset":
        """`restrict_conversations` to the first n conversations; n above the number there is an error naming it."""
        from lethe_core.datasets.errors import DatasetError

        ids = self.conversation_ids()
        if n < 1 or n > len(ids):
            raise DatasetError(self.source, f"--conversations {n}: {self.name} has {len(ids):,} conversation"
                               f"{'' if len(ids) == 1 else 's'}; ask for 1 to {len(ids):,}")
        return self.restrict_conversations(ids[:n])

    def conversation_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for t in self.require_corpus().turns:
            seen.setdefault(t.conversation_id, None)
        return list(seen)

    def dropped(self, whole_file: bool = False) -> dict[str, int]:
        """What the loader dropped or changed, as flat counts (zeros included) for CLI output and results JSON.

        Counts the dataset as it is: for a subset (`--conversations`, `--limit-queries`), the problems of what the
        subset holds; `whole_file=True` counts the whole file's. Derived from `issues`, so a loader only has to
        record each problem once.
        """
        from collections import Counter

        issues = self.whole_file_issues if whole_file and self.whole_file_issues is not None else self.issues
        kinds = Counter()
        for issue in issues:
            kind = issue.get("kind")
            kinds[kind] += len(issue["docs"]) if kind == "unknown_qrel_docs" else 1
        return {key: kinds[kind] for key, kind in _DROPPED_KEYS.items()}

    def dropped_entries(self) -> dict[str, dict[str, int]]:
        """`{"dropped": ...}` for a results summary, plus `"dropped_whole_file"` when this is a subset whose counts differ
        from the whole file's (so a reader never takes one for the other)."""
        mine, whole = self.dropped(), self.dropped(whole_file=True)
        return {"dropped": mine} if mine == whole else {"dropped": mine, "dropped_whole_file": whole}

    def describe(self) -> dict:
        """Counts for `lethe-lab data describe`."""
        from collections import Counter

        corpus = self.corpus
        by_type = Counter(q.qtype for q in self.queries)
        out = {
            "dataset": self.name,
            "source": str(self.source),
            "corpus_present": corpus is not None,
            "turns": len(corpus) if corpus is not None else 0,
            "sessions": len({t.session_id for t in corpus.turns}) if corpus is not None else 0,
            "conversations": len({t.conversation_id for t in corpus.turns}) if corpus is not None else 0,
            "queries": len(self.queries),
            "queries_by_type": dict(sorted(by_type.items())),
            "qrels": sum(len(q.qrels) for q in self.queries),
            "extra_query_sets": {k: len(v) for k, v in self.extra_queries.items()},
            "flags": dict(Counter(f for q in self.queries for f in q.flags)),
            "unresolved_evidence": [i for i in self.issues if i.get("kind") == "unresolved_evidence"],
            "issues": [i for i in self.issues if i.get("kind") != "unresolved_evidence"],
            "dropped": self.dropped(),
        }
        if self.is_subset:
            out["dropped_whole_file"] = self.dropped(whole_file=True)
        if corpus is None:
            out["corpus_hint"] = self.corpus_hint
        return out
