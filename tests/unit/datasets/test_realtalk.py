"""REALTALK loader: the real files' counts, evidence cleaning, malformed input (docs/realtalk.md)."""

import copy
import json

import pytest

from lethe_core.datasets import DatasetError, load_dataset, load_realtalk
from lethe_core.datasets.realtalk import clean_evidence, conversation_id, evidence_problem, parse_date
from lethe_core.util.paths import shared_data_dir

REALTALK = shared_data_dir() / "realtalk"


@pytest.fixture(scope="module")
def realtalk():
    if not REALTALK.is_dir():
        pytest.fail(f"shared data missing: {REALTALK} (CI lays ../shared beside the clone)")
    return load_realtalk(REALTALK)


# --- the real files -------------------------------------------------------------------------------------------


def test_counts_of_the_real_files(realtalk):
    info = realtalk.describe()
    assert (info["conversations"], info["sessions"], info["turns"]) == (10, 219, 8944)
    assert info["queries"] >= 700
    assert set(info["queries_by_type"]) == {"fact", "date", "inference"}
    assert info["extra_query_sets"] == {}
    dropped = realtalk.dropped()
    # every question is either answerable or counted as dropped
    assert info["queries"] + dropped["queries_without_qrels"] == 728
    assert dropped["unresolved_evidence_ids"] == len(info["unresolved_evidence"]) > 0
    assert {u["reason"] for u in info["unresolved_evidence"]} <= {"no such turn", "not a turn id"}


def test_conversations_in_file_number_order_and_ids(realtalk):
    assert realtalk.conversation_ids() == [f"rt-{i}" for i in range(1, 11)]
    turn = realtalk.corpus[realtalk.corpus.index["rt-1:D1:1"]]
    assert turn.text == "Emi: Hey! How are you?"
    assert turn.session_id == "rt-1:S1" and turn.conversation_id == "rt-1" and turn.position == 0
    assert turn.timestamp.isoformat() == "2023-12-29T22:42:04"  # the turn's own date_time
    # the D number is the chat day, not the session key: day 3 runs on into session_4
    assert realtalk.corpus[realtalk.corpus.index["rt-1:D3:30"]].session_id == "rt-1:S4"


def test_image_turns_say_so(realtalk):
    captioned = realtalk.corpus[realtalk.corpus.index["rt-10:D1:6"]]
    assert captioned.text.endswith("[shares a photo: there is a stream running through a forest filled with trees]")
    uncaptioned = realtalk.corpus[realtalk.corpus.index["rt-7:D3:1"]]  # img_url, no blip_caption
    assert uncaptioned.text.startswith("Vanessa: [https://") and uncaptioned.text.endswith("] [shares a photo]")


def test_real_evidence_is_cleaned(realtalk):
    by_id = {q.id: q for q in realtalk.queries}
    assert set(by_id["rt-10:q37"].qrels) >= {"rt-10:D12:3", "rt-10:D12:4", "rt-10:D12:5"}  # a range
    assert set(by_id["rt-1:q65"].qrels) == {"rt-1:D13:4", "rt-1:D14:4"}  # 'D13:4. D14:4'
    raw = {u["raw"] for u in realtalk.describe()["unresolved_evidence"]}
    assert {"D13:45:D20:19", "D:56", "D58", "23:29", "D17;39"} <= raw


def test_deterministic_twice():
    a, b = load_dataset("realtalk"), load_dataset("realtalk")
    assert a.fingerprint == b.fingerprint and a.describe() == b.describe()
    assert json.dumps(a.describe(), default=str) == json.dumps(b.describe(), default=str)


def test_one_file_and_env_default(monkeypatch, realtalk):
    one = load_dataset("realtalk", REALTALK / "Chat_3_Kevin_Paola.json")
    assert one.conversation_ids() == ["rt-3"] and one.describe()["turns"] == 422
    assert {q.id for q in one.queries} == {q.id for q in realtalk.queries if q.conversation_id == "rt-3"}
    monkeypatch.setenv("LETHE_REALTALK_PATH", str(REALTALK / "Chat_3_Kevin_Paola.json"))
    assert load_dataset("realtalk").conversation_ids() == ["rt-3"]


def test_first_conversations_subset(realtalk):
    two = load_dataset("realtalk", conversations=2)
    assert two.conversation_ids() == ["rt-1", "rt-2"]
    assert two.dropped(whole_file=True) == realtalk.dropped()


