import shutil
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dash_support import APP

from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.retrieval.pipeline import PipelineConfig


@pytest.fixture(scope="session")
def results_home(tmp_path_factory):
    """Small real results, built once for every dashboard test: LoCoMo's first two conversations, hashing
    encoder, lexical test reranker. LETHE_HOME is set only while building, so no other test sees it."""
    home = tmp_path_factory.mktemp("dash_home")
    mp = pytest.MonkeyPatch()
    mp.setenv("LETHE_HOME", str(home))
    try:
        data = DataSpec(dataset="locomo", conversations=2, reranker="test:lexical", pipeline=PipelineConfig(encoder="test:hash"),
                        progress=False)
        summary = RIFExperiment(data, seeds=2, ks=(10, 30), burn_in=1000).run()
    finally:
        mp.undo()
    return home, summary


@pytest.fixture
def copy_results(results_home, tmp_path):
    """A home holding a copy of the results only (no caches); returns (home, run folder) to break at will."""
    home, _ = results_home

    def make(name: str = "copy") -> tuple[Path, Path]:
        target = tmp_path / name
        shutil.copytree(home / "results", target / "results")
        return target, next((target / "results").glob("rif-*"))

    return make


@pytest.fixture
def app_at(monkeypatch):
    """Run the app (optionally switched to a page) over a LETHE_HOME; fails on any uncaught exception."""

    def run(home, page: str | None = None) -> AppTest:
        monkeypatch.setenv("LETHE_HOME", str(home))
        st.cache_data.clear()  # the run listing is cached for 30 s
        at = AppTest.from_file(APP, default_timeout=120)
        at.run()
        if page and page != "overview":
            at.switch_page(f"views/{page}.py").run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return run

