"""A full disk under a cache is one DiskFullError naming the folder and its free space; temporary files do not stay."""

import errno
import os
import sqlite3
import time

import pytest

from lethe_core.util.storage import DiskFullError, disk_writes, is_disk_full, sweep_stale_tmp


def _full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_enospc_becomes_one_error_naming_the_folder_and_the_free_space(tmp_path):
    tmp = tmp_path / ".tmp-part.npz"
    with pytest.raises(DiskFullError) as err:
        with disk_writes(tmp_path, cleanup=[tmp], need=6 * 2**20):
            tmp.write_bytes(b"half a shard")
            _full()
    msg = str(err.value)
    assert msg.startswith(f"the disk under {tmp_path} is full: ") and " free; this write needed about 6.0 MB" in msg
    assert "rerun" in msg and "\n" not in msg
    assert not tmp.exists(), "the partial temporary file stayed"
    # the CLI prints ValueErrors as one `error:` line; code catching OSError still sees an ENOSPC
    assert isinstance(err.value, ValueError) and isinstance(err.value, OSError) and err.value.errno == errno.ENOSPC
    assert err.value.folder == tmp_path


def test_sqlite_disk_full_is_the_same_error(tmp_path):
    with pytest.raises(DiskFullError, match=f"the disk under {tmp_path} is full"):
        with disk_writes(tmp_path):
            raise sqlite3.OperationalError("database or disk is full")
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))


def test_other_failures_pass_through_and_still_clean_up(tmp_path):
    tmp = tmp_path / ".tmp-x"
    with pytest.raises(PermissionError):
        with disk_writes(tmp_path, cleanup=[tmp]):
            tmp.write_text("x")
            raise PermissionError(errno.EACCES, "Permission denied")
    assert not tmp.exists()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        with disk_writes(tmp_path):
            raise sqlite3.OperationalError("database is locked")


def test_stale_temporary_files_are_swept_fresh_ones_kept(tmp_path):
    old, fresh, kept = tmp_path / ".tmp-old.npz", tmp_path / ".tmp-new.npz", tmp_path / "shard-1.npz"
    for p in (old, fresh, kept):
        p.write_bytes(b"x")
    (tmp_path / ".tmp-olddir").mkdir()
    past = time.time() - 3600
    os.utime(old, (past, past))
    os.utime(tmp_path / ".tmp-olddir", (past, past))
    os.utime(kept, (past, past))
    removed = sweep_stale_tmp(tmp_path, ".tmp-*")
    assert sorted(p.name for p in removed) == [".tmp-old.npz", ".tmp-olddir"]
    assert fresh.exists() and kept.exists() and not old.exists()
    assert sweep_stale_tmp(tmp_path / "absent") == []


def test_an_sqlite_io_error_counts_as_full_only_when_the_disk_is_nearly_full(tmp_path, monkeypatch):
    """On a real full tmpfs SQLite reported `disk I/O error` (SQLITE_IOERR_SHMSIZE) growing its WAL index."""
    import lethe_core.util.storage as storage

    monkeypatch.setattr(storage, "free_space", lambda folder: 0)
    with pytest.raises(DiskFullError, match=r"is full: .*\(disk I/O error\)"):
        with disk_writes(tmp_path):
            raise sqlite3.OperationalError("disk I/O error")
    monkeypatch.setattr(storage, "free_space", lambda folder: 50 * 2**30)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):  # plenty of room: a real I/O error, as it was
        with disk_writes(tmp_path):
            raise sqlite3.OperationalError("disk I/O error")
