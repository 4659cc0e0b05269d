import json

import pytest

from lethe_core.datasets import DatasetError, load_beir, load_dataset
from lethe_core.retrieval.pipeline import HybridRetriever
from tests.conftest import NFCORPUS, write


def test_nfcorpus_counts():
    info = load_dataset("nfcorpus").describe()
    assert (info["turns"], info["queries"], info["qrels"]) == (3633, 323, 12334)


def test_nfcorpus_text_is_title_plus_text():
    ds = load_beir(NFCORPUS)
    doc = ds.corpus[ds.corpus.index["MED-10"]]
    assert doc.text.startswith("Statin Use and Breast Cancer Survival: A Nationwide Cohort Study from Finland Recent studies")
    assert ds.queries[0].qrels["MED-2427"] == 2  # graded


def _standard_layout(folder, corpus=True):
    if corpus:
        write(folder / "corpus.jsonl", "\n".join(json.dumps(d) for d in [
            {"_id": "d1", "title": "Cats", "text": "cats purr"}, {"_id": "d2", "title": "", "text": "dogs bark"}]))
    write(folder / "queries.jsonl", json.dumps({"_id": "q1", "text": "purring cats"}) + "\n" + json.dumps({"_id": "q2", "text": "x"}))
    write(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t0\n")


def test_standard_beir_layout(tmp_path):
    _standard_layout(tmp_path)
    ds = load_dataset("beir", tmp_path)
    assert [q.id for q in ds.queries] == ["q1"]  # q2 has only a zero grade
    assert ds.corpus.texts == ["Cats cats purr", "dogs bark"]


def test_folder_without_corpus_describes_and_retrieval_says_where(tmp_path):
    _standard_layout(tmp_path, corpus=False)
    ds = load_beir(tmp_path)
    info = ds.describe()
    assert info["corpus_present"] is False and info["queries"] == 1
    with pytest.raises(DatasetError, match=r"corpus is missing.*corpus.jsonl"):
        HybridRetriever(ds.require_corpus())


@pytest.mark.parametrize(
    "fname, content, match",
    [
        ("corpus.jsonl", '{"_id": "d1", "text": "ok"}\n{"_id": "d2"}\n', r"corpus.jsonl, record line 2, field 'text': missing"),
        ("corpus.jsonl", '{"_id": "d1", "text": "ok"}\n{broken\n', r"corpus.jsonl, record line 2: invalid JSON"),
        ("corpus.jsonl", '{"_id": 7, "text": "ok"}\n', r"field '_id': expected a string"),
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\n", r"test.tsv, record line 2: expected 3 columns"),
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\thigh\n", r"record line 2, field 'rel': relevance must be a number"),
    ],
)
def test_malformed_files(tmp_path, fname, content, match):
    _standard_layout(tmp_path)
    write(tmp_path / fname, content)
    with pytest.raises(DatasetError, match=match):
        load_beir(tmp_path)


def test_missing_folder_and_queries(tmp_path):
    with pytest.raises(DatasetError, match="BEIR folder not found"):
        load_beir(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no queries file"):
        load_beir(tmp_path / "empty")


@pytest.mark.parametrize(
    "fname, content, match",
    [
        ("corpus.jsonl", "", r"corpus.jsonl: the corpus is empty"),
        ("queries.jsonl", "\n", r"queries.jsonl: no queries"),
        ("queries.jsonl", '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n', r"record line 2, field '_id': duplicate query id"),
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\tinf\n", r"record line 2, field 'rel': relevance must be a whole-number"),
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td9\t1\n", r"test.tsv: no query in queries.jsonl has a positive qrel"),
    ],
)
def test_empty_duplicate_and_unusable_inputs(tmp_path, fname, content, match):
    _standard_layout(tmp_path)
    write(tmp_path / fname, content)
    with pytest.raises(DatasetError, match=match):
        load_beir(tmp_path)


def test_non_utf8_line_is_named(tmp_path):
    _standard_layout(tmp_path)
    (tmp_path / "qrels" / "test.tsv").write_bytes(b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq\xff\td1\t1\n")
    with pytest.raises(DatasetError, match=r"test.tsv, record line 3: not UTF-8 text \(byte 0xff"):
        load_beir(tmp_path)


def test_file_for_folder_and_folder_for_file(tmp_path):
    _standard_layout(tmp_path)
    with pytest.raises(DatasetError, match="corpus.jsonl: is a file; expected a BEIR folder"):
        load_dataset("beir", tmp_path / "corpus.jsonl")
    (tmp_path / "corpus.jsonl").unlink()
    (tmp_path / "corpus.jsonl").mkdir()
    with pytest.raises(DatasetError, match="corpus.jsonl: is a directory; expected a file"):
        load_beir(tmp_path)


def test_dropped_qrels_are_issues_and_counted(tmp_path):
    _standard_layout(tmp_path)
    write(tmp_path / "queries.jsonl", "\n".join(json.dumps({"_id": q, "text": q}) for q in ("q1", "q2")))
    write(tmp_path / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\tdX\t1\nq2\tdY\t2\nq3\td1\t1\n")
    ds = load_beir(tmp_path)
    assert [q.id for q in ds.queries] == ["q1"] and ds.queries[0].qrels == {"d1": 1}
    assert {i["kind"] for i in ds.issues} == {"unknown_qrel_docs", "dropped_query", "qrels_without_query"}
    dropped = ds.dropped()
    assert (dropped["qrels_to_unknown_turns"], dropped["queries_without_qrels"], dropped["qrels_without_queries"]) == (2, 1, 1)
