"""The run store: where a study's results folder lives, how its files are written, and when a finished run is reused.

- A run folder is `<root>/<run id>` (`run_dir`), root `util.paths.results_dir()` unless a study is given another one.
  Run ids name the study, the dataset and the reranker (`slug`) and end in a digest (`digest`) of the study's config
  or of the pool keys that identify its inputs; they are the names the studies always wrote, so every existing folder
  stays valid.
- Every file is written whole or not at all (`atomic_write`): into a temporary file beside it whose name is unique to
  the writer (process id + random suffix), then renamed over the target; a failed write removes its temporary file.
  Two processes writing the same run never write into each other's temporary file.
- `summary.json` is written last (`write_summary`): its presence marks a complete run, and only as a whole. A
  recompute (`reuse_or_run`, through `begin_write`) first removes the folder's summary.json, config.json and Parquet
  files, so a run killed midway leaves a partial folder, never an old summary beside new files; and every file it
  writes carries the run's write id (a random token: the `write_id` key of config.json and summary.json, the
  `lethe_write_id` key of each Parquet file's schema metadata). `mixed` names the files whose write id differs from
  summary.json's (two writers of one folder, or a folder written by a version that did not clear it first): such a
  folder is never reused, and `results.runs.load_run` refuses it. Folders from before write ids carry none at all
  and read as before.

The one reuse rule (`reuse_or_run`, `mode` = "reuse" | "overwrite", as PyTerrier's `save_mode`), followed by every
study with a run id (`experiments.setup.DataStudy.run`, and the SDM study):
- `reuse` (the default): when the run's folder holds a complete run (its `summary.json`) made with the same config,
  return that summary without computing anything. The recorded config is `summary["config"]`, or `config.json` for
  the studies whose summary does not carry it; `progress` never counts (it changes no number), nor the write id. A
  folder made with another config, a partial folder (no summary.json), a mixed one (`mixed`) or an unreadable one is
  recomputed and its files replaced.
- `overwrite`: always recompute, and replace the folder's files.
Reusing is safe because a run id and its recorded config together name everything the numbers depend on (dataset
fingerprint, pool key or reranker identity, every option). Not runs in this sense: the aggregates written under a
fixed name (learning curve, teacher curve, the haystack study's summary and charts) are rewritten every time; the
haystack study resumes per size from its own records.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import secrets
import sys
from pathlib import Path
from typing import Any, Callable

from lethe_core.util.locking import exclusive
from lethe_core.util.storage import atomic_write
from lethe_core.util.paths import results_dir

SAVE_MODES = ("reuse", "overwrite")
DEFAULT_SAVE_MODE = "reuse"
SUMMARY = "summary.json"
CONFIG = "config.json"
WRITE_ID = "write_id"  # the key of the write id in config.json and summary.json
PARQUET_WRITE_ID = b"lethe_write_id"  # ... and in a Parquet file's schema metadata
IGNORED = ("progress", WRITE_ID)  # config keys that never decide a result
_writing: dict[str, str] = {}  # run folder (resolved) -> the write id of the run this process is writing into it


def slug(text: str) -> str:
    """`text` as a folder-name part: runs of other characters than letters, digits, `.`, `_` and `-` become `_` (60 at most)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]


def digest(value: Any, length: int = 10) -> str:
    """The first `length` hex digits of the SHA-256 of `value` as sorted JSON (what a run id ends in)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:length]


def run_dir(run_id: str, root: str | Path | None = None) -> Path:
    """The folder of run `run_id` under `root` (default: the results folder)."""
    return Path(root or results_dir()) / run_id


def check_save_mode(mode: str) -> str:
    if mode not in SAVE_MODES:
        raise ValueError(f"mode must be one of {SAVE_MODES}, got {mode!r}")
    return mode


def _folder_key(folder: Path) -> str:
    return str(Path(folder).resolve())


def _write_id(path: Path) -> str | None:
    """The write id of the run this process is writing into `path`'s folder, if any."""
    return _writing.get(_folder_key(path.parent)) if _writing else None


def begin_write(out: str | Path) -> str:
    """Start (re)writing run folder `out`: remove the files a previous run left there (summary.json first, then
    config.json and the Parquet files), so that a run killed from here on leaves a partial folder, and return the new
    write id, stamped into config.json, every Parquet file and summary.json written into `out` until `write_summary`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / SUMMARY).unlink(missing_ok=True)
    for old in [out / CONFIG, *out.glob("*.parquet")]:
        old.unlink(missing_ok=True)
    token = secrets.token_hex(8)
    _writing[_folder_key(out)] = token
    return token


def end_write(out: str | Path, token: str | None = None) -> None:
    """Forget the write in progress into `out` (that of `token` only, when given)."""
    key = _folder_key(Path(out))
    if token is None or _writing.get(key) == token:
        _writing.pop(key, None)


def write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


def write_json(path: str | Path, data: Any, default: Callable[[Any], Any] | None = str, indent: int | None = 2) -> None:
    """`data` as JSON (`default` converts what JSON cannot hold; None: such a value is an error). A config.json written
    into a run folder being (re)written (`begin_write`) carries the run's write id."""
    path = Path(path)
    token = _write_id(path) if path.name == CONFIG and isinstance(data, dict) else None
    if token is not None:
        data = {**data, WRITE_ID: token}
    write_text(path, json.dumps(data, indent=indent, default=default))


