import json

import pytest

from lethe_core.datasets import DatasetError, load_locomo
from lethe_core.datasets.locomo import normalise_evidence, parse_session_date


def test_counts_match_the_design_brief(locomo):
    info = locomo.describe()
    assert (info["turns"], info["sessions"], info["conversations"]) == (5882, 272, 10)
    assert info["queries"] >= 1530
    assert info["extra_query_sets"]["unanswerable"] == 446
    raw = {(u["conversation"], u["raw"]) for u in info["unresolved_evidence"]}
    assert raw == {("conv-42", "D10:19"), ("conv-42", "D"), ("conv-47", "D4:36")}


def test_turn_ids_texts_and_dates(locomo):
    turn = locomo.corpus[locomo.corpus.index["conv-26:D1:5"]]
    assert turn.text.startswith("Caroline: The transgender stories")
    assert "shares a photo: a photo of a dog" in turn.text  # image turns carry their caption
    assert turn.session_id == "conv-26:S1" and turn.conversation_id == "conv-26"
    assert turn.timestamp.isoformat() == "2023-05-08T13:56:00"


def test_evidence_normalisation():
    assert normalise_evidence("D30:05") == ["D30:5"]
    assert normalise_evidence("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert normalise_evidence("D9:1 D4:4") == ["D9:1", "D4:4"]
    assert normalise_evidence("D") == ["D"]
    assert parse_session_date("1:56 pm on 8 May, 2023").hour == 13
    assert parse_session_date("yesterday") is None


def test_normalised_evidence_resolves(locomo):
    by_id = {q.id: q for q in locomo.queries}
    assert by_id["conv-50:q69"].qrels == {"conv-50:D30:5": 1}
    assert set(by_id["conv-26:q37"].qrels) == {"conv-26:D8:6", "conv-26:D9:17"}


def _tiny():
    return [{
        "sample_id": "c1",
        "conversation": {
            "speaker_a": "A", "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}, {"speaker": "B", "dia_id": "D1:2", "text": "yo"}],
        },
        "qa": [{"question": "q?", "answer": "a", "evidence": ["D1:2"], "category": 4}],
    }]


@pytest.mark.parametrize(
    "mutate, record, field",
    [
        (lambda d: d[0]["conversation"]["session_1"][1].pop("speaker"), "#0 (c1) session_1[1]", "speaker"),
        (lambda d: d[0]["qa"][0].__setitem__("category", "4"), "#0 (c1) qa[0]", "category"),
        (lambda d: d[0].pop("qa"), "#0 (c1)", "qa"),
        (lambda d: d[0]["conversation"].__setitem__("session_1_date_time", "someday"), "#0 (c1)", "session_1_date_time"),
        (lambda d: d[0]["qa"][0].__setitem__("evidence", [3]), "#0 (c1) qa[0]", "evidence"),
    ],
)
def test_malformed_records_name_file_record_and_field(tmp_path, mutate, record, field):
    data = _tiny()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DatasetError) as err:
        load_locomo(path)
    assert err.value.file == str(path) and err.value.record == record and err.value.field == field
    assert str(path) in str(err.value) and field in str(err.value)


def test_missing_file_and_broken_json(tmp_path):
    with pytest.raises(DatasetError, match="file not found"):
        load_locomo(tmp_path / "nope.json")
    broken = tmp_path / "broken.json"
    broken.write_text('[{"sample_id": "c1",')
    with pytest.raises(DatasetError, match=r"broken.json: invalid JSON at line 1"):
        load_locomo(broken)


def test_tiny_file_loads(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(_tiny()))
    ds = load_locomo(path)
    assert ds.corpus.ids == ["c1:D1:1", "c1:D1:2"] and ds.queries[0].qrels == {"c1:D1:2": 1}


def test_real_file_reports_what_it_dropped(locomo):
    dropped = locomo.dropped()
    assert dropped["unresolved_evidence_ids"] == 3 and dropped["queries_without_qrels"] == 4
    assert dropped["empty_conversations"] == 0 and locomo.describe()["dropped"] == dropped
    assert all(isinstance(k, str) and type(v) is int for k, v in dropped.items())


def test_error_example_in_readme_names_the_right_record(tmp_path):
    """The README quotes this error; conv-44 is the sixth conversation, record #5."""
    from tests.conftest import LOCOMO

    data = json.loads(LOCOMO.read_text())
    data[5]["qa"][12]["category"] = "4"
    path = write_json(tmp_path / "locomo10.json", data)
    with pytest.raises(DatasetError, match=r"locomo10.json, record #5 \(conv-44\) qa\[12\], field 'category': expected an integer, got str '4'"):
        load_locomo(path)


def write_json(path, data):
    path.write_text(json.dumps(data))
    return path


def test_empty_conversation_is_an_issue_and_counted(tmp_path):
    data = _tiny()
    data.append({"sample_id": "c2", "conversation": {"speaker_a": "A", "speaker_b": "B"},
                 "qa": [{"question": "q?", "answer": "a", "evidence": ["D1:1"], "category": 1}]})
    ds = load_locomo(write_json(tmp_path / "two.json", data))
    assert [i for i in ds.issues if i["kind"] == "empty_conversation"] == [{"kind": "empty_conversation", "conversation": "c2", "sessions": 0}]
    assert ds.dropped()["empty_conversations"] == 1 and ds.dropped()["queries_without_qrels"] == 1
    assert [q.id for q in ds.queries] == ["c1:q0"]


@pytest.mark.parametrize(
    "data, match",
    [
        ([], "holds no conversations"),
        ([{"sample_id": "c1", "conversation": {}, "qa": []}], "corpus is empty"),
        ([dict(_tiny()[0], qa=[{"question": "q?", "evidence": ["D9:9"], "category": 2}])], "no answerable question"),
    ],
)
def test_empty_corpus_or_query_set_is_a_clear_error(tmp_path, data, match):
    path = write_json(tmp_path / "empty.json", data)
    with pytest.raises(DatasetError, match=match) as err:
        load_locomo(path)
    assert err.value.file == str(path)


def test_non_utf8_directory_and_unreadable_files_name_the_file(tmp_path, monkeypatch):
    text = json.dumps(_tiny(), indent=1).encode()
    bad = tmp_path / "latin1.json"
    bad.write_bytes(text.replace(b'"hi"', b'"h\xe9"'))
    line = text[: text.index(b'"hi"')].count(b"\n") + 1
    with pytest.raises(DatasetError, match=rf"latin1.json, record line {line}: not UTF-8 text \(byte 0xe9"):
        load_locomo(bad)
    binary = tmp_path / "blob.json"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(DatasetError, match="blob.json.*not UTF-8"):
        load_locomo(binary)
    with pytest.raises(DatasetError, match="is a directory; expected a file"):
        load_locomo(tmp_path)

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    ok = write_json(tmp_path / "ok.json", _tiny())
    monkeypatch.setattr(type(ok), "open", denied)
    with pytest.raises(DatasetError, match=r"ok.json: cannot read: Permission denied"):
        load_locomo(ok)


def test_an_absurdly_long_evidence_id_is_returned_for_reporting_not_parsed():
    huge = "D1" + "1" * 5000 + ":1"  # int() of 5,001 digits raises; found by the corrupted-LoCoMo property test
    assert normalise_evidence(f"D2:01; {huge}") == ["D2:1", huge]
