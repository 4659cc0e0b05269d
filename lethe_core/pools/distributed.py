"""Heavy stages on Ray: embedding a corpus and scoring pool unions on worker processes (docs/distributed.md).

Both stages *warm the caches* the single-process path reads: the driver plans exactly the calls that
path would make (the same texts per `encode`, the same pairs per `score_pairs`), workers run them with
models loaded once each, and the driver writes every returned batch into the EmbeddingCache or the
PairScoreCache at once. A pool build afterwards finds everything stored, so its pools equal the
single-process ones, and a killed run loses only the batches in flight.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from lethe_core.datasets.model import Query
from lethe_core.inference.pair_cache import CachedScorer, PairScoreCache, identity_of
from lethe_core.retrieval.dense import ENCODE_STEP, EmbeddingCache, LazyEncoder, load_encoder
from lethe_core.rerankers import load_reranker, route

if TYPE_CHECKING:
    from lethe_core.pools.cache import PoolBuilder, Pools



class RayUnavailable(RuntimeError):
    """Ray cannot be started or reached; the message says which address and what to do."""


@dataclass(frozen=True)
class RayConfig:
    """Where the workers run: a local instance of `workers * cpus_per_worker` CPUs, or an existing cluster.

    Each worker runs its model on `cpus_per_worker` threads, so the workers together never use more
    cores than Ray gave them. `in_flight` batches are queued per worker to hide the round trip."""

    workers: int = 2
    address: str | None = None  # host:port, ray://host:port or auto; None starts a local instance
    cpus_per_worker: int = 1
    in_flight: int = 2

    def __post_init__(self):
        if self.workers < 1 or self.cpus_per_worker < 1 or self.in_flight < 1:
            raise ValueError(f"workers, cpus_per_worker and in_flight must be >= 1 (got {self.workers}, "
                             f"{self.cpus_per_worker}, {self.in_flight})")


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail in seconds, naming the address, instead of Ray's long connection retries."""
    if address == "auto":
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayUnavailable(f"--ray-address {address!r} is not host:port, ray://host:port or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise RayUnavailable(f"no Ray cluster answers at --ray-address {address!r} ({exc.strerror or exc}); start one with "
                             "`ray start --head` there, or leave --ray-address out for a local instance") from None


