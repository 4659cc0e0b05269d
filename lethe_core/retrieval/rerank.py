"""Second-stage rerankers behind one interface: `score(query, texts) -> raw logits`.

Backends are chosen by a name string everywhere (`--reranker`):
- `hub:<name>`   sentence-transformers CrossEncoder from the Hugging Face hub or its local cache
                 (default name cross-encoder/ms-marco-MiniLM-L-6-v2);
- `local:<path>` any CrossEncoder folder on disk;
- `trained:<name>` cross-encoders trained here per fold of conversations (`lethe-lab reranker train`);
- `test:lexical` a tiny deterministic lexical scorer for fast tests (not a model).
Cross-encoders run on an inference backend (`lethe_core.inference`: torch, onnx, onnx-int8, auto).
Every pool and result file records the reranker's name; `.identity` adds the backend and the
weights' digest, so scores from different backends or retrained weights are never mixed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from ..text import tokenize

DEFAULT_HUB_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"


class Reranker(Protocol):
    name: str
    identity: str  # name | backend | weights digest: what a cached score was computed by

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Raw logits (no sigmoid), one per text; higher is more relevant."""


class RerankerUnavailable(RuntimeError):
    pass


OFFLINE_ADVICE = (
    "Offline, the MS MARCO weights cannot be downloaded. Use --reranker local:<folder> for a "
    "CrossEncoder saved on disk, or a reranker trained here (see `lethe-lab reranker --help`), "
    "or test:lexical for a quick smoke run."
)


def hub_folder(name: str, local_files_only: bool = False) -> Path:
    """The local folder of hub model `name`: a path as is, else the HF cache, else a download.

    Offline (HF_HUB_OFFLINE, or one 2 s connect fails) a model missing from the cache fails at
    once with advice instead of huggingface_hub's minute of retries.
    """
    from ..inference.hub import local_snapshot, offline_reason

    folder = local_snapshot(name)
    if folder is None:
        why = "not downloading (local files only)" if local_files_only else offline_reason()
        if why:
            raise RerankerUnavailable(f"cross-encoder {name!r} is not in the Hugging Face cache and {why}.\n{OFFLINE_ADVICE}")
        from sentence_transformers import CrossEncoder

        try:
            CrossEncoder(name, device="cpu")  # downloads just the files a CrossEncoder needs
        except Exception as exc:
            raise RerankerUnavailable(f"cannot download cross-encoder {name!r}: {type(exc).__name__}: {str(exc)[:300]}") from exc
        folder = local_snapshot(name)
        if folder is None:
            raise RerankerUnavailable(f"downloaded {name!r} but cannot find it in the Hugging Face cache")
    return folder


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder folder scored by one backend (torch, onnx, onnx-int8 or auto).

    Every backend tokenises the pairs once, sorts them by token length and pads each batch only
    to its longest pair; logits come back in the input order.
    """

    def __init__(self, location: str, name: str, local_files_only: bool = False, batch_size: int = 32,
                 max_length: int = 256, backend: str = "torch"):
        from ..inference import backend_tag, resolve_backend, weights_digest

        self.backend = resolve_backend(backend)
        self.folder = hub_folder(location, local_files_only)
        self.name = name
        self.batch_size = batch_size
        self.max_length = max_length
        try:
            self.identity = f"{name}|{backend_tag(self.backend)}|{weights_digest(self.folder)}"
            if self.backend == "torch":
                from sentence_transformers import CrossEncoder

                self.model = CrossEncoder(str(self.folder), device="cpu", local_files_only=True, max_length=max_length)
                self.tokenizer = self.model.tokenizer
            else:
                from ..inference.backends import onnx_model

                self.model = onnx_model(self.folder, "cross-encoder", self.backend, max_length)
                self.tokenizer = self.model.tokenizer
        except Exception as exc:  # missing files, bad config, failed export: report all the same way
            raise RerankerUnavailable(
                f"cannot load cross-encoder {location!r} ({self.backend}): {type(exc).__name__}: {str(exc)[:300]}\n{OFFLINE_ADVICE}"
            ) from exc

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        return self.score_pairs([query] * len(texts), texts)

    def score_pairs(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Logits of (query, text) pairs of any mix of queries, in input order: pool builds score many queries'
        missing pairs in one length-sorted run (fuller batches, less padding)."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        from ..inference.backends import run_sorted

        encoded = self.tokenizer(list(queries), list(texts), truncation="longest_first", max_length=self.max_length)
        return run_sorted(encoded, self.batch_size, self._forward).reshape(len(texts))

    def _forward(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        if self.backend != "torch":
            return self.model(feed)
        import torch

        with torch.inference_mode():
            logits = self.model.model(**{k: torch.from_numpy(v) for k, v in feed.items()}).logits
        return logits[:, 0].numpy()

    def score_via_predict(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """sentence-transformers' `predict` (torch only): how scores were computed before the backends;
        the speed benchmark's baseline."""
        import torch

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
    identity = "test:lexical|v1"

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        q = set(tokenize(query))
        if not q:
            return np.full(len(texts), -4.0, dtype=np.float32)
        return np.array([8.0 * len(q & set(tokenize(t))) / len(q) - 4.0 for t in texts], dtype=np.float32)


def route(reranker: Reranker, query) -> Reranker:
    """The scorer for one query: fold-aware rerankers pick the model that never saw its conversation."""
    pick = getattr(reranker, "route", None)
    return pick(query) if pick else reranker


def load_reranker(spec: str, backend: str = "auto") -> Reranker:
    """A reranker by name; `backend` (torch, onnx, onnx-int8, auto) applies to cross-encoders."""
    kind, _, arg = spec.partition(":")
    if spec == "test:lexical":
        return LexicalReranker()
    if kind == "hub":
        name = arg or DEFAULT_HUB_MODEL
        return CrossEncoderReranker(name, f"hub:{name}", backend=backend)
    if kind == "local":
        path = Path(arg).expanduser()
        if not path.is_dir():
            raise RerankerUnavailable(f"local reranker folder not found: {path}")
        return CrossEncoderReranker(str(path), f"local:{path.resolve()}", local_files_only=True, backend=backend)
    if kind == "trained":
        from ..training import FoldedReranker

        return FoldedReranker(arg, backend=backend)
    raise ValueError(f"unknown reranker {spec!r}: use hub:<name>, local:<path>, trained:<name> or test:lexical")


def resolve_reranker(spec: str, backend: str = "auto") -> Reranker:
    """`auto`, in order: the paper's MS MARCO cross-encoder (from the HF cache, or downloaded when the hub is
    reachable; offline that check fails in seconds), else the full fold recipe `trained:minilm-2fold`
    (`make reranker`), else the first-run fold recipe (trained by `lethe-lab reranker ensure`, which
    `make run` calls), else a clear error. Never the lexical test reranker. Any other spec loads as named."""
    if spec != "auto":
        return load_reranker(spec, backend)
    try:
        return CrossEncoderReranker(DEFAULT_HUB_MODEL, f"hub:{DEFAULT_HUB_MODEL}", backend=backend)
    except RerankerUnavailable:
        pass
    from ..paths import models_dir
    from ..training import auto_candidates

    names = auto_candidates()
    for name in names:
        if (models_dir() / name / "trained.json").exists():
            return load_reranker(f"trained:{name}", backend)
    raise RerankerUnavailable(
        f"no reranker for --reranker auto: {DEFAULT_HUB_MODEL} is neither cached nor downloadable here, and none of "
        f"{', '.join('trained:' + n for n in names)} is trained under {models_dir()}. Run `lethe-lab reranker ensure` "
        "(trains the first-run recipe), or name another with --reranker."
    )
