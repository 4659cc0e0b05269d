"""`locomo-audited`: the audit's corrected evidence, checked against LoCoMo before it is applied."""

import json

import pytest

from lethe_core.datasets import DatasetError, load_dataset
from lethe_core.datasets.audit import changed_qrels, default_corrections_path, load_locomo_audited
from tests.conftest import LOCOMO


@pytest.fixture(scope="module")
def audited():
    return load_dataset("locomo-audited")


@pytest.fixture(scope="module")
def records():
    return json.loads(default_corrections_path().read_text())


def test_audited_labels_change_96_evidence_lists_and_93_relevant_sets(locomo, audited, records):
    assert len(records) == 156
    assert audited.name == "locomo-audited" != locomo.name
    # 96 records change the evidence list; three of them only fix ids the loader already normalised
    # ('D30:05', 'D8:6; D9:17') or drops as unresolvable ('D4:36'), so 93 relevant-turn sets change.
    assert sum(r["evidence_change"] not in ("none", "reorder_only") for r in records) == 96
    changed = changed_qrels(locomo, audited)
    assert len(changed) == 93
    assert sum(1 for i in audited.issues if i["kind"] == "audited_evidence") == 156
    by_id = {q.id: q for q in audited.queries}
    assert by_id["conv-26:q1"].qrels == {"conv-26:D1:14": 1}  # D1:12 -> D1:14
    assert by_id["conv-26:q1"].text == "When did Melanie paint a sunrise?"


def test_question_left_without_evidence_drops_out(locomo, audited):
    lost = {q.id for q in locomo.queries} - {q.id for q in audited.queries}
    assert lost == {"conv-47:q11"}
    assert {q.id for q in audited.queries} - {q.id for q in locomo.queries} == set()
    assert audited.dropped()["queries_without_qrels"] == locomo.dropped()["queries_without_qrels"] + 1
    # same texts for every kept question: their reranker pairs are all in the pair-score cache already
    texts = {q.id: q.text for q in locomo.queries}
    assert all(texts[q.id] == q.text for q in audited.queries)
    assert audited.fingerprint != locomo.fingerprint


def _tampered(tmp_path, records, index, field, value):
    bad = [dict(r) for r in records]
    bad[index][field] = value
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(bad))
    return path


def test_tampered_question_is_named(tmp_path, records):
    path = _tampered(tmp_path, records, 7, "question", "What did Melanie paint?")
    with pytest.raises(DatasetError) as err:
        load_locomo_audited(LOCOMO, path)
    msg = str(err.value)
    assert str(path) in msg and f"record #7 ({records[7]['question_id']})" in msg and "field 'question'" in msg


def test_tampered_original_evidence_is_named(tmp_path, records):
    path = _tampered(tmp_path, records, 3, "original_evidence", ["D1:1"])
    with pytest.raises(DatasetError, match=r"record #3 .*field 'original_evidence'.*does not match"):
        load_locomo_audited(LOCOMO, path)


def test_shifted_index_and_unknown_conversation_are_named(tmp_path, records):
    path = _tampered(tmp_path, records, 0, "qa_index", records[0]["qa_index"] + 1)
    with pytest.raises(DatasetError, match=r"record #0 .*field 'question'"):
        load_locomo_audited(LOCOMO, path)
    path = _tampered(tmp_path, records, 0, "conversation", "conv-99")
    with pytest.raises(DatasetError, match=r"record #0 .*field 'conversation'.*conv-99"):
        load_locomo_audited(LOCOMO, path)
    path = _tampered(tmp_path, records, 0, "qa_index", 10_000)
    with pytest.raises(DatasetError, match=r"field 'qa_index'.*out of range"):
        load_locomo_audited(LOCOMO, path)


def test_env_overrides_the_corrections_file(tmp_path, monkeypatch, records):
    path = _tampered(tmp_path, records, 5, "question", "tampered")
    monkeypatch.setenv("LETHE_LOCOMO_AUDIT_PATH", str(path))
    with pytest.raises(DatasetError, match="record #5"):
        load_dataset("locomo-audited", conversations=1)
