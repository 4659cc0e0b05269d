"""Cache writes on a disk that may fill up: one clear error naming the folder and the free space, no litter.

Every cache writer (the embedding cache, the pair-score cache, pool parts) writes inside `disk_writes(folder)`:
an `OSError` ENOSPC / EDQUOT, or SQLite's "database or disk is full", becomes one `DiskFullError` whose message
names the folder, the space left on its disk and (when the writer knows it) the space the write needed; the
temporary files it names are removed first. Finished work is never touched, so freeing space and rerunning
resumes where the build stopped.

Temporary files a killed process left behind (`.tmp-*`) are removed by `sweep_stale_tmp` the next time that
cache is opened, once they are older than `STALE_SECONDS` (a live writer in another process renames its
temporary file within seconds, so an old one is an orphan).
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable

STALE_SECONDS = 600  # a temporary file older than this is an orphan of a killed or failed writer
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


class DiskFullError(OSError, ValueError):
    """The disk under a cache folder is full. An OSError (ENOSPC) to code that catches those; a ValueError so the
    CLI prints it as one `error:` line (its message is the whole user-facing line)."""

    def __init__(self, message: str, folder: Path):
        super().__init__(errno.ENOSPC, message)
        self.message = message
        self.folder = Path(folder)

    def __str__(self) -> str:
        return self.message


def atomic_write(path: str | Path, write: Callable[[Path], Any]) -> None:
    """`write(tmp)` into a temporary file beside `path` named for this writer alone, then rename it onto `path`;
    on any failure the temporary file is removed and the error raised (`path` keeps what it held)."""
    path = Path(path)
    tmp = path.with_name(f".tmp-{os.getpid()}-{secrets.token_hex(4)}-{path.name}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TB"  # pragma: no cover


def free_space(folder: Path) -> int | None:
    """Bytes free on the disk holding `folder` (its nearest existing parent); None when it cannot be read."""
    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


NEARLY_FULL = 1 << 20  # bytes: an SQLite I/O error with less than this free is the disk filling up


def is_disk_full(exc: BaseException, folder: Path | None = None) -> bool:
    """ENOSPC / EDQUOT, SQLite's "database or disk is full" (SQLITE_FULL), or, given the folder, an SQLite I/O
    error while its disk has under `NEARLY_FULL` free (SQLite reports a full disk growing its WAL index as
    `disk I/O error`, SQLITE_IOERR_SHMSIZE)."""
    if isinstance(exc, DiskFullError):
        return True
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        if code == getattr(sqlite3, "SQLITE_FULL", 13) or "disk is full" in str(exc):
            return True
        io_error = (code is not None and code & 0xFF == getattr(sqlite3, "SQLITE_IOERR", 10)) or "disk I/O error" in str(exc)
        if io_error and folder is not None:
            free = free_space(folder)
            return free is not None and free < NEARLY_FULL
    return False


def disk_full_error(folder: Path, exc: BaseException | None = None, need: int | None = None) -> DiskFullError:
    folder = Path(folder)
    free = free_space(folder)
    left = "unknown space" if free is None else _size(free)
    needed = f"; this write needed about {_size(need)}" if need else ""
    cause = f" ({exc})" if exc is not None and not isinstance(exc, DiskFullError) else ""
    return DiskFullError(f"the disk under {folder} is full: {left} free{needed}{cause}. Free some space (or point "
                         "LETHE_HOME at a larger disk) and rerun: everything finished so far is kept", folder)


@contextmanager
def disk_writes(folder: Path, cleanup: Iterable[Path] = (), need: int | None = None):
    """Run cache writes into `folder`; a full disk becomes one DiskFullError (after removing `cleanup`).

    `cleanup` is read when an error happens, so a caller may append the temporary paths it creates inside the block.
    Any other failure also removes `cleanup` and is re-raised as it was.
    """
    try:
        yield
    except BaseException as exc:
        for path in list(cleanup):
            _remove(Path(path))
        if is_disk_full(exc, folder) and not isinstance(exc, DiskFullError):
            raise disk_full_error(folder, exc, need) from exc
        raise


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def sweep_stale_tmp(folder: Path, pattern: str = ".tmp-*", older_than: float = STALE_SECONDS) -> list[Path]:
    """Remove temporary files (or folders) matching `pattern` in `folder` older than `older_than` seconds.

    Returns what it removed. Never raises: a sweep that cannot run leaves the litter for the next one.
    """
    folder = Path(folder)
    removed = []
    now = time.time()
    try:
        candidates = list(folder.glob(pattern))
    except OSError:
        return removed
    for path in candidates:
        try:
            if now - path.lstat().st_mtime < older_than:
                continue
        except OSError:
            continue
        _remove(path)
        if not os.path.lexists(path):
            removed.append(path)
    return removed


__all__ = ["DiskFullError", "NEARLY_FULL", "STALE_SECONDS", "disk_full_error", "disk_writes", "free_space", "is_disk_full", "sweep_stale_tmp"]
