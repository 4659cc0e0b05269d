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


class LetheHomeError(ValueError):
    """`LETHE_HOME` points at something lethe-lab cannot use; the message is one line."""


def home_dir() -> Path:
    """Root of everything lethe-lab writes (gitignored `data/` by default).

    Checked on every call: a `LETHE_HOME` that is a file would otherwise surface as a
    NotADirectoryError traceback deep inside whichever cache first writes there.
    """
    home = Path(os.environ.get("LETHE_HOME", REPO_ROOT / "data"))
    if home.exists() and not home.is_dir():
        raise LetheHomeError(f"LETHE_HOME={home} is not a directory; point LETHE_HOME at a folder (or unset it for {REPO_ROOT / 'data'})")
    return home


def writable_home() -> Path:
    """`home_dir()`, checked writable (or creatable) before a command starts work that writes there."""
    home = home_dir()
    probe = home
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        where = "" if probe == home else f" (its nearest existing parent {probe} is not a writable folder)"
        raise LetheHomeError(f"LETHE_HOME={home} is not writable{where}; point LETHE_HOME at a folder you can write")
    return home


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
