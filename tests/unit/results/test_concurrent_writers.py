"""Two processes writing the same results files (issue 24, finding 9): each writer has its own temporary file, so
neither fails and a reader only ever sees a whole version, never a torn or missing file."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from lethe_core.util.paths import REPO_ROOT

WRITES = 150  # per writer and file
PAD = 200_000  # characters per JSON version: a write takes long enough to overlap the other writer's

WRITER = r"""
import hashlib, json, sys, time
from pathlib import Path
import pandas as pd
from lethe_core.results import store

folder, name, writes, pad = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
while not (folder / "go").exists():  # both writers start together
    time.sleep(0.001)
start = time.time()
for i in range(writes):
    body = f"{name}-{i}-" * (pad // 16)
    store.write_json(folder / "summary.json", {"writer": name, "i": i, "body": body,
                                               "sha": hashlib.sha256(body.encode()).hexdigest()})
    frame = pd.DataFrame({"writer": [name] * 2000, "i": [i] * 2000, "x": range(2000)})
    store.write_parquet(folder / "per_query.parquet", frame)
print("done", name, start, time.time())
"""


def _check_json(path: Path) -> tuple[str, int]:
    data = json.loads(path.read_text())  # a torn version does not parse
    assert hashlib.sha256(data["body"].encode()).hexdigest() == data["sha"], "a mixed version"
    assert data["body"].startswith(f"{data['writer']}-{data['i']}-")
    return data["writer"], data["i"]


def _check_parquet(path: Path) -> tuple[str, int]:
    frame = pd.read_parquet(path)
    assert len(frame) == 2000 and frame["writer"].nunique() == 1 and frame["i"].nunique() == 1, "a mixed version"
    assert frame["x"].tolist() == list(range(2000))
    return frame["writer"].iloc[0], int(frame["i"].iloc[0])


def test_two_processes_writing_one_results_folder(tmp_path):
    folder = tmp_path / "rif-run"
    folder.mkdir()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(folder), name, str(WRITES), str(PAD)], cwd=REPO_ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    (folder / "go").touch()
    seen: dict[str, set] = {"summary.json": set(), "per_query.parquet": set()}
    reads = 0
    try:
        deadline = time.monotonic() + 240
        while any(w.poll() is None for w in writers) and time.monotonic() < deadline:
            for name, check in (("summary.json", _check_json), ("per_query.parquet", _check_parquet)):
                if (folder / name).exists():  # once it exists it never goes missing: os.replace swaps it in place
                    seen[name].add(check(folder / name))
                    reads += 1
    finally:
        outputs = [w.communicate(timeout=240) for w in writers]
    spans = []
    for w, (out, err) in zip(writers, outputs):
        assert w.returncode == 0 and out.startswith("done"), err[-3000:]  # no FileNotFoundError in either writer
        spans.append([float(x) for x in out.split()[2:4]])
    (a0, a1), (b0, b1) = spans
    assert max(a0, b0) < min(a1, b1), spans  # the two writers did write at the same time
    assert reads > 50 and all(seen.values())
    assert _check_json(folder / "summary.json")[1] == WRITES - 1 and _check_parquet(folder / "per_query.parquet")[1] == WRITES - 1
    assert sorted(p.name for p in folder.iterdir()) == ["go", "per_query.parquet", "summary.json"]  # no temporary file left
