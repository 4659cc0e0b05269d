"""The LLM enricher against a mock OpenAI-compatible server on 127.0.0.1 (never a real endpoint)."""

import json
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lethe_core.datasets.model import Corpus, Dataset, Query, Turn
from lethe_core.enrichment import (Enrichment, LLMEnricher, LLMFatalError, LLMNotConfigured, enrich, parse_reply,
                                   read_jsonl, usage_totals)

GOOD = {"gist": "Ann went to Oslo.", "anticipated_queries": ["Where did Ann go?", "When was Ann in Oslo?", "Who visited Oslo?"],
        "entities": ["Ann", "Oslo"], "temporal_markers": ["yesterday: 2023-05-07"]}


class Mock:
    """A chat-completions server; `behave(turn_text, n_for_that_turn, body)` -> ("ok", content) | (status, text) | "drop"."""

    def __init__(self, behave=None):
        self.behave = behave or (lambda text, n, body: ("ok", json.dumps(GOOD)))
        self.requests = []
        self.lock = threading.Lock()
        mock = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body["messages"][-1]["content"].split("Turn: ", 1)[1].split("\n")[0]
                with mock.lock:
                    mock.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                    n = sum(r["body"]["messages"][-1]["content"].split("Turn: ", 1)[1].split("\n")[0] == text
                            for r in mock.requests)
                action = mock.behave(text, n, body)
                if action == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                status, payload = action
                if status == "ok":
                    data = json.dumps({"choices": [{"message": {"role": "assistant", "content": payload}}],
                                       "usage": {"prompt_tokens": 100, "completion_tokens": 20}}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                else:
                    data = payload.encode()
                    self.send_response(status)
                    if status == 429:
                        self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mock():
    servers = []

    def start(behave=None):
        servers.append(Mock(behave))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def turns(n):
    return [Turn(id=f"c:D1:{i}", text=f"Ann: turn number {i}", session_id="c:S1", conversation_id="c",
                 timestamp=datetime(2023, 5, 8, 13, 56), speaker="Ann", position=i) for i in range(n)]


def make(server, tmp_path, **kw):
    sleeps = []
    kw.setdefault("concurrency", 3)
    e = LLMEnricher(tmp_path / "out.jsonl", base_url=server.url, api_key="test-key", model="mock-model",
                    backoff=0.01, sleep=sleeps.append, timeout=5, **kw)
    return e, sleeps


def ok_ids(path):
    lines = [json.loads(l) for l in path.read_text().splitlines()]
    return [l["id"] for l in lines if l["ok"]]


def test_success_writes_one_line_per_turn_and_counts_cost(mock, tmp_path):
    server = mock()
    e, _ = make(server, tmp_path, price_in=1.0, price_out=5.0)
    report = e.run(turns(5))
    assert (report.done, report.failed, report.skipped, report.requests) == (5, 0, 0, 5)
    assert (report.prompt_tokens, report.completion_tokens) == (500, 100)
    assert report.cost == pytest.approx(500 / 1e6 * 1.0 + 100 / 1e6 * 5.0)
    assert sorted(ok_ids(e.output)) == [f"c:D1:{i}" for i in range(5)]
    assert e.results()["c:D1:0"] == Enrichment.from_dict(GOOD)
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer test-key"
    assert req["body"]["model"] == "mock-model" and req["body"]["max_tokens"] == 1024
    fmt = req["body"]["response_format"]
    assert fmt["type"] == "json_schema" and set(fmt["json_schema"]["schema"]["required"]) == set(GOOD)
    assert "Session date: 2023-05-08 (Monday)" in req["body"]["messages"][1]["content"]
    assert usage_totals(e.output, 1.0, 5.0)["cost"] == pytest.approx(report.cost)
    again = e.run(turns(5))  # everything already stored: no request
    assert (again.skipped, again.done, len(server.requests)) == (5, 0, 5)


def test_malformed_reply_is_a_retried_failure_never_a_crash(mock, tmp_path):
    def behave(text, n, body):
        if text.endswith("1") and n == 1:
            return ("ok", "Sure! here is your answer")  # not JSON: retried
        if text.endswith("2"):
            return ("ok", "{not json")  # always malformed: a failure line after the retries
        return ("ok", json.dumps(GOOD))

    server = mock(behave)
    e, sleeps = make(server, tmp_path, max_retries=2)
    report = e.run(turns(4))
    assert (report.done, report.failed) == (3, 1)
    assert "not JSON" in report.failures["c:D1:2"]
    assert len(sleeps) == 1 + 2  # turn 1 once, turn 2 twice (3 attempts)
    records, _ = read_jsonl(e.output)
    assert records["c:D1:2"]["ok"] is False and records["c:D1:2"]["attempts"] == 3
    assert records["c:D1:1"]["attempts"] == 2
    server.behave = lambda text, n, body: ("ok", json.dumps(GOOD))
    again = e.run(turns(4))  # failed turns are redone on the next run
    assert (again.skipped, again.done, again.failed) == (3, 1, 0)
    assert sorted(ok_ids(e.output)) == [f"c:D1:{i}" for i in range(4)]


def test_429_then_success_backs_off(mock, tmp_path):
    server = mock(lambda text, n, body: (429, "slow down") if n <= 2 else ("ok", json.dumps(GOOD)))
    e, sleeps = make(server, tmp_path, concurrency=1)
    report = e.run(turns(2))
    assert (report.done, report.failed, report.retries, report.requests) == (2, 0, 4, 6)
    assert len(sleeps) == 4 and all(s >= 0 for s in sleeps)
    # exponential backoff with jitter in [50 %, 100 %]: 0.01 * 2**attempt
    assert 0.005 <= sleeps[0] <= 0.01 and 0.01 <= sleeps[1] <= 0.02 and 0.005 <= sleeps[2] <= 0.01


def test_500_and_dropped_connections_are_retried(mock, tmp_path):
    server = mock(lambda text, n, body: "drop" if n == 1 else (503, "busy") if n == 2 else ("ok", json.dumps(GOOD)))
    e, sleeps = make(server, tmp_path)
    report = e.run(turns(3))
    assert (report.done, report.failed) == (3, 0) and len(sleeps) == 6


def test_schema_rejected_falls_back_to_parsing_json_from_text(mock, tmp_path):
    def behave(text, n, body):
        if "response_format" in body:
            return (400, '{"error": {"message": "response_format json_schema is not supported"}}')
        return ("ok", "```json\n" + json.dumps(GOOD) + "\n```")

    server = mock(behave)
    e, _ = make(server, tmp_path, concurrency=1)
    report = e.run(turns(2))
    assert (report.done, report.failed) == (2, 0) and e.use_schema is False
    assert "JSON object" in server.requests[-1]["body"]["messages"][1]["content"]
    assert e.results()["c:D1:1"].entities == ("Ann", "Oslo")


def test_bad_key_stops_the_run(mock, tmp_path):
    server = mock(lambda text, n, body: (401, "invalid key"))
    e, _ = make(server, tmp_path)
    with pytest.raises(LLMFatalError, match="401"):
        e.run(turns(3))


def test_kill_and_resume_loses_and_duplicates_nothing(mock, tmp_path):
    server = mock()
    e, _ = make(server, tmp_path, concurrency=2)
    real, written = e._append, []

    def dying(fd, record):
        if len(written) == 4:
            raise KeyboardInterrupt("killed")
        real(fd, record)
        written.append(record["id"])

    e._append = dying
    with pytest.raises(KeyboardInterrupt):
        e.run(turns(10))
    assert len(ok_ids(e.output)) == 4
    before = len(server.requests)
    e2, _ = make(server, tmp_path, concurrency=2)
    report = e2.run(turns(10))
    assert (report.skipped, report.done) == (4, 6) and len(server.requests) - before == 6
    ids = ok_ids(e2.output)
    assert sorted(ids) == sorted(f"c:D1:{i}" for i in range(10)) and len(ids) == len(set(ids))


def test_torn_last_line_is_cut_and_redone(mock, tmp_path):
    server = mock()
    e, _ = make(server, tmp_path)
    e.run(turns(3))
    data = e.output.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    torn_id = json.loads(data[last_start:])["id"]
    e.output.write_bytes(data[: last_start + 15])  # the crash hit mid-write
    records, good = read_jsonl(e.output)
    assert torn_id not in records and good == last_start
    report = e.run(turns(3))
    assert (report.skipped, report.done) == (2, 1)
    lines = e.output.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(l)["ok"] for l in lines)


