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
