"""Candidate-pool cache: contents, resumability after a kill, atomic parts, corrupt-part recovery."""

import numpy as np
import pytest

from lethe_core.datasets import generate_synthetic
from lethe_core.pools.cache import PoolBuilder
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rerankers import LexicalReranker

CONFIG = PipelineConfig(encoder="test:hash")


class CountingReranker(LexicalReranker):
    def __init__(self):
        self.queries = []

    def score(self, query, texts):
        self.queries.append(query)
        return super().score(query, texts)


class Killed(RuntimeError):
    pass


@pytest.fixture(scope="module")
def dataset():
    return generate_synthetic(1500, seed=5)


def test_pool_contents(dataset, tmp_path):
    pools = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path, progress=False).build()
    f = pools.frame
    assert set(f["query_id"]) == {q.id for q in dataset.queries}
    assert pools.manifest["reranker"] == "test:lexical" and pools.manifest["pipeline"]["k_leg"] == 30
    for _, g in f.groupby("query_id"):
        assert 30 <= len(g) <= 60  # the union of two top-30 legs
        assert list(g["rrf_rank"]) == list(range(len(g)))
        assert np.all(np.diff(g["rrf"].to_numpy()) <= 0)
        in_leg = (g["bm25_rank"] >= 0) | (g["dense_rank"] >= 0)
        assert in_leg.all()
        expected = (1 / (60 + g["bm25_rank"].where(g["bm25_rank"] >= 0)).astype(float)).fillna(0) + (
            1 / (60 + g["dense_rank"].where(g["dense_rank"] >= 0)).astype(float)).fillna(0)
        assert np.allclose(g["rrf"], expected)
    packed = pools.packed([q.id for q in dataset.queries])
    assert packed.offsets[-1] == len(f) and packed.query_ids[0] == dataset.queries[0].id


def test_resume_after_a_kill_recomputes_nothing_finished(dataset, tmp_path):
    first = CountingReranker()
    builder = PoolBuilder(dataset, first, CONFIG, root=tmp_path, progress=False)

    def kill(flushed):
        raise Killed(flushed)

    with pytest.raises(Killed) as killed:
        builder.build(batch=8, flush_seconds=0, on_flush=kill)  # dies right after its first part
    stored = killed.value.args[0]
    assert stored == 8 and len(list(builder.directory.glob("part-*.parquet"))) == 1
    assert not list(builder.directory.glob(".tmp-*"))  # the part was renamed into place whole

    second = CountingReranker()
    pools = PoolBuilder(dataset, second, CONFIG, root=tmp_path, progress=False).build()
    done_first = set(first.queries)
    assert len(second.queries) == len(dataset.queries) - stored
    assert not done_first.intersection(second.queries)
    assert set(pools.frame["query_id"]) == {q.id for q in dataset.queries}

    third = CountingReranker()
    PoolBuilder(dataset, third, CONFIG, root=tmp_path, progress=False).build()
    assert third.queries == []  # fully cached


def test_identical_rebuild_is_deterministic(dataset, tmp_path):
    a = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "a", progress=False).build().frame
    b = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "b", progress=False).build().frame
    key = ["query_id", "rrf_rank"]
    assert a.sort_values(key).reset_index(drop=True).equals(b.sort_values(key).reset_index(drop=True))


def test_corrupt_part_is_quarantined_and_recomputed(dataset, tmp_path):
    builder = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path, progress=False)
    builder.build(batch=16, flush_seconds=0)
    parts = sorted(builder.directory.glob("part-*.parquet"))
    parts[0].write_bytes(parts[0].read_bytes()[:100])  # simulate damage from outside
    again = CountingReranker()
    rebuild = PoolBuilder(dataset, again, CONFIG, root=tmp_path, progress=False)
    with pytest.warns(UserWarning, match="unreadable"):
        pools = rebuild.build()
    # The 16 lost queries are stored again; their logits come from the pair-score cache, not the reranker.
    assert again.queries == [] and rebuild.scored == 0 and rebuild.hits > 0
    assert len(list(builder.directory.glob("*.corrupt"))) == 1
    assert set(pools.frame["query_id"]) == {q.id for q in dataset.queries}


