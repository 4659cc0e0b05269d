"""Cached candidate pools: each query's first-stage union with every member's reranker logit, built once per
(dataset, pipeline, reranker identity) and read by every experiment (`cache`); the same build spread over Ray
(`distributed`, docs/distributed.md), call for call, so both fill the same caches."""

from lethe_core.pools.cache import PackedPools, PoolBuilder, Pools, build_pools

__all__ = ["PackedPools", "PoolBuilder", "Pools", "build_pools"]
