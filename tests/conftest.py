"""Shared fixtures. Tests never download anything: encoders are the bundled MiniLM or a hashing stand-in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lethe_core.util import timing
from lethe_core.util.paths import shared_data_dir

os.environ["HF_HUB_OFFLINE"] = "1"  # forced: no test may touch the network, whatever the shell says
os.environ["TRANSFORMERS_OFFLINE"] = "1"

LOCOMO = shared_data_dir() / "locomo" / "locomo10.json"
NFCORPUS = shared_data_dir() / "nfcorpus"
REFERENCE = shared_data_dir() / "lethe_per_query" / "longmemeval_rif_gap_per_query.json"


def pytest_collection_modifyitems(config, items):
    """`make test` distributes with `--dist loadgroup`: a file's tests stay together on one worker (they share module
    fixtures), except each notebook execution, which is its own unit; run as one file, the 18 kernels would keep one
    worker busy for minutes after the other has run out of work."""
    for item in items:
        if not item.get_closest_marker("xdist_group"):
            own = item.path.name == "test_notebooks.py" and item.originalname == "test_notebook_executes_with_small_parameters"
            item.add_marker(pytest.mark.xdist_group(item.nodeid if own else str(item.path)))


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Every test writes caches and results under a temporary LETHE_HOME, never into data/."""
    home = tmp_path_factory.mktemp("lethe_home")
    monkeypatch.setenv("LETHE_HOME", str(home))
    monkeypatch.delenv(timing.OUTER, raising=False)  # `make test`'s own timing chain is not a test's outer chain
    return home


@pytest.fixture(scope="session")
def locomo():
    from lethe_core.datasets import load_locomo

    if not LOCOMO.exists():
        pytest.fail(f"shared data missing: {LOCOMO} (CI lays ../shared beside the clone)")
    return load_locomo(LOCOMO)


@pytest.fixture(scope="session")
def minilm():
    from lethe_core.retrieval.dense import SentenceTransformerEncoder

    return SentenceTransformerEncoder("minilm")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
