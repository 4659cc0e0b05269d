"""Write-time enrichment (checkpoint 17): see `base` for the protocol and how an enriched dataset is indexed."""

from .base import (ARMS, FIELDS, LEAKY_SELECTORS, SELECTORS, Enricher, Enrichment, covered_queries, enrich, index_text,
                   evaluate_arms, is_enriched, original_texts, original_view, pool_builder, resolve_selection)
from .heuristic import HeuristicEnricher, extract_entities, resolve_temporal
from .llm import LLMEnricher, LLMFatalError, LLMNotConfigured, RunReport, parse_reply, read_jsonl, usage_totals
from .observations import ObservationEnricher

__all__ = ["ARMS", "evaluate_arms", "FIELDS", "LEAKY_SELECTORS", "SELECTORS", "Enricher", "Enrichment", "covered_queries", "enrich",
           "index_text", "is_enriched", "original_texts", "original_view", "pool_builder", "resolve_selection",
           "HeuristicEnricher", "extract_entities", "resolve_temporal", "LLMEnricher", "LLMFatalError",
           "LLMNotConfigured", "RunReport", "parse_reply", "read_jsonl", "usage_totals", "ObservationEnricher"]
