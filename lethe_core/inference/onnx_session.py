"""Running an exported model: an ONNX Runtime session on all cores (the export itself is onnx_export).

Kept apart from onnx_export so that scoring with ONNX Runtime never imports torch: the export is
loaded only on a model's first use, when its folder does not exist yet.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

PRECISION = {"onnx": "fp32", "onnx-int8": "int8"}


class OnnxModel:
    """An exported folder (see onnx_export): its tokenizer and an ORT session using every core, or
    OMP_NUM_THREADS of them when set (a Ray worker's share, docs/distributed.md)."""

    def __init__(self, folder: Path):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        self.folder = Path(folder)
        self.meta = json.loads((self.folder / "export.json").read_text())
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(os.environ.get("OMP_NUM_THREADS") or 0) or os.cpu_count() or 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(self.folder / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]

    def __call__(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run(None, {k: feed[k] for k in self.input_names})[0]


def onnx_model(weights: Path, kind: str, backend: str, max_length: int = 256) -> OnnxModel:
    """The session for `backend` ("onnx" or "onnx-int8") of the model in `weights`, exported on first use."""
    from lethe_core.inference.onnx_export import exported  # imports torch: only when a model is used

    return OnnxModel(exported(weights, kind, PRECISION[backend], max_length))
