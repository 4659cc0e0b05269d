"""The bi-encoder cuts a 1 MB turn before tokenising it (issue 24, finding 11): once 1.44 s a turn; the vectors of
every text, long or short, are the ones the whole text gave, so cached embeddings stay valid."""

import numpy as np

from lethe_core.inference.backends import CHARS_PER_TOKEN
from lethe_core.retrieval.dense import SentenceTransformerEncoder

SHORT = ["Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
         "Melanie: Wow, that's cool, Caroline! What happened that was so awesome?", "ok"]
LONG = "Melanie: I painted a lake at sunrise last year and it still makes me calm. " * 14_000  # ~1 MB


def test_short_texts_give_the_vectors_they_always_gave(minilm):
    mine = minilm.encode(SHORT)
    theirs = minilm.model.encode(SHORT, batch_size=minilm.batch_size, normalize_embeddings=True, convert_to_numpy=True)
    assert np.array_equal(mine, theirs)


def test_a_1mb_turn_is_cut_before_tokenising_and_embeds_as_before(minilm, monkeypatch):
    seen = []
    real = minilm.model.encode

    def spy(texts, *args, **kwargs):
        seen.extend(len(t) for t in texts)
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(minilm.model, "encode", spy)
    mixed = [SHORT[0], LONG, SHORT[1]]
    vecs = minilm.encode(mixed)
    assert max(seen) <= minilm.max_length * CHARS_PER_TOKEN  # the model's tokenizer never saw the megabyte
    monkeypatch.setattr(minilm.model, "encode", real)
    whole = real(mixed, batch_size=minilm.batch_size, normalize_embeddings=True, convert_to_numpy=True)
    assert np.array_equal(vecs, whole)  # the same vectors, short rows included: cached embeddings stay valid


class SpyTokenizer:
    """The real tokenizer, recording the longest text it was handed."""

    def __init__(self, tokenizer):
        self.real, self.is_fast, self.longest = tokenizer, tokenizer.is_fast, 0

    def __call__(self, text, *args, **kwargs):
        texts = [text] if isinstance(text, str) else text
        self.longest = max([self.longest, *map(len, texts)])
        return self.real(text, *args, **kwargs)


class FakeOnnx:
    """Stands in for an ONNX session: records the token ids it is given and returns their sums."""

    def __init__(self, tokenizer):
        self.tokenizer = SpyTokenizer(tokenizer)
        self.meta = {"max_length": 256}
        self.feeds = []

    def __call__(self, feed):
        self.feeds.append(feed["input_ids"])
        return feed["input_ids"].sum(axis=1, keepdims=True).astype(np.float32)


def test_the_onnx_backends_cut_the_same_way(minilm):
    enc = object.__new__(SentenceTransformerEncoder)
    enc.backend, enc.batch_size, enc.dim = "onnx-int8", 8, 1
    enc.model = FakeOnnx(minilm.model.tokenizer)
    got = enc.encode([SHORT[0], LONG])
    whole = minilm.model.tokenizer([SHORT[0], LONG], truncation=True, max_length=256)["input_ids"]
    assert got[:, 0].tolist() == [float(sum(ids)) for ids in whole]
    assert max(f.shape[1] for f in enc.model.feeds) == 256
    assert enc.model.tokenizer.longest <= 256 * CHARS_PER_TOKEN
