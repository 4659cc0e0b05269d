"""Input reads are bounded (issue 24, finding 5) and loader text must be encodable (finding 7).

/dev/zero once read until MemoryError and a FIFO hung forever; a lone surrogate escape (`\\ud800`) in a turn was
accepted by `describe` and failed later in `systems` with a bare codec error naming nothing.
"""

import json
import os
import threading

import pytest

from lethe_core.datasets import DatasetError, load_beir, load_locomo, load_longmemeval
from lethe_core.datasets.errors import check_text, input_file, read_json
from lethe_core.measures.stats import load_per_query_file

LOADERS = [load_locomo, load_longmemeval, read_json, load_per_query_file]


def _finishes(fn, *args, seconds=20):
    """fn(*args) in a thread: (finished, exception). A read that blocks shows as not finished instead of a hung suite."""
    box = []

    def target():
        try:
            fn(*args)
            box.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    return bool(box), (box[0] if box else None)


@pytest.mark.parametrize("load", LOADERS)
def test_a_character_device_is_refused_not_read(load):
    done, exc = _finishes(load, "/dev/zero")
    assert done, "reading /dev/zero did not stop"
    assert isinstance(exc, DatasetError) and str(exc) == "/dev/zero: is a character device; expected a regular file"


@pytest.mark.parametrize("load", LOADERS)
def test_a_fifo_is_refused_without_blocking(load, tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    done, exc = _finishes(load, fifo)
    if not done:  # unblock the reader so the thread ends
        with open(fifo, "wb"):
            pass
    assert done, "a FIFO blocked the reader"
    assert isinstance(exc, DatasetError) and str(exc) == f"{fifo}: is a FIFO (named pipe); expected a regular file"


def test_a_beir_folder_with_a_fifo_is_refused(tmp_path):
    (tmp_path / "queries.tsv").write_text("q1\thello\n")
    os.mkfifo(tmp_path / "qrels.tsv")
    done, exc = _finishes(load_beir, tmp_path)
    assert done and isinstance(exc, DatasetError) and "qrels.tsv: is a FIFO" in str(exc)


def test_files_above_the_size_limit_are_refused(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    big.write_text(json.dumps([{"x": "y" * 3000}]))
    monkeypatch.setenv("LETHE_MAX_INPUT_MB", "0.001")  # 1,048 bytes
    for load in LOADERS:
        with pytest.raises(DatasetError, match=r"big\.json: is 0\.0 MB, above the input limit of 0\.0 MB; set LETHE_MAX_INPUT_MB"):
            load(big)
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps({"_id": f"d{i}", "text": "t" * 50}) for i in range(40)))
    (tmp_path / "queries.tsv").write_text("q1\thello\n")
    (tmp_path / "qrels.tsv").write_text("q1 d1 1\n")
    with pytest.raises(DatasetError, match="corpus.jsonl: is .* above the input limit"):
        load_beir(tmp_path)
    monkeypatch.setenv("LETHE_MAX_INPUT_MB", "1")
    assert input_file(big) == big and read_json(big)[0]["x"] == "y" * 3000


def test_proc_files_that_report_size_zero_are_still_bounded(monkeypatch):
    monkeypatch.setenv("LETHE_MAX_INPUT_MB", str(1 / 2**20))  # one byte
    with pytest.raises(DatasetError, match="/proc/self/status: holds more than the input limit"):
        read_json(__import__("pathlib").Path("/proc/self/status"))


def _locomo_with(text_json: str) -> str:
    """LoCoMo JSON (as text) whose second turn's text is the raw JSON string literal `text_json`."""
    data = [{"sample_id": "c1", "conversation": {
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}, {"speaker": "B", "dia_id": "D1:2", "text": "@@"}]},
        "qa": [{"question": "q?", "answer": "a", "evidence": ["D1:2"], "category": 4}]}]
    return json.dumps(data).replace('"@@"', text_json)


def test_a_lone_surrogate_is_an_error_naming_file_record_and_field(tmp_path):
    path = tmp_path / "surrogate.json"
    path.write_text(_locomo_with(r'"caf\u00e9 \ud800 ok"'))
    with pytest.raises(DatasetError) as err:
        load_locomo(path)
    assert (err.value.record, err.value.field) == ("#0", "conversation.session_1[1].text")
    assert str(err.value).startswith(f"{path}, record #0, field 'conversation.session_1[1].text': lone surrogate \\ud800 at character 5")
    str(err.value).encode("utf-8")  # the message itself prints
    path.write_text(_locomo_with(r'"a lone low \udc00"'))
    with pytest.raises(DatasetError, match=r"lone surrogate \\udc00"):
        load_locomo(path)


def test_escaped_surrogate_pairs_and_plain_unicode_still_load(tmp_path):
    path = tmp_path / "emoji.json"
    path.write_text(_locomo_with(r'"smile \ud83d\ude00, \u0645\u0631\u062d\u0628\u0627, NUL \u0000"'))
    ds = load_locomo(path)
    assert ds.corpus.texts[1] == "B: smile \U0001F600, \u0645\u0631\u062d\u0628\u0627, NUL \x00"
    assert ds.corpus.fingerprint  # hashing the text works


def test_lone_surrogates_in_longmemeval_and_beir(tmp_path):
    lme = [{"question_id": "q1", "question_type": "t", "question": "what?", "answer": "a", "question_date": "2023/05/30",
            "haystack_session_ids": ["s1"], "haystack_dates": ["2023/05/30"], "haystack_sessions": [[
                {"role": "user", "content": "@@", "has_answer": True}]], "answer_session_ids": ["s1"]}]
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(lme).replace('"@@"', r'"x\udfff"'))
    with pytest.raises(DatasetError, match=r"lme\.json, record #0, field 'haystack_sessions\[0\]\[0\]\.content': lone surrogate"):
        load_longmemeval(path)
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "ok"}\n{"_id": "d2", "text": "bad \\ud800"}\n')
    (tmp_path / "queries.tsv").write_text("q1\thello\n")
    (tmp_path / "qrels.tsv").write_text("q1 d1 1\n")
    with pytest.raises(DatasetError, match=r"corpus\.jsonl, record line 2, field 'text': lone surrogate"):
        load_beir(tmp_path)


def test_check_text():
    assert check_text("fine é", "f") == "fine é"
    with pytest.raises(DatasetError, match=r"f, record r, field 'messages': lone surrogate \\ud800 at character 1"):
        check_text("a\ud800", "f", "r", "messages")
