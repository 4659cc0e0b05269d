"""Behaviour of the reranker's top-1 (the paper's decomposition; docs/method.md, "Metrics").

exact_episode + sibling_confusion + wrong_family = 1 for every query. stale_fact is the
reference's definition (sibling confusion on knowledge-update questions, NaN on other
types); stale_fact_temporal is a real temporal check: the top-1 comes from a session
older than the newest session holding a relevant turn (NaN without timestamps).
"""

from __future__ import annotations

import math

from lethe_core.datasets.model import Corpus, Query

ABSTAIN_THRESHOLDS = (0.0, 2.0, 4.0)
KNOWLEDGE_UPDATE = "knowledge-update"


def top1_behaviour(top1: int, logit: float, query: Query, corpus: Corpus) -> dict[str, float]:
    turn = corpus[top1]
    relevant = [corpus[corpus.index[d]] for d in query.qrels if d in corpus.index]
    exact = turn.id in query.qrels
    sibling = not exact and any(r.session_id == turn.session_id for r in relevant)
    out = {
        "exact_episode": float(exact),
        "sibling_confusion": float(sibling),
        "wrong_family": float(not exact and not sibling),
        "stale_fact": float(sibling) if query.qtype == KNOWLEDGE_UPDATE else math.nan,
    }
    stamps = [r.timestamp for r in relevant if r.timestamp is not None]
    out["stale_fact_temporal"] = float(turn.timestamp < max(stamps)) if stamps and turn.timestamp is not None else math.nan
    for t in ABSTAIN_THRESHOLDS:
        out[f"abstain@{t:g}"] = float(logit < t)
    return out
