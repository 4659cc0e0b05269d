"""Where lethe-lab reads shared data and writes caches, results and models.

Everything is overridable by environment variables so that a user can point the
tool at their own copies (e.g. a full LongMemEval S download) without editing code.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    """`home_dir()`, proved writable before a command starts work that writes there: the folder is created
    (as the command would) and a file is created in it and removed.

    Permission bits alone are not enough: root passes `os.access` on `/proc`, where nothing can be created.
    """
    import tempfile

    home = home_dir()
    probe = home
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        where = "" if probe == home else f" (its nearest existing parent {probe} is not a writable folder)"
        raise LetheHomeError(f"LETHE_HOME={home} is not writable{where}; point LETHE_HOME at a folder you can write")
    step = "create it"
    try:
        home.mkdir(parents=True, exist_ok=True)
        step = "create a file in it"
        fd, name = tempfile.mkstemp(dir=home, prefix=".lethe-write-check-")
        os.close(fd)
        step = "remove a file from it"
        os.unlink(name)
    except OSError as exc:
        raise LetheHomeError(f"LETHE_HOME={home} is not writable (cannot {step}: {exc.strerror or exc}); "
                             "point LETHE_HOME at a folder you can write") from None
    return home


DEFAULT_MAX_INPUT_MB = 4096  # LoCoMo 2.8 MB, NFCorpus 6 MB, REALTALK 0.5 MB a file, LongMemEval S ~270 MB, M ~2.7 GB


def max_input_bytes() -> int:
    """The largest input file lethe-lab reads (datasets, `stats` files): `LETHE_MAX_INPUT_MB`, default 4,096 MB."""
    raw = os.environ.get("LETHE_MAX_INPUT_MB")
    if raw is None or not raw.strip():
        return DEFAULT_MAX_INPUT_MB * 1024 * 1024
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not mb > 0 or mb == float("inf"):
        raise ValueError(f"LETHE_MAX_INPUT_MB must be a positive number of megabytes, got {raw!r}")
    return int(mb * 1024 * 1024)


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
        "realtalk": shared_data_dir() / "realtalk",
        "nfcorpus": shared_data_dir() / "nfcorpus",
        "longmemeval": shared_data_dir() / "longmemeval" / "longmemeval_s_cleaned.json",
    }
    if name not in defaults:
        raise KeyError(name)
    return defaults[name]
