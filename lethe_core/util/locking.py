"""One exclusive file lock for every cache writer (pool builds, ONNX exports): a second process waits, then reuses."""

from __future__ import annotations

import fcntl
import sys
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(path: Path, waiting: str | None = None):
    """Hold an exclusive flock on `path` (created with its folder); print `waiting` when another process holds it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                print(waiting, file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
