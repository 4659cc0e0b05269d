"""An LLM enricher over an OpenAI-compatible chat-completions HTTP API (the reference's method, CK17).

The reference (`lethe_reference/lethe/enrichment.py`) asked `claude-haiku-4-5` (max_tokens 1024) for a
four-field JSON object per turn, async with concurrency 5, max_retries 8, resumable JSONL. Here:

- Endpoint, key and model come from arguments or `LETHE_LLM_BASE_URL` (e.g. `https://api.openai.com/v1`;
  `/chat/completions` is appended), `LETHE_LLM_API_KEY`, `LETHE_LLM_MODEL`; a missing one is a one-line
  `LLMNotConfigured` error before any request.
- `response_format` is a strict JSON schema of the four fields; a server that rejects `response_format`
  (HTTP 400 naming it) is asked again without it, once, and from then on the JSON is parsed out of the
  reply text (a bare object, or the first `{...}` block, e.g. inside a code fence).
- `concurrency` worker threads; each turn is tried up to `max_retries + 1` times with exponential backoff
  (`backoff * 2**attempt`, capped at `max_backoff`, `Retry-After` honoured) on HTTP 429 / 5xx, timeouts,
  dropped connections and replies that are not the schema's JSON. A turn that still fails is written as a
  failure line (`ok: false`) and the run goes on; 401 / 403 / 404 stop the run (every turn would fail).
- Output: one JSONL line per turn (`id`, `ok`, `fields` or `error`, `usage`, `attempts`, `model`), each
  written with a single `write` in append mode and fsynced, by the main thread only. On restart the turns
  with an `ok` line are skipped, failed ones are retried; a torn last line (a crash mid-write) is cut off
  and its turn redone. Reading takes each turn's last `ok` line, so a turn is never counted twice.
- Tokens and cost from each reply's `usage` (failed attempts included: they are billed too); prices are
  per 1M prompt / completion tokens.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Sequence

from lethe_core.datasets.model import Turn
from lethe_core.enrichment.base import FIELDS, Enrichment

ENV_BASE_URL, ENV_API_KEY, ENV_MODEL = "LETHE_LLM_BASE_URL", "LETHE_LLM_API_KEY", "LETHE_LLM_MODEL"

SCHEMA = {
    "type": "object",
    "properties": {
        "gist": {"type": "string", "description": "One sentence: what this turn says, self-contained."},
        "anticipated_queries": {"type": "array", "items": {"type": "string"},
                                "description": "3 varied questions a user might later ask that this turn answers."},
        "entities": {"type": "array", "items": {"type": "string"},
                     "description": "People, places, organisations, works and things named, in their exact surface form."},
        "temporal_markers": {"type": "array", "items": {"type": "string"},
                             "description": "Dates and relative times, resolved against the session date where possible; may be empty."},
    },
    "required": list(FIELDS),
    "additionalProperties": False,
}

SYSTEM_PROMPT = (
    "You enrich one turn of a long conversation so that a search engine can find it later. Return JSON with four "
    "fields: gist (one self-contained sentence), anticipated_queries (3 varied questions a user might ask later "
    "that this turn answers, phrased differently from the turn), entities (names exactly as written), "
    "temporal_markers (dates and relative times, resolved to calendar dates using the session date when "
    "possible; empty if none). Bridge paraphrase mismatch, help tell this turn apart from similar turns of the "
    "same conversation, and make time references explicit. Do not invent anything the turn does not say."
)


class LLMNotConfigured(RuntimeError):
    """No endpoint, key or model: raised before any request, with a one-line message."""


class LLMFatalError(RuntimeError):
    """An error every further request would hit too (bad key, unknown model or path)."""


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None, usage: dict | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.usage = usage or {}


class _SchemaRejected(Exception):
    pass


@dataclass
class RunReport:
    """What one `run()` did, and the whole output file's totals."""

    requested: int = 0
    skipped: int = 0  # already in the output file
    done: int = 0  # enriched in this run
    failed: int = 0  # failure lines written in this run
    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    failures: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def parse_reply(content: str) -> Enrichment:
    """The four-field object out of a reply's text: strict JSON, else the first {...} block; ValueError if neither."""
    text = (content or "").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        m = re.search(r"\{.*\}", text, re.S)
        if not m:
            raise ValueError(f"reply is not JSON: {text[:80]!r}") from None
        try:
            data = json.loads(m.group(0))
        except json.JSONDecodeError as exc:
            raise ValueError(f"reply is not JSON ({exc.msg}): {text[:80]!r}") from None
    if not isinstance(data, dict) or not any(k in data for k in FIELDS):
        raise ValueError(f"reply has none of the fields {', '.join(FIELDS)}: {text[:80]!r}")
    return Enrichment.from_dict(data)