def write_parquet(path: str | Path, frame) -> None:
    """`frame` as Parquet (no index); in a run folder being (re)written, the run's write id in the schema metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    token = _write_id(path)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if token is not None:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), PARQUET_WRITE_ID: token.encode()})
    atomic_write(path, lambda p: pq.write_table(table, p))


def write_summary(out: Path, summary: dict, default: Callable[[Any], Any] | None = str) -> dict:
    """Write `summary.json` (always last: it marks the run complete; with the run's write id when `begin_write` started
    the run) and return it as it reads back, so a computed run returns what a reused one would (lists for tuples,
    `default`'s conversions, the write id)."""
    out = Path(out)
    token = _write_id(out / SUMMARY)
    text = json.dumps(summary if token is None else {**summary, WRITE_ID: token}, indent=2, default=default)
    write_text(out / SUMMARY, text)
    end_write(out, token)
    return json.loads(text)


def json_safe(value):
    """`value` as strict JSON data (what a notebook puts into `numbers`): numpy scalars and arrays as Python
    numbers and lists, NaN / inf as None, dict keys as strings, anything else as its string."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist"):
        return json_safe(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def as_json(value: Any) -> Any:
    """`value` as it reads back from a JSON file (tuples as lists, other objects as their string)."""
    return json.loads(json.dumps(value, default=str))


def read_json(path: Path) -> dict | None:
    """The object in `path`, or None when it is missing, unreadable or not a JSON object."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def parquet_write_id(path: Path) -> str | None:
    """The write id in a Parquet file's footer; None when it has none or cannot be read (only the footer is read)."""
    import pyarrow.parquet as pq

    try:
        value = (pq.read_schema(path).metadata or {}).get(PARQUET_WRITE_ID)
    except Exception:  # noqa: BLE001 - unreadable: no write id to trust
        return None
    return value.decode("utf-8", "replace") if value is not None else None


def write_ids(out: Path, parquet_ids: dict[str, str | None] | None = None) -> dict[str, str | None]:
    """The write id of each file of run folder `out` that carries one when written by the store: summary.json,
    config.json and every Parquet file (None: the file has none, or is unreadable). `parquet_ids` are ids already
    read from footers (file name -> id), so a reader that opened them need not again."""
    ids: dict[str, str | None] = {}
    for name in (SUMMARY, CONFIG):
        if (out / name).is_file():
            data = read_json(out / name)
            value = data.get(WRITE_ID) if data is not None else None
            ids[name] = value if isinstance(value, str) else None
    for path in sorted(out.glob("*.parquet")):
        known = parquet_ids or {}
        ids[path.name] = known[path.name] if path.name in known else parquet_write_id(path)
    return ids


def mixed(out: Path, parquet_ids: dict[str, str | None] | None = None) -> str | None:
    """None when the files of run folder `out` come from one write (or none carries a write id: a folder from before
    write ids); else which files come from another write than summary.json (or than the others, without a summary)."""
    ids = write_ids(Path(out), parquet_ids)
    if len(set(ids.values())) <= 1:
        return None
    if SUMMARY in ids:
        reference, against = ids[SUMMARY], SUMMARY
    else:  # the most common id among the files there
        values = list(ids.values())
        reference = max(set(values), key=values.count)
        against = "the rest of the folder"
    others = [name for name, value in ids.items() if value != reference]
    return f"{', '.join(others)} {'comes' if len(others) == 1 else 'come'} from another write than {against}"


def _comparable(config: Any) -> Any:
    config = as_json(config)
    return {k: v for k, v in config.items() if k not in IGNORED} if isinstance(config, dict) else config


def finished(out: Path, config: dict) -> dict | None:
    """The summary of the complete run in `out` made with `config` (see the module's reuse rule), else None."""
    summary = read_json(out / SUMMARY)
    if summary is None or mixed(out) is not None:  # a mixed folder is no finished run: recomputed
        return None
    recorded = summary["config"] if "config" in summary else read_json(out / CONFIG)
    return summary if recorded is not None and _comparable(recorded) == _comparable(config) else None


def reuse_or_run(out: Path, config: dict, compute: Callable[[], dict], mode: str = DEFAULT_SAVE_MODE) -> dict:
    """The module's reuse rule: `mode="reuse"` returns the finished run of `config` in `out` when there is one,
    else (and always with `mode="overwrite"`) `compute()`, which writes the folder (summary.json last) after
    `begin_write` cleared it and gave the run its write id. One process at a time per folder (a lock file beside it):
    two notebooks of a parallel build asking for the same run compute it once, the second waits and reuses it."""
    check_save_mode(mode)
    with exclusive(out.parent / f".{out.name}.lock", f"{out.name}: another process is computing this run; waiting to reuse it"):
        if mode == "reuse":
            done = finished(out, config)
            if done is not None:  # said on stderr, so that a reused run is never mistaken for a fresh one
                print(f"reusing the finished run {out.name} (same config; overwrite mode, `--overwrite` on the CLI, recomputes it)",
                      file=sys.stderr)
                return done
        token = begin_write(out)
        try:
            return compute()
        except BaseException:
            with contextlib.suppress(OSError):  # failed before writing anything: no empty folder listed as a partial run
                if not any(out.iterdir()):
                    out.rmdir()
            raise
        finally:
            end_write(out, token)
