"""`locomo-audited`: LoCoMo with the evidence of audited questions replaced by the audit's corrections.

The audit file (`audit_corrections.json`, 156 records) lists, per question, the conversation, the
question's index in that conversation's `qa` list, the question text, the evidence as published
(`original_evidence`) and the corrected evidence. Before a correction is applied, the question text
and the original evidence are checked against the loaded LoCoMo record: a mismatch (another LoCoMo
release, a shifted index, a tampered file) is a `DatasetError` naming the audit file, the record and
the field, never a silently misapplied label. The corrected evidence then goes through the loader's
own evidence normalisation; a question the audit leaves without evidence drops out the way the loader
drops every evidence-less question (`Dataset.dropped()["queries_without_qrels"]`). Questions keep their
ids and texts, so their reranker pairs come from the pair-score cache; the dataset fingerprint (qrels)
and name differ, so its pools never mix with plain LoCoMo's.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from lethe_core.util.paths import shared_data_dir
from lethe_core.datasets.errors import DatasetError, read_json, require
from lethe_core.datasets.locomo import parse_locomo
from lethe_core.datasets.model import Dataset

AUDITED_NAME = "locomo-audited"


def default_corrections_path() -> Path:
    """`LETHE_LOCOMO_AUDIT_PATH`, else `<shared data>/locomo/audit_corrections.json`."""
    env = os.environ.get("LETHE_LOCOMO_AUDIT_PATH")
    return Path(env) if env else shared_data_dir() / "locomo" / "audit_corrections.json"


def apply_corrections(data: list, corrections: list, corrections_path: Path) -> tuple[list, list[dict]]:
    """A corrected deep copy of LoCoMo's JSON `data`, and one `audited_evidence` issue per changed question."""
    path = Path(corrections_path)
    if not isinstance(corrections, list):
        raise DatasetError(path, f"expected a list of correction records, got {type(corrections).__name__}")
    out = copy.deepcopy(data)
    by_sample = {s.get("sample_id"): s for s in out if isinstance(s, dict)}
    seen: dict[tuple[str, int], int] = {}
    issues = []
    for ri, rec in enumerate(corrections):
        where = f"#{ri}"
        conv = require(rec, "conversation", str, path, where)
        qi = require(rec, "qa_index", int, path, where)
        where = f"#{ri} ({rec.get('question_id', f'{conv} qa[{qi}]')})"
        question = require(rec, "question", str, path, where)
        original = require(rec, "original_evidence", list, path, where)
        corrected = require(rec, "corrected_evidence", list, path, where)
        if not all(isinstance(e, str) for e in corrected):
            raise DatasetError(path, "corrected evidence ids must be strings", record=where, field="corrected_evidence")
        if (conv, qi) in seen:
            raise DatasetError(path, f"corrects the same question as record #{seen[conv, qi]}", record=where, field="qa_index")
        seen[conv, qi] = ri
        sample = by_sample.get(conv)
        if sample is None:
            raise DatasetError(path, f"no LoCoMo conversation {conv!r}", record=where, field="conversation")
        qa = sample.get("qa") or []
        if not 0 <= qi < len(qa):
            raise DatasetError(path, f"{conv} has {len(qa)} questions; index {qi} is out of range", record=where, field="qa_index")
        item = qa[qi]
        if item.get("question") != question:
            raise DatasetError(path, f"question does not match LoCoMo {conv} qa[{qi}]: audit {question!r}, "
                               f"LoCoMo {item.get('question')!r}", record=where, field="question")
        published = item.get("evidence") or []
        if published != original:
            raise DatasetError(path, f"original evidence does not match LoCoMo {conv} qa[{qi}]: audit {original!r}, "
                               f"LoCoMo {published!r}", record=where, field="original_evidence")
        item["evidence"] = list(corrected)
        issues.append({"kind": "audited_evidence", "conversation": conv, "question": qi, "query": f"{conv}:q{qi}", "record": ri,
                       "error": rec.get("error"), "from": original, "to": list(corrected)})
    return out, issues


def load_locomo_audited(path: str | Path, corrections_path: str | Path | None = None) -> Dataset:
    path = Path(path)
    corrections_path = Path(corrections_path or default_corrections_path())
    if not corrections_path.exists():
        raise DatasetError(corrections_path, "LoCoMo audit corrections not found; set LETHE_LOCOMO_AUDIT_PATH to the file")
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(path, f"expected a list of conversations, got {type(data).__name__}")
    corrected, issues = apply_corrections(data, read_json(corrections_path), corrections_path)
    return parse_locomo(corrected, path, name=AUDITED_NAME, issues=issues)


def changed_qrels(original: Dataset, audited: Dataset) -> dict[str, tuple[dict, dict]]:
    """Query id -> (original qrels, audited qrels) for every question whose relevant-turn set differs
    (a question present in only one of the two counts, with {} on the other side)."""
    a = {q.id: q.qrels for q in original.queries}
    b = {q.id: q.qrels for q in audited.queries}
    return {i: (a.get(i, {}), b.get(i, {})) for i in dict.fromkeys([*a, *b]) if a.get(i, {}) != b.get(i, {})}
