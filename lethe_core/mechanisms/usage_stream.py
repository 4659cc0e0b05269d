"""A usage stream over mutable turn vectors: the shared machinery of the embedding-, adapter- and MLP-mutation
checkpoints (01, 02, 04; docs/mutation.md).

The reference (Phase 1, `gc_memory`) kept one FAISS index over the turn vectors, issued queries from its
hot/cold burn-in schedule, fetched the dense top-30, scored it with the cross-encoder and let the store update
its vectors after each retrieval; NDCG@10 was measured every few hundred steps on the same queries that drove
the updates (train = test). Here one loop serves every mechanism:

    step t: query q_t (from `hot_cold_schedule` over the *training* queries)
            -> dense top-k (k = 30) by exact inner product over the mechanism's current effective vectors
               (times its optional per-turn weights; weight 0 = removed from the index)
            -> cross-encoder logits of the k pairs (`Verdicts`: every pair through the pair-score cache, each
               (query, turn) pair scored once ever, the fold-trained reranker routed per query with `route`)
            -> mechanism.update(t, q_vec, doc_idx, logits)

Every `eval_every` steps (and at step 0 and the last step) the state is evaluated frozen on the evaluation
queries: NDCG@10 of the dense top-30 reordered by the cross-encoder (`rerank`, the reference's "static" system
of CK3) and of the dense order alone (`dense`). Protocols: `paper` (schedule drawn from the evaluation queries,
the reference's train = test) and `heldout` (queries split in two halves — by conversation when every query has
one, LoCoMo, else a seeded split, NFCorpus — the stream runs on one half and the other half is evaluated, both
directions). Deterministic for a given seed: the schedule comes from `hot_cold_schedule(seed)`, the mechanism
owns its own seeded generator, ties in the dense order go to the lower turn index.

API (small on purpose; checkpoint 04 builds on it, change it only additively):
- `Mechanism` protocol: `name`, `effective() -> (n_turns, d)`, `update(step, qvec, doc_idx, logits)`; optional
  `weights() -> (n_turns,) | None` and `diagnostics() -> dict` (logged at each evaluation).
- `StaticMechanism(vectors)`: the baseline (never changes).
- `StreamData.load(dataset, pipeline, cache_root)`: query and turn vectors from the embedding cache.
- `Verdicts(data, reranker, cache_path)`: routed, memoised cross-encoder logits.
- `dense_topk`, `run_stream(...) -> StreamResult` (per-query eval rows and the diagnostics trace);
  `drift(original, current, touched)` (anchor cosine and nearest-neighbour overlap of moved turns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np
import pandas as pd

from lethe_core.datasets.model import Dataset
from lethe_core.datasets.splits import HELDOUT, PAPER
from lethe_core.inference.pair_cache import CachedScorer, PairScoreCache
from lethe_core.measures.metrics import ndcg_at_k
from lethe_core.util.paths import cache_dir
from lethe_core.retrieval.pipeline import PipelineConfig, corpus_vectors, query_vectors
from lethe_core.rerankers import route
from lethe_core.rif.protocols import hot_cold_schedule
from lethe_core.retrieval.second_stage import DEFAULT_MODE, final_order

K_FETCH = 30  # the reference's k_fetch: dense top-30 handed to the cross-encoder
PROTOCOLS = (PAPER, HELDOUT)
SYSTEMS = ("rerank", "dense")


@runtime_checkable
class Mechanism(Protocol):
    """What the stream drives. `effective()` is read before every retrieval (return the live matrix, no copy
    needed: the stream never writes to it). `update` receives the retrieved turns in dense order and their raw
    cross-encoder logits (aligned). Optional: `weights()` (per-turn multiplier of the dense score, 0 removes a
    turn; None = all ones) and `diagnostics()` (a flat dict of numbers logged at each evaluation)."""

    name: str

    def effective(self) -> np.ndarray: ...

    def update(self, step: int, qvec: np.ndarray, doc_idx: np.ndarray, logits: np.ndarray) -> None: ...


class StaticMechanism:
    """The static pipeline: the encoder's vectors, never updated."""

    name = "static"

    def __init__(self, vectors: np.ndarray):
        self.vectors = np.asarray(vectors, dtype=np.float32)

    def effective(self) -> np.ndarray:
        return self.vectors

    def update(self, step: int, qvec: np.ndarray, doc_idx: np.ndarray, logits: np.ndarray) -> None:
        pass


def normalize(x: np.ndarray) -> np.ndarray:
    """Unit rows (or a unit vector); zero rows stay zero."""
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


@dataclass
class StreamData:
    """The dataset with its bi-encoder vectors: `query_vectors[i]` is `dataset.queries[i]`, `turn_vectors[j]` corpus turn j."""

    dataset: Dataset
    query_vectors: np.ndarray
    turn_vectors: np.ndarray

    def __post_init__(self):
        corpus = self.dataset.require_corpus()
        if len(self.query_vectors) != len(self.dataset.queries) or len(self.turn_vectors) != len(corpus):
            raise ValueError("vectors must align with the dataset's queries and corpus turns")
        self.ids = corpus.ids
        self.texts = corpus.texts

    @classmethod
    def load(cls, dataset: Dataset, pipeline: PipelineConfig = PipelineConfig(), cache_root: Path | None = None,
             progress: bool = False) -> "StreamData":
        root = Path(cache_root or cache_dir())
        return cls(dataset, query_vectors(dataset.queries, pipeline, root, progress).astype(np.float32),
                   corpus_vectors(dataset.require_corpus(), pipeline, root, progress).astype(np.float32))


