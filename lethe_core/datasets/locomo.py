"""LoCoMo (snap-research): 10 long conversations, one global pool of turns, evidence dia_ids as qrels."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from lethe_core.datasets.errors import DatasetError, read_json, require
from lethe_core.datasets.model import Corpus, Dataset, Query, Turn

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_SESSION_KEY = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?(\d{1,9}):0*(\d{1,9})")  # bounded: a 5,000-digit "id" is reported, not parsed
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")


def parse_session_date(value: str) -> datetime | None:
    """'1:56 pm on 8 May, 2023' -> datetime; None when the string has another shape."""
    text = " ".join(value.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


def normalise_evidence(raw: str) -> list[str]:
    """Split and canonicalise one evidence string: 'D8:6; D9:17' -> ['D8:6', 'D9:17'], 'D30:05' -> ['D30:5'].

    Pieces that do not look like a dia_id are returned unchanged, so the caller reports them.
    """
    out = []
    for piece in re.split(r"[;,\s]+", raw.strip()):
        if not piece:
            continue
        m = _EVIDENCE.fullmatch(piece)
        out.append(f"D{int(m.group(1))}:{int(m.group(2))}" if m else piece)
    return out


def load_locomo(path: str | Path) -> Dataset:
    path = Path(path)
    return parse_locomo(read_json(path), path)


def parse_locomo(data, path: Path, name: str = "locomo", issues: list[dict] | None = None) -> Dataset:
    """The LoCoMo model of already-read JSON `data` (errors name `path`); `issues` are prepended to the loader's."""
    if not isinstance(data, list):
        raise DatasetError(path, f"expected a list of conversations, got {type(data).__name__}")
    if not data:
        raise DatasetError(path, "the file holds no conversations")

    turns: list[Turn] = []
    answerable: list[Query] = []
    unanswerable: list[Query] = []
    issues: list[dict] = list(issues or [])
    observations: list[Query] = []
    seen_samples: set[str] = set()
    order: dict[str, int] = {}  # question and conversation ids -> file position (Dataset.order)
    n_questions = 0
    for ci, sample in enumerate(data):
        rec = f"#{ci}"
        sample_id = require(sample, "sample_id", str, path, rec)
        rec = f"#{ci} ({sample_id})"
        if sample_id in seen_samples:
            raise DatasetError(path, "duplicate sample_id", record=rec, field="sample_id")
        seen_samples.add(sample_id)
        conv = require(sample, "conversation", dict, path, rec)
        qa = require(sample, "qa", list, path, rec)
        order[sample_id] = n_questions  # a conversation sits at its first question's position
        n_questions += len(qa)

        dia_ids: set[str] = set()
        first_turn = len(turns)
        sessions = sorted(
            ((int(m.group(1)), k) for k in conv if (m := _SESSION_KEY.fullmatch(k))), key=lambda x: x[0]
        )
        for n, key in sessions:
            srec = f"{rec} {key}"
            session = require(conv, key, list, path, rec)
            date_raw = require(conv, f"{key}_date_time", str, path, rec)
            stamp = parse_session_date(date_raw)
            if stamp is None:
                raise DatasetError(path, f"unparseable session date {date_raw!r}", record=rec, field=f"{key}_date_time")
            session_id = f"{sample_id}:S{n}"
            for ti, turn in enumerate(session):
                trec = f"{srec}[{ti}]"
                dia_id = require(turn, "dia_id", str, path, trec)
                speaker = require(turn, "speaker", str, path, trec)
                text = require(turn, "text", str, path, trec)
                caption = require(turn, "blip_caption", str, path, trec, optional=True)
                if caption:
                    text = f"{text} [shares a photo: {caption}]"
                if dia_id in dia_ids:
                    raise DatasetError(path, f"duplicate dia_id {dia_id}", record=trec, field="dia_id")
                dia_ids.add(dia_id)
                turns.append(
                    Turn(
                        id=f"{sample_id}:{dia_id}",
                        text=f"{speaker}: {text}",
                        session_id=session_id,
                        conversation_id=sample_id,
                        timestamp=stamp,
                        speaker=speaker,
                        position=ti,
                    )
                )
        if len(turns) == first_turn:
            issues.append({"kind": "empty_conversation", "conversation": sample_id, "sessions": len(sessions)})

        for qi, item in enumerate(qa):
            qrec = f"{rec} qa[{qi}]"
            qid = f"{sample_id}:q{qi}"
            order[qid] = order[sample_id] + qi
            question = require(item, "question", str, path, qrec)
            category = require(item, "category", int, path, qrec)
            if category not in CATEGORY_NAMES:
                raise DatasetError(path, f"unknown category {category}", record=qrec, field="category")
            evidence = require(item, "evidence", list, path, qrec, optional=True) or []
            qrels: dict[str, int] = {}
            for raw in evidence:
                if not isinstance(raw, str):
                    raise DatasetError(path, f"evidence ids must be strings, got {raw!r}", record=qrec, field="evidence")
                for dia in normalise_evidence(raw):
                    if dia in dia_ids:
                        qrels[f"{sample_id}:{dia}"] = 1
                    else:
                        issues.append(
                            {"kind": "unresolved_evidence", "conversation": sample_id, "question": qi, "query": qid, "category": category,
                             "raw": raw, "piece": dia}
                        )
                if normalise_evidence(raw) != [raw]:
                    issues.append({"kind": "normalised_evidence", "conversation": sample_id, "question": qi, "query": qid, "raw": raw,
                               "as": normalise_evidence(raw)})
            answer = item.get("answer", item.get("adversarial_answer"))
            query = Query(
                id=qid,
                text=question,
                qrels=qrels,
                qtype=CATEGORY_NAMES[category],
                conversation_id=sample_id,
                answer=None if answer is None else str(answer),
                flags=frozenset({"adversarial"}) if category == 5 else frozenset(),
            )
            if category == 5:
                unanswerable.append(query)
            elif qrels:
                answerable.append(query)
            else:
                issues.append({"kind": "dropped_query", "conversation": sample_id, "question": qi, "query": qid,
                               "reason": "no resolvable evidence"})

        observations.extend(_observations(sample, sample_id, dia_ids, path, rec))

    if not turns:
        raise DatasetError(path, "the corpus is empty: no conversation has a session with turns")
    if not answerable:
        raise DatasetError(path, "no answerable question (categories 1-4) has evidence that names a turn")
    return Dataset(
        name=name,
        source=path,
        corpus=Corpus(turns),
        queries=answerable,
        extra_queries={"unanswerable": unanswerable, "observations": observations},
        issues=issues,
        order=order,
    )


