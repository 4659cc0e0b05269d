import numpy as np

from lethe_core.retrieval.dense import EmbeddingCache, HashingEncoder


class Counting(HashingEncoder):
    def __init__(self):
        super().__init__()
        self.seen = 0

    def encode(self, texts, progress=False):
        self.seen += len(texts)
        return super().encode(texts)


def test_cache_reuses_across_instances_and_reads_shards_lazily(tmp_path):
    enc = Counting()
    texts = [f"turn {i} about cats" for i in range(300)] + ["turn 0 about cats"]  # a duplicate is encoded once
    first = EmbeddingCache(tmp_path, enc.name, shard_size=128).embed(enc, texts)
    assert enc.seen == 300 and first.shape == (301, 384)
    assert np.allclose(first, HashingEncoder().encode(texts))
    again = EmbeddingCache(tmp_path, enc.name, shard_size=128)
    assert len(list(again.dir.glob("shard-*.npz"))) == 3
    assert all(not isinstance(s, np.ndarray) for s in again._shards)  # only keys were read
    subset = again.embed(enc, texts[:5])
    assert enc.seen == 300 and np.array_equal(subset, first[:5])
    assert sum(isinstance(s, np.ndarray) for s in again._shards) == 1
    assert again.count_missing(["a new text", texts[7]]) == 1
    assert not list(again.dir.glob(".tmp-*"))


def test_a_full_disk_is_one_error_naming_the_folder_and_leaves_no_partial_shard(tmp_path, monkeypatch):
    """Issue 24, finding 6: ENOSPC once surfaced as a long traceback, and the partial `.tmp-*.npz` stayed for good."""
    import errno

    import pytest

    from lethe_core.util.storage import DiskFullError

    enc = HashingEncoder()
    texts = [f"turn {i} about dogs" for i in range(40)]
    cache = EmbeddingCache(tmp_path, enc.name, shard_size=16)
    real_savez = np.savez
    calls = []

    def savez_then_full(path, **arrays):
        calls.append(path)
        if len(calls) == 2:  # the second shard: half written, then the disk is full
            with open(path, "wb") as fh:
                fh.write(b"PK\x03\x04 half a shard")
            raise OSError(errno.ENOSPC, "No space left on device")
        real_savez(path, **arrays)

    monkeypatch.setattr(np, "savez", savez_then_full)
    with pytest.raises(DiskFullError) as err:
        cache.embed(enc, texts)
    assert str(err.value).startswith(f"the disk under {cache.dir} is full: ") and " free; this write needed about " in str(err.value)
    assert not list(cache.dir.glob(".tmp-*")), "the partial shard stayed in the cache"
    assert len(list(cache.dir.glob("shard-*.npz"))) == 1  # the shard finished before the disk filled is kept
    monkeypatch.setattr(np, "savez", real_savez)
    again = EmbeddingCache(tmp_path, enc.name, shard_size=16)
    assert again.count_missing(texts) == 24
    assert np.allclose(again.embed(enc, texts), HashingEncoder().encode(texts))  # freeing space and rerunning resumes


def test_stale_temporary_shards_are_removed_when_the_cache_opens(tmp_path):
    import os
    import time

    enc = HashingEncoder()
    cache = EmbeddingCache(tmp_path, enc.name)
    cache.embed(enc, ["one text"])
    stale, fresh = cache.dir / ".tmp-killed.npz", cache.dir / ".tmp-in-flight.npz"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    EmbeddingCache(tmp_path, enc.name)
    assert not stale.exists() and fresh.exists()  # a fresh one may belong to a writer still running
