"""Candidate-pool cache: every query's first-stage union with its reranker logits, scored once.

Nothing in a pool depends on RIF state (docs/method.md, "Scoring once"), so every RIF arm,
seed, sweep, notebook and dashboard replay reads these files instead of calling a model.

Layout: `<cache>/pools/<dataset>/<key>/manifest.json` + `part-NNNNN.parquet`, where key
hashes the dataset fingerprint, the pipeline config and the reranker's *identity* (its
weights digest and backend, not only its name: a model retrained under the same name gets
new pools). Parts are written to a temporary file and renamed, so a crash never leaves a
half-written part; a rerun skips every query already stored (resumable). A part that
cannot be read is moved aside as `*.corrupt` and its queries are recomputed; so is a
corrupt manifest. One builder at a time per pool directory (an exclusive file lock): a
second builder waits, then reuses what the first stored. Logits come through the
pair-score cache, so a pair scored by any earlier build or experiment is never rescored.
A stored query appearing twice is an error naming the cache, never a silent double count.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lethe_core.datasets.model import Dataset, Query
from lethe_core.inference.pair_cache import CachedScorer, PairScoreCache, identity_of
from lethe_core.util.locking import exclusive
from lethe_core.util.paths import cache_dir
from lethe_core.util.storage import disk_writes, sweep_stale_tmp
from lethe_core.retrieval.pipeline import HybridRetriever, PipelineConfig
from lethe_core.rerankers import Reranker, route

SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("doc_idx", pa.int32()),
        ("doc_id", pa.string()),
        ("rrf_rank", pa.int16()),
        ("rrf", pa.float64()),
        ("bm25_rank", pa.int16()),
        ("bm25_score", pa.float32()),
        ("dense_rank", pa.int16()),
        ("dense_score", pa.float32()),
        ("logit", pa.float32()),  # raw reranker logit
        ("calibrated", pa.float32()),  # affine-calibrated logit (= logit when the reranker has no calibration)
        ("fuse_w", pa.float32()),  # the routed reranker's fusion weight for this query (NaN: pure reranker order)
    ]
)
POOL_FORMAT = 3  # bump when the schema or the key changes, so old caches are not read as new ones


class PoolCacheError(ValueError):
    """A pool cache that cannot be trusted; the message names it and says how to rebuild."""


def pool_key(dataset: Dataset, config: PipelineConfig, reranker) -> str:
    """Dataset fingerprint x pipeline config x reranker identity (weights digest + backend)."""
    payload = json.dumps({"format": POOL_FORMAT, "dataset": dataset.fingerprint, "pipeline": config.key(),
                          "reranker": identity_of(reranker)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass
class Pools:
    """Loaded pools: one row per (query, union member), plus a packed view for fast replay."""

    frame: pd.DataFrame
    manifest: dict
    directory: Path

    @property
    def reranker(self) -> str:
        return self.manifest["reranker"]

    def query_ids(self) -> list[str]:
        return list(dict.fromkeys(self.frame["query_id"]))

    def packed(self, query_ids: Sequence[str], calibration: bool = False) -> "PackedPools":
        """The pools in query order; their `read_logit` array is the logit the mechanisms read: the raw one (the paper's
        reading) unless `calibration=True` (the ablation) asks for the stored calibrated one (no rescoring either way)."""
        return PackedPools.from_frame(self.frame, query_ids, calibration)


@dataclass
class PackedPools:
    """Concatenated per-query arrays in RRF order; query i owns rows offsets[i]:offsets[i+1]."""

    query_ids: list[str]
    offsets: np.ndarray
    doc_idx: np.ndarray
    rrf: np.ndarray
    logit: np.ndarray  # the reranker's raw logit
    read_logit: np.ndarray  # the logit RIF and the thresholds read: `logit` unless packed with calibration=True
    fuse_w: np.ndarray  # one per query
    bm25_rank: np.ndarray
    dense_rank: np.ndarray

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, query_ids: Sequence[str], calibration: bool = False) -> "PackedPools":
        missing = set(query_ids) - set(frame["query_id"].unique())
        if missing:
            raise KeyError(f"{len(missing)} queries have no pool (e.g. {sorted(missing)[:3]}); build the pools first")
        order = pd.Categorical(frame["query_id"], categories=list(query_ids))
        sub = frame.assign(_q=order).dropna(subset=["_q"]).sort_values(["_q", "rrf_rank"], kind="stable")
        counts = sub.groupby("_q", observed=False).size().to_numpy()
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return cls(
            list(query_ids), offsets, sub["doc_idx"].to_numpy(np.int32), sub["rrf"].to_numpy(np.float64),
            sub["logit"].to_numpy(np.float32), sub["calibrated" if calibration else "logit"].to_numpy(np.float32),
            sub["fuse_w"].to_numpy(np.float32)[offsets[:-1]] if len(sub) else np.zeros(0, np.float32),
            sub["bm25_rank"].to_numpy(np.int16), sub["dense_rank"].to_numpy(np.int16),
        )

    def rows(self, i: int) -> slice:
        return slice(self.offsets[i], self.offsets[i + 1])


class PoolBuilder:
    """Builds (or resumes) the pool cache of one dataset x pipeline x reranker."""

    def __init__(self, dataset: Dataset, reranker: Reranker, config: PipelineConfig = PipelineConfig(),
                 root: Path | None = None, retriever: HybridRetriever | None = None, progress: bool = True):
        self.dataset = dataset
        self.reranker = reranker
        self.config = config
        self.progress = progress
        self.root = Path(root or cache_dir())
        self.key = pool_key(dataset, config, reranker)
        self.directory = pools_dir(dataset.name, self.key, self.root)
        self._retriever = retriever

    @property
    def retriever(self) -> HybridRetriever:
        if self._retriever is None:
            self._retriever = HybridRetriever(self.dataset.require_corpus(), self.config, cache_root=self.root, progress=self.progress)
        return self._retriever

    def manifest(self) -> dict:
        return {
            "dataset": self.dataset.name,
            "dataset_fingerprint": self.dataset.fingerprint,
            "source": str(self.dataset.source),
            "pipeline": asdict(self.config),
            "pipeline_key": self.config.key(),
            "reranker": self.reranker.name,
            "reranker_identity": identity_of(self.reranker),
            "key": self.key,
        }

    def _write_part(self, rows: list[pd.DataFrame]) -> None:
        table = pa.Table.from_pandas(pd.concat(rows, ignore_index=True), schema=SCHEMA, preserve_index=False)
        n = len(_parts(self.directory))
        tmp = self.directory / f".tmp-{uuid.uuid4().hex}.parquet"
        with disk_writes(self.directory, cleanup=[tmp], need=table.nbytes):  # a full disk: one error, no half part left
            pq.write_table(table, tmp)
            os.replace(tmp, self.directory / f"part-{n:05d}-{uuid.uuid4().hex[:8]}.parquet")

    def build(self, queries: Sequence[Query] | None = None, batch: int = 32, flush_seconds: float = 20.0,
              on_flush: Callable[[int], None] | None = None) -> Pools:
        """Score every query's union that is not stored yet; returns all stored pools of this key."""
        queries = list(self.dataset.queries if queries is None else queries)
        with disk_writes(self.directory):
            self.directory.mkdir(parents=True, exist_ok=True)
        with exclusive(self.directory / ".lock", f"pools {self.dataset.name} [{self.reranker.name}]: another process is building "
                       "these pools; waiting for it to finish..."):
            # Parts and manifests a killed build left half-written: under the lock no one else writes here.
            sweep_stale_tmp(self.directory, ".tmp-*", older_than=0)
            sweep_stale_tmp(self.directory, "manifest.tmp", older_than=0)
            self._ensure_manifest()
            stored = _read_parts(self.directory)
            done = set(stored["query_id"].unique())
            todo = [q for q in queries if q.id not in done]
            if not todo:
                return _pools(self.directory, stored, queries)
            self._score(todo, len(queries), batch, flush_seconds, on_flush)
        return self.load(queries)

    def _ensure_manifest(self) -> None:
        path = self.directory / "manifest.json"
        if path.exists():
            try:
                json.loads(path.read_text())
                return
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                bad = path.with_suffix(".json.corrupt")
                os.replace(path, bad)
                warnings.warn(f"pool manifest {path} is unreadable ({exc}); moved to {bad.name} and rewritten", stacklevel=3)
        tmp = path.with_suffix(".tmp")
        with disk_writes(self.directory, cleanup=[tmp]):
            tmp.write_text(json.dumps(self.manifest(), indent=2))
            os.replace(tmp, path)

    def _score(self, todo: list[Query], n_total: int, batch: int, flush_seconds: float, on_flush) -> None:
        from tqdm.auto import tqdm

        corpus = self.dataset.require_corpus()
        retriever = self.retriever  # indexes (and any embedding) before the pool progress bar starts
        retriever.embed_queries(todo)  # one cache write for all queries, not one per batch
        cache = PairScoreCache(self.root / "pair_scores.sqlite")
        scorers: dict[int, CachedScorer] = {}
        bar = tqdm(total=n_total, initial=n_total - len(todo), desc=f"pools {self.dataset.name} [{self.reranker.name}]",
                   unit="q", disable=not self.progress)
        pending: list[pd.DataFrame] = []
        last, flushed = time.monotonic(), 0
        try:
            for start in range(0, len(todo), batch):
                chunk = todo[start : start + batch]
                cands = retriever.candidates(chunk)
                models = [route(self.reranker, q) for q in chunk]
                logits_of: dict[int, np.ndarray] = {}
                for mid in dict.fromkeys(id(m) for m in models):  # each fold model scores its queries' missing pairs at once
                    mine = [j for j, m in enumerate(models) if id(m) == mid]
                    scorer = scorers.setdefault(mid, CachedScorer(models[mine[0]], cache))
                    got = scorer.score_many([(chunk[j].text, [corpus.texts[i] for i in cands[j].doc_idx]) for j in mine])
                    logits_of.update(zip(mine, got))
                for j, (query, cand) in enumerate(zip(chunk, cands)):
                    model, logits = models[j], logits_of[j]
                    a, b = getattr(model, "calibration", (1.0, 0.0))
                    pending.append(pd.DataFrame({
                        "query_id": query.id, "doc_idx": cand.doc_idx, "doc_id": [corpus.ids[i] for i in cand.doc_idx],
                        "rrf_rank": np.arange(len(cand.doc_idx), dtype=np.int16), "rrf": cand.rrf,
                        "bm25_rank": cand.bm25_rank, "bm25_score": cand.bm25_score, "dense_rank": cand.dense_rank,
                        "dense_score": cand.dense_score, "logit": logits, "calibrated": a * logits + b,
                        "fuse_w": np.float32(getattr(model, "fuse_w", np.nan)),
                    }))
                    bar.update(1)
                    bar.set_postfix(cached=sum(s.hits for s in scorers.values()), scored=sum(s.scored for s in scorers.values()))
                if start + batch >= len(todo) or time.monotonic() - last > flush_seconds:
                    self._write_part(pending)
                    flushed += len(pending)
                    pending, last = [], time.monotonic()
                    if on_flush:
                        on_flush(flushed)
        finally:
            bar.close()
            hits, scored = sum(s.hits for s in scorers.values()), sum(s.scored for s in scorers.values())
            self.hits, self.scored = hits, scored
            try:
                if hits or scored:
                    cache.record_build(f"pools {self.dataset.name} {self.key}", identity_of(self.reranker), hits, scored)
            finally:  # closed even when the disk is full
                cache.close()

    def load(self, queries: Sequence[Query] | None = None) -> Pools:
        return load_pools(self.directory, queries)


