"""LongMemEval loader on small fixtures written in the official schema."""

import json

import pytest

from lethe_core.datasets import DatasetError, load_dataset, load_longmemeval


def _question(qid, sessions, answer_sessions, has_answer=True):
    """One question in the official schema; `sessions` maps session id -> list of (role, content, has_answer)."""
    return {
        "question_id": qid,
        "question_type": "knowledge-update" if qid.startswith("ku") else "single-session-user",
        "question": f"question {qid}?",
        "answer": "42",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": list(sessions),
        "haystack_dates": ["2023/05/20 (Sat) 02:21"] * len(sessions),
        "haystack_sessions": [
            [{"role": r, "content": c, **({"has_answer": h} if has_answer else {})} for r, c, h in turns]
            for turns in sessions.values()
        ],
        "answer_session_ids": answer_sessions,
    }


@pytest.fixture
def fixture_file(tmp_path):
    data = [
        _question("q1", {"s1": [("user", "I adopted a cat", True), ("assistant", "nice", False)],
                         "s2": [("user", "weather talk", False)]}, ["s1"]),
        # s1 again with different text: the first occurrence must win.
        _question("ku2", {"s1": [("user", "CHANGED", False), ("assistant", "nice", False)],
                          "s3": [("user", "I moved to Oslo", False), ("assistant", "cool", False)]}, ["s3"]),
        _question("q3_abs", {"s2": [("user", "weather talk", False)]}, ["s2"], has_answer=False),
    ]
    path = tmp_path / "longmemeval_s_cleaned.json"
    path.write_text(json.dumps(data))
    return path


def test_flattening_follows_the_reference(fixture_file):
    ds = load_longmemeval(fixture_file)
    assert ds.corpus.ids == ["s1_t0", "s1_t1", "s2_t0", "s3_t0", "s3_t1"]
    assert ds.corpus[0].text == "user: I adopted a cat"  # first occurrence wins over "CHANGED"
    q = {x.id: x for x in ds.queries}
    assert q["q1"].qrels == {"s1_t0": 1} and not q["q1"].flags
    assert q["ku2"].qrels == {"s3_t0": 1, "s3_t1": 1} and "qrels_fallback" in q["ku2"].flags
    assert "abstention" in q["q3_abs"].flags and "qrels_fallback" in q["q3_abs"].flags
    assert q["q1"].date.isoformat() == "2023-05-30T23:40:00"
    assert ds.describe()["flags"] == {"qrels_fallback": 2, "abstention": 1}


def test_missing_file_message_says_where_to_put_it(tmp_path):
    with pytest.raises(DatasetError, match="LETHE_LONGMEMEVAL_PATH"):
        load_dataset("longmemeval", tmp_path / "absent.json")


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda q: q.pop("question_id"), "question_id"),
        (lambda q: q.__setitem__("haystack_sessions", "nope"), "haystack_sessions"),
        (lambda q: q["haystack_sessions"][0][0].pop("content"), "content"),
        (lambda q: q["haystack_sessions"][0][0].__setitem__("has_answer", "yes"), "has_answer"),
        (lambda q: q.__setitem__("question_date", "May 5th"), "question_date"),
        (lambda q: q["haystack_dates"].pop(), "haystack_sessions"),
    ],
)
def test_malformed_input_names_file_record_and_field(tmp_path, mutate, field):
    q = _question("q1", {"s1": [("user", "hi", True)]}, ["s1"])
    mutate(q)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([q]))
    with pytest.raises(DatasetError) as err:
        load_longmemeval(path)
    assert err.value.field == field and err.value.record.startswith("#0")
    assert str(path) in str(err.value)


def test_top_level_must_be_a_list(tmp_path):
    path = tmp_path / "obj.json"
    path.write_text("{}")
    with pytest.raises(DatasetError, match="expected a list of questions"):
        load_longmemeval(path)


def _write(tmp_path, questions):
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(questions))
    return path


def test_duplicate_question_id_is_rejected_at_load(tmp_path):
    q = _question("q1", {"s1": [("user", "hi", True)]}, ["s1"])
    other = _question("q2", {"s2": [("user", "yo", True)]}, ["s2"])
    with pytest.raises(DatasetError, match=r"record #2 \(q1\), field 'question_id': duplicate question_id, first seen at record #0"):
        load_longmemeval(_write(tmp_path, [q, other, q]))


def test_missing_answer_session_is_recorded_and_counted(tmp_path):
    q = _question("q1", {"s1": [("user", "hi", True)]}, ["s1", "s9"])
    ds = load_longmemeval(_write(tmp_path, [q]))
    assert [i for i in ds.issues if i["kind"] == "missing_answer_session"] == [
        {"kind": "missing_answer_session", "question": "q1", "query": "q1", "sessions": ["s9"]}]
    assert ds.dropped()["missing_answer_sessions"] == 1 and ds.queries[0].qrels == {"s1_t0": 1}


def test_dropped_counts(fixture_file, tmp_path):
    assert load_longmemeval(fixture_file).dropped()["qrels_fallback_queries"] == 2
    kept = _question("q1", {"s1": [("user", "hi", True)]}, ["s1"])
    lost = _question("q2", {"s2": [("user", "yo", False)]}, [], has_answer=False)
    ds = load_longmemeval(_write(tmp_path, [kept, lost]))
    assert [q.id for q in ds.queries] == ["q1"] and ds.dropped()["queries_without_qrels"] == 1


@pytest.mark.parametrize(
    "questions, match",
    [
        ([], "holds no questions"),
        ([_question("q1", {"s1": []}, ["s1"])], "corpus is empty"),
        ([_question("q1", {"s1": [("user", "hi", False)]}, [])], "no question has"),
    ],
)
def test_empty_corpus_or_questions_is_a_clear_error(tmp_path, questions, match):
    with pytest.raises(DatasetError, match=match):
        load_longmemeval(_write(tmp_path, questions))


def test_non_string_answer_session_id(tmp_path):
    q = _question("q1", {"s1": [("user", "hi", True)]}, [7])
    with pytest.raises(DatasetError, match=r"field 'answer_session_ids\[0\]'"):
        load_longmemeval(_write(tmp_path, [q]))


def test_binary_file_and_directory_name_the_file(tmp_path):
    blob = tmp_path / "blob.json"
    blob.write_bytes(b'[{"question_id": "\xff\xfe"}]')
    with pytest.raises(DatasetError, match=r"blob.json, record line 1: not UTF-8 text"):
        load_longmemeval(blob)
    with pytest.raises(DatasetError, match="is a directory"):
        load_dataset("longmemeval", tmp_path)