def test_key_changes_with_reranker_and_config(dataset, tmp_path):
    a = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path)
    b = PoolBuilder(dataset, LexicalReranker(), PipelineConfig(encoder="test:hash", k_leg=80), root=tmp_path)
    assert a.key != b.key


BUILDER = """
import sys
from lethe_core.datasets import generate_synthetic
from lethe_core.pools.cache import PoolBuilder
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rerankers import LexicalReranker
pools = PoolBuilder(generate_synthetic(1500, seed=5), LexicalReranker(), PipelineConfig(encoder="test:hash"),
                    root=sys.argv[1], progress=False).build(batch=4, flush_seconds=0)
print(len(pools.frame))
"""


def test_two_concurrent_builders_equal_one_build(dataset, tmp_path):
    """Two processes build the same pools at once: the second waits for the lock and reuses, never duplicates."""
    import subprocess
    import sys

    shared = tmp_path / "shared"
    procs = [subprocess.Popen([sys.executable, "-c", BUILDER, str(shared)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    single = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "single", progress=False).build().frame
    assert [int(o[0]) for o in outs] == [len(single)] * 2
    both = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=shared, progress=False).load().frame
    key = ["query_id", "rrf_rank"]
    assert both.sort_values(key).reset_index(drop=True).equals(single.sort_values(key).reset_index(drop=True))


def test_duplicate_rows_on_read_are_an_error_naming_the_cache(dataset, tmp_path):
    import shutil

    from lethe_core.pools.cache import PoolCacheError

    builder = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path, progress=False)
    builder.build(batch=16, flush_seconds=0)
    part = sorted(builder.directory.glob("part-*.parquet"))[0]
    shutil.copy(part, builder.directory / "part-99999-copy.parquet")  # what a racing second builder used to do
    with pytest.raises(PoolCacheError, match=str(builder.directory)):
        builder.load()
    with pytest.raises(PoolCacheError, match="rm -r"):
        PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path, progress=False).build()


def test_corrupt_manifest_is_set_aside_and_rewritten(dataset, tmp_path):
    builder = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path, progress=False)
    builder.build()
    (builder.directory / "manifest.json").write_text('{"dataset": "synth')  # truncated
    again = CountingReranker()
    with pytest.warns(UserWarning, match="manifest"):
        pools = PoolBuilder(dataset, again, CONFIG, root=tmp_path, progress=False).build()
    assert again.queries == [] and pools.manifest["key"] == builder.key  # parts kept, nothing rescored
    assert (builder.directory / "manifest.json.corrupt").exists()


def test_a_full_disk_mid_build_is_one_error_and_a_rerun_finishes_the_same_pools(dataset, tmp_path, monkeypatch):
    """Issue 24, finding 6: ENOSPC writing a part is one DiskFullError naming the pool folder and its free space, the
    partial part is removed, stale temporary files are swept on the next build, and the rerun equals a clean build."""
    import errno

    import pyarrow.parquet as pq

    from lethe_core.util.storage import DiskFullError

    real_write = pq.write_table
    written = []

    def write_then_full(table, where, *args, **kwargs):
        written.append(where)
        if len(written) == 2:
            with open(where, "wb") as fh:
                fh.write(b"PAR1 half a part")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(table, where, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", write_then_full)
    builder = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "full", progress=False)
    with pytest.raises(DiskFullError) as err:
        builder.build(batch=8, flush_seconds=0)
    assert str(err.value).startswith(f"the disk under {builder.directory} is full: ")
    assert not list(builder.directory.glob(".tmp-*")) and len(list(builder.directory.glob("part-*.parquet"))) == 1
    monkeypatch.setattr(pq, "write_table", real_write)
    (builder.directory / ".tmp-left-by-a-kill.parquet").write_bytes(b"PAR1 partial")  # a killed build's litter
    resumed = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "full", progress=False).build(batch=8).frame
    assert not list(builder.directory.glob(".tmp-*")), "stale temporary files stayed after the next build"
    clean = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "clean", progress=False).build().frame
    key = ["query_id", "rrf_rank"]
    assert resumed.sort_values(key).reset_index(drop=True).equals(clean.sort_values(key).reset_index(drop=True))