# --- evidence cleaning on hand-made files ---------------------------------------------------------------------


def test_clean_evidence_rules():
    assert clean_evidence("D12:3-D12:5") == ["D12:3", "D12:4", "D12:5"]
    assert clean_evidence("D12:3-5") == ["D12:3", "D12:4", "D12:5"]
    assert clean_evidence("D5:12;D5:16") == ["D5:12", "D5:16"]
    assert clean_evidence("D11:17; D16:1") == ["D11:17", "D16:1"]
    assert clean_evidence("D1:2, D1:3") == ["D1:2", "D1:3"]
    assert clean_evidence("D5:3.") == ["D5:3"]
    assert clean_evidence("D13:4. D14:4") == ["D13:4", "D14:4"]
    assert clean_evidence(" d2:18 ") == ["D2:18"]
    assert clean_evidence("D 2:18") == ["D2:18"]
    assert clean_evidence("D:11:26") == ["D11:26"] and clean_evidence("D30:05") == ["D30:5"]
    assert clean_evidence("") == []
    assert clean_evidence("D12:11-D12:13;D13:2-D13:3") == ["D12:11", "D12:12", "D12:13", "D13:2", "D13:3"]
    # not unambiguous: returned as they are, for the caller to report
    for piece in ("D4:3-D5:2", "D5:9-D5:3", "D13:45:D20:19", "D58", "D:56", "23:29"):
        assert clean_evidence(piece) == [piece]
    assert clean_evidence("D17;39") == ["D17", "39"]
    assert evidence_problem("D4:3-D5:2") == "range across sessions"
    assert evidence_problem("D5:9-D5:3") == "range ends before it starts"
    assert evidence_problem("D1:1-D1:99999") == "range of more than 1,000 turns"
    assert evidence_problem("D9:9") == "no such turn" and evidence_problem("D58") == "not a turn id"


def _chat(evidence=None, **changes):
    """One conversation: day 1 in session_1 (D1:1..D1:4, D1:3 missing), day 1 continued and day 2 in session_2."""
    data = {
        "name": {"speaker_1": "Ann", "speaker_2": "Bo"},
        "session_1": [
            {"clean_text": "hi", "speaker": "Ann", "date_time": "29.12.2023, 22:42:04", "img_file": [], "img_url": [], "dia_id": "D1:1"},
            {"clean_text": "hey", "speaker": "Bo", "date_time": "29.12.2023, 22:43:00", "img_file": [], "img_url": [], "dia_id": "D1:2"},
            {"clean_text": "look", "speaker": "Ann", "date_time": "29.12.2023, 22:44:00", "img_file": ["a.jpg"], "img_url": [], "dia_id": "D1:4"},
        ],
        "session_1_date_time": "29.12.2023, 22:42:04",
        "events_session_1": {},
        "session_2": [
            {"clean_text": "later", "speaker": "Bo", "date_time": "30.12.2023, 09:00:00", "img_file": [], "img_url": [], "dia_id": "D1:5"},
            {"clean_text": "new day", "speaker": "Ann", "date_time": "31.12.2023, 10:00:00", "img_file": [], "img_url": [], "dia_id": "D2:1"},
        ],
        "session_2_date_time": "30.12.2023, 09:00:00",
        "qa": [{"question": "q?", "answer": "a", "evidence": evidence if evidence is not None else ["D1:2"], "category": 1}],
    }
    data.update(changes)
    return data


