"""Write-time enrichment (checkpoint 17): extra text attached to turns before they are indexed.

An enricher maps one turn (and its session date) to four fields, the reference's JSON schema
(`lethe_reference/lethe/enrichment.py`): `gist` (one sentence), `anticipated_queries` (questions the
turn answers), `entities` (surface forms) and `temporal_markers` (dates / relative times resolved
against the session date). Any field may be empty.

`enrich(dataset, enricher, select)` returns a new Dataset whose corpus texts are the *index texts*
(original text + the fields) — that is what BM25 and the bi-encoder must see — with the original texts
kept in `annotations["enrichment"]["original_texts"]`. As in the reference, the reranker must still score
the ORIGINAL turn text: `experiments.enrichment_study.pool_builder()` does that without touching the pool or pipeline code, by
handing `PoolBuilder` a `HybridRetriever` built over the enriched corpus while the builder's own dataset
(`original_view()`) carries the original texts, which is what `PoolBuilder._score` gives the reranker.
The enriched dataset's name carries a digest of its index texts, so its pools never share a cache folder
with the unenriched dataset's or another enrichment's.

Which turns are enriched (`select`): `"all"` (the honest protocol), `"relevant_sessions"` (the reference's
leak: every turn of every session holding a qrels-relevant turn of an evaluation query) and
`"random_sessions"` (its qrels-blind twin: the same number of sessions per conversation, drawn at random
with `seed`), or a callable `(dataset, seed) -> set of turn ids`, or an explicit collection of turn ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from lethe_core.datasets.model import Corpus, Dataset, Turn

FIELDS = ("gist", "anticipated_queries", "entities", "temporal_markers")


@dataclass(frozen=True)
class Enrichment:
    gist: str = ""
    anticipated_queries: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    temporal_markers: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping) -> "Enrichment":
        """From the four-field JSON (missing fields are empty; a lone string where a list is expected is one item)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"expected an object with fields {', '.join(FIELDS)}, got {type(data).__name__}")

        def items(name):
            value = data.get(name) or []
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"field {name!r} must be a list of strings, got {type(value).__name__}")
            return tuple(str(v).strip() for v in value if str(v).strip())

        gist = data.get("gist") or ""
        if not isinstance(gist, str):
            raise ValueError(f"field 'gist' must be a string, got {type(gist).__name__}")
        return cls(gist.strip(), items("anticipated_queries"), items("entities"), items("temporal_markers"))

    def to_dict(self) -> dict:
        return {"gist": self.gist, "anticipated_queries": list(self.anticipated_queries),
                "entities": list(self.entities), "temporal_markers": list(self.temporal_markers)}

    def is_empty(self) -> bool:
        return not (self.gist or self.anticipated_queries or self.entities or self.temporal_markers)

    def merge(self, other: "Enrichment") -> "Enrichment":
        """Field-wise union (gists joined, list items de-duplicated in order)."""
        def union(a, b):
            return tuple(dict.fromkeys(a + b))
        gist = " ".join(g for g in (self.gist, other.gist) if g)
        return Enrichment(gist, union(self.anticipated_queries, other.anticipated_queries),
                          union(self.entities, other.entities), union(self.temporal_markers, other.temporal_markers))


def index_text(original: str, e: Enrichment) -> str:
    """What retrieval indexes: the original text, then each non-empty field on its own line."""
    parts = [original]
    if e.gist:
        parts.append(e.gist)
    if e.anticipated_queries:
        parts.append(" ".join(e.anticipated_queries))
    if e.entities:
        parts.append("Entities: " + "; ".join(e.entities))
    if e.temporal_markers:
        parts.append("Time: " + "; ".join(e.temporal_markers))
    return "\n".join(parts)


@runtime_checkable
class Enricher(Protocol):
    """Maps one turn and its session date to an Enrichment. An enricher may also offer
    `enrich_many(turns) -> dict[turn id, Enrichment]` (batched / concurrent work; turns it could not
    enrich are left out); `enrich()` prefers it."""

    name: str

    def enrich_turn(self, turn: Turn, session_date: datetime | None) -> Enrichment: ...


# ---- selectors -------------------------------------------------------------------------------------------

def select_all(dataset: Dataset, seed: int = 0, max_turns: int | None = None) -> set[str]:
    if max_turns is not None:
        raise ValueError("max_turns applies to the session selectors (relevant_sessions, random_sessions) only")
    return set(dataset.require_corpus().ids)


def relevant_sessions(dataset: Dataset, max_turns: int | None = None) -> set[str]:
    """Sessions holding a qrels-relevant turn; with `max_turns`, whole sessions in corpus order while the turns
    taken stay within the budget (the reference's `--max 1000`, which cut the same list in corpus order)."""
    corpus = dataset.require_corpus()
    relevant = {corpus.turns[corpus.index[d]].session_id for q in dataset.queries for d in q.qrels if d in corpus.index}
    if max_turns is None:
        return relevant
    sizes: dict[str, int] = {}
    for t in corpus.turns:
        sizes[t.session_id] = sizes.get(t.session_id, 0) + 1
    chosen, used = set(), 0
    for session in sizes:  # corpus order
        if session in relevant:
            if used + sizes[session] > max_turns:
                break
            chosen.add(session)
            used += sizes[session]
    return chosen


def _turns_of(dataset: Dataset, sessions: set[str]) -> set[str]:
    return {t.id for t in dataset.require_corpus().turns if t.session_id in sessions}


def select_relevant_sessions(dataset: Dataset, seed: int = 0, max_turns: int | None = None) -> set[str]:
    """The reference's LEAK: every turn of every session that holds a qrels-relevant turn (uses labels)."""
    return _turns_of(dataset, relevant_sessions(dataset, max_turns))


