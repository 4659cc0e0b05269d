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