def read_jsonl(path: Path) -> tuple[dict[str, dict], int]:
    """(turn id -> its record, the last ok one where there is one; byte length of the intact prefix).

    A last line without its newline, or any line that is not JSON, ends the intact prefix there (a torn write)."""
    records: dict[str, dict] = {}
    if not path.exists():
        return records, 0
    data = path.read_bytes()
    good = 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            rec = json.loads(line)
            tid = rec["id"]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
            break
        good += len(line)
        if rec.get("ok") or not records.get(tid, {}).get("ok"):
            records[tid] = rec
    return records, good


def usage_totals(path: Path, price_in: float = 0.0, price_out: float = 0.0) -> dict:
    """Tokens and cost over every intact line of an output file (resumed runs included)."""
    data = Path(path).read_bytes() if Path(path).exists() else b""
    p = c = lines = 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            u = json.loads(line).get("usage") or {}
        except json.JSONDecodeError:
            break
        lines += 1
        p += int(u.get("prompt_tokens", 0))
        c += int(u.get("completion_tokens", 0))
    return {"lines": lines, "prompt_tokens": p, "completion_tokens": c, "cost": p / 1e6 * price_in + c / 1e6 * price_out}


class LLMEnricher:
    def __init__(self, output: str | Path, base_url: str | None = None, api_key: str | None = None,
                 model: str | None = None, concurrency: int = 5, max_retries: int = 8, timeout: float = 60.0,
                 backoff: float = 1.0, max_backoff: float = 60.0, price_in: float = 0.0, price_out: float = 0.0,
                 max_tokens: int = 1024, temperature: float = 0.0, use_schema: bool = True,
                 sleep: Callable[[float], None] = time.sleep, seed: int = 0):
        self.base_url = (base_url if base_url is not None else os.environ.get(ENV_BASE_URL, "")).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get(ENV_API_KEY, "")
        self.model = model if model is not None else os.environ.get(ENV_MODEL, "")
        self.output = Path(output)
        self.concurrency = max(1, int(concurrency))
        self.max_retries = max(0, int(max_retries))
        self.timeout, self.backoff, self.max_backoff = timeout, backoff, max_backoff
        self.price_in, self.price_out = price_in, price_out
        self.max_tokens, self.temperature = max_tokens, temperature
        self.use_schema = use_schema
        self.sleep = sleep
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "llm-" + re.sub(r"[^\w.-]+", "_", self.model or "unset")

    def check_config(self) -> None:
        missing = [env for env, value in ((ENV_BASE_URL, self.base_url), (ENV_API_KEY, self.api_key),
                                          (ENV_MODEL, self.model)) if not value]
        if missing:
            raise LLMNotConfigured(f"LLM enrichment is not configured: set {', '.join(missing)} "
                                   "(an OpenAI-compatible endpoint, e.g. LETHE_LLM_BASE_URL=https://api.openai.com/v1)")

    # ---- one request -----------------------------------------------------------------------------------

    def messages(self, turn: Turn, session_date: datetime | None) -> list[dict]:
        when = session_date.strftime("%Y-%m-%d (%A)") if session_date else "unknown"
        user = f"Session date: {when}\nSpeaker: {turn.speaker or 'unknown'}\nTurn: {turn.text}"
        if not self.use_schema:
            user += "\n\nAnswer with one JSON object with the keys " + ", ".join(FIELDS) + " and nothing else."
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def _body(self, turn: Turn) -> dict:
        body = {"model": self.model, "messages": self.messages(turn, turn.timestamp), "max_tokens": self.max_tokens,
                "temperature": self.temperature}
        if self.use_schema:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "turn_enrichment", "strict": True, "schema": SCHEMA}}
        return body

    def _post(self, body: dict) -> dict:
        req = urllib.request.Request(self.base_url + "/chat/completions", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace")
            if exc.code == 429 or exc.code >= 500:
                after = exc.headers.get("Retry-After") if exc.headers else None
                raise _Retryable(f"HTTP {exc.code}", float(after) if after and after.replace(".", "", 1).isdigit() else None)
            if exc.code == 400 and "response_format" in detail and "response_format" in body:
                raise _SchemaRejected(detail)
            if exc.code in (401, 403, 404):
                raise LLMFatalError(f"LLM endpoint {self.base_url}: HTTP {exc.code} ({detail.strip()[:120]})") from None
            raise ValueError(f"HTTP {exc.code}: {detail.strip()[:120]}") from None
        except (socket.timeout, TimeoutError) as exc:
            raise _Retryable(f"timeout ({exc})")
        except urllib.error.URLError as exc:
            raise _Retryable(f"connection error ({exc.reason})")
        except (http.client.HTTPException, ConnectionError, OSError) as exc:
            raise _Retryable(f"connection error ({type(exc).__name__}: {exc})")
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise _Retryable(f"response body is not JSON: {raw[:80]!r}")

    def enrich_one(self, turn: Turn) -> dict:
        """Try one turn until it succeeds or the retries run out; returns its JSONL record (never raises but fatal)."""
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        error = ""
        attempts = 0
        while attempts <= self.max_retries:
            attempts += 1
            retry_after = None
            try:
                reply = self._post(self._body(turn))
                u = reply.get("usage") or {}
                usage["prompt_tokens"] += int(u.get("prompt_tokens") or 0)
                usage["completion_tokens"] += int(u.get("completion_tokens") or 0)
                try:
                    content = reply["choices"][0]["message"]["content"]
                except (KeyError, IndexError, TypeError):
                    raise _Retryable(f"reply has no choices[0].message.content: {str(reply)[:80]}")
                try:
                    fields = parse_reply(content)
                except ValueError as exc:
                    raise _Retryable(str(exc))
                return {"id": turn.id, "ok": True, "fields": fields.to_dict(), "usage": usage, "attempts": attempts,
                        "model": self.model}
            except _SchemaRejected:
                with self._lock:
                    self.use_schema = False  # this server has no json_schema: parse JSON out of the text from now on
                attempts -= 1
                continue
            except _Retryable as exc:
                error, retry_after = str(exc), exc.retry_after
            except ValueError as exc:  # a 4xx that retrying will not fix
                error = str(exc)
                break
            if attempts <= self.max_retries:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempts - 1)) * (0.5 + self._rng.random() / 2)
                if retry_after is not None:
                    delay = max(delay, min(retry_after, self.max_backoff))
                self.sleep(delay)
        return {"id": turn.id, "ok": False, "error": error, "usage": usage, "attempts": attempts, "model": self.model}

    # ---- a whole run ------------------------------------------------------------------------------------

    def _append(self, fd: int, record: dict) -> None:
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        written = os.write(fd, line)
        if written != len(line):  # a short write: complete it (still one record per line)
            os.write(fd, line[written:])
        os.fsync(fd)

    def run(self, turns: Sequence[Turn]) -> RunReport:
        """Enrich every turn not yet in the output file; resumable (see the module docstring)."""
        self.check_config()
        self.output.parent.mkdir(parents=True, exist_ok=True)
        records, good = read_jsonl(self.output)
        if self.output.exists() and self.output.stat().st_size > good:
            with open(self.output, "r+b") as f:  # cut a torn last line, so the next append starts a fresh line
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())
        report = RunReport(requested=len(turns))
        todo = [t for t in dict((t.id, t) for t in turns).values() if not records.get(t.id, {}).get("ok")]
        report.skipped = len(turns) - len(todo)
        fd = os.open(self.output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="lethe-llm")
        try:
            pending = set()
            queue = iter(todo)
            for t in queue:  # keep at most 2 x concurrency turns in flight, so a stop loses little work
                pending.add(pool.submit(self.enrich_one, t))
                if len(pending) >= 2 * self.concurrency:
                    break
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    rec = fut.result()  # LLMFatalError propagates
                    self._append(fd, rec)
                    report.requests += rec["attempts"]
                    report.retries += rec["attempts"] - 1
                    report.prompt_tokens += rec["usage"]["prompt_tokens"]
                    report.completion_tokens += rec["usage"]["completion_tokens"]
                    if rec["ok"]:
                        report.done += 1
                    else:
                        report.failed += 1
                        report.failures[rec["id"]] = rec["error"]
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending.add(pool.submit(self.enrich_one, nxt))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            os.close(fd)
        report.cost = report.prompt_tokens / 1e6 * self.price_in + report.completion_tokens / 1e6 * self.price_out
        return report

    def results(self) -> dict[str, Enrichment]:
        """Every turn enriched so far (the output file's ok lines)."""
        records, _ = read_jsonl(self.output)
        return {tid: Enrichment.from_dict(r["fields"]) for tid, r in records.items() if r.get("ok")}

    def enrich_many(self, turns: Sequence[Turn]) -> dict[str, Enrichment]:
        """The Enricher batch hook: run (resuming), then the enrichment of those turns that succeeded."""
        self.last_report = self.run(turns)
        got = self.results()
        return {t.id: got[t.id] for t in turns if t.id in got}

    def enrich_turn(self, turn: Turn, session_date: datetime | None = None) -> Enrichment:
        return self.enrich_many([turn]).get(turn.id, Enrichment())
