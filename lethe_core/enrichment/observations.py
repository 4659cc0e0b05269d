"""LoCoMo's own observations as enrichment: LLM-written facts (qrels-blind), attached to the turns they cite.

The loader already parses them into `dataset.extra_queries["observations"]` (one pseudo-query per fact,
its `qrels` the turns the fact cites: `lethe_core.datasets.locomo._observations`); this enricher reads
them from there, so the JSON is parsed once, one way. A fact citing several turns enriches each of them.
The facts go into `gist` (joined in file order); the other fields stay empty.
"""

from __future__ import annotations

from datetime import datetime

from lethe_core.datasets.model import Dataset, Turn
from lethe_core.enrichment.base import Enrichment


class ObservationEnricher:
    name = "observations"

    def __init__(self, facts_by_turn: dict[str, list[str]]):
        self.facts_by_turn = facts_by_turn

    @classmethod
    def from_dataset(cls, dataset: Dataset) -> "ObservationEnricher":
        observations = dataset.extra_queries.get("observations")
        if observations is None:
            raise ValueError(f"dataset {dataset.name!r} has no observations (LoCoMo's `observation` field); "
                             "only the LoCoMo loader provides them")
        facts: dict[str, list[str]] = {}
        for q in observations:
            for turn_id in q.qrels:
                bucket = facts.setdefault(turn_id, [])
                if q.text not in bucket:
                    bucket.append(q.text)
        return cls(facts)

    def enrich_turn(self, turn: Turn, session_date: datetime | None = None) -> Enrichment:
        facts = self.facts_by_turn.get(turn.id, [])
        return Enrichment(gist=" ".join(facts)) if facts else Enrichment()

    def coverage(self, dataset: Dataset) -> float:
        """Share of the corpus's turns that at least one observation cites."""
        ids = dataset.require_corpus().ids
        return sum(i in self.facts_by_turn for i in ids) / len(ids) if ids else 0.0
