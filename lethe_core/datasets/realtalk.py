"""REALTALK (arXiv 2502.13270): 10 real messaging-app conversations, one `Chat_*.json` file each, in LoCoMo's schema.

What differs from LoCoMo, and what the loader does about it (docs/realtalk.md):

- one conversation per file, no `sample_id`: the id comes from the file name (`Chat_3_Kevin_Paola.json` -> `rt-3`),
  and a folder is read in that number's order;
- turn text is `clean_text` (the turn reads `speaker: clean_text`, as LoCoMo's `speaker: text`); a turn that shares
  an image (`img_file` / `img_url`) says so as LoCoMo's does, with its `blip_caption` when it has one;
- dates are `DD.MM.YYYY, HH:MM:SS`, on every session and on every turn (a turn's timestamp is its own date);
- the D number of a dia_id is the chat day, not the `session_N` key: some days span several sessions. Turn ids
  are `<conversation>:<dia_id>` (`rt-1:D3:30`), session ids `<conversation>:S<N>` from the key;
- categories 1 fact, 2 date, 3 inference (not LoCoMo's), kept as the query type under those names;
- evidence needs cleaning (`clean_evidence`): a string rewritten into well-formed ids is recorded
  (`normalised_evidence`, raw and result); every piece that names no turn of the conversation (an id of a missing
  turn, a piece that is not an id, a range across days) is reported (`unresolved_evidence`, raw, piece and
  reason); a question left without a resolvable turn is dropped (`dropped_query`). `Dataset.dropped()` counts all
  three.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from lethe_core.datasets.errors import DatasetError, read_json, require
from lethe_core.datasets.model import Corpus, Dataset, Query, Turn

CATEGORY_NAMES = {1: "fact", 2: "date", 3: "inference"}
FILE_GLOB = "Chat_*.json"
MAX_RANGE = 1000  # a range naming more turns than this is reported, not expanded (no day holds that many)
_SESSION_KEY = re.compile(r"session_(\d{1,9})")
_FILE_NUMBER = re.compile(r"Chat_(\d{1,9})(?:_.*)?")
_DIA_ID = re.compile(r"D(\d{1,9}):(\d{1,9})")
_ID = r"D:?(\d{1,9}):0*(\d{1,9})"  # bounded: a 5,000-digit "id" is reported, not parsed
_EVIDENCE_ID = re.compile(_ID)
_RANGE = re.compile(_ID + r"-(?:D:?(\d{1,9}):)?0*(\d{1,9})")  # D12:3-D12:5, or D12:3-5
_DATE_FORMAT = "%d.%m.%Y, %H:%M:%S"

# unresolved_evidence reasons
NO_SUCH_TURN = "no such turn"
CROSS_SESSION = "range across sessions"
BACKWARD_RANGE = "range ends before it starts"
LONG_RANGE = f"range of more than {MAX_RANGE:,} turns"
NOT_AN_ID = "not a turn id"


def parse_date(value: str) -> datetime | None:
    """'29.12.2023, 22:42:04' -> datetime; None when the string has another shape."""
    try:
        return datetime.strptime(" ".join(value.split()), _DATE_FORMAT)
    except ValueError:
        return None


def conversation_id(file: Path) -> str:
    """`Chat_3_Kevin_Paola.json` -> `rt-3`; a file named otherwise keeps its stem."""
    m = _FILE_NUMBER.fullmatch(file.stem)
    return f"rt-{int(m.group(1))}" if m else file.stem


def _file_order(file: Path) -> tuple:
    m = _FILE_NUMBER.fullmatch(file.stem)
    return (0, int(m.group(1)), file.name) if m else (1, 0, file.name)


def clean_evidence(raw: str) -> list[str]:
    """Split and canonicalise one evidence string into dia_ids.

    Unambiguous: `;`, `,` and whitespace separate ids; trailing dots go (`D5:3.`); case (`d5:3`), a space after
    the D (`D 2:18`), a colon after it (`D:11:26`) and leading zeros (`D30:05`) are canonicalised; a range within
    one day is expanded (`D12:3-D12:5` or `D12:3-5` -> D12:3, D12:4, D12:5); an empty string names nothing.
    Anything else (a range across days, a backward range, `D58`, `D:56`, `23:29`) is returned unchanged, so the
    caller reports it (`evidence_problem` says why).
    """
    out: list[str] = []
    text = re.sub(r"(?i)\bD\s+(?=\d)", "D", raw.strip())
    for piece in re.split(r"[;,\s]+", text):
        piece = piece.rstrip(".")
        if not piece:
            continue
        canon = piece.upper()
        if m := _EVIDENCE_ID.fullmatch(canon):
            out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
        elif (m := _RANGE.fullmatch(canon)) and _range_problem(m) is None:
            day, start, end = int(m.group(1)), int(m.group(2)), int(m.group(4))
            out.extend(f"D{day}:{t}" for t in range(start, end + 1))
        else:
            out.append(piece)
    return out


def _range_problem(m: re.Match) -> str | None:
    day, start, end_day, end = int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))
    if end_day is not None and int(end_day) != day:
        return CROSS_SESSION
    if end < start:
        return BACKWARD_RANGE
    if end - start >= MAX_RANGE:
        return LONG_RANGE
    return None


def evidence_problem(piece: str) -> str:
    """Why a piece `clean_evidence` returned names no turn: a well-formed id of a turn the conversation lacks,
    or a piece it could not read."""
    if _EVIDENCE_ID.fullmatch(piece):
        return NO_SUCH_TURN
    if m := _RANGE.fullmatch(piece.upper()):
        return _range_problem(m) or NOT_AN_ID
    return NOT_AN_ID


def load_realtalk(path: str | Path) -> Dataset:
    """REALTALK from its folder of `Chat_*.json` files (or from one such file)."""
    path = Path(path)
    if path.is_dir():
        files = sorted((p for p in path.glob(FILE_GLOB)), key=_file_order)
        if not files:
            raise DatasetError(path, f"no {FILE_GLOB} file in this folder; REALTALK is the folder of the "
                               "Chat_<N>_<names>.json files (github.com/danny911kr/REALTALK, data/)")
    elif not path.exists() and not path.is_symlink():
        raise DatasetError(path, f"not found; REALTALK is a folder of {FILE_GLOB} files (or one of them): pass "
                           "--path or set LETHE_REALTALK_PATH")
    else:
        files = [path]
    return parse_realtalk([(f, read_json(f)) for f in files], path)


def parse_realtalk(conversations: list[tuple[Path, object]], source: Path, name: str = "realtalk") -> Dataset:
    """The model of already-read conversations, one (file, JSON) pair each, in conversation order."""
    turns: list[Turn] = []
    queries: list[Query] = []
    issues: list[dict] = []
    order: dict[str, int] = {}
    files_of: dict[str, Path] = {}
    n_questions = 0
    for file, data in conversations:
        conv = conversation_id(file)
        if conv in files_of:
            raise DatasetError(file, f"conversation id {conv} is already that of {files_of[conv].name}")
        files_of[conv] = file
        if not isinstance(data, dict):
            raise DatasetError(file, f"expected an object (one conversation), got {type(data).__name__}", record=conv)
        qa = require(data, "qa", list, file, conv)
        order[conv] = n_questions
        n_questions += len(qa)
        dia_ids = _read_sessions(data, conv, file, turns, issues)
        for qi, item in enumerate(qa):
            qid = f"{conv}:q{qi}"
            order[qid] = order[conv] + qi
            query = _read_question(item, qi, qid, conv, dia_ids, file, issues)
            if query.qrels:
                queries.append(query)
            else:
                issues.append({"kind": "dropped_query", "conversation": conv, "question": qi, "query": qid,
                               "reason": "no resolvable evidence"})
    if not turns:
        raise DatasetError(source, "the corpus is empty: no conversation has a session with turns")
    if not queries:
        raise DatasetError(source, "no question has evidence that names a turn")
    return Dataset(name=name, source=source, corpus=Corpus(turns), queries=queries, issues=issues, order=order)


def _read_sessions(data: dict, conv: str, file: Path, turns: list[Turn], issues: list[dict]) -> set[str]:
    """Append the conversation's turns (sessions in key order); return its dia_ids."""
    dia_ids: set[str] = set()
    first_turn = len(turns)
    sessions = sorted((int(m.group(1)), k) for k in data if (m := _SESSION_KEY.fullmatch(k)))
    for n, key in sessions:
        session = require(data, key, list, file, conv)
        stamp = _date(require(data, f"{key}_date_time", str, file, conv), file, conv, f"{key}_date_time")
        for ti, turn in enumerate(session):
            trec = f"{conv} {key}[{ti}]"
            raw_id = require(turn, "dia_id", str, file, trec)
            m = _DIA_ID.fullmatch(raw_id.strip())
            if m is None:
                raise DatasetError(file, f"expected a dia_id like D3:12, got {raw_id!r:.60}", record=trec, field="dia_id")
            dia_id = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia_id in dia_ids:
                raise DatasetError(file, f"duplicate dia_id {dia_id}", record=trec, field="dia_id")
            dia_ids.add(dia_id)
            speaker = require(turn, "speaker", str, file, trec)
            text = require(turn, "clean_text", str, file, trec)
            when = require(turn, "date_time", str, file, trec, optional=True)
            images = [require(turn, k, list, file, trec, optional=True) or [] for k in ("img_file", "img_url")]
            caption = require(turn, "blip_caption", str, file, trec, optional=True)
            if any(images) or caption:
                text = f"{text} [shares a photo: {caption}]" if caption else f"{text} [shares a photo]"
            turns.append(Turn(
                id=f"{conv}:{dia_id}",
                text=f"{speaker}: {text}",
                session_id=f"{conv}:S{n}",
                conversation_id=conv,
                timestamp=stamp if when is None else _date(when, file, trec, "date_time"),
                speaker=speaker,
                position=ti,
            ))
    if len(turns) == first_turn:
        issues.append({"kind": "empty_conversation", "conversation": conv, "sessions": len(sessions)})
    return dia_ids


