"""Model inference backends shared by the cross-encoder and the bi-encoder.

`torch` is sentence-transformers' own model; `onnx` is the same weights exported to ONNX and run
by ONNX Runtime; `onnx-int8` adds dynamic int8 quantisation of the weights. `auto` is the fastest
backend that passes the parity tests (tests/parity/test_onnx_parity.py), measured by
benchmarks/reranker_speed.py.
"""

from __future__ import annotations

from lethe_core.inference.identity import weights_digest

BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_BACKEND = "onnx-int8"


def backend_tag(backend: str) -> str:
    """The backend as cache keys and identities name it: onnx backends carry the export format, so a
    score or a vector from an older export is never read as the current export's."""
    from lethe_core.inference.onnx_export import EXPORT_FORMAT

    return backend if backend == "torch" else f"{backend}.{EXPORT_FORMAT}"


def resolve_backend(name: str) -> str:
    """A backend name, with `auto` replaced by DEFAULT_BACKEND; anything unknown is a ValueError."""
    if name == "auto":
        return DEFAULT_BACKEND
    if name not in BACKENDS:
        raise ValueError(f"unknown inference backend {name!r}: use one of {', '.join(BACKENDS)} or auto")
    return name


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "backend_tag", "resolve_backend", "weights_digest"]
