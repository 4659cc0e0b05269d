"""Second-stage rerankers behind one interface: `score(query, texts) -> raw logits`.

Backends are chosen by a name string everywhere (`--reranker`):
- `hub:<name>`   sentence-transformers CrossEncoder from the Hugging Face hub or its local cache
                 (default name cross-encoder/ms-marco-MiniLM-L-6-v2);
- `local:<path>` any CrossEncoder folder on disk;
- `trained:<name>` cross-encoders trained here per fold of conversations (`lethe-lab reranker train`);
- `test:lexical` a tiny deterministic lexical scorer for fast tests (not a model).
Every pool and result file records the reranker's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from ..text import tokenize

DEFAULT_HUB_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"


class Reranker(Protocol):
    name: str

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Raw logits (no sigmoid), one per text; higher is more relevant."""


class RerankerUnavailable(RuntimeError):
    pass


class CrossEncoderReranker:
    def __init__(self, location: str, name: str, local_files_only: bool = False, batch_size: int = 32, max_length: int = 256):
        from sentence_transformers import CrossEncoder

        try:
            self.model = CrossEncoder(location, device="cpu", local_files_only=local_files_only, max_length=max_length)
        except Exception as exc:  # network, missing files, bad config: report all the same way
            raise RerankerUnavailable(
                f"cannot load cross-encoder {location!r}: {type(exc).__name__}: {str(exc)[:300]}\n"
                "Offline, the MS MARCO weights cannot be downloaded. Use --reranker local:<folder> for a "
                "CrossEncoder saved on disk, or a reranker trained here (see `lethe-lab reranker --help`), "
                "or test:lexical for a quick smoke run."
            ) from exc
        self.name = name
        self.batch_size = batch_size

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        import torch

        if not texts:
            return np.zeros(0, dtype=np.float32)
        logits = self.model.predict(
            [(query, t) for t in texts], batch_size=self.batch_size, activation_fn=torch.nn.Identity(), show_progress_bar=False
        )
        return np.asarray(logits, dtype=np.float32).reshape(len(texts))


class LexicalReranker:
    """Deterministic test reranker: logit = 8 * (share of distinct query tokens in the text) - 4.

    Fast and reproducible, so tests can exercise the whole pipeline; it is not a cross-encoder
    and its results must never be reported as one.
    """

    name = "test:lexical"

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        q = set(tokenize(query))
        if not q:
            return np.full(len(texts), -4.0, dtype=np.float32)
        return np.array([8.0 * len(q & set(tokenize(t))) / len(q) - 4.0 for t in texts], dtype=np.float32)


def route(reranker: Reranker, query) -> Reranker:
    """The scorer for one query: fold-aware rerankers pick the model that never saw its conversation."""
    pick = getattr(reranker, "route", None)
    return pick(query) if pick else reranker


def load_reranker(spec: str) -> Reranker:
    kind, _, arg = spec.partition(":")
    if spec == "test:lexical":
        return LexicalReranker()
    if kind == "hub":
        name = arg or DEFAULT_HUB_MODEL
        return CrossEncoderReranker(name, f"hub:{name}")
    if kind == "local":
        path = Path(arg).expanduser()
        if not path.is_dir():
            raise RerankerUnavailable(f"local reranker folder not found: {path}")
        return CrossEncoderReranker(str(path), f"local:{path.resolve()}", local_files_only=True)
    if kind == "trained":
        from ..training import FoldedReranker

        return FoldedReranker(arg)
    raise ValueError(f"unknown reranker {spec!r}: use hub:<name>, local:<path>, trained:<name> or test:lexical")


DEFAULT_TRAINED = "minilm-2fold"


def resolve_reranker(spec: str) -> Reranker:
    """`auto`: the paper's MS MARCO cross-encoder if it is already on disk (HF cache), else the
    fold-trained reranker `trained:minilm-2fold` if it was trained here (`make reranker`), else the
    lexical test reranker with a warning. Any other spec is loaded as named."""
    if spec != "auto":
        return load_reranker(spec)
    try:
        return CrossEncoderReranker(DEFAULT_HUB_MODEL, f"hub:{DEFAULT_HUB_MODEL}", local_files_only=True)
    except RerankerUnavailable:
        pass
    from ..paths import models_dir

    if (models_dir() / DEFAULT_TRAINED / "trained.json").exists():
        return load_reranker(f"trained:{DEFAULT_TRAINED}")
    import sys

    print(
        f"warning: no reranker on disk ({DEFAULT_HUB_MODEL} is not in the Hugging Face cache and "
        f"trained:{DEFAULT_TRAINED} has not been trained: `make reranker`); falling back to test:lexical, "
        "a lexical stand-in, NOT a cross-encoder. Every result names it.",
        file=sys.stderr,
    )
    return LexicalReranker()
