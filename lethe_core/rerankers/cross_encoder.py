"""A sentence-transformers CrossEncoder folder (`hub:<name>`, `local:<path>`, a fold of `trained:<name>`)
scored by one inference backend (`lethe_core.inference`: torch, onnx, onnx-int8, auto).

Its `.identity` adds the backend and the weights' digest to the name, so scores from different
backends or retrained weights are never mixed in a cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from lethe_core.inference import backend_tag, resolve_backend, weights_digest
from lethe_core.inference.backends import clip_long_texts, run_sorted
from lethe_core.inference.hub import local_snapshot, offline_reason
from lethe_core.rerankers.base import OFFLINE_ADVICE, RerankerUnavailable


def hub_folder(name: str, local_files_only: bool = False) -> Path:
    """The local folder of hub model `name`: a path as is, else the HF cache, else a download.

    Offline (HF_HUB_OFFLINE, or one 2 s connect fails) a model missing from the cache fails at
    once with advice instead of huggingface_hub's minute of retries.
    """
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
                from lethe_core.inference.onnx_session import onnx_model

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
        # Texts far longer than the model reads are cut before tokenising, to a prefix with the same first tokens
        # (inference.backends.clip_long_texts): a 1 MB turn no longer costs a second per pair; short texts are untouched.
        queries = clip_long_texts(queries, self.tokenizer, self.max_length)
        texts = clip_long_texts(texts, self.tokenizer, self.max_length)
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