def _observations(sample: dict, sample_id: str, dia_ids: set[str], path: Path, rec: str) -> list[Query]:
    """LLM-written facts tied to the turns they came from: pseudo-queries for training a reranker only."""
    block = require(sample, "observation", dict, path, rec, optional=True) or {}
    out = []
    for key, per_speaker in block.items():
        if not isinstance(per_speaker, dict):
            raise DatasetError(path, f"expected an object of speaker -> facts, got {type(per_speaker).__name__}", record=rec, field=f"observation.{key}")
        for speaker, facts in per_speaker.items():
            if not isinstance(facts, list):
                raise DatasetError(path, f"expected a list of facts, got {type(facts).__name__}", record=rec, field=f"observation.{key}.{speaker}")
            for fi, fact in enumerate(facts):
                if not (isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str)):
                    raise DatasetError(path, "expected [text, dia_id(s)]", record=rec, field=f"observation.{key}.{speaker}[{fi}]")
                refs = fact[1] if isinstance(fact[1], list) else [fact[1]]
                qrels = {f"{sample_id}:{d}": 1 for r in refs for d in normalise_evidence(str(r)) if d in dia_ids}
                if qrels:
                    out.append(Query(id=f"{sample_id}:{key}:{speaker}:{fi}", text=fact[0], qrels=qrels, qtype="observation",
                                     conversation_id=sample_id, flags=frozenset({"pseudo"})))
    return out
