"""Any corruption of a small valid LoCoMo, LongMemEval or BEIR fixture is a DatasetError naming the file, or a sound load.

"Sound" means what downstream code relies on: a non-empty corpus with unique ids, non-empty queries whose
qrels all name corpus turns with positive grades, and describe()/dropped() that serialise as strict JSON.
"""

import json
import tempfile
from pathlib import Path

import pytest
from corruption import PROPERTY_SETTINGS, byte_edit, corrupted_json, tree_edits
from hypothesis import given
from hypothesis import strategies as st

from lethe_core.datasets import DatasetError, load_beir, load_locomo, load_longmemeval


def _turn(dia, speaker, text, **extra):
    return {"speaker": speaker, "dia_id": dia, "text": text, **extra}


LOCOMO = [
    {
        "sample_id": "c1",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [_turn("D1:1", "Ann", "I adopted a cat"), _turn("D1:2", "Bob", "nice", blip_caption="a cat")],
            "session_2_date_time": "10:00 am on 9 May, 2023",
            "session_2": [_turn("D2:1", "Ann", "the cat is called Tom")],
        },
        "qa": [
            {"question": "What did Ann adopt?", "answer": "a cat", "evidence": ["D1:1"], "category": 4},
            {"question": "Cat's name?", "answer": "Tom", "evidence": ["D2:01; D1:1"], "category": 1},
            {"question": "Dog's name?", "adversarial_answer": "Rex", "evidence": ["D1:2"], "category": 5},
        ],
        "observation": {"session_1_observation": {"Ann": [["Ann has a cat", "D1:1"]]}},
    },
    {
        "sample_id": "c2",
        "conversation": {
            "speaker_a": "Cy", "speaker_b": "Di",
            "session_1_date_time": "9:00 pm on 1 June, 2023",
            "session_1": [_turn("D1:1", "Cy", "I moved to Oslo"), _turn("D1:2", "Di", "cool")],
        },
        "qa": [{"question": "Where did Cy move?", "answer": "Oslo", "evidence": ["D1:1"], "category": 4}],
    },
]


def _question(qid, sessions, answer_sessions):
    return {
        "question_id": qid, "question_type": "single-session-user", "question": f"{qid}?", "answer": "42",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": list(sessions), "haystack_dates": ["2023/05/20 (Sat) 02:21"] * len(sessions),
        "haystack_sessions": [[{"role": r, "content": c, "has_answer": h} for r, c, h in t] for t in sessions.values()],
        "answer_session_ids": answer_sessions,
    }


LONGMEMEVAL = [
    _question("q1", {"s1": [("user", "I adopted a cat", True), ("assistant", "nice", False)], "s2": [("user", "rain", False)]}, ["s1"]),
    _question("q2_abs", {"s2": [("user", "rain", False)], "s3": [("user", "Oslo", False)]}, ["s3"]),
]

BEIR = {
    "corpus.jsonl": [{"_id": "d1", "title": "Cats", "text": "cats purr"}, {"_id": "d2", "title": "", "text": "dogs bark"},
                     {"_id": "d3", "text": "birds sing"}],
    "queries.jsonl": [{"_id": "q1", "text": "purring cats"}, {"_id": "q2", "text": "barking"}],
    "qrels/test.tsv": [["query-id", "corpus-id", "score"], ["q1", "d1", "2"], ["q1", "d3", "1"], ["q2", "d2", "1"]],
}


def check_sound(ds):
    corpus = ds.require_corpus()
    assert len(corpus) > 0 and len(set(corpus.ids)) == len(corpus)
    assert ds.queries and len({q.id for q in ds.queries}) == len(ds.queries)
    for q in ds.queries:
        assert q.qrels and all(t in corpus.index and type(g) is int and g > 0 for t, g in q.qrels.items())
        assert isinstance(q.text, str)
    assert ds.fingerprint
    dropped = ds.dropped()
    assert all(type(v) is int and v >= 0 for v in dropped.values())
    json.dumps(ds.describe(), default=str, allow_nan=False)


def load_or_clear_error(load, path: Path, named: Path):
    """Run the loader; the only acceptable failure is a DatasetError that names `named`."""
    try:
        ds = load(path)
    except DatasetError as err:
        assert str(named) in str(err) and err.file.startswith(str(named))
        return None
    check_sound(ds)
    return ds


@pytest.mark.parametrize("load, fixture", [(load_locomo, LOCOMO), (load_longmemeval, LONGMEMEVAL)], ids=["locomo", "longmemeval"])
def test_the_fixtures_are_valid(load, fixture, tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(fixture))
    check_sound(load(path))


@PROPERTY_SETTINGS
@given(raw=corrupted_json(LOCOMO))
def test_corrupted_locomo(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "locomo10.json"
        path.write_bytes(raw)
        ds = load_or_clear_error(load_locomo, path, path)
        if ds is not None:
            data = json.loads(raw)  # turns come only from conversations the file names
            assert {t.conversation_id for t in ds.corpus.turns} <= {c["sample_id"] for c in data}


@PROPERTY_SETTINGS
@given(raw=corrupted_json(LONGMEMEVAL))
def test_corrupted_longmemeval(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "longmemeval_s_cleaned.json"
        path.write_bytes(raw)
        ds = load_or_clear_error(load_longmemeval, path, path)
        if ds is not None:
            ids = [q["question_id"] for q in json.loads(raw)]
            assert len(ids) == len(set(ids))  # a duplicate id never loads


def _serialise(name: str, rows) -> bytes:
    rows = rows if isinstance(rows, list) else [rows]
    if name.endswith(".tsv"):
        return "".join("\t".join(map(str, r)) + "\n" if isinstance(r, list) else f"{r}\n" for r in rows).encode()
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@st.composite
def corrupted_beir(draw):
    """The three files, one of them corrupted; or one of them replaced by a directory."""
    target = draw(st.sampled_from(sorted(BEIR)))
    files = {name: _serialise(name, rows) for name, rows in BEIR.items()}
    if draw(st.integers(0, 9)) == 0:
        files[target] = None  # a directory where the file should be
    else:
        files[target] = draw(byte_edit(_serialise(target, draw(tree_edits(BEIR[target])))))
    return files


@PROPERTY_SETTINGS
@given(files=corrupted_beir())
def test_corrupted_beir_folder(files):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "beirset"
        for name, raw in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir() if raw is None else path.write_bytes(raw)
        load_or_clear_error(load_beir, folder, folder)