def _date(value: str, file: Path, record: str, field: str) -> datetime:
    stamp = parse_date(value)
    if stamp is None:
        raise DatasetError(file, f"unparseable date {value!r:.60}; expected DD.MM.YYYY, HH:MM:SS", record=record, field=field)
    return stamp


def _read_question(item, qi: int, qid: str, conv: str, dia_ids: set[str], file: Path, issues: list[dict]) -> Query:
    qrec = f"{conv} qa[{qi}]"
    question = require(item, "question", str, file, qrec)
    category = require(item, "category", int, file, qrec)
    if category not in CATEGORY_NAMES:
        raise DatasetError(file, f"unknown category {category}; REALTALK's are 1 fact, 2 date, 3 inference",
                           record=qrec, field="category")
    evidence = require(item, "evidence", list, file, qrec, optional=True) or []
    qrels: dict[str, int] = {}
    for raw in evidence:
        if not isinstance(raw, str):
            raise DatasetError(file, f"evidence ids must be strings, got {raw!r:.60}", record=qrec, field="evidence")
        cleaned = clean_evidence(raw)
        for dia in cleaned:
            if dia in dia_ids:
                qrels[f"{conv}:{dia}"] = 1
            else:
                issues.append({"kind": "unresolved_evidence", "conversation": conv, "question": qi, "query": qid,
                               "category": category, "raw": raw, "piece": dia, "reason": evidence_problem(dia)})
        if cleaned != [raw] and all(_EVIDENCE_ID.fullmatch(dia) for dia in cleaned):  # else reported above, raw and all
            issues.append({"kind": "normalised_evidence", "conversation": conv, "question": qi, "query": qid,
                           "raw": raw, "as": cleaned})
    answer = item.get("answer")
    return Query(id=qid, text=question, qrels=qrels, qtype=CATEGORY_NAMES[category], conversation_id=conv,
                 answer=None if answer is None else str(answer))
