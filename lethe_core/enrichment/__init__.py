"""Write-time enrichment (checkpoint 17): see `base` for the protocol and how an enriched dataset is indexed."""

from lethe_core.enrichment.base import (FIELDS, LEAKY_SELECTORS, SELECTORS, Enricher, Enrichment, covered_queries, enrich, index_text,
                   is_enriched, original_texts, original_view, resolve_selection)
from lethe_core.enrichment.heuristic import HeuristicEnricher, extract_entities, resolve_temporal
from lethe_core.enrichment.llm import LLMEnricher, LLMFatalError, LLMNotConfigured, RunReport, parse_reply, read_jsonl, usage_totals
from lethe_core.enrichment.observations import ObservationEnricher

__all__ = ["FIELDS", "LEAKY_SELECTORS", "SELECTORS", "Enricher", "Enrichment", "covered_queries", "enrich",
           "index_text", "is_enriched", "original_texts", "original_view", "resolve_selection",
           "HeuristicEnricher", "extract_entities", "resolve_temporal", "LLMEnricher", "LLMFatalError",
           "LLMNotConfigured", "RunReport", "parse_reply", "read_jsonl", "usage_totals", "ObservationEnricher"]