def select_random_sessions(dataset: Dataset, seed: int = 0, max_turns: int | None = None) -> set[str]:
    """The leak's qrels-blind twin: per conversation, as many sessions as the leak (with the same `max_turns`)
    picks there, drawn at random with `seed`. Only the counts come from the labels, never which sessions."""
    corpus = dataset.require_corpus()
    leak = relevant_sessions(dataset, max_turns)
    sessions_of: dict[str, dict[str, None]] = {}
    for t in corpus.turns:
        sessions_of.setdefault(t.conversation_id, {}).setdefault(t.session_id, None)
    rng = np.random.default_rng(seed)
    chosen: set[str] = set()
    for conv, ordered in sessions_of.items():
        sessions = list(ordered)
        n = sum(s in leak for s in sessions)
        if n:
            chosen.update(sessions[i] for i in rng.choice(len(sessions), size=n, replace=False))
    return _turns_of(dataset, chosen)


SELECTORS: dict[str, Callable[..., set[str]]] = {
    "all": select_all,
    "relevant_sessions": select_relevant_sessions,  # the reference's label leak
    "random_sessions": select_random_sessions,  # its qrels-blind twin
}
LEAKY_SELECTORS = frozenset({"relevant_sessions"})


def resolve_selection(dataset: Dataset, select, seed: int = 0, max_turns: int | None = None) -> tuple[str, set[str]]:
    """(selector label, selected turn ids). `max_turns` caps the session selectors (see `relevant_sessions`)."""
    if select is None:
        select = "all"
    if isinstance(select, str):
        if select not in SELECTORS:
            raise ValueError(f"unknown selector {select!r}; choose one of {', '.join(SELECTORS)}")
        label = select if select != "random_sessions" else f"random_sessions-s{seed}"
        if max_turns is not None:
            label += f"-max{max_turns}"
        return label, SELECTORS[select](dataset, seed, max_turns)
    if callable(select):
        return getattr(select, "__name__", "custom"), set(select(dataset, seed))
    ids = set(select)
    unknown = ids - set(dataset.require_corpus().index)
    if unknown:
        raise ValueError(f"{len(unknown)} selected turn ids are not in the corpus (e.g. {sorted(unknown)[:3]})")
    return f"ids{len(ids)}", ids


# ---- applying enrichment -----------------------------------------------------------------------------------

def run_enricher(enricher: Enricher, turns: Sequence[Turn]) -> dict[str, Enrichment]:
    many = getattr(enricher, "enrich_many", None)
    if many is not None:
        return dict(many(turns))
    return {t.id: enricher.enrich_turn(t, t.timestamp) for t in turns}


def enrich(dataset: Dataset, enricher: Enricher, select=None, seed: int = 0, max_turns: int | None = None) -> Dataset:
    """A new Dataset whose corpus texts are the index texts (original + enrichment) of the selected turns.

    Same turn ids, order, sessions, queries and qrels; `annotations["enrichment"]` records the enricher, the
    selector, the turns selected and enriched, each enriched turn's fields and every turn's original text.
    Use `pool_builder()` to build pools whose reranker reads the original texts.
    """
    corpus = dataset.require_corpus()
    if "enrichment" in dataset.annotations:
        raise ValueError(f"dataset {dataset.name!r} is already enriched; enrich the original dataset")
    label, selected = resolve_selection(dataset, select, seed, max_turns)
    todo = [t for t in corpus.turns if t.id in selected]
    fields = {tid: e for tid, e in run_enricher(enricher, todo).items() if tid in selected and not e.is_empty()}
    turns = [replace(t, text=index_text(t.text, fields[t.id])) if t.id in fields else t for t in corpus.turns]
    new = Corpus(turns)
    digest = hashlib.sha256(f"{corpus.fingerprint}\0{new.fingerprint}".encode()).hexdigest()[:10]
    annotations = dict(dataset.annotations)
    annotations["enrichment"] = {
        "enricher": enricher.name,
        "selector": label,
        "seed": seed,
        "max_turns": max_turns,
        "selected_sessions": len({t.session_id for t in corpus.turns if t.id in selected}),
        "leaky": isinstance(select, str) and select in LEAKY_SELECTORS,
        "base_name": dataset.name,
        "selected": len(selected),
        "enriched": len(fields),
        "enriched_ids": [t.id for t in corpus.turns if t.id in fields],
        "fields": {tid: e.to_dict() for tid, e in fields.items()},
        "original_texts": list(corpus.texts),
    }
    return replace(dataset, name=f"{dataset.name}+enrich-{enricher.name}-{label}-{digest}", corpus=new,
                   annotations=annotations)


def is_enriched(dataset: Dataset) -> bool:
    return "enrichment" in dataset.annotations


def original_texts(dataset: Dataset) -> list[str]:
    """Every turn's original text, in corpus order (the corpus texts themselves for an unenriched dataset)."""
    if not is_enriched(dataset):
        return list(dataset.require_corpus().texts)
    return list(dataset.annotations["enrichment"]["original_texts"])


def original_view(dataset: Dataset) -> Dataset:
    """The same dataset (same name, queries, annotations) with the original turn texts: what the reranker reads."""
    if not is_enriched(dataset):
        return dataset
    texts = original_texts(dataset)
    turns = [replace(t, text=x) for t, x in zip(dataset.require_corpus().turns, texts)]
    return replace(dataset, corpus=Corpus(turns))


def covered_queries(dataset: Dataset) -> list[str]:
    """Ids of the queries with at least one enriched qrels turn (the reference's label-defined 'covered' bucket)."""
    if not is_enriched(dataset):
        return []
    enriched = set(dataset.annotations["enrichment"]["enriched_ids"])
    return [q.id for q in dataset.queries if enriched & set(q.qrels)]
