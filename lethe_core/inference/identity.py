"""What a model *is*, as a short string: the digest of its weight files.

Two folders with the same weights share exported ONNX models and cached scores; retraining into
the same folder changes the digest, so nothing stale is ever reused under the old name.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

WEIGHT_PATTERNS = ("*.safetensors", "*.bin")


def weights_digest(folder: Path) -> str:
    """sha256 over the sorted *.safetensors / *.bin files of `folder` (names and bytes), first 16 hex."""
    folder = Path(folder)
    files = sorted({p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern) if p.is_file()})
    if not files:
        raise FileNotFoundError(f"no weight files (*.safetensors, *.bin) in {folder}")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        with f.open("rb") as fh:  # hub snapshots are symlinks into blobs/: open() follows them
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]