def _parts(directory: Path) -> list[Path]:
    return sorted(directory.glob("part-*.parquet"))


def _read_parts(directory: Path) -> pd.DataFrame:
    frames = []
    for part in _parts(directory):
        try:
            frames.append(pq.read_table(part, schema=SCHEMA).to_pandas())
        except Exception as exc:  # truncated or foreign file: keep it for inspection, recompute its queries
            bad = part.with_suffix(".corrupt")
            os.replace(part, bad)
            warnings.warn(f"pool part {part} is unreadable ({exc}); moved to {bad.name}, its queries will be recomputed", stacklevel=2)
    if not frames:
        return pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})
    frame = pd.concat(frames, ignore_index=True)
    dup = frame.duplicated(["query_id", "doc_idx"])
    if dup.any():
        qids = frame.loc[dup, "query_id"].unique()
        raise PoolCacheError(f"pool cache {directory} stores {len(qids)} queries more than once (e.g. {qids[0]!r}); "
                             f"it cannot be trusted: delete that folder (rm -r '{directory}') and rerun the command to rebuild it")
    return frame


def pools_dir(dataset_name: str, key: str, root: Path | None = None) -> Path:
    return Path(root or cache_dir()) / "pools" / dataset_name / key


def load_pools(directory: Path, queries: Sequence[Query] | None = None) -> Pools:
    """Read stored pools (no model needed), optionally only those of `queries`."""
    return _pools(directory, _read_parts(directory), queries)


def _pools(directory: Path, frame: pd.DataFrame, queries: Sequence[Query] | None) -> Pools:
    if queries is not None:
        wanted = {q.id for q in queries}
        frame = frame[frame["query_id"].isin(wanted)].reset_index(drop=True)
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PoolCacheError(f"pool manifest {directory / 'manifest.json'} is unreadable ({type(exc).__name__}); "
                             "rerun the command that built these pools: it sets the manifest aside and rewrites it") from None
    return Pools(frame, manifest, directory)


def build_pools(dataset: Dataset, reranker: Reranker, config: PipelineConfig = PipelineConfig(),
                root: Path | None = None, progress: bool = True) -> Pools:
    """Build (or resume) and load the pools of all the dataset's queries."""
    return PoolBuilder(dataset, reranker, config, root=root, progress=progress).build()
