"""Heavy stages on a 2-worker local Ray: the same calls, vectors, scores and pools as the single-process path;
resume after a kill; a clear error for an unreachable --ray-address; Ray shut down afterwards."""

import time
from dataclasses import replace

import numpy as np
import pytest

from lethe_core.datasets import generate_synthetic
from lethe_core.pools.distributed import (RayCluster, RayConfig, RayUnavailable, build_pools_on_ray, embed_texts,
                                    plan_embedding, plan_scoring)
from lethe_core.inference.pair_cache import PairScoreCache
from lethe_core.pools.cache import PoolBuilder
from lethe_core.retrieval.dense import EmbeddingCache, HashingEncoder
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.rerankers import LexicalReranker

import ray  # noqa: E402  (pinned in requirements.txt: a missing install must fail, not skip)

# Own pytest run in `make test`, after the rest, on a quiet machine: under two busy cores Ray's agents can
# miss their fixed 15 s start-up window (docs/distributed.md).
pytestmark = pytest.mark.ray

CONFIG = PipelineConfig(encoder="test:hash")
TWO = RayConfig(workers=2)
KEY = ["query_id", "rrf_rank"]


class Killed(RuntimeError):
    pass


def kill_after(k):
    def on_batch(n):
        if n >= k:
            raise Killed(n)
    return on_batch


@pytest.fixture(scope="module")
def cluster():
    with RayCluster(TWO) as c:
        yield c
    assert not ray.is_initialized()  # the fixture's exit shut the local instance down


@pytest.fixture(scope="module")
def dataset():
    return generate_synthetic(1500, seed=5)


def texts_of(n):
    return [f"turn {i} about cats and {i % 7} dogs" for i in range(n)] + ["turn 3 about cats and 3 dogs"]


class RecordingEncoder(HashingEncoder):
    def __init__(self):
        super().__init__()
        self.calls = []

    def encode(self, texts, progress=False):
        self.calls.append(list(texts))
        return super().encode(texts)


class PairsReranker(LexicalReranker):
    """A lexical scorer with `score_pairs` (as cross-encoders have), recording each call; two folds by conversation."""

    def __init__(self, fold=None):
        self.fold, self.calls = fold, []
        if fold is not None:
            self.identity = f"pairs|fold-{fold}"

    def score_pairs(self, queries, texts):
        self.calls.append((list(queries), list(texts)))
        return np.concatenate([self.score(q, [t]) for q, t in zip(queries, texts)])


class TwoFolds(LexicalReranker):
    name, identity = "two-folds", "two-folds|v1"

    def __init__(self):
        self.models = [PairsReranker(0), PairsReranker(1)]

    def route(self, query):
        return self.models[int(query.conversation_id[-1], 36) % 2]


def test_embedding_plan_is_exactly_the_single_process_calls(tmp_path):
    texts = texts_of(700)
    single = RecordingEncoder()
    plan = plan_embedding(EmbeddingCache(tmp_path / "plan", single.name, shard_size=300), texts)
    EmbeddingCache(tmp_path / "single", single.name, shard_size=300).embed(single, texts)
    assert [call for shard in plan for call in shard] == single.calls
    assert [len(c) for c in single.calls] == [256, 44, 256, 44, 100]  # shards of 300 cut into steps of 256


def test_ray_embeddings_are_byte_identical_and_resume(cluster, tmp_path):
    texts = texts_of(700)
    expected = EmbeddingCache(tmp_path / "single", "test-hash-384", shard_size=300).embed(HashingEncoder(), texts)
    ray_cache = EmbeddingCache(tmp_path / "ray", "test-hash-384", shard_size=300)
    with pytest.raises(Killed):
        embed_texts(ray_cache, "test:hash", texts, TWO, progress=False, on_batch=kill_after(3))  # of 5 calls
    fresh = EmbeddingCache(tmp_path / "ray", "test-hash-384", shard_size=300)
    stored = len(set(texts)) - fresh.count_missing(texts)
    assert stored in (300, 400)  # whole shards (300, 300, 100) only; 3 returned calls always finish one
    assert not list(fresh.dir.glob(".tmp-*"))
    resumed = plan_embedding(fresh, texts)
    assert sum(len(c) for s in resumed for c in s) == len(set(texts)) - stored  # only the rest is encoded again
    got = embed_texts(fresh, "test:hash", texts, TWO, progress=False)
    assert got.tobytes() == expected.tobytes()
    assert fresh.count_missing(texts) == 0


def test_scoring_plan_is_exactly_the_single_process_calls(dataset, tmp_path):
    q0 = dataset.queries[0]
    # q0's text again inside its batch (scored twice in one call) and in the last batch (already cached there)
    queries = [q0, replace(q0, id="again-in-batch")] + dataset.queries[1:] + [replace(q0, id="again-later")]
    single = TwoFolds()
    PoolBuilder(dataset, single, CONFIG, root=tmp_path / "single", progress=False).build(queries, batch=4)
    planner = PoolBuilder(dataset, TwoFolds(), CONFIG, root=tmp_path / "plan", progress=False)
    cache = PairScoreCache(tmp_path / "plan" / "pairs.sqlite")
    units = plan_scoring(planner, queries, 4, cache)
    cache.close()
    for model in single.models:  # per fold model, the same score_pairs calls in the same order
        mine = [u for u in units if u.identity == model.identity]
        assert [([q for q, ts in u.groups for _ in ts], [t for _, ts in u.groups for t in ts]) for u in mine] == model.calls
        assert len(mine) > 1
    assert all(single.route(u.router).identity == u.identity for u in units)  # the worker routes the unit to its model


def test_ray_pools_are_byte_identical_and_a_killed_build_resumes(cluster, dataset, tmp_path):
    expected = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "single", progress=False).build(batch=4).frame
    builder = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "ray", progress=False)
    with pytest.raises(Killed):
        build_pools_on_ray(builder, TWO, batch=4, progress=False, on_batch=kill_after(2))
    cache = PairScoreCache(tmp_path / "ray" / "pair_scores.sqlite")
    stored = cache.stats()["pairs"]
    again = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "ray", progress=False)
    left = sum(u.pairs for u in plan_scoring(again, dataset.queries, 4, cache))
    total = sum(u.pairs for u in plan_scoring(PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path / "empty",
                                                          progress=False), dataset.queries, 4, PairScoreCache(tmp_path / "e.sqlite")))
    cache.close()
    assert 0 < stored < total and left == total - stored  # the two returned batches were kept, nothing else
    got = build_pools_on_ray(again, TWO, batch=4, progress=False).frame
    assert again.hits == len(got) and again.scored == 0  # the build itself read every logit from the cache
    assert got.sort_values(KEY).reset_index(drop=True).equals(expected.sort_values(KEY).reset_index(drop=True))


@pytest.mark.parametrize("address", ["127.0.0.1:1", "not-an-address"])
def test_bad_ray_address_is_a_clear_error(cluster, address):
    start = time.monotonic()
    with pytest.raises(RayUnavailable, match="--ray-address"):
        RayCluster(RayConfig(address=address)).__enter__()
    assert time.monotonic() - start < 10


def test_bad_ray_address_fails_even_with_everything_pooled(dataset, tmp_path):
    builder = PoolBuilder(dataset, LexicalReranker(), CONFIG, root=tmp_path, progress=False)
    builder.build()
    with pytest.raises(RayUnavailable, match="127.0.0.1:1"):
        build_pools_on_ray(builder, RayConfig(address="127.0.0.1:1"), progress=False)


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="workers"):
        RayConfig(workers=0)
