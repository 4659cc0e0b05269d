"""Pair-score cache: every (reranker, query, turn) pair is scored once, ever, whatever experiment asks.

Store: one SQLite file (`<cache>/pair_scores.sqlite`, WAL journal). SQLite rather than Parquet or
DuckDB because it ships with Python, lets several processes read while one writes (WAL), and makes
each batch of inserts one atomic transaction: a kill mid-write loses only the batch in flight, never
corrupts what is stored. Keys are the reranker's identity (name, backend and a digest of its weights,
so a retrained model never reads an old score) and sha1 digests of the query and turn texts (a text
edit is a new pair). Values are raw logits; calibration is applied by whoever reads them.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Sequence

import numpy as np

from lethe_core.util.paths import cache_dir
from lethe_core.util.storage import disk_writes

SCHEMA = """
CREATE TABLE IF NOT EXISTS rerankers (id INTEGER PRIMARY KEY, identity TEXT UNIQUE NOT NULL);
CREATE TABLE IF NOT EXISTS pairs (rid INTEGER NOT NULL, q BLOB NOT NULL, t BLOB NOT NULL, logit REAL NOT NULL,
                                  PRIMARY KEY (rid, q, t)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS builds (at REAL NOT NULL, label TEXT NOT NULL, reranker TEXT NOT NULL,
                                   hits INTEGER NOT NULL, scored INTEGER NOT NULL);
"""


def digest(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8")).digest()


def identity_of(reranker) -> str:
    """What a score is keyed by: the reranker's identity (weights and backend), its name as a last resort."""
    return getattr(reranker, "identity", None) or reranker.name


class PairScoreCache:
    def __init__(self, path: Path | None = None):
        self.path = Path(path or cache_dir() / "pair_scores.sqlite")
        with disk_writes(self.path.parent):  # a full disk: one DiskFullError naming the folder and the free space
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=120, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        self._rids: dict[str, int] = {}

    def close(self) -> None:
        self._db.close()

    def _rid(self, identity: str) -> int:
        if identity not in self._rids:
            with disk_writes(self.path.parent):
                self._db.execute("INSERT OR IGNORE INTO rerankers (identity) VALUES (?)", (identity,))
            self._rids[identity] = self._db.execute("SELECT id FROM rerankers WHERE identity = ?", (identity,)).fetchone()[0]
        return self._rids[identity]

    def lookup(self, identity: str, query: str, texts: Sequence[str]) -> np.ndarray:
        """Stored logits in the order of `texts`; NaN where a pair was never scored."""
        stored = dict(self._db.execute("SELECT t, logit FROM pairs WHERE rid = ? AND q = ?", (self._rid(identity), digest(query))))
        return np.array([stored.get(digest(t), np.nan) for t in texts], dtype=np.float64)

    def store(self, identity: str, query: str, texts: Sequence[str], logits: Sequence[float]) -> None:
        rid, q = self._rid(identity), digest(query)
        rows = [(rid, q, digest(t), float(x)) for t, x in zip(texts, logits)]
        with disk_writes(self.path.parent, need=64 * len(rows)), self._db:  # one transaction: all or nothing
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR IGNORE INTO pairs VALUES (?, ?, ?, ?)", rows)

    def record_build(self, label: str, identity: str, hits: int, scored: int) -> None:
        with disk_writes(self.path.parent), self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("INSERT INTO builds VALUES (?, ?, ?, ?, ?)", (time.time(), label, identity, hits, scored))

    def stats(self) -> dict:
        per = self._db.execute("SELECT r.identity, COUNT(p.rid) FROM rerankers r LEFT JOIN pairs p ON p.rid = r.id "
                               "GROUP BY r.id ORDER BY r.identity").fetchall()
        last = self._db.execute("SELECT at, label, reranker, hits, scored FROM builds ORDER BY at DESC LIMIT 1").fetchone()
        out = {"path": str(self.path), "rerankers": [{"identity": i, "pairs": n} for i, n in per],
               "pairs": int(sum(n for _, n in per)), "last_build": None}
        if last:
            at, label, reranker, hits, scored = last
            total = hits + scored
            out["last_build"] = {"at": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)), "label": label, "reranker": reranker,
                                 "hits": hits, "scored": scored, "hit_rate": hits / total if total else None}
        return out


class CachedScorer:
    """Wraps one scorer: reads stored logits, scores only the missing pairs, stores them, counts both."""

    def __init__(self, scorer, cache: PairScoreCache):
        self.scorer = scorer
        self.cache = cache
        self.identity = identity_of(scorer)
        self.hits = 0
        self.scored = 0

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        return self.score_many([(query, texts)])[0]

    def score_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[np.ndarray]:
        """Logits for several (query, texts); every missing pair of all of them is scored in one call when
        the scorer has `score_pairs` (one length-sorted run), else query by query."""
        out, missing = [], []
        for query, texts in items:
            logits = self.cache.lookup(self.identity, query, texts)
            out.append(logits)
            missing.append(np.flatnonzero(np.isnan(logits)))
            self.hits += len(texts) - len(missing[-1])
        queries = [q for (q, _), m in zip(items, missing) for _ in m]
        texts = [ts[i] for (_, ts), m in zip(items, missing) for i in m]
        if not texts:
            return [x.astype(np.float32) for x in out]
        if hasattr(self.scorer, "score_pairs"):
            fresh = np.asarray(self.scorer.score_pairs(queries, texts), dtype=np.float64)
        else:
            fresh = np.concatenate([np.asarray(self.scorer.score(q, [ts[i] for i in m]), dtype=np.float64)
                                    for (q, ts), m in zip(items, missing) if len(m)])
        start = 0
        for (query, ts), logits, m in zip(items, out, missing):
            if len(m):
                logits[m] = fresh[start : start + len(m)]
                self.cache.store(self.identity, query, [ts[i] for i in m], logits[m])
                start += len(m)
        self.scored += len(texts)
        return [x.astype(np.float32) for x in out]


def cache_stats(path: Path | None = None) -> dict:
    """`lethe-lab cache stats`: pairs stored per reranker identity and the hit rate of the last pool build."""
    with closing(PairScoreCache(path)) as cache:
        return cache.stats()