class Verdicts:
    """Raw cross-encoder logits of (query position, turn position) pairs.

    An in-memory memo over `CachedScorer` (the pair-score cache): a pair is looked up in SQLite or scored by the
    model only the first time this object sees it, and the model scores it only if no run ever did. Each query is
    scored by `route(reranker, query)` (the fold that never saw its conversation); the routed model's `fuse_w`
    (NaN when none) is what `final_order` needs for the fused second stage."""

    def __init__(self, data: StreamData, reranker, cache_path: Path | None = None, mode: str = DEFAULT_MODE):
        self.data = data
        self.reranker = reranker
        self.mode = mode
        self.cache = PairScoreCache(cache_path or cache_dir() / "pair_scores.sqlite")
        self._memo: dict[tuple[int, str], dict[int, float]] = {}
        self._models: dict[int, object] = {}  # query position -> routed model
        self._model_by_id: dict[int, object] = {}
        self._keys: dict[int, tuple[int, str]] = {}
        self._scorers: dict[int, CachedScorer] = {}

    def model(self, qi: int):
        if qi not in self._models:
            m = self._models[qi] = route(self.reranker, self.data.dataset.queries[qi])
            self._model_by_id[id(m)] = m
        return self._models[qi]

    def fuse_w(self, qi: int) -> float:
        return float(getattr(self.model(qi), "fuse_w", math.nan))

    def _key(self, qi: int) -> tuple[int, str]:
        key = self._keys.get(qi)
        if key is None:  # two queries with one text (and one routed model) share their pairs
            key = self._keys[qi] = (id(self.model(qi)), self.data.dataset.queries[qi].text)
        return key

    def logits(self, qis: Sequence[int], docs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Logits for each (query position, turn positions) item, in the given turn order."""
        missing: dict[tuple[int, str], dict[int, None]] = {}  # (routed model, query text) -> new turn positions
        for qi, d in zip(qis, docs):
            key = self._key(int(qi))
            memo = self._memo.setdefault(key, {})
            new = missing.setdefault(key, {})
            new.update((j, None) for j in np.asarray(d, dtype=np.int64).tolist() if j not in memo)
        by_model: dict[int, list[tuple[tuple[int, str], list[int]]]] = {}
        for key, new in missing.items():
            if new:
                by_model.setdefault(key[0], []).append((key, list(new)))
        for mid, items in by_model.items():
            model = self._model_by_id[mid]
            scorer = self._scorers.setdefault(mid, CachedScorer(model, self.cache))
            got = scorer.score_many([(text, [self.data.texts[j] for j in new]) for (_, text), new in items])
            for (key, new), logits in zip(items, got):
                self._memo[key].update(zip(new, (float(x) for x in logits)))
        out = []
        for qi, d in zip(qis, docs):
            memo = self._memo[self._key(int(qi))]
            out.append(np.array([memo[j] for j in np.asarray(d, dtype=np.int64).tolist()], dtype=np.float32))
        return out

    @property
    def counts(self) -> dict:
        return {"hits": int(sum(s.hits for s in self._scorers.values())),
                "scored": int(sum(s.scored for s in self._scorers.values()))}

    def close(self) -> None:
        self.cache.close()


def dense_topk(vectors: np.ndarray, qvecs: np.ndarray, k: int = K_FETCH, weights: np.ndarray | None = None) -> np.ndarray:
    """Top-k turn positions per query by (weighted) inner product, best first, ties to the lower position;
    turns with weight <= 0 are never returned (rows are shorter only when fewer than k turns are alive: -1 pads)."""
    q = np.atleast_2d(np.asarray(qvecs, dtype=np.float32))
    scores = q @ np.asarray(vectors, dtype=np.float32).T
    if weights is not None:
        w = np.asarray(weights, dtype=np.float32)
        scores = np.where(w > 0, scores * w, -np.inf)
    n = scores.shape[1]
    k = min(k, n)
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (len(q), 1))
    s = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -s), axis=1)  # by score, ties to the lower position
    out = np.take_along_axis(part, order, axis=1)
    out[~np.isfinite(np.take_along_axis(s, order, axis=1))] = -1
    return out


@dataclass
class StreamResult:
    rows: list[dict] = field(default_factory=list)  # one per (eval step, eval query, system)
    trace: list[dict] = field(default_factory=list)  # one per eval step: the mechanism's diagnostics

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["step", "query_id", "system", "ndcg@10"])


def evaluate(data: StreamData, verdicts: Verdicts, mech: Mechanism, eval_idx: np.ndarray, k: int = K_FETCH,
             chunk: int = 512) -> dict[str, np.ndarray]:
    """Frozen evaluation: NDCG@10 per eval query of the reranked dense top-k (`rerank`) and of the dense order (`dense`)."""
    eff, w = mech.effective(), _weights(mech)
    out = {s: np.empty(len(eval_idx), dtype=np.float64) for s in SYSTEMS}
    queries, ids = data.dataset.queries, data.ids
    for start in range(0, len(eval_idx), chunk):
        part = np.asarray(eval_idx[start : start + chunk])
        top = dense_topk(eff, data.query_vectors[part], k, w)
        docs = [t[t >= 0] for t in top]
        logits = verdicts.logits(part, docs)
        for r, (qi, d, lg) in enumerate(zip(part, docs, logits)):
            qrels = queries[qi].qrels
            out["dense"][start + r] = ndcg_at_k([ids[j] for j in d], qrels, 10)
            order = final_order(lg, verdicts.fuse_w(int(qi)), verdicts.mode)
            out["rerank"][start + r] = ndcg_at_k([ids[j] for j in d[order]], qrels, 10)
    return out


def _weights(mech) -> np.ndarray | None:
    get = getattr(mech, "weights", None)
    return get() if get else None


def eval_steps(steps: int, eval_every: int) -> list[int]:
    """0, eval_every, 2 * eval_every, ... and always the last step."""
    if eval_every <= 0:
        raise ValueError(f"eval_every must be positive, got {eval_every}")
    return sorted(set(range(0, steps + 1, eval_every)) | {steps})


def run_stream(data: StreamData, verdicts: Verdicts, mech: Mechanism, train_idx: np.ndarray, eval_idx: np.ndarray,
               steps: int, eval_every: int, seed: int, k: int = K_FETCH, progress: bool = False,
               desc: str = "usage stream") -> StreamResult:
    """Drive `mech` with `steps` queries drawn by `hot_cold_schedule(len(train_idx), steps, seed)` from `train_idx`,
    evaluating `eval_idx` frozen at `eval_steps(steps, eval_every)`."""
    from tqdm.auto import tqdm

    from threadpoolctl import threadpool_limits

    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    train_idx, eval_idx = np.asarray(train_idx, dtype=np.int64), np.asarray(eval_idx, dtype=np.int64)
    if len(train_idx) == 0 or len(eval_idx) == 0:
        raise ValueError("the usage stream needs training and evaluation queries")
    schedule = train_idx[hot_cold_schedule(len(train_idx), steps, seed)[0]] if steps else np.zeros(0, dtype=np.int64)
    checkpoints = set(eval_steps(steps, eval_every))
    result = StreamResult()
    qids = [data.dataset.queries[i].id for i in eval_idx]

    def record(step: int) -> None:
        scores = evaluate(data, verdicts, mech, eval_idx, k)
        for system in SYSTEMS:
            result.rows.extend({"step": step, "query_id": q, "system": system, "ndcg@10": float(v)}
                               for q, v in zip(qids, scores[system]))
        diag = getattr(mech, "diagnostics", None)
        result.trace.append({"step": step, **(diag() if diag else {})})

    # one BLAS thread: the products here are small, and threaded BLAS on a busy machine is ~10x slower
    with threadpool_limits(limits=1, user_api="blas"):
        record(0)
        for t in tqdm(range(steps), desc=desc, unit="step", disable=not progress):
            qi = int(schedule[t])
            qvec = data.query_vectors[qi]
            top = dense_topk(mech.effective(), qvec, k, _weights(mech))[0]
            top = top[top >= 0]
            logits = verdicts.logits([qi], [top])[0]
            mech.update(t, qvec, top, logits)
            if t + 1 in checkpoints:
                record(t + 1)
    return result


def drift(original: np.ndarray, current: np.ndarray, touched: np.ndarray, k: int = 10, limit: int = 200) -> dict:
    """How far the `touched` turns left the encoder's manifold: mean cosine of current to original vector
    (`anchor_cos`), and the mean share of a touched turn's k nearest neighbours (by cosine, itself excluded) that
    are the same under the current and the original vectors (`nn_overlap`; at most `limit` touched turns, the
    first ones, are compared). NaN when nothing was touched."""
    touched = np.flatnonzero(touched) if np.asarray(touched).dtype == bool else np.asarray(touched, dtype=np.int64)
    out = {"touched": int(len(touched)), "anchor_cos": math.nan, "nn_overlap": math.nan}
    if len(touched) == 0:
        return out
    o, c = normalize(original), normalize(current)
    out["anchor_cos"] = float(np.mean(np.sum(o[touched] * c[touched], axis=1)))
    sample = touched[:limit]
    k = min(k, len(o) - 1)
    if k < 1:
        return out

    def neighbours(m: np.ndarray) -> np.ndarray:
        s = m[sample] @ m.T
        s[np.arange(len(sample)), sample] = -np.inf
        return np.argpartition(-s, k - 1, axis=1)[:, :k]

    a, b = neighbours(o), neighbours(c)
    out["nn_overlap"] = float(np.mean([len(set(x) & set(y)) / k for x, y in zip(a, b)]))
    return out
