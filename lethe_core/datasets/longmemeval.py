"""LongMemEval (S / M / oracle, original or cleaned) flattened into one global pool of turns.

Flattening follows the reference: turn id `f"{session_id}_t{turn_idx}"`, text
`f"{role}: {content}"`, the first occurrence of a turn id wins, qrels are the
`has_answer` turns of the question's haystack, and when a question has none its
answer sessions' turns are used instead (flag `qrels_fallback`). Abstention
questions (`_abs` in the id) carry the flag `abstention`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from lethe_core.datasets.errors import DatasetError, read_json, require
from lethe_core.datasets.model import Corpus, Dataset, Query, Turn

_DATE_FORMATS = ("%Y/%m/%d (%a) %H:%M", "%Y/%m/%d %H:%M", "%Y/%m/%d")


def parse_lme_date(value: str, file: Path, record: str, field: str) -> datetime:
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(value.strip(), fmt)
        except ValueError:
            continue
    raise DatasetError(file, f"unparseable date {value!r} (expected e.g. '2023/05/20 (Sat) 02:21')", record=record, field=field)


def load_longmemeval(path: str | Path) -> Dataset:
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(path, f"expected a list of questions, got {type(data).__name__}")
    if not data:
        raise DatasetError(path, "the file holds no questions")

    turns: dict[str, Turn] = {}
    queries: list[Query] = []
    issues: list[dict] = []
    first_record: dict[str, int] = {}  # question id -> index where it first appeared
    for qi, item in enumerate(data):
        rec = f"#{qi}"
        qid = require(item, "question_id", str, path, rec)
        rec = f"#{qi} ({qid})"
        if qid in first_record:
            raise DatasetError(path, f"duplicate question_id, first seen at record #{first_record[qid]}", record=rec, field="question_id")
        first_record[qid] = qi
        qtype = require(item, "question_type", str, path, rec)
        question = require(item, "question", str, path, rec)
        answer = item.get("answer")
        qdate = parse_lme_date(require(item, "question_date", str, path, rec), path, rec, "question_date")
        session_ids = require(item, "haystack_session_ids", list, path, rec)
        dates = require(item, "haystack_dates", list, path, rec)
        sessions = require(item, "haystack_sessions", list, path, rec)
        answer_sessions = require(item, "answer_session_ids", list, path, rec)
        if not (len(session_ids) == len(dates) == len(sessions)):
            raise DatasetError(
                path,
                f"haystack_session_ids ({len(session_ids)}), haystack_dates ({len(dates)}) and haystack_sessions ({len(sessions)}) differ in length",
                record=rec,
                field="haystack_sessions",
            )
        for ai, sid in enumerate(answer_sessions):
            if not isinstance(sid, str):
                raise DatasetError(path, f"session ids must be strings, got {sid!r:.60}", record=rec, field=f"answer_session_ids[{ai}]")
        missing = [sid for sid in answer_sessions if sid not in session_ids]
        if missing:
            issues.append({"kind": "missing_answer_session", "question": qid, "query": qid, "sessions": missing})

        qrels: dict[str, int] = {}
        answer_turns: list[str] = []
        for si, (sid, date, session) in enumerate(zip(session_ids, dates, sessions)):
            srec = f"{rec} haystack_sessions[{si}]"
            if not isinstance(sid, str):
                raise DatasetError(path, f"session ids must be strings, got {sid!r}", record=rec, field=f"haystack_session_ids[{si}]")
            if not isinstance(date, str):
                raise DatasetError(path, f"dates must be strings, got {date!r}", record=rec, field=f"haystack_dates[{si}]")
            if not isinstance(session, list):
                raise DatasetError(path, f"a session must be a list of turns, got {type(session).__name__}", record=srec)
            stamp = parse_lme_date(date, path, rec, f"haystack_dates[{si}]")
            for ti, turn in enumerate(session):
                trec = f"{srec}[{ti}]"
                role = require(turn, "role", str, path, trec)
                content = require(turn, "content", str, path, trec)
                has_answer = require(turn, "has_answer", bool, path, trec, optional=True)
                tid = f"{sid}_t{ti}"
                if tid not in turns:  # first occurrence wins
                    turns[tid] = Turn(tid, f"{role}: {content}", sid, sid, stamp, role, ti)
                if has_answer:
                    qrels[tid] = 1
                if sid in answer_sessions:
                    answer_turns.append(tid)

        flags = set()
        if "_abs" in qid:
            flags.add("abstention")
        if not qrels:
            qrels = {t: 1 for t in answer_turns}
            if qrels:
                flags.add("qrels_fallback")
                issues.append({"kind": "qrels_fallback", "question": qid, "query": qid})
        queries.append(
            Query(
                id=qid,
                text=question,
                qrels=qrels,
                qtype=qtype,
                conversation_id=qid,
                date=qdate,
                answer=None if answer is None else str(answer),
                flags=frozenset(flags),
            )
        )

    kept = [q for q in queries if q.qrels]
    for q in queries:
        if not q.qrels:
            issues.append({"kind": "dropped_query", "question": q.id, "query": q.id, "reason": "no qrels and no answer-session turns"})
    if not turns:
        raise DatasetError(path, "the corpus is empty: no haystack session has turns")
    if not kept:
        raise DatasetError(path, "no question has has_answer turns or answer-session turns to use as qrels")
    return Dataset(name="longmemeval", source=path, corpus=Corpus(list(turns.values())), queries=kept, issues=issues,
                   order=first_record)
