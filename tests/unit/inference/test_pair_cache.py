"""Pair-score cache: scores each (reranker, query, turn) once across builds, survives a kill mid-write."""

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from lethe_core.datasets import generate_synthetic
from lethe_core.inference.pair_cache import CachedScorer, PairScoreCache, cache_stats
from lethe_core.pools.cache import PoolBuilder
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rerankers import LexicalReranker


class Counting(LexicalReranker):
    def __init__(self):
        self.pairs = 0

    def score(self, query, texts):
        self.pairs += len(texts)
        return super().score(query, texts)


def test_lookup_store_and_identity_isolation(tmp_path):
    cache = PairScoreCache(tmp_path / "p.sqlite")
    cache.store("a|torch|x", "q", ["t1", "t2"], [1.5, -2.0])
    np.testing.assert_array_equal(cache.lookup("a|torch|x", "q", ["t2", "t3", "t1"]), [-2.0, np.nan, 1.5])
    assert np.isnan(cache.lookup("a|onnx|x", "q", ["t1"])).all()  # another backend or weights never reads these
    scorer = CachedScorer(Counting(), cache)
    first = scorer.score("what about cats", ["cats are here", "dogs"])
    again = scorer.score("what about cats", ["dogs", "cats are here", "a new one"])
    assert scorer.scored == 3 and scorer.hits == 2 and scorer.scorer.pairs == 3
    assert again[1] == first[0] and again[0] == first[1]


def test_deeper_rebuild_scores_only_new_pairs(tmp_path):
    ds = generate_synthetic(1500, seed=5)
    shallow = Counting()
    b30 = PoolBuilder(ds, shallow, PipelineConfig(encoder="test:hash", k_leg=30), root=tmp_path, progress=False)
    p30 = b30.build()
    assert b30.hits == 0 and b30.scored == shallow.pairs == len(p30.frame)
    deep = Counting()
    b80 = PoolBuilder(ds, deep, PipelineConfig(encoder="test:hash", k_leg=80), root=tmp_path, progress=False)
    p80 = b80.build()
    assert b80.key != b30.key and len(p80.frame) > len(p30.frame)
    assert b80.hits == len(p30.frame)  # every k=30 pair is also in the k=80 union: read, not rescored
    assert deep.pairs == b80.scored == len(p80.frame) - len(p30.frame)
    stats = cache_stats(tmp_path / "pair_scores.sqlite")
    assert stats["pairs"] == len(p80.frame) and stats["last_build"]["hits"] == len(p30.frame)
    merged = p80.frame.merge(p30.frame, on=["query_id", "doc_idx"], suffixes=("", "_30"))
    assert (merged["logit"] == merged["logit_30"]).all()


WRITER = textwrap.dedent("""
    import sys
    from lethe_core.inference.pair_cache import PairScoreCache
    from lethe_core.rerankers import LexicalReranker
    cache, rr = PairScoreCache(sys.argv[1]), LexicalReranker()
    print("ready", flush=True)
    i = 0
    while True:  # killed from outside, mid-transaction at some point
        texts = [f"turn {i} {j} about cats" for j in range(200)]
        cache.store("test:lexical|v1", f"query {i} cats", texts, rr.score(f"query {i} cats", texts))
        i += 1
""")


def test_a_kill_mid_write_loses_only_the_batch_in_flight(tmp_path):
    path = tmp_path / "p.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    cache = PairScoreCache(path)
    n = cache.stats()["pairs"]
    assert n > 0 and n % 200 == 0  # whole batches only
    rr = LexicalReranker()
    for i in (0, n // 200 - 1):  # stored scores are exactly what the scorer gives
        texts = [f"turn {i} {j} about cats" for j in range(200)]
        np.testing.assert_allclose(cache.lookup("test:lexical|v1", f"query {i} cats", texts), rr.score(f"query {i} cats", texts), rtol=0, atol=0)


def test_a_full_database_is_one_error_naming_the_folder_and_keeps_what_was_stored(tmp_path):
    """Issue 24, finding 6: `sqlite3.OperationalError: database or disk is full` once named no folder.

    SQLite's own page limit makes the write fail with SQLITE_FULL, as a full disk does."""
    from lethe_core.util.storage import DiskFullError

    cache = PairScoreCache(tmp_path / "p.sqlite")
    rr = LexicalReranker()
    first = [f"turn {j} about cats" for j in range(50)]
    cache.store("test:lexical|v1", "cats?", first, rr.score("cats?", first))
    pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
    cache._db.execute(f"PRAGMA max_page_count = {pages + 1}")
    many = [f"a much longer turn number {j} " * 8 for j in range(5000)]
    with pytest.raises(DiskFullError) as err:
        cache.store("test:lexical|v1", "dogs?", many, rr.score("dogs?", many))
    assert str(err.value).startswith(f"the disk under {tmp_path} is full: ") and "database or disk is full" in str(err.value)
    assert np.isnan(cache.lookup("test:lexical|v1", "dogs?", many[:3])).all()  # the failed batch is rolled back whole
    np.testing.assert_allclose(cache.lookup("test:lexical|v1", "cats?", first), rr.score("cats?", first), rtol=0, atol=0)
    cache.close()