class RayCluster:
    """A context manager: starts a quiet local Ray (no dashboard, no usage stats) or connects to `address`;
    on exit it shuts down only what it started or connected."""

    def __init__(self, config: RayConfig = RayConfig()):
        self.config = config
        self._owned = False

    def __enter__(self) -> "RayCluster":
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        import ray

        if self.config.address:
            _check_reachable(self.config.address)
        if ray.is_initialized():
            return self
        quiet = dict(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
        if self.config.address:
            try:
                ray.init(address=self.config.address, **quiet)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise RayUnavailable(f"cannot connect to the Ray cluster at {self.config.address!r}: {exc}") from None
        else:
            try:
                ray.init(num_cpus=self.config.workers * self.config.cpus_per_worker, **quiet)
            except Exception as exc:  # Ray raises a bare Exception when its node does not come up
                raise RayUnavailable(
                    f"the local Ray instance did not start ({exc}). On a machine busy with other jobs Ray's agents can "
                    "miss its fixed start-up window: retry when the load is lower (logs: /tmp/ray/session_latest/logs)"
                ) from None
        self._owned = True
        return self

    def __exit__(self, *exc) -> None:
        if self._owned:
            import ray

            ray.shutdown()
            self._owned = False


def _use_threads(threads: int) -> None:
    """One worker's share of the cores: OpenMP's (read when a runtime starts: call before loading a model)
    and torch's pool (once a model has imported torch: call again after loading)."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


class EncoderWorker:
    """One bi-encoder per worker process, loaded once."""

    def __init__(self, spec: str, backend: str, threads: int):
        _use_threads(threads)
        self.encoder = load_encoder(spec, backend)
        _use_threads(threads)

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.encoder.encode(texts)


class _NoCache:
    """Every pair missing, nothing stored: lets a worker run CachedScorer's own batching code unchanged."""

    def lookup(self, identity, query, texts):
        return np.full(len(texts), np.nan)

    def store(self, identity, query, texts, logits):
        pass


class ScorerWorker:
    """One reranker per worker process, loaded once; fold-routed rerankers load each fold model on first use."""

    def __init__(self, spec: str, backend: str, threads: int):
        _use_threads(threads)
        self.reranker = load_reranker(spec, backend)
        self.threads = threads
        self._scorers: dict[int, CachedScorer] = {}

    def score(self, router: Query, groups: list[tuple[str, list[str]]]) -> tuple[str, list[np.ndarray]]:
        """The logits of `groups` from the model that `router` routes to, and that model's identity."""
        model = route(self.reranker, router)
        if id(model) not in self._scorers:
            self._scorers[id(model)] = CachedScorer(model, _NoCache())
            _use_threads(self.threads)
        scorer = self._scorers[id(model)]
        return scorer.identity, scorer.score_many(groups)


def _dispatch(config: RayConfig, worker_cls, args: tuple, method: str, units: Sequence[tuple],
              on_result: Callable[[int, object], None]) -> None:
    """Run `method(*unit)` for every unit on `config.workers` actors; `on_result(i, value)` as each returns."""
    import ray

    remote = ray.remote(num_cpus=config.cpus_per_worker)(worker_cls)
    actors = [remote.remote(*args, config.cpus_per_worker) for _ in range(min(config.workers, len(units)))]
    todo = iter(range(len(units)))
    pending: dict = {}

    def submit(actor) -> None:
        i = next(todo, None)
        if i is not None:
            pending[getattr(actor, method).remote(*units[i])] = (i, actor)

    try:
        for actor in actors:
            for _ in range(config.in_flight):
                submit(actor)
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            i, actor = pending.pop(ref)
            on_result(i, ray.get(ref))
            submit(actor)
    finally:
        for actor in actors:
            ray.kill(actor)


def plan_embedding(cache: EmbeddingCache, texts: Sequence[str]) -> list[list[list[str]]]:
    """The `encode` calls `cache.embed` would make for `texts`, grouped by the shard they are written to:
    the distinct missing texts in first-seen order, cut into shards, each shard into ENCODE_STEP texts."""
    missing = list(dict.fromkeys(t for t in texts if cache.count_missing([t])))
    shards = [missing[s : s + cache.shard_size] for s in range(0, len(missing), cache.shard_size)]
    return [[shard[c : c + ENCODE_STEP] for c in range(0, len(shard), ENCODE_STEP)] for shard in shards]


def embed_texts(cache: EmbeddingCache, spec: str, texts: Sequence[str], config: RayConfig = RayConfig(),
                backend: str = "torch", progress: bool = True, on_batch: Callable[[int], None] | None = None) -> np.ndarray:
    """`cache.embed(load_encoder(spec, backend), texts)`, with the missing texts encoded on Ray workers.

    The missing texts are cut into the cache's shards and each shard into ENCODE_STEP-text calls, as
    `EmbeddingCache.embed` does, so every text is encoded in the same batch as there; a shard is written
    (by the cache itself) as soon as all its calls are back. `on_batch(n)` runs after each returned call."""
    from tqdm.auto import tqdm

    plan = plan_embedding(cache, texts)
    shards = [[t for call in shard for t in call] for shard in plan]
    units = [(call,) for shard in plan for call in shard]
    shard_of = [s for s, shard in enumerate(plan) for _ in shard]
    waiting = [len(shard) for shard in plan]
    missing = sum(map(len, shards))
    vectors: dict[str, np.ndarray] = {}
    name = LazyEncoder(spec, backend).name
    bar = tqdm(total=missing, desc=f"embedding on ray ({name}, {config.workers} workers)", unit="text",
               disable=not progress or not missing)
    returned = 0

    def take(i: int, vecs: np.ndarray) -> None:
        nonlocal returned
        vectors.update(zip(units[i][0], vecs))
        bar.update(len(vecs))
        s = shard_of[i]
        waiting[s] -= 1
        if not waiting[s]:
            cache.embed(_Computed(name, vectors), shards[s])  # one shard, written atomically by the cache
            for t in shards[s]:
                del vectors[t]
        returned += 1
        if on_batch:
            on_batch(returned)

    try:
        if units:
            _dispatch(config, EncoderWorker, (spec, backend), "encode", units, take)
    finally:
        bar.close()
    return cache.embed(_Computed(name, {}), texts)


class _Computed:
    """Vectors computed on the workers, handed to EmbeddingCache.embed as if it encoded them."""

    def __init__(self, name: str, vectors: dict[str, np.ndarray]):
        self.name = name
        self.vectors = vectors

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


@dataclass
class ScoringUnit:
    """One `score_pairs` call of the single-process pool build: the missing pairs of one batch of queries
    routed to one model. `router` is the batch's first query of that model: the worker routes it again."""

    router: Query
    identity: str
    groups: list[tuple[str, list[str]]]

    @property
    def pairs(self) -> int:
        return sum(len(ts) for _, ts in self.groups)


def plan_scoring(builder: "PoolBuilder", queries: Sequence[Query], batch: int, cache: PairScoreCache) -> list[ScoringUnit]:
    """The calls `PoolBuilder._score` would make for `queries`, in its order: per batch of `batch` queries,
    per routed model, each query's pairs not stored yet and not scored by an earlier call."""
    corpus = builder.dataset.require_corpus()
    retriever = builder.retriever
    planned: set[tuple[str, str, str]] = set()
    units = []
    for start in range(0, len(queries), batch):
        chunk = list(queries[start : start + batch])
        cands = retriever.candidates(chunk)
        models = [route(builder.reranker, q) for q in chunk]
        for mid in dict.fromkeys(id(m) for m in models):
            mine = [j for j, m in enumerate(models) if id(m) == mid]
            identity = identity_of(models[mine[0]])
            groups = []
            for j in mine:
                texts = [corpus.texts[i] for i in cands[j].doc_idx]
                stored = cache.lookup(identity, chunk[j].text, texts)
                todo = [t for t, x in zip(texts, stored) if np.isnan(x) and (identity, chunk[j].text, t) not in planned]
                if todo:
                    groups.append((chunk[j].text, todo))
            planned.update((identity, q, t) for q, ts in groups for t in ts)  # after the call: a duplicate inside it is scored twice, as there
            if groups:
                units.append(ScoringUnit(chunk[mine[0]], identity, groups))
    return units


def score_units(units: Sequence[ScoringUnit], spec: str, cache: PairScoreCache, config: RayConfig = RayConfig(),
                backend: str = "auto", progress: bool = True, on_batch: Callable[[int], None] | None = None) -> list[list[np.ndarray]]:
    """Each unit's logits (per group, input order), scored on workers that load `load_reranker(spec, backend)`
    once; each returned unit is stored in `cache` at once, as one transaction per group."""
    from tqdm.auto import tqdm

    out: list = [None] * len(units)
    bar = tqdm(total=sum(u.pairs for u in units), desc=f"scoring on ray ({spec}, {config.workers} workers)", unit="pair",
               disable=not progress or not units)
    returned = 0

    def take(i: int, result) -> None:
        nonlocal returned
        identity, logits = result
        unit = units[i]
        if identity != unit.identity:
            raise RayUnavailable(f"a worker loaded {spec!r} as {identity!r}, the driver as {unit.identity!r}: the "
                                 "workers see other weights or another backend; give every node the same models")
        for (query, texts), x in zip(unit.groups, logits):
            cache.store(identity, query, texts, x)
        out[i] = logits
        bar.update(unit.pairs)
        returned += 1
        if on_batch:
            on_batch(returned)

    try:
        if units:
            _dispatch(config, ScorerWorker, (spec, backend), "score", [(u.router, u.groups) for u in units], take)
    finally:
        bar.close()
    return out


def build_pools_on_ray(builder: "PoolBuilder", config: RayConfig = RayConfig(), queries: Sequence[Query] | None = None, batch: int = 32,
                       spec: str | None = None, backend: str | None = None, progress: bool = True,
                       on_batch: Callable[[int], None] | None = None) -> "Pools":
    """`builder.build(queries, batch)` with its two heavy stages run on Ray first (a local instance unless
    `config.address`): the corpus and query embeddings, then every missing pair score. The build itself
    then reads both caches, so its pools equal the single-process ones. `spec`/`backend` load the
    reranker on the workers (default: the builder's reranker name and backend)."""
    from lethe_core.pools.cache import load_pools

    if config.address:  # a bad address is an error even when nothing is left to compute
        _check_reachable(config.address)
    queries = list(builder.dataset.queries if queries is None else queries)
    done = set(load_pools(builder.directory).query_ids()) if (builder.directory / "manifest.json").exists() else set()
    todo = [q for q in queries if q.id not in done]
    spec = spec or builder.reranker.name
    backend = backend or getattr(builder.reranker, "backend", "auto")
    cfg = builder.config
    if todo:  # all stored: no Ray to start
        with RayCluster(config):
            embeddings = EmbeddingCache(builder.root, LazyEncoder(cfg.encoder, cfg.encoder_backend).name)
            for texts in (builder.dataset.require_corpus().texts, [q.text for q in todo]):  # the single-process order
                embed_texts(embeddings, cfg.encoder, texts, config, cfg.encoder_backend, progress)
            cache = PairScoreCache(builder.root / "pair_scores.sqlite")
            try:
                units = plan_scoring(builder, todo, batch, cache)
                score_units(units, spec, cache, config, backend, progress, on_batch)
                scored = sum(u.pairs for u in units)
                if scored:
                    cache.record_build(f"pools {builder.dataset.name} {builder.key} (ray, {config.workers} workers)",
                                       identity_of(builder.reranker), 0, scored)
            finally:
                cache.close()
    return builder.build(queries, batch=batch)
