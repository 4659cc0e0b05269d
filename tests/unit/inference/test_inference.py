"""lethe_core.inference: weight digests, backend names, length-sorted batching, the export cache and its lock."""

import multiprocessing
import time

import pytest

from lethe_core.inference import BACKENDS, DEFAULT_BACKEND, backend_tag, resolve_backend, weights_digest
from lethe_core.inference import onnx_export
from lethe_core.inference.backends import length_sorted_batches, run_sorted
from lethe_core.inference.onnx_export import EXPORT_FORMAT
from lethe_core.retrieval.dense import LazyEncoder, encoder_name
from lethe_core.retrieval.pipeline import PipelineConfig


def test_weights_digest_covers_weight_files_only(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "config.json").write_text("{}")
    first = weights_digest(tmp_path)
    assert len(first) == 16 and int(first, 16) >= 0
    (tmp_path / "config.json").write_text('{"changed": 1}')
    assert weights_digest(tmp_path) == first
    (tmp_path / "model.safetensors").write_bytes(b"retrained")
    assert weights_digest(tmp_path) != first
    with pytest.raises(FileNotFoundError, match="no weight files"):
        weights_digest(tmp_path / "missing")


def test_backend_names():
    assert resolve_backend("auto") == DEFAULT_BACKEND in BACKENDS
    assert [resolve_backend(b) for b in BACKENDS] == list(BACKENDS)
    with pytest.raises(ValueError, match="unknown inference backend 'tensorrt'"):
        resolve_backend("tensorrt")


def test_length_sorted_batches_pad_little_and_keep_input_order():
    lengths = [3, 9, 1, 7, 5, 2, 8]
    batches = length_sorted_batches(lengths, 3)
    assert [sorted(lengths[i] for i in b) for b in batches] == [[7, 8, 9], [2, 3, 5], [1]]
    encoded = {"input_ids": [[i + 1] * n for i, n in enumerate(lengths)], "attention_mask": [[1] * n for n in lengths]}
    widths = []

    def forward(feed):
        widths.append(feed["input_ids"].shape[1])
        assert set(feed) == {"input_ids", "attention_mask"}  # no token_type_ids: the tokenizer gave none
        return feed["input_ids"].max(axis=1) * 10 + feed["attention_mask"].sum(axis=1)

    out = run_sorted(encoded, 3, forward)
    assert widths == [9, 5, 1]
    assert out.tolist() == [(i + 1) * 10 + n for i, n in enumerate(lengths)]


def test_encoder_names_keep_backends_apart():
    assert encoder_name("minilm") == LazyEncoder("minilm").name == "all-MiniLM-L6-v2"
    assert LazyEncoder("minilm", "onnx-int8").name == f"all-MiniLM-L6-v2@onnx-int8.{EXPORT_FORMAT}"
    assert LazyEncoder("minilm", "auto").name == f"all-MiniLM-L6-v2@{backend_tag(DEFAULT_BACKEND)}"
    assert encoder_name("test:hash", "onnx") == "test-hash-384"


def test_pipeline_key_unchanged_for_the_torch_encoder():
    import hashlib
    import json
    from dataclasses import asdict

    old = asdict(PipelineConfig())
    for name in ("encoder_backend", "tokenizer", "scope"):  # what key() hashed before these fields existed (defaults are dropped)
        del old[name]
    assert PipelineConfig().key() == hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()[:12]
    assert PipelineConfig(encoder_backend="onnx").key() != PipelineConfig().key()


def _fake_export(folder, kind, out, max_length):
    """Stands in for the torch trace: slow enough that two processes would overlap without the lock."""
    with open(folder / "exports.log", "a") as log:
        log.write("export\n")
    time.sleep(1.0)
    out.write_bytes(b"onnx")
    return max_length


def _export_in_child(folder, home):
    import os

    os.environ["LETHE_HOME"] = str(home)
    onnx_export._export_fp32 = _fake_export
    onnx_export._save_tokenizer = lambda folder, out: None
    onnx_export.exported(folder, "cross-encoder", "fp32")


def test_export_runs_once_across_processes_and_is_atomic(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"w")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_export_in_child, args=(folder, tmp_path / "home")) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert (folder / "exports.log").read_text() == "export\n"
    root = tmp_path / "home" / "models" / "onnx"
    final = root / f"{weights_digest(folder)}-fp32-{onnx_export.EXPORT_FORMAT}"
    assert (final / "model.onnx").read_bytes() == b"onnx" and (final / "export.json").exists()
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]