def test_not_configured_is_one_clear_line(tmp_path, monkeypatch):
    for var in ("LETHE_LLM_BASE_URL", "LETHE_LLM_API_KEY", "LETHE_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    e = LLMEnricher(tmp_path / "out.jsonl")
    with pytest.raises(LLMNotConfigured) as info:
        e.run(turns(1))
    msg = str(info.value)
    assert "\n" not in msg and "LETHE_LLM_BASE_URL" in msg and "LETHE_LLM_API_KEY" in msg and "LETHE_LLM_MODEL" in msg
    assert not (tmp_path / "out.jsonl").exists()
    monkeypatch.setenv("LETHE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("LETHE_LLM_MODEL", "m")
    with pytest.raises(LLMNotConfigured, match="LETHE_LLM_API_KEY") as info:
        LLMEnricher(tmp_path / "out.jsonl").check_config()
    assert "LETHE_LLM_MODEL" not in str(info.value)


def test_parse_reply():
    assert parse_reply(json.dumps(GOOD)).gist == "Ann went to Oslo."
    assert parse_reply("Here: " + json.dumps(GOOD) + " done").entities == ("Ann", "Oslo")
    for bad in ("", "nope", "[1, 2]", '{"foo": 1}', '{"gist": 3}', '{"entities": 5}'):
        with pytest.raises(ValueError):
            parse_reply(bad)


def test_enrich_a_dataset_through_the_llm(mock, tmp_path):
    server = mock(lambda text, n, body: ("ok", json.dumps(GOOD)) if not text.endswith("2") else ("ok", "bad"))
    corpus = Corpus(turns(3))
    ds = Dataset("toy", tmp_path, corpus, [Query("q", "Oslo?", {"c:D1:0": 1}, conversation_id="c")])
    e, _ = make(server, tmp_path, max_retries=0)
    out = enrich(ds, e)
    assert out.annotations["enrichment"]["enriched"] == 2 and e.last_report.failed == 1
    assert out.corpus.texts[0].startswith("Ann: turn number 0\nAnn went to Oslo.")
    assert out.corpus.texts[2] == "Ann: turn number 2"  # failed turn: original text
    assert out.name.startswith("toy+enrich-llm-mock-model-all-")
