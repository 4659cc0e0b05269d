"""Export a model folder to ONNX once, cached by its weights' digest; int8 by dynamic quantisation.

`torch.onnx.export` rather than optimum: it needs nothing beside the torch we already pin, and the
exported graph is the very module we run. The TorchScript exporter (`dynamo=False`) with eager
attention, not the dynamo one: its graph is the standard BERT pattern that ONNX Runtime fuses into
Attention / SkipLayerNormalization / BiasGelu kernels at load. Measured on 2 cores
(benchmarks/reranker_speed.py, README): the dynamo graph ran at 0.70x torch in fp32 and 1.39x in
int8, this one at 1.84x and 3.61x, with fp32 logits within 1e-5 of torch's.

Layout: `models_dir()/onnx/{weights digest}-{fp32|int8}-{EXPORT_FORMAT}/` holding `model.onnx`, the
tokenizer and `export.json`; the format tag is part of every onnx identity and cache key, so scores
of an older export are never read as this one's. A folder is built under a temporary name and
renamed into place, so it is either complete or absent; an fcntl lock per folder makes a second process wait and then reuse it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
import warnings
from pathlib import Path

import torch

from lethe_core.util.locking import exclusive
from lethe_core.util.paths import models_dir
from lethe_core.util.storage import disk_writes, sweep_stale_tmp
from lethe_core.inference.backends import INPUTS
from lethe_core.inference.identity import weights_digest

PRECISIONS = ("fp32", "int8")
KINDS = ("cross-encoder", "bi-encoder")
EXPORT_FORMAT = "ts2"  # TorchScript exporter, eager attention (see the module docstring)


def onnx_root() -> Path:
    return models_dir() / "onnx"


def exported(folder: Path, kind: str, precision: str, max_length: int = 256) -> Path:
    """The ONNX export of the model in `folder` (exporting it first if this is the first time).

    `kind` is "cross-encoder" (output: one logit per pair) or "bi-encoder" (output: the
    mean-pooled, L2-normalised sentence embedding, computed inside the graph).
    """
    if kind not in KINDS or precision not in PRECISIONS:
        raise ValueError(f"kind must be one of {KINDS} and precision one of {PRECISIONS}")
    folder = Path(folder)
    final = onnx_root() / f"{weights_digest(folder)}-{precision}-{EXPORT_FORMAT}"
    if (final / "export.json").exists():
        return final
    with exclusive(onnx_root() / f".{final.name}.lock"):
        if (final / "export.json").exists():  # another process finished it while we waited
            return final
        source = exported(folder, kind, "fp32", max_length) if precision == "int8" else None
        print(f"exporting {folder} to ONNX ({kind}, {precision}), once: {final}", file=sys.stderr, flush=True)
        sweep_stale_tmp(onnx_root(), f".tmp-{final.name}-*", older_than=0)  # a killed export of this model (we hold its lock)
        tmp = onnx_root() / f".tmp-{final.name}-{uuid.uuid4().hex}"
        try:
            with disk_writes(onnx_root(), cleanup=[tmp]):  # a full disk: one error naming the folder
                tmp.mkdir(parents=True)
                if source is None:
                    max_length = _export_fp32(folder, kind, tmp / "model.onnx", max_length)
                else:
                    _quantize(source / "model.onnx", tmp / "model.onnx")
                    max_length = json.loads((source / "export.json").read_text())["max_length"]
                _save_tokenizer(folder, tmp)
                meta = {"kind": kind, "precision": precision, "source": str(folder.resolve()), "max_length": max_length}
                (tmp / "export.json").write_text(json.dumps(meta, indent=1))
                os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _quantize(fp32: Path, out: Path) -> None:
    """Dynamic int8 weights (activations quantised at run time: no calibration data needed).

    Per-channel scales: measured on MiniLM they keep embeddings at cosine 0.992 (mean) to the fp32
    ones, against 0.955 per tensor.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(fp32, out, weight_type=QuantType.QInt8, per_channel=True,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def _save_tokenizer(folder: Path, out: Path) -> None:
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(str(folder)).save_pretrained(str(out))


def _export_fp32(folder: Path, kind: str, out: Path, max_length: int) -> int:
    """Trace the torch model to `out`; returns the max token length inference must truncate to."""
    if kind == "cross-encoder":
        from sentence_transformers import CrossEncoder

        model = CrossEncoder(str(folder), device="cpu", local_files_only=True, max_length=max_length)
        hf, tokenizer = model.model, model.tokenizer
        net = _Logits(hf)
    else:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        pooling = [m for m in model if type(m).__name__ == "Pooling"]
        if len(pooling) != 1 or pooling[0].pooling_mode != "mean":
            raise ValueError(f"{folder}: only mean-pooling bi-encoders can be exported to ONNX here")
        max_length = int(model.max_seq_length)
        hf, tokenizer = model[0].model, model.tokenizer
        net = _MeanPooled(hf)
    hf.config._attn_implementation = "eager"  # SDPA traces to a graph ORT cannot fuse; eager is the BERT pattern
    sample = tokenizer(["a short query", "another"], ["and a longer text to pair", "x"], return_tensors="pt", padding=True)
    args = tuple(sample[k] for k in INPUTS)
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracer notices
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net.eval(), args, str(out), dynamo=False, opset_version=17, input_names=list(INPUTS), output_names=["output"],
            dynamic_axes={k: {0: "batch", 1: "seq"} for k in INPUTS},
        )
    return max_length


class _Logits(torch.nn.Module):
    """A sequence classifier's first logit: the raw cross-encoder score."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.hf(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits[:, 0]


class _MeanPooled(torch.nn.Module):
    """sentence-transformers' mean pooling + Normalize, inside the graph."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, attention_mask, token_type_ids):
        hidden = self.hf(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)
