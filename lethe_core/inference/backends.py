"""Running an exported model: length-sorted batches, padding, an ONNX Runtime session on all cores."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
PRECISION = {"onnx": "fp32", "onnx-int8": "int8"}


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Row indices grouped into batches of similar token length (longest first): less padding."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def padded(encoded: dict[str, list[list[int]]], rows: np.ndarray, names: Sequence[str] = INPUTS) -> dict[str, np.ndarray]:
    """int64 arrays of the chosen rows (the tokenizer's outputs among `names`), right-padded with zeros."""
    width = max(len(encoded["input_ids"][r]) for r in rows)
    out = {}
    for name in (n for n in names if n in encoded):
        arr = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            seq = encoded[name][r]
            arr[i, : len(seq)] = seq
        out[name] = arr
    return out


def run_sorted(encoded: dict[str, list[list[int]]], batch_size: int, forward: Callable[[dict[str, np.ndarray]], np.ndarray]) -> np.ndarray:
    """`forward` over length-sorted, padded batches; rows come back in the input order."""
    n = len(encoded["input_ids"])
    batches = length_sorted_batches([len(x) for x in encoded["input_ids"]], batch_size)
    parts = [(rows, np.asarray(forward(padded(encoded, rows)), dtype=np.float32)) for rows in batches]
    out = np.empty((n,) + parts[0][1].shape[1:], dtype=np.float32)
    for rows, values in parts:
        out[rows] = values
    return out


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
    from .onnx_export import exported

    return OnnxModel(exported(weights, kind, PRECISION[backend], max_length))