def _write(tmp_path, data, name="Chat_1_Ann_Bo.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _load(tmp_path, evidence):
    return load_realtalk(_write(tmp_path, _chat(evidence)))


def test_range_is_expanded_and_its_missing_turn_reported(tmp_path):
    ds = _load(tmp_path, ["D1:2-D1:4"])
    assert list(ds.queries[0].qrels) == ["rt-1:D1:2", "rt-1:D1:4"]
    unresolved = [i for i in ds.issues if i["kind"] == "unresolved_evidence"]
    assert [(u["raw"], u["piece"], u["reason"]) for u in unresolved] == [("D1:2-D1:4", "D1:3", "no such turn")]
    assert ds.dropped()["normalised_evidence_ids"] == 1 and ds.dropped()["unresolved_evidence_ids"] == 1


def test_range_across_session_keys_within_one_day_is_expanded(tmp_path):
    ds = _load(tmp_path, ["D1:4-D1:5"])  # D1:4 in session_1, D1:5 in session_2: one day, unambiguous
    assert list(ds.queries[0].qrels) == ["rt-1:D1:4", "rt-1:D1:5"] and ds.dropped()["unresolved_evidence_ids"] == 0


def test_semicolon_list_and_trailing_dot(tmp_path):
    ds = _load(tmp_path, ["D1:1;D2:1", "D1:5."])
    assert list(ds.queries[0].qrels) == ["rt-1:D1:1", "rt-1:D2:1", "rt-1:D1:5"]
    normalised = [(i["raw"], i["as"]) for i in ds.issues if i["kind"] == "normalised_evidence"]
    assert normalised == [("D1:1;D2:1", ["D1:1", "D2:1"]), ("D1:5.", ["D1:5"])]
    assert ds.dropped()["unresolved_evidence_ids"] == 0


def test_missing_turn_is_reported_and_the_question_kept_if_other_evidence_resolves(tmp_path):
    ds = _load(tmp_path, ["D1:3", "D1:2"])
    assert list(ds.queries[0].qrels) == ["rt-1:D1:2"]
    [issue] = [i for i in ds.issues if i["kind"] == "unresolved_evidence"]
    assert issue == {"kind": "unresolved_evidence", "conversation": "rt-1", "question": 0, "query": "rt-1:q0",
                     "category": 1, "raw": "D1:3", "piece": "D1:3", "reason": "no such turn"}


def test_question_without_resolvable_evidence_is_dropped_and_counted(tmp_path):
    data = _chat()
    data["qa"].append({"question": "gone?", "answer": "x", "evidence": ["D1:2-D2:1", "D1:3"], "category": 3})
    ds = load_realtalk(_write(tmp_path, data))
    assert [q.id for q in ds.queries] == ["rt-1:q0"]
    assert ds.dropped()["queries_without_qrels"] == 1
    reasons = [(i["piece"], i["reason"]) for i in ds.issues if i["kind"] == "unresolved_evidence"]
    assert reasons == [("D1:2-D2:1", "range across sessions"), ("D1:3", "no such turn")]
    assert ds.describe()["dropped"]["unresolved_evidence_ids"] == 2


def test_image_turn_text_and_categories(tmp_path):
    ds = _load(tmp_path, ["D1:4"])
    turn = ds.corpus[ds.corpus.index["rt-1:D1:4"]]
    assert turn.text == "Ann: look [shares a photo]"
    data = _chat()
    data["session_1"][2]["blip_caption"] = "a cat on a sofa"
    ds = load_realtalk(_write(tmp_path, data))
    assert ds.corpus[ds.corpus.index["rt-1:D1:4"]].text == "Ann: look [shares a photo: a cat on a sofa]"
    assert ds.queries[0].qtype == "fact" and ds.corpus[ds.corpus.index["rt-1:D2:1"]].session_id == "rt-1:S2"


def test_folder_reads_files_in_number_order(tmp_path):
    for n in (10, 2, 1):
        _write(tmp_path, _chat(), f"Chat_{n}_X_Y.json")
    (tmp_path / "notes.json").write_text("{}")  # not a Chat_*.json file: ignored
    ds = load_realtalk(tmp_path)
    assert ds.conversation_ids() == ["rt-1", "rt-2", "rt-10"] and ds.source == tmp_path
    assert conversation_id(tmp_path / "mine.json") == "mine"


def test_dates(tmp_path):
    assert parse_date("29.12.2023, 22:42:04").isoformat() == "2023-12-29T22:42:04"
    assert parse_date("2023-12-29 22:42") is None and parse_date("31.02.2023, 10:00:00") is None
    data = _chat()
    data["session_2"][1].pop("date_time")  # a turn without its own date takes its session's
    ds = load_realtalk(_write(tmp_path, data))
    assert ds.corpus[ds.corpus.index["rt-1:D2:1"]].timestamp.isoformat() == "2023-12-30T09:00:00"
    assert ds.corpus[ds.corpus.index["rt-1:D1:5"]].timestamp.isoformat() == "2023-12-30T09:00:00"
    assert ds.corpus[ds.corpus.index["rt-1:D1:2"]].timestamp.isoformat() == "2023-12-29T22:43:00"


# --- malformed input: file, record and field ------------------------------------------------------------------


def _set(*keys, value):
    def mutate(d):
        node = d
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return mutate


def _pop(*keys):
    def mutate(d):
        node = d
        for k in keys[:-1]:
            node = node[k]
        node.pop(keys[-1])
    return mutate


@pytest.mark.parametrize(
    "mutate, record, field",
    [
        (_pop("qa"), "rt-1", "qa"),
        (_set("qa", value={"question": "q"}), "rt-1", "qa"),
        (_set("session_2", value={"D1:5": "later"}), "rt-1", "session_2"),
        (_pop("session_2_date_time"), "rt-1", "session_2_date_time"),
        (_set("session_2_date_time", value="30 Dec 2023"), "rt-1", "session_2_date_time"),
        (_pop("session_1", 1, "clean_text"), "rt-1 session_1[1]", "clean_text"),
        (_set("session_1", 1, "clean_text", value=7), "rt-1 session_1[1]", "clean_text"),
        (_pop("session_1", 1, "speaker"), "rt-1 session_1[1]", "speaker"),
        (_pop("session_2", 0, "dia_id"), "rt-1 session_2[0]", "dia_id"),
        (_set("session_2", 0, "dia_id", value="turn five"), "rt-1 session_2[0]", "dia_id"),
        (_set("session_2", 0, "dia_id", value="D1:2"), "rt-1 session_2[0]", "dia_id"),
        (_set("session_1", 0, "date_time", value="29/12/2023 22:42"), "rt-1 session_1[0]", "date_time"),
        (_set("session_1", 0, "img_file", value="a.jpg"), "rt-1 session_1[0]", "img_file"),
        (_set("session_1", 0, value="hi"), "rt-1 session_1[0]", None),
        (_pop("qa", 0, "question"), "rt-1 qa[0]", "question"),
        (_set("qa", 0, "category", value="1"), "rt-1 qa[0]", "category"),
        (_set("qa", 0, "category", value=5), "rt-1 qa[0]", "category"),
        (_set("qa", 0, "evidence", value="D1:2"), "rt-1 qa[0]", "evidence"),
        (_set("qa", 0, "evidence", value=[3]), "rt-1 qa[0]", "evidence"),
    ],
)
def test_malformed_input_names_file_record_and_field(tmp_path, mutate, record, field):
    data = copy.deepcopy(_chat())
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(DatasetError) as err:
        load_realtalk(path)
    assert err.value.file == str(path) and err.value.record == record and err.value.field == field
    assert str(path) in str(err.value) and f"record {record}" in str(err.value)
    if field is not None:
        assert f"field '{field}'" in str(err.value)


def test_malformed_file_in_a_folder_names_that_file(tmp_path):
    _write(tmp_path, _chat(), "Chat_1_A_B.json")
    bad = _write(tmp_path, _pop("qa")(d := _chat()) or d, "Chat_2_C_D.json")
    with pytest.raises(DatasetError) as err:
        load_realtalk(tmp_path)
    assert err.value.file == str(bad) and err.value.field == "qa"


def test_wrong_top_level_type_and_non_json(tmp_path):
    path = _write(tmp_path, [_chat()])
    with pytest.raises(DatasetError, match=r"Chat_1_Ann_Bo.json, record rt-1: expected an object \(one conversation\), got list"):
        load_realtalk(path)
    path.write_text('{"qa": [')
    with pytest.raises(DatasetError, match=r"Chat_1_Ann_Bo.json: invalid JSON at line 1"):
        load_realtalk(path)
    path.write_bytes(b'{"qa": "\xff"}')
    with pytest.raises(DatasetError, match="not UTF-8"):
        load_realtalk(path)


def test_missing_path_empty_folder_and_empty_files(tmp_path):
    with pytest.raises(DatasetError, match="not found; REALTALK is a folder"):
        load_realtalk(tmp_path / "nope")
    with pytest.raises(DatasetError, match=r"no Chat_\*.json file in this folder"):
        load_realtalk(tmp_path)
    data = {k: v for k, v in _chat().items() if not k.startswith("session")}
    with pytest.raises(DatasetError, match="corpus is empty"):
        load_realtalk(_write(tmp_path, data))
    with pytest.raises(DatasetError, match="no question has evidence that names a turn"):
        load_realtalk(_write(tmp_path, _chat(["D9:9"])))


def test_same_conversation_id_twice_is_an_error(tmp_path):
    _write(tmp_path, _chat(), "Chat_1_A_B.json")
    _write(tmp_path, _chat(), "Chat_01_C_D.json")
    with pytest.raises(DatasetError, match="conversation id rt-1 is already that of"):
        load_realtalk(tmp_path)
