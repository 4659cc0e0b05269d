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
