"""`trained:<name>`: one cross-encoder per fold of conversations, each query routed to the fold model that
never saw its conversation (trained by `rerankers.training`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from lethe_core.datasets import Query
from lethe_core.inference import backend_tag, resolve_backend
from lethe_core.inference.identity import weights_digest
from lethe_core.rerankers.base import RerankerUnavailable
from lethe_core.rerankers.cross_encoder import CrossEncoderReranker
from lethe_core.util.paths import models_dir


class FoldedReranker:
    """`trained:<name>`: routes each query to the fold model that never saw its conversation.

    Its identity (what pool keys and the pair-score cache read) hashes every fold's weights digest,
    fusion weight and calibration with the inference backend: retraining under the same name, or
    scoring with another backend, can never reuse old pools or scores."""

    def __init__(self, name: str, root: Path | None = None, backend: str = "auto"):
        self.dir = Path(root or models_dir()) / name
        manifest_path = self.dir / "trained.json"
        if not manifest_path.exists():
            raise RerankerUnavailable(
                f"no trained reranker {name!r} at {self.dir}; train it with `lethe-lab reranker train DATASET --name {name}`"
            )
        self.manifest = json.loads(manifest_path.read_text())
        self.name = f"trained:{name}"
        self.backend = resolve_backend(backend)
        folds = [(f.get("weights") or weights_digest(self.dir / f["dir"]), f["fuse_w"], f["calibration"]) for f in self.manifest["folds"]]
        self.identity = f"{self.name}|{backend_tag(self.backend)}|" + hashlib.sha256(json.dumps(folds).encode()).hexdigest()[:16]
        self._models: dict[int, CrossEncoderReranker] = {}
        self._fold_of = {c: f["fold"] for f in self.manifest["folds"] for c in f["eval_conversations"]}
        self._trained_on = {c for f in self.manifest["folds"] for c in f["train_conversations"] + f["validation_conversations"]}

    def route(self, query: Query) -> CrossEncoderReranker:
        fold = self._fold_of.get(query.conversation_id)
        if fold is None:
            if query.conversation_id in self._trained_on:
                raise RerankerUnavailable(f"query {query.id}: its conversation is on a training side only")
            fold = 0  # a conversation no fold trained on: any fold is fair
        if fold not in self._models:
            info = self.manifest["folds"][fold]
            model = CrossEncoderReranker(str(self.dir / info["dir"]), f"{self.name}/fold-{fold}", local_files_only=True,
                                         backend=self.backend)
            model.fuse_w = float(info["fuse_w"])
            model.calibration = tuple(info["calibration"])
            self._models[fold] = model
        return self._models[fold]

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        raise TypeError("a fold-routed reranker scores through route(query); use PoolBuilder or route() first")
