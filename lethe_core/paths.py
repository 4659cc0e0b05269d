"""Where lethe-lab reads shared data and writes caches, results and models.

Everything is overridable by environment variables so that a user can point the
tool at their own copies (e.g. a full LongMemEval S download) without editing code.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """Read-only data shipped beside the repository (`../shared/data`)."""
    return Path(os.environ.get("LETHE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def home_dir() -> Path:
    """Root of everything lethe-lab writes (gitignored `data/` by default)."""
    return Path(os.environ.get("LETHE_HOME", REPO_ROOT / "data"))


def cache_dir() -> Path:
    return home_dir() / "cache"


def results_dir() -> Path:
    return home_dir() / "results"


def models_dir() -> Path:
    return home_dir() / "models"


def default_dataset_path(name: str) -> Path:
    """Default location of a named dataset; `LETHE_<NAME>_PATH` overrides it."""
    env = os.environ.get(f"LETHE_{name.upper()}_PATH")
    if env:
        return Path(env)
    defaults = {
        "locomo": shared_data_dir() / "locomo" / "locomo10.json",
        "nfcorpus": shared_data_dir() / "nfcorpus",
        "longmemeval": shared_data_dir() / "longmemeval" / "longmemeval_s_cleaned.json",
    }
    if name not in defaults:
        raise KeyError(name)
    return defaults[name]
